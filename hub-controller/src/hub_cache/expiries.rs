//! The score watch's expiry wheel: one timer at the soonest `validUntil` among the scores in
//! force, as the watch last saw each ([`ScoreUpdates`]). A renewal moves a score's instant on
//! before the timer reaches it, so the timer finds only the scores that really expired, and
//! reports those. With agents renewing each minute and scores valid 97 s, it wakes about every
//! 37 s and finds nothing.

use super::{ScoreKey, ScoreUpdates};
use ocm_score_shell::sync::lock;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// Reports to `expired` each score of `updates` whose current `validUntil` passes, as `clock`
/// (Unix nanoseconds) tells, without a renewal. `sooner` wakes it when a score expires sooner
/// than the one it waits for. Runs until dropped.
pub async fn run(
    updates: Arc<Mutex<ScoreUpdates>>,
    sooner: Arc<Notify>,
    clock: impl Fn() -> i128,
    mut expired: impl FnMut(Vec<ScoreKey>),
) {
    loop {
        let next = lock(&updates).next_expiry();
        let wait = async {
            match next {
                Some(at) => tokio::time::sleep(until(at, clock())).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = wait => {}
            () = sooner.notified() => continue,
        }
        let keys = lock(&updates).expired(clock());
        if !keys.is_empty() {
            expired(keys);
        }
    }
}

/// The wait from `now_ns` to `at_ns` (none once past).
fn until(at_ns: i128, now_ns: i128) -> Duration {
    let ns = u64::try_from((at_ns - now_ns).max(0)).unwrap_or(u64::MAX);
    Duration::from_nanos(ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher::Event;
    use ocm_score_api::{
        AddOnPlacementScore, AddOnPlacementScoreItem, AddOnPlacementScoreStatus, ObjectMeta, Time,
    };
    use std::sync::atomic::{AtomicUsize, Ordering};

    const SECOND: i128 = 1_000_000_000;
    /// The wall clock at the test's start.
    const START: i128 = 1_800_000_000 * SECOND;

    fn score(cluster: &str, valid_until_ns: i128) -> AddOnPlacementScore {
        AddOnPlacementScore {
            metadata: ObjectMeta {
                namespace: Some(cluster.into()),
                name: Some("resource-usage-score".into()),
                ..Default::default()
            },
            status: Some(AddOnPlacementScoreStatus {
                scores: vec![AddOnPlacementScoreItem {
                    name: "cpu".into(),
                    value: 50,
                }],
                valid_until: Some(Time(
                    jiff::Timestamp::from_nanosecond(valid_until_ns).expect("in range"),
                )),
                ..Default::default()
            }),
        }
    }

    /// Wall-clock nanoseconds that move with Tokio's (paused) clock.
    fn paused_wall_clock() -> impl Fn() -> i128 + Clone {
        let origin = tokio::time::Instant::now();
        move || START + origin.elapsed().as_nanos() as i128
    }

    /// A watch's view of the scores, and the wheel over it, as `PlacementWatches` wires them.
    struct Wheel {
        updates: Arc<Mutex<ScoreUpdates>>,
        sooner: Arc<Notify>,
        clock: Box<dyn Fn() -> i128>,
        expired: Arc<Mutex<Vec<(i128, String)>>>,
        /// Times the wheel read the clock.
        reads: Arc<AtomicUsize>,
        _task: tokio::task::JoinHandle<()>,
    }

    impl Wheel {
        fn start() -> Wheel {
            let updates = Arc::new(Mutex::new(ScoreUpdates::default()));
            let sooner = Arc::new(Notify::new());
            let clock = paused_wall_clock();
            let expired = Arc::new(Mutex::new(Vec::new()));
            let reads = Arc::new(AtomicUsize::new(0));
            let counted = {
                let (clock, reads) = (clock.clone(), reads.clone());
                move || {
                    reads.fetch_add(1, Ordering::Relaxed);
                    clock()
                }
            };
            let task = tokio::spawn(run(updates.clone(), sooner.clone(), counted, {
                let (expired, clock) = (expired.clone(), clock.clone());
                move |keys: Vec<ScoreKey>| {
                    let at = clock();
                    lock(&expired).extend(keys.into_iter().map(|(cluster, _)| (at, cluster)));
                }
            }));
            Wheel {
                updates,
                sooner,
                clock: Box::new(clock),
                expired,
                reads,
                _task: task,
            }
        }

        /// `cluster` reports a score valid `valid_s` seconds from now, seen on the watch.
        fn report(&self, cluster: &str, valid_s: i128) {
            let now = (self.clock)();
            let at = jiff::Timestamp::from_nanosecond(now).expect("in range");
            let event = Event::Apply(score(cluster, now + valid_s * SECOND));
            let (_, sooner) = lock(&self.updates).observe(&event, at);
            if sooner {
                self.sooner.notify_one();
            }
        }

        /// What expired so far: (seconds since the start, cluster).
        fn expired(&self) -> Vec<(i128, String)> {
            lock(&self.expired)
                .iter()
                .map(|(at, cluster)| ((at - START) / SECOND, cluster.clone()))
                .collect()
        }
    }

    #[tokio::test(start_paused = true)]
    async fn only_scores_not_renewed_in_time_are_reported_at_their_valid_until() {
        let wheel = Wheel::start();
        // Valid 97 s, renewed every 60 s: a is renewed throughout, b stops after its first report.
        wheel.report("a", 97);
        wheel.report("b", 97);
        tokio::time::sleep(Duration::from_secs(60)).await;
        wheel.report("a", 97);
        tokio::time::sleep(Duration::from_secs(60)).await;
        wheel.report("a", 97);
        assert_eq!(
            wheel.expired(),
            [(97, "b".to_string())],
            "b at 97 s, a renewed each time before its validUntil"
        );
        // A score valid for a shorter time than the one the wheel waits for wakes it sooner.
        wheel.report("c", 5);
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert_eq!(wheel.expired().last(), Some(&(125, "c".to_string())));
        // a stops: it expires 97 s after its last renewal, at 120 + 97 s.
        tokio::time::sleep(Duration::from_secs(120)).await;
        assert_eq!(
            wheel.expired(),
            [
                (97, "b".to_string()),
                (125, "c".to_string()),
                (217, "a".to_string())
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn renewals_in_time_expire_nothing_and_wake_the_wheel_about_once_per_37_seconds() {
        // 100 scores valid 97 s, each renewed every 60 s, spread over the minute.
        let wheel = Wheel::start();
        for tick in 0..600 {
            wheel.report(&format!("c{}", tick % 100), 97);
            tokio::time::sleep(Duration::from_millis(600)).await;
        }
        assert!(wheel.expired().is_empty(), "{:?}", wheel.expired());
        // Six minutes; each wake reads the clock twice (the wait, then what expired).
        let reads = wheel.reads.load(Ordering::Relaxed);
        assert!(reads <= 2 * (360 / 37 + 2), "{reads} clock reads in 6 minutes");
    }
}
