//! Step 7, the status written (its conditions apart, [`super::conditions`]). It decides each
//! tier's state, the pending failback, the transition this plan records, and whether the
//! transition budget freezes voluntary moves.
//!
//! # What the status keeps, and why
//!
//! Every instant the planner needs (health clocks, penalties, `frozenUntil`, the transitions) is
//! in the status, rounded up to whole seconds, so a new leader continues hold-downs and budgets
//! exactly where the last one stopped. The last [`KEPT_TRANSITIONS`] transitions are kept;
//! above `maxTransitionsPerHour` counted ones in the trailing hour, voluntary moves are `Frozen`
//! for an hour.

use super::super::feasibility::TierClusters;
use super::super::{PlanEvent, child_mirror, format_duration};
use super::Requeue;
use super::choice::{Choice, Gates, Move, counted, voluntary};
use super::health::Health;
use crate::instant::{ceil_second, dur, of, time, timestamp};
use crate::placement::snapshot::HubSnapshot;
use ocm_score_api::crd::tiered_placement::{
    CapacityState, FailbackStatus, PendingFailback, TierState, TierStatus, TieredPlacementSpec,
    TieredPlacementStatus, TieringMode, Timings, Transition, TransitionKind, WorkloadHealthStatus,
};
use std::collections::HashSet;

const HOUR: i128 = 3600 * 1_000_000_000;
/// Transitions kept in the status, newest first.
const KEPT_TRANSITIONS: usize = 10;

/// What the status is written from.
pub(super) struct Input<'a> {
    pub generation: Option<i64>,
    pub spec: &'a TieredPlacementSpec,
    pub prior: Option<&'a TieredPlacementStatus>,
    pub choice: &'a Choice,
    /// The active tiers' names.
    pub active_names: &'a [String],
    /// Per tier, in spec order.
    pub health: &'a [Health],
    pub tiers: &'a [TierClusters],
    pub snapshot: &'a HubSnapshot,
    pub namespace: &'a str,
    pub child_name: &'a str,
    /// The clusters OCM is expected to select, sorted.
    pub predicted: &'a [String],
    /// The capacity verdicts' memory.
    pub capacity: Option<CapacityState>,
    /// `Frozen` before this plan, and the trigger value to record.
    pub gates: &'a Gates,
    pub workload_health: Option<WorkloadHealthStatus>,
    pub timings: &'a Timings,
    pub now: i128,
}

pub(super) struct Written {
    /// Without conditions.
    pub status: TieredPlacementStatus,
    pub transition: Option<TransitionKind>,
    /// The transition's Normal event, and `Frozen` when the budget ran out.
    pub events: Vec<PlanEvent>,
    pub requeue: Requeue,
}

