//! Explanations upstream does not give: why each candidate was dropped, what each prioritizer
//! contributed to its total, and warnings about data the scores silently defaulted on.

use super::candidates::Candidates;
use super::filters::{FilterReason, predicate};
use super::prioritizers::resource::Resource;
use super::schedule::ScheduleResult;
use super::snapshot::{ClusterId, HubSnapshot};
use super::weights::PrioritizerKind;
use k8s_openapi::jiff::Timestamp;
use ocm_score_api::Placement;
use std::fmt::Write as _;

/// Something the user should know that upstream keeps to itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Warning {
    /// A set listed in `spec.clusterSets` has no valid binding in the placement namespace.
    ClusterSetNotBound { cluster_set: String },
    /// A binding in the placement namespace names a ManagedClusterSet that does not exist.
    BindingWithoutClusterSet { binding: String },
    /// Upstream uses the binding *name* as the set name; `spec.clusterSet` differs from it.
    BindingNameMismatch { binding: String, cluster_set: String },
    /// Feasible clusters without the AddOnPlacementScore object; they score 0.
    AddOnScoreMissing {
        prioritizer: String,
        resource_name: String,
        clusters: Vec<ClusterId>,
    },
    /// AddOnPlacementScores that expired, with their `validUntil`; those clusters score 0 (and
    /// upstream reports a Warning).
    AddOnScoreExpired {
        prioritizer: String,
        clusters: Vec<(ClusterId, Timestamp)>,
    },
    /// The AddOnPlacementScore exists but has no item with the configured score name.
    AddOnScoreNameAbsent {
        prioritizer: String,
        score_name: String,
        clusters: Vec<ClusterId>,
    },
    /// Feasible clusters that do not report both allocatable and capacity for the resource;
    /// the resource prioritizer leaves them out (they count 0).
    ResourceNotReported {
        prioritizer: String,
        resource: &'static str,
        clusters: Vec<ClusterId>,
    },
    /// `numberOfClusters: 0` selects nothing although clusters matched, and upstream then
    /// reports `NoManagedClusterMatched`.
    ZeroClustersRequested,
}

/// Up to this many cluster names are spelled out in a warning.
const NAMES_SHOWN: usize = 5;

/// The first few items, then how many more there are.
fn short_list(items: impl ExactSizeIterator<Item = String>) -> String {
    let total = items.len();
    let mut s = items.take(NAMES_SHOWN).collect::<Vec<_>>().join(", ");
    if total > NAMES_SHOWN {
        let _ = write!(s, " and {} more", total - NAMES_SHOWN);
    }
    s
}

fn name_list(snapshot: &HubSnapshot, clusters: &[ClusterId]) -> String {
    short_list(clusters.iter().map(|id| snapshot.cluster_name(*id).to_string()))
}

impl Warning {
    pub fn describe(&self, snapshot: &HubSnapshot) -> String {
        match self {
            Warning::ClusterSetNotBound { cluster_set } => {
                format!(
                    "ManagedClusterSet {cluster_set:?} is listed in spec.clusterSets but not bound to the namespace"
                )
            }
            Warning::BindingWithoutClusterSet { binding } => {
                format!("ManagedClusterSetBinding {binding:?} names a ManagedClusterSet that does not exist")
            }
            Warning::BindingNameMismatch { binding, cluster_set } => format!(
                "ManagedClusterSetBinding {binding:?} has spec.clusterSet {cluster_set:?}; OCM uses the binding name instead"
            ),
            Warning::AddOnScoreMissing {
                prioritizer,
                resource_name,
                clusters,
            } => format!(
                "{prioritizer}: AddOnPlacementScore {resource_name:?} missing for {} cluster(s) ({}), scored 0",
                clusters.len(),
                name_list(snapshot, clusters)
            ),
            Warning::AddOnScoreExpired {
                prioritizer,
                clusters,
            } => format!(
                "{prioritizer}: AddOnPlacementScore expired for {} cluster(s) ({}), scored 0",
                clusters.len(),
                short_list(
                    clusters
                        .iter()
                        .map(|(id, until)| format!("{} at {until}", snapshot.cluster_name(*id)))
                )
            ),
            Warning::AddOnScoreNameAbsent {
                prioritizer,
                score_name,
                clusters,
            } => format!(
                "{prioritizer}: score name {score_name:?} not present for {} cluster(s) ({}), scored 0",
                clusters.len(),
                name_list(snapshot, clusters)
            ),
            Warning::ResourceNotReported {
                prioritizer,
                resource,
                clusters,
            } => format!(
                "{prioritizer}: {} cluster(s) ({}) do not report both allocatable and capacity {resource}, left out (0)",
                clusters.len(),
                name_list(snapshot, clusters)
            ),
            Warning::ZeroClustersRequested => {
                "numberOfClusters is 0: matching clusters exist but none is selected, and OCM reports NoManagedClusterMatched"
                    .to_string()
            }
        }
    }
}

