//! The hub state the scheduler reads, with the indexes OCM's listers would give it.
//!
//! Building a snapshot is the equivalent of filling informer caches: clusters are sorted by name
//! (so the candidate order, and every tie-break, is independent of input order), cluster
//! quantities are parsed once, and AddOnPlacementScores are indexed by the cluster they belong to.

use super::error::PlacementError;
use super::quantity::approximate_f64;
use crate::api::{
    AddOnPlacementScore, ManagedCluster, ManagedClusterSet, ManagedClusterSetBinding, Placement, PlacementDecision,
    well_known,
};
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};

/// Index of a ManagedCluster in [`HubSnapshot::clusters`] (which is sorted by name, so comparing
/// ids compares names byte-wise).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterId(pub u32);

impl ClusterId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// FNV-1a: short keys (cluster names) hash much faster than with SipHash, and nothing here is
/// exposed to untrusted hash-flooding input that a controller would not already trust.
#[derive(Default)]
pub(crate) struct Fnv(u64);

impl Hasher for Fnv {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        let mut h = if self.0 == 0 { 0xcbf2_9ce4_8422_2325 } else { self.0 };
        for b in bytes {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        self.0 = h;
    }
}

pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<Fnv>>;

/// `status.allocatable` / `status.capacity` of one cluster, as the floats the resource
/// prioritizers use. `None` when the key is absent.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ClusterResources {
    pub cpu_allocatable: Option<f64>,
    pub cpu_capacity: Option<f64>,
    pub memory_allocatable: Option<f64>,
    pub memory_capacity: Option<f64>,
}

/// Everything the scheduler may read, as plain objects.
#[derive(Clone, Debug, Default)]
pub struct HubObjects {
    pub clusters: Vec<ManagedCluster>,
    pub cluster_sets: Vec<ManagedClusterSet>,
    pub bindings: Vec<ManagedClusterSetBinding>,
    pub placements: Vec<Placement>,
    pub decisions: Vec<PlacementDecision>,
    pub scores: Vec<AddOnPlacementScore>,
}

/// An indexed, read-only view of the hub.
#[derive(Clone, Debug)]
pub struct HubSnapshot {
    clusters: Vec<ManagedCluster>,
    resources: Vec<ClusterResources>,
    cluster_sets: Vec<ManagedClusterSet>,
    bindings: Vec<ManagedClusterSetBinding>,
    placements: Vec<Placement>,
    decisions: Vec<PlacementDecision>,
    scores: Vec<AddOnPlacementScore>,
    cluster_by_name: FastMap<String, ClusterId>,
    /// For each cluster, the AddOnPlacementScores in the namespace named after it.
    scores_by_cluster: Vec<Vec<u32>>,
}

