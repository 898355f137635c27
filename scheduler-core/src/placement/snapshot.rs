//! The hub state the scheduler reads, with the indexes OCM's listers would give it.
//!
//! Building a snapshot is the equivalent of filling informer caches: clusters are sorted by name
//! (so the candidate order, and every tie-break, is independent of input order), cluster
//! quantities are parsed once, and AddOnPlacementScores are indexed by the cluster they belong to.
//!
//! ManagedClusters and AddOnPlacementScores, one or more per cluster, are most of a hub; they are
//! not kept as typed objects. A cluster is kept as what the scheduler reads (name, interned
//! labels, quantities, taints, claims) plus its JSON for CEL expressions that read other fields;
//! a score as its interned items. [`HubSnapshotBuilder`] takes the objects one at a time, so a
//! large hub need not be held as typed objects all at once.
//!
//! Over 800 lines on purpose: each index is written by the builder and read by the snapshot's
//! queries, and the two are kept together so that a change to one is seen beside the other.

use super::error::PlacementError;
use ocm_score_api::quantity::approximate_f64;
use ocm_score_api::{
    AddOnPlacementScore, ManagedCluster, ManagedClusterSet, ManagedClusterSetBinding, Placement,
    PlacementDecision, Taint, well_known,
};
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::Arc;

/// Index of a ManagedCluster in [`HubSnapshot::clusters`] (which is sorted by name, so comparing
/// ids compares names byte-wise). Only a snapshot hands them out ([`HubSnapshot::cluster_id`],
/// [`HubSnapshot::cluster_ids`]), so an id always indexes its snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ClusterId(pub(crate) u32);

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
        let mut h = if self.0 == 0 {
            0xcbf2_9ce4_8422_2325
        } else {
            self.0
        };
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

/// What the AddOn prioritizer needs from one AddOnPlacementScore.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct ScoreEntry {
    /// Interned `metadata.name` (the resource name).
    pub resource: u32,
    /// Whether the object has a `status` at all.
    pub has_status: bool,
    /// `status.validUntil` in Unix nanoseconds; `None` never expires.
    pub valid_until_ns: Option<i128>,
    /// Range in the interned `(score name, value)` items.
    items: std::ops::Range<u32>,
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
    /// Each cluster's `metadata.name`, sorted (a cluster without one sorts as `""`).
    cluster_names: Vec<Option<Box<str>>>,
    /// Each cluster as JSON, for CEL expressions that read more than names and labels.
    cluster_json: Vec<Box<[u8]>>,
    resources: Vec<ClusterResources>,
    /// `spec.taints` of each cluster (empty for most).
    taints: Vec<Box<[Taint]>>,
    /// `status.clusterClaims` of each cluster, in order.
    claims: Vec<Claims>,
    cluster_sets: Vec<ManagedClusterSet>,
    bindings: Vec<ManagedClusterSetBinding>,
    placements: Vec<Placement>,
    decisions: Vec<PlacementDecision>,
    /// For each cluster, the AddOnPlacementScores in the namespace named after it, as a
    /// compressed row list: `cluster_scores[cluster_score_start[i]..cluster_score_start[i + 1]]`.
    cluster_score_start: Vec<u32>,
    cluster_scores: Vec<u32>,
    /// What the scheduler reads of each AddOnPlacementScore, in input order.
    score_entries: Vec<ScoreEntry>,
    score_items: Vec<(u32, i32)>,
    /// Resource and score names, interned, and their text by id.
    score_names: FastMap<String, u32>,
    score_name_text: Vec<Arc<str>>,
    /// Cluster labels interned: `label_pairs[label_start[i]..label_start[i + 1]]` are cluster i's
    /// `(key, value)` ids, in key order; ids index `label_text`. Selectors read these few small
    /// arrays instead of every cluster's label map.
    label_text: Vec<Arc<str>>,
    /// The id of each interned label text, so a CEL predicate resolves its constant keys and
    /// values once per sync and compares ids per cluster.
    label_ids: FastMap<Arc<str>, u32>,
    label_start: Vec<u32>,
    label_pairs: Vec<(u32, u32)>,
    /// Whether each cluster has `metadata.labels` at all (absent and empty differ in CEL).
    has_labels: Vec<bool>,
    /// Whether each cluster has taints / a deletionTimestamp (kept apart so the hot loops stay
    /// in cache).
    tainted: Vec<bool>,
    terminating: Vec<bool>,
    /// Members of each exclusive cluster set (by the cluster-set label), in name order.
    by_cluster_set_label: FastMap<String, Vec<ClusterId>>,
    /// For each PlacementDecision, its `status.decisions` as slots (see [`HubSnapshot::decision_slots`]).
    decision_slots: Vec<Vec<u32>>,
    /// The PlacementDecisions of each placement (namespace, then `placement` label), as indices
    /// into `decisions` in their order: a placement finds its own without scanning every one.
    decisions_by_placement: FastMap<String, FastMap<String, Vec<u32>>>,
    /// Indices into `decisions` sorted by namespace, then name: a placement's writes look their
    /// pages up by name without scanning every PlacementDecision of the hub.
    decisions_by_name: Vec<u32>,
    /// How many PlacementDecisions name each slot, over every placement (Balance subtracts a
    /// placement's own from it instead of counting all the others for each placement).
    decided_counts: Vec<u32>,
    max_decided_count: u32,
    /// When set, the instant every score's expiry is judged at, if earlier than the one asked
    /// ([`HubSnapshot::judging_expiry_at`]).
    expiry_judged_at: Option<i128>,
}

