//! One watch per kind, shared by a mode's controllers: it feeds a reflector store the reconcilers
//! read, and a trigger channel per controller that wants the kind's events. kube's own shared
//! streams stalled when an object was deleted before a subscriber read it, so the fan-out is ours.
//!
//! Channels are unbounded so a busy controller never stalls the watch (or the other controllers);
//! they only ever hold what arrived since the consumer's last poll, and a subscriber that only maps
//! events to object references takes each object reduced to its metadata ([`metadata_only`]).

use futures::channel::mpsc;
use futures::{Stream, StreamExt};
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::{self, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::future::Future;
use std::hash::Hash;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio::time::Sleep;

/// Retries of a failed watch back off exponentially up to this, in every mode. kube's default
/// backoff grows to 30 s: after an API server restart, a controller whose watches had failed for a
/// minute then sat without caches for up to half a minute more.
pub const MAX_WATCH_BACKOFF: Duration = Duration::from_secs(5);

/// Exponential backoff for watch retries: 500 ms doubling to [`MAX_WATCH_BACKOFF`]. Each delay is
/// spread ±20 % (and still never above the cap), so a fleet of agents that lost a restarted hub
/// together does not come back in step. Apply it to a watch with [`WatchRetryExt::watch_backoff`],
/// which resets it only when the watch delivers; it is deliberately no `kube` `Backoff`, whose
/// stream resets on every event, including the `Init` a watcher emits before each list it retries.
#[derive(Debug, Clone)]
pub struct WatchBackoff {
    next: Duration,
}

/// How far each watch retry delay is spread around its step of the doubling schedule.
const WATCH_BACKOFF_SPREAD: f64 = 0.2;

impl Default for WatchBackoff {
    fn default() -> Self {
        WatchBackoff {
            next: Duration::from_millis(500),
        }
    }
}

impl Iterator for WatchBackoff {
    type Item = Duration;

    fn next(&mut self) -> Option<Duration> {
        let step = self.next;
        self.next = (self.next * 2).min(MAX_WATCH_BACKOFF);
        Some(crate::jitter::spread(step, WATCH_BACKOFF_SPREAD).min(MAX_WATCH_BACKOFF))
    }
}

impl WatchBackoff {
    /// Back to the first step.
    pub fn reset(&mut self) {
        *self = WatchBackoff::default();
    }
}

/// Whether a watcher event shows the watch works: it delivered objects, a change or a complete
/// (maybe empty) list. `Init` only announces a list that may yet fail.
fn delivers<K>(event: &watcher::Event<K>) -> bool {
    !matches!(event, watcher::Event::Init)
}

/// A watcher stream that, after each error, waits the next [`WatchBackoff`] delay before polling
/// the watcher again; the delays grow until the watch delivers something (see [`delivers`]).
pub struct WatchRetry<S> {
    events: Pin<Box<S>>,
    backoff: WatchBackoff,
    waiting: Option<Pin<Box<Sleep>>>,
}

impl<S, K> Stream for WatchRetry<S>
where
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>>,
{
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        if let Some(waiting) = this.waiting.as_mut() {
            ready!(waiting.as_mut().poll(cx));
            this.waiting = None;
        }
        let item = ready!(this.events.as_mut().poll_next(cx));
        match &item {
            Some(Err(_)) => {
                // `WatchBackoff` never runs out.
                let delay = this.backoff.next().unwrap_or(MAX_WATCH_BACKOFF);
                tracing::debug!(delay_ms = delay.as_millis() as u64, "watch failed; backing off");
                this.waiting = Some(Box::pin(tokio::time::sleep(delay)));
            }
            Some(Ok(event)) if delivers(event) => this.backoff.reset(),
            Some(Ok(_)) | None => {}
        }
        Poll::Ready(item)
    }
}

/// [`WatchRetryExt::watch_backoff`] on every watcher stream.
pub trait WatchRetryExt<K>: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Sized {
    /// Retries of this watch back off with a [`WatchBackoff`], the same in every mode.
    fn watch_backoff(self) -> WatchRetry<Self> {
        WatchRetry {
            events: Box::pin(self),
            backoff: WatchBackoff::default(),
            waiting: None,
        }
    }
}

impl<S, K> WatchRetryExt<K> for S where S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> {}

/// A controller's share of a watch: a channel and what of each object it needs.
struct Subscriber<K> {
    sender: mpsc::UnboundedSender<K>,
    project: fn(&K) -> K,
}

/// A watch of one kind, before it starts: take its store and subscribe, then [`SharedWatch::spawn`].
pub struct SharedWatch<K>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + Hash + Clone,
{
    writer: Writer<K>,
    subscribers: Vec<Subscriber<K>>,
    observer: Option<Observer<K>>,
    /// For logs.
    kind: String,
}

/// Sees every event of a watch before the triggers it causes are sent, and says whether to send
/// them.
type Observer<K> = Box<dyn FnMut(&watcher::Event<K>) -> bool + Send>;

