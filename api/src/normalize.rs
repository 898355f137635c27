//! Mapping a raw measurement (free cores, free GiB, a percentage, ...) onto the integer score range
//! an AddOnPlacementScore accepts, `-100..=100`.
//!
//! The mapping follows OCM sdk-go's `ScoreNormalizer` so that scores mean the same thing whether an
//! upstream Go agent or ours produced them:
//!
//! * `value > max` gives `100`;
//! * otherwise `value <= min` gives `-100`;
//! * otherwise `200 · (value − min) / (max − min) − 100`, truncated toward zero (Go's float→int
//!   conversion), so `value == max` gives exactly `100` and the interior never reaches it early.
//!
//! Two deliberate differences make the function total and safe to publish:
//!
//! * NaN (for example a percentage of a zero capacity) gives `-100`. Go leaves this to the platform
//!   (`int32(NaN)` is `-2147483648` on amd64, which the CRD then rejects); a value that is not a number
//!   says nothing good about a cluster, so it gets the least favourable score.
//! * The result is clamped to `-100..=100` whatever the bounds, including NaN or infinite bounds.

/// The lowest score an AddOnPlacementScore may carry (the CRD's `minimum`).
pub const MIN_SCORE: i32 = -100;
/// The highest score an AddOnPlacementScore may carry (the CRD's `maximum`).
pub const MAX_SCORE: i32 = 100;

/// Linear normalization of values in `min..=max` onto `-100..=100`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreNormalizer {
    min: f64,
    max: f64,
}

impl ScoreNormalizer {
    /// A normalizer for the given bounds. Like sdk-go, any bounds are accepted: with `min >= max`
    /// every value is either above `max` (100) or at most `min` (-100).
    pub fn new(min: f64, max: f64) -> Self {
        Self { min, max }
    }

    pub fn min(&self) -> f64 {
        self.min
    }

    pub fn max(&self) -> f64 {
        self.max
    }

    /// The score for `value`; always within `MIN_SCORE..=MAX_SCORE`.
    pub fn normalize(&self, value: f64) -> i32 {
        if value.is_nan() {
            return MIN_SCORE;
        }
        if value > self.max {
            return MAX_SCORE;
        }
        if value <= self.min {
            return MIN_SCORE;
        }
        let scaled = 200.0 * (value - self.min) / (self.max - self.min) - 100.0;
        if scaled.is_nan() {
            // Only reachable with NaN or infinite bounds.
            return MIN_SCORE;
        }
        // `as` truncates toward zero like Go's conversion and saturates out-of-range values.
        clamp_score(scaled.trunc() as i64)
    }
}

/// Clamps any integer into the publishable score range.
pub fn clamp_score(value: i64) -> i32 {
    value.clamp(i64::from(MIN_SCORE), i64::from(MAX_SCORE)) as i32
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn matches_sdk_go_vectors() {
        // The vectors of sdk-go's score_test.go, range 0..50.
        let n = ScoreNormalizer::new(0.0, 50.0);
        for (value, want) in [(0.0, -100), (25.0, 0), (50.0, 100), (-10.0, -100), (60.0, 100)] {
            assert_eq!(n.normalize(value), want, "value {value}");
        }
    }

    #[test]
    fn truncates_toward_zero_like_go() {
        let n = ScoreNormalizer::new(0.0, 200.0);
        // 200·v/200 − 100 = v − 100
        assert_eq!(n.normalize(199.9), 99);
        assert_eq!(n.normalize(0.5), -99);
        assert_eq!(n.normalize(100.5), 0);
        assert_eq!(n.normalize(99.5), 0);
    }

    #[test]
    fn degenerate_bounds_behave_like_sdk_go() {
        let equal = ScoreNormalizer::new(5.0, 5.0);
        assert_eq!(equal.normalize(5.0), -100);
        assert_eq!(equal.normalize(5.1), 100);
        let inverted = ScoreNormalizer::new(10.0, 0.0);
        assert_eq!(inverted.normalize(5.0), 100);
        assert_eq!(inverted.normalize(0.0), -100);
        assert_eq!(inverted.normalize(-1.0), -100);
    }

    #[test]
    fn nan_and_infinities_are_guarded() {
        let n = ScoreNormalizer::new(0.0, 100.0);
        assert_eq!(n.normalize(f64::NAN), -100);
        assert_eq!(n.normalize(f64::INFINITY), 100);
        assert_eq!(n.normalize(f64::NEG_INFINITY), -100);
        assert_eq!(ScoreNormalizer::new(f64::NAN, 1.0).normalize(0.5), -100);
        assert_eq!(
            ScoreNormalizer::new(f64::NEG_INFINITY, f64::INFINITY).normalize(0.0),
            -100
        );
    }

    #[test]
    fn clamp_score_bounds() {
        assert_eq!(clamp_score(i64::MAX), 100);
        assert_eq!(clamp_score(i64::MIN), -100);
        assert_eq!(clamp_score(42), 42);
    }

    fn any_f64() -> impl Strategy<Value = f64> {
        prop_oneof![
            -1e12..1e12f64,
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(0.0),
            any::<f64>(),
        ]
    }

    proptest! {
        #[test]
        fn always_in_range(min in any_f64(), max in any_f64(), value in any_f64()) {
            let score = ScoreNormalizer::new(min, max).normalize(value);
            prop_assert!((MIN_SCORE..=MAX_SCORE).contains(&score));
        }

        #[test]
        fn monotonic(min in -1e6..1e6f64, width in 1e-3..1e6f64, a in -2e6..2e6f64, b in -2e6..2e6f64) {
            let n = ScoreNormalizer::new(min, min + width);
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(n.normalize(lo) <= n.normalize(hi), "{lo} -> {}, {hi} -> {}", n.normalize(lo), n.normalize(hi));
        }

        #[test]
        fn clamped_outside_bounds(min in -1e6..1e6f64, width in 1e-3..1e6f64, beyond in 0.0..1e9f64) {
            let n = ScoreNormalizer::new(min, min + width);
            prop_assert_eq!(n.normalize(min - beyond), MIN_SCORE);
            prop_assert_eq!(n.normalize(min + width + beyond), MAX_SCORE);
        }

        #[test]
        fn interior_is_linear(min in -1e3..1e3f64, width in 1.0..1e3f64, fraction in 0.001..0.999f64) {
            let n = ScoreNormalizer::new(min, min + width);
            let score = n.normalize(min + fraction * width);
            let exact = 200.0 * fraction - 100.0;
            prop_assert!((f64::from(score) - exact).abs() < 1.0 + 1e-9, "fraction {fraction}: {score} vs {exact}");
        }
    }
}