/// One cluster's claims as `(name, value)`.
type Claims = Box<[(Box<str>, Box<str>)]>;

/// A ManagedCluster as the builder keeps it until the clusters are sorted.
#[derive(Debug)]
struct PendingCluster {
    name: Option<Box<str>>,
    json: Box<[u8]>,
    resources: Result<ClusterResources, Box<PlacementError>>,
    /// Interned `(key, value)` pairs; `None` without `metadata.labels`.
    labels: Option<Box<[(u32, u32)]>>,
    taints: Box<[Taint]>,
    claims: Claims,
    terminating: bool,
}

fn cluster_name(c: &PendingCluster) -> &str {
    c.name.as_deref().unwrap_or("")
}

/// An AddOnPlacementScore as the builder keeps it until the clusters are known.
#[derive(Debug)]
struct PendingScore {
    namespace: Box<str>,
    entry: ScoreEntry,
}

/// Builds a [`HubSnapshot`] one object at a time, keeping of each ManagedCluster and
/// AddOnPlacementScore only what the snapshot holds. [`HubSnapshot::new`] is this builder fed
/// every object of a [`HubObjects`].
#[derive(Debug, Default)]
pub struct HubSnapshotBuilder {
    clusters: Vec<PendingCluster>,
    cluster_sets: Vec<ManagedClusterSet>,
    bindings: Vec<ManagedClusterSetBinding>,
    placements: Vec<Placement>,
    decisions: Vec<PlacementDecision>,
    scores: Vec<PendingScore>,
    score_items: Vec<(u32, i32)>,
    score_names: FastMap<String, u32>,
    score_name_text: Vec<Arc<str>>,
    label_text: Vec<Arc<str>>,
    label_ids: FastMap<Arc<str>, u32>,
}

fn name_of(meta: &ocm_score_api::ObjectMeta) -> &str {
    meta.name.as_deref().unwrap_or("")
}

fn namespace_of(meta: &ocm_score_api::ObjectMeta) -> &str {
    meta.namespace.as_deref().unwrap_or("")
}

