//! Every committed fuzz seed (`fuzz/seeds/<target>/*`) through its target's checks, on stable Rust:
//! CI checks the seeds on every run without nightly Rust or cargo-fuzz. The checks have one home,
//! the fuzz crate's library (`fuzz/src/`), included here by path; the targets call the same
//! functions. Fuzzing campaigns are `scripts/fuzz.sh` (fuzz/README.md).

use std::collections::BTreeSet;
use std::panic::{self, AssertUnwindSafe};
use std::path::{Path, PathBuf};

#[path = "../../fuzz/src/lib.rs"]
mod fuzz;

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// Runs `check` on every seed of `target`, then fails naming each seed that failed and why. A
/// target without seeds fails too: it would otherwise pass while checking nothing.
fn replay(target: &str, check: fn(&[u8])) {
    let dir = fuzz_dir().join("seeds").join(target);
    let entries = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{target}: no seed directory {}: {e}", dir.display()));
    let mut seeds: Vec<PathBuf> = entries
        .map(|entry| entry.map(|e| e.path()))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("{target}: listing {}: {e}", dir.display()));
    seeds.sort();
    assert!(!seeds.is_empty(), "{target}: no seeds in {}", dir.display());
    let mut failed = Vec::new();
    for seed in &seeds {
        let data =
            std::fs::read(seed).unwrap_or_else(|e| panic!("{target}: reading {}: {e}", seed.display()));
        // One seed's failure must not hide the next one's: catch it, name the seed, go on.
        if let Err(payload) = panic::catch_unwind(AssertUnwindSafe(|| check(&data))) {
            let why = payload
                .downcast_ref::<String>()
                .map(String::as_str)
                .or_else(|| payload.downcast_ref::<&str>().copied())
                .unwrap_or("a panic without a message");
            let name = seed.file_name().unwrap_or_default().to_string_lossy();
            failed.push(format!("fuzz/seeds/{target}/{name}: {why}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{target}: {} of {} seeds fail:\n{}",
        failed.len(),
        seeds.len(),
        failed.join("\n")
    );
}

/// One test per target, named after it (so a failure names the target), and the list of them: a
/// target gets its test and its place in `TARGETS` from one line.
macro_rules! replay_targets {
    ($($target:ident),* $(,)?) => {
        const TARGETS: &[&str] = &[$(stringify!($target)),*];
        $(
            #[test]
            fn $target() {
                replay(stringify!($target), fuzz::$target::check);
            }
        )*
    };
}

replay_targets!(
    cel,
    deployment_config,
    duration,
    kubelet_metrics,
    prometheus_response,
    quantity,
    simulate_snapshot,
);

/// The `[[bin]]` names of `fuzz/Cargo.toml`: each table's `name = "..."` line (the file is ours and
/// written one key per line; no TOML parser in this package's dependencies).
fn fuzz_bins() -> BTreeSet<String> {
    let path = fuzz_dir().join("Cargo.toml");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let mut bins = BTreeSet::new();
    let mut in_bin = false;
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') {
            in_bin = line == "[[bin]]";
        } else if in_bin
            && let Some((key, value)) = line.split_once('=')
            && key.trim() == "name"
        {
            bins.insert(value.trim().trim_matches('"').to_string());
        }
    }
    bins
}

/// A target added to fuzz/Cargo.toml without a replay test here, or seeds left behind by a renamed
/// target, fail here.
#[test]
fn every_fuzz_target_is_replayed() {
    let replayed: BTreeSet<String> = TARGETS.iter().map(|t| t.to_string()).collect();
    let bins = fuzz_bins();
    assert!(!bins.is_empty(), "no [[bin]] targets read from fuzz/Cargo.toml");
    assert_eq!(
        bins, replayed,
        "fuzz/Cargo.toml's [[bin]] targets (left) and the targets this test replays (right) differ"
    );
    let dir = fuzz_dir().join("seeds");
    let seeded: BTreeSet<String> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| panic!("listing {}: {e}", dir.display()));
    assert_eq!(
        seeded, replayed,
        "fuzz/seeds/ directories (left) and the targets (right) differ"
    );
}
