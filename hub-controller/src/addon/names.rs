//! Names, labels and annotations the OCM add-on contract fixes (OCM's addon-framework and API;
//! docs/design/addon-rollouts.md).
//!
//! Everything another OCM component reads or writes by name lives here, so a rename is one edit.

/// The add-on name our ClusterManagementAddOn uses by default (same as OCM's resource-usage-collect).
pub const DEFAULT_ADDON_NAME: &str = "resource-usage-collect";
/// Where the klusterlet installs add-on agents unless a config says otherwise.
pub const DEFAULT_INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
/// The signer of kube-apiserver client certificates: the add-on's hub credentials.
pub const KUBE_APISERVER_CLIENT_SIGNER: &str = "kubernetes.io/kube-apiserver-client";

/// Label on ManifestWorks and CSRs naming the add-on.
pub const ADDON_NAME_LABEL: &str = ocm_score_api::well_known::ADDON_NAME_LABEL;
/// Label on add-on CSRs naming the managed cluster.
pub const CLUSTER_NAME_LABEL: &str = "open-cluster-management.io/cluster-name";
/// CMA annotation saying who runs the add-on's lifecycle (`self` or `addon-manager`).
pub const LIFECYCLE_ANNOTATION: &str = ocm_score_api::well_known::LIFECYCLE_ANNOTATION;
/// ManagedCluster annotations with this prefix are copied onto the add-ons created for it.
pub const ADDON_ANNOTATION_PREFIX: &str = "addon.open-cluster-management.io";
/// The v1beta1 view of v1alpha1 `spec.installNamespace`.
pub const INSTALL_NAMESPACE_ANNOTATION: &str = "addon.open-cluster-management.io/v1alpha1-install-namespace";
/// ManifestWork annotation: JSON map of config key to spec hash of the configs it was rendered from.
pub const CONFIG_SPEC_HASH_ANNOTATION: &str = "open-cluster-management.io/config-spec-hash";
/// The agent Deployment's digest of itself as rendered, which the work's rollout rule checks.
pub const RENDERED_DIGEST_ANNOTATION: &str = "ocm-score.io/rendered-sha256";
/// A manifest carrying this annotation is left on the managed cluster when the work is deleted.
pub const DELETION_ORPHAN_ANNOTATION: &str = "addon.open-cluster-management.io/deletion-orphan";
/// OCM's mark of an add-on agent's namespace (`"true"`): the klusterlet operator copies its image
/// pull secret ([`IMAGE_PULL_SECRET`]) into every namespace so labelled, and newer klusterlets their
/// TLS profile too.
pub const AGENT_NAMESPACE_LABEL: &str = "addon.open-cluster-management.io/namespace";
/// The pull secret the klusterlet operator copies into labelled add-on namespaces: what a hub
/// admin sets once for the klusterlet's private registry, our agent pulls its image with.
pub const IMAGE_PULL_SECRET: &str = "open-cluster-management-image-pull-credentials";
/// The finalizer earlier builds of this controller put on ManagedClusterAddOns. It held a deletion until our
/// controller had cleaned up, so without the controller it blocked uninstall and cluster detach;
/// owner references do that job now, and the controller removes this finalizer wherever it finds it.
pub const LEGACY_CLEANUP_FINALIZER: &str = "ocm-score.io/addon-cleanup";

/// The name OCM's add-on conversion webhook gives a v1alpha1 supported config without a default when
/// it converts to v1beta1 (`defaultConfigs[].name`). Never a real config (no object name starts with
/// `__`); OCM v1.3.0 leaks it into ClusterManagementAddOn status (ocm #1526, fixed in v1.3.1).
pub const RESERVED_NO_DEFAULT_CONFIG: &str = "__reserved_no_default__";

/// Whether a config reference's name names a config at all (not empty, not OCM's sentinel).
pub fn names_a_config(name: &str) -> bool {
    !name.is_empty() && name != RESERVED_NO_DEFAULT_CONFIG
}

/// Group and resource of AddOnDeploymentConfig, as config references name it.
pub const ADDON_GROUP: &str = "addon.open-cluster-management.io";
pub const ADDON_DEPLOYMENT_CONFIG_RESOURCE: &str = "addondeploymentconfigs";

