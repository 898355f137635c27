//! The agent on a loaded managed cluster of the real control plane, printed as a markdown table:
//! cluster2's API server is loaded with Nodes and Pods bound to them (API objects only, no
//! kubelets: each Node with allocatable and Ready, each Pod with requests and a Running status),
//! then the real `ocm-score-agent` binary runs as OCM's work agent deployed it
//! ([`start_agent`]: the Deployment's args and env, its hub kubeconfig, its ServiceAccount).
//! Measured: time from the agent's start to its first score on the hub; its resident memory
//! (VmRSS and VmHWM from `/proc`) once scored, after an idle window and after a window of pod
//! churn; its CPU over each window.
//!
//! `cargo bench -p ocm-score-tests --bench control_plane_agent`. Sizes from the environment:
//! `AGENT_NODES` (5000), `AGENT_PODS` (150000), `AGENT_IDLE_SECONDS` (60), `AGENT_CHURN_SECONDS`
//! (60), `AGENT_CHURN_RATE` (pods created per second in the churn window, each deleted 5 s later;
//! 10), `AGENT_LOAD_CONCURRENCY` (requests in flight while loading; 32), `AGENT_HOLD_SECONDS` (0:
//! how long to keep the loaded control plane and the agent up after the table, to measure other
//! agents against the same cluster; the agent's pid and working directory are printed, and creating
//! a file `release` in that directory ends the hold early).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::{
    install_and_start_manager, score_object, start_agent, wait_agent_installed,
};
use ocm_score_control_plane::observe::scrape;
use ocm_score_control_plane::process::Component;
use ocm_score_tests::support::TempDir;
use serde_json::json;

const CLUSTER: &str = "cluster2";
/// Namespaces the pods are spread over.
const NAMESPACES: usize = 50;
/// Patience for the add-on install and the agent's first score.
const WAIT: Duration = Duration::from_secs(900);

fn env_usize(name: &str, default: usize) -> anyhow::Result<usize> {
    ocm_score_tests::support::env_usize(name, default).map_err(anyhow::Error::msg)
}

fn progress(line: &str) {
    eprintln!("[{}] {line}", jiff::Timestamp::now().strftime("%H:%M:%S"));
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

fn proc_field(pid: u32, file: &str, key: &str) -> Option<String> {
    field_of(&format!("/proc/{pid}/{file}"), key)
}

/// The value after `key` on its line of a `/proc` file.
fn field_of(path: &str, key: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(key).map(|v| v.trim().to_owned()))
}

