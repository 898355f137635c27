//! The add-on manager's metrics, in the Prometheus text format.
//!
//! A few counters and gauges keyed by label values; a map behind a mutex is all they need.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

const PREFIX: &str = "ocm_score_addon_";

/// Metric families: name, type and help.
const FAMILIES: &[(&str, &str, &str)] = &[
    (
        "reconciles_total",
        "counter",
        "Reconciliations run, by controller.",
    ),
    (
        "reconcile_errors_total",
        "counter",
        "Reconciliations that failed, by controller and error kind.",
    ),
    (
        "reconcile_seconds_sum",
        "counter",
        "Time spent reconciling, by controller.",
    ),
    (
        "writes_total",
        "counter",
        "Writes sent to the hub API server, by kind and verb.",
    ),
    (
        "csr_decisions_total",
        "counter",
        "Add-on CSRs approved or denied.",
    ),
    (
        "config_invalid",
        "gauge",
        "Add-ons whose AddOnDeploymentConfig is invalid (the last good agent stays).",
    ),
    ("leader", "gauge", "1 while this replica holds the leader Lease."),
];

type Key = (&'static str, Vec<(&'static str, String)>);

#[derive(Default)]
pub struct Metrics {
    values: Mutex<BTreeMap<Key, f64>>,
}

impl Metrics {
    fn add(&self, name: &'static str, labels: Vec<(&'static str, String)>, delta: f64) {
        let mut values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        *values.entry((name, labels)).or_insert(0.0) += delta;
    }

    fn set(&self, name: &'static str, labels: Vec<(&'static str, String)>, value: f64) {
        let mut values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        values.insert((name, labels), value);
    }

    pub fn reconciled(&self, controller: &'static str, took: Duration) {
        self.add("reconciles_total", vec![("controller", controller.into())], 1.0);
        self.add(
            "reconcile_seconds_sum",
            vec![("controller", controller.into())],
            took.as_secs_f64(),
        );
    }

    pub fn reconcile_failed(&self, controller: &'static str, error: &'static str) {
        self.add(
            "reconcile_errors_total",
            vec![("controller", controller.into()), ("error", error.into())],
            1.0,
        );
    }

    pub fn wrote(&self, kind: &str, verb: &'static str) {
        self.add(
            "writes_total",
            vec![("kind", kind.to_string()), ("verb", verb.into())],
            1.0,
        );
    }

    pub fn csr_decided(&self, decision: &'static str) {
        self.add("csr_decisions_total", vec![("decision", decision.into())], 1.0);
    }

    pub fn set_config_invalid(&self, count: usize) {
        self.set("config_invalid", vec![], count as f64);
    }

    pub fn set_leader(&self, leading: bool) {
        self.set("leader", vec![], if leading { 1.0 } else { 0.0 });
    }

    /// Total of a counter over all label values (for tests and logs).
    pub fn total(&self, name: &str) -> f64 {
        let values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        values
            .iter()
            .filter(|((n, _), _)| *n == name)
            .map(|(_, v)| v)
            .sum()
    }

    pub fn render(&self) -> String {
        let values = self.values.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = String::new();
        for (name, kind, help) in FAMILIES {
            let _ = writeln!(out, "# HELP {PREFIX}{name} {help}");
            let _ = writeln!(out, "# TYPE {PREFIX}{name} {kind}");
            for ((_, labels), value) in values.iter().filter(|((n, _), _)| n == name) {
                let labels: Vec<String> = labels
                    .iter()
                    .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
                    .collect();
                if labels.is_empty() {
                    let _ = writeln!(out, "{PREFIX}{name} {value}");
                } else {
                    let _ = writeln!(out, "{PREFIX}{name}{{{}}} {value}", labels.join(","));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_prometheus_text() {
        let m = Metrics::default();
        m.wrote("ManifestWork", "create");
        m.wrote("ManifestWork", "create");
        m.reconcile_failed("addon", "kube");
        m.set_leader(true);
        let text = m.render();
        assert!(
            text.contains("# TYPE ocm_score_addon_writes_total counter"),
            "{text}"
        );
        assert!(
            text.contains("ocm_score_addon_writes_total{kind=\"ManifestWork\",verb=\"create\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("ocm_score_addon_reconcile_errors_total{controller=\"addon\",error=\"kube\"} 1"),
            "{text}"
        );
        assert!(text.contains("ocm_score_addon_leader 1"), "{text}");
        assert_eq!(m.total("writes_total"), 2.0);
    }
}
