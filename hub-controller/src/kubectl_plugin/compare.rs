//! OCM's standing PlacementDecisions beside what the engine decides from the hub as it is now:
//! which clusters differ, and what changed since OCM decided that could explain it.

use jiff::Timestamp;
use ocm_score_api::{ObjectMeta, Placement, PlacementDecision};
use ocm_score_scheduler::placement::HubObjects;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// The comparison for one placement.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Clusters in OCM's PlacementDecisions, sorted.
    pub ocm: Vec<String>,
    /// The scores OCM wrote into those decisions (`decisions[].score`, api v1.3.0; a v1.2 hub
    /// writes none), by cluster.
    pub ocm_scores: BTreeMap<String, i64>,
    /// Clusters the engine selects now, sorted.
    pub now: Vec<String>,
    /// The last time OCM wrote one of the placement's PlacementDecisions.
    pub decided_at: Option<Timestamp>,
    /// What changed after `decided_at` that OCM's answer does not reflect yet, one line each.
    pub causes: Vec<String>,
    /// Why OCM leaves the placement alone (being deleted, scheduling disabled): its decisions
    /// stay as they are, so they cannot be stale.
    pub skipped: Option<&'static str>,
}

impl Comparison {
    /// OCM's decisions differ from what it would decide now.
    pub fn stale(&self) -> bool {
        self.skipped.is_none() && self.ocm != self.now
    }

    pub fn only_ocm(&self) -> Vec<&str> {
        let now: BTreeSet<&String> = self.now.iter().collect();
        self.ocm
            .iter()
            .filter(|c| !now.contains(c))
            .map(String::as_str)
            .collect()
    }

    pub fn only_now(&self) -> Vec<&str> {
        let ocm: BTreeSet<&String> = self.ocm.iter().collect();
        self.now
            .iter()
            .filter(|c| !ocm.contains(c))
            .map(String::as_str)
            .collect()
    }

    pub fn json(&self) -> Value {
        json!({
            "ocmDecisions": self.ocm,
            "ocmDecisionScores": self.ocm_scores,
            "decidedAt": self.decided_at.map(|t| t.to_string()),
            "stale": self.stale(),
            "onlyInOcm": self.only_ocm(),
            "onlyNow": self.only_now(),
            "likelyCauses": self.causes,
            "skipped": self.skipped,
        })
    }

    /// The lines printed under the table.
    pub fn text(&self) -> String {
        let decided = self
            .decided_at
            .map_or_else(|| "never".to_owned(), |t| t.to_string());
        let ocm: Vec<String> = self
            .ocm
            .iter()
            .map(|c| match self.ocm_scores.get(c) {
                Some(score) => format!("{c} (score {score})"),
                None => c.clone(),
            })
            .collect();
        let mut out = format!("OCM's decisions (last written {decided}): {}\n", list(&ocm));
        if let Some(why) = self.skipped {
            out.push_str(&format!(
                "OCM does not schedule this placement ({why}): its decisions stay as they are.\n"
            ));
            return out;
        }
        if !self.stale() {
            out.push_str("The engine selects the same clusters from the hub as it is now.\n");
            return out;
        }
        out.push_str(&format!(
            "STALE: from the hub as it is now OCM would select {}; only in OCM's decisions: {}; only now: {}\n",
            list(&self.now),
            list(&self.only_ocm()),
            list(&self.only_now()),
        ));
        if self.causes.is_empty() {
            out.push_str(
                "No input the placement reads changed after OCM decided, and OCM is not known to \
                 hold it back: the engine and OCM disagree. Please report it with this output and \
                 `kubectl ocm-score explain ... -o yaml`.\n",
            );
        } else {
            out.push_str("Likely causes:\n");
            for c in &self.causes {
                out.push_str(&format!("  - {c}\n"));
            }
        }
        out
    }
}

fn list<S: AsRef<str>>(clusters: &[S]) -> String {
    if clusters.is_empty() {
        "(none)".to_owned()
    } else {
        clusters.iter().map(AsRef::as_ref).collect::<Vec<_>>().join(", ")
    }
}

/// The latest write recorded in `meta` (managedFields' times; the creation time without them).
fn last_written(meta: &ObjectMeta) -> Option<Timestamp> {
    let fields = meta
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|f| f.time.as_ref().map(|t| t.0));
    fields.max().or(meta.creation_timestamp.as_ref().map(|t| t.0))
}

