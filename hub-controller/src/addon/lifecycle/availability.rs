//! `ManifestApplied` and `Available` of the add-on, read from the agent ManifestWork's status.
//!
//! Rules as addon-framework applies them: the work agent's `Applied` condition decides
//! `ManifestApplied`; in the `Customized` health mode the Deployment's status feedback decides
//! `Available` (healthy when it wants no replicas or has at least one ready). In `Lease` mode the
//! klusterlet sets `Available` from the agent's Lease and we leave it alone.

use crate::addon::status::conditions::{AVAILABLE, Change, Desired, MANIFEST_APPLIED, Status, find};
use ocm_score_api::ManifestWork;
use serde_json::Value;

/// How the add-on's health is checked (`status.healthCheck.mode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HealthMode {
    /// The klusterlet reads the Lease the agent renews.
    Lease,
    /// We read the agent Deployment's status feedback from the ManifestWork.
    DeploymentAvailability,
}

impl HealthMode {
    pub fn status_mode(self) -> &'static str {
        match self {
            HealthMode::Lease => "Lease",
            HealthMode::DeploymentAvailability => "Customized",
        }
    }
}

/// `ManifestApplied` after an apply attempt. `apply_error` is set when creating or updating the work
/// failed. `None` means "leave as is" (the work agent has not reported yet).
pub fn manifest_applied(
    addon: &str,
    work: Option<&ManifestWork>,
    apply_error: Option<&str>,
) -> Option<Change> {
    if let Some(error) = apply_error {
        return Some(Change::Set(Desired::new(
            MANIFEST_APPLIED,
            Status::False,
            "ManifestWorkApplyFailed",
            error,
        )));
    }
    let applied = work
        .and_then(|w| w.status.as_ref())
        .and_then(|s| find(&s.conditions, "Applied"));
    match applied {
        None => None,
        Some(c) if c.status == "True" => Some(Change::Set(Desired::new(
            MANIFEST_APPLIED,
            Status::True,
            "AddonManifestApplied",
            format!("{addon} add-on manifests are applied successfully"),
        ))),
        Some(c) => Some(Change::Set(Desired::new(
            MANIFEST_APPLIED,
            Status::False,
            "AddonManifestAppliedFailed",
            format!("failed to apply the manifests of {addon}: {}", c.message),
        ))),
    }
}

/// `Available` in the Customized mode, from the Deployment `name` in `namespace`.
pub fn available(addon: &str, work: Option<&ManifestWork>, namespace: &str, name: &str) -> Desired {
    let unknown = |reason, message: String| Desired::new(AVAILABLE, Status::Unknown, reason, message);
    let Some(work) = work else {
        return unknown("WorkNotFound", format!("the {addon} ManifestWork does not exist"));
    };
    let status = work.status.as_ref();
    match status.and_then(|s| find(&s.conditions, "Available")) {
        None => {
            return unknown(
                "WorkNotApplied",
                "the work agent has not reported availability yet".into(),
            );
        }
        Some(c) if c.status != "True" => {
            return Desired::new(
                AVAILABLE,
                Status::False,
                "WorkNotApplied",
                format!("work not available: {}", c.message),
            );
        }
        Some(_) => {}
    }
    let feedback = status
        .and_then(|s| s.resource_status.as_ref())
        .into_iter()
        .flat_map(|r| &r.manifests)
        .find(|m| {
            m.resource_meta.resource == "deployments"
                && m.resource_meta.name == name
                && m.resource_meta.namespace == namespace
        })
        .and_then(|m| m.status_feedback.as_ref())
        .filter(|f| !f.values.is_empty());
    let Some(feedback) = feedback else {
        return unknown(
            "NoProbeResult",
            format!("no status feedback for deployment {namespace}/{name} yet"),
        );
    };
    let replicas = integer(&feedback.values, "Replicas");
    let ready = integer(&feedback.values, "ReadyReplicas");
    match (replicas, ready) {
        (Some(0), _) | (_, Some(1..)) => Desired::new(
            AVAILABLE,
            Status::True,
            "ProbeAvailable",
            format!("{addon} add-on is available."),
        ),
        _ => Desired::new(
            AVAILABLE,
            Status::False,
            "ProbeUnavailable",
            format!("deployment {namespace}/{name} has no ready replica"),
        ),
    }
}

