//! `TieredPlacement` (`tiering.ocm-score.io/v1alpha1`): ordered cluster tiers with failover,
//! overflow and opt-in failback, steered through one ordinary OCM Placement (the "child").
//!
//! Unlike the OCM kinds beside it, this is our own kind, so it is declared with kube's
//! `CustomResource` derive and its CRD is generated from these types (the YAML under
//! `manifests/hub/crds/` is checked against them by `api/tests/crds.rs`).
//! Fields that embed OCM's own Placement structures (`tiers[].predicates`, `template`) are typed
//! with our OCM models; their schema keeps unknown fields, and the planner's validation
//! (`ocm_score_scheduler::tiering::validate`) plus the rendered child's check against the
//! upstream Placement CRD do the validation the API server cannot.
//!
//! The schema carries what a structural schema can say (enums, ranges, list lengths, patterns)
//! and, as `x-kubernetes-validations` CEL rules, the simple relations between fields (unique tier
//! names, `numberOfClusters` for Overflow, one of `fits` and `score`, exit not above enter), so the
//! API server refuses those naming the field. The planner's `validate` still checks all of them,
//! and the rest (durations, OCM's predicates), first: an invalid spec becomes
//! `Ready=False, reason=InvalidSpec` naming the field, and the child Placement is left as it was.

use crate::duration;
use crate::{ClusterPredicate, Condition, LabelSelector, PlacementSpec, Time};
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The API group of the kinds ocm-score owns.
pub const TIERING_GROUP: &str = "tiering.ocm-score.io";

/// Ordered tiers of clusters; the controller keeps one OCM Placement (the child) selecting from
/// the active tier(s).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "tiering.ocm-score.io",
    version = "v1alpha1",
    kind = "TieredPlacement",
    plural = "tieredplacements",
    shortname = "tp",
    namespaced,
    status = "TieredPlacementStatus",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"Mode","type":"string","jsonPath":".spec.mode"}"#,
    printcolumn = r#"{"name":"Active","type":"string","jsonPath":".status.activeTiers"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Failover-Fits","type":"string","jsonPath":".status.conditions[?(@.type==\"FailoverFits\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    crates(
        kube_core = "::kube_core",
        k8s_openapi = "::k8s_openapi",
        schemars = "::schemars",
        serde = "::serde",
        serde_json = "::serde_json"
    )
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "self.tiers.all(t, self.tiers.exists_one(u, u.name == t.name))",
        "message": "tier names must be unique",
        "fieldPath": ".tiers",
    },
    {
        "rule": "!has(self.mode) || self.mode != 'Overflow' || (has(self.numberOfClusters) && self.numberOfClusters >= 1)",
        "message": "mode Overflow needs numberOfClusters of at least 1",
        "fieldPath": ".numberOfClusters",
        "reason": "FieldValueRequired",
    },
]))]
pub struct TieredPlacementSpec {
    /// Name of the child Placement consumers read (default: the TieredPlacement's name).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement_name: Option<String>,
    /// `Failover`: exactly one tier is active. `Overflow`: tiers fill in order, cluster by cluster.
    #[serde(default)]
    pub mode: TieringMode,
    /// Clusters to select. Required for `Overflow`; in `Failover` omitted means every qualifying
    /// cluster of the active tier.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub number_of_clusters: Option<i32>,
    /// Order = preference. A cluster belongs to the first tier it matches.
    #[schemars(length(min = 1, max = 16))]
    pub tiers: Vec<Tier>,
    /// Rules on AddOnPlacementScores a cluster must meet to qualify; without them a cluster
    /// qualifies when OCM would find it feasible.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityPolicy>,
    /// What one placement puts on each selected cluster: the controller reserves it on every
    /// cluster the plan adds until that cluster's agent reports again (`status.reservations`),
    /// and a `fits` rule on the same shape credits it back on clusters already running it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadFootprint>,
    /// Copied into the child Placement: tolerations, prioritizerPolicy, decisionStrategy, and
    /// sortBy and scoreRateLimit (OCM api v1.3.0 hubs only) when set. It may not set clusterSets,
    /// predicates or numberOfClusters.
    #[serde(default)]
    #[schemars(schema_with = "placement_template_schema")]
    pub template: PlacementSpec,
    #[serde(default)]
    pub failback: FailbackPolicy,
    #[serde(default)]
    pub stabilization: Stabilization,
    /// Maintenance pin.
    #[serde(rename = "override", default, skip_serializing_if = "Option::is_none")]
    pub override_: Option<TierOverride>,
    /// Judge the workload on each selected cluster from its ManifestWorks: a cluster whose
    /// workload stays unhealthy for `tolerationSeconds` is failed for this TieredPlacement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_health: Option<WorkloadHealthPolicy>,
}

