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

#[path = "support/api.rs"]
mod api;
mod support;

use ocm_score_agent::accounting::objects::{SlimContainer, SlimNode};
use ocm_score_agent::accounting::{Ledger, ResourceSet, SlimPod};
use ocm_score_agent::scores::{built_in_defs, compute};
use std::hint::black_box;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};
use support::{fmt, initial_lists, median, node, node_name, print_table};

/// A pod of the realistic mix, bound to one of `nodes` nodes.
fn pod(i: usize, nodes: usize, variant: usize) -> SlimPod {
    support::pod(i, variant, Some(node_name(i % nodes)))
}

/// What the watches do on start: an initial list of nodes and of pods.
fn build(nodes: &[SlimNode], pods: &[SlimPod]) -> Ledger {
    initial_lists!(Ledger::new(ResourceSet::built_in()), nodes, pods)
}

/// The agent's start-up path, timed from the start of the watches until the first scores: the real
/// `ClusterSource` (kube-rs watcher, pages of 500, JSON decoding, ledger and fits index) against
/// [`api::ListServer`], then the figures and scores as the run loop reads them.
fn cold_start(server: &Arc<api::ListServer>) -> (Duration, Duration) {
    use ocm_score_agent::accounting::{FitsOptions, compile_shapes};
    use ocm_score_agent::metrics::Metrics;
    use ocm_score_agent::sources::cluster::{Accounts, ClusterSource};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let resources = ResourceSet::built_in();
        let defs = built_in_defs();
        let client = server.client();
        let (start, cpu) = (Instant::now(), process_cpu());
        let source = ClusterSource::start(
            client,
            Accounts::new(resources.clone(), compile_shapes(&[]).0, FitsOptions::default()),
            Duration::from_secs(30),
            Arc::new(tokio::sync::Notify::new()),
            Arc::new(Metrics::default()),
        );
        source.wait_synced().await;
        let (reading, fits) = source.read().await.expect("figures");
        let scores = compute(&defs, &reading.view, &resources);
        let elapsed = (start.elapsed(), process_cpu().saturating_sub(cpu));
        black_box((&reading, &fits, &scores));
        elapsed
    })
}

/// CPU time (user + system) of this process so far (`/proc/self/stat` fields 14 and 15, at 100 Hz).
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    Duration::from_millis(ticks * 10)
}

fn status_kib(key: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn vm_rss_kib() -> u64 {
    status_kib("VmRSS:")
}

/// Child mode: the agent's cluster source against the lists served over HTTP on `port`; prints
/// "rss_kib hwm_kib" once the first scores are computed.
fn cold_rss_child(port: u16) {
    use ocm_score_agent::accounting::{FitsOptions, compile_shapes};
    use ocm_score_agent::metrics::Metrics;
    use ocm_score_agent::sources::cluster::{Accounts, ClusterSource};
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let url: hyper::Uri = format!("http://127.0.0.1:{port}").parse().expect("url");
        let client = kube::Client::try_from(kube::Config::new(url)).expect("client");
        let resources = ResourceSet::built_in();
        let source = ClusterSource::start(
            client,
            Accounts::new(resources.clone(), compile_shapes(&[]).0, FitsOptions::default()),
            Duration::from_secs(60),
            Arc::new(tokio::sync::Notify::new()),
            Arc::new(Metrics::default()),
        );
        source.wait_synced().await;
        let (reading, _) = source.read().await.expect("figures");
        black_box(compute(&built_in_defs(), &reading.view, &resources));
        println!("{} {}", vm_rss_kib(), status_kib("VmHWM:"));
    });
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
    if args.iter().any(|a| a == "--cold-start") {
        // Only the agent's cold start, once (to profile it): `accounting --cold-start`.
        let (n, p) = (5_000, 150_000);
        let server = Arc::new(api::ListServer::new(
            &(0..n).map(|i| api::node_json(&node(i))).collect::<Vec<_>>(),
            &(0..p).map(|i| api::pod_json(&pod(i, n, 0))).collect::<Vec<_>>(),
            500,
        ));
        let (wall, cpu) = cold_start(&server);
        println!("cold start {} (CPU {})", fmt(wall), fmt(cpu));
        return;
    }
    if let Some(i) = args.iter().position(|a| a == "--cold-rss-child") {
        cold_rss_child(args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or(0));
        return;
    }
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

    // Cold start as the agent does it: the initial lists from an API server, decoded and accounted.
    let server = Arc::new(api::ListServer::new(
        &nodes.iter().map(api::node_json).collect::<Vec<_>>(),
        &pods.iter().map(api::pod_json).collect::<Vec<_>>(),
        500,
    ));
    let runs: Vec<(Duration, Duration)> = (0..5).map(|_| cold_start(&server)).collect();
    let real_cold_start = median(runs.iter().map(|r| r.0).collect());
    let real_cold_cpu = median(runs.iter().map(|r| r.1).collect());
    let pod_mib = server.pod_bytes as f64 / 1048576.0;
    // What bounds it: decoding the pod pages alone, and serde_json's parse with nothing kept.
    let decode = median(
        (0..3)
            .map(|_| {
                let start = Instant::now();
                for page in server.pod_pages() {
                    black_box(
                        serde_json::from_slice::<kube::core::ObjectList<SlimPod>>(page).expect("decodes"),
                    );
                }
                start.elapsed()
            })
            .collect(),
    );
    let parse = median(
        (0..3)
            .map(|_| {
                let start = Instant::now();
                for page in server.pod_pages() {
                    black_box(serde_json::from_slice::<serde::de::IgnoredAny>(page).expect("parses"));
                }
                start.elapsed()
            })
            .collect(),
    );
    let (cold_rss, cold_hwm) = cold_start_rss(&server);
    drop(server);

    // The accounting alone: already decoded objects into an empty ledger, then scores.
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
                "cold start as the agent runs it: initial lists of {n} nodes / {p} pods ({pod_mib:.0} MiB of pod JSON, pages of 500) through kube-rs's watcher, decoded into the ledger and fits index, then scores (median of 5)"
            ),
            format!("{} (CPU {})", fmt(real_cold_start), fmt(real_cold_cpu)),
            "≤ 50 ms".into(),
        ),
    );
    rows.insert(
        2,
        (
            format!("of which decoding the {p} pods' list pages into the slim structs, one thread"),
            fmt(decode),
            "—".into(),
        ),
    );
    rows.insert(
        3,
        (
            "serde_json parsing those pages keeping nothing (IgnoredAny): the floor of decoding them".into(),
            fmt(parse),
            "—".into(),
        ),
    );
    rows.insert(
        4,
        (
            format!(
                "of which accounting alone: {n} nodes / {p} decoded pods into an empty ledger, then scores"
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

    rows.push((
        format!("RSS of the agent's cluster source after its cold start from {n} nodes / {p} pods over HTTP (VmRSS; VmHWM)"),
        format!("{:.1} MiB; {:.1} MiB", cold_rss as f64 / 1024.0, cold_hwm as f64 / 1024.0),
        "≤ 64 MiB".into(),
    ));

    print_table(rows);
}

/// (VmRSS, VmHWM) KiB of a child process that cold-starts the cluster source from `server` over HTTP.
fn cold_start_rss(server: &Arc<api::ListServer>) -> (u64, u64) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let port = runtime.block_on(server.serve_http()).expect("serves");
    let exe = std::env::current_exe().expect("own path");
    let out = Command::new(exe)
        .args(["--cold-rss-child", &port.to_string()])
        .output()
        .expect("child runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text.split_whitespace().map(|v| v.parse::<u64>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
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
