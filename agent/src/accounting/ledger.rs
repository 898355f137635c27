//! Incremental resource totals of a cluster, fed one node or pod event at a time.
//!
//! The ledger keeps, per node, its allocatable amounts and the sum of the effective requests of the
//! pods bound to it; and, over the eligible nodes (Ready and not cordoned), the cluster sums and an
//! ordered index of per-node free amounts. A pod event therefore costs a hash lookup plus a few
//! ordered-set updates per resource it requests, never a rescan of the cluster.
//!
//! Only pods that hold resources are kept: bound to a node and not Succeeded/Failed. Each is stored
//! as its node's slot number and the id of its effective requests in a [`RequestTable`] (pods of one
//! workload share one vector), nothing else of the object.

use super::invalid::{InvalidObjects, ObjectError};
use super::keys::{FastMap, join_key, pod_key};
use super::objects::{SlimNode, SlimPod};
use super::pod::effective_requests;
use super::quantity::parse_quantity;
use super::relist::Relist;
use super::requests::{RequestId, RequestTable};
use super::resources::{MAX_RESOURCES, ResourceSet};
use super::slots::{self, NodeSlots};
use super::view::{Figures, ResourceView};
use std::collections::BTreeSet;

/// The ledger keeps nothing per node beyond what every index does.
type NodeSlot = slots::NodeSlot<NodeState, ()>;

#[derive(Debug, PartialEq, Eq)]
struct NodeState {
    allocatable: Box<[i64]>,
    eligible: bool,
}

impl NodeSlot {
    fn eligible(&self) -> bool {
        self.state.as_ref().is_some_and(|s| s.eligible)
    }

    fn allocatable(&self, r: usize) -> i64 {
        self.state.as_ref().map_or(0, |s| s.allocatable[r])
    }

    fn free(&self, r: usize) -> i128 {
        i128::from(self.allocatable(r)) - self.requested[r]
    }
}

#[derive(Debug)]
struct PodEntry {
    node: u32,
    requests: RequestId,
    epoch: u32,
}

/// A node the ledger knows, as the kubelet source needs it.
#[derive(Debug, Clone, Copy)]
pub struct NodeUsage<'a> {
    pub name: &'a str,
    pub allocatable: &'a [i64],
    pub requested: &'a [i128],
}

#[derive(Debug)]
pub struct Ledger {
    resources: ResourceSet,
    nodes: NodeSlots<NodeState, ()>,
    pods: FastMap<Box<str>, PodEntry>,
    /// The pods' effective requests.
    requests: RequestTable,
    invalid: InvalidObjects,
    eligible_nodes: usize,
    allocatable_sum: Box<[i128]>,
    requested_sum: Box<[i128]>,
    /// Per resource, `(free, slot)` of every eligible node.
    free_rank: Box<[BTreeSet<(i128, u32)>]>,
    /// Per resource, `(allocatable, slot)` of every eligible node.
    allocatable_rank: Box<[BTreeSet<(i64, u32)>]>,
    pod_relist: Relist,
    node_relist: Relist,
    /// The figures when the current re-list began, to tell whether it changed anything.
    before_bulk: Option<ResourceView>,
}

impl Ledger {
    pub fn new(resources: ResourceSet) -> Self {
        let n = resources.len();
        Self {
            nodes: NodeSlots::new(),
            pods: FastMap::default(),
            requests: RequestTable::new(n),
            invalid: InvalidObjects::default(),
            eligible_nodes: 0,
            allocatable_sum: vec![0; n].into_boxed_slice(),
            requested_sum: vec![0; n].into_boxed_slice(),
            free_rank: (0..n).map(|_| BTreeSet::new()).collect(),
            allocatable_rank: (0..n).map(|_| BTreeSet::new()).collect(),
            pod_relist: Relist::default(),
            node_relist: Relist::default(),
            before_bulk: None,
            resources,
        }
    }

    pub fn resources(&self) -> &ResourceSet {
        &self.resources
    }

    /// Room for `pods` more pods without rehashing (a cold start knows the list size).
    pub fn reserve_pods(&mut self, pods: usize) {
        self.pods.reserve(pods);
    }

