//! Fits benchmark (plain main, `harness = false`): prints a markdown table.
//!
//! 16 WorkloadShapes over 5,000 nodes / 150,000 pods (a tenth of the nodes carry 8 GPUs behind a
//! taint; pods as in the accounting benchmark, both from `benches/support`):
//! * from scratch: every node's requested sum and contribution to every shape recomputed from the
//!   cached pods, then the counts read;
//! * per pod event: a pod's requests change, or a pod is deleted and re-created, with no pending
//!   pods (the incremental path: one node's contribution to every shape);
//! * with pending pods: one event and then a read, which redoes the first-fit of the pending pods.
//!
//! Goals (issue 13): from scratch ≤ 50 ms and per pod event ≤ 10 µs with 16 shapes at 5,000 nodes /
//! 150,000 pods.
//!
//! Each row is followed by the same measurement for 16 shapes half of which carry placement
//! constraints (issue 47: anti-affinity on hostname and zone, zone and hostname spread, both keys,
//! node affinity, host ports), "(constrained)": goals from scratch ≤ 50 ms, per pod event ≤ 3 µs.
//! Their counts are redone at each read, so the read after an event is shown too.

mod support;

use ocm_score_agent::accounting::objects::{SlimNode, SlimPort, SlimTaint};
use ocm_score_agent::accounting::{FitsIndex, FitsOptions, SlimPod, compile_shapes};
use ocm_score_api::{ObjectMeta, WorkloadShape};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};
use support::{fmt, initial_lists, median, node_name, print_table};

const NODES: usize = 5_000;
const PODS: usize = 150_000;

/// The shared node, labelled, with its GPUs (if any) behind a taint.
fn node(i: usize) -> SlimNode {
    let gpu_node = i.is_multiple_of(10);
    let mut labels = BTreeMap::from([
        ("kubernetes.io/arch".to_owned(), "amd64".to_owned()),
        ("kubernetes.io/hostname".to_owned(), node_name(i)),
        (
            "topology.kubernetes.io/zone".to_owned(),
            format!("eu-west-1{}", ["a", "b", "c"][i % 3]),
        ),
        (
            "node.kubernetes.io/instance-type".to_owned(),
            "m6i.8xlarge".to_owned(),
        ),
        (
            "pool".to_owned(),
            if gpu_node { "gpu" } else { "general" }.to_owned(),
        ),
    ]);
    let mut node = support::node(i);
    if gpu_node {
        labels.insert("nvidia.com/gpu.product".into(), "NVIDIA-A100-SXM4-80GB".into());
        node.spec.taints = vec![SlimTaint {
            key: "nvidia.com/gpu".into(),
            value: Some("present".into()),
            effect: "NoSchedule".into(),
        }];
    }
    node.metadata.labels = Some(labels);
    node
}

/// Pods as in the accounting benchmark, GPU ones on GPU nodes (every tenth); `pending` ones are
/// bound to no node.
fn pod(i: usize, variant: usize, pending: bool) -> SlimPod {
    let node = if i.is_multiple_of(50) {
        (i / 50 * 10) % NODES
    } else {
        i % NODES
    };
    let mut pod = support::pod(i, variant, (!pending).then(|| node_name(node)));
    // Labels the constrained shapes' selectors read (namespaces are team-0..299), and a host port
    // on every 500th pod.
    pod.metadata.labels = Some(BTreeMap::from([
        ("app".to_owned(), format!("app-{}", i % 8)),
        ("pod-template-hash".to_owned(), format!("{:x}", i % 3)),
    ]));
    if i.is_multiple_of(500) {
        pod.spec.containers[0].ports.push(SlimPort {
            host_port: Some(8080),
            protocol: None,
            host_ip: None,
        });
    }
    pod
}

