//! CHANGELOG.md cannot drift from the deprecated spellings the binaries accept.
//!
//! The process shell knows every deprecated spelling: the old environment variables of
//! `ocm_score_shell::cli::RENAMED_ENV` and `RENAMED_MODE_ENV`, and the hidden flag aliases of a
//! command (`ocm_score_shell::cli::deprecated_flags`), here of the agent's and the hub's commands.
//! Each must have a row in a `### Deprecated` table of CHANGELOG.md: the old spelling, its
//! replacement, the modes that read it, and `ocm_score_shell::cli::REMOVED_IN` as the release that
//! ignores it. A row naming a spelling the shell does not know fails too, and the removal release must
//! come after this workspace's version.

use clap::{Args, Command, CommandFactory};
use ocm_score_control_plane::addon::workspace_dir;
use ocm_score_shell::cli::{REMOVED_IN, RENAMED_ENV, RENAMED_MODE_ENV, deprecated_flags};
use std::collections::BTreeSet;

/// How the `read by` cell starts for a spelling that every mode with the new name reads.
const EVERY_MODE: &str = "every mode with the new";

/// One row of a Deprecated table: `| `old` | `new` | read by | removed in |`.
#[derive(Debug)]
struct Row {
    line: usize,
    old: String,
    new: String,
    read_by: String,
    removed_in: String,
}

