//! Which clusters get the add-on: the ClusterManagementAddOn's install strategy.
//!
//! OCM's own addon-manager runs install strategies for every ClusterManagementAddOn it manages:
//! those without the lifecycle annotation or with `addon-manager`. For any other value (`self`, or
//! even empty, as upstream code reads it) OCM stays away and we do that work: create a
//! ManagedClusterAddOn for each cluster the strategy's Placements decide on, delete the ones outside
//! that set, and give every add-on the ClusterManagementAddOn as owner so deleting it removes them all.

use crate::addon::names;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use ocm_score_api::{
    ClusterManagementAddOn, ManagedCluster, ManagedClusterAddOn, OcmKind, PlacementDecision, well_known,
};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;
use tokio::time::Instant;

/// Who runs the add-on's lifecycle (install strategy, ownership, configuration rollout).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lifecycle {
    /// OCM's addon-manager: we only register, deploy and report.
    AddonManager,
    /// Us: install strategy, owner references and config references too.
    SelfManaged,
}

pub fn lifecycle(cma: &ClusterManagementAddOn) -> Lifecycle {
    match cma
        .annotations()
        .get(names::LIFECYCLE_ANNOTATION)
        .map(String::as_str)
    {
        None | Some("addon-manager") => Lifecycle::AddonManager,
        Some(_) => Lifecycle::SelfManaged,
    }
}

/// The clusters each Placement of the strategy currently decides on, by placement `namespace/name`.
pub fn decided_clusters<'a>(
    cma: &ClusterManagementAddOn,
    decisions: impl IntoIterator<Item = &'a PlacementDecision>,
) -> BTreeMap<(String, String), BTreeSet<String>> {
    let mut out: BTreeMap<(String, String), BTreeSet<String>> = cma
        .spec
        .install_strategy
        .iter()
        .filter(|s| s.type_ == "Placements")
        .flat_map(|s| &s.placements)
        .map(|p| ((p.namespace.clone(), p.name.clone()), BTreeSet::new()))
        .collect();
    for decision in decisions {
        let namespace = decision.namespace().unwrap_or_default();
        let Some(placement) = decision.labels().get(well_known::PLACEMENT_LABEL) else {
            continue;
        };
        if let Some(clusters) = out.get_mut(&(namespace, placement.clone())) {
            let names = decision
                .status
                .iter()
                .flat_map(|s| &s.decisions)
                .map(|d| d.cluster_name.clone());
            clusters.extend(names.filter(|n| !n.is_empty()));
        }
    }
    out
}

/// What the install strategy asks for, given the current state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstallPlan {
    /// Clusters that need a new ManagedClusterAddOn.
    pub create: Vec<String>,
    /// Clusters whose ManagedClusterAddOn must go.
    pub delete: Vec<String>,
    /// Clusters whose ManagedClusterAddOn lacks the ClusterManagementAddOn owner reference.
    pub adopt: Vec<String>,
}

/// Plans the install strategy. `clusters` are the ManagedClusters that exist and are not being
/// deleted; `addons` are the existing ManagedClusterAddOns of this add-on.
pub fn plan(
    cma: &ClusterManagementAddOn,
    decided: &BTreeMap<(String, String), BTreeSet<String>>,
    clusters: &BTreeSet<String>,
    addons: &[&ManagedClusterAddOn],
) -> InstallPlan {
    let mut plan = InstallPlan::default();
    let existing: BTreeSet<String> = addons.iter().filter_map(|a| a.namespace()).collect();
    let placements = cma
        .spec
        .install_strategy
        .as_ref()
        .is_some_and(|s| s.type_ == "Placements");
    if placements {
        let wanted: BTreeSet<&String> = decided
            .values()
            .flatten()
            .filter(|c| clusters.contains(*c))
            .collect();
        plan.create = wanted
            .iter()
            .filter(|c| !existing.contains(**c))
            .map(|c| c.to_string())
            .collect();
        plan.delete = addons
            .iter()
            .filter(|a| a.metadata.deletion_timestamp.is_none())
            .filter_map(|a| a.namespace())
            .filter(|c| !wanted.contains(c))
            .collect();
    }
    plan.adopt = addons
        .iter()
        .filter(|a| a.metadata.deletion_timestamp.is_none() && !owned_by(a, cma))
        .filter_map(|a| a.namespace())
        .filter(|c| !plan.delete.contains(c))
        .collect();
    plan
}