/// 16 shapes: 8 of [`shapes`] and 8 with placement constraints.
fn constrained_shapes() -> Vec<WorkloadShape> {
    let team = |n: usize| format!("namespace: team-{n}\npodLabels: {{app: app-{n}}}\n");
    let select = |n: usize| format!("labelSelector: {{matchLabels: {{app: app-{n}}}}}");
    let spread = |n: usize, key: &str, skew: u32, extra: &str| {
        format!(
            "- {{maxSkew: {skew}, topologyKey: {key}, whenUnsatisfiable: DoNotSchedule, {}{extra}}}\n",
            select(n)
        )
    };
    let specs: [(&str, String); 8] = [
        (
            "anti-host",
            format!(
                "requests: {{cpu: 1, memory: 2Gi}}\n{}podAntiAffinity:\n- {{topologyKey: kubernetes.io/hostname, {}}}\n",
                team(1),
                select(1)
            ),
        ),
        (
            "anti-zone",
            format!(
                "requests: {{cpu: 4, memory: 8Gi}}\n{}podAntiAffinity:\n- {{topologyKey: topology.kubernetes.io/zone, {}}}\n",
                team(2),
                select(2)
            ),
        ),
        (
            "spread-zone",
            format!(
                "requests: {{cpu: 1, memory: 2Gi}}\nscale: 10\n{}topologySpreadConstraints:\n{}",
                team(3),
                spread(3, "topology.kubernetes.io/zone", 1, ", matchLabelKeys: [pod-template-hash]")
            ),
        ),
        (
            "spread-zone-min",
            format!(
                "requests: {{cpu: 2, memory: 4Gi}}\nscale: 10\n{}topologySpreadConstraints:\n{}",
                team(4),
                spread(4, "topology.kubernetes.io/zone", 2, ", minDomains: 4, nodeTaintsPolicy: Honor")
            ),
        ),
        (
            "spread-host",
            format!(
                "requests: {{cpu: 500m, memory: 1Gi}}\nscale: 20\n{}topologySpreadConstraints:\n{}",
                team(5),
                spread(5, "kubernetes.io/hostname", 1, "")
            ),
        ),
        (
            "spread-two-keys",
            format!(
                "requests: {{cpu: 1, memory: 2Gi}}\n{}topologySpreadConstraints:\n{}{}",
                team(6),
                spread(6, "topology.kubernetes.io/zone", 1, ""),
                spread(6, "kubernetes.io/hostname", 1, "")
            ),
        ),
        (
            "affinity",
            "requests: {cpu: 4, memory: 16Gi}\nnodeAffinity:\n  nodeSelectorTerms:\n  - matchExpressions:\n    \
             - {key: topology.kubernetes.io/zone, operator: In, values: [eu-west-1a, eu-west-1b]}\n    \
             - {key: node.kubernetes.io/instance-type, operator: Exists}\n"
                .into(),
        ),
        (
            "ports",
            "requests: {cpu: 1, memory: 2Gi}\nhostPorts: [{port: 8080}]\n".into(),
        ),
    ];
    let keep = [
        "tiny",
        "web",
        "cpu-4",
        "cpu-16",
        "mem-heavy",
        "a100-x1",
        "a100-x8",
        "pods-only",
    ];
    shapes()
        .into_iter()
        .filter(|s| keep.contains(&s.metadata.name.as_deref().unwrap_or_default()))
        .chain(specs.into_iter().map(|(name, yaml)| WorkloadShape {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: serde_norway::from_str(&yaml).expect("shape yaml"),
        }))
        .collect()
}

fn shapes() -> Vec<WorkloadShape> {
    let gpu = "tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]\n\
               nodeSelector: {pool: gpu}\n";
    let specs: [(&str, String); 16] = [
        ("tiny", "requests: {cpu: 100m, memory: 128Mi}\nscale: 100".into()),
        (
            "web-small",
            "requests: {cpu: 250m, memory: 512Mi}\nscale: 50".into(),
        ),
        ("web", "requests: {cpu: 500m, memory: 1Gi}\nscale: 20".into()),
        ("cpu-1", "requests: {cpu: 1, memory: 2Gi}\nscale: 10".into()),
        ("cpu-4", "requests: {cpu: 4, memory: 16Gi}".into()),
        ("cpu-8", "requests: {cpu: 8, memory: 32Gi}".into()),
        ("cpu-16", "requests: {cpu: 16, memory: 64Gi}".into()),
        ("mem-heavy", "requests: {cpu: 1, memory: 48Gi}".into()),
        (
            "scratch",
            "requests: {cpu: 2, memory: 4Gi, ephemeral-storage: 20Gi}".into(),
        ),
        (
            "kata",
            "requests: {cpu: 2, memory: 4Gi}\npodOverhead: {cpu: 250m, memory: 160Mi}".into(),
        ),
        ("pods-only", "scale: 100".into()),
        (
            "zone-a",
            "requests: {cpu: 2, memory: 8Gi}\nnodeSelector: {topology.kubernetes.io/zone: eu-west-1a}".into(),
        ),
        (
            "a100-x1",
            format!("requests: {{cpu: 8, memory: 64Gi, nvidia.com/gpu: 1}}\n{gpu}"),
        ),
        (
            "a100-x2",
            format!("requests: {{cpu: 8, memory: 64Gi, nvidia.com/gpu: 2}}\n{gpu}"),
        ),
        (
            "a100-x4",
            format!("requests: {{cpu: 16, memory: 96Gi, nvidia.com/gpu: 4}}\n{gpu}"),
        ),
        (
            "a100-x8",
            format!("requests: {{cpu: 30, memory: 110Gi, nvidia.com/gpu: 8}}\n{gpu}"),
        ),
    ];
    specs
        .into_iter()
        .map(|(name, yaml)| WorkloadShape {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: serde_norway::from_str(&yaml).expect("shape yaml"),
        })
        .collect()
}

