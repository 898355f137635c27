//! Tests of `snapshot.rs`, kept beside it so the code reads without them.

use super::*;
use ocm_score_api::{AddOnPlacementScoreStatus, ManagedClusterStatus, ObjectMeta, Quantity};

fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: namespace.map(str::to_string),
        name: Some(name.to_string()),
        ..ObjectMeta::default()
    }
}

fn score(namespace: &str, name: &str) -> AddOnPlacementScore {
    AddOnPlacementScore {
        metadata: meta(Some(namespace), name),
        status: Some(AddOnPlacementScoreStatus::default()),
    }
}

#[test]
fn the_first_repeated_score_in_input_order_is_reported() {
    let objects = HubObjects {
        scores: vec![
            score("b", "s"),
            score("a", "s"),
            score("b", "t"),
            score("a", "s"),
            score("b", "s"),
        ],
        ..HubObjects::default()
    };
    assert_eq!(
        HubSnapshot::new(objects).err(),
        Some(PlacementError::DuplicateObject {
            kind: "AddOnPlacementScore",
            name: "a/s".into(),
        })
    );
}

#[test]
fn duplicates_come_before_bad_quantities_and_quantities_go_in_name_order() {
    let cluster = |name: &str, cpu: &str| ManagedCluster {
        metadata: meta(None, name),
        status: Some(ManagedClusterStatus {
            allocatable: BTreeMap::from([("cpu".to_string(), Quantity(cpu.into()))]),
            ..ManagedClusterStatus::default()
        }),
        ..ManagedCluster::default()
    };
    let bad = HubObjects {
        clusters: vec![cluster("c", "x"), cluster("b", "y"), cluster("a", "1")],
        ..HubObjects::default()
    };
    assert!(matches!(
        HubSnapshot::new(bad.clone()),
        Err(PlacementError::InvalidQuantity { name, .. }) if name == "b"
    ));
    let mut duplicated = bad;
    duplicated.scores = vec![score("a", "s"), score("a", "s")];
    assert!(matches!(
        HubSnapshot::new(duplicated),
        Err(PlacementError::DuplicateObject {
            kind: "AddOnPlacementScore",
            ..
        })
    ));
}

#[test]
fn a_cluster_reads_back_as_it_was_given() {
    let mut cluster = ManagedCluster {
        metadata: ObjectMeta {
            labels: Some(BTreeMap::from([("env".to_string(), "prod".to_string())])),
            ..meta(None, "c1")
        },
        ..ManagedCluster::default()
    };
    cluster.spec.taints.push(Taint {
        key: "k".into(),
        effect: "NoSelect".into(),
        ..Taint::default()
    });
    cluster.status = Some(ManagedClusterStatus {
        cluster_claims: vec![
            ocm_score_api::ManagedClusterClaim {
                name: "region".into(),
                value: "eu".into(),
            },
            ocm_score_api::ManagedClusterClaim {
                name: "region".into(),
                value: "us".into(),
            },
        ],
        ..ManagedClusterStatus::default()
    });
    let snapshot = HubSnapshot::new(HubObjects {
        clusters: vec![cluster.clone()],
        ..HubObjects::default()
    })
    .expect("valid");
    let id = snapshot.cluster_id("c1").expect("present");
    assert_eq!(snapshot.cluster_label(id, "env"), Some("prod"));
    assert_eq!(snapshot.claim_value(id, "region"), Some("us"));
    assert_eq!(snapshot.cluster_taints(id), cluster.spec.taints.as_slice());
    let json: serde_json::Value = serde_json::from_slice(snapshot.cluster_json(id)).expect("JSON");
    assert_eq!(json, serde_json::to_value(&cluster).expect("serializes"));
}

#[test]
fn a_snapshot_judging_expiry_at_its_build_keeps_what_was_in_force_then() {
    let second = |s: i64| jiff::Timestamp::from_second(s).expect("in range");
    let ns = |s: i64| i128::from(s) * 1_000_000_000;
    let mut valid = score("a", "s");
    if let Some(status) = valid.status.as_mut() {
        status.valid_until = Some(ocm_score_api::Time(second(100)));
    }
    let objects = HubObjects {
        clusters: vec![ManagedCluster {
            metadata: meta(None, "a"),
            ..ManagedCluster::default()
        }],
        scores: vec![valid],
        ..HubObjects::default()
    };
    let snapshot = HubSnapshot::new(objects).expect("a snapshot");
    let id = snapshot.cluster_id("a").expect("cluster a");
    let expired = |snapshot: &HubSnapshot, at: i64| {
        let entry = snapshot.score_entry_named(id, "s").expect("the score");
        snapshot.score_expired(entry, ns(at))
    };
    // As OCM reads it: in force at validUntil, expired 1 ns later.
    assert!(!expired(&snapshot, 100));
    assert!(
        snapshot
            .score_entry_named(id, "s")
            .is_some_and(|e| snapshot.score_expired(e, ns(100) + 1))
    );
    // Built at 50: in force later too (the cache drops it if the score expires unrenewed).
    let built_before = snapshot.clone().judging_expiry_at(second(50));
    assert!(!expired(&built_before, 500));
    // Built at 150, after it expired: expired for good, and asked earlier, judged then.
    let built_after = snapshot.judging_expiry_at(second(150));
    assert!(expired(&built_after, 150) && expired(&built_after, 500));
    assert!(!expired(&built_after, 90));
}
