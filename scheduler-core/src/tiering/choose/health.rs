//! Step 3: each tier's health. It decides, per tier, which members qualify and may enter by
//! capacity (workload failures taken out), whether the tier is satisfied, since when it is
//! healthy, and how long a failback to it must wait.
//!
//! # Hold-down, penalty and quarantine
//!
//! A failback waits until the tier has been healthy for its hold-down. The hold-down doubles per
//! relapse (a forced failover off a tier the last transition failed back to; the penalty, at most
//! `maxHoldDown`) and a relapsed tier is quarantined for that long. The penalty decays by one
//! point per 4 × `holdDown` of uninterrupted health.
//!
//! Health for failback counts capacity only: a workload failure excludes its clusters for their
//! own hold-down ([`super::exclusion`]), after which the tier is eligible at once. In Overflow a
//! tier is healthy while it has entry clusters the selection does not use.

use super::super::feasibility::TierClusters;
use super::super::verdict::Verdict;
use super::Requeue;
use crate::instant::{ceil_second, dur, of};
use crate::placement::snapshot::{ClusterId, HubSnapshot};
use ocm_score_api::crd::tiered_placement::{TierStatus, TieredPlacementSpec, TieringMode, Timings};

/// One tier's health.
pub(super) struct Health {
    /// Qualifying clusters the tier needs (`minClusters`, else `numberOfClusters`, else 1).
    pub min: usize,
    /// Feasible members, best first.
    pub feasible: Vec<ClusterId>,
    pub qualifying: Vec<ClusterId>,
    pub entry: Vec<ClusterId>,
    /// May enter by capacity, workload failures ignored: what failback health counts.
    pub capacity_entry: Vec<ClusterId>,
    /// Qualifying by capacity, workload failures ignored.
    pub capacity_qualifying: Vec<ClusterId>,
    /// Qualifying by capacity but excluded because their workload Failed.
    pub workload_failed: Vec<ClusterId>,
    /// Feasible members not qualifying only because their scores are Unknown.
    pub unknown_only: usize,
    /// Qualifying on fresh data (hysteresis band included): what Overflow may add.
    pub fresh_qualifying: Vec<ClusterId>,
    pub satisfied: bool,
    pub entry_ok: bool,
    pub healthy_since: Option<i128>,
    pub penalty: i32,
    pub penalty_since: Option<i128>,
    pub effective_hold_down: i128,
    pub quarantined_until: Option<i128>,
}

impl Health {
    pub(super) fn quarantined(&self, now: i128) -> bool {
        self.quarantined_until.is_some_and(|q| now < q)
    }

    /// When a failback to this tier may happen by hold-down (and quarantine).
    pub(super) fn eligible_at(&self) -> Option<i128> {
        self.healthy_since.map(|h| {
            let by_hold = h + self.effective_hold_down;
            self.quarantined_until.map_or(by_hold, |q| by_hold.max(q))
        })
    }
}

/// `failback.holdDown` and `failback.maxHoldDown`, in nanoseconds.
#[derive(Clone, Copy, Debug)]
pub(super) struct HoldDown {
    pub base: i128,
    pub max: i128,
}

impl HoldDown {
    pub(super) fn of(timings: &Timings) -> Self {
        HoldDown {
            base: dur(timings.hold_down),
            max: dur(timings.max_hold_down),
        }
    }

    /// The hold-down after `penalty` relapses: doubled per relapse, at most `max`.
    pub(super) fn effective(self, penalty: i32) -> i128 {
        let factor = 1i128 << penalty.clamp(0, 40);
        self.base.saturating_mul(factor).min(self.max)
    }
}

/// What tier health is judged from.
pub(super) struct Input<'a> {
    pub spec: &'a TieredPlacementSpec,
    pub tiers: &'a [TierClusters],
    /// Per cluster id: the capacity verdict (`None` outside the tiers).
    pub verdicts: &'a [Option<Verdict>],
    /// Per cluster id: excluded because its workload Failed.
    pub excluded: &'a [Option<i128>],
    /// Per cluster id: in the last plan's selection.
    pub in_prior_selection: &'a [bool],
    /// The last status' tiers (health clocks and penalties, by name).
    pub prior_tiers: &'a [TierStatus],
    pub hold_down: HoldDown,
    pub now: i128,
}

