//! TieredPlacements in a snapshot: the planner's view of each one (active tiers, per-tier
//! feasible and qualifying counts, predicted decisions and why).
//!
//! The TieredPlacement's own `status` is the planner's prior state; an object without status
//! gets the initial plan (no hold-down history), as a newly created one would.

use ocm_score_api::TieredPlacement;
use ocm_score_scheduler::placement::HubSnapshot;
use ocm_score_scheduler::tiering::{Plan, WorkIndex};
use serde_json::{Map, Value, json};
use std::fmt::Write as _;

pub fn key(tp: &TieredPlacement) -> String {
    format!(
        "{}/{}",
        tp.metadata.namespace.as_deref().unwrap_or(""),
        tp.metadata.name.as_deref().unwrap_or("")
    )
}

pub fn plan(tp: &TieredPlacement, snapshot: &HubSnapshot, now: jiff::Timestamp) -> Plan {
    ocm_score_scheduler::tiering::plan(tp, snapshot, &WorkIndex::default(), now)
}

/// One JSON object: `name`, `kind`, `activeTiers`, `decisions` (sorted) and the details.
pub fn json(tp: &TieredPlacement, plan: &Plan) -> Value {
    let status = &plan.status;
    let mut out = Map::new();
    out.insert("name".into(), json!(key(tp)));
    out.insert("kind".into(), json!("TieredPlacement"));
    out.insert("mode".into(), json!(tp.spec.mode));
    out.insert("activeTiers".into(), json!(status.active_tiers));
    out.insert("decisions".into(), json!(plan.predicted));
    let tiers: Vec<Value> = plan
        .tiers
        .iter()
        .zip(&status.tiers)
        .map(|(report, t)| {
            let excluded: Map<String, Value> = report
                .excluded
                .iter()
                .map(|(c, why)| (c.clone(), json!(why)))
                .collect();
            let mut tier = json!({
                "name": report.name,
                "state": t.state,
                "feasible": t.feasible,
                "qualifying": t.qualifying,
                "selected": report.selected,
                "excluded": excluded,
            });
            if let Some(at) = &t.failback_eligible_at {
                tier["failbackEligibleAt"] = json!(at);
            }
            tier
        })
        .collect();
    out.insert("tiers".into(), json!(tiers));
    out.insert(
        "transition".into(),
        match status.transitions.first().filter(|_| plan.transition.is_some()) {
            Some(t) => json!(t),
            None => Value::Null,
        },
    );
    let conditions: Map<String, Value> = status
        .conditions
        .iter()
        .map(|c| {
            (
                c.type_.clone(),
                json!({"status": c.status, "reason": c.reason, "message": c.message}),
            )
        })
        .collect();
    out.insert("conditions".into(), Value::Object(conditions));
    out.insert("requeueAt".into(), json!(plan.replan_at().map(|t| t.to_string())));
    out.insert(
        "child".into(),
        plan.child.as_ref().map_or(Value::Null, |c| json!(c.spec)),
    );
    Value::Object(out)
}

/// The table for people.
pub fn table(tp: &TieredPlacement, plan: &Plan) -> String {
    let status = &plan.status;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "TieredPlacement {} ({:?})  active tiers: [{}]",
        key(tp),
        tp.spec.mode,
        status.active_tiers.join(",")
    );
    let width = plan.tiers.iter().map(|t| t.name.len()).max().unwrap_or(4).max(4);
    let _ = writeln!(
        out,
        "  {:<width$}  {:<11}  {:>8}  {:>10}  {:>8}",
        "TIER", "STATE", "FEASIBLE", "QUALIFYING", "SELECTED"
    );
    for (report, t) in plan.tiers.iter().zip(&status.tiers) {
        let _ = writeln!(
            out,
            "  {:<width$}  {:<11}  {:>8}  {:>10}  {:>8}",
            report.name,
            format!("{:?}", t.state),
            t.feasible,
            t.qualifying,
            t.selected
        );
    }
    let _ = writeln!(out, "  decisions: [{}]", plan.predicted.join(", "));
    match (plan.transition, status.transitions.first()) {
        (Some(kind), Some(t)) => {
            let _ = writeln!(out, "  transition: {kind:?} ({}): {}", t.reason, t.message);
        }
        _ => {
            let _ = writeln!(out, "  transition: none");
        }
    }
    for c in status.conditions.iter().filter(|c| !c.message.is_empty()) {
        let _ = writeln!(out, "  {}={} ({}): {}", c.type_, c.status, c.reason, c.message);
    }
    for report in &plan.tiers {
        for (cluster, why) in &report.excluded {
            let _ = writeln!(out, "  {}/{cluster}: not qualifying: {why}", report.name);
        }
    }
    // Nothing tells a simulation of expiries: a score's validUntil is a time to look again.
    if let Some(at) = plan.replan_at() {
        let _ = writeln!(out, "  re-plan at: {at}");
    }
    out
}
