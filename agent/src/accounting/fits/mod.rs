//! "Fits N replicas of shape S": for each [`WorkloadShape`], how many more replicas the cluster
//! can take right now (issue 13; docs/fits-and-reservations.md). Pure and incremental, fed the
//! same Node and Pod events as the [`Ledger`](super::Ledger).
//!
//! # Semantics
//!
//! * A node is **eligible** for a shape when it is Ready and not cordoned, every NoSchedule and
//!   NoExecute taint on it is tolerated by the shape (Kubernetes toleration rules), its labels
//!   match the shape's `nodeSelector`, and every resource the shape requests (amount > 0, after
//!   adding `podOverhead`) is present in its allocatable.
//! * **Free** on a node = allocatable − the effective requests of the non-terminal pods bound to it
//!   (the rule of [`effective_requests`], shared with the cluster scores: init containers,
//!   sidecars and overhead included). **Free pod slots** = allocatable `pods` − pods bound to it.
//! * Per eligible node, `min(floor(free_r / req_r) over the requested r, free pod slots)`; a shape
//!   with no requests is bounded by pod slots only. `fits` is the sum over the nodes. Identical
//!   replicas need no bin packing: the per-node floor sum is the optimum.
//! * **Pending pods** (non-terminal, bound to no node, scheduling-gated or not) are deducted first
//!   (with [`FitsOptions::deduct_pending`], the default): per shape, in `namespace/name` order, each
//!   goes onto the first of the shape's eligible nodes, in node-name order, that has a free pod slot
//!   and room for every counted resource it requests (the resources of the shapes; others are not
//!   tracked); one that fits nowhere is not deducted. It is a deterministic cluster-level
//!   estimate, not kube-scheduler's choice, and not monotone: a new pod that crowds a pending one
//!   out of its only node can raise a count (see the tests).
//! * **Placement constraints** (issue 47, [`constraints`]): required node affinity joins
//!   eligibility; host ports cap a node at one replica (none where a bound pod's port conflicts);
//!   anti-affinity and `DoNotSchedule` topology spread are counted over topology domains at each
//!   read, from per-node sums of the pods each shape selector matches
//!   (docs/fits-and-reservations.md, "Placement constraints").
//! * Out of scope (documented next to the score): pod affinity, existing pods' affinity towards the
//!   replicas, namespace selectors (reported as unsupported), volume zones, DRA, ResourceQuota, and
//!   the pending pods' own selectors and tolerations.
//!
//! # Cost
//!
//! A bound pod's event updates its node's contribution to every shape and the running sums:
//! O(shapes × requested resources), never a rescan. The first-fit of pending pods depends on the
//! whole cluster, so an event only marks it stale and [`FitsIndex::fits`] redoes it before
//! answering when pending pods exist, touching only the nodes whose deductions moved. Re-lists
//! defer all of it to one recount when they finish, as the ledger does.
//!
//! # Wiring (what the agent's run loop needs)
//!
//! 1. Shapes: [`compile_shapes`] over the WorkloadShapes (hub watch or `--shapes` file) gives a
//!    [`ShapeSet`] and the [`ShapeProblem`]s to log and report as a condition (`problem.shape`
//!    names the skipped shape; [`TOO_MANY_SHAPES_REASON`] when some were left out).
//! 2. [`FitsIndex::new`] with the set and [`FitsOptions`] (from `--deduct-pending`); feed it every
//!    Node and Pod watch event exactly where the ledger is fed: `apply_node`, `delete_node`,
//!    `apply_pod`, `delete_pod`, and `begin_*_relist` / `finish_*_relist` around re-lists. Its
//!    errors are per object, like the ledger's ([`FitsIndex::invalid_objects`]).
//! 3. On a change of shapes, [`FitsIndex::set_shapes`]; when it answers [`NeedsRelist`] (the new
//!    shapes request a resource the index did not track), build a new index and re-list Nodes
//!    and Pods into it.
//! 4. When publishing: [`FitsIndex::score_items`] gives the `fits.<shape>` items (values already
//!    encoded, within −100..100) to add to `resource-usage-score` with its `validUntil`;
//!    [`FitsIndex::fits`] gives the raw counts for `ocm_score_agent_fits{shape}`.

