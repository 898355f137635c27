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
use super::render::{self, ActiveTier, MAX_PINNED_PER_TIER, Owner, Retained};
use super::verdict::{self, Verdict};
use super::workload::WorkIndex;
use super::workload::retain::{self, Leaving, Released};
use super::workload::verdicts::{self as workload_verdicts, WorkloadVerdicts};
use super::{Plan, PlanEvent, TierReport, condition, set_condition, set_condition_status};
use ocm_score_api::crd::tiered_placement::{
    FailbackMode, FailbackStatus, PendingFailback, RELEASE_ANNOTATION, TierState, TierStatus,
    TieredPlacementSpec, TieredPlacementStatus, TieringMode, Timings, Transition, TransitionKind,
    WorkloadHealthStatus, WorkloadState,
};
use ocm_score_api::{ObjectMeta, Placement, PlacementSpec};
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
    /// The ManifestWorks `spec.workloadHealth` judges.
    pub works: &'a WorkIndex<'a>,
    pub now: i128,
}

/// One tier's health.
struct Health {
    min: usize,
    /// Feasible members, best first.
    feasible: Vec<ClusterId>,
    qualifying: Vec<ClusterId>,
    entry: Vec<ClusterId>,
    /// May enter by capacity, workload failures ignored: what failback health counts.
    capacity_entry: Vec<ClusterId>,
    /// Qualifying by capacity, workload failures ignored.
    capacity_qualifying: Vec<ClusterId>,
    /// Qualifying by capacity but excluded because their workload Failed.
    workload_failed: Vec<ClusterId>,
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
        works,
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
    let hold = dur(timings.hold_down);
    let max_hold = dur(timings.max_hold_down);

