//! The fits differential on the real control plane: the agent's `fits.<shape>` against what the
//! real kube-scheduler does.
//!
//! `cluster2` gets a kube-scheduler and no kubelet ([`crate::Builder::spoke_schedulers`]). The
//! add-on is installed as a user installs it, and the agent runs as a process with its
//! Deployment's flags ([`crate::addon::start_agent`]). Then cluster2's klusterlet is stopped and
//! the agent's Deployment deleted, so that no pod but the test's lands on the random nodes.
//!
//! For each random cluster ([`super::ClusterPlan`]) the test creates its nodes and pods, lets
//! kube-scheduler settle the pending pods, creates its WorkloadShapes on the hub, and waits until
//! the agent counts every node and pod. It reads `ocm_score_agent_fits{shape}` for every shape
//! from the agent's `/metrics`. Then, shape by shape, it creates replicas one at a time and counts
//! how many kube-scheduler binds before one stays `Unschedulable`. The replicas are deleted
//! between shapes, and the agent seen to count them no more.
//!
//! The seed is random unless `OCM_SCORE_FITS_SEED` gives one, and printed first with the line that
//! replays the run.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, Node, Pod, ServiceAccount};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::*;
use crate::addon::{
    INSTALL_NAMESPACE, dynamic, install_with_timing_and_start_manager, start_agent, wait_agent_installed,
};
use crate::observe::scrape;
use crate::process::Component;
use crate::{ControlPlane, Error};

/// The cluster the random nodes are created in.
pub const CLUSTER: &str = "cluster2";
/// At least this share of the cases must have room for a replica, or the run is refused.
pub const MIN_ABOVE_ZERO_PERCENT: usize = 40;
/// Shapes per random cluster.
pub const SHAPES_PER_CLUSTER: usize = 5;
/// The agent's refresh interval here; changes are counted within its debounce anyway.
const REFRESH: Duration = Duration::from_secs(10);
const VALIDITY: Duration = Duration::from_secs(45);
const WAIT: Duration = Duration::from_secs(120);

/// What one run checks: `OCM_SCORE_FITS_N` cases (shapes; rounded up to whole clusters of
/// [`SHAPES_PER_CLUSTER`]), `OCM_SCORE_FITS_SEED` (decimal or 0x-hex), `OCM_SCORE_FITS_FEATURES`.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub clusters: usize,
    pub seed: u64,
    pub features: Features,
}

fn env_number(name: &str) -> Result<Option<u64>, String> {
    match std::env::var(name) {
        Err(_) => Ok(None),
        Ok(v) => {
            let v = v.trim();
            let parsed = match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => v.parse(),
            };
            parsed
                .map(Some)
                .map_err(|e| format!("{name}={v:?} is not a number: {e}"))
        }
    }
}

/// A seed nobody chose: the clock's nanoseconds and the process id, mixed.
fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default();
    Rng::new(nanos ^ u64::from(std::process::id()).rotate_left(32)).next_u64()
}

impl Config {
    /// From the environment, with `default_cases` cases and a fresh seed unless set.
    pub fn from_env(default_cases: usize) -> Result<Config, String> {
        let cases = env_number("OCM_SCORE_FITS_N")?.map_or(default_cases, |n| n as usize);
        if cases < 10 {
            return Err(format!(
                "OCM_SCORE_FITS_N={cases}: the check needs at least 10 cases (fewer cannot show that \
                 {MIN_ABOVE_ZERO_PERCENT} % had room for a replica)"
            ));
        }
        Ok(Config {
            clusters: cases.div_ceil(SHAPES_PER_CLUSTER),
            seed: env_number("OCM_SCORE_FITS_SEED")?.unwrap_or_else(fresh_seed),
            features: Features::from_env()?,
        })
    }

    pub fn cases(&self) -> usize {
        self.clusters * SHAPES_PER_CLUSTER
    }

