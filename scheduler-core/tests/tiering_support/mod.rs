//! A small world for TieredPlacement tests: clusters, sets, scores and an OCM stand-in that
//! applies each plan's child and writes the predicted decisions (what OCM would do; the
//! differential property checks the prediction against the engine on the rendered child).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use ocm_score_api::crd::tiered_placement::MANIFEST_WORK_REPLICA_SET_LABEL;
use ocm_score_api::crd::tiered_placement::{TieredPlacement, TieredPlacementSpec, TieredPlacementStatus};
use ocm_score_api::{
    AddOnPlacementScore, AddOnPlacementScoreItem, AddOnPlacementScoreStatus, ClusterDecision, ManagedCluster,
    ManagedClusterSet, ManagedClusterSetBinding, ManagedClusterSetBindingSpec, ManifestWork, ObjectMeta,
    Placement, PlacementDecision, PlacementDecisionStatus, Taint, Time, well_known,
};
use ocm_score_scheduler::placement::{HubObjects, HubSnapshot};
use ocm_score_scheduler::tiering::{Plan, WorkIndex, plan};
use std::collections::BTreeMap;

pub const NS: &str = "apps";
pub const NAME: &str = "app";
pub const UNREACHABLE: &str = "cluster.open-cluster-management.io/unreachable";

pub fn t0() -> Timestamp {
    "2026-11-22T10:00:00Z".parse().unwrap()
}

pub fn at(secs: i64) -> Timestamp {
    t0() + SignedDuration::from_secs(secs)
}

pub fn at_ns(secs: i64, nanos: i64) -> Timestamp {
    t0() + SignedDuration::from_secs(secs) + SignedDuration::from_nanos(nanos)
}

fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: namespace.map(str::to_string),
        name: Some(name.to_string()),
        ..ObjectMeta::default()
    }
}

#[derive(Clone, Default)]
pub struct World {
    pub clusters: BTreeMap<String, ManagedCluster>,
    pub sets: Vec<String>,
    pub scores: BTreeMap<String, AddOnPlacementScore>,
    pub child: Option<Placement>,
    pub decided: Vec<String>,
    /// ManifestWorks by cluster (the `web` ManifestWorkReplicaSet of namespace `apps`).
    pub works: BTreeMap<String, ManifestWork>,
    /// Play OCM's ManifestWorkReplicaSet controller: a work on each decided cluster, applied
    /// when the cluster is first decided, with `ready` replicas of 1 (0 when not listed).
    pub follow: bool,
    pub ready: BTreeMap<String, i64>,
}

/// The work the `web` ManifestWorkReplicaSet puts on `cluster`: applied at `applied_at`, with
/// `WellKnownStatus` feedback `(ready, replicas)` when given.
pub fn work(cluster: &str, applied_at: Timestamp, feedback: Option<(i64, i64)>) -> ManifestWork {
    let values = match feedback {
        Some((ready, replicas)) => serde_json::json!([
            {"name": "ReadyReplicas", "fieldValue": {"type": "Integer", "integer": ready}},
            {"name": "Replicas", "fieldValue": {"type": "Integer", "integer": replicas}},
        ]),
        None => serde_json::json!([]),
    };
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": "web", "namespace": cluster,
            "labels": {MANIFEST_WORK_REPLICA_SET_LABEL: format!("{NS}.web")}},
        "spec": {},
        "status": {
            "conditions": [{"type": "Applied", "status": "True", "reason": "AppliedManifestWorkComplete",
                "message": "", "lastTransitionTime": Time(applied_at)}],
            "resourceStatus": {"manifests": [{
                "resourceMeta": {"ordinal": 0, "group": "apps", "version": "v1", "kind": "Deployment",
                    "resource": "deployments", "name": "web", "namespace": "web"},
                "conditions": [],
                "statusFeedback": {"values": values}}]}
        }
    }))
    .expect("a ManifestWork")
}

