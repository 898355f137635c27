//! The fits counts through the public interface: worked examples (fragmentation, cordoned nodes,
//! taints, ...) and property tests against a one-replica-at-a-time simulation.
//!
//! Over 800 lines on purpose: tests only, each example a self-contained cluster, read one by one.

use super::fits::{FitsIndex, FitsOptions, NeedsRelist, ShapeProblem, compile_shapes};
use super::objects::{
    ResourceList, SlimContainer, SlimNode, SlimNodeCondition, SlimNodeSpec, SlimNodeStatus, SlimPod,
    SlimPodSpec, SlimPodStatus, SlimResources, SlimTaint,
};
use super::quantity::QuantityText;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use ocm_score_api::WorkloadShape;
use ocm_score_api::crd::workload_shape::decode_fits;
use proptest::prelude::*;
use std::collections::BTreeMap;

fn list(entries: &[(&str, String)]) -> ResourceList {
    ResourceList(
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), QuantityText(v.clone())))
            .collect(),
    )
}

/// A node as the tests describe it.
#[derive(Clone, Debug)]
struct N {
    name: String,
    cpu_m: u32,
    gpu: Option<u32>,
    pods: u32,
    ready: bool,
    cordoned: bool,
    pool: Option<&'static str>,
    /// `(key, effect)`.
    taint: Option<(&'static str, &'static str)>,
}

fn n(name: &str, cpu_m: u32, gpu: Option<u32>, pods: u32) -> N {
    N {
        name: name.into(),
        cpu_m,
        gpu,
        pods,
        ready: true,
        cordoned: false,
        pool: None,
        taint: None,
    }
}

impl N {
    fn slim(&self) -> SlimNode {
        let mut allocatable = vec![
            ("cpu", format!("{}m", self.cpu_m)),
            ("memory", "64Gi".to_owned()),
            ("pods", self.pods.to_string()),
        ];
        if let Some(g) = self.gpu {
            allocatable.push(("nvidia.com/gpu", g.to_string()));
        }
        SlimNode {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                labels: self
                    .pool
                    .map(|p| BTreeMap::from([("pool".to_owned(), p.to_owned())])),
                ..Default::default()
            },
            spec: SlimNodeSpec {
                unschedulable: Some(self.cordoned),
                taints: self
                    .taint
                    .map(|(key, effect)| SlimTaint {
                        key: key.into(),
                        value: Some("yes".into()),
                        effect: effect.into(),
                    })
                    .into_iter()
                    .collect(),
            },
            status: SlimNodeStatus {
                allocatable: list(&allocatable),
                conditions: vec![SlimNodeCondition {
                    type_: "Ready".into(),
                    status: if self.ready { "True" } else { "False" }.into(),
                }],
            },
        }
    }
}

/// A pod as the tests describe it.
#[derive(Clone, Debug)]
struct P {
    name: String,
    node: Option<String>,
    cpu_m: u32,
    gpu: u32,
    /// A plain init container's cpu.
    init_cpu_m: Option<u32>,
    /// A sidecar's cpu.
    sidecar_cpu_m: Option<u32>,
    /// Whether the sidecar is listed before the plain init container (it then runs beside it).
    sidecar_first: bool,
    /// The pod overhead's cpu.
    overhead_cpu_m: Option<u32>,
    terminal: bool,
}

fn p(name: &str, node: Option<&str>, cpu_m: u32, gpu: u32) -> P {
    P {
        name: name.into(),
        node: node.map(Into::into),
        cpu_m,
        gpu,
        init_cpu_m: None,
        sidecar_cpu_m: None,
        sidecar_first: true,
        overhead_cpu_m: None,
        terminal: false,
    }
}

impl P {
    fn slim(&self) -> SlimPod {
        let container = |name: &str, cpu_m: u32, gpu: u32, sidecar: bool| {
            let mut requests = vec![("cpu", format!("{cpu_m}m"))];
            if gpu > 0 {
                requests.push(("nvidia.com/gpu", gpu.to_string()));
            }
            SlimContainer {
                name: name.into(),
                restart_policy: sidecar.then(|| "Always".to_owned()),
                resources: SlimResources {
                    requests: list(&requests),
                },
                ports: Vec::new(),
            }
        };
        let mut init_containers = Vec::new();
        if let Some(c) = self.init_cpu_m {
            init_containers.push(container("setup", c, 0, false));
        }
        if let Some(c) = self.sidecar_cpu_m {
            let at = if self.sidecar_first {
                0
            } else {
                init_containers.len()
            };
            init_containers.insert(at, container("proxy", c, 0, true));
        }
        SlimPod {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            spec: SlimPodSpec {
                node_name: self.node.clone(),
                containers: vec![container("app", self.cpu_m, self.gpu, false)],
                init_containers,
                overhead: self
                    .overhead_cpu_m
                    .map_or_else(ResourceList::default, |c| list(&[("cpu", format!("{c}m"))])),
            },
            status: SlimPodStatus {
                phase: Some(if self.terminal { "Succeeded" } else { "Running" }.into()),
            },
        }
    }
}

