//! A real Thanos in front of real Prometheus servers, as processes on 127.0.0.1: a Thanos Querier
//! over three Thanos Sidecars. The querier's HTTP API may listen elsewhere
//! ([`ThanosFleet::start_on`]), for a scorer running as a pod to reach it. Two Prometheus servers hold the same clusters with different
//! `replica` external labels (an HA pair); a third holds the other clusters. `thanos` is built from
//! `tests/thanos/go.mod` (cached; `bash scripts/test.sh` builds it before the tests).

use super::{CONVERGE, FLEET, Prometheus, TempDir, fleet_data_of, free_port};
use serde_json::Value;
use std::{
    net::{IpAddr, Ipv4Addr, SocketAddr},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

/// Clusters the HA pair holds; the third Prometheus holds the rest of [`FLEET`].
pub const HA_CLUSTERS: &[&str] = &["a", "b", "c"];
/// The querier's replica label: series that differ only in it are one series when deduplicated.
pub const REPLICA_LABEL: &str = "replica";
/// Where everything listens unless asked otherwise.
const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// The `thanos` binary, built (or found in the cache) once per test process.
pub fn thanos_binary() -> PathBuf {
    static BINARY: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    BINARY
        .get_or_init(|| {
            let build = crate::thanos::ensure_built(&|line| eprintln!("{line}"))
                .unwrap_or_else(|e| panic!("Thanos could not be built: {e}"));
            build.bin()
        })
        .clone()
}

/// One `thanos` process (a sidecar or the querier), restartable with the same arguments and ports.
pub struct ThanosProcess {
    name: String,
    args: Vec<String>,
    log: PathBuf,
    http_host: IpAddr,
    http_port: u16,
    child: Option<Child>,
}

impl ThanosProcess {
    /// Starts `thanos <args>`, whose HTTP server (the readiness probe) listens on `http_host:http_port`.
    fn start(
        name: &str,
        args: Vec<String>,
        (http_host, http_port): (IpAddr, u16),
        dir: &Path,
    ) -> ThanosProcess {
        let mut process = ThanosProcess {
            name: name.to_owned(),
            args,
            log: dir.join(format!("{name}.log")),
            http_host,
            http_port,
            child: None,
        };
        process.spawn();
        process
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap_or_else(|e| panic!("opening {}: {e}", self.log.display()));
        let child = Command::new(thanos_binary())
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("starting thanos {}: {e}", self.name));
        self.child = Some(child);
    }

    /// Kills the process (as a crash or a lost node would end it) and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the process again with the same arguments (the same ports).
    pub async fn restart(&mut self) {
        self.stop();
        self.spawn();
        self.wait_ready().await;
    }

    /// Waits for `/-/ready` to answer 200.
    pub async fn wait_ready(&mut self) {
        let url = format!("http://{}:{}/-/ready", self.http_host, self.http_port);
        let deadline = Instant::now() + CONVERGE;
        loop {
            let answer = reqwest::get(&url).await;
            if answer.as_ref().is_ok_and(|r| r.status().is_success()) {
                return;
            }
            if let Some(Ok(Some(status))) = self.child.as_mut().map(Child::try_wait) {
                panic!("thanos {} exited ({status}):\n{}", self.name, self.log());
            }
            assert!(
                Instant::now() < deadline,
                "thanos {} did not become ready within {CONVERGE:?} ({answer:?}):\n{}",
                self.name,
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

impl Drop for ThanosProcess {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A Prometheus server and the Thanos Sidecar serving it over gRPC (Thanos's Store API).
pub struct Sidecar {
    pub prometheus: Prometheus,
    pub process: ThanosProcess,
    pub grpc_address: String,
}

impl Sidecar {
    async fn start(name: &str, prometheus: Prometheus, dir: &Path) -> Sidecar {
        let (grpc, http) = (free_port(), free_port());
        let grpc_address = format!("127.0.0.1:{grpc}");
        let args = vec![
            "sidecar".to_owned(),
            format!("--prometheus.url={}", prometheus.url()),
            format!("--tsdb.path={}", prometheus.tsdb().display()),
            format!("--grpc-address={grpc_address}"),
            format!("--http-address=127.0.0.1:{http}"),
            "--log.level=info".to_owned(),
        ];
        let mut process = ThanosProcess::start(name, args, (LOCALHOST, http), dir);
        process.wait_ready().await;
        Sidecar {
            prometheus,
            process,
            grpc_address,
        }
    }
}

/// Which sidecar of [`ThanosFleet`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Store {
    ReplicaA,
    ReplicaB,
    Other,
}

/// The querier, its sidecars and their Prometheus servers.
pub struct ThanosFleet {
    pub replica_a: Sidecar,
    pub replica_b: Sidecar,
    pub other: Sidecar,
    pub querier: ThanosProcess,
    query_host: IpAddr,
    query_port: u16,
    _dir: TempDir,
}

impl ThanosFleet {
    /// Starts everything over [`fleet_data_of`]`(t0, 600, ..)` (ten minutes of data either side of
    /// `t0`) and waits until the querier uses all three stores.
    pub async fn start(t0: i64) -> ThanosFleet {
        Self::start_on(t0, LOCALHOST).await
    }

    /// As [`ThanosFleet::start`], with the querier's HTTP API on `query_host` (a free port): the
    /// host's address on the nodes' bridge, say, where pods reach it. The sidecars, the Prometheus
    /// servers and the querier's gRPC stay on 127.0.0.1.
    pub async fn start_on(t0: i64, query_host: IpAddr) -> ThanosFleet {
        let dir = TempDir::new("thanos");
        let others: Vec<&str> = FLEET
            .iter()
            .copied()
            .filter(|c| !HA_CLUSTERS.contains(c))
            .collect();
        let ha = fleet_data_of(t0, 600, HA_CLUSTERS);
        let (prom_a, prom_b, prom_other) = (
            Prometheus::start_labelled(&ha, "5m", &[("monitor", "ha"), (REPLICA_LABEL, "A")]).await,
            Prometheus::start_labelled(&ha, "5m", &[("monitor", "ha"), (REPLICA_LABEL, "B")]).await,
            Prometheus::start_labelled(&fleet_data_of(t0, 600, &others), "5m", &[("monitor", "other")]).await,
        );
        let replica_a = Sidecar::start("sidecar-a", prom_a, dir.path()).await;
        let replica_b = Sidecar::start("sidecar-b", prom_b, dir.path()).await;
        let other = Sidecar::start("sidecar-other", prom_other, dir.path()).await;

        // Strict endpoints stay queried while they fail their health checks, so a store that is down
        // shows up as a partial response. A non-strict endpoint that fails its checks is dropped
        // from the queried set, and its series go missing without any warning.
        let endpoints: String = [&replica_a, &replica_b, &other]
            .iter()
            .map(|s| format!("  - address: {}\n    strict: true\n", s.grpc_address))
            .collect();
        let (http, grpc) = (free_port(), free_port());
        let args = vec![
            "query".to_owned(),
            format!("--http-address={}", SocketAddr::new(query_host, http)),
            format!("--grpc-address=127.0.0.1:{grpc}"),
            format!("--endpoint.sd-config=endpoints:\n{endpoints}"),
            format!("--query.replica-label={REPLICA_LABEL}"),
            "--log.level=info".to_owned(),
        ];
        let mut querier = ThanosProcess::start("querier", args, (query_host, http), dir.path());
        querier.wait_ready().await;
        let fleet = ThanosFleet {
            replica_a,
            replica_b,
            other,
            querier,
            query_host,
            query_port: http,
            _dir: dir,
        };
        fleet.wait_stores_healthy(3).await;
        fleet
    }

    /// The querier's HTTP API, for the scorer's `query.url`.
    pub fn url(&self) -> String {
        format!("http://{}", SocketAddr::new(self.query_host, self.query_port))
    }

    pub fn sidecar(&mut self, store: Store) -> &mut Sidecar {
        match store {
            Store::ReplicaA => &mut self.replica_a,
            Store::ReplicaB => &mut self.replica_b,
            Store::Other => &mut self.other,
        }
    }

    /// Waits until the querier reports `n` sidecars whose last health check succeeded.
    pub async fn wait_stores_healthy(&self, n: usize) {
        let url = format!("{}/api/v1/stores", self.url());
        let deadline = Instant::now() + CONVERGE;
        loop {
            let stores = match reqwest::get(&url).await {
                Ok(response) => response.json::<Value>().await.ok(),
                Err(_) => None,
            };
            let healthy = stores
                .as_ref()
                .and_then(|s| s["data"]["sidecar"].as_array())
                .map_or(0, |list| list.iter().filter(|s| s["lastError"].is_null()).count());
            if healthy == n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "the querier did not report {n} healthy sidecars within {CONVERGE:?}: {stores:?}\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// Every Thanos log, for failure messages.
    pub fn logs(&self) -> String {
        [
            ("querier", &self.querier),
            ("sidecar-a", &self.replica_a.process),
            ("sidecar-b", &self.replica_b.process),
            ("sidecar-other", &self.other.process),
        ]
        .iter()
        .map(|(name, p)| format!("--- {name}\n{}", p.log()))
        .collect()
    }
}