    /// The environment that replays this run.
    pub fn replay(&self) -> String {
        format!(
            "OCM_SCORE_FITS_SEED={} OCM_SCORE_FITS_N={} OCM_SCORE_FITS_FEATURES={}",
            self.seed,
            self.cases(),
            self.features.names()
        )
    }
}

/// What a run found.
#[derive(Debug)]
pub struct Report {
    pub config: Config,
    pub tally: Tally,
    /// The case where the agent knowingly over-counts.
    pub stale: StaleCase,
    pub seconds: f64,
}

/// The agent's count over on purpose: a replica kube-scheduler leaves Unschedulable for a reason
/// the agent does not model (a required pod affinity to a pod that does not exist).
#[derive(Clone, Debug)]
pub struct StaleCase {
    /// The agent's `fits` before the replica.
    pub fits: u64,
    /// kube-scheduler's PodScheduled message.
    pub reason: String,
    /// `ocm_score_agent_fits_unschedulable_total{shape}` before and after.
    pub counter_before: f64,
    pub counter_after: f64,
    /// The agent's log line about the replica, if it wrote one.
    pub log_line: Option<String>,
}

impl StaleCase {
    /// What is wrong with what the agent showed.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        if self.fits == 0 {
            problems.push("stale case: the agent counted no room to begin with".into());
        }
        if self.counter_after - self.counter_before != 1.0 {
            problems.push(format!(
                "stale case: ocm_score_agent_fits_unschedulable_total went {} -> {}, not up by 1",
                self.counter_before, self.counter_after
            ));
        }
        match &self.log_line {
            Some(line) if line.contains(&self.reason) && line.contains(STALE_REPLICA) => {}
            other => problems.push(format!(
                "stale case: no log line naming {STALE_REPLICA} with kube-scheduler's reason {:?}: {other:?}",
                self.reason
            )),
        }
        problems
    }
}

impl Report {
    pub fn summary(&self) -> String {
        format!(
            "fits differential: {} cases over {} clusters, seed {}: {} disagree, {} with room for a \
             replica; {:.0} s (replay: {})",
            self.tally.outcomes.len(),
            self.config.clusters,
            self.config.seed,
            self.tally.disagreements().len(),
            self.tally.above_zero(),
            self.seconds,
            self.config.replay()
        )
    }

    /// Everything that makes the run fail: each disagreement with its case, and too few cases with
    /// room for a replica.
    pub fn problems(&self) -> Vec<String> {
        let mut problems: Vec<String> = self
            .tally
            .disagreements()
            .iter()
            .map(|o| {
                format!(
                    "cluster {} shape {}: the agent counted {}, kube-scheduler bound {}{} (last: {:?}); \
                     features {:?}",
                    o.cluster,
                    o.shape,
                    o.agent,
                    o.scheduler,
                    if o.capped { " and more" } else { "" },
                    o.message,
                    o.features
                )
            })
            .collect();
        problems.extend(self.stale.problems());
        let n = self.tally.outcomes.len();
        if self.tally.above_zero() * 100 < n * MIN_ABOVE_ZERO_PERCENT {
            problems.push(format!(
                "only {} of {n} cases had room for a replica (at least {MIN_ABOVE_ZERO_PERCENT} % must): \
                 the run shows too little",
                self.tally.above_zero()
            ));
        }
        problems
    }
}

fn kube_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Kube { what, source }
}

fn decode<T: serde::de::DeserializeOwned>(value: &Value) -> Result<T, Error> {
    serde_json::from_value(value.clone()).map_err(|e| Error::Options(format!("{e}: {value}")))
}