impl World {
    /// Adds exclusive cluster sets (bound to the namespace) and their clusters.
    pub fn set(mut self, set: &str, clusters: &[&str]) -> Self {
        self.sets.push(set.to_string());
        for c in clusters {
            let mut m = meta(None, c);
            m.labels = Some(BTreeMap::from([(
                well_known::CLUSTER_SET_LABEL.to_string(),
                set.to_string(),
            )]));
            self.clusters.insert(
                c.to_string(),
                ManagedCluster {
                    metadata: m,
                    ..ManagedCluster::default()
                },
            );
        }
        self
    }

    pub fn taint(&mut self, cluster: &str, key: &str, added: Timestamp) {
        let c = self.clusters.get_mut(cluster).expect("cluster");
        c.spec.taints.retain(|t| t.key != key);
        c.spec.taints.push(Taint {
            key: key.to_string(),
            value: None,
            effect: "NoSelect".to_string(),
            time_added: Some(Time(added)),
        });
    }

    pub fn untaint(&mut self, cluster: &str) {
        self.clusters
            .get_mut(cluster)
            .expect("cluster")
            .spec
            .taints
            .clear();
    }

    /// Sets score `name` of `resource-usage-score` on `cluster`, valid until `until`.
    pub fn score(&mut self, cluster: &str, name: &str, value: i32, until: Option<Timestamp>) {
        let entry = self
            .scores
            .entry(cluster.to_string())
            .or_insert_with(|| AddOnPlacementScore {
                metadata: meta(Some(cluster), well_known::RESOURCE_USAGE_SCORE),
                status: Some(AddOnPlacementScoreStatus::default()),
            });
        let status = entry.status.as_mut().expect("status");
        status.scores.retain(|s| s.name != name);
        status.scores.push(AddOnPlacementScoreItem {
            name: name.to_string(),
            value,
        });
        status.valid_until = until.map(Time);
    }

    /// Sets the ready replicas (of 1) on `cluster`, in its work too when it has one.
    pub fn set_ready(&mut self, cluster: &str, ready: i64) {
        self.ready.insert(cluster.to_string(), ready);
        if let Some(w) = self.works.get_mut(cluster) {
            let applied = w.status.as_ref().unwrap().conditions[0].last_transition_time.0;
            *w = work(cluster, applied, Some((ready, 1)));
        }
    }

    /// With `follow`: works appear on newly decided clusters (applied at `now`) and go from
    /// clusters no longer decided.
    pub fn sync_works(&mut self, now: Timestamp) {
        if !self.follow {
            return;
        }
        self.works.retain(|c, _| self.decided.contains(c));
        for c in &self.decided {
            let ready = self.ready.get(c).copied().unwrap_or(0);
            self.works
                .entry(c.clone())
                .or_insert_with(|| work(c, now, Some((ready, 1))));
        }
    }

    pub fn snapshot(&self) -> HubSnapshot {
        let mut objects = HubObjects {
            clusters: self.clusters.values().cloned().collect(),
            cluster_sets: self
                .sets
                .iter()
                .map(|s| ManagedClusterSet {
                    metadata: meta(None, s),
                    ..ManagedClusterSet::default()
                })
                .collect(),
            bindings: self
                .sets
                .iter()
                .map(|s| ManagedClusterSetBinding {
                    metadata: meta(Some(NS), s),
                    spec: ManagedClusterSetBindingSpec {
                        cluster_set: s.clone(),
                        ..Default::default()
                    },
                    ..ManagedClusterSetBinding::default()
                })
                .collect(),
            scores: self.scores.values().cloned().collect(),
            ..HubObjects::default()
        };
        if let Some(child) = &self.child {
            let name = child.metadata.name.clone().unwrap_or_default();
            objects.placements.push(child.clone());
            let mut m = meta(Some(NS), &format!("{name}-decision-1"));
            m.labels = Some(BTreeMap::from([(
                well_known::PLACEMENT_LABEL.to_string(),
                name.clone(),
            )]));
            objects.decisions.push(PlacementDecision {
                metadata: m,
                status: Some(PlacementDecisionStatus {
                    decisions: self
                        .decided
                        .iter()
                        .map(|c| ClusterDecision {
                            cluster_name: c.clone(),
                            reason: String::new(),
                            score: None,
                        })
                        .collect(),
                    ..Default::default()
                }),
            });
        }
        HubSnapshot::new(objects).expect("snapshot")
    }
}