fn shape(name: &str, yaml: &str) -> WorkloadShape {
    WorkloadShape {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: serde_norway::from_str(yaml).expect("shape yaml"),
    }
}

fn index(shapes: &[WorkloadShape], options: FitsOptions, nodes: &[N], pods: &[P]) -> FitsIndex {
    let (set, problems) = compile_shapes(shapes);
    assert_eq!(problems, vec![], "the test's shapes are valid");
    let mut index = FitsIndex::new(set, options);
    for node in nodes {
        index.apply_node(&node.slim()).expect("valid node");
    }
    for pod in pods {
        index.apply_pod(&pod.slim()).expect("valid pod");
    }
    index
}

fn replicas(index: &mut FitsIndex) -> Vec<u64> {
    index.fits().into_iter().map(|f| f.replicas).collect()
}

fn one(yaml: &str, nodes: &[N], pods: &[P]) -> u64 {
    replicas(&mut index(
        &[shape("s", yaml)],
        FitsOptions::default(),
        nodes,
        pods,
    ))[0]
}

// ---------------------------------------------------------------------------------------------
// Worked examples

#[test]
fn fragmentation_two_nodes_with_three_free_gpus_fit_two_two_gpu_replicas() {
    let nodes = [n("a", 32_000, Some(4), 110), n("b", 32_000, Some(4), 110)];
    let pods = [p("x", Some("a"), 100, 1), p("y", Some("b"), 100, 1)];
    assert_eq!(one("requests: {nvidia.com/gpu: 2}", &nodes, &pods), 2, "not 3");
    assert_eq!(one("requests: {nvidia.com/gpu: 1}", &nodes, &pods), 6);
    assert_eq!(one("requests: {nvidia.com/gpu: 4}", &nodes, &pods), 0);
}

#[test]
fn a_cordoned_or_not_ready_node_takes_nothing() {
    let mut cordoned = n("b", 4000, None, 110);
    cordoned.cordoned = true;
    let mut not_ready = n("c", 4000, None, 110);
    not_ready.ready = false;
    let nodes = [n("a", 4000, None, 110), cordoned.clone(), not_ready];
    assert_eq!(one("requests: {cpu: 1}", &nodes, &[]), 4);
    let mut idx = index(
        &[shape("s", "requests: {cpu: 1}")],
        FitsOptions::default(),
        &nodes,
        &[],
    );
    cordoned.cordoned = false;
    idx.apply_node(&cordoned.slim()).expect("valid");
    assert_eq!(replicas(&mut idx), [8], "uncordoned, it counts at once");
}

#[test]
fn untolerated_no_schedule_and_no_execute_taints_exclude_a_node() {
    let taint = |name: &str, effect| N {
        taint: Some(("nvidia.com/gpu", effect)),
        ..n(name, 4000, Some(1), 110)
    };
    let nodes = [
        taint("a", "NoSchedule"),
        taint("b", "NoExecute"),
        taint("c", "PreferNoSchedule"),
    ];
    assert_eq!(
        one("requests: {nvidia.com/gpu: 1}", &nodes, &[]),
        1,
        "only the preference"
    );
    let tolerant = "requests: {nvidia.com/gpu: 1}\ntolerations: [{key: nvidia.com/gpu, operator: Exists}]";
    assert_eq!(one(tolerant, &nodes, &[]), 3);
    let no_schedule_only = "requests: {nvidia.com/gpu: 1}\n\
        tolerations: [{key: nvidia.com/gpu, operator: Equal, value: \"yes\", effect: NoSchedule}]";
    assert_eq!(
        one(no_schedule_only, &nodes, &[]),
        2,
        "the NoExecute taint stays untolerated"
    );
    let wrong_value = "requests: {nvidia.com/gpu: 1}\ntolerations: [{key: nvidia.com/gpu, value: \"no\"}]";
    assert_eq!(one(wrong_value, &nodes, &[]), 1);
    let everything = "requests: {nvidia.com/gpu: 1}\ntolerations: [{operator: Exists}]";
    assert_eq!(one(everything, &nodes, &[]), 3);
}

