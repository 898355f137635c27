//! The parts of Pods and Nodes that resource accounting reads, decodable straight from the API's JSON.
//!
//! Decoding into these instead of `k8s_openapi` Pods means a watch never materializes whole objects
//! (managedFields, env, volumes, ...): serde skips every field not named here. They implement
//! `kube::Resource` so `kube::Api` and the runtime watcher can use them directly.

use super::quantity::QuantityText;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde::{Deserialize, Deserializer};
use std::borrow::Cow;

/// `name → quantity` as in `requests`, `allocatable` or `overhead`, kept in wire order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceList(pub Vec<(String, QuantityText)>);

impl<'de> Deserialize<'de> for ResourceList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = ResourceList;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a map of resource names to quantities")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::with_capacity(map.size_hint().unwrap_or(2));
                while let Some(entry) = map.next_entry::<String, QuantityText>()? {
                    entries.push(entry);
                }
                Ok(ResourceList(entries))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(ResourceList::default())
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<Self::Value, E> {
                Ok(ResourceList::default())
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// Accepts `null` where a list or struct is expected (some clients write explicit nulls).
fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// The identity fields of `metadata`, the labels (the fits scores' pod selectors read them) and
/// the deletion timestamp (topology spread skips terminating pods); annotations and managedFields
/// are skipped.
fn slim_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Wire {
        name: Option<String>,
        namespace: Option<String>,
        resource_version: Option<String>,
        #[serde(default)]
        labels: Option<std::collections::BTreeMap<String, String>>,
        #[serde(default)]
        deletion_timestamp: Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>,
    }
    let w = Wire::deserialize(d)?;
    Ok(ObjectMeta {
        name: w.name,
        namespace: w.namespace,
        resource_version: w.resource_version,
        labels: w.labels.filter(|l| !l.is_empty()),
        deletion_timestamp: w.deletion_timestamp,
        ..Default::default()
    })
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct SlimPod {
    #[serde(default, deserialize_with = "slim_meta")]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: SlimPodSpec,
    #[serde(default, deserialize_with = "null_as_default")]
    pub status: SlimPodStatus,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimPodSpec {
    #[serde(default)]
    pub node_name: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub containers: Vec<SlimContainer>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub init_containers: Vec<SlimContainer>,
    #[serde(default)]
    pub overhead: ResourceList,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimContainer {
    #[serde(default)]
    pub name: String,
    /// `Always` on an init container makes it a sidecar.
    #[serde(default)]
    pub restart_policy: Option<String>,
    #[serde(default, deserialize_with = "null_as_default")]
    pub resources: SlimResources,
    /// Only the host-port fields (the fits scores' host ports).
    #[serde(default, deserialize_with = "null_as_default")]
    pub ports: Vec<SlimPort>,
}

/// A container port's host side; `hostPort` 0 or absent binds nothing on the node.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SlimPort {
    #[serde(default)]
    pub host_port: Option<i32>,
    #[serde(default)]
    pub protocol: Option<String>,
    #[serde(default, rename = "hostIP")]
    pub host_ip: Option<String>,
}

impl SlimContainer {
    pub fn is_sidecar(&self) -> bool {
        self.restart_policy.as_deref() == Some("Always")
    }
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct SlimResources {
    /// Only requests count; limits are never read.
    #[serde(default)]
    pub requests: ResourceList,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct SlimPodStatus {
    #[serde(default)]
    pub phase: Option<String>,
}

impl SlimPod {
    /// Succeeded and Failed pods hold no resources; every other phase (or none) does.
    pub fn is_terminal(&self) -> bool {
        matches!(self.status.phase.as_deref(), Some("Succeeded" | "Failed"))
    }

    /// Being deleted (a deletion timestamp is set).
    pub fn is_terminating(&self) -> bool {
        self.metadata.deletion_timestamp.is_some()
    }

    /// The node the pod is bound to, if any.
    pub fn node_name(&self) -> Option<&str> {
        self.spec.node_name.as_deref().filter(|n| !n.is_empty())
    }
}

/// A node's identity fields and its labels (the fits scores match shapes' `nodeSelector`).
fn node_meta<'de, D: Deserializer<'de>>(d: D) -> Result<ObjectMeta, D::Error> {
    #[derive(Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Wire {
        name: Option<String>,
        resource_version: Option<String>,
        #[serde(default)]
        labels: Option<std::collections::BTreeMap<String, String>>,
    }
    let w = Wire::deserialize(d)?;
    Ok(ObjectMeta {
        name: w.name,
        resource_version: w.resource_version,
        labels: w.labels.filter(|l| !l.is_empty()),
        ..Default::default()
    })
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct SlimNode {
    #[serde(default, deserialize_with = "node_meta")]
    pub metadata: ObjectMeta,
    #[serde(default, deserialize_with = "null_as_default")]
    pub spec: SlimNodeSpec,
    #[serde(default, deserialize_with = "null_as_default")]
    pub status: SlimNodeStatus,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct SlimNodeSpec {
    #[serde(default)]
    pub unschedulable: Option<bool>,
    /// Read by the fits scores only (the cluster scores ignore taints).
    #[serde(default, deserialize_with = "null_as_default")]
    pub taints: Vec<SlimTaint>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
pub struct SlimTaint {
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub value: Option<String>,
    /// `NoSchedule`, `PreferNoSchedule` or `NoExecute`.
    #[serde(default)]
    pub effect: String,
}

impl SlimTaint {
    /// Whether the taint keeps pods that do not tolerate it off the node (PreferNoSchedule does not).
    pub fn repels(&self) -> bool {
        matches!(self.effect.as_str(), "NoSchedule" | "NoExecute")
    }
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct SlimNodeStatus {
    #[serde(default)]
    pub allocatable: ResourceList,
    #[serde(default, deserialize_with = "null_as_default")]
    pub conditions: Vec<SlimNodeCondition>,
}

#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
pub struct SlimNodeCondition {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub status: String,
}

impl SlimNode {
    /// Whether pods can be scheduled onto the node: its Ready condition is "True" and it is not
    /// cordoned. Taints and pressure conditions are deliberately ignored.
    pub fn is_eligible(&self) -> bool {
        let ready = self
            .status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        ready && !self.spec.unschedulable.unwrap_or(false)
    }
}

macro_rules! core_v1_resource {
    ($ty:ty, $kind:literal, $plural:literal, $scope:ty) => {
        impl kube::Resource for $ty {
            type DynamicType = ();
            type Scope = $scope;
            fn kind(_: &()) -> Cow<'_, str> {
                $kind.into()
            }
            fn group(_: &()) -> Cow<'_, str> {
                "".into()
            }
            fn version(_: &()) -> Cow<'_, str> {
                "v1".into()
            }
            fn plural(_: &()) -> Cow<'_, str> {
                $plural.into()
            }
            fn meta(&self) -> &ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

core_v1_resource!(SlimPod, "Pod", "pods", k8s_openapi::NamespaceResourceScope);
core_v1_resource!(SlimNode, "Node", "nodes", k8s_openapi::ClusterResourceScope);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_a_full_pod_keeping_only_what_accounting_needs() {
        let pod: SlimPod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "42",
                         "labels": {"app": "web"}, "managedFields": [{"manager": "kubectl"}]},
            "spec": {
                "nodeName": "n1",
                "initContainers": [{"name": "proxy", "restartPolicy": "Always",
                                    "resources": {"requests": {"cpu": "100m"}}}],
                "containers": [{"name": "app", "image": "x", "env": [{"name": "A", "value": "b"}],
                                "resources": {"requests": {"cpu": "1", "memory": 1024},
                                              "limits": {"cpu": "2"}}}],
                "overhead": {"cpu": "10m"},
                "volumes": [{"name": "v", "emptyDir": {}}]
            },
            "status": {"phase": "Running", "podIP": "10.0.0.1"}
        }))
        .expect("decodes");
        assert_eq!(pod.metadata.name.as_deref(), Some("web"));
        assert_eq!(pod.metadata.resource_version.as_deref(), Some("42"));
        assert!(pod.metadata.annotations.is_none() && pod.metadata.managed_fields.is_none());
        assert_eq!(
            pod.metadata.labels.as_ref().map(|l| l["app"].as_str()),
            Some("web")
        );
        assert_eq!(pod.node_name(), Some("n1"));
        assert!(pod.spec.init_containers[0].is_sidecar());
        assert_eq!(pod.spec.containers[0].resources.requests.0.len(), 2);
        assert_eq!(pod.spec.containers[0].resources.requests.0[1].1.0, "1024");
        assert_eq!(pod.spec.overhead.0[0].0, "cpu");
        assert!(!pod.is_terminal());
    }

    #[test]
    fn tolerates_nulls_and_missing_sections() {
        let pod: SlimPod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": null, "overhead": null, "nodeName": ""},
            "status": null
        }))
        .expect("decodes");
        assert_eq!(pod.node_name(), None);
        assert!(pod.spec.containers.is_empty());
        let node: SlimNode =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "n"}})).expect("node");
        assert!(!node.is_eligible());
    }

    #[test]
    fn decodes_a_nodes_labels_and_taints() {
        let node: SlimNode = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "gpu-1", "labels": {"pool": "a100", "kubernetes.io/arch": "amd64"},
                         "annotations": {"x": "y"}},
            "spec": {"unschedulable": false, "podCIDR": "10.0.0.0/24", "taints": [
                {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                {"key": "spot", "effect": "PreferNoSchedule", "timeAdded": null}
            ]},
            "status": {"allocatable": {"cpu": "8", "pods": "110"}}
        }))
        .expect("decodes");
        let labels = node.metadata.labels.as_ref().expect("labels");
        assert_eq!(labels.get("pool").map(String::as_str), Some("a100"));
        assert!(node.metadata.annotations.is_none());
        let taints = &node.spec.taints;
        assert_eq!(taints.len(), 2);
        assert_eq!(taints[0].value.as_deref(), Some("present"));
        assert!(taints[0].repels() && !taints[1].repels());
    }

    #[test]
    fn node_eligibility() {
        let node = |unschedulable: Option<bool>, ready: Option<&str>| SlimNode {
            spec: SlimNodeSpec {
                unschedulable,
                ..Default::default()
            },
            status: SlimNodeStatus {
                conditions: ready
                    .map(|s| SlimNodeCondition {
                        type_: "Ready".into(),
                        status: s.into(),
                    })
                    .into_iter()
                    .collect(),
                ..Default::default()
            },
            ..Default::default()
        };
        assert!(node(None, Some("True")).is_eligible());
        assert!(node(Some(false), Some("True")).is_eligible());
        assert!(!node(Some(true), Some("True")).is_eligible());
        assert!(!node(None, Some("False")).is_eligible());
        assert!(!node(None, Some("Unknown")).is_eligible());
        assert!(!node(None, None).is_eligible());
    }
}
