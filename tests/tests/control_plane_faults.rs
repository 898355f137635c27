//! Restarts and faults on the real control plane (issue 15), with the add-on installed from
//! `manifests/hub` (annotated `lifecycle: self`, as the agents run as processes), our add-on manager
//! running as its Deployment's container and both agents as theirs:
//!
//! 1. the hub's kube-apiserver is killed with `kill -9` and restarted (same flags, same etcd) after
//!    the outage;
//! 2. the same for the hub's etcd (same data directory);
//! 3. cluster2's own kube-apiserver is killed and restarted, and cluster2 changes right after.
//!
//! After each hub outage the agents and the manager recover, each within what its own settings
//! allow (see [`hub_outage`]), nothing of ours is lost or duplicated (same objects, same uids, same
//! generations), scores that could not be renewed have expired (their `validUntil` passed during the
//! outage) and fresh ones are written. After the managed cluster's restart the agent has re-listed
//! and its figures equal a fresh agent's (`ocm-score-agent once`). Throughout, every published score
//! is within -100..100 and no `validUntil` lies further ahead than the validity; no process panics.
//!
//! The refresh interval is set to 10 s through the AddOnDeploymentConfig (the shortest a validity the
//! agent accepts allows to expire inside one outage: 45 s). The hub outage lasts the 30 s or,
//! if longer, until every `validUntil` written before the kill has passed: validity + 2 s.
//!
//! One control plane hosts all three faults. Like a Deployment's kubelet, the harness restarts our
//! manager when it exits; it does so by design when it cannot renew its leader Lease (the hub is
//! gone for longer than the renew deadline), and as in a pod it keeps its identity and takes the
//! Lease back at once.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use ocm_score_agent_contract::DEFAULT_API_TIMEOUT;
use ocm_score_control_plane::addon::{
    HUB_NAMESPACE, add_nodes, add_pod, addon_objects, agent_once, kubectl, score_object,
    self_lifecycle_overlay, set_agent_variables, start_agent, start_manager_with, wait_agent_installed,
};
use ocm_score_control_plane::observe::{ScoreSampler, probe_address, scrape};
use ocm_score_control_plane::process::Component;
use ocm_score_control_plane::{ControlPlane, readyz};
use ocm_score_tests::support::{Exposition, TempDir, eventually, http_get};
use serde_json::{Value, json};

/// The agents' refresh interval, set through the AddOnDeploymentConfig.
const REFRESH: Duration = Duration::from_secs(10);
/// Their scores' validity: the shortest the agent accepts above refresh × 1.1 + its 10 s API and
/// 20 s hub timeouts (41 s), rounded up.
const VALIDITY: Duration = Duration::from_secs(45);
/// The outage the issue prescribes; longer when the validity is, so that scores expire in it.
const OUTAGE: Duration = Duration::from_secs(30);
/// The manager's leader election, set by the test (its Deployment leaves them to the defaults,
/// these same values): how long a claim lasts, how long a leader may go without renewing before it
/// steps down (the manager then exits, and its kubelet restarts it), and the pause between two
/// attempts to acquire or renew.
const LEASE_DURATION: Duration = Duration::from_secs(15);
const RENEW_DEADLINE: Duration = Duration::from_secs(10);
const RETRY_PERIOD: Duration = Duration::from_secs(2);
/// The Lease the manager competes for, and the identity it has in its pod (the pod's name).
const MANAGER_LEASE: &str = "ocm-score-addon-manager";
/// Patience for one convergence on a loaded 2-core machine.
const WAIT: Duration = Duration::from_secs(240);
const CLUSTERS: [&str; 2] = ["cluster1", "cluster2"];

/// Our processes: the add-on manager and one agent per cluster.
struct Ours {
    manager: Component,
    agents: BTreeMap<&'static str, Component>,
    /// Exit statuses of the manager, each followed by a restart (as its pod's kubelet would).
    manager_exits: Vec<String>,
}

