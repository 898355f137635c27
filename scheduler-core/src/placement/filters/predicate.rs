//! The `Predicate` filter: a cluster passes when any `spec.predicates[]` selector matches it.

use super::{FilterOutput, FilterReason};
use crate::placement::selector::{ClusterMatcher, SelectorMiss};
use crate::placement::snapshot::{ClusterId, HubSnapshot};
use crate::placement::status::Status;
use ocm_score_api::Placement;

pub const NAME: &str = "Predicate";

/// The selectors of every predicate, compiled. A predicate without `requiredClusterSelector`
/// matches every cluster (the field is a value type upstream).
pub fn compile(placement: &Placement) -> Result<Vec<ClusterMatcher>, Status> {
    let mut matchers = Vec::with_capacity(placement.spec.predicates.len());
    for predicate in &placement.spec.predicates {
        let selector = predicate.required_cluster_selector.clone().unwrap_or_default();
        let matcher = ClusterMatcher::new(&selector).map_err(|e| Status::misconfigured(NAME, e))?;
        if let Some(e) = matcher.cel_compile_error() {
            return Err(Status::misconfigured(NAME, e));
        }
        matchers.push(matcher);
    }
    Ok(matchers)
}

pub fn filter(
    snapshot: &HubSnapshot,
    placement: &Placement,
    clusters: &[ClusterId],
) -> (FilterOutput, Status) {
    // No predicates, or no clusters: pass through without validating anything (upstream order).
    if placement.spec.predicates.is_empty() || clusters.is_empty() {
        return (
            FilterOutput {
                passed: clusters.to_vec(),
                rejected: Vec::new(),
            },
            Status::success(),
        );
    }
    let matchers = match compile(placement) {
        Ok(m) => m,
        Err(status) => return (FilterOutput::default(), status),
    };
    let mut out = FilterOutput {
        passed: Vec::with_capacity(clusters.len()),
        rejected: Vec::new(),
    };
    let matchers: Vec<_> = matchers.iter().map(|m| m.bind(snapshot)).collect();
    for &id in clusters {
        if matchers.iter().any(|m| m.matches(id)) {
            out.passed.push(id);
        } else {
            out.rejected.push((id, FilterReason::Predicate));
        }
    }
    (out, Status::success())
}

/// For explanations: why each predicate rejects the cluster (`None` for a predicate that
/// matches). Empty when the predicates do not compile.
pub fn explain(snapshot: &HubSnapshot, placement: &Placement, id: ClusterId) -> Vec<Option<SelectorMiss>> {
    compile(placement)
        .map(|matchers| matchers.iter().map(|m| m.miss(snapshot, id)).collect())
        .unwrap_or_default()
}
