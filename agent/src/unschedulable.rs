//! Accuracy of `fits.<shape>` seen in production: replicas of a shape that kube-scheduler leaves
//! `Unschedulable` while the agent still counts room for more (docs/fits-and-reservations.md,
//! "Watching the count's accuracy").
//!
//! A replica of shape S is a pod labelled [`WORKLOAD_SHAPE_LABEL`]` = S`. It is judged once, at
//! the first computation at least [`SETTLE`] after this watch saw kube-scheduler's condition
//! `PodScheduled=False`, reason `Unschedulable`, on it (so the cluster source has counted it too,
//! as a pending pod). If that computation counts `fits(S) ≥ 1` — the agent says another replica
//! fits besides the pending ones — the pod is counted in `ocm_score_agent_fits_unschedulable_total
//! {shape}` and logged with kube-scheduler's message. A pod bound or deleted before its judgment is
//! not judged; a pod judged is not judged again while it exists.

use crate::accounting::ShapeFits;
use crate::metrics::Metrics;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::Api;
use kube::runtime::watcher::{self, Event};
use ocm_score_api::well_known::WORKLOAD_SHAPE_LABEL;
use ocm_score_shell::sync::lock;
use ocm_score_shell::watch::WatchRetryExt;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How long after seeing a pod Unschedulable its judgment waits: the cluster source's own watch
/// delivers the same pod within this, so the count judged includes it.
pub const SETTLE: Duration = Duration::from_secs(2);

/// A replica waiting for judgment.
#[derive(Clone, Debug, PartialEq)]
struct Waiting {
    shape: String,
    pod: String,
    /// kube-scheduler's PodScheduled message.
    reason: String,
    seen: Instant,
}

/// One replica the agent over-counted for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Overcounted {
    pub shape: String,
    /// `namespace/name`.
    pub pod: String,
    pub reason: String,
    /// The agent's count when judged.
    pub fits: u64,
}

/// The replicas seen Unschedulable, by pod UID, and those already judged.
#[derive(Debug, Default)]
pub struct UnschedulableReplicas {
    waiting: BTreeMap<String, Waiting>,
    judged: BTreeSet<String>,
}

/// kube-scheduler's message when it marked `pod` Unschedulable and left it unbound.
fn unschedulable_reason(pod: &Pod) -> Option<String> {
    let bound = pod
        .spec
        .as_ref()
        .and_then(|s| s.node_name.as_deref())
        .is_some_and(|n| !n.is_empty());
    if bound {
        return None;
    }
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

impl UnschedulableReplicas {
    /// Records a pod as it now is, seen at `now`.
    pub fn apply(&mut self, pod: &Pod, now: Instant) {
        let Some(uid) = pod.metadata.uid.clone() else {
            return;
        };
        let shape = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(WORKLOAD_SHAPE_LABEL))
            .cloned();
        match (shape, unschedulable_reason(pod)) {
            (Some(shape), Some(reason)) if !self.judged.contains(&uid) => {
                let name = format!(
                    "{}/{}",
                    pod.metadata.namespace.as_deref().unwrap_or_default(),
                    pod.metadata.name.as_deref().unwrap_or_default()
                );
                self.waiting
                    .entry(uid)
                    .and_modify(|w| w.reason.clone_from(&reason))
                    .or_insert(Waiting {
                        shape,
                        pod: name,
                        reason,
                        seen: now,
                    });
            }
            (Some(_), Some(_)) => {}
            _ => {
                self.waiting.remove(&uid);
            }
        }
    }

    /// Forgets a deleted pod.
    pub fn delete(&mut self, pod: &Pod) {
        if let Some(uid) = &pod.metadata.uid {
            self.waiting.remove(uid);
            self.judged.remove(uid);
        }
    }

    /// Forgets every pod not in `uids` (after a re-list).
    pub fn retain(&mut self, uids: &BTreeSet<String>) {
        self.waiting.retain(|uid, _| uids.contains(uid));
        self.judged.retain(|uid| uids.contains(uid));
    }

    /// Judges the replicas seen at least [`SETTLE`] before `computed_at` against the counts of that
    /// computation. Replicas of a shape not counted are judged without a verdict.
    pub fn judge(&mut self, fits: &[ShapeFits], computed_at: Instant) -> Vec<Overcounted> {
        let due: Vec<String> = self
            .waiting
            .iter()
            .filter(|(_, w)| w.seen + SETTLE <= computed_at)
            .map(|(uid, _)| uid.clone())
            .collect();
        let mut over = Vec::new();
        for uid in due {
            let Some(w) = self.waiting.remove(&uid) else {
                continue;
            };
            self.judged.insert(uid);
            if let Some(f) = fits.iter().find(|f| f.shape == w.shape)
                && f.replicas >= 1
            {
                over.push(Overcounted {
                    shape: w.shape,
                    pod: w.pod,
                    reason: w.reason,
                    fits: f.replicas,
                });
            }
        }
        over
    }
}

/// The replicas of every shape on the managed cluster, watched (label selector
/// [`WORKLOAD_SHAPE_LABEL`]) into a shared [`UnschedulableReplicas`] until dropped.
#[derive(Clone, Debug, Default)]
pub struct ReplicaWatch {
    state: Arc<Mutex<UnschedulableReplicas>>,
}

