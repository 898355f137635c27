//! The TieredPlacement planner: from a TieredPlacement (its status as the prior state) and a hub
//! snapshot to a [`Plan`]: the child Placement, the status, events and when to plan again.
//!
//! Pure: no I/O, the clock is a parameter. One entry point per use: [`plan`] (simulations,
//! explanations, tests) and [`plan_and_assume`] (the controller, with the reservation ledger).
//! Both run [`validate`] once; an invalid spec gives `Ready=False, reason=InvalidSpec`.
//!
//! # The steps
//!
//! 1. [`feasibility`]: each tier's members and which OCM would find feasible, with
//!    scheduler-core's OCM-exact candidates, filters and prioritizers.
//! 2. [`verdict`]: expiry-aware capacity verdicts with hysteresis, debounce and staleness.
//! 3. to 7. `choose`: tier health, the active tier(s) with flap damping, the child Placement
//!    ([`render`]) and OCM's decisions predicted by scheduling it with the same engine,
//!    make-before-break ([`workload::retain`]), then status, conditions and events.
//!
//! # What the controller (`ocm-score-hub tiering`, `hub-controller/src/tiering/`) does with a [`Plan`]
//!
//! * **Gathers** a [`HubSnapshot`] from reflectors: ManagedClusters, ManagedClusterSets, the
//!   namespace's bindings, the AddOnPlacementScores some TieredPlacement references, the child
//!   Placement and all PlacementDecisions (Balance reads other placements' decisions).
//! * **Child**: when [`Plan::child`] is `Some` and [`Plan::write_child`] is true (the
//!   `tiering.ocm-score.io/plan-hash` annotation differs from the live child's, or there is no
//!   child), server-side apply it with field manager `ocm-score-tiering` and `force`. The
//!   rendered child carries the owner reference when the TieredPlacement has a uid. `None`
//!   means "leave the child as it is" (invalid spec, or pins too large). A child edited by hand
//!   may keep our hash annotation, so the controller also re-applies (with a `ChildRestored`
//!   event) when a field we render no longer holds our value ("rendered ⊆ live",
//!   `hub-controller/src/tiering/child.rs`).
//! * **Reservations**: plan through [`plan_and_assume`], one TieredPlacement
//!   at a time against one ledger, so `fits` rules see what placements planned just before took.
//! * **Status**: write [`Plan::status`] through the status subresource when
//!   [`Plan::write_status`] is true. It holds every instant the planner needs (rounded up to
//!   whole seconds, as `metav1.Time` stores them), so a new leader continues hold-downs,
//!   debounces and budgets exactly where the last one stopped.
//! * **Requeue** at [`Plan::requeue_at`] (toleration deadlines − 1 s, debounce ends, hold-down
//!   ends, stale grace ends, the end of `Frozen` and of `minDwell`, penalty decay, reservation
//!   TTLs). Also reconcile on changes of any input above; of a score, only when the update can
//!   change a plan ([`crate::placement::renewal`]: not a renewal) and its cluster is in
//!   [`Plan::holds`], and when a score of a held cluster expires without renewal (the watch's
//!   expiry wheel, rather than a requeue at [`Plan::scores_expire_at`], which renewals make
//!   moot). Its snapshot is built [`HubSnapshot::judging_expiry_at`] the instant it was built,
//!   and dropped at each such expiry.
//! * **ManifestWorks**: for a TieredPlacement with `spec.workloadHealth`, pass a [`WorkIndex`] of
//!   the ManifestWork reflector to [`plan_and_assume`], built again only after the store changed
//!   (`WorkIndex::from_shared`; the others get an empty index); reconcile such a TieredPlacement
//!   when one of its works changes.
//! * **Events**: publish [`Plan::events`] (one per transition, `Frozen`, `InvalidSpec`,
//!   `PinningTooLarge`, `WorkloadFailed`, `UnhealthyEverywhere`, and `Retained`/`Released` for
//!   make-before-break) on the TieredPlacement.
//! * **Observe**: compare the child's PlacementDecisions with `status.placement.predicted` and
//!   set `PlanDiverged` when they differ after OCM synced the child's generation; the planner
//!   carries that condition over unchanged.
//!
//! # Where this differs from the design (and why)
//!
//! * Per-cluster verdict memory (effective verdicts in the hysteresis band, pending debounced
//!   changes, stale clocks) is kept in `status.capacity`, not in memory: otherwise a restart would
//!   not give the same future transitions (property 6).
//! * `penalty` counts *relapses*: a forced failover off a tier the last transition failed back
//!   to. The first outage of a tier is not a relapse, so the first failback waits exactly
//!   `holdDown` (the design's "increment on every forced failover" would double it already).
//! * Overflow pins exactly the chosen clusters even when only one tier is active, so the planner,
//!   not OCM's prioritizers, decides which clusters stay (stickiness) and the prediction is exact.
//! * `failback.overlap` keeps the clusters a voluntary move leaves in the child beside their
//!   replacements (the make-before-break of `workloadHealth.purge`, [`workload::retain`]).
//! * Transitions are recorded when the active tier list changes (and for each consolidation
//!   swap); moves inside one tier are OCM's business.