use super::invalid::{InvalidObjects, ObjectError};
use super::keys::{FastMap, join_key, pod_key};
use super::objects::{SlimNode, SlimPod, SlimTaint};
use super::pod::effective_requests;
use super::quantity::{AccountingUnit, parse_quantity};
use super::relist::Relist;
use super::resources::MAX_RESOURCES;
use super::slots::NodeSlots;
use ocm_score_api::AddOnPlacementScoreItem;
use ocm_score_api::crd::workload_shape::{FITS_EXACT_BELOW, encode_fits, fits_score_name};
use std::collections::{BTreeMap, BTreeSet};

mod constraints;
mod shapes;

use constraints::{NodeView, PortKey};
use shapes::tolerates;
pub use shapes::{ShapeProblem, ShapeSet, compile_shapes};

pub use ocm_score_api::crd::workload_shape::TOO_MANY_SHAPES_REASON;

/// Nodes per block of the first-fit search: a block whose best node cannot take a pod is skipped
/// whole.
const BLOCK: usize = 64;

/// How the counting treats pending pods.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FitsOptions {
    /// Deduct pending, unbound pods first-fit before counting (default on).
    pub deduct_pending: bool,
}

impl Default for FitsOptions {
    fn default() -> Self {
        Self { deduct_pending: true }
    }
}

// ---------------------------------------------------------------------------------------------
// The index

/// What of a Node the counting needs.
#[derive(Debug, PartialEq)]
struct NodeState {
    /// Ready and not cordoned.
    schedulable: bool,
    labels: Vec<(Box<str>, Box<str>)>,
    /// Only the NoSchedule / NoExecute ones.
    taints: Vec<SlimTaint>,
    allocatable: Box<[i64]>,
    /// Bit r: resource r is listed in allocatable.
    present: u32,
    pod_slots: i64,
}

/// What the index keeps per node and shape.
#[derive(Debug)]
struct ShapeCounts {
    /// Bit s: the node is eligible for shape s.
    eligible: u64,
    /// Per shape, the replicas of it this node takes (after pending deductions).
    contribution: Box<[u64]>,
    /// Per pod selector of the set, the pods bound here it matches.
    matched: Box<[u32]>,
    /// The host ports bound here (when some shape binds host ports), one entry per pod's port.
    ports: Vec<PortKey>,
}

/// What pending pods take from one node, for one shape.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Deduction {
    requests: Box<[i128]>,
    pods: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Bound(u32),
    Pending,
}

#[derive(Debug)]
struct PodEntry {
    place: Place,
    requests: Box<[i64]>,
    epoch: u32,
    /// Bit i: the set's pod selector i matches the pod.
    matches: u64,
    /// Its host ports (kept only when some shape binds host ports).
    ports: Box<[PortKey]>,
}

/// The replicas of one shape that fit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeFits {
    pub shape: String,
    pub scale: i32,
    /// The exact replica count.
    pub replicas: u64,
    /// The published score value, `encode_fits(replicas, scale)`.
    pub value: i32,
}

/// The new shapes request a resource this index does not track: build a new index and re-list
/// Nodes and Pods into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "the WorkloadShapes request resources the fits index does not track; it must be rebuilt from a re-list"
)]
pub struct NeedsRelist;

/// Incremental fits counts of a set of shapes.
#[derive(Debug)]
pub struct FitsIndex {
    set: ShapeSet,
    options: FitsOptions,
    nodes: NodeSlots<NodeState, ShapeCounts>,
    /// Known Node objects in name order (the first-fit order).
    by_name: BTreeMap<Box<str>, u32>,
    pods: FastMap<Box<str>, PodEntry>,
    /// Pending pods' keys in first-fit order.
    pending: BTreeSet<Box<str>>,
    /// Per shape: node slot → what pending pods take there.
    deductions: Vec<FastMap<u32, Deduction>>,
    pending_stale: bool,
    /// The counts of shapes whose constraints span domains (anti-affinity, spread) are redone at
    /// the next read.
    domains_stale: bool,
    /// Per shape spanning domains, its count as of the last read.
    spanning: Box<[u64]>,
    /// Bumped whenever a count moved (see [`FitsIndex::revision`]).
    changes: u64,
    /// Per shape, the sum of the nodes' contributions (u128: a node's can be as large as an i64
    /// pod-slot count).
    totals: Box<[u128]>,
    invalid: InvalidObjects,
    pod_relist: Relist,
    node_relist: Relist,
    /// Whether pods and nodes are kept. An index built with no shapes counts nothing, so it keeps no
    /// pods (at 150,000 pods their keys and requests are ~25 MiB) and no nodes (labels, taints and
    /// amounts: 3.4 MiB at 5,000 nodes of four labels each, by heaptrack); it still reads each
    /// object to report the unreadable ones. Shapes given to it later need a re-list
    /// ([`NeedsRelist`]).
    keeps_pods: bool,
}