fn build(nodes: &[SlimNode], pods: &[SlimPod]) -> FitsIndex {
    build_with(shapes(), nodes, pods)
}

fn build_with(shapes: Vec<WorkloadShape>, nodes: &[SlimNode], pods: &[SlimPod]) -> FitsIndex {
    let (set, problems) = compile_shapes(&shapes);
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(set.len(), 16);
    initial_lists!(FitsIndex::new(set, FitsOptions::default()), nodes, pods)
}

/// Median over 5 rounds of the per-event time of `events` calls of `f`.
fn per_event(events: usize, mut f: impl FnMut(usize)) -> Duration {
    let mut samples = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        for e in 0..events {
            f(e);
        }
        samples.push(start.elapsed() / events as u32);
    }
    median(samples)
}

fn main() {
    let nodes: Vec<SlimNode> = (0..NODES).map(node).collect();
    let pods: Vec<SlimPod> = (0..PODS).map(|i| pod(i, 0, false)).collect();
    let mut rows: Vec<(String, String, String)> = Vec::new();

    let mut samples = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let mut index = build(&nodes, &pods);
        black_box(index.fits());
        samples.push(start.elapsed());
    }
    rows.push((
        format!(
            "cold start (context): initial lists of {NODES} nodes / {PODS} pods, then counts (median of 5)"
        ),
        fmt(median(samples)),
        "—".into(),
    ));

    let mut index = build(&nodes, &pods);
    let counts = index.fits();
    let mut samples = Vec::new();
    for _ in 0..7 {
        let start = Instant::now();
        index.recompute();
        black_box(index.fits());
        samples.push(start.elapsed());
    }
    rows.insert(
        0,
        (
            format!(
                "from scratch over the cached state, 16 shapes, {NODES} nodes / {PODS} pods (median of 7)"
            ),
            fmt(median(samples)),
            "≤ 50 ms".into(),
        ),
    );
    assert_eq!(index.fits(), counts, "recomputing changes nothing");

    // Incremental, no pending pods: a pod's requests change (two versions alternating).
    let changed: Vec<SlimPod> = (0..1000).map(|i| pod(i * 149, 1, false)).collect();
    let original: Vec<SlimPod> = (0..1000).map(|i| pod(i * 149, 0, false)).collect();
    let version = |e: usize| {
        if (e / 1000).is_multiple_of(2) {
            &changed
        } else {
            &original
        }
    };
    let d = per_event(200_000, |e| {
        index.apply_pod(&version(e)[e % 1000]).expect("valid");
    });
    rows.push(("per pod event: requests changed".into(), fmt(d), "≤ 10 µs".into()));

    let d = per_event(100_000, |e| {
        let p = &original[e % 1000];
        index.delete_pod(
            p.metadata.namespace.as_deref().unwrap_or_default(),
            p.metadata.name.as_deref().unwrap_or_default(),
        );
        index.apply_pod(p).expect("valid");
    }) / 2;
    rows.push((
        "per pod event: deleted or created".into(),
        fmt(d),
        "≤ 10 µs".into(),
    ));

    let d = per_event(100_000, |e| {
        index.apply_pod(&version(e)[e % 1000]).expect("valid");
        black_box(index.fits());
    });
    rows.push((
        "per pod event, then the 16 counts read".into(),
        fmt(d),
        "≤ 10 µs".into(),
    ));

    let d = per_event(20_000, |e| {
        index.apply_node(&nodes[(e * 7) % NODES]).expect("valid");
    });
    rows.push((
        "per node event (status update, nothing counted changed)".into(),
        fmt(d),
        "—".into(),
    ));

    // Pending pods: each read after an event redoes their first-fit for every shape.
    for pending in [100, 1_000] {
        let queued: Vec<SlimPod> = (0..pending).map(|i| pod(i * 7, 0, true)).collect();
        for q in &queued {
            index.apply_pod(q).expect("valid");
        }
        black_box(index.fits());
        let d = per_event(20_000, |e| {
            index.apply_pod(&version(e)[e % 1000]).expect("valid");
        });
        rows.push((
            format!("per pod event with {pending} pending pods (first-fit deferred to the read)"),
            fmt(d),
            "≤ 10 µs".into(),
        ));
        // Every event a real change (each pod flips between its two versions), so every read
        // redoes the first-fit.
        let mut flipped = vec![false; 1000];
        let mut calls = 0usize;
        let rounds = if pending > 100 { 50 } else { 200 };
        let d = per_event(rounds, |_| {
            let j = calls % 1000;
            calls += 1;
            flipped[j] = !flipped[j];
            let pod = if flipped[j] { &changed[j] } else { &original[j] };
            index.apply_pod(pod).expect("valid");
            black_box(index.fits());
        });
        rows.push((
            format!("per pod event then a read with {pending} pending pods (first-fit redone)"),
            fmt(d),
            "—".into(),
        ));
        for q in &queued {
            index.delete_pod(
                q.metadata.namespace.as_deref().unwrap_or_default(),
                q.metadata.name.as_deref().unwrap_or_default(),
            );
        }
    }

    let constrained = constrained_rows(&nodes, &pods);
    // Each constrained row beside today's row of the same measurement.
    let mut table = Vec::new();
    for row in rows {
        let key = row.0.clone();
        table.push(row);
        if let Some(c) = constrained.iter().find(|c| c.0 == key) {
            table.push((format!("{} (constrained)", c.0), c.1.clone(), c.2.clone()));
        }
    }
    print_table(table);
    let summary: Vec<String> = index
        .fits()
        .iter()
        .map(|f| format!("{} {} ({})", f.shape, f.replicas, f.value))
        .collect();
    println!("\ncounts (replicas, score): {}", summary.join(", "));
}