/// The resourceVersion as a number. On kube-apiserver it is etcd's revision, which grows with
/// every write to the one etcd holding these kinds, so a larger one was written later; clients
/// are told not to rely on that, so it only ever feeds "likely causes". It is needed: on a real
/// hub OCM's AddOnPlacementScores carry no managedFields (seen on kube-apiserver 1.34).
fn revision(meta: &ObjectMeta) -> Option<u64> {
    meta.resource_version.as_deref()?.parse().ok()
}

fn name_of(meta: &ObjectMeta) -> String {
    match &meta.namespace {
        Some(ns) => format!("{ns}/{}", meta.name.as_deref().unwrap_or_default()),
        None => meta.name.clone().unwrap_or_default(),
    }
}

/// The AddOnPlacementScore resource names `placement` reads (prioritizers, and any CEL
/// `scores(...)` call, which may read any).
fn score_resources(placement: &Placement) -> (BTreeSet<String>, bool) {
    let named = placement
        .spec
        .prioritizer_policy
        .iter()
        .flat_map(|p| &p.configurations)
        .filter_map(|c| c.score_coordinate.as_ref()?.add_on.as_ref())
        .map(|a| a.resource_name.clone())
        .collect();
    let cel_reads_scores =
        serde_json::to_string(&placement.spec.predicates).is_ok_and(|s| s.contains("scores("));
    (named, cel_reads_scores)
}

