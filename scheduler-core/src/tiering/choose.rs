//! Steps 3–5 and 9: tier health, the choice of the active tier(s), damping, status and requeue.
//!
//! *Failover*: the override wins; otherwise the first plan takes the first satisfied tier. A tier
//! that is no longer satisfied because its clusters became infeasible (taints past tolerance,
//! removed from sets or predicates) or lost fresh capacity is left for the first satisfied tier in
//! the **whole** order (quarantined tiers last); stale scores alone never move anything. Failback
//! to a better tier is voluntary: `Automatic` after the tier's hold-down (doubled per relapse),
//! `minDwell` and outside `Frozen`; `Manual` once per new trigger value.
//!
//! *Overflow*: keep the selected clusters that still qualify, fill up to `numberOfClusters` from
//! the top (spill), drop from the bottom on scale-in, and consolidate upwards (`Contract`) at most
//! `maxClustersPerStep` swaps per `minDwell`, only from tiers whose hold-down elapsed.

use super::feasibility::TierClusters;
use super::render::{self, ActiveTier, MAX_PINNED_PER_TIER, Owner};
use super::verdict::{self, Verdict};
use super::{Plan, PlanEvent, TierReport, condition, set_condition};
use crate::api::tiering::{
    FailbackMode, FailbackStatus, PendingFailback, TierState, TierStatus, TieredPlacementSpec,
    TieredPlacementStatus, TieringMode, Timings, Transition, TransitionKind,
};
use crate::api::{ObjectMeta, Placement, PlacementSpec};
use crate::instant::{ceil_second, dur, of, time, timestamp};
use crate::placement::snapshot::{ClusterId, HubSnapshot};
use crate::placement::{candidates, schedule};
use crate::reservation::View;

const HOUR: i128 = 3600 * 1_000_000_000;
const KEPT_TRANSITIONS: usize = 10;

pub struct Input<'a> {
    pub meta: &'a ObjectMeta,
    pub spec: &'a TieredPlacementSpec,
    pub prior: Option<&'a TieredPlacementStatus>,
    pub snapshot: &'a HubSnapshot,
    pub tiers: &'a [TierClusters],
    pub in_decision: &'a [bool],
    pub child_name: &'a str,
    /// The capacity other placements' reservations take.
    pub reserved: &'a View<'a>,
    pub now: i128,
}

/// One tier's health.
struct Health {
    min: usize,
    /// Feasible members, best first.
    feasible: Vec<ClusterId>,
    qualifying: Vec<ClusterId>,
    entry: Vec<ClusterId>,
    /// Feasible members not qualifying only because their scores are Unknown.
    unknown_only: usize,
    /// Qualifying on fresh data (hysteresis band included): what Overflow may add.
    fresh_qualifying: Vec<ClusterId>,
    satisfied: bool,
    entry_ok: bool,
    healthy_since: Option<i128>,
    penalty: i32,
    penalty_since: Option<i128>,
    effective_hold_down: i128,
    quarantined_until: Option<i128>,
}

impl Health {
    fn quarantined(&self, now: i128) -> bool {
        self.quarantined_until.is_some_and(|q| now < q)
    }
    /// When a failback to this tier may happen by hold-down (and quarantine).
    fn eligible_at(&self) -> Option<i128> {
        self.healthy_since.map(|h| {
            let by_hold = h + self.effective_hold_down;
            self.quarantined_until.map_or(by_hold, |q| by_hold.max(q))
        })
    }
}

struct Requeue(Option<i128>);

impl Requeue {
    fn at(&mut self, t: Option<i128>, now: i128) {
        if let Some(t) = t
            && t > now
        {
            self.0 = Some(self.0.map_or(t, |r| r.min(t)));
        }
    }
}

fn counted(kind: TransitionKind) -> bool {
    matches!(
        kind,
        TransitionKind::Failover
            | TransitionKind::Overflow
            | TransitionKind::Contract
            | TransitionKind::Failback
    )
}

fn voluntary(kind: TransitionKind) -> bool {
    matches!(kind, TransitionKind::Contract | TransitionKind::Failback)
}

struct Move {
    kind: TransitionKind,
    reason: String,
    message: String,
}

