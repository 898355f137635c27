//! A full scheduling pass through the public API: events, requeue, warnings, explanations and
//! the errors returned where upstream crashes or could never have the input.

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use ocm_score_api::{
    AddOnPlacementScore, ManagedCluster, ManagedClusterSet, ManagedClusterSetBinding, Placement,
    PlacementDecision,
};
use ocm_score_scheduler::placement::explain::{self, Verdict, Warning};
use ocm_score_scheduler::placement::writes::DecisionWrite;
use ocm_score_scheduler::placement::{
    HubObjects, HubSnapshot, PlacementError, PlacementResult, SkipReason, SyncOutcome, sync,
};
use serde_json::{Value, json};

fn now() -> Timestamp {
    "2026-06-01T00:00:00Z".parse().expect("valid time")
}

fn from<T: serde::de::DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).expect("test object decodes")
}

fn cluster(name: &str, extra: Value) -> ManagedCluster {
    let mut v = json!({
        "metadata": {"name": name, "labels": {"cluster.open-cluster-management.io/clusterset": "prod"}},
        "spec": {"hubAcceptsClient": true}
    });
    merge(&mut v, extra);
    from(v)
}

fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                merge(b.entry(k).or_insert(Value::Null), v);
            }
        }
        (b, e) => *b = e,
    }
}

fn placement(spec: Value) -> Placement {
    from(json!({"metadata": {"namespace": "ns1", "name": "p1"}, "spec": spec}))
}

fn base(clusters: Vec<ManagedCluster>, placement: Placement) -> HubObjects {
    HubObjects {
        clusters,
        cluster_sets: vec![from::<ManagedClusterSet>(json!({"metadata": {"name": "prod"}}))],
        bindings: vec![from::<ManagedClusterSetBinding>(
            json!({"metadata": {"namespace": "ns1", "name": "prod"}, "spec": {"clusterSet": "prod"}}),
        )],
        placements: vec![placement],
        ..HubObjects::default()
    }
}

fn score(cluster: &str, value: i32, valid_until: &str) -> AddOnPlacementScore {
    from(json!({
        "metadata": {"namespace": cluster, "name": "usage"},
        "status": {"scores": [{"name": "cpu", "value": value}], "validUntil": valid_until}
    }))
}

fn decision(name: &str, placement: &str, clusters: &[&str]) -> PlacementDecision {
    let decisions: Vec<Value> = clusters
        .iter()
        .map(|c| json!({"clusterName": c, "reason": ""}))
        .collect();
    from(json!({
        "metadata": {"namespace": "ns1", "name": name,
                     "labels": {"cluster.open-cluster-management.io/placement": placement}},
        "status": {"decisions": decisions}
    }))
}

fn run(objects: HubObjects) -> (HubSnapshot, PlacementResult) {
    let snapshot = HubSnapshot::new(objects).expect("valid snapshot");
    let outcome = sync(&snapshot, "ns1", "p1", now()).expect("schedules");
    let SyncOutcome::Scheduled(result) = outcome else {
        panic!("skipped: {outcome:?}")
    };
    (snapshot, *result)
}

const ADDON: &str = "AddOn";

fn addon_spec(number: i32) -> Value {
    json!({
        "numberOfClusters": number,
        "prioritizerPolicy": {"mode": "Exact", "configurations": [
            {"scoreCoordinate": {"type": ADDON, "addOn": {"resourceName": "usage", "scoreName": "cpu"}}, "weight": 2},
            {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "ResourceAllocatableCPU"}, "weight": 1}
        ]}
    })
}

