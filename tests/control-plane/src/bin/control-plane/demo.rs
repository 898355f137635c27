//! `control-plane demo`: the add-on doing its job on a real OCM hub, start to finish, in one command:
//! installed as shipped, run as pods on real kubelets, choosing clusters for OCM.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::{
    ADDON, INSTALL_NAMESPACE, decided, hub_snapshot, kubectl, score, workspace_binary,
};
use ocm_score_control_plane::pods::hold_memory;
use ocm_score_control_plane::support::TempDir;

const SCORES: [&str; 4] = [
    "cpuClusterAvailable",
    "cpuNodeAvailable",
    "memClusterAvailable",
    "memNodeAvailable",
];
const CLUSTERS: [&str; 2] = ["cluster1", "cluster2"];

pub async fn run(dir: Option<PathBuf>, progress: &dyn Fn(&str)) -> anyhow::Result<()> {
    let started = Instant::now();
    let scratch = TempDir::new("demo");
    let dir = dir.unwrap_or_else(|| scratch.path().to_path_buf());
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let hub_binary = workspace_binary("ocm-score-hub")?;

    let cp = ControlPlane::builder()
        .clusters(2)
        .nodes(true)
        .dir(dir.join("control-plane"))
        .start_with_progress(progress)
        .await?;
    let hub = cp.hub_client().await?;
    let hub_kc = cp.hub_kubeconfig();
    let logs = || {
        ["cluster1-kubelet", "cluster2-kubelet", "cluster2-klusterlet"]
            .iter()
            .map(|c| format!("--- {c}\n{}", cp.log_tail(c, 10)))
            .collect::<Vec<_>>()
            .join("\n")
    };

    progress("installing the add-on as shipped: kubectl apply --server-side -k manifests/hub");
    kubectl(&hub_kc, &["apply", "--server-side", "-k", "manifests/hub"])?;
    progress(
        "waiting for OCM to register the add-on, its work agents to deploy the agent, and the agents' scores",
    );
    for cluster in CLUSTERS {
        let managed = cp.cluster_client(cluster).await?;
        wait(&format!("the agent pod running on {cluster}"), logs, || {
            let managed = managed.clone();
            async move { running_pods(&managed, INSTALL_NAMESPACE).await > 0 }
        })
        .await?;
        wait(&format!("{cluster}'s scores"), logs, || {
            let hub = hub.clone();
            async move { score(&hub, cluster, "memClusterAvailable").await.is_some() }
        })
        .await?;
    }
    print_pods(&cp)?;
    print_scores(
        &hub,
        "scores published by the agents (each cluster's node is this machine)",
    )
    .await;

    progress("kubectl apply -k manifests/examples: Placements that choose by these scores");
    kubectl(&hub_kc, &["apply", "-k", "manifests/examples"])?;
    wait("OCM's decision for most-free-memory", String::new, || {
        let hub = hub.clone();
        async move {
            decided(&hub, "ocm-score-examples", "most-free-memory")
                .await
                .len()
                == 1
        }
    })
    .await?;
    let before = decided(&hub, "ocm-score-examples", "most-free-memory").await;
    println!("\nOCM's placement controller: most-free-memory -> {before:?}");

    let chosen = before.first().cloned().unwrap_or_default();
    progress(&format!(
        "loading {chosen}: a pod requesting {LOAD_MEMORY} of memory, scheduled by its kube-scheduler and run by its kubelet"
    ));
    let loaded = cp.cluster_client(&chosen).await?;
    hold_memory(&loaded, "default", "memory-load", LOAD_MEMORY).await?;
    wait("OCM to move most-free-memory", logs, || {
        let hub = hub.clone();
        let before = before.clone();
        async move {
            let now = decided(&hub, "ocm-score-examples", "most-free-memory").await;
            !now.is_empty() && now != before
        }
    })
    .await?;
    print_pods(&cp)?;
    print_scores(&hub, &format!("scores after loading {chosen}")).await;
    let after = decided(&hub, "ocm-score-examples", "most-free-memory").await;
    println!("\nOCM's placement controller: most-free-memory -> {after:?} (was {before:?})");

    // simulate on a snapshot taken the way docs/simulate.md says: the same choice, and why.
    let snapshot = hub_snapshot(&hub_kc)?;
    let snapshot_file = dir.join("snapshot.yaml");
    std::fs::write(&snapshot_file, snapshot)
        .with_context(|| format!("writing {}", snapshot_file.display()))?;
    let out = std::process::Command::new(&hub_binary)
        .args(["simulate", "-p", "ocm-score-examples/most-free-memory", "-f"])
        .arg(&snapshot_file)
        .output()
        .context("running simulate")?;
    if !out.status.success() {
        bail!("simulate failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    println!("\nocm-score-hub simulate -f snapshot.yaml -p ocm-score-examples/most-free-memory:");
    println!("{}", String::from_utf8_lossy(&out.stdout));

    println!(
        "{ADDON} on a real OCM hub, as pods: {:.0} s from start to this line; stopping everything",
        started.elapsed().as_secs_f64()
    );
    drop(cp);
    Ok(())
}

/// What the demo puts on the chosen cluster: a pod requesting most of a node's memory.
const LOAD_MEMORY: &str = "16Gi";

/// Running pods of a namespace.
async fn running_pods(client: &kube::Client, namespace: &str) -> usize {
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client.clone(), namespace);
    pods.list(&Default::default())
        .await
        .map(|l| {
            l.items
                .iter()
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .count()
        })
        .unwrap_or(0)
}

/// `kubectl get pods -A -o wide` of every cluster (cluster1 is the hub).
fn print_pods(cp: &ControlPlane) -> anyhow::Result<()> {
    for cluster in CLUSTERS {
        let hub = if cluster == "cluster1" { " (the hub)" } else { "" };
        println!("\n$ kubectl --kubeconfig {cluster}.kubeconfig get pods -A -o wide{hub}");
        print!(
            "{}",
            kubectl(&cp.kubeconfig(cluster), &["get", "pods", "-A", "-o", "wide"])?
        );
    }
    Ok(())
}

async fn print_scores(hub: &kube::Client, title: &str) {
    println!("\n{title} (AddOnPlacementScore resource-usage-score):");
    println!(
        "{:<10} {}",
        "cluster",
        SCORES.map(|s| format!("{s:>20}")).join("")
    );
    for cluster in CLUSTERS {
        let mut row = format!("{cluster:<10} ");
        for name in SCORES {
            let value = score(hub, cluster, name)
                .await
                .map(|v| v.to_string())
                .unwrap_or_else(|| "-".into());
            row.push_str(&format!("{value:>20}"));
        }
        println!("{row}");
    }
}

/// Polls `check` every half second for up to two minutes; the error names what and shows `context`.
async fn wait<F, Fut>(what: &str, context: impl Fn() -> String, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        if started.elapsed() > Duration::from_secs(120) {
            bail!("{what} did not happen within 120 s\n{}", context());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}
