//! Step 5: the child Placement for the choice, and what OCM will select of it. It decides what
//! each active tier pins or leaves out by name, and whether the child can be written at all.
//!
//! # Pinned or unpinned
//!
//! Capacity rules and Overflow pin exactly the chosen clusters ([`super::super::render`]), so the
//! planner, not OCM's prioritizers, decides which stay. Without them (Failover) the child carries
//! the tier's own predicates and leaves the clusters whose workload Failed out by name. A tier
//! short of clusters not known to fail keeps some of its failed ones rather than shrink the child
//! (workload-failover.md §4). Every name list is held to [`MAX_PINNED_PER_TIER`]; beyond it the
//! child is left as it is (`PinningTooLarge`).
//!
//! The prediction schedules the rendered child with the same engine as OCM.

use super::super::render::{self, ActiveTier, MAX_PINNED_PER_TIER, Owner, Retained};
use super::choice::Choice;
use super::health::Health;
use crate::instant::timestamp;
use crate::placement::snapshot::{ClusterId, HubSnapshot};
use crate::placement::{candidates, schedule};
use ocm_score_api::crd::tiered_placement::{TieredPlacementSpec, TieringMode};
use ocm_score_api::{Placement, PlacementSpec};

/// What the child is rendered from.
pub(super) struct Input<'a> {
    pub spec: &'a TieredPlacementSpec,
    pub owner: &'a Owner<'a>,
    pub child_name: &'a str,
    pub choice: &'a Choice,
    /// Per tier, in spec order.
    pub health: &'a [Health],
    /// Per cluster id: in the last plan's selection.
    pub in_prior_selection: &'a [bool],
    /// All tiers' members.
    pub members: &'a [ClusterId],
    /// Per cluster id: excluded because its workload Failed.
    pub excluded: &'a [Option<i128>],
    pub snapshot: &'a HubSnapshot,
    pub now: i128,
}

/// The child for the choice, before make-before-break.
pub(super) struct Rendered {
    pub child: Placement,
    /// What OCM will select of `child`.
    pub predicted: Vec<ClusterId>,
    /// A name list over the cap (`tier east would pin 1001 clusters`): the child is not written.
    pub too_large: Option<String>,
    /// Leave the live child as it is (the choice says so, or a list is too large).
    pub keep_child: bool,
}

/// Whether the child pins its clusters by name: whenever capacity decides (explicit rules, or the
/// implicit one of `spec.workload`), since OCM does not read it.
fn pinned(spec: &TieredPlacementSpec) -> bool {
    let has_rules = spec.capacity.as_ref().is_some_and(|c| !c.rules.is_empty());
    has_rules || spec.workload.is_some() || spec.mode == TieringMode::Overflow
}

fn sorted_names(snapshot: &HubSnapshot, ids: &[ClusterId]) -> Vec<String> {
    let mut v: Vec<String> = ids
        .iter()
        .map(|id| snapshot.cluster_name(*id).to_string())
        .collect();
    v.sort();
    v
}

pub(super) fn render(input: &Input<'_>) -> Rendered {
    let Input {
        spec,
        owner,
        child_name,
        choice,
        health,
        in_prior_selection,
        members,
        excluded,
        snapshot,
        now,
    } = *input;
    let excluded = |id: &ClusterId| excluded.get(id.index()).is_some_and(Option::is_some);
    let failed_kept = failed_kept(health, spec, in_prior_selection);
    let pins: Vec<Vec<String>> = match spec.mode {
        TieringMode::Failover => health
            .iter()
            .zip(&failed_kept)
            .map(|(h, kept)| {
                let mut ids = h.qualifying.clone();
                ids.extend(kept.iter().copied());
                sorted_names(snapshot, &ids)
            })
            .collect(),
        TieringMode::Overflow => choice.chosen.clone(),
    };
    let pinned = pinned(spec);
    // Unpinned, a Failed cluster is left out by name: the tier's own failed members and those of
    // any other tier (a cluster set of the active tier may hold them too), except the failed
    // members a tier short of others keeps.
    let kept_failed = |id: &ClusterId| choice.active.iter().any(|&i| failed_kept[i].contains(id));
    let exclude: Vec<String> = if pinned {
        Vec::new()
    } else {
        let ids: Vec<ClusterId> = members
            .iter()
            .copied()
            .filter(|id| excluded(id) && !kept_failed(id))
            .collect();
        sorted_names(snapshot, &ids)
    };
    let too_large = over_cap(
        spec,
        &choice.active,
        pinned.then_some(pins.as_slice()),
        exclude.len(),
    );
    let active: Vec<ActiveTier<'_>> = choice
        .active
        .iter()
        .map(|&i| ActiveTier {
            index: i,
            pins: pinned.then(|| pins[i].as_slice()),
            exclude: &exclude,
        })
        .collect();
    let child = render::child(
        spec,
        owner,
        child_name,
        &active,
        spec.number_of_clusters,
        &Retained::default(),
        snapshot,
    );
    let predicted = predict(snapshot, &child, &active, &pins, &[], now);
    Rendered {
        child,
        predicted,
        keep_child: choice.keep_child || too_large.is_some(),
        too_large,
    }
}

/// Per tier: the clusters whose workload Failed that the child keeps anyway. Staying on a tier
/// short of clusters not known to fail (no target, or an override), some of its failed ones stay
/// rather than shrink or empty the child, but only as many as `numberOfClusters` needs beside
/// the others, the selected ones first, so OCM never prefers a failed cluster to one not known
/// to fail.
pub(super) fn failed_kept(
    health: &[Health],
    spec: &TieredPlacementSpec,
    in_prior_selection: &[bool],
) -> Vec<Vec<ClusterId>> {
    let wanted = super::wanted_clusters(spec);
    health
        .iter()
        .map(|h| {
            if spec.mode != TieringMode::Failover || h.qualifying.len() >= h.min {
                return Vec::new();
            }
            let mut failed = h.workload_failed.clone();
            failed.sort_by_key(|id| !in_prior_selection[id.index()]);
            if let Some(n) = wanted {
                failed.truncate(n.saturating_sub(h.qualifying.len()));
            }
            failed
        })
        .collect()
}

