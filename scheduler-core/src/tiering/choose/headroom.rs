//! Step 7, failover headroom (`spec.workload` only): per tier, how many of the workload's replicas
//! its clusters outside the current selection would take if the selected clusters failed now, and
//! the condition `FailoverFits` saying whether that is enough. An operator sees the shortfall
//! before the outage, not during it.
//!
//! A cluster counts when it is feasible, not excluded by a workload failure, not selected, and its
//! `fits.<shape>`, less the other placements' reservations, holds `replicasPerCluster`: the clusters
//! the planner's implicit workload rule ([`super::super::verdict`]) would let a move land on. A
//! tier takes `replicasPerCluster` per such cluster, capped at what the workload needs there
//! (`numberOfClusters`, else the tier's `minClusters` or 1, clusters). An Unknown score counts as
//! nothing: a failover could not enter on it.
//!
//! `FailoverFits` is True when, in Failover, some tier other than the active one would take every
//! replica (a failover moves to one tier), and in Overflow, when all tiers together would.

use super::super::condition;
use super::super::verdict::workload_replicas;
use super::health::Health;
use super::wanted_clusters;
use crate::placement::snapshot::HubSnapshot;
use crate::reservation::View;
use ocm_score_api::crd::tiered_placement::{TieredPlacementSpec, TieringMode};

/// `FailoverFits` reasons.
pub(super) const FITS: &str = "HeadroomAvailable";
pub(super) const SHORT: &str = "InsufficientHeadroom";
pub(super) const NO_OTHER_TIER: &str = "NoOtherTier";

/// What headroom is computed from.
pub(super) struct Input<'a> {
    pub spec: &'a TieredPlacementSpec,
    /// Per tier, in spec order.
    pub health: &'a [Health],
    /// Indices of the active tiers.
    pub active: &'a [usize],
    /// Per cluster id: excluded because its workload Failed.
    pub excluded: &'a [Option<i128>],
    /// Per cluster id: in the child's current decisions (credited its own replicas).
    pub in_decision: &'a [bool],
    /// The clusters OCM is expected to select, sorted.
    pub predicted: &'a [String],
    pub snapshot: &'a HubSnapshot,
    pub reserved: &'a View<'a>,
    pub now: i128,
}

/// One tier's headroom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct TierHeadroom {
    /// Replicas the tier would take, at most `needed`.
    pub replicas: i64,
    /// Replicas the workload needs on this tier.
    pub needed: i64,
    /// Candidate clusters whose `fits` score is Unknown.
    pub unknown: usize,
}

/// The headroom of each tier, and the `FailoverFits` condition.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Headroom {
    /// Per tier, in spec order.
    pub tiers: Vec<TierHeadroom>,
    /// `(status, reason, message)` of `FailoverFits`.
    pub condition: (bool, &'static str, String),
}

/// `None` without `spec.workload`.
pub(super) fn judge(input: &Input<'_>) -> Option<Headroom> {
    let Input {
        spec,
        health,
        active,
        excluded,
        in_decision,
        predicted,
        snapshot,
        reserved,
        now,
    } = *input;
    let per_cluster = i64::from(spec.workload.as_ref()?.replicas_per_cluster);
    let selected = |name: &str| predicted.binary_search_by(|p| p.as_str().cmp(name)).is_ok();
    let excluded = |i: usize| excluded.get(i).is_some_and(Option::is_some);
    let tiers: Vec<TierHeadroom> = health
        .iter()
        .map(|h| {
            let needed_clusters = wanted_clusters(spec).unwrap_or(h.min) as i64;
            let mut holding = 0i64;
            let mut unknown = 0;
            for id in &h.feasible {
                if excluded(id.index()) || selected(snapshot.cluster_name(*id)) {
                    continue;
                }
                match workload_replicas(spec, snapshot, reserved, *id, in_decision[id.index()], now) {
                    Some(r) if r >= per_cluster => holding += 1,
                    Some(_) => {}
                    None => unknown += 1,
                }
            }
            TierHeadroom {
                replicas: holding.min(needed_clusters) * per_cluster,
                needed: needed_clusters * per_cluster,
                unknown,
            }
        })
        .collect();
    let condition = match spec.mode {
        TieringMode::Failover => failover(spec, &tiers, active),
        TieringMode::Overflow => overflow(spec, &tiers),
    };
    Some(Headroom { tiers, condition })
}

/// `tier b would take 4 of 8 replicas (short 4; 1 cluster without a fits score)`.
fn describe(name: &str, t: &TierHeadroom) -> String {
    let mut text = format!("tier {name} would take {} of {} replicas", t.replicas, t.needed);
    let short = t.needed - t.replicas;
    let unknown = match t.unknown {
        0 => String::new(),
        1 => "1 cluster without a fits score".to_string(),
        n => format!("{n} clusters without a fits score"),
    };
    match (short > 0, unknown.is_empty()) {
        (true, true) => text.push_str(&format!(" (short {short})")),
        (true, false) => text.push_str(&format!(" (short {short}; {unknown})")),
        _ => {}
    }
    text
}

fn failover(
    spec: &TieredPlacementSpec,
    tiers: &[TierHeadroom],
    active: &[usize],
) -> (bool, &'static str, String) {
    let failed = if active.is_empty() {
        "the selected clusters".to_string()
    } else {
        let names: Vec<&str> = active.iter().map(|&i| spec.tiers[i].name.as_str()).collect();
        format!("tier {}", names.join(", "))
    };
    let others: Vec<usize> = (0..tiers.len()).filter(|i| !active.contains(i)).collect();
    if others.is_empty() {
        return (
            false,
            NO_OTHER_TIER,
            format!("if {failed} failed now, there is no other tier to fail over to"),
        );
    }
    if let Some(&i) = others.iter().find(|&&i| tiers[i].replicas >= tiers[i].needed) {
        return (
            true,
            FITS,
            format!(
                "if {failed} failed now, {}",
                describe(&spec.tiers[i].name, &tiers[i])
            ),
        );
    }
    let each: Vec<String> = others
        .iter()
        .map(|&i| describe(&spec.tiers[i].name, &tiers[i]))
        .collect();
    (
        false,
        SHORT,
        format!(
            "if {failed} failed now, no tier would take the workload: {}",
            each.join("; ")
        ),
    )
}

fn overflow(spec: &TieredPlacementSpec, tiers: &[TierHeadroom]) -> (bool, &'static str, String) {
    let needed = tiers.first().map_or(0, |t| t.needed);
    let total: i64 = tiers.iter().map(|t| t.replicas).sum::<i64>().min(needed);
    let each: Vec<String> = spec
        .tiers
        .iter()
        .zip(tiers)
        .filter(|(_, t)| t.replicas > 0 || t.unknown > 0)
        .map(|(tier, t)| format!("tier {} {}", tier.name, t.replicas))
        .collect();
    let by_tier = if each.is_empty() {
        String::new()
    } else {
        format!(" ({})", each.join(", "))
    };
    let message = format!(
        "if the selected clusters failed now, the clusters left would take {total} of {needed} replicas{by_tier}"
    );
    if total >= needed {
        (true, FITS, message)
    } else {
        (false, SHORT, format!("{message}, short {}", needed - total))
    }
}

/// The condition type, for callers that set it.
pub(super) const CONDITION: &str = condition::FAILOVER_FITS;
