//! The live differential check's generator and judge: a seeded random fleet of bare
//! ManagedClusters (labels, claims, Available conditions OCM's taint controller turns into taints,
//! user taints, allocatable/capacity), cluster sets, bindings and AddOnPlacementScores, random
//! Placements over them, and the comparison of OCM's PlacementDecisions with `simulate`'s answer.
//!
//! Everything here is pure: the same seed gives the same objects, so a failure is replayed with
//! the seed the check prints. [`live`] writes the objects to a real hub, lets OCM's placement
//! controller decide and compares; [`tally`] counts the outcomes by feature.
//!
//! What the generator avoids, because the answer would then depend on timing rather than on the
//! objects:
//! - toleration seconds that expire while the test runs: only none, 0 (already expired) and 10 h;
//! - a negative `numberOfClusters`, which crashes OCM's controller;
//! - a negative Steady weight, with which OCM flips a placement's decisions on every sync;
//! - Balance on a placement whose AddOn prioritizer reads an expired score: the expiry makes the
//!   sync return a Warning, which OCM retries with backoff for minutes, and each retry would re-read
//!   the other placements' decisions at a moment of its own choosing.

pub mod live;
pub mod tally;

use std::collections::BTreeMap;

use serde_json::{Value, json};

mod answer;
mod fleet;
mod placements;

pub use answer::*;
pub use fleet::*;
pub use placements::*;

/// The score object our agent publishes (always valid here, or never expiring).
pub const SCORE: &str = "resource-usage-score";
/// A second score object, expired in some clusters (OCM then reports a Warning and counts 0).
pub const STALE_SCORE: &str = "stale-usage-score";
/// A score object no cluster has.
pub const MISSING_SCORE: &str = "missing-score";
/// Score names of [`SCORE`] (the agent's built-in names).
pub const SCORE_NAMES: &[&str] = &[
    "cpuNodeAvailable",
    "cpuClusterAvailable",
    "memNodeAvailable",
    "memClusterAvailable",
    "gpuClusterAvailable",
    "cpuAvailable",
    "memAvailable",
];

const GROUP: &str = "cluster.open-cluster-management.io";
const CLUSTERSET_LABEL: &str = "cluster.open-cluster-management.io/clusterset";
const UNREACHABLE: &str = "cluster.open-cluster-management.io/unreachable";
const UNAVAILABLE: &str = "cluster.open-cluster-management.io/unavailable";

/// The exclusive cluster sets the fleet is spread over, one more selecting by label, one empty.
pub const EXCLUSIVE_SETS: &[&str] = &["set-a", "set-b", "set-c"];
const GOLD_SET: &str = "set-gold";
const EMPTY_SET: &str = "set-empty";
/// A set name that bindings and placements mention but that does not exist.
const MISSING_SET: &str = "set-missing";

/// Namespaces for placements and what each binds.
const NAMESPACES: &[(&str, &[&str])] = &[
    ("diff-main", &["set-a", "set-b", "set-c", GOLD_SET]),
    ("diff-partial", &["set-a", GOLD_SET, EMPTY_SET]),
    ("diff-dangling", &["set-b", MISSING_SET]),
    ("diff-unbound", &[]),
];

