//! Step 4, Overflow mode: the clusters chosen across tiers, best tier first. It decides which
//! clusters stay, which are added, which are swapped for better ones, and which tiers that
//! makes active.
//!
//! # The order of the rules
//!
//! 1. Nothing qualifies in any tier (up to the override's): keep the child as it is.
//! 2. Keep the last selection's clusters that still qualify, dropping from the bottom on scale-in.
//! 3. Fill up to `numberOfClusters` from the top tier down (spill), on fresh data only.
//! 4. A cluster whose workload Failed is left only for a replacement: without one it stays.
//! 5. Consolidate (`Contract`): swap the worst chosen cluster for the best unused one of a better
//!    tier, at most `maxClustersPerStep` per minDwell, outside `Frozen`, only to tiers whose
//!    hold-down elapsed (`Manual`: on a new trigger).

use super::choice::{Choice, Move, Pending, Situation};
use super::health::Health;
use crate::instant::{ceil_second, dur};
use crate::placement::snapshot::{ClusterId, HubSnapshot};
use ocm_score_api::crd::tiered_placement::{FailbackMode, TransitionKind};

/// The last plan's selection and active tiers.
pub(super) struct Before<'a> {
    pub selection: &'a [ClusterId],
    pub active: &'a [usize],
}

/// The chosen clusters; `n` is `numberOfClusters` (at least 1).
pub(super) fn choose(
    s: &Situation<'_>,
    before: &Before<'_>,
    tier_of: &[Option<usize>],
    n: usize,
    snapshot: &HubSnapshot,
) -> Choice {
    let h = s.health;
    let last = s.gates.override_tier.unwrap_or(h.len().saturating_sub(1));
    let order = Order::of(h, tier_of);
    let mut choice = Choice {
        chosen: vec![Vec::new(); h.len()],
        ..Choice::default()
    };
    let any_qualifies = h
        .iter()
        .take(last + 1)
        .any(|t| !t.qualifying.is_empty() || !t.workload_failed.is_empty());
    if !any_qualifies {
        choice.no_tier_satisfied = true;
        choice.insufficient = true;
        if !s.first_plan {
            choice.keep_child = !before.selection.is_empty();
            choice.active = before.active.to_vec();
        }
        return choice;
    }
    let mut fill = fill(s, before.selection, &order, last, n);
    let (swaps, pending) = consolidate(s, &mut fill, &order);
    choice.pending = pending;
    choice.insufficient = fill.keep.len() < n;
    let mut active: Vec<usize> = fill.keep.iter().filter_map(|id| tier_of[id.index()]).collect();
    active.sort_unstable();
    active.dedup();
    for id in &fill.keep {
        if let Some(t) = tier_of[id.index()] {
            choice.chosen[t].push(snapshot.cluster_name(*id).to_string());
        }
    }
    for c in &mut choice.chosen {
        c.sort();
    }
    let names = |ids: &[usize]| {
        ids.iter()
            .map(|&i| s.name(i).to_string())
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
            reason: if s.gates.manual_fired {
                "ManualTrigger"
            } else {
                "HoldDownElapsed"
            }
            .into(),
            message: format!("consolidating: {}", moves.join(", ")),
        });
    } else if active != before.active || s.first_plan {
        let (kind, reason) = if s.first_plan && !s.tiers_vanished {
            (TransitionKind::Initial, "FirstFill")
        } else if s.tiers_vanished
            || s.gates.generation_changed && (fill.scaled_in || fill.spilled > 0 && fill.lost == 0)
        {
            (TransitionKind::SpecChange, "SpecChanged")
        } else {
            (
                TransitionKind::Overflow,
                if fill.workload_lost {
                    "WorkloadFailed"
                } else if fill.lost > 0 {
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
                fill.keep.len(),
                names(&active),
                if before.active.is_empty() {
                    "none".to_string()
                } else {
                    names(before.active)
                },
                (0..=last.min(h.len() - 1))
                    .map(|i| s.describe(i))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        });
    }
    choice.active = active;
    choice
}

/// Per cluster id: its tier, its rank inside the tier, and whether it qualifies or may enter.
struct Order<'a> {
    tier_of: &'a [Option<usize>],
    rank: Vec<usize>,
    qualifies: Vec<bool>,
    enters: Vec<bool>,
}

