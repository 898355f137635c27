//! Instants as i128 nanoseconds, and the rounding of instants the planner and the reservation
//! ledger record in status.
//!
//! `metav1.Time` keeps whole seconds, so every instant the planner writes is rounded **up** to the
//! second before it is used: what the planner decides from its own status is then the same
//! whether the status came from memory or from the API server (restart equivalence), and
//! rounding up only ever delays a voluntary move.

use k8s_openapi::jiff::Timestamp;
use ocm_score_api::Time;
use std::time::Duration;

pub(crate) const SECOND: i128 = 1_000_000_000;

pub(crate) fn ns(t: Timestamp) -> i128 {
    t.as_nanosecond()
}

pub(crate) fn dur(d: Duration) -> i128 {
    d.as_nanos() as i128
}

/// The next whole second at or after `t`.
pub(crate) fn ceil_second(t: i128) -> i128 {
    t.div_euclid(SECOND) * SECOND + if t.rem_euclid(SECOND) == 0 { 0 } else { SECOND }
}

pub(crate) fn timestamp(t: i128) -> Timestamp {
    Timestamp::from_nanosecond(t).unwrap_or(if t < 0 { Timestamp::MIN } else { Timestamp::MAX })
}

pub(crate) fn time(t: i128) -> Time {
    Time(timestamp(t))
}

pub(crate) fn of(t: &Time) -> i128 {
    t.0.as_nanosecond()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_up_keeps_whole_seconds() {
        assert_eq!(ceil_second(5 * SECOND), 5 * SECOND);
        assert_eq!(ceil_second(5 * SECOND + 1), 6 * SECOND);
        assert_eq!(ceil_second(-1), 0);
    }
}
