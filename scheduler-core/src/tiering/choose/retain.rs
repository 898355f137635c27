//! Step 6, make-before-break (workload-failover.md §5): the clusters this plan leaves may stay in
//! the child beside their replacements. It decides the child actually written and the clusters
//! OCM is then expected to select.
//!
//! # How the child changes
//!
//! Which clusters stay and for how long is [`super::super::workload::retain`]'s rule (a Failed
//! workload by `workloadHealth.purge`, a voluntary move by `failback.overlap`). With retained
//! clusters the active tiers are pinned exactly (per tier, what OCM selects now) plus the
//! retained ones, and `numberOfClusters` grows by their count. Every pin list is held to
//! [`MAX_PINNED_PER_TIER`]: beyond it the plan breaks before making (the retained clusters go at
//! once) rather than leave the child as it was, on the clusters it leaves.

use super::super::PlanEvent;
use super::super::render::{self, ActiveTier, MAX_PINNED_PER_TIER, Owner, Retained};
use super::super::workload::retain::{self, Leaving, Released};
use super::super::workload::verdicts::WorkloadVerdicts;
use super::Requeue;
use super::child::{self, Rendered};
use super::choice::{Choice, voluntary};
use super::prior::Prior;
use crate::instant::dur;
use crate::placement::snapshot::{ClusterId, HubSnapshot};
use ocm_score_api::crd::tiered_placement::{RELEASE_ANNOTATION, RetainedCluster, TieredPlacementSpec};
use ocm_score_api::{ObjectMeta, Placement};

/// What retention is decided from.
pub(super) struct Input<'a> {
    /// Its annotations hold the release annotation.
    pub meta: &'a ObjectMeta,
    pub spec: &'a TieredPlacementSpec,
    /// `failback.overlap`, in nanoseconds.
    pub overlap: i128,
    pub choice: &'a Choice,
    pub before: &'a Prior<'a>,
    pub workload: &'a WorkloadVerdicts,
    pub tier_of: &'a [Option<usize>],
    pub snapshot: &'a HubSnapshot,
    pub owner: &'a Owner<'a>,
    pub child_name: &'a str,
    pub now: i128,
}

/// The child to write and what it keeps.
pub(super) struct Kept {
    /// `None`: leave the live child as it is.
    pub child: Option<Placement>,
    /// The clusters OCM is expected to select, sorted.
    pub predicted: Vec<String>,
    /// Sorted by cluster.
    pub retained: Vec<RetainedCluster>,
    /// `PinningTooLarge`: the retained clusters were dropped at once.
    pub dropped_warning: Option<PlanEvent>,
    /// One Normal event per change of the retained clusters.
    pub events: Vec<PlanEvent>,
    pub requeue: Requeue,
}