#[test]
fn changed_decisions_emit_update_and_score_events() {
    let mut objects = base(
        vec![
            cluster("a", json!({})),
            cluster("b", json!({})),
            cluster("c", json!({})),
        ],
        placement(addon_spec(1)),
    );
    objects.scores = vec![
        score("a", 10, "2026-07-01T00:00:00Z"),
        score("b", 60, "2026-07-01T00:00:00Z"),
    ];
    objects.decisions = vec![
        decision("p1-decision-1", "p1", &["a"]),
        decision("p1-decision-9", "p1", &[]),
    ];
    let (_, result) = run(objects);

    let verbs: Vec<&str> = result.writes.iter().map(DecisionWrite::verb).collect();
    assert_eq!(verbs, ["patch", "delete"]);
    let DecisionWrite::PatchStatus { name, status } = &result.writes[0] else {
        panic!("status patch first")
    };
    assert_eq!(name, "p1-decision-1");
    assert_eq!(status.decisions[0].cluster_name, "b");
    let reasons: Vec<&str> = result.events.iter().map(|e| e.reason).collect();
    assert_eq!(reasons, ["DecisionUpdate", "ScoreUpdate", "DecisionDelete"]);
    // Totals of every feasible cluster, by name, each followed by a space.
    assert_eq!(result.events[1].note, "a:20 b:120 c:0 ");
    assert!(result.status_changed);
}

#[test]
fn an_unchanged_result_writes_nothing() {
    let objects = base(vec![cluster("a", json!({}))], placement(json!({})));
    let (snapshot, first) = run(objects.clone());
    let mut again = objects;
    again.decisions = first.decisions.clone();
    again.placements[0].status = Some(first.status.clone());
    let (_, second) = run(again);
    assert!(second.writes.is_empty(), "{:?}", second.writes);
    assert!(second.events.is_empty());
    assert!(!second.status_changed);
    assert_eq!(snapshot.cluster_name(second.schedule.selected[0]), "a");
}

#[test]
fn requeues_when_a_toleration_of_a_decided_cluster_runs_out() {
    let tainted = |name: &str| {
        cluster(
            name,
            json!({"spec": {"taints": [{"key": "maintenance", "effect": "NoSelect", "timeAdded": "2026-05-31T23:00:00Z"}]}}),
        )
    };
    let mut objects = base(
        vec![tainted("a"), tainted("b")],
        placement(
            json!({"tolerations": [{"key": "maintenance", "operator": "Exists", "tolerationSeconds": 5400}]}),
        ),
    );
    objects.decisions = vec![decision("p1-decision-1", "p1", &["a"])];
    let (_, result) = run(objects);
    assert_eq!(result.schedule.selected.len(), 2);
    // 23:00 + 90 minutes = 00:30, half an hour after now.
    assert_eq!(result.requeue_after, Some(SignedDuration::from_secs(1800)));
}

#[test]
fn warnings_report_what_scores_silently_defaulted_on() {
    let mut objects = base(
        vec![
            cluster(
                "fresh",
                json!({"status": {"allocatable": {"cpu": "4"}, "capacity": {"cpu": "8"}}}),
            ),
            cluster("stale", json!({})),
            cluster("unscored", json!({})),
            cluster("renamed", json!({})),
        ],
        placement(addon_spec(2)),
    );
    objects.placements[0].spec.cluster_sets = vec!["prod".into(), "staging".into()];
    let mut renamed = score("renamed", 70, "2026-07-01T00:00:00Z");
    if let Some(s) = renamed.status.as_mut() {
        s.scores[0].name = "memory".into();
    }
    objects.scores = vec![
        score("fresh", 40, "2026-07-01T00:00:00Z"),
        score("stale", 90, "2026-05-01T00:00:00Z"),
        renamed,
    ];
    let (snapshot, result) = run(objects);
    let texts: Vec<String> = result.warnings.iter().map(|w| w.describe(&snapshot)).collect();
    assert!(result.warnings.contains(&Warning::ClusterSetNotBound {
        cluster_set: "staging".into()
    }));
    assert!(
        texts
            .iter()
            .any(|t| t.contains("missing for 1 cluster(s) (unscored)")),
        "{texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains("expired for 1 cluster(s) (stale at 2026-05-01T00:00:00Z)")),
        "{texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains("score name \"cpu\" not present for 1 cluster(s) (renamed)")),
        "{texts:?}"
    );
    assert!(
        texts
            .iter()
            .any(|t| t.contains("ResourceAllocatableCPU: 3 cluster(s)")),
        "{texts:?}"
    );
    // The expired score still makes upstream report a Warning status.
    assert_eq!(
        result.schedule.status.message,
        "AddOnPlacementScores stale/usage expired"
    );
}

