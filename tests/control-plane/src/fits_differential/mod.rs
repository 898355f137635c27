//! The fits differential's generator (issue 47): seeded random clusters of Node objects (random
//! allocatable with an extended resource and `pods`, zone and hostname labels, taints, some cordoned
//! or NotReady) with pods bound to them (init containers, sidecars, a RuntimeClass's overhead,
//! terminating ones) and pending ones, and random WorkloadShapes to count on them.
//!
//! The reference is the real kube-scheduler ([`live`]): replicas of a shape are created one at a
//! time until one stays `Unschedulable`, and the number bound must equal the agent's
//! `fits.<shape>` read before the first replica existed.
//!
//! Everything here is pure: the same seed gives the same objects. What the generator avoids,
//! because it is not what the agent claims to model (docs/fits-and-reservations.md, "Not counted"):
//! - pending pods the scheduler cannot place for a reason other than their size: the agent deducts
//!   pending pods first-fit ignoring their own selectors. Every pending pod here either fits
//!   somewhere (kube-scheduler binds it before the count is read) or fits on no node at all;
//! - tolerating every taint (`operator: Exists` without a key) unless [`Features::tolerate_all`]:
//!   such a replica tolerates `node.kubernetes.io/unschedulable` and `not-ready`, so kube-scheduler
//!   places it on cordoned and NotReady nodes, which the agent never counts.

pub mod live;

use std::collections::BTreeMap;

use serde_json::{Value, json};

pub use crate::differential::Rng;

/// The extended resource some nodes offer and some shapes request.
pub const WIDGET: &str = "example.com/widget";
/// Namespace of the clusters' own pods (bound, terminating, pending).
pub const EXISTING_NAMESPACE: &str = "fits-existing";
/// Namespace of the replicas the scheduler counts with.
pub const REPLICA_NAMESPACE: &str = "fits-replicas";
/// The RuntimeClass with an overhead that some existing pods use.
pub const EXISTING_RUNTIME_CLASS: &str = "fits-existing-overhead";
const ZONES: &[&str] = &["zone-a", "zone-b", "zone-c"];
const POOLS: &[&str] = &["general", "batch"];
const POOL_LABEL: &str = "example.com/pool";
const ZONE_LABEL: &str = "topology.kubernetes.io/zone";
const HOSTNAME_LABEL: &str = "kubernetes.io/hostname";
const NOT_READY_TAINT: &str = "node.kubernetes.io/not-ready";
const UNSCHEDULABLE_TAINT: &str = "node.kubernetes.io/unschedulable";
/// User taints: key, value, effect.
const TAINTS: &[(&str, &str, &str)] = &[
    ("dedicated", "ml", "NoSchedule"),
    ("example.com/gpu", "true", "NoExecute"),
    ("spot", "", "PreferNoSchedule"),
    ("dedicated", "batch", "NoSchedule"),
];
const NODE_CPUS: &[&str] = &["1", "2", "4", "2500m", "3"];
const NODE_MEMORIES: &[&str] = &["2Gi", "4Gi", "8Gi", "3Gi", "6144Mi"];
const POD_CPUS: &[&str] = &["100m", "200m", "250m", "500m", "750m"];
const POD_MEMORIES: &[&str] = &["64Mi", "128Mi", "256Mi", "512Mi", "1Gi"];
const SHAPE_CPUS: &[&str] = &["100m", "250m", "300m", "500m", "1", "1500m"];
const SHAPE_MEMORIES: &[&str] = &["64Mi", "200Mi", "256Mi", "512Mi", "1Gi", "2Gi"];
/// An image nothing pulls: no kubelet runs these pods.
const IMAGE: &str = "registry.invalid/none:1";

/// Which generator features a run uses; the rest stay off so a run is green on what is supported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Features {
    /// Shapes that tolerate every taint (see the module's notes).
    pub tolerate_all: bool,
    /// Required node affinity (`nodeAffinity`).
    pub node_affinity: bool,
    /// Required pod anti-affinity among the replicas on a topology key (`podAntiAffinity`).
    pub anti_affinity: bool,
    /// `topologySpreadConstraints` with `DoNotSchedule`.
    pub spread: bool,
    /// Host ports (`hostPorts`), and existing pods binding some.
    pub host_ports: bool,
    /// A ResourceQuota in the shape's namespace.
    pub quota: bool,
}

