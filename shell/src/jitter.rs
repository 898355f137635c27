//! Randomly spread intervals, so a fleet of agents started together (or reconnecting to a restarted
//! hub together) does not hit the hub in lockstep.

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

/// A uniformly random fraction in `[0, 1)` (from the standard library's randomly seeded hasher; good
/// enough for spreading timers, not for anything secret).
fn random_fraction() -> f64 {
    let bits = RandomState::new().hash_one(std::time::Instant::now());
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// `base` scaled by a random factor in `[1 − fraction, 1 + fraction]`.
pub fn spread(base: Duration, fraction: f64) -> Duration {
    let fraction = fraction.clamp(0.0, 1.0);
    let factor = 1.0 - fraction + 2.0 * fraction * random_fraction();
    base.mul_f64(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stays_within_the_band_and_varies() {
        let base = Duration::from_secs(60);
        let samples: Vec<Duration> = (0..200).map(|_| spread(base, 0.1)).collect();
        assert!(
            samples
                .iter()
                .all(|d| (Duration::from_secs(54)..=Duration::from_secs(66)).contains(d))
        );
        assert!(samples.iter().any(|d| *d != samples[0]), "random");
        assert_eq!(spread(base, 0.0), base);
    }
}