impl ReplicaWatch {
    /// Starts watching; the task ends when the returned handle is aborted.
    pub fn start(client: Client) -> (ReplicaWatch, tokio::task::JoinHandle<()>) {
        let watch = ReplicaWatch::default();
        let state = watch.state.clone();
        let task = tokio::spawn(async move {
            let pods: Api<Pod> = Api::all(client);
            let config = watcher::Config::default().labels(WORKLOAD_SHAPE_LABEL);
            let mut events = watcher::watcher(pods, config).watch_backoff().boxed();
            let mut listed = BTreeSet::new();
            loop {
                match events.try_next().await {
                    Ok(Some(event)) => {
                        let mut state = lock(&state);
                        match event {
                            Event::Apply(pod) => state.apply(&pod, Instant::now()),
                            Event::Delete(pod) => state.delete(&pod),
                            Event::Init => listed.clear(),
                            Event::InitApply(pod) => {
                                listed.extend(pod.metadata.uid.clone());
                                state.apply(&pod, Instant::now());
                            }
                            Event::InitDone => state.retain(&listed),
                        }
                    }
                    Ok(None) => break,
                    // Retried with backoff by the stream; the judgment waits.
                    Err(e) => tracing::warn!(error = %e, "watching the replicas of WorkloadShapes"),
                }
            }
        });
        (watch, task)
    }

    /// Judges the waiting replicas against a computation's counts ([`UnschedulableReplicas::judge`]),
    /// counting and logging each over-count.
    pub fn judge(&self, fits: &[ShapeFits], computed_at: Instant, metrics: &Metrics) {
        let over = lock(&self.state).judge(fits, computed_at);
        for o in over {
            metrics.fits_unschedulable(&o.shape);
            tracing::warn!(
                shape = %o.shape,
                pod = %o.pod,
                fits = o.fits,
                reason = %o.reason,
                "a replica of the shape is Unschedulable while fits counts room for more"
            );
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(uid: &str, shape: Option<&str>, node: Option<&str>, unschedulable: bool) -> Pod {
        let mut labels = json!({});
        if let Some(shape) = shape {
            labels[WORKLOAD_SHAPE_LABEL] = json!(shape);
        }
        let conditions = if unschedulable {
            json!([{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                    "message": "0/3 nodes are available: 3 Insufficient cpu."}])
        } else {
            json!([])
        };
        serde_json::from_value(json!({
            "metadata": {"name": format!("p-{uid}"), "namespace": "ns", "uid": uid, "labels": labels},
            "spec": {"containers": [], "nodeName": node},
            "status": {"conditions": conditions},
        }))
        .unwrap()
    }

    fn fits(shape: &str, replicas: u64) -> ShapeFits {
        ShapeFits {
            shape: shape.into(),
            scale: 1,
            replicas,
            value: 0,
        }
    }

    #[test]
    fn an_unschedulable_replica_is_judged_once_after_the_settle_time() {
        let t0 = Instant::now();
        let mut state = UnschedulableReplicas::default();
        state.apply(&pod("a", Some("big"), None, true), t0);
        assert_eq!(
            state.judge(&[fits("big", 3)], t0 + SETTLE / 2),
            vec![],
            "too soon"
        );
        let over = state.judge(&[fits("big", 3)], t0 + SETTLE);
        assert_eq!(
            over,
            vec![Overcounted {
                shape: "big".into(),
                pod: "ns/p-a".into(),
                reason: "0/3 nodes are available: 3 Insufficient cpu.".into(),
                fits: 3
            }]
        );
        // Seen again (a status update): judged already.
        state.apply(&pod("a", Some("big"), None, true), t0 + SETTLE);
        assert_eq!(state.judge(&[fits("big", 3)], t0 + SETTLE * 3), vec![]);
    }

    #[test]
    fn no_verdict_when_the_count_agrees_or_the_pod_is_bound_gone_or_unlabelled() {
        let t0 = Instant::now();
        let later = t0 + SETTLE * 2;
        let mut state = UnschedulableReplicas::default();
        state.apply(&pod("zero", Some("big"), None, true), t0);
        state.apply(&pod("bound", Some("big"), None, true), t0);
        state.apply(&pod("bound", Some("big"), Some("n1"), false), t0);
        state.apply(&pod("gone", Some("big"), None, true), t0);
        state.delete(&pod("gone", Some("big"), None, true));
        state.apply(&pod("plain", None, None, true), t0);
        state.apply(&pod("waiting", Some("big"), None, false), t0);
        state.apply(&pod("unknown", Some("other"), None, true), t0);
        assert_eq!(state.judge(&[fits("big", 0)], later), vec![]);
        assert_eq!(
            state.judge(&[fits("big", 5), fits("other", 5)], later),
            vec![],
            "all judged"
        );
    }

    #[test]
    fn a_relist_forgets_pods_no_longer_there() {
        let t0 = Instant::now();
        let mut state = UnschedulableReplicas::default();
        state.apply(&pod("a", Some("big"), None, true), t0);
        state.apply(&pod("b", Some("big"), None, true), t0);
        state.retain(&BTreeSet::from(["b".to_owned()]));
        let over = state.judge(&[fits("big", 1)], t0 + SETTLE);
        assert_eq!(over.len(), 1);
        assert_eq!(over[0].pod, "ns/p-b");
    }
}