struct Choice {
    active: Vec<usize>,
    /// Overflow: chosen clusters per tier (sorted names).
    chosen: Vec<Vec<String>>,
    movement: Option<Move>,
    pending: Option<(usize, usize, Option<i128>, &'static str)>,
    no_tier_satisfied: bool,
    insufficient: bool,
    /// Keep the child as it is (nothing qualifies anywhere).
    keep_child: bool,
    relapse_of: Option<usize>,
}

pub fn decide(input: &Input<'_>) -> Plan {
    let Input {
        meta,
        spec,
        prior,
        snapshot,
        tiers,
        in_decision,
        child_name,
        reserved,
        now,
    } = *input;
    let timings = match spec.timings() {
        Ok(t) => t,
        Err(e) => return super::invalid(meta, prior, &[e], now),
    };
    let namespace = meta.namespace.as_deref().unwrap_or("");
    // Never planned before: no status yet, or one without any transition (an invalid spec's).
    // A planned placement may have no active tier (nothing qualifies); that is not a first plan.
    let first_plan = prior.is_none_or(|p| p.active_tiers.is_empty() && p.transitions.is_empty());
    let members: Vec<ClusterId> = tiers.iter().flat_map(|t| t.members.iter().copied()).collect();
    let verdicts = verdict::evaluate(
        spec,
        &timings,
        snapshot,
        &members,
        in_decision,
        prior.and_then(|p| p.capacity.as_ref()),
        first_plan,
        reserved,
        now,
    );
    let verdict_of = |id: ClusterId| verdicts.by_cluster[id.index()].as_ref();
    let mut requeue = Requeue(None);
    requeue.at(verdicts.requeue_at, now);
    for t in tiers {
        requeue.at(t.requeue_at, now);
    }

    // Prior selection and the tier of every member.
    let mut tier_of: Vec<Option<usize>> = vec![None; snapshot.cluster_count()];
    for (i, t) in tiers.iter().enumerate() {
        for id in &t.members {
            tier_of[id.index()] = Some(i);
        }
    }
    let prior_selection: Vec<ClusterId> = match prior.and_then(|p| p.placement.as_ref()) {
        Some(p) if !first_plan => p
            .predicted
            .iter()
            .filter_map(|n| snapshot.cluster_id(n))
            .collect(),
        _ => snapshot
            .cluster_ids()
            .filter(|id| in_decision.get(id.index()).copied().unwrap_or(false))
            .collect(),
    };
    let mut in_prior = vec![false; snapshot.cluster_count()];
    for id in &prior_selection {
        in_prior[id.index()] = true;
    }

    // Step 3: tier health.
    let n = spec.number_of_clusters.filter(|n| *n > 0).map(|n| n as usize);
    let prior_tier = |name: &str| prior.and_then(|p| p.tiers.iter().find(|t| t.name == name));
    let hold = dur(timings.hold_down);
    let max_hold = dur(timings.max_hold_down);
    let mut health: Vec<Health> = tiers
        .iter()
        .zip(&spec.tiers)
        .map(|(t, tier)| {
            let min = tier.min_clusters.map(|m| m.max(1) as usize).or(n).unwrap_or(1);
            let qualifying: Vec<ClusterId> = t
                .feasible
                .iter()
                .copied()
                .filter(|id| verdict_of(*id).is_some_and(|v| v.qualified))
                .collect();
            let entry: Vec<ClusterId> = t
                .feasible
                .iter()
                .copied()
                .filter(|id| verdict_of(*id).is_some_and(|v| v.entry))
                .collect();
            let unknown_only = t
                .feasible
                .iter()
                .filter(|id| {
                    verdict_of(**id).is_some_and(|v| v.unknown && !v.qualified && !v.stale_disqualified)
                })
                .count();
            let fresh_qualifying: Vec<ClusterId> = qualifying
                .iter()
                .copied()
                .filter(|id| verdict_of(*id).is_some_and(|v| !v.unknown))
                .collect();
            let before = prior_tier(&tier.name);
            let healthy_now = match spec.mode {
                TieringMode::Failover => entry.len() >= min,
                TieringMode::Overflow => entry.iter().any(|id| !in_prior[id.index()]),
            };
            let healthy_since = if healthy_now {
                Some(
                    before
                        .and_then(|b| b.healthy_since.as_ref())
                        .map_or(ceil_second(now), of),
                )
            } else {
                None
            };
            let mut penalty = before.map_or(0, |b| b.penalty.max(0));
            let mut penalty_since = before.and_then(|b| b.penalty_since.as_ref()).map(of);
            // Decay: one point per 4 × holdDown of uninterrupted health.
            if let (Some(h), true) = (healthy_since, penalty > 0 && hold > 0) {
                let step = 4 * hold;
                let mut reference = penalty_since.map_or(h, |p| p.max(h));
                while penalty > 0 && now >= reference + step {
                    penalty -= 1;
                    reference += step;
                    penalty_since = Some(reference);
                }
                if penalty > 0 {
                    requeue.at(Some(reference + step), now);
                }
            }
            let effective_hold_down = effective(hold, max_hold, penalty);
            let quarantined_until = penalty_since
                .filter(|_| penalty > 0)
                .map(|p| p + effective_hold_down);
            Health {
                min,
                feasible: t.feasible.clone(),
                satisfied: qualifying.len() >= min,
                entry_ok: entry.len() >= min,
                qualifying,
                entry,
                unknown_only,
                fresh_qualifying,
                healthy_since,
                penalty,
                penalty_since,
                effective_hold_down,
                quarantined_until,
            }
        })
        .collect();
    for h in &health {
        if h.penalty > 0 {
            requeue.at(h.quarantined_until, now);
        }
    }

    let prior_active: Vec<usize> = prior
        .map(|p| {
            p.active_tiers
                .iter()
                .filter_map(|a| spec.tiers.iter().position(|t| &t.name == a))
                .collect()
        })
        .unwrap_or_default();
    let tiers_vanished =
        prior.is_some_and(|p| !p.active_tiers.is_empty() && prior_active.len() != p.active_tiers.len());
    let last_transition = prior.and_then(|p| p.transitions.first()).map(|t| of(&t.time));
    let dwell_end = last_transition.map(|t| t + dur(timings.min_dwell));
    let frozen_until = prior
        .and_then(|p| p.frozen_until.as_ref())
        .map(of)
        .filter(|f| now < *f);
    let frozen = frozen_until.is_some();
    let observed_trigger = prior
        .and_then(|p| p.failback.as_ref())
        .map(|f| f.observed_trigger.clone())
        .unwrap_or_default();
    let trigger = &spec.failback.trigger;
    let manual_fired = spec.failback.policy == FailbackMode::Manual
        && !first_plan
        && !trigger.is_empty()
        && *trigger != observed_trigger;
    let new_observed = if spec.failback.policy == FailbackMode::Manual {
        trigger.clone()
    } else {
        observed_trigger.clone()
    };
    let override_idx = spec
        .override_
        .as_ref()
        .and_then(|o| spec.tiers.iter().position(|t| t.name == o.tier));
    let last_kind = prior
        .and_then(|p| p.transitions.first())
        .map(|t| (t.kind, t.to.clone()));
    let generation_changed = prior.is_some_and(|p| p.observed_generation != meta.generation);

    let ctx = Ctx {
        spec,
        timings: &timings,
        health: &health,
        now,
        frozen,
        dwell_end,
        manual_fired,
        first_plan,
        tiers_vanished,
        generation_changed,
        last_kind: last_kind.as_ref(),
    };
    let choice = match spec.mode {
        TieringMode::Failover => failover(&ctx, prior_active.first().copied(), override_idx),
        TieringMode::Overflow => overflow(
            &ctx,
            &prior_selection,
            &prior_active,
            &tier_of,
            override_idx,
            n.unwrap_or(1),
            snapshot,
        ),
    };
    // Overflow health is "has unused entry clusters": judge it against the new selection, so
    // that re-planning the same inputs finds the same `healthySince`.
    if spec.mode == TieringMode::Overflow && !choice.keep_child {
        let mut chosen = vec![false; snapshot.cluster_count()];
        for id in choice
            .chosen
            .iter()
            .flatten()
            .filter_map(|n| snapshot.cluster_id(n))
        {
            chosen[id.index()] = true;
        }
        for (h, tier) in health.iter_mut().zip(&spec.tiers) {
            let unused = h.entry.iter().any(|id| !chosen[id.index()]);
            h.healthy_since = unused.then(|| {
                prior_tier(&tier.name)
                    .and_then(|b| b.healthy_since.as_ref())
                    .map_or(ceil_second(now), of)
            });
        }
    }
    if let Some(t) = choice.relapse_of {
        health[t].penalty += 1;
        health[t].penalty_since = Some(ceil_second(now));
        health[t].effective_hold_down = effective(hold, max_hold, health[t].penalty);
        health[t].quarantined_until = Some(ceil_second(now) + health[t].effective_hold_down);
    }
    if let Some((_, _, Some(at), _)) = choice.pending {
        requeue.at(Some(at), now);
    }
    if frozen {
        requeue.at(frozen_until, now);
    }

    // Render and predict.
    let owner = Owner {
        namespace,
        name: meta.name.as_deref().unwrap_or(""),
        uid: meta.uid.as_deref(),
    };
    let has_rules = spec.capacity.as_ref().is_some_and(|c| !c.rules.is_empty());
    let name_of = |id: &ClusterId| snapshot.cluster_name(*id).to_string();
    let sorted_names = |ids: &[ClusterId]| {
        let mut v: Vec<String> = ids.iter().map(name_of).collect();
        v.sort();
        v
    };
    let pins: Vec<Vec<String>> = match spec.mode {
        TieringMode::Failover => health.iter().map(|h| sorted_names(&h.qualifying)).collect(),
        TieringMode::Overflow => choice.chosen.clone(),
    };
    let too_large = choice
        .active
        .iter()
        .find(|i| has_rules_or_overflow(spec, has_rules) && pins[**i].len() > MAX_PINNED_PER_TIER);
    let active_render: Vec<ActiveTier<'_>> = choice
        .active
        .iter()
        .map(|&i| ActiveTier {
            index: i,
            pins: if spec.mode == TieringMode::Failover && !has_rules {
                None
            } else {
                Some(pins[i].as_slice())
            },
        })
        .collect();
    let number = match spec.mode {
        TieringMode::Failover => spec.number_of_clusters,
        TieringMode::Overflow => spec.number_of_clusters,
    };
    let rendered = render::child(spec, &owner, child_name, &active_render, number, snapshot);
    let predicted_ids = predict(snapshot, &rendered, &active_render, &pins, now);
    let keep_child = choice.keep_child || too_large.is_some();
    let (child, predicted) = if keep_child {
        let prior_predicted = prior
            .and_then(|p| p.placement.as_ref())
            .map(|p| p.predicted.clone())
            .unwrap_or_default();
        (None, prior_predicted)
    } else {
        (Some(rendered), sorted_names(&predicted_ids))
    };

    // Status.
    let generation = meta.generation;
    let prior_conditions: &[crate::api::Condition] = prior.map_or(&[], |p| p.conditions.as_slice());
    let active_names: Vec<String> = choice
        .active
        .iter()
        .map(|&i| spec.tiers[i].name.clone())
        .collect();
    let mut status = TieredPlacementStatus {
        observed_generation: generation,
        active_tiers: active_names.clone(),
        preferred_tier: spec.tiers.first().map(|t| t.name.clone()),
        placement: Some(super::child_mirror(snapshot, namespace, child_name, &predicted)),
        capacity: verdicts.state.clone(),
        workload: prior.and_then(|p| p.workload.clone()),
        reservations: prior.map(|p| p.reservations.clone()).unwrap_or_default(),
        transitions: prior.map(|p| p.transitions.clone()).unwrap_or_default(),
        frozen_until: frozen_until.map(time),
        ..TieredPlacementStatus::default()
    };
    let lowest_active = choice.active.iter().copied().max();
    let predicted_set: std::collections::HashSet<&str> = predicted.iter().map(String::as_str).collect();
    status.tiers = spec
        .tiers
        .iter()
        .zip(&health)
        .enumerate()
        .map(|(i, (tier, h))| {
            let is_active = choice.active.contains(&i);
            let above_active = lowest_active.is_some_and(|l| i < l);
            let eligible_at = if above_active { h.eligible_at() } else { None };
            let state = if is_active {
                TierState::Active
            } else if h.quarantined(now) {
                TierState::Quarantined
            } else if h.feasible.len()
                < if spec.mode == TieringMode::Failover {
                    h.min
                } else {
                    1
                }
            {
                TierState::Unavailable
            } else if !h.satisfied && h.unknown_only > 0 {
                TierState::Unknown
            } else if above_active && eligible_at.is_some_and(|e| e > now) {
                TierState::Recovering
            } else {
                TierState::Standby
            };
            TierStatus {
                name: tier.name.clone(),
                state,
                feasible: h.feasible.len() as i32,
                qualifying: h.qualifying.len() as i32,
                selected: tiers[i]
                    .members
                    .iter()
                    .filter(|id| predicted_set.contains(snapshot.cluster_name(**id)))
                    .count() as i32,
                healthy_since: h.healthy_since.map(time),
                penalty: h.penalty,
                penalty_since: h.penalty_since.filter(|_| h.penalty > 0).map(time),
                effective_hold_down: Some(super::format_duration(std::time::Duration::from_nanos(
                    h.effective_hold_down.max(0) as u64,
                ))),
                failback_eligible_at: eligible_at.map(time),
            }
        })
        .collect();
    status.failback = Some(FailbackStatus {
        observed_trigger: new_observed,
        pending: choice.pending.map(|(from, to, at, _)| PendingFailback {
            from: spec.tiers[from].name.clone(),
            to: spec.tiers[to].name.clone(),
            eligible_at: at.map(time),
        }),
    })
    .filter(|f| !f.observed_trigger.is_empty() || f.pending.is_some());

    let mut events = Vec::new();
    let mut transition = None;
    if let Some(m) = &choice.movement {
        let prior_names = prior.map(|p| p.active_tiers.clone()).unwrap_or_default();
        status.transitions.insert(
            0,
            Transition {
                time: time(ceil_second(now)),
                kind: m.kind,
                from: prior_names,
                to: active_names.clone(),
                reason: m.reason.clone(),
                message: m.message.clone(),
            },
        );
        status.transitions.truncate(KEPT_TRANSITIONS);
        events.push(PlanEvent {
            type_: "Normal",
            reason: format!("{:?}", m.kind),
            message: m.message.clone(),
        });
        transition = Some(m.kind);
        if counted(m.kind) {
            let recent = status
                .transitions
                .iter()
                .filter(|t| counted(t.kind) && of(&t.time) > now - HOUR)
                .count();
            if recent > timings.max_transitions_per_hour as usize && !frozen {
                let until = ceil_second(now) + HOUR;
                status.frozen_until = Some(time(until));
                requeue.at(Some(until), now);
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
            requeue.at(Some(ceil_second(now) + dur(timings.min_dwell)), now);
        }
    }

    // Conditions, in a fixed order.
    let mut conditions = Vec::new();
    let mut set = |type_: &str, value: bool, reason: &str, message: String| {
        set_condition(
            &mut conditions,
            prior_conditions,
            type_,
            value,
            reason,
            message,
            generation,
            now,
        );
    };
    match too_large {
        Some(&i) => set(
            condition::READY,
            false,
            "PinningTooLarge",
            format!(
                "tier {} would pin {} clusters (at most {MAX_PINNED_PER_TIER}); define the tier with labels instead",
                spec.tiers[i].name,
                pins[i].len()
            ),
        ),
        None => set(
            condition::READY,
            true,
            "PlacementSynced",
            format!("child Placement {child_name}"),
        ),
    }
    let on_preferred = choice.active == [0];
    let (reason, message) = if on_preferred {
        ("OnPreferredTier", String::new())
    } else if override_idx.is_some() {
        (
            "Override",
            format!(
                "override pins tier {}",
                spec.override_.as_ref().map_or("", |o| o.tier.as_str())
            ),
        )
    } else if spec.mode == TieringMode::Overflow {
        (
            "Overflowing",
            format!("active tiers: {}", active_names.join(", ")),
        )
    } else {
        ("FailedOver", format!("active tier: {}", active_names.join(", ")))
    };
    set(condition::ON_PREFERRED_TIER, on_preferred, reason, message);
    match choice.pending {
        Some((from, to, at, reason)) => set(
            condition::FAILBACK_PENDING,
            true,
            reason,
            match at {
                Some(at) => format!(
                    "{} qualifies; failback from {} eligible at {}",
                    spec.tiers[to].name,
                    spec.tiers[from].name,
                    timestamp(at)
                ),
                None => format!(
                    "{} qualifies; set spec.failback.trigger to a new value to fail back from {}",
                    spec.tiers[to].name, spec.tiers[from].name
                ),
            },
        ),
        None => set(condition::FAILBACK_PENDING, false, "NoFailback", String::new()),
    }
    let mut stale: Vec<String> = health
        .iter()
        .flat_map(|h| h.feasible.iter())
        .filter(|id| verdict_of(**id).is_some_and(|v| v.unknown))
        .map(name_of)
        .collect();
    stale.sort();
    if stale.is_empty() {
        set(condition::SCORES_STALE, false, "Fresh", String::new());
    } else {
        let shown: Vec<&str> = stale.iter().take(10).map(String::as_str).collect();
        let more = if stale.len() > 10 {
            format!(" and {} more", stale.len() - 10)
        } else {
            String::new()
        };
        set(
            condition::SCORES_STALE,
            true,
            "Stale",
            format!(
                "scores unknown for {}{more}; no voluntary move uses them",
                shown.join(", ")
            ),
        );
    }
    match status.frozen_until.as_ref() {
        Some(until) => set(
            condition::FROZEN,
            true,
            "BudgetExceeded",
            format!("voluntary moves blocked until {}", until.0),
        ),
        None => set(condition::FROZEN, false, "WithinBudget", String::new()),
    }
    set(
        condition::NO_TIER_SATISFIED,
        choice.no_tier_satisfied,
        if choice.no_tier_satisfied {
            "NoTierSatisfied"
        } else {
            "TierSatisfied"
        },
        if choice.no_tier_satisfied {
            "no tier has enough qualifying clusters; the current placement is kept".into()
        } else {
            String::new()
        },
    );
    if spec.mode == TieringMode::Overflow {
        set(
            condition::INSUFFICIENT_CAPACITY,
            choice.insufficient,
            if choice.insufficient {
                "Shortfall"
            } else {
                "Enough"
            },
            if choice.insufficient {
                format!(
                    "{} of {} clusters qualify across the tiers",
                    predicted.len(),
                    spec.number_of_clusters.unwrap_or(0)
                )
            } else {
                String::new()
            },
        );
    }
    if let Some(c) = prior_conditions
        .iter()
        .find(|c| c.type_ == condition::PLAN_DIVERGED)
    {
        conditions.push(c.clone());
    }
    status.conditions = conditions;
    if let Some(Some(ready)) = prior.map(|p| p.conditions.iter().find(|c| c.type_ == condition::READY))
        && too_large.is_some()
        && ready.reason != "PinningTooLarge"
    {
        events.push(PlanEvent {
            type_: "Warning",
            reason: "PinningTooLarge".into(),
            message: "the child Placement is left as it was".into(),
        });
    }

    // Reports.
    let reports = spec
        .tiers
        .iter()
        .zip(tiers)
        .zip(&health)
        .map(|((tier, t), h)| {
            let excluded = t
                .members
                .iter()
                .filter_map(|id| {
                    if let Some((_, why)) = t.rejected.iter().find(|(r, _)| r == id) {
                        return Some((name_of(id), why.clone()));
                    }
                    let v: &Verdict = verdict_of(*id)?;
                    (!v.qualified).then(|| (name_of(id), v.why.clone()))
                })
                .collect();
            let mut selected: Vec<String> = t
                .members
                .iter()
                .map(name_of)
                .filter(|n| predicted_set.contains(n.as_str()))
                .collect();
            selected.sort();
            TierReport {
                name: tier.name.clone(),
                qualifying: h.qualifying.iter().map(name_of).collect(),
                selected,
                excluded,
                misconfigured: t.misconfigured.clone(),
            }
        })
        .collect();

    let live_hash = snapshot
        .placement(namespace, child_name)
        .and_then(|p| p.metadata.annotations.as_ref())
        .and_then(|a| a.get(render::PLAN_HASH_ANNOTATION));
    let write_child = child.as_ref().is_some_and(|c| {
        c.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(render::PLAN_HASH_ANNOTATION))
            != live_hash
    });
    let write_status = prior != Some(&status);
    Plan {
        status,
        child,
        predicted,
        requeue_at: requeue.0.map(timestamp),
        events,
        tiers: reports,
        write_child,
        write_status,
        transition,
    }
}

fn has_rules_or_overflow(spec: &TieredPlacementSpec, has_rules: bool) -> bool {
    has_rules || spec.mode == TieringMode::Overflow
}

fn effective(hold: i128, max_hold: i128, penalty: i32) -> i128 {
    let factor = 1i128 << penalty.clamp(0, 40);
    hold.saturating_mul(factor).min(max_hold)
}

/// What OCM will select for the rendered child, with the same engine. Pinned tiers are
/// scheduled over exactly their pins (what the CEL pin admits; each pinned cluster passed its
/// tier's predicates), so the CEL pin need not be evaluated for every cluster.
fn predict(
    snapshot: &HubSnapshot,
    child: &Placement,
    active: &[ActiveTier<'_>],
    pins: &[Vec<String>],
    now: i128,
) -> Vec<ClusterId> {
    let now_ts = timestamp(now);
    let pinned = active.iter().all(|a| a.pins.is_some());
    if !pinned {
        let Ok(c) = candidates::candidates(snapshot, child) else {
            return Vec::new();
        };
        return schedule(snapshot, child, &c.clusters, now_ts)
            .map(|r| r.selected)
            .unwrap_or_default();
    }
    let mut ids: Vec<ClusterId> = active
        .iter()
        .flat_map(|a| pins[a.index].iter())
        .filter_map(|n| snapshot.cluster_id(n))
        .collect();
    ids.sort();
    ids.dedup();
    let unpinned = Placement {
        metadata: child.metadata.clone(),
        spec: PlacementSpec {
            predicates: Vec::new(),
            ..child.spec.clone()
        },
        status: None,
    };
    schedule(snapshot, &unpinned, &ids, now_ts)
        .map(|r| r.selected)
        .unwrap_or_default()
}

struct Ctx<'a> {
    spec: &'a TieredPlacementSpec,
    timings: &'a Timings,
    health: &'a [Health],
    now: i128,
    frozen: bool,
    dwell_end: Option<i128>,
    manual_fired: bool,
    first_plan: bool,
    tiers_vanished: bool,
    generation_changed: bool,
    last_kind: Option<&'a (TransitionKind, Vec<String>)>,
}

impl Ctx<'_> {
    fn name(&self, i: usize) -> &str {
        &self.spec.tiers[i].name
    }
    fn describe(&self, i: usize) -> String {
        let h = &self.health[i];
        format!(
            "{}: {} feasible, {} qualifying, needs {}",
            self.name(i),
            h.feasible.len(),
            h.qualifying.len(),
            h.min
        )
    }
    /// Whether the last transition failed back to tier `i` (so leaving it now is a relapse).
    fn entered_by_failback(&self, i: usize) -> bool {
        self.last_kind.is_some_and(|(kind, to)| {
            *kind == TransitionKind::Failback && to.first().map(String::as_str) == Some(self.name(i))
        })
    }
    /// When a voluntary move may happen at the earliest, by dwell and freeze.
    fn voluntary_gate(&self) -> Option<i128> {
        self.dwell_end
    }
}

