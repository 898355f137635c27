//! Every case in `tests/conformance/placement/*.yaml` through the real `ocm-score-hub simulate` binary.
//!
//! Each file is run as `ocm-score-hub simulate --cases FILE -o json`; for every case, each key
//! of its `expect` must equal the printed value. No case is skipped.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

/// The `expect` keys of FORMAT.md; `-o json` prints `name` plus exactly these.
const EXPECT_KEYS: [&str; 7] = [
    "decisions",
    "unscheduled",
    "scores",
    "prioritizers",
    "filtered",
    "misconfigured",
    "groups",
];
/// Keys printed for every scheduled placement (the others depend on the spec and outcome).
const ALWAYS_PRINTED: [&str; 5] = ["name", "decisions", "scores", "prioritizers", "misconfigured"];

fn conformance_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../tests/conformance/placement"
    ))
}

fn case_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(conformance_dir())
        .expect("the conformance folder tests/conformance/placement is readable")
        .map(|e| e.expect("readable directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    files
}

fn run_simulate(file: &PathBuf) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_ocm-score-hub"))
        .args(["simulate", "--cases"])
        .arg(file)
        .args(["-o", "json"])
        .output()
        .expect("run ocm-score-hub");
    assert!(
        out.status.success(),
        "simulate failed on {}: {}",
        file.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("simulate prints a JSON array")
}

#[test]
fn every_conformance_case_passes_through_simulate() {
    let files = case_files();
    assert!(!files.is_empty(), "no conformance case files found");
    let (mut passed, mut failed) = (0usize, 0usize);
    let mut failures = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read case file");
        let cases: Vec<Value> = serde_norway::from_str(&text).expect("case file is a YAML list");
        let printed = run_simulate(file);
        assert_eq!(
            printed.len(),
            cases.len(),
            "{}: one result per case",
            file.display()
        );
        for (case, result) in cases.iter().zip(&printed) {
            let name = case["name"].as_str().expect("case name");
            assert_eq!(result["name"].as_str(), Some(name), "results come in case order");
            let expect = case["expect"].as_object().expect("case expect is a map");
            assert!(!expect.is_empty(), "{name}: a case must expect something");
            for key in expect.keys() {
                assert!(
                    EXPECT_KEYS.contains(&key.as_str()),
                    "{name}: unknown expect key {key}"
                );
            }
            let printed = result.as_object().expect("each result is an object");
            for key in printed.keys() {
                assert!(
                    key == "name" || EXPECT_KEYS.contains(&key.as_str()),
                    "{name}: printed key {key} is not in FORMAT.md"
                );
            }
            for key in ALWAYS_PRINTED {
                assert!(printed.contains_key(key), "{name}: {key} not printed");
            }
            let wrong: Vec<String> = expect
                .iter()
                .filter(|(key, want)| result.get(key.as_str()) != Some(*want))
                .map(|(key, want)| {
                    format!(
                        "  {key}: want {want}, got {}",
                        result.get(key.as_str()).unwrap_or(&Value::Null)
                    )
                })
                .collect();
            if wrong.is_empty() {
                passed += 1;
            } else {
                failed += 1;
                failures.push(format!("{name}:\n{}", wrong.join("\n")));
            }
        }
    }
    for f in &failures {
        eprintln!("FAILED {f}");
    }
    println!("{passed} passed, {failed} failed");
    assert_eq!(failed, 0, "{failed} conformance case(s) failed");
}
