//! The tiering controller's metrics, registered under `ocm_score_tiering` in a
//! `prometheus-client` registry and served by the process shell on `/metrics`.

use ocm_score_shell::controller::ReconcileMetrics;
use ocm_score_shell::metrics::{Registry, encode};
use ocm_score_shell::supervise::ModeMetrics;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use std::sync::atomic::AtomicU64;

type Labels = Vec<(&'static str, String)>;

pub struct Metrics {
    registry: Registry,
    /// TieredPlacement passes (`controller="tiered_placement"`).
    pub reconcile: ReconcileMetrics,
    writes: Family<Labels, Counter>,
    transitions: Family<Labels, Counter>,
    divergences: Counter,
    events_failed: Counter,
    last_reconcile: Gauge<f64, AtomicU64>,
    leader: Gauge,
    reservations: Gauge,
    reserved_scores: Gauge,
    reserved_score_errors: Counter,
    released_by_report: Counter,
    score_updates: Family<Labels, Counter>,
    score_expiries: Counter,
    /// Hub snapshots built for plans (once per change of the hub and namespace).
    pub snapshot_builds: Counter,
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("ocm_score_tiering");
        let reconcile = ReconcileMetrics::register(&mut registry, "TieredPlacements");
        let writes = Family::default();
        registry.register(
            "writes",
            "Writes sent to the hub API server, by kind",
            writes.clone(),
        );
        let transitions = Family::default();
        registry.register(
            "transitions",
            "Tier transitions recorded in a status, by kind",
            transitions.clone(),
        );
        let divergences = Counter::default();
        registry.register(
            "plan_divergence",
            "Times OCM's decisions for a child kept differing from the planner's prediction (PlanDiverged became True)",
            divergences.clone(),
        );
        let events_failed = Counter::default();
        registry.register(
            "events_failed",
            "Events that could not be published",
            events_failed.clone(),
        );
        let last_reconcile = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "last_reconcile_timestamp_seconds",
            "Unix time of the last completed reconciliation (alert on its age)",
            last_reconcile.clone(),
        );
        let leader = Gauge::default();
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease",
            leader.clone(),
        );
        let reservations = Gauge::default();
        registry.register(
            "reservations",
            "Capacity reservations in flight (one per TieredPlacement and cluster)",
            reservations.clone(),
        );
        let released_by_report = Counter::default();
        registry.register(
            "reservations_released_by_report",
            "Reservations released by their cluster's agent's report (after the settle time, or after the workload landed)",
            released_by_report.clone(),
        );
        let score_updates = Family::default();
        registry.register(
            "score_updates",
            "AddOnPlacementScore updates seen, by effect: renewal (no plan can change: nothing re-planned) or change (re-plans the TieredPlacements holding the cluster)",
            score_updates.clone(),
        );
        let score_expiries = Counter::default();
        registry.register(
            "score_expiries",
            "AddOnPlacementScores that passed their validUntil without a renewal (each re-plans the TieredPlacements holding the cluster)",
            score_expiries.clone(),
        );
        let snapshot_builds = Counter::default();
        registry.register(
            "snapshot_builds",
            "Hub snapshots built to plan from: one per change of what the planner reads (a score expiring without renewal is one) and namespace, shared by the plans in between",
            snapshot_builds.clone(),
        );
        let reserved_scores = Gauge::default();
        registry.register(
            "reserved_scores",
            "Clusters that should have an ocm-score-reserved AddOnPlacementScore (reservations in flight there)",
            reserved_scores.clone(),
        );
        let reserved_score_errors = Counter::default();
        registry.register(
            "reserved_score_errors",
            "Writes or deletions of ocm-score-reserved scores that failed (retried)",
            reserved_score_errors.clone(),
        );
        Metrics {
            registry,
            reconcile,
            writes,
            transitions,
            divergences,
            events_failed,
            last_reconcile,
            leader,
            reservations,
            reserved_scores,
            reserved_score_errors,
            released_by_report,
            score_updates,
            score_expiries,
            snapshot_builds,
        }
    }
}

impl Metrics {
    /// A pass that completed at `now`.
    pub fn completed(&self, now: jiff::Timestamp) {
        self.last_reconcile.set(now.as_millisecond() as f64 / 1000.0);
    }

    pub fn reservations(&self, in_flight: usize) {
        self.reservations
            .set(i64::try_from(in_flight).unwrap_or(i64::MAX));
    }

    pub fn reserved_scores(&self, published: usize) {
        self.reserved_scores
            .set(i64::try_from(published).unwrap_or(i64::MAX));
    }

    pub fn reserved_score_failed(&self) {
        self.reserved_score_errors.inc();
    }

    pub fn released_by_report(&self, count: usize) {
        self.released_by_report.inc_by(count as u64);
    }

    /// An update of an AddOnPlacementScore: a change of what plans read, or a renewal.
    pub fn score_update(&self, changes: bool) {
        let effect = if changes { "change" } else { "renewal" };
        self.score_updates
            .get_or_create(&vec![("effect", effect.to_owned())])
            .inc();
    }

    /// A score passed its `validUntil` without a renewal.
    pub fn score_expired(&self) {
        self.score_expiries.inc();
    }

    pub fn wrote(&self, kind: &'static str) {
        self.writes.get_or_create(&vec![("kind", kind.to_owned())]).inc();
    }

    pub fn transition(&self, kind: &str) {
        self.transitions
            .get_or_create(&vec![("kind", kind.to_owned())])
            .inc();
    }

    pub fn diverged(&self) {
        self.divergences.inc();
    }

    pub fn event_failed(&self) {
        self.events_failed.inc();
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
    use std::time::Duration;

    #[test]
    fn renders_the_families_under_their_names() {
        let m = Metrics::default();
        m.wrote("Placement");
        m.wrote("Placement");
        m.reconcile.failed("tiered_placement", "apply_child");
        m.transition("Failover");
        m.diverged();
        m.reconcile
            .reconciled("tiered_placement", Duration::from_millis(20));
        m.completed(jiff::Timestamp::from_second(1_700_000_000).expect("ts"));
        m.set_leader(true);
        m.score_update(false);
        m.score_update(false);
        m.score_update(true);
        m.score_expired();
        let text = m.render();
        for line in [
            "ocm_score_tiering_writes_total{kind=\"Placement\"} 2",
            "ocm_score_tiering_reconcile_errors_total{controller=\"tiered_placement\",error=\"apply_child\"} 1",
            "ocm_score_tiering_transitions_total{kind=\"Failover\"} 1",
            "ocm_score_tiering_plan_divergence_total 1",
            "ocm_score_tiering_reconciles_total{controller=\"tiered_placement\"} 1",
            "ocm_score_tiering_reconcile_seconds_sum{controller=\"tiered_placement\"} 0.02",
            "ocm_score_tiering_last_reconcile_timestamp_seconds 1700000000.0",
            "ocm_score_tiering_leader 1",
            "ocm_score_tiering_score_updates_total{effect=\"renewal\"} 2",
            "ocm_score_tiering_score_updates_total{effect=\"change\"} 1",
            "ocm_score_tiering_score_expiries_total 1",
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
    }
}
