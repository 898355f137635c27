//! Every case in `tests/conformance/cel/` through the real `ocm-score-hub simulate` binary.
//!
//! Each `cel-NN.yaml` is a hub snapshot with one Placement whose only predicate is one CEL
//! expression; its first line records what OCM's own placement controller decided:
//! `# expect (...): {"decisions": [...], "misconfigured": bool}`. The case passes when
//! `simulate -f cel-NN.yaml -o json` selects the same set of clusters and agrees on whether the
//! Placement is misconfigured. The test prints `N passed, M failed` and fails unless all pass.

use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn cel_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/conformance/cel"))
}

fn case_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(cel_dir())
        .expect("the CEL conformance folder tests/conformance/cel is readable")
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

/// The expectation on the first line of a case file.
fn expectation(file: &Path) -> (BTreeSet<String>, bool) {
    let text = std::fs::read_to_string(file).expect("read case file");
    let first = text.lines().next().unwrap_or_default();
    let json = first
        .split_once("): ")
        .map(|(_, j)| j)
        .unwrap_or_else(|| panic!("{}: first line is not an expectation: {first}", file.display()));
    let expect: Value = serde_json::from_str(json).expect("the expectation is JSON");
    (
        decision_set(&expect["decisions"]),
        expect["misconfigured"]
            .as_bool()
            .expect("misconfigured is a bool"),
    )
}

fn decision_set(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .map(|a| a.iter().filter_map(|d| d.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// What `simulate` decided for the case's one Placement.
fn simulate(file: &Path) -> Result<(BTreeSet<String>, bool), String> {
    let out = Command::new(env!("CARGO_BIN_EXE_ocm-score-hub"))
        .args(["simulate", "-f"])
        .arg(file)
        .args(["-o", "json"])
        .output()
        .map_err(|e| format!("cannot run ocm-score-hub: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "simulate failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let printed: Value = serde_json::from_slice(&out.stdout).map_err(|e| format!("not JSON: {e}"))?;
    let [result] = printed.as_array().map(Vec::as_slice).unwrap_or_default() else {
        return Err(format!("expected one result, got {printed}"));
    };
    let misconfigured = result["misconfigured"]
        .as_bool()
        .ok_or_else(|| format!("no misconfigured flag in {result}"))?;
    Ok((decision_set(&result["decisions"]), misconfigured))
}

#[test]
fn every_cel_case_is_decided_as_ocm_decides_it() {
    let files = case_files();
    assert!(!files.is_empty(), "no CEL conformance cases found");
    let mut failures = Vec::new();
    for file in &files {
        let expected = expectation(file);
        let name = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match simulate(file) {
            Ok(got) if got == expected => {}
            Ok(got) => failures.push(format!("{name}: expected {expected:?}, simulate gave {got:?}")),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    for f in &failures {
        println!("FAILED {f}");
    }
    println!(
        "{} passed, {} failed",
        files.len() - failures.len(),
        failures.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} CEL cases differ from OCM",
        failures.len(),
        files.len()
    );
}
