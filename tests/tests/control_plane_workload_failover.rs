//! A TieredPlacement follows its application, on the real control plane with a node per cluster:
//! a Deployment delivered by OCM's ManifestWorkReplicaSet controller to the clusters of the
//! TieredPlacement's child Placement (OCM's placement controller), run by each cluster's kubelet,
//! its readiness reported by OCM's work agent as status feedback, and `ocm-score-hub tiering`
//! judging it (`spec.workloadHealth`).
//!
//! The readiness probe fails on cue: it is an HTTP probe the kubelet sends to a server this test
//! runs on the host, which answers per node (by the probe's source address) 200 or 503.
//!
//! - The primary's workload turns unready: after `tolerationSeconds` the TieredPlacement fails
//!   over; `purge: Graciously` keeps the primary in the child until the backup's pods are Ready.
//! - The primary's probe recovers: after the hold-down the TieredPlacement fails back, and
//!   `failback.overlap` keeps the backup until the primary's pods are Ready again.
//! - Broken everywhere: one failover, then the plan stays put (`WorkloadHealthy=False`,
//!   `UnhealthyEverywhere`) through more than the hold-down that would otherwise start a failback.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, ListParams};
use ocm_score_api::crd::tiered_placement::{TieredPlacement, TransitionKind, WorkloadState};
use ocm_score_control_plane::addon::workspace_binary;
use ocm_score_control_plane::image::PAUSE;
use ocm_score_control_plane::node::HOST_ADDRESS;
use ocm_score_control_plane::pods;
use ocm_score_control_plane::{ControlPlane, apply};
use ocm_score_tests::support::{TempDir, eventually};
use ocm_score_tests::tiering::{ControllerProcess, TieringView, condition, install_tiering};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Patience for one convergence (pods start, OCM's controllers sync, the work agent reports).
const WAIT: Duration = Duration::from_secs(240);
const NS: &str = "dr";
const NAME: &str = "web";
const TOLERATION: i64 = 20;
const HOLD_DOWN: i64 = 30;
const CLUSTERS: [&str; 2] = ["cluster1", "cluster2"];

/// Answers every request 200 or 503, by the node the request comes from.
#[derive(Clone, Default)]
struct Probes {
    healthy: Arc<Mutex<BTreeMap<Ipv4Addr, bool>>>,
}

impl Probes {
    fn set(&self, node: Ipv4Addr, healthy: bool) {
        self.healthy
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(node, healthy);
    }

    fn is_healthy(&self, from: IpAddr) -> bool {
        let IpAddr::V4(from) = from else { return false };
        self.healthy
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&from)
            .copied()
            .unwrap_or(false)
    }

    /// Serves on the host's bridge address; returns the port.
    async fn serve(&self) -> u16 {
        let listener = TcpListener::bind((HOST_ADDRESS, 0))
            .await
            .expect("bind the probe server");
        let port = listener.local_addr().expect("address").port();
        let probes = self.clone();
        tokio::spawn(async move {
            while let Ok((mut stream, peer)) = listener.accept().await {
                let healthy = probes.is_healthy(peer.ip());
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let status = if healthy {
                        "200 OK"
                    } else {
                        "503 Service Unavailable"
                    };
                    let response =
                        format!("HTTP/1.1 {status}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                    let _ = stream.write_all(response.as_bytes()).await;
                });
            }
        });
        port
    }
}

fn yaml(text: &str) -> Value {
    serde_norway::from_str(text).unwrap_or_else(|e| panic!("YAML: {e}\n{text}"))
}

