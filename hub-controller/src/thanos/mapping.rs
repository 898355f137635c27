//! Which ManagedCluster a series belongs to.
//!
//! Series name their cluster in one label (`cluster` by default). Its value is either the
//! ManagedCluster's name (`identity`), or the value of a label on the ManagedCluster
//! (`label:<key>`), or the value of one of its cluster claims (`claim:<name>`, e.g. `id.k8s.io`).
//! A value that matches no ManagedCluster, or more than one, is never guessed at: the series is skipped.

use ocm_score_api::ManagedCluster;
use std::{collections::HashMap, fmt, str::FromStr};

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterMapping {
    /// The label value is the ManagedCluster's name.
    Identity,
    /// The label value equals this label of the ManagedCluster.
    Label(String),
    /// The label value equals this cluster claim of the ManagedCluster.
    Claim(String),
}

impl FromStr for ClusterMapping {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let nonempty = |kind: &str, key: &str| {
            let key = key.trim();
            if key.is_empty() {
                Err(format!("needs a {kind} after the colon"))
            } else {
                Ok(key.to_owned())
            }
        };
        match s.trim().split_once(':') {
            None if s.trim() == "identity" => Ok(Self::Identity),
            Some(("label", key)) => nonempty("ManagedCluster label key", key).map(Self::Label),
            Some(("claim", name)) => nonempty("cluster claim name", name).map(Self::Claim),
            _ => Err("is not one of identity, label:<key>, claim:<name>".into()),
        }
    }
}

impl fmt::Display for ClusterMapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Identity => f.write_str("identity"),
            Self::Label(key) => write!(f, "label:{key}"),
            Self::Claim(name) => write!(f, "claim:{name}"),
        }
    }
}

/// A ManagedCluster's position in a [`ClusterIndex`], so per-round tables can be plain vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ClusterId(u32);

impl ClusterId {
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The id at this position of its index (positions come from `0..cluster_count()`).
    pub fn from_index(i: usize) -> Self {
        Self(u32::try_from(i).unwrap_or(u32::MAX))
    }
}

/// The outcome of looking up one label value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolved {
    Cluster(ClusterId),
    /// No ManagedCluster carries this value.
    Unknown,
    /// Several ManagedClusters carry it; publishing to either would be a guess.
    Ambiguous,
}

#[derive(Debug, Clone, Copy)]
enum Slot {
    One(ClusterId),
    Several,
}

/// Label value → ManagedCluster, built from the hub's ManagedClusters once per round.
#[derive(Debug, Clone, Default)]
pub struct ClusterIndex {
    names: Vec<String>,
    by_value: HashMap<String, Slot>,
}

impl ClusterIndex {
    /// Indexes the clusters that can receive scores: clusters being deleted are left out, since
    /// their namespace (where the score object lives) is going away.
    pub fn build<'a>(
        mapping: &ClusterMapping,
        clusters: impl IntoIterator<Item = &'a ManagedCluster>,
    ) -> Self {
        let mut index = Self::default();
        for cluster in clusters {
            if cluster.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let Some(name) = cluster.metadata.name.as_deref() else {
                continue;
            };
            let value = match mapping {
                ClusterMapping::Identity => Some(name),
                ClusterMapping::Label(key) => cluster
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(key))
                    .map(String::as_str),
                ClusterMapping::Claim(claim) => cluster
                    .status
                    .as_ref()
                    .and_then(|s| s.cluster_claims.iter().find(|c| &c.name == claim))
                    .map(|c| c.value.as_str()),
            };
            let Some(value) = value else { continue };
            let Ok(id) = u32::try_from(index.names.len()) else {
                break;
            };
            let id = ClusterId(id);
            index.names.push(name.to_owned());
            index
                .by_value
                .entry(value.to_owned())
                .and_modify(|slot| *slot = Slot::Several)
                .or_insert(Slot::One(id));
        }
        index
    }

    pub fn resolve(&self, label_value: &str) -> Resolved {
        match self.by_value.get(label_value) {
            Some(Slot::One(id)) => Resolved::Cluster(*id),
            Some(Slot::Several) => Resolved::Ambiguous,
            None => Resolved::Unknown,
        }
    }

    /// The ManagedCluster's name.
    pub fn name(&self, id: ClusterId) -> &str {
        &self.names[id.index()]
    }

    /// How many ManagedClusters were indexed (ids are `0..cluster_count()`).
    pub fn cluster_count(&self) -> usize {
        self.names.len()
    }

    /// The cluster a label value maps to, by name.
    pub fn resolve_name(&self, label_value: &str) -> Option<&str> {
        match self.resolve(label_value) {
            Resolved::Cluster(id) => Some(self.name(id)),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocm_score_api::{ManagedClusterClaim, ManagedClusterStatus, ObjectMeta, Time};

    fn cluster(name: &str, labels: &[(&str, &str)], claims: &[(&str, &str)]) -> ManagedCluster {
        ManagedCluster {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect(),
                ),
                ..Default::default()
            },
            status: Some(ManagedClusterStatus {
                cluster_claims: claims
                    .iter()
                    .map(|(n, v)| ManagedClusterClaim {
                        name: n.to_string(),
                        value: v.to_string(),
                    })
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn parses_and_prints_mappings() {
        for text in ["identity", "label:region.example/id", "claim:id.k8s.io"] {
            let mapping: ClusterMapping = text.parse().expect("valid");
            assert_eq!(mapping.to_string(), text);
        }
        for bad in ["", "label", "label:", "claim: ", "name:x", "Identity"] {
            assert!(bad.parse::<ClusterMapping>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn identity_maps_names_and_skips_unknown_and_deleting() {
        let mut gone = cluster("gone", &[], &[]);
        gone.metadata.deletion_timestamp = Some(Time(jiff::Timestamp::UNIX_EPOCH));
        let clusters = [cluster("a", &[], &[]), cluster("b", &[], &[]), gone];
        let index = ClusterIndex::build(&ClusterMapping::Identity, &clusters);
        assert_eq!(index.resolve_name("a"), Some("a"));
        assert_eq!(index.resolve("ghost"), Resolved::Unknown);
        assert_eq!(index.resolve("gone"), Resolved::Unknown);
        assert_eq!(index.cluster_count(), 2);
    }

    #[test]
    fn label_mapping_detects_ambiguity() {
        let clusters = [
            cluster("prod-1", &[("thanos", "eu-1")], &[]),
            cluster("prod-2", &[("thanos", "us-1")], &[]),
            cluster("prod-3", &[("thanos", "us-1")], &[]),
            cluster("dev", &[], &[]),
        ];
        let index = ClusterIndex::build(&ClusterMapping::Label("thanos".into()), &clusters);
        assert_eq!(index.resolve_name("eu-1"), Some("prod-1"));
        assert_eq!(index.resolve("us-1"), Resolved::Ambiguous);
        assert_eq!(index.resolve("dev"), Resolved::Unknown);
    }

    #[test]
    fn claim_mapping_reads_cluster_claims() {
        let clusters = [
            cluster(
                "a",
                &[],
                &[
                    ("id.k8s.io", "uid-a"),
                    ("platform.open-cluster-management.io", "AWS"),
                ],
            ),
            cluster("b", &[], &[("platform.open-cluster-management.io", "AWS")]),
        ];
        let index = ClusterIndex::build(&ClusterMapping::Claim("id.k8s.io".into()), &clusters);
        assert_eq!(index.resolve_name("uid-a"), Some("a"));
        assert_eq!(index.resolve("a"), Resolved::Unknown);
        assert_eq!(index.cluster_count(), 1);
    }
}