    // Workload verdicts (docs/design/workload-failover.md §3) and the clusters they exclude for
    // this TieredPlacement.
    let workload: Option<WorkloadVerdicts> = spec.workload_health.as_ref().map(|policy| {
        workload_verdicts::evaluate(
            policy,
            namespace,
            works,
            members.iter().map(|id| snapshot.cluster_name(*id)),
            prior.and_then(|p| p.workload_health.as_ref()),
            now,
        )
    });
    let exclusion = workload.as_ref().map_or_else(Exclusion::default, |w| {
        exclusions(w, snapshot, &tier_of, spec, prior, hold, max_hold, now)
    });
    if let Some(w) = &workload {
        requeue.at(w.requeue_at, now);
    }
    requeue.at(exclusion.requeue_at, now);
    let excluded = |id: &ClusterId| exclusion.excluded.get(id.index()).is_some_and(Option::is_some);
    let prior_retained: &[ocm_score_api::crd::tiered_placement::RetainedCluster] = prior
        .and_then(|p| p.workload_health.as_ref())
        .map_or(&[], |w| w.retained.as_slice());
    let is_prior_retained = |name: &str| prior_retained.iter().any(|r| r.cluster == name);
    let prior_selection: Vec<ClusterId> = match prior.and_then(|p| p.placement.as_ref()) {
        Some(p) if !first_plan => p
            .predicted
            .iter()
            .filter(|n| !is_prior_retained(n))
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
    let mut health: Vec<Health> = tiers
        .iter()
        .zip(&spec.tiers)
        .map(|(t, tier)| {
            let min = tier.min_clusters.map(|m| m.max(1) as usize).or(n).unwrap_or(1);
            let capacity_qualifying: Vec<ClusterId> = t
                .feasible
                .iter()
                .copied()
                .filter(|id| verdict_of(*id).is_some_and(|v| v.qualified))
                .collect();
            let (workload_failed, qualifying): (Vec<ClusterId>, Vec<ClusterId>) =
                capacity_qualifying.iter().copied().partition(|id| excluded(id));
            let capacity_entry: Vec<ClusterId> = t
                .feasible
                .iter()
                .copied()
                .filter(|id| verdict_of(*id).is_some_and(|v| v.entry))
                .collect();
            let entry: Vec<ClusterId> = capacity_entry
                .iter()
                .copied()
                .filter(|id| !excluded(id))
                .collect();
            let unknown_only = t
                .feasible
                .iter()
                .filter(|id| {
                    !excluded(id)
                        && verdict_of(**id)
                            .is_some_and(|v| v.unknown && !v.qualified && !v.stale_disqualified)
                })
                .count();
            let fresh_qualifying: Vec<ClusterId> = qualifying
                .iter()
                .copied()
                .filter(|id| verdict_of(*id).is_some_and(|v| !v.unknown))
                .collect();
            let before = prior_tier(&tier.name);
            // Health for failback counts capacity only: a workload failure excludes clusters
            // for their own hold-down, after which the tier is eligible at once.
            let healthy_now = match spec.mode {
                TieringMode::Failover => capacity_entry.len() >= min,
                TieringMode::Overflow => capacity_entry.iter().any(|id| !in_prior[id.index()]),
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
                capacity_entry,
                capacity_qualifying,
                workload_failed,
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
        excluded: &exclusion.excluded,
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
            // Capacity only, as when health was first judged above (a workload failure has its
            // own hold-down).
            let unused = h.capacity_entry.iter().any(|id| !chosen[id.index()]);
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
    // Staying on a tier short of clusters not known to fail (no target, or an override): keep
    // some of its failed ones (workload-failover.md §4) rather than shrink or empty the child, but only as
    // many as `numberOfClusters` needs beside the others, the selected ones first, so OCM never
    // prefers a failed cluster to one not known to fail.
    let failed_kept: Vec<Vec<ClusterId>> = health
        .iter()
        .map(|h| {
            if spec.mode != TieringMode::Failover || h.qualifying.len() >= h.min {
                return Vec::new();
            }
            let mut failed = h.workload_failed.clone();
            failed.sort_by_key(|id| !in_prior[id.index()]);
            if let Some(n) = n {
                failed.truncate(n.saturating_sub(h.qualifying.len()));
            }
            failed
        })
        .collect();
    let pins: Vec<Vec<String>> = match spec.mode {
        TieringMode::Failover => health
            .iter()
            .zip(&failed_kept)
            .map(|(h, kept)| {
                let mut ids = h.qualifying.clone();
                ids.extend(kept.iter().copied());
                sorted_names(&ids)
            })
            .collect(),
        TieringMode::Overflow => choice.chosen.clone(),
    };
    let pinned_mode = has_rules_or_overflow(spec, has_rules);
    // Unpinned, a Failed cluster is left out by name: the tier's own failed members and those of
    // any other tier (a cluster set of the active tier may hold them too), except the failed
    // members a tier short of others keeps.
    let kept_failed = |id: &ClusterId| choice.active.iter().any(|&i| failed_kept[i].contains(id));
    let exclude: Vec<String> = if pinned_mode {
        Vec::new()
    } else {
        let ids: Vec<ClusterId> = members
            .iter()
            .copied()
            .filter(|id| excluded(id) && !kept_failed(id))
            .collect();
        sorted_names(&ids)
    };
    // Every name list the child carries is held to the cap.
    let too_large: Option<(String, usize)> = choice.active.iter().find_map(|&i| {
        let (what, count) = if pinned_mode {
            ("pin", pins[i].len())
        } else {
            ("exclude by name", exclude.len())
        };
        (count > MAX_PINNED_PER_TIER).then(|| {
            (
                format!("tier {} would {what} {count} clusters", spec.tiers[i].name),
                count,
            )
        })
    });
    let active_render: Vec<ActiveTier<'_>> = choice
        .active
        .iter()
        .map(|&i| ActiveTier {
            index: i,
            pins: pinned_mode.then(|| pins[i].as_slice()),
            exclude: &exclude,
        })
        .collect();
    let number = spec.number_of_clusters;
    let rendered = render::child(
        spec,
        &owner,
        child_name,
        &active_render,
        number,
        &Retained::default(),
        snapshot,
    );
    let predicted_ids = predict(snapshot, &rendered, &active_render, &pins, &[], now);
    let keep_child = choice.keep_child || too_large.is_some();
    let no_verdicts = WorkloadVerdicts::default();
    let workload_of = workload.as_ref().unwrap_or(&no_verdicts);

    // Make-before-break (workload-failover.md §5): the clusters this plan leaves may stay beside their
    // replacements; the child then pins exactly the choice plus them.
    let retention = (!keep_child).then(|| {
        let released = Released::parse(
            meta.annotations
                .as_ref()
                .and_then(|a| a.get(RELEASE_ANNOTATION))
                .map(String::as_str),
        );
        let leaving = Leaving {
            failed_grace: spec.workload_health.as_ref().map(|p| p.grace().map(dur)),
            voluntary: choice.movement.as_ref().is_some_and(|m| voluntary(m.kind)),
            overlap: dur(timings.overlap),
        };
        retain::retain(
            prior_retained,
            &sorted_names(&prior_selection),
            &sorted_names(&predicted_ids),
            workload_of,
            &leaving,
            &released,
            |c| {
                snapshot
                    .cluster_id(c)
                    .is_some_and(|id| tier_of[id.index()].is_some())
            },
            now,
        )
    });
    let mut retained: Vec<ocm_score_api::crd::tiered_placement::RetainedCluster> = match &retention {
        Some(r) => r.retained.clone(),
        None => prior_retained.to_vec(),
    };
    if let Some(r) = &retention {
        requeue.at(r.requeue_at, now);
    }
    // With retained clusters the active tiers are pinned exactly: per tier, what OCM selects now.
    let mut exact: Vec<Vec<String>> = vec![Vec::new(); spec.tiers.len()];
    for id in &predicted_ids {
        if let Some(t) = tier_of[id.index()] {
            exact[t].push(name_of(id));
        }
    }
    for e in &mut exact {
        e.sort();
    }
    let mut events = Vec::new();
    let mut retention_dropped = false;
    // Every pin list is held to the cap: beyond it the plan breaks before making (the retained
    // clusters go at once) rather than leave the child as it was, on the clusters it leaves.
    if !keep_child && !retained.is_empty() {
        let over = choice
            .active
            .iter()
            .map(|&i| (spec.tiers[i].name.as_str(), exact[i].len()))
            .chain(std::iter::once(("of retained clusters", retained.len())))
            .find(|(_, n)| *n > MAX_PINNED_PER_TIER);
        if let Some((what, count)) = over {
            let names: Vec<&str> = retained.iter().map(|r| r.cluster.as_str()).collect();
            events.push(PlanEvent {
                type_: "Warning",
                reason: "PinningTooLarge".into(),
                message: format!(
                    "keeping {} beside the choice would pin {count} clusters of tier {what} (at most {MAX_PINNED_PER_TIER}): dropped at once",
                    names.join(", ")
                ),
            });
            retained.clear();
            retention_dropped = true;
        }
    }
    let (child, predicted) = if keep_child {
        let prior_predicted = prior
            .and_then(|p| p.placement.as_ref())
            .map(|p| p.predicted.clone())
            .unwrap_or_default();
        (None, prior_predicted)
    } else if retained.is_empty() {
        (Some(rendered), sorted_names(&predicted_ids))
    } else {
        let exact_render: Vec<ActiveTier<'_>> = choice
            .active
            .iter()
            .map(|&i| ActiveTier {
                index: i,
                pins: Some(exact[i].as_slice()),
                exclude: &[],
            })
            .collect();
        let names: Vec<String> = retained.iter().map(|r| r.cluster.clone()).collect();
        let mut retained_tiers: Vec<usize> = names
            .iter()
            .filter_map(|n| snapshot.cluster_id(n).and_then(|id| tier_of[id.index()]))
            .collect();
        retained_tiers.sort_unstable();
        retained_tiers.dedup();
        let number = spec
            .number_of_clusters
            .map(|n| n.saturating_add(i32::try_from(names.len()).unwrap_or(i32::MAX)));
        let kept = Retained {
            names: &names,
            tiers: &retained_tiers,
        };
        let rendered = render::child(spec, &owner, child_name, &exact_render, number, &kept, snapshot);
        let ids = predict(snapshot, &rendered, &exact_render, &exact, &names, now);
        (Some(rendered), sorted_names(&ids))
    };

    // Status.
    let generation = meta.generation;
    let prior_conditions: &[ocm_score_api::Condition] = prior.map_or(&[], |p| p.conditions.as_slice());
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
        workload_health: workload_status(workload.as_ref(), &exclusion, retained.clone()),
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
    match &too_large {
        Some((what, _)) => set(
            condition::READY,
            false,
            "PinningTooLarge",
            format!("{what} (at most {MAX_PINNED_PER_TIER}); define the tier with labels instead"),
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
    if spec.workload_health.is_some() {
        let (value, reason, message) = workload_condition(
            workload_of,
            &predicted,
            &retained,
            &exclusion,
            override_idx.is_some(),
        );
        set_condition_status(
            &mut conditions,
            prior_conditions,
            condition::WORKLOAD_HEALTHY,
            value,
            reason,
            message.clone(),
            generation,
            now,
        );
        for v in workload_of.clusters.iter().filter(|v| v.newly_failed) {
            events.push(PlanEvent {
                type_: "Warning",
                reason: "WorkloadFailed".into(),
                message: format!(
                    "{}: {}; failed for this TieredPlacement",
                    v.entry.cluster, v.entry.reason
                ),
            });
        }
        // One Warning per change of the set of clusters it names.
        let was = prior_conditions
            .iter()
            .any(|c| c.type_ == condition::WORKLOAD_HEALTHY && c.reason == reason && c.message == message);
        if reason == UNHEALTHY_EVERYWHERE && !was {
            events.push(PlanEvent {
                type_: "Warning",
                reason: UNHEALTHY_EVERYWHERE.into(),
                message,
            });
        }
    }
    if let Some(r) = &retention {
        for (reason, message) in r
            .events
            .iter()
            .filter(|(reason, _)| !(retention_dropped && *reason == "Retained"))
        {
            events.push(PlanEvent {
                type_: "Normal",
                reason: (*reason).to_string(),
                message: message.clone(),
            });
        }
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
                    if let Some(Some(until)) = exclusion.excluded.get(id.index()) {
                        let name = name_of(id);
                        let why = exclusion_reason(workload_of, &name, *until);
                        return Some((name, why));
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
    retained: &[String],
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
        .chain(retained)
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
    /// Per cluster id: excluded because its workload Failed (until then, `i128::MAX`: until
    /// evidence).
    excluded: &'a [Option<i128>],
}

impl Ctx<'_> {
    fn name(&self, i: usize) -> &str {
        &self.spec.tiers[i].name
    }
    fn describe(&self, i: usize) -> String {
        let h = &self.health[i];
        let failed = if h.workload_failed.is_empty() {
            String::new()
        } else {
            format!(" ({} more with a Failed workload)", h.workload_failed.len())
        };
        format!(
            "{}: {} feasible, {} qualifying{failed}, needs {}",
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
        // Enough capacity, but workloads failed: leave only for a tier not known to fail.
        let workload = !infeasible
            && !h[a].workload_failed.is_empty()
            && h[a].capacity_qualifying.len() + h[a].unknown_only >= h[a].min;
        if !stale_only {
            let others = |quarantined: bool| {
                (0..h.len()).find(|&i| i != a && h[i].entry_ok && h[i].quarantined(ctx.now) == quarantined)
            };
            match others(false).or_else(|| others(true)) {
                Some(t) => {
                    choice.active = vec![t];
                    if (infeasible || workload) && ctx.entered_by_failback(a) {
                        choice.relapse_of = Some(a);
                    }
                    choice.movement = Some(Move {
                        kind: TransitionKind::Failover,
                        reason: if infeasible {
                            "TierUnavailable"
                        } else if workload {
                            "WorkloadFailed"
                        } else {
                            "InsufficientQualifying"
                        }
                        .into(),
                        message: format!("{}; moving to {}", ctx.describe(a), ctx.describe(t)),
                    });
                    return choice;
                }
                // No target not known to fail: stay (workload-failover.md §4); `WorkloadHealthy` says why.
                None if workload => {}
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
    let any_qualifies = h
        .iter()
        .take(last + 1)
        .any(|t| !t.qualifying.is_empty() || !t.workload_failed.is_empty());
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
    // A failed workload is left only for a replacement (workload-failover.md §4): without one it stays.
    let mut failed_kept = 0usize;
    for id in prior_selection {
        if keep.len() >= n {
            break;
        }
        let t = tier_of[id.index()];
        if !selected[id.index()] && t.is_some_and(|t| t <= last && h[t].workload_failed.contains(id)) {
            selected[id.index()] = true;
            keep.push(*id);
            failed_kept += 1;
        }
    }
    let lost = lost - failed_kept;
    let workload_lost = prior_selection
        .iter()
        .any(|id| !selected[id.index()] && ctx.excluded.get(id.index()).is_some_and(Option::is_some));

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
            } else if !swaps.is_empty() && ctx.spec.failback.policy == FailbackMode::Automatic {
                // This plan's swaps are a transition: the next step waits out minDwell from it.
                // Said now, so that planning again at once says the same.
                let next = ceil_second(ctx.now) + dur(ctx.timings.min_dwell);
                let at = h[i].eligible_at().map_or(next, |e| e.max(next));
                let reason = if h[i].eligible_at().is_some_and(|e| ctx.now < e) {
                    "HoldDown"
                } else {
                    "MinDwell"
                };
                pending = Some((j, i, Some(at), reason));
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
                if workload_lost {
                    "WorkloadFailed"
                } else if lost > 0 {
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

/// `WorkloadHealthy=False` reason when no tier has a cluster not known to fail
/// (workload-failover.md §4).
const UNHEALTHY_EVERYWHERE: &str = "UnhealthyEverywhere";

/// Which clusters a workload failure excludes for this TieredPlacement, and until when.
#[derive(Default)]
struct Exclusion {
    /// Per cluster id: `Some(until)` while excluded; `i128::MAX`: until there is evidence (its
    /// workload is still unhealthy, or no cluster's workload is Healthy).
    excluded: Vec<Option<i128>>,
    /// Failed clusters whose exclusion ended in this plan (sorted).
    expired: Vec<String>,
    requeue_at: Option<i128>,
}

/// A Failed cluster is excluded for its tier's effective hold-down from the failure. Past that
/// it stays excluded while its work still reports unhealthy, and while no cluster's workload is
/// Healthy anywhere: a workload broken by its own config must not start a new round of moves
/// just because time passed (workload-failover.md §4).
#[allow(clippy::too_many_arguments)]
fn exclusions(
    w: &WorkloadVerdicts,
    snapshot: &HubSnapshot,
    tier_of: &[Option<usize>],
    spec: &TieredPlacementSpec,
    prior: Option<&TieredPlacementStatus>,
    hold: i128,
    max_hold: i128,
    now: i128,
) -> Exclusion {
    let mut out = Exclusion {
        excluded: vec![None; snapshot.cluster_count()],
        ..Exclusion::default()
    };
    let any_healthy = w.any_healthy();
    for v in w
        .clusters
        .iter()
        .filter(|v| v.entry.state == WorkloadState::Failed)
    {
        let failed_at = v.entry.since.as_ref().map_or(now, of);
        let id = snapshot.cluster_id(&v.entry.cluster);
        // The penalty as stored: relapses lengthen the exclusion as they lengthen hold-downs.
        let penalty = id
            .and_then(|id| tier_of[id.index()])
            .and_then(|t| prior?.tiers.iter().find(|s| s.name == spec.tiers[t].name))
            .map_or(0, |s| s.penalty.max(0));
        let end = failed_at + effective(hold, max_hold, penalty);
        let until = if now < end {
            out.requeue_at = Some(out.requeue_at.map_or(end, |r: i128| r.min(end)));
            Some(end)
        } else if v.observed_unhealthy || !any_healthy {
            Some(i128::MAX)
        } else {
            None
        };
        match (until, id) {
            (Some(u), Some(id)) => out.excluded[id.index()] = Some(u),
            (Some(_), None) => {}
            (None, _) => out.expired.push(v.entry.cluster.clone()),
        }
    }
    out
}

fn exclusion_reason(w: &WorkloadVerdicts, cluster: &str, until: i128) -> String {
    let Some(v) = w.get(cluster) else {
        return "workload Failed".into();
    };
    let at = v
        .entry
        .since
        .as_ref()
        .map_or_else(String::new, |t| format!(" at {}", t.0));
    let while_ = if until != i128::MAX {
        format!("excluded until {}", timestamp(until))
    } else if v.observed_unhealthy {
        "excluded while its workload stays unhealthy".to_string()
    } else {
        "excluded until some cluster's workload is Healthy".to_string()
    };
    format!("workload Failed{at} ({}); {while_}", v.entry.reason)
}

/// `status.workloadHealth`: the verdicts (a failure whose exclusion ended is replaced by what
/// its work reports now, or forgotten without a work) and the retained clusters.
fn workload_status(
    w: Option<&WorkloadVerdicts>,
    exclusion: &Exclusion,
    retained: Vec<ocm_score_api::crd::tiered_placement::RetainedCluster>,
) -> Option<WorkloadHealthStatus> {
    let clusters: Vec<_> = w
        .map(|w| {
            w.clusters
                .iter()
                .filter_map(|v| {
                    if exclusion.expired.binary_search(&v.entry.cluster).is_err() {
                        return Some(v.entry.clone());
                    }
                    v.forgotten.clone()
                })
                .collect()
        })
        .unwrap_or_default();
    (!clusters.is_empty() || !retained.is_empty()).then_some(WorkloadHealthStatus { clusters, retained })
}

/// `WorkloadHealthy` over the clusters the plan chose (retained ones are on their way out).
fn workload_condition(
    w: &WorkloadVerdicts,
    predicted: &[String],
    retained: &[ocm_score_api::crd::tiered_placement::RetainedCluster],
    exclusion: &Exclusion,
    overridden: bool,
) -> (&'static str, &'static str, String) {
    let chosen: Vec<&String> = predicted
        .iter()
        .filter(|c| !retained.iter().any(|r| &r.cluster == *c))
        .collect();
    let named = |names: Vec<String>| {
        let more = names.len().saturating_sub(10);
        let mut text = names.into_iter().take(10).collect::<Vec<_>>().join(", ");
        if more > 0 {
            text.push_str(&format!(" and {more} more"));
        }
        text
    };
    let of_state = |state: WorkloadState| -> Vec<&String> {
        chosen.iter().copied().filter(|c| w.state(c) == state).collect()
    };
    if !of_state(WorkloadState::Failed).is_empty() {
        // Staying on a failed workload happens only when no tier has a cluster not known to
        // fail: name every cluster it failed on.
        let failed: Vec<String> = w
            .clusters
            .iter()
            .filter(|v| v.entry.state == WorkloadState::Failed)
            .filter(|v| exclusion.expired.binary_search(&v.entry.cluster).is_err())
            .map(|v| v.entry.cluster.clone())
            .collect();
        if overridden {
            return (
                "False",
                "Override",
                format!(
                    "the workload failed on {}; spec.override.tier keeps the tier",
                    named(failed)
                ),
            );
        }
        return (
            "False",
            UNHEALTHY_EVERYWHERE,
            format!(
                "the workload failed on {}; no cluster is left that is not known to fail, so the plan stays",
                named(failed)
            ),
        );
    }
    let unhealthy = of_state(WorkloadState::Unhealthy);
    if !unhealthy.is_empty() {
        let text = unhealthy
            .iter()
            .map(|c| format!("{c}: {}", w.get(c).map_or("", |v| v.entry.reason.as_str())))
            .collect();
        return ("False", "Unhealthy", named(text));
    }
    let unknown: Vec<String> = chosen
        .iter()
        .filter(|c| w.state(c) == WorkloadState::Unknown)
        .map(|c| (*c).clone())
        .collect();
    if chosen.is_empty() {
        ("Unknown", "NoClusters", "no cluster is chosen".into())
    } else if !unknown.is_empty() {
        (
            "Unknown",
            "Pending",
            format!("not judged yet on {}", named(unknown)),
        )
    } else {
        ("True", "Healthy", String::new())
    }
}