impl<'a> Order<'a> {
    fn of(h: &[Health], tier_of: &'a [Option<usize>]) -> Self {
        let mut order = Order {
            tier_of,
            rank: vec![usize::MAX; tier_of.len()],
            qualifies: vec![false; tier_of.len()],
            enters: vec![false; tier_of.len()],
        };
        for t in h {
            for (r, id) in t.feasible.iter().enumerate() {
                order.rank[id.index()] = r;
            }
            for id in &t.qualifying {
                order.qualifies[id.index()] = true;
            }
            for id in &t.entry {
                order.enters[id.index()] = true;
            }
        }
        order
    }

    fn tier(&self, id: ClusterId) -> Option<usize> {
        self.tier_of[id.index()]
    }

    /// Best first: by tier, then by rank inside the tier.
    fn key(&self, id: &ClusterId) -> (usize, usize) {
        (self.tier(*id).unwrap_or(usize::MAX), self.rank[id.index()])
    }
}

/// The selection after keeping, scaling in and spilling, before consolidation.
struct Fill {
    keep: Vec<ClusterId>,
    /// Per cluster id: in `keep`.
    selected: Vec<bool>,
    /// Last selection's clusters no longer kept.
    lost: usize,
    scaled_in: bool,
    spilled: usize,
    /// A cluster left because its workload Failed.
    workload_lost: bool,
}

/// Rules 2–4 of the module doc.
fn fill(s: &Situation<'_>, prior_selection: &[ClusterId], order: &Order<'_>, last: usize, n: usize) -> Fill {
    let h = s.health;
    let mut keep: Vec<ClusterId> = prior_selection
        .iter()
        .copied()
        .filter(|id| order.tier(*id).is_some_and(|t| t <= last) && order.qualifies[id.index()])
        .collect();
    let lost = prior_selection.len() - keep.len();
    keep.sort_by_key(|id| order.key(id));
    let mut scaled_in = false;
    if keep.len() > n {
        keep.truncate(n);
        scaled_in = true;
    }
    let mut selected = vec![false; order.tier_of.len()];
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
        let t = order.tier(*id);
        if !selected[id.index()] && t.is_some_and(|t| t <= last && h[t].workload_failed.contains(id)) {
            selected[id.index()] = true;
            keep.push(*id);
            failed_kept += 1;
        }
    }
    let workload_lost = prior_selection
        .iter()
        .any(|id| !selected[id.index()] && s.excluded.get(id.index()).is_some_and(Option::is_some));
    Fill {
        keep,
        selected,
        lost: lost - failed_kept,
        scaled_in,
        spilled,
        workload_lost,
    }
}

/// Rule 5 of the module doc: the swaps made (out, in) and the consolidation left pending.
fn consolidate(
    s: &Situation<'_>,
    fill: &mut Fill,
    order: &Order<'_>,
) -> (Vec<(ClusterId, ClusterId)>, Option<Pending>) {
    let h = s.health;
    let policy = s.spec.failback.policy;
    let mut swaps = Vec::new();
    let allowed = match policy {
        FailbackMode::Never => false,
        FailbackMode::Manual => s.gates.manual_fired,
        FailbackMode::Automatic => !s.frozen() && s.voluntary_gate().is_none_or(|d| s.now >= d),
    };
    let eligible_tier = |i: usize| match policy {
        FailbackMode::Manual => true,
        _ => !h[i].quarantined(s.now) && h[i].eligible_at().is_some_and(|e| s.now >= e),
    };
    let per_step = s.timings.max_clusters_per_step;
    let mut pending = None;
    loop {
        fill.keep.sort_by_key(|id| order.key(id));
        let Some(&worst) = fill.keep.last() else { break };
        let j = order.tier(worst).unwrap_or(usize::MAX);
        let better = (0..j.min(h.len())).find_map(|i| {
            h[i].entry
                .iter()
                .find(|id| !fill.selected[id.index()] && order.enters[id.index()])
                .map(|id| (i, *id))
        });
        let Some((i, best)) = better else { break };
        if !allowed || swaps.len() >= per_step || !eligible_tier(i) {
            pending = waiting(s, &swaps, j, i);
            break;
        }
        fill.keep.pop();
        fill.selected[worst.index()] = false;
        fill.selected[best.index()] = true;
        fill.keep.push(best);
        swaps.push((worst, best));
    }
    (swaps, pending)
}