pub(super) struct Judged {
    /// Per tier, in spec order.
    pub health: Vec<Health>,
    /// Penalty decay steps and quarantine ends.
    pub requeue: Requeue,
}

/// Judges every tier.
pub(super) fn judge(input: &Input<'_>) -> Judged {
    let Input {
        spec,
        tiers,
        verdicts,
        excluded,
        in_prior_selection,
        prior_tiers,
        hold_down,
        now,
    } = *input;
    let mut requeue = Requeue::after(now);
    let verdict_of = |id: ClusterId| verdicts[id.index()].as_ref();
    let excluded = |id: &ClusterId| excluded.get(id.index()).is_some_and(Option::is_some);
    let wanted = super::wanted_clusters(spec);
    let health: Vec<Health> = tiers
        .iter()
        .zip(&spec.tiers)
        .map(|(t, tier)| {
            let min = tier
                .min_clusters
                .map(|m| m.max(1) as usize)
                .or(wanted)
                .unwrap_or(1);
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
            let before = prior_tier(prior_tiers, &tier.name);
            let healthy_now = match spec.mode {
                TieringMode::Failover => capacity_entry.len() >= min,
                TieringMode::Overflow => capacity_entry.iter().any(|id| !in_prior_selection[id.index()]),
            };
            let healthy_since = healthy_now.then(|| since(before, now));
            let decayed = decay(
                before.map_or(0, |b| b.penalty.max(0)),
                before.and_then(|b| b.penalty_since.as_ref()).map(of),
                healthy_since,
                hold_down,
                now,
            );
            requeue.at(decayed.next_step);
            let (penalty, penalty_since) = (decayed.penalty, decayed.since);
            let effective_hold_down = hold_down.effective(penalty);
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
            requeue.at(h.quarantined_until);
        }
    }
    Judged { health, requeue }
}

fn prior_tier<'a>(prior_tiers: &'a [TierStatus], name: &str) -> Option<&'a TierStatus> {
    prior_tiers.iter().find(|t| t.name == name)
}

/// A tier healthy now is healthy since its stored clock, or since now.
fn since(before: Option<&TierStatus>, now: i128) -> i128 {
    before
        .and_then(|b| b.healthy_since.as_ref())
        .map_or(ceil_second(now), of)
}

/// A penalty after decay.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Decayed {
    pub penalty: i32,
    pub since: Option<i128>,
    /// When the next point decays.
    pub next_step: Option<i128>,
}

/// One point per 4 × holdDown of uninterrupted health (since `healthy_since`, and since the
/// last change of the penalty).
pub(super) fn decay(
    mut penalty: i32,
    mut since: Option<i128>,
    healthy_since: Option<i128>,
    hold_down: HoldDown,
    now: i128,
) -> Decayed {
    let hold = hold_down.base;
    let mut next_step = None;
    if let (Some(h), true) = (healthy_since, penalty > 0 && hold > 0) {
        let step = 4 * hold;
        let mut reference = since.map_or(h, |p| p.max(h));
        while penalty > 0 && now >= reference + step {
            penalty -= 1;
            reference += step;
            since = Some(reference);
        }
        if penalty > 0 {
            next_step = Some(reference + step);
        }
    }
    Decayed {
        penalty,
        since,
        next_step,
    }
}

/// Overflow health is "has unused entry clusters": judged again against the new selection
/// (`chosen`, names per tier), so that re-planning the same inputs finds the same
/// `healthySince`. Capacity only, as in [`judge`] (a workload failure has its own hold-down).
pub(super) fn rejudge_overflow(
    health: &mut [Health],
    spec: &TieredPlacementSpec,
    chosen: &[Vec<String>],
    snapshot: &HubSnapshot,
    prior_tiers: &[TierStatus],
    now: i128,
) {
    let mut is_chosen = vec![false; snapshot.cluster_count()];
    for id in chosen.iter().flatten().filter_map(|n| snapshot.cluster_id(n)) {
        is_chosen[id.index()] = true;
    }
    for (h, tier) in health.iter_mut().zip(&spec.tiers) {
        let unused = h.capacity_entry.iter().any(|id| !is_chosen[id.index()]);
        h.healthy_since = unused.then(|| since(prior_tier(prior_tiers, &tier.name), now));
    }
}

