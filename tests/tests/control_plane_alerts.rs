//! The shipped alert rules (`charts/ocm-score/files/alerts.yaml`) evaluated by a real Prometheus
//! that scrapes the real binaries on the real control plane, each alert brought about by a real
//! cause rather than by series the test writes (`tests/monitoring/alerts_test.yaml` does that, with
//! promtool):
//! - the agent's hub RBAC removed (our add-on manager stopped first, or it would put it back at
//!   once): its writes fail, `OcmScoreAgentScoresExpiring` fires, then its scores' `validUntil`
//!   passes and `OcmScoreAgentScoresStale` fires; the manager started again restores the RBAC, the
//!   agent renews, and the stale alert resolves;
//! - the agent crashed and its Lease gone: OCM's klusterlet marks the ManagedClusterAddOn not
//!   Available, our manager's `ocm_score_addon_agent_available` goes 0 and
//!   `OcmScoreAgentUnavailable` fires.
//!
//! The rules are the shipped file with every `for:` shortened and nothing else changed (checked),
//! so what fires here is what ships.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, DeleteParams};
use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::{
    ADDON, INSTALL_NAMESPACE, add_nodes, install_with_timing_and_start_manager, kubectl, score,
    score_valid_until, start_agent, wait_agent_installed,
};
use ocm_score_control_plane::process::Component;
use ocm_score_tests::support::{TempDir, eventually};
use ocm_score_tests::thanos_scorer::{Prometheus, require_prometheus};
use serde_norway::Value;

/// Patience for one convergence on a loaded 2-core machine.
const WAIT: Duration = Duration::from_secs(180);
/// The one managed cluster (the hub itself, with its klusterlet).
const CLUSTER: &str = "cluster1";
/// The agent's refresh, and its scores' validity: short, so that they expire within the test. The
/// validity must exceed refresh × (1 + jitter) + the API and hub timeouts (10 s and 20 s by default),
/// as the agent's contract says.
const REFRESH: Duration = Duration::from_secs(5);
const VALIDITY: Duration = Duration::from_secs(40);
/// What every `for:` of the shipped rules becomes.
const SHORT_FOR: &str = "5s";
const ALERTS_FILE: &str = "charts/ocm-score/files/alerts.yaml";

const STALE: &str = "OcmScoreAgentScoresStale";
const EXPIRING: &str = "OcmScoreAgentScoresExpiring";
const UNAVAILABLE: &str = "OcmScoreAgentUnavailable";

/// The shipped rule file with every `for:` set to [`SHORT_FOR`]. Fails unless that is the only
/// difference, and each one is a shortening.
fn shortened_rules(shipped: &str) -> String {
    let original: Value = serde_norway::from_str(shipped).expect("the shipped rules parse");
    let mut shortened = original.clone();
    let mut changed = 0;
    for_each_rule(&mut shortened, |rule| {
        if let Some(old) = rule.get("for") {
            let old = old.as_str().expect("`for` is a string").to_owned();
            assert!(
                prometheus_duration(&old) > prometheus_duration(SHORT_FOR),
                "for: {old} is already no longer than {SHORT_FOR}"
            );
            rule.insert("for".into(), SHORT_FOR.into());
            changed += 1;
        }
    });
    assert!(changed > 0, "no rule of {ALERTS_FILE} has a `for`");
    let without_for = |rules: &Value| {
        let mut rules = rules.clone();
        for_each_rule(&mut rules, |rule| {
            rule.remove("for");
        });
        rules
    };
    assert_eq!(
        without_for(&original),
        without_for(&shortened),
        "only `for` may change"
    );
    serde_norway::to_string(&shortened).expect("the rules serialize")
}

fn for_each_rule(rules: &mut Value, mut each: impl FnMut(&mut serde_norway::Mapping)) {
    let groups = rules
        .get_mut("groups")
        .and_then(Value::as_sequence_mut)
        .expect("groups");
    for group in groups {
        let rules = group
            .get_mut("rules")
            .and_then(Value::as_sequence_mut)
            .expect("rules");
        for rule in rules {
            each(rule.as_mapping_mut().expect("a rule is a mapping"));
        }
    }
}

/// A Prometheus duration of one unit (`30s`, `5m`, `1h`), as the rules write them.
fn prometheus_duration(text: &str) -> Duration {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
    let unit = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        other => panic!("{text}: unit {other} not handled"),
    };
    Duration::from_secs(number * unit)
}