/// The names `OCM_SCORE_FITS_FEATURES` accepts.
pub const FEATURE_NAMES: &[&str] = &[
    "tolerate-all",
    "node-affinity",
    "anti-affinity",
    "spread",
    "host-ports",
    "quota",
];

impl Features {
    /// From `OCM_SCORE_FITS_FEATURES`, a comma-separated list of [`FEATURE_NAMES`]. Unset, the features the agent counts: [`Features::supported`]; set (even empty), exactly
    /// those listed.
    pub fn from_env() -> Result<Features, String> {
        let Ok(list) = std::env::var("OCM_SCORE_FITS_FEATURES") else {
            return Ok(Features::supported());
        };
        let mut features = Features::default();
        for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            match name {
                "tolerate-all" => features.tolerate_all = true,
                "node-affinity" => features.node_affinity = true,
                "anti-affinity" => features.anti_affinity = true,
                "spread" => features.spread = true,
                "host-ports" => features.host_ports = true,
                "quota" => features.quota = true,
                other => {
                    return Err(format!(
                        "OCM_SCORE_FITS_FEATURES: unknown feature {other:?}; known: {}",
                        FEATURE_NAMES.join(", ")
                    ));
                }
            }
        }
        Ok(features)
    }

    /// What the agent's count models today: every constraint of issue 47 but the ResourceQuota,
    /// and not a toleration of every taint.
    pub fn supported() -> Features {
        Features {
            node_affinity: true,
            anti_affinity: true,
            spread: true,
            host_ports: true,
            ..Features::default()
        }
    }

    /// The names of the features on, for the replay line.
    pub fn names(&self) -> String {
        let on = [
            self.tolerate_all,
            self.node_affinity,
            self.anti_affinity,
            self.spread,
            self.host_ports,
            self.quota,
        ];
        FEATURE_NAMES
            .iter()
            .zip(on)
            .filter(|(_, on)| *on)
            .map(|(name, _)| *name)
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// Every generator feature on.
pub fn all_features() -> Features {
    Features {
        tolerate_all: true,
        node_affinity: true,
        anti_affinity: true,
        spread: true,
        host_ports: true,
        quota: true,
    }
}

/// What a case (one shape on one cluster) involves, for the tally.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Feature {
    Cpu,
    Memory,
    ExtendedResource,
    PodsOnly,
    NodeSelector,
    Tolerations,
    TolerateAll,
    PodOverhead,
    TaintedNodes,
    CordonedNodes,
    NotReadyNodes,
    InitContainers,
    Sidecars,
    OverheadPods,
    TerminatingPods,
    PendingPods,
    PodSlotsBind,
    NodeAffinity,
    AntiAffinity,
    Spread,
    HostPorts,
    Quota,
}

impl Feature {
    pub const ALL: [Feature; 22] = [
        Feature::Cpu,
        Feature::Memory,
        Feature::ExtendedResource,
        Feature::PodsOnly,
        Feature::NodeSelector,
        Feature::Tolerations,
        Feature::TolerateAll,
        Feature::PodOverhead,
        Feature::TaintedNodes,
        Feature::CordonedNodes,
        Feature::NotReadyNodes,
        Feature::InitContainers,
        Feature::Sidecars,
        Feature::OverheadPods,
        Feature::TerminatingPods,
        Feature::PendingPods,
        Feature::PodSlotsBind,
        Feature::NodeAffinity,
        Feature::AntiAffinity,
        Feature::Spread,
        Feature::HostPorts,
        Feature::Quota,
    ];

    pub fn label(self) -> &'static str {
        match self {
            Feature::Cpu => "shape: cpu",
            Feature::Memory => "shape: memory",
            Feature::ExtendedResource => "shape: extended resource",
            Feature::PodsOnly => "shape: pods only",
            Feature::NodeSelector => "shape: nodeSelector",
            Feature::Tolerations => "shape: tolerations",
            Feature::TolerateAll => "shape: tolerates every taint",
            Feature::PodOverhead => "shape: podOverhead",
            Feature::TaintedNodes => "cluster: tainted nodes",
            Feature::CordonedNodes => "cluster: cordoned nodes",
            Feature::NotReadyNodes => "cluster: NotReady nodes",
            Feature::InitContainers => "pods: init containers",
            Feature::Sidecars => "pods: sidecars",
            Feature::OverheadPods => "pods: RuntimeClass overhead",
            Feature::TerminatingPods => "pods: terminating",
            Feature::PendingPods => "pods: pending",
            Feature::PodSlotsBind => "nodes: few pod slots (≤ 3)",
            Feature::NodeAffinity => "shape: nodeAffinity",
            Feature::AntiAffinity => "shape: podAntiAffinity",
            Feature::Spread => "shape: topologySpreadConstraints",
            Feature::HostPorts => "shape: hostPorts",
            Feature::Quota => "namespace: ResourceQuota",
        }
    }
}