/// The application: a Deployment of the pause image whose readiness is the probe server's answer,
/// with the status feedback the TieredPlacement judges.
fn replica_set(port: u16) -> Value {
    json!({
        "apiVersion": "work.open-cluster-management.io/v1alpha1",
        "kind": "ManifestWorkReplicaSet",
        "metadata": {"name": NAME, "namespace": NS},
        "spec": {
            "placementRefs": [{"name": NAME, "rolloutStrategy": {"type": "All"}}],
            "manifestWorkTemplate": {
                "workload": {"manifests": [
                    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "web"}},
                    {"apiVersion": "apps/v1", "kind": "Deployment",
                     "metadata": {"name": "web", "namespace": "web"},
                     "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                      "template": {"metadata": {"labels": {"app": "web"}},
                       "spec": {"containers": [{
                           "name": "web", "image": PAUSE.reference, "imagePullPolicy": "IfNotPresent",
                           // A probe the loaded machine cannot fail: the server answers at once, but
                           // beside a CPU hog a 1 s default timeout lapsed and the pod flapped unready.
                           "readinessProbe": {"httpGet": {"host": HOST_ADDRESS.to_string(), "port": port, "path": "/ready"},
                                              "periodSeconds": 1, "timeoutSeconds": 5, "failureThreshold": 2,
                                              "successThreshold": 1}}]}}}}
                ]},
                "manifestConfigs": [{
                    "resourceIdentifier": {"group": "apps", "resource": "deployments", "namespace": "web", "name": "web"},
                    "feedbackRules": [{"type": "WellKnownStatus"}]
                }]
            }
        }
    })
}

fn tiered_placement() -> Value {
    yaml(&format!(
        "
apiVersion: tiering.ocm-score.io/v1alpha1
kind: TieredPlacement
metadata: {{name: {NAME}, namespace: {NS}}}
spec:
  mode: Failover
  tiers:
  - {{name: primary, clusterSets: [dr-primary]}}
  - {{name: secondary, clusterSets: [dr-secondary]}}
  failback: {{policy: Automatic, holdDown: {HOLD_DOWN}s, maxHoldDown: 10m, maxClustersPerStep: 1, overlap: 2m}}
  stabilization: {{minDwell: 0s, maxTransitionsPerHour: 9}}
  workloadHealth:
    manifestWorkReplicaSet: {NAME}
    tolerationSeconds: {TOLERATION}
    purge: Graciously
    gracePeriodSeconds: 600
"
    ))
}

/// Cluster sets `dr-primary` (cluster1) and `dr-secondary` (cluster2), bound to the namespace.
async fn fleet(hub: &Client) {
    let mut objects = vec![json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})];
    for (tier, cluster) in [("primary", "cluster1"), ("secondary", "cluster2")] {
        let set = format!("dr-{tier}");
        objects.push(json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2",
            "kind": "ManagedClusterSet", "metadata": {"name": set},
            "spec": {"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}}}));
        objects.push(json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2",
            "kind": "ManagedClusterSetBinding", "metadata": {"name": set, "namespace": NS},
            "spec": {"clusterSet": set}}));
        objects.push(json!({"apiVersion": "cluster.open-cluster-management.io/v1",
            "kind": "ManagedCluster", "metadata": {"name": cluster,
                "labels": {"cluster.open-cluster-management.io/clusterset": set}}}));
    }
    for object in &objects {
        apply(hub, object).await.unwrap_or_else(|e| panic!("{e}"));
    }
}

/// When the application's pod on a cluster became Ready, if one is.
async fn app_ready_since(managed: &Client) -> Result<Option<Timestamp>, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(managed.clone(), "web");
    let list = pods.list(&ListParams::default()).await?.items;
    Ok(list.iter().filter_map(pods::ready_since).min())
}

fn workload_state(tp: &TieredPlacement, cluster: &str) -> Option<(WorkloadState, Option<Timestamp>)> {
    tp.status
        .as_ref()?
        .workload_health
        .as_ref()?
        .clusters
        .iter()
        .find(|c| c.cluster == cluster)
        .map(|c| (c.state, c.since.as_ref().map(|t| t.0)))
}