fn name_of(meta: &crate::api::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

fn namespace_of(meta: &crate::api::ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or("")
}

impl HubSnapshot {
    /// Indexes the objects. Fails on what an API server could never hold: two objects with the
    /// same identity, or a cpu/memory quantity that does not parse.
    pub fn new(objects: HubObjects) -> Result<Self, PlacementError> {
        let HubObjects { mut clusters, mut cluster_sets, bindings, placements, decisions, scores } = objects;
        clusters.sort_by(|a, b| name_of(&a.metadata).cmp(name_of(&b.metadata)));
        cluster_sets.sort_by(|a, b| name_of(&a.metadata).cmp(name_of(&b.metadata)));
        check_unique("ManagedCluster", clusters.iter().map(|c| name_of(&c.metadata).to_string()))?;
        check_unique("ManagedClusterSet", cluster_sets.iter().map(|c| name_of(&c.metadata).to_string()))?;
        check_unique("ManagedClusterSetBinding", bindings.iter().map(|o| qualified(&o.metadata)))?;
        check_unique("Placement", placements.iter().map(|o| qualified(&o.metadata)))?;
        check_unique("PlacementDecision", decisions.iter().map(|o| qualified(&o.metadata)))?;
        check_unique("AddOnPlacementScore", scores.iter().map(|o| qualified(&o.metadata)))?;

        let mut cluster_by_name = FastMap::default();
        cluster_by_name.reserve(clusters.len());
        let mut resources = Vec::with_capacity(clusters.len());
        for (i, cluster) in clusters.iter().enumerate() {
            cluster_by_name.insert(name_of(&cluster.metadata).to_string(), ClusterId(i as u32));
            resources.push(parse_resources(cluster)?);
        }
        let mut scores_by_cluster = vec![Vec::new(); clusters.len()];
        for (i, score) in scores.iter().enumerate() {
            if let Some(id) = cluster_by_name.get(namespace_of(&score.metadata)) {
                scores_by_cluster[id.index()].push(i as u32);
            }
        }
        Ok(Self {
            clusters,
            resources,
            cluster_sets,
            bindings,
            placements,
            decisions,
            scores,
            cluster_by_name,
            scores_by_cluster,
        })
    }

    /// All clusters, sorted by name.
    pub fn clusters(&self) -> &[ManagedCluster] {
        &self.clusters
    }

    pub fn cluster(&self, id: ClusterId) -> &ManagedCluster {
        &self.clusters[id.index()]
    }

    pub fn cluster_name(&self, id: ClusterId) -> &str {
        name_of(&self.clusters[id.index()].metadata)
    }

    pub fn cluster_id(&self, name: &str) -> Option<ClusterId> {
        self.cluster_by_name.get(name).copied()
    }

    pub fn cluster_ids(&self) -> impl ExactSizeIterator<Item = ClusterId> + '_ {
        (0..self.clusters.len() as u32).map(ClusterId)
    }

    pub fn resources(&self, id: ClusterId) -> &ClusterResources {
        &self.resources[id.index()]
    }

    /// Cluster labels (empty when the cluster has none).
    pub fn cluster_labels(&self, id: ClusterId) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.clusters[id.index()].metadata.labels.as_ref().unwrap_or(&EMPTY)
    }

    /// ManagedClusterSets, sorted by name.
    pub fn cluster_sets(&self) -> &[ManagedClusterSet] {
        &self.cluster_sets
    }

    pub fn cluster_set(&self, name: &str) -> Option<&ManagedClusterSet> {
        self.cluster_sets
            .binary_search_by(|s| name_of(&s.metadata).cmp(name))
            .ok()
            .map(|i| &self.cluster_sets[i])
    }

    pub fn bindings(&self) -> &[ManagedClusterSetBinding] {
        &self.bindings
    }

    pub fn placements(&self) -> &[Placement] {
        &self.placements
    }

    pub fn placement(&self, namespace: &str, name: &str) -> Option<&Placement> {
        self.placements
            .iter()
            .find(|p| namespace_of(&p.metadata) == namespace && name_of(&p.metadata) == name)
    }

    /// Every PlacementDecision in every namespace.
    pub fn decisions(&self) -> &[PlacementDecision] {
        &self.decisions
    }

    /// The PlacementDecisions of one placement: in its namespace and labelled with its name.
    pub fn decisions_of<'s>(
        &'s self,
        namespace: &'s str,
        placement: &'s str,
    ) -> impl Iterator<Item = &'s PlacementDecision> + 's {
        self.decisions.iter().filter(move |d| {
            namespace_of(&d.metadata) == namespace
                && d.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(well_known::PLACEMENT_LABEL))
                    .is_some_and(|v| v == placement)
        })
    }

    pub fn scores(&self) -> &[AddOnPlacementScore] {
        &self.scores
    }

    /// The AddOnPlacementScore `<cluster name>/<resource name>`, if published.
    pub fn score_of(&self, id: ClusterId, resource_name: &str) -> Option<&AddOnPlacementScore> {
        self.scores_by_cluster[id.index()]
            .iter()
            .map(|&i| &self.scores[i as usize])
            .find(|s| name_of(&s.metadata) == resource_name)
    }
}

fn qualified(meta: &crate::api::ObjectMeta) -> String {
    format!("{}/{}", namespace_of(meta), name_of(meta))
}

fn check_unique(kind: &'static str, names: impl Iterator<Item = String>) -> Result<(), PlacementError> {
    let mut seen = std::collections::HashSet::new();
    for name in names {
        if !seen.insert(name.clone()) {
            return Err(PlacementError::DuplicateObject { kind, name });
        }
    }
    Ok(())
}

fn parse_resources(cluster: &ManagedCluster) -> Result<ClusterResources, PlacementError> {
    let Some(status) = &cluster.status else {
        return Ok(ClusterResources::default());
    };
    let parse = |section: &str, map: &BTreeMap<String, crate::api::Quantity>, key: &str| {
        map.get(key)
            .map(|q| {
                approximate_f64(&q.0).map_err(|e| PlacementError::InvalidQuantity {
                    kind: "ManagedCluster",
                    name: name_of(&cluster.metadata).to_string(),
                    field: format!("status.{section}.{key}"),
                    value: q.0.clone(),
                    reason: e.to_string(),
                })
            })
            .transpose()
    };
    Ok(ClusterResources {
        cpu_allocatable: parse("allocatable", &status.allocatable, "cpu")?,
        cpu_capacity: parse("capacity", &status.capacity, "cpu")?,
        memory_allocatable: parse("allocatable", &status.allocatable, "memory")?,
        memory_capacity: parse("capacity", &status.capacity, "memory")?,
    })
}