/// One node: the object to create, its status, and what the generator chose.
#[derive(Clone, Debug, PartialEq)]
pub struct NodePlan {
    pub name: String,
    /// Metadata and spec (taints, `unschedulable`), as created then patched.
    pub object: Value,
    /// The status subresource (allocatable, capacity, the Ready condition).
    pub status: Value,
    pub ready: bool,
    pub cordoned: bool,
}

/// One random cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterPlan {
    pub index: usize,
    pub nodes: Vec<NodePlan>,
    /// Pods created bound to a node (`spec.nodeName`).
    pub bound_pods: Vec<Value>,
    /// Names of bound pods deleted right after creation: no kubelet confirms, so they stay
    /// terminating.
    pub terminating: Vec<String>,
    /// Pods created without a node: kube-scheduler binds them or marks them Unschedulable.
    pub pending_pods: Vec<Value>,
    pub shapes: Vec<ShapePlan>,
    /// What the cluster has, for the tally of each of its cases.
    pub features: Vec<Feature>,
}

/// One WorkloadShape and the pod its replicas are.
#[derive(Clone, Debug, PartialEq)]
pub struct ShapePlan {
    pub name: String,
    /// The WorkloadShape's `spec`.
    pub spec: Value,
    /// The RuntimeClass its replicas use, when it has a `podOverhead`.
    pub runtime_class: Option<Value>,
    /// The ResourceQuota of its namespace, when it has one.
    pub quota: Option<Value>,
    pub features: Vec<Feature>,
}

impl ShapePlan {
    /// The WorkloadShape object for the hub.
    pub fn object(&self) -> Value {
        json!({"apiVersion": "tiering.ocm-score.io/v1alpha1", "kind": "WorkloadShape",
               "metadata": {"name": self.name}, "spec": self.spec})
    }

    /// The namespace its replicas run in: its own when it states one, else [`REPLICA_NAMESPACE`].
    pub fn namespace(&self) -> &str {
        self.spec["namespace"].as_str().unwrap_or(REPLICA_NAMESPACE)
    }

    /// Replica `i`: a pod that requests what the shape states, with its nodeSelector, tolerations,
    /// overhead (through its RuntimeClass), node affinity, pod anti-affinity, spread constraints,
    /// host ports and pod labels, in its namespace, labelled with the shape's name.
    pub fn replica(&self, i: usize) -> Value {
        let requests = self.spec["requests"].clone();
        let mut resources = json!({"requests": requests});
        // Extended resources may not be overcommitted: their limit equals their request.
        if let Some(widgets) = self.spec["requests"].get(WIDGET) {
            resources["limits"] = json!({WIDGET: widgets});
        }
        let mut container = json!({"name": "app", "image": IMAGE, "resources": resources});
        if let Some(ports) = self.spec["hostPorts"].as_array() {
            let ports: Vec<Value> = ports
                .iter()
                .map(|p| {
                    let mut port = json!({"containerPort": p["port"], "hostPort": p["port"]});
                    for (from, to) in [("protocol", "protocol"), ("hostIP", "hostIP")] {
                        if let Some(v) = p.get(from) {
                            port[to] = v.clone();
                        }
                    }
                    port
                })
                .collect();
            container["ports"] = json!(ports);
        }
        let mut spec = json!({
            "containers": [container],
            "terminationGracePeriodSeconds": 0,
        });
        let mut affinity = serde_json::Map::new();
        if let Some(node) = self.spec.get("nodeAffinity") {
            affinity.insert(
                "nodeAffinity".into(),
                json!({"requiredDuringSchedulingIgnoredDuringExecution": node}),
            );
        }
        if let Some(terms) = self.spec.get("podAntiAffinity") {
            affinity.insert(
                "podAntiAffinity".into(),
                json!({"requiredDuringSchedulingIgnoredDuringExecution": terms}),
            );
        }
        if !affinity.is_empty() {
            spec["affinity"] = Value::Object(affinity);
        }
        if let Some(constraints) = self.spec.get("topologySpreadConstraints") {
            spec["topologySpreadConstraints"] = constraints.clone();
        }
        if let Some(selector) = self.spec.get("nodeSelector") {
            spec["nodeSelector"] = selector.clone();
        }
        if let Some(tolerations) = self.spec.get("tolerations") {
            spec["tolerations"] = tolerations.clone();
        }
        if let Some(class) = &self.runtime_class {
            spec["runtimeClassName"] = class["metadata"]["name"].clone();
        }
        let mut labels = self.spec["podLabels"].as_object().cloned().unwrap_or_default();
        labels.insert(
            ocm_score_api::well_known::WORKLOAD_SHAPE_LABEL.into(),
            json!(self.name),
        );
        json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": format!("{}-{i:03}", self.name), "namespace": self.namespace(),
                            "labels": labels},
               "spec": spec})
    }
}