#[test]
fn node_selector_must_match_the_labels() {
    let labelled = |name: &str, pool| N {
        pool: Some(pool),
        ..n(name, 4000, None, 110)
    };
    let nodes = [
        labelled("a", "a100"),
        labelled("b", "t4"),
        n("c", 4000, None, 110),
    ];
    assert_eq!(
        one("requests: {cpu: 1}\nnodeSelector: {pool: a100}", &nodes, &[]),
        4
    );
    assert_eq!(one("requests: {cpu: 1}", &nodes, &[]), 12);
}

#[test]
fn a_node_without_a_requested_extended_resource_takes_nothing() {
    let nodes = [n("gpu", 8000, Some(2), 110), n("cpu", 8000, None, 110)];
    assert_eq!(one("requests: {cpu: 1, nvidia.com/gpu: 1}", &nodes, &[]), 2);
    assert_eq!(one("requests: {cpu: 1, example.com/fpga: 1}", &nodes, &[]), 0);
    assert_eq!(one("requests: {cpu: 1}", &nodes, &[]), 16);
}

#[test]
fn free_pod_slots_bound_the_count() {
    let nodes = [n("a", 64_000, None, 3)];
    let pods = [p("x", Some("a"), 100, 0), p("y", Some("a"), 100, 0)];
    assert_eq!(one("requests: {cpu: 100m}", &nodes, &pods), 1);
    let mut done = p("z", Some("a"), 100, 0);
    done.terminal = true;
    let with_terminal = [pods[0].clone(), pods[1].clone(), done];
    assert_eq!(
        one("requests: {cpu: 100m}", &nodes, &with_terminal),
        1,
        "a finished pod takes no slot"
    );
}

#[test]
fn init_containers_and_sidecars_count_by_the_effective_request_rule() {
    let nodes = [n("a", 4000, None, 110)];
    let mut init = p("x", Some("a"), 1000, 0);
    init.init_cpu_m = Some(3000);
    assert_eq!(
        one("requests: {cpu: 1}", &nodes, &[init]),
        1,
        "max(1, 3) = 3 taken"
    );
    let mut sidecar = p("y", Some("a"), 1000, 0);
    sidecar.sidecar_cpu_m = Some(1000);
    assert_eq!(
        one("requests: {cpu: 1}", &nodes, &[sidecar]),
        2,
        "1 + 1 = 2 taken"
    );
    assert_eq!(
        one("requests: {cpu: 1}\npodOverhead: {cpu: 1}", &nodes, &[]),
        2,
        "the shape's own overhead makes each replica 2 cores"
    );
}

#[test]
fn a_shape_without_requests_counts_free_pod_slots() {
    let nodes = [n("a", 1000, None, 10), n("b", 0, None, 5)];
    let pods: Vec<P> = (0..4).map(|i| p(&format!("p{i}"), Some("a"), 250, 0)).collect();
    assert_eq!(one("{}", &nodes, &pods), 6 + 5);
}

#[test]
fn pending_pods_are_deducted_first_fit_in_name_order() {
    let nodes = [n("b", 4000, None, 110), n("a", 4000, None, 110)];
    // In key order: p1 (3) goes on a; p2 (2) does not fit a's 1 left, goes on b; p3 (5) fits nowhere.
    let pending = [
        p("p2", None, 2000, 0),
        p("p1", None, 3000, 0),
        p("p3", None, 5000, 0),
    ];
    let shapes = [
        shape("two", "requests: {cpu: 2}"),
        shape("one", "requests: {cpu: 1}"),
    ];
    let mut idx = index(&shapes, FitsOptions::default(), &nodes, &pending);
    // a: 1 free → 0 of two, 1 of one; b: 2 free → 1 of two, 2 of one.
    assert_eq!(replicas(&mut idx), [3, 1], "shapes come in name order: one, two");
    assert_eq!(idx.pending_pods(), 3);
    idx.set_options(FitsOptions {
        deduct_pending: false,
    });
    assert_eq!(replicas(&mut idx), [8, 4]);
    idx.set_options(FitsOptions::default());
    // p1 gets bound where first-fit put it: nothing moves.
    idx.apply_pod(&p("p1", Some("a"), 3000, 0).slim()).expect("valid");
    assert_eq!(replicas(&mut idx), [3, 1]);
    // p2 is deleted: b is free again.
    idx.delete_pod("ns", "p2");
    assert_eq!(replicas(&mut idx), [5, 2]);
}