/// Polls `check` every 200 ms until it gives a value, or fails naming `what` with `context()`.
async fn wait_until<T, F, Fut>(
    what: &str,
    timeout: Duration,
    context: impl Fn() -> String,
    mut check: F,
) -> Result<T, Error>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, Error>>,
{
    let started = Instant::now();
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        if started.elapsed() > timeout {
            return Err(Error::Check {
                what: what.to_owned(),
                problem: format!("not within {timeout:?}\n{}", context()),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The running pieces of a run.
struct Bench {
    hub: kube::Client,
    managed: kube::Client,
    agent: Component,
}

/// Runs the check: starts the control plane, installs the add-on, and judges every case.
pub async fn run(config: Config, progress: &dyn Fn(&str)) -> Result<Report, Error> {
    progress(&format!(
        "fits differential: {} cases, seed {} (replay: {})",
        config.cases(),
        config.seed,
        config.replay()
    ));
    let started = Instant::now();
    let mut cp = ControlPlane::builder()
        .clusters(2)
        .spoke_schedulers(true)
        .start_with_progress(progress)
        .await?;
    let dir = cp.dir().join("fits");
    let (manager, refresh_arg) = install_with_timing_and_start_manager(&cp, REFRESH, VALIDITY, &dir).await?;
    wait_agent_installed(&cp, CLUSTER, Some(&refresh_arg), WAIT, || manager.tail()).await;
    let agent = start_agent(&cp, CLUSTER, &dir).await?;
    // No pod but the test's on the random nodes: OCM's work agent stops applying the agent's
    // Deployment, which goes (the agent runs as a process all along).
    let klusterlets: Vec<String> = cp
        .processes()
        .into_iter()
        .map(|(name, _)| name)
        .filter(|name| name.starts_with(&format!("{CLUSTER}-")) && name.contains("klusterlet"))
        .collect();
    for name in &klusterlets {
        cp.kill(name)?;
    }
    let managed = cp.cluster_client(CLUSTER).await?;
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(managed.clone(), INSTALL_NAMESPACE);
    deployments
        .delete_collection(&DeleteParams::foreground(), &ListParams::default())
        .await
        .map_err(kube_error("deleting the agent's Deployment"))?;
    let install_pods: Api<Pod> = Api::namespaced(managed.clone(), INSTALL_NAMESPACE);
    wait_until(
        "the agent's Deployment gone with its pods",
        WAIT,
        String::new,
        || {
            let install_pods = install_pods.clone();
            async move {
                let pods = install_pods
                    .list(&ListParams::default())
                    .await
                    .map_err(kube_error("listing the install namespace's pods"))?;
                Ok(pods.items.is_empty().then_some(()))
            }
        },
    )
    .await?;
    let bench = Bench {
        hub: cp.hub_client().await?,
        managed,
        agent,
    };
    prepare(&bench).await?;
    progress(&format!(
        "agent running, {} klusterlet stopped; {:.0} s",
        CLUSTER,
        started.elapsed().as_secs_f64()
    ));

    let mut rng = Rng::new(config.seed);
    let mut tally = Tally::default();
    for index in 0..config.clusters {
        let plan = ClusterPlan::generate(&mut rng, index, SHAPES_PER_CLUSTER, config.features);
        let outcomes = judge_cluster(&bench, &plan).await.map_err(|e| match e {
            Error::Check { what, problem } => Error::Check {
                what: format!("cluster {index} (replay: {}): {what}", config.replay()),
                problem: format!("{problem}\nagent log:\n{}", bench.agent.tail()),
            },
            other => other,
        })?;
        let line: Vec<String> = outcomes
            .iter()
            .map(|o| {
                format!(
                    "{}={}{}",
                    o.shape,
                    o.scheduler,
                    if o.agrees() {
                        String::new()
                    } else {
                        format!(" (agent {})", o.agent)
                    }
                )
            })
            .collect();
        progress(&format!(
            "cluster {index}: {} ({:.0} s)",
            line.join(", "),
            started.elapsed().as_secs_f64()
        ));
        tally.outcomes.extend(outcomes);
    }
    let stale = stale_case(&bench).await?;
    progress(&format!("stale case: {stale:?}"));
    drop(manager);
    Ok(Report {
        config,
        tally,
        stale,
        seconds: started.elapsed().as_secs_f64(),
    })
}

/// The namespaces (with their `default` ServiceAccount) and the existing pods' RuntimeClass.
async fn prepare(bench: &Bench) -> Result<(), Error> {
    for name in [EXISTING_NAMESPACE, REPLICA_NAMESPACE] {
        create_namespace(bench, name).await?;
    }
    crate::apply(&bench.managed, &existing_runtime_class()).await
}

/// Creates namespace `name` and waits for its `default` ServiceAccount (pods are refused before).
async fn create_namespace(bench: &Bench, name: &str) -> Result<(), Error> {
    let namespaces: Api<Namespace> = Api::all(bench.managed.clone());
    namespaces
        .create(
            &PostParams::default(),
            &decode(&json!({"metadata": {"name": name}}))?,
        )
        .await
        .map_err(kube_error(format!("creating namespace {name}")))?;
    let accounts: Api<ServiceAccount> = Api::namespaced(bench.managed.clone(), name);
    wait_until(
        &format!("ServiceAccount {name}/default"),
        WAIT,
        String::new,
        || {
            let accounts = accounts.clone();
            async move {
                let found = accounts
                    .get_opt("default")
                    .await
                    .map_err(kube_error("reading ServiceAccount default"))?;
                Ok(found.map(|_| ()))
            }
        },
    )
    .await
}

/// Creates a ResourceQuota and waits until kube-controller-manager has counted its usage (the
/// quota admission refuses pods until then).
async fn apply_quota(bench: &Bench, quota: &Value) -> Result<(), Error> {
    crate::apply(&bench.managed, quota).await?;
    let namespace = quota["metadata"]["namespace"].as_str().unwrap_or_default();
    let quotas: Api<k8s_openapi::api::core::v1::ResourceQuota> =
        Api::namespaced(bench.managed.clone(), namespace);
    wait_until(
        &format!("ResourceQuota {namespace}/fits counted"),
        WAIT,
        String::new,
        || {
            let quotas = quotas.clone();
            async move {
                let quota = quotas
                    .get("fits")
                    .await
                    .map_err(kube_error("reading ResourceQuota fits"))?;
                let counted = quota.status.and_then(|s| s.hard).is_some_and(|h| !h.is_empty());
                Ok(counted.then_some(()))
            }
        },
    )
    .await
}

/// The agent's `/metrics` value of `name` with `labels`, if it exports one now.
async fn agent_metric(agent: &Component, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    scrape(agent).await?.value(name, labels)
}

/// Creates a cluster's objects, reads the agent's counts, and judges each shape.
async fn judge_cluster(bench: &Bench, plan: &ClusterPlan) -> Result<Vec<Outcome>, Error> {
    let nodes: Api<Node> = Api::all(bench.managed.clone());
    let existing: Api<Pod> = Api::namespaced(bench.managed.clone(), EXISTING_NAMESPACE);
    for node in &plan.nodes {
        nodes
            .create(&PostParams::default(), &decode(&node.object)?)
            .await
            .map_err(kube_error(format!("creating node {}", node.name)))?;
        nodes
            .patch_status(&node.name, &PatchParams::default(), &Patch::Merge(&node.status))
            .await
            .map_err(kube_error(format!("node {} status", node.name)))?;
        // The API server's TaintNodesByCondition admission taints every new node not-ready; the
        // node lifecycle controller (not run here) would lift it from a Ready node. The plan's
        // taints are what that controller would leave.
        nodes
            .patch(
                &node.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"taints": node.object["spec"]["taints"]}})),
            )
            .await
            .map_err(kube_error(format!("node {} taints", node.name)))?;
    }
    for pod in plan.bound_pods.iter().chain(&plan.pending_pods) {
        existing
            .create(&PostParams::default(), &decode(pod)?)
            .await
            .map_err(kube_error(format!("creating pod {}", pod["metadata"]["name"])))?;
    }
    for name in &plan.terminating {
        // No kubelet confirms: the pod stays, terminating, for its grace period (an hour).
        existing
            .delete(name, &DeleteParams::default())
            .await
            .map_err(kube_error(format!("deleting pod {name}")))?;
    }
    // kube-scheduler settles each pending pod: bound, or Unschedulable.
    let settled = || {
        let existing = existing.clone();
        async move {
            let pods = existing
                .list(&ListParams::default())
                .await
                .map_err(kube_error("listing the existing pods"))?;
            let open = pods
                .items
                .iter()
                .filter(|p| !is_bound(p) && unschedulable_message(p).is_none())
                .count();
            let bound = pods.items.iter().filter(|p| is_bound(p)).count();
            Ok((open == 0).then_some(bound))
        }
    };
    let bound = wait_until(
        "kube-scheduler to settle the pending pods",
        WAIT,
        String::new,
        settled,
    )
    .await?;
    let eligible = plan.nodes.iter().filter(|n| n.ready && !n.cordoned).count();

    let hub_shapes = dynamic(
        &bench.hub,
        "tiering.ocm-score.io",
        "v1alpha1",
        "WorkloadShape",
        None,
    )
    .await?;
    for shape in &plan.shapes {
        if let Some(class) = &shape.runtime_class {
            crate::apply(&bench.managed, class).await?;
        }
        if shape.namespace() != REPLICA_NAMESPACE {
            create_namespace(bench, shape.namespace()).await?;
        }
        if let Some(quota) = &shape.quota {
            apply_quota(bench, quota).await?;
        }
        crate::apply(&bench.hub, &shape.object()).await?;
    }
    let agent_counts = read_counts(bench, plan, eligible, bound).await?;

    let mut outcomes = Vec::new();
    for (shape, agent) in plan.shapes.iter().zip(agent_counts) {
        let (scheduler, capped, message) = schedule_replicas(bench, shape, agent).await?;
        let mut features = shape.features.clone();
        features.extend(plan.features.iter().copied());
        outcomes.push(Outcome {
            cluster: plan.index,
            shape: shape.name.clone(),
            agent,
            scheduler,
            capped,
            message,
            features,
        });
        delete_replicas(bench, shape.namespace()).await?;
        wait_counted(bench, eligible, bound).await?;
    }

    // Clean up for the next cluster: shapes, pods, nodes.
    for shape in &plan.shapes {
        hub_shapes
            .delete(&shape.name, &DeleteParams::default())
            .await
            .map_err(kube_error(format!("deleting WorkloadShape {}", shape.name)))?;
    }
    let namespaces: Api<Namespace> = Api::all(bench.managed.clone());
    for shape in plan.shapes.iter().filter(|s| s.namespace() != REPLICA_NAMESPACE) {
        // Never used again: no need to wait for it to go.
        namespaces
            .delete(shape.namespace(), &DeleteParams::default())
            .await
            .map_err(kube_error(format!("deleting namespace {}", shape.namespace())))?;
    }
    existing
        .delete_collection(&DeleteParams::default().grace_period(0), &ListParams::default())
        .await
        .map_err(kube_error("deleting the existing pods"))?;
    for node in &plan.nodes {
        nodes
            .delete(&node.name, &DeleteParams::default())
            .await
            .map_err(kube_error(format!("deleting node {}", node.name)))?;
    }
    wait_until("the existing pods gone", WAIT, String::new, || {
        let existing = existing.clone();
        async move {
            let left = existing
                .list(&ListParams::default())
                .await
                .map_err(kube_error("listing the existing pods"))?;
            Ok(left.items.is_empty().then_some(()))
        }
    })
    .await?;
    wait_counted(bench, 0, 0).await?;
    Ok(outcomes)
}

