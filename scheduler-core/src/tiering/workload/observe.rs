//! What one ManifestWork says about the workload right now (docs/design/workload-failover.md §3),
//! before any clock.
//!
//! Health is judged from status feedback, the one signal about the application itself:
//! `Applied` and `Available` only say the resources exist. `Progressing=True` means "not yet
//! judged"; `Degraded=True` is unhealthy whatever the feedback says.

use crate::instant::of;
use ocm_score_api::crd::tiered_placement::{HealthRule, WorkResource, WorkloadHealthPolicy};
use ocm_score_api::{Condition, ManifestCondition, ManifestWork};

/// The judgment of one work (or of the worst of a cluster's works).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observation {
    /// Not judged: not applied yet, progressing.
    Unknown(String),
    /// Applied, but the value the rule reads is not reported (no feedback rule, or not yet).
    /// `applied_at`: the `Applied` condition's `lastTransitionTime`.
    NoFeedback {
        applied_at: i128,
        why: String,
    },
    Unhealthy(String),
    Healthy(String),
}

impl Observation {
    /// Larger is worse: a cluster with several works is judged by its worst.
    fn severity(&self) -> u8 {
        match self {
            Observation::Healthy(_) => 0,
            Observation::Unknown(_) => 1,
            Observation::NoFeedback { .. } => 2,
            Observation::Unhealthy(_) => 3,
        }
    }

    /// Whether this observation says less of the workload's health than `other`.
    pub fn is_worse_than(&self, other: &Observation) -> bool {
        self.severity() > other.severity()
    }

    /// When the work became `Applied` (a workload never healthy here counts from then).
    pub fn applied_at(work: &ManifestWork) -> Option<i128> {
        condition(work, "Applied")
            .filter(|c| c.status == "True")
            .map(|c| of(&c.last_transition_time))
    }
}

fn condition<'w>(work: &'w ManifestWork, type_: &str) -> Option<&'w Condition> {
    work.status.as_ref()?.conditions.iter().find(|c| c.type_ == type_)
}

fn is_true(work: &ManifestWork, type_: &str) -> bool {
    condition(work, type_).is_some_and(|c| c.status == "True")
}

/// The manifest the policy judges: the named resource, or the first Deployment.
fn manifest<'w>(work: &'w ManifestWork, resource: Option<&WorkResource>) -> Option<&'w ManifestCondition> {
    let manifests = &work.status.as_ref()?.resource_status.as_ref()?.manifests;
    let mut candidates = manifests.iter().filter(|m| {
        let meta = &m.resource_meta;
        match resource {
            Some(r) => {
                meta.group == r.group
                    && meta.resource == r.resource
                    && meta.name == r.name
                    && meta.namespace == r.namespace
            }
            None => meta.group == "apps" && (meta.kind == "Deployment" || meta.resource == "deployments"),
        }
    });
    let first = candidates.next()?;
    Some(candidates.fold(first, |best, m| {
        if m.resource_meta.ordinal < best.resource_meta.ordinal {
            m
        } else {
            best
        }
    }))
}

/// The integer feedback value `name` (`{name, fieldValue: {type: Integer, integer}}`):
/// `None` when absent, `Err` when present but not an integer.
fn integer(m: &ManifestCondition, name: &str) -> Option<Result<i64, String>> {
    let values = &m.status_feedback.as_ref()?.values;
    let value = values
        .iter()
        .find(|v| v.get("name").and_then(|n| n.as_str()) == Some(name))?;
    let field = value.get("fieldValue");
    Some(
        field
            .and_then(|f| f.get("integer"))
            .and_then(serde_json::Value::as_i64)
            .ok_or_else(|| {
                format!(
                    "feedback {name} is {}, not an integer",
                    field.map_or_else(|| "empty".to_string(), ToString::to_string)
                )
            }),
    )
}

fn describe(resource: Option<&WorkResource>) -> String {
    match resource {
        Some(r) if r.namespace.is_empty() => format!("{}/{}", r.resource, r.name),
        Some(r) => format!("{}/{}/{}", r.resource, r.namespace, r.name),
        None => "the first Deployment".to_string(),
    }
}

