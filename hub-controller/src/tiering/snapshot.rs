//! The reflector stores the controller reads, and the planner's [`HubSnapshot`] built from them.

use crate::hub_cache::{PlacementStores, cloned};
use kube::runtime::reflector::Store;
use ocm_score_api::crd::tiered_placement::TieredPlacement;
use ocm_score_api::{ManifestWork, WorkloadShape};
use ocm_score_scheduler::placement::{HubSnapshot, PlacementError};
use ocm_score_scheduler::reservation::ShapeCatalog;
use ocm_score_scheduler::tiering::WorkIndex;
use ocm_score_shell::sync::lock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub use crate::hub_cache::CacheGone;
use ocm_score_shell::controller::wait_synced;

/// The planner's index of the ManifestWorks, built from the store once per change of it and
/// shared by every plan until the next: building it takes about as long as a plan.
#[derive(Default)]
pub struct WorkIndexCache {
    /// Bumped by the watch after each event reached the store.
    changes: AtomicU64,
    built: Mutex<Option<(u64, Arc<WorkIndex<'static>>)>>,
}

impl WorkIndexCache {
    /// The store changed (called after the change is in it).
    pub fn changed(&self) {
        self.changes.fetch_add(1, Ordering::AcqRel);
    }

    /// The index of `store` as of the last change.
    pub fn index(&self, store: &Store<ManifestWork>) -> Arc<WorkIndex<'static>> {
        // Read before the store: a change in between is in the index and rebuilds it next time.
        let changes = self.changes.load(Ordering::Acquire);
        let mut built = lock(&self.built);
        if let Some((at, index)) = built.as_ref()
            && *at == changes
        {
            return index.clone();
        }
        let index = Arc::new(WorkIndex::from_shared(store.state()));
        *built = Some((changes, index.clone()));
        index
    }
}

/// One store per kind the planner reads.
#[derive(Clone)]
pub struct Stores {
    pub tiered: Store<TieredPlacement>,
    /// What OCM's placement engine reads.
    pub hub: PlacementStores,
    /// What one replica of each shape takes (cross-shape reservation deductions).
    pub shapes: Store<WorkloadShape>,
    /// The ManifestWorks, without their manifests: the workloads' health (`spec.workloadHealth`).
    pub works: Store<ManifestWork>,
    /// Their index, rebuilt only when the store changed.
    pub work_index: Arc<WorkIndexCache>,
}

impl Stores {
    /// Resolves once every store holds its first complete list: a plan made from half a picture
    /// (no clusters yet, say) would be a failover.
    pub async fn synced(&self) -> Result<(), CacheGone> {
        wait_synced(&[("TieredPlacements", &self.tiered), ("ManifestWorks", &self.works)]).await?;
        self.hub.synced().await
    }

    /// The WorkloadShapes' per-replica requests.
    pub fn shape_catalog(&self) -> ShapeCatalog {
        ShapeCatalog::new(&cloned(&self.shapes))
    }

    /// What the planner needs for a TieredPlacement in `namespace` (see
    /// [`PlacementStores::snapshot`]).
    pub fn snapshot(
        &self,
        namespace: &str,
        now: jiff::Timestamp,
    ) -> Result<Arc<HubSnapshot>, PlacementError> {
        self.hub.snapshot(namespace, now)
    }
}

/// Keeps a ManifestWork's metadata and status: the manifests may be large, and health is judged
/// from the status alone.
pub fn without_manifests(work: &mut ManifestWork) {
    work.spec.workload.manifests = Vec::new();
    work.metadata.managed_fields = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    fn work(cluster: &str) -> ManifestWork {
        let mut w = ManifestWork::default();
        w.metadata.name = Some("web".into());
        w.metadata.namespace = Some(cluster.into());
        w
    }

    #[test]
    fn the_index_is_rebuilt_only_after_a_change() {
        let (store, mut writer) = reflector::store::<ManifestWork>();
        let cache = WorkIndexCache::default();
        writer.apply_watcher_event(&Event::Apply(work("c1")));
        cache.changed();
        let first = cache.index(&store);
        assert_eq!(first.len(), 1);
        assert!(
            Arc::ptr_eq(&first, &cache.index(&store)),
            "unchanged: the same index"
        );
        writer.apply_watcher_event(&Event::Apply(work("c2")));
        cache.changed();
        let second = cache.index(&store);
        assert_eq!(second.len(), 2);
        assert!(!Arc::ptr_eq(&first, &second));
    }
}
