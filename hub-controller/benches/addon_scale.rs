//! `ocm-score-hub addon-manager` at fleet scale, as a process against the API server double (RBAC on,
//! the permissions of `manifests/hub/`):
//! 1. from nothing to every ManifestWork applied (the work agent is played by the benchmark, which
//!    marks each new work applied), for 2,000 ManagedClusters decided by the install Placement;
//! 2. a steady-state resync of everything (a short `--resync-period`): requests made;
//! 3. a restart with nothing changed: requests made.
//!
//! Prints a markdown table. `ADDON_SCALE_CLUSTERS` overrides the fleet size.

#[path = "../tests/addon_common/mod.rs"]
mod addon_common;

use addon_common::*;
use futures::StreamExt;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use ocm_score_api::{ManagedClusterAddOn, ManifestWork};
use ocm_score_tests::support::proc_status_kib;
use serde_json::json;
use std::time::{Duration, Instant};

const RESYNC: Duration = Duration::from_secs(20);

fn rss_peak_kib(pid: u32) -> u64 {
    proc_status_kib(pid, "VmHWM:")
}

fn rss_now_kib(pid: u32) -> u64 {
    proc_status_kib(pid, "VmRSS:")
}

fn applied_addons(hub: &Hub) -> usize {
    hub.server
        .objects(&gvr::<ManagedClusterAddOn>())
        .iter()
        .filter(|a| {
            a["status"]["conditions"].as_array().is_some_and(|cs| {
                cs.iter()
                    .any(|c| c["type"] == "ManifestApplied" && c["status"] == "True")
            })
        })
        .count()
}

/// Plays every cluster's work agent: each new ManifestWork is reported applied and available.
fn spawn_work_agent(hub: &Hub) -> tokio::task::JoinHandle<()> {
    let admin = hub.admin.clone();
    tokio::spawn(async move {
        let resource = ApiResource::erase::<ManifestWork>(&());
        let works: Api<DynamicObject> = Api::all_with(admin.clone(), &resource);
        let mut events = watcher(works, watcher::Config::default())
            .default_backoff()
            .applied_objects()
            .boxed();
        while let Some(Ok(work)) = events.next().await {
            let has_status = work.data["status"]["conditions"]
                .as_array()
                .is_some_and(|c| !c.is_empty());
            let (Some(namespace), Some(name)) = (work.metadata.namespace.clone(), work.metadata.name.clone())
            else {
                continue;
            };
            if has_status {
                continue;
            }
            let api: Api<DynamicObject> = Api::namespaced_with(admin.clone(), &namespace, &resource);
            let now = jiff::Timestamp::now().to_string();
            let condition = |t: &str| {
                json!({"type": t, "status": "True", "reason": "AppliedManifestComplete", "message": "done",
                       "lastTransitionTime": now})
            };
            let status = json!({"status": {"conditions": [condition("Applied"), condition("Available")]}});
            if let Err(e) = api
                .patch_status(&name, &PatchParams::default(), &Patch::Merge(status))
                .await
            {
                eprintln!("work agent: {namespace}/{name}: {e}");
            }
        }
    })
}

struct Requests {
    total: usize,
    writes: usize,
    reads: usize,
    lists: usize,
    watches: usize,
}

fn requests(hub: &Hub) -> Requests {
    let all = hub.controller_requests();
    Requests {
        total: all.len(),
        writes: all.iter().filter(|r| r.is_write()).count(),
        reads: all.iter().filter(|r| r.verb == "get").count(),
        lists: all.iter().filter(|r| r.verb == "list").count(),
        watches: all.iter().filter(|r| r.verb == "watch").count(),
    }
}

fn reconciles(metrics: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| l.starts_with("ocm_score_addon_reconciles_total{"))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
}

