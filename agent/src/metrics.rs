//! Prometheus metrics of the agent, in a `prometheus-client` registry under `ocm_score_agent`,
//! served by the process shell on `/metrics`.
//!
//! The score object carries only integers in -100..100, so the raw quantities behind every score are
//! exported here (`ocm_score_agent_free` / `ocm_score_agent_capacity`, in base units: cores, bytes,
//! devices).

use crate::accounting::{ResourceSet, ResourceView, ShapeFits};
use crate::scores::ScoreValue;
use ocm_score_shell::metrics::{OptionalGauge, Registry, encode};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::sync::atomic::AtomicU64;

/// Which watch a counter is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchKind {
    Nodes,
    Pods,
}

impl WatchKind {
    pub fn as_str(self) -> &'static str {
        match self {
            WatchKind::Nodes => "nodes",
            WatchKind::Pods => "pods",
        }
    }
}

/// What a hub write attempt ended as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteResult {
    Written,
    Skipped,
    Failed,
}

type Labels = Vec<(&'static str, String)>;

fn label(name: &'static str, value: &str) -> Labels {
    vec![(name, value.to_owned())]
}

fn result_label(result: WriteResult) -> Labels {
    label(
        "result",
        match result {
            WriteResult::Written => "written",
            WriteResult::Skipped => "skipped",
            WriteResult::Failed => "failed",
        },
    )
}

fn ok_label(ok: bool) -> Labels {
    label("result", if ok { "ok" } else { "failed" })
}

pub struct Metrics {
    registry: Registry,
    watch_events: Family<Labels, Counter>,
    watch_errors: Family<Labels, Counter>,
    invalid_objects: Gauge,
    writes: Family<Labels, Counter>,
    lease_renewals: Family<Labels, Counter>,
    kubelet_scrapes: Family<Labels, Counter>,
    source_failures: Family<Labels, Counter>,
    last_computed_seconds: Gauge,
    valid_until_seconds: Gauge,
    free: Family<Labels, Gauge<f64, AtomicU64>>,
    capacity: Family<Labels, Gauge<f64, AtomicU64>>,
    score: Family<Labels, Gauge>,
    fits: Family<Labels, Gauge>,
    fits_unschedulable: Family<Labels, Counter>,
    eligible_nodes: OptionalGauge,
    counted_pods: OptionalGauge,
    hub_clock_offset: OptionalGauge<f64>,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("ocm_score_agent");
        let mut family = |name: &str, help: &str| {
            let family = Family::<Labels, Counter>::default();
            registry.register(name, help, family.clone());
            family
        };
        let watch_events = family("watch_events", "Watch events applied to the accounting");
        let watch_errors = family(
            "watch_errors",
            "Watch stream errors (each is retried with backoff)",
        );
        let writes = family(
            "hub_writes",
            "AddOnPlacementScore status writes by result (skipped = nothing moved enough)",
        );
        let lease_renewals = family("lease_renewals", "Add-on Lease renewals by result");
        let kubelet_scrapes = family("kubelet_scrapes", "Kubelet /metrics/resource scrapes by result");
        let fits_unschedulable = family(
            "fits_unschedulable",
            "Replicas of each WorkloadShape (pods labelled ocm-score.io/workload-shape) that kube-scheduler left Unschedulable while fits counted room for more",
        );
        let source_failures = family(
            "source_failures",
            "Computations abandoned because a source failed",
        );
        let invalid_objects = Gauge::default();
        registry.register(
            "invalid_objects",
            "Nodes and pods whose resources cannot be read",
            invalid_objects.clone(),
        );
        let last_computed_seconds = Gauge::default();
        registry.register(
            "last_computed_timestamp_seconds",
            "When scores were last computed from fresh data",
            last_computed_seconds.clone(),
        );
        let valid_until_seconds = Gauge::default();
        registry.register(
            "valid_until_timestamp_seconds",
            "validUntil of the last successful write",
            valid_until_seconds.clone(),
        );
        let free = Family::default();
        registry.register(
            "free",
            "Free amount behind the scores, in base units (cores, bytes, devices)",
            free.clone(),
        );
        let capacity = Family::default();
        registry.register(
            "capacity",
            "Capacity the free amount is measured against, in base units",
            capacity.clone(),
        );
        let score = Family::default();
        registry.register("score", "The last computed score (-100..100)", score.clone());
        let fits = Family::default();
        registry.register(
            "fits",
            "Replicas of each WorkloadShape that fit now (the raw count behind fits.<shape>)",
            fits.clone(),
        );
        // Absent until the first computation; pods only with the cluster source.
        let eligible_nodes = OptionalGauge::register(
            &mut registry,
            "eligible_nodes",
            "Ready, schedulable nodes counted",
        );
        let counted_pods =
            OptionalGauge::register(&mut registry, "counted_pods", "Bound, non-terminal pods counted");
        // Absent until the hub has answered once.
        let hub_clock_offset = OptionalGauge::register(
            &mut registry,
            "hub_clock_offset_seconds",
            "The hub's clock minus this cluster's, from the Date of the hub API server's responses; validUntil is stamped on the hub's clock",
        );
        // Every known series is visible (at 0) from the first scrape.
        for kind in [WatchKind::Nodes, WatchKind::Pods] {
            let _ = watch_events.get_or_create(&label("kind", kind.as_str()));
            let _ = watch_errors.get_or_create(&label("kind", kind.as_str()));
        }
        for result in [WriteResult::Written, WriteResult::Skipped, WriteResult::Failed] {
            let _ = writes.get_or_create(&result_label(result));
        }
        for ok in [true, false] {
            let _ = lease_renewals.get_or_create(&ok_label(ok));
            let _ = kubelet_scrapes.get_or_create(&ok_label(ok));
        }
        Metrics {
            registry,
            watch_events,
            watch_errors,
            invalid_objects,
            writes,
            lease_renewals,
            kubelet_scrapes,
            source_failures,
            last_computed_seconds,
            valid_until_seconds,
            free,
            capacity,
            score,
            fits,
            fits_unschedulable,
            eligible_nodes,
            counted_pods,
            hub_clock_offset,
        }
    }
}

