//! `ocm-score-hub simulate` through its command line: input formats, the clock, outputs and
//! bad-input errors.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output};

const OBJECTS: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata: {name: prod}
spec: {clusterSelector: {selectorType: ExclusiveClusterSetLabel}}
---
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {namespace: ns1, name: prod}
spec: {clusterSet: prod}
---
apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata: {name: east, labels: {cluster.open-cluster-management.io/clusterset: prod}}
spec: {hubAcceptsClient: true}
---
apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata: {name: west, labels: {cluster.open-cluster-management.io/clusterset: prod}}
spec: {hubAcceptsClient: true}
---
apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata: {name: gpu, labels: {cluster.open-cluster-management.io/clusterset: prod}}
spec:
  hubAcceptsClient: true
  taints: [{key: gpu, value: "true", effect: NoSelect, timeAdded: "2026-01-01T00:00:00Z"}]
---
apiVersion: cluster.open-cluster-management.io/v1alpha1
kind: AddOnPlacementScore
metadata: {namespace: east, name: usage}
status:
  scores: [{name: cpu, value: 10}]
  validUntil: "2026-06-01T12:00:00Z"
---
apiVersion: cluster.open-cluster-management.io/v1alpha1
kind: AddOnPlacementScore
metadata: {namespace: west, name: usage}
status:
  scores: [{name: cpu, value: 50}]
  validUntil: "2026-06-01T12:00:00Z"
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {namespace: ns1, name: p1}
spec:
  numberOfClusters: 1
  prioritizerPolicy:
    mode: Exact
    configurations:
      - {scoreCoordinate: {type: AddOn, addOn: {resourceName: usage, scoreName: cpu}}, weight: 1}
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {namespace: ns1, name: all}
spec: {}
"#;

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("simulate-cli-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    fn file(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.0.join(name);
        std::fs::write(&path, contents).expect("write temp file");
        path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn simulate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ocm-score-hub"))
        .arg("simulate")
        .args(args)
        .output()
        .expect("run ocm-score-hub")
}

fn json(out: &Output) -> Vec<Value> {
    assert!(
        out.status.success(),
        "simulate failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON array on stdout")
}

fn by_name<'a>(results: &'a [Value], name: &str) -> &'a Value {
    results
        .iter()
        .find(|r| r["name"] == name)
        .unwrap_or_else(|| panic!("no result for {name}"))
}

#[test]
fn schedules_every_placement_of_a_multi_document_file() {
    let dir = TempDir::new("multi");
    let file = dir.file("hub.yaml", OBJECTS);
    let path = file.to_str().expect("utf-8 path");
    let results = json(&simulate(&[
        "-f",
        path,
        "--now",
        "2026-06-01T00:00:00Z",
        "-o",
        "json",
    ]));
    assert_eq!(results.len(), 2);
    let p1 = by_name(&results, "ns1/p1");
    assert_eq!(p1["decisions"], serde_json::json!(["west"]));
    assert_eq!(p1["unscheduled"], 0);
    assert_eq!(p1["filtered"], serde_json::json!(["east", "west"]));
    assert_eq!(p1["scores"], serde_json::json!({"east": 10, "west": 50}));
    assert_eq!(p1["misconfigured"], false);
    let all = by_name(&results, "ns1/all");
    assert_eq!(all["decisions"], serde_json::json!(["east", "west"]));

    let one = json(&simulate(&[
        "-f",
        path,
        "--now",
        "2026-06-01T00:00:00Z",
        "-o",
        "json",
        "-p",
        "ns1/all",
    ]));
    assert_eq!(one.len(), 1);
    assert_eq!(one[0]["name"], "ns1/all");
}

#[test]
fn reads_a_kubectl_list_and_ignores_other_kinds() {
    let items: Vec<Value> = serde_norway::Deserializer::from_str(OBJECTS)
        .map(|d| serde::Deserialize::deserialize(d).expect("document"))
        .collect();
    let mut list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": items});
    list["items"]
        .as_array_mut()
        .expect("items")
        .push(serde_json::json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ns1"}}));
    let dir = TempDir::new("list");
    let file = dir.file("list.yaml", &serde_norway::to_string(&list).expect("yaml"));
    let results = json(&simulate(&[
        "-f",
        file.to_str().expect("utf-8 path"),
        "--now",
        "2026-06-01T00:00:00Z",
        "-o",
        "json",
        "--placement",
        "ns1/p1",
    ]));
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["decisions"], serde_json::json!(["west"]));
}

