//! Test harness for the Thanos scorer: a real Prometheus server (Debian's `prometheus` package) with
//! backfilled data, a real Thanos Querier and Sidecars over several of them ([`fleet`]), a fake
//! query API that misbehaves on demand, the API server double as the hub, and
//! `ocm-score-hub thanos-scorer` run as a process.

pub mod fleet;

use ocm_score_api::{AddOnPlacementScore, AddOnPlacementScoreStatus};
use ocm_score_control_plane::pki::ClusterCa;
use ocm_score_kube_double::{ApiServer, Gvr};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::{
    fmt::Write as _,
    net::SocketAddr,
    path::{Path, PathBuf},
    process::Stdio,
    sync::{
        Arc, Mutex,
        atomic::{AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::TcpListener,
    process::Command,
};

/// Set to `1` at build time to mark the tests that need a real Prometheus as ignored (see
/// `hub-controller/build.rs`), so the runner reports them as skipped instead of running them.
pub const SKIP_ENV: &str = "OCM_SCORE_SKIP_PROMETHEUS";
/// How long a convergence may take before a test gives up.
pub const CONVERGE: Duration = Duration::from_secs(60);

/// Fails the test, naming what is missing, unless every binary in `tools` is on PATH. There is no
/// silent pass: a machine without Prometheus skips these tests by building with
/// `OCM_SCORE_SKIP_PROMETHEUS=1`, which the runner then counts as skipped.
pub fn require_tools(tools: &[&str]) {
    let missing: Vec<&str> = tools
        .iter()
        .copied()
        .filter(|b| find_binary(b).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "this test needs these binaries, which are not on PATH: {}. Install them (`apt-get install -y \
         prometheus`, as scripts/test.sh does), or run with {SKIP_ENV}=1 to skip (and report as \
         skipped) every test that needs a real Prometheus.",
        missing.join(", ")
    );
}

/// [`require_tools`] for a test that starts Prometheus from backfilled data.
pub fn require_prometheus() {
    require_tools(&["prometheus", "promtool"]);
}

fn find_binary(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

pub use crate::support::{ModeProcess, TempDir, free_port};

/// Samples in the OpenMetrics text format, for `promtool tsdb create-blocks-from openmetrics`.
#[derive(Default)]
pub struct OpenMetrics {
    families: Vec<(String, Vec<Series>)>,
}

/// Rendered labels and (unix seconds, value) samples of one series.
type Series = (String, Vec<(i64, f64)>);

impl OpenMetrics {
    /// Adds one gauge series, sampled every `step` seconds over `from..to` (unix seconds) wherever
    /// `value` returns a number.
    pub fn series(
        &mut self,
        metric: &str,
        labels: &[(&str, &str)],
        (from, to, step): (i64, i64, i64),
        value: impl Fn(i64) -> Option<f64>,
    ) -> &mut Self {
        let labels = labels
            .iter()
            .map(|(k, v)| format!("{k}=\"{v}\""))
            .collect::<Vec<_>>()
            .join(",");
        let samples: Vec<(i64, f64)> = (from..to)
            .step_by(step as usize)
            .filter_map(|t| value(t).map(|v| (t, v)))
            .collect();
        match self.families.iter_mut().find(|(m, _)| m == metric) {
            Some((_, series)) => series.push((labels, samples)),
            None => self.families.push((metric.to_owned(), vec![(labels, samples)])),
        }
        self
    }

    pub fn render(&self) -> String {
        let mut out = String::new();
        for (metric, series) in &self.families {
            let _ = writeln!(out, "# TYPE {metric} gauge");
            for (labels, samples) in series {
                for (t, v) in samples {
                    let v = if v.is_nan() {
                        "NaN".to_owned()
                    } else {
                        format!("{v}")
                    };
                    let _ = writeln!(out, "{metric}{{{labels}}} {v} {t}");
                }
            }
        }
        out.push_str("# EOF\n");
        out
    }
}

pub const FREE_CPU: &str = "sum by (cluster) (node_cpu_allocatable) - sum by (cluster) (pod_cpu_requests)";
pub const REQUEST_RATE: &str = "sum by (cluster) (rate(http_requests[1m]))";
pub const MEM_FREE: &str = "max by (cluster) (mem_free_ratio)";

/// Allocatable CPU per (cluster, node). `e`'s is NaN; `ghost` is no ManagedCluster (and would be
/// the best cluster on every score if it were counted).
const ALLOCATABLE: &[(&str, &str, f64)] = &[
    ("a", "n1", 8.0),
    ("a", "n2", 8.0),
    ("b", "n1", 8.0),
    ("c", "n1", 16.0),
    ("c", "n2", 16.0),
    ("d", "n1", 4.0),
    ("d", "n2", 4.0),
    ("d", "n3", 4.0),
    ("e", "n1", f64::NAN),
    ("ghost", "n1", 100.0),
];
/// Requested CPU per cluster, all on node n1.
const REQUESTED: &[(&str, f64)] = &[
    ("a", 4.0),
    ("b", 6.0),
    ("c", 10.0),
    ("d", 5.0),
    ("e", 1.0),
    ("ghost", 1.0),
];
/// Slopes of the `http_requests` counters, so rate() is the slope.
const REQUEST_SLOPES: &[(&str, f64)] = &[("a", 1.0), ("b", 2.0), ("c", 4.5), ("d", 7.0), ("ghost", 0.1)];
const MEM_FREE_RATIOS: &[(&str, f64)] = &[
    ("a", 0.75),
    ("b", 0.125),
    ("c", 0.5),
    ("d", 0.875),
    ("ghost", 1.0),
];

/// Every cluster of the fleet data.
pub const FLEET: &[&str] = &["a", "b", "c", "d", "e", "ghost"];

/// The scores of clusters a–d from the whole fleet's data by [`FREE_CPU`] (`cpuFree`, normalized
/// across the fleet), [`REQUEST_RATE`] (`requestRate`, lower is better) and [`MEM_FREE`] (`memFree`,
/// fixed 0..1), as `thanos_prometheus.rs` computes them by hand for one Prometheus. `e` (NaN CPU)
/// and `ghost` (no ManagedCluster) get none.
pub const FLEET_SCORES: &[(&str, &[(&str, i32)])] = &[
    ("a", &[("cpuFree", 0), ("requestRate", 100), ("memFree", 50)]),
    ("b", &[("cpuFree", -100), ("requestRate", 66), ("memFree", -75)]),
    ("c", &[("cpuFree", 100), ("requestRate", -16), ("memFree", 0)]),
    ("d", &[("cpuFree", -50), ("requestRate", -100), ("memFree", 75)]),
];

/// Fleet data: clusters a–d, `e` whose allocatable CPU is NaN, and `ghost`, which is no
/// ManagedCluster. Cluster `c`'s series stop `c_stops_after` seconds after `t0`.
pub fn fleet_data(t0: i64, c_stops_after: i64) -> OpenMetrics {
    fleet_data_of(t0, c_stops_after, FLEET)
}

/// [`fleet_data`] of `clusters` only, as one Prometheus of a fleet spread over several holds it.
pub fn fleet_data_of(t0: i64, c_stops_after: i64, clusters: &[&str]) -> OpenMetrics {
    let span = (t0 - 600, t0 + 600, 5);
    let alive = move |cluster: &str, t: i64| cluster != "c" || t < t0 + c_stops_after;
    let held = |cluster: &&str| clusters.contains(cluster);
    let mut data = OpenMetrics::default();
    for (cluster, node, value) in ALLOCATABLE.iter().filter(|(c, _, _)| held(c)) {
        let (cluster, value) = (*cluster, *value);
        data.series(
            "node_cpu_allocatable",
            &[("cluster", cluster), ("node", node)],
            span,
            move |t| alive(cluster, t).then_some(value),
        );
    }
    for (cluster, value) in REQUESTED.iter().filter(|(c, _)| held(c)) {
        let (cluster, value) = (*cluster, *value);
        data.series(
            "pod_cpu_requests",
            &[("cluster", cluster), ("node", "n1")],
            span,
            move |t| alive(cluster, t).then_some(value),
        );
    }
    for (cluster, slope) in REQUEST_SLOPES.iter().filter(|(c, _)| held(c)) {
        let (cluster, slope) = (*cluster, *slope);
        data.series("http_requests", &[("cluster", cluster)], span, move |t| {
            alive(cluster, t).then_some(slope * (t - span.0) as f64)
        });
    }
    for (cluster, value) in MEM_FREE_RATIOS.iter().filter(|(c, _)| held(c)) {
        let (cluster, value) = (*cluster, *value);
        data.series("mem_free_ratio", &[("cluster", cluster)], span, move |t| {
            alive(cluster, t).then_some(value)
        });
    }
    data
}

/// The fleet's gauges (CPU allocatable and requested, free memory ratio) of `clusters`, in the
/// Prometheus text format, as a scrape target serves them now.
pub fn fleet_gauges(clusters: &[&str]) -> String {
    let mut out = String::new();
    let mut family = |metric: &str, samples: Vec<(String, f64)>| {
        let _ = writeln!(out, "# TYPE {metric} gauge");
        for (labels, value) in samples {
            let value = if value.is_nan() {
                "NaN".to_owned()
            } else {
                format!("{value}")
            };
            let _ = writeln!(out, "{metric}{{{labels}}} {value}");
        }
    };
    let wanted = |cluster: &&str| clusters.contains(cluster);
    family(
        "node_cpu_allocatable",
        ALLOCATABLE
            .iter()
            .filter(|(c, _, _)| wanted(c))
            .map(|(c, n, v)| (format!("cluster=\"{c}\",node=\"{n}\""), *v))
            .collect(),
    );
    family(
        "pod_cpu_requests",
        REQUESTED
            .iter()
            .filter(|(c, _)| wanted(c))
            .map(|(c, v)| (format!("cluster=\"{c}\",node=\"n1\""), *v))
            .collect(),
    );
    family(
        "mem_free_ratio",
        MEM_FREE_RATIOS
            .iter()
            .filter(|(c, _)| wanted(c))
            .map(|(c, v)| (format!("cluster=\"{c}\""), *v))
            .collect(),
    );
    out
}

/// A Prometheus server on 127.0.0.1 with a temporary data directory.
pub struct Prometheus {
    child: std::process::Child,
    pub port: u16,
    pub scheme: &'static str,
    /// The CA and client certificate that `/-/ready` is asked with, when serving TLS.
    tls: Option<ReadinessTls>,
    _dir: TempDir,
}

struct ReadinessTls {
    ca: PathBuf,
    client_cert: PathBuf,
    client_key: PathBuf,
    server_name: String,
}

impl Prometheus {
    /// Backfills `data` and starts Prometheus over it. `lookback` is PromQL's lookback delta: a
    /// series with no sample for that long leaves instant query results.
    pub async fn start(data: &OpenMetrics, lookback: &str) -> Prometheus {
        let dir = TempDir::new("prometheus");
        backfill(&dir, data);
        Self::launch(dir, "global:\n  scrape_interval: 1m\n", lookback, None).await
    }

    /// As [`Prometheus::start`], with `external_labels` in its global configuration: the labels a
    /// Thanos sidecar adds to every series it serves (a sidecar refuses a Prometheus without them),
    /// e.g. the `replica` of an HA pair.
    pub async fn start_labelled(
        data: &OpenMetrics,
        lookback: &str,
        external_labels: &[(&str, &str)],
    ) -> Prometheus {
        let dir = TempDir::new("prometheus");
        backfill(&dir, data);
        let mut config = "global:\n  scrape_interval: 1m\n  external_labels:\n".to_owned();
        for (name, value) in external_labels {
            let _ = writeln!(config, "    {name}: '{value}'");
        }
        Self::launch(dir, &config, lookback, None).await
    }

    /// As [`Prometheus::start`], serving TLS with `pki`'s server certificate and requiring a client
    /// certificate from its CA.
    pub async fn start_tls(data: &OpenMetrics, lookback: &str, pki: &TestPki) -> Prometheus {
        let dir = TempDir::new("prometheus");
        backfill(&dir, data);
        Self::launch(dir, "global:\n  scrape_interval: 1m\n", lookback, Some(pki)).await
    }

    /// Starts Prometheus with no data, scraping `target` every second: the test decides when a
    /// series appears, and when it stops (a series missing from a scrape is marked stale and leaves
    /// query results at once). Labels are kept as the target serves them.
    pub async fn start_scraping(target: &ScrapeTarget) -> Prometheus {
        let dir = TempDir::new("prometheus");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\nscrape_configs:\n  - job_name: fleet\n    \
             honor_labels: true\n    static_configs:\n      - targets: ['{}']\n",
            target.address
        );
        Self::launch(dir, &config, "5m", None).await
    }

    /// Starts Prometheus with no data on `config`, a whole `prometheus.yml` the test wrote (its own
    /// scrape configs, service discovery included).
    pub async fn start_with_config(config: &str) -> Prometheus {
        Self::launch(TempDir::new("prometheus"), config, "5m", None).await
    }

    /// The result of an instant query (`data.result`), or why it could not be had: an error is the
    /// caller's to retry or fail on, never an empty result.
    pub async fn query(&self, promql: &str) -> Result<Vec<Value>, String> {
        let url = format!(
            "{}/api/v1/query?{}",
            self.url(),
            form_urlencoded::Serializer::new(String::new())
                .append_pair("query", promql)
                .finish()
        );
        let answer = reqwest::get(&url).await.map_err(|e| format!("GET {url}: {e}"))?;
        let status = answer.status();
        let body: Value = answer
            .json()
            .await
            .map_err(|e| format!("GET {url}: {status}: {e}"))?;
        match body.pointer("/data/result").and_then(Value::as_array) {
            Some(result) if status.is_success() => Ok(result.clone()),
            _ => Err(format!("GET {url}: {status}: {body}")),
        }
    }

    /// The alerts its rules hold now, pending or firing (`/api/v1/alerts`): each alert's labels
    /// (`alertname` among them) and state, or why they could not be had (an error is the caller's to
    /// retry or fail on, never "no alerts").
    pub async fn alerts(&self) -> Result<Vec<(BTreeMap<String, String>, String)>, String> {
        let url = format!("{}/api/v1/alerts", self.url());
        let answer = reqwest::get(&url).await.map_err(|e| format!("GET {url}: {e}"))?;
        let status = answer.status();
        let body: Value = answer
            .json()
            .await
            .map_err(|e| format!("GET {url}: {status}: {e}"))?;
        let Some(alerts) = body.pointer("/data/alerts").and_then(Value::as_array) else {
            return Err(format!("GET {url}: {status}: {body}"));
        };
        if !status.is_success() {
            return Err(format!("GET {url}: {status}: {body}"));
        }
        alerts
            .iter()
            .map(|alert| {
                let labels = serde_json::from_value(alert["labels"].clone())
                    .map_err(|e| format!("GET {url}: labels of {alert}: {e}"))?;
                let state = alert["state"]
                    .as_str()
                    .ok_or_else(|| format!("GET {url}: no state in {alert}"))?;
                Ok((labels, state.to_owned()))
            })
            .collect()
    }

    async fn launch(dir: TempDir, config: &str, lookback: &str, tls: Option<&TestPki>) -> Prometheus {
        let config_path = dir.path().join("prometheus.yml");
        std::fs::write(&config_path, config).expect("writing prometheus.yml");
        let tsdb = dir.path().join("tsdb");
        let port = free_port();
        let log = std::fs::File::create(dir.path().join("prometheus.log")).expect("log file");
        let mut command = std::process::Command::new("prometheus");
        command
            .arg(format!("--config.file={}", config_path.display()))
            .arg(format!("--storage.tsdb.path={}", tsdb.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg(format!("--query.lookback-delta={lookback}"))
            .arg("--storage.tsdb.retention.time=10y")
            .stdout(Stdio::null())
            .stderr(log);
        let scheme = match tls {
            Some(pki) => {
                let path = dir.path().join("web.yml");
                std::fs::write(&path, pki.web_config()).expect("writing web.yml");
                command.arg(format!("--web.config.file={}", path.display()));
                "https"
            }
            None => "http",
        };
        let child = command.spawn().expect("starting prometheus");
        let mut prometheus = Prometheus {
            child,
            port,
            scheme,
            tls: tls.map(|pki| ReadinessTls {
                ca: pki.ca.clone(),
                client_cert: pki.client_cert.clone(),
                client_key: pki.client_key.clone(),
                server_name: pki.server_name.clone(),
            }),
            _dir: dir,
        };
        prometheus.wait_ready().await;
        prometheus
    }

    /// Waits for `/-/ready` to answer 200 (Prometheus answers 503 until its TSDB is open), over TLS
    /// with the client certificate when it serves TLS.
    async fn wait_ready(&mut self) {
        let (client, url) = self.readiness_client();
        let deadline = Instant::now() + CONVERGE;
        loop {
            let answer = client.get(&url).send().await;
            if answer.as_ref().is_ok_and(|r| r.status().is_success()) {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("prometheus exited ({status}):\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "prometheus did not become ready within {CONVERGE:?} (last answer: {answer:?}):\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    fn readiness_client(&self) -> (reqwest::Client, String) {
        let Some(tls) = &self.tls else {
            return (
                reqwest::Client::new(),
                format!("http://127.0.0.1:{}/-/ready", self.port),
            );
        };
        let read =
            |path: &Path| std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let ca = reqwest::Certificate::from_pem(&read(&tls.ca)).expect("the test CA");
        let mut identity = read(&tls.client_cert);
        identity.extend(read(&tls.client_key));
        let identity = reqwest::Identity::from_pem(&identity).expect("the client certificate");
        let address = SocketAddr::from(([127, 0, 0, 1], self.port));
        let client = reqwest::Client::builder()
            .tls_built_in_root_certs(false)
            .add_root_certificate(ca)
            .identity(identity)
            .resolve(&tls.server_name, address)
            .build()
            .expect("a TLS client");
        (
            client,
            format!("https://{}:{}/-/ready", tls.server_name, self.port),
        )
    }

    pub fn url(&self) -> String {
        format!("{}://127.0.0.1:{}", self.scheme, self.port)
    }

    /// The TSDB directory.
    pub fn tsdb(&self) -> PathBuf {
        self._dir.path().join("tsdb")
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("prometheus.log")).unwrap_or_default()
    }
}

/// Writes `data` as TSDB blocks into `dir/tsdb` with promtool.
fn backfill(dir: &TempDir, data: &OpenMetrics) {
    let input = dir.path().join("data.om");
    std::fs::write(&input, data.render()).expect("writing OpenMetrics input");
    let backfill = std::process::Command::new("promtool")
        .args(["tsdb", "create-blocks-from", "openmetrics"])
        .arg(&input)
        .arg(dir.path().join("tsdb"))
        .output()
        .expect("running promtool");
    assert!(
        backfill.status.success(),
        "promtool failed: {}{}",
        String::from_utf8_lossy(&backfill.stdout),
        String::from_utf8_lossy(&backfill.stderr)
    );
}

/// A scrape target for [`Prometheus::start_scraping`]: serves whatever text the test set last.
pub struct ScrapeTarget {
    pub address: SocketAddr,
    exposition: Arc<Mutex<String>>,
    scrapes: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl ScrapeTarget {
    pub async fn start(exposition: String) -> ScrapeTarget {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the scrape target");
        let address = listener.local_addr().expect("address");
        let exposition = Arc::new(Mutex::new(exposition));
        let scrapes = Arc::new(AtomicUsize::new(0));
        let (text, count) = (exposition.clone(), scrapes.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let (text, count) = (text.clone(), count.clone());
                tokio::spawn(async move {
                    // Prometheus sends a GET with no body: read up to the end of the head.
                    let mut head = Vec::new();
                    let mut buf = [0u8; 2048];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let body = text.lock().unwrap_or_else(|p| p.into_inner()).clone();
                    let response = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    if stream.write_all(response.as_bytes()).await.is_ok() {
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                    let _ = stream.shutdown().await;
                });
            }
        });
        ScrapeTarget {
            address,
            exposition,
            scrapes,
            task,
        }
    }

    /// What the next scrapes get.
    pub fn set(&self, exposition: String) {
        *self.exposition.lock().unwrap_or_else(|p| p.into_inner()) = exposition;
    }

    /// Scrapes answered so far.
    pub fn scrapes(&self) -> usize {
        self.scrapes.load(Ordering::SeqCst)
    }
}

impl Drop for ScrapeTarget {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// A throwaway CA with a server certificate for `server_name` and a client certificate (PEM files
/// in `dir`), made in-process so the tests need no `openssl` on the machine.
pub struct TestPki {
    pub server_name: String,
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

impl TestPki {
    pub fn create(dir: &Path, server_name: &str) -> TestPki {
        let ca = ClusterCa::new("ocm-score-test").expect("test CA");
        std::fs::write(dir.join("ca.crt"), ca.cert_pem()).expect("writing ca.crt");
        let server = ca
            .serving_cert_for(server_name, &[server_name])
            .expect("server certificate");
        let (server_cert, server_key) = server.write(dir, "server").expect("writing server certificate");
        let client = ca.client_cert("thanos-scorer", None).expect("client certificate");
        let (client_cert, client_key) = client.write(dir, "client").expect("writing client certificate");
        TestPki {
            server_name: server_name.to_owned(),
            ca: dir.join("ca.crt"),
            server_cert,
            server_key,
            client_cert,
            client_key,
        }
    }

    /// A Prometheus `--web.config.file` serving TLS and requiring a client certificate from our CA.
    pub fn web_config(&self) -> String {
        format!(
            "tls_server_config:\n  cert_file: {}\n  key_file: {}\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: {}\n",
            self.server_cert.display(),
            self.server_key.display(),
            self.ca.display()
        )
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How the fake query API answers.
#[derive(Clone, Debug)]
pub enum FakeMode {
    /// A vector with these (cluster, value) samples, stamped with the requested evaluation time. (In
    /// this and every mode answering a vector, a freshness query, `…(timestamp(…))`, is answered as
    /// data that is current: each cluster's newest sample at the evaluation time.)
    Vector(Vec<(String, f64)>),
    /// HTTP 500 with a plain-text body.
    ServerError,
    /// Waits this long before answering like `Vector`.
    Slow(Duration, Vec<(String, f64)>),
    /// HTTP 200 with a body that is not valid JSON.
    Malformed,
    /// A success answer cut off in the middle of the result.
    Truncated(Vec<(String, f64)>),
    /// Only these samples, with a warning that some stores did not answer (Thanos partial response).
    Partial(Vec<(String, f64)>),
}

/// The form fields of one request to the fake query API, in the order sent.
pub type Form = Vec<(String, String)>;

/// A tiny HTTP server standing in for Thanos Query.
pub struct FakeQueryApi {
    pub address: SocketAddr,
    mode: Arc<Mutex<FakeMode>>,
    requests: Arc<AtomicUsize>,
    authorizations: Arc<Mutex<Vec<String>>>,
    forms: Arc<Mutex<Vec<Form>>>,
    task: tokio::task::JoinHandle<()>,
}

impl FakeQueryApi {
    pub async fn start(mode: FakeMode) -> FakeQueryApi {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding the fake query API");
        let address = listener.local_addr().expect("address");
        let mode = Arc::new(Mutex::new(mode));
        let requests = Arc::new(AtomicUsize::new(0));
        let authorizations = Arc::new(Mutex::new(Vec::new()));
        let forms = Arc::new(Mutex::new(Vec::new()));
        let (m, r, a, f) = (
            mode.clone(),
            requests.clone(),
            authorizations.clone(),
            forms.clone(),
        );
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (m, r, a, f) = (m.clone(), r.clone(), a.clone(), f.clone());
                tokio::spawn(async move { serve_fake(stream, &m, &r, &a, &f).await });
            }
        });
        FakeQueryApi {
            address,
            mode,
            requests,
            authorizations,
            forms,
            task,
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn set(&self, mode: FakeMode) {
        *self.mode.lock().expect("mode lock") = mode;
    }

    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }

    /// The `Authorization` headers received, in order.
    pub fn authorizations(&self) -> Vec<String> {
        self.authorizations.lock().expect("auth lock").clone()
    }

    /// The decoded form bodies received, in order.
    pub fn forms(&self) -> Vec<Form> {
        self.forms.lock().expect("forms lock").clone()
    }
}

impl Drop for FakeQueryApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve_fake(
    mut stream: tokio::net::TcpStream,
    mode: &Mutex<FakeMode>,
    requests: &AtomicUsize,
    authorizations: &Mutex<Vec<String>>,
    forms: &Mutex<Vec<Form>>,
) {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    // Head, then a body of Content-Length bytes.
    let (head_end, length) = loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_string();
            let length = header(&head, "content-length")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if let Some(auth) = header(&head, "authorization") {
                authorizations.lock().expect("auth lock").push(auth);
            }
            break (end + 4, length);
        }
    };
    while data.len() < head_end + length {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    }
    requests.fetch_add(1, Ordering::SeqCst);
    let body = String::from_utf8_lossy(&data[head_end..]).to_string();
    forms.lock().expect("forms lock").push(
        form_urlencoded::parse(body.as_bytes())
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect(),
    );
    let time = form_value(&body, "time").unwrap_or_else(|| "0".into());
    let freshness = form_value(&body, "query").is_some_and(|q| q.contains("timestamp%28"));
    let mut current = mode.lock().expect("mode lock").clone();
    if freshness {
        let now = time.parse::<f64>().unwrap_or(0.0);
        let fresh = |samples: Vec<(String, f64)>| samples.into_iter().map(|(c, _)| (c, now)).collect();
        current = match current {
            FakeMode::Vector(s) => FakeMode::Vector(fresh(s)),
            FakeMode::Slow(delay, s) => FakeMode::Slow(delay, fresh(s)),
            FakeMode::Truncated(s) => FakeMode::Truncated(fresh(s)),
            FakeMode::Partial(s) => FakeMode::Partial(fresh(s)),
            other => other,
        };
    }
    let (status, text) = match current {
        FakeMode::Vector(samples) => (200, vector(&samples, &time, &[])),
        FakeMode::ServerError => (500, "internal server error\n".to_owned()),
        FakeMode::Slow(delay, samples) => {
            tokio::time::sleep(delay).await;
            (200, vector(&samples, &time, &[]))
        }
        FakeMode::Malformed => (200, "{\"status\":\"success\",\"data\":<html>".to_owned()),
        FakeMode::Truncated(samples) => {
            let full = vector(&samples, &time, &[]);
            (200, full[..full.len() / 2].to_owned())
        }
        FakeMode::Partial(samples) => (
            200,
            vector(
                &samples,
                &time,
                &["receive-eu-1: store unavailable, partial response"],
            ),
        ),
    };
    let reason = if status == 200 {
        "OK"
    } else {
        "Internal Server Error"
    };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}

fn header(head: &str, name: &str) -> Option<String> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.trim().to_owned())
}

fn form_value(body: &str, key: &str) -> Option<String> {
    body.split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v.to_owned())
}

fn vector(samples: &[(String, f64)], time: &str, warnings: &[&str]) -> String {
    let result: Vec<Value> = samples
        .iter()
        .map(|(cluster, v)| {
            json!({"metric": {"cluster": cluster}, "value": [time.parse::<f64>().unwrap_or(0.0), format!("{v}")]})
        })
        .collect();
    let mut answer = json!({"status": "success", "data": {"resultType": "vector", "result": result}});
    if !warnings.is_empty() {
        answer["warnings"] = json!(warnings);
    }
    answer.to_string()
}

/// The API server double as the hub, with the upstream OCM CRDs and the built-in kinds.
pub async fn start_hub(clusters: &[&str]) -> ApiServer {
    start_hub_with(clusters, false).await
}

/// As [`start_hub`], with RBAC deciding every request but the admin's when `rbac` is true.
pub async fn start_hub_with(clusters: &[&str], rbac: bool) -> ApiServer {
    let server = ApiServer::builder()
        .upstream_crds()
        .builtin_kinds()
        .rbac(rbac)
        .bookmark_interval(Duration::from_secs(1))
        .start()
        .await
        .expect("starting the API server double");
    // Where the leader election Lease lives.
    server
        .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ocm-score"}}))
        .expect("creating a namespace");
    for cluster in clusters {
        add_cluster(&server, cluster, &[]);
    }
    server
}

/// A ManagedCluster and its namespace.
pub fn add_cluster(server: &ApiServer, name: &str, labels: &[(&str, &str)]) {
    server
        .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
        .expect("creating a cluster namespace");
    let labels: serde_json::Map<String, Value> =
        labels.iter().map(|(k, v)| (k.to_string(), json!(v))).collect();
    server
        .create(json!({
            "apiVersion": "cluster.open-cluster-management.io/v1",
            "kind": "ManagedCluster",
            "metadata": {"name": name, "labels": labels},
            "spec": {"hubAcceptsClient": true},
        }))
        .expect("creating a ManagedCluster");
}

/// The status of `<cluster>/<name>` on the hub, if the object exists.
pub fn score_status(
    server: &ApiServer,
    cluster: &str,
    name: &str,
) -> Option<Option<AddOnPlacementScoreStatus>> {
    let object = server.object(&Gvr::of::<AddOnPlacementScore>(), cluster, name)?;
    let score: AddOnPlacementScore =
        serde_json::from_value(object).expect("a stored AddOnPlacementScore decodes");
    Some(score.status)
}

/// The scores of `<cluster>/<name>` by score name, if it has a status.
pub fn scores_of(server: &ApiServer, cluster: &str, name: &str) -> Option<Vec<(String, i32)>> {
    let status = score_status(server, cluster, name)??;
    let mut scores: Vec<(String, i32)> = status.scores.into_iter().map(|s| (s.name, s.value)).collect();
    scores.sort();
    Some(scores)
}

/// Polls `check` until it returns `Some`, or fails the test after `CONVERGE` with `what`.
pub async fn eventually<T>(what: &str, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + CONVERGE;
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `ocm-score-hub thanos-scorer` running as a process (the shared [`ModeProcess`]).
pub struct ScorerProcess {
    process: ModeProcess,
    _dir: TempDir,
}

impl std::ops::Deref for ScorerProcess {
    type Target = ModeProcess;
    fn deref(&self) -> &ModeProcess {
        &self.process
    }
}

impl std::ops::DerefMut for ScorerProcess {
    fn deref_mut(&mut self) -> &mut ModeProcess {
        &mut self.process
    }
}

impl ScorerProcess {
    /// Starts the scorer with `config` (YAML) against the hub `server` as `user`, plus extra flags.
    pub async fn start(server: &ApiServer, user: &str, config: &str, extra: &[&str]) -> ScorerProcess {
        let dir = TempDir::new("thanos-scorer");
        let identity = server.identity(user, &[]);
        let kubeconfig = dir.path().join("kubeconfig");
        server
            .write_kubeconfig(&identity, &kubeconfig)
            .expect("writing a kubeconfig");
        let config_path = dir.path().join("config.yaml");
        std::fs::write(&config_path, config).expect("writing the scorer config");
        let binary = ocm_score_control_plane::addon::workspace_binary("ocm-score-hub")
            .unwrap_or_else(|e| panic!("building ocm-score-hub: {e}"));
        let mut command = Command::new(binary);
        command
            .arg("thanos-scorer")
            .arg("--config")
            .arg(&config_path)
            .arg("--kubeconfig")
            .arg(&kubeconfig)
            .arg(format!("--leader-election-identity={user}"))
            .args(extra)
            .env("RUST_LOG", "info,ocm_score_hub=debug");
        ScorerProcess {
            process: ModeProcess::spawn("the scorer", command, |_| false),
            _dir: dir,
        }
    }

    pub async fn wait_ready(&mut self) {
        self.process.wait_ready(CONVERGE, String::new).await;
    }

    /// Sends SIGTERM and waits for the exit code.
    pub async fn terminate(self) -> Option<i32> {
        self.process.terminate().await
    }
}