impl FitsIndex {
    pub fn new(set: ShapeSet, options: FitsOptions) -> Self {
        let shapes = set.shapes.len();
        Self {
            nodes: NodeSlots::new(),
            by_name: BTreeMap::new(),
            pods: FastMap::default(),
            pending: BTreeSet::new(),
            deductions: (0..shapes).map(|_| FastMap::default()).collect(),
            pending_stale: false,
            domains_stale: false,
            spanning: vec![0; shapes].into_boxed_slice(),
            changes: 0,
            totals: vec![0; shapes].into_boxed_slice(),
            invalid: InvalidObjects::default(),
            pod_relist: Relist::default(),
            node_relist: Relist::default(),
            keeps_pods: !set.shapes.is_empty(),
            options,
            set,
        }
    }

    pub fn shapes(&self) -> &ShapeSet {
        &self.set
    }

    pub fn options(&self) -> FitsOptions {
        self.options
    }

    /// Changes the deduction of pending pods.
    pub fn set_options(&mut self, options: FitsOptions) {
        if options != self.options {
            self.options = options;
            self.pending_stale = true;
        }
    }

    /// Room for `pods` more pods without rehashing.
    pub fn reserve_pods(&mut self, pods: usize) {
        if self.keeps_pods {
            self.pods.reserve(pods);
        }
    }

    /// Counts `set` instead of the current shapes, without re-reading any object, when it needs no
    /// resource the index does not track already (adding, removing or editing shapes over the same
    /// resources). Otherwise (or when the index was built with no shapes, so kept no pods) nothing
    /// changes and the caller must rebuild the index. `Ok(false)` when
    /// `set` is the set already counted (a re-list of unchanged shapes), so nothing moved.
    pub fn set_shapes(&mut self, set: ShapeSet) -> Result<bool, NeedsRelist> {
        // Pods were matched against the selectors (and their ports kept) as they arrived.
        if set.selectors != self.set.selectors || (set.tracks_ports && !self.set.tracks_ports) {
            return Err(NeedsRelist);
        }
        if set.resources != self.set.resources {
            let tracked = |r: &String| self.set.resources.index_of(r).is_some();
            if !set.resources.names().iter().all(tracked) {
                return Err(NeedsRelist);
            }
            // Tracked names at other indices: the needs are re-pointed to this index's positions.
            let mut set = set;
            let theirs = std::mem::replace(&mut set.resources, self.set.resources.clone());
            for shape in &mut set.shapes {
                for need in &mut shape.needs {
                    need.0 = self
                        .set
                        .resources
                        .index_of(theirs.name(need.0))
                        .ok_or(NeedsRelist)?;
                }
            }
            return self.set_shapes(set);
        }
        if set == self.set {
            return Ok(false);
        }
        if !self.keeps_pods {
            // Counting shapes needs the pods this index did not keep.
            return Err(NeedsRelist);
        }
        let shapes = set.shapes.len();
        self.set = set;
        self.deductions = (0..shapes).map(|_| FastMap::default()).collect();
        self.totals = vec![0; shapes].into_boxed_slice();
        self.spanning = vec![0; shapes].into_boxed_slice();
        for slot in 0..self.nodes.len() {
            self.nodes[slot].extra.contribution = vec![0; shapes].into_boxed_slice();
            self.nodes[slot].extra.eligible = self.eligibility(slot);
        }
        self.recompute();
        Ok(true)
    }

