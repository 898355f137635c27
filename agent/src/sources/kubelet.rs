//! The `kubelet` source: real usage from each eligible node's `/metrics/resource`, fetched through the
//! API server's node proxy and parsed with prometheus-parse.
//!
//! Per node, free = allocatable − max(requests, usage), for cpu (usage = the rate of
//! `node_cpu_usage_seconds_total` between two scrapes) and memory (`node_memory_working_set_bytes`).
//! A node whose kubelet did not answer, or whose cpu rate is not known yet (first scrape, counter
//! reset), counts with its requests alone, which the cluster source vouches for; if no kubelet answers
//! at all the source fails. Other resources are left to the cluster source.

use super::{Reading, SourceError};
use crate::accounting::resources::{CPU, MEMORY};
use crate::accounting::{Figures, ResourceSet, ResourceView};
use crate::metrics::Metrics;
use futures::StreamExt;
use kube::Client;
use ocm_score_shell::sync::lock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const CPU_COUNTER: &str = "node_cpu_usage_seconds_total";
const MEMORY_GAUGE: &str = "node_memory_working_set_bytes";

/// What one scrape of `/metrics/resource` says about its node.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct NodeSample {
    /// Cumulative CPU seconds and the sample's time in milliseconds since the epoch.
    pub cpu_seconds: Option<(f64, i64)>,
    pub memory_working_set: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("not a Prometheus text exposition: {0}")]
    Syntax(String),
    #[error("{metric} is {value}, expected a finite non-negative number")]
    BadValue { metric: &'static str, value: String },
    #[error("neither {CPU_COUNTER} nor {MEMORY_GAUGE} is present")]
    Missing,
}

/// Reads the node-level samples out of a `/metrics/resource` body. Samples without a timestamp are
/// taken as of now.
pub fn parse_resource_metrics(text: &str) -> Result<NodeSample, ParseError> {
    let scrape = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
        .map_err(|e| ParseError::Syntax(e.to_string()))?;
    let mut sample = NodeSample::default();
    for s in &scrape.samples {
        let value = match s.value {
            prometheus_parse::Value::Counter(v)
            | prometheus_parse::Value::Gauge(v)
            | prometheus_parse::Value::Untyped(v) => v,
            _ => continue,
        };
        let metric = match s.metric.as_str() {
            CPU_COUNTER => CPU_COUNTER,
            MEMORY_GAUGE => MEMORY_GAUGE,
            _ => continue,
        };
        if !value.is_finite() || value < 0.0 {
            return Err(ParseError::BadValue {
                metric,
                value: value.to_string(),
            });
        }
        if metric == CPU_COUNTER {
            sample.cpu_seconds = Some((value, s.timestamp.timestamp_millis()));
        } else {
            sample.memory_working_set = Some(value);
        }
    }
    if sample.cpu_seconds.is_none() && sample.memory_working_set.is_none() {
        return Err(ParseError::Missing);
    }
    Ok(sample)
}

/// CPU in use in millicores between two samples of the cumulative counter, if it can be told.
pub fn cpu_rate_millicores(previous: (f64, i64), current: (f64, i64)) -> Option<f64> {
    let (seconds_before, at_before) = previous;
    let (seconds_now, at_now) = current;
    let elapsed = (at_now - at_before) as f64 / 1000.0;
    let used = seconds_now - seconds_before;
    (elapsed > 0.0 && used >= 0.0).then(|| used / elapsed * 1000.0)
}

/// A node as the kubelet source needs it (copied out of the ledger so no lock is held while scraping).
#[derive(Debug, Clone)]
pub struct NodeRequests {
    pub name: String,
    pub allocatable_cpu: i64,
    pub allocatable_memory: i64,
    pub requested_cpu: i128,
    pub requested_memory: i128,
}

/// Usage of one node in accounting units (millicores, bytes); `None` where unknown.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct NodeUsage {
    pub cpu: Option<f64>,
    pub memory: Option<f64>,
}

