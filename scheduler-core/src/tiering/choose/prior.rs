//! What the last plan left, as the choice starts from it: whether there was a last plan at all,
//! the clusters it selected, the tiers it made active, and which tier each member is in.
//!
//! The choice is sticky (Overflow keeps what still qualifies, Failover stays on its tier), so it
//! needs the last selection; reading it from the status rather than from memory is what lets a
//! restarted controller continue exactly. Retained clusters are not part of that selection: they
//! are on their way out ([`super::retain`]).

use super::super::feasibility::TierClusters;
use crate::placement::snapshot::{ClusterId, HubSnapshot};
use ocm_score_api::crd::tiered_placement::{RetainedCluster, Tier, TierStatus, TieredPlacementStatus};

/// Every tier member, and the tier each cluster id belongs to.
pub(super) struct Members {
    /// All tiers' members, tier by tier.
    pub ids: Vec<ClusterId>,
    /// Per cluster id: the tier holding it (`None`: in no tier).
    pub tier_of: Vec<Option<usize>>,
}

impl Members {
    pub(super) fn of(tiers: &[TierClusters], cluster_count: usize) -> Self {
        let ids = tiers.iter().flat_map(|t| t.members.iter().copied()).collect();
        let mut tier_of = vec![None; cluster_count];
        for (i, t) in tiers.iter().enumerate() {
            for id in &t.members {
                tier_of[id.index()] = Some(i);
            }
        }
        Members { ids, tier_of }
    }
}

/// The last plan, as far as this one depends on it.
pub(super) struct Prior<'a> {
    /// Never planned before: no status yet, or one without any transition (an invalid spec's).
    pub first_plan: bool,
    /// The clusters it selected, retained ones apart; on a first plan, the child's decisions.
    pub selection: Vec<ClusterId>,
    /// Per cluster id: in `selection`.
    pub in_selection: Vec<bool>,
    /// The clusters it kept beside their replacements.
    pub retained: &'a [RetainedCluster],
    /// Its active tiers (indices into `spec.tiers`; tiers since removed are left out).
    pub active: Vec<usize>,
    /// Some active tier is no longer in the spec.
    pub tiers_vanished: bool,
    /// Its per-tier memory (healthy since, penalty).
    pub tiers: &'a [TierStatus],
    /// What it predicted OCM selects.
    pub predicted: &'a [String],
}

/// Reads the last plan from `prior`; `in_decision` (per cluster id) is the child's
/// PlacementDecisions, the selection a first plan starts from.
pub(super) fn read<'a>(
    prior: Option<&'a TieredPlacementStatus>,
    spec_tiers: &[Tier],
    snapshot: &HubSnapshot,
    in_decision: &[bool],
) -> Prior<'a> {
    // A planned placement may have no active tier (nothing qualifies); that is not a first plan.
    let first_plan = prior.is_none_or(|p| p.active_tiers.is_empty() && p.transitions.is_empty());
    let retained: &[RetainedCluster] = prior
        .and_then(|p| p.workload_health.as_ref())
        .map_or(&[], |w| w.retained.as_slice());
    let is_retained = |name: &str| retained.iter().any(|r| r.cluster == name);
    let placement = prior.and_then(|p| p.placement.as_ref());
    let selection: Vec<ClusterId> = match placement {
        Some(p) if !first_plan => p
            .predicted
            .iter()
            .filter(|n| !is_retained(n))
            .filter_map(|n| snapshot.cluster_id(n))
            .collect(),
        _ => snapshot
            .cluster_ids()
            .filter(|id| in_decision.get(id.index()).copied().unwrap_or(false))
            .collect(),
    };
    let mut in_selection = vec![false; snapshot.cluster_count()];
    for id in &selection {
        in_selection[id.index()] = true;
    }
    let active: Vec<usize> = prior
        .map(|p| {
            p.active_tiers
                .iter()
                .filter_map(|a| spec_tiers.iter().position(|t| &t.name == a))
                .collect()
        })
        .unwrap_or_default();
    let tiers_vanished =
        prior.is_some_and(|p| !p.active_tiers.is_empty() && active.len() != p.active_tiers.len());
    Prior {
        first_plan,
        selection,
        in_selection,
        retained,
        active,
        tiers_vanished,
        tiers: prior.map_or(&[], |p| p.tiers.as_slice()),
        predicted: placement.map_or(&[], |p| p.predicted.as_slice()),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{snapshot, tier};
    use super::*;
    use ocm_score_api::crd::tiered_placement::{
        ChildPlacementStatus, Transition, TransitionKind, WorkloadHealthStatus,
    };

    fn planned(predicted: &[&str], retained: &[&str]) -> TieredPlacementStatus {
        TieredPlacementStatus {
            active_tiers: vec!["east".into()],
            transitions: vec![Transition {
                time: crate::instant::time(0),
                kind: TransitionKind::Initial,
                from: Vec::new(),
                to: vec!["east".into()],
                reason: String::new(),
                message: String::new(),
            }],
            placement: Some(ChildPlacementStatus {
                predicted: predicted.iter().map(|s| s.to_string()).collect(),
                ..ChildPlacementStatus::default()
            }),
            workload_health: Some(WorkloadHealthStatus {
                retained: retained
                    .iter()
                    .map(|c| RetainedCluster {
                        cluster: c.to_string(),
                        ..RetainedCluster::default()
                    })
                    .collect(),
                ..WorkloadHealthStatus::default()
            }),
            ..TieredPlacementStatus::default()
        }
    }

    #[test]
    fn the_last_selection_leaves_out_retained_clusters_and_a_first_plan_starts_from_the_decisions() {
        let hub = snapshot(&["a-1", "a-2", "b-1"]);
        let tiers = [tier("east"), tier("west")];
        let names = |ids: &[ClusterId]| ids.iter().map(|id| hub.cluster_name(*id)).collect::<Vec<_>>();
        let in_decision = [false, true, false];

        let status = planned(&["a-1", "b-1"], &["b-1"]);
        let before = read(Some(&status), &tiers, &hub, &in_decision);
        assert!(!before.first_plan);
        assert_eq!(names(&before.selection), ["a-1"]);
        assert_eq!(before.in_selection, [true, false, false]);
        assert_eq!(before.active, [0]);

        // Planned before but invalid ever since (no transition): the child's decisions count.
        let invalid = TieredPlacementStatus::default();
        let before = read(Some(&invalid), &tiers, &hub, &in_decision);
        assert!(before.first_plan);
        assert_eq!(names(&before.selection), ["a-2"]);
    }

    #[test]
    fn an_active_tier_removed_from_the_spec_is_noticed() {
        let hub = snapshot(&["a-1"]);
        let status = planned(&["a-1"], &[]);
        let before = read(Some(&status), &[tier("west")], &hub, &[false]);
        assert!(before.tiers_vanished);
        assert!(before.active.is_empty());
        let before = read(Some(&status), &[tier("east")], &hub, &[false]);
        assert!(!before.tiers_vanished);
    }
}