pub(super) fn write(input: &Input<'_>) -> Written {
    let Input {
        generation,
        spec,
        prior,
        choice,
        active_names,
        health,
        tiers,
        snapshot,
        namespace,
        child_name,
        predicted,
        ref capacity,
        gates,
        ref workload_health,
        timings,
        now,
    } = *input;
    let mut status = TieredPlacementStatus {
        observed_generation: generation,
        active_tiers: active_names.to_vec(),
        preferred_tier: spec.tiers.first().map(|t| t.name.clone()),
        placement: Some(child_mirror(snapshot, namespace, child_name, predicted)),
        capacity: capacity.clone(),
        workload: prior.and_then(|p| p.workload.clone()),
        reservations: prior.map(|p| p.reservations.clone()).unwrap_or_default(),
        transitions: prior.map(|p| p.transitions.clone()).unwrap_or_default(),
        frozen_until: gates.frozen_until.map(time),
        workload_health: workload_health.clone(),
        ..TieredPlacementStatus::default()
    };
    let predicted: HashSet<&str> = predicted.iter().map(String::as_str).collect();
    let lowest_active = choice.active.iter().copied().max();
    status.tiers = spec
        .tiers
        .iter()
        .zip(health)
        .enumerate()
        .map(|(i, (tier, h))| {
            let above_active = lowest_active.is_some_and(|l| i < l);
            let eligible_at = if above_active { h.eligible_at() } else { None };
            TierStatus {
                name: tier.name.clone(),
                state: tier_state(
                    &TierSeen {
                        active: choice.active.contains(&i),
                        above_active,
                        eligible_at,
                        mode: spec.mode,
                        now,
                    },
                    h,
                ),
                feasible: h.feasible.len() as i32,
                qualifying: h.qualifying.len() as i32,
                selected: tiers[i]
                    .members
                    .iter()
                    .filter(|id| predicted.contains(snapshot.cluster_name(**id)))
                    .count() as i32,
                healthy_since: h.healthy_since.map(time),
                penalty: h.penalty,
                penalty_since: h.penalty_since.filter(|_| h.penalty > 0).map(time),
                effective_hold_down: Some(format_duration(std::time::Duration::from_nanos(
                    h.effective_hold_down.max(0) as u64,
                ))),
                failback_eligible_at: eligible_at.map(time),
                // Set with the conditions, from the prediction (`super::headroom`).
                headroom_replicas: None,
            }
        })
        .collect();
    status.failback = Some(FailbackStatus {
        observed_trigger: gates.observed_trigger.clone(),
        pending: choice.pending.as_ref().map(|p| PendingFailback {
            from: spec.tiers[p.from].name.clone(),
            to: spec.tiers[p.to].name.clone(),
            eligible_at: p.eligible_at.map(time),
        }),
    })
    .filter(|f| !f.observed_trigger.is_empty() || f.pending.is_some());
    let mut requeue = Requeue::after(now);
    let mut events = Vec::new();
    let transition = choice.movement.as_ref().map(|m| {
        let prior_names = prior.map(|p| p.active_tiers.clone()).unwrap_or_default();
        let recorded = record(
            &mut status,
            m,
            prior_names,
            active_names,
            timings,
            gates.frozen(),
            now,
        );
        events.extend(recorded.events);
        requeue.merge(recorded.requeue);
        m.kind
    });
    Written {
        status,
        transition,
        events,
        requeue,
    }
}

/// What a tier's state depends on besides its health.
pub(super) struct TierSeen {
    pub active: bool,
    /// Better than the worst active tier (a failback target).
    pub above_active: bool,
    /// When a failback to it may happen (above the active tiers only).
    pub eligible_at: Option<i128>,
    pub mode: TieringMode,
    pub now: i128,
}

/// A tier's state, the first that applies: Active, Quarantined, Unavailable (too few feasible
/// members), Unknown (short only by stale scores), Recovering (a failback target still in its
/// hold-down), Standby.
pub(super) fn tier_state(seen: &TierSeen, h: &Health) -> TierState {
    let needed = if seen.mode == TieringMode::Failover {
        h.min
    } else {
        1
    };
    if seen.active {
        TierState::Active
    } else if h.quarantined(seen.now) {
        TierState::Quarantined
    } else if h.feasible.len() < needed {
        TierState::Unavailable
    } else if !h.satisfied && h.unknown_only > 0 {
        TierState::Unknown
    } else if seen.above_active && seen.eligible_at.is_some_and(|e| e > seen.now) {
        TierState::Recovering
    } else {
        TierState::Standby
    }
}

struct Recorded {
    events: Vec<PlanEvent>,
    requeue: Requeue,
}

