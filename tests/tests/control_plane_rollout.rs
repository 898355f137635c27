//! Configuration rollouts as OCM runs them, on the real control plane with OCM's own addon-manager:
//! three managed clusters, the add-on installed from `manifests/hub` and handed to OCM with
//! `kubectl apply -k manifests/examples/rollout`, then AddOnDeploymentConfig edits rolled out
//! - `Progressive` with `maxConcurrency: 1`: one cluster at a time in name order, each next one only
//!   `minSuccessTime` after the previous completed, the clusters not yet reached keeping the old
//!   config in their ManifestWork and in the agent Deployment the work agent applied;
//! - a config our add-on manager refuses (never rendered, so OCM's `progressDeadline` runs out): the
//!   rollout stops once `maxFailures` is exceeded, the untouched cluster stays on the old config, and
//!   the refused clusters keep their last good agent;
//! - `ProgressivePerGroup`: the Placement's decision groups one after the other, the canary group
//!   first although its cluster sorts last.
//!
//! OCM v1.2 reports a rollout only through `Progressing` conditions (the add-ons' and each
//! `installProgressions[]` entry's of the ClusterManagementAddOn); there is no `RolloutSucceeded`
//! condition type, and the test checks that none appears.
//!
//! The clusters run no nodes: OCM judges a cluster done when its ManifestWork is Applied and
//! Available (its resources exist), not from pods, so the agent's Deployment (its arguments) shows
//! what each cluster runs.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use kube::api::{Api, DynamicObject};
use ocm_score_hub::addon::spec_hash::spec_hash_of_object;
use ocm_score_tests::control_plane::ControlPlane;
use ocm_score_tests::control_plane::addon::{
    ADDON, HUB_NAMESPACE, agent_deployment, condition_true, dynamic, install_and_start_manager, kubectl,
    set_agent_variables,
};
use ocm_score_tests::support::{TempDir, eventually};
use serde_json::{Value, json};

/// Patience for one convergence on a loaded 2-core machine.
const WAIT: Duration = Duration::from_secs(300);
const CLUSTERS: [&str; 3] = ["cluster1", "cluster2", "cluster3"];
/// The key of our config in a ManifestWork's config-spec-hash annotation.
const CONFIG_KEY: &str =
    "addondeploymentconfigs.addon.open-cluster-management.io/ocm-score/resource-usage-collect";
const ADDON_GROUP: &str = "addon.open-cluster-management.io";

fn run(kubeconfig: &Path, args: &[&str]) -> String {
    kubectl(kubeconfig, args).unwrap_or_else(|e| panic!("{e}"))
}

/// What one cluster looks like to OCM's rollout and what it runs.
#[derive(Clone, Debug, Default)]
struct ClusterView {
    desired: String,
    last_applied: String,
    configured: bool,
    /// The add-on's `Progressing` condition: status, reason, lastTransitionTime.
    progressing: Option<(String, String, Timestamp)>,
    degraded_reason: Option<String>,
    /// The spec hash the ManifestWork's annotation names for our config, and its generation.
    work_hash: String,
    work_generation: i64,
    /// `--refresh-interval=...` of the agent Deployment the work agent applied on the cluster.
    refresh_arg: String,
}

impl ClusterView {
    /// OCM counts the cluster as having applied `hash`.
    fn completed(&self, hash: &str) -> Option<Timestamp> {
        let (status, reason, at) = self.progressing.as_ref()?;
        (self.desired == hash && self.last_applied == hash && status == "False" && reason == "Completed")
            .then_some(*at)
    }
}

fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn adc_reference(references: Option<&Value>) -> Option<&Value> {
    references?
        .as_array()?
        .iter()
        .find(|r| r["resource"] == "addondeploymentconfigs")
}

fn str_at<'a>(value: Option<&'a Value>, pointer: &str) -> &'a str {
    value
        .and_then(|v| v.pointer(pointer))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// The API handles one cluster is observed through, made once: a poll of the fleet must take well
