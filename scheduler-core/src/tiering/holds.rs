//! Which clusters' scores a plan depends on, so a controller re-plans a TieredPlacement only when
//! one of those changes.
//!
//! A plan reads scores only of its tiers' members (the capacity verdicts, the prioritizers, the
//! prediction of the child, reservations), and membership comes from cluster sets, labels and
//! claims, which are ManagedCluster and ManagedClusterSet inputs, not scores. The exception is a
//! CEL predicate: OCM's `managedCluster.scores(...)` makes membership itself depend on every
//! cluster's scores, and then any score change may matter.

use super::feasibility::TierClusters;
use crate::placement::snapshot::HubSnapshot;
use ocm_score_api::TieredPlacementSpec;
use std::collections::BTreeSet;

/// The clusters whose AddOnPlacementScores a plan read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Holds {
    /// Any cluster's scores may change the plan (or it is not known which).
    #[default]
    Every,
    /// Only these clusters' scores can change the plan.
    Clusters(BTreeSet<String>),
}

impl Holds {
    /// Whether a change of `cluster`'s scores may change the plan.
    pub fn includes(&self, cluster: &str) -> bool {
        match self {
            Holds::Every => true,
            Holds::Clusters(clusters) => clusters.contains(cluster),
        }
    }
}

/// What a plan of `spec` over `tiers` (step 1's result on `snapshot`) holds.
pub(crate) fn of(spec: &TieredPlacementSpec, snapshot: &HubSnapshot, tiers: &[TierClusters]) -> Holds {
    if spec.tiers.iter().any(|tier| reads_scores(&tier.predicates)) {
        return Holds::Every;
    }
    Holds::Clusters(
        tiers
            .iter()
            .flat_map(|t| &t.members)
            .map(|id| snapshot.cluster_name(*id).to_string())
            .collect(),
    )
}

/// Whether a CEL expression of `predicates` may read scores (a conservative textual test: a
/// false positive only costs re-plans).
fn reads_scores(predicates: &[ocm_score_api::ClusterPredicate]) -> bool {
    predicates
        .iter()
        .filter_map(|p| p.required_cluster_selector.as_ref())
        .filter_map(|s| s.cel_selector.as_ref())
        .flat_map(|c| &c.cel_expressions)
        .any(|expression| expression.contains("scores"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocm_score_api::{ClusterCelSelector, ClusterPredicate, ClusterSelector};

    fn cel(expression: &str) -> ClusterPredicate {
        ClusterPredicate {
            required_cluster_selector: Some(ClusterSelector {
                cel_selector: Some(ClusterCelSelector {
                    cel_expressions: vec![expression.into()],
                }),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn only_a_cel_predicate_over_scores_holds_every_cluster() {
        assert!(!reads_scores(&[]));
        assert!(!reads_scores(&[cel(
            "managedCluster.metadata.labels['zone'] == 'a'"
        )]));
        assert!(reads_scores(&[
            cel("true"),
            cel(
                "managedCluster.scores('resource-usage-score').filter(s, s.name == 'cpu').all(e, e.value > 10)"
            ),
        ]));
    }

    #[test]
    fn clusters_hold_only_their_names() {
        let holds = Holds::Clusters(["a".to_string()].into());
        assert!(holds.includes("a"));
        assert!(!holds.includes("b"));
        assert!(Holds::Every.includes("b"));
    }
}