/// Where the workload's ManifestWorks are and what healthy means for them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadHealthPolicy {
    /// A ManifestWorkReplicaSet in the TieredPlacement's namespace: its works are labelled
    /// `work.open-cluster-management.io/manifestworkreplicaset=<namespace>.<name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_work_replica_set: Option<String>,
    /// Or: the ManifestWorks in the clusters' namespaces carrying these labels.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_work_selector: Option<LabelSelector>,
    /// The manifest whose status feedback is judged (default: the first Deployment).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<WorkResource>,
    /// What healthy means (default `wellKnown`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy: Option<HealthRule>,
    /// Unhealthy this long: failed for this TieredPlacement (default 300, at most 86400).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 86400))]
    pub toleration_seconds: Option<i32>,
    /// What happens to a failed cluster when its replacement is added.
    #[serde(default)]
    pub purge: PurgeMode,
    /// `Graciously`: the longest a failed cluster stays beside its replacement (default 600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 86400))]
    pub grace_period_seconds: Option<i32>,
}

/// One manifest of a ManifestWork, as the work agent reports it in `resourceStatus`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkResource {
    /// API group (empty: the core group).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub group: String,
    /// Plural resource name, e.g. `deployments`.
    #[schemars(length(min = 1))]
    pub resource: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[schemars(length(min = 1))]
    pub name: String,
}

/// At most one of `wellKnown` and `jsonPath`; neither means `wellKnown`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HealthRule {
    /// `ReadyReplicas >= Replicas > 0` from the `WellKnownStatus` feedback of a Deployment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub well_known: Option<WellKnownHealth>,
    /// An integer `JSONPaths` feedback value of at least `atLeast`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub json_path: Option<JsonPathHealth>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct WellKnownHealth {}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JsonPathHealth {
    /// The `name` of a `jsonPaths` entry of the work's feedback rules.
    #[schemars(length(min = 1))]
    pub name: String,
    /// At least 1: `0` would call a workload with no ready replica healthy.
    #[schemars(range(min = 1))]
    pub at_least: i64,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum PurgeMode {
    /// Drop the failed cluster in the plan that adds its replacement.
    Immediately,
    /// Keep the failed cluster until the replacement's workload is Healthy or
    /// `gracePeriodSeconds` passed: the number of serving copies never drops by our own move.
    #[default]
    Graciously,
    /// Keep the failed cluster until a human releases it with the
    /// `tiering.ocm-score.io/release` annotation.
    Never,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TieringMode {
    #[default]
    Failover,
    Overflow,
}

/// One tier: the clusters of `clusterSets` (bound to the namespace) that `predicates` select.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Tier {
    /// A DNS label, unique among the tiers.
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,
    /// Same meaning as `Placement.spec.clusterSets` (empty: every bound set).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_sets: Vec<String>,
    /// OCM ClusterPredicates, verbatim; OCM ORs them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "predicates_schema")]
    pub predicates: Vec<ClusterPredicate>,
    /// `Failover`: the tier is satisfied with at least this many qualifying clusters
    /// (default `numberOfClusters`, or 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub min_clusters: Option<i32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityPolicy {
    /// All rules must hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 8))]
    pub rules: Vec<CapacityRule>,
    /// A verdict change takes effect after it persisted this long (Go duration, at most 1h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub debounce: Option<String>,
    #[serde(default)]
    pub when_stale: WhenStale,
    /// `Disqualify`: how long a cluster's scores may be Unknown before it loses its verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stale_grace: Option<String>,
}