/// under a second for its invariants to be sampled often.
struct ClusterApis {
    addons: Api<DynamicObject>,
    works: Api<DynamicObject>,
    agent: kube::Client,
}

struct Fleet<'a> {
    cp: &'a ControlPlane,
    hub: kube::Client,
    clusters: BTreeMap<&'static str, ClusterApis>,
}

impl<'a> Fleet<'a> {
    async fn new(cp: &'a ControlPlane) -> Fleet<'a> {
        let hub = cp.hub_client().await.expect("hub client");
        let mut clusters = BTreeMap::new();
        for cluster in CLUSTERS {
            let apis = ClusterApis {
                addons: dynamic(
                    &hub,
                    ADDON_GROUP,
                    "v1alpha1",
                    "ManagedClusterAddOn",
                    Some(cluster),
                )
                .await
                .expect("kind served"),
                works: dynamic(
                    &hub,
                    "work.open-cluster-management.io",
                    "v1",
                    "ManifestWork",
                    Some(cluster),
                )
                .await
                .expect("kind served"),
                agent: cp.cluster_client(cluster).await.expect("managed client"),
            };
            clusters.insert(cluster, apis);
        }
        Fleet { cp, hub, clusters }
    }

    async fn api(&self, group: &str, version: &str, kind: &str, ns: Option<&str>) -> Api<DynamicObject> {
        dynamic(&self.hub, group, version, kind, ns)
            .await
            .expect("kind served")
    }

    async fn cma(&self) -> Value {
        let api = self
            .api(ADDON_GROUP, "v1alpha1", "ClusterManagementAddOn", None)
            .await;
        let cma = api.get(ADDON).await.expect("the ClusterManagementAddOn");
        serde_json::to_value(cma).expect("json")
    }

    /// The Progressing condition of the strategy's one install progression: status and message.
    async fn install_progress(&self) -> Option<(String, String)> {
        let cma = self.cma().await;
        let progressing = cma
            .pointer("/status/installProgressions/0/conditions")?
            .as_array()?
            .iter()
            .find(|c| c["type"] == "Progressing")?;
        Some((
            progressing["status"].as_str()?.to_owned(),
            progressing["message"].as_str()?.to_owned(),
        ))
    }

    /// The AddOnDeploymentConfig's current spec hash.
    async fn config_hash(&self) -> String {
        let api = self
            .api(
                ADDON_GROUP,
                "v1alpha1",
                "AddOnDeploymentConfig",
                Some(HUB_NAMESPACE),
            )
            .await;
        spec_hash_of_object(&api.get(ADDON).await.expect("the config"))
    }

    async fn view(&self, cluster: &str) -> ClusterView {
        let apis = &self.clusters[cluster];
        // What the cluster runs is read before what OCM wants of it: a work seen moved then has its
        // add-on seen moved too (the reverse order could catch OCM's move between the two reads).
        let refresh_arg = agent_deployment(&apis.agent)
            .await
            .and_then(|d| d.spec?.template.spec?.containers.first()?.args.clone())
            .unwrap_or_default()
            .into_iter()
            .find(|a| a.starts_with("--refresh-interval="))
            .unwrap_or_default();
        let work = apis
            .works
            .get_opt(&format!("addon-{ADDON}-deploy-0"))
            .await
            .ok()
            .flatten();
        let (work_hash, work_generation) = work
            .map(|w| {
                let hashes: Value = w
                    .metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get("open-cluster-management.io/config-spec-hash"))
                    .and_then(|a| serde_json::from_str(a).ok())
                    .unwrap_or_default();
                (
                    hashes[CONFIG_KEY].as_str().unwrap_or_default().to_owned(),
                    w.metadata.generation.unwrap_or_default(),
                )
            })
            .unwrap_or_default();
        let mca = apis
            .addons
            .get_opt(ADDON)
            .await
            .ok()
            .flatten()
            .and_then(|m| serde_json::to_value(m).ok())
            .unwrap_or_default();
        let reference = adc_reference(mca.pointer("/status/configReferences"));
        let progressing = condition(&mca, "Progressing").and_then(|c| {
            Some((
                c["status"].as_str()?.to_owned(),
                c["reason"].as_str()?.to_owned(),
                c["lastTransitionTime"].as_str()?.parse().ok()?,
            ))
        });
        let degraded_reason = condition(&mca, "Degraded")
            .filter(|c| c["status"] == "True")
            .map(|c| c["reason"].as_str().unwrap_or_default().to_owned());
        ClusterView {
            desired: str_at(reference, "/desiredConfig/specHash").to_owned(),
            last_applied: str_at(reference, "/lastAppliedConfig/specHash").to_owned(),
            configured: condition_true(mca.pointer("/status/conditions"), "Configured"),
            progressing,
            degraded_reason,
            work_hash,
            work_generation,
            refresh_arg,
        }
    }

