//! Per-cluster workload verdicts with their clocks (docs/design/workload-failover.md §3): Unknown,
//! Healthy, Unhealthy
//! since T, Failed after `tolerationSeconds`.
//!
//! The clocks live in `status.workloadHealth.clusters`, as the capacity verdicts' live in
//! `status.capacity`, so a new leader continues every toleration exactly.

use super::index::WorkIndex;
use super::observe::{Observation, observe};
use crate::instant::{ceil_second, dur, of, time, timestamp};
use ocm_score_api::crd::tiered_placement::{
    ClusterWorkloadHealth, WorkloadHealthPolicy, WorkloadHealthStatus, WorkloadState,
};
use std::collections::BTreeMap;

/// One cluster's verdict and what the plan needs besides the status entry.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterVerdict {
    pub entry: ClusterWorkloadHealth,
    /// A work of this TieredPlacement exists on the cluster.
    pub has_work: bool,
    /// Its work is judged unhealthy right now (so a Failed cluster stays excluded whatever the
    /// hold-down says).
    pub observed_unhealthy: bool,
    /// Its work is judged Healthy right now (a Failed cluster recovering stays Failed through
    /// its hold-down, but is evidence that the workload can run).
    pub observed_healthy: bool,
    /// Became Failed in this evaluation.
    pub newly_failed: bool,
    /// A Failed cluster: the entry its current observation gives once the failure is forgotten
    /// (`None`: no work, nothing to remember).
    pub forgotten: Option<ClusterWorkloadHealth>,
}

/// Appended to a Failed cluster's reason while its work reports Healthy again.
pub const RECOVERED: &str = "; workload Healthy again: ";

/// The reason a cluster failed for, without a recovery note.
fn failure_reason(reason: &str) -> &str {
    reason.split(RECOVERED).next().unwrap_or(reason)
}

/// The verdicts of every cluster with a work or a remembered verdict, sorted by cluster.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WorkloadVerdicts {
    pub clusters: Vec<ClusterVerdict>,
    /// The next toleration deadline.
    pub requeue_at: Option<i128>,
}

impl WorkloadVerdicts {
    pub fn get(&self, cluster: &str) -> Option<&ClusterVerdict> {
        self.clusters
            .binary_search_by(|v| v.entry.cluster.as_str().cmp(cluster))
            .ok()
            .map(|i| &self.clusters[i])
    }

    pub fn state(&self, cluster: &str) -> WorkloadState {
        self.get(cluster)
            .map_or(WorkloadState::Unknown, |v| v.entry.state)
    }

    /// Whether some cluster's workload is Healthy now (a Failed one reporting Healthy again
    /// included): the evidence that the workload can run at all, without which no failed
    /// cluster becomes eligible again (workload-failover.md §4).
    pub fn any_healthy(&self) -> bool {
        self.clusters
            .iter()
            .any(|v| v.entry.state == WorkloadState::Healthy || v.observed_healthy)
    }
}

fn seconds(s: i128) -> String {
    format!("{} s", s / 1_000_000_000)
}

