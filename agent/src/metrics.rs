//! Prometheus metrics of the agent, rendered in the text exposition format.
//!
//! The score object carries only integers in -100..100, so the raw quantities behind every score are
//! exported here (`ocm_score_agent_free` / `ocm_score_agent_capacity`, in base units: cores, bytes,
//! devices). A handful of counters and gauges needs no metrics library; they are atomics rendered by hand.

use crate::accounting::{ResourceSet, ResourceView};
use crate::scores::ScoreValue;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

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

    fn index(self) -> usize {
        self as usize
    }
}

/// What a hub write attempt ended as.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteResult {
    Written,
    Skipped,
    Failed,
}

#[derive(Default)]
pub struct Metrics {
    watch_events: [AtomicU64; 2],
    watch_errors: [AtomicU64; 2],
    invalid_objects: AtomicU64,
    writes: [AtomicU64; 3],
    lease_renewals: [AtomicU64; 2],
    kubelet_scrapes: [AtomicU64; 2],
    last_computed_seconds: AtomicI64,
    valid_until_seconds: AtomicI64,
    source_failures: Mutex<BTreeMap<&'static str, u64>>,
    snapshot: Mutex<Option<Snapshot>>,
}

struct Snapshot {
    /// (resource, scope, free, capacity) in base units.
    figures: Vec<(String, &'static str, f64, f64)>,
    scores: Vec<(String, i32)>,
    eligible_nodes: usize,
    counted_pods: Option<usize>,
}

impl Metrics {
    pub fn watch_event(&self, kind: WatchKind) {
        self.watch_events[kind.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub fn watch_error(&self, kind: WatchKind) {
        self.watch_errors[kind.index()].fetch_add(1, Ordering::Relaxed);
    }

    pub fn set_invalid_objects(&self, count: usize) {
        self.invalid_objects.store(count as u64, Ordering::Relaxed);
    }

    pub fn write(&self, result: WriteResult) {
        self.writes[result as usize].fetch_add(1, Ordering::Relaxed);
    }

    pub fn writes(&self, result: WriteResult) -> u64 {
        self.writes[result as usize].load(Ordering::Relaxed)
    }

    pub fn lease_renewal(&self, ok: bool) {
        self.lease_renewals[usize::from(!ok)].fetch_add(1, Ordering::Relaxed);
    }

    pub fn kubelet_scrape(&self, ok: bool) {
        self.kubelet_scrapes[usize::from(!ok)].fetch_add(1, Ordering::Relaxed);
    }

    pub fn source_failure(&self, source: &'static str) {
        if let Ok(mut failures) = self.source_failures.lock() {
            *failures.entry(source).or_default() += 1;
        }
    }

    pub fn set_valid_until(&self, unix_seconds: i64) {
        self.valid_until_seconds.store(unix_seconds, Ordering::Relaxed);
    }

    /// Records a successful computation: raw figures and the scores derived from them.
    pub fn computed(
        &self,
        view: &ResourceView,
        resources: &ResourceSet,
        scores: &[ScoreValue],
        counted_pods: Option<usize>,
        unix_seconds: i64,
    ) {
        let mut figures = Vec::new();
        for (r, f) in view.figures.iter().enumerate() {
            let Some(f) = f else { continue };
            let per = resources.units_per_base_unit(r);
            let name = resources.name(r).to_owned();
            figures.push((
                name.clone(),
                "cluster",
                f.cluster_free as f64 / per,
                f.cluster_capacity as f64 / per,
            ));
            figures.push((
                name,
                "node",
                f.node_free as f64 / per,
                f.node_capacity as f64 / per,
            ));
        }
        let snapshot = Snapshot {
            figures,
            scores: scores.iter().map(|s| (s.name.clone(), s.value)).collect(),
            eligible_nodes: view.eligible_nodes,
            counted_pods,
        };
        if let Ok(mut slot) = self.snapshot.lock() {
            *slot = Some(snapshot);
        }
        self.last_computed_seconds.store(unix_seconds, Ordering::Relaxed);
    }

    /// The text exposition of every metric.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(4096);
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);

        header(
            &mut out,
            "ocm_score_agent_watch_events_total",
            "counter",
            "Watch events applied to the accounting.",
        );
        for kind in [WatchKind::Nodes, WatchKind::Pods] {
            let _ = writeln!(
                out,
                "ocm_score_agent_watch_events_total{{kind=\"{}\"}} {}",
                kind.as_str(),
                load(&self.watch_events[kind.index()])
            );
        }
        header(
            &mut out,
            "ocm_score_agent_watch_errors_total",
            "counter",
            "Watch stream errors (each is retried with backoff).",
        );
        for kind in [WatchKind::Nodes, WatchKind::Pods] {
            let _ = writeln!(
                out,
                "ocm_score_agent_watch_errors_total{{kind=\"{}\"}} {}",
                kind.as_str(),
                load(&self.watch_errors[kind.index()])
            );
        }
        header(
            &mut out,
            "ocm_score_agent_invalid_objects",
            "gauge",
            "Nodes and pods whose resources cannot be read.",
        );
        let _ = writeln!(
            out,
            "ocm_score_agent_invalid_objects {}",
            load(&self.invalid_objects)
        );

        header(
            &mut out,
            "ocm_score_agent_hub_writes_total",
            "counter",
            "AddOnPlacementScore status writes by result (skipped = nothing moved enough).",
        );
        for (i, result) in ["written", "skipped", "failed"].iter().enumerate() {
            let _ = writeln!(
                out,
                "ocm_score_agent_hub_writes_total{{result=\"{result}\"}} {}",
                load(&self.writes[i])
            );
        }
        header(
            &mut out,
            "ocm_score_agent_lease_renewals_total",
            "counter",
            "Add-on Lease renewals by result.",
        );
        for (i, result) in ["ok", "failed"].iter().enumerate() {
            let _ = writeln!(
                out,
                "ocm_score_agent_lease_renewals_total{{result=\"{result}\"}} {}",
                load(&self.lease_renewals[i])
            );
        }
        header(
            &mut out,
            "ocm_score_agent_kubelet_scrapes_total",
            "counter",
            "Kubelet /metrics/resource scrapes by result.",
        );
        for (i, result) in ["ok", "failed"].iter().enumerate() {
            let _ = writeln!(
                out,
                "ocm_score_agent_kubelet_scrapes_total{{result=\"{result}\"}} {}",
                load(&self.kubelet_scrapes[i])
            );
        }
        header(
            &mut out,
            "ocm_score_agent_source_failures_total",
            "counter",
            "Computations abandoned because a source failed.",
        );
        if let Ok(failures) = self.source_failures.lock() {
            for (source, count) in failures.iter() {
                let _ = writeln!(
                    out,
                    "ocm_score_agent_source_failures_total{{source=\"{source}\"}} {count}"
                );
            }
        }
        header(
            &mut out,
            "ocm_score_agent_last_computed_timestamp_seconds",
            "gauge",
            "When scores were last computed from fresh data.",
        );
        let _ = writeln!(
            out,
            "ocm_score_agent_last_computed_timestamp_seconds {}",
            self.last_computed_seconds.load(Ordering::Relaxed)
        );
        header(
            &mut out,
            "ocm_score_agent_valid_until_timestamp_seconds",
            "gauge",
            "validUntil of the last successful write.",
        );
        let _ = writeln!(
            out,
            "ocm_score_agent_valid_until_timestamp_seconds {}",
            self.valid_until_seconds.load(Ordering::Relaxed)
        );

        if let Ok(slot) = self.snapshot.lock()
            && let Some(s) = slot.as_ref()
        {
            header(
                &mut out,
                "ocm_score_agent_free",
                "gauge",
                "Free amount behind the scores, in base units (cores, bytes, devices).",
            );
            for (resource, scope, free, _) in &s.figures {
                let _ = writeln!(
                    out,
                    "ocm_score_agent_free{{resource=\"{resource}\",scope=\"{scope}\"}} {free}"
                );
            }
            header(
                &mut out,
                "ocm_score_agent_capacity",
                "gauge",
                "Capacity the free amount is measured against, in base units.",
            );
            for (resource, scope, _, capacity) in &s.figures {
                let _ = writeln!(
                    out,
                    "ocm_score_agent_capacity{{resource=\"{resource}\",scope=\"{scope}\"}} {capacity}"
                );
            }
            header(
                &mut out,
                "ocm_score_agent_score",
                "gauge",
                "The last computed score (-100..100).",
            );
            for (name, value) in &s.scores {
                let _ = writeln!(out, "ocm_score_agent_score{{score=\"{name}\"}} {value}");
            }
            header(
                &mut out,
                "ocm_score_agent_eligible_nodes",
                "gauge",
                "Ready, schedulable nodes counted.",
            );
            let _ = writeln!(out, "ocm_score_agent_eligible_nodes {}", s.eligible_nodes);
            if let Some(pods) = s.counted_pods {
                header(
                    &mut out,
                    "ocm_score_agent_counted_pods",
                    "gauge",
                    "Bound, non-terminal pods counted.",
                );
                let _ = writeln!(out, "ocm_score_agent_counted_pods {pods}");
            }
        }
        out
    }
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
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
