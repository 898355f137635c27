//! Instants as i128 nanoseconds since the Unix epoch: wide enough for Go's zero time and for
//! Go's wrapped int64 durations added to it, which `jiff::Timestamp` (years ±9999) is not.

use k8s_openapi::jiff::Timestamp;
use ocm_score_api::Time;

/// Go's zero `time.Time` (0001-01-01T00:00:00Z), what an absent `metav1.Time` decodes to.
const GO_ZERO_TIME_NS: i128 = -62_135_596_800 * 1_000_000_000;

/// An optional API time; absent is Go's zero time.
pub(crate) fn time_ns(t: Option<&Time>) -> i128 {
    t.map_or(GO_ZERO_TIME_NS, |t| t.0.as_nanosecond())
}

/// Converts back for reporting; instants beyond jiff's range are clamped to it.
pub(crate) fn timestamp(ns: i128) -> Timestamp {
    Timestamp::from_nanosecond(ns).unwrap_or(if ns < 0 { Timestamp::MIN } else { Timestamp::MAX })
}
