//! The answer in the JSON shape of OCM's placement debug endpoint (`/debug/placements/`), so tools
//! written for OCM's endpoint read ours:
//!
//! - `placement`: the placement scheduled, with only name, namespace, labels and annotations of
//!   its metadata and no status (OCM's newer endpoint);
//! - `filteredPipelineResults`: the clusters left after each filter, keyed by the pipeline so far
//!   (`Predicate`, `Predicate,TaintToleration`), the last in rank order. OCM v1.2 spelled the key
//!   `filteredPiplieResults`; both are written so tools of either release find it;
//! - `prioritizeResults`: each prioritizer that ran, its weight and its score per cluster;
//! - `aggregatedScores`: the weighted sum per feasible cluster, highest first, then by name;
//! - `error`: why the request failed (then nothing else is set).
//!
//! Three keys are ours, where OCM's endpoint leaves a user guessing: `decisions` (the clusters the
//! placement would be given now, in order), `decisionScores` (the same clusters in the same order,
//! each `{clusterName, score}` with its total, as OCM api v1.3.0 writes a decision's score) and
//! `status` (the scheduling outcome: `Success`, `Warning` with expired scores, `Misconfigured`
//! with the field at fault). OCM's endpoint drops that outcome, so a misconfigured placement looks
//! like one that matched nothing.

use ocm_score_api::Placement;
use ocm_score_scheduler::placement::{HubSnapshot, ScheduleResult};
use serde::Serialize;
use serde::ser::SerializeMap;
use serde_json::Value;
use std::collections::BTreeMap;

/// One filter's survivors.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FilterResult {
    pub name: String,
    pub filtered_clusters: Vec<String>,
}

/// One prioritizer's weight and scores (clusters it did not score are absent, as in OCM's map).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PrioritizerResult {
    pub name: String,
    pub weight: i32,
    pub scores: BTreeMap<String, i64>,
}

/// A feasible cluster's weighted sum.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterScore {
    pub cluster_name: String,
    pub score: i64,
}

/// The scheduling outcome (our key).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Outcome {
    pub code: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub plugin: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

/// The whole answer; empty parts are left out, as OCM's `omitempty` does.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DebugAnswer {
    pub placement: Option<Value>,
    pub filter_results: Vec<FilterResult>,
    pub prioritize_results: Vec<PrioritizerResult>,
    pub aggregated_scores: Vec<ClusterScore>,
    pub decisions: Option<Vec<String>>,
    /// `decisions` with each cluster's total (a cluster without one is left out, which only a
    /// misconfigured placement, which has no decisions, could cause).
    pub decision_scores: Option<Vec<ClusterScore>>,
    pub status: Option<Outcome>,
    pub error: String,
}

impl DebugAnswer {
    /// The answer to a request that failed.
    pub fn failed(error: impl Into<String>) -> Self {
        DebugAnswer {
            error: error.into(),
            ..DebugAnswer::default()
        }
    }

    /// The answer for `placement` scheduled on `snapshot`.
    pub fn scheduled(snapshot: &HubSnapshot, placement: &Placement, result: &ScheduleResult) -> Self {
        let name = |id| snapshot.cluster_name(id).to_owned();
        let filter_results = result
            .filter_records
            .iter()
            .map(|record| FilterResult {
                name: record.name.clone(),
                filtered_clusters: record.clusters.iter().copied().map(name).collect(),
            })
            .collect();
        let prioritize_results = result
            .prioritizers
            .iter()
            .map(|p| PrioritizerResult {
                name: p.name(),
                weight: p.weight,
                scores: result
                    .feasible
                    .iter()
                    .zip(&p.scores)
                    .filter_map(|(&id, score)| score.map(|s| (name(id), s)))
                    .collect(),
            })
            .collect();
        let aggregated_scores = aggregated(
            result
                .feasible
                .iter()
                .zip(&result.totals)
                .map(|(&id, &total)| (name(id), total)),
        );
        let decision_scores = result
            .selected
            .iter()
            .zip(result.totals_of(result.selected.iter().copied()))
            .filter_map(|(&id, total)| {
                total.map(|score| ClusterScore {
                    cluster_name: name(id),
                    score,
                })
            })
            .collect();
        DebugAnswer {
            placement: Some(placement_as_shown(placement)),
            filter_results,
            prioritize_results,
            aggregated_scores,
            decisions: Some(result.selected.iter().copied().map(name).collect()),
            decision_scores: Some(decision_scores),
            status: Some(Outcome {
                code: result.status.code.to_string(),
                plugin: result.status.plugin.clone(),
                message: result.status.message.clone(),
            }),
            error: String::new(),
        }
    }
}