fn changelog() -> String {
    let path = workspace_dir().join("CHANGELOG.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// The table rows under every `### Deprecated` heading, up to the next heading.
fn deprecated_rows(markdown: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut in_section = false;
    for (index, line) in markdown.lines().enumerate() {
        if line.starts_with('#') {
            in_section = line.trim() == "### Deprecated";
            continue;
        }
        if !in_section || !line.starts_with("| `") {
            continue;
        }
        let cells: Vec<&str> = line.trim().trim_matches('|').split('|').map(str::trim).collect();
        let [old, new, read_by, removed_in] = cells[..] else {
            panic!("CHANGELOG.md:{}: expected 4 cells: {line}", index + 1);
        };
        let code = |cell: &str| {
            cell.strip_prefix('`')
                .and_then(|c| c.strip_suffix('`'))
                .unwrap_or_else(|| panic!("CHANGELOG.md:{}: `{cell}` is not one code span", index + 1))
                .to_owned()
        };
        rows.push(Row {
            line: index + 1,
            old: code(old),
            new: code(new),
            read_by: read_by.to_owned(),
            removed_in: removed_in.to_owned(),
        });
    }
    rows
}

/// `MAJOR.MINOR.PATCH` as numbers, so 0.10.0 comes after 0.9.0.
fn version(text: &str) -> (u64, u64, u64) {
    let parts: Vec<u64> = text
        .split('.')
        .map(|p| {
            p.parse()
                .unwrap_or_else(|_| panic!("{text:?} is not MAJOR.MINOR.PATCH"))
        })
        .collect();
    let [major, minor, patch] = parts[..] else {
        panic!("{text:?} is not MAJOR.MINOR.PATCH");
    };
    (major, minor, patch)
}

/// The agent's command line, and the hub's as `ocm-score-hub`'s main assembles it (its `Cli` lives
/// in the binary, so the modes are listed here; a new hub mode is added here too).
fn commands() -> Vec<Command> {
    let hub = ocm_score_shell::logging::LogArgs::augment_args(Command::new("ocm-score-hub"))
        .subcommand(ocm_score_hub::simulate::SimulateArgs::augment_args(Command::new(
            "simulate",
        )))
        .subcommand(ocm_score_hub::addon::AddonManagerArgs::augment_args(
            Command::new("addon-manager"),
        ))
        .subcommand(ocm_score_hub::thanos::ThanosScorerArgs::augment_args(
            Command::new("thanos-scorer"),
        ))
        .subcommand(ocm_score_hub::tiering::TieringArgs::augment_args(Command::new(
            "tiering",
        )));
    vec![ocm_score_agent::cli::Cli::command(), hub]
}

/// A deprecated spelling the shell knows: old name, new name, and the subcommands that read it
/// (`None`: every mode with the new name).
type Spelling = (String, String, Option<&'static [&'static str]>);

fn known_spellings() -> Vec<Spelling> {
    let mut known: Vec<Spelling> = Vec::new();
    for command in commands() {
        for (old, new) in deprecated_flags(&command) {
            let spelling = (format!("--{old}"), format!("--{new}"), None);
            if !known.contains(&spelling) {
                known.push(spelling);
            }
        }
    }
    known.extend(
        RENAMED_ENV
            .iter()
            .map(|&(new, old)| (old.to_owned(), new.to_owned(), None)),
    );
    known.extend(
        RENAMED_MODE_ENV
            .iter()
            .map(|&(modes, new, old)| (old.to_owned(), new.to_owned(), Some(modes))),
    );
    known
}

#[test]
fn every_deprecated_spelling_has_a_changelog_row_with_its_removal_release() {
    let rows = deprecated_rows(&changelog());
    let known = known_spellings();
    assert!(
        known.iter().any(|(old, _, _)| old.starts_with("--")),
        "the commands have hidden aliases to check (at least the shell's --metrics-addr)"
    );
    let mut problems = Vec::new();
    for (old, new, modes) in &known {
        let Some(row) = rows.iter().find(|r| &r.old == old && &r.new == new) else {
            problems.push(format!("no row for {old} -> {new}"));
            continue;
        };
        if row.removed_in != REMOVED_IN {
            problems.push(format!(
                "CHANGELOG.md:{}: {old} is ignored from {REMOVED_IN}, the row says {:?}",
                row.line, row.removed_in
            ));
        }
        match modes {
            None if !row.read_by.starts_with(EVERY_MODE) => problems.push(format!(
                "CHANGELOG.md:{}: {old} is read by every mode with {new}, the row says {:?}",
                row.line, row.read_by
            )),
            Some(modes) => {
                for mode in *modes {
                    if !row.read_by.contains(&format!("`{mode}`")) {
                        problems.push(format!(
                            "CHANGELOG.md:{}: {old} is read by `{mode}`, the row says {:?}",
                            row.line, row.read_by
                        ));
                    }
                }
            }
            None => {}
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_changelog_lists_only_spellings_the_shell_knows_each_once() {
    let rows = deprecated_rows(&changelog());
    assert!(!rows.is_empty(), "CHANGELOG.md has a Deprecated table");
    let known = known_spellings();
    let mut seen = BTreeSet::new();
    for row in &rows {
        assert!(
            known
                .iter()
                .any(|(old, new, _)| *old == row.old && *new == row.new),
            "CHANGELOG.md:{}: {} -> {} is not a deprecated spelling the binaries accept",
            row.line,
            row.old,
            row.new
        );
        assert!(
            seen.insert((&row.old, &row.new)),
            "CHANGELOG.md:{}: {} -> {} is listed twice",
            row.line,
            row.old,
            row.new
        );
    }
}

/// The subcommands `RENAMED_MODE_ENV` names exist, and read the new variable: the `read by` column
/// copied from them names real modes.
#[test]
fn each_renamed_mode_variable_is_read_by_the_modes_it_names() {
    let commands = commands();
    for &(modes, new, old) in RENAMED_MODE_ENV {
        for mode in modes {
            let reads = commands
                .iter()
                .filter_map(|c| c.find_subcommand(mode))
                .any(|sub| {
                    sub.get_arguments()
                        .any(|a| a.get_env() == Some(std::ffi::OsStr::new(new)))
                });
            assert!(reads, "{old}: subcommand {mode} has no argument reading {new}");
        }
    }
}

#[test]
fn the_removal_release_comes_after_this_version_and_this_version_has_a_section() {
    let this = env!("CARGO_PKG_VERSION");
    assert!(
        version(REMOVED_IN) > version(this),
        "deprecated spellings are ignored from {REMOVED_IN}, which is not after this version, {this}: \
         remove them, or move REMOVED_IN and CHANGELOG.md's Deprecated rows to a later release"
    );
    let changelog = changelog();
    assert!(
        changelog.lines().any(|l| l == format!("## {this}")),
        "CHANGELOG.md has no `## {this}` section for this version"
    );
    assert!(
        changelog.lines().any(|l| l == "## Unreleased"),
        "CHANGELOG.md has an Unreleased section"
    );
}

/// The documents that name the removal release name the one the warnings give.
#[test]
fn the_configuration_docs_name_the_removal_release() {
    for doc in ["docs/configuration.md", "agent/README.md"] {
        let path = workspace_dir().join(doc);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {doc}: {e}"));
        assert!(
            text.contains(&format!("ocm-score {REMOVED_IN}")) && text.contains("CHANGELOG.md"),
            "{doc} says that old spellings work until ocm-score {REMOVED_IN} and links CHANGELOG.md"
        );
    }
}

#[test]
fn versions_compare_as_numbers() {
    assert!(version("0.10.0") > version("0.9.0"));
    assert!(version("1.0.0") > version("0.99.99"));
    assert_eq!(version("0.2.0"), (0, 2, 0));
}

#[test]
fn rows_are_read_from_deprecated_sections_only() {
    let markdown = "## 1.0.0\n### Added\n| `--a` | `--b` | x | 1.1.0 |\n### Deprecated\n\
                    | deprecated spelling | use instead | read by | ignored from |\n|---|---|---|---|\n\
                    | `--c` | `--d` | every mode with the new flag | 1.1.0 |\n## 0.9.0\n| `--e` | `--f` | y | 1.0.0 |\n";
    let rows = deprecated_rows(markdown);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (
            rows[0].old.as_str(),
            rows[0].new.as_str(),
            rows[0].removed_in.as_str()
        ),
        ("--c", "--d", "1.1.0")
    );
    assert_eq!(rows[0].line, 7);
}
