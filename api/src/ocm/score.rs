use crate::{Condition, Extra, Time, ocm_root};
use serde::{Deserialize, Serialize};

ocm_root! {
    /// Scores a third party publishes for one managed cluster (namespace = cluster name).
    AddOnPlacementScore { status: AddOnPlacementScoreStatus }
    group "cluster.open-cluster-management.io", version "v1alpha1", plural "addonplacementscores",
    scope k8s_openapi::NamespaceResourceScope, namespaced true, status_subresource true
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddOnPlacementScoreStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Each value must lie in -100..=100 (the CRD enforces it); names are unique.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scores: Vec<AddOnPlacementScoreItem>,
    /// After this instant the scheduler treats every score as 0. `None` = never expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub valid_until: Option<Time>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddOnPlacementScoreItem {
    pub name: String,
    pub value: i32,
}

impl AddOnPlacementScoreStatus {
    /// The value of a named score, if published.
    pub fn score(&self, name: &str) -> Option<i32> {
        self.scores.iter().find(|s| s.name == name).map(|s| s.value)
    }
}