#[test]
fn explanations_add_up_and_name_the_filter() {
    let objects = base(
        vec![
            cluster("a", json!({"metadata": {"labels": {"env": "prod"}}})),
            cluster("b", json!({"metadata": {"labels": {"env": "dev"}}})),
            cluster(
                "c",
                json!({"metadata": {"labels": {"env": "prod"}},
                       "spec": {"taints": [{"key": "gpu", "value": "true", "effect": "NoSelect"}]}}),
            ),
        ],
        placement(
            json!({"predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "prod"}}}}]}),
        ),
    );
    let (snapshot, result) = run(objects);
    let p = snapshot.placement("ns1", "p1").expect("placement");
    let explained = explain::clusters(&result.candidates.clusters, &result.schedule);
    assert_eq!(explained.len(), 3);
    for e in &explained {
        let name = snapshot.cluster_name(e.cluster);
        match (&e.verdict, name) {
            (
                Verdict::Feasible {
                    total,
                    selected,
                    rank,
                },
                "a",
            ) => {
                assert_eq!(*rank, 1);
                assert!(*selected);
                assert_eq!(e.contributions.iter().map(|c| c.weighted).sum::<i64>(), *total);
                assert_eq!(e.contributions.len(), 2, "Balance and Steady by default");
            }
            (Verdict::Filtered(reason), "b") => {
                let text = explain::describe_filter(&snapshot, p, e.cluster, reason);
                assert_eq!(text, "predicate[0]: label requirement `env=prod` not met");
            }
            (Verdict::Filtered(reason), "c") => {
                let text = explain::describe_filter(&snapshot, p, e.cluster, reason);
                assert_eq!(text, "taint gpu=true:NoSelect not tolerated");
            }
            other => panic!("unexpected explanation {other:?}"),
        }
    }
}

#[test]
fn skips_deleting_and_disabled_placements() {
    let mut objects = base(vec![cluster("a", json!({}))], placement(json!({})));
    objects.placements[0].metadata.annotations = Some(
        [(
            "cluster.open-cluster-management.io/experimental-scheduling-disable".to_string(),
            "true".to_string(),
        )]
        .into(),
    );
    let snapshot = HubSnapshot::new(objects.clone()).expect("valid");
    assert_eq!(
        sync(&snapshot, "ns1", "p1", now()),
        Ok(SyncOutcome::Skipped(SkipReason::SchedulingDisabled))
    );
    objects.placements[0].metadata.annotations = None;
    objects.placements[0].metadata.deletion_timestamp = Some(ocm_score_api::Time(now()));
    let snapshot = HubSnapshot::new(objects).expect("valid");
    assert_eq!(
        sync(&snapshot, "ns1", "p1", now()),
        Ok(SyncOutcome::Skipped(SkipReason::Deleting))
    );
}

#[test]
fn returns_errors_where_upstream_crashes_or_input_is_impossible() {
    let objects = base(
        vec![cluster("a", json!({}))],
        placement(json!({"numberOfClusters": -1})),
    );
    let snapshot = HubSnapshot::new(objects).expect("valid");
    assert_eq!(
        sync(&snapshot, "ns1", "p1", now()),
        Err(PlacementError::NegativeNumberOfClusters {
            namespace: "ns1".into(),
            name: "p1".into(),
            value: -1
        })
    );

    let mut objects = base(vec![cluster("a", json!({}))], placement(json!({})));
    objects.cluster_sets[0].spec.cluster_selector = Some(from(json!({"selectorType": "Bogus"})));
    let snapshot = HubSnapshot::new(objects).expect("valid");
    assert_eq!(
        sync(&snapshot, "ns1", "p1", now()),
        Err(PlacementError::InvalidSelectorType {
            cluster_set: "prod".into(),
            value: "Bogus".into()
        })
    );

    let twice = base(
        vec![cluster("a", json!({})), cluster("a", json!({}))],
        placement(json!({})),
    );
    assert!(matches!(
        HubSnapshot::new(twice),
        Err(PlacementError::DuplicateObject {
            kind: "ManagedCluster",
            ..
        })
    ));

    let bad = base(
        vec![cluster(
            "a",
            json!({"status": {"allocatable": {"memory": "lots"}, "capacity": {"memory": "1Gi"}}}),
        )],
        placement(json!({})),
    );
    let err = HubSnapshot::new(bad).expect_err("bad quantity");
    assert!(
        err.to_string().contains("field status.allocatable.memory"),
        "{err}"
    );
    assert_eq!(
        sync(
            &HubSnapshot::new(HubObjects::default()).expect("empty"),
            "ns1",
            "p1",
            now()
        )
        .err(),
        Some(PlacementError::PlacementNotFound {
            namespace: "ns1".into(),
            name: "p1".into()
        })
    );
}

#[test]
fn a_bad_group_setting_writes_no_decisions_but_counts_the_selection() {
    let mut objects = base(
        vec![cluster("a", json!({})), cluster("b", json!({}))],
        placement(json!({"decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": "5"}}})),
    );
    objects.decisions = vec![decision("p1-decision-1", "p1", &["a"])];
    let (_, result) = run(objects);
    assert!(result.groups.is_empty());
    assert!(result.decisions.is_empty());
    assert!(result.is_misconfigured());
    assert_eq!(
        result.misconfigured.message,
        ":5 invalid type: string is not a percentage"
    );
    assert_eq!(result.status.number_of_selected_clusters, 2);
    assert_eq!(
        result.writes.iter().map(DecisionWrite::verb).collect::<Vec<_>>(),
        ["delete"]
    );
}

