//! The part of a ManagedClusterAddOn's status this controller owns, and the patch that writes it.
//!
//! We own `supportedConfigs`, `registrations`, `namespace`, `healthCheck`, `configReferences` (their
//! spec hashes, or all of them when self-managed) and our condition types. The patch carries the
//! object's resourceVersion, so a concurrent writer makes it fail with 409 and we merge again into
//! what they wrote; conditions are always sent whole (a merge patch replaces arrays).

pub mod conditions;

use conditions::{Change, merge};
use jiff::Timestamp;
use ocm_score_api::{
    ConfigGroupResource, ConfigReference, HealthCheck, ManagedClusterAddOn, RegistrationConfig,
};
use serde_json::{Map, Value, json};

/// Our fields as this sync computed them.
#[derive(Clone, Debug, PartialEq)]
pub struct OwnedStatus {
    pub supported_configs: Vec<ConfigGroupResource>,
    pub registrations: Vec<RegistrationConfig>,
    /// `None`: leave the namespace as it is (the config that would decide it is invalid).
    pub namespace: Option<String>,
    pub health_mode: &'static str,
    pub config_references: Vec<ConfigReference>,
    pub conditions: Vec<Change>,
}

/// The merge patch bringing `addon`'s status to `owned`, or `None` when it already is there.
pub fn status_patch(addon: &ManagedClusterAddOn, owned: &OwnedStatus, now: Timestamp) -> Option<Value> {
    let current = addon.status.clone().unwrap_or_default();
    let mut status = Map::new();
    let mut set =
        |key: &str, have: Result<Value, serde_json::Error>, want: Result<Value, serde_json::Error>| {
            if let (Ok(have), Ok(want)) = (have, want)
                && have != want
            {
                status.insert(key.to_string(), want);
            }
        };
    set(
        "supportedConfigs",
        serde_json::to_value(&current.supported_configs),
        serde_json::to_value(&owned.supported_configs),
    );
    set(
        "registrations",
        serde_json::to_value(&current.registrations),
        serde_json::to_value(&owned.registrations),
    );
    if let Some(namespace) = &owned.namespace {
        set(
            "namespace",
            serde_json::to_value(&current.namespace),
            serde_json::to_value(Some(namespace)),
        );
    }
    let mode = HealthCheck {
        mode: owned.health_mode.to_string(),
    };
    set(
        "healthCheck",
        serde_json::to_value(&current.health_check),
        serde_json::to_value(Some(&mode)),
    );
    set(
        "configReferences",
        serde_json::to_value(&current.config_references),
        serde_json::to_value(&owned.config_references),
    );
    let merged = merge(
        &current.conditions,
        &owned.conditions,
        addon.metadata.generation,
        now,
    );
    set(
        "conditions",
        serde_json::to_value(&current.conditions),
        serde_json::to_value(&merged),
    );
    if status.is_empty() {
        return None;
    }
    // Arrays are replaced whole by a merge patch: an emptied list must be sent as empty, not omitted.
    Some(json!({
        "metadata": { "resourceVersion": addon.metadata.resource_version },
        "status": status,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addon::configuration::references::supported_configs;
    use crate::addon::registration::registrations;
    use crate::addon::status::conditions::{Desired, MANIFEST_APPLIED, REGISTRATION_APPLIED, Status};

    fn addon() -> ManagedClusterAddOn {
        let mut m = ManagedClusterAddOn::default();
        m.metadata.name = Some("a".into());
        m.metadata.namespace = Some("c1".into());
        m.metadata.resource_version = Some("10".into());
        m.metadata.generation = Some(1);
        m
    }

    fn owned(m: &ManagedClusterAddOn) -> OwnedStatus {
        OwnedStatus {
            supported_configs: supported_configs(),
            registrations: registrations("a", m),
            namespace: Some("open-cluster-management-agent-addon".into()),
            health_mode: "Lease",
            config_references: vec![],
            conditions: vec![Change::Set(Desired::new(
                REGISTRATION_APPLIED,
                Status::True,
                "SetPermissionApplied",
                "ok",
            ))],
        }
    }

    /// Applies a merge patch's status to the object, as the server would.
    fn apply(m: &ManagedClusterAddOn, patch: &Value) -> ManagedClusterAddOn {
        let mut v = serde_json::to_value(m).expect("serializes");
        let status = v
            .as_object_mut()
            .expect("object")
            .entry("status")
            .or_insert(json!({}));
        for (k, val) in patch["status"].as_object().expect("status") {
            status[k] = val.clone();
        }
        serde_json::from_value(v).expect("deserializes")
    }

    #[test]
    fn first_sync_writes_everything_and_the_second_nothing() {
        let m = addon();
        let t = Timestamp::from_second(1_700_000_000).expect("ts");
        let patch = status_patch(&m, &owned(&m), t).expect("a first write");
        assert_eq!(patch["metadata"]["resourceVersion"], "10");
        let status = &patch["status"];
        assert_eq!(status["healthCheck"]["mode"], "Lease");
        assert_eq!(status["namespace"], "open-cluster-management-agent-addon");
        assert_eq!(
            status["registrations"][0]["signerName"],
            "kubernetes.io/kube-apiserver-client"
        );
        assert_eq!(status["conditions"][0]["type"], REGISTRATION_APPLIED);
        assert!(
            status.get("configReferences").is_none(),
            "empty and already empty"
        );
        let written = apply(&m, &patch);
        let later = Timestamp::from_second(1_700_000_500).expect("ts");
        assert_eq!(status_patch(&written, &owned(&written), later), None);
    }

    #[test]
    fn only_changed_fields_are_sent_and_foreign_conditions_survive() {
        let m = addon();
        let t = Timestamp::from_second(1_700_000_000).expect("ts");
        let mut written = apply(&m, &status_patch(&m, &owned(&m), t).expect("write"));
        // Someone else adds a condition; then our ManifestApplied appears.
        written.status.as_mut().expect("status").conditions.push(
            k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
                type_: "ClusterCertificateRotated".into(),
                status: "True".into(),
                reason: "ClientCertificateUpdated".into(),
                message: "m".into(),
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(t),
                observed_generation: None,
            },
        );
        let mut next = owned(&written);
        next.conditions.push(Change::Set(Desired::new(
            MANIFEST_APPLIED,
            Status::True,
            "AddonManifestApplied",
            "ok",
        )));
        let patch = status_patch(&written, &next, t).expect("a write");
        let keys: Vec<&String> = patch["status"].as_object().expect("status").keys().collect();
        assert_eq!(keys, ["conditions"]);
        let types: Vec<&str> = patch["status"]["conditions"]
            .as_array()
            .expect("list")
            .iter()
            .filter_map(|c| c["type"].as_str())
            .collect();
        assert_eq!(
            types,
            [
                REGISTRATION_APPLIED,
                "ClusterCertificateRotated",
                MANIFEST_APPLIED
            ]
        );
    }

    #[test]
    fn unknown_namespace_is_left_alone() {
        let m = addon();
        let mut o = owned(&m);
        o.namespace = None;
        let t = Timestamp::from_second(1_700_000_000).expect("ts");
        let patch = status_patch(&m, &o, t).expect("write");
        assert!(patch["status"].get("namespace").is_none());
    }
}
