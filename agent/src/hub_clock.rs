//! The hub's clock as this agent sees it.
//!
//! OCM's placement controller compares `validUntil` with the hub's clock. A managed cluster whose
//! clock runs behind would publish scores already expired there, and one running ahead would
//! publish scores that outlive the agent. So `validUntil` is stamped on the hub's clock: every
//! response of the hub's API server carries a `Date` header (whole seconds, taken while the server
//! answered), and each one bounds the offset between the hub's clock and ours. The bounds of recent
//! responses together narrow it to well under a second, with no request of its own.

use jiff::{SignedDuration, Timestamp};
use ocm_score_shell::sync::lock;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// How far back responses count: long enough for several writes at the default 60 s refresh, short
/// enough that drift between the two clocks (parts per million) stays far below the bounds' width.
const WINDOW: SignedDuration = SignedDuration::from_secs(600);
/// The most responses kept (a busy agent answers many more inside the window than it needs).
const MAX_SAMPLES: usize = 64;
/// An offset past this is worth a warning: the clock itself is wrong, whatever `validUntil` says.
pub const WARN_AT: SignedDuration = SignedDuration::from_secs(10);

/// What one response says: the hub's clock minus ours lies in `low..=high`.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Bounds {
    received: Timestamp,
    low: SignedDuration,
    high: SignedDuration,
}

/// The offset bounds of recent responses. Pure: the times are passed in.
#[derive(Debug, Default)]
pub struct OffsetBounds {
    /// Oldest first.
    samples: VecDeque<Bounds>,
}

impl OffsetBounds {
    /// A response that carried `date` (the hub's clock, truncated to the second), for a request sent
    /// at `sent` and answered at `received` on our clock. The server took `date` in between, so the
    /// offset is at least `date - received` and less than `date + 1 s - sent`.
    pub fn observe(&mut self, sent: Timestamp, received: Timestamp, date: Timestamp) {
        if received < sent {
            // Our clock stepped back during the request: this one bounds nothing.
            return;
        }
        let bounds = Bounds {
            received,
            low: date.duration_since(received),
            high: date.duration_since(sent) + SignedDuration::from_secs(1),
        };
        self.samples.push_back(bounds);
        while self.samples.len() > MAX_SAMPLES
            || self
                .samples
                .front()
                .is_some_and(|oldest| received.duration_since(oldest.received) > WINDOW)
        {
            self.samples.pop_front();
        }
    }

    /// The middle of what the newest responses agree on, or `None` before the first response. Older
    /// responses that contradict newer ones (either clock was stepped since) are left out.
    pub fn estimate(&self) -> Option<SignedDuration> {
        let mut newest = self.samples.iter().rev();
        let first = newest.next()?;
        let (mut low, mut high) = (first.low, first.high);
        for older in newest {
            let (l, h) = (low.max(older.low), high.min(older.high));
            if l > h {
                break;
            }
            (low, high) = (l, h);
        }
        Some(low + (high - low) / 2)
    }
}

/// The hub's clock offset, shared by the hub client (which observes) and the run loop (which reads).
#[derive(Debug, Default)]
pub struct HubClock {
    bounds: Mutex<OffsetBounds>,
}

impl HubClock {
    pub fn observe(&self, sent: Timestamp, received: Timestamp, date: Timestamp) {
        lock(&self.bounds).observe(sent, received, date);
    }

    /// The hub's clock minus ours; `None` until a response has said.
    pub fn offset(&self) -> Option<SignedDuration> {
        lock(&self.bounds).estimate()
    }
}

/// The `Date` header of a response, if it has a readable one.
fn date_of<B>(response: &http::Response<B>) -> Option<Timestamp> {
    let value = response.headers().get(http::header::DATE)?.to_str().ok()?;
    jiff::fmt::rfc2822::DateTimeParser::new()
        .parse_timestamp(value)
        .ok()
}

/// The client middleware that feeds [`HubClock`] from every response's `Date`.
#[derive(Clone)]
pub struct ObserveDate<S> {
    inner: S,
    clock: Arc<HubClock>,
}

impl<S> ObserveDate<S> {
    pub fn layer(clock: Arc<HubClock>) -> impl tower::Layer<S, Service = ObserveDate<S>> {
        tower::layer::layer_fn(move |inner| ObserveDate {
            inner,
            clock: clock.clone(),
        })
    }
}