/// VmRSS and VmHWM of a process, KiB.
fn memory_kib(pid: u32) -> (u64, u64) {
    let kib = |key| {
        proc_field(pid, "status", key)
            .and_then(|v| v.trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (kib("VmRSS:"), kib("VmHWM:"))
}

/// Where the resident memory is: `RssAnon` (heap and stacks) and `RssFile` (the mapped binary), KiB.
fn resident_split_kib(pid: u32) -> (u64, u64) {
    let kib = |key| {
        proc_field(pid, "status", key)
            .and_then(|v| v.trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    (kib("RssAnon:"), kib("RssFile:"))
}

/// User + system CPU time of a process, seconds (`/proc/<pid>/stat` fields 14 and 15).
fn cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The command name may hold spaces; fields start after its closing parenthesis.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    // USER_HZ is 100 on every Linux this runs on.
    ticks as f64 / 100.0
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn node_name(i: usize) -> String {
    format!("load-node-{i:05}")
}

/// An m6i.8xlarge-like node, Ready; every tenth with 8 GPUs.
fn node(i: usize) -> anyhow::Result<Node> {
    let gpu = if i.is_multiple_of(10) { "8" } else { "0" };
    let resources = json!({"cpu": "31850m", "memory": "126498524Ki", "ephemeral-storage": "95492233231",
        "nvidia.com/gpu": gpu, "pods": "110"});
    Ok(serde_json::from_value(json!({
        "metadata": {"name": node_name(i), "labels": {
            "kubernetes.io/os": "linux", "kubernetes.io/hostname": node_name(i),
            "node.kubernetes.io/instance-type": "m6i.8xlarge", "topology.kubernetes.io/zone": format!("zone-{}", i % 3),
        }},
        "status": {
            "capacity": resources, "allocatable": resources,
            "conditions": [
                {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory"},
                {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure"},
                {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID"},
                {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"},
            ],
            "addresses": [{"type": "InternalIP", "address": format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256)}],
            "nodeInfo": {"machineID": "m", "systemUUID": "s", "bootID": "b", "kernelVersion": "6.1.0",
                "osImage": "Debian", "containerRuntimeVersion": "containerd://2.0.0", "kubeletVersion": "v1.34.3",
                "kubeProxyVersion": "v1.34.3", "operatingSystem": "linux", "architecture": "amd64"},
        },
    }))?)
}

/// A pod of a realistic mix (the agent benchmark's): one or two containers, some with an init
/// container, a sidecar, overhead-free; every 50th asks for a GPU.
fn pod(i: usize, namespace: &str, node: &str, prefix: &str) -> anyhow::Result<Pod> {
    let container = |name: &str, cpu: &str, memory: &str| {
        json!({
            "name": name, "image": "registry.example/app:1.2.3",
            "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}},
            "env": [{"name": "LOG_LEVEL", "value": "info"}],
            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
        })
    };
    let mut app = container(
        "app",
        ["250m", "500m", "1", "100m"][i % 4],
        ["512Mi", "1Gi", "256Mi"][i % 3],
    );
    if i.is_multiple_of(50) {
        app["resources"]["requests"]["nvidia.com/gpu"] = json!("1");
        app["resources"]["limits"]["nvidia.com/gpu"] = json!("1");
    }
    let mut containers = vec![app];
    if i.is_multiple_of(3) {
        containers.push(container("log-shipper", "50m", "64Mi"));
    }
    let mut init = Vec::new();
    if i.is_multiple_of(5) {
        init.push(container("migrate", "1", "2Gi"));
    }
    if i.is_multiple_of(7) {
        let mut proxy = container("proxy", "100m", "128Mi");
        proxy["restartPolicy"] = json!("Always");
        init.insert(0, proxy);
    }
    Ok(serde_json::from_value(json!({
        "metadata": {"name": format!("{prefix}-{}-7d9f8b6c5d-{i:06x}", i / 100), "namespace": namespace,
            "labels": {"app": format!("{prefix}-{}", i / 100), "pod-template-hash": "7d9f8b6c5d"}},
        "spec": {"nodeName": node, "containers": containers, "initContainers": init},
    }))?)
}

/// The status a kubelet would report for a running pod.
fn running_status(i: usize) -> serde_json::Value {
    let ip = format!("10.{}.{}.{}", 100 + i / 65536, (i / 256) % 256, i % 256);
    json!({"status": {
        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}], "hostIP": "10.0.0.1",
        "startTime": "2026-11-26T00:00:00Z", "qosClass": "Burstable",
        "conditions": [
            {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-26T00:00:00Z"},
            {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-26T00:00:05Z"},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-11-26T00:00:05Z"},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-26T00:00:00Z"},
        ],
        "containerStatuses": [{"name": "app", "ready": true, "restartCount": 0, "started": true,
            "image": "registry.example/app:1.2.3", "imageID": "registry.example/app@sha256:0123456789abcdef",
            "containerID": format!("containerd://{i:064x}"),
            "state": {"running": {"startedAt": "2026-11-26T00:00:04Z"}}}],
    }})
}

/// Namespaces `load-0..` with their `default` ServiceAccount (pods are refused until the
/// controller manager created it).
async fn namespaces(client: &kube::Client) -> anyhow::Result<Vec<String>> {
    let api: Api<Namespace> = Api::all(client.clone());
    let names: Vec<String> = (0..NAMESPACES).map(|i| format!("load-{i}")).collect();
    for name in &names {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
        api.create(&PostParams::default(), &ns).await?;
    }
    for name in &names {
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
        let started = Instant::now();
        while accounts.get_opt("default").await?.is_none() {
            anyhow::ensure!(started.elapsed() < WAIT, "no default ServiceAccount in {name}");
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    Ok(names)
}

/// Runs `work(i)` for `0..count` with `concurrency` in flight, printing progress every tenth.
async fn each<F, Fut>(what: &str, count: usize, concurrency: usize, work: F) -> anyhow::Result<Duration>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let started = Instant::now();
    let done = Arc::new(AtomicUsize::new(0));
    let step = (count / 10).max(1);
    stream::iter(0..count)
        .map(|i| {
            let done = done.clone();
            let fut = work(i);
            async move {
                fut.await?;
                let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                if n.is_multiple_of(step) {
                    let secs = started.elapsed().as_secs_f64();
                    progress(&format!(
                        "{what}: {n}/{count} in {secs:.0} s ({:.0}/s)",
                        n as f64 / secs
                    ));
                }
                anyhow::Ok(())
            }
        })
        .buffer_unordered(concurrency)
        .try_collect::<()>()
        .await?;
    Ok(started.elapsed())
}

/// Loads the managed cluster: `nodes` Ready nodes, `pods` Running pods bound round-robin to them.
async fn load(
    client: &kube::Client,
    nodes: usize,
    pods: usize,
    concurrency: usize,
) -> anyhow::Result<String> {
    let node_api: Api<Node> = Api::all(client.clone());
    let node_time = each("nodes", nodes, concurrency, |i| {
        let api = node_api.clone();
        async move {
            let created = api.create(&PostParams::default(), &node(i)?).await?;
            let name = created.metadata.name.unwrap_or_default();
            // Nodes keep the status they are created with; the TaintNodesByCondition admission
            // taints every new node not-ready, which the node lifecycle controller (not run here)
            // would lift once the node is Ready.
            api.patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"taints": null}})),
            )
            .await?;
            Ok(())
        }
    })
    .await?;
    let names = namespaces(client).await?;
    let pod_time = each("pods", pods, concurrency, |i| {
        let api: Api<Pod> = Api::namespaced(client.clone(), &names[i % names.len()]);
        let namespace = names[i % names.len()].clone();
        async move {
            let pod = pod(i, &namespace, &node_name(i % nodes.max(1)), "web")?;
            let created = api.create(&PostParams::default(), &pod).await?;
            let name = created.metadata.name.unwrap_or_default();
            // A created pod is Pending whatever status it carried; the kubelet reports Running.
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(running_status(i)))
                .await?;
            Ok(())
        }
    })
    .await?;
    Ok(format!(
        "{nodes} nodes in {:.0} s, {pods} pods (create + status) in {:.0} s, {concurrency} requests in flight",
        node_time.as_secs_f64(),
        pod_time.as_secs_f64()
    ))
}

/// Creates `rate` pods per second for `window`, each deleted 5 s after its creation; the number of
/// pods created.
async fn churn(client: &kube::Client, nodes: usize, rate: usize, window: Duration) -> anyhow::Result<usize> {
    let api: Api<Pod> = Api::namespaced(client.clone(), "load-0");
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate.max(1) as f64));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    let mut created = 0;
    while started.elapsed() < window {
        tick.tick().await;
        let i = 1_000_000 + created;
        created += 1;
        let api = api.clone();
        let pod = pod(i, "load-0", &node_name(i % nodes.max(1)), "churn")?;
        tasks.spawn(async move {
            let made = api.create(&PostParams::default(), &pod).await?;
            let name = made.metadata.name.unwrap_or_default();
            api.patch_status(&name, &PatchParams::default(), &Patch::Merge(running_status(i)))
                .await?;
            tokio::time::sleep(Duration::from_secs(5)).await;
            api.delete(&name, &DeleteParams::default().grace_period(0))
                .await?;
            anyhow::Ok(())
        });
        while let Some(done) = tasks.try_join_next() {
            done??;
        }
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(created)
}

