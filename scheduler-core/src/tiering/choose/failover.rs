//! Step 4, Failover mode: the one active tier. It decides whether to stay, fail over (forced) or
//! fail back (voluntary), and why.
//!
//! # The order of the rules
//!
//! 1. `spec.override.tier` wins.
//! 2. The first plan takes the first tier that may be entered (else the first satisfied one).
//! 3. A tier no longer satisfied is left for the first other tier that may be entered
//!    (quarantined tiers last) unless only stale scores make it short: stale data never moves
//!    anything. A tier short only because workloads Failed is left only for a tier not known to
//!    fail. Leaving a tier the last transition failed back to is a relapse.
//! 4. Staying, a better tier that may be entered is a failback: `Automatic` once its hold-down,
//!    quarantine and minDwell passed outside `Frozen`, `Manual` on a new trigger, else pending.

use super::choice::{Choice, Move, Pending, Situation};
use ocm_score_api::crd::tiered_placement::{FailbackMode, TransitionKind};

/// The active tier; `current` is the last plan's.
pub(super) fn choose(s: &Situation<'_>, current: Option<usize>) -> Choice {
    if let Some(o) = s.gates.override_tier {
        return overridden(s, current, o);
    }
    let Some(a) = current else {
        return first(s);
    };
    match leave(s, a) {
        Current::Leave(choice) => choice,
        Current::Stay { no_tier_satisfied } => fail_back(
            s,
            a,
            Choice {
                active: vec![a],
                no_tier_satisfied,
                ..Choice::default()
            },
        ),
    }
}

fn overridden(s: &Situation<'_>, current: Option<usize>, o: usize) -> Choice {
    Choice {
        active: vec![o],
        movement: (current != Some(o)).then(|| Move {
            kind: TransitionKind::Override,
            reason: "Override".into(),
            message: format!("spec.override.tier pins {}", s.name(o)),
        }),
        no_tier_satisfied: !s.health[o].satisfied,
        ..Choice::default()
    }
}

fn first(s: &Situation<'_>) -> Choice {
    let h = s.health;
    let target = (0..h.len())
        .find(|&i| h[i].entry_ok)
        .or_else(|| (0..h.len()).find(|&i| h[i].satisfied));
    let (target, none) = match target {
        Some(t) => (t, false),
        None => (0, true),
    };
    let kind = if s.tiers_vanished {
        TransitionKind::SpecChange
    } else {
        TransitionKind::Initial
    };
    Choice {
        active: vec![target],
        no_tier_satisfied: none,
        movement: Some(Move {
            kind,
            reason: if none {
                "NoTierSatisfied"
            } else {
                "FirstSatisfiedTier"
            }
            .into(),
            message: if none {
                format!("no tier is satisfied; starting on {}", s.name(0))
            } else {
                s.describe(target)
            },
        }),
        ..Choice::default()
    }
}

enum Current {
    Leave(Choice),
    Stay { no_tier_satisfied: bool },
}

/// Whether the current tier `a` must be left (a forced failover), and where to.
fn leave(s: &Situation<'_>, a: usize) -> Current {
    let h = s.health;
    let stay = Current::Stay {
        no_tier_satisfied: false,
    };
    if h[a].satisfied {
        return stay;
    }
    let infeasible = h[a].feasible.len() < h[a].min;
    let stale_only = !infeasible && h[a].qualifying.len() + h[a].unknown_only >= h[a].min;
    // Enough capacity, but workloads failed: leave only for a tier not known to fail.
    let workload = !infeasible
        && !h[a].workload_failed.is_empty()
        && h[a].capacity_qualifying.len() + h[a].unknown_only >= h[a].min;
    if stale_only {
        return stay;
    }
    let others = |quarantined: bool| {
        (0..h.len()).find(|&i| i != a && h[i].entry_ok && h[i].quarantined(s.now) == quarantined)
    };
    match others(false).or_else(|| others(true)) {
        Some(t) => Current::Leave(Choice {
            active: vec![t],
            relapse_of: ((infeasible || workload) && s.entered_by_failback(a)).then_some(a),
            movement: Some(Move {
                kind: TransitionKind::Failover,
                reason: if infeasible {
                    "TierUnavailable"
                } else if workload {
                    "WorkloadFailed"
                } else {
                    "InsufficientQualifying"
                }
                .into(),
                message: format!("{}; moving to {}", s.describe(a), s.describe(t)),
            }),
            ..Choice::default()
        }),
        // No target not known to fail: stay (workload-failover.md §4); `WorkloadHealthy` says why.
        None if workload => stay,
        None => Current::Stay {
            no_tier_satisfied: true,
        },
    }
}

