//! The consumer OCM's Placement guide shows, for real: Argo CD's ApplicationSet controller (built
//! from Argo CD's Go module, `tests/argocd/`) reading OCM's PlacementDecisions through a
//! `clusterDecisionResource` generator, on the real control plane with a node per cluster, the
//! add-on installed as shipped (our agents as pods). The example is applied as
//! `manifests/examples/argocd/README.md` says, with the commands it shows.
//!
//! 1. `most-free-memory`, decided by our agents' `memClusterAvailable`: the ApplicationSet
//!    creates one Application, for the cluster OCM chose. A pod that requests all but 1 GiB of
//!    that cluster's node makes its agent's score drop; OCM moves the decision, and the
//!    Application for the other cluster is created within `requeueAfterSeconds` (plus a margin
//!    for a loaded machine) of OCM's new decision. With `applicationsSync: create-update` the
//!    old Application stays, through a reconcile that ended after the move.
//! 2. `tiered/`: the ApplicationSet follows a TieredPlacement's child Placement. The primary
//!    site's cluster loses room for one guestbook replica (`fits.guestbook`, the same kind of
//!    pod): the TieredPlacement fails over, OCM decides the backup, and the Application moves
//!    there (the default policy deletes the old one). The pod goes: after the hold-down it fails
//!    back, and the Application moves back. Each move is again timed from OCM's decision.
//!
//! The story is printed as it goes. The only timed claim is the issue's: Argo CD follows OCM's
//! decision within `requeueAfterSeconds` ([`REQUEUE`]) plus [`MARGIN`], measured between the time
//! the API server stamped on the PlacementDecision's status write and on the Application's
//! creation (whole seconds both).

use std::path::Path;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use ocm_score_api::crd::tiered_placement::TransitionKind;
use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::{HUB_NAMESPACE, INSTALL_NAMESPACE, kubectl, score};
use ocm_score_control_plane::node::node_name;
use ocm_score_control_plane::pods::{delete_pod, hold_memory, ready_pods, unrequested_memory};
use ocm_score_tests::argocd::{
    self, Application, CONTROLLER, NAMESPACE, application_set, applications, decisions_written,
    error_occurred, last_reconcile_ended, refresh_args,
};
use ocm_score_tests::support::{TempDir, eventually};
use ocm_score_tests::tiering::TieringView;

/// Patience for one convergence on a loaded 2-core machine (pods start, OCM syncs, an agent's
/// next refresh, a hold-down). Not a claim: it only ends a wait that will not succeed.
const WAIT: Duration = Duration::from_secs(300);
/// `requeueAfterSeconds` of both ApplicationSets of the example: Argo CD does not watch
/// PlacementDecisions, it lists them again this long after each reconcile.
const REQUEUE: i64 = 30;
/// What a loaded 2-core machine may add to one requeue period: the reconcile itself (a list of
/// Secrets, ConfigMap, decisions, the Applications' writes), the controller's queue, and the
/// whole seconds of both timestamps. Fixed, not derived: on this machine the moves took well under
/// `REQUEUE`.
const MARGIN: i64 = 30;
/// What the load leaves unrequested on a node: less than one guestbook replica (2 GiB,
/// `manifests/examples/argocd/tiered/workload-shape.yaml`).
const LEFT_FREE: u64 = 1 << 30;
const CLUSTERS: [&str; 2] = ["cluster1", "cluster2"];
const LOAD_POD: &str = "memory-load";
const PLACEMENT: &str = "most-free-memory";
const APPSET: &str = "guestbook";
const TIERED: &str = "guestbook-tiered";

fn run(kubeconfig: &Path, args: &[&str]) -> String {
    kubectl(kubeconfig, args).unwrap_or_else(|e| panic!("{e}"))
}

fn other(cluster: &str) -> &'static str {
    if cluster == CLUSTERS[0] {
        CLUSTERS[1]
    } else {
        CLUSTERS[0]
    }
}

