//! Steps 3–7 of the planner ([`super`]): from the tiers' members to the [`Plan`]. It decides
//! which tier(s) are active, which clusters the child Placement may select, which clusters it
//! keeps beside their replacements, and what the status says about it.
//!
//! # The steps, in the order [`decide`] runs them
//!
//! * Inputs: what the last plan left ([`prior`]), the capacity verdicts (step 2,
//!   [`super::verdict`]) and the clusters a workload failure excludes ([`exclusion`]).
//! * Step 3, [`health`]: per tier, whether it is satisfied, may be entered, and since when it is
//!   healthy (hold-down, relapse penalty, quarantine).
//! * Step 4, [`failover`] or [`overflow`]: the active tier(s), within the limits
//!   [`choice::Gates`] reads from the prior status (minDwell, `Frozen`, the manual trigger, the
//!   override).
//! * Step 5, [`child`]: the child Placement rendered for that choice, and what OCM will select.
//! * Step 6, [`retain`]: make-before-break, the clusters a move leaves kept beside their
//!   replacements.
//! * Step 7: [`status`] (tier states, transitions, the transition budget), [`conditions`],
//!   with `spec.workload` the failover [`headroom`], and the [`report`] of each tier.
//!
//! Each step is a pure function of plain data; the clock is `now`. The earliest instant any step
//! needs to look again is collected in a [`Requeue`].
//!
//! # Failover
//!
//! The override wins; otherwise the first plan takes the first satisfied tier. A tier that is no
//! longer satisfied because its clusters became infeasible (taints past tolerance, removed from
//! sets or predicates) or lost fresh capacity is left for the first satisfied tier in the
//! **whole** order (quarantined tiers last); stale scores alone never move anything. Failback to a
//! better tier is voluntary: `Automatic` after the tier's hold-down (doubled per relapse),
//! `minDwell` and outside `Frozen`; `Manual` once per new trigger value.
//!
//! # Overflow
//!
//! Keep the selected clusters that still qualify, fill up to `numberOfClusters` from the top
//! (spill), drop from the bottom on scale-in, and consolidate upwards (`Contract`) at most
//! `maxClustersPerStep` swaps per `minDwell`, only from tiers whose hold-down elapsed.

mod child;
mod choice;
mod conditions;
mod exclusion;
mod failover;
mod headroom;
mod health;
mod overflow;
mod prior;
mod report;
mod retain;
mod status;
#[cfg(test)]
mod test_support;

use super::Plan;
use super::feasibility::TierClusters;
use super::render::Owner;
use super::verdict;
use super::workload::WorkIndex;
use super::workload::verdicts::WorkloadVerdicts;
use crate::instant::timestamp;
use crate::placement::snapshot::HubSnapshot;
use crate::reservation::View;
use choice::{Gates, Situation};
use health::HoldDown;
use ocm_score_api::crd::tiered_placement::{TieredPlacementSpec, TieredPlacementStatus, TieringMode};
use ocm_score_api::{Condition, ObjectMeta};

/// What [`decide`] plans from: the TieredPlacement, its prior status, the hub, and what step 1
/// ([`super::feasibility`]) found in each tier.
pub(crate) struct Input<'a> {
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

/// The earliest instant after `now` at which the plan must be made again.
#[derive(Clone, Copy, Debug)]
pub(super) struct Requeue {
    now: i128,
    at: Option<i128>,
}

impl Requeue {
    pub(super) fn after(now: i128) -> Self {
        Requeue { now, at: None }
    }

    /// Also requeue at `t`, unless it is not in the future.
    pub(super) fn at(&mut self, t: Option<i128>) {
        if let Some(t) = t
            && t > self.now
        {
            self.at = Some(self.at.map_or(t, |r| r.min(t)));
        }
    }

    pub(super) fn merge(&mut self, other: Requeue) {
        self.at(other.at);
    }

    pub(super) fn earliest(self) -> Option<i128> {
        self.at
    }
}