/// The `host:port` a component serves `/metrics` on: its `--metrics-bind-address`.
fn metrics_address(component: &Component) -> String {
    component
        .args()
        .iter()
        .find_map(|a| a.strip_prefix("--metrics-bind-address="))
        .unwrap_or_else(|| panic!("{} has no --metrics-bind-address", component.name()))
        .to_owned()
}

/// The states (`pending`, `firing`) of the alerts named `name`, or `None` while Prometheus does
/// not answer (the wait retries).
async fn states(prometheus: &Prometheus, name: &str) -> Option<Vec<String>> {
    let alerts = prometheus.alerts().await.ok()?;
    Some(
        alerts
            .into_iter()
            .filter(|(labels, _)| labels.get("alertname").map(String::as_str) == Some(name))
            .map(|(_, state)| state)
            .collect(),
    )
}

/// Waits until `name` fires; returns how long that took.
async fn wait_firing(prometheus: &Prometheus, name: &str, context: impl Fn() -> String) -> Duration {
    let start = Instant::now();
    eventually(&format!("{name} firing"), WAIT, &context, || async {
        let states = states(prometheus, name).await?;
        states.iter().any(|s| s == "firing").then_some(())
    })
    .await;
    start.elapsed()
}

/// The last lines of a log file, or why it could not be read.
fn tail(path: &Path) -> String {
    match std::fs::read_to_string(path) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(20)..].join("\n")
        }
        Err(e) => format!("reading {}: {e}", path.display()),
    }
}

