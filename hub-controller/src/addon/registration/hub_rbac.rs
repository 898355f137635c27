//! Hub permissions of the agent: a Role and RoleBinding in the cluster namespace, and read access
//! to WorkloadShapes.
//!
//! The agent may read and write AddOnPlacementScores (and their status) in its own cluster's
//! namespace and nothing else. The binding names the agent's user and its per-cluster group only,
//! never the add-on-wide group every cluster's agent carries, so an agent is refused anywhere else.
//!
//! WorkloadShapes are cluster-scoped, which no Role can grant: one ClusterRole (get, list, watch on
//! `workloadshapes`, nothing else) and one ClusterRoleBinding naming exactly the subjects of the
//! per-cluster RoleBindings of every current add-on. Both are owned by the ClusterManagementAddOn (a
//! cluster-scoped object may only have cluster-scoped owners), so uninstalling removes them; an
//! add-on removed from one cluster leaves the binding at the next pass over the add-on.

use crate::addon::names;
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use ocm_score_api::{AddOnPlacementScore, ManagedClusterAddOn, OcmKind, RegistrationConfig, WorkloadShape};
use std::collections::BTreeMap;

/// The Role granting score access in `cluster`'s namespace.
pub fn role(addon: &str, cluster: &str, owner: &OwnerReference) -> Role {
    let scores = |resource: String, verbs: &[&str]| PolicyRule {
        api_groups: Some(vec![AddOnPlacementScore::GROUP.to_string()]),
        resources: Some(vec![resource]),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    };
    Role {
        metadata: meta(addon, cluster, owner),
        rules: Some(vec![
            scores(
                AddOnPlacementScore::PLURAL.to_string(),
                &["get", "list", "watch", "create", "update", "patch"],
            ),
            scores(
                format!("{}/status", AddOnPlacementScore::PLURAL),
                &["update", "patch"],
            ),
        ]),
    }
}

/// The RoleBinding of [`role`] to the agent's registration identity in `cluster`.
pub fn role_binding(
    addon: &str,
    cluster: &str,
    registrations: &[RegistrationConfig],
    owner: &OwnerReference,
) -> RoleBinding {
    RoleBinding {
        metadata: meta(addon, cluster, owner),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: names::hub_role_name(addon),
        },
        subjects: Some(subjects(addon, cluster, registrations)),
    }
}

/// The registration user plus the groups that name this cluster. Groups shared by every cluster
/// (`system:open-cluster-management:addon:<addon>`, `system:authenticated`) are left out on purpose.
fn subjects(addon: &str, cluster: &str, registrations: &[RegistrationConfig]) -> Vec<Subject> {
    let cluster_prefix = format!("system:open-cluster-management:cluster:{cluster}:");
    let subject = |kind: &str, name: &str| Subject {
        api_group: Some("rbac.authorization.k8s.io".into()),
        kind: kind.into(),
        name: name.into(),
        namespace: None,
    };
    let mut out = Vec::new();
    for reg in registrations
        .iter()
        .filter(|r| r.signer_name == names::KUBE_APISERVER_CLIENT_SIGNER)
    {
        let Some(s) = &reg.subject else { continue };
        if !s.user.is_empty() {
            out.push(subject("User", &s.user));
        }
        for group in s.groups.iter().filter(|g| g.starts_with(&cluster_prefix)) {
            out.push(subject("Group", group));
        }
    }
    if out.is_empty() {
        // No registration yet: bind the group the default registration will use.
        out.push(subject("Group", &names::cluster_addon_group(cluster, addon)));
    }
    out
}

/// The ClusterRole letting agents read WorkloadShapes, owned by the ClusterManagementAddOn.
pub fn shapes_cluster_role(addon: &str, owner: &OwnerReference) -> ClusterRole {
    ClusterRole {
        metadata: cluster_meta(addon, owner),
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec![<WorkloadShape as kube::Resource>::group(&()).to_string()]),
            resources: Some(vec![<WorkloadShape as kube::Resource>::plural(&()).to_string()]),
            verbs: ["get", "list", "watch"].map(String::from).to_vec(),
            ..Default::default()
        }]),
        aggregation_rule: None,
    }
}