const ENVS: &[&str] = &["prod", "staging", "dev"];
const REGIONS: &[&str] = &["us-east-1", "us-west-2", "eu-central-1", "ap-south-1"];
const TIERS: &[&str] = &["gold", "silver", "bronze"];
const TEAMS: &[&str] = &["team-a", "team-b", "team-c"];
const PLATFORMS: &[&str] = &["AWS", "GCP", "Azure", "BareMetal"];
const PRODUCTS: &[&str] = &["OpenShift", "EKS", "GKE", "AKS"];
const VERSIONS: &[&str] = &["v1.28.9", "v1.29.4", "v1.30.2", "v1.31.0", "v1.32.1"];
const NAME_WORDS: &[&str] = &["alpha", "bravo", "delta", "edge", "core", "spoke"];
const CPUS: &[&str] = &["4", "8", "16", "3800m", "7500m", "12", "32", "2"];
const MEMORIES: &[&str] = &[
    "16Gi",
    "32Gi",
    "64Gi",
    "31Gi",
    "128Gi",
    "65536Mi",
    "17179869184",
    "8G",
];
const USER_TAINTS: &[(&str, &[&str])] = &[
    ("dedicated", &["ml", "batch"]),
    ("maintenance", &[""]),
    ("example.com/gpu-only", &["true"]),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> jiff::Timestamp {
        "2026-11-23T12:00:00Z".parse().expect("time")
    }

    #[test]
    fn the_same_seed_gives_the_same_fleet_and_placements() {
        let make = |seed| {
            let mut rng = Rng::new(seed);
            let fleet = Fleet::generate(&mut rng, 16, now());
            let placements: Vec<Value> = (0..20)
                .map(|i| placement(&mut rng, &fleet, &format!("p-{i:03}")))
                .collect();
            (
                fleet
                    .clusters
                    .iter()
                    .map(|c| c.object.clone())
                    .collect::<Vec<_>>(),
                placements,
            )
        };
        assert_eq!(make(7), make(7));
        assert_ne!(make(7), make(8));
    }

    #[test]
    fn placements_cover_what_the_check_is_for() {
        let mut rng = Rng::new(42);
        let fleet = Fleet::generate(&mut rng, 16, now());
        let text: String = (0..200)
            .map(|i| placement(&mut rng, &fleet, &format!("p-{i:03}")).to_string())
            .collect();
        for needle in [
            "celExpressions",
            "scores(",
            "matchExpressions",
            "DoesNotExist",
            "NotIn",
            "claimSelector",
            "tolerationSeconds",
            "NoSelectIfNew",
            "\"Exact\"",
            "ResourceAllocatableCPU",
            "ResourceAllocatableMemory",
            "Steady",
            "Balance",
            STALE_SCORE,
            "decisionGroups",
            "clustersPerDecisionGroup",
            "numberOfClusters",
            "clusterSets",
            "math.greatest",
        ] {
            assert!(text.contains(needle), "200 placements never use {needle}");
        }
        // Every taint the taint controller can add, and clusters it leaves alone.
        assert!(fleet.clusters.iter().any(|c| c.ocm_taint == Some(UNREACHABLE)));
        assert!(fleet.clusters.iter().any(|c| c.ocm_taint == Some(UNAVAILABLE)));
        assert!(fleet.clusters.iter().any(|c| c.ocm_taint.is_none()));
    }

    /// What the real API server would refuse is a generator bug: check every object against
    /// OCM's CRD schemas (objects with their status merged in) before a control plane runs them.
    #[test]
    fn generated_objects_pass_ocms_crd_schemas() {
        use ocm_score_kube_double::crd::{SchemaValidator, upstream_crds};
        let crds = upstream_crds().expect("upstream CRDs");
        let validator = |kind: &str| {
            let crd = crds.iter().find(|c| c.kind == kind).expect("CRD of kind");
            let version = crd.versions.iter().find(|v| v.served).expect("served version");
            SchemaValidator::new(crd, version).expect("schema")
        };
        let check = |kind: &str, objects: Vec<Value>| {
            let v = validator(kind);
            for o in objects {
                assert_eq!(v.errors(&o), Vec::new(), "{kind} refused:\n{o:#}");
            }
        };
        for seed in 0..5 {
            let mut rng = Rng::new(seed);
            let fleet = Fleet::generate(&mut rng, 20, now());
            check(
                "ManagedCluster",
                fleet
                    .clusters
                    .iter()
                    .map(|c| {
                        let mut o = c.object.clone();
                        o["status"] = c.status.clone();
                        o
                    })
                    .collect(),
            );
            check(
                "AddOnPlacementScore",
                fleet
                    .scores
                    .iter()
                    .map(|s| {
                        let mut o = s.object.clone();
                        o["status"] = s.status.clone();
                        o
                    })
                    .collect(),
            );
            check("ManagedClusterSet", fleet.cluster_sets.clone());
            check("ManagedClusterSetBinding", fleet.bindings.clone());
            check(
                "Placement",
                (0..200)
                    .map(|i| {
                        let mut p = placement(&mut rng, &fleet, &format!("p-{i:03}"));
                        // The live check's forced misconfigurations must reach OCM's scheduler too.
                        if i % 10 == 9 {
                            misconfigure(&mut rng, &mut p);
                        }
                        p
                    })
                    .collect(),
            );
        }
    }

    #[test]
    fn stale_scores_never_meet_balance() {
        let mut rng = Rng::new(3);
        let fleet = Fleet::generate(&mut rng, 16, now());
        for i in 0..500 {
            let p = placement(&mut rng, &fleet, &format!("p-{i}"));
            let configs = p["spec"]["prioritizerPolicy"]["configurations"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            assert!(
                !configs.iter().any(|c| c["scoreCoordinate"]["builtIn"] == "Steady"
                    && c["weight"].as_i64().is_some_and(|w| w < 0)),
                "a negative Steady weight never settles: {p}"
            );
            if configs
                .iter()
                .any(|c| c["scoreCoordinate"]["addOn"]["resourceName"] == STALE_SCORE)
            {
                let balance: Vec<&Value> = configs
                    .iter()
                    .filter(|c| c["scoreCoordinate"]["builtIn"] == "Balance")
                    .collect();
                assert!(
                    !balance.is_empty() && balance.iter().all(|c| c["weight"] == 0),
                    "{p}"
                );
            }
        }
    }

    #[test]
    fn answers_compare_sets_groups_and_conditions() {
        let placement = json!({"status": {"numberOfSelectedClusters": 2, "conditions": [
            {"type": "PlacementMisconfigured", "status": "False", "reason": "Succeedconfigured", "message": "Placement configurations check pass"},
            {"type": "PlacementSatisfied", "status": "True", "reason": "AllDecisionsScheduled", "message": "All cluster decisions scheduled"},
        ]}});
        let pd = json!({"metadata": {"labels": {
            "cluster.open-cluster-management.io/decision-group-index": "0",
            "cluster.open-cluster-management.io/decision-group-name": ""}},
            "status": {"decisions": [{"clusterName": "b"}, {"clusterName": "a"}]}});
        assert!(ocm_decided(&placement, &[&pd]));
        let ocm = ocm_answer(&placement, &[&pd]);
        let sim = simulate_answer(&json!({"decisions": ["a", "b"], "misconfigured": false, "explain": {"conditions": [
            {"type": "PlacementSatisfied", "status": "True", "reason": "AllDecisionsScheduled", "message": "All cluster decisions scheduled"}]}}))
        .expect("answer");
        assert_eq!(differences(&ocm, &sim), Vec::<String>::new());
        let other = simulate_answer(&json!({"decisions": ["a"], "misconfigured": false, "explain": {"conditions": [
            {"type": "PlacementSatisfied", "status": "True", "reason": "AllDecisionsScheduled", "message": "All cluster decisions scheduled"}]}}))
        .expect("answer");
        let diff = differences(&ocm, &other);
        assert_eq!(diff.len(), 2, "{diff:?}");
        assert!(diff[0].starts_with("decisions:"), "{diff:?}");
    }
}
