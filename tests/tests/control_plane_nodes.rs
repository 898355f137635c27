//! The agent on a real node: pods with known requests (init containers, a sidecar, a RuntimeClass
//! overhead, one that does not fit) move the agent's free figures exactly as Kubernetes counts
//! them — the reference is the node's allocatable less `kubectl describe node`'s "Allocated
//! resources" — and the `kubelet` source reads the real kubelet's `/metrics/resource` through the
//! API server's node proxy, its memory figure following a pod that holds memory.

use ocm_score_agent::accounting::quantity::{AccountingUnit, parse_quantity};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};
use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::{INSTALL_NAMESPACE, kubectl, workspace_binary};
use ocm_score_control_plane::image::{LOAD, PAUSE};
use ocm_score_tests::support::{Exposition, eventually};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(300);
const NODE: &str = "cluster2-node";

fn run(kubeconfig: &Path, args: &[&str]) -> String {
    kubectl(kubeconfig, args).unwrap_or_else(|e| panic!("{e}"))
}

/// A quantity as `kubectl` prints one (`270m`, `2`, `436Mi`, `16Gi`, `1500k`), in base units, read
/// by the agent's own parser in thousandths.
fn quantity(text: &str) -> f64 {
    let milli = parse_quantity(text.trim(), AccountingUnit::Milli).unwrap_or_else(|e| panic!("{e}"));
    milli as f64 / 1000.0
}

/// Free (allocatable − requested) cpu in cores and memory in bytes, as Kubernetes counts them:
/// `status.allocatable` and the Requests column of `kubectl describe node`'s "Allocated resources".
fn kubernetes_free(kubeconfig: &Path) -> (f64, f64) {
    let allocatable: Value = serde_json::from_str(&run(
        kubeconfig,
        &["get", "node", NODE, "-o", "jsonpath={.status.allocatable}"],
    ))
    .expect("allocatable");
    let describe = run(kubeconfig, &["describe", "node", NODE]);
    let allocated = describe
        .split("Allocated resources:")
        .nth(1)
        .unwrap_or_else(|| panic!("no Allocated resources in:\n{describe}"));
    let requested = |resource: &str| {
        allocated
            .lines()
            .find_map(|l| {
                let mut words = l.split_whitespace();
                (words.next() == Some(resource)).then(|| words.next().map(quantity))
            })
            .flatten()
            .unwrap_or_else(|| panic!("no {resource} row in:\n{allocated}"))
    };
    let alloc = |resource: &str| quantity(allocatable[resource].as_str().expect("allocatable quantity"));
    (
        alloc("cpu") - requested("cpu"),
        alloc("memory") - requested("memory"),
    )
}

/// The agent pod's free figures for the cluster, from its `/metrics` through the pod proxy.
fn agent_free(kubeconfig: &Path, pod: &str) -> Option<(f64, f64)> {
    let text = kubectl(
        kubeconfig,
        &[
            "get",
            "--raw",
            &format!("/api/v1/namespaces/{INSTALL_NAMESPACE}/pods/{pod}:8080/proxy/metrics"),
        ],
    )
    .ok()?;
    free_from(&text)
}

fn free_from(metrics: &str) -> Option<(f64, f64)> {
    let exposition = Exposition::parse(metrics).ok()?;
    let free = |resource: &str| {
        exposition.value(
            "ocm_score_agent_free",
            &[("resource", resource), ("scope", "cluster")],
        )
    };
    Some((free("cpu")?, free("memory")?))
}

fn container(name: &str, image: &str, cpu: &str, memory: &str) -> Value {
    json!({
        "name": name, "image": image, "imagePullPolicy": "Never",
        "resources": {"requests": {"cpu": cpu, "memory": memory}},
    })
}

/// An init container that finishes: our image's hub binary printing its help.
fn finishing(name: &str, cpu: &str, memory: &str) -> Value {
    let mut c = container(name, ocm_score_agent_contract::IMAGE, cpu, memory);
    c["command"] = json!(["ocm-score-hub", "--help"]);
    c
}

fn pod(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
           "metadata": {"name": name, "namespace": "accounting"}, "spec": spec})
}