    /// Records a pod as it now is. Returns whether the cluster figures changed. On error the pod is
    /// no longer counted and is reported by [`Ledger::invalid_objects`] until it is fixed or deleted;
    /// treat the figures as changed.
    pub fn apply_pod(&mut self, pod: &SlimPod) -> Result<bool, ObjectError> {
        let key = pod_key(pod);
        let Some(node_name) = pod.node_name().filter(|_| !pod.is_terminal()) else {
            self.invalid.forget_pod(&key);
            return Ok(self.remove_pod(&key));
        };
        let epoch = self.pod_relist.epoch();
        let read = effective_requests(&pod.spec, &self.resources);
        // An unreadable pod is no longer counted; the caller treats an error as a change anyway.
        let requests = self.invalid.read_pod(&key, read, epoch).inspect_err(|_| {
            self.remove_pod(&key);
        })?;

        let mut known = false;
        if let Some(entry) = self.pods.get_mut(key.as_str()) {
            entry.epoch = epoch;
            known = true;
            let slot = entry.node;
            if *self.nodes[slot as usize].name == *node_name {
                let old = self.requests.get(entry.requests);
                if *old == *requests {
                    return Ok(false);
                }
                // Same node, new requests: charge the difference.
                let mut delta = [0i128; MAX_RESOURCES];
                for (r, (new, old)) in requests.iter().zip(old).enumerate() {
                    delta[r] = i128::from(*new) - i128::from(*old);
                }
                self.requests.release(entry.requests);
                entry.requests = self.requests.acquire(&requests);
                return Ok(self.charge(slot, &delta[..self.resources.len()]));
            }
        }
        // New, or moved to another node: take any old version off its node, then count this one.
        let removed = known && self.remove_pod(&key);
        let node = self.slot_for(node_name);
        self.nodes[node as usize].pods += 1;
        let added = self.charge(node, &widen(&requests, 1)[..requests.len()]);
        let requests = self.requests.acquire(&requests);
        self.pods.insert(
            key.into_boxed_str(),
            PodEntry {
                node,
                requests,
                epoch,
            },
        );
        Ok(removed || added)
    }

    /// Forgets a pod. Returns whether the cluster figures changed.
    pub fn delete_pod(&mut self, namespace: &str, name: &str) -> bool {
        let key = join_key(namespace, name);
        self.invalid.forget_pod(&key);
        self.remove_pod(&key)
    }

    fn remove_pod(&mut self, key: &str) -> bool {
        let Some(entry) = self.pods.remove(key) else {
            return false;
        };
        let n = self.resources.len();
        let changed = self.charge(entry.node, &widen(self.requests.get(entry.requests), -1)[..n]);
        self.requests.release(entry.requests);
        self.nodes[entry.node as usize].pods -= 1;
        self.nodes.release_if_unused(entry.node);
        changed
    }

    /// Records a node as it now is. Returns whether the cluster figures changed. A node whose
    /// allocatable cannot be read counts as not eligible and is reported until fixed or deleted.
    pub fn apply_node(&mut self, node: &SlimNode) -> Result<bool, ObjectError> {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        let epoch = self.node_relist.epoch();
        let resources = &self.resources;
        let mut allocatable = resources.zeros();
        let read = self.invalid.read_node(node, epoch, |resource, quantity| {
            let Some(r) = resources.index_of(resource) else {
                return Ok(());
            };
            parse_quantity(quantity, resources.unit(r)).map(|amount| allocatable[r] = amount)
        });
        let state = match &read {
            Ok(()) => NodeState {
                allocatable,
                eligible: node.is_eligible(),
            },
            Err(_) => NodeState {
                allocatable: self.resources.zeros(),
                eligible: false,
            },
        };
        let slot = self.slot_for(name);
        self.nodes[slot as usize].epoch = epoch;
        let changed = if self.nodes[slot as usize].state.as_ref() == Some(&state) {
            false
        } else {
            let was_eligible = self.delist(slot);
            self.nodes[slot as usize].state = Some(state);
            let is_eligible = self.enlist(slot);
            was_eligible || is_eligible
        };
        read.map(|()| changed)
    }

    /// Forgets a node (its pods stay, attributed to the name, until they go too).
    pub fn delete_node(&mut self, name: &str) -> bool {
        self.invalid.forget_node(name);
        let Some(slot) = self.nodes.slot_of(name) else {
            return false;
        };
        let changed = self.delist(slot);
        self.nodes[slot as usize].state = None;
        self.nodes.release_if_unused(slot);
        changed
    }

    /// A full re-list of pods starts: pods not applied again before [`Ledger::finish_pod_relist`]
    /// are dropped then. Until it finishes the cluster figures are not maintained (and must not be
    /// read); finishing recounts them in one pass, which is much cheaper than keeping the per-node
    /// ordering current through a whole list.
    pub fn begin_pod_relist(&mut self) {
        self.enter_bulk();
        self.pod_relist.begin();
    }