/// The weighted sums, highest first, ties by cluster name.
pub fn aggregated(totals: impl Iterator<Item = (String, i64)>) -> Vec<ClusterScore> {
    let mut scores: Vec<ClusterScore> = totals
        .map(|(cluster_name, score)| ClusterScore { cluster_name, score })
        .collect();
    scores.sort_by(|a, b| {
        b.score
            .cmp(&a.score)
            .then_with(|| a.cluster_name.cmp(&b.cluster_name))
    });
    scores
}

/// The placement as OCM's endpoint echoes it: the spec, and of the metadata only name,
/// namespace, labels and annotations.
fn placement_as_shown(placement: &Placement) -> Value {
    let mut shown = placement.clone();
    let meta = &placement.metadata;
    shown.metadata = ocm_score_api::ObjectMeta {
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        labels: meta.labels.clone(),
        annotations: meta.annotations.clone(),
        ..Default::default()
    };
    shown.status = None;
    // A typed Placement always serializes; `Null` would only hide a bug in its derive.
    serde_json::to_value(&shown).unwrap_or(Value::Null)
}

impl Serialize for DebugAnswer {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(placement) = &self.placement {
            map.serialize_entry("placement", placement)?;
        }
        if !self.filter_results.is_empty() {
            map.serialize_entry("filteredPipelineResults", &self.filter_results)?;
            map.serialize_entry("filteredPiplieResults", &self.filter_results)?;
        }
        if !self.prioritize_results.is_empty() {
            map.serialize_entry("prioritizeResults", &self.prioritize_results)?;
        }
        if !self.aggregated_scores.is_empty() {
            map.serialize_entry("aggregatedScores", &self.aggregated_scores)?;
        }
        if let Some(decisions) = &self.decisions {
            map.serialize_entry("decisions", decisions)?;
        }
        if let Some(scores) = &self.decision_scores {
            map.serialize_entry("decisionScores", scores)?;
        }
        if let Some(status) = &self.status {
            map.serialize_entry("status", status)?;
        }
        if !self.error.is_empty() {
            map.serialize_entry("error", &self.error)?;
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn aggregated_scores_sort_by_score_then_name() {
        let got = aggregated(
            [("b", 10), ("a", 10), ("c", 50), ("d", -5)]
                .into_iter()
                .map(|(n, s)| (n.to_owned(), s)),
        );
        let order: Vec<(&str, i64)> = got.iter().map(|c| (c.cluster_name.as_str(), c.score)).collect();
        assert_eq!(order, [("c", 50), ("a", 10), ("b", 10), ("d", -5)]);
    }

    #[test]
    fn empty_parts_are_left_out_and_both_filter_spellings_written() {
        assert_eq!(
            serde_json::to_value(DebugAnswer::failed("boom")).expect("serializes"),
            json!({"error": "boom"})
        );
        let answer = DebugAnswer {
            filter_results: vec![FilterResult {
                name: "Predicate".into(),
                filtered_clusters: vec!["c1".into()],
            }],
            ..DebugAnswer::default()
        };
        let v = serde_json::to_value(answer).expect("serializes");
        assert_eq!(v["filteredPipelineResults"], v["filteredPiplieResults"]);
        assert_eq!(
            v["filteredPipelineResults"],
            json!([{"name": "Predicate", "filteredClusters": ["c1"]}])
        );
        assert!(
            v.get("error").is_none() && v.get("aggregatedScores").is_none(),
            "{v}"
        );
    }
}
