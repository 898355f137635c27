//! Which placements an object change makes stale (upstream's event handlers and enqueue
//! functions), for a controller that reschedules on watch events.
//!
//! Upstream indexes bindings by `spec.clusterSet` when a cluster set changes, but by the binding
//! *name* when a binding changes; both are kept as they are.

use super::candidates::membership;
use super::snapshot::HubSnapshot;
use ocm_score_api::Placement;
use std::collections::{BTreeMap, BTreeSet};

/// A change the scheduler reacts to.
#[derive(Clone, Copy, Debug)]
pub enum Trigger<'a> {
    /// A ManagedClusterSet was added, updated or deleted.
    ClusterSet { name: &'a str },
    /// A ManagedClusterSetBinding `namespace/name` was added, updated or deleted.
    Binding { namespace: &'a str, name: &'a str },
    /// AddOnPlacementScore `cluster/resource_name` was added, updated or deleted.
    Score {
        cluster: &'a str,
        resource_name: &'a str,
    },
    /// A ManagedCluster with these labels was added or deleted.
    Cluster { labels: &'a BTreeMap<String, String> },
    /// A ManagedCluster's labels went from `old` to `new`.
    ClusterUpdate {
        old: &'a BTreeMap<String, String>,
        new: &'a BTreeMap<String, String>,
    },
}

/// Placements as `(namespace, name)`.
pub type PlacementKeys = BTreeSet<(String, String)>;

fn key(p: &Placement) -> (String, String) {
    (
        p.metadata.namespace.clone().unwrap_or_default(),
        p.metadata.name.clone().unwrap_or_default(),
    )
}

/// Whether the placement prioritizes by AddOnPlacementScores named `resource_name`.
fn uses_addon_resource(p: &Placement, resource_name: &str) -> bool {
    p.spec
        .prioritizer_policy
        .iter()
        .flat_map(|pp| pp.configurations.iter())
        .any(|c| {
            c.score_coordinate.as_ref().is_some_and(|sc| {
                sc.type_ == "AddOn"
                    && sc
                        .add_on
                        .as_ref()
                        .is_some_and(|a| a.resource_name == resource_name)
            })
        })
}

/// Placements in `namespace` that a binding named `binding` can feed.
fn by_binding(snapshot: &HubSnapshot, namespace: &str, binding: &str, out: &mut PlacementKeys) {
    for p in snapshot.placements() {
        if p.metadata.namespace.as_deref() == Some(namespace)
            && (p.spec.cluster_sets.is_empty() || p.spec.cluster_sets.iter().any(|s| s == binding))
        {
            out.insert(key(p));
        }
    }
}

fn by_cluster_set(snapshot: &HubSnapshot, set: &str, out: &mut PlacementKeys) {
    for b in snapshot.bindings().iter().filter(|b| b.spec.cluster_set == set) {
        let namespace = b.metadata.namespace.as_deref().unwrap_or("");
        by_binding(snapshot, namespace, b.metadata.name.as_deref().unwrap_or(""), out);
    }
}

/// Names of the existing sets whose membership selector matches `labels`.
fn sets_matching<'s>(snapshot: &'s HubSnapshot, labels: &BTreeMap<String, String>) -> Vec<&'s str> {
    sets_matching_labels(snapshot, |k| labels.get(k).map(String::as_str))
}

/// [`sets_matching`] with the labels given as a lookup.
fn sets_matching_labels<'s, 'l>(
    snapshot: &'s HubSnapshot,
    label: impl Fn(&str) -> Option<&'l str> + Copy,
) -> Vec<&'s str> {
    snapshot
        .cluster_sets()
        .iter()
        .filter(|s| membership(s).is_ok_and(|m| m.matches(label)))
        .filter_map(|s| s.metadata.name.as_deref())
        .collect()
}

pub fn affected_placements(snapshot: &HubSnapshot, trigger: Trigger<'_>) -> PlacementKeys {
    let mut out = PlacementKeys::new();
    match trigger {
        Trigger::ClusterSet { name } => by_cluster_set(snapshot, name, &mut out),
        Trigger::Binding { namespace, name } => by_binding(snapshot, namespace, name, &mut out),
        Trigger::Cluster { labels } => {
            for set in sets_matching(snapshot, labels) {
                by_cluster_set(snapshot, set, &mut out);
            }
        }
        Trigger::ClusterUpdate { old, new } => {
            let mut sets = sets_matching(snapshot, new);
            if old != new {
                sets.extend(sets_matching(snapshot, old));
            }
            for set in sets {
                by_cluster_set(snapshot, set, &mut out);
            }
        }
        Trigger::Score {
            cluster,
            resource_name,
        } => {
            let Some(id) = snapshot.cluster_id(cluster) else {
                return out;
            };
            let sets = sets_matching_labels(snapshot, |k| snapshot.cluster_label(id, k));
            let namespaces: BTreeSet<&str> = snapshot
                .bindings()
                .iter()
                .filter(|b| sets.contains(&b.spec.cluster_set.as_str()))
                .filter_map(|b| b.metadata.namespace.as_deref())
                .collect();
            for p in snapshot.placements() {
                if namespaces.contains(p.metadata.namespace.as_deref().unwrap_or(""))
                    && uses_addon_resource(p, resource_name)
                {
                    out.insert(key(p));
                }
            }
        }
    }
    out
}
