//! What `simulate` prints: the conformance `expect` keys as JSON, or a ranked table for people.

use ocm_score_api::Placement;
use ocm_score_scheduler::placement::explain::{self, Verdict};
use ocm_score_scheduler::placement::{HubSnapshot, PlacementResult, SkipReason, SyncOutcome};
use serde_json::{Map, Value, json};
use std::fmt::Write as _;

/// The `expect` keys of the conformance format (FORMAT.md) for one scheduled placement.
pub fn expect_keys(
    snapshot: &HubSnapshot,
    placement: &Placement,
    result: &PlacementResult,
) -> Map<String, Value> {
    let schedule = &result.schedule;
    let name = |id| snapshot.cluster_name(id).to_string();
    let mut out = Map::new();
    let decisions: Vec<String> = result
        .decisions
        .iter()
        .flat_map(|pd| pd.status.iter().flat_map(|s| s.decisions.iter()))
        .map(|d| d.cluster_name.clone())
        .collect();
    out.insert("decisions".into(), json!(decisions));
    if placement.spec.number_of_clusters.is_some() && !schedule.aborted {
        out.insert("unscheduled".into(), json!(schedule.unscheduled));
    }
    let scores: Map<String, Value> = schedule
        .feasible
        .iter()
        .zip(&schedule.totals)
        .map(|(id, total)| (name(*id), json!(total)))
        .collect();
    out.insert("scores".into(), Value::Object(scores));
    let prioritizers: Vec<Value> = schedule
        .prioritizers
        .iter()
        .map(|p| {
            let scores: Map<String, Value> = schedule
                .feasible
                .iter()
                .zip(&p.scores)
                .filter_map(|(id, s)| s.map(|s| (name(*id), json!(s))))
                .collect();
            json!({"name": p.name(), "weight": p.weight, "scores": scores})
        })
        .collect();
    out.insert("prioritizers".into(), json!(prioritizers));
    if schedule.filters_completed {
        let mut filtered = schedule.feasible.clone();
        filtered.sort_unstable();
        out.insert(
            "filtered".into(),
            json!(filtered.into_iter().map(name).collect::<Vec<_>>()),
        );
    }
    out.insert("misconfigured".into(), json!(result.is_misconfigured()));
    if placement.spec.decision_strategy.is_some() {
        let groups: Vec<Value> = result
            .groups
            .iter()
            .map(|g| {
                json!({"name": g.name, "index": g.index, "clusters": g.clusters.iter().map(|id| name(*id)).collect::<Vec<_>>()})
            })
            .collect();
        out.insert("groups".into(), json!(groups));
    }
    out
}

/// Each decision's cluster, in the order of the PlacementDecisions, with its total (the score it
/// was ranked by; `None` if it has none). The engine keeps OCM v1.2's order whatever
/// `spec.sortBy` says (docs/simulate.md); the score is shown so the order can be judged.
pub fn decision_scores(snapshot: &HubSnapshot, result: &PlacementResult) -> Vec<(String, Option<i64>)> {
    let names: Vec<&str> = result
        .decisions
        .iter()
        .flat_map(|pd| pd.status.iter().flat_map(|s| s.decisions.iter()))
        .map(|d| d.cluster_name.as_str())
        .collect();
    let ids: Vec<_> = names.iter().map(|n| snapshot.cluster_id(n)).collect();
    // One total per known cluster, in order; a name the snapshot lacks has none.
    let mut totals = result
        .schedule
        .totals_of(ids.iter().flatten().copied())
        .into_iter();
    names
        .iter()
        .zip(ids)
        .map(|(name, id)| (name.to_string(), id.and_then(|_| totals.next().flatten())))
        .collect()
}

/// `[{clusterName, score}]`, as OCM api v1.3.0 writes `status.decisions[]` (no `score`: none).
pub fn decision_scores_json(scores: &[(String, Option<i64>)]) -> Value {
    Value::Array(
        scores
            .iter()
            .map(|(cluster, score)| match score {
                Some(score) => json!({"clusterName": cluster, "score": score}),
                None => json!({"clusterName": cluster}),
            })
            .collect(),
    )
}