#[test]
fn an_explicit_zero_decision_score_equals_an_absent_one() {
    // OCM's ClusterDecision.score is an int32 with omitempty: `score: 0` and no score are the
    // same value, so an otherwise identical decision must not be rewritten.
    let objects = base(vec![cluster("a", json!({}))], placement(json!({})));
    let (_, first) = run(objects.clone());
    let mut again = objects;
    let mut decisions = first.decisions.clone();
    for pd in &mut decisions {
        for d in pd.status.iter_mut().flat_map(|s| s.decisions.iter_mut()) {
            d.score = Some(0);
        }
    }
    again.decisions = decisions;
    again.placements[0].status = Some(first.status.clone());
    let (_, second) = run(again);
    assert!(second.writes.is_empty(), "{:?}", second.writes);
    assert!(second.events.is_empty(), "{:?}", second.events);
}

#[test]
fn a_weighted_sum_beyond_64_bits_is_an_error_not_a_wrapped_rank() {
    // Outside the CRD ranges (weight -10..10, score -100..100) two add-on terms of 2^62 each
    // exceed int64; OCM would wrap the total and rank the best cluster last.
    let config = json!({"scoreCoordinate": {"type": ADDON, "addOn": {"resourceName": "usage", "scoreName": "cpu"}}, "weight": i32::MIN});
    let mut objects = base(
        vec![cluster("a", json!({}))],
        placement(
            json!({"prioritizerPolicy": {"mode": "Exact", "configurations": [config.clone(), config]}}),
        ),
    );
    objects.scores = vec![score("a", i32::MIN, "2026-07-01T00:00:00Z")];
    let snapshot = HubSnapshot::new(objects).expect("valid");
    let err = sync(&snapshot, "ns1", "p1", now()).expect_err("the sum overflows");
    assert_eq!(
        err,
        PlacementError::ScoreOverflow {
            namespace: "ns1".into(),
            name: "p1".into(),
            cluster: "a".into()
        }
    );
    assert!(
        err.to_string().contains("spec.prioritizerPolicy.configurations"),
        "{err}"
    );
}