/// First-fit deduction is an estimate with a known anomaly: a pod that fits nowhere is not
/// deducted, so a new pod that crowds a pending one out of its only node frees that node's room
/// for the shape. (The property test of monotonicity therefore runs without pending deduction.)
#[test]
fn first_fit_deduction_is_not_monotone() {
    let nodes = [n("a", 4000, None, 110)];
    let shapes = [shape("s", "requests: {cpu: 1}")];
    let mut idx = index(&shapes, FitsOptions::default(), &nodes, &[p("q", None, 4000, 0)]);
    assert_eq!(replicas(&mut idx), [0], "q would take all of a");
    idx.apply_pod(&p("b", Some("a"), 1000, 0).slim()).expect("valid");
    assert_eq!(
        replicas(&mut idx),
        [3],
        "q fits nowhere now, so nothing of it is deducted"
    );
}

#[test]
fn pending_pods_go_only_to_the_shapes_eligible_nodes() {
    let mut gpu = n("a", 4000, Some(1), 110);
    gpu.taint = Some(("gpu", "NoSchedule"));
    let nodes = [gpu, n("b", 4000, None, 110)];
    let shapes = [
        shape("cpu", "requests: {cpu: 1}"),
        shape(
            "gpu",
            "requests: {cpu: 1, nvidia.com/gpu: 1}\ntolerations: [{key: gpu, operator: Exists}]",
        ),
    ];
    let mut idx = index(&shapes, FitsOptions::default(), &nodes, &[p("w", None, 4000, 0)]);
    // For "cpu" only b is eligible, the pending pod fills it; for "gpu" it lands on a.
    assert_eq!(replicas(&mut idx), [0, 0]);
    idx.delete_pod("ns", "w");
    assert_eq!(replicas(&mut idx), [4, 1]);
}

#[test]
fn events_move_the_counts_and_a_relist_drops_what_is_gone() {
    let nodes = [n("a", 4000, Some(2), 110), n("b", 4000, None, 110)];
    let mut idx = index(
        &[shape("s", "requests: {cpu: 1}")],
        FitsOptions::default(),
        &nodes,
        &[],
    );
    assert_eq!(replicas(&mut idx), [8]);
    idx.apply_pod(&p("x", Some("a"), 2000, 0).slim()).expect("valid");
    assert_eq!(replicas(&mut idx), [6]);
    idx.apply_pod(&p("x", Some("b"), 3000, 0).slim()).expect("valid");
    assert_eq!(replicas(&mut idx), [5], "moved and resized");
    idx.delete_node("b");
    assert_eq!(replicas(&mut idx), [4]);
    idx.apply_node(&nodes[1].slim()).expect("valid");
    assert_eq!(
        replicas(&mut idx),
        [5],
        "its pod is still counted when it returns"
    );
    idx.begin_node_relist();
    idx.begin_pod_relist();
    idx.apply_node(&nodes[0].slim()).expect("valid");
    idx.finish_node_relist();
    idx.finish_pod_relist();
    assert_eq!(replicas(&mut idx), [4], "b and x were not listed again");
}

#[test]
fn unreadable_objects_are_reported_and_not_counted() {
    let mut idx = index(
        &[shape("s", "requests: {cpu: 1}")],
        FitsOptions::default(),
        &[n("a", 4000, None, 110)],
        &[],
    );
    let mut bad = p("x", Some("a"), 1000, 0).slim();
    bad.spec.containers[0].resources.requests.0[0].1 = QuantityText("one".into());
    let err = idx.apply_pod(&bad).expect_err("invalid");
    assert!(
        err.to_string()
            .starts_with("pod ns/x: container \"app\" requests cpu"),
        "{err}"
    );
    assert_eq!((replicas(&mut idx), idx.invalid_objects().count()), (vec![4], 1));
    idx.delete_pod("ns", "x");
    assert_eq!(idx.invalid_objects().count(), 0);
    let mut node = n("a", 4000, None, 110).slim();
    node.status.allocatable.0[2].1 = QuantityText("many".into());
    assert!(idx.apply_node(&node).is_err());
    assert_eq!(replicas(&mut idx), [0], "an unreadable node takes nothing");
}

