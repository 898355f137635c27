//! The `TaintToleration` filter and its requeue time.
//!
//! Times are compared as i128 nanoseconds since the Unix epoch ([`crate::placement::nanos`]).
//! A taint without `timeAdded` is Go's zero time (year 1), and `tolerationSeconds` is turned
//! into an int64 nanosecond duration with Go's wrapping multiplication, so huge values wrap
//! exactly as upstream.

use super::{FilterOutput, FilterReason};
use crate::placement::nanos::{time_ns, timestamp};
use crate::placement::snapshot::{ClusterId, HubSnapshot};
use crate::placement::status::Status;
use ocm_score_api::{Placement, Taint, Toleration};

pub const NAME: &str = "TaintToleration";

pub const EFFECT_PREFER_NO_SELECT: &str = "PreferNoSelect";
pub const EFFECT_NO_SELECT_IF_NEW: &str = "NoSelectIfNew";

/// The first invalid toleration, in order.
pub fn validate(tolerations: &[Toleration]) -> Result<(), Status> {
    for t in tolerations {
        let key = t.key.as_deref().unwrap_or("");
        let operator = t.operator.as_deref().unwrap_or("");
        if key.is_empty() && operator != "Exists" {
            return Err(Status::misconfigured(
                NAME,
                "If the key is empty, operator must be Exists.",
            ));
        }
        if operator == "Exists" && !t.value.as_deref().unwrap_or("").is_empty() {
            return Err(Status::misconfigured(
                NAME,
                "If the operator is Exists, the value should be empty.",
            ));
        }
    }
    Ok(())
}

fn toleration_matches(toleration: &Toleration, taint: &Taint) -> bool {
    let effect = toleration.effect.as_deref().unwrap_or("");
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = toleration.key.as_deref().unwrap_or("");
    if !key.is_empty() && key != taint.key {
        return false;
    }
    match toleration.operator.as_deref().unwrap_or("") {
        "" | "Equal" => toleration.value.as_deref().unwrap_or("") == taint.value.as_deref().unwrap_or(""),
        "Exists" => true,
        _ => false,
    }
}

/// When a matching toleration stops tolerating the taint; `None` = never.
fn deadline_ns(toleration: &Toleration, taint: &Taint) -> Option<i128> {
    toleration.toleration_seconds.map(|secs| {
        let duration = secs.wrapping_mul(1_000_000_000);
        time_ns(taint.time_added.as_ref()) + i128::from(duration)
    })
}

/// The verdict for one cluster.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Tolerance {
    /// Every taint is tolerated; `until` is the earliest toleration deadline, if any.
    Tolerated { until: Option<i128> },
    /// `taint` is not tolerated; `expired` names a matching toleration whose time ran out.
    Rejected {
        taint: usize,
        expired: Option<(usize, i128)>,
    },
}

/// The verdict for a cluster with these `taints`.
pub fn check(taints: &[Taint], tolerations: &[Toleration], in_decision: bool, now_ns: i128) -> Tolerance {
    let mut until: Option<i128> = None;
    for (ti, taint) in taints.iter().enumerate() {
        if taint.effect == EFFECT_PREFER_NO_SELECT {
            continue;
        }
        if taint.effect == EFFECT_NO_SELECT_IF_NEW && in_decision {
            continue;
        }
        let mut expired = None;
        let mut tolerated = false;
        for (i, toleration) in tolerations.iter().enumerate() {
            if !toleration_matches(toleration, taint) {
                continue;
            }
            match deadline_ns(toleration, taint) {
                None => {
                    tolerated = true;
                    break;
                }
                Some(d) if now_ns < d => {
                    until = Some(until.map_or(d, |u| u.min(d)));
                    tolerated = true;
                    break;
                }
                Some(d) => {
                    expired.get_or_insert((i, d));
                }
            }
        }
        if !tolerated {
            return Tolerance::Rejected { taint: ti, expired };
        }
    }
    Tolerance::Tolerated { until }
}

/// Filters `clusters`. `in_decision` tells whether a cluster is in the placement's existing
/// decisions (indexed by cluster id).
pub fn filter(
    snapshot: &HubSnapshot,
    placement: &Placement,
    clusters: &[ClusterId],
    in_decision: &[bool],
    now_ns: i128,
) -> (FilterOutput, Status) {
    if clusters.is_empty() {
        return (FilterOutput::default(), Status::success());
    }
    let tolerations = &placement.spec.tolerations;
    if let Err(status) = validate(tolerations) {
        return (FilterOutput::default(), status);
    }
    let mut out = FilterOutput {
        passed: Vec::with_capacity(clusters.len()),
        rejected: Vec::new(),
    };
    for &id in clusters {
        if !snapshot.is_tainted(id) {
            out.passed.push(id);
            continue;
        }
        match check(
            snapshot.cluster_taints(id),
            tolerations,
            in_decision[id.index()],
            now_ns,
        ) {
            Tolerance::Tolerated { .. } => out.passed.push(id),
            Tolerance::Rejected { taint, expired } => out.rejected.push((
                id,
                FilterReason::Taint {
                    taint,
                    expired: expired.map(|(i, d)| (i, timestamp(d))),
                },
            )),
        }
    }
    (out, Status::success())
}

/// The earliest toleration deadline among the clusters already in the placement's decisions
/// that are still tolerated: when the placement must be scheduled again.
pub fn requeue_time(
    snapshot: &HubSnapshot,
    placement: &Placement,
    decision_clusters: &[ClusterId],
    now_ns: i128,
) -> Option<i128> {
    decision_clusters
        .iter()
        .filter_map(|&id| {
            match check(
                snapshot.cluster_taints(id),
                &placement.spec.tolerations,
                true,
                now_ns,
            ) {
                Tolerance::Tolerated { until } => until,
                Tolerance::Rejected { .. } => None,
            }
        })
        .min()
}
