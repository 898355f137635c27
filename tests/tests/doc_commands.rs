//! The commands the documentation shows cannot drift from the binaries they run.
//!
//! Every Markdown file of the repository is read: the lines of its ```sh, ```bash, ```shell and
//! ```console blocks (in a console block, the lines after a `$ ` prompt), and its inline code spans
//! that start like a command. Each command that runs one of our binaries (`cargo run -p <pkg>
//! [--release] [--bin X] -- ARGS`; `ocm-score-agent`, `ocm-score-hub`, `control-plane`,
//! `kube-double` by name or path; `kubectl ocm-score`, which runs our `kubectl-ocm_score`) is
//! checked against the built binary: its subcommands must exist, and every flag must appear in the
//! `--help` of that subcommand. Commands that need no cluster (`ocm-score-agent once --source
//! host`, `ocm-score-hub simulate` on files of the repository) are run for real. A few more
//! references are checked on the way: `cargo run/test/bench -p` names a package of the workspace
//! and an existing `--bin`, `--test` or `--bench` (and `cargo run -p` without `--bin` a package
//! cargo can run: one binary, or a `default-run`); `bash <script>` and `kubectl ... -k <dir>` name
//! files that exist; `helm ... charts/<chart> --set key=...` names a chart that exists and keys its
//! values.yaml has.
//!
//! A failure names the file and line, the command, and what does not match.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use ocm_score_control_plane::addon::{workspace_binary, workspace_dir};

/// Our binaries, as a doc may name them directly (on `PATH`, or a path ending in the name).
const OUR_BINARIES: [&str; 5] = [
    "ocm-score-agent",
    "ocm-score-hub",
    "control-plane",
    "kube-double",
    "kubectl-ocm_score",
];

/// Fenced blocks whose lines are shell commands.
const SHELL_BLOCKS: [&str; 3] = ["sh", "bash", "shell"];

/// The subcommand a binary runs when none is given: `ocm-score-agent --source host` runs `run`.
fn default_subcommand(binary: &str) -> Option<&'static str> {
    (binary == "ocm-score-agent").then_some("run")
}

/// A piece of a Markdown file that may hold commands.
#[derive(Debug, PartialEq)]
struct Snippet {
    /// 1-based line of the snippet's first line.
    line: usize,
    text: String,
}

/// The shell snippets of a Markdown text: each command line of a shell block (continuations joined),
/// each `$ ` line of a console block, and each inline code span that starts like one of our commands.
fn snippets(markdown: &str) -> Vec<Snippet> {
    let mut out = Vec::new();
    let mut fence: Option<(String, String)> = None; // (the fence, the block's language)
    let mut pending: Option<Snippet> = None; // a command line continued with `\`
    let mut span: Option<Snippet> = None; // an inline code span not closed yet
    for (index, line) in markdown.lines().enumerate() {
        let number = index + 1;
        let trimmed = line.trim_start();
        if let Some((marker, language)) = &fence {
            if trimmed.starts_with(marker.as_str())
                && trimmed.trim_start_matches(['`', '~']).trim().is_empty()
            {
                if let Some(p) = pending.take() {
                    out.push(p);
                }
                fence = None;
                continue;
            }
            let command = if language == "console" {
                match (&pending, trimmed.strip_prefix("$ ")) {
                    (Some(_), _) => Some(trimmed),
                    (None, Some(command)) => Some(command),
                    (None, None) => None,
                }
            } else if SHELL_BLOCKS.contains(&language.as_str()) {
                Some(trimmed)
            } else {
                None
            };
            let Some(command) = command else { continue };
            let (text, continued) = match command.strip_suffix('\\') {
                Some(head) => (head, true),
                None => (command, false),
            };
            let snippet = match pending.take() {
                Some(mut p) => {
                    p.text.push(' ');
                    p.text.push_str(text);
                    p
                }
                None => Snippet {
                    line: number,
                    text: text.to_owned(),
                },
            };
            if continued {
                pending = Some(snippet);
            } else {
                out.push(snippet);
            }
            continue;
        }
        if trimmed.starts_with("```") || trimmed.starts_with("~~~") {
            let marker: String = trimmed.chars().take_while(|&c| c == '`' || c == '~').collect();
            let language = trimmed[marker.len()..]
                .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
                .next()
                .unwrap_or_default()
                .to_lowercase();
            fence = Some((marker, language));
            continue;
        }
        // Inline code spans; one may run on to the next line of its paragraph.
        if trimmed.is_empty() {
            span = None;
            continue;
        }
        for (i, part) in line.split('`').enumerate() {
            if i > 0 {
                span = match span.take() {
                    Some(open) => {
                        if looks_like_our_command(&open.text) {
                            out.push(open);
                        }
                        None
                    }
                    None => Some(Snippet {
                        line: number,
                        text: String::new(),
                    }),
                };
            }
            if let Some(open) = &mut span {
                if !open.text.is_empty() || i == 0 {
                    open.text.push(' ');
                }
                open.text.push_str(part);
            }
        }
    }
    out
}