fn quantity_pick(rng: &mut Rng, items: &[&str]) -> String {
    (*rng.pick(items)).to_owned()
}

/// A container requesting cpu and memory (and sometimes widgets).
fn container(rng: &mut Rng, name: &str, widgets: bool) -> Value {
    let mut requests =
        json!({"cpu": quantity_pick(rng, POD_CPUS), "memory": quantity_pick(rng, POD_MEMORIES)});
    let mut resources = json!({});
    if widgets {
        requests[WIDGET] = json!("1");
        resources["limits"] = json!({WIDGET: "1"});
    }
    resources["requests"] = requests;
    json!({"name": name, "image": IMAGE, "resources": resources})
}

impl ClusterPlan {
    /// Cluster `index` of a run, with `shapes` shapes.
    pub fn generate(rng: &mut Rng, index: usize, shapes: usize, features: Features) -> ClusterPlan {
        let mut plan = ClusterPlan {
            index,
            nodes: Vec::new(),
            bound_pods: Vec::new(),
            terminating: Vec::new(),
            pending_pods: Vec::new(),
            shapes: Vec::new(),
            features: Vec::new(),
        };
        let mut has = BTreeMap::new();
        let node_count = rng.range(3, 6) as usize;
        for n in 0..node_count {
            let name = format!("fits-c{index:03}-n{n}");
            let ready = !rng.chance(12);
            let cordoned = rng.chance(12);
            let mut taints: Vec<Value> = Vec::new();
            if rng.chance(30) {
                let (key, value, effect) = *rng.pick(TAINTS);
                taints.push(json!({"key": key, "value": value, "effect": effect}));
                has.insert(Feature::TaintedNodes, ());
            }
            // What the node lifecycle controller puts on such nodes (this control plane does not
            // run it: no kubelet renews these nodes' leases).
            if !ready {
                taints.push(json!({"key": NOT_READY_TAINT, "effect": "NoSchedule"}));
                has.insert(Feature::NotReadyNodes, ());
            }
            if cordoned {
                taints.push(json!({"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}));
                has.insert(Feature::CordonedNodes, ());
            }
            let pods = rng.range(2, 10);
            if pods <= 3 {
                has.insert(Feature::PodSlotsBind, ());
            }
            let mut allocatable = json!({
                "cpu": quantity_pick(rng, NODE_CPUS),
                "memory": quantity_pick(rng, NODE_MEMORIES),
                "pods": pods.to_string(),
            });
            if rng.chance(50) {
                allocatable[WIDGET] = json!(rng.range(0, 4).to_string());
            }
            let labels = json!({
                HOSTNAME_LABEL: name,
                ZONE_LABEL: *rng.pick(ZONES),
                POOL_LABEL: *rng.pick(POOLS),
                "kubernetes.io/os": "linux",
            });
            let object = json!({"apiVersion": "v1", "kind": "Node",
                                "metadata": {"name": name, "labels": labels},
                                "spec": {"taints": taints, "unschedulable": cordoned}});
            let status = json!({"status": {
                "capacity": allocatable.clone(),
                "allocatable": allocatable,
                "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"},
                                "reason": if ready {"KubeletReady"} else {"KubeletNotReady"}}],
            }});
            plan.nodes.push(NodePlan {
                name,
                object,
                status,
                ready,
                cordoned,
            });
        }
        // Pods bound to the nodes.
        let mut pod_index = 0;
        for n in 0..node_count {
            let node = plan.nodes[n].name.clone();
            for _ in 0..rng.range(0, 3) {
                let name = format!("fits-c{index:03}-p{pod_index:02}");
                pod_index += 1;
                let widgets = rng.chance(15);
                let mut spec = json!({
                    "nodeName": node,
                    "containers": [container(rng, "app", widgets)],
                    "terminationGracePeriodSeconds": 3600,
                    "tolerations": [{"operator": "Exists"}],
                });
                if rng.chance(30) {
                    let mut init = vec![container(rng, "setup", false)];
                    if rng.chance(50) {
                        init.push(container(rng, "migrate", false));
                    }
                    spec["initContainers"] = json!(init);
                    has.insert(Feature::InitContainers, ());
                }
                if rng.chance(25) {
                    let mut sidecar = container(rng, "sidecar", false);
                    sidecar["restartPolicy"] = json!("Always");
                    let init = spec["initContainers"].as_array().cloned().unwrap_or_default();
                    // A sidecar before or after the init containers: the init peak differs.
                    let at = rng.below(init.len() + 1);
                    let mut init = init;
                    init.insert(at, sidecar);
                    spec["initContainers"] = json!(init);
                    has.insert(Feature::Sidecars, ());
                }
                if features.host_ports && rng.chance(20) {
                    spec["containers"][0]["ports"] =
                        json!([{"containerPort": 8080, "hostPort": *rng.pick(&[8080, 9090])}]);
                }
                if rng.chance(20) {
                    spec["runtimeClassName"] = json!(EXISTING_RUNTIME_CLASS);
                    has.insert(Feature::OverheadPods, ());
                }
                if rng.chance(15) {
                    plan.terminating.push(name.clone());
                    has.insert(Feature::TerminatingPods, ());
                }
                plan.bound_pods.push(json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": name, "namespace": EXISTING_NAMESPACE}, "spec": spec}));
            }
        }
        // Pending pods: either small enough for kube-scheduler to bind before the count, or larger
        // than any node.
        for p in 0..rng.range(0, 2) {
            has.insert(Feature::PendingPods, ());
            let mut app = container(rng, "app", false);
            if rng.chance(50) {
                app["resources"]["requests"]["cpu"] = json!("64");
            }
            plan.pending_pods.push(json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("fits-c{index:03}-pending{p}"), "namespace": EXISTING_NAMESPACE},
                "spec": {"containers": [app], "terminationGracePeriodSeconds": 0}}));
        }
        plan.features = has.into_keys().collect();
        for s in 0..shapes {
            let shape = ShapePlan::generate(rng, &format!("fits-c{index:03}-s{s}"), features);
            plan.shapes.push(shape);
        }
        plan
    }
}