/// Per-cluster explanations and warnings, for `--explain`.
pub fn explanation_json(snapshot: &HubSnapshot, placement: &Placement, result: &PlacementResult) -> Value {
    let clusters: Vec<Value> = explain::clusters(&result.candidates.clusters, &result.schedule)
        .into_iter()
        .map(|e| {
            let cluster = snapshot.cluster_name(e.cluster);
            match &e.verdict {
                Verdict::Feasible { rank, total, selected } => json!({
                    "cluster": cluster, "rank": rank, "total": total, "selected": selected,
                    "contributions": e.contributions.iter().map(|c| json!({
                        "prioritizer": c.prioritizer, "weight": c.weight, "score": c.score, "weighted": c.weighted,
                    })).collect::<Vec<_>>(),
                }),
                Verdict::Filtered(reason) => json!({
                    "cluster": cluster,
                    "filteredBy": explain::describe_filter(snapshot, placement, e.cluster, reason),
                }),
                Verdict::NotEvaluated => json!({"cluster": cluster, "notEvaluated": true}),
            }
        })
        .collect();
    let warnings: Vec<String> = result.warnings.iter().map(|w| w.describe(snapshot)).collect();
    json!({
        "clusters": clusters,
        "decisionScores": decision_scores_json(&decision_scores(snapshot, result)),
        "warnings": warnings,
        "conditions": [
            {"type": result.misconfigured.type_, "status": result.misconfigured.status,
             "reason": result.misconfigured.reason, "message": result.misconfigured.message},
            {"type": result.satisfied.type_, "status": result.satisfied.status,
             "reason": result.satisfied.reason, "message": result.satisfied.message},
        ],
        "requeueAfterSeconds": result.requeue_after.map(|d| d.as_secs_f64()),
    })
}

/// Why OCM would leave the placement alone.
pub fn skip_reason(reason: SkipReason) -> &'static str {
    match reason {
        SkipReason::Deleting => "placement is being deleted",
        SkipReason::SchedulingDisabled => "scheduling is disabled by annotation",
    }
}