/// The ClusterRoleBinding of [`shapes_cluster_role`] to the agents of `addons` (each one's
/// RoleBinding subjects; add-ons being deleted are left out), in a stable order.
pub fn shapes_cluster_role_binding(
    addon: &str,
    addons: &[&ManagedClusterAddOn],
    owner: &OwnerReference,
) -> ClusterRoleBinding {
    let mut subjects: Vec<Subject> = addons
        .iter()
        .filter(|a| a.name_any() == addon && a.metadata.deletion_timestamp.is_none())
        .filter_map(|a| {
            let cluster = a.namespace()?;
            Some(subjects(
                addon,
                &cluster,
                &crate::addon::registration::registrations(addon, a),
            ))
        })
        .flatten()
        .collect();
    subjects.sort_by(|a, b| (&a.kind, &a.name).cmp(&(&b.kind, &b.name)));
    subjects.dedup();
    ClusterRoleBinding {
        metadata: cluster_meta(addon, owner),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: names::shapes_reader_name(addon),
        },
        subjects: Some(subjects),
    }
}

pub fn cluster_role_up_to_date(existing: &ClusterRole, desired: &ClusterRole) -> bool {
    existing.rules == desired.rules && metadata_up_to_date(&existing.metadata, &desired.metadata)
}

pub fn cluster_role_binding_up_to_date(existing: &ClusterRoleBinding, desired: &ClusterRoleBinding) -> bool {
    existing.role_ref == desired.role_ref
        && existing.subjects.as_deref().unwrap_or_default() == desired.subjects.as_deref().unwrap_or_default()
        && metadata_up_to_date(&existing.metadata, &desired.metadata)
}

fn cluster_meta(addon: &str, owner: &OwnerReference) -> ObjectMeta {
    ObjectMeta {
        name: Some(names::shapes_reader_name(addon)),
        labels: Some(BTreeMap::from([(
            names::ADDON_NAME_LABEL.to_string(),
            addon.to_string(),
        )])),
        owner_references: Some(vec![owner.clone()]),
        ..Default::default()
    }
}

fn meta(addon: &str, cluster: &str, owner: &OwnerReference) -> ObjectMeta {
    ObjectMeta {
        name: Some(names::hub_role_name(addon)),
        namespace: Some(cluster.to_string()),
        labels: Some(BTreeMap::from([(
            names::ADDON_NAME_LABEL.to_string(),
            addon.to_string(),
        )])),
        owner_references: Some(vec![owner.clone()]),
        ..Default::default()
    }
}

/// Whether `existing` already grants exactly what `desired` does (ignoring server-set metadata).
pub fn role_up_to_date(existing: &Role, desired: &Role) -> bool {
    existing.rules == desired.rules && metadata_up_to_date(&existing.metadata, &desired.metadata)
}

pub fn role_binding_up_to_date(existing: &RoleBinding, desired: &RoleBinding) -> bool {
    existing.role_ref == desired.role_ref
        && existing.subjects == desired.subjects
        && metadata_up_to_date(&existing.metadata, &desired.metadata)
}

