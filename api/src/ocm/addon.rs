use crate::{Condition, Extra, ocm_root};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

ocm_root! {
    /// Declares an add-on on the hub: its metadata, supported configs and install strategy.
    ClusterManagementAddOn { spec: ClusterManagementAddOnSpec, status: ClusterManagementAddOnStatus }
    group "addon.open-cluster-management.io", version "v1alpha1", plural "clustermanagementaddons",
    scope k8s_openapi::ClusterResourceScope, namespaced false, status_subresource true
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOnSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on_meta: Option<AddOnMeta>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supported_configs: Vec<ConfigMeta>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_strategy: Option<InstallStrategy>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddOnMeta {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub display_name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMeta {
    #[serde(default)]
    pub group: String,
    pub resource: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_config: Option<ConfigReferent>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReferent {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InstallStrategy {
    /// `Manual` (the CRD default) or `Placements`.
    #[serde(rename = "type", default = "default_install_type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placements: Vec<PlacementStrategy>,
}

fn default_install_type() -> String {
    "Manual".to_string()
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStrategy {
    pub namespace: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<AddOnConfig>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A reference from an add-on to one of its configuration objects.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddOnConfig {
    #[serde(default)]
    pub group: String,
    pub resource: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterManagementAddOnStatus {
    #[serde(flatten)]
    pub extra: Extra,
}

ocm_root! {
    /// An add-on enabled on one managed cluster (namespace = cluster name, name = add-on name).
    ManagedClusterAddOn { spec: ManagedClusterAddOnSpec, status: ManagedClusterAddOnStatus }
    group "addon.open-cluster-management.io", version "v1alpha1", plural "managedclusteraddons",
    scope k8s_openapi::NamespaceResourceScope, namespaced true, status_subresource true
}

impl ManagedClusterAddOn {
    /// The owner reference of the cluster's score object to this add-on, so that removing the add-on
    /// removes the score. Neither a controller reference (the agent writes the score, the add-on's
    /// manager does not) nor blocking: `blockOwnerDeletion` would need the add-on's `finalizers`
    /// subresource where the API server enforces OwnerReferencesPermissionEnforcement.
    pub fn score_owner_reference(&self) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: <Self as crate::OcmKind>::API_VERSION.into(),
            kind: <Self as crate::OcmKind>::KIND.into(),
            name: self.metadata.name.clone().unwrap_or_default(),
            uid: self.metadata.uid.clone().unwrap_or_default(),
            controller: None,
            block_owner_deletion: None,
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOnSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configs: Vec<AddOnConfig>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterAddOnStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registrations: Vec<RegistrationConfig>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub health_check: Option<HealthCheck>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supported_configs: Vec<ConfigGroupResource>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub config_references: Vec<ConfigReference>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_objects: Vec<ObjectReference>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistrationConfig {
    pub signer_name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject: Option<Subject>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub organization_unit: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HealthCheck {
    /// `Lease` (the CRD default) or `Customized`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mode: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigGroupResource {
    #[serde(default)]
    pub group: String,
    pub resource: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigReference {
    #[serde(default)]
    pub group: String,
    pub resource: String,
    /// Deprecated upstream but still required by the v1alpha1 schema.
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_config: Option<ConfigSpecHash>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_applied_config: Option<ConfigSpecHash>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_observed_generation: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSpecHash {
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub spec_hash: String,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReference {
    pub group: String,
    pub resource: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub namespace: String,
    pub name: String,
}

ocm_root! {
    /// Per-add-on deployment configuration (variables, node placement, registries, namespace).
    AddOnDeploymentConfig { spec: AddOnDeploymentConfigSpec, status: serde_json::Value }
    group "addon.open-cluster-management.io", version "v1alpha1", plural "addondeploymentconfigs",
    scope k8s_openapi::NamespaceResourceScope, namespaced true, status_subresource false
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddOnDeploymentConfigSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub customized_variables: Vec<CustomizedVariable>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_placement: Option<NodePlacement>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub registries: Vec<ImageMirror>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_install_namespace: Option<String>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CustomizedVariable {
    pub name: String,
    #[serde(default)]
    pub value: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NodePlacement {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<k8s_openapi::api::core::v1::Toleration>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageMirror {
    pub mirror: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub source: String,
}