fn is_bound(pod: &Pod) -> bool {
    pod.spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty())
}

/// The PodScheduled message when kube-scheduler marked the pod Unschedulable.
fn unschedulable_message(pod: &Pod) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| {
            c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable")
        })
        .map(|c| c.message.clone().unwrap_or_default())
}

/// Waits until the agent counts `eligible` nodes and `pods` pods.
async fn wait_counted(bench: &Bench, eligible: usize, pods: usize) -> Result<(), Error> {
    wait_until(
        &format!("the agent to count {eligible} eligible nodes and {pods} pods"),
        WAIT,
        || bench.agent.tail(),
        || async move {
            let nodes = agent_metric(&bench.agent, "ocm_score_agent_eligible_nodes", &[]).await;
            let counted = agent_metric(&bench.agent, "ocm_score_agent_counted_pods", &[]).await;
            Ok((nodes == Some(eligible as f64) && counted == Some(pods as f64)).then_some(()))
        },
    )
    .await
}

/// The agent's `fits` for every shape of the plan, once it counts every node and pod and two reads
/// a debounce apart agree.
async fn read_counts(
    bench: &Bench,
    plan: &ClusterPlan,
    eligible: usize,
    pods: usize,
) -> Result<Vec<u64>, Error> {
    wait_counted(bench, eligible, pods).await?;
    let read = || async {
        let exposition = scrape(&bench.agent).await?;
        plan.shapes
            .iter()
            .map(|s| {
                exposition
                    .value("ocm_score_agent_fits", &[("shape", &s.name)])
                    .map(|v| v as u64)
            })
            .collect::<Option<Vec<u64>>>()
    };
    let started = Instant::now();
    let mut last: Option<Vec<u64>> = None;
    loop {
        let now = read().await;
        if now.is_some() && now == last {
            return Ok(now.unwrap_or_default());
        }
        if started.elapsed() > WAIT {
            return Err(Error::Check {
                what: "the agent's fits for every shape, steady over two reads".into(),
                problem: format!("last read {now:?}\n{}", bench.agent.tail()),
            });
        }
        last = now;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Creates replicas one at a time until one stays Unschedulable, or one more than the agent said
/// is bound. Returns the bound count, whether it stopped at the cap, and the last message.
async fn schedule_replicas(
    bench: &Bench,
    shape: &ShapePlan,
    agent: u64,
) -> Result<(u64, bool, String), Error> {
    let replicas: Api<Pod> = Api::namespaced(bench.managed.clone(), shape.namespace());
    let mut bound = 0u64;
    loop {
        if bound > agent {
            return Ok((bound, true, String::new()));
        }
        let pod = shape.replica(bound as usize);
        let name = pod["metadata"]["name"].as_str().unwrap_or_default().to_owned();
        match replicas.create(&PostParams::default(), &decode(&pod)?).await {
            Ok(_) => {}
            // The namespace's ResourceQuota refuses it: no more replicas, as for the scheduler.
            Err(kube::Error::Api(status))
                if status.code == 403 && status.message.contains("exceeded quota") =>
            {
                return Ok((bound, false, status.message));
            }
            Err(e) => return Err(kube_error(format!("creating replica {name}"))(e)),
        }
        let outcome = wait_until(
            &format!("kube-scheduler to bind {name} or mark it Unschedulable"),
            WAIT,
            String::new,
            || {
                let replicas = replicas.clone();
                let name = name.clone();
                async move {
                    let pod = replicas
                        .get(&name)
                        .await
                        .map_err(kube_error(format!("reading replica {name}")))?;
                    Ok(if is_bound(&pod) {
                        Some(None)
                    } else {
                        unschedulable_message(&pod).map(Some)
                    })
                }
            },
        )
        .await?;
        match outcome {
            None => bound += 1,
            Some(message) => return Ok((bound, false, message)),
        }
    }
}

/// Deletes every replica in `namespace` and waits until they are gone.
async fn delete_replicas(bench: &Bench, namespace: &str) -> Result<(), Error> {
    let replicas: Api<Pod> = Api::namespaced(bench.managed.clone(), namespace);
    replicas
        .delete_collection(&DeleteParams::default().grace_period(0), &ListParams::default())
        .await
        .map_err(kube_error("deleting the replicas"))?;
    wait_until("the replicas gone", WAIT, String::new, || {
        let replicas = replicas.clone();
        async move {
            let left = replicas
                .list(&ListParams::default())
                .await
                .map_err(kube_error("listing the replicas"))?;
            Ok(left.items.is_empty().then_some(()))
        }
    })
    .await
}

const STALE_SHAPE: &str = "fits-stale";
const STALE_REPLICA: &str = "fits-stale-000";

/// Three roomy nodes, a shape of 500m, and one replica that also requires a pod affinity to a pod
/// that does not exist: kube-scheduler leaves it Unschedulable while the agent counts room. The
/// agent must count it in `ocm_score_agent_fits_unschedulable_total{shape}` and log it with
/// kube-scheduler's message.
async fn stale_case(bench: &Bench) -> Result<StaleCase, Error> {
    let nodes: Api<Node> = Api::all(bench.managed.clone());
    for i in 0..3 {
        let name = format!("fits-stale-n{i}");
        let node = json!({"metadata": {"name": name, "labels": {HOSTNAME_LABEL: name}}});
        nodes
            .create(&PostParams::default(), &decode(&node)?)
            .await
            .map_err(kube_error(format!("creating node {name}")))?;
        let allocatable = json!({"cpu": "4", "memory": "8Gi", "pods": "10"});
        let status = json!({"status": {"capacity": allocatable, "allocatable": allocatable,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}]}});
        nodes
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(kube_error(format!("node {name} status")))?;
        nodes
            .patch(
                &name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"taints": null}})),
            )
            .await
            .map_err(kube_error(format!("node {name} taints")))?;
    }
    let shape = ShapePlan {
        name: STALE_SHAPE.into(),
        spec: json!({"requests": {"cpu": "500m"}}),
        runtime_class: None,
        quota: None,
        features: Vec::new(),
    };
    crate::apply(&bench.hub, &shape.object()).await?;
    let plan = ClusterPlan {
        index: 0,
        nodes: Vec::new(),
        bound_pods: Vec::new(),
        terminating: Vec::new(),
        pending_pods: Vec::new(),
        shapes: vec![shape.clone()],
        features: Vec::new(),
    };
    let fits = read_counts(bench, &plan, 3, 0).await?[0];
    let counter = || async {
        agent_metric(
            &bench.agent,
            "ocm_score_agent_fits_unschedulable_total",
            &[("shape", STALE_SHAPE)],
        )
        .await
        .unwrap_or(0.0)
    };
    let counter_before = counter().await;
    let mut replica = shape.replica(0);
    replica["spec"]["affinity"] = json!({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "does-not-exist"}}, "topologyKey": HOSTNAME_LABEL}]}});
    let replicas: Api<Pod> = Api::namespaced(bench.managed.clone(), REPLICA_NAMESPACE);
    replicas
        .create(&PostParams::default(), &decode(&replica)?)
        .await
        .map_err(kube_error("creating the stale replica"))?;
    let reason = wait_until(
        "kube-scheduler to mark the stale replica Unschedulable",
        WAIT,
        String::new,
        || {
            let replicas = replicas.clone();
            async move {
                let pod = replicas
                    .get(STALE_REPLICA)
                    .await
                    .map_err(kube_error("reading the stale replica"))?;
                Ok(unschedulable_message(&pod))
            }
        },
    )
    .await?;
    // Judged at the agent's first computation 2 s after it saw the condition: within a refresh.
    let counted = wait_until(
        "the agent to count the stale replica",
        Duration::from_secs(60),
        || bench.agent.tail(),
        || async { Ok((counter().await > counter_before).then_some(())) },
    )
    .await;
    let counter_after = counter().await;
    let log = std::fs::read_to_string(bench.agent.log_path()).map_err(|source| Error::Io {
        what: format!("reading {}", bench.agent.log_path().display()),
        source,
    })?;
    let log_line = log
        .lines()
        .find(|l| l.contains("Unschedulable while fits counts room") && l.contains(STALE_REPLICA))
        .map(str::to_owned);
    delete_replicas(bench, REPLICA_NAMESPACE).await?;
    if let Err(e) = counted {
        tracing::warn!("{e}");
    }
    Ok(StaleCase {
        fits,
        reason,
        counter_before,
        counter_after,
        log_line,
    })
}
