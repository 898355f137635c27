//! Throughput and memory of the API server double, printed as a markdown table.
//!
//! `cargo bench -p ocm-score-kube-double --bench kube_double`. Client and server share the machine
//! (2 cores here), as they do in the agent and hub scale tests, so the figures include the kube
//! client's own cost. Counts are fixed; only the time they take is measured.

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{
    Api,
    api::{ListParams, Patch, PatchParams, PostParams},
};
use ocm_score_kube_double::ApiServer;
use serde_json::json;
use std::time::Instant;

const CONCURRENCY: usize = 16;

/// Resident set size of this process, from /proc (Linux).
fn rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": "bench"}},
        "data": {"key": "value"},
    }))
    .unwrap_or_default()
}

struct Row {
    what: String,
    requests: usize,
    seconds: f64,
}

async fn run<F, Fut>(what: &str, requests: usize, op: F) -> anyhow::Result<Row>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let started = Instant::now();
    let results: Vec<anyhow::Result<()>> = stream::iter(0..requests)
        .map(&op)
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let seconds = started.elapsed().as_secs_f64();
    if let Some(Err(e)) = results.into_iter().find(|r| r.is_err()) {
        anyhow::bail!("{what}: {e}");
    }
    Ok(Row {
        what: what.into(),
        requests,
        seconds,
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    // Memory: a fresh server, 10,000 AddOnPlacementScores with three scores each, created in-process.
    let before = rss_bytes();
    let memory_server = ApiServer::builder().upstream_crds().start().await?;
    let baseline = rss_bytes();
    for c in 0..100 {
        memory_server.create(
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": format!("cluster{c}")}}),
        )?;
    }
    for i in 0..10_000 {
        let score = json!({
            "apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "AddOnPlacementScore",
            "metadata": {"name": format!("score-{i}"), "namespace": format!("cluster{}", i % 100)},
        });
        memory_server.create(score)?;
    }
    let after = rss_bytes();
    memory_server.shutdown().await;

    let server = ApiServer::builder()
        .upstream_crds()
        .builtin_kinds()
        .start()
        .await?;
    let cms: Api<ConfigMap> = Api::namespaced(server.admin_client(), "default");
    let mut rows = Vec::new();

    const WRITES: usize = 10_000;
    rows.push(
        run("create (small ConfigMap)", WRITES, |i| {
            let cms = cms.clone();
            async move {
                cms.create(&PostParams::default(), &config_map(&format!("cm-{i}")))
                    .await?;
                Ok(())
            }
        })
        .await?,
    );
    rows.push(
        run("get", WRITES, |i| {
            let cms = cms.clone();
            async move {
                cms.get(&format!("cm-{}", i % WRITES)).await?;
                Ok(())
            }
        })
        .await?,
    );
    rows.push(
        run("patch (merge, changes data)", WRITES, |i| {
            let cms = cms.clone();
            async move {
                let patch = Patch::Merge(json!({"data": {"key": format!("v{i}")}}));
                cms.patch(&format!("cm-{}", i % WRITES), &PatchParams::default(), &patch)
                    .await?;
                Ok(())
            }
        })
        .await?,
    );
    rows.push(
        run("patch (server-side apply)", WRITES, |i| {
            let cms = cms.clone();
            async move {
                let applied = json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": format!("cm-{}", i % WRITES)}, "data": {"applied": format!("a{i}")}});
                cms.patch(&format!("cm-{}", i % WRITES), &PatchParams::apply("bench").force(), &Patch::Apply(applied)).await?;
                Ok(())
            }
        })
        .await?,
    );
    rows.push(
        run("list (limit=100 page of 10,000)", 1_000, |_| {
            let cms = cms.clone();
            async move {
                cms.list(&ListParams::default().limit(100)).await?;
                Ok(())
            }
        })
        .await?,
    );
    rows.push(
        run("list (all 10,000)", 20, |_| {
            let cms = cms.clone();
            async move {
                cms.list(&ListParams::default()).await?;
                Ok(())
            }
        })
        .await?,
    );
    server.shutdown().await;

    println!("| operation | requests | seconds | requests/s |");
    println!("|---|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {:.2} | {:.0} |",
            r.what,
            r.requests,
            r.seconds,
            r.requests as f64 / r.seconds
        );
    }
    println!();
    println!("| memory | MiB |");
    println!("|---|---:|");
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    match (before, baseline, after) {
        (Some(before), Some(baseline), Some(after)) => {
            println!("| process RSS before the server started | {:.1} |", mib(before));
            println!(
                "| RSS growth for 10,000 stored AddOnPlacementScores (incl. watch history) | {:.1} |",
                mib(after.saturating_sub(baseline))
            );
        }
        _ => println!("| RSS (needs /proc/self/status) | n/a |"),
    }
    println!("\n(concurrency {CONCURRENCY}, client and server in one process, 2 worker threads)");
    Ok(())
}