    // -- pods --------------------------------------------------------------------------------

    /// Records a pod as it now is. On error the pod is no longer counted and is reported by
    /// [`FitsIndex::invalid_objects`] until it is fixed or deleted.
    pub fn apply_pod(&mut self, pod: &SlimPod) -> Result<(), ObjectError> {
        let key = pod_key(pod);
        if pod.is_terminal() {
            self.invalid.forget_pod(&key);
            self.remove_pod(&key);
            return Ok(());
        }
        let epoch = self.pod_relist.epoch();
        let read = effective_requests(&pod.spec, &self.set.resources);
        let requests = self
            .invalid
            .read_pod(&key, read, epoch)
            .inspect_err(|_| self.remove_pod(&key))?;
        if !self.keeps_pods {
            return Ok(());
        }
        let matches = self
            .set
            .selectors
            .iter()
            .enumerate()
            .filter(|(_, selector)| selector.matches(pod))
            .fold(0u64, |bits, (i, _)| bits | 1 << i);
        let ports = if self.set.tracks_ports {
            PortKey::of_pod(pod)
        } else {
            Box::default()
        };
        if let Some(entry) = self.pods.get_mut(key.as_str()) {
            entry.epoch = epoch;
            let same_place = match (entry.place, pod.node_name()) {
                (Place::Bound(slot), Some(node)) => *self.nodes[slot as usize].name == *node,
                (Place::Pending, None) => true,
                _ => false,
            };
            if same_place && entry.requests == requests && entry.matches == matches && entry.ports == ports {
                return Ok(());
            }
        }
        // Taken off where it was first, so a node slot it alone kept alive is not reused under it.
        self.remove_pod(&key);
        let place = match pod.node_name() {
            Some(node) => Place::Bound(self.slot_for(node)),
            None => Place::Pending,
        };
        self.add_pod(
            key.into_boxed_str(),
            PodEntry {
                place,
                requests,
                epoch,
                matches,
                ports,
            },
        );
        Ok(())
    }

    /// Forgets a pod.
    pub fn delete_pod(&mut self, namespace: &str, name: &str) {
        let key = join_key(namespace, name);
        self.invalid.forget_pod(&key);
        self.remove_pod(&key);
    }

    fn add_pod(&mut self, key: Box<str>, entry: PodEntry) {
        match entry.place {
            Place::Bound(slot) => {
                let node = &mut self.nodes[slot as usize];
                node.pods += 1;
                for (sum, amount) in node.requested.iter_mut().zip(entry.requests.iter()) {
                    *sum += i128::from(*amount);
                }
                count_in(&mut node.extra, &entry, true);
                self.node_changed(slot);
            }
            Place::Pending => {
                self.pending.insert(key.clone());
                self.pending_stale = true;
            }
        }
        self.pods.insert(key, entry);
    }

    fn remove_pod(&mut self, key: &str) {
        let Some(entry) = self.pods.remove(key) else {
            return;
        };
        match entry.place {
            Place::Bound(slot) => {
                let node = &mut self.nodes[slot as usize];
                node.pods -= 1;
                for (sum, amount) in node.requested.iter_mut().zip(entry.requests.iter()) {
                    *sum -= i128::from(*amount);
                }
                count_in(&mut node.extra, &entry, false);
                self.node_changed(slot);
                self.nodes.release_if_unused(slot);
            }
            Place::Pending => {
                self.pending.remove(key);
                self.pending_stale = true;
            }
        }
    }

    // -- nodes -------------------------------------------------------------------------------

