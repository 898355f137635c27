//! Hub snapshots as `ocm-score-hub simulate -f` reads them (kubectl Lists, multi-document YAML,
//! conformance case files), scheduled and printed in every output format. Must hold: no panic, no
//! hang; bad input is an error naming the file; the JSON output is JSON, and the YAML output reads
//! back to the same value.

use ocm_score_hub::simulate::{self, OutputFormat, SimulateArgs, SimulateError, input};
use serde_json::Value;
use std::path::{Path, PathBuf};

const FILE: &str = "snapshot.yaml";

fn args(output: OutputFormat) -> SimulateArgs {
    SimulateArgs {
        cases: None,
        file: vec![PathBuf::from(FILE)],
        placement: None,
        // A fixed clock (over the cases' own), so that a run repeats.
        now: Some(jiff::Timestamp::from_second(1_800_000_000).expect("a valid time")),
        output,
        explain: true,
        limit: Some(20),
    }
}

/// The checks on one input: what the fuzz target runs, and the seed replay test for each seed.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Err(e) = input::parse(Path::new(FILE), text) {
        assert!(
            e.to_string().starts_with(FILE),
            "error without the file name: {e}"
        );
        return;
    }
    let json = match simulate::render(&args(OutputFormat::Json), FILE, parse(text)) {
        Ok(json) => json,
        Err(SimulateError::Output(e)) => panic!("output failed: {e}"),
        Err(_) => return,
    };
    let json: Value = serde_json::from_str(&json).expect("the JSON output is JSON");
    let yaml =
        simulate::render(&args(OutputFormat::Yaml), FILE, parse(text)).expect("YAML renders what JSON did");
    let read_back: Value = serde_norway::from_str(&yaml).expect("the YAML output is YAML");
    assert_eq!(
        read_back, json,
        "the YAML output reads back to another value:\n{yaml}"
    );
    simulate::render(&args(OutputFormat::Table), FILE, parse(text)).expect("the table renders what JSON did");
}

fn parse(text: &str) -> Vec<simulate::Scenario> {
    input::parse(Path::new(FILE), text).expect("parsed once already")
}
