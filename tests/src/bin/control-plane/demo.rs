//! `control-plane demo`: the add-on doing its job on a real OCM hub, start to finish, in one command.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use ocm_score_tests::control_plane::ControlPlane;
use ocm_score_tests::control_plane::addon::{
    ADDON, add_nodes, add_pod, agent_deployment, decided, hub_snapshot, install_and_start_manager, kubectl,
    score, start_agent, workspace_binary,
};
use ocm_score_tests::support::TempDir;

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
    workspace_binary("ocm-score-agent")?;

    let cp = ControlPlane::builder()
        .clusters(2)
        .dir(dir.join("control-plane"))
        .start_with_progress(progress)
        .await?;
    let hub = cp.hub_client().await?;
    let hub_kc = cp.hub_kubeconfig();

    progress(
        "installing the add-on: kubectl apply -k manifests/hub, and its manager with the shipped identity",
    );
    let mut manager = install_and_start_manager(&cp, &dir).await?;
    progress("waiting for OCM to register the add-on and its work agents to deploy the agent");
    for cluster in CLUSTERS {
        let managed = cp.cluster_client(cluster).await?;
        wait(
            &format!("the agent Deployment on {cluster}"),
            || manager.tail(),
            || {
                let managed = managed.clone();
                async move { agent_deployment(&managed).await.is_some() }
            },
        )
        .await?;
        manager.check_running()?;
    }

    progress(
        "adding nodes (cluster1: 3, cluster2: 2, 8 CPU / 32 Gi each), then running each agent as its Deployment says",
    );
    for (cluster, nodes) in [("cluster1", 3), ("cluster2", 2)] {
        add_nodes(&cp.cluster_client(cluster).await?, cluster, nodes).await?;
    }
    // The secret with the agent's hub certificate may trail the Deployment by a moment.
    let mut agents = Vec::new();
    for cluster in CLUSTERS {
        let agent = loop {
            match start_agent(&cp, cluster, &dir).await {
                Ok(agent) => break agent,
                Err(e) if started.elapsed() < Duration::from_secs(150) => {
                    tracing::debug!("agent of {cluster} not startable yet: {e}");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e.into()),
            }
        };
        agents.push(agent);
    }
    for cluster in CLUSTERS {
        wait(&format!("{cluster}'s scores"), String::new, || {
            let hub = hub.clone();
            async move { score(&hub, cluster, "memClusterAvailable").await.is_some() }
        })
        .await?;
    }
    print_scores(&hub, "scores published by the agents").await;

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
        "loading {chosen}: a pod requesting 30 Gi on each of its first two nodes"
    ));
    let loaded = cp.cluster_client(&chosen).await?;
    for node in 0..2 {
        add_pod(&loaded, &chosen, node, "500m", "30Gi").await?;
    }
    wait(
        "OCM to move most-free-memory",
        || agents.iter().map(|a| a.tail()).collect::<Vec<_>>().join("\n"),
        || {
            let hub = hub.clone();
            let before = before.clone();
            async move {
                let now = decided(&hub, "ocm-score-examples", "most-free-memory").await;
                !now.is_empty() && now != before
            }
        },
    )
    .await?;
    print_scores(&hub, &format!("scores after loading {chosen}")).await;
    let after = decided(&hub, "ocm-score-examples", "most-free-memory").await;
    println!("\nOCM's placement controller: most-free-memory -> {after:?} (was {before:?})");

    // simulate on a snapshot taken the way the README says: the same choice, and why.
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

    for agent in &mut agents {
        agent.check_running()?;
    }
    println!(
        "{ADDON} on a real OCM hub: {:.0} s from start to this line; stopping everything",
        started.elapsed().as_secs_f64()
    );
    drop(agents);
    drop(manager);
    drop(cp);
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
