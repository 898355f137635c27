//! Workload health as an input of the choice (docs/design/workload-failover.md §3–4). It decides
//! which clusters a Failed workload excludes for this TieredPlacement and until when, and what
//! `status.workloadHealth` records of the verdicts.
//!
//! # Why exclusion outlasts the hold-down
//!
//! A Failed cluster is excluded for its tier's effective hold-down from the failure. Past that it
//! stays excluded while its work still reports unhealthy, and while no cluster's workload is
//! Healthy anywhere: a workload broken by its own config must not start a new round of moves
//! just because time passed. The verdicts themselves come from [`super::super::workload`].

use super::super::workload::WorkIndex;
use super::super::workload::verdicts::{self as workload_verdicts, WorkloadVerdicts};
use super::Requeue;
use super::health::HoldDown;
use super::prior::Members;
use crate::instant::{of, timestamp};
use crate::placement::snapshot::HubSnapshot;
use ocm_score_api::crd::tiered_placement::{
    RetainedCluster, TieredPlacementSpec, TieredPlacementStatus, WorkloadHealthStatus, WorkloadState,
};

/// Which clusters a workload failure excludes for this TieredPlacement, and until when.
#[derive(Default)]
pub(super) struct Exclusion {
    /// Per cluster id: `Some(until)` while excluded; `i128::MAX`: until there is evidence (its
    /// workload is still unhealthy, or no cluster's workload is Healthy). Empty without
    /// `spec.workloadHealth`.
    pub excluded: Vec<Option<i128>>,
    /// Failed clusters whose exclusion ended in this plan (sorted).
    pub expired: Vec<String>,
    pub requeue_at: Option<i128>,
}

/// What workload health is judged from.
pub(super) struct Input<'a> {
    pub spec: &'a TieredPlacementSpec,
    pub namespace: &'a str,
    pub works: &'a WorkIndex<'a>,
    pub snapshot: &'a HubSnapshot,
    pub members: &'a Members,
    pub prior: Option<&'a TieredPlacementStatus>,
    pub hold_down: HoldDown,
    pub now: i128,
}

pub(super) struct Judged {
    /// `None` without `spec.workloadHealth`.
    pub verdicts: Option<WorkloadVerdicts>,
    pub exclusion: Exclusion,
    /// Toleration deadlines and exclusion ends.
    pub requeue: Requeue,
}

/// The workload verdicts of the tier members and the clusters they exclude.
pub(super) fn judge(input: &Input<'_>) -> Judged {
    let Input {
        spec,
        namespace,
        works,
        snapshot,
        members,
        prior,
        hold_down,
        now,
    } = *input;
    let verdicts: Option<WorkloadVerdicts> = spec.workload_health.as_ref().map(|policy| {
        workload_verdicts::evaluate(
            policy,
            namespace,
            works,
            members.ids.iter().map(|id| snapshot.cluster_name(*id)),
            prior.and_then(|p| p.workload_health.as_ref()),
            now,
        )
    });
    let exclusion = verdicts.as_ref().map_or_else(Exclusion::default, |w| {
        exclusions(&Failures {
            verdicts: w,
            snapshot,
            tier_of: &members.tier_of,
            spec,
            prior,
            hold_down,
            now,
        })
    });
    let mut requeue = Requeue::after(now);
    if let Some(w) = &verdicts {
        requeue.at(w.requeue_at);
    }
    requeue.at(exclusion.requeue_at);
    Judged {
        verdicts,
        exclusion,
        requeue,
    }
}

/// What [`exclusions`] judges.
pub(super) struct Failures<'a> {
    pub verdicts: &'a WorkloadVerdicts,
    pub snapshot: &'a HubSnapshot,
    pub tier_of: &'a [Option<usize>],
    pub spec: &'a TieredPlacementSpec,
    /// Its tiers' penalties lengthen the exclusion.
    pub prior: Option<&'a TieredPlacementStatus>,
    pub hold_down: HoldDown,
    pub now: i128,
}