/// Records `m` as the newest transition; freezes voluntary moves for an hour when counted
/// transitions in the trailing hour exceed the budget (not again while `frozen`).
fn record(
    status: &mut TieredPlacementStatus,
    m: &Move,
    from: Vec<String>,
    to: &[String],
    timings: &Timings,
    frozen: bool,
    now: i128,
) -> Recorded {
    let mut requeue = Requeue::after(now);
    status.transitions.insert(
        0,
        Transition {
            time: time(ceil_second(now)),
            kind: m.kind,
            from,
            to: to.to_vec(),
            reason: m.reason.clone(),
            message: m.message.clone(),
        },
    );
    status.transitions.truncate(KEPT_TRANSITIONS);
    let mut events = vec![PlanEvent {
        type_: "Normal",
        reason: format!("{:?}", m.kind),
        message: m.message.clone(),
    }];
    if counted(m.kind) {
        let recent = status
            .transitions
            .iter()
            .filter(|t| counted(t.kind) && of(&t.time) > now - HOUR)
            .count();
        if recent > timings.max_transitions_per_hour as usize && !frozen {
            let until = ceil_second(now) + HOUR;
            status.frozen_until = Some(time(until));
            requeue.at(Some(until));
            events.push(PlanEvent {
                type_: "Warning",
                reason: "Frozen".into(),
                message: format!(
                    "{recent} transitions in the last hour (budget {}): voluntary moves blocked until {}",
                    timings.max_transitions_per_hour,
                    timestamp(until)
                ),
            });
        }
    }
    if voluntary(m.kind) {
        requeue.at(Some(ceil_second(now) + dur(timings.min_dwell)));
    }
    Recorded { events, requeue }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{healthy, ids, tier, unhealthy};
    use super::*;

    const S: i128 = 1_000_000_000;

    #[test]
    fn a_tier_state_is_the_first_that_applies() {
        let seen = |active, above_active, eligible_at| TierSeen {
            active,
            above_active,
            eligible_at,
            mode: TieringMode::Failover,
            now: 10 * S,
        };
        let mut h = healthy(ids(0..2), 2, Some(0));
        assert_eq!(tier_state(&seen(true, false, None), &h), TierState::Active);
        assert_eq!(
            tier_state(&seen(false, true, Some(20 * S)), &h),
            TierState::Recovering
        );
        assert_eq!(
            tier_state(&seen(false, true, Some(10 * S)), &h),
            TierState::Standby
        );
        assert_eq!(
            tier_state(&seen(false, false, Some(20 * S)), &h),
            TierState::Standby
        );
        h.quarantined_until = Some(20 * S);
        assert_eq!(
            tier_state(&seen(false, true, Some(20 * S)), &h),
            TierState::Quarantined
        );
        let mut stale = unhealthy(ids(0..2), 2);
        stale.unknown_only = 1;
        assert_eq!(tier_state(&seen(false, false, None), &stale), TierState::Unknown);
        let short = unhealthy(ids(0..1), 2);
        assert_eq!(
            tier_state(&seen(false, false, None), &short),
            TierState::Unavailable
        );
    }

    #[test]
    fn counted_transitions_over_the_hourly_budget_freeze_voluntary_moves() {
        let spec = TieredPlacementSpec {
            tiers: vec![tier("east")],
            ..TieredPlacementSpec::default()
        };
        let timings = spec.timings().unwrap();
        let failover = Move {
            kind: TransitionKind::Failover,
            reason: String::new(),
            message: "moving".into(),
        };
        let mut status = TieredPlacementStatus::default();
        let budget = timings.max_transitions_per_hour as i128;
        for i in 0..budget {
            let r = record(
                &mut status,
                &failover,
                Vec::new(),
                &[],
                &timings,
                false,
                i * 60 * S,
            );
            assert_eq!(r.events.len(), 1, "transition {i} is within the budget");
        }
        assert_eq!(status.frozen_until, None);
        let now = budget * 60 * S;
        let r = record(&mut status, &failover, Vec::new(), &[], &timings, false, now);
        assert_eq!(r.events.last().map(|e| e.reason.as_str()), Some("Frozen"));
        assert_eq!(status.frozen_until, Some(time(now + HOUR)));
        assert_eq!(r.requeue.earliest(), Some(now + HOUR));
        // Already frozen: not frozen again.
        let r = record(&mut status, &failover, Vec::new(), &[], &timings, true, now + S);
        assert_eq!(r.events.len(), 1);
    }
}