#[test]
fn extreme_allocatable_values_saturate_instead_of_overflowing() {
    let mut idx = index(&[shape("s", "{}")], FitsOptions::default(), &[], &[]);
    for i in 0..3 {
        let mut node = n(&format!("big{i}"), 1000, None, 0).slim();
        node.status.allocatable.0[2].1 = QuantityText("9e18".into());
        idx.apply_node(&node).expect("valid");
    }
    let mut negative = n("neg", 1000, None, 0).slim();
    negative.status.allocatable.0[2].1 = QuantityText("-5".into());
    idx.apply_node(&negative).expect("valid");
    idx.apply_pod(&p("x", Some("neg"), 0, 0).slim()).expect("valid");
    let fits = idx.fits();
    assert_eq!((fits[0].replicas, fits[0].value), (u64::MAX, 100));
    idx.delete_node("big0");
    idx.delete_node("big1");
    assert_eq!(
        replicas(&mut idx),
        [9_000_000_000_000_000_000],
        "the negative node adds nothing"
    );
}

#[test]
fn compiling_reports_each_skipped_shape_by_name() {
    let mut shapes = vec![
        shape("ok", "requests: {cpu: 1}"),
        shape("zero-scale", "scale: 0"),
        shape("huge", "requests: {memory: 1e999}"),
    ];
    for i in 0..13 {
        shapes.push(shape(
            &format!("x{i:02}"),
            &format!("requests: {{example.com/r{i}: 1}}"),
        ));
    }
    let (set, problems) = compile_shapes(&shapes);
    let mut skipped: Vec<(&str, &str)> = problems.iter().map(|p| (p.shape(), p.reason())).collect();
    skipped.sort();
    assert_eq!(
        skipped,
        [
            ("huge", "InvalidWorkloadShape"),
            ("x12", "InvalidWorkloadShape"),
            ("zero-scale", "InvalidWorkloadShape"),
        ],
        "{problems:#?}"
    );
    assert!(
        problems
            .iter()
            .any(|p| matches!(p, ShapeProblem::TooManyResources { shape, .. } if shape == "x12")),
        "{problems:#?}"
    );
    let names: Vec<&str> = set.names().collect();
    assert_eq!(names.len(), 13, "ok and x00..x11");
    assert_eq!(set.resources().len(), 16, "4 built in and 12 extended");
    for problem in &problems {
        assert!(problem.to_string().contains(problem.shape()), "{problem}");
    }

    let many: Vec<WorkloadShape> = (0..33).map(|i| shape(&format!("s{i:02}"), "{}")).collect();
    let (set, problems) = compile_shapes(&many);
    assert_eq!(set.len(), 32);
    assert_eq!(problems.len(), 1);
    assert_eq!(
        (problems[0].shape(), problems[0].reason()),
        ("s32", "TooManyWorkloadShapes")
    );
}

#[test]
fn shapes_change_in_place_over_tracked_resources_and_ask_for_a_relist_otherwise() {
    let nodes = [n("a", 4000, Some(2), 110)];
    let mut idx = index(
        &[shape("s", "requests: {cpu: 1, nvidia.com/gpu: 1}")],
        FitsOptions::default(),
        &nodes,
        &[p("x", Some("a"), 1000, 0)],
    );
    assert_eq!(replicas(&mut idx), [2]);
    let (set, _) = compile_shapes(&[shape("s", "requests: {cpu: 1}"), shape("t", "{}")]);
    assert_eq!(
        idx.set_shapes(set.clone()),
        Ok(true),
        "same resources, other shapes"
    );
    assert_eq!(replicas(&mut idx), [3, 109]);
    assert_eq!(idx.set_shapes(set), Ok(false), "the same set again moves nothing");
    assert_eq!(replicas(&mut idx), [3, 109]);
    let (set, _) = compile_shapes(&[shape("f", "requests: {example.com/fpga: 1}")]);
    assert_eq!(idx.set_shapes(set), Err(NeedsRelist));
    assert_eq!(replicas(&mut idx), [3, 109], "unchanged");
}

#[test]
fn score_items_carry_encoded_values() {
    let nodes = [n("a", 300_000, None, 1000)];
    let mut idx = index(
        &[
            shape("big", "requests: {cpu: 1}"),
            shape("small", "requests: {cpu: 1}\nscale: 10"),
        ],
        FitsOptions::default(),
        &nodes,
        &[],
    );
    let items = idx.score_items();
    assert_eq!(items[0].name, "fits.big");
    assert_eq!(items[0].value, 100, "300 replicas saturate at scale 1");
    assert_eq!((items[1].name.as_str(), items[1].value), ("fits.small", -70));
    assert_eq!(decode_fits(items[1].value, 10).at_least, 300);
}

// ---------------------------------------------------------------------------------------------
// Properties