/// The rows of the constrained shape set, named as today's rows they stand beside.
fn constrained_rows(nodes: &[SlimNode], pods: &[SlimPod]) -> Vec<(String, String, String)> {
    let mut rows = Vec::new();
    let mut samples = Vec::new();
    for _ in 0..5 {
        let start = Instant::now();
        let mut index = build_with(constrained_shapes(), nodes, pods);
        black_box(index.fits());
        samples.push(start.elapsed());
    }
    rows.push((
        format!(
            "cold start (context): initial lists of {NODES} nodes / {PODS} pods, then counts (median of 5)"
        ),
        fmt(median(samples)),
        "—".into(),
    ));
    let mut index = build_with(constrained_shapes(), nodes, pods);
    let counts = index.fits();
    let mut samples = Vec::new();
    for _ in 0..7 {
        let start = Instant::now();
        index.recompute();
        black_box(index.fits());
        samples.push(start.elapsed());
    }
    rows.push((
        format!("from scratch over the cached state, 16 shapes, {NODES} nodes / {PODS} pods (median of 7)"),
        fmt(median(samples)),
        "≤ 50 ms".into(),
    ));
    assert_eq!(index.fits(), counts, "recomputing changes nothing");
    let changed: Vec<SlimPod> = (0..1000).map(|i| pod(i * 149, 1, false)).collect();
    let original: Vec<SlimPod> = (0..1000).map(|i| pod(i * 149, 0, false)).collect();
    let version = |e: usize| {
        if (e / 1000).is_multiple_of(2) {
            &changed
        } else {
            &original
        }
    };
    let d = per_event(200_000, |e| {
        index.apply_pod(&version(e)[e % 1000]).expect("valid");
    });
    rows.push(("per pod event: requests changed".into(), fmt(d), "≤ 3 µs".into()));
    let d = per_event(100_000, |e| {
        let p = &original[e % 1000];
        index.delete_pod(
            p.metadata.namespace.as_deref().unwrap_or_default(),
            p.metadata.name.as_deref().unwrap_or_default(),
        );
        index.apply_pod(p).expect("valid");
    }) / 2;
    rows.push((
        "per pod event: deleted or created".into(),
        fmt(d),
        "≤ 3 µs".into(),
    ));
    let d = per_event(200, |e| {
        index.apply_pod(&version(e)[e % 1000]).expect("valid");
        black_box(index.fits());
    });
    rows.push((
        "per pod event, then the 16 counts read".into(),
        fmt(d),
        "— (a read per publish, not per event)".into(),
    ));
    let d = per_event(20_000, |e| {
        index.apply_node(&nodes[(e * 7) % NODES]).expect("valid");
    });
    rows.push((
        "per node event (status update, nothing counted changed)".into(),
        fmt(d),
        "—".into(),
    ));
    let summary: Vec<String> = index
        .fits()
        .iter()
        .map(|f| format!("{} {} ({})", f.shape, f.replicas, f.value))
        .collect();
    println!("constrained counts (replicas, score): {}\n", summary.join(", "));
    rows
}
