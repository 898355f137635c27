//! The add-on manager's metrics, registered under `ocm_score_addon` in a `prometheus-client`
//! registry and served by the process shell on `/metrics`.

use crate::addon::status::conditions::{AVAILABLE, find};
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use ocm_score_api::ManagedClusterAddOn;
use ocm_score_shell::controller::ReconcileMetrics;
use ocm_score_shell::metrics::{Registry, encode};
use ocm_score_shell::supervise::ModeMetrics;
use ocm_score_shell::sync::lock;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use std::sync::{Arc, Mutex};

type Labels = Vec<(&'static str, String)>;

pub struct Metrics {
    registry: Registry,
    /// The three controllers' passes (`addon`, `install`, `csr`).
    pub reconcile: ReconcileMetrics,
    writes: Family<Labels, Counter>,
    csr_decisions: Family<Labels, Counter>,
    config_invalid: Gauge,
    leader: Gauge,
    availability: Availability,
}

/// The hub's view of every agent: the `Available` condition of each cluster's ManagedClusterAddOn
/// (set by the klusterlet from the agent's Lease, or by us from the agent Deployment's status), read
/// from the watch cache at scrape time, so an add-on that is gone takes its series with it. Only the
/// leader has the cache; a standby exports the family empty.
#[derive(Clone, Debug, Default)]
struct Availability {
    addons: Arc<Mutex<Option<Store<ManagedClusterAddOn>>>>,
}

impl Collector for Availability {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let mut family = encoder.encode_descriptor(
            "agent_available",
            "1 while the cluster's ManagedClusterAddOn is Available (its agent is up), 0 while it is not or not yet reported",
            None,
            MetricType::Gauge,
        )?;
        let store = lock(&self.addons).clone();
        let Some(store) = store else { return Ok(()) };
        let mut clusters: Vec<(String, bool)> = store
            .state()
            .iter()
            .filter(|addon| addon.metadata.deletion_timestamp.is_none())
            .filter_map(|addon| Some((addon.namespace()?, available(addon))))
            .collect();
        clusters.sort();
        for (cluster, available) in clusters {
            let labels: Labels = vec![("cluster", cluster)];
            ConstGauge::new(i64::from(available)).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

fn available(addon: &ManagedClusterAddOn) -> bool {
    addon
        .status
        .as_ref()
        .and_then(|status| find(&status.conditions, AVAILABLE))
        .is_some_and(|condition| condition.status == "True")
}

impl Default for Metrics {
    fn default() -> Self {
        let mut registry = Registry::with_prefix("ocm_score_addon");
        let reconcile =
            ReconcileMetrics::register(&mut registry, "add-ons, ClusterManagementAddOns and CSRs");
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
        let availability = Availability::default();
        registry.register_collector(Box::new(availability.clone()));
        Metrics {
            registry,
            reconcile,
            writes,
            csr_decisions,
            config_invalid,
            leader,
            availability,
        }
    }
}

impl Metrics {
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

    /// The cache of our ManagedClusterAddOns that `agent_available` is read from, once watched.
    pub fn watch_addons(&self, addons: Store<ManagedClusterAddOn>) {
        *lock(&self.availability.addons) = Some(addons);
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
        m.reconcile.failed("addon", "caches_gone");
        m.reconcile
            .reconciled("addon", std::time::Duration::from_millis(20));
        m.set_leader(true);
        let text = m.render();
        assert!(text.contains("# TYPE ocm_score_addon_writes counter"), "{text}");
        assert!(
            text.contains("ocm_score_addon_writes_total{kind=\"ManifestWork\",verb=\"create\"} 2"),
            "{text}"
        );
        assert!(
            text.contains(
                "ocm_score_addon_reconcile_errors_total{controller=\"addon\",error=\"caches_gone\"} 1"
            ),
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

    fn addon(cluster: &str, available: Option<&str>, deleting: bool) -> ManagedClusterAddOn {
        let conditions: Vec<serde_json::Value> = available
            .map(|status| {
                serde_json::json!({
                    "type": "Available",
                    "status": status,
                    "reason": "ProbeAvailable",
                    "message": "",
                    "lastTransitionTime": "2025-01-01T00:00:00Z",
                })
            })
            .into_iter()
            .collect();
        let mut metadata = serde_json::json!({"name": "resource-usage-score", "namespace": cluster});
        if deleting {
            metadata["deletionTimestamp"] = "2025-01-01T00:00:00Z".into();
        }
        serde_json::from_value(serde_json::json!({
            "apiVersion": "addon.open-cluster-management.io/v1alpha1",
            "kind": "ManagedClusterAddOn",
            "metadata": metadata,
            "spec": {},
            "status": {"conditions": conditions},
        }))
        .expect("a ManagedClusterAddOn")
    }

    #[test]
    fn agent_availability_follows_the_cached_addons() {
        let m = Metrics::default();
        // Before the watch exists (a standby): the family, without series.
        let text = m.render();
        assert!(
            text.contains("# TYPE ocm_score_addon_agent_available gauge"),
            "{text}"
        );
        assert!(!text.contains("ocm_score_addon_agent_available{"), "{text}");

        let mut writer = kube::runtime::reflector::store::Writer::<ManagedClusterAddOn>::default();
        m.watch_addons(writer.as_reader());
        for addon in [
            addon("up", Some("True"), false),
            addon("down", Some("False"), false),
            addon("unknown", Some("Unknown"), false),
            addon("new", None, false),
            addon("leaving", Some("True"), true),
        ] {
            writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(addon));
        }
        let text = m.render();
        for line in [
            "ocm_score_addon_agent_available{cluster=\"up\"} 1\n",
            "ocm_score_addon_agent_available{cluster=\"down\"} 0\n",
            "ocm_score_addon_agent_available{cluster=\"unknown\"} 0\n",
            "ocm_score_addon_agent_available{cluster=\"new\"} 0\n",
        ] {
            assert!(text.contains(line), "{line} missing in\n{text}");
        }
        assert!(!text.contains("cluster=\"leaving\""), "{text}");

        // A deleted add-on takes its series with it.
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Delete(addon(
            "down",
            Some("False"),
            false,
        )));
        let text = m.render();
        assert!(!text.contains("cluster=\"down\""), "{text}");
        assert!(text.contains("cluster=\"up\"} 1"), "{text}");
    }
}