fn run(kubeconfig: &Path, args: &[&str]) -> String {
    kubectl(kubeconfig, args).unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    skip_prometheus,
    ignore = "OCM_SCORE_SKIP_PROMETHEUS=1: needs a real Prometheus"
)]
async fn shipped_alerts_fire_on_real_causes_in_a_real_prometheus() {
    require_prometheus();
    // The rules first: a transform that changes more than `for` fails before anything starts.
    let shipped = std::fs::read_to_string(ocm_score_control_plane::addon::workspace_dir().join(ALERTS_FILE))
        .expect("reading the shipped rules");
    let rules_text = shortened_rules(&shipped);
    let cp = ControlPlane::builder()
        .clusters(1)
        .start_with_progress(&|l| eprintln!("{l}"))
        .await
        .unwrap_or_else(|e| panic!("the control plane did not start: {e}"));
    // Timed from the control plane's readiness, its own start added: not the wait for the machine
    // lock.
    let started = Instant::now();
    let took = || cp.start_seconds() + started.elapsed().as_secs_f64();
    let hub = cp.hub_client().await.expect("hub client");
    let hub_kc = cp.hub_kubeconfig();
    let dir = TempDir::new("alerts");

    // The add-on installed with short timings for the agents, our manager and the agent running.
    let (mut manager, refresh_arg) =
        install_with_timing_and_start_manager(&cp, REFRESH, VALIDITY, dir.path())
            .await
            .expect("the add-on manager starts");
    wait_agent_installed(&cp, CLUSTER, Some(&refresh_arg), WAIT, || manager.tail()).await;
    let managed = cp.cluster_client(CLUSTER).await.expect("managed client");
    add_nodes(&managed, CLUSTER, 1).await.expect("nodes");
    let mut agent = start_agent(&cp, CLUSTER, dir.path())
        .await
        .expect("the agent starts");
    // Read by path: the test stops and starts both while the closure lives.
    let (agent_log, manager_log) = (agent.log_path().to_owned(), manager.log_path().to_owned());
    let logs = || {
        format!(
            "--- agent:\n{}\n--- manager:\n{}",
            tail(&agent_log),
            tail(&manager_log)
        )
    };

    // Prometheus scraping both every second, evaluating the shipped rules every second.
    let rules = dir.path().join("alerts.yaml");
    std::fs::write(&rules, &rules_text).expect("writing the rules");
    let config = format!(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
         rule_files:\n  - {}\n\
         scrape_configs:\n  \
           - job_name: agent\n    static_configs:\n      - targets: ['{}']\n  \
           - job_name: addon-manager\n    static_configs:\n      - targets: ['{}']\n",
        rules.display(),
        metrics_address(&agent),
        metrics_address(&manager),
    );
    let prometheus = Prometheus::start_with_config(&config).await;
    let with_prometheus = |logs: String| format!("{logs}\n--- prometheus:\n{}", prometheus.log());

    // Healthy first: scores published and valid, the add-on Available, and none of the three alerts
    // even pending.
    eventually(
        "scores published and the add-on Available, as Prometheus sees them",
        WAIT,
        || with_prometheus(logs()),
        || async {
            score(&hub, CLUSTER, "cpuClusterAvailable").await?;
            let available = prometheus
                .query(&format!(
                    "ocm_score_addon_agent_available{{cluster=\"{CLUSTER}\"}} == 1"
                ))
                .await
                .ok()?;
            let valid = prometheus
                .query("ocm_score_agent_valid_until_timestamp_seconds > time()")
                .await
                .ok()?;
            (!available.is_empty() && !valid.is_empty()).then_some(())
        },
    )
    .await;
    // An alert raised while the add-on came up (the manager exports the add-on as unavailable until
    // the agent's Lease is seen) resolves at the next evaluation.
    eventually(
        "none of the three alerts pending or firing while healthy",
        WAIT,
        || with_prometheus(logs()),
        || async {
            let alerts = prometheus.alerts().await.ok()?;
            let ours: Vec<_> = alerts
                .iter()
                .filter(|(labels, _)| {
                    [STALE, EXPIRING, UNAVAILABLE]
                        .contains(&labels.get("alertname").map_or("", String::as_str))
                })
                .collect();
            ours.is_empty().then_some(())
        },
    )
    .await;
    eprintln!("healthy {:.0} s after the control plane started", took());

    // The agent's hub RBAC removed, with our manager stopped (it owns that RoleBinding and would put
    // it back at once): every write of the agent is refused.
    manager.terminate();
    manager.wait_or_kill(Duration::from_secs(10));
    run(
        &hub_kc,
        &[
            "delete",
            "rolebinding",
            &format!("open-cluster-management-{ADDON}-agent"),
            "-n",
            CLUSTER,
        ],
    );
    let expiring = wait_firing(&prometheus, EXPIRING, || with_prometheus(logs())).await;
    let stale = wait_firing(&prometheus, STALE, || with_prometheus(logs())).await;
    eprintln!(
        "RBAC removed: {EXPIRING} firing after {:.0} s, {STALE} after {:.0} s",
        expiring.as_secs_f64(),
        stale.as_secs_f64()
    );
    // The hub agrees: the score's validUntil has passed.
    let valid_until: jiff::Timestamp = score_valid_until(&hub, CLUSTER)
        .await
        .expect("the score's validUntil")
        .parse()
        .expect("validUntil is a timestamp");
    assert!(
        valid_until < jiff::Timestamp::now(),
        "{STALE} fired while the hub's score is valid until {valid_until}"
    );

    // Our manager back: it restores the RoleBinding, the agent renews its scores, the alert resolves.
    manager.restart().expect("the manager starts again");
    let restored = Instant::now();
    eventually(
        &format!("{STALE} resolved"),
        WAIT,
        || with_prometheus(logs()),
        || async { states(&prometheus, STALE).await?.is_empty().then_some(()) },
    )
    .await;
    eprintln!(
        "RBAC restored: {STALE} resolved after {:.0} s",
        restored.elapsed().as_secs_f64()
    );

    // The agent crashes and its Lease is gone (as with its namespace emptied): at its next pass over
    // the add-on (every 30 s) the klusterlet reports Available Unknown, which our manager exports as
    // unavailable. (A Lease left to lapse takes OCM's fixed five-minute grace instead, to Available
    // False: control_plane_addon waits that out.)
    agent.kill().expect("the agent was running");
    let leases: Api<Lease> = Api::namespaced(managed.clone(), INSTALL_NAMESPACE);
    leases
        .delete(ADDON, &DeleteParams::default())
        .await
        .expect("deleting the agent's Lease");
    let unavailable = wait_firing(&prometheus, UNAVAILABLE, || {
        with_prometheus(format!(
            "{}\n--- klusterlet:\n{}",
            logs(),
            cp.log_tail(&format!("{CLUSTER}-klusterlet"), 20)
        ))
    })
    .await;
    eprintln!(
        "agent gone: {UNAVAILABLE} firing after {:.0} s; {:.0} s since the control plane started",
        unavailable.as_secs_f64(),
        took()
    );
}
