//! Step 5: the child Placement, deterministic and built only from existing v1beta1 fields.
//!
//! * **Unpinned** (Failover without capacity rules): the active tier's `clusterSets` and
//!   `predicates`, so OCM picks up new tier members and drops tainted ones on its own, even while
//!   our controller is down. Clusters whose workload Failed are left out by a small negative CEL
//!   term `!(managedCluster.metadata.name in [...])` ANDed with each tier predicate (the tier's
//!   own members and any other tier's a cluster set of this tier also holds).
//! * **Pinned** (everything else): one predicate per (active tier, tier predicate), each ANDed
//!   with a CEL pin `managedCluster.metadata.name in [...]` listing the tier's chosen clusters,
//!   and `clusterSets` = the union of the active tiers' sets.
//!
//! Tolerations, prioritizers and other template fields are copied. Without a template
//! `decisionStrategy`, one decision group per active tier is generated when each active tier is
//! a set of exclusive cluster sets, disjoint from the others' (a label selector then says which
//! tier a cluster is in).

use crate::placement::snapshot::HubSnapshot;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use ocm_score_api::well_known::CLUSTER_SET_LABEL;
use ocm_score_api::{
    ClusterCelSelector, ClusterPredicate, ClusterSelector, DecisionGroup, DecisionStrategy, GroupStrategy,
    LabelSelector, LabelSelectorRequirement, ObjectMeta, Placement, PlacementSpec, TieredPlacementSpec,
};
use std::collections::BTreeMap;

/// Annotation on the child: the active tiers, comma-separated.
pub const ACTIVE_TIERS_ANNOTATION: &str = "tiering.ocm-score.io/active-tiers";
/// Annotation on the child: a hash of everything rendered; the controller applies only when it
/// changes.
pub const PLAN_HASH_ANNOTATION: &str = "tiering.ocm-score.io/plan-hash";
/// At most this many names are pinned per tier (beyond: `PinningTooLarge`).
pub const MAX_PINNED_PER_TIER: usize = 1_000;

/// One active tier and, when pinned, its clusters (sorted); when unpinned, the clusters it must
/// leave out (sorted).
pub struct ActiveTier<'a> {
    pub index: usize,
    pub pins: Option<&'a [String]>,
    pub exclude: &'a [String],
}

/// The CEL expression pinning `names`.
pub fn pin_expression(names: &[String]) -> String {
    let list: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    format!("managedCluster.metadata.name in [{}]", list.join(", "))
}

/// The CEL expression leaving `names` out.
pub fn exclusion_expression(names: &[String]) -> String {
    format!("!({})", pin_expression(names))
}

fn pinned(predicate: &ClusterPredicate, names: &[String]) -> ClusterPredicate {
    with_cel(predicate, pin_expression(names))
}

fn with_cel(predicate: &ClusterPredicate, expression: String) -> ClusterPredicate {
    let mut selector = predicate.required_cluster_selector.clone().unwrap_or_default();
    let mut cel = selector.cel_selector.take().unwrap_or_default();
    cel.cel_expressions.push(expression);
    selector.cel_selector = Some(ClusterCelSelector {
        cel_expressions: cel.cel_expressions,
    });
    ClusterPredicate {
        required_cluster_selector: Some(selector),
    }
}

fn is_exclusive_set(snapshot: &HubSnapshot, name: &str) -> bool {
    snapshot.cluster_set(name).is_some_and(|s| {
        matches!(
            s.spec
                .cluster_selector
                .as_ref()
                .map_or("", |c| c.selector_type.as_str()),
            "" | "ExclusiveClusterSetLabel"
        )
    })
}

fn tier_groups(
    spec: &TieredPlacementSpec,
    active: &[ActiveTier<'_>],
    snapshot: &HubSnapshot,
) -> Option<DecisionStrategy> {
    let mut seen: Vec<&String> = Vec::new();
    let mut groups = Vec::new();
    for a in active {
        let tier = &spec.tiers[a.index];
        if tier.cluster_sets.is_empty() {
            return None;
        }
        for set in &tier.cluster_sets {
            if seen.contains(&set) || !is_exclusive_set(snapshot, set) {
                return None;
            }
            seen.push(set);
        }
        groups.push(DecisionGroup {
            group_name: tier.name.clone(),
            group_cluster_selector: ClusterSelector {
                label_selector: Some(LabelSelector {
                    match_expressions: Some(vec![LabelSelectorRequirement {
                        key: CLUSTER_SET_LABEL.to_string(),
                        operator: "In".to_string(),
                        values: Some(tier.cluster_sets.clone()),
                    }]),
                    match_labels: None,
                }),
                ..ClusterSelector::default()
            },
        });
    }
    Some(DecisionStrategy {
        group_strategy: Some(GroupStrategy {
            decision_groups: groups,
            clusters_per_decision_group: None,
        }),
    })
}

/// FNV-1a over the rendered spec and annotations: stable across processes and versions of the
/// standard library (unlike `DefaultHasher`).
fn hash(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Clusters kept beside the choice (sorted names) and the tiers they belong to.
#[derive(Clone, Copy, Default)]
pub struct Retained<'a> {
    pub names: &'a [String],
    pub tiers: &'a [usize],
}

pub struct Owner<'a> {
    pub namespace: &'a str,
    pub name: &'a str,
    pub uid: Option<&'a str>,
}