mod choose;
pub mod feasibility;
mod holds;
pub mod render;
mod time;
mod validate;
pub mod verdict;
pub mod workload;

pub use holds::Holds;
pub use time::format_duration;
pub use validate::validate;

use crate::instant::{self, ceil_second, ns, timestamp};
use crate::placement::schedule::existing_decisions;
use crate::placement::snapshot::HubSnapshot;
use crate::reservation::{Ledger, LoadError, ShapeCatalog, View, placement_key};
use k8s_openapi::jiff::Timestamp;
use ocm_score_api::crd::tiered_placement::{
    ChildPlacementStatus, SpecError, TieredPlacement, TieredPlacementSpec, TieredPlacementStatus,
    TransitionKind, WorkloadState,
};
use ocm_score_api::{Condition, ObjectMeta, Placement, Time};
pub use workload::WorkIndex;

/// An event for the TieredPlacement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanEvent {
    /// `Normal` or `Warning`.
    pub type_: &'static str,
    pub reason: String,
    pub message: String,
}

/// One tier as the planner saw it (for explanations; `simulate` prints it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TierReport {
    pub name: String,
    /// Qualifying clusters, best first (counts of the other sets are in the status).
    pub qualifying: Vec<String>,
    pub selected: Vec<String>,
    /// Members that are not qualifying, with why.
    pub excluded: Vec<(String, String)>,
    pub misconfigured: Option<String>,
}

/// What to do for one TieredPlacement.
#[derive(Clone, Debug, PartialEq)]
pub struct Plan {
    pub status: TieredPlacementStatus,
    /// The child Placement to apply; `None`: leave the child as it is.
    pub child: Option<Placement>,
    /// The clusters OCM is expected to select, sorted.
    pub predicted: Vec<String>,
    /// When the planner's own timers want a new plan: toleration, debounce, stale grace,
    /// hold-down, dwell and freeze ends, penalty decay, reservation TTLs.
    pub requeue_at: Option<Timestamp>,
    /// When a score this plan read expires (its `validUntil` + 1 ns) if it is not renewed
    /// first. Kept apart from `requeue_at`: a controller that learns of each expiry from its
    /// score watch re-plans only when one really happens; others use [`Plan::replan_at`].
    pub scores_expire_at: Option<Timestamp>,
    pub events: Vec<PlanEvent>,
    pub tiers: Vec<TierReport>,
    /// Whether the child must be applied (its plan hash changed, or it does not exist).
    pub write_child: bool,
    /// Whether the status differs from the prior one.
    pub write_status: bool,
    /// The transition this plan makes, if any.
    pub transition: Option<TransitionKind>,
    /// The clusters whose scores this plan read: a controller re-plans on a score change only
    /// when the cluster is among them.
    pub holds: Holds,
}