impl ShapePlan {
    fn generate(rng: &mut Rng, name: &str, features: Features) -> ShapePlan {
        let mut has = Vec::new();
        let mut requests = serde_json::Map::new();
        if rng.chance(85) {
            requests.insert("cpu".into(), json!(quantity_pick(rng, SHAPE_CPUS)));
            has.push(Feature::Cpu);
        }
        if rng.chance(70) {
            requests.insert("memory".into(), json!(quantity_pick(rng, SHAPE_MEMORIES)));
            has.push(Feature::Memory);
        }
        if rng.chance(25) {
            requests.insert(WIDGET.into(), json!(rng.range(1, 2).to_string()));
            has.push(Feature::ExtendedResource);
        }
        if requests.is_empty() {
            has.push(Feature::PodsOnly);
        }
        let mut spec = json!({"requests": requests});
        if rng.chance(30) {
            let selector = if rng.chance(50) {
                json!({ZONE_LABEL: *rng.pick(ZONES)})
            } else {
                json!({POOL_LABEL: *rng.pick(POOLS)})
            };
            spec["nodeSelector"] = selector;
            has.push(Feature::NodeSelector);
        }
        let mut tolerations = Vec::new();
        if rng.chance(40) {
            for _ in 0..rng.range(1, 2) {
                let (key, value, effect) = *rng.pick(TAINTS);
                let mut t = if rng.chance(50) {
                    json!({"key": key, "operator": "Exists"})
                } else {
                    json!({"key": key, "operator": "Equal", "value": value})
                };
                if rng.chance(50) {
                    t["effect"] = json!(effect);
                }
                tolerations.push(t);
            }
            has.push(Feature::Tolerations);
        }
        if features.tolerate_all && rng.chance(15) {
            tolerations.push(json!({"operator": "Exists"}));
            has.push(Feature::TolerateAll);
        }
        if !tolerations.is_empty() {
            spec["tolerations"] = json!(tolerations);
        }
        let mut runtime_class = None;
        if rng.chance(25) {
            let overhead =
                json!({"cpu": *rng.pick(&["50m", "100m"]), "memory": *rng.pick(&["32Mi", "64Mi"])});
            spec["podOverhead"] = overhead.clone();
            runtime_class = Some(json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                "metadata": {"name": name}, "handler": "runc", "overhead": {"podFixed": overhead}}));
            has.push(Feature::PodOverhead);
        }
        if features.node_affinity && rng.chance(30) {
            let term = |rng: &mut Rng| {
                let expression = match rng.below(4) {
                    0 => {
                        let mut zones = rng.some(ZONES, 2);
                        if zones.is_empty() {
                            zones.push(*rng.pick(ZONES));
                        }
                        json!({"key": ZONE_LABEL, "operator": "In", "values": zones})
                    }
                    1 => json!({"key": ZONE_LABEL, "operator": "NotIn", "values": [*rng.pick(ZONES)]}),
                    2 => json!({"key": POOL_LABEL, "operator": "In", "values": [*rng.pick(POOLS)]}),
                    _ => json!({"key": POOL_LABEL, "operator": *rng.pick(&["Exists", "DoesNotExist"])}),
                };
                json!({"matchExpressions": [expression]})
            };
            let terms: Vec<Value> = (0..rng.range(1, 2)).map(|_| term(rng)).collect();
            spec["nodeAffinity"] = json!({"nodeSelectorTerms": terms});
            has.push(Feature::NodeAffinity);
        }
        let own_labels = json!({"app": name});
        if features.anti_affinity && rng.chance(30) {
            let key = *rng.pick(&[HOSTNAME_LABEL, ZONE_LABEL]);
            spec["podAntiAffinity"] =
                json!([{"labelSelector": {"matchLabels": own_labels}, "topologyKey": key}]);
            has.push(Feature::AntiAffinity);
        }
        if features.spread && rng.chance(30) {
            let key = *rng.pick(&[HOSTNAME_LABEL, ZONE_LABEL]);
            spec["topologySpreadConstraints"] = json!([{
                "maxSkew": rng.range(1, 2), "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": own_labels}}]);
            has.push(Feature::Spread);
        }
        if features.host_ports && rng.chance(25) {
            spec["hostPorts"] = json!([{"port": *rng.pick(&[8080, 9090])}]);
            has.push(Feature::HostPorts);
        }
        let mut quota = None;
        if features.quota && rng.chance(25) {
            let mut hard = json!({"pods": rng.range(1, 6).to_string()});
            if spec["requests"].get("cpu").is_some() && rng.chance(50) {
                hard = json!({"requests.cpu": *rng.pick(&["1", "2", "1500m"])});
            }
            quota = Some(json!({"apiVersion": "v1", "kind": "ResourceQuota",
                "metadata": {"name": "fits", "namespace": name}, "spec": {"hard": hard}}));
            has.push(Feature::Quota);
        }
        // Constraints that select pods or count them by namespace: the shape's own namespace,
        // where only its replicas run.
        if has
            .iter()
            .any(|f| matches!(f, Feature::AntiAffinity | Feature::Spread | Feature::Quota))
        {
            spec["namespace"] = json!(name);
            spec["podLabels"] = own_labels;
        }
        ShapePlan {
            name: name.to_owned(),
            spec,
            runtime_class,
            quota,
            features: has,
        }
    }
}

