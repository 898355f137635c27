use crate::{Condition, Extra, LabelSelector, Quantity, Time, ocm_root};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;
use std::ops::{Deref, DerefMut};

ocm_root! {
    /// A cluster registered with the hub.
    ManagedCluster { spec: ManagedClusterSpec, status: ManagedClusterStatus }
    group "cluster.open-cluster-management.io", version "v1", plural "managedclusters",
    scope k8s_openapi::ClusterResourceScope, namespaced false, status_subresource true
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSpec {
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hub_accepts_client: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_duration_seconds: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub taints: Vec<Taint>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A taint on a ManagedCluster; placements must tolerate it to select the cluster.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Taint {
    pub key: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `NoSelect`, `PreferNoSelect` or `NoSelectIfNew`.
    pub effect: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_added: Option<Time>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterStatus {
    #[serde(default, skip_serializing_if = "KeptList::is_absent")]
    pub conditions: KeptList<Condition>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub capacity: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub allocatable: BTreeMap<String, Quantity>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_claims: Vec<ManagedClusterClaim>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManagedClusterClaim {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub value: String,
}

ocm_root! {
    /// A group of ManagedClusters, by the cluster-set label or by a label selector.
    ManagedClusterSet { spec: ManagedClusterSetSpec, status: ManagedClusterSetStatus }
    group "cluster.open-cluster-management.io", version "v1beta2", plural "managedclustersets",
    scope k8s_openapi::ClusterResourceScope, namespaced false, status_subresource true
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSetSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_selector: Option<ManagedClusterSelector>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSelector {
    /// `ExclusiveClusterSetLabel` (the CRD default) or `LabelSelector`.
    #[serde(default = "default_selector_type")]
    pub selector_type: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
}

fn default_selector_type() -> String {
    "ExclusiveClusterSetLabel".to_string()
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSetStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(flatten)]
    pub extra: Extra,
}

ocm_root! {
    /// Makes a ManagedClusterSet usable by Placements in the binding's namespace.
    ManagedClusterSetBinding { spec: ManagedClusterSetBindingSpec, status: ManagedClusterSetBindingStatus }
    group "cluster.open-cluster-management.io", version "v1beta2", plural "managedclustersetbindings",
    scope k8s_openapi::NamespaceResourceScope, namespaced true, status_subresource true
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSetBindingSpec {
    #[serde(default)]
    pub cluster_set: String,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ManagedClusterSetBindingStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// A list that keeps whether the object had it at all: an absent key and an empty list read back
/// as they were written. OCM's CEL environment sees the Go object, whose `status.conditions` has no
/// `omitempty`: `null` when the object has no conditions key, `[]` when it has an empty list, and
/// `exists()` is an error on the first and false on the second (tests/conformance cel vectors).
#[derive(Clone, Debug, PartialEq)]
pub struct KeptList<T> {
    items: Vec<T>,
    present: bool,
}

impl<T> KeptList<T> {
    /// No key at all (what `Default` gives).
    pub fn absent() -> Self {
        Self {
            items: Vec::new(),
            present: false,
        }
    }

    /// Neither the key nor any item: serialized as nothing.
    pub fn is_absent(&self) -> bool {
        !self.present && self.items.is_empty()
    }
}

impl<T> Default for KeptList<T> {
    fn default() -> Self {
        Self::absent()
    }
}

impl<T> From<Vec<T>> for KeptList<T> {
    fn from(items: Vec<T>) -> Self {
        Self { items, present: true }
    }
}

impl<T> Deref for KeptList<T> {
    type Target = Vec<T>;
    fn deref(&self) -> &Vec<T> {
        &self.items
    }
}

/// Changing the items states the key, as writing a list into an object does.
impl<T> DerefMut for KeptList<T> {
    fn deref_mut(&mut self) -> &mut Vec<T> {
        self.present = true;
        &mut self.items
    }
}

impl<T> IntoIterator for KeptList<T> {
    type Item = T;
    type IntoIter = std::vec::IntoIter<T>;
    fn into_iter(self) -> Self::IntoIter {
        self.items.into_iter()
    }
}

impl<T: Serialize> Serialize for KeptList<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.items.serialize(serializer)
    }
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for KeptList<T> {
    /// A list states the key; `null` reads as absent, as the API server prunes it.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Ok(match Option::<Vec<T>>::deserialize(deserializer)? {
            Some(items) => Self::from(items),
            None => Self::absent(),
        })
    }
}