#[test]
fn the_clock_expires_scores() {
    let dir = TempDir::new("clock");
    let file = dir.file("hub.yaml", OBJECTS);
    let path = file.to_str().expect("utf-8 path");
    let later = json(&simulate(&[
        "-f",
        path,
        "--now",
        "2026-06-02T00:00:00Z",
        "-o",
        "json",
        "-p",
        "ns1/p1",
        "--explain",
    ]));
    // Both scores expired: every cluster scores 0 and the name decides.
    assert_eq!(later[0]["scores"], serde_json::json!({"east": 0, "west": 0}));
    assert_eq!(later[0]["decisions"], serde_json::json!(["east"]));
    let warnings = later[0]["explain"]["warnings"].as_array().expect("warnings");
    assert!(
        warnings.iter().any(|w| w
            .as_str()
            .is_some_and(|w| w.contains("east at 2026-06-01T12:00:00Z, west at 2026-06-01T12:00:00Z"))),
        "{warnings:?}"
    );
}

#[test]
fn the_table_explains_filtered_clusters_and_ranks() {
    let dir = TempDir::new("table");
    let file = dir.file("hub.yaml", OBJECTS);
    let out = simulate(&[
        "-f",
        file.to_str().expect("utf-8 path"),
        "--now",
        "2026-06-01T00:00:00Z",
        "-p",
        "ns1/p1",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8(out.stdout).expect("utf-8 output");
    assert!(table.contains("RANK"), "{table}");
    assert!(table.contains("AddOn/usage/cpu x1"), "{table}");
    assert!(table.contains("taint gpu=true:NoSelect not tolerated"), "{table}");
    let west = table
        .lines()
        .find(|l| l.contains(" west "))
        .expect("a row for west");
    assert!(
        west.trim_start().starts_with('1') && west.contains("yes"),
        "{west}"
    );
    assert!(
        table.contains("PlacementSatisfied=True (AllDecisionsScheduled)"),
        "{table}"
    );
    // Numbers are right-aligned under their headers, names and reasons left-aligned.
    let rows: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.contains("RANK"))
        .take(4)
        .collect();
    assert_eq!(
        rows,
        [
            "  RANK CLUSTER TOTAL AddOn/usage/cpu x1 SELECTED FILTERED BY",
            "     1 west       50                 50 yes",
            "     2 east       10                 10 no",
            "     - gpu         -                  - no       taint gpu=true:NoSelect not tolerated",
        ],
        "{table}"
    );
}

#[test]
fn bad_input_exits_2_naming_file_object_and_field() {
    let dir = TempDir::new("bad");
    let bad = OBJECTS.replace("numberOfClusters: 1", "numberOfClusters: one");
    let file = dir.file("bad.yaml", &bad);
    let out = simulate(&["-f", file.to_str().expect("utf-8 path"), "-o", "json"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("bad.yaml"), "{stderr}");
    assert!(stderr.contains("Placement ns1/p1"), "{stderr}");
    assert!(stderr.contains("field spec.numberOfClusters"), "{stderr}");

    let missing = simulate(&["-f", "/nonexistent/hub.yaml"]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("/nonexistent/hub.yaml"));

    let good = dir.file("hub.yaml", OBJECTS);
    let unknown = simulate(&["-f", good.to_str().expect("utf-8 path"), "-p", "ns1/nope"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("ns1/nope"));

    let flag = simulate(&["-f", good.to_str().expect("utf-8 path"), "-p", "nope"]);
    assert_eq!(flag.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&flag.stderr).contains("NAMESPACE/NAME"));

    let negative = dir.file(
        "negative.yaml",
        &OBJECTS.replace("numberOfClusters: 1", "numberOfClusters: -1"),
    );
    let out = simulate(&["-f", negative.to_str().expect("utf-8 path"), "-p", "ns1/p1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("spec.numberOfClusters: -1 is negative"));
}

#[test]
fn a_file_without_objects_or_cases_is_bad_input() {
    let dir = TempDir::new("empty");
    for contents in ["", "---\n# nothing here\n---\n"] {
        let file = dir.file("empty.yaml", contents);
        let path = file.to_str().expect("utf-8 path");
        for args in [["--cases", path], ["-f", path]] {
            let out = simulate(&[args[0], args[1], "-o", "json"]);
            assert_eq!(out.status.code(), Some(2), "{args:?} on {contents:?}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(
                stderr.contains("empty.yaml") && stderr.contains("no objects and no cases"),
                "{stderr}"
            );
        }
    }
}

/// A placement asking OCM api v1.3.0 for `sortBy: Score`, beside the snapshot's others.
const SORT_BY_SCORE: &str = r#"
---
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {namespace: ns1, name: by-score}
spec:
  numberOfClusters: 2
  sortBy: Score
  scoreRateLimit: 30s
  prioritizerPolicy:
    mode: Exact
    configurations:
      - {scoreCoordinate: {type: AddOn, addOn: {resourceName: usage, scoreName: cpu}}, weight: 1}
"#;

/// Each decision is shown with its score, in the order of the PlacementDecisions: by cluster name
/// (OCM v1.2's order, which the engine keeps even for `sortBy: Score`, docs/simulate.md).
#[test]
fn decisions_are_listed_with_their_scores_in_name_order() {
    let dir = TempDir::new("decision-scores");
    let file = dir.file("hub.yaml", &format!("{OBJECTS}{SORT_BY_SCORE}"));
    let path = file.to_str().expect("utf-8 path");
    let now = "2026-06-01T00:00:00Z";
    let out = simulate(&["-f", path, "--now", now, "-p", "ns1/by-score"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8(out.stdout).expect("utf-8 output");
    let line = table
        .lines()
        .find(|l| l.starts_with("  decisions: "))
        .unwrap_or_else(|| panic!("no decisions line: {table}"));
    assert_eq!(line, "  decisions: east (score 10), west (score 50)");
    // Ranked by score all the same: west first.
    let rows: Vec<&str> = table
        .lines()
        .skip_while(|l| !l.contains("RANK"))
        .skip(1)
        .take(2)
        .collect();
    assert!(
        rows[0].contains(" west ") && rows[1].contains(" east "),
        "{table}"
    );

    let results = json(&simulate(&[
        "-f",
        path,
        "--now",
        now,
        "-o",
        "json",
        "--explain",
        "-p",
        "ns1/by-score",
    ]));
    let result = by_name(&results, "ns1/by-score");
    assert_eq!(result["decisions"], serde_json::json!(["east", "west"]));
    assert_eq!(
        result["explain"]["decisionScores"],
        serde_json::json!([{"clusterName": "east", "score": 10}, {"clusterName": "west", "score": 50}])
    );
    // The conformance keys stay exactly FORMAT.md's without --explain.
    let plain = json(&simulate(&[
        "-f",
        path,
        "--now",
        now,
        "-o",
        "json",
        "-p",
        "ns1/by-score",
    ]));
    assert!(plain[0].get("decisionScores").is_none() && plain[0].get("explain").is_none());

    // The placement selecting one cluster: its one decision, with its score.
    let out = simulate(&["-f", path, "--now", now, "-p", "ns1/p1"]);
    let table = String::from_utf8(out.stdout).expect("utf-8 output");
    assert!(table.contains("\n  decisions: west (score 50)\n"), "{table}");
}

/// A file is checked as api v1.3.0's CRD would check it: a `sortBy` or `scoreRateLimit` it
/// refuses is bad input naming the object, the field and the value.
#[test]
fn a_sort_order_or_rate_limit_v1_3_refuses_is_bad_input() {
    let dir = TempDir::new("bad-v1-3");
    for (from, to, field, value) in [
        ("sortBy: Score", "sortBy: Random", "spec.sortBy", "\"Random\""),
        (
            "scoreRateLimit: 30s",
            "scoreRateLimit: 1m30s",
            "spec.scoreRateLimit",
            "\"1m30s\"",
        ),
    ] {
        let file = dir.file(
            "hub.yaml",
            &format!("{OBJECTS}{}", SORT_BY_SCORE.replace(from, to)),
        );
        let out = simulate(&["-f", file.to_str().expect("utf-8 path"), "-o", "json"]);
        assert_eq!(out.status.code(), Some(2), "{to}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        for want in [
            "hub.yaml",
            "Placement ns1/by-score",
            &format!("field {field}"),
            value,
        ] {
            assert!(stderr.contains(want), "{want} missing: {stderr}");
        }
    }
}

#[test]
fn errors_name_their_cause_once() {
    let out = simulate(&["-f", "/nonexistent/hub.yaml"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("No such file or directory").count(), 1, "{stderr}");
}

#[test]
fn a_placement_ocm_leaves_alone_is_reported_as_skipped() {
    let dir = TempDir::new("skipped");
    let disabled = OBJECTS.replace(
        "metadata: {namespace: ns1, name: all}",
        "metadata: {namespace: ns1, name: all, annotations: {cluster.open-cluster-management.io/experimental-scheduling-disable: \"true\"}}",
    );
    let file = dir.file("hub.yaml", &disabled);
    let path = file.to_str().expect("utf-8 path");
    let results = json(&simulate(&["-f", path, "-o", "json", "-p", "ns1/all"]));
    assert_eq!(
        results,
        [serde_json::json!({"name": "ns1/all", "skipped": "scheduling is disabled by annotation"})]
    );
    let out = simulate(&["-f", path, "-p", "ns1/all"]);
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).expect("utf-8 output");
    assert_eq!(
        table.trim_end(),
        "Placement ns1/all: skipped (scheduling is disabled by annotation)"
    );
}

/// The example snapshot docs/simulate.md points newcomers at: an expired score counts 0 (so `edge` still
/// beats `west`'s -20), and a NoSelect taint keeps `lab` out despite its perfect scores.
#[test]
fn the_readme_example_snapshot_picks_east_and_edge() {
    let snapshot = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/hub-snapshot.yaml");
    let out = simulate(&["-f", snapshot, "--now", "2026-11-22T00:00:00Z", "-o", "json"]);
    let results = json(&out);
    let result = by_name(&results, "apps/most-free-cpu");
    assert_eq!(result["decisions"], serde_json::json!(["east", "edge"]));
    assert_eq!(result["filtered"], serde_json::json!(["east", "edge", "west"]));
    assert_eq!(
        result["scores"],
        serde_json::json!({"east": 120, "edge": 0, "west": -40})
    );
}

/// A primary/backup TieredPlacement: `east` is tainted unreachable since 10:00 with a 120 s
/// toleration, `west` is healthy.
const TIERED: &str = r#"
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata: {name: dc-east}
---
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata: {name: dc-west}
---
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {namespace: apps, name: dc-east}
spec: {clusterSet: dc-east}
---
apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {namespace: apps, name: dc-west}
spec: {clusterSet: dc-west}
---
apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata: {name: east-1, labels: {cluster.open-cluster-management.io/clusterset: dc-east}}
spec:
  hubAcceptsClient: true
  taints: [{key: cluster.open-cluster-management.io/unreachable, effect: NoSelect, timeAdded: "2026-06-01T10:00:00Z"}]
---
apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata: {name: west-1, labels: {cluster.open-cluster-management.io/clusterset: dc-west}}
spec: {hubAcceptsClient: true}
---
apiVersion: cluster.open-cluster-management.io/v1
kind: ManagedCluster
metadata: {name: west-2, labels: {cluster.open-cluster-management.io/clusterset: dc-west}}
spec: {hubAcceptsClient: true}
---
apiVersion: tiering.ocm-score.io/v1alpha1
kind: TieredPlacement
metadata: {namespace: apps, name: payments}
spec:
  tiers:
  - {name: east, clusterSets: [dc-east]}
  - {name: west, clusterSets: [dc-west]}
  template:
    tolerations:
    - {key: cluster.open-cluster-management.io/unreachable, operator: Exists, tolerationSeconds: 120}
  failback: {policy: Manual}
"#;

#[test]
fn tiered_placements_are_planned_from_a_snapshot() {
    let dir = TempDir::new("tiered");
    let path = dir.file("hub.yaml", TIERED);
    let path = path.to_str().expect("utf-8 path");
    // Within the toleration, the initial plan takes the preferred tier.
    let results = json(&simulate(&[
        "-f",
        path,
        "--now",
        "2026-06-01T10:01:00Z",
        "-o",
        "json",
    ]));
    assert_eq!(results.len(), 1, "no Placement in the input, one TieredPlacement");
    let tp = by_name(&results, "apps/payments");
    assert_eq!(tp["activeTiers"], serde_json::json!(["east"]));
    assert_eq!(tp["decisions"], serde_json::json!(["east-1"]));
    assert_eq!(tp["tiers"][0]["feasible"], 1);
    assert_eq!(tp["transition"]["kind"], "Initial");
    // After it, east is infeasible and the initial plan starts on west.
    let results = json(&simulate(&[
        "-f",
        path,
        "--now",
        "2026-06-01T10:05:00Z",
        "-o",
        "json",
    ]));
    let tp = by_name(&results, "apps/payments");
    assert_eq!(tp["activeTiers"], serde_json::json!(["west"]));
    assert_eq!(tp["decisions"], serde_json::json!(["west-1", "west-2"]));
    assert_eq!(tp["tiers"][0]["feasible"], 0);
    assert_eq!(tp["tiers"][1]["qualifying"], 2);
    assert!(
        tp["tiers"][0]["excluded"]["east-1"]
            .as_str()
            .is_some_and(|w| w.contains("unreachable")),
        "{tp:#}"
    );
    assert_eq!(tp["child"]["clusterSets"], serde_json::json!(["dc-west"]));

    let out = simulate(&["-f", path, "--now", "2026-06-01T10:05:00Z"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        table.contains("TieredPlacement apps/payments (Failover)  active tiers: [west]"),
        "{table}"
    );
    assert!(table.contains("decisions: [west-1, west-2]"), "{table}");
    assert!(
        table.contains("east/east-1: not qualifying: taint cluster.open-cluster-management.io/unreachable"),
        "{table}"
    );
}

#[test]
fn a_tiered_placement_with_status_continues_from_it() {
    let dir = TempDir::new("tiered-status");
    let with_status = format!(
        "{TIERED}status:\n  activeTiers: [east]\n  placement: {{name: payments, predicted: [east-1]}}\n  \
         transitions:\n  - {{time: \"2026-06-01T09:00:00Z\", kind: Initial, from: [], to: [east], reason: FirstSatisfiedTier}}\n"
    );
    let path = dir.file("hub.yaml", &with_status);
    let path = path.to_str().expect("utf-8 path");
    let results = json(&simulate(&[
        "-f",
        path,
        "--now",
        "2026-06-01T10:05:00Z",
        "-o",
        "json",
    ]));
    let tp = by_name(&results, "apps/payments");
    assert_eq!(tp["activeTiers"], serde_json::json!(["west"]));
    assert_eq!(tp["transition"]["kind"], "Failover");
    assert_eq!(tp["transition"]["reason"], "TierUnavailable");
    // --placement selects the TieredPlacement.
    let only = json(&simulate(&[
        "-f",
        path,
        "--now",
        "2026-06-01T10:05:00Z",
        "-o",
        "json",
        "--placement",
        "apps/payments",
    ]));
    assert_eq!(only.len(), 1);
}

#[test]
fn an_invalid_tiered_placement_says_which_field() {
    let dir = TempDir::new("tiered-invalid");
    let path = dir.file("hub.yaml", &TIERED.replace("name: west,", "name: east,"));
    let results = json(&simulate(&[
        "-f",
        path.to_str().expect("utf-8 path"),
        "--now",
        "2026-06-01T10:05:00Z",
        "-o",
        "json",
    ]));
    let tp = by_name(&results, "apps/payments");
    assert_eq!(tp["conditions"]["Ready"]["reason"], "InvalidSpec");
    assert!(
        tp["conditions"]["Ready"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.tiers[1].name")),
        "{tp:#}"
    );
    assert_eq!(tp["child"], Value::Null);
}

#[test]
fn yaml_output_quotes_timestamps_as_kubectl_does() {
    let dir = TempDir::new("tiered-yaml");
    let path = dir.file("hub.yaml", TIERED);
    let out = simulate(&[
        "-f",
        path.to_str().expect("utf-8 path"),
        "--now",
        "2026-06-01T10:05:00Z",
        "-o",
        "yaml",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).expect("utf-8");
    assert!(text.contains("time: \"2026-06-01T10:05:00Z\""), "{text}");
    assert!(!text.contains(": 2026-"), "an unquoted timestamp: {text}");
    let back: Value = serde_norway::from_str(&text).expect("YAML");
    assert_eq!(back[0]["name"], "apps/payments");
    assert_eq!(back[0]["decisions"], serde_json::json!(["west-1", "west-2"]));
}