    /// Ends a pod re-list; returns whether the cluster figures changed.
    pub fn finish_pod_relist(&mut self) -> bool {
        for key in self.pod_relist.unseen(&self.pods, |p| p.epoch) {
            self.remove_pod(&key);
        }
        self.invalid.keep_pods_seen_in(self.pod_relist.finish());
        self.leave_bulk()
    }

    /// A full re-list of nodes starts; see [`Ledger::begin_pod_relist`].
    pub fn begin_node_relist(&mut self) {
        self.enter_bulk();
        self.node_relist.begin();
    }

    /// Ends a node re-list; returns whether the cluster figures changed.
    pub fn finish_node_relist(&mut self) -> bool {
        for name in self.nodes.unseen(self.node_relist.epoch()) {
            self.delete_node(&name);
        }
        self.invalid.keep_nodes_seen_in(self.node_relist.finish());
        self.leave_bulk()
    }

    fn in_bulk(&self) -> bool {
        self.node_relist.running() || self.pod_relist.running()
    }

    fn enter_bulk(&mut self) {
        if !self.in_bulk() {
            self.before_bulk = Some(self.view());
        }
    }

    /// Recomputes when the last re-list ends; returns whether the figures differ from before it began.
    fn leave_bulk(&mut self) -> bool {
        if self.in_bulk() {
            return false;
        }
        self.recompute();
        self.before_bulk.take().is_none_or(|before| before != self.view())
    }

    /// Recomputes everything from the cached pods: every node's requested sum, then the cluster
    /// figures. O(pods × resources + nodes × resources × log nodes); run when a re-list completes.
    pub fn recompute(&mut self) {
        let n = self.resources.len();
        for node in self.nodes.iter_mut() {
            node.requested.fill(0);
        }
        for pod in self.pods.values() {
            let requested = &mut self.nodes[pod.node as usize].requested;
            for (sum, amount) in requested.iter_mut().zip(self.requests.get(pod.requests)) {
                *sum += i128::from(*amount);
            }
        }
        self.eligible_nodes = 0;
        self.allocatable_sum.fill(0);
        self.requested_sum.fill(0);
        for r in 0..n {
            self.free_rank[r].clear();
            self.allocatable_rank[r].clear();
        }
        for (slot, node) in self.nodes.iter().enumerate() {
            let Some(state) = node.state.as_ref().filter(|s| s.eligible) else {
                continue;
            };
            self.eligible_nodes += 1;
            for r in 0..n {
                self.allocatable_sum[r] += i128::from(state.allocatable[r]);
                self.requested_sum[r] += node.requested[r];
                self.free_rank[r].insert((node.free(r), slot as u32));
                self.allocatable_rank[r].insert((state.allocatable[r], slot as u32));
            }
        }
    }

    /// The cluster figures per resource.
    pub fn view(&self) -> ResourceView {
        let figures = (0..self.resources.len())
            .map(|r| {
                Some(Figures {
                    cluster_free: self.allocatable_sum[r] - self.requested_sum[r],
                    cluster_capacity: self.allocatable_sum[r],
                    node_free: self.free_rank[r].last().map_or(0, |(free, _)| *free),
                    node_capacity: self.allocatable_rank[r].last().map_or(0, |(a, _)| i128::from(*a)),
                })
            })
            .collect();
        ResourceView {
            figures,
            eligible_nodes: self.eligible_nodes,
        }
    }

    /// Objects currently not counted because their resources could not be read.
    pub fn invalid_objects(&self) -> impl Iterator<Item = &ObjectError> {
        self.invalid.iter()
    }

    /// Pods currently holding resources.
    pub fn counted_pods(&self) -> usize {
        self.pods.len()
    }

    /// Nodes whose Node object is known.
    pub fn known_nodes(&self) -> usize {
        self.nodes.iter().filter(|s| s.state.is_some()).count()
    }

    pub fn eligible_node_count(&self) -> usize {
        self.eligible_nodes
    }

    /// Allocatable minus requested of a known node (eligible or not).
    pub fn node_free(&self, name: &str) -> Option<Vec<i128>> {
        let slot = &self.nodes[self.nodes.slot_of(name)? as usize];
        slot.state.as_ref()?;
        Some((0..self.resources.len()).map(|r| slot.free(r)).collect())
    }

