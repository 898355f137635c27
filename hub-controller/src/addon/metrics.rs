//! The add-on manager's metrics, registered under `ocm_score_addon` in a `prometheus-client`
//! registry and served by the process shell on `/metrics`.

use ocm_score_shell::metrics::{Registry, encode};
use ocm_score_shell::supervise::ModeMetrics;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use std::time::Duration;

type Labels = Vec<(&'static str, String)>;

/// Reconcile durations in seconds: 1 ms to about a minute.
fn reconcile_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 4.0, 9))
}

pub struct Metrics {
    registry: Registry,
    reconciles: Family<Labels, Counter>,
    reconcile_errors: Family<Labels, Counter>,
    reconcile_seconds: Family<Labels, Histogram, fn() -> Histogram>,
    writes: Family<Labels, Counter>,
    csr_decisions: Family<Labels, Counter>,
    config_invalid: Gauge,
    leader: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("ocm_score_addon");
        let reconciles = Family::default();
        registry.register(
            "reconciles",
            "Reconciliations run, by controller",
            reconciles.clone(),
        );
        let reconcile_errors = Family::default();
        registry.register(
            "reconcile_errors",
            "Reconciliations that failed, by controller and error kind",
            reconcile_errors.clone(),
        );
        let reconcile_seconds = Family::new_with_constructor(reconcile_histogram as fn() -> Histogram);
        registry.register(
            "reconcile_seconds",
            "Time spent reconciling, by controller",
            reconcile_seconds.clone(),
        );
        let writes = Family::default();
        registry.register(
            "writes",
            "Writes sent to the hub API server, by kind and verb",
            writes.clone(),
        );
        let csr_decisions = Family::default();
        registry.register(
            "csr_decisions",
            "Add-on CSRs approved or denied",
            csr_decisions.clone(),
        );
        let config_invalid = Gauge::default();
        registry.register(
            "config_invalid",
            "Add-ons whose AddOnDeploymentConfig is invalid (the last good agent stays)",
            config_invalid.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease",
            leader.clone(),
        );
        Metrics {
            registry,
            reconciles,
            reconcile_errors,
            reconcile_seconds,
            writes,
            csr_decisions,
            config_invalid,
            leader,
        }
    }
}

impl Metrics {
    pub fn reconciled(&self, controller: &'static str, took: Duration) {
        let labels = vec![("controller", controller.to_owned())];
        self.reconciles.get_or_create(&labels).inc();
        self.reconcile_seconds
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
    }

    pub fn reconcile_failed(&self, controller: &'static str, error: &'static str) {
        self.reconcile_errors
            .get_or_create(&vec![("controller", controller.into()), ("error", error.into())])
            .inc();
    }

    pub fn wrote(&self, kind: &str, verb: &'static str) {
        self.writes
            .get_or_create(&vec![("kind", kind.to_owned()), ("verb", verb.into())])
            .inc();
    }

    pub fn csr_decided(&self, decision: &'static str) {
        self.csr_decisions
            .get_or_create(&vec![("decision", decision.into())])
            .inc();
    }

    pub fn set_config_invalid(&self, count: usize) {
        self.config_invalid.set(i64::try_from(count).unwrap_or(i64::MAX));
    }
}

impl ModeMetrics for Metrics {
    fn render(&self) -> String {
        encode(&self.registry)
    }

    fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_the_families_under_their_names() {
        let m = Metrics::default();
        m.wrote("ManifestWork", "create");
        m.wrote("ManifestWork", "create");
        m.reconcile_failed("addon", "kube");
        m.reconciled("addon", Duration::from_millis(20));
        m.set_leader(true);
        let text = m.render();
        assert!(text.contains("# TYPE ocm_score_addon_writes counter"), "{text}");
        assert!(
            text.contains("ocm_score_addon_writes_total{kind=\"ManifestWork\",verb=\"create\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("ocm_score_addon_reconcile_errors_total{controller=\"addon\",error=\"kube\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("ocm_score_addon_reconcile_seconds_sum{controller=\"addon\"} 0.02"),
            "{text}"
        );
        assert!(
            text.contains("ocm_score_addon_reconciles_total{controller=\"addon\"} 1"),
            "{text}"
        );
        assert!(text.contains("ocm_score_addon_leader 1"), "{text}");
        assert!(text.contains("ocm_score_addon_config_invalid 0"), "{text}");
    }
}