impl Plan {
    /// When to plan again without being told of score expiries: the earlier of
    /// [`Plan::requeue_at`] and [`Plan::scores_expire_at`].
    pub fn replan_at(&self) -> Option<Timestamp> {
        match (self.requeue_at, self.scores_expire_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Condition types the planner sets.
pub mod condition {
    pub const READY: &str = "Ready";
    pub const ON_PREFERRED_TIER: &str = "OnPreferredTier";
    pub const FAILBACK_PENDING: &str = "FailbackPending";
    pub const SCORES_STALE: &str = "ScoresStale";
    pub const FROZEN: &str = "Frozen";
    pub const NO_TIER_SATISFIED: &str = "NoTierSatisfied";
    pub const INSUFFICIENT_CAPACITY: &str = "InsufficientCapacity";
    pub const PLAN_DIVERGED: &str = "PlanDiverged";
    /// `spec.workloadHealth` only: True when every chosen cluster's workload is Healthy.
    pub const WORKLOAD_HEALTHY: &str = "WorkloadHealthy";
    /// `spec.workload` only: whether the workload would fit elsewhere if the selected clusters
    /// failed now (`status.tiers[].headroomReplicas`).
    pub const FAILOVER_FITS: &str = "FailoverFits";
}

/// Sets `type_` in `conditions`, keeping `lastTransitionTime` when the status did not change.
#[allow(clippy::too_many_arguments)]
pub(crate) fn set_condition(
    conditions: &mut Vec<Condition>,
    prior: &[Condition],
    type_: &str,
    status: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: i128,
) {
    let status = if status { "True" } else { "False" };
    set_condition_status(conditions, prior, type_, status, reason, message, generation, now);
}

/// [`set_condition`] with any status (`Unknown` too).
#[allow(clippy::too_many_arguments)]
pub(crate) fn set_condition_status(
    conditions: &mut Vec<Condition>,
    prior: &[Condition],
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: i128,
) {
    let status = status.to_string();
    let last = prior
        .iter()
        .find(|c| c.type_ == type_ && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| instant::time(ceil_second(now)));
    conditions.retain(|c| c.type_ != type_);
    conditions.push(Condition {
        type_: type_.to_string(),
        status,
        reason: reason.to_string(),
        message,
        observed_generation: generation,
        last_transition_time: last,
    });
}

/// Plans `object`, its status taken as the prior status, without a reservation ledger: what
/// `simulate`, explanations, benchmarks and tests use. `spec.workloadHealth` judges the
/// ManifestWorks in `works` (an empty index: no work is known anywhere).
pub fn plan(object: &TieredPlacement, snapshot: &HubSnapshot, works: &WorkIndex<'_>, now: Timestamp) -> Plan {
    checked(object, snapshot, &View::none(), works, now).plan
}

/// Plans `object` with the capacity the ledger leaves it ([`crate::reservation`]): `fits` rules
/// see the capacity reported minus the other placements' in-flight reservations. Then records
/// what the plan selects:
/// reservations on the clusters it adds, releases on the clusters it drops, expired reservations
/// dropped. The plan's status carries the placement's reservations and requeues at their TTL.
/// A placement the ledger does not know yet is loaded from its status first (the errors are
/// the entries that could not be).
pub fn plan_and_assume(
    ledger: &mut Ledger,
    object: &TieredPlacement,
    snapshot: &HubSnapshot,
    shapes: &ShapeCatalog,
    works: &WorkIndex<'_>,
    now: Timestamp,
) -> (Plan, Vec<LoadError>) {
    let key = placement_key(object);
    let now_ns = ns(now);
    let errors = if ledger.knows(&key) {
        Vec::new()
    } else {
        ledger.load(&key, object.status.as_ref())
    };
    ledger.expire(now_ns);
    let Checked { mut plan, spec_valid } = {
        let view = ledger.view(&key, shapes, now_ns);
        checked(object, snapshot, &view, works, now)
    };
    // An invalid spec is not acted on (the child is left as it was): neither is its workload.
    // Otherwise the selection may stay as it was (no child written) while the footprint changed.
    if spec_valid {
        ledger.assume(&key, object.spec.workload.as_ref(), &plan.predicted, now_ns);
    }
    // Where the workload runs Healthy, the next report counts its pods (release c).
    let healthy = plan
        .status
        .workload_health
        .iter()
        .flat_map(|h| &h.clusters)
        .filter(|c| c.state == WorkloadState::Healthy);
    for cluster in healthy {
        if let Some(since) = &cluster.since {
            ledger.landed(&key, &cluster.cluster, instant::of(since));
        }
    }
    plan.status.reservations = ledger.reservations_of(&key);
    plan.status.workload = ledger.workload_of(&key);
    if let Some(expiry) = ledger.next_expiry_of(&key).filter(|e| *e > now_ns) {
        let at = timestamp(expiry);
        plan.requeue_at = Some(plan.requeue_at.map_or(at, |r| r.min(at)));
    }
    plan.write_status = object.status.as_ref() != Some(&plan.status);
    (plan, errors)
}

/// A plan, and whether [`validate`] accepted the spec (the ledger acts only on a valid one).
struct Checked {
    plan: Plan,
    spec_valid: bool,
}

/// Validates the spec (once per plan), then plans: an invalid spec gives `InvalidSpec`.
fn checked(
    object: &TieredPlacement,
    snapshot: &HubSnapshot,
    reserved: &View<'_>,
    works: &WorkIndex<'_>,
    now: Timestamp,
) -> Checked {
    let meta = &object.metadata;
    let prior = object.status.as_ref();
    let errors = validate(&object.spec);
    if !errors.is_empty() {
        return Checked {
            plan: invalid(meta, prior, &errors, ns(now)),
            spec_valid: false,
        };
    }
    Checked {
        plan: plan_valid(meta, &object.spec, prior, snapshot, reserved, works, ns(now)),
        spec_valid: true,
    }
}

/// Plans a spec [`validate`] accepted. `meta` gives its namespace, name, uid and generation.
fn plan_valid(
    meta: &ObjectMeta,
    spec: &TieredPlacementSpec,
    prior: Option<&TieredPlacementStatus>,
    snapshot: &HubSnapshot,
    reserved: &View<'_>,
    works: &WorkIndex<'_>,
    now_ns: i128,
) -> Plan {
    let namespace = meta.namespace.as_deref().unwrap_or("");
    let name = meta.name.as_deref().unwrap_or("");
    let child_name = spec.child_name(name).to_string();
    // Tier predicates that OCM would call misconfigured are spec errors too.
    let probe = feasibility::tier_placement(spec, namespace, &child_name, 0);
    let (in_decision, _) = existing_decisions(snapshot, &probe);
    let rank = spec.mode == ocm_score_api::crd::tiered_placement::TieringMode::Overflow;
    let tiers = feasibility::evaluate(spec, namespace, &child_name, snapshot, &in_decision, now_ns, rank);
    let misconfigured: Vec<SpecError> = tiers
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            t.misconfigured.as_ref().map(|m| SpecError {
                field: format!("spec.tiers[{i}]"),
                message: m.clone(),
            })
        })
        .collect();
    if !misconfigured.is_empty() {
        return invalid(meta, prior, &misconfigured, now_ns);
    }
    choose::decide(&choose::Input {
        meta,
        spec,
        prior,
        snapshot,
        tiers: &tiers,
        in_decision: &in_decision,
        child_name: &child_name,
        reserved,
        works,
        now: now_ns,
    })
}

/// `Ready=False, reason=InvalidSpec`; the child and everything else stay as they were.
pub(crate) fn invalid(
    meta: &ObjectMeta,
    prior: Option<&TieredPlacementStatus>,
    errors: &[SpecError],
    now: i128,
) -> Plan {
    let mut status = prior.cloned().unwrap_or_default();
    let message = errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    let was_invalid = status
        .conditions
        .iter()
        .any(|c| c.type_ == condition::READY && c.reason == "InvalidSpec" && c.message == message);
    let prior_conditions = status.conditions.clone();
    set_condition(
        &mut status.conditions,
        &prior_conditions,
        condition::READY,
        false,
        "InvalidSpec",
        message.clone(),
        meta.generation,
        now,
    );
    status.observed_generation = meta.generation;
    let events = if was_invalid {
        Vec::new()
    } else {
        vec![PlanEvent {
            type_: "Warning",
            reason: "InvalidSpec".into(),
            message: message.clone(),
        }]
    };
    let predicted = status
        .placement
        .as_ref()
        .map(|p| p.predicted.clone())
        .unwrap_or_default();
    let write_status = prior != Some(&status);
    Plan {
        status,
        child: None,
        predicted,
        requeue_at: None,
        scores_expire_at: None,
        events,
        tiers: Vec::new(),
        write_child: false,
        write_status,
        transition: None,
        // An invalid spec reads no scores.
        holds: Holds::Clusters(Default::default()),
    }
}

/// The child status mirror: from the live child, if any.
pub(crate) fn child_mirror(
    snapshot: &HubSnapshot,
    namespace: &str,
    child: &str,
    predicted: &[String],
) -> ChildPlacementStatus {
    let live = snapshot.placement(namespace, child);
    ChildPlacementStatus {
        name: child.to_string(),
        observed_generation: live.and_then(|p| p.metadata.generation),
        number_of_selected_clusters: live
            .and_then(|p| p.status.as_ref())
            .map(|s| s.number_of_selected_clusters),
        satisfied: live.and_then(|p| p.status.as_ref()).and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "PlacementSatisfied")
                .map(|c| c.status.clone())
        }),
        predicted: predicted.to_vec(),
    }
}

/// Convenience for reports: an instant as the API shows it.
pub fn show(t: &Time) -> String {
    t.0.to_string()
}
