//! The spec hashes in the ClusterManagementAddOn's status: the add-on manager's share of the
//! configuration rollout.
//!
//! OCM keeps, in the ClusterManagementAddOn's status, the configs each ManagedClusterAddOn should
//! use: `defaultconfigReferences` (the default of each supported config) and, per Placement of the
//! install strategy, `installProgressions[].configReferences`. OCM's addon-manager writes those
//! references but leaves their `desiredConfig.specHash` to the add-on's own manager (addon-framework's
//! CMA config controller), then copies each hash into the add-ons' `status.configReferences`. If
//! nobody fills them, OCM copies empty hashes and fights whoever writes the real one into the
//! add-ons. We fill them for the configs we support (AddOnDeploymentConfig), in both lifecycle modes,
//! as upstream does: a missing config gets an empty hash.

use crate::addon::configuration::references::ConfigKey;
use crate::addon::names::{ADDON_DEPLOYMENT_CONFIG_RESOURCE, ADDON_GROUP, names_a_config};
use serde_json::{Map, Value, json};

/// The merge patch filling in the spec hashes of the status `status` (of an object at
/// `resource_version`), or `None` when every hash is already right. `hash_of` gives the spec hash
/// of an existing config, `None` for a missing one. Arrays are sent whole (a merge patch replaces
/// them); the resourceVersion makes a concurrent change of them fail instead of being overwritten.
pub fn hash_patch(
    status: Option<&Value>,
    resource_version: Option<&str>,
    hash_of: impl Fn(&ConfigKey) -> Option<String>,
) -> Option<Value> {
    let status = status?.as_object()?;
    let mut changed = Map::new();
    // The v1alpha1 spelling (v1beta1 says `defaultConfigReferences`).
    if let Some(defaults) = status.get("defaultconfigReferences").and_then(Value::as_array) {
        let mut defaults = defaults.clone();
        if fill_all(defaults.iter_mut(), &hash_of) {
            changed.insert("defaultconfigReferences".into(), Value::Array(defaults));
        }
    }
    if let Some(progressions) = status.get("installProgressions").and_then(Value::as_array) {
        let mut progressions = progressions.clone();
        let references = progressions
            .iter_mut()
            .filter_map(|p| p.get_mut("configReferences").and_then(Value::as_array_mut))
            .flatten();
        if fill_all(references, &hash_of) {
            changed.insert("installProgressions".into(), Value::Array(progressions));
        }
    }
    if changed.is_empty() {
        return None;
    }
    Some(json!({"metadata": {"resourceVersion": resource_version}, "status": changed}))
}

/// Fills every reference (each one, not only up to the first change). Returns whether any changed.
fn fill_all<'a>(
    references: impl Iterator<Item = &'a mut Value>,
    hash_of: &impl Fn(&ConfigKey) -> Option<String>,
) -> bool {
    let mut changed = false;
    for reference in references {
        changed |= fill(reference, hash_of);
    }
    changed
}

