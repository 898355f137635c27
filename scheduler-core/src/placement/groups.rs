//! Decision groups (`spec.decisionStrategy.groupStrategy`) and PlacementDecision pages.

use super::selector::ClusterMatcher;
use super::snapshot::{ClusterId, HubSnapshot};
use super::status::Status;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use ocm_score_api::{
    ClusterDecision, ClusterSelector, DecisionGroupStatus, IntOrString, ObjectMeta, Placement,
    PlacementDecision, PlacementDecisionStatus, well_known,
};
use std::collections::BTreeMap;

/// Upstream's `maxNumOfClusterDecisions`.
pub const MAX_CLUSTERS_PER_DECISION: usize = 100;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecisionGroup {
    /// `groupName`, or `""` for the clusters no `decisionGroups` entry took.
    pub name: String,
    pub index: usize,
    /// Sorted by name.
    pub clusters: Vec<ClusterId>,
}

/// The group size `clustersPerDecisionGroup` asks for, given `total` selected clusters.
pub fn group_length(per_group: Option<&IntOrString>, total: usize) -> Result<usize, Status> {
    let length: i64 = match per_group {
        None => 0,
        Some(IntOrString::Int(n)) => i64::from(*n),
        Some(IntOrString::String(s)) => {
            let invalid =
                || Status::misconfigured("", format!("{s} invalid type: string is not a percentage"));
            let percent = s.strip_suffix('%').ok_or_else(invalid)?;
            let p: f64 = parse_go_float(percent).ok_or_else(invalid)?;
            // float64 as upstream: 7% of 100 is ceil(7.000000000000001) = 8.
            (p / 100.0 * total as f64).ceil() as i64
        }
    };
    Ok(if length <= 0 || length > total as i64 {
        total
    } else {
        length as usize
    })
}

/// `strconv.ParseFloat` for the forms a percentage can take.
fn parse_go_float(s: &str) -> Option<f64> {
    let lower = s.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if matches!(unsigned, "inf" | "infinity" | "nan")
        || unsigned.starts_with(|c: char| c.is_ascii_digit() || c == '.')
    {
        s.parse().ok()
    } else {
        None
    }
}

/// Groups the selected clusters (given in rank order). On a misconfigured group selector the
/// groups built so far are returned with the error status, as upstream does.
pub fn decision_groups(
    snapshot: &HubSnapshot,
    placement: &Placement,
    selected: &[ClusterId],
) -> (Vec<DecisionGroup>, Status) {
    let strategy = placement
        .spec
        .decision_strategy
        .as_ref()
        .and_then(|d| d.group_strategy.as_ref());
    let mut groups = Vec::new();
    let length = match group_length(
        strategy.and_then(|g| g.clusters_per_decision_group.as_ref()),
        selected.len(),
    ) {
        Ok(l) => l,
        Err(status) => return (groups, status),
    };
    let mut remaining = vec![false; snapshot.cluster_count()];
    for id in selected {
        remaining[id.index()] = true;
    }
    let push = |groups: &mut Vec<DecisionGroup>, name: &str, mut clusters: Vec<ClusterId>| {
        clusters.sort_unstable();
        for chunk in clusters.chunks(length.max(1)) {
            groups.push(DecisionGroup {
                name: name.to_string(),
                index: groups.len(),
                clusters: chunk.to_vec(),
            });
        }
    };
    for group in strategy.map_or(&[][..], |g| g.decision_groups.as_slice()) {
        // Group selectors use labels and claims only; there is no CEL here.
        let selector = ClusterSelector {
            cel_selector: None,
            ..group.group_cluster_selector.clone()
        };
        let matcher = match ClusterMatcher::new(&selector) {
            Ok(m) => m,
            Err(e) => return (groups, Status::misconfigured("", e)),
        };
        let mut matched = Vec::new();
        for &id in selected {
            if remaining[id.index()] && matcher.matches(snapshot, id) {
                remaining[id.index()] = false;
                matched.push(id);
            }
        }
        push(&mut groups, &group.group_name, matched);
    }
    let rest: Vec<ClusterId> = selected
        .iter()
        .copied()
        .filter(|id| remaining[id.index()])
        .collect();
    push(&mut groups, "", rest);
    if groups.is_empty() {
        groups.push(DecisionGroup {
            name: String::new(),
            index: 0,
            clusters: Vec::new(),
        });
    }
    (groups, Status::success())
}