/// Renders the child. `number_of_clusters` is what OCM should select. `retained` (sorted):
/// clusters kept beside the active tiers' pins (make-before-break), selected by one more
/// predicate that pins only them, with their tiers' cluster sets added; the active tiers must
/// then be pinned too, or the added sets would widen them.
pub fn child(
    spec: &TieredPlacementSpec,
    owner: &Owner<'_>,
    child_name: &str,
    active: &[ActiveTier<'_>],
    number_of_clusters: Option<i32>,
    retained: &Retained<'_>,
    snapshot: &HubSnapshot,
) -> Placement {
    let template = &spec.template;
    let mut cluster_sets: Vec<String> = Vec::new();
    let mut every_set = false;
    let mut predicates = Vec::new();
    for a in active {
        let tier = &spec.tiers[a.index];
        if tier.cluster_sets.is_empty() {
            every_set = true;
        }
        for set in &tier.cluster_sets {
            if !cluster_sets.contains(set) {
                cluster_sets.push(set.clone());
            }
        }
        match a.pins {
            None if a.exclude.is_empty() => predicates.extend(tier.predicates.iter().cloned()),
            None if tier.predicates.is_empty() => {
                predicates.push(with_cel(
                    &ClusterPredicate::default(),
                    exclusion_expression(a.exclude),
                ));
            }
            None => predicates.extend(
                tier.predicates
                    .iter()
                    .map(|p| with_cel(p, exclusion_expression(a.exclude))),
            ),
            Some(names) if tier.predicates.is_empty() => {
                predicates.push(pinned(&ClusterPredicate::default(), names));
            }
            Some(names) => predicates.extend(tier.predicates.iter().map(|p| pinned(p, names))),
        }
    }
    if !retained.names.is_empty() {
        for tier in retained.tiers.iter().filter_map(|&i| spec.tiers.get(i)) {
            if tier.cluster_sets.is_empty() {
                every_set = true;
            }
            for set in &tier.cluster_sets {
                if !cluster_sets.contains(set) {
                    cluster_sets.push(set.clone());
                }
            }
        }
        predicates.push(pinned(&ClusterPredicate::default(), retained.names));
    }
    if every_set {
        cluster_sets.clear();
    }
    if active.is_empty() {
        // No tier is active, so the child must select nothing; without predicates and cluster
        // sets, OCM would take every cluster of every bound set.
        predicates.push(pinned(&ClusterPredicate::default(), &[]));
    }
    let decision_strategy = match &template.decision_strategy {
        Some(d) => Some(d.clone()),
        None => tier_groups(spec, active, snapshot),
    };
    let spec_out = PlacementSpec {
        cluster_sets,
        number_of_clusters,
        predicates,
        prioritizer_policy: template.prioritizer_policy.clone(),
        tolerations: template.tolerations.clone(),
        decision_strategy,
        // api v1.3.0's fields, only when the template sets them: a v1.2 hub's CRD does not declare
        // them, and without them the child is exactly what it was before they were typed.
        score_rate_limit: template.score_rate_limit.clone(),
        sort_by: template.sort_by.clone(),
        extra: template.extra.clone(),
    };
    let active_names: Vec<&str> = active.iter().map(|a| spec.tiers[a.index].name.as_str()).collect();
    let active_names = active_names.join(",");
    let spec_json = serde_json::to_string(&spec_out).unwrap_or_default();
    let mut annotations = BTreeMap::new();
    annotations.insert(ACTIVE_TIERS_ANNOTATION.to_string(), active_names.clone());
    annotations.insert(
        PLAN_HASH_ANNOTATION.to_string(),
        hash(&format!("{active_names}\n{spec_json}")),
    );
    let owner_references = owner.uid.map(|uid| {
        vec![OwnerReference {
            api_version: ocm_score_api::crd::tiered_placement::TieredPlacement::api_version(&()).to_string(),
            kind: "TieredPlacement".to_string(),
            name: owner.name.to_string(),
            uid: uid.to_string(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }]
    });
    Placement {
        metadata: ObjectMeta {
            namespace: Some(owner.namespace.to_string()),
            name: Some(child_name.to_string()),
            annotations: Some(annotations),
            owner_references,
            ..ObjectMeta::default()
        },
        spec: spec_out,
        status: None,
    }
}

use kube_core::Resource as _;