    /// Records a node as it now is. A node whose allocatable cannot be read counts as eligible for
    /// no shape and is reported until fixed or deleted.
    pub fn apply_node(&mut self, node: &SlimNode) -> Result<(), ObjectError> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let epoch = self.node_relist.epoch();
        let resources = &self.set.resources;
        let mut allocatable = resources.zeros();
        let mut present = 0u32;
        let mut pod_slots = 0i64;
        let read = self.invalid.read_node(node, epoch, |resource, quantity| {
            if resource == "pods" {
                parse_quantity(quantity, AccountingUnit::Whole).map(|v| pod_slots = v)
            } else if let Some(r) = resources.index_of(resource) {
                present |= 1 << r;
                parse_quantity(quantity, resources.unit(r)).map(|v| allocatable[r] = v)
            } else {
                Ok(())
            }
        });
        if !self.keeps_pods {
            return read;
        }
        let state = match &read {
            Ok(()) => NodeState {
                schedulable: node.is_eligible(),
                labels: node
                    .metadata
                    .labels
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.as_str().into(), v.as_str().into()))
                    .collect(),
                taints: node.spec.taints.iter().filter(|t| t.repels()).cloned().collect(),
                allocatable,
                present,
                pod_slots,
            },
            Err(_) => NodeState {
                schedulable: false,
                labels: Vec::new(),
                taints: Vec::new(),
                allocatable: resources.zeros(),
                present: 0,
                pod_slots: 0,
            },
        };
        let slot = self.slot_for(name);
        self.nodes[slot as usize].epoch = epoch;
        if self.nodes[slot as usize].state.as_ref() != Some(&state) {
            if self.nodes[slot as usize].state.is_none() {
                self.by_name.insert(name.into(), slot);
            }
            self.nodes[slot as usize].state = Some(state);
            self.nodes[slot as usize].extra.eligible = self.eligibility(slot as usize);
            self.node_changed(slot);
            self.pending_stale |= !self.pending.is_empty();
        }
        read
    }

    /// Forgets a node (its pods stay, attributed to the name, until they go too).
    pub fn delete_node(&mut self, name: &str) {
        self.invalid.forget_node(name);
        let Some(slot) = self.nodes.slot_of(name) else {
            return;
        };
        if self.nodes[slot as usize].state.take().is_none() {
            return;
        }
        self.by_name.remove(name);
        self.nodes[slot as usize].extra.eligible = 0;
        self.node_changed(slot);
        self.pending_stale |= !self.pending.is_empty();
        self.nodes.release_if_unused(slot);
    }

    /// Bit s set: the node in `slot` is eligible for shape s.
    fn eligibility(&self, slot: usize) -> u64 {
        let Some(state) = self.nodes[slot].state.as_ref().filter(|s| s.schedulable) else {
            return 0;
        };
        let mut bits = 0u64;
        for (s, shape) in self.set.shapes.iter().enumerate() {
            let resources_present = shape.needs.iter().all(|(r, _)| state.present & (1 << r) != 0);
            let selected = shape
                .node_selector
                .iter()
                .all(|(k, v)| state.labels.iter().any(|(lk, lv)| **lk == **k && **lv == **v));
            let tolerated = state
                .taints
                .iter()
                .all(|taint| shape.tolerations.iter().any(|t| tolerates(t, taint)));
            let affinity = shape
                .constraints
                .affinity_holds(&self.nodes[slot].name, &state.labels);
            if resources_present && selected && tolerated && affinity {
                bits |= 1 << s;
            }
        }
        bits
    }

    // -- re-lists ----------------------------------------------------------------------------

    /// A full re-list of pods starts: pods not applied again before
    /// [`FitsIndex::finish_pod_relist`] are dropped then; counts are recomputed once it ends.
    pub fn begin_pod_relist(&mut self) {
        self.pod_relist.begin();
    }

    pub fn finish_pod_relist(&mut self) {
        for key in self.pod_relist.unseen(&self.pods, |p| p.epoch) {
            self.remove_pod(&key);
        }
        self.invalid.keep_pods_seen_in(self.pod_relist.finish());
        if !self.in_bulk() {
            self.recompute();
        }
    }

    /// A full re-list of nodes starts; see [`FitsIndex::begin_pod_relist`].
    pub fn begin_node_relist(&mut self) {
        self.node_relist.begin();
    }

    pub fn finish_node_relist(&mut self) {
        for name in self.nodes.unseen(self.node_relist.epoch()) {
            self.delete_node(&name);
        }
        self.invalid.keep_nodes_seen_in(self.node_relist.finish());
        if !self.in_bulk() {
            self.recompute();
        }
    }

    fn in_bulk(&self) -> bool {
        self.pod_relist.running() || self.node_relist.running()
    }

    /// Recomputes everything from the cached pods and nodes: every node's requested sum and pod
    /// count, its contributions and the pending deductions.
    pub fn recompute(&mut self) {
        let before = self.totals.clone();
        for node in self.nodes.iter_mut() {
            node.requested.fill(0);
            node.pods = 0;
            node.extra.contribution.fill(0);
            node.extra.matched.fill(0);
            node.extra.ports.clear();
        }
        for pod in self.pods.values() {
            if let Place::Bound(slot) = pod.place {
                let node = &mut self.nodes[slot as usize];
                node.pods += 1;
                for (sum, amount) in node.requested.iter_mut().zip(pod.requests.iter()) {
                    *sum += i128::from(*amount);
                }
                count_in(&mut node.extra, pod, true);
            }
        }
        for deductions in &mut self.deductions {
            deductions.clear();
        }
        self.totals.fill(0);
        for slot in 0..self.nodes.len() {
            for s in 0..self.set.shapes.len() {
                let c = self.contribution(slot, s);
                self.nodes[slot].extra.contribution[s] = c;
                self.totals[s] += u128::from(c);
            }
        }
        self.pending_stale = true;
        self.settle_pending();
        self.domains_stale = true;
        self.settle_domains();
        if self.totals != before {
            self.changes += 1;
        }
    }

    /// Differs from an earlier answer when a count may have moved in between: a node's contribution
    /// changed, or pending pods changed and their deduction has not been redone yet. The run loop
    /// compares it around each watch event to know whether the event is worth a recomputation.
    pub fn revision(&self) -> u64 {
        self.changes.wrapping_mul(2) | u64::from(self.pending_stale || self.domains_stale)
    }

    // -- counting ----------------------------------------------------------------------------

    /// The replicas of `shape` node `slot` takes now.
    fn contribution(&self, slot: usize, s: usize) -> u64 {
        let node = &self.nodes[slot];
        if node.extra.eligible & (1 << s) == 0 {
            return 0;
        }
        let Some(state) = node.state.as_ref() else {
            return 0;
        };
        let deduction = self.deductions[s].get(&(slot as u32));
        let deducted_pods = deduction.map_or(0, |d| i128::from(d.pods));
        let slots = i128::from(state.pod_slots) - i128::from(node.pods) - deducted_pods;
        let mut fits = slots.max(0);
        for &(r, amount) in &self.set.shapes[s].needs {
            let mut free = i128::from(state.allocatable[r]) - node.requested[r];
            if let Some(d) = deduction {
                free -= d.requests[r];
            }
            fits = fits.min(free.max(0) / i128::from(amount));
        }
        let ports = &self.set.shapes[s].constraints.host_ports;
        if !ports.is_empty() {
            // A second replica would bind the same ports.
            let taken = ports
                .iter()
                .any(|p| node.extra.ports.iter().any(|q| p.conflicts(q)));
            fits = if taken { 0 } else { fits.min(1) };
        }
        u64::try_from(fits).unwrap_or(u64::MAX)
    }

    /// Refreshes a node's contribution to every shape (skipped during a re-list).
    fn node_changed(&mut self, slot: u32) {
        if self.in_bulk() {
            return;
        }
        let slot = slot as usize;
        for s in 0..self.set.shapes.len() {
            self.refresh(slot, s);
        }
        if !self.pending.is_empty() {
            self.pending_stale = true;
        }
        self.domains_stale |= self.set.shapes.iter().any(|s| s.constraints.spans_domains());
    }

    fn refresh(&mut self, slot: usize, s: usize) {
        let new = self.contribution(slot, s);
        let old = std::mem::replace(&mut self.nodes[slot].extra.contribution[s], new);
        if old != new {
            self.changes += 1;
            self.totals[s] = self.totals[s] - u128::from(old) + u128::from(new);
        }
    }

    /// Redoes the first-fit of pending pods if anything changed since; refreshes only the nodes
    /// whose deductions moved.
    fn settle_pending(&mut self) {
        if !self.pending_stale || self.in_bulk() {
            return;
        }
        self.pending_stale = false;
        for s in 0..self.set.shapes.len() {
            let placed = if self.options.deduct_pending && !self.pending.is_empty() {
                self.first_fit(s)
            } else {
                FastMap::default()
            };
            let old = std::mem::replace(&mut self.deductions[s], placed);
            let moved: Vec<u32> = old
                .iter()
                .filter(|(slot, d)| self.deductions[s].get(slot) != Some(d))
                .map(|(slot, _)| *slot)
                .chain(
                    self.deductions[s]
                        .iter()
                        .filter(|(slot, d)| old.get(slot) != Some(d))
                        .map(|(slot, _)| *slot),
                )
                .collect();
            for slot in moved {
                self.refresh(slot as usize, s);
            }
        }
    }

    /// Places the pending pods, in key order, on the first eligible node (by name) with room.
    fn first_fit(&self, s: usize) -> FastMap<u32, Deduction> {
        let n = self.set.resources.len();
        let bit = 1u64 << s;
        let order: Vec<u32> = self
            .by_name
            .values()
            .copied()
            .filter(|&slot| self.nodes[slot as usize].extra.eligible & bit != 0)
            .collect();
        // Room left per node in `order`: free pod slots, then free amounts.
        let width = n + 1;
        let mut room: Vec<i128> = Vec::with_capacity(order.len() * width);
        for &slot in &order {
            let node = &self.nodes[slot as usize];
            let Some(state) = node.state.as_ref() else {
                room.extend(std::iter::repeat_n(0, width));
                continue;
            };
            room.push(i128::from(state.pod_slots) - i128::from(node.pods));
            room.extend((0..n).map(|r| i128::from(state.allocatable[r]) - node.requested[r]));
        }
        // Per block of BLOCK nodes, the most room of any of its nodes, per column.
        let blocks = order.len().div_ceil(BLOCK);
        let mut best = vec![i128::MIN; blocks * width];
        for b in 0..blocks {
            block_best(
                &room,
                b,
                width,
                order.len(),
                &mut best[b * width..(b + 1) * width],
            );
        }
        let mut placed: FastMap<u32, Deduction> = FastMap::default();
        let mut need = [0i128; MAX_RESOURCES + 1];
        for key in &self.pending {
            let Some(pod) = self.pods.get(key) else {
                continue;
            };
            need[0] = 1;
            for r in 0..n {
                need[r + 1] = i128::from(pod.requests[r]);
            }
            let fits = |have: &[i128]| (0..width).all(|c| need[c] <= 0 || have[c] >= need[c]);
            // A block whose best node per column cannot take the pod has no node that can.
            let found = (0..blocks)
                .filter(|&b| fits(&best[b * width..(b + 1) * width]))
                .find_map(|b| {
                    (b * BLOCK..((b + 1) * BLOCK).min(order.len()))
                        .find(|&i| fits(&room[i * width..(i + 1) * width]))
                });
            if let Some(i) = found {
                take(&mut room, &mut best, &mut placed, &order, i, &need[..width]);
            }
        }
        placed
    }

    /// Redoes the counts of the shapes whose constraints span topology domains, over every node
    /// in name order (the order matters only where docs/fits-and-reservations.md says).
    fn settle_domains(&mut self) {
        if !self.domains_stale || self.in_bulk() {
            return;
        }
        self.domains_stale = false;
        for (s, shape) in self.set.shapes.iter().enumerate() {
            if !shape.constraints.spans_domains() {
                continue;
            }
            let views: Vec<NodeView> = self
                .by_name
                .iter()
                .filter_map(|(name, &slot)| {
                    let node = &self.nodes[slot as usize];
                    let state = node.state.as_ref()?;
                    Some(NodeView {
                        name,
                        labels: &state.labels,
                        taints: &state.taints,
                        capacity: node.extra.contribution[s],
                        matched: &node.extra.matched,
                    })
                })
                .collect();
            let placement = |node: &NodeView| {
                shape
                    .node_selector
                    .iter()
                    .all(|(k, v)| node.labels.iter().any(|(lk, lv)| **lk == **k && **lv == **v))
                    && shape.constraints.affinity_holds(node.name, node.labels)
            };
            let tolerated = |node: &NodeView| {
                node.taints
                    .iter()
                    .all(|taint| shape.tolerations.iter().any(|t| tolerates(t, taint)))
            };
            let limit = FITS_EXACT_BELOW.saturating_mul(u64::try_from(shape.scale.max(1)).unwrap_or(1));
            let count = constraints::count(&shape.constraints, &views, &placement, &tolerated, limit);
            if std::mem::replace(&mut self.spanning[s], count) != count {
                self.changes += 1;
            }
        }
    }

    /// The replicas of every shape that fit now, in shape-name order.
    pub fn fits(&mut self) -> Vec<ShapeFits> {
        self.settle_pending();
        self.settle_domains();
        self.set
            .shapes
            .iter()
            .zip(self.totals.iter().zip(self.spanning.iter()))
            .map(|(shape, (&total, &spanning))| {
                let replicas = if shape.constraints.spans_domains() {
                    spanning
                } else {
                    u64::try_from(total).unwrap_or(u64::MAX)
                };
                ShapeFits {
                    shape: shape.name.clone(),
                    scale: shape.scale,
                    replicas,
                    value: encode_fits(replicas, shape.scale),
                }
            })
            .collect()
    }

    /// The `fits.<shape>` items for `resource-usage-score`, in shape-name order.
    pub fn score_items(&mut self) -> Vec<AddOnPlacementScoreItem> {
        self.fits()
            .into_iter()
            .map(|f| AddOnPlacementScoreItem {
                name: fits_score_name(&f.shape),
                value: f.value,
            })
            .collect()
    }

    /// Objects currently not counted because their resources could not be read.
    pub fn invalid_objects(&self) -> impl Iterator<Item = &ObjectError> {
        self.invalid.iter()
    }

    /// Pending pods known (deducted or not).
    pub fn pending_pods(&self) -> usize {
        self.pending.len()
    }

    fn slot_for(&mut self, name: &str) -> u32 {
        let (resources, shapes) = (self.set.resources.len(), self.set.shapes.len());
        let selectors = self.set.selectors.len();
        self.nodes
            .slot_for(name, resources, self.node_relist.epoch(), || ShapeCounts {
                eligible: 0,
                contribution: vec![0; shapes].into_boxed_slice(),
                matched: vec![0; selectors].into_boxed_slice(),
                ports: Vec::new(),
            })
    }
}

