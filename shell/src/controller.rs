//! The scaffolding every controller of ours shares, after kube-rs's controller conventions: each
//! mode keeps its own `Context`, `thiserror` error and reconcile function, and takes from here what
//! would otherwise be written once per controller.
//!
//! # What is here
//!
//! - [`Backoff`]: consecutive failures per object and the doubling delay an error policy requeues
//!   with; a success clears the object's count.
//! - [`MetricLabel`] and [`ReconcileMetrics`]: one metrics shape for every controller, namely
//!   `reconciles_total{controller}` (every pass), `reconcile_errors_total{controller, error}` and
//!   `reconcile_seconds{controller}`, under the mode's registry prefix.
//! - [`wait_synced`]: a reconcile waits until every cache it reads holds a full first list, so no
//!   decision is made on half a picture (a restart must not re-create what is merely not listed yet).

use crate::sync::lock;
use kube::runtime::reflector::Store;
use kube::runtime::reflector::store::WriterDropped;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;
use std::time::Duration;

/// Per-object retry delays: `first × 2^(failures − 1)`, at most `max`.
#[derive(Debug)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    failures: Mutex<HashMap<String, u32>>,
}

impl Default for Backoff {
    /// Half a second doubling to five minutes, as kube-rs's examples and client-go's rate limiter.
    fn default() -> Self {
        Backoff::new(Duration::from_millis(500), Duration::from_secs(300))
    }
}

impl Backoff {
    pub fn new(first: Duration, max: Duration) -> Self {
        Backoff {
            first,
            max,
            failures: Mutex::default(),
        }
    }

    /// The delay before retry number `failures` (1-based).
    pub fn delay(&self, failures: u32) -> Duration {
        let factor = 2u32.saturating_pow(failures.saturating_sub(1).min(20));
        self.first.saturating_mul(factor).min(self.max)
    }

    /// Counts a failure of `key`; returns the consecutive failures and the delay to retry after.
    pub fn failed(&self, key: &str) -> (u32, Duration) {
        let mut failures = lock(&self.failures);
        let count = failures.entry(key.to_string()).or_insert(0);
        *count = count.saturating_add(1);
        (*count, self.delay(*count))
    }

    /// Forgets the failures of `key`: after a success, or when the object is gone.
    pub fn succeeded(&self, key: &str) {
        lock(&self.failures).remove(key);
    }

    /// The consecutive failures of `key` so far.
    pub fn failures(&self, key: &str) -> u32 {
        lock(&self.failures).get(key).copied().unwrap_or(0)
    }
}

/// A short, stable label for a controller error, the `error` label of
/// `reconcile_errors_total`.
pub trait MetricLabel {
    fn metric_label(&self) -> &'static str;
}

type Labels = Vec<(&'static str, String)>;

/// Reconcile durations in seconds: 1 ms to about a minute.
fn reconcile_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 4.0, 9))
}

/// The reconcile families of one mode, labelled by controller.
#[derive(Clone, Debug)]
pub struct ReconcileMetrics {
    runs: Family<Labels, Counter>,
    failures: Family<Labels, Counter>,
    duration: Family<Labels, Histogram, fn() -> Histogram>,
}

impl ReconcileMetrics {
    /// Registers the families in `registry` (under its prefix); `objects` names what is reconciled
    /// in their help texts.
    pub fn register(registry: &mut Registry, objects: &str) -> Self {
        let metrics = ReconcileMetrics {
            runs: Family::default(),
            failures: Family::default(),
            duration: Family::new_with_constructor(reconcile_histogram as fn() -> Histogram),
        };
        registry.register(
            "reconciles",
            format!("Reconciliations of {objects} run, by controller"),
            metrics.runs.clone(),
        );
        registry.register(
            "reconcile_errors",
            format!("Reconciliations of {objects} that failed, by controller and error (each retried with backoff)"),
            metrics.failures.clone(),
        );
        registry.register(
            "reconcile_seconds",
            format!("Time spent reconciling one of {objects}, by controller"),
            metrics.duration.clone(),
        );
        metrics
    }

