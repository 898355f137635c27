//! The shared watch backoff through the shell's public API, on Tokio's paused clock: a watch whose
//! list keeps failing backs off further each time (kube's watcher emits `Init` before every list, and
//! that must not count as success), and one that delivers starts again from the first step.

use futures::{StreamExt, stream};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher::{Error, Event};
use ocm_score_shell::watch::{MAX_WATCH_BACKOFF, WatchRetryExt};
use std::time::Duration;
use tokio::time::Instant;

/// The doubling schedule's steps in milliseconds, capped at [`MAX_WATCH_BACKOFF`].
const STEPS: [u64; 7] = [500, 1000, 2000, 4000, 5000, 5000, 5000];

fn failed() -> Result<Event<ConfigMap>, Error> {
    Err(Error::NoResourceVersion)
}

fn object() -> ConfigMap {
    ConfigMap::default()
}

/// Asserts `delay` is `step` ms spread ±20 % and no more than the cap.
fn assert_step(delay: Duration, step: u64, what: &str) {
    let ms = delay.as_secs_f64() * 1000.0;
    let high = (step as f64 * 1.2).min(MAX_WATCH_BACKOFF.as_millis() as f64);
    assert!(
        ms >= step as f64 * 0.8 - 1.0 && ms <= high + 1.0,
        "{what}: waited {ms} ms, expected {step} ms ±20 % (at most {high})"
    );
}

/// Each item of `events` with the time waited before it arrived.
async fn timed(
    events: impl futures::Stream<Item = Result<Event<ConfigMap>, Error>>,
) -> Vec<(Duration, Result<Event<ConfigMap>, Error>)> {
    let mut events = std::pin::pin!(events.watch_backoff());
    let mut out = Vec::new();
    let mut last = Instant::now();
    while let Some(item) = events.next().await {
        out.push((last.elapsed(), item));
        last = Instant::now();
    }
    out
}

#[tokio::test(start_paused = true)]
async fn a_list_that_keeps_failing_after_init_backs_off_further_each_time() {
    let events = stream::iter((0..STEPS.len()).flat_map(|_| [Ok(Event::Init), failed()]));
    let timed = timed(events).await;
    // The delay comes before the watcher is polled again, so it shows on the `Init` after an error.
    let waits: Vec<Duration> = timed
        .iter()
        .skip(2)
        .step_by(2)
        .map(|(waited, _)| *waited)
        .collect();
    assert_eq!(waits.len(), STEPS.len() - 1);
    for (i, (wait, step)) in waits.iter().zip(STEPS).enumerate() {
        assert_step(*wait, step, &format!("retry {}", i + 1));
    }
    assert!(
        timed
            .iter()
            .skip(1)
            .step_by(2)
            .all(|(waited, _)| waited.is_zero()),
        "an error is passed on at once"
    );
}

#[tokio::test(start_paused = true)]
async fn a_watch_that_delivers_starts_again_from_the_first_step() {
    let mut events = vec![
        Ok(Event::Init),
        failed(),
        Ok(Event::Init),
        failed(),
        Ok(Event::Init),
        failed(),
    ];
    // The list succeeds: objects, then the end of the list; the watch that follows fails.
    events.extend([
        Ok(Event::Init),
        Ok(Event::InitApply(object())),
        Ok(Event::InitDone),
        failed(),
        Ok(Event::Apply(object())),
        failed(),
        failed(),
        Ok(Event::Delete(object())),
        failed(),
        Ok(Event::Init),
        Ok(Event::InitDone),
        failed(),
        Ok(Event::Init),
    ]);
    let waits: Vec<Duration> = timed(stream::iter(events))
        .await
        .into_iter()
        .map(|(waited, _)| waited)
        .collect();
    // Three failed lists: 500 ms, 1 s, 2 s before the next attempt.
    assert_step(waits[2], 500, "first retry");
    assert_step(waits[4], 1000, "second retry");
    assert_step(waits[6], 2000, "third retry");
    // The list then delivered: the failing watch after it retries from the first step.
    assert_step(waits[10], 500, "after objects were listed");
    // A watched change resets it again; two failures in a row grow it.
    assert_step(waits[12], 500, "after a change");
    assert_step(waits[13], 1000, "a second failure in a row");
    assert_step(waits[15], 500, "after a deletion");
    // A list that completes empty is success too.
    assert_step(waits[18], 500, "after an empty list");
    assert!(
        [1, 7, 8, 9, 11, 14, 16, 17].iter().all(|&i| waits[i].is_zero()),
        "only a retry waits: {waits:?}"
    );
}
