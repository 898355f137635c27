//! `Schedule()`: filters, weights, prioritizers, weighted sum, sort, select, requeue time.

use super::error::PlacementError;
use super::filters::{FilterReason, predicate, taints};
use super::prioritizers::{self, ScoreContext, addon::AddOnFindings};
use super::rank;
use super::snapshot::{ClusterId, HubSnapshot};
use super::status::{Status, StatusCode};
use super::weights::{self, PrioritizerKind};
use k8s_openapi::jiff::Timestamp;
use ocm_score_api::Placement;

/// The clusters left after the filters so far, keyed like upstream's debug output
/// (`Predicate`, `Predicate,TaintToleration`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterRecord {
    pub name: String,
    pub clusters: Vec<ClusterId>,
}

/// One prioritizer that ran (its weight is not 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrioritizerResult {
    pub kind: PrioritizerKind,
    pub weight: i32,
    /// Index in `spec.prioritizerPolicy.configurations`, `None` for a default.
    pub configuration: Option<usize>,
    /// One entry per feasible cluster, in [`ScheduleResult::feasible`] order.
    pub scores: Vec<Option<i64>>,
    pub addon: Option<AddOnFindings>,
}

impl PrioritizerResult {
    pub fn name(&self) -> String {
        self.kind.to_string()
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleResult {
    /// One record per filter that completed, in pipeline order. The last record lists the
    /// clusters in final rank order once scoring completed, as upstream's debug output does.
    pub filter_records: Vec<FilterRecord>,
    /// Candidates the filters dropped, with the reason.
    pub rejected: Vec<(ClusterId, FilterReason)>,
    /// Whether every filter ran (false when a filter was misconfigured).
    pub filters_completed: bool,
    /// Clusters that passed every filter that ran, in candidate order.
    pub feasible: Vec<ClusterId>,
    /// Sorted by name by the time scheduling returns (upstream records them in map order).
    pub prioritizers: Vec<PrioritizerResult>,
    /// Weighted sum per feasible cluster (same order as `feasible`); empty when aborted.
    pub totals: Vec<i64>,
    /// Positions in `feasible`, best first: total descending, then name ascending.
    pub ranking: Vec<u32>,
    pub selected: Vec<ClusterId>,
    /// `numberOfClusters - selected` when `numberOfClusters` is set, else 0.
    pub unscheduled: i64,
    pub status: Status,
    /// Earliest toleration deadline among the existing decisions, in Unix nanoseconds.
    pub requeue_at_ns: Option<i128>,
    /// Whether scheduling stopped at a misconfiguration (no scores, no decisions).
    pub aborted: bool,
}

impl ScheduleResult {
    fn aborted(
        filter_records: Vec<FilterRecord>,
        rejected: Vec<(ClusterId, FilterReason)>,
        status: Status,
    ) -> Self {
        Self {
            filter_records,
            rejected,
            filters_completed: false,
            feasible: Vec::new(),
            prioritizers: Vec::new(),
            totals: Vec::new(),
            ranking: Vec::new(),
            selected: Vec::new(),
            unscheduled: 0,
            status,
            requeue_at_ns: None,
            aborted: true,
        }
    }

    /// Feasible clusters with their totals, best first.
    pub fn ranked(&self) -> impl ExactSizeIterator<Item = (ClusterId, i64)> + '_ {
        self.ranking
            .iter()
            .map(|&p| (self.feasible[p as usize], self.totals[p as usize]))
    }

    /// The total (the weighted sum the clusters are ranked by) of each of `clusters`, in their
    /// order, as a list of decisions shows beside each cluster; `None` for a cluster without one
    /// (not feasible, or scoring stopped at a misconfiguration).
    pub fn totals_of(&self, clusters: impl IntoIterator<Item = ClusterId>) -> Vec<Option<i64>> {
        let totals: std::collections::HashMap<ClusterId, i64> = self
            .feasible
            .iter()
            .copied()
            .zip(self.totals.iter().copied())
            .collect();
        clusters.into_iter().map(|id| totals.get(&id).copied()).collect()
    }
}

/// Which clusters (by id) appear in the placement's existing PlacementDecisions, and the
/// decision clusters in order (duplicates kept; names without a cluster skipped).
pub fn existing_decisions(snapshot: &HubSnapshot, placement: &Placement) -> (Vec<bool>, Vec<ClusterId>) {
    let namespace = placement.metadata.namespace.as_deref().unwrap_or("");
    let name = placement.metadata.name.as_deref().unwrap_or("");
    let clusters = snapshot.cluster_count();
    let mut flags = vec![false; clusters];
    let mut ids = Vec::new();
    for &i in snapshot.decision_indices_of(namespace, name) {
        for &slot in snapshot.decision_slots(i as usize) {
            if (slot as usize) < clusters {
                flags[slot as usize] = true;
                ids.push(ClusterId(slot));
            }
        }
    }
    (flags, ids)
}

/// Schedules `placement` over `candidates` (in the given order) at `now`.
pub fn schedule(
    snapshot: &HubSnapshot,
    placement: &Placement,
    candidates: &[ClusterId],
    now: Timestamp,
) -> Result<ScheduleResult, PlacementError> {
    let now_ns = now.as_nanosecond();
    let (in_decision, decision_clusters) = existing_decisions(snapshot, placement);
    let mut final_status = Status::success();
    let mut records = Vec::with_capacity(2);
    let mut rejected = Vec::new();

    // 1. Filters.
    let (out, status) = predicate::filter(snapshot, placement, candidates);
    if status.is_error() {
        return Ok(ScheduleResult::aborted(records, rejected, status));
    }
    rejected.extend(out.rejected);
    records.push(FilterRecord {
        name: predicate::NAME.to_string(),
        clusters: out.passed,
    });
    let (out, status) = taints::filter(snapshot, placement, &records[0].clusters, &in_decision, now_ns);
    if status.is_error() {
        return Ok(ScheduleResult::aborted(records, rejected, status));
    }
    rejected.extend(out.rejected);
    rejected.sort_by_key(|(id, _)| *id);
    let feasible = out.passed;
    // Its clusters are filled in rank order once scored, or with `feasible` on an abort.
    records.push(FilterRecord {
        name: format!("{},{}", predicate::NAME, taints::NAME),
        clusters: Vec::new(),
    });
    let abort_after_filters = |mut records: Vec<FilterRecord>, rejected, feasible: Vec<ClusterId>, status| {
        if let Some(last) = records.last_mut() {
            last.clusters.clone_from(&feasible);
        }
        let mut r = ScheduleResult::aborted(records, rejected, status);
        r.filters_completed = true;
        r.feasible = feasible;
        r
    };

    // 2. Weights and prioritizers.
    let weighted = match weights::resolve(placement) {
        Ok(w) => w,
        Err(status) => return Ok(abort_after_filters(records, rejected, feasible, status)),
    };
    let ctx = ScoreContext {
        snapshot,
        placement,
        feasible: &feasible,
        in_decision: &in_decision,
        now_ns,
    };
    let mut results: Vec<PrioritizerResult> = weighted
        .into_iter()
        .map(|w| {
            let scored = prioritizers::score(&w.kind, &ctx);
            (w, scored)
        })
        .map(|(w, scored)| {
            if scored.status.code == StatusCode::Warning {
                final_status = scored.status.clone();
            }
            PrioritizerResult {
                kind: w.kind,
                weight: w.weight,
                configuration: w.configuration,
                scores: scored.scores,
                addon: scored.addon,
            }
        })
        .collect();
    // Each name is built once, not once per comparison.
    results.sort_by_cached_key(|r| (r.name(), r.weight));

    // 3. Weighted sum (int64, weights promoted from int32). Upstream wraps on overflow, which
    // only weights or add-on scores far outside their CRD ranges can cause: refuse instead.
    let mut totals = vec![0i64; feasible.len()];
    for r in &results {
        let weight = i64::from(r.weight);
        for ((total, score), id) in totals.iter_mut().zip(&r.scores).zip(&feasible) {
            if let Some(s) = score {
                *total = s
                    .checked_mul(weight)
                    .and_then(|term| total.checked_add(term))
                    .ok_or_else(|| PlacementError::ScoreOverflow {
                        namespace: placement.metadata.namespace.clone().unwrap_or_default(),
                        name: placement.metadata.name.clone().unwrap_or_default(),
                        cluster: snapshot.cluster_name(*id).to_string(),
                    })?;
            }
        }
    }

    // 4. Sort: total descending, then name ascending (ids are in name order).
    let ranking = rank::rank(&feasible, &totals);
    if let Some(last) = records.last_mut() {
        last.clusters = ranking.iter().map(|&p| feasible[p as usize]).collect();
    }

    // 5. Select.
    let take = match placement.spec.number_of_clusters {
        None => feasible.len(),
        Some(n) if n < 0 => {
            return Err(PlacementError::NegativeNumberOfClusters {
                namespace: placement.metadata.namespace.clone().unwrap_or_default(),
                name: placement.metadata.name.clone().unwrap_or_default(),
                value: n,
            });
        }
        Some(n) => (n as usize).min(feasible.len()),
    };
    let selected: Vec<ClusterId> = ranking[..take].iter().map(|&p| feasible[p as usize]).collect();
    let unscheduled = placement
        .spec
        .number_of_clusters
        .map_or(0, |n| i64::from(n) - selected.len() as i64);

    // 6. Requeue when a toleration of an existing decision runs out.
    let requeue_at_ns = taints::requeue_time(snapshot, placement, &decision_clusters, now_ns);

    Ok(ScheduleResult {
        filter_records: records,
        rejected,
        filters_completed: true,
        feasible,
        prioritizers: results,
        totals,
        ranking,
        selected,
        unscheduled,
        status: final_status,
        requeue_at_ns,
        aborted: false,
    })
}