impl HubSnapshotBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add_cluster(&mut self, cluster: ManagedCluster) {
        // Serializing our own typed object cannot fail; an empty JSON reads as null in CEL.
        let json = serde_json::to_vec(&cluster)
            .unwrap_or_default()
            .into_boxed_slice();
        let resources = parse_resources(&cluster).map_err(Box::new);
        let labels = cluster.metadata.labels.as_ref().map(|labels| {
            labels
                .iter()
                .map(|(k, v)| (self.intern_label(k), self.intern_label(v)))
                .collect()
        });
        let ManagedCluster {
            metadata,
            spec,
            status,
        } = cluster;
        let claims = status
            .map(|s| s.cluster_claims)
            .unwrap_or_default()
            .into_iter()
            .map(|c| (c.name.into_boxed_str(), c.value.into_boxed_str()))
            .collect();
        self.clusters.push(PendingCluster {
            name: metadata.name.map(String::into_boxed_str),
            json,
            resources,
            labels,
            taints: spec.taints.into_boxed_slice(),
            claims,
            terminating: metadata.deletion_timestamp.is_some(),
        });
    }

    pub fn add_cluster_set(&mut self, set: ManagedClusterSet) {
        self.cluster_sets.push(set);
    }

    pub fn add_binding(&mut self, binding: ManagedClusterSetBinding) {
        self.bindings.push(binding);
    }

    pub fn add_placement(&mut self, placement: Placement) {
        self.placements.push(placement);
    }

    pub fn add_decision(&mut self, decision: PlacementDecision) {
        self.decisions.push(decision);
    }

    pub fn add_score(&mut self, score: AddOnPlacementScore) {
        let start = self.score_items.len() as u32;
        for item in score.status.iter().flat_map(|s| s.scores.iter()) {
            let name = self.intern_score_name(&item.name);
            self.score_items.push((name, item.value));
        }
        let entry = ScoreEntry {
            resource: self.intern_score_name(name_of(&score.metadata)),
            has_status: score.status.is_some(),
            valid_until_ns: score
                .status
                .as_ref()
                .and_then(|s| s.valid_until.as_ref())
                .map(|t| t.0.as_nanosecond()),
            items: start..self.score_items.len() as u32,
        };
        self.scores.push(PendingScore {
            namespace: namespace_of(&score.metadata).into(),
            entry,
        });
    }

    fn intern_score_name(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.score_names.get(name) {
            return id;
        }
        let id = self.score_name_text.len() as u32;
        self.score_names.insert(name.to_string(), id);
        self.score_name_text.push(Arc::from(name));
        id
    }

    fn intern_label(&mut self, text: &str) -> u32 {
        if let Some(&id) = self.label_ids.get(text) {
            return id;
        }
        let id = self.label_text.len() as u32;
        let shared: Arc<str> = Arc::from(text);
        self.label_ids.insert(shared.clone(), id);
        self.label_text.push(shared);
        id
    }

    /// Indexes the objects. Fails on what an API server could never hold: two objects with the
    /// same identity, or a cpu/memory quantity that does not parse.
    pub fn build(self) -> Result<HubSnapshot, PlacementError> {
        let Self {
            mut clusters,
            mut cluster_sets,
            bindings,
            placements,
            decisions,
            scores,
            score_items,
            score_names,
            score_name_text,
            label_text,
            label_ids,
        } = self;
        clusters.sort_by(|a, b| cluster_name(a).cmp(cluster_name(b)));
        cluster_sets.sort_by(|a, b| name_of(&a.metadata).cmp(name_of(&b.metadata)));
        // Sorted: a repeated name is next to itself, and the first one found is the one a
        // check in name order would find.
        if let Some(pair) = clusters
            .windows(2)
            .find(|w| cluster_name(&w[0]) == cluster_name(&w[1]))
        {
            return Err(PlacementError::DuplicateObject {
                kind: "ManagedCluster",
                name: cluster_name(&pair[0]).to_string(),
            });
        }
        check_unique(
            "ManagedClusterSet",
            cluster_sets.iter().map(|c| name_of(&c.metadata).to_string()),
        )?;
        check_unique(
            "ManagedClusterSetBinding",
            bindings.iter().map(|o| qualified(&o.metadata)),
        )?;
        check_unique("Placement", placements.iter().map(|o| qualified(&o.metadata)))?;
        check_unique(
            "PlacementDecision",
            decisions.iter().map(|o| qualified(&o.metadata)),
        )?;
        check_unique_scores(&scores, &score_name_text)?;

        let count = clusters.len();
        let mut cluster_names = Vec::with_capacity(count);
        let mut cluster_json = Vec::with_capacity(count);
        let mut resources = Vec::with_capacity(count);
        let mut taints = Vec::with_capacity(count);
        let mut claims = Vec::with_capacity(count);
        let mut label_start = Vec::with_capacity(count + 1);
        let mut label_pairs = Vec::new();
        let mut has_labels = Vec::with_capacity(count);
        let mut tainted = Vec::with_capacity(count);
        let mut terminating = Vec::with_capacity(count);
        let mut by_cluster_set_label: FastMap<String, Vec<ClusterId>> = FastMap::default();
        let set_label = label_ids.get(well_known::CLUSTER_SET_LABEL).copied();
        label_start.push(0);
        for (i, cluster) in clusters.into_iter().enumerate() {
            resources.push(cluster.resources.map_err(|e| *e)?);
            has_labels.push(cluster.labels.is_some());
            for &(k, v) in cluster.labels.iter().flatten() {
                label_pairs.push((k, v));
                if Some(k) == set_label {
                    by_cluster_set_label
                        .entry(label_text[v as usize].to_string())
                        .or_default()
                        .push(ClusterId(i as u32));
                }
            }
            label_start.push(label_pairs.len() as u32);
            tainted.push(!cluster.taints.is_empty());
            terminating.push(cluster.terminating);
            taints.push(cluster.taints);
            claims.push(cluster.claims);
            cluster_json.push(cluster.json);
            cluster_names.push(cluster.name);
        }
        let cluster_id = |name: &str| {
            cluster_names
                .binary_search_by(|n| n.as_deref().unwrap_or("").cmp(name))
                .ok()
                .map(|i| ClusterId(i as u32))
        };

        // Decided cluster names that have no ManagedCluster, one slot each after the clusters.
        let mut unknown_decided: Vec<String> = Vec::new();
        let mut unknown_index: FastMap<String, u32> = FastMap::default();
        let decision_slots: Vec<Vec<u32>> = decisions
            .iter()
            .map(|pd| {
                pd.status
                    .iter()
                    .flat_map(|s| s.decisions.iter())
                    .map(|d| match cluster_id(&d.cluster_name) {
                        Some(id) => id.0,
                        None => {
                            let next = (count + unknown_decided.len()) as u32;
                            *unknown_index.entry(d.cluster_name.clone()).or_insert_with(|| {
                                unknown_decided.push(d.cluster_name.clone());
                                next
                            })
                        }
                    })
                    .collect()
            })
            .collect();
        let mut decided_counts = vec![0u32; count + unknown_decided.len()];
        for &slot in decision_slots.iter().flatten() {
            decided_counts[slot as usize] += 1;
        }
        let mut decisions_by_placement: FastMap<String, FastMap<String, Vec<u32>>> = FastMap::default();
        for (i, pd) in decisions.iter().enumerate() {
            if let Some(placement) = pd
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(well_known::PLACEMENT_LABEL))
            {
                decisions_by_placement
                    .entry(namespace_of(&pd.metadata).to_string())
                    .or_default()
                    .entry(placement.clone())
                    .or_default()
                    .push(i as u32);
            }
        }
        let mut decisions_by_name: Vec<u32> = (0..decisions.len() as u32).collect();
        decisions_by_name.sort_unstable_by(|&a, &b| {
            let (a, b) = (&decisions[a as usize].metadata, &decisions[b as usize].metadata);
            (namespace_of(a), name_of(a)).cmp(&(namespace_of(b), name_of(b)))
        });

        let mut per_cluster: Vec<(u32, u32)> = Vec::new();
        let mut score_entries = Vec::with_capacity(scores.len());
        for (i, score) in scores.into_iter().enumerate() {
            if let Some(id) = cluster_id(&score.namespace) {
                per_cluster.push((id.0, i as u32));
            }
            score_entries.push(score.entry);
        }
        per_cluster.sort_unstable();
        let mut cluster_score_start = vec![0u32; count + 1];
        for (cluster, _) in &per_cluster {
            cluster_score_start[*cluster as usize + 1] += 1;
        }
        for i in 0..count {
            cluster_score_start[i + 1] += cluster_score_start[i];
        }
        let cluster_scores = per_cluster.into_iter().map(|(_, s)| s).collect();
        Ok(HubSnapshot {
            cluster_names,
            cluster_json,
            resources,
            taints,
            claims,
            cluster_sets,
            bindings,
            placements,
            decisions,
            cluster_score_start,
            cluster_scores,
            score_entries,
            score_items,
            score_names,
            score_name_text,
            label_text,
            label_ids,
            label_start,
            label_pairs,
            has_labels,
            tainted,
            terminating,
            by_cluster_set_label,
            decision_slots,
            decisions_by_placement,
            decisions_by_name,
            max_decided_count: decided_counts.iter().copied().max().unwrap_or(0),
            decided_counts,
            expiry_judged_at: None,
        })
    }
}