    /// One pass of `controller`, failed or not, that took `took`.
    pub fn reconciled(&self, controller: &'static str, took: Duration) {
        let labels = vec![("controller", controller.to_owned())];
        self.runs.get_or_create(&labels).inc();
        self.duration.get_or_create(&labels).observe(took.as_secs_f64());
    }

    /// A failed pass of `controller`, by its error's [`MetricLabel`].
    pub fn failed(&self, controller: &'static str, error: &'static str) {
        self.failures
            .get_or_create(&vec![
                ("controller", controller.to_owned()),
                ("error", error.to_owned()),
            ])
            .inc();
    }
}

/// A watch cache a reconcile reads.
pub trait Cache: Send + Sync {
    /// Resolves once the cache holds its first full list; errs when its writer is gone.
    fn ready(&self) -> Pin<Box<dyn Future<Output = Result<(), WriterDropped>> + Send + '_>>;
}

impl<K> Cache for Store<K>
where
    K: kube::runtime::reflector::Lookup + Clone + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    fn ready(&self) -> Pin<Box<dyn Future<Output = Result<(), WriterDropped>> + Send + '_>> {
        Box::pin(self.wait_until_ready())
    }
}

/// A cache whose watch stopped before it synced, by the kind it held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the hub cache of {0} stopped before it synced")]
pub struct CacheGone(pub &'static str);

/// Resolves once every cache holds its first full list; `caches` pairs each with its kind, which
/// the error names.
pub async fn wait_synced(caches: &[(&'static str, &dyn Cache)]) -> Result<(), CacheGone> {
    for (kind, cache) in caches {
        cache.ready().await.map_err(|_| CacheGone(kind))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;

    #[test]
    fn backoff_doubles_per_failure_up_to_the_cap_and_a_success_resets_it() {
        let backoff = Backoff::default();
        assert_eq!(backoff.failed("a"), (1, Duration::from_millis(500)));
        assert_eq!(backoff.failed("a"), (2, Duration::from_secs(1)));
        assert_eq!(backoff.failed("a"), (3, Duration::from_secs(2)));
        assert_eq!(
            backoff.failed("b"),
            (1, Duration::from_millis(500)),
            "counts are per object"
        );
        assert_eq!(backoff.delay(30), Duration::from_secs(300));
        assert_eq!(backoff.delay(u32::MAX), Duration::from_secs(300));
        backoff.succeeded("a");
        assert_eq!(backoff.failures("a"), 0);
        assert_eq!(backoff.failed("a"), (1, Duration::from_millis(500)));
    }

    struct Boom;
    impl MetricLabel for Boom {
        fn metric_label(&self) -> &'static str {
            "boom"
        }
    }

    #[test]
    fn reconcile_metrics_have_one_shape() {
        let mut registry = Registry::with_prefix("ocm_score_test");
        let metrics = ReconcileMetrics::register(&mut registry, "widgets");
        metrics.reconciled("widget", Duration::from_millis(20));
        metrics.failed("widget", Boom.metric_label());
        let text = crate::metrics::encode(&registry);
        for line in [
            "ocm_score_test_reconciles_total{controller=\"widget\"} 1",
            "ocm_score_test_reconcile_errors_total{controller=\"widget\",error=\"boom\"} 1",
            "ocm_score_test_reconcile_seconds_sum{controller=\"widget\"} 0.02",
        ] {
            assert!(text.contains(line), "{line} in {text}");
        }
    }

    #[tokio::test]
    async fn waiting_for_sync_names_the_cache_whose_watch_is_gone() {
        let (ready, mut writer) = reflector::store::<ConfigMap>();
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        let (gone, gone_writer) = reflector::store::<ConfigMap>();
        drop(gone_writer);
        assert_eq!(wait_synced(&[("ConfigMaps", &ready)]).await, Ok(()));
        assert_eq!(
            wait_synced(&[("ConfigMaps", &ready), ("Secrets", &gone)]).await,
            Err(CacheGone("Secrets"))
        );
    }
}