    /// The eligible nodes with their allocatable and requested amounts.
    pub fn eligible_nodes(&self) -> impl Iterator<Item = NodeUsage<'_>> {
        self.nodes.iter().filter(|s| s.eligible()).filter_map(|s| {
            Some(NodeUsage {
                name: &s.name,
                allocatable: &s.state.as_ref()?.allocatable,
                requested: &s.requested,
            })
        })
    }

    fn slot_for(&mut self, name: &str) -> u32 {
        let (resources, epoch) = (self.resources.len(), self.node_relist.epoch());
        self.nodes.slot_for(name, resources, epoch, || ())
    }

    /// Adds per-resource `deltas` to a node's requested amounts. Returns whether the cluster figures
    /// changed (only eligible nodes count towards them). During a re-list only the node's own sums
    /// are kept; the cluster figures are recounted once it completes.
    fn charge(&mut self, slot: u32, deltas: &[i128]) -> bool {
        let bulk = self.in_bulk();
        let node = &mut self.nodes[slot as usize];
        let counted = node.eligible() && !bulk;
        let mut changed = false;
        for (r, &delta) in deltas.iter().enumerate() {
            if delta == 0 {
                continue;
            }
            if counted {
                self.free_rank[r].remove(&(node.free(r), slot));
                node.requested[r] += delta;
                self.free_rank[r].insert((node.free(r), slot));
                self.requested_sum[r] += delta;
                changed = true;
            } else {
                node.requested[r] += delta;
            }
        }
        changed
    }

    /// Adds an eligible node's contribution to the cluster figures; returns whether it had one.
    fn enlist(&mut self, slot: u32) -> bool {
        let node = &self.nodes[slot as usize];
        let Some(state) = node.state.as_ref().filter(|s| s.eligible) else {
            return false;
        };
        self.eligible_nodes += 1;
        for r in 0..self.resources.len() {
            self.allocatable_sum[r] += i128::from(state.allocatable[r]);
            self.requested_sum[r] += node.requested[r];
            self.free_rank[r].insert((node.free(r), slot));
            self.allocatable_rank[r].insert((state.allocatable[r], slot));
        }
        true
    }

    /// Removes an eligible node's contribution; returns whether it had one.
    fn delist(&mut self, slot: u32) -> bool {
        let node = &self.nodes[slot as usize];
        let Some(state) = node.state.as_ref().filter(|s| s.eligible) else {
            return false;
        };
        self.eligible_nodes -= 1;
        for r in 0..self.resources.len() {
            self.allocatable_sum[r] -= i128::from(state.allocatable[r]);
            self.requested_sum[r] -= node.requested[r];
            self.free_rank[r].remove(&(node.free(r), slot));
            self.allocatable_rank[r].remove(&(state.allocatable[r], slot));
        }
        true
    }
}