/// Whether an inline code span starts like a command this test checks.
fn looks_like_our_command(span: &str) -> bool {
    let words = shell_words(span);
    let Some(command) = words.first() else {
        return false;
    };
    let command = skip_prefixes(command);
    match command.first().map(String::as_str) {
        Some("cargo") => matches!(command.get(1).map(String::as_str), Some("run" | "test" | "bench")),
        Some("kubectl") => command.get(1).is_some_and(|w| w == "ocm-score"),
        Some(program) => our_binary(program).is_some(),
        None => false,
    }
}

/// The simple commands of a shell line, each as its words: split at `|`, `||`, `&&`, `;` and `&`,
/// quotes and backslashes resolved, comments and redirections (`>`, `>>`, `<`, `2>`) dropped.
fn shell_words(line: &str) -> Vec<Vec<String>> {
    let mut commands = vec![Vec::new()];
    let mut word = String::new();
    let mut in_word = false;
    let mut skip_next_word = false; // the target of a redirection
    let mut chars = line.chars().peekable();
    let finish = |word: &mut String, in_word: &mut bool, skip: &mut bool, commands: &mut Vec<Vec<String>>| {
        if *in_word {
            if *skip {
                *skip = false;
            } else if let Some(current) = commands.last_mut() {
                current.push(std::mem::take(word));
            }
        }
        word.clear();
        *in_word = false;
    };
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                for q in chars.by_ref() {
                    if q == '\'' {
                        break;
                    }
                    word.push(q);
                }
            }
            '"' => {
                in_word = true;
                while let Some(q) = chars.next() {
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(escaped) = chars.next() {
                                word.push(escaped);
                            }
                        }
                        _ => word.push(q),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(escaped) = chars.next() {
                    word.push(escaped);
                }
            }
            '#' if !in_word => break,
            '|' | '&' | ';' => {
                finish(&mut word, &mut in_word, &mut skip_next_word, &mut commands);
                if chars.peek() == Some(&c) {
                    chars.next();
                }
                commands.push(Vec::new());
            }
            '>' | '<' => {
                // `2>` is one operator: the digit was read as a word of its own.
                if word.chars().all(|d| d.is_ascii_digit()) {
                    word.clear();
                    in_word = false;
                }
                finish(&mut word, &mut in_word, &mut skip_next_word, &mut commands);
                if chars.peek() == Some(&'>') {
                    chars.next();
                }
                if chars.peek() == Some(&'&') {
                    // `2>&1`: the target is a descriptor, read as the next word and dropped.
                    chars.next();
                }
                skip_next_word = true;
            }
            c if c.is_whitespace() => finish(&mut word, &mut in_word, &mut skip_next_word, &mut commands),
            c => {
                in_word = true;
                word.push(c);
            }
        }
    }
    finish(&mut word, &mut in_word, &mut skip_next_word, &mut commands);
    commands.retain(|c| !c.is_empty());
    commands
}

/// The command without what runs it: `VAR=value` assignments, `time`, `sudo`, `env`.
fn skip_prefixes(words: &[String]) -> &[String] {
    let mut rest = words;
    while let Some(first) = rest.first() {
        let assignment = first.split_once('=').is_some_and(|(name, _)| {
            !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        });
        if assignment || matches!(first.as_str(), "time" | "sudo" | "-E" | "env") {
            rest = &rest[1..];
        } else {
            break;
        }
    }
    rest
}

/// Which of our binaries `program` names: `ocm-score-agent`, `./target/debug/ocm-score-agent`, ...
fn our_binary(program: &str) -> Option<&'static str> {
    let name = program.rsplit('/').next().unwrap_or(program);
    OUR_BINARIES.into_iter().find(|b| *b == name)
}

/// A command of ours: the binary and the arguments it gets.
#[derive(Debug, PartialEq)]
struct Invocation {
    binary: String,
    args: Vec<String>,
}

