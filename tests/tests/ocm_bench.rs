//! `tests/ocm-bench/`, the Go module that runs OCM's own code beside ours: it must build what the
//! control plane runs, and its CEL recorder must reproduce the committed CEL vectors byte for byte.

use ocm_score_tests::go_module::{self, ensure_built};
use ocm_score_tests::ocm_bench::{go_mod_versions, module, module_dir};
use std::path::Path;
use std::process::Command;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

/// Every module the benchmark's go.mod requires is built at the version the control plane builds
/// it at (after the control plane's `replace`s): OCM, its API and SDK, Kubernetes' libraries,
/// cel-go and the rest. So the peer and the recorder run the OCM that the end-to-end tests run.
#[test]
fn ocm_bench_builds_the_control_planes_versions() {
    let control_plane = go_mod_versions(&read(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("control-plane/go.mod"),
    ));
    let bench = go_mod_versions(&read(&module_dir().join("go.mod")));
    for pinned in [
        "open-cluster-management.io/ocm",
        "open-cluster-management.io/api",
        "open-cluster-management.io/sdk-go",
        "github.com/google/cel-go",
        "k8s.io/apiserver",
    ] {
        assert!(
            bench.contains_key(pinned),
            "tests/ocm-bench/go.mod does not require {pinned}"
        );
    }
    let differ: Vec<String> = bench
        .iter()
        .filter(|(m, v)| control_plane.get(*m) != Some(*v))
        .map(|(m, v)| {
            format!(
                "{m}: {v} in tests/ocm-bench, {} in tests/control-plane",
                control_plane.get(m).map_or("nothing", String::as_str)
            )
        })
        .collect();
    assert!(
        differ.is_empty(),
        "tests/ocm-bench/go.mod must pin what tests/control-plane/go.mod builds:\n{}",
        differ.join("\n")
    );
}

/// `cel-recorder`, run on the committed vectors, writes them again unchanged: every outcome is the
/// one OCM's CEL environment gives, and the header names the versions it was recorded with.
#[test]
fn cel_recorder_regenerates_the_committed_vectors() {
    // Go is part of the test command's setup (scripts/test.sh installs it), as for the control
    // plane: without it this fails, naming what is missing, rather than passing unchecked.
    if let Err(e) = go_module::find_go() {
        panic!("no Go toolchain to build the CEL recorder with: {e}; `bash scripts/test.sh` installs one");
    }
    let build = ensure_built(&module(), &|line| eprintln!("{line}")).unwrap_or_else(|e| panic!("{e}"));
    let vectors = Path::new(env!("CARGO_MANIFEST_DIR")).join("../scheduler-core/tests/cel_vectors.tsv");
    let out = Command::new(build.bin("cel-recorder"))
        .arg("-in")
        .arg(&vectors)
        .output()
        .expect("running cel-recorder");
    assert!(
        out.status.success(),
        "cel-recorder failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let recorded = String::from_utf8(out.stdout).expect("UTF-8 vectors");
    let committed = read(&vectors);
    let differ: Vec<String> = committed
        .lines()
        .zip(recorded.lines())
        .enumerate()
        .filter(|(_, (c, r))| c != r)
        .map(|(n, (c, r))| format!("line {}:\n  committed {c}\n  recorded  {r}", n + 1))
        .collect();
    assert!(
        differ.is_empty() && recorded == committed,
        "cel-recorder ({}) disagrees with {}: {} lines differ, {} vs {} lines:\n{}",
        build.versions().trim().replace('\n', ", "),
        vectors.display(),
        differ.len(),
        recorded.lines().count(),
        committed.lines().count(),
        differ.join("\n")
    );
    assert!(
        committed.lines().filter(|l| !l.starts_with('#')).count() > 600,
        "the vectors file lost lines"
    );
}