impl HubSnapshot {
    /// Indexes the objects. Fails on what an API server could never hold: two objects with the
    /// same identity, or a cpu/memory quantity that does not parse.
    pub fn new(objects: HubObjects) -> Result<Self, PlacementError> {
        let HubObjects {
            clusters,
            cluster_sets,
            bindings,
            placements,
            decisions,
            scores,
        } = objects;
        let mut builder = HubSnapshotBuilder::new();
        for o in clusters {
            builder.add_cluster(o);
        }
        for o in cluster_sets {
            builder.add_cluster_set(o);
        }
        for o in bindings {
            builder.add_binding(o);
        }
        for o in placements {
            builder.add_placement(o);
        }
        for o in decisions {
            builder.add_decision(o);
        }
        for o in scores {
            builder.add_score(o);
        }
        builder.build()
    }

    /// How many ManagedClusters there are; ids are below this.
    pub fn cluster_count(&self) -> usize {
        self.cluster_names.len()
    }

    /// `metadata.name` of the cluster (`""` when it has none).
    pub fn cluster_name(&self, id: ClusterId) -> &str {
        self.cluster_names[id.index()].as_deref().unwrap_or("")
    }

    /// `metadata.name` of the cluster, `None` when it has none.
    pub(crate) fn cluster_metadata_name(&self, id: ClusterId) -> Option<&str> {
        self.cluster_names[id.index()].as_deref()
    }