/// Seconds from `from` to `to`, both whole seconds of the API server's clock.
fn seconds(from: Timestamp, to: Timestamp) -> i64 {
    to.as_second() - from.as_second()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_set_follows_our_scores_and_a_tiered_placement() {
    // Built (or found cached) before the control plane takes the machine's lock.
    let built = argocd::ensure_built(&|line| eprintln!("{line}")).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("Argo CD: {}", built.versions().replace('\n', "; "));
    let mut control_plane = ControlPlane::builder()
        .clusters(CLUSTERS.len())
        .nodes(true)
        .start_with_progress(&|line| eprintln!("{line}"))
        .await
        .unwrap_or_else(|e| panic!("the control plane did not start: {e}"));
    let started = Instant::now();
    let step = |what: &str| eprintln!("[{:6.1} s] {what}", started.elapsed().as_secs_f64());
    let dir = TempDir::new("argocd");
    let hub_kc = control_plane.hub_kubeconfig();
    let hub = control_plane.hub_client().await.expect("hub client");

    // The add-on as shipped: our manager and tiering controller as pods on the hub's node, OCM's
    // work agents run our agents as pods on each cluster's node.
    step("kubectl apply --server-side -k manifests/hub");
    run(&hub_kc, &["apply", "--server-side", "-k", "manifests/hub"]);
    for cluster in CLUSTERS {
        eventually(
            &format!("{cluster}'s memClusterAvailable on the hub"),
            WAIT,
            || control_plane.log_tails(&[&format!("{cluster}-kubelet"), "cluster2-klusterlet"], 15),
            || {
                let hub = hub.clone();
                async move { score(&hub, cluster, "memClusterAvailable").await }
            },
        )
        .await;
    }
    eventually(
        "the tiering controller Ready on the hub's node",
        WAIT,
        String::new,
        || {
            let hub = hub.clone();
            async move {
                // A failed list is retried.
                let pods = ready_pods(&hub, HUB_NAMESPACE, "app.kubernetes.io/name=ocm-score-tiering")
                    .await
                    .ok()?;
                (!pods.is_empty()).then_some(())
            }
        },
    )
    .await;
    step("our agents publish scores for cluster1 and cluster2; the tiering controller runs");

    // Argo CD: what its install leaves for the ApplicationSet controller, and the controller as a
    // process of the control plane, as its ServiceAccount.
    argocd::install(&control_plane, &built)
        .await
        .unwrap_or_else(|e| panic!("installing Argo CD: {e}"));
    argocd::start_controller(&mut control_plane, &built, dir.path(), WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let cp = &control_plane;
    // Our pods' logs on a cluster (the agent's, the tiering controller's), for a failure message.
    let pods_log = |cluster: &str, namespace: &str| {
        kubectl(
            &cp.kubeconfig(cluster),
            &[
                "logs",
                "-n",
                namespace,
                "--all-containers",
                "--tail=15",
                "-l",
                "app.kubernetes.io/part-of=ocm-score",
            ],
        )
        .unwrap_or_else(|e| e.to_string())
    };
    step(&format!(
        "Argo CD's ApplicationSet controller runs against the hub (namespace {NAMESPACE}, cluster Secrets for {})",
        CLUSTERS.join(", ")
    ));
    let logs = || {
        format!(
            "{}--- tiering controller\n{}",
            cp.log_tails(&[CONTROLLER, "hub-placement-controller"], 25),
            pods_log("cluster1", HUB_NAMESPACE)
        )
    };

    // 1. The example as the README applies it.
    step("kubectl apply -k manifests/examples/argocd");
    run(&hub_kc, &["apply", "-k", "manifests/examples/argocd"]);
    let (first, first_decided) = decision(&hub, PLACEMENT, |d| d.len() == 1, &logs).await;
    let first = first[0].clone();
    let scores = memory_scores(&hub).await;
    step(&format!(
        "OCM decides {PLACEMENT}: {first} (memClusterAvailable {scores})"
    ));
    refresh_if_read_too_early(cp, &hub, APPSET, &step).await;
    let apps = applications_become(&hub, APPSET, &[&first], &logs).await;
    step(&format!(
        "Argo CD created Application {} for {first}, {} s after OCM's decision",
        apps[0].name,
        seconds(first_decided, created(&apps[0]))
    ));
    show(&hub_kc, &[GET_DECISIONS, GET_APPLICATIONS]);

    // Load the chosen cluster: its node keeps 1 GiB unrequested.
    let loaded = cp.cluster_client(&first).await.expect("managed client");
    let to = other(&first);
    let request = load(&loaded, &first, &logs).await;
    step(&format!(
        "loading {first}: pod default/{LOAD_POD} requests {:.1} GiB of memory on {}, 1 GiB of it stays unrequested",
        request as f64 / f64::from(1u32 << 30),
        node_name(&first)
    ));
    let (low, high) = eventually(
        &format!("{first}'s memClusterAvailable below {to}'s"),
        WAIT,
        || pods_log(&first, INSTALL_NAMESPACE),
        || {
            let hub = hub.clone();
            let first = first.clone();
            async move {
                let low = score(&hub, &first, "memClusterAvailable").await?;
                let high = score(&hub, to, "memClusterAvailable").await?;
                (low < high).then_some((low, high))
            }
        },
    )
    .await;
    step(&format!(
        "{first}'s agent publishes memClusterAvailable {low} ({to}: {high})"
    ));
    let (_, decided) = decision(&hub, PLACEMENT, |d| d == [to], &logs).await;
    step(&format!("OCM moves {PLACEMENT} to {to}"));
    let apps = applications_become(&hub, APPSET, &[first.as_str(), to], &logs).await;
    let moved = apps
        .iter()
        .find(|a| a.destination == to)
        .expect("the new Application");
    let took = seconds(decided, created(moved));
    step(&format!(
        "Argo CD created Application {} for {to}, {took} s after OCM's new decision (requeueAfterSeconds {REQUEUE})",
        moved.name
    ));
    assert!(
        took <= REQUEUE + MARGIN,
        "{} was created {took} s after OCM's decision, more than requeueAfterSeconds {REQUEUE} + {MARGIN}\n{}",
        moved.name,
        logs()
    );
    show(&hub_kc, &[GET_DECISIONS, GET_APPLICATIONS]);
    // create-update: the old Application is not deleted by a reconcile that ended after the new
    // one was created (the one that created it, whose deletes come after its creates, or a later
    // one).
    let after_move = created(moved);
    let reconciled = eventually(
        "a reconcile of the ApplicationSet after the move",
        WAIT,
        logs,
        || async move { last_reconcile_ended(cp, APPSET).filter(|t| seconds(after_move, *t) >= 1) },
    )
    .await;
    let after = read_applications(&hub, APPSET, &logs).await;
    assert_eq!(
        after, apps,
        "with applicationsSync: create-update both Applications stay as they were"
    );
    step(&format!(
        "a reconcile later ({} s after the move), {} for {first} is still there (applicationsSync: create-update)",
        seconds(after_move, reconciled),
        apps.iter()
            .find(|a| a.destination == first)
            .map(|a| a.name.as_str())
            .unwrap_or("?")
    ));
    delete_pod(&loaded, "default", LOAD_POD, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    step(&format!("the load on {first} is gone"));

    // 2. Through a TieredPlacement: the sites by label, then the tiered example.
    run(&hub_kc, &["label", "managedcluster", "cluster1", "site=primary"]);
    run(&hub_kc, &["label", "managedcluster", "cluster2", "site=backup"]);
    step("kubectl label managedcluster cluster1 site=primary; cluster2 site=backup");
    step("kubectl apply -k manifests/examples/argocd/tiered");
    run(&hub_kc, &["apply", "-k", "manifests/examples/argocd/tiered"]);
    let view = TieringView::new(hub.clone(), NAMESPACE);
    let settled = view
        .settled(TIERED, &["primary"], &["cluster1"], WAIT, logs)
        .await;
    let (_, decided) = decision(&hub, TIERED, |d| d == ["cluster1"], &logs).await;
    // The agents publish fits.guestbook moments after the shape appears, not at once: a plan made
    // while only one cluster had reported may have moved before this settled.
    let transitions: Vec<String> = settled
        .status
        .iter()
        .flat_map(|s| s.transitions.iter().rev())
        .map(|t| format!("{:?} to {:?}", t.kind, t.to))
        .collect();
    step(&format!(
        "{TIERED} settles on the primary site: OCM decides cluster1 (transitions: {})",
        transitions.join(", ")
    ));
    refresh_if_read_too_early(cp, &hub, TIERED, &step).await;
    let apps = applications_become(&hub, TIERED, &["cluster1"], &logs).await;
    step(&format!(
        "Argo CD created Application {}, {} s after OCM's decision",
        apps[0].name,
        seconds(decided, created(&apps[0]))
    ));
    show(&hub_kc, &[GET_TIERED, GET_APPLICATIONS]);

    // Failover: the primary's cluster has no room for a guestbook replica.
    let primary = cp.cluster_client("cluster1").await.expect("managed client");
    let loaded_at = Timestamp::now();
    let request = load(&primary, "cluster1", &logs).await;
    step(&format!(
        "loading cluster1: pod default/{LOAD_POD} requests {:.1} GiB, leaving 1 GiB, less than one guestbook replica (2 GiB)",
        request as f64 / f64::from(1u32 << 30)
    ));
    eventually(
        "cluster1's fits.guestbook at 0 replicas",
        WAIT,
        || pods_log("cluster1", INSTALL_NAMESPACE),
        || {
            let hub = hub.clone();
            async move { (score(&hub, "cluster1", "fits.guestbook").await? == -100).then_some(()) }
        },
    )
    .await;
    step("cluster1's agent publishes fits.guestbook -100 (no replica fits)");
    let failover = view
        .transition(
            TIERED,
            TransitionKind::Failover,
            second_floor(loaded_at),
            WAIT,
            logs,
        )
        .await;
    step(&format!(
        "{TIERED} fails over ({}): {}",
        failover.reason, failover.message
    ));
    let (_, decided) = decision(&hub, TIERED, |d| d == ["cluster2"], &logs).await;
    step(&format!("OCM decides {TIERED}: cluster2"));
    let apps = applications_become(&hub, TIERED, &["cluster2"], &logs).await;
    let took = seconds(decided, created(&apps[0]));
    step(&format!(
        "Argo CD created {} and deleted {TIERED}-cluster1, {took} s after OCM's new decision",
        apps[0].name
    ));
    show(&hub_kc, &[GET_TIERED, GET_APPLICATIONS]);
    assert!(
        took <= REQUEUE + MARGIN,
        "{} was created {took} s after OCM's decision, more than {REQUEUE} + {MARGIN} s\n{}",
        apps[0].name,
        logs()
    );

    // Failback: the load goes; after the hold-down the primary is chosen again.
    delete_pod(&primary, "default", LOAD_POD, WAIT)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    step("the load on cluster1 is gone");
    eventually(
        "cluster1's fits.guestbook back above 0 replicas",
        WAIT,
        || pods_log("cluster1", INSTALL_NAMESPACE),
        || {
            let hub = hub.clone();
            async move { (score(&hub, "cluster1", "fits.guestbook").await? > -100).then_some(()) }
        },
    )
    .await;
    step("cluster1's agent publishes room for guestbook again");
    let failback = view
        .transition(TIERED, TransitionKind::Failback, failover.time.0, WAIT, logs)
        .await;
    step(&format!(
        "{TIERED} fails back, {} s after the failover (holdDown 1m, minDwell 1m): {}",
        seconds(failover.time.0, failback.time.0),
        failback.message
    ));
    let (_, decided) = decision(&hub, TIERED, |d| d == ["cluster1"], &logs).await;
    step(&format!("OCM decides {TIERED}: cluster1"));
    let apps = applications_become(&hub, TIERED, &["cluster1"], &logs).await;
    let took = seconds(decided, created(&apps[0]));
    step(&format!(
        "Argo CD created {} again and deleted {TIERED}-cluster2, {took} s after OCM's new decision",
        apps[0].name
    ));
    show(&hub_kc, &[GET_TIERED, GET_APPLICATIONS]);
    assert!(
        took <= REQUEUE + MARGIN,
        "{} was created {took} s after OCM's decision, more than {REQUEUE} + {MARGIN} s\n{}",
        apps[0].name,
        logs()
    );
    // Every process of the control plane, Argo CD's controller included, still runs.
    control_plane.check_running().unwrap_or_else(|e| panic!("{e}"));
}

/// The README's commands to watch the example, run against the hub and printed under the story.
fn show(kubeconfig: &Path, commands: &[&[&str]]) {
    for args in commands {
        let out = run(kubeconfig, args);
        let shown: Vec<String> = args
            .iter()
            .map(|a| {
                if a.contains(['{', '*']) {
                    format!("'{a}'")
                } else {
                    (*a).to_owned()
                }
            })
            .collect();
        eprintln!("           $ kubectl {}", shown.join(" "));
        for line in out.trim_end().lines() {
            eprintln!("           {line}");
        }
    }
}

/// `kubectl get placementdecisions` of the README, for `most-free-memory`.
const GET_DECISIONS: &[&str] = &[
    "get",
    "placementdecisions",
    "-n",
    "argocd",
    "-l",
    "cluster.open-cluster-management.io/placement=most-free-memory",
    "-o",
    "jsonpath={.items[*].status.decisions[*].clusterName}",
];
const GET_APPLICATIONS: &[&str] = &["get", "applications", "-n", "argocd"];
const GET_TIERED: &[&str] = &["get", "tieredplacement", "guestbook-tiered", "-n", "argocd"];

/// `t` truncated to the whole second (`metav1.Time` keeps whole seconds).
fn second_floor(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

fn created(app: &Application) -> Timestamp {
    app.created
        .unwrap_or_else(|| panic!("{} has no creationTimestamp", app.name))
}

/// Both clusters' `memClusterAvailable`, for the story.
async fn memory_scores(hub: &kube::Client) -> String {
    let mut out = Vec::new();
    for cluster in CLUSTERS {
        let value = score(hub, cluster, "memClusterAvailable").await;
        out.push(format!(
            "{cluster} {}",
            value.map_or("?".to_owned(), |v| v.to_string())
        ));
    }
    out.join(", ")
}

/// Waits until the PlacementDecisions of `placement` in Argo CD's namespace satisfy `done`;
/// returns the clusters and when OCM wrote them (the API server's time of the status write).
async fn decision(
    hub: &kube::Client,
    placement: &str,
    done: impl Fn(&[String]) -> bool,
    logs: &dyn Fn() -> String,
) -> (Vec<String>, Timestamp) {
    let done = &done;
    eventually(
        &format!("OCM's decisions for {placement}"),
        WAIT,
        logs,
        || async move {
            let (clusters, written) = decisions_written(hub, NAMESPACE, placement).await.ok()?;
            done(&clusters).then_some(())?;
            Some((clusters, written?))
        },
    )
    .await
}

/// Waits until ApplicationSet `appset` owns exactly one Application per cluster of `clusters`,
/// each named after and deploying to its cluster; returns them, by name.
async fn applications_become(
    hub: &kube::Client,
    appset: &str,
    clusters: &[&str],
    logs: &dyn Fn() -> String,
) -> Vec<Application> {
    let mut want: Vec<(String, String)> = clusters
        .iter()
        .map(|c| (format!("{appset}-{c}"), (*c).to_owned()))
        .collect();
    want.sort();
    let want = &want;
    eventually(
        &format!("the Applications of {appset} for {clusters:?}"),
        WAIT,
        logs,
        || async move {
            let apps = applications(hub, appset).await.ok()?;
            let have: Vec<(String, String)> = apps
                .iter()
                .map(|a| (a.name.clone(), a.destination.clone()))
                .collect();
            (have == *want).then_some(apps)
        },
    )
    .await
}

/// The Applications of `appset`, read until a read succeeds.
async fn read_applications(hub: &kube::Client, appset: &str, logs: &dyn Fn() -> String) -> Vec<Application> {
    eventually(
        &format!("reading the Applications of {appset}"),
        WAIT,
        logs,
        || async move { applications(hub, appset).await.ok() },
    )
    .await
}

/// When Argo CD read the ApplicationSet before OCM wrote the Placement's first PlacementDecision,
/// its generator failed ("no clusterDecisionResources found") and the controller retries such
/// errors after 3 minutes, not `requeueAfterSeconds`. The README's remedy, run here: the refresh
/// annotation. Called once OCM has decided.
async fn refresh_if_read_too_early(cp: &ControlPlane, hub: &kube::Client, name: &str, step: &dyn Fn(&str)) {
    let appset = eventually(
        &format!("reading ApplicationSet {name}"),
        WAIT,
        String::new,
        || async move { application_set(hub, name).await.ok() },
    )
    .await;
    if let Some(error) = error_occurred(&appset) {
        step(&format!(
            "Argo CD read {name} before OCM's first decision ({error}); it would retry in 3 minutes"
        ));
        let args = refresh_args(name);
        step(&format!("kubectl {}", args.join(" ")));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&cp.hub_kubeconfig(), &args);
    }
}

/// Loads `cluster`'s node: a pod requesting all of its unrequested memory but [`LEFT_FREE`],
/// scheduled there. Returns the bytes requested.
async fn load(client: &kube::Client, cluster: &str, logs: &dyn Fn() -> String) -> u64 {
    let node = node_name(cluster);
    let free = unrequested_memory(client, &node)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        free > 2 * LEFT_FREE,
        "{node} has only {free} bytes of memory unrequested"
    );
    let mib = (free - LEFT_FREE) >> 20;
    hold_memory(client, "default", LOAD_POD, &format!("{mib}Mi"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    eventually(&format!("{LOAD_POD} scheduled on {node}"), WAIT, logs, || {
        let client = client.clone();
        let node = node.clone();
        async move {
            let pod = kube::Api::<k8s_openapi::api::core::v1::Pod>::namespaced(client, "default")
                .get_opt(LOAD_POD)
                .await
                .ok()??;
            (pod.spec?.node_name? == node).then_some(())
        }
    })
    .await;
    mib << 20
}