impl<S, Req, B> tower::Service<Req> for ObserveDate<S>
where
    S: tower::Service<Req, Response = http::Response<B>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Req) -> Self::Future {
        let response = self.inner.call(request);
        let clock = self.clock.clone();
        Box::pin(async move {
            // The request goes out when its future is first polled, here.
            let sent = Timestamp::now();
            let result = response.await;
            if let Ok(response) = &result
                && let Some(date) = date_of(response)
            {
                clock.observe(sent, Timestamp::now(), date);
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64, millis: i64) -> Timestamp {
        Timestamp::from_millisecond(second * 1000 + millis).unwrap()
    }

    fn secs(s: f64) -> SignedDuration {
        SignedDuration::from_secs_f64(s)
    }

    #[test]
    fn nothing_observed_means_no_offset() {
        assert_eq!(HubClock::default().offset(), None);
    }

    #[test]
    fn one_response_bounds_the_offset_by_its_round_trip_and_the_date_second() {
        let mut bounds = OffsetBounds::default();
        // Sent at 1000.2, answered at 1000.4; the hub said 1300 (5 minutes ahead): the offset lies in
        // 299.6 ..= 300.8.
        bounds.observe(at(1_000, 200), at(1_000, 400), at(1_300, 0));
        assert_eq!(bounds.estimate(), Some(secs(300.2)));
    }

    #[test]
    fn responses_together_narrow_it_to_the_truth() {
        // The hub's clock runs 299.65 s behind ours.
        let truth = secs(-299.65);
        let mut bounds = OffsetBounds::default();
        for i in 0..40 {
            let sent = at(10_000 + i * 7, (i * 137) % 1000);
            let received = sent.checked_add(SignedDuration::from_millis(30)).unwrap();
            // The server stamps halfway and truncates to the second.
            let stamped = sent.checked_add(SignedDuration::from_millis(15) + truth).unwrap();
            let date = Timestamp::from_second(stamped.as_second()).unwrap();
            bounds.observe(sent, received, date);
        }
        let estimate = bounds.estimate().unwrap();
        assert!(
            (estimate - truth).abs() < SignedDuration::from_millis(50),
            "estimate {estimate:?}, truth {truth:?}"
        );
    }

    #[test]
    fn a_clock_step_forgets_the_responses_before_it() {
        let mut bounds = OffsetBounds::default();
        bounds.observe(at(1_000, 0), at(1_000, 100), at(1_000, 0));
        // Our clock jumped 2 minutes ahead: the hub now looks 120 s behind.
        bounds.observe(at(1_130, 0), at(1_130, 100), at(1_010, 0));
        let estimate = bounds.estimate().unwrap();
        assert!((estimate - secs(-119.5)).abs() <= secs(0.5), "{estimate:?}");
    }

    #[test]
    fn old_responses_leave_the_window_and_a_backward_step_during_a_request_counts_for_nothing() {
        let mut bounds = OffsetBounds::default();
        bounds.observe(at(1_000, 0), at(1_000, 100), at(1_003, 0));
        bounds.observe(at(2_000, 0), at(1_999, 0), at(5_000, 0));
        assert_eq!(bounds.samples.len(), 1);
        for i in 0..(MAX_SAMPLES as i64 + 5) {
            bounds.observe(at(1_700 + i, 0), at(1_700 + i, 100), at(1_703 + i, 0));
        }
        assert_eq!(bounds.samples.len(), MAX_SAMPLES);
        assert!(bounds.samples.iter().all(|s| s.received >= at(1_700, 0)));
    }

    #[tokio::test]
    async fn the_middleware_reads_the_date_of_every_response() {
        use tower::{Layer, ServiceExt};
        let clock = Arc::new(HubClock::default());
        let ahead = Timestamp::now()
            .checked_add(SignedDuration::from_secs(300))
            .unwrap();
        let date = jiff::fmt::rfc2822::DateTimePrinter::new()
            .timestamp_to_rfc9110_string(&ahead)
            .unwrap();
        let server = tower::service_fn(move |_: http::Request<()>| {
            let date = date.clone();
            async move {
                Ok::<_, std::convert::Infallible>(
                    http::Response::builder()
                        .header(http::header::DATE, date)
                        .body(())
                        .unwrap(),
                )
            }
        });
        let client = ObserveDate::layer(clock.clone()).layer(server);
        client.oneshot(http::Request::new(())).await.unwrap();
        let offset = clock.offset().unwrap();
        assert!((offset - secs(300.0)).abs() <= secs(1.0), "{offset:?}");
    }
}
