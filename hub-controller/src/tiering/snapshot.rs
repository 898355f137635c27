//! The reflector stores the controller reads, and the planner's [`HubSnapshot`] built from them.

use crate::hub_cache::{PlacementStores, cloned};
use kube::runtime::reflector::Store;
use scheduler_core::api::tiering::TieredPlacement;
use scheduler_core::api::{ManifestWork, WorkloadShape};
use scheduler_core::placement::{HubSnapshot, PlacementError};
use scheduler_core::reservation::ShapeCatalog;

pub use crate::hub_cache::CacheGone;

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
}

impl Stores {
    /// Resolves once every store holds its first complete list: a plan made from half a picture
    /// (no clusters yet, say) would be a failover.
    pub async fn synced(&self) -> Result<(), CacheGone> {
        self.tiered
            .wait_until_ready()
            .await
            .map_err(|_| CacheGone("TieredPlacements"))?;
        self.works
            .wait_until_ready()
            .await
            .map_err(|_| CacheGone("ManifestWorks"))?;
        self.hub.synced().await
    }

    /// The WorkloadShapes' per-replica requests.
    pub fn shape_catalog(&self) -> ShapeCatalog {
        ShapeCatalog::new(&cloned(&self.shapes))
    }

    /// What the planner needs for a TieredPlacement in `namespace` (see
    /// [`PlacementStores::snapshot`]).
    pub fn snapshot(&self, namespace: &str) -> Result<HubSnapshot, PlacementError> {
        self.hub.snapshot(namespace)
    }
}

/// Keeps a ManifestWork's metadata and status: the manifests may be large, and health is judged
/// from the status alone.
pub fn without_manifests(work: &mut ManifestWork) {
    work.spec.workload.manifests = Vec::new();
    work.metadata.managed_fields = None;
}