/// One PlacementDecision to write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecisionPage {
    pub name: String,
    pub group_index: usize,
    pub group_name: String,
    pub clusters: Vec<ClusterId>,
}

/// Cuts every group into pages of at most 100 clusters, named `<placement>-decision-<n>` with
/// `n` counting from 1 across all groups. An empty group still gets one (empty) page.
pub fn pages(placement_name: &str, groups: &[DecisionGroup]) -> Vec<DecisionPage> {
    let mut out = Vec::new();
    for group in groups {
        let mut chunks: Vec<&[ClusterId]> = group.clusters.chunks(MAX_CLUSTERS_PER_DECISION).collect();
        if chunks.is_empty() {
            chunks.push(&[]);
        }
        for chunk in chunks {
            out.push(DecisionPage {
                name: format!("{placement_name}-decision-{}", out.len() + 1),
                group_index: group.index,
                group_name: group.name.clone(),
                clusters: chunk.to_vec(),
            });
        }
    }
    out
}

/// `status.decisionGroups` of the placement.
pub fn group_statuses(groups: &[DecisionGroup], pages: &[DecisionPage]) -> Vec<DecisionGroupStatus> {
    groups
        .iter()
        .map(|g| DecisionGroupStatus {
            decision_group_index: g.index as i32,
            decision_group_name: g.name.clone(),
            decisions: pages
                .iter()
                .filter(|p| p.group_index == g.index)
                .map(|p| p.name.clone())
                .collect(),
            cluster_count: g.clusters.len() as i32,
        })
        .collect()
}

/// The labels upstream puts on a PlacementDecision.
pub fn page_labels(placement_name: &str, page: &DecisionPage) -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            well_known::PLACEMENT_LABEL.to_string(),
            placement_name.to_string(),
        ),
        (
            well_known::DECISION_GROUP_NAME_LABEL.to_string(),
            page.group_name.clone(),
        ),
        (
            well_known::DECISION_GROUP_INDEX_LABEL.to_string(),
            page.group_index.to_string(),
        ),
    ])
}

/// The PlacementDecision object for a page, owned by the placement.
pub fn placement_decision(
    snapshot: &HubSnapshot,
    placement: &Placement,
    page: &DecisionPage,
) -> PlacementDecision {
    let placement_name = placement.metadata.name.clone().unwrap_or_default();
    PlacementDecision {
        metadata: ObjectMeta {
            name: Some(page.name.clone()),
            namespace: placement.metadata.namespace.clone(),
            labels: Some(page_labels(&placement_name, page)),
            owner_references: Some(vec![OwnerReference {
                api_version: "cluster.open-cluster-management.io/v1beta1".into(),
                kind: "Placement".into(),
                name: placement_name,
                uid: placement.metadata.uid.clone().unwrap_or_default(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        status: Some(PlacementDecisionStatus {
            decisions: page
                .clusters
                .iter()
                .map(|id| ClusterDecision {
                    cluster_name: snapshot.cluster_name(*id).to_string(),
                    reason: String::new(),
                    score: None,
                })
                .collect(),
            extra: Default::default(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentage_lengths_keep_the_float_quirk() {
        let pct = |s: &str| IntOrString::String(s.into());
        assert_eq!(group_length(Some(&pct("7%")), 100), Ok(8));
        assert_eq!(group_length(Some(&pct("28%")), 25), Ok(8));
        assert_eq!(group_length(Some(&pct("25%")), 3), Ok(1));
        assert_eq!(group_length(Some(&pct("100%")), 5), Ok(5));
        assert_eq!(group_length(Some(&IntOrString::Int(0)), 5), Ok(5));
        assert_eq!(group_length(Some(&IntOrString::Int(9)), 5), Ok(5));
        assert_eq!(group_length(None, 0), Ok(0));
        let err = group_length(Some(&pct("5")), 5).expect_err("the input must be rejected");
        assert_eq!(err.message, "5 invalid type: string is not a percentage");
        assert!(group_length(Some(&pct("x%")), 5).is_err());
    }
}
