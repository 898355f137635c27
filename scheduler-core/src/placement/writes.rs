//! The writes that bring the placement's PlacementDecisions in line with the new decisions,
//! in upstream's order, with the events upstream records for them.
//!
//! For each generated decision: create it when absent; otherwise patch its status when the
//! decisions differ (and stop there: labels are fixed on a later sync); otherwise patch labels
//! and annotations when they differ. Then delete the placement's decisions that were not
//! generated. A create carries the status: a controller writing to a real API server must follow
//! it with a status write (the status subresource ignores status on create).

use super::events::{self, Event};
use super::snapshot::HubSnapshot;
use super::status::Status;
use ocm_score_api::{ClusterDecision, Placement, PlacementDecision, PlacementDecisionStatus};
use std::collections::BTreeMap;

#[derive(Clone, Debug, PartialEq)]
pub enum DecisionWrite {
    Create(Box<PlacementDecision>),
    /// Replace `status` (a JSON merge patch upstream).
    PatchStatus {
        name: String,
        status: PlacementDecisionStatus,
    },
    /// Set labels and annotations to these.
    PatchMetadata {
        name: String,
        labels: BTreeMap<String, String>,
        annotations: BTreeMap<String, String>,
    },
    Delete {
        name: String,
    },
}

impl DecisionWrite {
    /// The client verb, as the upstream unit tests name them.
    pub fn verb(&self) -> &'static str {
        match self {
            DecisionWrite::Create(_) => "create",
            DecisionWrite::PatchStatus { .. } | DecisionWrite::PatchMetadata { .. } => "patch",
            DecisionWrite::Delete { .. } => "delete",
        }
    }

    pub fn name(&self) -> &str {
        match self {
            DecisionWrite::Create(pd) => pd.metadata.name.as_deref().unwrap_or(""),
            DecisionWrite::PatchStatus { name, .. }
            | DecisionWrite::PatchMetadata { name, .. }
            | DecisionWrite::Delete { name } => name,
        }
    }
}

/// Semantic equality of decision lists, as Go compares the typed values: nil and empty lists
/// are equal, an absent score is the int32 zero, and unknown fields are ignored.
fn same_decisions(a: Option<&PlacementDecisionStatus>, b: Option<&PlacementDecisionStatus>) -> bool {
    let (a, b) = (decisions(a), decisions(b));
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_decision(x, y))
}

fn decisions(status: Option<&PlacementDecisionStatus>) -> &[ClusterDecision] {
    status.map_or(&[], |s| s.decisions.as_slice())
}

fn same_decision(a: &ClusterDecision, b: &ClusterDecision) -> bool {
    a.cluster_name == b.cluster_name && a.reason == b.reason && a.score.unwrap_or(0) == b.score.unwrap_or(0)
}

fn map_or_empty(m: Option<&BTreeMap<String, String>>) -> BTreeMap<String, String> {
    m.cloned().unwrap_or_default()
}

/// Plans the writes for one existing-vs-generated comparison and its events.
pub fn plan_one(
    placement: &Placement,
    generated: &PlacementDecision,
    existing: Option<&PlacementDecision>,
    score_note: &str,
    status: &Status,
    writes: &mut Vec<DecisionWrite>,
    events: &mut Vec<Event>,
) {
    let placement_name = placement.metadata.name.as_deref().unwrap_or("");
    let namespace = placement.metadata.namespace.as_deref().unwrap_or("");
    let name = generated.metadata.name.clone().unwrap_or_default();
    let Some(existing) = existing else {
        writes.push(DecisionWrite::Create(Box::new(generated.clone())));
        events.push(events::decision_created(&name, placement_name, namespace));
        return;
    };
    if !same_decisions(existing.status.as_ref(), generated.status.as_ref()) {
        writes.push(DecisionWrite::PatchStatus {
            name: name.clone(),
            status: generated.status.clone().unwrap_or_default(),
        });
        events.push(events::decision_updated(&name, placement_name, namespace, status));
        if !score_note.is_empty() {
            events.push(events::score_updated(&name, score_note));
        }
        return;
    }
    let labels = map_or_empty(generated.metadata.labels.as_ref());
    let annotations = map_or_empty(generated.metadata.annotations.as_ref());
    if map_or_empty(existing.metadata.labels.as_ref()) != labels
        || map_or_empty(existing.metadata.annotations.as_ref()) != annotations
    {
        writes.push(DecisionWrite::PatchMetadata {
            name,
            labels,
            annotations,
        });
    }
}

/// All writes for the placement: generated decisions in order, then deletions.
pub fn plan(
    snapshot: &HubSnapshot,
    placement: &Placement,
    generated: &[PlacementDecision],
    score_note: &str,
    status: &Status,
) -> (Vec<DecisionWrite>, Vec<Event>) {
    plan_with_note(snapshot, placement, generated, || score_note.to_string(), status)
}

/// [`plan`] with the ScoreUpdate note built only when a status patch carries it (a first
/// scheduling pass creates its decisions and has no use for it).
pub fn plan_with_note(
    snapshot: &HubSnapshot,
    placement: &Placement,
    generated: &[PlacementDecision],
    score_note: impl FnOnce() -> String,
    status: &Status,
) -> (Vec<DecisionWrite>, Vec<Event>) {
    let namespace = placement.metadata.namespace.as_deref().unwrap_or("");
    let placement_name = placement.metadata.name.as_deref().unwrap_or("");
    let existing = |pd: &PlacementDecision| {
        snapshot.decision_named(namespace, pd.metadata.name.as_deref().unwrap_or(""))
    };
    // The condition under which `plan_one` patches a status.
    let patches_status = generated
        .iter()
        .any(|pd| existing(pd).is_some_and(|e| !same_decisions(e.status.as_ref(), pd.status.as_ref())));
    let score_note = if patches_status {
        score_note()
    } else {
        String::new()
    };
    let mut writes = Vec::new();
    let mut events = Vec::new();
    for pd in generated {
        plan_one(
            placement,
            pd,
            existing(pd),
            &score_note,
            status,
            &mut writes,
            &mut events,
        );
    }
    for old in snapshot.decisions_of(namespace, placement_name) {
        let name = old.metadata.name.as_deref().unwrap_or("");
        if !generated.iter().any(|g| g.metadata.name.as_deref() == Some(name)) {
            writes.push(DecisionWrite::Delete {
                name: name.to_string(),
            });
            events.push(events::decision_deleted(name, placement_name, namespace));
        }
    }
    (writes, events)
}