/// A shape as the properties generate it.
#[derive(Clone, Debug)]
struct S {
    cpu_m: u32,
    gpu: u32,
    overhead_m: u32,
    pool: Option<&'static str>,
    tolerates_gpu: bool,
    scale: i32,
}

impl S {
    fn resource(&self, name: &str) -> WorkloadShape {
        let mut requests = Vec::new();
        if self.cpu_m > 0 {
            requests.push(format!("cpu: {}m", self.cpu_m));
        }
        if self.gpu > 0 {
            requests.push(format!("nvidia.com/gpu: {}", self.gpu));
        }
        let mut yaml = format!("requests: {{{}}}\nscale: {}\n", requests.join(", "), self.scale);
        if self.overhead_m > 0 {
            yaml.push_str(&format!("podOverhead: {{cpu: {}m}}\n", self.overhead_m));
        }
        if let Some(pool) = self.pool {
            yaml.push_str(&format!("nodeSelector: {{pool: {pool}}}\n"));
        }
        if self.tolerates_gpu {
            yaml.push_str("tolerations: [{key: gpu, operator: Exists, effect: NoSchedule}]\n");
        }
        shape(name, &yaml)
    }

    fn eligible(&self, node: &N) -> bool {
        let taint_ok = match node.taint {
            Some((_, "PreferNoSchedule")) | None => true,
            Some((key, effect)) => self.tolerates_gpu && key == "gpu" && effect == "NoSchedule",
        };
        node.ready
            && !node.cordoned
            && taint_ok
            && self.pool.is_none_or(|p| node.pool == Some(p))
            && (self.gpu == 0 || node.gpu.is_some())
    }
}

/// (cpu millicores, gpus) a pod takes, by Kubernetes' rule written out here on its own, so that
/// the agent's `effective_requests` is checked, not reused: max(apps + sidecars, the init peak) +
/// overhead, where the init peak is the largest of each init container's request plus the
/// sidecars listed before it (a sidecar's own peak is itself, with none before it here). Only the
/// app container asks for GPUs.
fn taken(pod: &P) -> (i64, i64) {
    let sidecar = pod.sidecar_cpu_m.unwrap_or(0);
    let sidecars_before_init = if pod.sidecar_first { sidecar } else { 0 };
    let init_peak = pod
        .init_cpu_m
        .map_or(0, |init| init + sidecars_before_init)
        .max(sidecar);
    let cpu = (pod.cpu_m + sidecar).max(init_peak) + pod.overhead_cpu_m.unwrap_or(0);
    (i64::from(cpu), i64::from(pod.gpu))
}

/// The reference: pending pods first-fit, then replicas placed one at a time while any node has
/// room.
fn simulate(shape: &S, nodes: &[N], pods: &[P], deduct_pending: bool) -> u64 {
    let mut nodes: Vec<&N> = nodes.iter().collect();
    nodes.sort_by(|a, b| a.name.cmp(&b.name));
    let mut room: Vec<(i64, i64, i64)> = nodes
        .iter()
        .map(|n| {
            (
                i64::from(n.pods),
                i64::from(n.cpu_m),
                i64::from(n.gpu.unwrap_or(0)),
            )
        })
        .collect();
    for pod in pods.iter().filter(|p| !p.terminal) {
        if let Some(i) = pod
            .node
            .as_ref()
            .and_then(|name| nodes.iter().position(|n| &n.name == name))
        {
            let (cpu, gpu) = taken(pod);
            room[i] = (room[i].0 - 1, room[i].1 - cpu, room[i].2 - gpu);
        }
    }
    let fits = |room: &(i64, i64, i64), cpu: i64, gpu: i64| {
        room.0 >= 1 && (cpu <= 0 || room.1 >= cpu) && (gpu <= 0 || room.2 >= gpu)
    };
    if deduct_pending {
        let mut pending: Vec<&P> = pods.iter().filter(|p| !p.terminal && p.node.is_none()).collect();
        pending.sort_by(|a, b| a.name.cmp(&b.name));
        for pod in pending {
            let (cpu, gpu) = taken(pod);
            if let Some(i) = (0..nodes.len()).find(|&i| shape.eligible(nodes[i]) && fits(&room[i], cpu, gpu))
            {
                room[i] = (room[i].0 - 1, room[i].1 - cpu, room[i].2 - gpu);
            }
        }
    }
    let (cpu, gpu) = (i64::from(shape.cpu_m + shape.overhead_m), i64::from(shape.gpu));
    let mut count = 0;
    while let Some(i) = (0..nodes.len()).find(|&i| shape.eligible(nodes[i]) && fits(&room[i], cpu, gpu)) {
        room[i] = (room[i].0 - 1, room[i].1 - cpu, room[i].2 - gpu);
        count += 1;
        assert!(count < 100_000, "the generated clusters are small");
    }
    count
}

