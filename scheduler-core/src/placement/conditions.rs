//! The Placement's status: selected count, decision groups and the two conditions.

use super::status::{Status, StatusCode};
use k8s_openapi::jiff::Timestamp;
use ocm_score_api::{Condition, DecisionGroupStatus, PlacementStatus, Time};

pub const PLACEMENT_SATISFIED: &str = "PlacementSatisfied";
pub const PLACEMENT_MISCONFIGURED: &str = "PlacementMisconfigured";

/// A condition before `lastTransitionTime` is decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionOutcome {
    pub type_: &'static str,
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

/// What decides `PlacementSatisfied`.
#[derive(Clone, Debug)]
pub struct SatisfiedInputs<'a> {
    pub cluster_sets_in_spec: &'a [String],
    pub eligible_sets: &'a [String],
    pub valid_bindings: usize,
    pub available_clusters: usize,
    /// Upstream passes the number of *selected* clusters here (so `numberOfClusters: 0`
    /// reports `NoManagedClusterMatched`).
    pub selected: usize,
    pub unscheduled: i64,
    pub status: &'a Status,
}

pub fn satisfied(inputs: &SatisfiedInputs<'_>) -> ConditionOutcome {
    let (status, reason, message) = if inputs.valid_bindings == 0 {
        (
            "False",
            "NoManagedClusterSetBindings",
            "No valid ManagedClusterSetBindings found in placement namespace".to_string(),
        )
    } else if inputs.eligible_sets.is_empty() {
        (
            "False",
            "NoIntersection",
            format!(
                "None of ManagedClusterSets [{}] is bound to placement namespace",
                inputs.cluster_sets_in_spec.join(",")
            ),
        )
    } else if inputs.available_clusters == 0 {
        (
            "False",
            "AllManagedClusterSetsEmpty",
            format!(
                "All ManagedClusterSets [{}] have no member ManagedCluster",
                inputs.eligible_sets.join(",")
            ),
        )
    } else if inputs.status.code == StatusCode::Error {
        ("False", "NotAllDecisionsScheduled", inputs.status.message.clone())
    } else if inputs.selected == 0 {
        (
            "False",
            "NoManagedClusterMatched",
            "No ManagedCluster matches any of the cluster predicate".to_string(),
        )
    } else if inputs.unscheduled == 0 {
        (
            "True",
            "AllDecisionsScheduled",
            "All cluster decisions scheduled".to_string(),
        )
    } else {
        (
            "False",
            "NotAllDecisionsScheduled",
            format!("{} cluster decisions unscheduled", inputs.unscheduled),
        )
    };
    ConditionOutcome {
        type_: PLACEMENT_SATISFIED,
        status,
        reason,
        message,
    }
}

pub fn misconfigured(status: &Status) -> ConditionOutcome {
    if status.code == StatusCode::Misconfigured {
        ConditionOutcome {
            type_: PLACEMENT_MISCONFIGURED,
            status: "True",
            reason: "Misconfigured",
            message: format!("{}:{}", status.plugin, status.message),
        }
    } else {
        ConditionOutcome {
            type_: PLACEMENT_MISCONFIGURED,
            status: "False",
            reason: "Succeedconfigured",
            message: "Placement configurations check pass".to_string(),
        }
    }
}

/// `meta.SetStatusCondition`: `lastTransitionTime` moves only when the status flips (or the
/// condition is new); reason and message are always updated; observedGeneration is cleared.
pub fn set_condition(conditions: &mut Vec<Condition>, outcome: &ConditionOutcome, now: Timestamp) {
    // Condition times are serialized with second precision.
    let now = Time(Timestamp::from_second(now.as_second()).unwrap_or(now));
    match conditions.iter_mut().find(|c| c.type_ == outcome.type_) {
        None => conditions.push(Condition {
            type_: outcome.type_.to_string(),
            status: outcome.status.to_string(),
            reason: outcome.reason.to_string(),
            message: outcome.message.clone(),
            last_transition_time: now,
            observed_generation: None,
        }),
        Some(existing) => {
            if existing.status != outcome.status {
                existing.status = outcome.status.to_string();
                existing.last_transition_time = now;
            }
            existing.reason = outcome.reason.to_string();
            existing.message.clone_from(&outcome.message);
            existing.observed_generation = None;
        }
    }
}

/// The placement status a sync writes, starting from the current one.
pub fn placement_status(
    current: Option<&PlacementStatus>,
    selected: usize,
    groups: Vec<DecisionGroupStatus>,
    misconfigured: &ConditionOutcome,
    satisfied: &ConditionOutcome,
    now: Timestamp,
) -> PlacementStatus {
    let mut status = current.cloned().unwrap_or_default();
    status.number_of_selected_clusters = selected as i32;
    status.decision_groups = groups;
    set_condition(&mut status.conditions, misconfigured, now);
    set_condition(&mut status.conditions, satisfied, now);
    status
}