/// Judges one work by `policy`.
pub fn observe(work: &ManifestWork, policy: &WorkloadHealthPolicy) -> Observation {
    let Some(applied_at) = Observation::applied_at(work) else {
        let why = condition(work, "Applied").map_or_else(
            || "the work is not applied yet".to_string(),
            |c| format!("the work is not applied ({}: {})", c.reason, c.message),
        );
        return Observation::Unknown(why);
    };
    if is_true(work, "Progressing") {
        return Observation::Unknown("the work is progressing".into());
    }
    if let Some(c) = condition(work, "Degraded").filter(|c| c.status == "True") {
        return Observation::Unhealthy(format!("Degraded ({}: {})", c.reason, c.message));
    }
    let resource = policy.resource.as_ref();
    let no_feedback = |what: String| Observation::NoFeedback {
        applied_at,
        why: what,
    };
    let Some(m) = manifest(work, resource) else {
        return no_feedback(format!("no status of {}", describe(resource)));
    };
    let rule = policy.healthy.clone().unwrap_or_default();
    match rule {
        HealthRule {
            json_path: Some(j), ..
        } => match integer(m, &j.name) {
            None => no_feedback(format!("no feedback value {:?}", j.name)),
            Some(Err(e)) => Observation::Unhealthy(e),
            Some(Ok(v)) if v >= j.at_least => {
                Observation::Healthy(format!("{} {v} >= {}", j.name, j.at_least))
            }
            Some(Ok(v)) => Observation::Unhealthy(format!("{} {v} < {}", j.name, j.at_least)),
        },
        _ => {
            let replicas = match integer(m, "Replicas") {
                None => return no_feedback("no feedback value \"Replicas\"".into()),
                Some(Err(e)) => return Observation::Unhealthy(e),
                Some(Ok(r)) => r,
            };
            // A Deployment omits readyReplicas while it is 0, and so does the feedback.
            let ready = match integer(m, "ReadyReplicas") {
                None => 0,
                Some(Err(e)) => return Observation::Unhealthy(e),
                Some(Ok(r)) => r,
            };
            let text = format!("ReadyReplicas {ready} of {replicas}");
            if replicas > 0 && ready >= replicas {
                Observation::Healthy(text)
            } else {
                Observation::Unhealthy(text)
            }
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn work(json: serde_json::Value) -> ManifestWork {
        serde_json::from_value(json).unwrap()
    }

    fn cond(type_: &str, status: &str) -> serde_json::Value {
        serde_json::json!({"type": type_, "status": status, "reason": "R", "message": "m",
            "lastTransitionTime": "2026-11-22T10:00:00Z"})
    }

    fn deployment(values: serde_json::Value, conditions: Vec<serde_json::Value>) -> ManifestWork {
        work(serde_json::json!({
            "metadata": {"name": "web", "namespace": "a-1"},
            "spec": {},
            "status": {"conditions": conditions, "resourceStatus": {"manifests": [
                {"resourceMeta": {"ordinal": 1, "group": "", "version": "v1", "kind": "Service",
                    "resource": "services", "name": "web", "namespace": "web"}, "conditions": []},
                {"resourceMeta": {"ordinal": 0, "group": "apps", "version": "v1", "kind": "Deployment",
                    "resource": "deployments", "name": "web", "namespace": "web"}, "conditions": [],
                 "statusFeedback": {"values": values}}
            ]}}
        }))
    }

    fn int(name: &str, v: i64) -> serde_json::Value {
        serde_json::json!({"name": name, "fieldValue": {"type": "Integer", "integer": v}})
    }

    fn policy(yaml: &str) -> WorkloadHealthPolicy {
        serde_norway::from_str(yaml).unwrap()
    }

    #[test]
    fn the_signal_table() {
        let p = policy("manifestWorkReplicaSet: web");
        let applied = || vec![cond("Applied", "True")];
        let ok = serde_json::json!([int("Replicas", 3), int("ReadyReplicas", 3)]);
        let t0 = of(&ocm_score_api::Time("2026-11-22T10:00:00Z".parse().unwrap()));
        // Not applied, progressing: Unknown.
        assert!(matches!(
            observe(&deployment(ok.clone(), vec![]), &p),
            Observation::Unknown(_)
        ));
        assert!(matches!(
            observe(&deployment(ok.clone(), vec![cond("Applied", "False")]), &p),
            Observation::Unknown(w) if w.contains("R: m")
        ));
        let mut progressing = applied();
        progressing.push(cond("Progressing", "True"));
        assert!(matches!(
            observe(&deployment(ok.clone(), progressing), &p),
            Observation::Unknown(_)
        ));
        // Healthy, and Degraded overrides the feedback.
        assert_eq!(
            observe(&deployment(ok.clone(), applied()), &p),
            Observation::Healthy("ReadyReplicas 3 of 3".into())
        );
        let mut degraded = applied();
        degraded.push(cond("Degraded", "True"));
        assert!(matches!(
            observe(&deployment(ok, degraded), &p),
            Observation::Unhealthy(_)
        ));
        // ReadyReplicas omitted while 0; zero replicas are not healthy.
        assert_eq!(
            observe(
                &deployment(serde_json::json!([int("Replicas", 3)]), applied()),
                &p
            ),
            Observation::Unhealthy("ReadyReplicas 0 of 3".into())
        );
        assert_eq!(
            observe(
                &deployment(
                    serde_json::json!([int("Replicas", 0), int("ReadyReplicas", 0)]),
                    applied()
                ),
                &p
            ),
            Observation::Unhealthy("ReadyReplicas 0 of 0".into())
        );
        // No feedback: remembered with the time the work was applied.
        assert_eq!(
            observe(&deployment(serde_json::json!([]), applied()), &p),
            Observation::NoFeedback {
                applied_at: t0,
                why: "no feedback value \"Replicas\"".into()
            }
        );
    }

    #[test]
    fn a_json_path_rule_reads_an_integer_and_a_named_resource_is_matched_exactly() {
        let p = policy(
            "{manifestWorkReplicaSet: web, healthy: {jsonPath: {name: ready, atLeast: 2}},
              resource: {group: apps, resource: deployments, namespace: web, name: web}}",
        );
        let applied = || vec![cond("Applied", "True")];
        assert_eq!(
            observe(&deployment(serde_json::json!([int("ready", 2)]), applied()), &p),
            Observation::Healthy("ready 2 >= 2".into())
        );
        assert_eq!(
            observe(&deployment(serde_json::json!([int("ready", 1)]), applied()), &p),
            Observation::Unhealthy("ready 1 < 2".into())
        );
        let text = serde_json::json!([{"name": "ready", "fieldValue": {"type": "String", "string": "yes"}}]);
        assert!(matches!(
            observe(&deployment(text, applied()), &p),
            Observation::Unhealthy(w) if w.contains("not an integer")
        ));
        let other = policy(
            "{manifestWorkReplicaSet: web, resource: {group: apps, resource: deployments, namespace: web, name: api}}",
        );
        assert!(matches!(
            observe(&deployment(serde_json::json!([int("ready", 2)]), applied()), &other),
            Observation::NoFeedback { why, .. } if why.contains("deployments/web/api")
        ));
    }
}
