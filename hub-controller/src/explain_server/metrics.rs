//! The explain server's metrics, registered under `ocm_score_explain` and served by the process
//! shell on `/metrics`.

use ocm_score_shell::metrics::{Registry, encode};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use std::time::Duration;

type Labels = Vec<(&'static str, String)>;

pub struct Metrics {
    registry: Registry,
    requests: Family<Labels, Counter>,
    request_seconds: Histogram,
    tls_reloads: Family<Labels, Counter>,
    /// Hub snapshots built (once per change of the hub, not per request).
    pub snapshot_builds: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("ocm_score_explain");
        let requests = Family::default();
        registry.register(
            "requests",
            "Requests to /debug/placements/ answered, by method and HTTP status code",
            requests.clone(),
        );
        // 100 µs to about 26 s: a snapshot of a large fleet and one scheduling pass.
        let request_seconds = Histogram::new(exponential_buckets(0.0001, 4.0, 10));
        registry.register(
            "request_seconds",
            "Time to answer one request, authentication and authorization included",
            request_seconds.clone(),
        );
        let tls_reloads = Family::default();
        registry.register(
            "tls_reloads",
            "Times the serving certificate files changed and were read again, by result",
            tls_reloads.clone(),
        );
        let snapshot_builds = Counter::default();
        registry.register(
            "snapshot_builds",
            "Hub snapshots built to answer from: one per change of what the engine reads (score renewals are none) or passed validUntil, shared by the requests in between",
            snapshot_builds.clone(),
        );
        Metrics {
            registry,
            requests,
            request_seconds,
            tls_reloads,
            snapshot_builds,
        }
    }
}

impl Metrics {
    pub fn answered(&self, method: &str, code: u16, took: Duration) {
        self.requests
            .get_or_create(&vec![("method", method.to_owned()), ("code", code.to_string())])
            .inc();
        self.request_seconds.observe(took.as_secs_f64());
    }

    /// The OpenMetrics text of every family.
    pub fn render(&self) -> String {
        encode(&self.registry)
    }

    pub fn tls_reloaded(&self, ok: bool) {
        let result = if ok { "loaded" } else { "failed" };
        self.tls_reloads
            .get_or_create(&vec![("result", result.to_owned())])
            .inc();
    }
}