    async fn views(&self) -> BTreeMap<&'static str, ClusterView> {
        let mut out = BTreeMap::new();
        for cluster in CLUSTERS {
            out.insert(cluster, self.view(cluster).await);
        }
        out
    }

    /// The clusters of each decision group of the Placement `all-clusters`, by group index.
    async fn decision_groups(&self) -> BTreeMap<String, Vec<String>> {
        let decisions = self
            .api(
                "cluster.open-cluster-management.io",
                "v1beta1",
                "PlacementDecision",
                Some(HUB_NAMESPACE),
            )
            .await;
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for decision in decisions
            .list(&Default::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
        {
            let labels = decision.metadata.labels.clone().unwrap_or_default();
            if labels
                .get("cluster.open-cluster-management.io/placement")
                .is_none_or(|p| p != "all-clusters")
            {
                continue;
            }
            let group = labels
                .get("cluster.open-cluster-management.io/decision-group-index")
                .cloned()
                .unwrap_or_default();
            let clusters = decision.data["status"]["decisions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|d| d["clusterName"].as_str().map(str::to_owned));
            groups.entry(group).or_default().extend(clusters);
        }
        for clusters in groups.values_mut() {
            clusters.sort();
        }
        groups
    }

    /// The context of a failed wait: every cluster's view and the two managers' logs.
    fn context(&self, manager_tail: String) -> String {
        format!(
            "--- ocm-score-hub:\n{manager_tail}\n--- OCM addon-manager:\n{}",
            self.cp.log_tail("hub-addon-manager", 30)
        )
    }
}

/// The placement's rollout strategy, as an operator changes it.
fn set_rollout_strategy(hub_kc: &Path, strategy: Value) {
    let patch = json!([{"op": "replace", "path": "/spec/installStrategy/placements/0/rolloutStrategy",
                        "value": strategy}]);
    run(
        hub_kc,
        &[
            "patch",
            "clustermanagementaddon",
            ADDON,
            "--type=json",
            "-p",
            &patch.to_string(),
        ],
    );
}

/// Edits the AddOnDeploymentConfig in place: the agents' refresh interval.
fn set_refresh_interval(hub_kc: &Path, value: &str) {
    set_agent_variables(hub_kc, &[("SOURCES", "cluster"), ("REFRESH_INTERVAL", value)])
        .unwrap_or_else(|e| panic!("{e}"));
}

/// Waits until OCM reports the install progression completed on all three clusters.
async fn rollout_completed(fleet: &Fleet<'_>, what: &str, context: impl Fn() -> String) {
    eventually(what, WAIT, context, || async {
        let (status, message) = fleet.install_progress().await?;
        (status == "False" && message == "3/3 completed with no errors, 0 failed 0 timeout.").then_some(())
    })
    .await;
}

/// Polls every second until every cluster has completed `hash`, and returns, per cluster, when its
/// ManifestWork was first seen rendered from `hash` and when OCM marked it completed. `invariant`
/// runs on every poll.
async fn follow_rollout(
    fleet: &Fleet<'_>,
    hash: &str,
    context: impl Fn() -> String,
    mut invariant: impl FnMut(&BTreeMap<&'static str, ClusterView>),
) -> BTreeMap<&'static str, (Timestamp, Timestamp)> {
    let started = std::time::Instant::now();
    let mut rendered: BTreeMap<&str, Timestamp> = BTreeMap::new();
    loop {
        let views = fleet.views().await;
        let now = Timestamp::now();
        for (cluster, view) in &views {
            if view.work_hash == hash {
                rendered.entry(cluster).or_insert(now);
            }
        }
        invariant(&views);
        let completed: BTreeMap<&str, Timestamp> = views
            .iter()
            .filter_map(|(c, v)| Some((*c, v.completed(hash)?)))
            .collect();
        if completed.len() == CLUSTERS.len() {
            return completed
                .into_iter()
                .map(|(c, done)| (c, (rendered.get(c).copied().unwrap_or(done), done)))
                .collect();
        }
        assert!(
            started.elapsed() < WAIT,
            "the rollout of {hash} did not complete within {WAIT:?}: {views:#?}\n{}",
            context()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ocm_rolls_config_changes_out_cluster_by_cluster_group_by_group_and_stops_on_failures() {
    let cp = ControlPlane::builder()
        .clusters(CLUSTERS.len())
        .start_with_progress(&|l| eprintln!("{l}"))
        .await
        .unwrap_or_else(|e| panic!("the control plane did not start: {e}"));
    let hub_kc = cp.hub_kubeconfig();
    let dir = TempDir::new("rollout");
    let fleet = Fleet::new(&cp).await;

    // The install as shipped (`lifecycle: self`), then handed to OCM's addon-manager with the
    // example a user applies.
    let manager = install_and_start_manager(&cp, dir.path())
        .await
        .expect("the add-on manager starts");
    let context = || fleet.context(manager.tail());
    // The Placement's decision groups for step 3, set before anything is measured: changing them
    // re-creates PlacementDecisions, and a cluster missing from them for a moment loses its add-on
    // (and agent) to the install strategy until it is back.
    run(
        &hub_kc,
        &["label", "managedcluster", "cluster3", "ocm-score.io/canary=true"],
    );
    let groups = json!({"spec": {"decisionStrategy": {"groupStrategy": {"decisionGroups": [
        {"groupName": "canary",
         "groupClusterSelector": {"labelSelector": {"matchLabels": {"ocm-score.io/canary": "true"}}}}]}}}});
    run(
        &hub_kc,
        &[
            "patch",
            "placement",
            "all-clusters",
            "-n",
            HUB_NAMESPACE,
            "--type=merge",
            "-p",
            &groups.to_string(),
        ],
    );
    let expected_groups = BTreeMap::from([
        ("0".to_owned(), vec!["cluster3".to_owned()]),
        ("1".to_owned(), vec!["cluster1".to_owned(), "cluster2".to_owned()]),
    ]);
    eventually("the canary group, then the rest", WAIT, context, || async {
        (fleet.decision_groups().await == expected_groups).then_some(())
    })
    .await;
    run(&hub_kc, &["apply", "-k", "manifests/examples/rollout"]);
    let cma = fleet.cma().await;
    assert!(
        cma.pointer("/metadata/annotations/addon.open-cluster-management.io~1lifecycle")
            .is_none(),
        "kubectl apply removed the lifecycle annotation: {cma}"
    );
    assert_eq!(
        cma.pointer("/spec/installStrategy/placements/0/rolloutStrategy/type"),
        Some(&json!("Progressive"))
    );
    // The example's minSuccessTime (5 minutes) would hold OCM's "completed" that long after the
    // hand-over; the test's own, shorter, strategy from here on.
    let min_success = Duration::from_secs(15);
    set_rollout_strategy(
        &hub_kc,
        json!({"type": "Progressive", "progressive": {"maxConcurrency": 1, "minSuccessTime": "15s"}}),
    );
    let h1 = fleet.config_hash().await;
    follow_rollout(&fleet, &h1, context, |_| {}).await;
    let initial = fleet.views().await;
    for (cluster, view) in &initial {
        assert_eq!(view.refresh_arg, "--refresh-interval=60s", "{cluster}: {view:?}");
    }
    eventually("the install progression completed", WAIT, context, || async {
        let (status, message) = fleet.install_progress().await?;
        (status == "False" && message == "3/3 completed with no errors, 0 failed 0 timeout.").then_some(())
    })
    .await;

    // 1. Progressive, one cluster at a time, each held `minSuccessTime` after the previous
    //    completed. The clusters OCM has not reached keep the old config in their work and agent.
    set_refresh_interval(&hub_kc, "45s");
    let h2 = fleet.config_hash().await;
    assert_ne!(h1, h2);
    let mut most_in_flight = 0;
    let steps = follow_rollout(&fleet, &h2, context, |views| {
        let in_flight = views
            .values()
            .filter(|v| v.work_hash == h2 && v.completed(&h2).is_none())
            .count();
        most_in_flight = most_in_flight.max(in_flight);
        assert!(in_flight <= 1, "more than one cluster moving at once: {views:#?}");
        for (cluster, view) in views {
            if view.desired != h2 {
                assert!(
                    view.work_hash == h1 && view.work_generation == initial[cluster].work_generation,
                    "{cluster} is not in OCM's batch yet but its work moved: {view:?}"
                );
                assert_eq!(view.refresh_arg, "--refresh-interval=60s", "{cluster}: {view:?}");
            }
        }
    })
    .await;
    eprintln!(
        "Progressive maxConcurrency 1, minSuccessTime 15s (at most {most_in_flight} seen in flight): {steps:#?}"
    );
    let mut order: Vec<(&str, Timestamp)> = steps.iter().map(|(c, (rendered, _))| (*c, *rendered)).collect();
    order.sort_by_key(|(_, at)| *at);
    assert_eq!(
        order.iter().map(|(c, _)| *c).collect::<Vec<_>>(),
        CLUSTERS,
        "OCM moves clusters in name order: {steps:#?}"
    );
    for pair in order.windows(2) {
        let (previous, next) = (pair[0].0, pair[1]);
        let previous_done = steps[previous].1;
        // lastTransitionTime has whole seconds; a second of slack for that truncation.
        let earliest = previous_done + min_success - Duration::from_secs(1);
        assert!(
            next.1 >= earliest,
            "{} was rendered at {}, before {previous} completed ({previous_done}) + minSuccessTime",
            next.0,
            next.1
        );
    }
    for (cluster, view) in fleet.views().await {
        assert_eq!(view.refresh_arg, "--refresh-interval=45s", "{cluster}: {view:?}");
    }
    rollout_completed(
        &fleet,
        "the install progression completed at the new config",
        context,
    )
    .await;

    // 2. A config the add-on manager refuses: cluster1 never gets it rendered and times out, that is
    //    one failure (maxFailures 1 tolerates it), cluster2 too, and the second failure stops the
    //    rollout: cluster3 is never moved. Every agent keeps running the last good config.
    set_rollout_strategy(
        &hub_kc,
        json!({"type": "Progressive", "progressive": {"maxConcurrency": 1, "progressDeadline": "20s", "maxFailures": 1}}),
    );
    let before_failure = fleet.views().await;
    set_refresh_interval(&hub_kc, "soon");
    let h3 = fleet.config_hash().await;
    let stopped = eventually("the rollout stops after two time-outs", WAIT, context, || async {
        let (status, message) = fleet.install_progress().await?;
        (status == "True" && message == "0/3 progressing..., 0 failed 2 timeout.").then_some(message)
    })
    .await;
    eprintln!("a refused config: {stopped}");
    let check_stopped = |views: &BTreeMap<&'static str, ClusterView>| {
        for cluster in ["cluster1", "cluster2"] {
            let view = &views[cluster];
            assert_eq!(
                view.desired, h3,
                "{cluster} was moved to the refused config: {view:?}"
            );
            assert_eq!(
                view.degraded_reason.as_deref(),
                Some("InvalidConfiguration"),
                "{cluster}: {view:?}"
            );
        }
        let c3 = &views["cluster3"];
        assert!(
            c3.desired == h2 && !c3.configured && c3.degraded_reason.is_none(),
            "cluster3 stays on the old config: {c3:?}"
        );
        for (cluster, view) in views {
            assert!(
                view.work_hash == h2 && view.work_generation == before_failure[cluster].work_generation,
                "{cluster}: the last good work stays as it was: {view:?}"
            );
            assert_eq!(view.refresh_arg, "--refresh-interval=45s", "{cluster}: {view:?}");
        }
    };
    check_stopped(&fleet.views().await);
    // Stopped for good: nothing moves while more than a progress deadline passes.
    let window = std::time::Instant::now();
    while window.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_secs(3)).await;
        check_stopped(&fleet.views().await);
    }

    // 3. ProgressivePerGroup: cluster3 is the Placement's canary group (group 0), the others group
    //    1. A fixed config goes to cluster3 first, to cluster1 and cluster2 only once it completed
    //    and its minSuccessTime passed.
    //    (The groups made no difference to Progressive above: it orders clusters by name.)
    set_rollout_strategy(
        &hub_kc,
        json!({"type": "ProgressivePerGroup", "progressivePerGroup": {"minSuccessTime": "10s"}}),
    );
    set_refresh_interval(&hub_kc, "30s");
    let h4 = fleet.config_hash().await;
    let steps = follow_rollout(&fleet, &h4, context, |views| {
        let canary_done = views["cluster3"].completed(&h4);
        for cluster in ["cluster1", "cluster2"] {
            let view = &views[cluster];
            if canary_done.is_none() {
                assert!(
                    view.desired != h4 && view.work_hash == h2,
                    "{cluster} moved before the canary group completed: {views:#?}"
                );
            }
        }
    })
    .await;
    eprintln!("ProgressivePerGroup: {steps:#?}");
    // The next group waits minSuccessTime after the canary completed (a second of slack for the
    // whole seconds of lastTransitionTime).
    let next_group = steps["cluster3"].1 + Duration::from_secs(10) - Duration::from_secs(1);
    for cluster in ["cluster1", "cluster2"] {
        assert!(
            steps[cluster].0 >= next_group,
            "{cluster} rendered before the canary completed and soaked 10 s: {steps:#?}"
        );
    }
    for (cluster, view) in fleet.views().await {
        assert_eq!(view.refresh_arg, "--refresh-interval=30s", "{cluster}: {view:?}");
        assert!(view.degraded_reason.is_none(), "{cluster}: {view:?}");
    }
    rollout_completed(
        &fleet,
        "the install progression completed after the groups",
        context,
    )
    .await;

    // OCM's rollout conditions are `Progressing` only.
    let cma = fleet.cma().await;
    let mut condition_types: Vec<String> = Vec::new();
    let mut collect = |conditions: Option<&Value>| {
        for c in conditions.and_then(Value::as_array).into_iter().flatten() {
            condition_types.push(c["type"].as_str().unwrap_or_default().to_owned());
        }
    };
    collect(cma.pointer("/status/installProgressions/0/conditions"));
    let mcas = fleet
        .api(ADDON_GROUP, "v1alpha1", "ManagedClusterAddOn", None)
        .await
        .list(&Default::default())
        .await
        .expect("add-ons");
    for mca in &mcas.items {
        collect(mca.data.pointer("/status/conditions"));
    }
    assert!(
        !condition_types.iter().any(|t| t == "RolloutSucceeded"),
        "{condition_types:?}"
    );
}
