//! The add-on as pods on the real control plane's nodes, measured, printed as markdown tables:
//! 1. start-up: a control plane with nodes, cold (the image cache emptied first, so the images are
//!    assembled again) and warm, and from `kubectl apply -k manifests/hub` to every cluster's first
//!    score;
//! 2. memory: one node (kubelet, containerd, kube-proxy, containerd's shims) and the whole control
//!    plane with its pods, resident set sizes from `/proc`;
//! 3. our agent pod on cluster2 as its kubelet reports it (`/metrics/resource`: container CPU
//!    seconds and working set), over a window with the cluster idle and one with pods created and
//!    deleted every 2 s.
//!
//! `cargo bench -p ocm-score-tests --bench control_plane_nodes`; `NODES_WINDOW_SECONDS` (600) sets
//! each window. Needs root and containerd, runc and the CNI plugins (`bash scripts/test.sh`
//! installs them).

use std::path::Path;
use std::time::{Duration, Instant};

use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::{INSTALL_NAMESPACE, kubectl, score_object};
use ocm_score_control_plane::image::PAUSE;
use ocm_score_control_plane::node::{cgroup_pids, pids_mentioning};
use ocm_score_control_plane::observe::process_figures;
use ocm_score_tests::go_module::user_cache_dir;
use ocm_score_tests::support::Exposition;

const CLUSTERS: [&str; 2] = ["cluster1", "cluster2"];

fn mib(bytes: u64) -> f64 {
    bytes as f64 / 1048576.0
}

/// A control plane with nodes, and its start-up time (waiting for the machine lock excluded).
async fn start() -> anyhow::Result<(ControlPlane, f64)> {
    let cp = ControlPlane::builder()
        .clusters(2)
        .nodes(true)
        .start_with_progress(&|l| eprintln!("{l}"))
        .await?;
    let seconds = cp.start_seconds();
    Ok((cp, seconds))
}

