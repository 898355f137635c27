//! Turning one score's values for the whole fleet into -100..100.
//!
//! Unlike an agent, which sees one cluster, the hub sees every cluster's value at once, so by default
//! the bounds are the fleet's own: the best cluster gets 100, the worst -100, the rest in between
//! (linear, truncated toward zero like OCM's sdk-go `ScoreNormalizer`, which
//! [`ocm_score_api::normalize::ScoreNormalizer`] reproduces). Fixed bounds are the alternative when
//! scores should mean the same thing from one round to the next.
//!
//! When the fleet gives no basis for ranking (one cluster, or every value equal) each cluster gets 0:
//! sdk-go's rule would give all of them -100 (`value <= min`), which would read as "worst".

use super::config::{Direction, Normalization};
use ocm_score_api::normalize::ScoreNormalizer;

/// The score for each value of `values` (which must all be finite), in the same order.
pub fn normalize_fleet(values: &[f64], direction: Direction, normalization: Normalization) -> Vec<i32> {
    let (min, max) = match normalization {
        Normalization::Fixed { min, max } => (min, max),
        Normalization::Fleet => {
            let Some(first) = values.first() else {
                return Vec::new();
            };
            let (min, max) = values
                .iter()
                .fold((*first, *first), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
            if min == max {
                return vec![0; values.len()];
            }
            (min, max)
        }
    };
    // The normalizer computes 200·(v − min) first; for ranges near f64::MAX that overflows. Scaling
    // by a power of two is exact, keeps the order, and brings such ranges back into reach.
    let scale = if (200.0 * (max - min)).is_finite() {
        1.0
    } else {
        1.0 / 1024.0
    };
    let normalizer = match direction {
        Direction::HigherIsBetter => ScoreNormalizer::new(min * scale, max * scale),
        // Mirrored: the smallest value gets 100, the largest -100, with the same truncation.
        Direction::LowerIsBetter => ScoreNormalizer::new(-max * scale, -min * scale),
    };
    values
        .iter()
        .map(|v| match direction {
            Direction::HigherIsBetter => normalizer.normalize(v * scale),
            Direction::LowerIsBetter => normalizer.normalize(-v * scale),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use Direction::*;

    const FLEET: Normalization = Normalization::Fleet;

    #[test]
    fn fleet_best_is_100_worst_is_minus_100() {
        assert_eq!(
            normalize_fleet(&[10.0, 20.0, 15.0, 12.5], HigherIsBetter, FLEET),
            vec![-100, 100, 0, -50]
        );
        assert_eq!(
            normalize_fleet(&[10.0, 20.0, 15.0, 12.5], LowerIsBetter, FLEET),
            vec![100, -100, 0, 50]
        );
    }

    #[test]
    fn truncates_toward_zero() {
        // 200·(v−0)/3 − 100 for v = 1, 2 → −33.3…, 33.3…
        assert_eq!(
            normalize_fleet(&[0.0, 1.0, 2.0, 3.0], HigherIsBetter, FLEET),
            vec![-100, -33, 33, 100]
        );
        assert_eq!(
            normalize_fleet(&[0.0, 1.0, 2.0, 3.0], LowerIsBetter, FLEET),
            vec![100, 33, -33, -100]
        );
    }

    #[test]
    fn one_cluster_or_all_equal_is_neutral() {
        assert_eq!(normalize_fleet(&[42.0], HigherIsBetter, FLEET), vec![0]);
        assert_eq!(
            normalize_fleet(&[-7.0, -7.0, -7.0], LowerIsBetter, FLEET),
            vec![0, 0, 0]
        );
        assert_eq!(normalize_fleet(&[], HigherIsBetter, FLEET), Vec::<i32>::new());
    }

    #[test]
    fn negative_values() {
        assert_eq!(
            normalize_fleet(&[-30.0, -10.0, -20.0], HigherIsBetter, FLEET),
            vec![-100, 100, 0]
        );
        assert_eq!(
            normalize_fleet(&[-1.0, 1.0, 0.0], LowerIsBetter, FLEET),
            vec![100, -100, 0]
        );
    }

    #[test]
    fn fixed_bounds_clamp_and_follow_sdk_go() {
        let fixed = Normalization::Fixed { min: 0.0, max: 50.0 };
        // sdk-go's vectors for 0..50.
        assert_eq!(
            normalize_fleet(&[0.0, 25.0, 50.0, -10.0, 60.0], HigherIsBetter, fixed),
            vec![-100, 0, 100, -100, 100]
        );
        assert_eq!(
            normalize_fleet(&[0.0, 25.0, 50.0, -10.0, 60.0], LowerIsBetter, fixed),
            vec![100, 0, -100, 100, -100]
        );
        // One cluster with fixed bounds still gets its absolute score.
        assert_eq!(normalize_fleet(&[37.5], HigherIsBetter, fixed), vec![50]);
    }

    #[test]
    fn extreme_ranges_stay_in_range_and_ordered() {
        let values = [-f64::MAX, 0.0, f64::MAX];
        assert_eq!(
            normalize_fleet(&values, HigherIsBetter, FLEET),
            vec![-100, 0, 100]
        );
        assert_eq!(normalize_fleet(&values, LowerIsBetter, FLEET), vec![100, 0, -100]);
        let tiny = [1e-300, 2e-300, 3e-300];
        assert_eq!(normalize_fleet(&tiny, HigherIsBetter, FLEET), vec![-100, 0, 100]);
    }
}