#[tokio::main]
async fn main() {
    let clusters: usize = std::env::var("ADDON_SCALE_CLUSTERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let hub = Hub::start().await;
    let names: Vec<String> = (0..clusters).map(|i| format!("cluster-{i:05}")).collect();
    for name in &names {
        hub.add_cluster(name);
    }
    // Decisions come in pages of 100, as OCM writes them.
    let decisions: Api<ocm_score_api::PlacementDecision> = Api::namespaced(hub.admin.clone(), NAMESPACE);
    for (page, chunk) in names.chunks(100).enumerate() {
        let name = format!("all-clusters-decision-{}", page + 1);
        hub.server
            .create(json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "PlacementDecision",
                "metadata": {"name": name, "namespace": NAMESPACE,
                             "labels": {"cluster.open-cluster-management.io/placement": "all-clusters"}}}))
            .expect("decision");
        let list: Vec<_> = chunk
            .iter()
            .map(|c| json!({"clusterName": c, "reason": ""}))
            .collect();
        decisions
            .patch_status(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"decisions": list}})),
            )
            .await
            .expect("decision status");
    }
    let agent = spawn_work_agent(&hub);
    hub.server.reset_requests();

    let resync = format!("--resync-period={}s", RESYNC.as_secs());
    let started = Instant::now();
    let mut controller = hub.controller("bench", &[resync.as_str()]);
    let pid = controller_pid(&controller);
    let mut last_report = Instant::now();
    loop {
        let done = applied_addons(&hub);
        if done == clusters {
            break;
        }
        assert!(
            !controller.has_exited(),
            "the controller exited:\n{}",
            controller.tail()
        );
        assert!(
            started.elapsed() < Duration::from_secs(1800),
            "no convergence after 30 min ({done}/{clusters})"
        );
        if last_report.elapsed() > Duration::from_secs(10) {
            eprintln!(
                "{:>6.1}s: {done}/{clusters} add-ons with ManifestApplied=True",
                started.elapsed().as_secs_f64()
            );
            last_report = Instant::now();
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let converge = started.elapsed();
    let initial = requests(&hub);
    let peak_initial = rss_peak_kib(pid);
    assert!(
        hub.forbidden().is_empty(),
        "RBAC refused: {:?}",
        &hub.forbidden()[..1]
    );

    // Let the last status writes land, then watch one full resync.
    hub.reset_requests_after_settling(&controller).await;
    let before = reconciles(&controller.get("/metrics").await.1);
    tokio::time::sleep(RESYNC + Duration::from_secs(5)).await;
    let after = reconciles(&controller.get("/metrics").await.1);
    let steady = requests(&hub);
    let peak_steady = rss_peak_kib(pid);
    let rss_steady = rss_now_kib(pid);
    assert_eq!(controller.terminate().await, 0);

    // A restart with nothing changed.
    hub.server.reset_requests();
    let restart_started = Instant::now();
    let restarted = hub.controller("bench", &[resync.as_str()]);
    let restarted_pid = controller_pid(&restarted);
    restarted
        .wait_for("the restart to sync", || {
            restarted.logged("hub caches synced").then_some(())
        })
        .await;
    let synced_after = restart_started.elapsed();
    tokio::time::sleep(Duration::from_secs(10)).await;
    let restart = requests(&hub);
    let restart_reconciles = reconciles(&restarted.get("/metrics").await.1);
    let peak_restart = rss_peak_kib(restarted_pid);
    let rss_restart = rss_now_kib(restarted_pid);
    assert_eq!(restarted.terminate().await, 0);
    agent.abort();

    println!("## ocm-score-hub addon-manager, {clusters} managed clusters (API server double, RBAC on)\n");
    println!(
        "| phase | time | requests (total) | writes | get | list | watch | reconciles | peak RSS | RSS after |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| nothing → all ManifestWorks applied | {:.1} s | {} | {} | {} | {} | {} | – | {:.1} MiB | – |",
        converge.as_secs_f64(),
        initial.total,
        initial.writes,
        initial.reads,
        initial.lists,
        initial.watches,
        peak_initial as f64 / 1024.0
    );
    println!(
        "| steady-state resync ({}s period, {:.0}s observed) | – | {} | {} | {} | {} | {} | {:.0} | {:.1} MiB | {:.1} MiB |",
        RESYNC.as_secs(),
        RESYNC.as_secs_f64() + 5.0,
        steady.total,
        steady.writes,
        steady.reads,
        steady.lists,
        steady.watches,
        after - before,
        peak_steady as f64 / 1024.0,
        rss_steady as f64 / 1024.0
    );
    println!(
        "| restart, nothing changed (synced in {:.1} s, 10 s observed) | – | {} | {} | {} | {} | {} | {:.0} | {:.1} MiB | {:.1} MiB |",
        synced_after.as_secs_f64(),
        restart.total,
        restart.writes,
        restart.reads,
        restart.lists,
        restart.watches,
        restart_reconciles,
        peak_restart as f64 / 1024.0,
        rss_restart as f64 / 1024.0
    );
    println!(
        "\nRequests are the controller's own, leader-election Lease traffic excluded; writes = create/update/patch/delete."
    );
    assert_eq!(steady.writes, 0, "a resync with nothing changed must not write");
    assert_eq!(restart.writes, 0, "a restart with nothing changed must not write");
}

fn controller_pid(controller: &Controller) -> u32 {
    controller.pid().expect("a running controller")
}