/// The consolidation from tier `from` to tier `to` that must wait, after `swaps` this plan made.
fn waiting(s: &Situation<'_>, swaps: &[(ClusterId, ClusterId)], from: usize, to: usize) -> Option<Pending> {
    let h = s.health;
    let policy = s.spec.failback.policy;
    if swaps.is_empty() && policy != FailbackMode::Never {
        let at = [h[to].eligible_at(), s.voluntary_gate()]
            .into_iter()
            .flatten()
            .max();
        let reason = match policy {
            FailbackMode::Manual => "AwaitingTrigger",
            _ if s.frozen() => "Frozen",
            _ if h[to].eligible_at().is_some_and(|e| s.now < e) => "HoldDown",
            _ => "MinDwell",
        };
        let at = if policy == FailbackMode::Manual { None } else { at };
        Some(Pending {
            from,
            to,
            eligible_at: at,
            reason,
        })
    } else if !swaps.is_empty() && policy == FailbackMode::Automatic {
        // This plan's swaps are a transition: the next step waits out minDwell from it.
        // Said now, so that planning again at once says the same.
        let next = ceil_second(s.now) + dur(s.timings.min_dwell);
        let at = h[to].eligible_at().map_or(next, |e| e.max(next));
        let reason = if h[to].eligible_at().is_some_and(|e| s.now < e) {
            "HoldDown"
        } else {
            "MinDwell"
        };
        Some(Pending {
            from,
            to,
            eligible_at: Some(at),
            reason,
        })
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{gates, healthy, ids, snapshot, tier};
    use super::*;
    use ocm_score_api::crd::tiered_placement::{TieredPlacementSpec, TieringMode};

    const S: i128 = 1_000_000_000;

    /// Tier east holds a-1, a-2; tier west b-1, b-2, b-3 (ids 0–4, in name order).
    fn choose_over(
        health: &[Health],
        selection: &[ClusterId],
        active: &[usize],
        n: usize,
        per_step: usize,
    ) -> Choice {
        let hub = snapshot(&["a-1", "a-2", "b-1", "b-2", "b-3"]);
        let mut spec = TieredPlacementSpec {
            mode: TieringMode::Overflow,
            tiers: vec![tier("east"), tier("west")],
            ..TieredPlacementSpec::default()
        };
        spec.failback.policy = FailbackMode::Automatic;
        spec.failback.max_clusters_per_step = Some(per_step as i32);
        let timings = spec.timings().unwrap();
        let gates = gates();
        let tier_of = [Some(0), Some(0), Some(1), Some(1), Some(1)];
        choose(
            &Situation {
                spec: &spec,
                timings: &timings,
                health,
                gates: &gates,
                first_plan: false,
                tiers_vanished: false,
                excluded: &[],
                now: 1_000 * S,
            },
            &Before { selection, active },
            &tier_of,
            n,
            &hub,
        )
    }

    #[test]
    fn the_selection_spills_from_the_top_and_scales_in_from_the_bottom() {
        let health = [healthy(ids(0..2), 1, Some(0)), healthy(ids(2..5), 1, Some(0))];
        let spill = choose_over(&health, &[], &[], 3, 1);
        assert_eq!(spill.chosen, [vec!["a-1", "a-2"], vec!["b-1"]]);
        assert_eq!(spill.active, [0, 1]);
        assert_eq!(spill.movement.map(|m| m.reason).as_deref(), Some("Refill"));
        let selection = ids(0..4);
        let scaled_in = choose_over(&health, &selection, &[0, 1], 2, 1);
        assert_eq!(scaled_in.chosen, [vec!["a-1", "a-2"], Vec::<&str>::new()]);
        assert_eq!(scaled_in.active, [0]);
    }

    #[test]
    fn consolidation_swaps_at_most_max_clusters_per_step() {
        // East came back with both clusters; the selection is all on west.
        let health = [healthy(ids(0..2), 1, Some(0)), healthy(ids(2..5), 1, Some(0))];
        let selection = ids(2..4);
        let c = choose_over(&health, &selection, &[1], 2, 1);
        assert_eq!(
            c.movement.as_ref().map(|m| m.kind),
            Some(TransitionKind::Contract)
        );
        assert_eq!(c.chosen, [vec!["a-1"], vec!["b-1"]]);
        assert_eq!(
            c.pending.map(|p| (p.from, p.to, p.reason)),
            Some((1, 0, "MinDwell"))
        );
        let c = choose_over(&health, &selection, &[1], 2, 2);
        assert_eq!(c.chosen, [vec!["a-1", "a-2"], Vec::<&str>::new()]);
        assert_eq!(c.pending, None);
    }
}