impl Ours {
    /// What the manager pod's kubelet does (`restartPolicy: Always`): restarts the container when it
    /// exits. The manager exits with 1 when it loses its Lease; any other exit (a panic is 101) fails.
    fn kubelet(&mut self, during: &str) {
        if let Some(status) = self.manager.exit_status() {
            assert_eq!(
                status.code(),
                Some(1),
                "the manager exits only for a lost Lease:\n{}",
                self.manager.tail()
            );
            self.manager_exits.push(format!("{status} during {during}"));
            self.manager.restart().unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_addon_recovers_from_hub_and_managed_api_server_restarts() {
    let test_started = Instant::now();
    let mut cp = ControlPlane::builder()
        .clusters(2)
        .start_with_progress(&|l| eprintln!("{l}"))
        .await
        .unwrap_or_else(|e| panic!("the control plane did not start: {e}"));
    let hub = cp.hub_client().await.expect("hub client");
    let dir = TempDir::new("faults");

    // The install a user runs, with a refresh short enough for scores to expire within an outage.
    let (manager, refresh_arg) = install_and_start_manager(&cp, dir.path()).await;
    let mut agents = BTreeMap::new();
    for cluster in CLUSTERS {
        wait_agent_installed(&cp, cluster, Some(&refresh_arg), WAIT, || manager.tail()).await;
        let managed = cp.cluster_client(cluster).await.expect("managed client");
        add_nodes(&managed, cluster, 2).await.expect("nodes");
        for node in 0..2 {
            add_pod(&managed, cluster, node, "500m", "2Gi")
                .await
                .expect("pod");
        }
        agents.insert(
            cluster,
            start_agent(&cp, cluster, dir.path()).await.expect("agent starts"),
        );
    }
    let mut ours = Ours {
        manager,
        agents,
        manager_exits: Vec::new(),
    };
    for cluster in CLUSTERS {
        eventually(
            &format!("{cluster}: a valid score published"),
            WAIT,
            || ours.agents[cluster].tail(),
            || {
                let hub = hub.clone();
                async move { valid_until(&hub, cluster).await.filter(|v| *v > Timestamp::now()) }
            },
        )
        .await;
    }
    let sampler = ScoreSampler::start(hub.clone(), VALIDITY);
    let installed = snapshot(&cp).await;
    eprintln!(
        "installed and publishing after {:.0} s; {} objects of ours",
        test_started.elapsed().as_secs_f64(),
        installed.len()
    );

    for component in ["hub-kube-apiserver", "hub-etcd"] {
        hub_outage(&mut cp, &mut ours, &hub, component).await;
        assert_unchanged(&installed, &snapshot(&cp).await, component);
        for cluster in CLUSTERS {
            figures_equal_a_fresh_agents(&ours.agents[cluster], cluster).await;
        }
    }

    managed_restart(&mut cp, &ours, "cluster2").await;

    let sampled = sampler.stop();
    eprintln!(
        "{} score samples taken, {} while a server was down",
        sampled.samples, sampled.failures
    );
    assert!(
        sampled.violations.is_empty(),
        "published scores broke the contract:\n{}",
        sampled.violations.join("\n")
    );
    assert_unchanged(&installed, &snapshot(&cp).await, "the end");
    for component in std::iter::once(&ours.manager).chain(ours.agents.values()) {
        let log = std::fs::read_to_string(component.log_path()).unwrap_or_default();
        assert!(
            !log.contains("panicked"),
            "{} panicked:\n{}",
            component.name(),
            component.tail()
        );
    }
    for agent in ours.agents.values_mut() {
        assert!(
            agent.exit_status().is_none(),
            "{} exited:\n{}",
            agent.name(),
            agent.tail()
        );
    }
    cp.check_running()
        .unwrap_or_else(|e| panic!("a control-plane component did not survive: {e}"));
    eprintln!(
        "manager exits (each followed by a restart): {:?}\nwall time {:.0} s",
        ours.manager_exits,
        test_started.elapsed().as_secs_f64()
    );
}

/// `manifests/hub` applied with kubectl (annotated `lifecycle: self`: the agents run as processes,
/// see `self_lifecycle_overlay`), the agents' refresh and validity set through the
/// AddOnDeploymentConfig, and the manager started as its Deployment's container with the test's
/// leader election settings. Returns the manager and the refresh flag the agents must get.
async fn install_and_start_manager(cp: &ControlPlane, dir: &std::path::Path) -> (Component, String) {
    let hub_kc = cp.hub_kubeconfig();
    let overlay = self_lifecycle_overlay(dir).unwrap_or_else(|e| panic!("{e}"));
    kubectl(&hub_kc, &["apply", "-k", &overlay.to_string_lossy()]).unwrap_or_else(|e| panic!("{e}"));
    let refresh = format!("{}s", REFRESH.as_secs());
    let validity = format!("{}s", VALIDITY.as_secs());
    set_agent_variables(
        &hub_kc,
        &[
            ("SOURCES", "cluster"),
            ("REFRESH_INTERVAL", &refresh),
            ("SCORE_VALIDITY", &validity),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let leader_election = [
        format!("--leader-election-lease-duration={}s", LEASE_DURATION.as_secs()),
        format!("--leader-election-renew-deadline={}s", RENEW_DEADLINE.as_secs()),
        format!("--leader-election-retry-period={}s", RETRY_PERIOD.as_secs()),
    ];
    let manager = start_manager_with(cp, dir, &leader_election)
        .await
        .unwrap_or_else(|e| panic!("the add-on manager starts: {e}"));
    (manager, format!("--refresh-interval={refresh}"))
}

/// Kills `component` of the hub, keeps it down for the outage, restarts it, and checks how our
/// processes come back. Each recovery is an event with a time of its own, checked against what the
/// process's settings allow after the hub answered `/readyz` (not against when this test, on a
/// loaded machine, got round to seeing it):
/// - the manager exits during the outage (it cannot renew its Lease for longer than the renew
///   deadline) and is restarted, as its kubelet would;
/// - it leads again (its `became leader` log line) within 2 × [`RENEW_DEADLINE`] +
///   [`RETRY_PERIOD`]: the attempt under way when the hub came back lasts at most the renew
///   deadline (a standby's budget), the next one starts a retry period later and lasts at most as
///   long. The Lease names the manager's own identity, so it takes it back at once rather than
///   after a [`LEASE_DURATION`] (checked: same holder, no transition);
/// - its caches sync (`hub caches synced`) and it is ready: lists on a server this test does not
///   pace, so waited for with the patience only, and reported;
/// - each agent computes fresh figures for a write (`validUntil` − validity, stamped by the agent)
///   within [`REFRESH`] + the agent's `--api-timeout` (its default): after a failed write or source
///   read it tries again at most one refresh interval later, and a read takes at most the API
///   timeout before it stamps.
async fn hub_outage(cp: &mut ControlPlane, ours: &mut Ours, hub: &kube::Client, component: &str) {
    let mut failures_before = BTreeMap::new();
    for (cluster, agent) in &ours.agents {
        failures_before.insert(*cluster, failures(agent).await);
    }
    let lease_before = manager_lease(hub).await;
    assert!(
        holder(&lease_before).is_some(),
        "the manager holds its Lease before the kill: {lease_before:?}"
    );
    let killed_at = Instant::now();
    let killed_wall = Timestamp::now();
    cp.kill(component).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("--- {component} killed");

    // The agents notice: a hub write fails, or (cluster1, whose API server is the hub's) a source.
    for (cluster, agent) in &ours.agents {
        let before = failures_before[cluster];
        let noticed = eventually(
            &format!("{cluster}'s agent notices {component} is gone"),
            WAIT,
            || agent.tail(),
            || async move { (failures(agent).await > before).then(|| killed_at.elapsed()) },
        )
        .await;
        eprintln!("{cluster}'s agent noticed after {:.1} s", noticed.as_secs_f64());
    }

    // The outage: the 30 s, or until every validUntil written before the kill has passed.
    let outage = OUTAGE.max(VALIDITY + Duration::from_secs(2));
    let exits_before = ours.manager_exits.len();
    while killed_at.elapsed() < outage {
        ours.kubelet(&format!("the {component} outage"));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert!(outage > RENEW_DEADLINE);
    assert!(
        ours.manager_exits.len() > exits_before,
        "the manager, unable to renew its Lease for {outage:?} (renew deadline {RENEW_DEADLINE:?}), \
         exited during the {component} outage:\n{}",
        ours.manager.tail()
    );
    for (cluster, agent) in &ours.agents {
        let metrics = scrape(agent)
            .await
            .unwrap_or_else(|| panic!("{cluster}'s agent serves /metrics in the outage"));
        let last_valid = metrics
            .value("ocm_score_agent_valid_until_timestamp_seconds", &[])
            .unwrap_or_default();
        assert!(
            last_valid < Timestamp::now().as_second() as f64,
            "{cluster}: the last score written before the outage has expired (validUntil {last_valid})"
        );
        let (code, _) = http_get(&probe_address(agent), "/healthz")
            .await
            .unwrap_or_default();
        assert_eq!(
            code,
            200,
            "{cluster}'s agent stays live through the outage:\n{}",
            agent.tail()
        );
    }

    cp.restart(component).unwrap_or_else(|e| panic!("{e}"));
    let restarted_at = Instant::now();
    eventually(
        &format!("the hub answers /readyz after {component} restarted"),
        WAIT,
        || cp.log_tail(component, 25),
        || {
            let hub = hub.clone();
            async move { readyz(&hub).await.then_some(()) }
        },
    )
    .await;
    let back = Instant::now();
    let back_wall = Timestamp::now();
    eprintln!(
        "{component} down {:.0} s; the hub ready {:.1} s after its restart",
        restarted_at.duration_since(killed_at).as_secs_f64(),
        back.duration_since(restarted_at).as_secs_f64()
    );

    // Recovery, event by event: the manager leads again, syncs its caches and is ready (restarted
    // when it exits, as a pod's kubelet would), and every agent has written a score valid now.
    let mut led_at: Option<Timestamp> = None;
    let mut synced_at: Option<Timestamp> = None;
    let mut manager_ready = None;
    let mut computed_at: BTreeMap<&str, Timestamp> = BTreeMap::new();
    let mut first_read: BTreeMap<&str, Timestamp> = BTreeMap::new();
    let validity = SignedDuration::try_from(VALIDITY).unwrap_or_default();
    loop {
        ours.kubelet(&format!("the recovery from the {component} outage"));
        if led_at.is_none() {
            led_at = logged_at(&ours.manager, "became leader", killed_wall);
        }
        if let Some(led) = led_at
            && synced_at.is_none()
        {
            synced_at = logged_at(&ours.manager, "hub caches synced", led);
        }
        if synced_at.is_some() && manager_ready.is_none() && manager_leads(&ours.manager).await {
            manager_ready = Some(back.elapsed());
        }
        for cluster in CLUSTERS {
            if computed_at.contains_key(cluster) {
                continue;
            }
            let Some(valid) = valid_until(hub, cluster).await else {
                continue;
            };
            first_read.entry(cluster).or_insert(valid);
            // Valid now, more than the outage after the kill: written since the hub came back.
            if valid > Timestamp::now() {
                computed_at.insert(cluster, valid - validity);
            }
        }
        if manager_ready.is_some() && computed_at.len() == CLUSTERS.len() {
            break;
        }
        assert!(
            back.elapsed() < WAIT,
            "not recovered {WAIT:?} after {component} came back: the manager led at {led_at:?}, synced at \
             {synced_at:?}, ready after {manager_ready:?}; agents computed at {computed_at:?}\n\
             --- manager:\n{}\n--- agent cluster1:\n{}\n--- agent cluster2:\n{}",
            ours.manager.tail(),
            ours.agents["cluster1"].tail(),
            ours.agents["cluster2"].tail()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (led_at, synced_at) = (led_at.unwrap_or(back_wall), synced_at.unwrap_or(back_wall));
    let after_back = |at: Timestamp| at.duration_since(back_wall).as_secs_f64();
    eprintln!(
        "after {component}: the manager leads again {:.1} s after the hub is ready, its caches synced \
         {:.1} s after, ready (seen) after {:.1} s; agents computed fresh figures after {}",
        after_back(led_at),
        after_back(synced_at),
        manager_ready.unwrap_or_default().as_secs_f64(),
        computed_at
            .iter()
            .map(|(c, at)| format!("{c} {:.0} s", after_back(*at)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // What the hub held when it came back: an expired score, or one written since the kill.
    for (cluster, valid) in &first_read {
        let written_after_kill = valid.checked_sub(validity).is_ok_and(|at| at >= killed_wall);
        assert!(
            *valid < back_wall || written_after_kill,
            "{cluster}: the score on the hub after {component} came back was neither expired nor new \
             (validUntil {valid}, killed at {killed_wall}, back at {back_wall})"
        );
    }

    let lease_deadline = SignedDuration::try_from(2 * RENEW_DEADLINE + RETRY_PERIOD).unwrap_or_default();
    assert!(
        led_at <= back_wall + lease_deadline,
        "the manager led again at {led_at}, {:.1} s after the hub was ready at {back_wall}: more than two \
         renew deadlines and a retry period ({lease_deadline})\n{}",
        after_back(led_at),
        ours.manager.tail()
    );
    let lease_after = manager_lease(hub).await;
    assert_eq!(
        (holder(&lease_after), transitions(&lease_after)),
        (holder(&lease_before), transitions(&lease_before)),
        "the manager took its own Lease back (same holder, no transition), without waiting for it to expire"
    );
    let agent_deadline = SignedDuration::try_from(REFRESH + DEFAULT_API_TIMEOUT).unwrap_or_default();
    for (cluster, at) in &computed_at {
        assert!(
            *at <= back_wall + agent_deadline,
            "{cluster}'s agent computed its first fresh figures at {at}, {:.0} s after the hub was ready at \
             {back_wall}: more than one refresh interval ({REFRESH:?}) and its API timeout \
             ({DEFAULT_API_TIMEOUT:?})\n{}",
            after_back(*at),
            ours.agents[cluster].tail()
        );
    }
}

/// Kills the kube-apiserver of `cluster`, restarts it, changes the cluster at once (a pod more, one
/// fewer, a node cordoned), and checks that the agent re-listed and counts what a fresh agent counts.
async fn managed_restart(cp: &mut ControlPlane, ours: &Ours, cluster: &str) {
    let agent = &ours.agents[cluster];
    let component = format!("{cluster}-kube-apiserver");
    let managed = cp.cluster_client(cluster).await.expect("managed client");
    // A pod that was there before the kill, to delete after it.
    let pods: Api<Pod> = Api::namespaced(managed.clone(), "load");
    let victim = pods
        .list(&ListParams::default())
        .await
        .expect("pods")
        .items
        .into_iter()
        .find_map(|p| p.metadata.name)
        .expect("a pod to delete");
    let lists_before = logged(agent, "list complete");
    let errors_before = watch_errors(agent).await;
    let killed_at = Instant::now();
    cp.kill(&component).unwrap_or_else(|e| panic!("{e}"));
    eprintln!("--- {component} killed");
    let noticed = eventually(
        &format!("{cluster}'s agent sees its watches fail"),
        WAIT,
        || agent.tail(),
        || async move { (watch_errors(agent).await > errors_before).then(|| killed_at.elapsed()) },
    )
    .await;
    cp.restart(&component).unwrap_or_else(|e| panic!("{e}"));
    eventually(
        &format!("{component} answers /readyz"),
        WAIT,
        || cp.log_tail(&component, 25),
        || {
            let managed = managed.clone();
            async move { readyz(&managed).await.then_some(()) }
        },
    )
    .await;
    let back = Instant::now();
    eprintln!(
        "{cluster}'s agent saw its watches fail after {:.1} s; {component} ready again {:.1} s after the kill",
        noticed.as_secs_f64(),
        back.duration_since(killed_at).as_secs_f64()
    );

    // Changes the agent's old watches never saw.
    add_pod(&managed, cluster, 0, "1", "4Gi").await.expect("pod");
    pods.delete(&victim, &DeleteParams::default().grace_period(0))
        .await
        .expect("pod deleted");
    let nodes: Api<Node> = Api::all(managed.clone());
    nodes
        .patch(
            &format!("{cluster}-node-1"),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"unschedulable": true}})),
        )
        .await
        .expect("node cordoned");

    let fresh = figures_equal_a_fresh_agents(agent, cluster).await;
    let relisted = logged(agent, "list complete") - lists_before;
    eprintln!(
        "{cluster}'s agent counts what a fresh agent counts {:.1} s after {component} is back ({fresh}); \
         {relisted} lists completed since the kill",
        back.elapsed().as_secs_f64()
    );
    assert!(
        relisted >= 2,
        "{cluster}'s agent re-lists nodes and pods after its API server restarted:\n{}",
        agent.tail()
    );
}

/// Waits until `agent`'s figures (eligible nodes, counted pods, every score) equal those of a fresh
/// `ocm-score-agent once` run now; returns them, as once's comment line says them.
async fn figures_equal_a_fresh_agents(agent: &Component, cluster: &str) -> String {
    let yaml = agent_once(agent).unwrap_or_else(|e| panic!("{e}"));
    let (detail, expected) = figures_of_once(&yaml);
    let got = eventually(
        &format!("{cluster}'s agent counts what a fresh agent counts: {detail} {expected:?}"),
        WAIT,
        || agent.tail(),
        || {
            let expected = expected.clone();
            async move {
                let got = figures_of_agent(agent).await?;
                (got == expected).then_some(got)
            }
        },
    )
    .await;
    assert_eq!(got, expected);
    detail
}

/// `eligible`, `pods` and every score, from the YAML of `once`.
fn figures_of_once(yaml: &str) -> (String, BTreeMap<String, i64>) {
    let detail = yaml
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("# "))
        .unwrap_or_default()
        .to_owned();
    // "cluster: 2 of 2 nodes Ready and schedulable, 3 pods holding resources"
    let words: Vec<&str> = detail.split_whitespace().collect();
    let number_before = |word: &str| {
        words
            .iter()
            .position(|w| *w == word)
            .and_then(|i| i.checked_sub(1))
            .and_then(|i| words[i].parse::<i64>().ok())
    };
    let mut figures = BTreeMap::new();
    figures.insert(
        "eligible".to_owned(),
        words
            .get(1)
            .and_then(|w| w.parse().ok())
            .expect("eligible nodes in once's output"),
    );
    figures.insert(
        "pods".to_owned(),
        number_before("pods").expect("pods in once's output"),
    );
    let object: Value = serde_norway::from_str(yaml).expect("once prints YAML");
    for score in object
        .pointer("/status/scores")
        .and_then(Value::as_array)
        .expect("scores in once's output")
    {
        figures.insert(
            score["name"].as_str().unwrap_or_default().to_owned(),
            score["value"].as_i64().unwrap_or(i64::MIN),
        );
    }
    (detail, figures)
}

/// The same figures from a running agent's /metrics (every `ocm_score_agent_score` series).
async fn figures_of_agent(agent: &Component) -> Option<BTreeMap<String, i64>> {
    let (code, body) = http_get(&probe_address(agent), "/metrics").await.ok()?;
    if code != 200 {
        return None;
    }
    let metrics = Exposition::parse(&body).ok()?;
    let mut figures = BTreeMap::new();
    figures.insert(
        "eligible".to_owned(),
        metrics.value("ocm_score_agent_eligible_nodes", &[])? as i64,
    );
    figures.insert(
        "pods".to_owned(),
        metrics.value("ocm_score_agent_counted_pods", &[])? as i64,
    );
    // `ocm_score_agent_score{score="cpuAvailable"} -70`
    for line in body.lines() {
        let Some(rest) = line.strip_prefix("ocm_score_agent_score{score=\"") else {
            continue;
        };
        let (name, value) = rest.split_once("\"} ")?;
        figures.insert(name.to_owned(), value.trim().parse().ok()?);
    }
    Some(figures)
}

/// Our objects on the hub and the managed clusters, each with its uid and generation: what must
/// be neither lost nor duplicated.
async fn snapshot(cp: &ControlPlane) -> BTreeMap<String, String> {
    let objects = addon_objects(cp, &CLUSTERS)
        .await
        .unwrap_or_else(|e| panic!("listing our objects: {e}"));
    objects
        .into_iter()
        .map(|(what, meta)| {
            (
                what,
                format!(
                    "uid {} generation {}",
                    meta.uid.unwrap_or_default(),
                    meta.generation.unwrap_or_default()
                ),
            )
        })
        .collect()
}

fn assert_unchanged(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>, when: &str) {
    let lost: Vec<_> = before.keys().filter(|k| !after.contains_key(*k)).collect();
    let added: Vec<_> = after.keys().filter(|k| !before.contains_key(*k)).collect();
    let changed: Vec<_> = before
        .iter()
        .filter(|(k, v)| after.get(*k).is_some_and(|a| a != *v))
        .map(|(k, v)| format!("{k}: {v} -> {}", after[k]))
        .collect();
    assert!(
        lost.is_empty() && added.is_empty() && changed.is_empty(),
        "our objects after {when}: lost {lost:?}, added {added:?}, recreated or respecified {changed:?}"
    );
}

/// `validUntil` of the cluster's score, if the hub answers and it has one.
async fn valid_until(hub: &kube::Client, cluster: &str) -> Option<Timestamp> {
    score_object(hub, cluster)
        .await
        .ok()??
        .data
        .pointer("/status/validUntil")?
        .as_str()?
        .parse()
        .ok()
}

/// When `component` first logged a line containing `message` at or after `since`, by the timestamp
/// its log line starts with.
fn logged_at(component: &Component, message: &str, since: Timestamp) -> Option<Timestamp> {
    std::fs::read_to_string(component.log_path())
        .ok()?
        .lines()
        .filter(|l| l.contains(message))
        .filter_map(|l| l.split_whitespace().next()?.parse::<Timestamp>().ok())
        .find(|at| *at >= since)
}

/// The manager's leader Lease, as the hub holds it (`None` only when a read succeeded without it).
/// It is read right after an outage: a failed read is retried for the patience, never "no Lease".
async fn manager_lease(hub: &kube::Client) -> Option<Lease> {
    eventually("the manager's Lease, read", WAIT, String::new, || async {
        Api::<Lease>::namespaced(hub.clone(), HUB_NAMESPACE)
            .get_opt(MANAGER_LEASE)
            .await
            .ok()
    })
    .await
}

fn holder(lease: &Option<Lease>) -> Option<String> {
    lease.as_ref()?.spec.as_ref()?.holder_identity.clone()
}

fn transitions(lease: &Option<Lease>) -> Option<i32> {
    lease.as_ref()?.spec.as_ref()?.lease_transitions
}

/// Whether the manager leads with synced caches: leader gauge 1 and /readyz 200.
async fn manager_leads(manager: &Component) -> bool {
    let Some(metrics) = scrape(manager).await else {
        return false;
    };
    let ready = http_get(&probe_address(manager), "/readyz")
        .await
        .is_ok_and(|(code, _)| code == 200);
    ready && metrics.value("ocm_score_addon_leader", &[]) == Some(1.0)
}

/// Failed hub writes plus failed source reads of an agent.
async fn failures(agent: &Component) -> f64 {
    let Some(metrics) = scrape(agent).await else {
        return 0.0;
    };
    metrics
        .value("ocm_score_agent_hub_writes_total", &[("result", "failed")])
        .unwrap_or_default()
        + metrics
            .value("ocm_score_agent_source_failures_total", &[("source", "cluster")])
            .unwrap_or_default()
}

/// Watch errors of an agent, nodes and pods together.
async fn watch_errors(agent: &Component) -> f64 {
    let Some(metrics) = scrape(agent).await else {
        return 0.0;
    };
    ["nodes", "pods"]
        .iter()
        .filter_map(|kind| metrics.value("ocm_score_agent_watch_errors_total", &[("kind", kind)]))
        .sum()
}

/// How many lines of a component's log carry `message`.
fn logged(component: &Component, message: &str) -> usize {
    std::fs::read_to_string(component.log_path())
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(message))
        .count()
}

#[cfg(test)]
mod pure {
    use super::*;
    use ocm_score_kube_double::{ApiServer, RequestMatch};

    #[tokio::test]
    async fn a_failed_lease_read_is_retried_never_no_lease() {
        let server = ApiServer::builder()
            .builtin_kinds()
            .object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": HUB_NAMESPACE}}))
            .object(json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                           "metadata": {"name": MANAGER_LEASE, "namespace": HUB_NAMESPACE},
                           "spec": {"holderIdentity": "manager-0"}}))
            .start()
            .await
            .expect("kube-double");
        // 500s: kube's client itself retries a 503.
        server
            .faults()
            .fail_next(2, RequestMatch::any().verb("get").resource("leases"), 500);
        let lease = manager_lease(&server.admin_client()).await;
        assert_eq!(holder(&lease).as_deref(), Some("manager-0"), "{lease:?}");
    }
}