fn arb_node(i: usize) -> impl Strategy<Value = N> {
    (
        0u32..=8,
        prop::option::of(0u32..=4),
        0u32..=6,
        prop::bool::weighted(0.85),
        prop::bool::weighted(0.1),
        prop::option::of(prop::sample::select(vec!["a", "b"])),
        prop::option::of(prop::sample::select(vec![
            ("gpu", "NoSchedule"),
            ("gpu", "NoExecute"),
            ("spot", "PreferNoSchedule"),
        ])),
    )
        .prop_map(move |(cpu, gpu, pods, ready, cordoned, pool, taint)| N {
            name: format!("n{i}"),
            cpu_m: cpu * 500,
            gpu,
            pods,
            ready,
            cordoned,
            pool,
            taint,
        })
}

fn arb_pod(name: String, nodes: usize) -> impl Strategy<Value = P> {
    (
        prop::option::of(0..nodes),
        0u32..=12,
        0u32..=2,
        prop::option::of(0u32..=12),
        prop::option::of(0u32..=4),
        any::<bool>(),
        prop::option::of(1u32..=2),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            move |(node, cpu, gpu, init, sidecar, sidecar_first, overhead, terminal)| P {
                name: name.clone(),
                node: node.map(|i| format!("n{i}")),
                cpu_m: cpu * 250,
                gpu,
                init_cpu_m: init.map(|c| c * 250),
                sidecar_cpu_m: sidecar.map(|c| c * 250),
                sidecar_first,
                overhead_cpu_m: overhead.map(|c| c * 250),
                terminal,
            },
        )
}

fn arb_shape() -> impl Strategy<Value = S> {
    (
        0u32..=8,
        0u32..=2,
        prop::sample::select(vec![0u32, 0, 250]),
        prop::option::of(prop::sample::select(vec!["a", "b"])),
        any::<bool>(),
        prop::sample::select(vec![1, 1, 2, 3]),
    )
        .prop_map(|(cpu, gpu, overhead_m, pool, tolerates_gpu, scale)| S {
            cpu_m: cpu * 250,
            gpu,
            overhead_m,
            pool,
            tolerates_gpu,
            scale,
        })
}

fn arb_cluster() -> impl Strategy<Value = (Vec<N>, Vec<P>, Vec<S>)> {
    (1usize..=6).prop_flat_map(|nodes| {
        let node_list: Vec<_> = (0..nodes).map(arb_node).collect();
        (
            node_list,
            (0usize..=12).prop_flat_map(move |pods| {
                (0..pods)
                    .map(|i| arb_pod(format!("p{i:02}"), nodes + 1))
                    .collect::<Vec<_>>()
            }),
            prop::collection::vec(arb_shape(), 1..=3),
        )
    })
}

fn shapes_of(shapes: &[S]) -> Vec<WorkloadShape> {
    shapes
        .iter()
        .enumerate()
        .map(|(i, s)| s.resource(&format!("s{i}")))
        .collect()
}

/// An event of the incremental property.
#[derive(Clone, Debug)]
enum Event {
    ApplyPod(P),
    DeletePod(String),
    ApplyNode(N),
    DeleteNode(String),
    Read,
}

