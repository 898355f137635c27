//! Accounting benchmark (plain main, `harness = false`): prints a markdown table.
//!
//! * from scratch: every node's requested sum re-added from all cached pods, the cluster figures
//!   rebuilt and the scores computed (what a periodic full recomputation would cost);
//! * cold start, for context: the watches' initial lists fed into an empty ledger (quantity parsing and
//!   effective requests included; JSON decoding measured on its own row);
//! * per incremental pod event: a pod's requests change, or a pod is deleted and re-created;
//! * RSS: a child process per size builds the ledger one object at a time and reports VmRSS
//!   (/proc/self/status), so nothing but the cached state and the binary is resident.
//!
//! Goals (issue 5): from scratch ≤ 50 ms and per event ≤ 10 µs at 5,000 nodes / 150,000 pods; RSS
//! ≤ 64 MiB with 5,000 / 150,000 cached.

mod support;

use ocm_score_agent::accounting::objects::{SlimContainer, SlimNode};
use ocm_score_agent::accounting::{Ledger, ResourceSet, SlimPod};
use ocm_score_agent::scores::{built_in_defs, compute};
use std::hint::black_box;
use std::process::Command;
use std::time::Instant;
use support::{fmt, initial_lists, median, node, node_name, print_table};

/// A pod of the realistic mix, bound to one of `nodes` nodes.
fn pod(i: usize, nodes: usize, variant: usize) -> SlimPod {
    support::pod(i, variant, Some(node_name(i % nodes)))
}

/// What the watches do on start: an initial list of nodes and of pods.
fn build(nodes: &[SlimNode], pods: &[SlimPod]) -> Ledger {
    initial_lists!(Ledger::new(ResourceSet::built_in()), nodes, pods)
}