fn failover(ctx: &Ctx<'_>, current: Option<usize>, override_idx: Option<usize>) -> Choice {
    let h = ctx.health;
    let mut choice = Choice {
        active: Vec::new(),
        chosen: Vec::new(),
        movement: None,
        pending: None,
        no_tier_satisfied: false,
        insufficient: false,
        keep_child: false,
        relapse_of: None,
    };
    if let Some(o) = override_idx {
        choice.active = vec![o];
        if current != Some(o) {
            choice.movement = Some(Move {
                kind: TransitionKind::Override,
                reason: "Override".into(),
                message: format!("spec.override.tier pins {}", ctx.name(o)),
            });
        }
        choice.no_tier_satisfied = !h[o].satisfied;
        return choice;
    }
    let Some(a) = current else {
        let target = (0..h.len())
            .find(|&i| h[i].entry_ok)
            .or_else(|| (0..h.len()).find(|&i| h[i].satisfied));
        let (target, none) = match target {
            Some(t) => (t, false),
            None => (0, true),
        };
        choice.active = vec![target];
        choice.no_tier_satisfied = none;
        let kind = if ctx.tiers_vanished {
            TransitionKind::SpecChange
        } else {
            TransitionKind::Initial
        };
        choice.movement = Some(Move {
            kind,
            reason: if none {
                "NoTierSatisfied"
            } else {
                "FirstSatisfiedTier"
            }
            .into(),
            message: if none {
                format!("no tier is satisfied; starting on {}", ctx.name(0))
            } else {
                ctx.describe(target)
            },
        });
        return choice;
    };
    choice.active = vec![a];
    if !h[a].satisfied {
        let infeasible = h[a].feasible.len() < h[a].min;
        let stale_only = !infeasible && h[a].qualifying.len() + h[a].unknown_only >= h[a].min;
        if !stale_only {
            let others = |quarantined: bool| {
                (0..h.len()).find(|&i| i != a && h[i].entry_ok && h[i].quarantined(ctx.now) == quarantined)
            };
            match others(false).or_else(|| others(true)) {
                Some(t) => {
                    choice.active = vec![t];
                    if infeasible && ctx.entered_by_failback(a) {
                        choice.relapse_of = Some(a);
                    }
                    choice.movement = Some(Move {
                        kind: TransitionKind::Failover,
                        reason: if infeasible {
                            "TierUnavailable"
                        } else {
                            "InsufficientQualifying"
                        }
                        .into(),
                        message: format!("{}; moving to {}", ctx.describe(a), ctx.describe(t)),
                    });
                    return choice;
                }
                None => {
                    choice.no_tier_satisfied = true;
                }
            }
        }
    }
    // Staying on `a`: is a failback due?
    let Some(best) = (0..a).find(|&i| h[i].entry_ok) else {
        return choice;
    };
    match ctx.spec.failback.policy {
        FailbackMode::Never => {}
        FailbackMode::Manual => {
            if ctx.manual_fired {
                choice.active = vec![best];
                choice.movement = Some(Move {
                    kind: TransitionKind::Failback,
                    reason: "ManualTrigger".into(),
                    message: format!(
                        "trigger {:?}: back to {}",
                        ctx.spec.failback.trigger,
                        ctx.describe(best)
                    ),
                });
            } else {
                choice.pending = Some((a, best, None, "AwaitingTrigger"));
            }
        }
        FailbackMode::Automatic => {
            let ready = (0..a).find(|&i| {
                h[i].entry_ok
                    && !h[i].quarantined(ctx.now)
                    && h[i].eligible_at().is_some_and(|e| ctx.now >= e)
            });
            let dwell_ok = ctx.voluntary_gate().is_none_or(|d| ctx.now >= d);
            match ready {
                Some(b) if dwell_ok && !ctx.frozen => {
                    choice.active = vec![b];
                    choice.movement = Some(Move {
                        kind: TransitionKind::Failback,
                        reason: "HoldDownElapsed".into(),
                        message: format!(
                            "{} healthy for {}; back from {}",
                            ctx.describe(b),
                            super::format_duration(std::time::Duration::from_nanos(
                                h[b].effective_hold_down.max(0) as u64
                            )),
                            ctx.name(a)
                        ),
                    });
                }
                _ => {
                    let hold_at = h[best].eligible_at();
                    let at = [hold_at, ctx.voluntary_gate()].into_iter().flatten().max();
                    let reason = if ctx.frozen {
                        "Frozen"
                    } else if hold_at.is_some_and(|e| ctx.now < e) {
                        if h[best].quarantined(ctx.now) {
                            "Quarantined"
                        } else {
                            "HoldDown"
                        }
                    } else {
                        "MinDwell"
                    };
                    choice.pending = Some((a, best, at, reason));
                }
            }
        }
    }
    choice
}