/// The packages of the workspace: name and directory.
fn workspace_packages(root: &Path) -> Vec<(String, PathBuf)> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).expect("workspace Cargo.toml");
    toml_lite::members(&manifest)
        .into_iter()
        .filter_map(|member| {
            let dir = root.join(&member);
            let text = std::fs::read_to_string(dir.join("Cargo.toml")).ok()?;
            let name = toml_lite::package_name(&text)?;
            Some((name, dir))
        })
        .collect()
}

/// Just enough TOML for the workspace's own manifests (no dependency for it).
mod toml_lite {
    /// `members = ["a", "b"]` of `[workspace]`.
    pub fn members(manifest: &str) -> Vec<String> {
        let Some(start) = manifest.find("members") else {
            return Vec::new();
        };
        let rest = &manifest[start..];
        let (Some(open), Some(close)) = (rest.find('['), rest.find(']')) else {
            return Vec::new();
        };
        rest[open + 1..close]
            .split(',')
            .map(|m| m.trim().trim_matches('"').to_owned())
            .filter(|m| !m.is_empty())
            .collect()
    }

    /// `name = "..."` of `[package]`: the first `name` key of the file.
    pub fn package_name(manifest: &str) -> Option<String> {
        manifest.lines().find_map(|line| {
            let value = line.trim().strip_prefix("name")?.trim_start().strip_prefix('=')?;
            Some(value.trim().trim_matches('"').to_owned())
        })
    }
}

/// What a file refers to that must exist, and the invocations of our binaries in one command.
struct Checker {
    root: PathBuf,
    packages: Vec<(String, PathBuf)>,
    binaries: HashMap<String, Result<PathBuf, String>>,
    helps: HashMap<(String, Vec<String>), Result<String, String>>,
    /// The invocations checked against a --help, and those run for real.
    checked: usize,
    ran: Vec<String>,
}

impl Checker {
    fn new() -> Checker {
        let root = workspace_dir();
        Checker {
            packages: workspace_packages(&root),
            root,
            binaries: HashMap::new(),
            helps: HashMap::new(),
            checked: 0,
            ran: Vec::new(),
        }
    }

