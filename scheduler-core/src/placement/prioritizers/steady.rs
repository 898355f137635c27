//! `Steady`: 100 for clusters already in this placement's decisions, 0 for the others, so
//! existing decisions are not moved for a small gain elsewhere.

use super::ScoreContext;

pub fn score(ctx: &ScoreContext<'_>) -> Vec<Option<i64>> {
    ctx.feasible
        .iter()
        .map(|id| Some(if ctx.in_decision[id.index()] { 100 } else { 0 }))
        .collect()
}
