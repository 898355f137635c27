//! The scorer's own metrics, registered under `ocm_score_thanos` in a `prometheus-client` registry
//! and served by the process shell on `/metrics`.

use ocm_score_shell::metrics::{Registry, encode};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

/// Query latency buckets in seconds: from a fast Prometheus to a Thanos fan-out near its timeout.
const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

type Labels = Vec<(&'static str, String)>;

fn latency_histogram() -> Histogram {
    Histogram::new(LATENCY_BUCKETS)
}

/// All metrics of one scorer process.
pub struct Metrics {
    registry: Registry,
    query_duration: Family<Labels, Histogram, fn() -> Histogram>,
    query_errors: Family<Labels, Counter>,
    series_skipped: Family<Labels, Counter>,
    clusters_scored: Gauge,
    clusters_stale: Gauge,
    writes: Family<Labels, Counter>,
    rounds: Family<Labels, Counter>,
    leader: Gauge,
    partial_response: Gauge,
    last_complete_round: Gauge<f64, AtomicU64>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("ocm_score_thanos");
        let query_duration = Family::new_with_constructor(latency_histogram as fn() -> Histogram);
        registry.register(
            "query_duration_seconds",
            "Time of one fleet-wide score query and its freshness queries, retries included",
            query_duration.clone(),
        );
        let query_errors = Family::default();
        registry.register(
            "query_errors",
            "Score queries that failed after retries, by kind of failure",
            query_errors.clone(),
        );
        let series_skipped = Family::default();
        registry.register(
            "series_skipped",
            "Series not turned into a score, by reason",
            series_skipped.clone(),
        );
        // Unlabelled gauges are visible (at 0) from the first scrape.
        let clusters_scored = Gauge::default();
        registry.register(
            "clusters_scored",
            "ManagedClusters with at least one score in the last complete round",
            clusters_scored.clone(),
        );
        let clusters_stale = Gauge::default();
        registry.register(
            "clusters_stale",
            "AddOnPlacementScores written by this scorer whose validUntil has passed",
            clusters_stale.clone(),
        );
        let writes = Family::default();
        registry.register(
            "writes",
            "AddOnPlacementScore writes, by reason and result",
            writes.clone(),
        );
        let rounds = Family::default();
        registry.register("rounds", "Scoring rounds, by outcome", rounds.clone());
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease and writes scores",
            leader.clone(),
        );
        let partial_response = Gauge::default();
        registry.register(
            "partial_response",
            "1 while the latest round's answers were partial (some Thanos stores did not answer), whether refused or accepted",
            partial_response.clone(),
        );
        let last_complete_round = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "last_complete_round_timestamp_seconds",
            "Unix time of the last round whose queries all succeeded",
            last_complete_round.clone(),
        );
        Self {
            registry,
            query_duration,
            query_errors,
            series_skipped,
            clusters_scored,
            clusters_stale,
            writes,
            rounds,
            leader,
            partial_response,
            last_complete_round,
        }
    }

    pub fn observe_query(&self, score: &str, took: Duration) {
        self.query_duration
            .get_or_create(&vec![("score", score.to_owned())])
            .observe(took.as_secs_f64());
    }

    pub fn query_error(&self, score: &str, kind: &str) {
        self.query_errors
            .get_or_create(&vec![("score", score.to_owned()), ("kind", kind.to_owned())])
            .inc();
    }

    pub fn series_skipped(&self, score: &str, reason: &str, count: u64) {
        self.series_skipped
            .get_or_create(&vec![("score", score.to_owned()), ("reason", reason.to_owned())])
            .inc_by(count);
    }

    pub fn write(&self, reason: &str, result: &str) {
        self.writes
            .get_or_create(&vec![
                ("reason", reason.to_owned()),
                ("result", result.to_owned()),
            ])
            .inc();
    }

    pub fn round(&self, outcome: &str) {
        self.rounds
            .get_or_create(&vec![("outcome", outcome.to_owned())])
            .inc();
    }

    pub fn set_clusters_scored(&self, n: usize) {
        self.clusters_scored.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub fn set_clusters_stale(&self, n: usize) {
        self.clusters_stale.set(i64::try_from(n).unwrap_or(i64::MAX));
    }

    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    pub fn set_partial_response(&self, partial: bool) {
        self.partial_response.set(i64::from(partial));
    }

    pub fn set_last_complete_round(&self, at: jiff::Timestamp) {
        self.last_complete_round.set(at.as_millisecond() as f64 / 1000.0);
    }

    /// The OpenMetrics text of every family.
    pub fn render(&self) -> String {
        encode(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_parseable_text() {
        let m = Metrics::new();
        m.observe_query("cpu", Duration::from_millis(30));
        m.observe_query("cpu", Duration::from_secs(60));
        m.query_error("cpu", "timeout");
        m.series_skipped("cpu", "nan", 3);
        m.series_skipped("we\"ird\\", "unknown_cluster", 1);
        m.set_clusters_scored(42);
        m.set_leader(true);
        m.set_partial_response(true);
        let text = m.render();
        assert!(text.contains("ocm_score_thanos_clusters_scored 42\n"), "{text}");
        assert!(text.contains("ocm_score_thanos_leader 1\n"), "{text}");
        assert!(text.contains("ocm_score_thanos_partial_response 1\n"), "{text}");
        assert!(
            text.contains("ocm_score_thanos_query_duration_seconds_bucket{le=\"0.05\",score=\"cpu\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("ocm_score_thanos_query_duration_seconds_bucket{le=\"+Inf\",score=\"cpu\"} 2\n"),
            "{text}"
        );
        assert!(
            text.contains("ocm_score_thanos_query_duration_seconds_count{score=\"cpu\"} 2\n"),
            "{text}"
        );
        assert!(text.contains("score=\"we\\\"ird\\\\\""), "{text}");
        let lines = text.lines().map(|l| Ok(l.to_owned()));
        let parsed = prometheus_parse::Scrape::parse(lines).expect("valid exposition format");
        let skipped = parsed
            .samples
            .iter()
            .find(|s| {
                s.metric == "ocm_score_thanos_series_skipped_total" && s.labels.get("reason") == Some("nan")
            })
            .expect("skipped series");
        // OpenMetrics declares the family without `_total`, which prometheus-parse reads as untyped.
        assert!(matches!(
            skipped.value,
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) if v == 3.0
        ));
    }
}
