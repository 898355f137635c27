//! Whether an update of an AddOnPlacementScore can change what a scheduler decides.
//!
//! Agents renew every score object each minute: the same scores with a later `validUntil`. A
//! scheduler reads a score's items (the last item of a name wins, so order counts), whether it
//! has a status, and whether `validUntil` has passed at the instant it schedules. An update that
//! keeps all three as they are at `now` changes no decision. What it leaves to a cache of the
//! scores is the instant a score expires without a renewal: the hub's caches keep each score's
//! latest `validUntil` for that, rather than wait for the one a decision read.

use ocm_score_api::AddOnPlacementScoreStatus;

/// Whether a status is in force at `now_ns` (no `validUntil`: always).
fn in_force(status: &AddOnPlacementScoreStatus, now_ns: i128) -> bool {
    status
        .valid_until
        .as_ref()
        .is_none_or(|until| until.0.as_nanosecond() >= now_ns)
}

/// True when going from `before` to `after` at `now_ns` leaves every input of a decision as it
/// was: both have a status, the same items in the same order, and both are in force or both
/// expired. A new object (`before` is `None`) or a deleted one is never a renewal.
pub fn is_renewal(
    before: Option<&Option<AddOnPlacementScoreStatus>>,
    after: &Option<AddOnPlacementScoreStatus>,
    now_ns: i128,
) -> bool {
    match (before, after) {
        (Some(None), None) => true,
        (Some(Some(before)), Some(after)) => {
            before.scores == after.scores && in_force(before, now_ns) == in_force(after, now_ns)
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocm_score_api::{AddOnPlacementScoreItem, Time};

    const SECOND: i128 = 1_000_000_000;

    fn status(scores: &[(&str, i32)], valid_until_s: Option<i64>) -> Option<AddOnPlacementScoreStatus> {
        Some(AddOnPlacementScoreStatus {
            scores: scores
                .iter()
                .map(|(name, value)| AddOnPlacementScoreItem {
                    name: (*name).into(),
                    value: *value,
                })
                .collect(),
            valid_until: valid_until_s.map(|s| Time(jiff::Timestamp::from_second(s).unwrap())),
            ..Default::default()
        })
    }

    #[test]
    fn a_later_valid_until_alone_is_a_renewal() {
        let before = status(&[("cpu", 40), ("memory", 10)], Some(100));
        let after = status(&[("cpu", 40), ("memory", 10)], Some(160));
        assert!(is_renewal(Some(&before), &after, 50 * SECOND));
        // Expiry dropped, or set: both in force at now.
        assert!(is_renewal(
            Some(&before),
            &status(&[("cpu", 40), ("memory", 10)], None),
            50 * SECOND
        ));
        // Nothing at all changed (a label edit).
        assert!(is_renewal(Some(&before), &before, 50 * SECOND));
        assert!(is_renewal(Some(&None), &None, 50 * SECOND));
    }

    #[test]
    fn values_order_presence_and_expiry_are_changes() {
        let before = status(&[("cpu", 40), ("memory", 10)], Some(100));
        let now = 50 * SECOND;
        for (after, why) in [
            (status(&[("cpu", 41), ("memory", 10)], Some(160)), "a value"),
            (
                status(&[("memory", 10), ("cpu", 40)], Some(160)),
                "the order (last item wins)",
            ),
            (status(&[("cpu", 40)], Some(160)), "a missing score"),
            (
                status(&[("cpu", 40), ("memory", 10), ("gpu", 0)], Some(160)),
                "a new score",
            ),
            (
                status(&[("cpu", 40), ("memory", 10)], Some(40)),
                "already expired",
            ),
            (None, "the status gone"),
        ] {
            assert!(!is_renewal(Some(&before), &after, now), "{why}");
        }
        // A status that had expired comes back in force.
        let expired = status(&[("cpu", 40), ("memory", 10)], Some(10));
        assert!(!is_renewal(Some(&expired), &before, now));
        // A new object.
        assert!(!is_renewal(None, &before, now));
    }
}
