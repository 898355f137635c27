//! Make-before-break (docs/design/workload-failover.md §5): clusters the plan leaves stay in the
//! child beside the clusters
//! that replace them, until those are Healthy, a time limit passes, or a human releases them.
//!
//! One mechanism serves both causes: a cluster left because its workload Failed (by
//! `workloadHealth.purge`) and a cluster left by a voluntary move (`failback.overlap`).

use super::verdicts::WorkloadVerdicts;
use crate::instant::{ceil_second, of, time, timestamp};
use ocm_score_api::crd::tiered_placement::{RetainedCluster, WorkloadState};
use std::collections::BTreeSet;

/// Why the clusters leaving in this plan leave, and how long each kind is kept.
pub struct Leaving {
    /// A Failed cluster is kept this long (`None`: until released; `Some(0)`: not at all).
    /// `None` in the outer option: workload health is not configured.
    pub failed_grace: Option<Option<i128>>,
    /// This plan makes a voluntary move (failback, consolidation): kept for `overlap`.
    pub voluntary: bool,
    pub overlap: i128,
}

/// What a human released (the release annotation: cluster names, or `*`).
pub struct Released<'a> {
    pub all: bool,
    pub clusters: BTreeSet<&'a str>,
}

impl<'a> Released<'a> {
    pub fn parse(annotation: Option<&'a str>) -> Self {
        let clusters: BTreeSet<&str> = annotation
            .into_iter()
            .flat_map(|a| a.split(','))
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        Released {
            all: clusters.contains("*"),
            clusters,
        }
    }

    fn has(&self, cluster: &str) -> bool {
        self.all || self.clusters.contains(cluster)
    }
}

/// `RetainedCluster.reason` of a cluster kept because its workload Failed.
const WORKLOAD_FAILED: &str = "WorkloadFailed";

/// Until when a cluster whose workload Failed is kept under the current policy (`grace`: `None`
/// under `Never`): from its failure, `failedAt + grace`. Without a Failed verdict any more (the
/// failure was forgotten) the time already stored stands, or the grace starts now.
fn failed_until(
    verdicts: &WorkloadVerdicts,
    cluster: &str,
    grace: Option<i128>,
    stored: Option<i128>,
    now: i128,
) -> Option<i128> {
    let grace = grace?;
    let failed_at = verdicts
        .get(cluster)
        .filter(|v| v.entry.state == WorkloadState::Failed)
        .and_then(|v| v.entry.since.as_ref())
        .map(of);
    Some(match (failed_at, stored) {
        (Some(f), _) => ceil_second(f) + grace,
        (None, Some(u)) => u,
        (None, None) => ceil_second(now) + grace,
    })
}