/// The clusters whose workload Failed, excluded as the module doc says.
pub(super) fn exclusions(input: &Failures<'_>) -> Exclusion {
    let Failures {
        verdicts: w,
        snapshot,
        tier_of,
        spec,
        prior,
        hold_down,
        now,
    } = *input;
    let mut out = Exclusion {
        excluded: vec![None; snapshot.cluster_count()],
        ..Exclusion::default()
    };
    let any_healthy = w.any_healthy();
    for v in w
        .clusters
        .iter()
        .filter(|v| v.entry.state == WorkloadState::Failed)
    {
        let failed_at = v.entry.since.as_ref().map_or(now, of);
        let id = snapshot.cluster_id(&v.entry.cluster);
        // The penalty as stored: relapses lengthen the exclusion as they lengthen hold-downs.
        let penalty = id
            .and_then(|id| tier_of[id.index()])
            .and_then(|t| prior?.tiers.iter().find(|s| s.name == spec.tiers[t].name))
            .map_or(0, |s| s.penalty.max(0));
        let end = failed_at + hold_down.effective(penalty);
        let until = if now < end {
            out.requeue_at = Some(out.requeue_at.map_or(end, |r: i128| r.min(end)));
            Some(end)
        } else if v.observed_unhealthy || !any_healthy {
            Some(i128::MAX)
        } else {
            None
        };
        match (until, id) {
            (Some(u), Some(id)) => out.excluded[id.index()] = Some(u),
            (Some(_), None) => {}
            (None, _) => out.expired.push(v.entry.cluster.clone()),
        }
    }
    out
}

/// Why `cluster` is excluded until `until`, for the tier report.
pub(super) fn reason(w: &WorkloadVerdicts, cluster: &str, until: i128) -> String {
    let Some(v) = w.get(cluster) else {
        return "workload Failed".into();
    };
    let at = v
        .entry
        .since
        .as_ref()
        .map_or_else(String::new, |t| format!(" at {}", t.0));
    let while_ = if until != i128::MAX {
        format!("excluded until {}", timestamp(until))
    } else if v.observed_unhealthy {
        "excluded while its workload stays unhealthy".to_string()
    } else {
        "excluded until some cluster's workload is Healthy".to_string()
    };
    format!("workload Failed{at} ({}); {while_}", v.entry.reason)
}

/// `status.workloadHealth`: the verdicts (a failure whose exclusion ended is replaced by what
/// its work reports now, or forgotten without a work) and the retained clusters.
pub(super) fn status(
    w: Option<&WorkloadVerdicts>,
    exclusion: &Exclusion,
    retained: Vec<RetainedCluster>,
) -> Option<WorkloadHealthStatus> {
    let clusters: Vec<_> = w
        .map(|w| {
            w.clusters
                .iter()
                .filter_map(|v| {
                    if exclusion.expired.binary_search(&v.entry.cluster).is_err() {
                        return Some(v.entry.clone());
                    }
                    v.forgotten.clone()
                })
                .collect()
        })
        .unwrap_or_default();
    (!clusters.is_empty() || !retained.is_empty()).then_some(WorkloadHealthStatus { clusters, retained })
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{snapshot, tier, verdict};
    use super::*;

    const S: i128 = 1_000_000_000;

    #[test]
    fn a_failed_cluster_stays_excluded_past_its_hold_down_until_some_workload_is_healthy() {
        let hub = snapshot(&["a-1", "a-2"]);
        let spec = TieredPlacementSpec {
            tiers: vec![tier("east")],
            ..TieredPlacementSpec::default()
        };
        let hold_down = HoldDown {
            base: 60 * S,
            max: 600 * S,
        };
        let failed = verdict("a-1", WorkloadState::Failed, Some(0));
        let judge_at = |others: WorkloadState, now: i128| {
            let verdicts = WorkloadVerdicts {
                clusters: vec![failed.clone(), verdict("a-2", others, Some(0))],
                requeue_at: None,
            };
            exclusions(&Failures {
                verdicts: &verdicts,
                snapshot: &hub,
                tier_of: &[Some(0), Some(0)],
                spec: &spec,
                prior: None,
                hold_down,
                now,
            })
        };
        let during = judge_at(WorkloadState::Unhealthy, 30 * S);
        assert_eq!(during.excluded, [Some(60 * S), None]);
        assert_eq!(during.requeue_at, Some(60 * S));
        let nowhere_healthy = judge_at(WorkloadState::Unhealthy, 60 * S);
        assert_eq!(nowhere_healthy.excluded, [Some(i128::MAX), None]);
        assert!(nowhere_healthy.expired.is_empty());
        let healthy_elsewhere = judge_at(WorkloadState::Healthy, 60 * S);
        assert_eq!(healthy_elsewhere.excluded, [None, None]);
        assert_eq!(healthy_elsewhere.expired, ["a-1"]);
    }
}
