//! ManagedClusterAddOn conditions: the ones we own, and how they merge into the list others share.
//!
//! Several writers share `status.conditions` (the klusterlet, OCM's addon-manager, us). A JSON merge
//! patch replaces the whole array, so we always merge into the latest list we read and send it whole,
//! touching only our condition types.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

pub const REGISTRATION_APPLIED: &str = "RegistrationApplied";
pub const MANIFEST_APPLIED: &str = "ManifestApplied";
pub const AVAILABLE: &str = "Available";
pub const CONFIGURED: &str = "Configured";
pub const DEGRADED: &str = "Degraded";

/// A condition we want, without the bookkeeping fields the merge fills in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Desired {
    pub type_: &'static str,
    pub status: Status,
    pub reason: &'static str,
    pub message: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    True,
    False,
    Unknown,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Status::True => "True",
            Status::False => "False",
            Status::Unknown => "Unknown",
        }
    }
}

impl Desired {
    pub fn new(
        type_: &'static str,
        status: Status,
        reason: &'static str,
        message: impl Into<String>,
    ) -> Self {
        Desired {
            type_,
            status,
            reason,
            message: message.into(),
        }
    }
}

/// What to do with one condition type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Set(Desired),
    /// Drop the condition if present (e.g. a stale `ManifestApplied=False` once the work is re-applied).
    Remove(&'static str),
}

/// Applies `changes` to `existing`. Conditions of other types keep their place and content; a changed
/// condition keeps its `lastTransitionTime` unless its status flips, so re-applying the same desired
/// state returns a list equal to `existing` (and the caller then writes nothing).
pub fn merge(
    existing: &[Condition],
    changes: &[Change],
    generation: Option<i64>,
    now: Timestamp,
) -> Vec<Condition> {
    let mut out: Vec<Condition> = existing.to_vec();
    for change in changes {
        match change {
            Change::Remove(type_) => out.retain(|c| c.type_ != *type_),
            Change::Set(want) => match out.iter_mut().find(|c| c.type_ == want.type_) {
                Some(current) => {
                    if current.status != want.status.as_str() {
                        current.status = want.status.as_str().to_string();
                        current.last_transition_time = Time(now);
                    }
                    current.reason = want.reason.to_string();
                    current.message.clone_from(&want.message);
                    current.observed_generation = generation;
                }
                None => out.push(Condition {
                    type_: want.type_.to_string(),
                    status: want.status.as_str().to_string(),
                    reason: want.reason.to_string(),
                    message: want.message.clone(),
                    last_transition_time: Time(now),
                    observed_generation: generation,
                }),
            },
        }
    }
    out
}

/// The condition of a type, if present.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(secs: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + secs).expect("valid test timestamp")
    }

    fn cond(type_: &str, status: &str, reason: &str, at: i64) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: reason.into(),
            message: "m".into(),
            last_transition_time: Time(t(at)),
            observed_generation: Some(1),
        }
    }

    #[test]
    fn keeps_other_writers_conditions_in_place() {
        let existing = vec![
            cond("ClusterCertificateRotated", "True", "ClientCertificateUpdated", 0),
            cond(AVAILABLE, "True", "ManagedClusterAddOnLeaseUpdated", 0),
        ];
        let merged = merge(
            &existing,
            &[Change::Set(Desired::new(
                MANIFEST_APPLIED,
                Status::True,
                "AddonManifestApplied",
                "ok",
            ))],
            Some(1),
            t(10),
        );
        assert_eq!(&merged[..2], &existing[..]);
        assert_eq!(merged[2].type_, MANIFEST_APPLIED);
        assert_eq!(merged[2].last_transition_time, Time(t(10)));
    }

    #[test]
    fn same_desired_state_is_a_fixed_point() {
        let existing = vec![cond(CONFIGURED, "True", "ConfigurationsConfigured", 0)];
        let mut want = Desired::new(CONFIGURED, Status::True, "ConfigurationsConfigured", "m");
        let merged = merge(&existing, &[Change::Set(want.clone())], Some(1), t(99));
        assert_eq!(merged, existing);
        // A new message keeps the transition time; a status flip moves it.
        want.message = "other".into();
        let merged = merge(&existing, &[Change::Set(want.clone())], Some(1), t(99));
        assert_eq!(merged[0].last_transition_time, Time(t(0)));
        assert_eq!(merged[0].message, "other");
        want.status = Status::False;
        let merged = merge(&existing, &[Change::Set(want)], Some(1), t(99));
        assert_eq!(merged[0].last_transition_time, Time(t(99)));
        assert_eq!(merged[0].status, "False");
    }

    #[test]
    fn remove_drops_only_that_type() {
        let existing = vec![
            cond(MANIFEST_APPLIED, "False", "x", 0),
            cond(AVAILABLE, "True", "y", 0),
        ];
        let merged = merge(&existing, &[Change::Remove(MANIFEST_APPLIED)], None, t(1));
        assert_eq!(merged, vec![existing[1].clone()]);
        assert_eq!(
            merge(&merged, &[Change::Remove(MANIFEST_APPLIED)], None, t(1)),
            merged
        );
    }
}