    pub fn cluster_id(&self, name: &str) -> Option<ClusterId> {
        self.cluster_names
            .binary_search_by(|n| n.as_deref().unwrap_or("").cmp(name))
            .ok()
            .map(|i| ClusterId(i as u32))
    }

    pub fn cluster_ids(&self) -> impl ExactSizeIterator<Item = ClusterId> + '_ {
        (0..self.cluster_names.len() as u32).map(ClusterId)
    }

    pub fn resources(&self, id: ClusterId) -> &ClusterResources {
        &self.resources[id.index()]
    }

    /// The value of label `key` on the cluster.
    pub fn cluster_label(&self, id: ClusterId, key: &str) -> Option<&str> {
        self.label_value(id, key).map(|v| &**v)
    }

    /// `spec.taints` of the cluster.
    pub fn cluster_taints(&self, id: ClusterId) -> &[Taint] {
        &self.taints[id.index()]
    }

    /// The value of cluster claim `name`; the last one wins, as when the claims are collected
    /// into a map.
    pub fn claim_value(&self, id: ClusterId, name: &str) -> Option<&str> {
        self.claims[id.index()]
            .iter()
            .rev()
            .find(|(n, _)| **n == *name)
            .map(|(_, v)| &**v)
    }

    /// The cluster as JSON, as `serde_json` writes the ManagedCluster.
    pub(crate) fn cluster_json(&self, id: ClusterId) -> &[u8] {
        &self.cluster_json[id.index()]
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

    /// The PlacementDecisions of one placement, as upstream selects them: in the placement's
    /// namespace and labelled with its name.
    pub fn decisions_of<'s>(
        &'s self,
        namespace: &'s str,
        placement: &'s str,
    ) -> impl Iterator<Item = &'s PlacementDecision> + 's {
        self.decision_indices_of(namespace, placement)
            .iter()
            .map(|&i| &self.decisions[i as usize])
    }

    /// The PlacementDecision `namespace/name`, whichever placement it belongs to.
    pub fn decision_named(&self, namespace: &str, name: &str) -> Option<&PlacementDecision> {
        self.decisions_by_name
            .binary_search_by(|&i| {
                let meta = &self.decisions[i as usize].metadata;
                (namespace_of(meta), name_of(meta)).cmp(&(namespace, name))
            })
            .ok()
            .map(|at| &self.decisions[self.decisions_by_name[at] as usize])
    }

    /// Indices into [`HubSnapshot::decisions`] of one placement's PlacementDecisions, in order.
    pub(crate) fn decision_indices_of(&self, namespace: &str, placement: &str) -> &[u32] {
        self.decisions_by_placement
            .get(namespace)
            .and_then(|by_name| by_name.get(placement))
            .map_or(&[], Vec::as_slice)
    }

    /// For each slot, how many PlacementDecisions (of every placement) name it.
    pub(crate) fn decided_counts(&self) -> &[u32] {
        &self.decided_counts
    }

    /// The largest of [`HubSnapshot::decided_counts`] (0 without decisions).
    pub(crate) fn max_decided_count(&self) -> u32 {
        self.max_decided_count
    }

    /// Clusters whose cluster-set label is `set`, in name order.
    pub fn clusters_labelled_with_set(&self, set: &str) -> &[ClusterId] {
        self.by_cluster_set_label.get(set).map_or(&[], Vec::as_slice)
    }

    /// The decided clusters of `decisions()[index]` as slots: a slot below
    /// the number of clusters is a [`ClusterId`]; the others stand
    /// for names without a ManagedCluster (each distinct name has its own slot).
    pub(crate) fn decision_slots(&self, index: usize) -> &[u32] {
        &self.decision_slots[index]
    }

    fn scores_in(&self, id: ClusterId) -> &[u32] {
        let (start, end) = (
            self.cluster_score_start[id.index()],
            self.cluster_score_start[id.index() + 1],
        );
        &self.cluster_scores[start as usize..end as usize]
    }

    /// The interned id of a resource or score name, if any AddOnPlacementScore uses it.
    pub(crate) fn score_name_id(&self, name: &str) -> Option<u32> {
        self.score_names.get(name).copied()
    }

    /// This snapshot with every score's expiry judged at `at` (or at the instant asked, if
    /// earlier): for a cache that drops the snapshot when a score in it expires without renewal
    /// (the hub's expiry wheel) and reuses it otherwise. A score in force at `at` then stays in
    /// force, as its renewals since keep it in the API server; one expired at `at` stays expired,
    /// since bringing it back is a change of its object.
    pub fn judging_expiry_at(mut self, at: jiff::Timestamp) -> Self {
        self.expiry_judged_at = Some(at.as_nanosecond());
        self
    }

    /// Whether `entry` has expired at `now_ns`: strictly past `validUntil`, as OCM reads it.
    pub(crate) fn score_expired(&self, entry: &ScoreEntry, now_ns: i128) -> bool {
        let at = self.expiry_judged_at.map_or(now_ns, |at| at.min(now_ns));
        entry.valid_until_ns.is_some_and(|until| at > until)
    }

    /// Whether AddOnPlacementScore `<cluster>/<resource>` has expired at `now` as the scheduler
    /// reads this snapshot; `None` without that cluster or score.
    pub fn score_expired_at(&self, cluster: &str, resource: &str, now: jiff::Timestamp) -> Option<bool> {
        let entry = self.score_entry_named(self.cluster_id(cluster)?, resource)?;
        Some(self.score_expired(entry, now.as_nanosecond()))
    }

    /// The compact entry of AddOnPlacementScore `<cluster>/<resource>` (resource interned).
    pub(crate) fn score_entry(&self, id: ClusterId, resource: u32) -> Option<&ScoreEntry> {
        self.scores_in(id)
            .iter()
            .map(|&i| &self.score_entries[i as usize])
            .find(|e| e.resource == resource)
    }

    /// The value of the *last* item named `score_name` (interned) in an entry.
    pub(crate) fn last_score(&self, entry: &ScoreEntry, score_name: Option<u32>) -> Option<i32> {
        let name = score_name?;
        self.score_items[entry.items.start as usize..entry.items.end as usize]
            .iter()
            .rev()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }

    /// The items of an entry as interned `(score name, value)`, in order.
    pub(crate) fn score_items_of(&self, entry: &ScoreEntry) -> &[(u32, i32)] {
        &self.score_items[entry.items.start as usize..entry.items.end as usize]
    }

    /// The compact entry of AddOnPlacementScore `<cluster>/<resource>`, found by comparing the
    /// interned names (no hashing: a cluster has few scores).
    pub(crate) fn score_entry_named(&self, id: ClusterId, resource: &str) -> Option<&ScoreEntry> {
        self.scores_in(id)
            .iter()
            .map(|&i| &self.score_entries[i as usize])
            .find(|e| {
                self.score_name_text
                    .get(e.resource as usize)
                    .is_some_and(|n| **n == *resource)
            })
    }

    /// Interned resource and score names by id (see [`HubSnapshot::score_name_id`]).
    pub(crate) fn score_name_text(&self) -> &[Arc<str>] {
        &self.score_name_text
    }

    /// Whether cluster `id` has `metadata.labels` (possibly empty).
    pub(crate) fn has_labels(&self, id: ClusterId) -> bool {
        self.has_labels[id.index()]
    }

    /// The value of label `key` on cluster `id`, as its interned text. The cluster's few keys are
    /// compared as interned text (mostly by length alone), which is cheaper than hashing `key`.
    pub(crate) fn label_value(&self, id: ClusterId, key: &str) -> Option<&Arc<str>> {
        let (start, end) = (self.label_start[id.index()], self.label_start[id.index() + 1]);
        self.label_pairs[start as usize..end as usize]
            .iter()
            .find(|(k, _)| self.label_text.get(*k as usize).is_some_and(|t| **t == *key))
            .and_then(|(_, v)| self.label_text.get(*v as usize))
    }

    /// The interned id of a label key or value, if some cluster uses that text.
    pub(crate) fn label_id(&self, text: &str) -> Option<u32> {
        self.label_ids.get(text).copied()
    }

    /// How many label texts are interned (ids are below this).
    pub(crate) fn label_text_count(&self) -> usize {
        self.label_text.len()
    }

    /// The value id of label `key` (interned) on cluster `id`: [`HubSnapshot::label_value`]
    /// compared by id.
    pub(crate) fn label_value_id(&self, id: ClusterId, key: u32) -> Option<u32> {
        let (start, end) = (self.label_start[id.index()], self.label_start[id.index() + 1]);
        self.label_pairs[start as usize..end as usize]
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, v)| *v)
    }

    /// The text of an interned label key or value.
    pub(crate) fn label_text(&self, id: u32) -> Option<&Arc<str>> {
        self.label_text.get(id as usize)
    }

    pub fn is_tainted(&self, id: ClusterId) -> bool {
        self.tainted[id.index()]
    }

    pub fn is_terminating(&self, id: ClusterId) -> bool {
        self.terminating[id.index()]
    }
}