/// Amounts as signed per-resource changes.
fn widen(amounts: &[i64], sign: i128) -> [i128; MAX_RESOURCES] {
    let mut out = [0i128; MAX_RESOURCES];
    for (o, a) in out.iter_mut().zip(amounts) {
        *o = sign * i128::from(*a);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::objects::{
        ResourceList, SlimContainer, SlimNodeCondition, SlimNodeSpec, SlimNodeStatus, SlimPodSpec,
        SlimPodStatus, SlimResources,
    };
    use crate::accounting::quantity::QuantityText;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn list(entries: &[(&str, &str)]) -> ResourceList {
        ResourceList(
            entries
                .iter()
                .map(|(k, v)| ((*k).to_owned(), QuantityText((*v).to_owned())))
                .collect(),
        )
    }

    fn node(name: &str, cpu: &str, ready: bool) -> SlimNode {
        SlimNode {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: SlimNodeSpec::default(),
            status: SlimNodeStatus {
                allocatable: list(&[("cpu", cpu), ("memory", "8Gi")]),
                conditions: vec![SlimNodeCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                }],
            },
        }
    }

    fn pod(name: &str, node: Option<&str>, cpu: &str, phase: &str) -> SlimPod {
        SlimPod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            spec: SlimPodSpec {
                node_name: node.map(Into::into),
                containers: vec![SlimContainer {
                    name: "app".into(),
                    restart_policy: None,
                    resources: SlimResources {
                        requests: list(&[("cpu", cpu)]),
                    },
                    ports: Vec::new(),
                }],
                ..Default::default()
            },
            status: SlimPodStatus {
                phase: Some(phase.into()),
            },
        }
    }

    fn cpu(ledger: &Ledger) -> (i128, i128) {
        let f = ledger.view().figures[0].expect("cpu");
        (f.cluster_free, f.node_free)
    }

    #[test]
    fn a_pod_counts_once_bound_and_stops_counting_when_terminal() {
        let mut l = Ledger::new(ResourceSet::built_in());
        l.apply_node(&node("n1", "4", true)).expect("valid");
        assert!(
            !l.apply_pod(&pod("p", None, "1", "Pending")).expect("valid"),
            "unbound: nothing changes"
        );
        assert_eq!(l.counted_pods(), 0);
        assert!(
            l.apply_pod(&pod("p", Some("n1"), "1", "Pending")).expect("valid"),
            "bound"
        );
        assert_eq!(cpu(&l), (3000, 3000));
        assert!(
            !l.apply_pod(&pod("p", Some("n1"), "1", "Running")).expect("valid"),
            "same requests"
        );
        assert!(
            l.apply_pod(&pod("p", Some("n1"), "1500m", "Running"))
                .expect("valid"),
            "resized"
        );
        assert_eq!(cpu(&l), (2500, 2500));
        assert!(
            l.apply_pod(&pod("p", Some("n1"), "1500m", "Succeeded"))
                .expect("valid"),
            "terminal"
        );
        assert_eq!((cpu(&l), l.counted_pods()), ((4000, 4000), 0));
    }

    #[test]
    fn pods_on_ineligible_nodes_do_not_move_the_cluster_figures() {
        let mut l = Ledger::new(ResourceSet::built_in());
        l.apply_node(&node("ready", "4", true)).expect("valid");
        l.apply_node(&node("notready", "8", false)).expect("valid");
        assert!(
            !l.apply_pod(&pod("p", Some("notready"), "1", "Running"))
                .expect("valid")
        );
        assert_eq!(cpu(&l), (4000, 4000));
        // The node turns Ready: its pod counts from then on.
        assert!(l.apply_node(&node("notready", "8", true)).expect("valid"));
        assert_eq!(cpu(&l), (11_000, 7000));
        assert_eq!(l.node_free("notready"), Some(vec![7000, 8 << 30, 0, 0]));
    }

    #[test]
    fn a_deleted_node_keeps_its_pods_until_it_returns() {
        let mut l = Ledger::new(ResourceSet::built_in());
        l.apply_node(&node("n1", "4", true)).expect("valid");
        l.apply_pod(&pod("p", Some("n1"), "1", "Running")).expect("valid");
        assert!(l.delete_node("n1"));
        assert_eq!((cpu(&l), l.known_nodes(), l.counted_pods()), ((0, 0), 0, 1));
        l.apply_node(&node("n1", "4", true)).expect("valid");
        assert_eq!(cpu(&l), (3000, 3000));
        assert!(l.delete_pod("ns", "p"));
        assert!(l.delete_node("n1"));
        assert_eq!(l.nodes.slot_of("n1"), None, "nothing left behind");
    }

    #[test]
    fn unreadable_objects_are_reported_and_not_counted_until_fixed() {
        let mut l = Ledger::new(ResourceSet::built_in());
        l.apply_node(&node("n1", "4", true)).expect("valid");
        l.apply_pod(&pod("p", Some("n1"), "1", "Running")).expect("valid");
        let err = l
            .apply_pod(&pod("p", Some("n1"), "one", "Running"))
            .expect_err("invalid");
        assert_eq!(
            err.to_string(),
            "pod ns/p: container \"app\" requests cpu: invalid quantity \"one\": no digits"
        );
        assert_eq!((cpu(&l), l.invalid_objects().count()), ((4000, 4000), 1));
        l.apply_pod(&pod("p", Some("n1"), "1", "Running")).expect("fixed");
        assert_eq!((cpu(&l), l.invalid_objects().count()), ((3000, 3000), 0));

        let err = l.apply_node(&node("n1", "lots", true)).expect_err("invalid");
        assert!(
            err.to_string()
                .starts_with("node n1: allocatable cpu: invalid quantity"),
            "{err}"
        );
        assert_eq!(l.eligible_node_count(), 0, "an unreadable node is not eligible");
        assert!(
            !l.delete_node("n1"),
            "it was not counted, so the figures do not change"
        );
        assert_eq!(l.invalid_objects().count(), 0, "deleting it clears the report");
    }

    #[test]
    fn a_relist_drops_what_it_no_longer_lists() {
        let mut l = Ledger::new(ResourceSet::built_in());
        l.apply_node(&node("n1", "4", true)).expect("valid");
        l.apply_node(&node("n2", "4", true)).expect("valid");
        l.apply_pod(&pod("gone", Some("n1"), "1", "Running"))
            .expect("valid");
        l.apply_pod(&pod("kept", Some("n2"), "2", "Running"))
            .expect("valid");
        l.begin_pod_relist();
        l.apply_pod(&pod("kept", Some("n2"), "2", "Running"))
            .expect("valid");
        assert!(l.finish_pod_relist(), "a pod disappeared");
        assert_eq!((cpu(&l), l.counted_pods()), ((6000, 4000), 1));
    }
}