fn vm_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Child mode: build the ledger object by object, print "baseline_kib cached_kib".
fn rss_child(nodes: usize, pods: usize) {
    let baseline = vm_rss_kib();
    let resources = ResourceSet::built_in();
    let mut ledger = Ledger::new(resources.clone());
    ledger.begin_node_relist();
    ledger.begin_pod_relist();
    for i in 0..nodes {
        ledger.apply_node(&node(i)).expect("valid node");
    }
    for i in 0..pods {
        ledger.apply_pod(&pod(i, nodes, 0)).expect("valid pod");
    }
    ledger.finish_node_relist();
    ledger.finish_pod_relist();
    let scores = compute(&built_in_defs(), &ledger.view(), &resources);
    black_box(&scores);
    println!("{baseline} {}", vm_rss_kib());
    black_box(&ledger);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--rss-child") {
        let n = args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or(1000);
        let p = args.get(i + 2).and_then(|v| v.parse().ok()).unwrap_or(30_000);
        rss_child(n, p);
        return;
    }

    let mut rows: Vec<(String, String, String)> = Vec::new();
    let (n, p) = (5_000, 150_000);
    let nodes: Vec<SlimNode> = (0..n).map(node).collect();
    let pods: Vec<SlimPod> = (0..p).map(|i| pod(i, n, 0)).collect();
    let resources = ResourceSet::built_in();
    let defs = built_in_defs();

    // Cold start: the watches' initial lists into an empty ledger (parsing included), then scores.
    let mut samples = Vec::new();
    for _ in 0..7 {
        let start = Instant::now();
        let ledger = build(&nodes, &pods);
        let scores = compute(&defs, &ledger.view(), &resources);
        samples.push(start.elapsed());
        black_box((&ledger, &scores));
    }
    let cold_start = median(samples);

    // Decoding, for context: the same pods as API JSON into the slim structs.
    let json: Vec<String> = pods.iter().take(20_000).map(pod_json).collect();
    let start = Instant::now();
    for text in &json {
        black_box(serde_json::from_str::<SlimPod>(text).expect("decodes"));
    }
    let per_pod = start.elapsed() / json.len() as u32;
    rows.push((
        "decoding one pod's JSON into the slim struct (context)".into(),
        fmt(per_pod),
        "—".into(),
    ));

    // Incremental: a pod's requests change (two versions alternating), on the full ledger.
    let mut ledger = build(&nodes, &pods);
    let events: usize = 200_000;
    let changed: Vec<SlimPod> = (0..1000).map(|i| pod(i * 149, n, 1)).collect();
    let original: Vec<SlimPod> = (0..1000).map(|i| pod(i * 149, n, 0)).collect();
    let start = Instant::now();
    for e in 0..events {
        let version = if (e / 1000).is_multiple_of(2) {
            &changed
        } else {
            &original
        };
        black_box(ledger.apply_pod(&version[e % 1000]).expect("valid"));
    }
    rows.push((
        "per pod event: requests changed".into(),
        fmt(start.elapsed() / events as u32),
        "≤ 10 µs".into(),
    ));

    // The same, as a watch delivers it: the event's JSON decoded, then applied.
    let changed_json: Vec<String> = changed.iter().map(pod_json).collect();
    let original_json: Vec<String> = original.iter().map(pod_json).collect();
    let decoded_events: usize = 50_000;
    let start = Instant::now();
    for e in 0..decoded_events {
        let version = if (e / 1000).is_multiple_of(2) {
            &changed_json
        } else {
            &original_json
        };
        let pod: SlimPod = serde_json::from_str(&version[e % 1000]).expect("decodes");
        black_box(ledger.apply_pod(&pod).expect("valid"));
    }
    rows.push((
        "per pod event including decoding its JSON".into(),
        fmt(start.elapsed() / decoded_events as u32),
        "≤ 10 µs".into(),
    ));

    let start = Instant::now();
    for e in 0..events / 2 {
        let p = &original[e % 1000];
        black_box(ledger.delete_pod(
            p.metadata.namespace.as_deref().unwrap_or_default(),
            p.metadata.name.as_deref().unwrap_or_default(),
        ));
        black_box(ledger.apply_pod(p).expect("valid"));
    }
    rows.push((
        "per pod event: deleted or created".into(),
        fmt(start.elapsed() / events as u32),
        "≤ 10 µs".into(),
    ));

    let start = Instant::now();
    let rounds = 10_000;
    for _ in 0..rounds {
        black_box(compute(&defs, &ledger.view(), &resources));
    }
    rows.push((
        "scores from the current ledger".into(),
        fmt(start.elapsed() / rounds),
        "—".into(),
    ));

    // From scratch over the cached state: every pod's requests re-added to its node, the cluster
    // figures and per-node ordering rebuilt, scores computed.
    let mut samples = Vec::new();
    for _ in 0..7 {
        let start = Instant::now();
        ledger.recompute();
        black_box(compute(&defs, &ledger.view(), &resources));
        samples.push(start.elapsed());
    }
    rows.insert(
        0,
        (
            format!("scores from scratch over the cached state, {n} nodes / {p} pods (median of 7)"),
            fmt(median(samples)),
            "≤ 50 ms".into(),
        ),
    );
    rows.insert(
        1,
        (
            format!(
                "cold start: initial lists of {n} nodes / {p} decoded pods into an empty ledger, then scores"
            ),
            fmt(cold_start),
            "—".into(),
        ),
    );
    drop(ledger);

    for (n, p) in [(1_000, 30_000), (5_000, 150_000)] {
        let exe = std::env::current_exe().expect("own path");
        let out = Command::new(exe)
            .args(["--rss-child", &n.to_string(), &p.to_string()])
            .output()
            .expect("child runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let mut parts = text.split_whitespace().map(|v| v.parse::<u64>().unwrap_or(0));
        let (baseline, total) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
        rows.push((
            format!("RSS with {n} nodes / {p} pods cached (process; ledger alone)"),
            format!(
                "{:.1} MiB ({:.1} MiB)",
                total as f64 / 1024.0,
                total.saturating_sub(baseline) as f64 / 1024.0
            ),
            if n == 5_000 {
                "≤ 64 MiB".into()
            } else {
                "—".into()
            },
        ));
    }

    print_table(rows);
}

/// The pod as the API server would send it (with fields accounting ignores).
fn pod_json(pod: &SlimPod) -> String {
    let requests = |c: &SlimContainer| {
        serde_json::Value::Object(
            c.resources
                .requests
                .0
                .iter()
                .map(|(k, v)| (k.clone(), v.0.clone().into()))
                .collect(),
        )
    };
    let container = |c: &SlimContainer| {
        serde_json::json!({
            "name": c.name, "image": "registry.example/app:1.2.3", "restartPolicy": c.restart_policy,
            "resources": {"requests": requests(c), "limits": requests(c)},
            "env": [{"name": "LOG_LEVEL", "value": "info"}],
            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
            "volumeMounts": [{"name": "kube-api-access", "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
        })
    };
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": pod.metadata.name, "namespace": pod.metadata.namespace, "resourceVersion": "123456",
            "uid": "6b8f6f0e-8c1e-4f55-9a4c-2f3b5e6d7a8b", "labels": {"app": "web", "pod-template-hash": "7d9f8b6c5d"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8b6c5d", "uid": "x", "controller": true}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1", "fieldsV1": {"f:spec": {}}}]
        },
        "spec": {
            "nodeName": pod.spec.node_name,
            "containers": pod.spec.containers.iter().map(container).collect::<Vec<_>>(),
            "initContainers": pod.spec.init_containers.iter().map(container).collect::<Vec<_>>(),
            "volumes": [{"name": "kube-api-access", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}],
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]
        },
        "status": {"phase": "Running", "podIP": "10.1.2.3", "conditions": [{"type": "Ready", "status": "True"}]}
    })
    .to_string()
}
