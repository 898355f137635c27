//! `ocm-score-hub tiering` under a fleet's score renewals, as a process against the API server
//! double (RBAC on, the permissions of `manifests/hub/`): N clusters spread over S exclusive
//! cluster sets, T TieredPlacements of two tiers each (sets `k` and `k+1`), every cluster
//! publishing `resource-usage-score` as agents do: once per window, spread over it, each write
//! valid for a while from when it is written (the same values, a later `validUntil`). The writes
//! go on from the first one to the end, so no score expires. Two phases, each timed by the
//! controller's own counters and its CPU time from /proc:
//! 1. renewals: nothing but the renewals, for R windows;
//! 2. changes: the renewals, and 1 % of the clusters change a score value, for one window.
//!
//! Prints a markdown table. `TIERING_BENCH_CLUSTERS` (1,000), `TIERING_BENCH_PLACEMENTS` (10),
//! `TIERING_BENCH_WINDOW_SECONDS` (60, the agents' cadence), `TIERING_BENCH_VALID_SECONDS` (97,
//! the agents' validity: a plan that waited for the `validUntil` it read would re-plan about
//! 37 s after each plan) and `TIERING_BENCH_RENEWAL_WINDOWS` (2) set the sizes.

#[path = "../tests/tiering_common/mod.rs"]
mod tiering_common;

use jiff::Timestamp;
use ocm_score_tests::support::{Exposition, env_usize, proc_cpu_seconds, proc_status_kib};
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tiering_common::{CONVERGE, ControllerProcess, Hub, NAMESPACE};
use tokio::sync::watch;

fn rss_mib(pid: u32) -> f64 {
    proc_status_kib(pid, "VmRSS:") as f64 / 1024.0
}

/// The counters one phase is read from.
#[derive(Clone, Copy, Debug)]
struct Reading {
    at: Instant,
    cpu: f64,
    reconciles: f64,
    renewals: f64,
    changes: f64,
    snapshots: f64,
}