/// The agent's CPU (millicores, average) over `window` while `during` runs, and its memory after.
async fn window<Fut: Future<Output = anyhow::Result<String>>>(
    agent: &Component,
    window: Duration,
    during: Fut,
) -> anyhow::Result<(f64, String, (u64, u64))> {
    let pid = agent.pid();
    let (cpu_before, started) = (cpu_seconds(pid), Instant::now());
    let what = during.await?;
    let remaining = window.saturating_sub(started.elapsed());
    tokio::time::sleep(remaining).await;
    let millicores = (cpu_seconds(pid) - cpu_before) / started.elapsed().as_secs_f64() * 1000.0;
    Ok((millicores, what, memory_kib(pid)))
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let nodes = env_usize("AGENT_NODES", 5_000)?;
    let pods = env_usize("AGENT_PODS", 150_000)?;
    let idle = Duration::from_secs(env_usize("AGENT_IDLE_SECONDS", 60)? as u64);
    let churn_window = Duration::from_secs(env_usize("AGENT_CHURN_SECONDS", 60)? as u64);
    let rate = env_usize("AGENT_CHURN_RATE", 10)?;
    let concurrency = env_usize("AGENT_LOAD_CONCURRENCY", 32)?.max(1);
    let hold = Duration::from_secs(env_usize("AGENT_HOLD_SECONDS", 0)? as u64);

    let cp = ControlPlane::builder()
        .clusters(2)
        .start_with_progress(&progress)
        .await?;
    let load_before = load_average();
    let dir = TempDir::new("agent-bench");
    let hub = cp.hub_client().await?;
    let managed = cp.cluster_client(CLUSTER).await?;
    let manager = install_and_start_manager(&cp, dir.path()).await?;
    wait_agent_installed(&cp, CLUSTER, None, WAIT, || manager.tail()).await;
    progress(&format!(
        "agent installed on {CLUSTER}; loading {nodes} nodes and {pods} pods"
    ));
    let loaded = load(&managed, nodes, pods, concurrency).await?;
    progress(&loaded);

    // Let the API server settle after the load before the agent starts.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let load_at_start = load_average();
    let started = Instant::now();
    let mut agent = start_agent(&cp, CLUSTER, dir.path()).await?;
    let pid = agent.pid();
    while score_object(&hub, CLUSTER).await.ok().flatten().is_none() {
        agent.check_running()?;
        anyhow::ensure!(
            started.elapsed() < WAIT,
            "no score within {WAIT:?}:\n{}",
            agent.tail()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let first_score = started.elapsed();
    let at_first_score = memory_kib(pid);
    let split_at_first_score = resident_split_kib(pid);
    progress(&format!("first score after {:.1} s", first_score.as_secs_f64()));
    let counted = scrape(&agent)
        .await
        .and_then(|e| e.value("ocm_score_agent_counted_pods", &[]))
        .unwrap_or(-1.0);

    let (idle_cpu, _, after_idle) = window(&agent, idle, async { Ok(String::new()) }).await?;
    progress(&format!("idle window done: {idle_cpu:.1} millicores"));
    let (churn_cpu, churned, after_churn) = window(&agent, churn_window, async {
        let created = churn(&managed, nodes, rate, churn_window).await?;
        Ok(format!("{created} pods created and deleted"))
    })
    .await?;
    agent.check_running()?;

    let commit = std::process::Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let memory_total = field_of("/proc/meminfo", "MemTotal:").unwrap_or_default();
    let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines().find_map(|l| {
                l.strip_prefix("model name")
                    .map(|v| v.trim_start_matches([' ', '\t', ':']).to_owned())
            })
        })
        .unwrap_or_default();
    println!(
        "## ocm-score-agent on a managed cluster with {nodes} nodes / {pods} pods, real kube-apiserver\n"
    );
    println!(
        "{} · commit {commit} · nproc {} ({cpu_model}) · memory {memory_total} · load average before {load_before}, at agent start {load_at_start}, after {} · {}\n",
        jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC"),
        std::thread::available_parallelism().map_or(0, usize::from),
        load_average(),
        cp.versions().trim_end().replace('\n', ", ")
    );
    println!("Loading: {loaded}. The agent counted {counted} pods.\n");
    println!("| measurement | result | goal |");
    println!("|---|---|---|");
    println!(
        "| agent start → first score on the hub | {:.1} s | — |",
        first_score.as_secs_f64()
    );
    println!(
        "| RSS at first score (VmRSS; VmHWM) | {}; {} | ≤ 64 MiB |",
        mib(at_first_score.0),
        mib(at_first_score.1)
    );
    println!(
        "| of which at first score: heap and stacks (RssAnon); mapped binary and libraries (RssFile) | {}; {} | — |",
        mib(split_at_first_score.0),
        mib(split_at_first_score.1)
    );
    println!(
        "| idle, {} s: CPU; RSS after (VmRSS; VmHWM) | {idle_cpu:.1} millicores; {}; {} | — |",
        idle.as_secs(),
        mib(after_idle.0),
        mib(after_idle.1)
    );
    println!(
        "| churn, {} s at {rate} pods/s ({churned}, each deleted after 5 s): CPU; RSS after (VmRSS; VmHWM) | {churn_cpu:.1} millicores; {}; {} | — |",
        churn_window.as_secs(),
        mib(after_churn.0),
        mib(after_churn.1)
    );
    if !hold.is_zero() {
        progress(&format!(
            "holding the loaded cluster for {} s: agent pid {pid}, its files in {}",
            hold.as_secs(),
            dir.path().display()
        ));
        let release = dir.path().join("release");
        let started = Instant::now();
        while started.elapsed() < hold && !release.exists() {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    Ok(())
}
