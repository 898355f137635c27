//! Configuration rollouts as OCM runs them, on the real control plane with OCM's own addon-manager
//! and a node per cluster: three managed clusters, the add-on installed with `lifecycle: self`
//! (`manifests/hub` with the annotation, our manager and agents as pods from our image) and handed to
//! OCM with `kubectl apply -k manifests/examples/rollout`, then AddOnDeploymentConfig edits rolled out
//! - `Progressive` with `maxConcurrency: 1`: one cluster at a time in name order, the agent's pod
//!   replaced on one cluster at a time, OCM counting a cluster done only once its new pod is Ready,
//!   each next cluster only `minSuccessTime` after the previous completed, the clusters not yet
//!   reached keeping the old config in their ManifestWork and the same agent pod;
//! - a new agent image that was never published (an AddOnDeploymentConfig `registries` mirror): the
//!   pod never starts, so the work never becomes Available, OCM's `progressDeadline` runs out, and
//!   the rollout stops once `maxFailures` is exceeded; the untouched cluster keeps its agent;
//! - `ProgressivePerGroup` with the fix: the Placement's decision groups one after the other, the
//!   canary group first although its cluster sorts last.
//!
//! Handed over, a quiet minute has no field fight: no object of the add-on is written by two field
//! managers, ours and OCM's or two of OCM's.
//!
//! OCM v1.2 reports a rollout only through `Progressing` conditions (the add-ons' and each
//! `installProgressions[]` entry's of the ClusterManagementAddOn); there is no `RolloutSucceeded`
//! condition type, and the test checks that none appears.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DynamicObject, ListParams};
use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::{
    ADDON, HUB_NAMESPACE, INSTALL_NAMESPACE, agent_deployment, condition_true, dynamic, kubectl,
    patch_agent_config, quiet_window, self_lifecycle_overlay,
};
use ocm_score_control_plane::pods::{ready_pods, ready_since};
use ocm_score_hub::addon::agent::spec_hash::spec_hash_of_object;
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

/// An agent pod on a managed cluster.
#[derive(Clone, Debug, PartialEq)]
struct AgentPod {
    uid: String,
    created: Timestamp,
    /// When it became Ready, if it is.
    ready_since: Option<Timestamp>,
    image: String,
    refresh_arg: String,
    /// Why its container waits (`ErrImagePull`, `ImagePullBackOff`, ...).
    waiting: Option<String>,
}

impl AgentPod {
    fn of(pod: &Pod) -> AgentPod {
        let container = pod.spec.as_ref().and_then(|s| s.containers.first());
        let status = pod.status.as_ref();
        let ready_since = ready_since(pod);
        AgentPod {
            uid: pod.metadata.uid.clone().unwrap_or_default(),
            created: pod
                .metadata
                .creation_timestamp
                .as_ref()
                .map(|t| t.0)
                .unwrap_or_default(),
            ready_since,
            image: container.and_then(|c| c.image.clone()).unwrap_or_default(),
            refresh_arg: refresh_arg(container.and_then(|c| c.args.clone())),
            waiting: status
                .and_then(|s| {
                    s.container_statuses
                        .as_ref()?
                        .first()?
                        .state
                        .as_ref()?
                        .waiting
                        .as_ref()
                })
                .and_then(|w| w.reason.clone()),
        }
    }
}

fn refresh_arg(args: Option<Vec<String>>) -> String {
    args.unwrap_or_default()
        .into_iter()
        .find(|a| a.starts_with("--refresh-interval="))
        .unwrap_or_default()
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
    /// The agent's pods on the cluster (more than one only while one terminates).
    pods: Vec<AgentPod>,
}

impl ClusterView {
    /// OCM counts the cluster as having applied `hash`.
    fn completed(&self, hash: &str) -> Option<Timestamp> {
        let (status, reason, at) = self.progressing.as_ref()?;
        (self.desired == hash && self.last_applied == hash && status == "False" && reason == "Completed")
            .then_some(*at)
    }

