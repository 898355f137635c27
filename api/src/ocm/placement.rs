use crate::crd::tiered_placement::SpecError;
use crate::{Condition, Extra, IntOrString, LabelSelector, LabelSelectorRequirement, Time, ocm_root};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

ocm_root! {
    /// Selects a set of ManagedClusters from the cluster sets bound to its namespace.
    Placement { spec: PlacementSpec, status: PlacementStatus }
    group "cluster.open-cluster-management.io", version "v1beta1", plural "placements",
    scope k8s_openapi::NamespaceResourceScope, namespaced true, status_subresource true
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementSpec {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cluster_sets: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub number_of_clusters: Option<i32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub predicates: Vec<ClusterPredicate>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prioritizer_policy: Option<PrioritizerPolicy>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision_strategy: Option<DecisionStrategy>,
    /// How often score changes alone may rewrite the decisions (api v1.3.0; pattern
    /// `^[0-9]+[hms]$`, its CRD defaults it to `1m`). Absent on objects from v1.2 hubs, whose CRD
    /// does not declare it, and then never written. Kept verbatim;
    /// [`PlacementSpec::v1_3_field_errors`] checks the pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_rate_limit: Option<String>,
    /// The order of the decisions (api v1.3.0; its CRD defaults it to `ClusterName`); absent and
    /// never written for v1.2 hubs, as `scoreRateLimit`. Declared after `scoreRateLimit`: the two then serialize in the order they had while they
    /// were kept in `extra` (sorted by name), so a child Placement's plan hash does not change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sort_by: Option<SortBy>,
    #[serde(flatten)]
    pub extra: Extra,
}

/// The pattern api v1.3.0's Placement CRD gives `spec.scoreRateLimit`.
pub const SCORE_RATE_LIMIT_PATTERN: &str = "^[0-9]+[hms]$";

/// Whether `text` matches [`SCORE_RATE_LIMIT_PATTERN`]: one or more ASCII digits, then exactly one
/// of `h`, `m`, `s` (so `1m` and `90s`, but not `1m30s`, `500ms`, `1d` or ` 1m`).
pub fn is_score_rate_limit(text: &str) -> bool {
    match text.as_bytes().split_last() {
        Some((unit, digits)) => {
            matches!(unit, b'h' | b'm' | b's') && !digits.is_empty() && digits.iter().all(u8::is_ascii_digit)
        }
        None => false,
    }
}

impl PlacementSpec {
    /// Every value of the fields api v1.3.0 added (`sortBy`, `scoreRateLimit`) that its CRD
    /// would refuse, each naming the field under `path` (`spec`, `spec.template`) and the value.
    /// Our models keep such values (as they keep every other OCM enum), so reading an object
    /// never fails on them; inputs that no API server checked (files given to `simulate`,
    /// TieredPlacement templates) are checked with this.
    pub fn v1_3_field_errors(&self, path: &str) -> Vec<SpecError> {
        let mut errors = Vec::new();
        if let Some(SortBy::Other(value)) = &self.sort_by {
            errors.push(SpecError::new(
                format!("{path}.sortBy"),
                format!(
                    "{value:?} is not a sort order; expected {:?} or {:?}",
                    SortBy::CLUSTER_NAME,
                    SortBy::SCORE
                ),
            ));
        }
        if let Some(value) = &self.score_rate_limit
            && !is_score_rate_limit(value)
        {
            errors.push(SpecError::new(
                format!("{path}.scoreRateLimit"),
                format!(
                    "{value:?} does not match {SCORE_RATE_LIMIT_PATTERN} (whole number of hours, minutes or seconds, e.g. 1m or 90s)"
                ),
            ));
        }
        errors
    }
}

/// `spec.sortBy`: the order OCM writes a placement's decisions in.
///
/// A value outside the CRD's enum is kept as [`SortBy::Other`] and written back unchanged, as the
/// models keep every other OCM enum (`prioritizerPolicy.mode`, toleration operators) verbatim:
/// a later OCM may add an order, and reading its objects must not fail.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum SortBy {
    /// Alphanumerically by cluster name (the CRD default, and OCM v1.2's only order).
    ClusterName,
    /// By score, highest first, then by cluster name.
    Score,
    /// A value the v1.3.0 CRD does not declare, verbatim.
    Other(String),
}

impl SortBy {
    pub const CLUSTER_NAME: &'static str = "ClusterName";
    pub const SCORE: &'static str = "Score";

    pub fn as_str(&self) -> &str {
        match self {
            SortBy::ClusterName => Self::CLUSTER_NAME,
            SortBy::Score => Self::SCORE,
            SortBy::Other(value) => value,
        }
    }
}

impl From<&str> for SortBy {
    fn from(value: &str) -> Self {
        match value {
            Self::CLUSTER_NAME => SortBy::ClusterName,
            Self::SCORE => SortBy::Score,
            other => SortBy::Other(other.to_string()),
        }
    }
}

impl fmt::Display for SortBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for SortBy {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SortBy {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        Ok(SortBy::from(value.as_str()))
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPredicate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required_cluster_selector: Option<ClusterSelector>,
}

/// Label, claim and CEL selectors; all present ones must match (they are ANDed).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSelector {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label_selector: Option<LabelSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claim_selector: Option<ClusterClaimSelector>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cel_selector: Option<ClusterCelSelector>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterClaimSelector {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub match_expressions: Vec<LabelSelectorRequirement>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterCelSelector {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cel_expressions: Vec<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrioritizerPolicy {
    /// `Additive` (the CRD default) or `Exact`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub configurations: Vec<PrioritizerConfig>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PrioritizerConfig {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score_coordinate: Option<ScoreCoordinate>,
    /// -10..=10; the CRD defaults it to 1.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weight: Option<i32>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ScoreCoordinate {
    /// `BuiltIn` (the CRD default) or `AddOn`.
    #[serde(rename = "type", default = "default_coordinate_type")]
    pub type_: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub built_in: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub add_on: Option<AddOnScore>,
}