pub fn warnings(
    snapshot: &HubSnapshot,
    placement: &Placement,
    candidates: &Candidates,
    schedule: &ScheduleResult,
) -> Vec<Warning> {
    let mut out = Vec::new();
    let namespace = placement.metadata.namespace.as_deref().unwrap_or("");
    for set in &placement.spec.cluster_sets {
        if !candidates.valid_bindings.contains(set) {
            out.push(Warning::ClusterSetNotBound {
                cluster_set: set.clone(),
            });
        }
    }
    for binding in snapshot
        .bindings()
        .iter()
        .filter(|b| b.metadata.namespace.as_deref() == Some(namespace))
    {
        let name = binding.metadata.name.clone().unwrap_or_default();
        if snapshot.cluster_set(&name).is_none() {
            out.push(Warning::BindingWithoutClusterSet {
                binding: name.clone(),
            });
        }
        if !binding.spec.cluster_set.is_empty() && binding.spec.cluster_set != name {
            out.push(Warning::BindingNameMismatch {
                binding: name,
                cluster_set: binding.spec.cluster_set.clone(),
            });
        }
    }
    for p in &schedule.prioritizers {
        match (&p.kind, &p.addon) {
            (
                PrioritizerKind::AddOn {
                    resource_name,
                    score_name,
                },
                Some(findings),
            ) => {
                if !findings.missing.is_empty() {
                    out.push(Warning::AddOnScoreMissing {
                        prioritizer: p.name(),
                        resource_name: resource_name.clone(),
                        clusters: findings.missing.clone(),
                    });
                }
                if !findings.expired.is_empty() {
                    out.push(Warning::AddOnScoreExpired {
                        prioritizer: p.name(),
                        clusters: findings.expired.clone(),
                    });
                }
                if !findings.score_name_absent.is_empty() {
                    out.push(Warning::AddOnScoreNameAbsent {
                        prioritizer: p.name(),
                        score_name: score_name.clone(),
                        clusters: findings.score_name_absent.clone(),
                    });
                }
            }
            (kind, _) => {
                let Some(resource) = Resource::of(kind) else {
                    continue;
                };
                let clusters: Vec<ClusterId> = schedule
                    .feasible
                    .iter()
                    .zip(&p.scores)
                    .filter(|(_, s)| s.is_none())
                    .map(|(id, _)| *id)
                    .collect();
                if !clusters.is_empty() {
                    out.push(Warning::ResourceNotReported {
                        prioritizer: p.name(),
                        resource: resource.key(),
                        clusters,
                    });
                }
            }
        }
    }
    if placement.spec.number_of_clusters == Some(0) && !schedule.feasible.is_empty() {
        out.push(Warning::ZeroClustersRequested);
    }
    out
}

/// What one prioritizer added to a cluster's total.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contribution {
    pub prioritizer: String,
    pub weight: i32,
    /// `None` when the prioritizer has no entry for the cluster (counts 0).
    pub score: Option<i64>,
    pub weighted: i64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Dropped by a filter.
    Filtered(FilterReason),
    /// A filter was misconfigured before this cluster was judged.
    NotEvaluated,
    /// Passed the filters; `rank` counts from 1.
    Feasible { rank: usize, total: i64, selected: bool },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterExplanation {
    pub cluster: ClusterId,
    pub verdict: Verdict,
    pub contributions: Vec<Contribution>,
}

/// One explanation per candidate: feasible clusters in rank order, then the filtered ones by name.
pub fn clusters(candidates: &[ClusterId], schedule: &ScheduleResult) -> Vec<ClusterExplanation> {
    let mut out = Vec::with_capacity(candidates.len());
    for (rank, &pos) in schedule.ranking.iter().enumerate() {
        let pos = pos as usize;
        let cluster = schedule.feasible[pos];
        let contributions = schedule
            .prioritizers
            .iter()
            .map(|p| {
                let score = p.scores[pos];
                Contribution {
                    prioritizer: p.name(),
                    weight: p.weight,
                    score,
                    // Cannot overflow: scheduling refused totals beyond int64.
                    weighted: score.unwrap_or(0) * i64::from(p.weight),
                }
            })
            .collect();
        out.push(ClusterExplanation {
            cluster,
            verdict: Verdict::Feasible {
                rank: rank + 1,
                total: schedule.totals[pos],
                selected: rank < schedule.selected.len(),
            },
            contributions,
        });
    }
    if schedule.ranking.is_empty() {
        // Aborted after the filters: the feasible clusters were judged but not scored.
        for &cluster in &schedule.feasible {
            out.push(ClusterExplanation {
                cluster,
                verdict: Verdict::NotEvaluated,
                contributions: Vec::new(),
            });
        }
    }
    for (cluster, reason) in &schedule.rejected {
        out.push(ClusterExplanation {
            cluster: *cluster,
            verdict: Verdict::Filtered(reason.clone()),
            contributions: Vec::new(),
        });
    }
    let judged: std::collections::HashSet<ClusterId> = out.iter().map(|e| e.cluster).collect();
    for &cluster in candidates {
        if !judged.contains(&cluster) {
            out.push(ClusterExplanation {
                cluster,
                verdict: Verdict::NotEvaluated,
                contributions: Vec::new(),
            });
        }
    }
    out
}

/// A sentence saying why a filter dropped the cluster.
pub fn describe_filter(
    snapshot: &HubSnapshot,
    placement: &Placement,
    cluster: ClusterId,
    reason: &FilterReason,
) -> String {
    match reason {
        FilterReason::Predicate => {
            let misses = predicate::explain(snapshot, placement, cluster);
            let parts: Vec<String> = misses
                .iter()
                .enumerate()
                .filter_map(|(i, m)| m.as_ref().map(|m| format!("predicate[{i}]: {m}")))
                .collect();
            if parts.is_empty() {
                "no predicate matches".to_string()
            } else {
                parts.join("; ")
            }
        }
        FilterReason::Taint { taint, expired } => {
            let t = snapshot.cluster_taints(cluster).get(*taint);
            let what = t.map_or_else(String::new, |t| {
                format!("{}={}:{}", t.key, t.value.as_deref().unwrap_or(""), t.effect)
            });
            match expired {
                Some((toleration, at)) => {
                    format!("taint {what} no longer tolerated: toleration[{toleration}] expired at {at}")
                }
                None => format!("taint {what} not tolerated"),
            }
        }
    }
}