fn arb_events(nodes: usize) -> impl Strategy<Value = Vec<Event>> {
    let pod_names = prop::sample::select((0..8).map(|i| format!("p{i:02}")).collect::<Vec<_>>());
    let event = prop_oneof![
        4 => (0usize..8).prop_flat_map(move |i| arb_pod(format!("p{i:02}"), nodes + 1)).prop_map(Event::ApplyPod),
        1 => pod_names.prop_map(Event::DeletePod),
        1 => (0..nodes).prop_flat_map(arb_node).prop_map(Event::ApplyNode),
        1 => (0..nodes).prop_map(|i| Event::DeleteNode(format!("n{i}"))),
        1 => Just(Event::Read),
    ];
    prop::collection::vec(event, 0..40)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn fits_equals_a_one_replica_at_a_time_simulation(
        (nodes, pods, shapes) in arb_cluster(),
        deduct_pending in prop::bool::weighted(0.8),
    ) {
        let options = FitsOptions { deduct_pending };
        let mut idx = index(&shapes_of(&shapes), options, &nodes, &pods);
        let got = idx.fits();
        for (i, s) in shapes.iter().enumerate() {
            let want = simulate(s, &nodes, &pods, deduct_pending);
            prop_assert_eq!(got[i].replicas, want, "shape {:?}", s);
            prop_assert!((-100..=100).contains(&got[i].value));
        }
    }

    /// Bound or pending, a new pod only takes room. (With pending pods deducted first-fit this does
    /// not hold: see `first_fit_deduction_is_not_monotone`.)
    #[test]
    fn adding_a_pod_never_increases_fits(
        (nodes, pods, shapes) in arb_cluster(),
        extra in arb_pod("zz".into(), 6),
    ) {
        let options = FitsOptions { deduct_pending: false };
        let mut idx = index(&shapes_of(&shapes), options, &nodes, &pods);
        let before = replicas(&mut idx);
        idx.apply_pod(&extra.slim()).expect("valid");
        let after = replicas(&mut idx);
        for (b, a) in before.iter().zip(&after) {
            prop_assert!(a <= b, "{:?} → {:?} after {:?}", before, after, extra);
        }
    }

    #[test]
    fn incremental_equals_from_scratch_after_any_events(
        (nodes, pods, shapes) in arb_cluster(),
        events in (1usize..=6).prop_flat_map(arb_events),
    ) {
        let shapes = shapes_of(&shapes);
        let mut idx = index(&shapes, FitsOptions::default(), &nodes, &pods);
        let mut node_objects: BTreeMap<String, N> = nodes.iter().map(|n| (n.name.clone(), n.clone())).collect();
        let mut pod_objects: BTreeMap<String, P> = pods.iter().map(|p| (p.name.clone(), p.clone())).collect();
        for event in events {
            match event {
                Event::ApplyPod(pod) => {
                    idx.apply_pod(&pod.slim()).expect("valid");
                    pod_objects.insert(pod.name.clone(), pod);
                }
                Event::DeletePod(name) => {
                    idx.delete_pod("ns", &name);
                    pod_objects.remove(&name);
                }
                Event::ApplyNode(node) => {
                    idx.apply_node(&node.slim()).expect("valid");
                    node_objects.insert(node.name.clone(), node);
                }
                Event::DeleteNode(name) => {
                    idx.delete_node(&name);
                    node_objects.remove(&name);
                }
                Event::Read => {
                    idx.fits();
                }
            }
        }
        let incremental = replicas(&mut idx);
        let final_nodes: Vec<N> = node_objects.into_values().collect();
        let final_pods: Vec<P> = pod_objects.into_values().collect();
        let mut scratch = index(&shapes, FitsOptions::default(), &final_nodes, &final_pods);
        prop_assert_eq!(&incremental, &replicas(&mut scratch));
        idx.recompute();
        prop_assert_eq!(&incremental, &replicas(&mut idx));
    }
}

#[test]
fn an_index_without_shapes_keeps_no_objects_still_reports_unreadable_ones_and_asks_for_a_relist() {
    let mut idx = index(
        &[],
        FitsOptions::default(),
        &[n("a", 4000, None, 110)],
        &[p("x", Some("a"), 1000, 0), p("y", None, 1000, 0)],
    );
    assert_eq!((replicas(&mut idx), idx.pending_pods()), (vec![], 0));
    let mut bad = p("z", Some("a"), 1000, 0).slim();
    bad.spec.containers[0].resources.requests.0[0].1 = QuantityText("one".into());
    assert!(idx.apply_pod(&bad).is_err());
    assert_eq!(
        idx.invalid_objects().count(),
        1,
        "reported as an index with shapes would"
    );
    idx.delete_pod("ns", "z");
    assert_eq!(idx.invalid_objects().count(), 0);
    let mut node = n("b", 4000, None, 110).slim();
    node.status.allocatable.0[2].1 = QuantityText("many".into());
    assert!(idx.apply_node(&node).is_err(), "a node is still read");
    assert_eq!(idx.invalid_objects().count(), 1);
    idx.delete_node("b");
    assert_eq!(idx.invalid_objects().count(), 0, "and forgotten");
    idx.begin_node_relist();
    idx.finish_node_relist();
    assert_eq!(replicas(&mut idx), Vec::<u64>::new());
    assert_eq!(idx.set_shapes(compile_shapes(&[]).0), Ok(false), "still none");
    let (set, _) = compile_shapes(&[shape("s", "requests: {cpu: 1}")]);
    assert_eq!(
        idx.set_shapes(set),
        Err(NeedsRelist),
        "the pods it did not keep must be listed again"
    );
}