/// Follows a move from `from` to `to` made with both in the child until `to`'s pods were Ready:
/// polls the decisions until they are exactly `{to}`, checking on the way that `from` stayed
/// while `to` had no Ready pod. Returns when `to` first became Ready and when `from` was first
/// seen gone.
///
/// Readiness is remembered, not only read at the end: a pod Ready when the controller judged it
/// may be unready a moment later, and a read that fails on a loaded API server is no answer.
async fn make_before_break(
    view: &TieringView,
    managed: &BTreeMap<&str, Client>,
    from: &str,
    to: &str,
    context: &dyn Fn() -> String,
) -> (Timestamp, Timestamp) {
    let started = std::time::Instant::now();
    let mut both_seen = false;
    let mut first_ready: Option<Timestamp> = None;
    let mut gone: Option<Timestamp> = None;
    loop {
        let decided = view.decisions(NAME).await.unwrap_or_default();
        if gone.is_none() && decided == BTreeSet::from([to.to_owned()]) {
            gone = Some(Timestamp::now());
        }
        both_seen |= decided.contains(from) && decided.contains(to);
        if let Ok(ready) = app_ready_since(&managed[to]).await {
            first_ready = first_ready.into_iter().chain(ready).min();
            // Concluded on the first successful read at or after the drop was seen.
            if let Some(gone) = gone {
                let ready = first_ready.unwrap_or_else(|| {
                    panic!("{from} was dropped before {to} had a Ready pod\n{}", context())
                });
                assert!(both_seen, "{from} and {to} were never decided together");
                return (ready, gone);
            }
        }
        assert!(
            started.elapsed() < WAIT,
            "no move from {from} to {to} within {WAIT:?}: decisions {decided:?}\n{}",
            context()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tiered_placement_fails_over_when_its_application_fails_and_back_when_it_recovers() {
    let cp = ControlPlane::builder()
        .clusters(CLUSTERS.len())
        .nodes(true)
        .ocm_addon_manager(false)
        .start_with_progress(&|l| eprintln!("{l}"))
        .await
        .unwrap_or_else(|e| panic!("the control plane did not start: {e}"));
    let hub = cp.hub_client().await.expect("hub client");
    let dir = TempDir::new("workload-failover");
    let program = workspace_binary("ocm-score-hub").unwrap_or_else(|e| panic!("{e}"));
    let mut managed = BTreeMap::new();
    for cluster in CLUSTERS {
        managed.insert(cluster, cp.cluster_client(cluster).await.expect("managed client"));
    }
    let node = |cluster: &str| {
        cp.nodes()
            .iter()
            .find(|n| n.cluster == cluster)
            .map(|n| n.address)
            .unwrap_or_else(|| panic!("{cluster}'s node"))
    };
    let probes = Probes::default();
    for cluster in CLUSTERS {
        probes.set(node(cluster), true);
    }
    let port = probes.serve().await;

    install_tiering(&cp.hub_kubeconfig());
    let kubeconfig = dir.path().join("tiering.kubeconfig");
    cp.write_service_account_kubeconfig(
        "hub",
        "ocm-score",
        "ocm-score-tiering",
        Duration::from_secs(4 * 3600),
        &kubeconfig,
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let mut controller =
        ControllerProcess::tiering(&program, &kubeconfig, "tiering-a", Duration::from_secs(10), &[]);
    controller.wait_ready(WAIT, String::new).await;
    let log = || {
        format!(
            "--- tiering:\n{}\n--- work hub manager:\n{}",
            controller.log(),
            cp.log_tail("hub-work-manager", 20)
        )
    };
    fleet(&hub).await;
    apply(&hub, &tiered_placement())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    apply(&hub, &replica_set(port))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let view = TieringView::new(hub.clone(), NS);

    // 1. Healthy on the primary.
    view.agreed(
        NAME,
        "the primary chosen, its workload Healthy",
        |tp, decided| {
            *decided == BTreeSet::from(["cluster1".to_owned()])
                && workload_state(tp, "cluster1").is_some_and(|(s, _)| s == WorkloadState::Healthy)
                && condition(tp, "WorkloadHealthy").is_some_and(|(s, _)| s == "True")
        },
        WAIT,
        log,
    )
    .await;

    // 2. The primary's application turns unready: Unhealthy, Failed after the toleration, a
    //    failover; the primary stays in the child until the backup's pod is Ready.
    let broken = Timestamp::now();
    probes.set(node("cluster1"), false);
    let failover = view
        .transition(NAME, TransitionKind::Failover, broken, WAIT, log)
        .await;
    let tp = view.tiered(NAME).await.expect("the TieredPlacement");
    let (state, failed_at) = workload_state(&tp, "cluster1").expect("cluster1's verdict");
    assert_eq!(state, WorkloadState::Failed, "{:?}", tp.status);
    let failed_at = failed_at.expect("failed at");
    // Whole seconds in the status: a second of slack.
    assert!(
        failover.time.0 + Duration::from_secs(1) >= broken + Duration::from_secs(TOLERATION as u64),
        "failed over at {} though the probe failed at {broken} and the toleration is {TOLERATION} s",
        failover.time.0
    );
    let (backup_ready, primary_gone) = make_before_break(&view, &managed, "cluster1", "cluster2", &log).await;
    assert!(primary_gone >= backup_ready, "{primary_gone} < {backup_ready}");
    eprintln!(
        "probe failed {broken}, failover {}, backup Ready {backup_ready}, primary dropped {primary_gone}",
        failover.time.0
    );

    // 3. The primary recovers; after the hold-down the TieredPlacement fails back, keeping the
    //    backup until the primary's pod is Ready again.
    probes.set(node("cluster1"), true);
    let failback = view
        .transition(NAME, TransitionKind::Failback, failover.time.0, WAIT, log)
        .await;
    assert!(
        failback.time.0 + Duration::from_secs(1) >= failed_at + Duration::from_secs(HOLD_DOWN as u64),
        "failed back at {} before the hold-down from {failed_at}",
        failback.time.0
    );
    let (primary_ready, backup_gone) = make_before_break(&view, &managed, "cluster2", "cluster1", &log).await;
    assert!(backup_gone >= primary_ready, "{backup_gone} < {primary_ready}");
    view.agreed(
        NAME,
        "back on the primary, Healthy",
        |tp, decided| {
            *decided == BTreeSet::from(["cluster1".to_owned()])
                && workload_state(tp, "cluster1").is_some_and(|(s, _)| s == WorkloadState::Healthy)
        },
        WAIT,
        log,
    )
    .await;

    // 4. Broken everywhere: one failover, then the plan stays, with a clear condition, through
    //    twice the hold-down after which a failback to a recovered primary would start.
    let broken = Timestamp::now();
    for cluster in CLUSTERS {
        probes.set(node(cluster), false);
    }
    view.transition(NAME, TransitionKind::Failover, broken, WAIT, log)
        .await;
    let everywhere = eventually("UnhealthyEverywhere", WAIT, log, || async {
        let tp = view.tiered(NAME).await?;
        (condition(&tp, "WorkloadHealthy")? == ("False".to_owned(), "UnhealthyEverywhere".to_owned()))
            .then_some(tp)
    })
    .await;
    let transitions = |tp: &TieredPlacement| {
        tp.status
            .as_ref()
            .map(|s| s.transitions.iter().filter(|t| t.time.0 >= broken).count())
            .unwrap_or(0)
    };
    assert_eq!(transitions(&everywhere), 1, "{:?}", everywhere.status);
    let window = std::time::Instant::now();
    while window.elapsed() < Duration::from_secs(2 * HOLD_DOWN as u64) {
        tokio::time::sleep(Duration::from_secs(3)).await;
        let tp = view.tiered(NAME).await.expect("the TieredPlacement");
        assert_eq!(
            transitions(&tp),
            1,
            "the plan moved again: {:?}\n{}",
            tp.status,
            log()
        );
    }
    let warnings = kube::api::Api::<k8s_openapi::api::events::v1::Event>::namespaced(hub.clone(), NS)
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("UnhealthyEverywhere"))
        .count();
    assert!(warnings >= 1, "no UnhealthyEverywhere event");
    assert_eq!(controller.terminate().await, Some(0));
}
