//! `Balance`: prefer clusters that carry fewer decisions of *other* placements.
//!
//! Every PlacementDecision in every namespace counts, except this placement's own (same
//! namespace and `placement` label). `score = 2 * trunc(100 * (0.5 - count/max))` in float64,
//! so scores are always even (1/3 gives 32, not 33); a cluster without decisions gets 100.

use super::ScoreContext;

pub const MAX_SCORE: i64 = 100;

pub fn score(ctx: &ScoreContext<'_>) -> Vec<Option<i64>> {
    let snapshot = ctx.snapshot;
    let own_ns = ctx.placement.metadata.namespace.as_deref().unwrap_or("");
    let own_name = ctx.placement.metadata.name.as_deref().unwrap_or("");
    // Slots cover names without a ManagedCluster too: they still count towards the maximum.
    let own = snapshot.decision_indices_of(own_ns, own_name);
    let adjusted: Vec<u32>;
    let (counts, max) = if own.is_empty() {
        // Nothing to subtract (a placement's first pass): the snapshot's counts as they are.
        (snapshot.decided_counts(), snapshot.max_decided_count())
    } else {
        let mut counts = snapshot.decided_counts().to_vec();
        for &i in own {
            for &slot in snapshot.decision_slots(i as usize) {
                counts[slot as usize] -= 1;
            }
        }
        let max = counts.iter().copied().max().unwrap_or(0);
        adjusted = counts;
        (adjusted.as_slice(), max)
    };
    ctx.feasible
        .iter()
        .map(|id| {
            let count = counts[id.index()];
            Some(if count == 0 {
                MAX_SCORE
            } else {
                balance_score(count, max)
            })
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