/// A relapse: one more penalty point, and the tier quarantined for its longer hold-down.
pub(super) fn penalize(health: &mut Health, hold_down: HoldDown, now: i128) {
    health.penalty += 1;
    health.penalty_since = Some(ceil_second(now));
    health.effective_hold_down = hold_down.effective(health.penalty);
    health.quarantined_until = Some(ceil_second(now) + health.effective_hold_down);
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{ids, snapshot, tier};
    use super::*;

    const S: i128 = 1_000_000_000;
    const HOLD: HoldDown = HoldDown {
        base: 60 * S,
        max: 300 * S,
    };

    #[test]
    fn the_hold_down_doubles_per_relapse_up_to_the_maximum() {
        assert_eq!(HOLD.effective(0), 60 * S);
        assert_eq!(HOLD.effective(1), 120 * S);
        assert_eq!(HOLD.effective(2), 240 * S);
        assert_eq!(HOLD.effective(3), 300 * S);
        assert_eq!(HOLD.effective(-1), 60 * S);
    }

    #[test]
    fn a_penalty_decays_one_point_per_four_hold_downs_of_health() {
        // Healthy since 0, penalized at 0: a point every 240 s.
        let at = |now| decay(2, Some(0), Some(0), HOLD, now);
        assert_eq!(
            at(239 * S),
            Decayed {
                penalty: 2,
                since: Some(0),
                next_step: Some(240 * S)
            }
        );
        assert_eq!(
            at(240 * S),
            Decayed {
                penalty: 1,
                since: Some(240 * S),
                next_step: Some(480 * S)
            }
        );
        assert_eq!(at(480 * S).penalty, 0);
        assert_eq!(at(480 * S).next_step, None);
        // Not healthy: no decay.
        assert_eq!(decay(2, Some(0), None, HOLD, 1_000 * S).penalty, 2);
    }

    #[test]
    fn a_tier_is_satisfied_by_enough_qualifying_clusters_not_excluded_by_their_workload() {
        let hub = snapshot(&["a-1", "a-2", "a-3"]);
        let spec = TieredPlacementSpec {
            tiers: vec![tier("east")],
            number_of_clusters: Some(2),
            ..TieredPlacementSpec::default()
        };
        let members = ids(0..3);
        let tiers = [TierClusters {
            members: members.clone(),
            feasible: members.clone(),
            ..TierClusters::default()
        }];
        let qualified = Some(Verdict {
            qualified: true,
            entry: true,
            ..Verdict::default()
        });
        let verdicts = vec![qualified; hub.cluster_count()];
        let judge_with = |excluded: &[Option<i128>]| {
            judge(&Input {
                spec: &spec,
                tiers: &tiers,
                verdicts: &verdicts,
                excluded,
                in_prior_selection: &[false; 3],
                prior_tiers: &[],
                hold_down: HOLD,
                now: 0,
            })
            .health
            .remove(0)
        };
        let h = judge_with(&[]);
        assert_eq!(h.min, 2);
        assert!(h.satisfied && h.entry_ok);
        assert_eq!(h.healthy_since, Some(0));
        // Two of three excluded: one qualifies, short of numberOfClusters; capacity health holds.
        let h = judge_with(&[Some(i128::MAX), None, Some(i128::MAX)]);
        assert_eq!(h.qualifying, ids(1..2));
        assert_eq!(h.workload_failed.len(), 2);
        assert!(!h.satisfied && !h.entry_ok);
        assert_eq!(h.healthy_since, Some(0));
    }

    #[test]
    fn a_relapse_quarantines_the_tier_for_its_doubled_hold_down() {
        let mut h = super::super::test_support::healthy(ids(0..1), 1, Some(0));
        h.effective_hold_down = HOLD.effective(0);
        penalize(&mut h, HOLD, 10 * S);
        assert_eq!(h.penalty, 1);
        assert_eq!(h.effective_hold_down, 120 * S);
        assert_eq!(h.quarantined_until, Some(130 * S));
        assert!(h.quarantined(129 * S) && !h.quarantined(130 * S));
        assert_eq!(h.eligible_at(), Some(130 * S));
    }
}