/// Adds (or takes away) a bound pod's selector matches and host ports to its node's.
fn count_in(node: &mut ShapeCounts, pod: &PodEntry, add: bool) {
    let mut bits = pod.matches;
    while bits != 0 {
        let i = bits.trailing_zeros() as usize;
        bits &= bits - 1;
        if let Some(n) = node.matched.get_mut(i) {
            *n = if add { *n + 1 } else { n.saturating_sub(1) };
        }
    }
    for port in pod.ports.iter() {
        if add {
            node.ports.push(port.clone());
        } else if let Some(at) = node.ports.iter().position(|p| p == port) {
            node.ports.swap_remove(at);
        }
    }
}

/// Deducts `need` (pod slot first, then amounts) from the node at `order[i]`.
fn take(
    room: &mut [i128],
    best: &mut [i128],
    placed: &mut FastMap<u32, Deduction>,
    order: &[u32],
    i: usize,
    need: &[i128],
) {
    let width = need.len();
    for (have, want) in room[i * width..(i + 1) * width].iter_mut().zip(need) {
        *have -= want.max(&0);
    }
    let b = i / BLOCK;
    block_best(room, b, width, order.len(), &mut best[b * width..(b + 1) * width]);
    let d = placed.entry(order[i]).or_insert_with(|| Deduction {
        requests: vec![0; width - 1].into_boxed_slice(),
        pods: 0,
    });
    d.pods += 1;
    for (sum, want) in d.requests.iter_mut().zip(&need[1..]) {
        *sum += want.max(&0);
    }
}

/// The most room per column over the nodes of block `b`.
fn block_best(room: &[i128], b: usize, width: usize, len: usize, out: &mut [i128]) {
    out.fill(i128::MIN);
    for i in b * BLOCK..((b + 1) * BLOCK).min(len) {
        for c in 0..width {
            out[c] = out[c].max(room[i * width + c]);
        }
    }
}