/// The RuntimeClass of the existing pods with an overhead.
pub fn existing_runtime_class() -> Value {
    json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
           "metadata": {"name": EXISTING_RUNTIME_CLASS}, "handler": "runc",
           "overhead": {"podFixed": {"cpu": "100m", "memory": "64Mi"}}})
}

/// One case's outcome.
#[derive(Clone, Debug)]
pub struct Outcome {
    pub cluster: usize,
    pub shape: String,
    /// `fits.<shape>` as the agent counted it before the first replica.
    pub agent: u64,
    /// Replicas kube-scheduler bound before one stayed Unschedulable; `capped` when the run
    /// stopped at one more than the agent's count.
    pub scheduler: u64,
    pub capped: bool,
    /// Why the last replica was unschedulable (the PodScheduled message).
    pub message: String,
    pub features: Vec<Feature>,
}

impl Outcome {
    pub fn agrees(&self) -> bool {
        !self.capped && self.agent == self.scheduler
    }
}

/// Outcomes counted by feature.
#[derive(Clone, Debug, Default)]
pub struct Tally {
    pub outcomes: Vec<Outcome>,
}

impl Tally {
    /// A markdown table: for each feature, the cases using it, those where replicas fit, those
    /// that agree and disagree.
    pub fn table(&self) -> String {
        let mut out =
            String::from("| feature | cases | fits > 0 | agree | disagree |\n|---|---:|---:|---:|---:|\n");
        let row = |label: &str, cases: Vec<&Outcome>| {
            let above = cases.iter().filter(|o| o.scheduler > 0).count();
            let agree = cases.iter().filter(|o| o.agrees()).count();
            format!(
                "| {label} | {} | {above} | {agree} | {} |\n",
                cases.len(),
                cases.len() - agree
            )
        };
        for feature in Feature::ALL {
            let cases: Vec<&Outcome> = self
                .outcomes
                .iter()
                .filter(|o| o.features.contains(&feature))
                .collect();
            out.push_str(&row(feature.label(), cases));
        }
        out.push_str(&row("**all**", self.outcomes.iter().collect()));
        out
    }