async fn read(controller: &ControllerProcess, pid: u32) -> Reading {
    let mut text = None;
    for _ in 0..20 {
        if let Some((200, body)) = controller.get("/metrics").await {
            text = Some(body);
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let text = text.unwrap_or_else(|| panic!("/metrics did not answer:\n{}", controller.log()));
    let metrics = Exposition::parse(&text).expect("the controller's metrics parse");
    let count = |name: &str, labels: &[(&str, &str)]| metrics.value(name, labels).unwrap_or(0.0);
    Reading {
        at: Instant::now(),
        cpu: proc_cpu_seconds(pid),
        reconciles: count("ocm_score_tiering_reconciles_total", &[]),
        renewals: count("ocm_score_tiering_score_updates_total", &[("effect", "renewal")]),
        changes: count("ocm_score_tiering_score_updates_total", &[("effect", "change")]),
        snapshots: count("ocm_score_tiering_snapshot_builds_total", &[]),
    }
}

fn set_of(cluster: usize, sets: usize) -> String {
    format!("set-{}", cluster % sets)
}

/// The spec of TieredPlacement `k`: tier one set `k`, tier two set `k+1` (of `sets`).
fn spec(k: usize, sets: usize) -> String {
    format!(
        "
apiVersion: tiering.ocm-score.io/v1alpha1
kind: TieredPlacement
metadata: {{name: tp-{k}, namespace: {NAMESPACE}}}
spec:
  mode: Failover
  tiers:
  - {{name: first, clusterSets: [set-{}]}}
  - {{name: second, clusterSets: [set-{}]}}
  capacity:
    debounce: 0s
    rules:
    - score: {{resourceName: resource-usage-score, scoreName: cpu, atLeast: 10}}
  stabilization: {{minDwell: 0s}}
",
        k % sets,
        (k + 1) % sets
    )
}

/// Writes every cluster's score once, spread evenly over `window`, each valid for `valid` from
/// its write; the clusters `changed` names at their write get `value` 30 instead of 50.
async fn publish_all(
    hub: &Hub,
    clusters: usize,
    window: Duration,
    valid: Duration,
    changed: &watch::Receiver<Vec<usize>>,
) {
    let started = Instant::now();
    let valid = jiff::SignedDuration::try_from(valid).unwrap_or(jiff::SignedDuration::MAX);
    for i in 0..clusters {
        let due = window.mul_f64(i as f64 / clusters as f64);
        if let Some(wait) = due.checked_sub(started.elapsed()) {
            tokio::time::sleep(wait).await;
        }
        let value = if changed.borrow().contains(&i) { 30 } else { 50 };
        hub.score(&format!("c{i}"), "cpu", value, Timestamp::now() + valid)
            .await;
    }
    if let Some(wait) = window.checked_sub(started.elapsed()) {
        tokio::time::sleep(wait).await;
    }
}

/// The agents: every cluster renews once per `window`, until the task is aborted; the clusters
/// `changed` holds at their write change their value.
fn agents(
    hub: Arc<Hub>,
    clusters: usize,
    window: Duration,
    valid: Duration,
    changed: watch::Receiver<Vec<usize>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            publish_all(&hub, clusters, window, valid, &changed).await;
        }
    })
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let sizes = (|| {
        Ok::<_, String>((
            env_usize("TIERING_BENCH_CLUSTERS", 1_000)?,
            env_usize("TIERING_BENCH_PLACEMENTS", 10)?,
            env_usize("TIERING_BENCH_WINDOW_SECONDS", 60)?,
            env_usize("TIERING_BENCH_VALID_SECONDS", 97)?,
            env_usize("TIERING_BENCH_RENEWAL_WINDOWS", 2)?,
        ))
    })();
    let (clusters, placements, window_s, valid_s, renewal_windows) = match sizes {
        Ok(sizes) => sizes,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(2);
        }
    };
    let window = Duration::from_secs(window_s as u64);
    let valid = Duration::from_secs(valid_s as u64);
    let sets = placements.max(2);
    let hub = Arc::new(Hub::start().await);
    for s in 0..sets {
        let set = format!("set-{s}");
        hub.server
            .create(json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2",
                "kind": "ManagedClusterSet", "metadata": {"name": set},
                "spec": {"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}}}))
            .expect("cluster set");
        hub.server
            .create(json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2",
                "kind": "ManagedClusterSetBinding", "metadata": {"name": set, "namespace": NAMESPACE},
                "spec": {"clusterSet": set}}))
            .expect("binding");
    }
    for i in 0..clusters {
        let name = format!("c{i}");
        hub.server
            .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
            .expect("cluster namespace");
        hub.server
            .create(json!({"apiVersion": "cluster.open-cluster-management.io/v1",
                "kind": "ManagedCluster",
                "metadata": {"name": name,
                             "labels": {"cluster.open-cluster-management.io/clusterset": set_of(i, sets)}},
                "spec": {"hubAcceptsClient": true}}))
            .expect("cluster");
    }
    eprintln!("{clusters} clusters in {sets} sets; publishing their first scores");
    // The first scores as agents that have run for a while leave them: cluster i wrote its last
    // one a window before its next write in the first window, so the validUntils are spread as
    // in any later window and the plans' timers are as they will stay.
    let signed = |d: Duration| jiff::SignedDuration::try_from(d).unwrap_or(jiff::SignedDuration::MAX);
    for i in 0..clusters {
        let next_write = window.mul_f64(i as f64 / clusters as f64);
        let last_write = Timestamp::now() - signed(window - next_write);
        hub.score(&format!("c{i}"), "cpu", 50, last_write + signed(valid))
            .await;
    }
    let (changing, changed) = watch::channel(Vec::new());
    let agents = agents(hub.clone(), clusters, window, valid, changed);
    let mut controller = hub.controller("tiering-bench");
    controller.wait_ready(CONVERGE, String::new).await;
    let pid = controller.pid().expect("the controller runs");
    for k in 0..placements {
        hub.create_tiered(&spec(k, sets));
    }
    // Settled: every TieredPlacement has a status, and no reconcile for 5 s (or, after 2
    // minutes of plans, not: a controller that re-plans on renewals is never quiet).
    let settle_started = Instant::now();
    loop {
        let planned = (0..placements)
            .filter(|k| {
                hub.find_tiered(&format!("tp-{k}"))
                    .is_some_and(|tp| tp.status.is_some_and(|s| !s.active_tiers.is_empty()))
            })
            .count();
        let before = read(&controller, pid).await;
        tokio::time::sleep(Duration::from_secs(5)).await;
        let after = read(&controller, pid).await;
        if planned == placements && after.reconciles == before.reconciles {
            break;
        }
        if planned == placements && settle_started.elapsed() > Duration::from_secs(120) {
            eprintln!(
                "not quiet: {:.0} reconciles in the last 5 s",
                after.reconciles - before.reconciles
            );
            break;
        }
        assert!(
            settle_started.elapsed() < CONVERGE * 4,
            "{planned} of {placements} TieredPlacements planned, still reconciling:\n{}",
            controller.log()
        );
    }
    eprintln!(
        "settled after {:.0} s; windows of {window_s} s",
        settle_started.elapsed().as_secs_f64()
    );

    let mut rows = Vec::new();
    let one_in_100: Vec<usize> = (0..clusters).step_by(100).collect();
    let renewals = format!("renewals: every cluster once a window, {renewal_windows} windows");
    for (phase, windows, changes) in [
        (renewals.as_str(), renewal_windows, Vec::new()),
        ("renewals, 1 % of clusters changing a score", 1, one_in_100),
    ] {
        // Each cluster writes once a window: a changing one writes its new value in this phase.
        changing.send_replace(changes);
        let before = read(&controller, pid).await;
        tokio::time::sleep(window * windows as u32).await;
        // The last writes' events reach the controller.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let after = read(&controller, pid).await;
        let seconds = after.at.duration_since(before.at).as_secs_f64();
        rows.push(format!(
            "| {phase} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.3} | {:.0} |",
            seconds,
            after.renewals - before.renewals,
            after.changes - before.changes,
            after.reconciles - before.reconciles,
            after.snapshots - before.snapshots,
            after.cpu - before.cpu,
            (after.cpu - before.cpu) / seconds,
            rss_mib(pid),
        ));
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    agents.abort();
    println!(
        "\n`ocm-score-hub tiering` (as `cargo bench` builds it), {clusters} clusters renewing every {window_s} s, valid {valid_s} s, \
         {placements} TieredPlacements of 2 tiers, {} held per TieredPlacement, {} cores, load {}\n",
        2 * clusters / sets,
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        load.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
    );
    println!(
        "| phase | s | renewals seen | changes seen | reconciles | snapshots built | CPU s | cores | RSS MiB |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        println!("{row}");
    }
    let _ = controller.terminate().await;
}
