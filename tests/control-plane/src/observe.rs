//! Our processes on the control plane seen from outside, as an operator sees them: their `/metrics`,
//! the operating system's figures of a process (`/proc`), and the scores they publish on the hub.
//! Shared by the fault and soak tests.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use kube::api::ListParams;
use serde_json::Value;

use super::addon::dynamic;
use super::process::Component;
use crate::support::{Exposition, http_get};

/// The probe server address a component was started with (`--metrics-bind-address`).
pub fn probe_address(component: &Component) -> String {
    component
        .args()
        .iter()
        .find_map(|a| a.strip_prefix("--metrics-bind-address="))
        .unwrap_or_else(|| panic!("{} has no --metrics-bind-address", component.name()))
        .to_owned()
}

/// The component's `/metrics`, if it answers 200 with a parseable exposition.
pub async fn scrape(component: &Component) -> Option<Exposition> {
    let (code, body) = http_get(&probe_address(component), "/metrics").await.ok()?;
    (code == 200).then(|| Exposition::parse(&body).ok()).flatten()
}

/// What the operating system says of a running process.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcessFigures {
    /// Resident set size.
    pub rss_bytes: u64,
    pub threads: u64,
    /// Open file descriptors, sockets included.
    pub open_fds: u64,
    /// Open sockets (TCP connections, listeners).
    pub sockets: u64,
}

/// Reads `/proc/<pid>`; `None` when the process is gone (or this is not Linux).
pub fn process_figures(pid: u32) -> Option<ProcessFigures> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| -> Option<u64> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    };
    let mut open_fds = 0;
    let mut sockets = 0;
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.flatten() {
        open_fds += 1;
        if std::fs::read_link(entry.path())
            .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"))
        {
            sockets += 1;
        }
    }
    Some(ProcessFigures {
        rss_bytes: field("VmRSS:")? * 1024,
        threads: field("Threads:")?,
        open_fds,
        sockets,
    })
}

/// Reads every published score once a second while a test runs, recording any that breaks the
/// contract: a value outside -100..100, no `validUntil`, or one further ahead than the validity.
pub struct ScoreSampler {
    task: tokio::task::JoinHandle<()>,
    seen: Arc<Mutex<Sampled>>,
}

#[derive(Default, Clone, Debug)]
pub struct Sampled {
    pub samples: usize,
    /// Reads that failed (a server down).
    pub failures: usize,
    pub violations: Vec<String>,
}

impl ScoreSampler {
    /// Samples the hub's AddOnPlacementScores; a `validUntil` may lie at most `validity` (and a
    /// two-second allowance for clocks and rounding) ahead of the moment it is read.
    pub fn start(hub: kube::Client, validity: Duration) -> Self {
        let seen = Arc::new(Mutex::new(Sampled::default()));
        let task = tokio::spawn({
            let seen = seen.clone();
            async move {
                let ahead_at_most =
                    SignedDuration::try_from(validity + Duration::from_secs(2)).unwrap_or_default();
                loop {
                    let listed = match dynamic(
                        &hub,
                        "cluster.open-cluster-management.io",
                        "v1alpha1",
                        "AddOnPlacementScore",
                        None,
                    )
                    .await
                    {
                        Ok(api) => api.list(&ListParams::default()).await.ok(),
                        Err(_) => None,
                    };
                    let now = Timestamp::now();
                    let mut found = Vec::new();
                    for score in listed.iter().flat_map(|l| &l.items) {
                        let what = format!(
                            "{}/{} at {now}",
                            score.metadata.namespace.clone().unwrap_or_default(),
                            score.metadata.name.clone().unwrap_or_default()
                        );
                        found.extend(contract_violations(&score.data, now, ahead_at_most, &what));
                    }
                    if let Ok(mut seen) = seen.lock() {
                        seen.samples += 1;
                        seen.failures += usize::from(listed.is_none());
                        seen.violations.extend(found);
                    }
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            }
        });
        ScoreSampler { task, seen }
    }

    /// What was seen so far.
    pub fn sampled(&self) -> Sampled {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }

    pub fn stop(self) -> Sampled {
        self.task.abort();
        self.sampled()
    }
}

/// How an AddOnPlacementScore read at `now` breaks the contract, if it does.
fn contract_violations(
    score: &Value,
    now: Timestamp,
    ahead_at_most: SignedDuration,
    what: &str,
) -> Vec<String> {
    let mut found = Vec::new();
    for s in score
        .pointer("/status/scores")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        if !s["value"].as_i64().is_some_and(|v| (-100..=100).contains(&v)) {
            found.push(format!("{what}: score {s} out of range"));
        }
    }
    let valid: Option<Timestamp> = score
        .pointer("/status/validUntil")
        .and_then(Value::as_str)
        .and_then(|v| v.parse().ok());
    match valid {
        None => found.push(format!("{what}: no validUntil")),
        Some(v) if now.checked_add(ahead_at_most).is_ok_and(|limit| v > limit) => found.push(format!(
            "{what}: validUntil {v} further ahead than {ahead_at_most:?}"
        )),
        Some(_) => {}
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_score_out_of_range_or_without_a_near_valid_until_is_named() {
        let now: Timestamp = "2026-11-25T00:00:00Z".parse().expect("time");
        let ahead = SignedDuration::from_secs(60);
        let good = json!({"status": {"scores": [{"name": "a", "value": -100}, {"name": "b", "value": 100}],
            "validUntil": "2026-11-25T00:01:00Z"}});
        assert!(contract_violations(&good, now, ahead, "x").is_empty());
        let bad = json!({"status": {"scores": [{"name": "a", "value": 101}], "validUntil": "2026-11-25T00:01:01Z"}});
        let found = contract_violations(&bad, now, ahead, "x");
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(
            found[0].contains("out of range") && found[1].contains("further ahead"),
            "{found:?}"
        );
        let none = json!({"status": {"scores": []}});
        assert_eq!(contract_violations(&none, now, ahead, "x"), ["x: no validUntil"]);
    }

    #[test]
    fn this_process_has_figures() {
        let me = process_figures(std::process::id()).expect("/proc/self");
        assert!(me.rss_bytes > 0 && me.threads >= 1 && me.open_fds >= 3, "{me:?}");
        assert_eq!(process_figures(u32::MAX), None);
    }
}