/// `numberOfClusters` when set and positive.
pub(super) fn wanted_clusters(spec: &TieredPlacementSpec) -> Option<usize> {
    spec.number_of_clusters.filter(|n| *n > 0).map(|n| n as usize)
}

/// Plans one TieredPlacement whose spec passed validation (see the module doc for the steps).
pub(crate) fn decide(input: &Input<'_>) -> Plan {
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
    let mut requeue = Requeue::after(now);

    // Inputs: the last plan, the verdicts, the workload exclusions.
    let members = prior::Members::of(tiers, snapshot.cluster_count());
    let before = prior::read(prior, &spec.tiers, snapshot, in_decision);
    let verdicts = verdict::evaluate(
        spec,
        &timings,
        snapshot,
        &members.ids,
        in_decision,
        prior.and_then(|p| p.capacity.as_ref()),
        before.first_plan,
        reserved,
        now,
    );
    requeue.at(verdicts.requeue_at);
    let mut scores_expire = Requeue::after(now);
    scores_expire.at(verdicts.scores_expire_at);
    for t in tiers {
        requeue.at(t.requeue_at);
    }
    let hold_down = HoldDown::of(&timings);
    let workload = exclusion::judge(&exclusion::Input {
        spec,
        namespace,
        works,
        snapshot,
        members: &members,
        prior,
        hold_down,
        now,
    });
    requeue.merge(workload.requeue);
    let excluded = workload.exclusion.excluded.as_slice();

    // Step 3: tier health.
    let judged = health::judge(&health::Input {
        spec,
        tiers,
        verdicts: &verdicts.by_cluster,
        excluded,
        in_prior_selection: &before.in_selection,
        prior_tiers: before.tiers,
        hold_down,
        now,
    });
    requeue.merge(judged.requeue);
    let mut health = judged.health;

    // Step 4: the active tier(s).
    let gates = Gates::read(spec, meta.generation, prior, &timings, before.first_plan, now);
    let situation = Situation {
        spec,
        timings: &timings,
        health: &health,
        gates: &gates,
        first_plan: before.first_plan,
        tiers_vanished: before.tiers_vanished,
        excluded,
        now,
    };
    let choice = match spec.mode {
        TieringMode::Failover => failover::choose(&situation, before.active.first().copied()),
        TieringMode::Overflow => overflow::choose(
            &situation,
            &overflow::Before {
                selection: &before.selection,
                active: &before.active,
            },
            &members.tier_of,
            wanted_clusters(spec).unwrap_or(1),
            snapshot,
        ),
    };
    if spec.mode == TieringMode::Overflow && !choice.keep_child {
        health::rejudge_overflow(&mut health, spec, &choice.chosen, snapshot, before.tiers, now);
    }
    if let Some(t) = choice.relapse_of {
        health::penalize(&mut health[t], hold_down, now);
    }
    requeue.at(choice.pending.as_ref().and_then(|p| p.eligible_at));
    requeue.at(gates.frozen_until);

    // Steps 5–6: the child, its prediction, and the clusters kept beside their replacements.
    let owner = Owner {
        namespace,
        name: meta.name.as_deref().unwrap_or(""),
        uid: meta.uid.as_deref(),
    };
    let rendered = child::render(&child::Input {
        spec,
        owner: &owner,
        child_name,
        choice: &choice,
        health: &health,
        in_prior_selection: &before.in_selection,
        members: &members.ids,
        excluded,
        snapshot,
        now,
    });
    let no_verdicts = WorkloadVerdicts::default();
    let workload_verdicts = workload.verdicts.as_ref().unwrap_or(&no_verdicts);
    let too_large = rendered.too_large.clone();
    let kept = retain::keep(
        &retain::Input {
            meta,
            spec,
            overlap: crate::instant::dur(timings.overlap),
            choice: &choice,
            before: &before,
            workload: workload_verdicts,
            tier_of: &members.tier_of,
            snapshot,
            owner: &owner,
            child_name,
            now,
        },
        rendered,
    );
    requeue.merge(kept.requeue);

    // Step 7: status, conditions, events, reports.
    let mut events = Vec::new();
    events.extend(kept.dropped_warning);
    let active_names: Vec<String> = choice
        .active
        .iter()
        .map(|&i| spec.tiers[i].name.clone())
        .collect();
    let written = status::write(&status::Input {
        generation: meta.generation,
        spec,
        prior,
        choice: &choice,
        active_names: &active_names,
        health: &health,
        tiers,
        snapshot,
        namespace,
        child_name,
        predicted: &kept.predicted,
        capacity: verdicts.state.clone(),
        gates: &gates,
        workload_health: exclusion::status(
            workload.verdicts.as_ref(),
            &workload.exclusion,
            kept.retained.clone(),
        ),
        timings: &timings,
        now,
    });
    requeue.merge(written.requeue);
    let mut status = written.status;
    events.extend(written.events);
    let prior_conditions: &[Condition] = prior.map_or(&[], |p| p.conditions.as_slice());
    let judged_conditions = conditions::judge(&conditions::Input {
        generation: meta.generation,
        prior: prior_conditions,
        spec,
        choice: &choice,
        override_tier: gates.override_tier,
        active_names: &active_names,
        health: &health,
        verdicts: &verdicts.by_cluster,
        snapshot,
        too_large: too_large.as_deref(),
        child_name,
        frozen_until: status.frozen_until.as_ref(),
        predicted: &kept.predicted,
        workload: workload_verdicts,
        retained: &kept.retained,
        exclusion: &workload.exclusion,
        now,
    });
    status.conditions = judged_conditions.conditions;
    events.extend(judged_conditions.events);
    if let Some(room) = headroom::judge(&headroom::Input {
        spec,
        health: &health,
        active: &choice.active,
        excluded,
        in_decision,
        predicted: &kept.predicted,
        snapshot,
        reserved,
        now,
    }) {
        for (tier, t) in status.tiers.iter_mut().zip(&room.tiers) {
            tier.headroom_replicas = Some(i32::try_from(t.replicas).unwrap_or(i32::MAX));
        }
        let (fits, reason, message) = room.condition;
        super::set_condition(
            &mut status.conditions,
            prior_conditions,
            headroom::CONDITION,
            fits,
            reason,
            message,
            meta.generation,
            now,
        );
    }
    // Headroom deducts reservations too: one expiring changes it.
    requeue.at(reserved.next_change());
    events.extend(kept.events);
    events.extend(conditions::pinning_warning(prior_conditions, too_large.is_some()));
    let reports = report::tiers(&report::Input {
        spec,
        tiers,
        health: &health,
        verdicts: &verdicts.by_cluster,
        exclusion: &workload.exclusion,
        workload: workload_verdicts,
        predicted: &kept.predicted,
        snapshot,
    });

    let write_child = kept
        .child
        .as_ref()
        .is_some_and(|c| child::needs_apply(c, snapshot, namespace, child_name));
    let write_status = prior != Some(&status);
    Plan {
        status,
        child: kept.child,
        predicted: kept.predicted,
        requeue_at: requeue.earliest().map(timestamp),
        scores_expire_at: scores_expire.earliest().map(timestamp),
        events,
        tiers: reports,
        write_child,
        write_status,
        transition: written.transition,
        holds: super::holds::of(spec, snapshot, tiers),
    }
}

#[cfg(test)]
mod tests {
    use super::Requeue;

    #[test]
    fn a_requeue_keeps_the_earliest_future_instant_only() {
        let mut r = Requeue::after(10);
        r.at(Some(10));
        assert_eq!(r.earliest(), None);
        r.at(Some(30));
        r.at(None);
        r.at(Some(20));
        r.at(Some(25));
        assert_eq!(r.earliest(), Some(20));
        let mut other = Requeue::after(10);
        other.at(Some(15));
        r.merge(other);
        assert_eq!(r.earliest(), Some(15));
    }
}