/// Since when each cluster has been outside the install strategy's decisions (in memory: a restart
/// starts the grace over, which only delays a removal).
#[derive(Debug, Default)]
pub struct Absences {
    since: BTreeMap<String, Instant>,
}

/// What [`Absences::due`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Due {
    /// Left out for the whole grace: their add-ons go now.
    pub remove: Vec<String>,
    /// Left out for the first time (as far as this process saw).
    pub left: Vec<String>,
    /// Were left out and are selected again: their add-ons stay.
    pub back: Vec<String>,
    /// How long until the next of the others is due.
    pub next: Option<Duration>,
}

impl Absences {
    /// Sorts `leaving` (the plan's deletions) at `now`. A cluster that comes back and leaves again
    /// waits the whole grace again; a blip shorter than one pass is not seen.
    pub fn due(&mut self, leaving: &[String], now: Instant, grace: Duration) -> Due {
        let mut due = Due::default();
        self.since.retain(|cluster, _| {
            let stays = leaving.contains(cluster);
            if !stays {
                due.back.push(cluster.clone());
            }
            stays
        });
        for cluster in leaving {
            let since = *self.since.entry(cluster.clone()).or_insert_with(|| {
                due.left.push(cluster.clone());
                now
            });
            let left_out = now.saturating_duration_since(since);
            if left_out >= grace {
                // Forgotten once removed ([`Absences::removed`]): a failed removal stays due.
                due.remove.push(cluster.clone());
            } else {
                let wait = grace - left_out;
                due.next = Some(due.next.map_or(wait, |n| n.min(wait)));
            }
        }
        due
    }

    /// `cluster`'s add-on is gone.
    pub fn removed(&mut self, cluster: &str) {
        self.since.remove(cluster);
    }

    /// OCM runs the install strategy now: what we saw no longer counts.
    pub fn clear(&mut self) {
        self.since.clear();
    }
}

/// Whether the add-on names the ClusterManagementAddOn as an owner (the gate OCM's registration
/// applies before anything else happens).
pub fn owned_by_cma(addon: &ManagedClusterAddOn, addon_name: &str) -> bool {
    addon
        .owner_references()
        .iter()
        .any(|o| o.kind == ClusterManagementAddOn::KIND && o.name == addon_name)
}

fn owned_by(addon: &ManagedClusterAddOn, cma: &ClusterManagementAddOn) -> bool {
    addon
        .owner_references()
        .iter()
        .any(|o| o.kind == ClusterManagementAddOn::KIND && Some(&o.uid) == cma.metadata.uid.as_ref())
}

/// The owner reference from an add-on to its ClusterManagementAddOn. It is the controller reference
/// unless another controller already claimed the add-on.
pub fn cma_owner_reference(cma: &ClusterManagementAddOn, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: ClusterManagementAddOn::API_VERSION.to_string(),
        kind: ClusterManagementAddOn::KIND.to_string(),
        name: cma.name_any(),
        uid: cma.metadata.uid.clone().unwrap_or_default(),
        controller: Some(controller),
        block_owner_deletion: Some(true),
    }
}

/// The owner references an add-on should have after adoption.
pub fn adopted_owner_references(
    addon: &ManagedClusterAddOn,
    cma: &ClusterManagementAddOn,
) -> Vec<OwnerReference> {
    let mut owners = addon.owner_references().to_vec();
    let has_controller = owners.iter().any(|o| o.controller == Some(true));
    owners.push(cma_owner_reference(cma, !has_controller));
    owners
}