/// Requester of CSRs that the OCM gRPC server creates on a cluster's behalf.
pub const GRPC_SERVER_REQUESTER: &str = "system:serviceaccount:open-cluster-management-hub:grpc-server-sa";
/// On a CSR the OCM gRPC server created: the user it authenticated, who asked for the CSR.
pub const CSR_USER_ANNOTATION: &str = "open-cluster-management.io/csr-user";

/// Name of the (only) deploy ManifestWork: our manifests always fit in one.
pub fn deploy_work_name(addon: &str) -> String {
    format!("addon-{addon}-deploy-0")
}

/// The Secret the klusterlet writes next to the agent once its CSR is approved.
pub fn hub_kubeconfig_secret(addon: &str) -> String {
    format!("{addon}-hub-kubeconfig")
}

/// The user our agent authenticates to the hub as. The agent name is the add-on name: stable across
/// controller restarts, so the klusterlet never has to re-register.
pub fn agent_user(cluster: &str, addon: &str) -> String {
    format!("system:open-cluster-management:cluster:{cluster}:addon:{addon}:agent:{addon}")
}

/// The group every agent of this add-on on this cluster belongs to. Hub RBAC binds only this one.
pub fn cluster_addon_group(cluster: &str, addon: &str) -> String {
    format!("system:open-cluster-management:cluster:{cluster}:addon:{addon}")
}

/// The group every agent of this add-on belongs to, on every cluster.
pub fn addon_group(addon: &str) -> String {
    format!("system:open-cluster-management:addon:{addon}")
}

/// What a klusterlet registration agent of `cluster` authenticates as starts with this. The trailing
/// colon matters: without it cluster `prod-2` would pass for cluster `prod`.
pub fn cluster_requester_prefix(cluster: &str) -> String {
    format!("system:open-cluster-management:{cluster}:")
}

/// Role and RoleBinding on the hub, in the cluster namespace, letting the agent write its score.
/// (Colon-free: Kubernetes allows colons in RBAC names, but not every tool does.)
pub fn hub_role_name(addon: &str) -> String {
    format!("open-cluster-management-{addon}-agent")
}

/// The ClusterRole and ClusterRoleBinding on the hub letting every agent of the add-on read
/// WorkloadShapes.
pub fn shapes_reader_name(addon: &str) -> String {
    format!("open-cluster-management-{addon}-agent-shapes")
}

/// Names of the agent's objects on the managed cluster.
pub fn agent_name(addon: &str) -> String {
    format!("{addon}-agent")
}

/// Cluster-scoped RBAC of the agent on the managed cluster.
pub fn agent_cluster_role_name(addon: &str) -> String {
    format!("open-cluster-management-{addon}-agent")
}

/// The key a ManifestWork's config-spec-hash map uses for one config:
/// `<resource>.<group>/<namespace>/<name>` (no `.<group>` for the core group).
pub fn config_hash_key(group: &str, resource: &str, namespace: &str, name: &str) -> String {
    if group.is_empty() {
        format!("{resource}/{namespace}/{name}")
    } else {
        format!("{resource}.{group}/{namespace}/{name}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_the_contract() {
        assert_eq!(
            deploy_work_name("resource-usage-collect"),
            "addon-resource-usage-collect-deploy-0"
        );
        assert_eq!(hub_kubeconfig_secret("x"), "x-hub-kubeconfig");
        assert_eq!(
            agent_user("c1", "a"),
            "system:open-cluster-management:cluster:c1:addon:a:agent:a"
        );
        assert_eq!(
            cluster_addon_group("c1", "a"),
            "system:open-cluster-management:cluster:c1:addon:a"
        );
        assert_eq!(addon_group("a"), "system:open-cluster-management:addon:a");
        assert_eq!(
            config_hash_key(ADDON_GROUP, ADDON_DEPLOYMENT_CONFIG_RESOURCE, "ns", "cfg"),
            "addondeploymentconfigs.addon.open-cluster-management.io/ns/cfg"
        );
        assert_eq!(config_hash_key("", "configmaps", "", "c"), "configmaps//c");
    }

    #[test]
    fn requester_prefix_does_not_let_a_cluster_pass_for_its_prefix() {
        let prod = cluster_requester_prefix("prod");
        assert!("system:open-cluster-management:prod:agent1".starts_with(&prod));
        assert!(!"system:open-cluster-management:prod-2:agent1".starts_with(&prod));
    }
}
