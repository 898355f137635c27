//! No file of the repository names a path outside it, so a clone runs and reads on its own.
//!
//! Every file git knows (tracked, or new and not ignored) is scanned for relative references: a
//! path that starts with `../`, or `/../` as appended to a directory such as `CARGO_MANIFEST_DIR`.
//! Such a reference is fine when, read from a folder it may be relative to, it stays inside the
//! repository and names a file or folder that exists. Those folders are the file's own (Markdown
//! links, `#[path]`, `include_str!`) and its package's, the nearest folder up holding `Cargo.toml`
//! or `go.mod` (`CARGO_MANIFEST_DIR`, cargo's and go's working directory). So a reference to a
//! `shared` folder beside the checkout fails from anywhere (none exists inside), and one that climbs
//! two levels from a crate's root fails as leaving the repository.
//! Absolute paths are not checked: the repository names many on purpose (`/tmp/kc`, `/proc`, URL paths).

use ocm_score_tests::support::TempDir;
use std::path::{Component, Path, PathBuf};
use std::process::Command;

/// Characters a path token is made of; anything else (quotes, backticks, spaces, brackets) ends it.
fn is_path_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | '+' | '~' | '@')
}

/// The relative references in `text`, with their 1-based line numbers.
fn references(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        for token in line.split(|c: char| !is_path_char(c)) {
            let rest = token.strip_prefix('/').unwrap_or(token);
            if !rest.starts_with("../") {
                continue;
            }
            // A sentence may end right after a path: `see ../README.md.`
            let rest = match rest.strip_suffix('.') {
                Some(trimmed) if !rest.ends_with("..") => trimmed,
                _ => rest,
            };
            out.push((n + 1, rest.to_string()));
        }
    }
    out
}

/// `base/reference` with `.` and `..` resolved without touching the file system, both relative to
/// the repository root; `None` when it climbs above the root.
fn resolve(base: &Path, reference: &str) -> Option<PathBuf> {
    let joined = base.join(reference);
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for component in joined.components() {
        match component {
            Component::Normal(part) => parts.push(part),
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::CurDir => {}
            // `reference` starts with `..`, so neither can appear; refuse rather than guess.
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.iter().collect())
}

/// The folders a reference in `file` (relative to `root`) may be read from: its own folder and
/// its package's.
fn bases(root: &Path, file: &Path) -> Vec<PathBuf> {
    let own = file.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut package = own.clone();
    loop {
        let dir = root.join(&package);
        if dir.join("Cargo.toml").is_file() || dir.join("go.mod").is_file() {
            break;
        }
        if !package.pop() {
            break;
        }
    }
    if package == own {
        vec![own]
    } else {
        vec![own, package]
    }
}

/// Every reference in `text` (the contents of `file`, relative to `root`) that no base keeps inside
/// the repository and pointing at something that exists, as `file:line: reference`.
fn escaping(root: &Path, file: &Path, text: &str) -> Vec<String> {
    let bases = bases(root, file);
    references(text)
        .into_iter()
        .filter(|(_, reference)| {
            !bases
                .iter()
                .any(|base| resolve(base, reference).is_some_and(|target| root.join(target).exists()))
        })
        .map(|(line, reference)| format!("{}:{line}: {reference}", file.display()))
        .collect()
}

fn repository_root() -> PathBuf {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    here.parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| here.to_path_buf())
}

/// Tracked files plus new ones not ignored, relative to `root` (`target/` is ignored).
fn repository_files(root: &Path) -> Vec<PathBuf> {
    let out = Command::new("git")
        .args(["ls-files", "-z", "--cached", "--others", "--exclude-standard"])
        .current_dir(root)
        .output()
        .unwrap_or_else(|e| panic!("running git ls-files in {}: {e}", root.display()));
    assert!(
        out.status.success(),
        "git ls-files in {}: {}",
        root.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
        .split(|b| *b == 0)
        .filter(|name| !name.is_empty())
        .map(|name| PathBuf::from(String::from_utf8_lossy(name).into_owned()))
        .collect()
}

#[test]
fn no_file_names_a_path_outside_the_repository() {
    let root = repository_root();
    let files = repository_files(&root);
    assert!(
        files.len() > 100,
        "only {} files found in {}",
        files.len(),
        root.display()
    );
    let mut scanned = 0;
    let mut found = Vec::new();
    for file in &files {
        // Deleted in the working tree but still tracked, or binary: nothing to read as text.
        let Ok(text) = std::fs::read_to_string(root.join(file)) else {
            continue;
        };
        scanned += 1;
        found.extend(escaping(&root, file, &text));
    }
    println!("{scanned} text files scanned");
    assert!(
        found.is_empty(),
        "references that leave the repository or name nothing in it:\n{}",
        found.join("\n")
    );
}

/// The rule on a made-up tree: the repository root with a crate `krate/` (holding `Cargo.toml`),
/// its `src/lib.rs`, and `docs/guide.md`.
#[test]
fn references_are_read_from_the_file_and_its_package() {
    let tree = TempDir::new("no-outside-paths");
    let root = tree.path();
    for dir in ["krate/src", "docs", "examples"] {
        std::fs::create_dir_all(root.join(dir)).expect("create the made-up tree");
    }
    for file in [
        "krate/Cargo.toml",
        "krate/src/lib.rs",
        "docs/guide.md",
        "README.md",
    ] {
        std::fs::write(root.join(file), "").expect("write the made-up tree");
    }
    // Built from pieces so this file holds none of the references it tests.
    let up = "..";
    let lib = Path::new("krate/src/lib.rs");
    let guide = Path::new("docs/guide.md");
    let check = |file: &Path, text: String| escaping(root, file, &text);

    // Inside, from the package (CARGO_MANIFEST_DIR) or from the file's folder.
    assert!(check(lib, format!("env!(\"CARGO_MANIFEST_DIR\"), \"/{up}/examples\"")).is_empty());
    assert!(check(lib, format!("#[path = \"{up}/Cargo.toml\"]")).is_empty());
    assert!(check(guide, format!("see [the readme]({up}/README.md).")).is_empty());
    // Beside the checkout, from every base.
    assert_eq!(
        check(guide, format!("needs `{up}/shared` beside the checkout")),
        [format!("docs/guide.md:1: {up}/shared")]
    );
    assert_eq!(check(lib, format!("\"/{up}/{up}/shared/design\"")).len(), 1);
    // Inside the repository, but nothing is there.
    assert_eq!(check(lib, format!("see `{up}/shared/design/notes.md`")).len(), 1);
    // Not a reference: `..` in the middle of a URL or a path.
    assert!(check(guide, format!("https://a/b/{up}/c and docs/{up}/nothing")).is_empty());
}
