//! `Balance`: prefer clusters that carry fewer decisions of *other* placements.
//!
//! Every PlacementDecision in every namespace counts, except this placement's own (same
//! namespace and `placement` label). `score = 2 * trunc(100 * (0.5 - count/max))` in float64,
//! so scores are always even (1/3 gives 32, not 33); a cluster without decisions gets 100.

use super::ScoreContext;
use crate::api::well_known::PLACEMENT_LABEL;
use std::collections::HashMap;

pub const MAX_SCORE: i64 = 100;

pub fn score(ctx: &ScoreContext<'_>) -> Vec<Option<i64>> {
    let snapshot = ctx.snapshot;
    let own_ns = ctx.placement.metadata.namespace.as_deref().unwrap_or("");
    let own_name = ctx.placement.metadata.name.as_deref().unwrap_or("");
    let mut counts = vec![0u32; snapshot.clusters().len()];
    // Names without a ManagedCluster still count towards the maximum.
    let mut unknown: HashMap<&str, u32> = HashMap::new();
    for pd in snapshot.decisions() {
        let own = pd.metadata.namespace.as_deref().unwrap_or("") == own_ns
            && pd.metadata.labels.as_ref().and_then(|l| l.get(PLACEMENT_LABEL)).is_some_and(|v| v == own_name);
        if own {
            continue;
        }
        for d in pd.status.iter().flat_map(|s| s.decisions.iter()) {
            match snapshot.cluster_id(&d.cluster_name) {
                Some(id) => counts[id.index()] += 1,
                None => *unknown.entry(d.cluster_name.as_str()).or_insert(0) += 1,
            }
        }
    }
    let max = counts.iter().chain(unknown.values()).copied().max().unwrap_or(0);
    ctx.feasible
        .iter()
        .map(|id| {
            let count = counts[id.index()];
            Some(if count == 0 { MAX_SCORE } else { balance_score(count, max) })
        })
        .collect()
}

/// The float64 arithmetic of upstream, truncated toward zero.
pub fn balance_score(count: u32, max: u32) -> i64 {
    let usage = f64::from(count) / f64::from(max);
    2 * (100.0 * (0.5 - usage)) as i64
}

#[cfg(test)]
mod tests {
    use super::balance_score;

    #[test]
    fn keeps_upstream_truncation() {
        assert_eq!(balance_score(1, 3), 32);
        assert_eq!(balance_score(2, 5), 18);
        assert_eq!(balance_score(1, 1), -100);
        assert_eq!(balance_score(1, 2), 0);
    }
}