/// Our labels present and our owner references present; other labels and owners are left alone.
pub fn metadata_up_to_date(existing: &ObjectMeta, desired: &ObjectMeta) -> bool {
    let labels_ok = desired
        .labels
        .iter()
        .flatten()
        .all(|(k, v)| existing.labels.as_ref().and_then(|l| l.get(k)) == Some(v));
    let owners_ok = desired.owner_references.iter().flatten().all(|want| {
        existing
            .owner_references
            .iter()
            .flatten()
            .any(|have| have == want)
    });
    labels_ok && owners_ok
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addon::registration;
    use ocm_score_api::{ManagedClusterAddOn, ObjectMeta as Meta};

    fn owner() -> OwnerReference {
        OwnerReference {
            api_version: "addon.open-cluster-management.io/v1alpha1".into(),
            kind: "ManagedClusterAddOn".into(),
            name: "a".into(),
            uid: "uid-1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    #[test]
    fn role_grants_only_scores_in_the_cluster_namespace() {
        let r = role("a", "c1", &owner());
        assert_eq!(r.metadata.namespace.as_deref(), Some("c1"));
        assert_eq!(
            r.metadata.name.as_deref(),
            Some("open-cluster-management-a-agent")
        );
        let rules = r.rules.expect("rules");
        assert_eq!(rules.len(), 2);
        assert!(
            rules
                .iter()
                .all(|r| r.api_groups == Some(vec!["cluster.open-cluster-management.io".to_string()]))
        );
        assert_eq!(rules[0].resources, Some(vec!["addonplacementscores".to_string()]));
        assert_eq!(
            rules[0].verbs,
            ["get", "list", "watch", "create", "update", "patch"]
        );
        assert_eq!(
            rules[1].resources,
            Some(vec!["addonplacementscores/status".to_string()])
        );
        assert_eq!(rules[1].verbs, ["update", "patch"]);
        assert!(
            rules
                .iter()
                .all(|r| r.resource_names.is_none() && r.non_resource_urls.is_none())
        );
    }

    #[test]
    fn binding_names_the_agent_user_and_cluster_group_only() {
        let mca = ManagedClusterAddOn {
            metadata: Meta {
                name: Some("a".into()),
                namespace: Some("c1".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        let regs = registration::registrations("a", &mca);
        let b = role_binding("a", "c1", &regs, &owner());
        let subjects: Vec<(String, String)> = b
            .subjects
            .expect("subjects")
            .into_iter()
            .map(|s| (s.kind, s.name))
            .collect();
        assert_eq!(
            subjects,
            vec![
                (
                    "User".into(),
                    "system:open-cluster-management:cluster:c1:addon:a:agent:a".into()
                ),
                (
                    "Group".into(),
                    "system:open-cluster-management:cluster:c1:addon:a".into()
                ),
            ]
        );
        assert_eq!(b.role_ref.kind, "Role");
        assert_eq!(b.metadata.owner_references, Some(vec![owner()]));
    }

    #[test]
    fn binding_before_registration_uses_the_cluster_group() {
        let b = role_binding("a", "c1", &[], &owner());
        let s = b.subjects.expect("subjects");
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].name, "system:open-cluster-management:cluster:c1:addon:a");
    }

    #[test]
    fn shapes_are_readable_by_exactly_the_agents_of_current_add_ons() {
        let role = shapes_cluster_role("a", &owner());
        assert_eq!(
            role.metadata.name.as_deref(),
            Some("open-cluster-management-a-agent-shapes")
        );
        let rules = role.rules.expect("rules");
        assert_eq!(rules.len(), 1);
        assert_eq!(
            rules[0].api_groups,
            Some(vec!["tiering.ocm-score.io".to_string()])
        );
        assert_eq!(rules[0].resources, Some(vec!["workloadshapes".to_string()]));
        assert_eq!(rules[0].verbs, ["get", "list", "watch"]);
        assert!(rules[0].resource_names.is_none() && rules[0].non_resource_urls.is_none());

        let addon = |cluster: &str, deleting: bool| {
            let mut a = ManagedClusterAddOn::default();
            a.metadata.name = Some("a".into());
            a.metadata.namespace = Some(cluster.into());
            if deleting {
                a.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    jiff::Timestamp::UNIX_EPOCH,
                ));
            }
            a
        };
        let (c2, c1, gone) = (addon("c2", false), addon("c1", false), addon("c3", true));
        let binding = shapes_cluster_role_binding("a", &[&c2, &c1, &gone], &owner());
        assert_eq!(binding.role_ref.kind, "ClusterRole");
        assert_eq!(binding.role_ref.name, "open-cluster-management-a-agent-shapes");
        let names: Vec<String> = binding
            .subjects
            .expect("subjects")
            .into_iter()
            .map(|s| format!("{}:{}", s.kind, s.name))
            .collect();
        assert_eq!(
            names,
            [
                "Group:system:open-cluster-management:cluster:c1:addon:a",
                "Group:system:open-cluster-management:cluster:c2:addon:a",
                "User:system:open-cluster-management:cluster:c1:addon:a:agent:a",
                "User:system:open-cluster-management:cluster:c2:addon:a:agent:a",
            ]
        );
    }

    #[test]
    fn up_to_date_ignores_foreign_labels_but_not_changed_rules() {
        let desired = role("a", "c1", &owner());
        let mut existing = desired.clone();
        existing
            .metadata
            .labels
            .get_or_insert_default()
            .insert("x".into(), "y".into());
        existing.metadata.resource_version = Some("5".into());
        assert!(role_up_to_date(&existing, &desired));
        existing.rules.get_or_insert_default()[0]
            .verbs
            .push("delete".into());
        assert!(!role_up_to_date(&existing, &desired));
        let mut unowned = desired.clone();
        unowned.metadata.owner_references = None;
        assert!(!role_up_to_date(&unowned, &desired));
    }
}