fn qualified(meta: &ocm_score_api::ObjectMeta) -> String {
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

/// [`check_unique`] for the scores by `namespace/name`, without building the strings: the first
/// repeated identity in input order.
fn check_unique_scores(scores: &[PendingScore], names: &[Arc<str>]) -> Result<(), PlacementError> {
    let name = |i: usize| names.get(scores[i].entry.resource as usize).map_or("", |n| &**n);
    let identity = |i: usize| {
        let namespace = scores[i].namespace.bytes();
        namespace.chain(std::iter::once(b'/')).chain(name(i).bytes())
    };
    let mut order: Vec<usize> = (0..scores.len()).collect();
    order.sort_by(|&a, &b| identity(a).cmp(identity(b)).then(a.cmp(&b)));
    // In each run of equal identities the second is the first repeat in input order.
    let first_repeat = order
        .windows(2)
        .filter(|w| identity(w[0]).eq(identity(w[1])))
        .map(|w| w[1])
        .min();
    match first_repeat {
        Some(i) => Err(PlacementError::DuplicateObject {
            kind: "AddOnPlacementScore",
            name: format!("{}/{}", scores[i].namespace, name(i)),
        }),
        None => Ok(()),
    }
}

fn parse_resources(cluster: &ManagedCluster) -> Result<ClusterResources, PlacementError> {
    let Some(status) = &cluster.status else {
        return Ok(ClusterResources::default());
    };
    let parse = |section: &str, map: &BTreeMap<String, ocm_score_api::Quantity>, key: &str| {
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

#[cfg(test)]
#[path = "snapshot_tests.rs"]
mod tests;
