//! What the agent's benchmarks share (included by each with `mod support;`): the synthetic
//! cluster's nodes and pods, and the timing and printing of the result table.

use ocm_score_agent::accounting::SlimPod;
use ocm_score_agent::accounting::objects::{
    ResourceList, SlimContainer, SlimNode, SlimNodeCondition, SlimNodeSpec, SlimNodeStatus, SlimPodSpec,
    SlimPodStatus, SlimResources,
};
use ocm_score_agent::accounting::quantity::QuantityText;
use ocm_score_api::ObjectMeta;
use std::time::Duration;

pub fn list(entries: &[(&str, &str)]) -> ResourceList {
    ResourceList(
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), QuantityText((*v).to_owned())))
            .collect(),
    )
}

pub fn node_name(i: usize) -> String {
    format!("ip-10-{}-{}-{}.ec2.internal", i / 65536, (i / 256) % 256, i % 256)
}

/// An m6i.8xlarge-like node; every tenth has 8 GPUs, every 97th is cordoned, every 211th not Ready.
pub fn node(i: usize) -> SlimNode {
    let gpu = if i.is_multiple_of(10) { "8" } else { "0" };
    SlimNode {
        metadata: ObjectMeta {
            name: Some(node_name(i)),
            ..Default::default()
        },
        spec: SlimNodeSpec {
            unschedulable: Some(i.is_multiple_of(97)),
            ..Default::default()
        },
        status: SlimNodeStatus {
            allocatable: list(&[
                ("cpu", "31850m"),
                ("memory", "126498524Ki"),
                ("ephemeral-storage", "95492233231"),
                ("nvidia.com/gpu", gpu),
                ("pods", "110"),
            ]),
            conditions: vec![SlimNodeCondition {
                type_: "Ready".into(),
                status: if i.is_multiple_of(211) { "False" } else { "True" }.into(),
            }],
        },
    }
}

/// A realistic mix: most pods one or two containers, some with an init container, a sidecar,
/// overhead or a GPU (every 50th). `variant` changes the app's CPU request; a pod bound to no
/// `node` is pending.
pub fn pod(i: usize, variant: usize, node: Option<String>) -> SlimPod {
    let container = |name: &str, cpu: &str, memory: &str| SlimContainer {
        name: name.into(),
        restart_policy: None,
        resources: SlimResources {
            requests: list(&[("cpu", cpu), ("memory", memory)]),
        },
        ports: Vec::new(),
    };
    let mut containers = vec![container(
        "app",
        ["250m", "500m", "1", "100m"][(i + variant) % 4],
        ["512Mi", "1Gi", "256Mi"][i % 3],
    )];
    if i.is_multiple_of(3) {
        containers.push(container("log-shipper", "50m", "64Mi"));
    }
    if i.is_multiple_of(50) {
        containers[0]
            .resources
            .requests
            .0
            .push(("nvidia.com/gpu".into(), QuantityText("1".into())));
    }
    let mut init_containers = Vec::new();
    if i.is_multiple_of(5) {
        init_containers.push(container("migrate", "1", "2Gi"));
    }
    if i.is_multiple_of(7) {
        let mut proxy = container("proxy", "100m", "128Mi");
        proxy.restart_policy = Some("Always".into());
        init_containers.insert(0, proxy);
    }
    let pending = node.is_none();
    SlimPod {
        metadata: ObjectMeta {
            name: Some(format!(
                "{}-{}-7d9f8b6c5d-{:05x}",
                if pending { "queued" } else { "web" },
                i / 100,
                i
            )),
            namespace: Some(format!("team-{}", i % 300)),
            ..Default::default()
        },
        spec: SlimPodSpec {
            node_name: node,
            containers,
            init_containers,
            overhead: if i.is_multiple_of(11) {
                list(&[("cpu", "10m"), ("memory", "20Mi")])
            } else {
                ResourceList::default()
            },
        },
        status: SlimPodStatus {
            phase: Some(if pending { "Pending" } else { "Running" }.into()),
        },
    }
}

/// What the watches do on start, for the ledger or the fits index (they take the same calls): the
/// initial lists of `$nodes` and `$pods` fed into `$index`, which the expression gives back.
macro_rules! initial_lists {
    ($index:expr, $nodes:expr, $pods:expr) => {{
        let mut index = $index;
        index.reserve_pods($pods.len());
        index.begin_node_relist();
        index.begin_pod_relist();
        for n in $nodes {
            index.apply_node(n).expect("valid node");
        }
        for p in $pods {
            index.apply_pod(p).expect("valid pod");
        }
        index.finish_node_relist();
        index.finish_pod_relist();
        index
    }};
}
pub(crate) use initial_lists;

pub fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

pub fn fmt(d: Duration) -> String {
    if d >= Duration::from_millis(1) {
        format!("{:.1} ms", d.as_secs_f64() * 1e3)
    } else if d >= Duration::from_micros(1) {
        format!("{:.2} µs", d.as_secs_f64() * 1e6)
    } else {
        format!("{} ns", d.as_nanos())
    }
}

/// The rows `(measurement, result, goal)` as a markdown table.
pub fn print_table(rows: Vec<(String, String, String)>) {
    println!("| measurement | result | goal |");
    println!("|---|---|---|");
    for (what, result, goal) in rows {
        println!("| {what} | {result} | {goal} |");
    }
}
