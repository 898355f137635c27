//! Step 7, the conditions (in a fixed order) and the Warning events they come with. It decides
//! what each condition says about the plan: `Ready`, `OnPreferredTier`, `FailbackPending`,
//! `ScoresStale`, `Frozen`, `NoTierSatisfied`, Overflow's `InsufficientCapacity`, and with
//! `spec.workloadHealth` `WorkloadHealthy`. `PlanDiverged` is the controller's: carried over.
//!
//! A condition keeps its `lastTransitionTime` while its status does not change; its Warning
//! event is published once per change of what it names.

use super::super::render::MAX_PINNED_PER_TIER;
use super::super::verdict::Verdict;
use super::super::workload::verdicts::WorkloadVerdicts;
use super::super::{PlanEvent, condition, set_condition, set_condition_status};
use super::choice::Choice;
use super::exclusion::Exclusion;
use super::health::Health;
use crate::instant::timestamp;
use crate::placement::snapshot::HubSnapshot;
use ocm_score_api::crd::tiered_placement::{
    RetainedCluster, TieredPlacementSpec, TieringMode, WorkloadState,
};
use ocm_score_api::{Condition, Time};

/// `WorkloadHealthy=False` reason when no tier has a cluster not known to fail
/// (workload-failover.md §4).
const UNHEALTHY_EVERYWHERE: &str = "UnhealthyEverywhere";
/// At most this many clusters are named in a condition message.
const NAMED: usize = 10;

/// What the conditions are judged from.
pub(super) struct Input<'a> {
    pub generation: Option<i64>,
    /// The prior status' conditions.
    pub prior: &'a [Condition],
    pub spec: &'a TieredPlacementSpec,
    pub choice: &'a Choice,
    /// The tier `spec.override` pins.
    pub override_tier: Option<usize>,
    pub active_names: &'a [String],
    /// Per tier, in spec order.
    pub health: &'a [Health],
    /// Per cluster id: the capacity verdict.
    pub verdicts: &'a [Option<Verdict>],
    pub snapshot: &'a HubSnapshot,
    /// Why the child is not written (a name list over the cap).
    pub too_large: Option<&'a str>,
    pub child_name: &'a str,
    /// `status.frozenUntil` after this plan.
    pub frozen_until: Option<&'a Time>,
    /// The clusters OCM is expected to select, sorted.
    pub predicted: &'a [String],
    pub workload: &'a WorkloadVerdicts,
    pub retained: &'a [RetainedCluster],
    pub exclusion: &'a Exclusion,
    pub now: i128,
}

pub(super) struct Judged {
    pub conditions: Vec<Condition>,
    /// `WorkloadFailed` per newly failed cluster, `UnhealthyEverywhere` once per change.
    pub events: Vec<PlanEvent>,
}