/// The first active tier whose name list exceeds the cap: its pins (`pins`, when pinned) or the
/// clusters left out by name (`excluded` of them).
fn over_cap(
    spec: &TieredPlacementSpec,
    active: &[usize],
    pins: Option<&[Vec<String>]>,
    excluded: usize,
) -> Option<String> {
    active.iter().find_map(|&i| {
        let (what, count) = match pins {
            Some(pins) => ("pin", pins[i].len()),
            None => ("exclude by name", excluded),
        };
        (count > MAX_PINNED_PER_TIER)
            .then(|| format!("tier {} would {what} {count} clusters", spec.tiers[i].name))
    })
}

/// What OCM will select for the rendered child, with the same engine. Pinned tiers are
/// scheduled over exactly their pins (what the CEL pin admits; each pinned cluster passed its
/// tier's predicates), so the CEL pin need not be evaluated for every cluster.
pub(super) fn predict(
    snapshot: &HubSnapshot,
    child: &Placement,
    active: &[ActiveTier<'_>],
    pins: &[Vec<String>],
    retained: &[String],
    now: i128,
) -> Vec<ClusterId> {
    let now_ts = timestamp(now);
    let pinned = active.iter().all(|a| a.pins.is_some());
    if !pinned {
        let Ok(c) = candidates::candidates(snapshot, child) else {
            return Vec::new();
        };
        return schedule(snapshot, child, &c.clusters, now_ts)
            .map(|r| r.selected)
            .unwrap_or_default();
    }
    let mut ids: Vec<ClusterId> = active
        .iter()
        .flat_map(|a| pins[a.index].iter())
        .chain(retained)
        .filter_map(|n| snapshot.cluster_id(n))
        .collect();
    ids.sort();
    ids.dedup();
    let unpinned = Placement {
        metadata: child.metadata.clone(),
        spec: PlacementSpec {
            predicates: Vec::new(),
            ..child.spec.clone()
        },
        status: None,
    };
    schedule(snapshot, &unpinned, &ids, now_ts)
        .map(|r| r.selected)
        .unwrap_or_default()
}

/// Whether `child` must be applied: its plan hash differs from the live child's, or there is
/// no live child.
pub(super) fn needs_apply(child: &Placement, snapshot: &HubSnapshot, namespace: &str, name: &str) -> bool {
    let hash = |p: &Placement| {
        p.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(render::PLAN_HASH_ANNOTATION))
            .cloned()
    };
    let live = snapshot.placement(namespace, name).and_then(hash);
    hash(child) != live
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{healthy, ids, tier, unhealthy};
    use super::*;

    fn failover(number_of_clusters: i32) -> TieredPlacementSpec {
        TieredPlacementSpec {
            tiers: vec![tier("east")],
            number_of_clusters: Some(number_of_clusters),
            ..TieredPlacementSpec::default()
        }
    }

    #[test]
    fn a_tier_short_of_clusters_keeps_only_the_failed_ones_it_needs_selected_first() {
        // a-1 qualifies; a-2, a-3, a-4 failed, a-4 was selected.
        let mut short = unhealthy(ids(0..4), 3);
        short.qualifying = ids(0..1);
        short.workload_failed = ids(1..4);
        let selected = [false, false, false, true];
        let kept = failed_kept(std::slice::from_ref(&short), &failover(3), &selected);
        assert_eq!(kept, [vec![ClusterId(3), ClusterId(1)]]);
        // Enough clusters not known to fail: none kept.
        let enough = healthy(ids(0..3), 3, None);
        assert_eq!(
            failed_kept(&[enough], &failover(3), &selected),
            [Vec::<ClusterId>::new()]
        );
    }

    #[test]
    fn a_name_list_over_the_cap_is_too_large() {
        let spec = failover(1);
        let names = |n: usize| (0..n).map(|i| format!("c-{i}")).collect::<Vec<_>>();
        let at_cap = [names(MAX_PINNED_PER_TIER)];
        assert_eq!(over_cap(&spec, &[0], Some(&at_cap), 0), None);
        let over = [names(MAX_PINNED_PER_TIER + 1)];
        assert_eq!(
            over_cap(&spec, &[0], Some(&over), 0).as_deref(),
            Some("tier east would pin 1001 clusters")
        );
        assert!(over_cap(&spec, &[0], None, MAX_PINNED_PER_TIER + 1).is_some());
        assert_eq!(over_cap(&spec, &[], None, MAX_PINNED_PER_TIER + 1), None);
    }

    #[test]
    fn a_child_is_applied_when_its_plan_hash_differs_from_the_live_one() {
        let child = |hash: &str| Placement {
            metadata: ocm_score_api::ObjectMeta {
                namespace: Some("apps".into()),
                name: Some("app".into()),
                annotations: Some([(render::PLAN_HASH_ANNOTATION.to_string(), hash.to_string())].into()),
                ..Default::default()
            },
            ..Placement::default()
        };
        let hub = HubSnapshot::new(crate::placement::snapshot::HubObjects {
            placements: vec![child("h1")],
            ..Default::default()
        })
        .unwrap();
        assert!(!needs_apply(&child("h1"), &hub, "apps", "app"));
        assert!(needs_apply(&child("h2"), &hub, "apps", "app"));
        assert!(needs_apply(&child("h1"), &hub, "apps", "other"));
    }
}
