//! What makes an add-on's hub objects go with it, without our controller.
//!
//! The hub Role, RoleBinding and the agent's ManifestWork are created by us with an owner reference
//! to the ManagedClusterAddOn. The cluster's score is created by the agent, which does not know the
//! add-on's uid; we add the owner reference once the score appears. Then deleting the add-on (by hand,
//! by the install strategy, by deleting the ClusterManagementAddOn, or by OCM detaching the cluster)
//! lets the garbage collector remove everything, whether or not our controller runs.
//!
//! The reference on the score is `ManagedClusterAddOn::score_owner_reference`, which the agent sets
//! itself where no manager of ours runs (the AddOnTemplate install, `--owned-by-addon`).

use crate::addon::names;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use ocm_score_api::{ManagedClusterAddOn, OcmKind};
use serde_json::{Value, json};

/// Whether an object names some ManagedClusterAddOn called `addon` as owner (whatever its uid: a
/// reference to a deleted add-on is the garbage collector's to resolve, not ours).
pub fn names_addon_owner(meta: &ObjectMeta, addon: &str) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.kind == ManagedClusterAddOn::KIND && o.name == addon)
}

/// The merge patch giving `score` its owner reference to `addon`, or `None` when it has it. Other
/// owners stay; a reference to an earlier add-on of the same name is replaced. The resourceVersion
/// makes a concurrent change fail instead of being overwritten.
pub fn score_adoption_patch(score: &ObjectMeta, addon: &ManagedClusterAddOn) -> Option<Value> {
    let uid = addon.metadata.uid.as_deref().filter(|u| !u.is_empty())?;
    let owners = score.owner_references.as_deref().unwrap_or_default();
    if owners.iter().any(|o| o.uid == uid) {
        return None;
    }
    let name = addon.name_any();
    let mut adopted: Vec<OwnerReference> = owners
        .iter()
        .filter(|o| !(o.kind == ManagedClusterAddOn::KIND && o.name == name))
        .cloned()
        .collect();
    adopted.push(addon.score_owner_reference());
    Some(json!({"metadata": {"ownerReferences": adopted, "resourceVersion": score.resource_version}}))
}

/// The merge patch removing the legacy cleanup finalizer from `addon`, or `None` when it has none.
pub fn legacy_finalizer_removal(addon: &ManagedClusterAddOn) -> Option<Value> {
    let finalizers = addon.finalizers();
    if !finalizers.iter().any(|f| f == names::LEGACY_CLEANUP_FINALIZER) {
        return None;
    }
    let kept: Vec<&String> = finalizers
        .iter()
        .filter(|f| *f != names::LEGACY_CLEANUP_FINALIZER)
        .collect();
    Some(json!({"metadata": {"finalizers": kept, "resourceVersion": addon.resource_version()}}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addon(uid: &str) -> ManagedClusterAddOn {
        let mut a = ManagedClusterAddOn::default();
        a.metadata.name = Some("a".into());
        a.metadata.namespace = Some("c1".into());
        a.metadata.uid = Some(uid.into());
        a.metadata.resource_version = Some("7".into());
        a
    }

    fn owner(kind: &str, name: &str, uid: &str) -> OwnerReference {
        OwnerReference {
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
            ..Default::default()
        }
    }

    #[test]
    fn an_unowned_score_is_adopted_once_without_blocking_or_controlling() {
        let score = ObjectMeta {
            resource_version: Some("41".into()),
            ..Default::default()
        };
        let patch = score_adoption_patch(&score, &addon("u1")).expect("adopted");
        assert_eq!(patch["metadata"]["resourceVersion"], "41");
        let refs = &patch["metadata"]["ownerReferences"];
        assert_eq!(
            refs,
            &json!([{"apiVersion": "addon.open-cluster-management.io/v1alpha1",
                     "kind": "ManagedClusterAddOn", "name": "a", "uid": "u1"}])
        );
        assert!(!names_addon_owner(&score, "a"));
        let owned = ObjectMeta {
            owner_references: serde_json::from_value(refs.clone()).expect("refs"),
            ..score
        };
        assert!(names_addon_owner(&owned, "a"));
        assert_eq!(score_adoption_patch(&owned, &addon("u1")), None);
    }

    #[test]
    fn other_owners_stay_and_an_earlier_addon_is_replaced() {
        let score = ObjectMeta {
            owner_references: Some(vec![
                owner("ConfigMap", "keep", "k"),
                owner("ManagedClusterAddOn", "a", "old"),
                owner("ManagedClusterAddOn", "other-addon", "o"),
            ]),
            ..Default::default()
        };
        let patch = score_adoption_patch(&score, &addon("new")).expect("adopted");
        let uids: Vec<&str> = patch["metadata"]["ownerReferences"]
            .as_array()
            .expect("list")
            .iter()
            .filter_map(|o| o["uid"].as_str())
            .collect();
        assert_eq!(uids, ["k", "o", "new"]);
        // An add-on without uid (not from the server) adopts nothing.
        assert_eq!(score_adoption_patch(&score, &addon("")), None);
    }

    #[test]
    fn the_legacy_finalizer_is_removed_and_others_kept() {
        let mut a = addon("u1");
        assert_eq!(legacy_finalizer_removal(&a), None);
        a.metadata.finalizers = Some(vec![
            "example.com/keep".into(),
            names::LEGACY_CLEANUP_FINALIZER.into(),
        ]);
        assert_eq!(
            legacy_finalizer_removal(&a),
            Some(json!({"metadata": {"finalizers": ["example.com/keep"], "resourceVersion": "7"}}))
        );
    }
}