/// A new add-on for `cluster`, as OCM's install strategy creates it: empty spec, owned by the
/// ClusterManagementAddOn, carrying the cluster's `addon.open-cluster-management.io*` annotations.
/// No finalizer: whatever belongs to it goes by owner reference, with or without our controller.
pub fn new_addon(cma: &ClusterManagementAddOn, cluster: &ManagedCluster) -> ManagedClusterAddOn {
    let annotations: BTreeMap<String, String> = cluster
        .annotations()
        .iter()
        .filter(|(k, _)| k.starts_with(names::ADDON_ANNOTATION_PREFIX))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    ManagedClusterAddOn {
        metadata: ObjectMeta {
            name: Some(cma.name_any()),
            namespace: Some(cluster.name_any()),
            annotations: (!annotations.is_empty()).then_some(annotations),
            owner_references: Some(vec![cma_owner_reference(cma, true)]),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocm_score_api::{ClusterDecision, InstallStrategy, PlacementDecisionStatus, PlacementStrategy};

    fn cma(strategy: Option<&[(&str, &str)]>) -> ClusterManagementAddOn {
        let mut c = ClusterManagementAddOn::default();
        c.metadata.name = Some("a".into());
        c.metadata.uid = Some("cma-uid".into());
        c.spec.install_strategy = strategy.map(|placements| InstallStrategy {
            type_: "Placements".into(),
            placements: placements
                .iter()
                .map(|(ns, name)| PlacementStrategy {
                    namespace: ns.to_string(),
                    name: name.to_string(),
                    ..Default::default()
                })
                .collect(),
        });
        c
    }

    fn decision(ns: &str, placement: &str, clusters: &[&str]) -> PlacementDecision {
        let mut d = PlacementDecision::default();
        d.metadata.namespace = Some(ns.into());
        d.metadata.name = Some(format!("{placement}-decision-1"));
        d.metadata.labels = Some([(well_known::PLACEMENT_LABEL.to_string(), placement.to_string())].into());
        d.status = Some(PlacementDecisionStatus {
            decisions: clusters
                .iter()
                .map(|c| ClusterDecision {
                    cluster_name: c.to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
        d
    }

    fn addon(cluster: &str, owner_uid: Option<&str>) -> ManagedClusterAddOn {
        let mut m = ManagedClusterAddOn::default();
        m.metadata.name = Some("a".into());
        m.metadata.namespace = Some(cluster.into());
        m.metadata.owner_references = owner_uid.map(|uid| {
            vec![OwnerReference {
                kind: "ClusterManagementAddOn".into(),
                name: "a".into(),
                uid: uid.into(),
                ..Default::default()
            }]
        });
        m
    }

    fn set(items: &[&str]) -> BTreeSet<String> {
        items.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn lifecycle_annotation_as_ocm_reads_it() {
        let mut c = cma(None);
        assert_eq!(lifecycle(&c), Lifecycle::AddonManager);
        for (value, want) in [
            ("addon-manager", Lifecycle::AddonManager),
            ("self", Lifecycle::SelfManaged),
            ("", Lifecycle::SelfManaged),
        ] {
            c.metadata.annotations =
                Some([(names::LIFECYCLE_ANNOTATION.to_string(), value.to_string())].into());
            assert_eq!(lifecycle(&c), want, "{value:?}");
        }
    }

    #[test]
    fn placements_union_and_diff() {
        let c = cma(Some(&[("ns1", "p1"), ("ns2", "p2")]));
        let decisions = [
            decision("ns1", "p1", &["c1", "c2"]),
            decision("ns2", "p2", &["c2", "c3", "gone"]),
            decision("ns3", "p1", &["c9"]), // same name, other namespace: not ours
        ];
        let decided = decided_clusters(&c, &decisions);
        assert_eq!(
            decided[&("ns1".to_string(), "p1".to_string())],
            set(&["c1", "c2"])
        );
        let existing = [
            addon("c1", Some("cma-uid")),
            addon("c4", Some("cma-uid")),
            addon("c2", None),
        ];
        let refs: Vec<&ManagedClusterAddOn> = existing.iter().collect();
        let p = plan(&c, &decided, &set(&["c1", "c2", "c3", "c4", "c9"]), &refs);
        assert_eq!(
            p.create,
            vec!["c3"],
            "gone has no ManagedCluster, c9 is another placement"
        );
        assert_eq!(p.delete, vec!["c4"]);
        assert_eq!(p.adopt, vec!["c2"]);
    }

    #[test]
    fn manual_strategy_creates_and_deletes_nothing_but_adopts() {
        let c = cma(None);
        let existing = [addon("c1", None)];
        let refs: Vec<&ManagedClusterAddOn> = existing.iter().collect();
        let p = plan(&c, &BTreeMap::new(), &set(&["c1", "c2"]), &refs);
        assert_eq!(
            p,
            InstallPlan {
                create: vec![],
                delete: vec![],
                adopt: vec!["c1".into()]
            }
        );
    }

    #[test]
    fn new_addon_copies_addon_annotations_and_is_owned() {
        let c = cma(None);
        let mut cluster = ManagedCluster::default();
        cluster.metadata.name = Some("c1".into());
        cluster.metadata.annotations = Some(
            [
                (
                    "addon.open-cluster-management.io/values".to_string(),
                    "{}".to_string(),
                ),
                ("other.io/x".to_string(), "y".to_string()),
            ]
            .into(),
        );
        let m = new_addon(&c, &cluster);
        assert_eq!(m.metadata.namespace.as_deref(), Some("c1"));
        assert_eq!(m.metadata.annotations.as_ref().map(|a| a.len()), Some(1));
        assert!(owned_by_cma(&m, "a"));
        assert_eq!(m.metadata.finalizers, None, "nothing may wait for our controller");
        let owner = &m.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.api_version.as_str(), owner.controller),
            ("addon.open-cluster-management.io/v1alpha1", Some(true))
        );
        let mut claimed = addon("c1", None);
        claimed.metadata.owner_references = Some(vec![OwnerReference {
            kind: "Other".into(),
            controller: Some(true),
            ..Default::default()
        }]);
        let owners = adopted_owner_references(&claimed, &c);
        assert_eq!(owners.len(), 2);
        assert_eq!(owners[1].controller, Some(false));
    }

    #[test]
    fn a_cluster_is_removed_only_after_the_grace_and_forgotten_when_back() {
        let grace = Duration::from_secs(30);
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut absences = Absences::default();
        let c = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
        let due = |remove: &[&str], left: &[&str], back: &[&str], next: Option<u64>| Due {
            remove: c(remove),
            left: c(left),
            back: c(back),
            next: next.map(Duration::from_secs),
        };
        assert_eq!(
            absences.due(&c(&["c1"]), at(0), grace),
            due(&[], &["c1"], &[], Some(30))
        );
        assert_eq!(
            absences.due(&c(&["c1", "c2"]), at(10), grace),
            due(&[], &["c2"], &[], Some(20))
        );
        // c1 comes back (a PlacementDecision rewritten), c2 stays out.
        assert_eq!(
            absences.due(&c(&["c2"]), at(29), grace),
            due(&[], &[], &["c1"], Some(11))
        );
        // c2 out for 30 s goes; c1 out again waits from the start.
        assert_eq!(
            absences.due(&c(&["c1", "c2"]), at(40), grace),
            due(&["c2"], &["c1"], &[], Some(30))
        );
        // A removal that failed is due again at once; once removed, c2 is no longer leaving, and
        // not "back" either.
        assert_eq!(
            absences.due(&c(&["c1", "c2"]), at(41), grace),
            due(&["c2"], &[], &[], Some(29))
        );
        absences.removed("c2");
        assert_eq!(
            absences.due(&c(&["c1"]), at(42), grace),
            due(&[], &[], &[], Some(28))
        );
        assert_eq!(
            absences.due(&c(&["c3"]), at(0), Duration::ZERO),
            due(&["c3"], &["c3"], &["c1"], None)
        );
    }
}