    fn package_dir(&self, name: &str) -> Option<&Path> {
        self.packages
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, d)| d.as_path())
    }

    /// The problems of one command (its words), each a sentence.
    fn check_command(&mut self, words: &[String]) -> Vec<String> {
        let words = skip_prefixes(words);
        let Some(program) = words.first() else {
            return Vec::new();
        };
        let mut problems = Vec::new();
        let invocation = match program.as_str() {
            "cargo" => self.check_cargo(&words[1..], &mut problems),
            "bash" | "sh" => {
                if let Some(script) = words.get(1) {
                    self.check_path(script, "script", &mut problems);
                }
                None
            }
            // kubectl runs our plugin, `kubectl-ocm_score`, for `kubectl ocm-score ...`.
            "kubectl" if words.get(1).is_some_and(|w| w == "ocm-score") => Some(Invocation {
                binary: "kubectl-ocm_score".to_owned(),
                args: words[2..].to_vec(),
            }),
            "kubectl" => {
                for pair in words.windows(2) {
                    if pair[0] == "-k" {
                        self.check_path(&pair[1], "kustomization directory", &mut problems);
                    }
                }
                None
            }
            "helm" => {
                self.check_helm(&words[1..], &mut problems);
                None
            }
            _ => our_binary(program).map(|b| Invocation {
                binary: b.to_owned(),
                args: words[1..].to_vec(),
            }),
        };
        if let Some(invocation) = invocation {
            self.check_invocation(&invocation, &mut problems);
        }
        problems
    }

    /// `helm ... charts/<chart> ... --set key=value`: the chart exists, and each `--set` (or
    /// `--set-string`, `--set-file`) key is one its values.yaml has, below free-form maps and lists
    /// (`agent.variables`, `nodeSelector`, ...) anything.
    fn check_helm(&self, words: &[String], problems: &mut Vec<String>) {
        let mut chart = None;
        for word in words.iter().filter(|w| w.starts_with("charts/")) {
            self.check_path(word, "chart", problems);
            chart = Some(word.trim_end_matches('/').to_owned());
        }
        let Some(chart) = chart else {
            return;
        };
        let values: serde_json::Value = std::fs::read_to_string(self.root.join(&chart).join("values.yaml"))
            .ok()
            .and_then(|text| serde_norway::from_str(&text).ok())
            .unwrap_or_default();
        for pair in words.windows(2) {
            if !matches!(pair[0].as_str(), "--set" | "--set-string" | "--set-file") {
                continue;
            }
            for assignment in pair[1].split(',') {
                let key = assignment.split('=').next().unwrap_or_default();
                if let Err(missing) = values_key_exists(&values, key) {
                    problems.push(format!("`--set {key}`: {chart}/values.yaml has no `{missing}`"));
                }
            }
        }
    }

    /// The binaries cargo builds for a package: its `[[bin]]` targets, `src/main.rs` (named after the
    /// package) and `src/bin/*.rs` or `src/bin/*/main.rs`, each once.
    fn binaries_of(dir: &Path, package: &str, manifest: &str) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        let mut paths: Vec<String> = Vec::new();
        let mut in_bin = false;
        for line in manifest.lines().map(str::trim) {
            if line.starts_with('[') {
                in_bin = line == "[[bin]]";
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                continue;
            };
            let value = value.trim().trim_matches('"').to_owned();
            match key.trim() {
                "name" if in_bin => names.push(value),
                "path" if in_bin => paths.push(value),
                _ => {}
            }
        }
        let mut auto = Vec::new();
        if dir.join("src/main.rs").is_file() {
            auto.push(("src/main.rs".to_owned(), package.to_owned()));
        }
        for entry in std::fs::read_dir(dir.join("src/bin"))
            .into_iter()
            .flatten()
            .flatten()
        {
            let path = entry.path();
            let name = path
                .file_stem()
                .and_then(|n| n.to_str())
                .unwrap_or_default()
                .to_owned();
            if path.extension().is_some_and(|e| e == "rs") {
                auto.push((format!("src/bin/{name}.rs"), name));
            } else if path.join("main.rs").is_file() {
                auto.push((format!("src/bin/{name}/main.rs"), name));
            }
        }
        for (path, name) in auto {
            if !paths.contains(&path) && !names.contains(&name) {
                names.push(name);
            }
        }
        names
    }

    /// A relative path the repository must hold (placeholders and absolute paths are not checked).
    fn check_path(&self, path: &str, what: &str, problems: &mut Vec<String>) {
        let placeholder = path.contains(['<', '$', '*']) || path.chars().all(|c| c.is_ascii_uppercase());
        if path.starts_with(['/', '~', '-']) || placeholder {
            return;
        }
        if !self.root.join(path).exists() {
            problems.push(format!("{what} `{path}` does not exist in the repository"));
        }
    }

    /// `cargo run|test|bench` options: the package and target must exist; `cargo run` gives the
    /// invocation of the binary it runs.
    fn check_cargo(&mut self, words: &[String], problems: &mut Vec<String>) -> Option<Invocation> {
        let words = match words.first() {
            Some(toolchain) if toolchain.starts_with('+') => &words[1..],
            _ => words,
        };
        let subcommand = words.first()?.as_str();
        if !matches!(subcommand, "run" | "test" | "bench") {
            return None;
        }
        let (options, args) = match words.iter().position(|w| w == "--") {
            Some(i) => (&words[1..i], words[i + 1..].to_vec()),
            None => (&words[1..], Vec::new()),
        };
        let value = |names: &[&str]| {
            options.iter().enumerate().find_map(|(i, w)| {
                names.iter().find_map(|n| {
                    if w == n {
                        options.get(i + 1).cloned()
                    } else {
                        w.strip_prefix(&format!("{n}=")).map(str::to_owned)
                    }
                })
            })
        };
        let package = value(&["-p", "--package"]);
        let package_dir = match &package {
            Some(p) => match self.package_dir(p) {
                Some(dir) => Some(dir.to_path_buf()),
                None => {
                    problems.push(format!("`-p {p}` is not a package of the workspace"));
                    return None;
                }
            },
            None => None,
        };
        for (flag, folder) in [("--test", "tests"), ("--bench", "benches")] {
            let (Some(name), Some(dir)) = (value(&[flag]), &package_dir) else {
                continue;
            };
            let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
            let declared = manifest.contains(&format!("name = \"{name}\""));
            if !declared && !dir.join(folder).join(format!("{name}.rs")).is_file() {
                problems.push(format!(
                    "`{flag} {name}`: package {} has no such target",
                    package.as_deref().unwrap_or_default()
                ));
            }
        }
        if subcommand != "run" {
            return None;
        }
        if let (None, Some(p), Some(dir)) = (value(&["--bin"]), &package, &package_dir) {
            let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
            let binaries = Self::binaries_of(dir, p, &manifest);
            if binaries.len() > 1
                && !manifest
                    .lines()
                    .any(|l| l.trim_start().starts_with("default-run"))
            {
                problems.push(format!(
                    "`cargo run -p {p}` without `--bin`: the package has {} binaries ({}) and no \
                     `default-run`, so cargo refuses to choose",
                    binaries.len(),
                    binaries.join(", ")
                ));
            }
        }
        let Some(binary) = value(&["--bin"]).or(package) else {
            problems.push("`cargo run` without `-p` or `--bin` runs no binary this test knows".into());
            return None;
        };
        Some(Invocation { binary, args })
    }

    fn binary(&mut self, name: &str) -> Result<PathBuf, String> {
        self.binaries
            .entry(name.to_owned())
            .or_insert_with(|| workspace_binary(name).map_err(|e| e.to_string()))
            .clone()
    }

    /// `binary path... --help`, cached.
    fn help(&mut self, binary: &str, path: &[String]) -> Result<String, String> {
        let key = (binary.to_owned(), path.to_vec());
        if let Some(help) = self.helps.get(&key) {
            return help.clone();
        }
        let help = self.binary(binary).and_then(|exe| {
            let out = Command::new(&exe)
                .args(path)
                .arg("--help")
                .output()
                .map_err(|e| format!("running {}: {e}", exe.display()))?;
            if out.status.success() {
                Ok(String::from_utf8_lossy(&out.stdout).into_owned())
            } else {
                Err(String::from_utf8_lossy(&out.stderr).trim().to_owned())
            }
        });
        self.helps.insert(key, help.clone());
        help
    }

    fn check_invocation(&mut self, invocation: &Invocation, problems: &mut Vec<String>) {
        let binary = invocation.binary.as_str();
        let args: Vec<String> = invocation
            .args
            .iter()
            .map(|a| a.trim_start_matches('[').trim_end_matches(']').to_owned())
            .collect();
        // Walk the leading subcommand names.
        let mut path: Vec<String> = Vec::new();
        let mut rest = args.as_slice();
        let help = loop {
            let help = match self.help(binary, &path) {
                Ok(help) => help,
                Err(e) => {
                    problems.push(format!("`{binary} {} --help` failed: {e}", path.join(" ")));
                    return;
                }
            };
            let subcommands = subcommands(&help);
            if subcommands.is_empty() {
                break help;
            }
            match rest.first() {
                Some(word) if subcommands.contains(word) => {
                    path.push(word.clone());
                    rest = &rest[1..];
                }
                Some(word) if is_help(word) => break help,
                Some(word)
                    if path.is_empty() && word.starts_with('-') && default_subcommand(binary).is_some() =>
                {
                    path.push(default_subcommand(binary).unwrap_or_default().to_owned());
                }
                Some(word) if !word.starts_with('-') => {
                    problems.push(format!(
                        "`{word}` is not a subcommand of `{}` (it has: {})",
                        command_name(binary, &path),
                        subcommands.join(", ")
                    ));
                    return;
                }
                _ => break help,
            }
        };
        self.checked += 1;
        for arg in rest {
            if arg == "--" {
                break;
            }
            let Some(flag) = flag_of(arg) else { continue };
            if !help_names(&help, &flag) {
                problems.push(format!(
                    "`{flag}` is not a flag of `{}` (not in its --help)",
                    command_name(binary, &path)
                ));
            }
        }
        if problems.is_empty() {
            self.run_for_real(binary, &path, rest, problems);
        }
    }

    /// Runs the commands that need no cluster, from the repository root; they must succeed.
    fn run_for_real(&mut self, binary: &str, path: &[String], rest: &[String], problems: &mut Vec<String>) {
        let value_of = |names: &[&str]| -> Vec<String> {
            let mut values = Vec::new();
            for (i, arg) in rest.iter().enumerate() {
                for name in names {
                    if arg == name {
                        values.extend(rest.get(i + 1).cloned());
                    } else if let Some(v) = arg.strip_prefix(&format!("{name}=")) {
                        values.push(v.to_owned());
                    }
                }
            }
            values
        };
        let runnable = match (binary, path.first().map(String::as_str)) {
            ("ocm-score-agent", Some("once")) => {
                value_of(&["--source"]) == ["host"]
                    && !rest
                        .iter()
                        .any(|a| a.starts_with("--publish") || a.starts_with("--hub-kubeconfig"))
            }
            ("ocm-score-hub", Some("simulate")) => {
                let files = value_of(&["-f", "--file", "--cases"]);
                !files.is_empty() && files.iter().all(|f| self.root.join(f).is_file())
            }
            _ => false,
        };
        if !runnable || rest.iter().any(|a| is_help(a)) {
            return;
        }
        let exe = match self.binary(binary) {
            Ok(exe) => exe,
            Err(e) => return problems.push(e),
        };
        let out = Command::new(exe)
            .args(path)
            .args(rest)
            .current_dir(&self.root)
            .output();
        self.ran.push(command_name(binary, path) + " " + &rest.join(" "));
        match out {
            Ok(out) if out.status.success() => {}
            Ok(out) => problems.push(format!(
                "run for real, it failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            )),
            Err(e) => problems.push(format!("run for real, it did not start: {e}")),
        }
    }
}

/// Values a chart leaves free-form: any key or index below them is the user's.
const FREE_FORM_VALUES: [&str; 11] = [
    "variables",
    "nodeSelector",
    "tolerations",
    "affinity",
    "labels",
    "resources",
    "registries",
    "placements",
    "extraArgs",
    "imagePullSecrets",
    // OCM's RolloutStrategy, passed through as written.
    "rolloutStrategy",
];

/// Whether a `--set` key (`a.b[0].c`) names a value of `values`; the first part that does not.
fn values_key_exists(values: &serde_json::Value, key: &str) -> Result<(), String> {
    let mut node = values;
    let mut walked = String::new();
    for part in key.split('.') {
        let name = part.split('[').next().unwrap_or_default();
        walked = if walked.is_empty() {
            name.to_owned()
        } else {
            format!("{walked}.{name}")
        };
        if FREE_FORM_VALUES.contains(&name) && node.get(name).is_some() {
            return Ok(());
        }
        node = node.get(name).ok_or_else(|| walked.clone())?;
    }
    Ok(())
}

fn is_help(word: &str) -> bool {
    matches!(word, "-h" | "--help" | "help")
}

fn command_name(binary: &str, path: &[String]) -> String {
    std::iter::once(binary.to_owned())
        .chain(path.iter().cloned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// The flag an argument names: `--dir` of `--dir=/tmp`, `-f` of `-f`; `None` for values.
fn flag_of(arg: &str) -> Option<String> {
    if let Some(long) = arg.strip_prefix("--") {
        let name = long.split('=').next().unwrap_or_default();
        let valid = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
        return valid.then(|| format!("--{name}"));
    }
    let short = arg.strip_prefix('-')?;
    let mut chars = short.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c.is_ascii_alphabetic() => Some(format!("-{c}")),
        _ => None,
    }
}

/// Whether clap's help lists `flag` (as a word of its own: `--dir` is not `--dir-mode`).
fn help_names(help: &str, flag: &str) -> bool {
    if matches!(flag, "--help" | "-h" | "--version" | "-V") {
        return true;
    }
    help.match_indices(flag).any(|(i, _)| {
        let before = help[..i].chars().next_back();
        let after = help[i + flag.len()..].chars().next();
        before.is_none_or(|c| c.is_whitespace() || c == '[' || c == ',')
            && after.is_none_or(|c| !(c.is_ascii_alphanumeric() || c == '-'))
    })
}

/// The subcommands clap's help lists under `Commands:` (without `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
        .filter(|name| name != "help")
        .collect()
}

/// The Markdown files of the repository (not under hidden folders or `target`).
fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !name.starts_with('.') && name != "target" {
                    dirs.push(path);
                }
            } else if name.ends_with(".md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The problems of one Markdown text, as `file:line: command: problem`.
fn check_markdown(checker: &mut Checker, file: &str, text: &str) -> Vec<String> {
    let mut problems = Vec::new();
    for snippet in snippets(text) {
        for words in shell_words(&snippet.text) {
            for problem in checker.check_command(&words) {
                problems.push(format!(
                    "{file}:{}: `{}`: {problem}",
                    snippet.line,
                    snippet.text.trim()
                ));
            }
        }
    }
    problems
}

#[test]
fn every_documented_command_matches_the_binaries() {
    let mut checker = Checker::new();
    let root = checker.root.clone();
    let mut problems = Vec::new();
    let mut checked = 0;
    for file in markdown_files(&root) {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let shown = file.strip_prefix(&root).unwrap_or(&file).display().to_string();
        checked += snippets(&text).len();
        problems.extend(check_markdown(&mut checker, &shown, &text));
    }
    println!(
        "{checked} snippets; {} invocations of our binaries checked; run for real:\n  {}",
        checker.checked,
        checker.ran.join("\n  ")
    );
    assert!(
        checked > 50,
        "only {checked} snippets found: is the parser reading the docs?"
    );
    assert!(
        checker.ran.len() >= 3,
        "the commands that need no cluster (once --source host, simulate) were not run: {:?}",
        checker.ran
    );
    assert!(
        problems.is_empty(),
        "{} documented command(s) do not match the binaries:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// The check is not vacuous: a misspelled flag, an unknown subcommand and a missing package are
/// reported with their line.
#[test]
fn helm_set_keys_are_checked_against_the_values() {
    let values: serde_json::Value =
        serde_norway::from_str("image: {repository: x, tag: ''}\nagent: {variables: {SOURCES: cluster}}\n")
            .expect("YAML");
    assert_eq!(values_key_exists(&values, "image.tag"), Ok(()));
    assert_eq!(values_key_exists(&values, "agent.variables.RENEW_EVERY"), Ok(()));
    assert_eq!(values_key_exists(&values, "image.tagg"), Err("image.tagg".into()));
    assert_eq!(values_key_exists(&values, "imag.tag"), Err("imag".into()));
}

#[test]
fn a_drifted_command_is_reported_with_its_line() {
    let doc = "# A doc\n\n```sh\ncargo run -p ocm-score-agent -- once --sorce host\n```\n\n\
               Run `ocm-score-hub simulat -f x.yaml` or\n\n```console\n$ cargo run -p no-such-package\n```\n";
    let mut checker = Checker::new();
    let problems = check_markdown(&mut checker, "doc.md", doc);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(
        problems[0].starts_with("doc.md:4: ")
            && problems[0].contains("`--sorce` is not a flag of `ocm-score-agent once`"),
        "{problems:#?}"
    );
    assert!(
        problems[1].starts_with("doc.md:7: ")
            && problems[1].contains("`simulat` is not a subcommand of `ocm-score-hub`"),
        "{problems:#?}"
    );
    assert!(
        problems[2].starts_with("doc.md:10: ") && problems[2].contains("not a package"),
        "{problems:#?}"
    );
}

#[test]
fn snippets_join_continuations_and_read_console_prompts_and_inline_commands() {
    let doc = "Intro `ocm-score-agent once` and `kubectl get pods`.\n\
               ```sh\n\
               cargo run -p ocm-score-tests --bin kube-double -- --rbac \\\n    --port 0   # a comment\n\
               ```\n\
               ```console\n$ ocm-score-hub simulate -f a.yaml\nsome output\n```\n\
               ```yaml\nkey: value\n```\n";
    let found = snippets(doc);
    let texts: Vec<(usize, &str)> = found.iter().map(|s| (s.line, s.text.as_str())).collect();
    assert_eq!(
        texts,
        [
            (1, "ocm-score-agent once"),
            (
                3,
                "cargo run -p ocm-score-tests --bin kube-double -- --rbac  --port 0   # a comment"
            ),
            (7, "ocm-score-hub simulate -f a.yaml"),
        ]
    );
    assert_eq!(
        shell_words(&found[1].text),
        [[
            "cargo",
            "run",
            "-p",
            "ocm-score-tests",
            "--bin",
            "kube-double",
            "--",
            "--rbac",
            "--port",
            "0"
        ]]
    );
    assert_eq!(
        shell_words("A=1 time x 'a b' \"c\\\"d\" > out 2>&1 | y && z; w # no"),
        vec![
            vec!["A=1", "time", "x", "a b", "c\"d"],
            vec!["y"],
            vec!["z"],
            vec!["w"]
        ]
    );
    assert_eq!(flag_of("--dir=/tmp"), Some("--dir".into()));
    assert_eq!(flag_of("-f"), Some("-f".into()));
    assert_eq!(flag_of("-100"), None);
    assert!(help_names("  -f, --file <FILE>\n      --dir <DIR>", "--dir"));
    assert!(!help_names("      --dir-mode <M>", "--dir"));
}