/// Exactly one of `fits` and `score`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "has(self.fits) != has(self.score)",
    "message": "set exactly one of fits and score",
}]))]
pub struct CapacityRule {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fits: Option<FitsRule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<ScoreRule>,
}

/// "The cluster fits at least N replicas of shape S": the `fits.<shape>` score of the
/// agent's `resource-usage-score`, decoded to replicas (`(value + 100) × scale`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.exitBelowReplicas) || self.exitBelowReplicas <= self.atLeastReplicas",
    "message": "exitBelowReplicas must not be above atLeastReplicas",
    "fieldPath": ".exitBelowReplicas",
}]))]
pub struct FitsRule {
    #[schemars(length(min = 1, max = 63))]
    pub shape: String,
    /// Enter threshold.
    #[schemars(range(min = 0))]
    pub at_least_replicas: i32,
    /// Leave threshold (default `atLeastReplicas`: no band).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub exit_below_replicas: Option<i32>,
    /// The shape's `scale` (replicas per score point; default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub scale: Option<i32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{
    "rule": "!has(self.exitBelow) || self.exitBelow <= self.atLeast",
    "message": "exitBelow must not be above atLeast",
    "fieldPath": ".exitBelow",
}]))]
pub struct ScoreRule {
    #[schemars(length(min = 1))]
    pub resource_name: String,
    #[schemars(length(min = 1))]
    pub score_name: String,
    /// Enter threshold.
    #[schemars(range(min = -100, max = 100))]
    pub at_least: i32,
    /// Leave threshold (default `atLeast - 20`, floored at -100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = -100, max = 100))]
    pub exit_below: Option<i32>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum WhenStale {
    /// An Unknown cluster keeps its last verdict (it can never *enter* on stale data).
    #[default]
    KeepLastVerdict,
    /// An Unknown cluster loses its verdict after `staleGrace`.
    Disqualify,
}

/// The footprint of one placement on each cluster it selects (the same manifest goes everywhere).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadFootprint {
    /// A WorkloadShape's name (the agent scores it as `fits.<shape>`).
    #[schemars(length(min = 1, max = 63))]
    pub shape: String,
    /// Replicas of the shape on each selected cluster.
    #[schemars(range(min = 1))]
    pub replicas_per_cluster: i32,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailbackPolicy {
    #[serde(default)]
    pub policy: FailbackMode,
    /// Preferred capacity must be healthy this long, continuously (default 15m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold_down: Option<String>,
    /// Cap of the relapse doubling (default 4h, at most 24h).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_hold_down: Option<String>,
    /// Overflow consolidation pace: swaps per `minDwell` (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub max_clusters_per_step: Option<i32>,
    /// Make-before-break on voluntary moves. Only `0s` is supported by this version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<String>,
    /// `Manual`: change to any new value to request one failback evaluation.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub trigger: String,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum FailbackMode {
    #[default]
    Never,
    Manual,
    Automatic,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Stabilization {
    /// No voluntary move sooner than this after any transition (default 5m).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_dwell: Option<String>,
    /// Above this many transitions in the trailing hour: `Frozen` for one hour (default 4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 9))]
    pub max_transitions_per_hour: Option<i32>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TierOverride {
    /// Failover: force this tier. Overflow: fill no further than this tier. Empty: no override.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub tier: String,
}

// ---------------------------------------------------------------------------------------------
// Status

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TieredPlacementStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Failover: one entry. Overflow: the tiers with selected clusters, in tier order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub active_tiers: Vec<String>,
    /// The first tier in the order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preferred_tier: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<ChildPlacementStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tiers: Vec<TierStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failback: Option<FailbackStatus>,
    /// Newest first, at most 10.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transitions: Vec<Transition>,
    /// Per-cluster capacity verdicts that carry memory (hysteresis, debounce, staleness), so a
    /// restarted controller continues exactly where the last one stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capacity: Option<CapacityState>,
    /// Voluntary moves are blocked until then (transition budget exceeded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frozen_until: Option<Time>,
    /// The `spec.workload` the selection in `placement.predicted` was reserved with: a later
    /// increase of `replicasPerCluster` reserves only the difference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadFootprint>,
    /// Capacity this placement took on clusters whose agents have not reported since it was
    /// taken, sorted by cluster. Other TieredPlacements see the clusters' `fits` scores minus
    /// these; the controller rebuilds its ledger from them after a restart.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<Reservation>,
    /// Per-cluster workload verdicts with their clocks, and the clusters kept beside their
    /// replacements (`spec.workloadHealth`, `failback.overlap`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload_health: Option<WorkloadHealthStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadHealthStatus {
    /// Sorted by cluster; clusters without a work and without a failure are not listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clusters: Vec<ClusterWorkloadHealth>,
    /// Clusters the child keeps selecting beside the plan's choice, sorted by cluster.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retained: Vec<RetainedCluster>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum WorkloadState {
    /// No work, not applied yet, progressing, or no feedback yet.
    #[default]
    Unknown,
    Healthy,
    Unhealthy,
    /// Unhealthy for `tolerationSeconds`: excluded for this TieredPlacement.
    Failed,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterWorkloadHealth {
    pub cluster: String,
    #[serde(default)]
    pub state: WorkloadState,
    /// Healthy, Unhealthy, Unknown: since then. Failed: failed then (hold-down runs from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// The workload was Healthy on this cluster at some point (an Unhealthy stretch then counts
    /// from its first observation, not from when the work was applied).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub was_healthy: bool,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RetainedCluster {
    pub cluster: String,
    /// Dropped then at the latest; absent: kept until released by a human (`purge: Never`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Time>,
    /// The clusters that replaced it: once each of them still chosen is Healthy, it is dropped.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub awaiting: Vec<String>,
    pub reason: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ChildPlacementStatus {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number_of_selected_clusters: Option<i32>,
    /// The child's `PlacementSatisfied` condition status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub satisfied: Option<String>,
    /// What the planner expects OCM to select, sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub predicted: Vec<String>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TierState {
    Active,
    #[default]
    Standby,
    Unavailable,
    Recovering,
    Quarantined,
    Unknown,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TierStatus {
    pub name: String,
    #[serde(default)]
    pub state: TierState,
    /// Clusters passing cluster sets, predicates, taints and tolerations (OCM-exact).
    #[serde(default)]
    pub feasible: i32,
    /// Feasible clusters that also pass the capacity rules.
    #[serde(default)]
    pub qualifying: i32,
    /// Clusters of this tier the plan selects.
    #[serde(default)]
    pub selected: i32,
    /// Failover: satisfied-for-entry since. Overflow: has had unused qualifying clusters since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub healthy_since: Option<Time>,
    /// Relapses (forced failovers off this tier after a failback to it); doubles the hold-down.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub penalty: i32,
    /// With `spec.workload`: replicas this tier's clusters outside the current selection would
    /// take if the selected clusters failed now: the clusters whose `fits.<shape>`, less the
    /// other placements' reservations, holds `replicasPerCluster`, times `replicasPerCluster`,
    /// capped at what the workload needs (docs/fits-and-reservations.md, "Failover headroom").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headroom_replicas: Option<i32>,
    /// When `penalty` last changed (quarantine and decay are measured from it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub penalty_since: Option<Time>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effective_hold_down: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failback_eligible_at: Option<Time>,
}

fn is_zero(v: &i32) -> bool {
    *v == 0
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailbackStatus {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub observed_trigger: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending: Option<PendingFailback>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingFailback {
    pub from: String,
    pub to: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eligible_at: Option<Time>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum TransitionKind {
    Initial,
    Failover,
    Overflow,
    Contract,
    Failback,
    Override,
    SpecChange,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Transition {
    pub time: Time,
    pub kind: TransitionKind,
    #[serde(default)]
    pub from: Vec<String>,
    #[serde(default)]
    pub to: Vec<String>,
    pub reason: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CapacityState {
    /// Clusters whose effective verdict is "qualifies", sorted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub qualified: Vec<String>,
    /// Raw verdict changes waiting out the debounce.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<PendingVerdict>,
    /// Clusters whose scores are Unknown, and since when.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stale: Vec<StaleSince>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PendingVerdict {
    pub cluster: String,
    /// The verdict that takes effect at `since + debounce`.
    pub qualified: bool,
    pub since: Time,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StaleSince {
    pub cluster: String,
    pub since: Time,
}

/// Replicas of a shape a placement put on a cluster, not yet in the cluster's reported scores.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    pub cluster: String,
    pub shape: String,
    #[schemars(range(min = 1))]
    pub replicas: i32,
    /// Released by the first score report the controller observes at or after
    /// `createdAt + settle`.
    pub created_at: Time,
    /// Released then at the latest (the TTL).
    pub expires_at: Time,
    #[serde(default)]
    pub state: ReservationState,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum ReservationState {
    /// Deducted from the cluster's reported capacity until released.
    #[default]
    InFlight,
}

// ---------------------------------------------------------------------------------------------
// Schemas of the embedded OCM structures

fn preserved_object(description: &str) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "description": description,
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

fn placement_template_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    preserved_object(
        "Fields copied into the child Placement's spec (tolerations, prioritizerPolicy, \
         decisionStrategy; sortBy and scoreRateLimit when set), as in Placement.spec of \
         cluster.open-cluster-management.io/v1beta1.",
    )
}

fn predicates_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "array",
        "description": "OCM ClusterPredicates (Placement.spec.predicates), verbatim.",
        "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
    })
}

// ---------------------------------------------------------------------------------------------
// Validation: the rules the schema cannot express

/// One reason a spec is invalid, naming the field (`spec.tiers[1].name`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("field {field}: {message}")]
pub struct SpecError {
    pub field: String,
    pub message: String,
}

impl SpecError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Upper bounds of the timing knobs.
pub const MAX_HOLD_DOWN: Duration = Duration::from_secs(24 * 3600);
pub const MAX_DEBOUNCE: Duration = Duration::from_secs(3600);
pub const MAX_TIERS: usize = 16;

/// The defaults of the timing knobs.
pub const DEFAULT_HOLD_DOWN: Duration = Duration::from_secs(15 * 60);
pub const DEFAULT_MAX_HOLD_DOWN: Duration = Duration::from_secs(4 * 3600);
pub const DEFAULT_MIN_DWELL: Duration = Duration::from_secs(5 * 60);
pub const DEFAULT_STALE_GRACE: Duration = Duration::from_secs(5 * 60);
pub const DEFAULT_MAX_TRANSITIONS_PER_HOUR: i32 = 4;
/// The score object a `fits` rule reads (the agent's).
pub const FITS_RESOURCE_NAME: &str = crate::well_known::RESOURCE_USAGE_SCORE;

/// The spec's durations and defaults, resolved once validation passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Timings {
    pub hold_down: Duration,
    pub max_hold_down: Duration,
    pub min_dwell: Duration,
    pub debounce: Duration,
    pub stale_grace: Duration,
    pub max_transitions_per_hour: i32,
    pub max_clusters_per_step: usize,
    /// `failback.overlap`: how long clusters left by a voluntary move stay at most.
    pub overlap: Duration,
}

/// The label OCM's ManifestWorkReplicaSet controller puts on each work it creates, with the
/// value `<namespace>.<name>`.
pub const MANIFEST_WORK_REPLICA_SET_LABEL: &str = "work.open-cluster-management.io/manifestworkreplicaset";
/// Annotation on a TieredPlacement: comma-separated clusters whose retained entries a human
/// releases (`purge: Never`); `*` releases every one.
pub const RELEASE_ANNOTATION: &str = "tiering.ocm-score.io/release";
pub const DEFAULT_TOLERATION_SECONDS: i32 = 300;
pub const DEFAULT_GRACE_PERIOD_SECONDS: i32 = 600;
pub const MAX_WORKLOAD_SECONDS: i32 = 86_400;
/// The longest `failback.overlap`.
pub const MAX_OVERLAP: Duration = Duration::from_secs(24 * 3600);

impl WorkloadHealthPolicy {
    /// `tolerationSeconds` with its default.
    pub fn toleration(&self) -> Duration {
        seconds(self.toleration_seconds.unwrap_or(DEFAULT_TOLERATION_SECONDS))
    }

    /// How long a failed cluster is kept beside its replacement; `None`: until released.
    /// `Immediately` keeps it for no time at all.
    pub fn grace(&self) -> Option<Duration> {
        match self.purge {
            PurgeMode::Immediately => Some(Duration::ZERO),
            PurgeMode::Graciously => Some(seconds(
                self.grace_period_seconds.unwrap_or(DEFAULT_GRACE_PERIOD_SECONDS),
            )),
            PurgeMode::Never => None,
        }
    }

    /// The value of [`MANIFEST_WORK_REPLICA_SET_LABEL`] on the works of this policy's
    /// ManifestWorkReplicaSet, for a TieredPlacement in `namespace`.
    pub fn replica_set_label_value(&self, namespace: &str) -> Option<String> {
        self.manifest_work_replica_set
            .as_ref()
            .map(|name| format!("{namespace}.{name}"))
    }
}

fn seconds(s: i32) -> Duration {
    Duration::from_secs(u64::try_from(s).unwrap_or(0))
}

fn spec_duration(field: &str, value: Option<&String>, default: Duration) -> Result<Duration, SpecError> {
    match value {
        None => Ok(default),
        Some(text) => duration::parse(text).map_err(|e| SpecError::new(field, format!("{text:?} {e}"))),
    }
}

impl TieredPlacementSpec {
    /// The child Placement's name.
    pub fn child_name<'a>(&'a self, own_name: &'a str) -> &'a str {
        self.placement_name
            .as_deref()
            .filter(|n| !n.is_empty())
            .unwrap_or(own_name)
    }

    /// Durations and defaults; errors name the field.
    pub fn timings(&self) -> Result<Timings, SpecError> {
        let f = &self.failback;
        let hold_down = spec_duration("spec.failback.holdDown", f.hold_down.as_ref(), DEFAULT_HOLD_DOWN)?;
        let max_hold_down = spec_duration(
            "spec.failback.maxHoldDown",
            f.max_hold_down.as_ref(),
            DEFAULT_MAX_HOLD_DOWN.max(hold_down),
        )?;
        let min_dwell = spec_duration(
            "spec.stabilization.minDwell",
            self.stabilization.min_dwell.as_ref(),
            DEFAULT_MIN_DWELL,
        )?;
        let cap = self.capacity.as_ref();
        let debounce = spec_duration(
            "spec.capacity.debounce",
            cap.and_then(|c| c.debounce.as_ref()),
            Duration::ZERO,
        )?;
        let stale_grace = spec_duration(
            "spec.capacity.staleGrace",
            cap.and_then(|c| c.stale_grace.as_ref()),
            DEFAULT_STALE_GRACE,
        )?;
        Ok(Timings {
            hold_down,
            max_hold_down,
            min_dwell,
            debounce,
            stale_grace,
            max_transitions_per_hour: self
                .stabilization
                .max_transitions_per_hour
                .unwrap_or(DEFAULT_MAX_TRANSITIONS_PER_HOUR),
            max_clusters_per_step: f.max_clusters_per_step.unwrap_or(1).max(1) as usize,
            overlap: spec_duration("spec.failback.overlap", f.overlap.as_ref(), Duration::ZERO)?,
        })
    }
}