/// Only the metadata: all that owner and name mappings look at (reconcilers read the full object
/// from the store), so queued triggers cost little memory.
pub fn metadata_only<K: kube::Resource + Default>(object: &K) -> K {
    let mut out = K::default();
    *out.meta_mut() = object.meta().clone();
    out
}

/// The whole object, for a mapping that reads more than metadata.
pub fn whole<K: Clone>(object: &K) -> K {
    object.clone()
}

/// Caches objects as they come (apart from managedFields, which nobody here reads).
pub fn as_is<K>(_: &mut K) {}

impl<K> Default for SharedWatch<K>
where
    K: kube::Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Default + Send + Sync,
{
    fn default() -> Self {
        Self::with_type(Default::default())
    }
}

impl<K> SharedWatch<K>
where
    K: kube::Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + Hash + Clone + Send + Sync,
{
    /// A watch of a kind known only at run time (a dynamic object's `ApiResource`).
    pub fn with_type(dyntype: K::DynamicType) -> Self {
        let kind = K::kind(&dyntype).to_string();
        SharedWatch {
            writer: Writer::new(dyntype),
            subscribers: Vec::new(),
            observer: None,
            kind,
        }
    }

    /// The store the watch keeps; [`Store::wait_until_ready`] resolves after its first full list.
    pub fn store(&self) -> Store<K> {
        self.writer.as_reader()
    }

    /// Every object the watch delivers (added, changed, deleted, or listed again after a restart),
    /// as `project` shapes it, for `Controller::for_stream`/`watches_stream`/`owns_stream`.
    pub fn subscribe(
        &mut self,
        project: fn(&K) -> K,
    ) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static + use<K> {
        let (sender, rx) = mpsc::unbounded();
        self.subscribers.push(Subscriber { sender, project });
        rx.map(Ok)
    }

    /// Has `observe` see every event (after the store took it, before any subscriber is sent its
    /// trigger), for state that must be up to date when the controllers react.
    pub fn observe(&mut self, mut observe: impl FnMut(&watcher::Event<K>) + Send + 'static) {
        self.observer = Some(Box::new(move |event| {
            observe(event);
            true
        }));
    }

    /// Like [`SharedWatch::observe`], and the subscribers are sent only the objects of events
    /// `keep` returns true for (the store still takes every event): for a kind whose updates
    /// mostly change nothing a controller reads. Replaces an earlier `observe`.
    pub fn notify_when(&mut self, keep: impl FnMut(&watcher::Event<K>) -> bool + Send + 'static) {
        self.observer = Some(Box::new(keep));
    }

    /// Starts the watch: the task feeds the store and the subscribers until the returned guard is
    /// dropped. `compact` trims each object before it is cached.
    pub fn spawn(self, api: Api<K>, config: watcher::Config, compact: fn(&mut K)) -> WatchTask {
        let SharedWatch {
            writer,
            subscribers,
            mut observer,
            kind,
        } = self;
        let events = watcher(api, config)
            .watch_backoff()
            .modify(move |object: &mut K| {
                object.managed_fields_mut().clear();
                compact(object);
            });
        let stream = reflector::reflector(writer, events);
        WatchTask(tokio::spawn(stream.for_each(move |event| {
            let notify = match (&event, observer.as_mut()) {
                (Ok(event), Some(observe)) => observe(event),
                _ => true,
            };
            match event {
                Ok(_) if !notify => {}
                Ok(
                    watcher::Event::Apply(object)
                    | watcher::Event::Delete(object)
                    | watcher::Event::InitApply(object),
                ) => {
                    for subscriber in &subscribers {
                        // A closed channel only means that controller has stopped.
                        let _ = subscriber.sender.unbounded_send((subscriber.project)(&object));
                    }
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%kind, %error, "watch failed; retrying"),
            }
            futures::future::ready(())
        })))
    }
}

/// A running watch; dropping it stops the watch (the store then stays as it was).
pub struct WatchTask(JoinHandle<()>);

impl Drop for WatchTask {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watch_backoff_doubles_to_its_cap_spread_and_resets() {
        let steps = [500u64, 1000, 2000, 4000, 5000, 5000];
        let in_band = |delays: &[Duration]| {
            delays.iter().zip(steps).all(|(d, step)| {
                let ms = d.as_secs_f64() * 1000.0;
                ms >= step as f64 * 0.8 - 1e-6 && ms <= (step as f64 * 1.2).min(5000.0) + 1e-6
            })
        };
        let mut b = WatchBackoff::default();
        let mut runs = Vec::new();
        for _ in 0..50 {
            let delays: Vec<Duration> = (&mut b).take(steps.len()).collect();
            assert!(
                in_band(&delays),
                "{delays:?} strays from {steps:?} ±20 % capped at 5 s"
            );
            runs.push(delays[0]);
            b.reset();
        }
        assert!(runs.iter().any(|d| *d != runs[0]), "spread: {runs:?}");
    }
}