fn default_coordinate_type() -> String {
    "BuiltIn".to_string()
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AddOnScore {
    pub resource_name: String,
    pub score_name: String,
}

/// A placement toleration of ManagedCluster taints.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Toleration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// `Equal` (the CRD default) or `Exists`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effect: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionStrategy {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_strategy: Option<GroupStrategy>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupStrategy {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decision_groups: Vec<DecisionGroup>,
    /// A number of clusters or a percentage of the selected ones; the CRD defaults it to `100%`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusters_per_decision_group: Option<IntOrString>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionGroup {
    pub group_name: String,
    pub group_cluster_selector: ClusterSelector,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementStatus {
    #[serde(default)]
    pub number_of_selected_clusters: i32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decision_groups: Vec<DecisionGroupStatus>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// When OCM last wrote scores into the decisions (api v1.3.0); v1.2 hubs never set it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_score_update_time: Option<Time>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DecisionGroupStatus {
    #[serde(default)]
    pub decision_group_index: i32,
    #[serde(default)]
    pub decision_group_name: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<String>,
    #[serde(default)]
    pub cluster_count: i32,
}

ocm_root! {
    /// One page (at most 100 clusters) of a Placement's decisions.
    PlacementDecision { status: PlacementDecisionStatus }
    group "cluster.open-cluster-management.io", version "v1beta1", plural "placementdecisions",
    scope k8s_openapi::NamespaceResourceScope, namespaced true, status_subresource true
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlacementDecisionStatus {
    /// Required by the CRD, so serialized even when empty.
    #[serde(default)]
    pub decisions: Vec<ClusterDecision>,
    #[serde(flatten)]
    pub extra: Extra,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterDecision {
    pub cluster_name: String,
    #[serde(default)]
    pub reason: String,
    /// The cluster's final score (newer OCM versions write it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub score: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_body_of_the_wrong_shape_is_refused_by_the_type_it_should_be() {
        let error = serde_json::from_value::<Placement>(json!("not an object"))
            .expect_err("a string is not a Placement")
            .to_string();
        assert!(error.contains("expected struct Placement"), "{error}");
    }

    #[test]
    fn score_rate_limit_follows_the_crd_pattern() {
        for good in ["1m", "0s", "30s", "24h", "0001m"] {
            assert!(
                is_score_rate_limit(good),
                "{good:?} matches {SCORE_RATE_LIMIT_PATTERN}"
            );
        }
        for bad in [
            "", "m", "1", "1d", "1m30s", "500ms", "1.5m", "-1m", " 1m", "1m ", "1M", "１m",
        ] {
            assert!(
                !is_score_rate_limit(bad),
                "{bad:?} does not match {SCORE_RATE_LIMIT_PATTERN}"
            );
        }
    }

    #[test]
    fn sort_by_keeps_an_unknown_order_and_the_check_names_it() {
        let spec: PlacementSpec =
            serde_json::from_value(json!({"sortBy": "Random", "scoreRateLimit": "1d"})).unwrap();
        assert_eq!(spec.sort_by, Some(SortBy::Other("Random".into())));
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            json!({"sortBy": "Random", "scoreRateLimit": "1d"})
        );
        let errors = spec.v1_3_field_errors("spec.template");
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["spec.template.sortBy", "spec.template.scoreRateLimit"]);
        assert!(errors[0].message.contains("\"Random\""), "{}", errors[0]);
        assert!(errors[1].message.contains("\"1d\""), "{}", errors[1]);

        let known: PlacementSpec =
            serde_json::from_value(json!({"sortBy": "Score", "scoreRateLimit": "30s"})).unwrap();
        assert_eq!(known.sort_by, Some(SortBy::Score));
        assert_eq!(known.score_rate_limit.as_deref(), Some("30s"));
        assert!(known.v1_3_field_errors("spec").is_empty());
        assert_eq!(
            serde_json::from_value::<SortBy>(json!("ClusterName")).unwrap(),
            SortBy::ClusterName
        );
    }

    #[test]
    fn the_new_fields_serialize_where_the_sorted_extra_map_put_them() {
        // Before they were typed they rode in `extra` (sorted, after the typed fields); a child
        // Placement's plan hash is taken over this text, so it must not change.
        let spec: PlacementSpec = serde_json::from_value(json!({
            "decisionStrategy": {}, "spreadPolicy": {}, "sortBy": "Score", "scoreRateLimit": "1m"
        }))
        .unwrap();
        assert_eq!(
            serde_json::to_string(&spec).unwrap(),
            r#"{"decisionStrategy":{},"scoreRateLimit":"1m","sortBy":"Score","spreadPolicy":{}}"#
        );
    }

    #[test]
    fn a_spec_without_the_new_fields_writes_none_of_them() {
        let spec: PlacementSpec = serde_json::from_value(json!({"clusterSets": ["a"]})).unwrap();
        assert_eq!(spec.sort_by, None);
        assert_eq!(spec.score_rate_limit, None);
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            json!({"clusterSets": ["a"]})
        );
        let status: PlacementStatus = serde_json::from_value(json!({"numberOfSelectedClusters": 1})).unwrap();
        assert_eq!(status.last_score_update_time, None);
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            json!({"numberOfSelectedClusters": 1})
        );
    }
}