pub(super) fn judge(input: &Input<'_>) -> Judged {
    let Input {
        generation,
        prior,
        spec,
        choice,
        override_tier,
        active_names,
        health,
        verdicts,
        snapshot,
        too_large,
        child_name,
        frozen_until,
        predicted,
        workload,
        retained,
        exclusion,
        now,
    } = *input;
    let mut conditions = Vec::new();
    let mut events = Vec::new();
    let mut set = |type_: &str, value: bool, reason: &str, message: String| {
        set_condition(
            &mut conditions,
            prior,
            type_,
            value,
            reason,
            message,
            generation,
            now,
        );
    };
    match too_large {
        Some(what) => set(
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
    } else if let Some(o) = override_tier {
        ("Override", format!("override pins tier {}", spec.tiers[o].name))
    } else if spec.mode == TieringMode::Overflow {
        (
            "Overflowing",
            format!("active tiers: {}", active_names.join(", ")),
        )
    } else {
        ("FailedOver", format!("active tier: {}", active_names.join(", ")))
    };
    set(condition::ON_PREFERRED_TIER, on_preferred, reason, message);
    match &choice.pending {
        Some(p) => set(
            condition::FAILBACK_PENDING,
            true,
            p.reason,
            match p.eligible_at {
                Some(at) => format!(
                    "{} qualifies; failback from {} eligible at {}",
                    spec.tiers[p.to].name,
                    spec.tiers[p.from].name,
                    timestamp(at)
                ),
                None => format!(
                    "{} qualifies; set spec.failback.trigger to a new value to fail back from {}",
                    spec.tiers[p.to].name, spec.tiers[p.from].name
                ),
            },
        ),
        None => set(condition::FAILBACK_PENDING, false, "NoFailback", String::new()),
    }
    let mut stale: Vec<String> = health
        .iter()
        .flat_map(|h| h.feasible.iter())
        .filter(|id| verdicts[id.index()].as_ref().is_some_and(|v| v.unknown))
        .map(|id| snapshot.cluster_name(*id).to_string())
        .collect();
    stale.sort();
    match stale_message(&stale) {
        None => set(condition::SCORES_STALE, false, "Fresh", String::new()),
        Some(message) => set(condition::SCORES_STALE, true, "Stale", message),
    }
    match frozen_until {
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
        let (value, reason, message) =
            workload_condition(workload, predicted, retained, exclusion, override_tier.is_some());
        set_condition_status(
            &mut conditions,
            prior,
            condition::WORKLOAD_HEALTHY,
            value,
            reason,
            message.clone(),
            generation,
            now,
        );
        for v in workload.clusters.iter().filter(|v| v.newly_failed) {
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
        let was = prior
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
    if let Some(c) = prior.iter().find(|c| c.type_ == condition::PLAN_DIVERGED) {
        conditions.push(c.clone());
    }
    Judged { conditions, events }
}

/// `ScoresStale`'s message for the clusters (sorted) whose scores are Unknown; `None`: fresh.
fn stale_message(stale: &[String]) -> Option<String> {
    if stale.is_empty() {
        return None;
    }
    let shown: Vec<&str> = stale.iter().take(NAMED).map(String::as_str).collect();
    let more = if stale.len() > NAMED {
        format!(" and {} more", stale.len() - NAMED)
    } else {
        String::new()
    };
    Some(format!(
        "scores unknown for {}{more}; no voluntary move uses them",
        shown.join(", ")
    ))
}

/// A Warning when this plan starts leaving the child as it was because a list is too large.
pub(super) fn pinning_warning(prior: &[Condition], too_large: bool) -> Option<PlanEvent> {
    let ready = prior.iter().find(|c| c.type_ == condition::READY)?;
    (too_large && ready.reason != "PinningTooLarge").then(|| PlanEvent {
        type_: "Warning",
        reason: "PinningTooLarge".into(),
        message: "the child Placement is left as it was".into(),
    })
}

/// `WorkloadHealthy` over the clusters the plan chose (retained ones are on their way out).
fn workload_condition(
    w: &WorkloadVerdicts,
    predicted: &[String],
    retained: &[RetainedCluster],
    exclusion: &Exclusion,
    overridden: bool,
) -> (&'static str, &'static str, String) {
    let chosen: Vec<&String> = predicted
        .iter()
        .filter(|c| !retained.iter().any(|r| &r.cluster == *c))
        .collect();
    let named = |names: Vec<String>| {
        let more = names.len().saturating_sub(NAMED);
        let mut text = names.into_iter().take(NAMED).collect::<Vec<_>>().join(", ");
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

#[cfg(test)]
mod tests {
    use super::super::test_support::verdict;
    use super::*;

    #[test]
    fn scores_stale_names_ten_clusters_and_counts_the_rest() {
        assert_eq!(stale_message(&[]), None);
        let names: Vec<String> = (0..12).map(|i| format!("c-{i:02}")).collect();
        let message = stale_message(&names).unwrap();
        assert!(message.starts_with("scores unknown for c-00, "), "{message}");
        assert!(message.contains("c-09 and 2 more;"), "{message}");
        assert!(!message.contains("c-10"), "{message}");
    }

    #[test]
    fn workload_healthy_judges_the_chosen_clusters_not_the_retained_ones() {
        let w = WorkloadVerdicts {
            clusters: vec![
                verdict("a-1", WorkloadState::Healthy, None),
                verdict("b-1", WorkloadState::Failed, None),
            ],
            requeue_at: None,
        };
        let predicted = ["a-1".to_string(), "b-1".to_string()];
        let b_retained = [RetainedCluster {
            cluster: "b-1".into(),
            ..RetainedCluster::default()
        }];
        let none = Exclusion::default();
        let judged = |retained: &[RetainedCluster], overridden| {
            let (value, reason, _) = workload_condition(&w, &predicted, retained, &none, overridden);
            (value, reason)
        };
        assert_eq!(judged(&b_retained, false), ("True", "Healthy"));
        assert_eq!(judged(&[], false), ("False", UNHEALTHY_EVERYWHERE));
        assert_eq!(judged(&[], true), ("False", "Override"));
        assert_eq!(workload_condition(&w, &[], &[], &none, false).1, "NoClusters");
    }

    #[test]
    fn pinning_too_large_warns_once_when_it_starts() {
        let ready = |reason: &str| Condition {
            type_: condition::READY.into(),
            status: "False".into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: crate::instant::time(0),
        };
        assert!(pinning_warning(&[ready("PlacementSynced")], true).is_some());
        assert!(pinning_warning(&[ready("PinningTooLarge")], true).is_none());
        assert!(pinning_warning(&[ready("PlacementSynced")], false).is_none());
        assert!(pinning_warning(&[], true).is_none());
    }
}
