//! The reflector stores of every kind OCM's placement engine reads, and the [`HubSnapshot`] for
//! one namespace built from them: shared by the modes that decide as OCM does from a live cache
//! (`tiering`, `explain-server`).

use kube::runtime::reflector::Store;
use ocm_score_api::{
    AddOnPlacementScore, ManagedCluster, ManagedClusterSet, ManagedClusterSetBinding, Placement,
    PlacementDecision,
};
use ocm_score_scheduler::placement::{HubObjects, HubSnapshot, PlacementError};
use ocm_score_shell::controller::wait_synced;

/// One store per kind the engine reads.
#[derive(Clone)]
pub struct PlacementStores {
    pub clusters: Store<ManagedCluster>,
    pub cluster_sets: Store<ManagedClusterSet>,
    pub bindings: Store<ManagedClusterSetBinding>,
    pub scores: Store<AddOnPlacementScore>,
    pub placements: Store<Placement>,
    pub decisions: Store<PlacementDecision>,
}

pub use ocm_score_shell::controller::CacheGone;

pub fn cloned<K>(store: &Store<K>) -> Vec<K>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store.state().iter().map(|o| (**o).clone()).collect()
}

impl PlacementStores {
    /// Resolves once every store holds its first complete list: an answer from half a picture
    /// (no clusters yet, say) would be wrong, not merely late.
    pub async fn synced(&self) -> Result<(), CacheGone> {
        wait_synced(&[
            ("ManagedClusters", &self.clusters),
            ("ManagedClusterSets", &self.cluster_sets),
            ("ManagedClusterSetBindings", &self.bindings),
            ("AddOnPlacementScores", &self.scores),
            ("Placements", &self.placements),
            ("PlacementDecisions", &self.decisions),
        ])
        .await
    }

    /// What the engine needs for a placement in `namespace`: every cluster, set, score and
    /// decision (Balance reads other placements' decisions), the namespace's bindings and
    /// placements.
    pub fn snapshot(&self, namespace: &str) -> Result<HubSnapshot, PlacementError> {
        let in_namespace = |ns: &Option<String>| ns.as_deref() == Some(namespace);
        HubSnapshot::new(HubObjects {
            clusters: cloned(&self.clusters),
            cluster_sets: cloned(&self.cluster_sets),
            bindings: self
                .bindings
                .state()
                .iter()
                .filter(|b| in_namespace(&b.metadata.namespace))
                .map(|b| (**b).clone())
                .collect(),
            placements: self
                .placements
                .state()
                .iter()
                .filter(|p| in_namespace(&p.metadata.namespace))
                .map(|p| (**p).clone())
                .collect(),
            decisions: cloned(&self.decisions),
            scores: cloned(&self.scores),
        })
    }
}