/// Staying on `a`: whether a failback to a better tier is due, made now or pending.
fn fail_back(s: &Situation<'_>, a: usize, mut choice: Choice) -> Choice {
    let h = s.health;
    let Some(best) = (0..a).find(|&i| h[i].entry_ok) else {
        return choice;
    };
    match s.spec.failback.policy {
        FailbackMode::Never => {}
        FailbackMode::Manual => {
            if s.gates.manual_fired {
                choice.active = vec![best];
                choice.movement = Some(Move {
                    kind: TransitionKind::Failback,
                    reason: "ManualTrigger".into(),
                    message: format!(
                        "trigger {:?}: back to {}",
                        s.spec.failback.trigger,
                        s.describe(best)
                    ),
                });
            } else {
                choice.pending = Some(Pending {
                    from: a,
                    to: best,
                    eligible_at: None,
                    reason: "AwaitingTrigger",
                });
            }
        }
        FailbackMode::Automatic => {
            let ready = (0..a).find(|&i| {
                h[i].entry_ok && !h[i].quarantined(s.now) && h[i].eligible_at().is_some_and(|e| s.now >= e)
            });
            let dwell_ok = s.voluntary_gate().is_none_or(|d| s.now >= d);
            match ready {
                Some(b) if dwell_ok && !s.frozen() => {
                    choice.active = vec![b];
                    choice.movement = Some(Move {
                        kind: TransitionKind::Failback,
                        reason: "HoldDownElapsed".into(),
                        message: format!(
                            "{} healthy for {}; back from {}",
                            s.describe(b),
                            super::super::format_duration(std::time::Duration::from_nanos(
                                h[b].effective_hold_down.max(0) as u64
                            )),
                            s.name(a)
                        ),
                    });
                }
                _ => {
                    let hold_at = h[best].eligible_at();
                    let at = [hold_at, s.voluntary_gate()].into_iter().flatten().max();
                    let reason = if s.frozen() {
                        "Frozen"
                    } else if hold_at.is_some_and(|e| s.now < e) {
                        if h[best].quarantined(s.now) {
                            "Quarantined"
                        } else {
                            "HoldDown"
                        }
                    } else {
                        "MinDwell"
                    };
                    choice.pending = Some(Pending {
                        from: a,
                        to: best,
                        eligible_at: at,
                        reason,
                    });
                }
            }
        }
    }
    choice
}

#[cfg(test)]
mod tests {
    use super::super::choice::Gates;
    use super::super::health::Health;
    use super::super::test_support::{gates, healthy, ids, tier, unhealthy};
    use super::*;
    use ocm_score_api::crd::tiered_placement::TieredPlacementSpec;

    const S: i128 = 1_000_000_000;

    fn chosen(health: &[Health], gates: &Gates, current: Option<usize>, now: i128) -> Choice {
        let mut spec = TieredPlacementSpec {
            tiers: vec![tier("east"), tier("west"), tier("south")],
            ..TieredPlacementSpec::default()
        };
        spec.failback.policy = FailbackMode::Automatic;
        let timings = spec.timings().unwrap();
        choose(
            &Situation {
                spec: &spec,
                timings: &timings,
                health,
                gates,
                first_plan: current.is_none(),
                tiers_vanished: false,
                excluded: &[],
                now,
            },
            current,
        )
    }

    fn kind(c: &Choice) -> Option<TransitionKind> {
        c.movement.as_ref().map(|m| m.kind)
    }

    #[test]
    fn a_lost_tier_is_left_for_the_first_other_tier_quarantined_ones_last() {
        let mut quarantined = healthy(ids(1..2), 1, Some(0));
        quarantined.quarantined_until = Some(100 * S);
        let health = [
            unhealthy(ids(0..1), 1),
            quarantined,
            healthy(ids(2..3), 1, Some(0)),
        ];
        let c = chosen(&health, &gates(), Some(0), 10 * S);
        assert_eq!(c.active, [2]);
        assert_eq!(kind(&c), Some(TransitionKind::Failover));
        assert_eq!(
            c.movement.map(|m| m.reason).as_deref(),
            Some("InsufficientQualifying")
        );
    }

    #[test]
    fn stale_scores_alone_never_move() {
        let mut stale = unhealthy(ids(0..1), 1);
        stale.unknown_only = 1;
        let health = [
            stale,
            healthy(ids(1..2), 1, Some(0)),
            healthy(ids(2..3), 1, Some(0)),
        ];
        let c = chosen(&health, &gates(), Some(0), 10 * S);
        assert_eq!(c.active, [0]);
        assert!(c.movement.is_none() && !c.no_tier_satisfied);
    }

    #[test]
    fn leaving_a_tier_entered_by_failback_because_it_became_infeasible_is_a_relapse() {
        let mut g = gates();
        g.last_transition = Some((TransitionKind::Failback, vec!["east".into()]));
        let health = [
            unhealthy(Vec::new(), 1),
            healthy(ids(1..2), 1, Some(0)),
            unhealthy(Vec::new(), 1),
        ];
        let c = chosen(&health, &g, Some(0), 10 * S);
        assert_eq!((c.active.as_slice(), c.relapse_of), ([1].as_slice(), Some(0)));
        g.last_transition = Some((TransitionKind::Failover, vec!["east".into()]));
        assert_eq!(chosen(&health, &g, Some(0), 10 * S).relapse_of, None);
    }

    #[test]
    fn an_automatic_failback_waits_out_the_hold_down_then_happens() {
        let mut better = healthy(ids(0..1), 1, Some(0));
        better.effective_hold_down = 60 * S;
        let health = [better, healthy(ids(1..2), 1, Some(0)), unhealthy(Vec::new(), 1)];
        let waiting = chosen(&health, &gates(), Some(1), 59 * S);
        assert_eq!(waiting.active, [1]);
        assert_eq!(
            waiting.pending,
            Some(Pending {
                from: 1,
                to: 0,
                eligible_at: Some(60 * S),
                reason: "HoldDown"
            })
        );
        let back = chosen(&health, &gates(), Some(1), 60 * S);
        assert_eq!(back.active, [0]);
        assert_eq!(kind(&back), Some(TransitionKind::Failback));
        // Frozen: the failback waits, whatever the hold-down says.
        let mut frozen = gates();
        frozen.frozen_until = Some(100 * S);
        let c = chosen(&health, &frozen, Some(1), 60 * S);
        assert_eq!(c.pending.map(|p| p.reason), Some("Frozen"));
    }
}