fn apply(kubeconfig: &Path, dir: &Path, object: &Value) {
    let file = dir.join(format!(
        "{}.json",
        object
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("object")
    ));
    std::fs::write(&file, object.to_string()).expect("write");
    run(kubeconfig, &["apply", "-f", &file.display().to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_node_is_counted_as_kubernetes_counts_it_and_its_kubelet_is_read() {
    let cp = ControlPlane::builder()
        .clusters(2)
        .nodes(true)
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let kc = cp.kubeconfig("cluster2");
    let dir = cp.dir().join("accounting");
    std::fs::create_dir_all(&dir).expect("dir");
    let logs = || {
        format!(
            "{}\n{}",
            cp.log_tail("cluster2-kubelet", 10),
            cp.log_tail("hub-addon-manager", 5)
        )
    };

    run(
        &cp.hub_kubeconfig(),
        &["apply", "--server-side", "-k", "manifests/hub"],
    );
    let managed = cp.cluster_client("cluster2").await.expect("client");
    let agent = eventually("the agent pod on cluster2", WAIT, logs, || {
        let managed = managed.clone();
        async move {
            let pods: Api<Pod> = Api::namespaced(managed, INSTALL_NAMESPACE);
            let items = pods.list(&ListParams::default()).await.ok()?.items;
            items
                .into_iter()
                .find(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .and_then(|p| p.metadata.name)
        }
    })
    .await;

    // Within a millicore and a byte: the agent's free figures equal Kubernetes' own.
    let agrees = |what: &str| {
        let what = what.to_owned();
        let kc = kc.clone();
        let agent = agent.clone();
        async move {
            eventually(
                &format!(
                    "the agent's free cpu and memory equal allocatable − describe node's requests ({what})"
                ),
                Duration::from_secs(150),
                || {
                    format!(
                        "agent: {:?}, kubernetes: {:?}",
                        agent_free(&kc, &agent),
                        kubernetes_free(&kc)
                    )
                },
                || {
                    let kc = kc.clone();
                    let agent = agent.clone();
                    async move {
                        let ours = agent_free(&kc, &agent)?;
                        let theirs = kubernetes_free(&kc);
                        ((ours.0 - theirs.0).abs() < 0.0005 && (ours.1 - theirs.1).abs() < 1.0)
                            .then_some(ours)
                    }
                },
            )
            .await
        }
    };
    let before = agrees("the agent's own pod only").await;

    // Pods whose requests Kubernetes counts by its rules: the largest init container against the
    // apps, sidecars (restartable init containers) beside both, a RuntimeClass's overhead on top.
    run(&kc, &["create", "namespace", "accounting"]);
    apply(
        &kc,
        &dir,
        &json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
                "metadata": {"name": "with-overhead"}, "handler": "runc",
                "overhead": {"podFixed": {"cpu": "50m", "memory": "32Mi"}}}),
    );
    apply(
        &kc,
        &dir,
        &pod(
            "plain",
            json!({"containers": [container("app", PAUSE.reference, "200m", "100Mi")]}),
        ),
    );
    apply(
        &kc,
        &dir,
        &pod(
            "init",
            json!({"initContainers": [finishing("setup", "500m", "300Mi")],
                   "containers": [container("app", PAUSE.reference, "100m", "50Mi")]}),
        ),
    );
    let mut sidecar = container("sidecar", PAUSE.reference, "150m", "64Mi");
    sidecar["restartPolicy"] = json!("Always");
    apply(
        &kc,
        &dir,
        &pod(
            "sidecar",
            json!({"initContainers": [sidecar, finishing("setup", "300m", "200Mi")],
                   "containers": [container("app", PAUSE.reference, "100m", "64Mi")]}),
        ),
    );
    apply(
        &kc,
        &dir,
        &pod(
            "overhead",
            json!({"runtimeClassName": "with-overhead",
                   "containers": [container("app", PAUSE.reference, "100m", "64Mi")]}),
        ),
    );
    apply(
        &kc,
        &dir,
        &pod(
            "does-not-fit",
            json!({"containers": [container("app", PAUSE.reference, "50", "1Gi")]}),
        ),
    );

    let after = agrees("four more pods, one pending").await;
    // The same rules written out: plain 200m/100Mi; init max(500m, 100m)/max(300Mi, 50Mi);
    // sidecar max(100m+150m, 300m+150m)/max(64Mi+64Mi, 200Mi+64Mi); overhead 100m+50m/64Mi+32Mi;
    // the pod that does not fit is never bound, so nobody counts it.
    let mib = 1024.0 * 1024.0;
    let cpu = 0.200 + 0.500 + 0.450 + 0.150;
    let memory = (100.0 + 300.0 + 264.0 + 96.0) * mib;
    assert!(
        (before.0 - after.0 - cpu).abs() < 0.0005 && (before.1 - after.1 - memory).abs() < 1.0,
        "the pods took {:?} cpu and {:?} bytes; Kubernetes' rules say {cpu} and {memory}",
        before.0 - after.0,
        before.1 - after.1
    );
    let pending: Api<Pod> = Api::namespaced(managed.clone(), "accounting");
    let unfit = pending.get("does-not-fit").await.expect("pod");
    assert_eq!(unfit.status.and_then(|s| s.phase).as_deref(), Some("Pending"));

    // Deleting a pod gives its requests back.
    run(
        &kc,
        &["delete", "pod", "-n", "accounting", "plain", "--wait=true"],
    );
    let freed = agrees("the plain pod deleted").await;
    assert!(
        (freed.0 - after.0 - 0.2).abs() < 0.0005,
        "200m back: {freed:?} after {after:?}"
    );

    // The kubelet source, through the API server's node proxy as in production: `once` reads the
    // node's working set from the real kubelet. The node is this whole machine, whose memory moves
    // with everything else running here, so the check is against what the kubelet reports at the
    // same moment, not against an earlier reading: the kubelet sees the pod hold its 3 GiB, and the
    // agent's score is the one its rule gives for that node working set.
    let agent_binary = workspace_binary("ocm-score-agent").expect("agent");
    let once_memory = || {
        let out = std::process::Command::new(&agent_binary)
            .args([
                "once",
                "--source",
                "cluster,kubelet",
                "--scores",
                "memClusterAvailable",
            ])
            .args(["--normalize", "memClusterAvailable=absolute:0:32"])
            .arg("--managed-kubeconfig")
            .arg(&kc)
            .stderr(Stdio::inherit())
            .output()
            .expect("once");
        assert!(
            out.status.success(),
            "once failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let yaml: Value = serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
        yaml.pointer("/status/scores/0/value")
            .and_then(Value::as_i64)
            .expect("score")
    };
    let kubelet = || {
        let text = run(
            &kc,
            &[
                "get",
                "--raw",
                &format!("/api/v1/nodes/{NODE}/proxy/metrics/resource"),
            ],
        );
        let exposition = Exposition::parse(&text).expect("kubelet metrics");
        (
            exposition.sum("node_memory_working_set_bytes", &[]),
            exposition.sum("container_memory_working_set_bytes", &[("pod", "holds-memory")]),
        )
    };
    let mut load = container("load", LOAD.reference, "10m", "16Mi");
    load["args"] = json!(["--hold-mib", "3072"]);
    apply(&kc, &dir, &pod("holds-memory", json!({"containers": [load]})));
    let gib = 1024.0 * mib;
    eventually(
        "cluster2's kubelet to report the pod holding 3 GiB",
        Duration::from_secs(120),
        || format!("{:?}", kubelet()),
        || {
            let (_, held) = kubelet();
            async move { (held >= 3.0 * gib).then_some(()) }
        },
    )
    .await;
    let (score, expected) = eventually(
        "the kubelet source's score to follow the node's working set",
        Duration::from_secs(120),
        || cp.log_tail("cluster2-kubelet", 5),
        || {
            let score = once_memory();
            let (node_working_set, _) = kubelet();
            // free = allocatable − max(requests, working set), as the source documents.
            let (allocatable, requested) = node_memory(&kc);
            let free = (allocatable - requested.max(node_working_set)).max(0.0);
            let expected = (-100.0 + 200.0 * (free / gib) / 32.0)
                .clamp(-100.0, 100.0)
                .trunc() as i64;
            // Two readings a moment apart: a point or two of the rest of the machine moving.
            async move { ((score - expected).abs() <= 2).then_some((score, expected)) }
        },
    )
    .await;
    eprintln!(
        "memClusterAvailable (absolute:0:32 GiB) from the real kubelet with 3 GiB held: {score} (rule: {expected})"
    );
}

/// The node's allocatable and requested memory, bytes (`kubectl describe node`).
fn node_memory(kubeconfig: &Path) -> (f64, f64) {
    let allocatable: Value = serde_json::from_str(&run(
        kubeconfig,
        &["get", "node", NODE, "-o", "jsonpath={.status.allocatable}"],
    ))
    .expect("allocatable");
    let allocatable = quantity(allocatable["memory"].as_str().expect("memory"));
    let (_, free) = kubernetes_free(kubeconfig);
    (allocatable, allocatable - free)
}