/// Evaluates the works `index` holds for `policy` against the prior verdicts. `clusters`: the
/// tier members (where a selector looks for works).
pub fn evaluate<'s>(
    policy: &WorkloadHealthPolicy,
    namespace: &str,
    index: &'s WorkIndex<'_>,
    clusters: impl Iterator<Item = &'s str>,
    prior: Option<&WorkloadHealthStatus>,
    now: i128,
) -> WorkloadVerdicts {
    let toleration = dur(policy.toleration());
    // Per cluster: the worst observation of its works, with that work's apply time.
    let mut observed: BTreeMap<&str, (Observation, Option<i128>)> = BTreeMap::new();
    for (cluster, work) in index.works_of(policy, namespace, clusters) {
        let o = (observe(work, policy), Observation::applied_at(work));
        let merged = match observed.remove(cluster) {
            Some(before) if !o.0.is_worse_than(&before.0) => before,
            _ => o,
        };
        observed.insert(cluster, merged);
    }
    let prior_entries: &[ClusterWorkloadHealth] = prior.map_or(&[], |p| p.clusters.as_slice());
    let prior_of = |cluster: &str| {
        prior_entries
            .binary_search_by(|e| e.cluster.as_str().cmp(cluster))
            .ok()
            .map(|i| &prior_entries[i])
    };
    let mut names: Vec<&str> = observed.keys().copied().collect();
    names.extend(prior_entries.iter().map(|e| e.cluster.as_str()));
    names.sort_unstable();
    names.dedup();
    let mut out = WorkloadVerdicts::default();
    let mut requeue = |t: i128| {
        if t > now {
            out.requeue_at = Some(out.requeue_at.map_or(t, |r: i128| r.min(t)));
        }
    };
    let mut clusters_out = Vec::with_capacity(names.len());
    for name in names {
        let before = prior_of(name);
        let was = before.map_or(WorkloadState::Unknown, |b| b.state);
        let since_before = before.and_then(|b| b.since.as_ref()).map(of);
        let was_healthy = before.is_some_and(|b| b.was_healthy);
        let now_s = ceil_second(now);
        let keep_since = |state: WorkloadState| {
            if was == state {
                since_before.unwrap_or(now_s)
            } else {
                now_s
            }
        };
        let failed_before = was == WorkloadState::Failed;
        let entry = |state, since: i128, reason: String, was_healthy: bool| ClusterWorkloadHealth {
            cluster: name.to_string(),
            state,
            since: Some(time(since)),
            reason,
            was_healthy,
        };
        // A failure the workload has not recovered from stays (sticky, like a failed cluster),
        // with the reason it failed for: rewriting it each plan would rewrite the status.
        let still_failed = |_now_says: String| {
            let since = since_before.unwrap_or(now_s);
            let reason = before.map_or("", |b| failure_reason(&b.reason)).to_string();
            entry(WorkloadState::Failed, since, reason, was_healthy)
        };
        let mut observed_unhealthy = false;
        let mut newly_failed = false;
        // Unhealthy from `start`: Failed once it lasted the toleration.
        let mut unhealthy = |start: i128, why: String, requeue: &mut dyn FnMut(i128)| {
            observed_unhealthy = true;
            if failed_before {
                return still_failed(why);
            }
            let failed_at = start + toleration;
            if now >= failed_at {
                newly_failed = true;
                let lasted = now_s.max(failed_at) - start;
                entry(
                    WorkloadState::Failed,
                    ceil_second(failed_at),
                    format!("{why} for {}", seconds(lasted)),
                    was_healthy,
                )
            } else {
                requeue(failed_at);
                entry(
                    WorkloadState::Unhealthy,
                    start,
                    format!("{why}; fails at {}", timestamp(failed_at)),
                    was_healthy,
                )
            }
        };
        let observation = observed.remove(name);
        let has_work = observation.is_some();
        let observed_healthy = matches!(observation, Some((Observation::Healthy(_), _)));
        // What a Failed cluster's entry becomes when its exclusion ends: the observation as if
        // it had never failed (an unhealthy one never ends the exclusion).
        let forgotten = match (&observation, failed_before) {
            (Some((Observation::Healthy(why), _)), true) => {
                Some(entry(WorkloadState::Healthy, now_s, why.clone(), true))
            }
            (Some((Observation::Unknown(why), _)), true) => {
                Some(entry(WorkloadState::Unknown, now_s, why.clone(), was_healthy))
            }
            (Some((Observation::NoFeedback { why, .. }, _)), true) => Some(entry(
                WorkloadState::Unknown,
                now_s,
                format!("{why} yet"),
                was_healthy,
            )),
            _ => None,
        };
        let (observation, applied_at) = match observation {
            Some((o, at)) => (Some(o), at),
            None => (None, None),
        };
        let e = match observation {
            None if failed_before => Some(still_failed(before.map(|b| b.reason.clone()).unwrap_or_default())),
            // No work and nothing to remember.
            None => None,
            // Sticky (workload-failover.md §3): Failed until its exclusion ends, whatever it reports now; the
            // recovery is recorded in the reason (and counts as evidence, `any_healthy`).
            Some(Observation::Healthy(why)) if failed_before => {
                let mut e = still_failed(String::new());
                e.reason = format!("{}{RECOVERED}{why}", e.reason);
                Some(e)
            }
            Some(Observation::Healthy(why)) => Some(entry(
                WorkloadState::Healthy,
                keep_since(WorkloadState::Healthy),
                why,
                true,
            )),
            Some(Observation::Unhealthy(why)) => {
                let start = if was == WorkloadState::Unhealthy {
                    since_before.unwrap_or(now_s)
                } else if was_healthy {
                    now_s
                } else {
                    // Never healthy here: an image that cannot start counts from the apply.
                    applied_at.unwrap_or(now_s)
                };
                Some(unhealthy(start, why, &mut requeue))
            }
            Some(Observation::NoFeedback { applied_at, why }) => {
                // Applied for the toleration without feedback: unhealthy from then, so a
                // misconfigured delivery is visible instead of silently "not judged".
                let visible_at = ceil_second(applied_at + toleration);
                if now >= visible_at {
                    let start = if was == WorkloadState::Unhealthy {
                        since_before.unwrap_or(visible_at)
                    } else {
                        visible_at
                    };
                    Some(unhealthy(
                        start,
                        format!("{why}: is feedbackRules (WellKnownStatus or JSONPaths) set on the work?"),
                        &mut requeue,
                    ))
                } else if failed_before {
                    Some(still_failed(before.map(|b| b.reason.clone()).unwrap_or_default()))
                } else {
                    requeue(visible_at);
                    Some(entry(
                        WorkloadState::Unknown,
                        keep_since(WorkloadState::Unknown),
                        format!("{why} yet"),
                        was_healthy,
                    ))
                }
            }
            Some(Observation::Unknown(why)) if failed_before => Some(still_failed(why)),
            Some(Observation::Unknown(why)) => Some(entry(
                WorkloadState::Unknown,
                keep_since(WorkloadState::Unknown),
                why,
                was_healthy,
            )),
        };
        if let Some(entry) = e {
            clusters_out.push(ClusterVerdict {
                entry,
                has_work,
                observed_unhealthy,
                observed_healthy,
                newly_failed,
                forgotten,
            });
        }
    }
    out.clusters = clusters_out;
    out
}
