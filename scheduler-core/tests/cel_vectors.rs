//! Every line of `cel_vectors.tsv` through the public selector: one CEL expression, compiled by
//! `ClusterMatcher` and evaluated on one cluster, must give the outcome cel-go gives in OCM's
//! environment (selected, not selected, runtime error, or misconfigured). Prints
//! `N passed, M failed` and fails unless every vector passes.

use ocm_score_api::{ClusterCelSelector, ClusterSelector};
use ocm_score_scheduler::placement::selector::{ClusterMatcher, SelectorMiss};
use ocm_score_scheduler::placement::{HubObjects, HubSnapshot};

fn snapshot() -> HubSnapshot {
    let cluster = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "alpha-1", "labels": {
            "version": "1.29.4", "zone": "us-east-1a", "mem": "64Gi",
            "addr": "10.0.3.7", "env": "prod", "owner": "team-a"}},
        "spec": {"hubAcceptsClient": true},
        "status": {"clusterClaims": [{"name": "cloud", "value": "Amazon"}, {"name": "region", "value": "eu"}]}
    }))
    .expect("a valid ManagedCluster");
    let score = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "res", "namespace": "alpha-1"},
        "status": {"scores": [{"name": "cpu", "value": 60}, {"name": "mem", "value": -5}]}
    }))
    .expect("a valid AddOnPlacementScore");
    HubSnapshot::new(HubObjects {
        clusters: vec![cluster],
        scores: vec![score],
        ..HubObjects::default()
    })
    .expect("a valid snapshot")
}

/// The outcome of one expression, in the vocabulary of the vectors file.
fn outcome(snap: &HubSnapshot, expression: &str) -> String {
    let matcher = ClusterMatcher::new(&ClusterSelector {
        cel_selector: Some(ClusterCelSelector {
            cel_expressions: vec![expression.to_string()],
        }),
        ..ClusterSelector::default()
    })
    .expect("a CEL-only selector always builds");
    if let Some(e) = matcher.cel_compile_error() {
        return format!("misconfigured ({e})");
    }
    let id = snap.cluster_id("alpha-1").expect("the cluster");
    match matcher.miss(snap, id) {
        None => "true".into(),
        Some(SelectorMiss::Cel { reason, .. }) if reason == "evaluated to false" => "false".into(),
        Some(SelectorMiss::Cel { reason, .. }) if reason.starts_with("failed: returned a ") => "false".into(),
        Some(SelectorMiss::Cel { reason, .. }) => format!("error ({reason})"),
        Some(other) => format!("unexpected miss {other}"),
    }
}

#[test]
fn every_vector_gives_cel_go_outcome() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cel_vectors.tsv"))
        .expect("read cel_vectors.tsv");
    let snap = snapshot();
    let (mut passed, mut failures) = (0usize, Vec::new());
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (expected, expression) = line.split_once('\t').expect("outcome<TAB>expression");
        let got = outcome(&snap, expression);
        if got.split(' ').next() == Some(expected) {
            passed += 1;
        } else {
            failures.push(format!("{expression}\n    expected {expected}, got {got}"));
        }
    }
    for f in &failures {
        println!("FAILED {f}");
    }
    println!("{passed} passed, {} failed", failures.len());
    assert!(
        failures.is_empty(),
        "{} vectors differ from cel-go",
        failures.len()
    );
    assert!(passed > 400, "the vectors file lost lines: {passed}");
}

/// A cluster that has an empty `status.conditions` list and one that has no such key: OCM's Go
/// object sees `[]` and `null` (`status.conditions` has no `omitempty`), so `exists()` is false on
/// the first and an error on the second. The snapshot keeps the two apart (`KeptList`). Found by
/// the live differential (seed 7925122099488079162: a cluster with `conditions: []`).
#[test]
fn an_empty_conditions_list_is_not_a_missing_one() {
    let with = |status: serde_json::Value| {
        let cluster = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "alpha-1", "labels": {"tier": "gold"}},
            "spec": {},
            "status": status
        }))
        .expect("a valid ManagedCluster");
        HubSnapshot::new(HubObjects {
            clusters: vec![cluster],
            ..HubObjects::default()
        })
        .expect("a valid snapshot")
    };
    let expression = "!managedCluster.status.conditions.exists(c, c.type == 'ManagedClusterConditionAvailable' \
                      && c.status == 'Unknown') && 'tier' in managedCluster.metadata.labels";
    let empty = with(serde_json::json!({"conditions": []}));
    assert_eq!(outcome(&empty, expression), "true");
    let missing = with(serde_json::json!({}));
    assert!(
        outcome(&missing, expression).starts_with("error"),
        "{}",
        outcome(&missing, expression)
    );
    assert_eq!(
        outcome(&missing, "managedCluster.status.conditions == null"),
        "true"
    );
    assert_eq!(
        outcome(&missing, "managedCluster.spec.hubAcceptsClient == false"),
        "true"
    );
    // The typed object writes back what it read, so a saved snapshot replays the same.
    for status in [serde_json::json!({"conditions": []}), serde_json::json!({})] {
        let cluster: ocm_score_api::ManagedCluster =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "c"}, "status": status}))
                .expect("a valid ManagedCluster");
        let json = serde_json::to_value(&cluster).expect("serializes");
        assert_eq!(json["status"], status);
    }
}