/// A plain-text table, one row per candidate cluster.
pub fn table(
    snapshot: &HubSnapshot,
    placement: &Placement,
    outcome: &SyncOutcome,
    limit: Option<usize>,
) -> String {
    let key = format!(
        "{}/{}",
        placement.metadata.namespace.as_deref().unwrap_or(""),
        placement.metadata.name.as_deref().unwrap_or("")
    );
    let mut out = String::new();
    let result = match outcome {
        SyncOutcome::Skipped(reason) => {
            let _ = writeln!(out, "Placement {key}: skipped ({})", skip_reason(*reason));
            return out;
        }
        SyncOutcome::Scheduled(r) => r,
    };
    let schedule = &result.schedule;
    let _ = writeln!(out, "Placement {key}");
    let _ = writeln!(
        out,
        "  cluster sets: [{}]  candidates: {}  feasible: {}  selected: {}{}",
        result.candidates.eligible_sets.join(","),
        result.candidates.clusters.len(),
        schedule.feasible.len(),
        schedule.selected.len(),
        placement
            .spec
            .number_of_clusters
            .map_or(String::new(), |n| format!(" of {n} requested")),
    );
    for c in [&result.misconfigured, &result.satisfied] {
        let _ = writeln!(out, "  {}={} ({}): {}", c.type_, c.status, c.reason, c.message);
    }

    let mut header = vec!["RANK".to_string(), "CLUSTER".to_string(), "TOTAL".to_string()];
    header.extend(
        schedule
            .prioritizers
            .iter()
            .map(|p| format!("{} x{}", p.name(), p.weight)),
    );
    header.push("SELECTED".into());
    header.push("FILTERED BY".into());
    let mut rows: Vec<Vec<String>> = Vec::new();
    for e in explain::clusters(&result.candidates.clusters, schedule) {
        let cluster = snapshot.cluster_name(e.cluster).to_string();
        let dashes = || vec!["-".to_string(); schedule.prioritizers.len()];
        let row = match &e.verdict {
            Verdict::Feasible {
                rank,
                total,
                selected,
            } => {
                let mut row = vec![rank.to_string(), cluster, total.to_string()];
                row.extend(
                    e.contributions
                        .iter()
                        .map(|c| c.score.map_or("-".into(), |s| s.to_string())),
                );
                row.push(if *selected { "yes".into() } else { "no".into() });
                row.push(String::new());
                row
            }
            Verdict::Filtered(reason) => {
                let mut row = vec!["-".into(), cluster, "-".into()];
                row.extend(dashes());
                row.push("no".into());
                row.push(explain::describe_filter(snapshot, placement, e.cluster, reason));
                row
            }
            Verdict::NotEvaluated => {
                let mut row = vec!["-".into(), cluster, "-".into()];
                row.extend(dashes());
                row.push("no".into());
                row.push("(not evaluated: misconfigured)".into());
                row
            }
        };
        rows.push(row);
    }
    let shown = limit.unwrap_or(rows.len()).min(rows.len());
    let mut widths: Vec<usize> = header.iter().map(String::len).collect();
    for row in &rows[..shown] {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.len());
        }
    }
    // Rank, total and the prioritizer scores are numbers: right-aligned.
    let numeric = |i: usize| i == 0 || (2..3 + schedule.prioritizers.len()).contains(&i);
    let last = header.len() - 1;
    let line = |cells: &[String]| {
        let mut s = String::from(" ");
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            s.push(' ');
            if i == last {
                s.push_str(cell);
            } else if numeric(i) {
                let _ = write!(s, "{cell:>w$}");
            } else {
                let _ = write!(s, "{cell:<w$}");
            }
        }
        s.trim_end().to_string()
    };
    let _ = writeln!(out, "{}", line(&header));
    for row in &rows[..shown] {
        let _ = writeln!(out, "{}", line(row));
    }
    if shown < rows.len() {
        let _ = writeln!(
            out,
            "  ... {} more cluster(s) (raise --limit)",
            rows.len() - shown
        );
    }
    if !result.groups.is_empty() && placement.spec.decision_strategy.is_some() {
        let _ = writeln!(out, "  decision groups:");
        for g in &result.groups {
            let names: Vec<&str> = g.clusters.iter().map(|id| snapshot.cluster_name(*id)).collect();
            let names = if names.is_empty() {
                "(no clusters)".to_string()
            } else {
                names.join(", ")
            };
            let _ = writeln!(out, "    [{}] {:?}: {names}", g.index, g.name);
        }
    }
    let decisions: Vec<String> = decision_scores(snapshot, result)
        .into_iter()
        .map(|(cluster, score)| match score {
            Some(score) => format!("{cluster} (score {score})"),
            None => format!("{cluster} (no score)"),
        })
        .collect();
    let _ = writeln!(
        out,
        "  decisions: {}",
        if decisions.is_empty() {
            "(none)".to_string()
        } else {
            decisions.join(", ")
        }
    );
    let pd_names: Vec<&str> = result
        .decisions
        .iter()
        .filter_map(|d| d.metadata.name.as_deref())
        .collect();
    let _ = writeln!(out, "  placement decisions: {}", pd_names.join(", "));
    if let Some(after) = result.requeue_after {
        let _ = writeln!(out, "  requeue after: {after:#}");
    }
    for w in &result.warnings {
        let _ = writeln!(out, "  warning: {}", w.describe(snapshot));
    }
    let status = result.effective_status();
    if status.code != ocm_score_scheduler::placement::StatusCode::Success {
        let _ = writeln!(
            out,
            "  status: {} {}: {}",
            status.code, status.plugin, status.message
        );
    }
    out
}