/// A feedback value `{name, fieldValue: {type: Integer, integer: N}}`.
fn integer(values: &[Value], name: &str) -> Option<i64> {
    values
        .iter()
        .find(|v| v["name"] == name)
        .and_then(|v| v["fieldValue"]["integer"].as_i64())
}

#[cfg(test)]
mod tests {
    use super::*;
    use jiff::Timestamp;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use ocm_score_api::{
        ManifestCondition, ManifestResourceMeta, ManifestResourceStatus, ManifestWorkStatus,
        StatusFeedbackResult,
    };
    use serde_json::json;

    fn cond(type_: &str, status: &str) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: "r".into(),
            message: "why".into(),
            last_transition_time: Time(Timestamp::UNIX_EPOCH),
            observed_generation: None,
        }
    }

    fn work(conditions: Vec<Condition>, feedback: Option<Vec<Value>>) -> ManifestWork {
        let manifests = feedback
            .map(|values| ManifestCondition {
                resource_meta: ManifestResourceMeta {
                    resource: "deployments".into(),
                    name: "a-agent".into(),
                    namespace: "ns".into(),
                    ..Default::default()
                },
                conditions: vec![],
                status_feedback: Some(StatusFeedbackResult { values }),
            })
            .into_iter()
            .collect();
        ManifestWork {
            status: Some(ManifestWorkStatus {
                conditions,
                resource_status: Some(ManifestResourceStatus { manifests }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn fb(name: &str, n: i64) -> Value {
        json!({"name": name, "fieldValue": {"type": "Integer", "integer": n}})
    }

    fn status_of(change: Option<Change>) -> Option<(Status, &'static str)> {
        match change {
            Some(Change::Set(d)) => Some((d.status, d.reason)),
            _ => None,
        }
    }

    #[test]
    fn manifest_applied_follows_the_work_agent() {
        assert_eq!(
            status_of(manifest_applied("a", None, Some("boom"))),
            Some((Status::False, "ManifestWorkApplyFailed"))
        );
        assert_eq!(manifest_applied("a", Some(&work(vec![], None)), None), None);
        let applied = work(vec![cond("Applied", "True")], None);
        assert_eq!(
            status_of(manifest_applied("a", Some(&applied), None)),
            Some((Status::True, "AddonManifestApplied"))
        );
        let failed = work(vec![cond("Applied", "False")], None);
        assert_eq!(
            status_of(manifest_applied("a", Some(&failed), None)),
            Some((Status::False, "AddonManifestAppliedFailed"))
        );
    }

    #[test]
    fn availability_from_deployment_feedback() {
        let avail = |w: Option<&ManifestWork>| {
            let d = available("a", w, "ns", "a-agent");
            (d.status, d.reason)
        };
        assert_eq!(avail(None), (Status::Unknown, "WorkNotFound"));
        assert_eq!(
            avail(Some(&work(vec![], None))),
            (Status::Unknown, "WorkNotApplied")
        );
        assert_eq!(
            avail(Some(&work(vec![cond("Available", "False")], None))),
            (Status::False, "WorkNotApplied")
        );
        let ok = vec![cond("Available", "True")];
        assert_eq!(
            avail(Some(&work(ok.clone(), None))),
            (Status::Unknown, "NoProbeResult")
        );
        assert_eq!(
            avail(Some(&work(
                ok.clone(),
                Some(vec![fb("Replicas", 1), fb("ReadyReplicas", 1)])
            ))),
            (Status::True, "ProbeAvailable")
        );
        // A missing ReadyReplicas means none is ready.
        assert_eq!(
            avail(Some(&work(ok.clone(), Some(vec![fb("Replicas", 1)])))),
            (Status::False, "ProbeUnavailable")
        );
        assert_eq!(
            avail(Some(&work(ok, Some(vec![fb("Replicas", 0)])))),
            (Status::True, "ProbeAvailable")
        );
    }
}