/// Sets the desired config's spec hash of one reference, if it is an AddOnDeploymentConfig with a
/// name (OCM's "no default" sentinel is none). Returns whether the hash changed.
fn fill(reference: &mut Value, hash_of: &impl Fn(&ConfigKey) -> Option<String>) -> bool {
    let ours = reference["group"] == ADDON_GROUP && reference["resource"] == ADDON_DEPLOYMENT_CONFIG_RESOURCE;
    let Some(desired) = reference.get_mut("desiredConfig").and_then(Value::as_object_mut) else {
        return false;
    };
    let text = |key: &str| {
        desired
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string()
    };
    let key = ConfigKey {
        namespace: text("namespace"),
        name: text("name"),
    };
    if !ours || !names_a_config(&key.name) {
        return false;
    }
    let hash = hash_of(&key).unwrap_or_default();
    if desired
        .get("specHash")
        .and_then(Value::as_str)
        .unwrap_or_default()
        == hash
    {
        return false;
    }
    desired.insert("specHash".into(), Value::String(hash));
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn adc_ref(namespace: &str, name: &str, hash: &str) -> Value {
        json!({"group": ADDON_GROUP, "resource": ADDON_DEPLOYMENT_CONFIG_RESOURCE,
               "desiredConfig": {"namespace": namespace, "name": name, "specHash": hash}})
    }

    fn hashes(key: &ConfigKey) -> Option<String> {
        match (key.namespace.as_str(), key.name.as_str()) {
            ("hub", "default") => Some("h-default".into()),
            ("hub", "gpu") => Some("h-gpu".into()),
            _ => None,
        }
    }

    #[test]
    fn ocms_leaked_no_default_sentinel_gets_no_hash() {
        // OCM v1.3.0 writes the conversion's sentinel into the CMA status (ocm #1526): it names no
        // config, so there is no hash to fill and nothing to write.
        let status = json!({
            "defaultconfigReferences": [adc_ref("", crate::addon::names::RESERVED_NO_DEFAULT_CONFIG, "")],
        });
        assert_eq!(hash_patch(Some(&status), Some("3"), |_| Some("h".into())), None);
    }

    #[test]
    fn fills_defaults_and_install_progressions_and_keeps_the_rest() {
        let mut gpu = adc_ref("hub", "gpu", "stale");
        gpu["lastAppliedConfig"] = json!({"name": "gpu"});
        let status = json!({
            "defaultconfigReferences": [
                adc_ref("hub", "default", ""),
                {"group": "example.com", "resource": "others",
                 "desiredConfig": {"namespace": "", "name": "x", "specHash": "theirs"}},
            ],
            "installProgressions": [
                {"placementRef": {"namespace": "p", "name": "gpu"},
                 "configReferences": [gpu],
                 "conditions": [{"type": "Progressing"}]},
                {"placementRef": {"namespace": "p", "name": "all"}, "configReferences": [adc_ref("hub", "default", "h-default")]},
            ],
        });
        let patch = hash_patch(Some(&status), Some("12"), hashes).expect("a patch");
        assert_eq!(patch["metadata"]["resourceVersion"], "12");
        let defaults = &patch["status"]["defaultconfigReferences"];
        assert_eq!(defaults[0]["desiredConfig"]["specHash"], "h-default");
        assert_eq!(
            defaults[1]["desiredConfig"]["specHash"], "theirs",
            "not a config of ours"
        );
        let progressions = &patch["status"]["installProgressions"];
        assert_eq!(
            progressions[0]["configReferences"][0]["desiredConfig"]["specHash"],
            "h-gpu"
        );
        assert_eq!(
            progressions[0]["configReferences"][0]["lastAppliedConfig"]["name"],
            "gpu"
        );
        assert_eq!(progressions[0]["conditions"][0]["type"], "Progressing");
        assert_eq!(progressions[1], status["installProgressions"][1]);

        // Applied, the same status needs nothing more.
        let mut written = status.clone();
        written["defaultconfigReferences"] = defaults.clone();
        written["installProgressions"] = progressions.clone();
        assert_eq!(hash_patch(Some(&written), Some("13"), hashes), None);
    }

    #[test]
    fn a_missing_config_gets_an_empty_hash_and_only_changed_arrays_are_sent() {
        let status = json!({
            "defaultconfigReferences": [adc_ref("hub", "gone", "old")],
            "installProgressions": [{"configReferences": [adc_ref("hub", "gpu", "h-gpu")]}],
        });
        let patch = hash_patch(Some(&status), Some("5"), hashes).expect("a patch");
        assert_eq!(
            patch["status"]["defaultconfigReferences"][0]["desiredConfig"]["specHash"],
            ""
        );
        assert!(patch["status"].get("installProgressions").is_none());
        // Nothing to fill: no status, no references, a reference without a name.
        assert_eq!(hash_patch(None, Some("5"), hashes), None);
        assert_eq!(hash_patch(Some(&json!({})), Some("5"), hashes), None);
        let unnamed = json!({"defaultconfigReferences": [adc_ref("hub", "", "")]});
        assert_eq!(hash_patch(Some(&unnamed), Some("5"), hashes), None);
    }
}