#[allow(clippy::too_many_arguments)]
fn overflow(
    ctx: &Ctx<'_>,
    prior_selection: &[ClusterId],
    prior_active: &[usize],
    tier_of: &[Option<usize>],
    override_idx: Option<usize>,
    n: usize,
    snapshot: &HubSnapshot,
) -> Choice {
    let h = ctx.health;
    let last = override_idx.unwrap_or(h.len().saturating_sub(1));
    // Rank of each feasible member inside its tier.
    let mut rank = vec![usize::MAX; tier_of.len()];
    let mut qualifies = vec![false; tier_of.len()];
    let mut enters = vec![false; tier_of.len()];
    for t in h {
        for (r, id) in t.feasible.iter().enumerate() {
            rank[id.index()] = r;
        }
        for id in &t.qualifying {
            qualifies[id.index()] = true;
        }
        for id in &t.entry {
            enters[id.index()] = true;
        }
    }
    let key = |id: &ClusterId| (tier_of[id.index()].unwrap_or(usize::MAX), rank[id.index()]);
    let mut choice = Choice {
        active: Vec::new(),
        chosen: vec![Vec::new(); h.len()],
        movement: None,
        pending: None,
        no_tier_satisfied: false,
        insufficient: false,
        keep_child: false,
        relapse_of: None,
    };
    let any_qualifies = h.iter().take(last + 1).any(|t| !t.qualifying.is_empty());
    if !any_qualifies {
        choice.no_tier_satisfied = true;
        choice.keep_child = !prior_selection.is_empty();
        choice.active = prior_active.to_vec();
        choice.insufficient = true;
        if ctx.first_plan {
            choice.keep_child = false;
            choice.active = Vec::new();
        }
        return choice;
    }
    let mut keep: Vec<ClusterId> = prior_selection
        .iter()
        .copied()
        .filter(|id| tier_of[id.index()].is_some_and(|t| t <= last) && qualifies[id.index()])
        .collect();
    let lost = prior_selection.len() - keep.len();
    keep.sort_by_key(key);
    let mut scaled_in = false;
    if keep.len() > n {
        keep.truncate(n);
        scaled_in = true;
    }
    let mut selected = vec![false; tier_of.len()];
    for id in &keep {
        selected[id.index()] = true;
    }
    let mut spilled = 0usize;
    'fill: for t in h.iter().take(last + 1) {
        for id in &t.fresh_qualifying {
            if keep.len() >= n {
                break 'fill;
            }
            if !selected[id.index()] {
                selected[id.index()] = true;
                keep.push(*id);
                spilled += 1;
            }
        }
    }
    // Contract: swap the worst selected cluster for the best unused one of a better tier.
    let mut swaps = Vec::new();
    let allowed = match ctx.spec.failback.policy {
        FailbackMode::Never => false,
        FailbackMode::Manual => ctx.manual_fired,
        FailbackMode::Automatic => !ctx.frozen && ctx.voluntary_gate().is_none_or(|d| ctx.now >= d),
    };
    let eligible_tier = |i: usize| match ctx.spec.failback.policy {
        FailbackMode::Manual => true,
        _ => !h[i].quarantined(ctx.now) && h[i].eligible_at().is_some_and(|e| ctx.now >= e),
    };
    let per_step = ctx.timings.max_clusters_per_step;
    let mut pending = None;
    loop {
        keep.sort_by_key(key);
        let Some(&worst) = keep.last() else { break };
        let j = tier_of[worst.index()].unwrap_or(usize::MAX);
        let better = (0..j.min(h.len())).find_map(|i| {
            h[i].entry
                .iter()
                .find(|id| !selected[id.index()] && enters[id.index()])
                .map(|id| (i, *id))
        });
        let Some((i, best)) = better else { break };
        if !allowed || swaps.len() >= per_step || !eligible_tier(i) {
            if swaps.is_empty() && ctx.spec.failback.policy != FailbackMode::Never {
                let at = [h[i].eligible_at(), ctx.voluntary_gate()]
                    .into_iter()
                    .flatten()
                    .max();
                let reason = match ctx.spec.failback.policy {
                    FailbackMode::Manual => "AwaitingTrigger",
                    _ if ctx.frozen => "Frozen",
                    _ if h[i].eligible_at().is_some_and(|e| ctx.now < e) => "HoldDown",
                    _ => "MinDwell",
                };
                let at = if ctx.spec.failback.policy == FailbackMode::Manual {
                    None
                } else {
                    at
                };
                pending = Some((j, i, at, reason));
            }
            break;
        }
        keep.pop();
        selected[worst.index()] = false;
        selected[best.index()] = true;
        keep.push(best);
        swaps.push((worst, best));
    }
    choice.pending = pending;
    choice.insufficient = keep.len() < n;
    let mut active: Vec<usize> = keep.iter().filter_map(|id| tier_of[id.index()]).collect();
    active.sort_unstable();
    active.dedup();
    for id in &keep {
        if let Some(t) = tier_of[id.index()] {
            choice.chosen[t].push(snapshot.cluster_name(*id).to_string());
        }
    }
    for c in &mut choice.chosen {
        c.sort();
    }
    let names = |ids: &[usize]| {
        ids.iter()
            .map(|&i| ctx.name(i).to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    if !swaps.is_empty() {
        let moves: Vec<String> = swaps
            .iter()
            .map(|(out, inn)| {
                format!(
                    "{} -> {}",
                    snapshot.cluster_name(*out),
                    snapshot.cluster_name(*inn)
                )
            })
            .collect();
        choice.movement = Some(Move {
            kind: TransitionKind::Contract,
            reason: if ctx.manual_fired {
                "ManualTrigger"
            } else {
                "HoldDownElapsed"
            }
            .into(),
            message: format!("consolidating: {}", moves.join(", ")),
        });
    } else if active != prior_active || ctx.first_plan {
        let (kind, reason) = if ctx.first_plan && !ctx.tiers_vanished {
            (TransitionKind::Initial, "FirstFill")
        } else if ctx.tiers_vanished || ctx.generation_changed && (scaled_in || spilled > 0 && lost == 0) {
            (TransitionKind::SpecChange, "SpecChanged")
        } else {
            (
                TransitionKind::Overflow,
                if lost > 0 {
                    "InsufficientQualifying"
                } else {
                    "Refill"
                },
            )
        };
        choice.movement = Some(Move {
            kind,
            reason: reason.into(),
            message: format!(
                "{} of {n} clusters on {} (was {}); {}",
                keep.len(),
                names(&active),
                if prior_active.is_empty() {
                    "none".to_string()
                } else {
                    names(prior_active)
                },
                (0..=last.min(h.len() - 1))
                    .map(|i| ctx.describe(i))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        });
    }
    choice.active = active;
    choice
}
