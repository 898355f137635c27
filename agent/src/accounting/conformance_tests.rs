//! Runs every case of `tests/conformance/pod-accounting/pod-accounting-cases.yaml` (expectations produced by Kubernetes'
//! own accounting code) through the accounting: effective pod requests, per-node free amounts and the
//! two cluster-wide figures, fed in several orders and through deletions and re-lists.

use super::objects::{SlimNode, SlimPod};
use super::pod::effective_requests;
use super::{Ledger, ResourceSet};
use serde::Deserialize;
use std::collections::BTreeMap;

const CASES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/conformance/pod-accounting/pod-accounting-cases.yaml"
);

#[derive(Deserialize)]
struct Case {
    name: String,
    nodes: Vec<SlimNode>,
    #[serde(default)]
    pods: Vec<SlimPod>,
    expect: Expect,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Expect {
    pod_requests: BTreeMap<String, Amounts>,
    node_free: BTreeMap<String, Amounts>,
    cluster: Amounts,
    largest_node: Amounts,
}

#[derive(Deserialize, Debug, PartialEq, Eq, Clone, Copy)]
struct Amounts {
    cpu: i128,
    memory: i128,
    #[serde(rename = "nvidia.com/gpu")]
    gpu: i128,
}

impl Amounts {
    fn from_slice(v: &[i128]) -> Self {
        Amounts {
            cpu: v[0],
            memory: v[1],
            gpu: v[2],
        }
    }
}

fn load() -> Vec<Case> {
    let text = std::fs::read_to_string(CASES).expect("the pod accounting cases are readable");
    serde_norway::from_str(&text).expect("the pod accounting cases decode")
}

fn key(pod: &SlimPod) -> String {
    format!(
        "{}/{}",
        pod.metadata.namespace.as_deref().unwrap_or(""),
        pod.metadata.name.as_deref().unwrap_or("")
    )
}

fn check(case: &Case, ledger: &Ledger, how: &str) {
    for node in &case.nodes {
        let name = node.metadata.name.as_deref().unwrap_or("");
        let free = ledger
            .node_free(name)
            .unwrap_or_else(|| panic!("{} ({how}): node {name} unknown", case.name));
        assert_eq!(
            Amounts::from_slice(&free),
            case.expect.node_free[name],
            "{} ({how}): nodeFree {name}",
            case.name
        );
    }
    let view = ledger.view();
    let figure = |pick: fn(&super::Figures) -> i128| {
        Amounts::from_slice(
            &view
                .figures
                .iter()
                .map(|f| pick(&f.expect("cluster knows every resource")))
                .collect::<Vec<_>>(),
        )
    };
    assert_eq!(
        figure(|f| f.cluster_free),
        case.expect.cluster,
        "{} ({how}): cluster",
        case.name
    );
    assert_eq!(
        figure(|f| f.node_free),
        case.expect.largest_node,
        "{} ({how}): largestNode",
        case.name
    );
}

#[test]
fn every_case_matches_kubernetes() {
    let cases = load();
    assert!(
        cases.len() >= 70,
        "expected the full case set, found {}",
        cases.len()
    );
    println!("{} pod accounting cases", cases.len());
    let resources = ResourceSet::built_in();
    for case in &cases {
        // Effective requests of every pod, whatever its phase or node.
        assert_eq!(case.expect.pod_requests.len(), case.pods.len(), "{}", case.name);
        for pod in &case.pods {
            let got = effective_requests(&pod.spec, &resources).expect("valid requests");
            let got = Amounts {
                cpu: got[0].into(),
                memory: got[1].into(),
                gpu: got[2].into(),
            };
            assert_eq!(
                got,
                case.expect.pod_requests[&key(pod)],
                "{}: podRequests {}",
                case.name,
                key(pod)
            );
        }

        // Nodes first, then pods.
        let mut ledger = Ledger::new(resources.clone());
        for node in &case.nodes {
            ledger.apply_node(node).expect("valid node");
        }
        for pod in &case.pods {
            ledger.apply_pod(pod).expect("valid pod");
        }
        check(case, &ledger, "nodes then pods");

        // Pods first (bound to nodes not seen yet), nodes last, pods applied twice.
        let mut ledger = Ledger::new(resources.clone());
        for pod in case.pods.iter().rev() {
            ledger.apply_pod(pod).expect("valid pod");
        }
        for node in case.nodes.iter().rev() {
            ledger.apply_node(node).expect("valid node");
        }
        for pod in &case.pods {
            ledger.apply_pod(pod).expect("valid pod");
        }
        check(case, &ledger, "pods then nodes");

        // Every pod deleted and re-added, nodes deleted and re-added: the incremental path must be
        // exactly reversible.
        for pod in &case.pods {
            ledger.delete_pod(
                pod.metadata.namespace.as_deref().unwrap_or(""),
                pod.metadata.name.as_deref().unwrap_or(""),
            );
        }
        for node in &case.nodes {
            ledger.delete_node(node.metadata.name.as_deref().unwrap_or(""));
        }
        assert_eq!(ledger.counted_pods(), 0, "{}", case.name);
        assert_eq!(ledger.known_nodes(), 0, "{}", case.name);
        assert_eq!(ledger.eligible_node_count(), 0, "{}", case.name);
        for node in &case.nodes {
            ledger.apply_node(node).expect("valid node");
        }
        for pod in &case.pods {
            ledger.apply_pod(pod).expect("valid pod");
        }
        check(case, &ledger, "after delete and re-add");
        ledger.recompute();
        check(case, &ledger, "after a full recomputation");

        // A re-list that still holds everything changes nothing.
        ledger.begin_node_relist();
        ledger.begin_pod_relist();
        for node in &case.nodes {
            assert!(
                !ledger.apply_node(node).expect("valid node"),
                "{}: re-listed node changed figures",
                case.name
            );
        }
        for pod in &case.pods {
            assert!(
                !ledger.apply_pod(pod).expect("valid pod"),
                "{}: re-listed pod changed figures",
                case.name
            );
        }
        assert!(!ledger.finish_node_relist());
        assert!(!ledger.finish_pod_relist());
        check(case, &ledger, "after an identical re-list");

        // A re-list that holds nothing empties the ledger.
        ledger.begin_pod_relist();
        ledger.finish_pod_relist();
        ledger.begin_node_relist();
        ledger.finish_node_relist();
        assert_eq!(ledger.counted_pods(), 0, "{}", case.name);
        assert_eq!(ledger.known_nodes(), 0, "{}", case.name);
        assert!(
            ledger
                .view()
                .figures
                .iter()
                .all(|f| f.is_some_and(|f| f == super::Figures::default()))
        );
    }
}
