//! Metrics through `prometheus-client`: each mode registers its families in a [`Registry`] under its
//! prefix (`ocm_score_agent`, `ocm_score_addon`, `ocm_score_thanos`, ...), and `/metrics` serves
//! [`encode`]'s OpenMetrics text. Counters are registered without `_total`; the library adds it.
use crate::sync::lock;

pub use prometheus_client::registry::Registry;

/// Content type of [`encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The registry's families in the OpenMetrics text format.
pub fn encode(registry: &Registry) -> String {
    let mut out = String::with_capacity(4096);
    if let Err(error) = prometheus_client::encoding::text::encode(&mut out, registry) {
        // Only a failing writer errs, and a String does not fail; keep whatever was written.
        tracing::warn!(%error, "encoding metrics failed");
    }
    out
}

/// A gauge that is absent from the exposition until set, and again after [`OptionalGauge::clear`]:
/// for a figure that only some configurations have (a family with an empty label set would print
/// `name{}`, which not every parser reads). Integer by default; `OptionalGauge<f64>` for fractions.
#[derive(Clone, Debug)]
pub struct OptionalGauge<V = i64> {
    name: &'static str,
    help: &'static str,
    value: std::sync::Arc<std::sync::Mutex<Option<V>>>,
}

impl<V> OptionalGauge<V>
where
    V: prometheus_client::encoding::EncodeGaugeValue + Copy + std::fmt::Debug + Send + Sync + 'static,
{
    /// Registers the gauge in `registry` (under its prefix).
    pub fn register(registry: &mut Registry, name: &'static str, help: &'static str) -> Self {
        let gauge = OptionalGauge {
            name,
            help,
            value: Default::default(),
        };
        registry.register_collector(Box::new(gauge.clone()));
        gauge
    }

    pub fn set(&self, value: V) {
        *lock(&self.value) = Some(value);
    }

    pub fn clear(&self) {
        *lock(&self.value) = None;
    }
}

impl<V> prometheus_client::collector::Collector for OptionalGauge<V>
where
    V: prometheus_client::encoding::EncodeGaugeValue + Copy + std::fmt::Debug + Send + Sync + 'static,
{
    fn encode(
        &self,
        mut encoder: prometheus_client::encoding::DescriptorEncoder,
    ) -> Result<(), std::fmt::Error> {
        let value = *lock(&self.value);
        if let Some(value) = value {
            let metric = encoder.encode_descriptor(
                self.name,
                self.help,
                None,
                prometheus_client::metrics::MetricType::Gauge,
            )?;
            prometheus_client::encoding::EncodeMetric::encode(
                &prometheus_client::metrics::gauge::ConstGauge::new(value),
                metric,
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;
    use prometheus_client::metrics::family::Family;

    #[test]
    fn encodes_families_prometheus_parses() {
        let mut registry = Registry::with_prefix("ocm_score_test");
        let hits = Family::<Vec<(&'static str, String)>, Counter>::default();
        registry.register("hits", "Hits by path.", hits.clone());
        hits.get_or_create(&vec![("path", "we\"ird".to_owned())])
            .inc_by(3);
        let text = encode(&registry);
        assert!(text.contains("# TYPE ocm_score_test_hits counter"), "{text}");
        assert!(
            text.contains(r#"ocm_score_test_hits_total{path="we\"ird"} 3"#),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
        let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).expect("parses");
        assert_eq!(scrape.samples.len(), 1);
    }

    #[test]
    fn an_optional_gauge_shows_only_while_set() {
        let mut registry = Registry::with_prefix("ocm_score_test");
        let pods = OptionalGauge::register(&mut registry, "pods", "Pods counted");
        assert!(!encode(&registry).contains("pods"));
        pods.set(7);
        assert!(
            encode(&registry).contains("\nocm_score_test_pods 7\n"),
            "{}",
            encode(&registry)
        );
        pods.clear();
        assert!(!encode(&registry).contains("pods"));
    }
}