/// A TieredPlacement evolving over time against a world.
pub struct Scenario {
    pub tp: TieredPlacement,
    pub world: World,
    pub last: Option<Plan>,
}

impl Scenario {
    pub fn new(spec: TieredPlacementSpec, world: World) -> Self {
        let mut m = meta(Some(NS), NAME);
        m.uid = Some("0b5e4c1e-0000-4000-8000-000000000001".into());
        m.generation = Some(1);
        Scenario {
            tp: TieredPlacement {
                metadata: m,
                spec,
                status: None,
            },
            world,
            last: None,
        }
    }

    /// Plans at `now` without applying anything.
    pub fn peek(&self, now: Timestamp) -> Plan {
        self.peek_with(self.tp.status.as_ref(), now)
    }

    /// Plans at `now` from `prior` (a restarted controller reads the stored status).
    pub fn peek_with(&self, prior: Option<&TieredPlacementStatus>, now: Timestamp) -> Plan {
        let tp = TieredPlacement {
            metadata: self.tp.metadata.clone(),
            spec: self.tp.spec.clone(),
            status: prior.cloned(),
        };
        plan(
            &tp,
            &self.world.snapshot(),
            &WorkIndex::new(self.world.works.values()),
            now,
        )
    }

    /// Plans at `now`, then plays the controller (status, child) and OCM (decisions, and the
    /// ManifestWorkReplicaSet's works when the world follows the child).
    pub fn step(&mut self, now: Timestamp) -> Plan {
        let p = self.peek(now);
        self.apply(&p);
        self.world.sync_works(now);
        p
    }

    pub fn apply(&mut self, p: &Plan) {
        self.tp.status = Some(p.status.clone());
        if let Some(child) = &p.child {
            self.world.child = Some(child.clone());
            self.world.decided = p.predicted.clone();
        }
        self.last = Some(p.clone());
    }

    pub fn status(&self) -> &TieredPlacementStatus {
        self.tp.status.as_ref().expect("planned")
    }

    pub fn active(&self) -> Vec<String> {
        self.status().active_tiers.clone()
    }

    pub fn condition(&self, type_: &str) -> (String, String) {
        self.status()
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status.clone(), c.reason.clone()))
            .unwrap_or_else(|| panic!("no condition {type_}: {:?}", self.status().conditions))
    }

    /// Bumps the generation, as the API server does on a spec change.
    pub fn edit(&mut self, f: impl FnOnce(&mut TieredPlacementSpec)) {
        f(&mut self.tp.spec);
        let g = self.tp.metadata.generation.unwrap_or(1);
        self.tp.metadata.generation = Some(g + 1);
    }
}

pub fn spec_yaml(yaml: &str) -> TieredPlacementSpec {
    serde_norway::from_str(yaml).expect("spec YAML")
}

/// What OCM selects for `child` in `world` (the engine on the rendered child, CEL included).
pub fn ocm_selects(world: &World, child: &ocm_score_api::Placement, now: Timestamp) -> Vec<String> {
    let snapshot = world.snapshot();
    let c = ocm_score_scheduler::placement::candidates::candidates(&snapshot, child).unwrap();
    let r = ocm_score_scheduler::placement::schedule(&snapshot, child, &c.clusters, now).unwrap();
    let mut names: Vec<String> = r
        .selected
        .iter()
        .map(|id| snapshot.cluster_name(*id).to_string())
        .collect();
    names.sort();
    names
}