/// Compares OCM's decisions for `placement` (in `objects`) with what the engine selects now (`Err`:
/// why OCM would leave the placement alone), and looks for what changed after OCM last wrote them.
pub fn compare(
    objects: &HubObjects,
    placement: &Placement,
    now_selected: Result<Vec<String>, &'static str>,
) -> Comparison {
    let ns = placement.metadata.namespace.as_deref().unwrap_or_default();
    let name = placement.metadata.name.as_deref().unwrap_or_default();
    let mine: Vec<&PlacementDecision> = objects
        .decisions
        .iter()
        .filter(|d| {
            d.metadata.namespace.as_deref() == Some(ns)
                && d.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("cluster.open-cluster-management.io/placement"))
                    .map(String::as_str)
                    == Some(name)
        })
        .collect();
    let written = || {
        mine.iter()
            .flat_map(|d| d.status.iter().flat_map(|s| s.decisions.iter()))
    };
    let mut ocm: Vec<String> = written().map(|d| d.cluster_name.clone()).collect();
    ocm.sort();
    let ocm_scores = written()
        .filter_map(|d| d.score.map(|s| (d.cluster_name.clone(), s)))
        .collect();
    let skipped = now_selected.as_ref().err().copied();
    let mut now = now_selected.unwrap_or_else(|_| ocm.clone());
    now.sort();
    let decided_at = mine.iter().filter_map(|d| last_written(&d.metadata)).max();
    let decided_revision = mine.iter().filter_map(|d| revision(&d.metadata)).max();

    let mut causes = Vec::new();
    if ocm != now {
        let after = |t: Option<Timestamp>| match (t, decided_at) {
            (Some(t), Some(d)) => t > d,
            (Some(_), None) => true,
            _ => false,
        };
        let written_after = |m: &ObjectMeta| match (revision(m), decided_revision) {
            (Some(r), Some(d)) => r > d,
            _ => after(last_written(m)),
        };
        let generation = placement.metadata.generation;
        let observed = placement
            .status
            .iter()
            .flat_map(|s| s.conditions.iter())
            .filter_map(|c| c.observed_generation)
            .max();
        if let (Some(g), Some(o)) = (generation, observed)
            && o < g
        {
            causes.push(format!(
                "the placement changed (generation {g}) after OCM last scheduled it (generation {o})"
            ));
        }
        let (resources, cel_reads_scores) = score_resources(placement);
        let changed_scores: Vec<String> = objects
            .scores
            .iter()
            .filter(|s| cel_reads_scores || s.metadata.name.as_ref().is_some_and(|n| resources.contains(n)))
            .filter(|s| written_after(&s.metadata))
            .map(|s| name_of(&s.metadata))
            .collect();
        if !changed_scores.is_empty() {
            causes.push(format!(
                "scores written after OCM decided: {} (OCM re-reads scores when it next schedules the \
                 placement, which it may hold back to limit how often a placement's decisions move)",
                changed_scores.join(", ")
            ));
        }
        let expired: Vec<String> = objects
            .scores
            .iter()
            .filter(|s| resources.contains(s.metadata.name.as_deref().unwrap_or_default()))
            .filter(|s| {
                s.status
                    .as_ref()
                    .and_then(|st| st.valid_until.as_ref())
                    .is_some_and(|v| after(Some(v.0)) && v.0 <= Timestamp::now())
            })
            .map(|s| name_of(&s.metadata))
            .collect();
        if !expired.is_empty() {
            causes.push(format!(
                "scores expired after OCM decided: {} (an expired score counts as 0)",
                expired.join(", ")
            ));
        }
        let changed_clusters: Vec<String> = objects
            .clusters
            .iter()
            .filter(|c| written_after(&c.metadata))
            .map(|c| name_of(&c.metadata))
            .collect();
        if !changed_clusters.is_empty() {
            causes.push(format!(
                "ManagedClusters written after OCM decided (labels, claims, taints, status): {}",
                changed_clusters.join(", ")
            ));
        }
        let membership_changed = objects
            .cluster_sets
            .iter()
            .map(|s| &s.metadata)
            .chain(objects.bindings.iter().map(|b| &b.metadata))
            .filter(|m| written_after(m))
            .map(name_of)
            .collect::<Vec<_>>();
        if !membership_changed.is_empty() {
            causes.push(format!(
                "cluster sets or bindings written after OCM decided: {}",
                membership_changed.join(", ")
            ));
        }
    }
    Comparison {
        ocm,
        ocm_scores,
        now,
        decided_at,
        causes,
        skipped,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ManagedFieldsEntry, Time};
    use ocm_score_api::{
        AddOnPlacementScore, AddOnPlacementScoreStatus, ClusterDecision, ManagedCluster,
        PlacementDecisionStatus,
    };

    fn at(s: &str) -> Time {
        Time(s.parse().expect("time"))
    }

    fn meta(ns: Option<&str>, name: &str, written: &str) -> ObjectMeta {
        ObjectMeta {
            namespace: ns.map(str::to_owned),
            name: Some(name.to_owned()),
            managed_fields: Some(vec![ManagedFieldsEntry {
                time: Some(at(written)),
                ..Default::default()
            }]),
            ..Default::default()
        }
    }

    fn decision(clusters: &[&str], written: &str) -> PlacementDecision {
        let mut m = meta(Some("ns"), "p-decision-1", written);
        m.labels = Some(
            [(
                "cluster.open-cluster-management.io/placement".to_owned(),
                "p".to_owned(),
            )]
            .into(),
        );
        PlacementDecision {
            metadata: m,
            status: Some(PlacementDecisionStatus {
                decisions: clusters
                    .iter()
                    .map(|c| ClusterDecision {
                        cluster_name: (*c).to_owned(),
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }),
        }
    }

    fn placement_reading(resource: &str) -> Placement {
        serde_json::from_value(json!({
            "metadata": {"name": "p", "namespace": "ns"},
            "spec": {"prioritizerPolicy": {"configurations": [{"scoreCoordinate": {
                "type": "AddOn", "addOn": {"resourceName": resource, "scoreName": "cpu"}}}]}},
        }))
        .expect("placement")
    }

    #[test]
    fn same_answer_is_not_stale() {
        let objects = HubObjects {
            decisions: vec![decision(&["b", "a"], "2026-11-26T10:00:00Z")],
            ..Default::default()
        };
        let c = compare(
            &objects,
            &placement_reading("r"),
            Ok(vec!["a".into(), "b".into()]),
        );
        assert!(!c.stale());
        assert_eq!(c.decided_at, Some(at("2026-11-26T10:00:00Z").0));
        assert!(c.text().contains("selects the same clusters"), "{}", c.text());

        // A placement OCM leaves alone keeps its decisions: not stale, and said why.
        let skipped = compare(
            &objects,
            &placement_reading("r"),
            Err("scheduling is disabled by annotation"),
        );
        assert!(!skipped.stale() && skipped.now == skipped.ocm);
        assert!(
            skipped.text().contains("does not schedule this placement"),
            "{}",
            skipped.text()
        );
    }

    #[test]
    fn scores_ocm_wrote_into_its_decisions_are_shown_beside_them() {
        // A v1.3 hub writes `decisions[].score`; a v1.2 hub writes none, and nothing changes.
        let mut scored = decision(&["b", "a"], "2026-11-26T10:00:00Z");
        for d in scored.status.iter_mut().flat_map(|s| s.decisions.iter_mut()) {
            d.score = (d.cluster_name == "b").then_some(87);
        }
        let objects = HubObjects {
            decisions: vec![scored],
            ..Default::default()
        };
        let c = compare(
            &objects,
            &placement_reading("r"),
            Ok(vec!["a".into(), "b".into()]),
        );
        assert!(
            c.text()
                .starts_with("OCM's decisions (last written 2026-11-26T10:00:00Z): a, b (score 87)\n"),
            "{}",
            c.text()
        );
        assert_eq!(c.json()["ocmDecisionScores"], json!({"b": 87}));
        assert_eq!(c.json()["ocmDecisions"], json!(["a", "b"]));

        let unscored = HubObjects {
            decisions: vec![decision(&["b", "a"], "2026-11-26T10:00:00Z")],
            ..Default::default()
        };
        let c = compare(
            &unscored,
            &placement_reading("r"),
            Ok(vec!["a".into(), "b".into()]),
        );
        assert!(
            c.text()
                .starts_with("OCM's decisions (last written 2026-11-26T10:00:00Z): a, b\n"),
            "{}",
            c.text()
        );
        assert_eq!(c.json()["ocmDecisionScores"], json!({}));
    }

    #[test]
    fn a_score_written_after_the_decision_is_named() {
        let mut score = AddOnPlacementScore {
            metadata: meta(Some("b"), "r", "2026-11-26T10:05:00Z"),
            status: Some(AddOnPlacementScoreStatus::default()),
        };
        let older = AddOnPlacementScore {
            metadata: meta(Some("a"), "r", "2026-11-26T09:00:00Z"),
            status: None,
        };
        let unrelated = AddOnPlacementScore {
            metadata: meta(Some("c"), "other", "2026-11-26T10:05:00Z"),
            status: None,
        };
        let objects = HubObjects {
            decisions: vec![decision(&["a"], "2026-11-26T10:00:00Z")],
            scores: vec![score.clone(), older, unrelated],
            clusters: vec![ManagedCluster {
                metadata: meta(None, "a", "2026-11-26T08:00:00Z"),
                ..Default::default()
            }],
            ..Default::default()
        };
        let c = compare(&objects, &placement_reading("r"), Ok(vec!["b".into()]));
        assert!(c.stale());
        assert_eq!((c.only_ocm(), c.only_now()), (vec!["a"], vec!["b"]));
        assert_eq!(c.causes.len(), 1, "{:?}", c.causes);
        assert!(
            c.causes[0].contains("b/r") && !c.causes[0].contains("a/r"),
            "{:?}",
            c.causes
        );
        let text = c.text();
        assert!(text.contains("STALE") && text.contains("Likely causes"), "{text}");

        // Nothing newer than the decision: the disagreement is reported as such.
        score.metadata = meta(Some("b"), "r", "2026-11-26T09:00:00Z");
        let objects = HubObjects {
            scores: vec![score],
            ..objects
        };
        let c = compare(&objects, &placement_reading("r"), Ok(vec!["b".into()]));
        assert!(c.causes.is_empty(), "{:?}", c.causes);
        assert!(c.text().contains("the engine and OCM disagree"), "{}", c.text());

        // Without managedFields (OCM's scores on a real hub), the write order is the revisions'.
        let mut objects = objects;
        objects.decisions[0].metadata.resource_version = Some("900".into());
        let mut later = objects.scores[0].clone();
        later.metadata.managed_fields = None;
        later.metadata.resource_version = Some("901".into());
        let mut earlier = later.clone();
        earlier.metadata.namespace = Some("a".into());
        earlier.metadata.resource_version = Some("899".into());
        objects.scores = vec![later, earlier];
        let c = compare(&objects, &placement_reading("r"), Ok(vec!["b".into()]));
        assert_eq!(c.causes.len(), 1, "{:?}", c.causes);
        assert!(
            c.causes[0].contains("b/r") && !c.causes[0].contains("a/r"),
            "{:?}",
            c.causes
        );
    }
}