impl Metrics {
    pub fn watch_event(&self, kind: WatchKind) {
        self.watch_events
            .get_or_create(&label("kind", kind.as_str()))
            .inc();
    }

    pub fn watch_error(&self, kind: WatchKind) {
        self.watch_errors
            .get_or_create(&label("kind", kind.as_str()))
            .inc();
    }

    pub fn set_invalid_objects(&self, count: usize) {
        self.invalid_objects.set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    pub fn write(&self, result: WriteResult) {
        self.writes.get_or_create(&result_label(result)).inc();
    }

    pub fn writes(&self, result: WriteResult) -> u64 {
        self.writes.get_or_create(&result_label(result)).get()
    }

    pub fn lease_renewal(&self, ok: bool) {
        self.lease_renewals.get_or_create(&ok_label(ok)).inc();
    }

    pub fn kubelet_scrape(&self, ok: bool) {
        self.kubelet_scrapes.get_or_create(&ok_label(ok)).inc();
    }

    pub fn source_failure(&self, source: &'static str) {
        self.source_failures.get_or_create(&label("source", source)).inc();
    }

    pub fn set_hub_clock_offset(&self, seconds: f64) {
        self.hub_clock_offset.set(seconds);
    }

    pub fn set_valid_until(&self, unix_seconds: i64) {
        self.valid_until_seconds.set(unix_seconds);
    }

    /// Records a successful computation: raw figures and the scores derived from them. The series of
    /// the previous computation are replaced, so a resource or score no longer computed disappears.
    pub fn computed(
        &self,
        view: &ResourceView,
        resources: &ResourceSet,
        scores: &[ScoreValue],
        counted_pods: Option<usize>,
        unix_seconds: i64,
    ) {
        self.free.clear();
        self.capacity.clear();
        for (r, f) in view.figures.iter().enumerate() {
            let Some(f) = f else { continue };
            let per = resources.units_per_base_unit(r);
            let name = resources.name(r).to_owned();
            for (scope, free, capacity) in [
                ("cluster", f.cluster_free, f.cluster_capacity),
                ("node", f.node_free, f.node_capacity),
            ] {
                let labels = vec![("resource", name.clone()), ("scope", scope.to_owned())];
                self.free.get_or_create(&labels).set(free as f64 / per);
                self.capacity.get_or_create(&labels).set(capacity as f64 / per);
            }
        }
        self.score.clear();
        for s in scores {
            self.score
                .get_or_create(&label("score", &s.name))
                .set(i64::from(s.value));
        }
        let count = |n: usize| i64::try_from(n).unwrap_or(i64::MAX);
        self.eligible_nodes.set(count(view.eligible_nodes));
        match counted_pods {
            Some(pods) => self.counted_pods.set(count(pods)),
            None => self.counted_pods.clear(),
        }
        self.last_computed_seconds.set(unix_seconds);
    }

    /// The raw replica counts of the shapes; shapes no longer counted disappear.
    pub fn set_fits(&self, fits: &[ShapeFits]) {
        self.fits.clear();
        for f in fits {
            self.fits
                .get_or_create(&label("shape", &f.shape))
                .set(i64::try_from(f.replicas).unwrap_or(i64::MAX));
        }
    }

    /// One replica of `shape` Unschedulable while its fits count was at least 1
    /// ([`crate::unschedulable`]).
    pub fn fits_unschedulable(&self, shape: &str) {
        self.fits_unschedulable
            .get_or_create(&label("shape", shape))
            .inc();
    }

    /// The OpenMetrics text of every family.
    pub fn render(&self) -> String {
        encode(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::Figures;
    use ocm_score_tests::support::Exposition;

    #[test]
    fn renders_parseable_exposition_with_raw_quantities() {
        let metrics = Metrics::default();
        metrics.watch_event(WatchKind::Pods);
        metrics.write(WriteResult::Written);
        metrics.write(WriteResult::Skipped);
        metrics.source_failure("cluster");
        let resources = ResourceSet::built_in();
        let view = ResourceView {
            figures: vec![
                Some(Figures {
                    cluster_free: 2500,
                    cluster_capacity: 4000,
                    node_free: 1500,
                    node_capacity: 2000,
                }),
                Some(Figures {
                    cluster_free: 1 << 30,
                    cluster_capacity: 4 << 30,
                    node_free: 1 << 29,
                    node_capacity: 2 << 30,
                }),
                None,
                None,
            ],
            eligible_nodes: 2,
        };
        let scores = vec![ScoreValue {
            name: "cpuClusterAvailable".into(),
            value: -95,
            free: Some(2.5),
            capacity: Some(4.0),
        }];
        metrics.computed(&view, &resources, &scores, Some(7), 1_700_000_000);
        let text = metrics.render();
        let exposition = Exposition::parse(&text).expect("valid exposition");
        let value = |name: &str, labels: &[(&str, &str)]| exposition.value(name, labels);
        assert_eq!(
            value(
                "ocm_score_agent_free",
                &[("resource", "cpu"), ("scope", "cluster")]
            ),
            Some(2.5)
        );
        assert_eq!(
            value(
                "ocm_score_agent_free",
                &[("resource", "memory"), ("scope", "node")]
            ),
            Some(f64::from(1u32 << 29))
        );
        assert_eq!(
            value(
                "ocm_score_agent_capacity",
                &[("resource", "cpu"), ("scope", "node")]
            ),
            Some(2.0)
        );
        assert_eq!(
            value("ocm_score_agent_score", &[("score", "cpuClusterAvailable")]),
            Some(-95.0)
        );
        assert_eq!(
            value("ocm_score_agent_hub_writes_total", &[("result", "skipped")]),
            Some(1.0)
        );
        assert_eq!(value("ocm_score_agent_counted_pods", &[]), Some(7.0));
        assert_eq!(
            value("ocm_score_agent_source_failures_total", &[("source", "cluster")]),
            Some(1.0)
        );
    }
}