#[test]
fn zero_clusters_requested_is_flagged_only_when_clusters_matched() {
    let objects = base(
        vec![cluster("a", json!({}))],
        placement(json!({"numberOfClusters": 0})),
    );
    let (_, result) = run(objects);
    assert_eq!(result.satisfied.reason, "NoManagedClusterMatched");
    assert!(result.warnings.contains(&Warning::ZeroClustersRequested));

    // Without any matching cluster the condition is right on its own.
    let objects = base(Vec::new(), placement(json!({"numberOfClusters": 0})));
    let (_, result) = run(objects);
    assert!(
        !result.warnings.contains(&Warning::ZeroClustersRequested),
        "{:?}",
        result.warnings
    );
}

#[test]
fn expired_scores_are_reported_in_one_warning_per_prioritizer() {
    let names: Vec<String> = (0..8).map(|i| format!("c{i}")).collect();
    let mut objects = base(
        names.iter().map(|n| cluster(n, json!({}))).collect(),
        placement(addon_spec(1)),
    );
    objects.scores = names
        .iter()
        .map(|n| score(n, 10, "2026-05-01T00:00:00Z"))
        .collect();
    let (snapshot, result) = run(objects);
    let texts: Vec<String> = result.warnings.iter().map(|w| w.describe(&snapshot)).collect();
    let expired: Vec<&String> = texts.iter().filter(|t| t.contains("expired")).collect();
    assert_eq!(expired.len(), 1, "{texts:?}");
    assert!(
        expired[0].contains("expired for 8 cluster(s) (c0 at 2026-05-01T00:00:00Z, ")
            && expired[0].contains(" and 3 more)"),
        "{}",
        expired[0]
    );
}

#[test]
fn a_score_expires_only_strictly_after_valid_until() {
    let scored = |valid_until: &str, now: &str| {
        let mut objects = base(vec![cluster("a", json!({}))], placement(addon_spec(1)));
        objects.scores = vec![score("a", 40, valid_until)];
        let snapshot = HubSnapshot::new(objects).expect("valid snapshot");
        let SyncOutcome::Scheduled(result) =
            sync(&snapshot, "ns1", "p1", now.parse().expect("time")).expect("schedules")
        else {
            panic!("skipped")
        };
        (result.schedule.totals[0], result.schedule.status.message)
    };
    // weight 2, score 40; the resource prioritizer leaves the cluster out.
    assert_eq!(
        scored("2026-06-01T00:00:00Z", "2026-06-01T00:00:00Z"),
        (80, String::new())
    );
    assert_eq!(
        scored("2026-06-01T00:00:00Z", "2026-06-01T00:00:00.000000001Z"),
        (0, "AddOnPlacementScores a/usage expired".to_string())
    );
    // Without validUntil a score never expires.
    let mut objects = base(vec![cluster("a", json!({}))], placement(addon_spec(1)));
    objects.scores = vec![from(json!({
        "metadata": {"namespace": "a", "name": "usage"},
        "status": {"scores": [{"name": "cpu", "value": 40}]}
    }))];
    let snapshot = HubSnapshot::new(objects).expect("valid snapshot");
    let far = "2100-01-01T00:00:00Z".parse().expect("time");
    let SyncOutcome::Scheduled(result) = sync(&snapshot, "ns1", "p1", far).expect("schedules") else {
        panic!("skipped")
    };
    assert_eq!(result.schedule.totals, [80]);
}