    /// The one Ready agent pod, if the cluster runs exactly that.
    fn running(&self) -> Option<&AgentPod> {
        match self.pods.as_slice() {
            [pod] if pod.ready_since.is_some() => Some(pod),
            _ => None,
        }
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

    async fn try_cma(&self) -> Result<Value, kube::Error> {
        let api = self
            .api(ADDON_GROUP, "v1alpha1", "ClusterManagementAddOn", None)
            .await;
        Ok(serde_json::to_value(api.get(ADDON).await?).expect("json"))
    }

    async fn cma(&self) -> Value {
        self.try_cma().await.expect("the ClusterManagementAddOn")
    }

    /// The Progressing condition of the strategy's one install progression: status and message.
    /// `None` until it is written, and while the ClusterManagementAddOn cannot be read (the waits
    /// that call this retry).
    async fn install_progress(&self) -> Option<(String, String)> {
        let cma = self.try_cma().await.ok()?;
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

    /// What `cluster` runs and what OCM wants of it. Any failed read is an error: a poll is judged
    /// only on reads that all succeeded.
    async fn view(&self, cluster: &str) -> Result<ClusterView, String> {
        let apis = &self.clusters[cluster];
        let failed = |what: &str| {
            let what = format!("{cluster}: reading {what}");
            move |e: kube::Error| format!("{what}: {e}")
        };
        // What the cluster runs is read before what OCM wants of it: a work seen moved then has its
        // add-on seen moved too (the reverse order could catch OCM's move between the two reads).
        let pods: Api<Pod> = Api::namespaced(apis.agent.clone(), INSTALL_NAMESPACE);
        let pods = pods
            .list(&ListParams::default())
            .await
            .map(|l| l.items.iter().map(AgentPod::of).collect())
            .map_err(failed("the agent pods"))?;
        let refresh_arg = refresh_arg(
            agent_deployment(&apis.agent)
                .await
                .map_err(failed("the agent Deployment"))?
                .and_then(|d| d.spec?.template.spec?.containers.first()?.args.clone()),
        );
        let work = apis
            .works
            .get_opt(&format!("addon-{ADDON}-deploy-0"))
            .await
            .map_err(failed("the agent's ManifestWork"))?;
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
            .map_err(failed("the ManagedClusterAddOn"))?
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
        Ok(ClusterView {
            desired: str_at(reference, "/desiredConfig/specHash").to_owned(),
            last_applied: str_at(reference, "/lastAppliedConfig/specHash").to_owned(),
            configured: condition_true(mca.pointer("/status/conditions"), "Configured"),
            progressing,
            degraded_reason,
            work_hash,
            work_generation,
            refresh_arg,
            pods,
        })
    }

    /// Every cluster's view, or the first read that failed.
    async fn try_views(&self) -> Result<BTreeMap<&'static str, ClusterView>, String> {
        let mut out = BTreeMap::new();
        for cluster in CLUSTERS {
            out.insert(cluster, self.view(cluster).await?);
        }
        Ok(out)
    }

    /// Every cluster's view, its reads retried for a while; a hub that stays unreadable fails the
    /// test.
    async fn views(&self) -> BTreeMap<&'static str, ClusterView> {
        let mut last = String::new();
        for _ in 0..20 {
            match self.try_views().await {
                Ok(views) => return views,
                Err(e) => last = e,
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!("the fleet could not be read: {last}\n{}", self.context())
    }

    /// The clusters of each decision group of the Placement `all-clusters`, by group index; `None`
    /// when the PlacementDecisions cannot be listed (never "no groups").
    async fn decision_groups(&self) -> Option<BTreeMap<String, Vec<String>>> {
        let decisions = self
            .api(
                "cluster.open-cluster-management.io",
                "v1beta1",
                "PlacementDecision",
                Some(HUB_NAMESPACE),
            )
            .await;
        let mut groups: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for decision in decisions.list(&Default::default()).await.ok()?.items {
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
        Some(groups)
    }

    /// The context of a failed wait: the two managers' logs.
    fn context(&self) -> String {
        let ours = kubectl(
            &self.cp.hub_kubeconfig(),
            &[
                "logs",
                "-n",
                HUB_NAMESPACE,
                "-l",
                "app.kubernetes.io/name=ocm-score-addon-manager",
                "--tail=30",
                "--prefix",
            ],
        )
        .unwrap_or_else(|e| e.to_string());
        format!(
            "--- ocm-score-hub addon-manager pods:\n{ours}\n--- OCM addon-manager:\n{}",
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

/// Edits the AddOnDeploymentConfig in place, as one merge patch (one new spec hash): the agents'
/// refresh interval, and the image mirror (`None` removes it).
fn set_config(hub_kc: &Path, refresh: &str, mirror: Option<(&str, &str)>) {
    let registries = mirror.map(|(source, mirror)| json!([{"source": source, "mirror": mirror}]));
    let patch = json!({"spec": {
        "customizedVariables": [{"name": "REFRESH_INTERVAL", "value": refresh},
                                {"name": "SOURCES", "value": "cluster"}],
        "registries": registries,
    }});
    patch_agent_config(hub_kc, &patch).unwrap_or_else(|e| panic!("{e}"));
}

/// Waits until OCM reports the install progression completed on all three clusters.
async fn rollout_completed(fleet: &Fleet<'_>, what: &str) {
    eventually(
        what,
        WAIT,
        || fleet.context(),
        || async {
            let (status, message) = fleet.install_progress().await?;
            (status == "False" && message == "3/3 completed with no errors, 0 failed 0 timeout.")
                .then_some(())
        },
    )
    .await;
}

/// One cluster's step of a rollout.
#[derive(Debug)]
struct Step {
    /// When its ManifestWork was first seen rendered from the new config.
    rendered: Timestamp,
    /// When OCM marked it completed (the Progressing condition's lastTransitionTime).
    completed: Timestamp,
    /// The agent pod it runs once completed.
    pod: AgentPod,
}

/// The polls of a followed rollout. A poll whose reads failed is skipped, never judged; but the
/// invariants hold the rollout only as closely as they are sampled, so the follow fails once more
/// than [`Polls::MAX_IN_A_ROW`] polls in a row (that many seconds unobserved) or more than a quarter
/// of all polls were skipped.
#[derive(Debug, Default)]
struct Polls {
    judged: u32,
    skipped: u32,
    skipped_in_a_row: u32,
}

impl Polls {
    const MAX_IN_A_ROW: u32 = 5;

    fn judged(&mut self) {
        self.judged += 1;
        self.skipped_in_a_row = 0;
    }

    /// Counts a skipped poll; an error once too many were skipped.
    fn skipped(&mut self) -> Result<(), String> {
        self.skipped += 1;
        self.skipped_in_a_row += 1;
        let total = self.judged + self.skipped;
        if self.skipped_in_a_row > Self::MAX_IN_A_ROW {
            return Err(format!(
                "{} polls in a row could not be read ({self:?})",
                self.skipped_in_a_row
            ));
        }
        if self.skipped > Self::MAX_IN_A_ROW && self.skipped * 4 > total {
            return Err(format!(
                "more than a quarter of the polls could not be read ({self:?})"
            ));
        }
        Ok(())
    }
}

/// Polls every second until every cluster has completed `hash`, and returns each cluster's step.
/// `invariant` runs on every poll whose reads all succeeded.
async fn follow_rollout(
    fleet: &Fleet<'_>,
    hash: &str,
    mut invariant: impl FnMut(&BTreeMap<&'static str, ClusterView>),
) -> BTreeMap<&'static str, Step> {
    let started = std::time::Instant::now();
    let mut rendered: BTreeMap<&str, Timestamp> = BTreeMap::new();
    let mut polls = Polls::default();
    loop {
        // A poll whose reads failed is skipped, never judged.
        let views = match fleet.try_views().await {
            Ok(views) => views,
            Err(e) => {
                if let Err(thin) = polls.skipped() {
                    panic!(
                        "following the rollout of {hash}: {thin}; the last: {e}\n{}",
                        fleet.context()
                    );
                }
                assert!(
                    started.elapsed() < WAIT,
                    "the fleet could not be read: {e}\n{}",
                    fleet.context()
                );
                eprintln!("a poll skipped: {e}");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        polls.judged();
        let now = Timestamp::now();
        for (cluster, view) in &views {
            if view.work_hash == hash {
                rendered.entry(cluster).or_insert(now);
            }
        }
        invariant(&views);
        let steps: BTreeMap<&str, Step> = views
            .iter()
            .filter_map(|(c, v)| {
                let completed = v.completed(hash)?;
                Some((
                    *c,
                    Step {
                        rendered: rendered.get(c).copied().unwrap_or(completed),
                        completed,
                        pod: v.running()?.clone(),
                    },
                ))
            })
            .collect();
        if steps.len() == CLUSTERS.len() {
            eprintln!("the rollout of {hash} followed: {polls:?}");
            return steps;
        }
        assert!(
            started.elapsed() < WAIT,
            "the rollout of {hash} did not complete within {WAIT:?}: {views:#?}\n{}",
            fleet.context()
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Every cluster runs one Ready agent pod with `refresh`; returns the pods.
fn all_running<'v>(
    views: &'v BTreeMap<&'static str, ClusterView>,
    refresh: &str,
) -> BTreeMap<&'static str, &'v AgentPod> {
    views
        .iter()
        .map(|(cluster, view)| {
            let pod = view
                .running()
                .unwrap_or_else(|| panic!("{cluster} runs no single Ready agent: {view:#?}"));
            assert_eq!(
                pod.refresh_arg,
                format!("--refresh-interval={refresh}"),
                "{cluster}: {view:#?}"
            );
            assert_eq!(view.refresh_arg, pod.refresh_arg, "{cluster}: {view:#?}");
            (*cluster, pod)
        })
        .collect()
}

/// The cluster has agent pods, every one of `image` and none Ready (no pods is no evidence).
fn only_unready(pods: &[AgentPod], image: &str) -> bool {
    !pods.is_empty() && pods.iter().all(|p| p.image == image && p.ready_since.is_none())
}

/// OCM counted each cluster done only once its new agent pod was Ready, a pod created after the
/// config changed at `changed` (Kubernetes' timestamps have whole seconds: a second of slack).
fn completed_after_ready(
    steps: &BTreeMap<&'static str, Step>,
    before: &BTreeMap<&'static str, AgentPod>,
    changed: Timestamp,
) {
    for (cluster, step) in steps {
        let ready = step.pod.ready_since.expect("running pods are Ready");
        assert_ne!(
            step.pod.uid, before[cluster].uid,
            "{cluster}: the agent pod was not replaced: {step:?}"
        );
        assert!(
            step.pod.created + Duration::from_secs(1) >= changed,
            "{cluster}: the new pod predates the config change at {changed}: {step:?}"
        );
        assert!(
            step.completed + Duration::from_secs(1) >= ready,
            "{cluster}: OCM counted it done at {} before its new agent was Ready at {ready}: {step:?}",
            step.completed
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ocm_rolls_config_changes_out_cluster_by_cluster_group_by_group_and_stops_on_failures() {
    let cp = ControlPlane::builder()
        .clusters(CLUSTERS.len())
        .nodes(true)
        .start_with_progress(&|l| eprintln!("{l}"))
        .await
        .unwrap_or_else(|e| panic!("the control plane did not start: {e}"));
    let hub_kc = cp.hub_kubeconfig();
    let fleet = Fleet::new(&cp).await;
    let context = || fleet.context();

    // The install of a hub that keeps `lifecycle: self` (our manager and agents as pods), then
    // handed to OCM's addon-manager with the example a user applies.
    let dir = TempDir::new("rollout");
    let overlay = self_lifecycle_overlay(dir.path()).unwrap_or_else(|e| panic!("{e}"));
    run(&hub_kc, &["apply", "-k", &overlay.display().to_string()]);
    for cluster in CLUSTERS {
        let managed = fleet.clusters[cluster].agent.clone();
        eventually(
            &format!("the agent pod Ready on {cluster}"),
            WAIT,
            context,
            || {
                let managed = managed.clone();
                async move {
                    ready_pods(&managed, INSTALL_NAMESPACE, "")
                        .await
                        .is_ok_and(|p| !p.is_empty())
                        .then_some(())
                }
            },
        )
        .await;
    }
    let initial_pods: BTreeMap<&str, AgentPod> = all_running(&fleet.views().await, "60s")
        .into_iter()
        .map(|(c, p)| (c, p.clone()))
        .collect();
    // The Placement's decision groups for step 3. Changing them makes OCM rewrite the
    // PlacementDecisions one at a time, so clusters are missing from them for a moment: the
    // install strategy's removal grace keeps their add-ons (and agents).
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
        (fleet.decision_groups().await? == expected_groups).then_some(())
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
    follow_rollout(&fleet, &h1, |_| {}).await;
    rollout_completed(&fleet, "the install progression completed").await;
    let initial = fleet.views().await;
    for (cluster, pod) in all_running(&initial, "60s") {
        assert_eq!(
            pod.uid, initial_pods[cluster].uid,
            "{cluster}: the agent was restarted by the decision groups' change or the hand-over to OCM"
        );
    }
    // Under OCM's lifecycle no field is fought over: over a quiet minute no object of the add-on
    // (the ClusterManagementAddOn, the add-ons, their works, hub Roles and RoleBindings, cluster
    // RBAC) is written by two field managers, ours and OCM's or two of OCM's, and none goes.
    let quiet = quiet_window(&cp, &CLUSTERS, Duration::from_secs(65))
        .await
        .expect("the add-on's objects");
    eprintln!("written over the quiet minute: {:?}", quiet.writes);
    let fights = quiet.fights();
    assert!(
        fights.is_empty(),
        "objects written by more than one field manager (or gone) over a quiet minute under OCM's \
         lifecycle: {fights:?}\n{}",
        fleet.context()
    );

    // 1. Progressive, one cluster at a time, each held `minSuccessTime` after the previous
    //    completed. The clusters OCM has not reached keep the old config in their work and the same
    //    agent pod; at most one cluster at a time is without its agent.
    let changed = Timestamp::now();
    set_config(&hub_kc, "45s", None);
    let h2 = fleet.config_hash().await;
    assert_ne!(h1, h2);
    let mut most_in_flight = 0;
    let mut most_restarting = 0;
    let steps = follow_rollout(&fleet, &h2, |views| {
        let in_flight = views
            .values()
            .filter(|v| v.work_hash == h2 && v.completed(&h2).is_none())
            .count();
        most_in_flight = most_in_flight.max(in_flight);
        assert!(in_flight <= 1, "more than one cluster moving at once: {views:#?}");
        let restarting = views.values().filter(|v| v.running().is_none()).count();
        most_restarting = most_restarting.max(restarting);
        assert!(
            restarting <= 1,
            "more than one cluster without its agent: {views:#?}"
        );
        for (cluster, view) in views {
            if view.desired != h2 {
                assert!(
                    view.work_hash == h1 && view.work_generation == initial[cluster].work_generation,
                    "{cluster} is not in OCM's batch yet but its work moved: {view:?}"
                );
                assert_eq!(
                    view.running().map(|p| &p.uid),
                    Some(&initial_pods[cluster].uid),
                    "{cluster} is not in OCM's batch yet but its agent was replaced: {view:#?}"
                );
            }
        }
    })
    .await;
    eprintln!(
        "Progressive maxConcurrency 1, minSuccessTime 15s (at most {most_in_flight} in flight, \
         {most_restarting} without an agent): {steps:#?}"
    );
    assert_eq!(most_restarting, 1, "no agent restart was seen");
    completed_after_ready(&steps, &initial_pods, changed);
    let mut order: Vec<(&str, &Step)> = steps.iter().map(|(c, s)| (*c, s)).collect();
    order.sort_by_key(|(_, step)| step.rendered);
    assert_eq!(
        order.iter().map(|(c, _)| *c).collect::<Vec<_>>(),
        CLUSTERS,
        "OCM moves clusters in name order: {steps:#?}"
    );
    for pair in order.windows(2) {
        let ((previous, done), (next, step)) = (pair[0], pair[1]);
        // lastTransitionTime has whole seconds; a second of slack for that truncation.
        let earliest = done.completed + min_success - Duration::from_secs(1);
        assert!(
            step.rendered >= earliest && step.pod.created >= earliest,
            "{next} was rendered at {} and its pod created at {}, before {previous} completed ({}) \
             + minSuccessTime",
            step.rendered,
            step.pod.created,
            done.completed
        );
    }
    let good_pods: BTreeMap<&str, AgentPod> = all_running(&fleet.views().await, "45s")
        .into_iter()
        .map(|(c, p)| (c, p.clone()))
        .collect();
    rollout_completed(&fleet, "the install progression completed at the new config").await;

    // 2. A new agent image that was never published: cluster1's work is rendered with it, its old
    //    agent stops (the Deployment recreates), the new pod cannot pull, and the work never
    //    becomes Available: one time-out, which maxFailures 1 tolerates; cluster2 the same, and the
    //    second stops the rollout. cluster3 is never moved and keeps its agent.
    set_rollout_strategy(
        &hub_kc,
        json!({"type": "Progressive", "progressive": {"maxConcurrency": 1, "progressDeadline": "20s", "maxFailures": 1}}),
    );
    let before_failure = fleet.views().await;
    let unpublished = ocm_score_agent_contract::IMAGE.replacen("ocm-score:", "ocm-score-unpublished:", 1);
    set_config(
        &hub_kc,
        "45s",
        Some(("localhost/ocm-score:", "localhost/ocm-score-unpublished:")),
    );
    let h3 = fleet.config_hash().await;
    let stopped = eventually("the rollout stops after two time-outs", WAIT, context, || async {
        let (status, message) = fleet.install_progress().await?;
        (status == "True" && message.ends_with(" 0 failed 2 timeout.")).then_some(message)
    })
    .await;
    eprintln!("an unpublished image: {stopped}");
    let check_stopped = |views: &BTreeMap<&'static str, ClusterView>| {
        for cluster in ["cluster1", "cluster2"] {
            let view = &views[cluster];
            assert!(
                view.desired == h3 && view.work_hash == h3 && view.completed(&h3).is_none(),
                "{cluster} was moved to the unpublished image and never completed: {view:#?}"
            );
            // Completion is for good in OCM: a cluster once counted done (say, from a rule read
            // of the old Deployment) keeps `lastAppliedConfig` and frees the next cluster's turn.
            assert_ne!(
                view.last_applied, h3,
                "OCM counted {cluster} done though its agent never ran: {view:#?}"
            );
            assert!(
                only_unready(&view.pods, &unpublished),
                "{cluster} runs only the new agent, never Ready: {view:#?}"
            );
        }
        let c3 = &views["cluster3"];
        assert!(
            c3.desired == h2
                && !c3.configured
                && c3.degraded_reason.is_none()
                && c3.work_hash == h2
                && c3.work_generation == before_failure["cluster3"].work_generation,
            "cluster3 stays on the old config: {c3:#?}"
        );
        assert_eq!(
            c3.running().map(|p| &p.uid),
            Some(&good_pods["cluster3"].uid),
            "cluster3 keeps its agent: {c3:#?}"
        );
    };
    check_stopped(&fleet.views().await);
    let waiting = eventually(
        "cluster1's new agent waits for its image",
        WAIT,
        context,
        || async { fleet.view("cluster1").await.ok()?.pods.first()?.waiting.clone() },
    )
    .await;
    assert!(waiting.contains("Image"), "cluster1's agent waits: {waiting}");
    // Stopped for good: nothing moves while more than a progress deadline passes.
    let window = std::time::Instant::now();
    while window.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_secs(3)).await;
        check_stopped(&fleet.views().await);
    }

    // 3. ProgressivePerGroup with the fix: cluster3 is the Placement's canary group (group 0), the
    //    others group 1. The fixed config goes to cluster3 first, to cluster1 and cluster2 only
    //    once it completed and its minSuccessTime passed. (The groups made no difference to
    //    Progressive above: it orders clusters by name.)
    set_rollout_strategy(
        &hub_kc,
        json!({"type": "ProgressivePerGroup", "progressivePerGroup": {"minSuccessTime": "10s"}}),
    );
    let changed = Timestamp::now();
    set_config(&hub_kc, "30s", None);
    let h4 = fleet.config_hash().await;
    let steps = follow_rollout(&fleet, &h4, |views| {
        let canary_done = views["cluster3"].completed(&h4);
        for cluster in ["cluster1", "cluster2"] {
            let view = &views[cluster];
            if canary_done.is_none() {
                assert!(
                    view.desired != h4 && view.work_hash == h3,
                    "{cluster} moved before the canary group completed: {views:#?}"
                );
            }
        }
    })
    .await;
    eprintln!("ProgressivePerGroup: {steps:#?}");
    completed_after_ready(&steps, &good_pods, changed);
    // The next group waits minSuccessTime after the canary completed (a second of slack for the
    // whole seconds of lastTransitionTime).
    let next_group = steps["cluster3"].completed + Duration::from_secs(10) - Duration::from_secs(1);
    for cluster in ["cluster1", "cluster2"] {
        assert!(
            steps[cluster].rendered >= next_group,
            "{cluster} rendered before the canary completed and soaked 10 s: {steps:#?}"
        );
    }
    all_running(&fleet.views().await, "30s");
    rollout_completed(&fleet, "the install progression completed after the groups").await;
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

#[cfg(test)]
mod pure {
    use super::*;

    #[test]
    fn a_follow_fails_once_too_many_polls_were_skipped() {
        // A gap in the sampling, however many polls were judged before.
        let mut polls = Polls::default();
        for _ in 0..100 {
            polls.judged();
        }
        for _ in 0..Polls::MAX_IN_A_ROW {
            assert!(polls.skipped().is_ok(), "{polls:?}");
        }
        assert!(polls.skipped().is_err(), "one more in a row: {polls:?}");

        // Skips spread out are fine while they stay under a quarter of the polls.
        let mut polls = Polls::default();
        for _ in 0..8 {
            for _ in 0..3 {
                polls.judged();
            }
            assert!(polls.skipped().is_ok(), "{polls:?}");
        }
        let mut polls = Polls::default();
        let mut failed = false;
        for _ in 0..10 {
            polls.judged();
            failed |= polls.skipped().is_err();
        }
        assert!(failed, "half the polls skipped: {polls:?}");
    }

    #[test]
    fn no_pods_is_not_only_unready_ones() {
        let pod = |image: &str, ready: bool| AgentPod {
            uid: "u".into(),
            created: Timestamp::UNIX_EPOCH,
            ready_since: ready.then_some(Timestamp::UNIX_EPOCH),
            image: image.into(),
            refresh_arg: String::new(),
            waiting: None,
        };
        assert!(!only_unready(&[], "new"));
        assert!(only_unready(&[pod("new", false)], "new"));
        assert!(!only_unready(&[pod("new", true)], "new"));
        assert!(!only_unready(&[pod("new", false), pod("old", false)], "new"));
    }
}
