//! One full scheduling pass for a placement, as upstream's `syncPlacement` computes it, minus the
//! I/O: candidates, `Schedule()`, decision groups, PlacementDecisions, status, the writes and
//! events that would follow, and the requeue time.

use super::candidates::{self, Candidates};
use super::conditions::{self, ConditionOutcome, SatisfiedInputs};
use super::error::PlacementError;
use super::events::{self, Event};
use super::explain::{self, Warning};
use super::groups::{self, DecisionGroup};
use super::schedule::{self, ScheduleResult};
use super::snapshot::HubSnapshot;
use super::status::Status;
use super::writes::{self, DecisionWrite};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use ocm_score_api::{Placement, PlacementDecision, PlacementStatus};

/// Annotation that switches scheduling off for a placement (exact value `"true"`).
pub const DISABLE_ANNOTATION: &str = "cluster.open-cluster-management.io/experimental-scheduling-disable";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// The placement has a deletionTimestamp.
    Deleting,
    /// The disable annotation is `"true"`.
    SchedulingDisabled,
}

#[derive(Clone, Debug, PartialEq)]
pub enum SyncOutcome {
    /// Upstream does nothing for this placement.
    Skipped(SkipReason),
    Scheduled(Box<PlacementResult>),
}

/// Everything a sync decides.
#[derive(Clone, Debug, PartialEq)]
pub struct PlacementResult {
    pub candidates: Candidates,
    pub schedule: ScheduleResult,
    pub groups: Vec<DecisionGroup>,
    /// Status of the decision-strategy step (Misconfigured for a bad group setting).
    pub strategy_status: Status,
    /// The PlacementDecisions as they should exist, in name-index order.
    pub decisions: Vec<PlacementDecision>,
    pub satisfied: ConditionOutcome,
    pub misconfigured: ConditionOutcome,
    /// The placement status to write.
    pub status: PlacementStatus,
    /// Whether `status` differs from the current one (upstream patches only then).
    pub status_changed: bool,
    pub writes: Vec<DecisionWrite>,
    pub events: Vec<Event>,
    /// When to schedule again because a toleration runs out.
    pub requeue_after: Option<SignedDuration>,
    pub warnings: Vec<Warning>,
}

impl PlacementResult {
    pub fn is_misconfigured(&self) -> bool {
        self.misconfigured.status == "True"
    }

    /// The effective status (the strategy's when it failed, otherwise the schedule's).
    pub fn effective_status(&self) -> &Status {
        effective_status(&self.strategy_status, &self.schedule.status)
    }
}

/// Schedules placement `namespace/name` from `snapshot` at `now`.
pub fn sync(
    snapshot: &HubSnapshot,
    namespace: &str,
    name: &str,
    now: Timestamp,
) -> Result<SyncOutcome, PlacementError> {
    let placement = snapshot
        .placement(namespace, name)
        .ok_or_else(|| PlacementError::PlacementNotFound {
            namespace: namespace.into(),
            name: name.into(),
        })?;
    sync_placement(snapshot, placement, now)
}

/// Like [`sync`], for a placement that need not be in the snapshot (a what-if spec).
pub fn sync_placement(
    snapshot: &HubSnapshot,
    placement: &Placement,
    now: Timestamp,
) -> Result<SyncOutcome, PlacementError> {
    if placement.metadata.deletion_timestamp.is_some() {
        return Ok(SyncOutcome::Skipped(SkipReason::Deleting));
    }
    let disabled = placement
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(DISABLE_ANNOTATION));
    if disabled.is_some_and(|v| v == "true") {
        return Ok(SyncOutcome::Skipped(SkipReason::SchedulingDisabled));
    }
    let candidates = candidates::candidates(snapshot, placement)?;
    let schedule = schedule::schedule(snapshot, placement, &candidates.clusters, now)?;
    Ok(SyncOutcome::Scheduled(Box::new(conclude(
        snapshot, placement, candidates, schedule, now,
    ))))
}

/// Everything after `Schedule()`: groups, decisions, status, writes, events, requeue.
pub fn conclude(
    snapshot: &HubSnapshot,
    placement: &Placement,
    candidates: Candidates,
    schedule: ScheduleResult,
    now: Timestamp,
) -> PlacementResult {
    let placement_name = placement.metadata.name.as_deref().unwrap_or("");
    let (groups, strategy_status) = groups::decision_groups(snapshot, placement, &schedule.selected);
    let pages = groups::pages(placement_name, &groups);
    let decisions: Vec<PlacementDecision> = pages
        .iter()
        .map(|p| groups::placement_decision(snapshot, placement, p))
        .collect();

    let effective_status = effective_status(&strategy_status, &schedule.status);
    let satisfied = conditions::satisfied(&SatisfiedInputs {
        cluster_sets_in_spec: &placement.spec.cluster_sets,
        eligible_sets: &candidates.eligible_sets,
        valid_bindings: candidates.valid_bindings.len(),
        available_clusters: candidates.clusters.len(),
        selected: schedule.selected.len(),
        unscheduled: schedule.unscheduled,
        status: effective_status,
    });
    let misconfigured = conditions::misconfigured(effective_status);
    let status = conditions::placement_status(
        placement.status.as_ref(),
        schedule.selected.len(),
        groups::group_statuses(&groups, &pages),
        &misconfigured,
        &satisfied,
        now,
    );
    let status_changed = placement.status.as_ref() != Some(&status);

    let (writes, events) = writes::plan_with_note(
        snapshot,
        placement,
        &decisions,
        || score_note(snapshot, &schedule),
        effective_status,
    );

    let requeue_after = schedule.requeue_at_ns.map(|at| {
        let nanos = at - now.as_nanosecond();
        SignedDuration::from_nanos(nanos.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64)
    });
    let warnings = explain::warnings(snapshot, placement, &candidates, &schedule);
    PlacementResult {
        candidates,
        schedule,
        groups,
        strategy_status,
        decisions,
        satisfied,
        misconfigured,
        status,
        status_changed,
        writes,
        events,
        requeue_after,
        warnings,
    }
}

/// A failed decision strategy replaces the schedule's status in the conditions and events.
fn effective_status<'s>(strategy: &'s Status, schedule: &'s Status) -> &'s Status {
    if strategy.is_error() { strategy } else { schedule }
}

/// The ScoreUpdate note over all feasible clusters by name. Feasible clusters come in id order
/// (= name order) from a sync, so only the first kilobyte of names is visited.
fn score_note(snapshot: &HubSnapshot, schedule: &ScheduleResult) -> String {
    if schedule.totals.is_empty() {
        return String::new();
    }
    let mut order: Vec<usize> = (0..schedule.feasible.len()).collect();
    if !schedule.feasible.is_sorted() {
        order.sort_unstable_by_key(|&i| schedule.feasible[i]);
    }
    events::score_note_in_order(
        order
            .into_iter()
            .map(|i| (snapshot.cluster_name(schedule.feasible[i]), schedule.totals[i])),
    )
}