    pub fn disagreements(&self) -> Vec<&Outcome> {
        self.outcomes.iter().filter(|o| !o.agrees()).collect()
    }

    pub fn above_zero(&self) -> usize {
        self.outcomes.iter().filter(|o| o.scheduler > 0).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_clusters() {
        let make = |seed| {
            let mut rng = Rng::new(seed);
            (0..3)
                .map(|i| ClusterPlan::generate(&mut rng, i, 5, Features::default()))
                .collect::<Vec<_>>()
        };
        assert_eq!(make(7), make(7));
        assert_ne!(make(7), make(8));
    }

    #[test]
    fn replicas_carry_what_the_shape_states() {
        let mut rng = Rng::new(3);
        let shapes: Vec<ShapePlan> = (0..200)
            .map(|i| ShapePlan::generate(&mut rng, &format!("s{i}"), all_features()))
            .collect();
        for shape in &shapes {
            let pod = shape.replica(0);
            assert_eq!(
                pod["spec"]["containers"][0]["resources"]["requests"],
                shape.spec["requests"]
            );
            assert_eq!(pod["spec"]["nodeSelector"], shape.spec["nodeSelector"]);
            assert_eq!(pod["spec"]["tolerations"], shape.spec["tolerations"]);
            assert_eq!(
                shape
                    .runtime_class
                    .as_ref()
                    .map(|c| c["overhead"]["podFixed"].clone()),
                shape.spec.get("podOverhead").cloned()
            );
            assert_eq!(
                pod["metadata"]["labels"][ocm_score_api::well_known::WORKLOAD_SHAPE_LABEL],
                shape.name.as_str()
            );
        }
        for feature in [
            Feature::ExtendedResource,
            Feature::PodOverhead,
            Feature::TolerateAll,
            Feature::NodeSelector,
        ] {
            assert!(
                shapes.iter().any(|s| s.features.contains(&feature)),
                "{feature:?}"
            );
        }
        let mut rng = Rng::new(1);
        for i in 0..200 {
            let off = ShapePlan::generate(&mut rng, &format!("x{i}"), Features::default());
            assert!(
                off.features.iter().all(|f| !matches!(
                    f,
                    Feature::TolerateAll
                        | Feature::NodeAffinity
                        | Feature::AntiAffinity
                        | Feature::Spread
                        | Feature::HostPorts
                        | Feature::Quota
                )),
                "{off:?}"
            );
            assert_eq!(off.namespace(), REPLICA_NAMESPACE);
        }
    }
}