/// Cluster figures for cpu and memory given each node's requests and (possibly unknown) usage.
pub fn view_with_usage(nodes: &[(NodeRequests, NodeUsage)], resources: &ResourceSet) -> ResourceView {
    let mut cpu = Figures::default();
    let mut memory = Figures::default();
    let mut first = true;
    for (node, usage) in nodes {
        // Usage is rounded up: never claim a unit that is in use. It comes from a kubelet's text, so
        // it is capped at the largest amount an allocatable can hold: with every term within i64 the
        // i128 sums cannot overflow, whatever a kubelet reports.
        let held = |requested: i128, used: Option<f64>| {
            used.map_or(requested, |u| {
                requested.max(u.ceil().min(i64::MAX as f64) as i128)
            })
        };
        let cpu_free = i128::from(node.allocatable_cpu) - held(node.requested_cpu, usage.cpu);
        let mem_free = i128::from(node.allocatable_memory) - held(node.requested_memory, usage.memory);
        for (f, free, capacity) in [
            (&mut cpu, cpu_free, node.allocatable_cpu),
            (&mut memory, mem_free, node.allocatable_memory),
        ] {
            f.cluster_free += free;
            f.cluster_capacity += i128::from(capacity);
            f.node_free = if first { free } else { f.node_free.max(free) };
            f.node_capacity = f.node_capacity.max(i128::from(capacity));
        }
        first = false;
    }
    let figures = resources
        .names()
        .iter()
        .map(|name| match name.as_str() {
            CPU => Some(cpu),
            MEMORY => Some(memory),
            _ => None,
        })
        .collect();
    ResourceView {
        figures,
        eligible_nodes: nodes.len(),
    }
}

pub struct KubeletSource {
    client: Client,
    concurrency: usize,
    timeout: Duration,
    /// The last cpu counter sample per node, for rates.
    previous_cpu: Mutex<HashMap<String, (f64, i64)>>,
    metrics: Arc<Metrics>,
}

impl KubeletSource {
    pub fn new(client: Client, concurrency: usize, timeout: Duration, metrics: Arc<Metrics>) -> Self {
        KubeletSource {
            client,
            concurrency,
            timeout,
            previous_cpu: Mutex::new(HashMap::new()),
            metrics,
        }
    }

    /// Scrapes every node and combines usage with the requests the cluster source counted.
    pub async fn read(
        &self,
        nodes: Vec<NodeRequests>,
        resources: &ResourceSet,
    ) -> Result<Reading, SourceError> {
        let total = nodes.len();
        let scrapes: Vec<(NodeRequests, Result<NodeSample, String>)> = futures::stream::iter(nodes)
            .map(|node| async move {
                let result = self.scrape(&node.name).await;
                (node, result)
            })
            .buffer_unordered(self.concurrency)
            .collect()
            .await;

        let mut first_error = None;
        let mut answered = 0;
        let mut with_cpu = 0;
        let mut combined = Vec::with_capacity(scrapes.len());
        {
            let mut previous = lock(&self.previous_cpu);
            // Forget nodes that are gone (a set, not a scan per node: clusters have thousands).
            let current: std::collections::HashSet<&str> =
                scrapes.iter().map(|(n, _)| n.name.as_str()).collect();
            previous.retain(|name, _| current.contains(name.as_str()));
            for (node, result) in scrapes {
                self.metrics.kubelet_scrape(result.is_ok());
                let usage = match result {
                    Ok(sample) => {
                        answered += 1;
                        let cpu = sample.cpu_seconds.and_then(|now| {
                            let before = previous.insert(node.name.clone(), now)?;
                            cpu_rate_millicores(before, now)
                        });
                        with_cpu += usize::from(cpu.is_some());
                        NodeUsage {
                            cpu,
                            memory: sample.memory_working_set,
                        }
                    }
                    Err(error) => {
                        tracing::debug!(node = %node.name, %error, "kubelet scrape failed");
                        first_error.get_or_insert_with(|| format!("node {}: {error}", node.name));
                        NodeUsage::default()
                    }
                };
                combined.push((node, usage));
            }
        }
        if answered == 0 && total > 0 {
            return Err(SourceError::Kubelet {
                nodes: total,
                first: first_error.unwrap_or_default(),
            });
        }
        Ok(Reading {
            source: "kubelet",
            view: view_with_usage(&combined, resources),
            detail: format!(
                "kubelet: usage from {answered} of {total} nodes (cpu rate known for {with_cpu})"
            ),
        })
    }

