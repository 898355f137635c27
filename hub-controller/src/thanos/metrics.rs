//! The scorer's own metrics, rendered in the Prometheus text format on `/metrics`.
//!
//! A handful of families updated once per round do not need a metrics library: a mutex-guarded map
//! of series per family is enough, and keeps the exposition format under test.

use std::{collections::BTreeMap, fmt::Write, sync::Mutex, time::Duration};

const PREFIX: &str = "ocm_score_thanos_";
/// Query latency buckets in seconds: from a fast Prometheus to a Thanos fan-out near its timeout.
const LATENCY_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Counter,
    Gauge,
    Histogram,
}

type LabelSet = Vec<(&'static str, String)>;

#[derive(Clone, Default)]
struct HistogramValue {
    buckets: [u64; LATENCY_BUCKETS.len()],
    count: u64,
    sum: f64,
}

struct Family {
    help: &'static str,
    kind: Kind,
    values: BTreeMap<LabelSet, f64>,
    histograms: BTreeMap<LabelSet, HistogramValue>,
}

/// All metrics of one scorer process.
pub struct Metrics {
    families: Mutex<BTreeMap<&'static str, Family>>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut families = BTreeMap::new();
        let mut family = |name: &'static str, kind: Kind, help: &'static str| {
            families.insert(
                name,
                Family {
                    help,
                    kind,
                    values: BTreeMap::new(),
                    histograms: BTreeMap::new(),
                },
            );
        };
        family(
            "query_duration_seconds",
            Kind::Histogram,
            "Time of one fleet-wide score query, retries included.",
        );
        family(
            "query_errors_total",
            Kind::Counter,
            "Score queries that failed after retries, by kind of failure.",
        );
        family(
            "series_skipped_total",
            Kind::Counter,
            "Series not turned into a score, by reason.",
        );
        family(
            "clusters_scored",
            Kind::Gauge,
            "ManagedClusters with at least one score in the last complete round.",
        );
        family(
            "clusters_stale",
            Kind::Gauge,
            "AddOnPlacementScores written by this scorer whose validUntil has passed.",
        );
        family(
            "writes_total",
            Kind::Counter,
            "AddOnPlacementScore writes, by reason and result.",
        );
        family("rounds_total", Kind::Counter, "Scoring rounds, by outcome.");
        family(
            "leader",
            Kind::Gauge,
            "1 while this replica holds the leader Lease and writes scores.",
        );
        family(
            "last_complete_round_timestamp_seconds",
            Kind::Gauge,
            "Unix time of the last round whose queries all succeeded.",
        );
        // Start the unlabelled gauges at 0 so they are visible from the first scrape.
        for name in ["clusters_scored", "clusters_stale", "leader"] {
            if let Some(f) = families.get_mut(name) {
                f.values.insert(Vec::new(), 0.0);
            }
        }
        Self {
            families: Mutex::new(families),
        }
    }

    pub fn observe_query(&self, score: &str, took: Duration) {
        self.with(|families| {
            if let Some(f) = families.get_mut("query_duration_seconds") {
                let h = f.histograms.entry(vec![("score", score.to_owned())]).or_default();
                let secs = took.as_secs_f64();
                for (bucket, bound) in h.buckets.iter_mut().zip(LATENCY_BUCKETS) {
                    if secs <= bound {
                        *bucket += 1;
                    }
                }
                h.count += 1;
                h.sum += secs;
            }
        });
    }

    pub fn query_error(&self, score: &str, kind: &str) {
        self.add(
            "query_errors_total",
            vec![("score", score.to_owned()), ("kind", kind.to_owned())],
            1.0,
        );
    }

    pub fn series_skipped(&self, score: &str, reason: &str, count: u64) {
        self.add(
            "series_skipped_total",
            vec![("score", score.to_owned()), ("reason", reason.to_owned())],
            count as f64,
        );
    }

    pub fn write(&self, reason: &str, result: &str) {
        self.add(
            "writes_total",
            vec![("reason", reason.to_owned()), ("result", result.to_owned())],
            1.0,
        );
    }

    pub fn round(&self, outcome: &str) {
        self.add("rounds_total", vec![("outcome", outcome.to_owned())], 1.0);
    }

    pub fn set_clusters_scored(&self, n: usize) {
        self.set("clusters_scored", n as f64);
    }

    pub fn set_clusters_stale(&self, n: usize) {
        self.set("clusters_stale", n as f64);
    }

    pub fn set_leader(&self, leader: bool) {
        self.set("leader", if leader { 1.0 } else { 0.0 });
    }

    pub fn set_last_complete_round(&self, at: jiff::Timestamp) {
        self.set(
            "last_complete_round_timestamp_seconds",
            at.as_millisecond() as f64 / 1000.0,
        );
    }

    fn add(&self, name: &str, labels: LabelSet, by: f64) {
        self.with(|families| {
            if let Some(f) = families.get_mut(name) {
                *f.values.entry(labels).or_default() += by;
            }
        });
    }

    fn set(&self, name: &str, value: f64) {
        self.with(|families| {
            if let Some(f) = families.get_mut(name) {
                f.values.insert(Vec::new(), value);
            }
        });
    }

    fn with<R>(&self, f: impl FnOnce(&mut BTreeMap<&'static str, Family>) -> R) -> R {
        // A panic while holding the lock cannot leave a half-written number behind, so keep going.
        let mut guard = self
            .families
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        f(&mut guard)
    }

    /// The text exposition format (version 0.0.4).
    pub fn render(&self) -> String {
        self.with(|families| {
            let mut out = String::new();
            for (name, family) in families.iter() {
                let kind = match family.kind {
                    Kind::Counter => "counter",
                    Kind::Gauge => "gauge",
                    Kind::Histogram => "histogram",
                };
                let _ = writeln!(out, "# HELP {PREFIX}{name} {}", family.help);
                let _ = writeln!(out, "# TYPE {PREFIX}{name} {kind}");
                for (labels, value) in &family.values {
                    let _ = writeln!(
                        out,
                        "{PREFIX}{name}{} {}",
                        label_text(labels, None),
                        number(*value)
                    );
                }
                for (labels, h) in &family.histograms {
                    for (count, bound) in h.buckets.iter().zip(LATENCY_BUCKETS) {
                        let le = number(bound);
                        let _ = writeln!(
                            out,
                            "{PREFIX}{name}_bucket{} {count}",
                            label_text(labels, Some(&le))
                        );
                    }
                    let _ = writeln!(
                        out,
                        "{PREFIX}{name}_bucket{} {}",
                        label_text(labels, Some("+Inf")),
                        h.count
                    );
                    let _ = writeln!(
                        out,
                        "{PREFIX}{name}_sum{} {}",
                        label_text(labels, None),
                        number(h.sum)
                    );
                    let _ = writeln!(
                        out,
                        "{PREFIX}{name}_count{} {}",
                        label_text(labels, None),
                        h.count
                    );
                }
            }
            out
        })
    }
}

fn label_text(labels: &LabelSet, le: Option<&str>) -> String {
    let mut pairs: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape(v)))
        .collect();
    if let Some(le) = le {
        pairs.push(format!("le=\"{le}\""));
    }
    if pairs.is_empty() {
        String::new()
    } else {
        format!("{{{}}}", pairs.join(","))
    }
}

fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else {
        format!("{v}")
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
        let text = m.render();
        assert!(text.contains("ocm_score_thanos_clusters_scored 42\n"), "{text}");
        assert!(text.contains("ocm_score_thanos_leader 1\n"), "{text}");
        assert!(
            text.contains("ocm_score_thanos_query_duration_seconds_bucket{score=\"cpu\",le=\"0.05\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("ocm_score_thanos_query_duration_seconds_bucket{score=\"cpu\",le=\"+Inf\"} 2\n"),
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
        assert!(matches!(skipped.value, prometheus_parse::Value::Counter(v) if v == 3.0));
    }
}