pub struct Retention {
    /// Sorted by cluster.
    pub retained: Vec<RetainedCluster>,
    /// `(reason, message)` of each change, for Normal events.
    pub events: Vec<(&'static str, String)>,
    pub requeue_at: Option<i128>,
}

/// The retained clusters after this plan. `prior_chosen` and `chosen` are the plan's own
/// choices (sorted, retained clusters excluded); `known` says whether a cluster still belongs
/// to some tier (others are dropped: the child cannot select them).
#[allow(clippy::too_many_arguments)]
pub fn retain(
    prior: &[RetainedCluster],
    prior_chosen: &[String],
    chosen: &[String],
    verdicts: &WorkloadVerdicts,
    leaving: &Leaving,
    released: &Released<'_>,
    known: impl Fn(&str) -> bool,
    now: i128,
) -> Retention {
    let is_chosen = |c: &str| chosen.binary_search_by(|n| n.as_str().cmp(c)).is_ok();
    let was_chosen = |c: &str| prior_chosen.binary_search_by(|n| n.as_str().cmp(c)).is_ok();
    let judged = leaving.failed_grace.is_some();
    let mut out = Retention {
        retained: Vec::new(),
        events: Vec::new(),
        requeue_at: None,
    };
    let added: Vec<String> = chosen.iter().filter(|c| !was_chosen(c)).cloned().collect();
    for r in prior {
        let failed = r.reason == WORKLOAD_FAILED;
        // A failed cluster's time follows the current policy, whenever it was retained.
        let until = match leaving.failed_grace {
            Some(grace) if failed => failed_until(verdicts, &r.cluster, grace, r.until.as_ref().map(of), now),
            _ => r.until.as_ref().map(of),
        };
        // Its replacements still chosen must all be Healthy; a timed entry without workload
        // health to judge by waits for its time. When none is chosen any more (they failed or
        // left too), it awaits the clusters this plan adds, or, without any, its time.
        let mut awaiting: Vec<String> = r.awaiting.iter().filter(|c| is_chosen(c)).cloned().collect();
        let repointed = awaiting.is_empty() && !added.is_empty() && awaiting != r.awaiting;
        if awaiting.is_empty() {
            awaiting = if added.is_empty() {
                r.awaiting.clone()
            } else {
                added.clone()
            };
        }
        let replaced = awaiting.iter().any(|c| is_chosen(c));
        let waiting: Vec<&String> = awaiting
            .iter()
            .filter(|c| is_chosen(c) && verdicts.state(c) != WorkloadState::Healthy)
            .collect();
        let why = if is_chosen(&r.cluster) {
            Some("chosen again".to_string())
        } else if failed && !judged {
            Some("spec.workloadHealth was removed".to_string())
        } else if !known(&r.cluster) {
            Some("no longer in any tier".to_string())
        } else if released.has(&r.cluster) {
            Some(format!(
                "released by the {} annotation",
                ocm_score_api::crd::tiered_placement::RELEASE_ANNOTATION
            ))
        } else if until.is_some_and(|u| now >= u) {
            Some("its time ran out".to_string())
        } else if until.is_some() && judged && replaced && waiting.is_empty() {
            Some(format!(
                "the workload of its replacement {} is Healthy",
                awaiting.join(", ")
            ))
        } else {
            None
        };
        match why {
            Some(why) => out
                .events
                .push(("Released", format!("{} dropped: {why}", r.cluster))),
            None => {
                if let Some(u) = until {
                    out.requeue_at = Some(out.requeue_at.map_or(u, |q| q.min(u)));
                }
                if repointed {
                    out.events.push((
                        "Retained",
                        format!(
                            "{} now awaits {} (its replacement {} is no longer chosen)",
                            r.cluster,
                            awaiting.join(", "),
                            r.awaiting.join(", ")
                        ),
                    ));
                }
                out.retained.push(RetainedCluster {
                    until: until.map(time),
                    awaiting,
                    ..r.clone()
                });
            }
        }
    }
    if !added.is_empty() {
        for c in prior_chosen.iter().filter(|c| !is_chosen(c)) {
            if out.retained.iter().any(|r| &r.cluster == c) || !known(c) {
                continue;
            }
            let failed = verdicts.state(c) == WorkloadState::Failed;
            let (until, reason) = match leaving.failed_grace {
                Some(grace) if failed => {
                    if grace == Some(0) {
                        continue;
                    }
                    (failed_until(verdicts, c, grace, None, now), WORKLOAD_FAILED)
                }
                _ if leaving.voluntary && leaving.overlap > 0 => {
                    (Some(ceil_second(now) + leaving.overlap), "Overlap")
                }
                _ => continue,
            };
            if until.is_some_and(|u| now >= u) {
                continue;
            }
            if let Some(u) = until {
                out.requeue_at = Some(out.requeue_at.map_or(u, |q| q.min(u)));
            }
            out.events.push((
                "Retained",
                format!(
                    "{c} kept beside {} until {}",
                    added.join(", "),
                    until.map_or_else(
                        || format!(
                            "released (annotation {})",
                            ocm_score_api::crd::tiered_placement::RELEASE_ANNOTATION
                        ),
                        |u| format!("their workload is Healthy or {}", timestamp(u))
                    )
                ),
            ));
            out.retained.push(RetainedCluster {
                cluster: c.clone(),
                until: until.map(time),
                awaiting: added.clone(),
                reason: reason.to_string(),
            });
        }
    }
    out.retained.sort_by(|a, b| a.cluster.cmp(&b.cluster));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_annotation_lists_clusters_or_a_star() {
        let r = Released::parse(Some(" a-1, b-1 ,,"));
        assert!(r.has("a-1") && r.has("b-1") && !r.has("c-1"));
        assert!(Released::parse(Some("*")).has("anything"));
        assert!(!Released::parse(None).has("a-1"));
    }

    #[test]
    fn only_a_cluster_with_a_replacement_is_retained_and_immediately_keeps_none() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let verdicts = WorkloadVerdicts::default();
        let voluntary = Leaving {
            failed_grace: None,
            voluntary: true,
            overlap: 60_000_000_000,
        };
        let none = Released::parse(None);
        // b-1 left, a-1 added: retained for the overlap.
        let r = retain(
            &[],
            &names(&["b-1"]),
            &names(&["a-1"]),
            &verdicts,
            &voluntary,
            &none,
            |_| true,
            0,
        );
        assert_eq!(r.retained.len(), 1);
        assert_eq!(r.retained[0].awaiting, ["a-1"]);
        assert_eq!(r.requeue_at, Some(60_000_000_000));
        // Scale-in: nothing added, nothing retained.
        let r = retain(
            &[],
            &names(&["a-1", "b-1"]),
            &names(&["a-1"]),
            &verdicts,
            &voluntary,
            &none,
            |_| true,
            0,
        );
        assert!(r.retained.is_empty());
        // Not a voluntary move and no workload failure: dropped at once.
        let forced = Leaving {
            voluntary: false,
            ..voluntary
        };
        let r = retain(
            &[],
            &names(&["b-1"]),
            &names(&["a-1"]),
            &verdicts,
            &forced,
            &none,
            |_| true,
            0,
        );
        assert!(r.retained.is_empty());
    }
}