/// Decides the retained clusters and the child for `rendered`, the child of the choice alone.
pub(super) fn keep(input: &Input<'_>, rendered: Rendered) -> Kept {
    let Input {
        meta,
        spec,
        overlap,
        choice,
        before,
        workload,
        tier_of,
        snapshot,
        owner,
        child_name,
        now,
    } = *input;
    let mut requeue = Requeue::after(now);
    let names = |ids: &[ClusterId]| {
        let mut v: Vec<String> = ids
            .iter()
            .map(|id| snapshot.cluster_name(*id).to_string())
            .collect();
        v.sort();
        v
    };
    if rendered.keep_child {
        return Kept {
            child: None,
            predicted: before.predicted.to_vec(),
            retained: before.retained.to_vec(),
            dropped_warning: None,
            events: Vec::new(),
            requeue,
        };
    }
    let released = Released::parse(
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(RELEASE_ANNOTATION))
            .map(String::as_str),
    );
    let leaving = Leaving {
        failed_grace: spec.workload_health.as_ref().map(|p| p.grace().map(dur)),
        voluntary: choice.movement.as_ref().is_some_and(|m| voluntary(m.kind)),
        overlap,
    };
    let retention = retain::retain(
        before.retained,
        &names(&before.selection),
        &names(&rendered.predicted),
        workload,
        &leaving,
        &released,
        |c| {
            snapshot
                .cluster_id(c)
                .is_some_and(|id| tier_of[id.index()].is_some())
        },
        now,
    );
    requeue.at(retention.requeue_at);
    let mut retained = retention.retained;
    let exact = exact_pins(spec.tiers.len(), &rendered.predicted, tier_of, snapshot);
    let mut dropped_warning = None;
    if !retained.is_empty()
        && let Some((what, count)) = over_cap(spec, &choice.active, &exact, retained.len())
    {
        let kept: Vec<&str> = retained.iter().map(|r| r.cluster.as_str()).collect();
        dropped_warning = Some(PlanEvent {
            type_: "Warning",
            reason: "PinningTooLarge".into(),
            message: format!(
                "keeping {} beside the choice would pin {count} clusters of tier {what} (at most {MAX_PINNED_PER_TIER}): dropped at once",
                kept.join(", ")
            ),
        });
        retained.clear();
    }
    let events = retention
        .events
        .into_iter()
        .filter(|(reason, _)| !(dropped_warning.is_some() && *reason == "Retained"))
        .map(|(reason, message)| PlanEvent {
            type_: "Normal",
            reason: reason.to_string(),
            message,
        })
        .collect();
    let (child, predicted) = if retained.is_empty() {
        (rendered.child, names(&rendered.predicted))
    } else {
        let active: Vec<ActiveTier<'_>> = choice
            .active
            .iter()
            .map(|&i| ActiveTier {
                index: i,
                pins: Some(exact[i].as_slice()),
                exclude: &[],
            })
            .collect();
        let kept: Vec<String> = retained.iter().map(|r| r.cluster.clone()).collect();
        let mut kept_tiers: Vec<usize> = kept
            .iter()
            .filter_map(|n| snapshot.cluster_id(n).and_then(|id| tier_of[id.index()]))
            .collect();
        kept_tiers.sort_unstable();
        kept_tiers.dedup();
        let number = spec
            .number_of_clusters
            .map(|n| n.saturating_add(i32::try_from(kept.len()).unwrap_or(i32::MAX)));
        let with_kept = Retained {
            names: &kept,
            tiers: &kept_tiers,
        };
        let child = render::child(spec, owner, child_name, &active, number, &with_kept, snapshot);
        let ids = child::predict(snapshot, &child, &active, &exact, &kept, now);
        (child, names(&ids))
    };
    Kept {
        child: Some(child),
        predicted,
        retained,
        dropped_warning,
        events,
        requeue,
    }
}

/// Per tier: the predicted clusters it holds (sorted names), what it pins beside retained ones.
fn exact_pins(
    tier_count: usize,
    predicted: &[ClusterId],
    tier_of: &[Option<usize>],
    snapshot: &HubSnapshot,
) -> Vec<Vec<String>> {
    let mut exact: Vec<Vec<String>> = vec![Vec::new(); tier_count];
    for id in predicted {
        if let Some(t) = tier_of[id.index()] {
            exact[t].push(snapshot.cluster_name(*id).to_string());
        }
    }
    for e in &mut exact {
        e.sort();
    }
    exact
}

/// The first pin list over the cap, with its length: an active tier's, or the retained
/// clusters' own.
fn over_cap<'a>(
    spec: &'a TieredPlacementSpec,
    active: &[usize],
    exact: &[Vec<String>],
    retained: usize,
) -> Option<(&'a str, usize)> {
    active
        .iter()
        .map(|&i| (spec.tiers[i].name.as_str(), exact[i].len()))
        .chain(std::iter::once(("of retained clusters", retained)))
        .find(|(_, n)| *n > MAX_PINNED_PER_TIER)
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{snapshot, tier};
    use super::*;

    #[test]
    fn each_tier_pins_exactly_the_clusters_it_holds_of_the_prediction() {
        let hub = snapshot(&["a-1", "a-2", "b-1", "x-1"]);
        let tier_of = [Some(0), Some(0), Some(1), None];
        let predicted = [ClusterId(3), ClusterId(1), ClusterId(2), ClusterId(0)];
        assert_eq!(
            exact_pins(2, &predicted, &tier_of, &hub),
            [vec!["a-1", "a-2"], vec!["b-1"]]
        );
    }

    #[test]
    fn retained_clusters_are_dropped_when_a_pin_list_would_exceed_the_cap() {
        let spec = TieredPlacementSpec {
            tiers: vec![tier("east"), tier("west")],
            ..TieredPlacementSpec::default()
        };
        let full = vec![String::new(); MAX_PINNED_PER_TIER];
        let over = vec![String::new(); MAX_PINNED_PER_TIER + 1];
        assert_eq!(over_cap(&spec, &[0], &[full.clone(), over.clone()], 1), None);
        assert_eq!(
            over_cap(&spec, &[0, 1], &[full.clone(), over], 1),
            Some(("west", MAX_PINNED_PER_TIER + 1))
        );
        assert_eq!(
            over_cap(&spec, &[0], &[full, Vec::new()], MAX_PINNED_PER_TIER + 1),
            Some(("of retained clusters", MAX_PINNED_PER_TIER + 1))
        );
    }
}