/// Seconds from `kubectl apply -k manifests/hub` until every cluster's score is on the hub.
async fn install(cp: &ControlPlane) -> anyhow::Result<f64> {
    let hub = cp.hub_client().await?;
    let started = Instant::now();
    kubectl(
        &cp.hub_kubeconfig(),
        &["apply", "--server-side", "-k", "manifests/hub"],
    )?;
    for cluster in CLUSTERS {
        while score_object(&hub, cluster).await.ok().flatten().is_none() {
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(600),
                "no score from {cluster} in 600 s"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(started.elapsed().as_secs_f64())
}

/// Resident memory of processes, bytes.
fn rss(pids: Vec<u32>) -> u64 {
    pids.into_iter()
        .filter_map(|p| process_figures(p).map(|f| f.rss_bytes))
        .sum()
}

/// (node: kubelet + containerd + kube-proxy + shims, its pods) for a cluster, bytes.
fn node_memory(cp: &ControlPlane, cluster: &str) -> (u64, u64) {
    let own: u64 = cp
        .processes()
        .iter()
        .filter(|(name, _)| {
            [
                format!("{cluster}-kubelet"),
                format!("{cluster}-containerd"),
                format!("{cluster}-kube-proxy"),
            ]
            .contains(name)
        })
        .filter_map(|(_, pid)| process_figures(*pid).map(|f| f.rss_bytes))
        .sum();
    let node = cp.nodes().iter().find(|n| n.cluster == cluster);
    let shims = node
        .map(|n| {
            rss(pids_mentioning(&format!(
                "-address {}",
                n.containerd_socket().display()
            )))
        })
        .unwrap_or(0);
    let pods = rss(cgroup_pids(
        &Path::new("/sys/fs/cgroup/memory").join(format!("ocms-{cluster}")),
    ));
    (own + shims, pods)
}

/// The agent container's (cpu seconds, working set bytes) from cluster2's kubelet.
fn agent_usage(cp: &ControlPlane) -> Option<(f64, f64)> {
    let text = kubectl(
        &cp.kubeconfig("cluster2"),
        &[
            "get",
            "--raw",
            "/api/v1/nodes/cluster2-node/proxy/metrics/resource",
        ],
    )
    .ok()?;
    let exposition = Exposition::parse(&text).ok()?;
    let labels = [("namespace", INSTALL_NAMESPACE), ("container", "agent")];
    Some((
        exposition.sum("container_cpu_usage_seconds_total", &labels),
        exposition.sum("container_memory_working_set_bytes", &labels),
    ))
}

/// Average CPU (cores) and peak working set (MiB) of the agent over `window`, sampling every 10 s;
/// with `churn`, a pod is created and the previous one deleted every 2 s meanwhile.
async fn agent_window(cp: &ControlPlane, window: Duration, churn: bool) -> anyhow::Result<(f64, f64, usize)> {
    let kc = cp.kubeconfig("cluster2");
    let (cpu0, _) =
        agent_usage(cp).ok_or_else(|| anyhow::anyhow!("no agent figures from cluster2's kubelet"))?;
    let started = Instant::now();
    let mut peak: f64 = 0.0;
    let mut next_sample = Instant::now();
    let mut churned = 0;
    let dir = cp.dir().join("churn");
    std::fs::create_dir_all(&dir)?;
    while started.elapsed() < window {
        if Instant::now() >= next_sample {
            if let Some((_, ws)) = agent_usage(cp) {
                peak = peak.max(ws);
            }
            next_sample += Duration::from_secs(10);
        }
        if churn {
            let name = format!("churn-{churned}");
            let pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"containers": [{"name": "c", "image": PAUSE.reference, "imagePullPolicy": "Never",
                          "resources": {"requests": {"cpu": "10m", "memory": "8Mi"}}}]}});
            let file = dir.join("pod.json");
            std::fs::write(&file, pod.to_string())?;
            kubectl(&kc, &["apply", "-f", &file.display().to_string()])?;
            if churned > 0 {
                kubectl(
                    &kc,
                    &["delete", "pod", &format!("churn-{}", churned - 1), "--wait=false"],
                )?;
            }
            churned += 1;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let (cpu1, ws) = agent_usage(cp).ok_or_else(|| anyhow::anyhow!("no agent figures at the end"))?;
    peak = peak.max(ws);
    Ok((
        (cpu1 - cpu0) / started.elapsed().as_secs_f64(),
        mib(peak as u64),
        churned,
    ))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let window = Duration::from_secs(
        std::env::var("NODES_WINDOW_SECONDS")
            .ok()
            .map(|v| v.parse())
            .transpose()?
            .unwrap_or(600),
    );
    // Cold: the image archives are assembled again (the Go components stay cached).
    let _ = std::fs::remove_dir_all(user_cache_dir().join("images"));
    let (cold, cold_start) = start().await?;
    let cold_install = install(&cold).await?;
    drop(cold);
    let (cp, warm_start) = start().await?;
    let warm_install = install(&cp).await?;
    // Let every pod settle before memory is read.
    tokio::time::sleep(Duration::from_secs(30)).await;

    println!("{}", cp.versions().trim_end());
    println!(
        "machine: {} cores, {:.1} GiB; load average {}",
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0),
        std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| m
                .lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok()))
            .unwrap_or(0.0)
            / 1048576.0,
        std::fs::read_to_string("/proc/loadavg")
            .unwrap_or_default()
            .trim()
    );
    println!(
        "\n| start | control plane with nodes Ready, s | `kubectl apply -k manifests/hub` to every cluster's first score, s |"
    );
    println!("|---|---|---|");
    println!("| cold (images assembled) | {cold_start:.1} | {cold_install:.1} |");
    println!("| warm | {warm_start:.1} | {warm_install:.1} |");

    let mut total_nodes = 0;
    let mut total_pods = 0;
    println!("\n| node | kubelet + containerd + kube-proxy + shims, MiB | its pods, MiB |");
    println!("|---|---|---|");
    for cluster in CLUSTERS {
        let (node, pods) = node_memory(&cp, cluster);
        total_nodes += node;
        total_pods += pods;
        println!("| {cluster}-node | {:.0} | {:.0} |", mib(node), mib(pods));
    }
    let components: u64 = cp
        .processes()
        .iter()
        .filter_map(|(_, pid)| process_figures(*pid).map(|f| f.rss_bytes))
        .sum();
    let shims = rss(pids_mentioning("containerd-shim-runc-v2"));
    println!(
        "\nwhole control plane (every component, shims and pods): {:.0} MiB (nodes {:.0}, pods {:.0})",
        mib(components + shims + total_pods),
        mib(total_nodes),
        mib(total_pods)
    );

    let (idle_cpu, idle_ws, _) = agent_window(&cp, window, false).await?;
    let (churn_cpu, churn_ws, churned) = agent_window(&cp, window, true).await?;
    println!(
        "\n| agent pod on cluster2, {} s window | CPU, millicores (average) | working set, MiB (peak) |",
        window.as_secs()
    );
    println!("|---|---|---|");
    println!("| idle | {:.1} | {idle_ws:.1} |", idle_cpu * 1000.0);
    println!(
        "| {churned} pods created and deleted, one every 2 s | {:.1} | {churn_ws:.1} |",
        churn_cpu * 1000.0
    );
    Ok(())
}