    async fn scrape(&self, node: &str) -> Result<NodeSample, String> {
        let path = format!("/api/v1/nodes/{node}/proxy/metrics/resource");
        let request = hyper::Request::get(path)
            .body(Vec::new())
            .map_err(|e| e.to_string())?;
        let text = tokio::time::timeout(self.timeout, self.client.request_text(request))
            .await
            .map_err(|_| format!("no answer within {:?}", self.timeout))?
            .map_err(|e| e.to_string())?;
        parse_resource_metrics(&text).map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = "\
# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container=\"app\",namespace=\"default\",pod=\"web\"} 12.5 1700000000000
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 357.35491 1700000000000
# HELP node_memory_working_set_bytes [STABLE] Current working set of the node in bytes
# TYPE node_memory_working_set_bytes gauge
node_memory_working_set_bytes 1.616715776e+09 1700000000000
# HELP scrape_error [ALPHA] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE scrape_error gauge
scrape_error 0
";

    #[test]
    fn parses_node_samples() {
        let sample = parse_resource_metrics(BODY).expect("parses");
        assert_eq!(sample.cpu_seconds, Some((357.35491, 1_700_000_000_000)));
        assert_eq!(sample.memory_working_set, Some(1_616_715_776.0));
    }

    #[test]
    fn samples_without_timestamp_take_the_scrape_time() {
        let now = jiff::Timestamp::now().as_millisecond();
        let sample = parse_resource_metrics("node_cpu_usage_seconds_total 10\n").expect("parses");
        let (seconds, at) = sample.cpu_seconds.expect("cpu");
        assert_eq!(seconds, 10.0);
        assert!((at - now).abs() < 5_000, "{at} vs {now}");
        assert_eq!(sample.memory_working_set, None);
    }

    #[test]
    fn rejects_bodies_without_node_metrics_or_with_bad_values() {
        assert_eq!(
            parse_resource_metrics("scrape_error 0\n"),
            Err(ParseError::Missing)
        );
        assert_eq!(
            parse_resource_metrics("<html>502 Bad Gateway</html>"),
            Err(ParseError::Missing)
        );
        assert!(matches!(
            parse_resource_metrics("node_memory_working_set_bytes NaN\n"),
            Err(ParseError::BadValue {
                metric: MEMORY_GAUGE,
                ..
            })
        ));
        assert!(matches!(
            parse_resource_metrics("node_cpu_usage_seconds_total -1\n"),
            Err(ParseError::BadValue {
                metric: CPU_COUNTER,
                ..
            })
        ));
    }

    #[test]
    fn cpu_rate_between_samples() {
        assert_eq!(cpu_rate_millicores((100.0, 0), (103.0, 10_000)), Some(300.0));
        assert_eq!(
            cpu_rate_millicores((100.0, 0), (90.0, 10_000)),
            None,
            "counter reset"
        );
        assert_eq!(cpu_rate_millicores((100.0, 5), (101.0, 5)), None, "same instant");
    }

    #[test]
    fn free_is_allocatable_minus_the_larger_of_requests_and_usage() {
        let node = |name: &str, requested_cpu, requested_memory| NodeRequests {
            name: name.into(),
            allocatable_cpu: 4000,
            allocatable_memory: 16 << 30,
            requested_cpu,
            requested_memory,
        };
        let nodes = vec![
            // Busier than requested: usage counts.
            (
                node("a", 1000, 1 << 30),
                NodeUsage {
                    cpu: Some(3000.0),
                    memory: Some((4u64 << 30) as f64),
                },
            ),
            // Less busy than requested: requests count.
            (
                node("b", 2000, 8 << 30),
                NodeUsage {
                    cpu: Some(500.2),
                    memory: Some(1.0),
                },
            ),
            // Unknown usage: requests alone.
            (node("c", 500, 2 << 30), NodeUsage::default()),
        ];
        let view = view_with_usage(&nodes, &ResourceSet::built_in());
        let cpu = view.figures[0].expect("cpu");
        assert_eq!(cpu.cluster_free, 1000 + 2000 + 3500);
        assert_eq!(cpu.node_free, 3500);
        assert_eq!(cpu.cluster_capacity, 12_000);
        let mem = view.figures[1].expect("memory");
        assert_eq!(mem.cluster_free, (12i128 << 30) + (8 << 30) + (14 << 30));
        assert_eq!(mem.node_free, 14 << 30);
        assert_eq!(view.figures[2], None, "GPUs are the cluster source's");
        assert_eq!(view.eligible_nodes, 3);
        let empty = view_with_usage(&[], &ResourceSet::built_in());
        assert_eq!(empty.figures[0], Some(Figures::default()));
    }

    #[test]
    fn absurd_usage_from_a_kubelet_cannot_overflow_the_sums() {
        // A kubelet's metrics text is input: a working set of 1e300 bytes on every node must give
        // nothing free (not wrap around into a huge free amount, nor panic).
        let node = |name: &str| NodeRequests {
            name: name.into(),
            allocatable_cpu: 4000,
            allocatable_memory: 16 << 30,
            requested_cpu: 0,
            requested_memory: 0,
        };
        let absurd = NodeUsage {
            cpu: Some(f64::MAX),
            memory: Some(1e300),
        };
        let nodes: Vec<_> = (0..4).map(|i| (node(&format!("n{i}")), absurd)).collect();
        let view = view_with_usage(&nodes, &ResourceSet::built_in());
        for figures in [view.figures[0], view.figures[1]] {
            let f = figures.expect("cpu and memory");
            assert!(f.cluster_free < 0 && f.node_free < 0, "{f:?}");
        }
    }

    /// A stand-in API server answering the node proxy: node `a` reports 20 more cpu-seconds per
    /// scrape, 10 s apart (2 cores busy) and 6 GiB working set; node `b` answers 500.
    async fn fake_api_server() -> (String, tokio::task::JoinHandle<()>) {
        use http_body_util::Full;
        use hyper::body::Bytes;
        use std::sync::atomic::{AtomicU64, Ordering};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let scrapes = Arc::new(AtomicU64::new(0));
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let scrapes = scrapes.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(
                        move |request: hyper::Request<hyper::body::Incoming>| {
                            let path = request.uri().path().to_owned();
                            let n = scrapes.fetch_add(1, Ordering::Relaxed);
                            async move {
                                let mut response = match path.as_str() {
                                    "/api/v1/nodes/a/proxy/metrics/resource" => {
                                        let at = 1_700_000_000_000u64 + n * 10_000;
                                        hyper::Response::new(Full::new(Bytes::from(format!(
                                            "node_cpu_usage_seconds_total {} {at}\nnode_memory_working_set_bytes 6442450944 {at}\n",
                                            100 + n * 20
                                        ))))
                                    }
                                    _ => hyper::Response::new(Full::new(Bytes::from("{}"))),
                                };
                                if path != "/api/v1/nodes/a/proxy/metrics/resource" {
                                    *response.status_mut() = hyper::StatusCode::INTERNAL_SERVER_ERROR;
                                }
                                Ok::<_, std::convert::Infallible>(response)
                            }
                        },
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        (url, task)
    }

    #[tokio::test]
    async fn scrapes_through_the_node_proxy_and_uses_the_cpu_rate_from_the_second_scrape() {
        let (url, server) = fake_api_server().await;
        let mut config = kube::Config::new(url.parse().expect("url"));
        config.default_retry = false;
        let client = Client::try_from(config).expect("client");
        let metrics = Arc::new(Metrics::default());
        let source = KubeletSource::new(client, 4, Duration::from_secs(5), metrics.clone());
        let nodes = || {
            vec![
                NodeRequests {
                    name: "a".into(),
                    allocatable_cpu: 8000,
                    allocatable_memory: 32 << 30,
                    requested_cpu: 1000,
                    requested_memory: 4 << 30,
                },
                NodeRequests {
                    name: "b".into(),
                    allocatable_cpu: 4000,
                    allocatable_memory: 16 << 30,
                    requested_cpu: 500,
                    requested_memory: 1 << 30,
                },
            ]
        };
        let resources = ResourceSet::built_in();

        // First scrape: memory usage known, cpu rate not yet (requests count).
        let first = source.read(nodes(), &resources).await.expect("a answered");
        let cpu = first.view.figures[0].expect("cpu");
        assert_eq!(cpu.cluster_free, (8000 - 1000) + (4000 - 500));
        let mem = first.view.figures[1].expect("memory");
        assert_eq!(
            mem.cluster_free,
            ((32i128 - 6) << 30) + (15 << 30),
            "a's working set exceeds its requests"
        );
        assert!(
            first
                .detail
                .contains("usage from 1 of 2 nodes (cpu rate known for 0)"),
            "{}",
            first.detail
        );

        // Second scrape: a is 2 cores busy, more than its 1 core of requests.
        let second = source.read(nodes(), &resources).await.expect("a answered");
        let cpu = second.view.figures[0].expect("cpu");
        assert_eq!(cpu.cluster_free, (8000 - 2000) + (4000 - 500));
        assert_eq!(cpu.node_free, 6000);
        assert!(
            second.detail.contains("cpu rate known for 1"),
            "{}",
            second.detail
        );

        // Nobody answers: the source fails instead of guessing.
        let only_b = nodes().into_iter().filter(|n| n.name == "b").collect();
        let err = source
            .read(only_b, &resources)
            .await
            .expect_err("no kubelet answered");
        assert!(matches!(err, SourceError::Kubelet { nodes: 1, .. }), "{err}");
        assert!(
            metrics
                .render()
                .contains("ocm_score_agent_kubelet_scrapes_total{result=\"failed\"} 3")
        );
        server.abort();
    }
}
