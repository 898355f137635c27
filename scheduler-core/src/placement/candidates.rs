//! Candidate clusters: the members of the cluster sets bound to the placement's namespace.

use super::error::PlacementError;
use super::selector::LabelMatcher;
use super::snapshot::{ClusterId, HubSnapshot};
use ocm_score_api::{ManagedClusterSet, Placement, well_known::CLUSTER_SET_LABEL};

/// The cluster-set step of a sync.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Candidates {
    /// Bindings in the placement namespace whose *name* names an existing ManagedClusterSet.
    pub valid_bindings: Vec<String>,
    /// Valid binding names, intersected with `spec.clusterSets` when that is set; sorted.
    pub eligible_sets: Vec<String>,
    /// Members of the eligible sets, without terminating clusters, in name order.
    pub clusters: Vec<ClusterId>,
}

/// Upstream checks the binding's *name*, not `spec.clusterSet`, and ignores its conditions.
pub fn valid_bindings(snapshot: &HubSnapshot, namespace: &str) -> Vec<String> {
    snapshot
        .bindings()
        .iter()
        .filter(|b| b.metadata.namespace.as_deref().unwrap_or("") == namespace)
        .filter_map(|b| b.metadata.name.clone())
        .filter(|name| snapshot.cluster_set(name).is_some())
        .collect()
}

pub fn eligible_sets(placement: &Placement, valid_bindings: &[String]) -> Vec<String> {
    let mut sets: Vec<String> = valid_bindings
        .iter()
        .filter(|b| placement.spec.cluster_sets.is_empty() || placement.spec.cluster_sets.contains(b))
        .cloned()
        .collect();
    sets.sort();
    sets.dedup();
    sets
}

/// How a ManagedClusterSet selects its members.
pub fn membership(set: &ManagedClusterSet) -> Result<LabelMatcher, PlacementError> {
    let name = set.metadata.name.clone().unwrap_or_default();
    let selector = set.spec.cluster_selector.as_ref();
    match selector.map_or("", |s| s.selector_type.as_str()) {
        "" | "ExclusiveClusterSetLabel" => Ok(LabelMatcher::All(vec![super::selector::Requirement {
            key: CLUSTER_SET_LABEL.to_string(),
            operator: super::selector::Operator::Equals,
            values: vec![name],
        }])),
        "LabelSelector" => LabelMatcher::from_selector(selector.and_then(|s| s.label_selector.as_ref()))
            .map_err(|message| PlacementError::InvalidClusterSetSelector {
                cluster_set: name,
                message,
            }),
        other => Err(PlacementError::InvalidSelectorType {
            cluster_set: name,
            value: other.to_string(),
        }),
    }
}

fn is_exclusive(set: &ManagedClusterSet) -> bool {
    matches!(
        set.spec
            .cluster_selector
            .as_ref()
            .map_or("", |s| s.selector_type.as_str()),
        "" | "ExclusiveClusterSetLabel"
    )
}

/// Union of the sets' members; sets that no longer exist are skipped.
pub fn available_clusters(snapshot: &HubSnapshot, sets: &[String]) -> Result<Vec<ClusterId>, PlacementError> {
    // One exclusive set (the usual case): its indexed members are already the union, in order.
    if let [name] = sets
        && let Some(set) = snapshot.cluster_set(name)
        && is_exclusive(set)
    {
        return Ok(snapshot
            .clusters_labelled_with_set(name)
            .iter()
            .copied()
            .filter(|&id| !snapshot.is_terminating(id))
            .collect());
    }
    let mut member = vec![false; snapshot.cluster_count()];
    for name in sets {
        let Some(set) = snapshot.cluster_set(name) else {
            continue;
        };
        if is_exclusive(set) {
            // The snapshot indexes the cluster-set label, like an informer index would.
            for &id in snapshot.clusters_labelled_with_set(name) {
                if !snapshot.is_terminating(id) {
                    member[id.index()] = true;
                }
            }
            continue;
        }
        // Only a label selector can be invalid; exclusive sets never build one.
        let matcher = membership(set)?;
        for id in snapshot.cluster_ids() {
            if member[id.index()] {
                continue;
            }
            if matcher.matches(|k| snapshot.cluster_label(id, k)) && !snapshot.is_terminating(id) {
                member[id.index()] = true;
            }
        }
    }
    Ok(snapshot.cluster_ids().filter(|id| member[id.index()]).collect())
}

pub fn candidates(snapshot: &HubSnapshot, placement: &Placement) -> Result<Candidates, PlacementError> {
    let namespace = placement.metadata.namespace.as_deref().unwrap_or("");
    let valid_bindings = valid_bindings(snapshot, namespace);
    let eligible_sets = eligible_sets(placement, &valid_bindings);
    let clusters = available_clusters(snapshot, &eligible_sets)?;
    Ok(Candidates {
        valid_bindings,
        eligible_sets,
        clusters,
    })
}
