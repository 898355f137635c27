//! The fuzz targets' checks, one module per target (`fuzz_targets/<target>.rs` calls its
//! `check`), and what several share: a small fleet to evaluate CEL against.
//!
//! The main workspace's `tests/tests/fuzz_seeds.rs` includes this file by path and runs every seed
//! through the same checks on stable Rust, so these modules use only crates that package has
//! (no libfuzzer-sys), and reach each other through `super::`, not the crate's name.

pub mod cel;
pub mod deployment_config;
pub mod duration;
pub mod kubelet_metrics;
pub mod prometheus_response;
pub mod quantity;
pub mod simulate_snapshot;

use ocm_score_scheduler::placement::{HubObjects, HubSnapshot};
use serde_json::{Value, json};
use std::sync::LazyLock;

/// [`small_fleet_objects`] as a snapshot.
pub fn small_fleet() -> &'static HubSnapshot {
    static FLEET: LazyLock<HubSnapshot> =
        LazyLock::new(|| HubSnapshot::new(small_fleet_objects().clone()).expect("the fixed fleet is valid"));
    &FLEET
}

/// Three ManagedClusters with the labels, claims and AddOnPlacementScores the conformance CEL
/// cases read (`version`, `zone`, `mem`, `addr`, `env`, `owner`; scores of `resource-usage-score`),
/// one of them with none, so both the found and the missing branches run.
pub fn small_fleet_objects() -> &'static HubObjects {
    static OBJECTS: LazyLock<HubObjects> = LazyLock::new(|| {
        let clusters = [
            (
                "alpha-1",
                "1.29.4",
                "us-east-1a",
                "64Gi",
                "10.0.3.7",
                "prod",
                Some(60),
            ),
            (
                "bravo-2",
                "1.31.0",
                "eu-west-1b",
                "128Gi",
                "192.168.1.20",
                "staging",
                Some(-40),
            ),
            (
                "charlie-3",
                "1.26.15",
                "ap-east-2c",
                "750Mi",
                "172.31.255.1",
                "dev",
                None,
            ),
        ];
        let mut objects = HubObjects::default();
        for (name, version, zone, mem, addr, env, score) in clusters {
            objects.clusters.push(decode(json!({
                "apiVersion": "cluster.open-cluster-management.io/v1",
                "kind": "ManagedCluster",
                "metadata": {"name": name, "labels": {
                    "version": version, "zone": zone, "mem": mem, "addr": addr, "env": env,
                    "owner": "team-a",
                    "cluster.open-cluster-management.io/clusterset": "global",
                }},
                "spec": {"hubAcceptsClient": true},
                "status": {"clusterClaims": [{"name": "platform.open-cluster-management.io", "value": "AWS"}]},
            })));
            if let Some(value) = score {
                objects.scores.push(decode(json!({
                    "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
                    "kind": "AddOnPlacementScore",
                    "metadata": {"name": "resource-usage-score", "namespace": name},
                    "status": {
                        "scores": [{"name": "cpuAvailable", "value": value}, {"name": "memAvailable", "value": 100}],
                        "validUntil": "2099-01-01T00:00:00Z",
                    },
                })));
            }
        }
        objects
    });
    &OBJECTS
}

fn decode<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("the fixed fleet decodes")
}
