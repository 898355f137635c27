//! The run loop's writes over five simulated minutes, under Tokio's paused clock: the real loop,
//! publisher and decision rules against an in-process hub, with scripted figures. Refresh spreads and
//! retry backoffs are fixed at their middle so the sequence is exact.

use super::*;
use crate::cli::{Cli, Command};
use crate::server::Probes;
use clap::Parser;
use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode};
use ocm_score_shell::sync::lock;
use ocm_score_tests::support::TempDir;
use serde_json::{Value, json};
use std::sync::Mutex;

/// Wall time at the start of every scenario.
const BASE: i64 = 1_700_000_000;
const CLUSTER: &str = "c1";
const CAPACITY_MILLICORES: i128 = 100_000;

/// What the hub saw, in seconds since the start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    /// A status write that succeeded: when, the `validUntil` it carried, the score.
    Wrote { at: u64, valid_until: u64, score: i64 },
    /// A status write the hub refused (programmed failure).
    Refused { at: u64 },
}

fn wrote(at: u64, valid_until: u64, score: i64) -> Event {
    Event::Wrote {
        at,
        valid_until,
        score,
    }
}

#[derive(Default)]
struct HubState {
    object: Option<Value>,
    resource_version: u64,
    fail_status_writes: usize,
    events: Vec<Event>,
}

/// An in-process hub holding one AddOnPlacementScore: GET, POST (create) and PUT of `/status`, as the
/// publisher uses them. No sockets, so nothing waits on real time.
#[derive(Clone)]
struct Hub {
    state: Arc<Mutex<HubState>>,
    start: Instant,
}

impl Hub {
    fn lock(&self) -> std::sync::MutexGuard<'_, HubState> {
        lock(&self.state)
    }

    fn client(&self) -> kube::Client {
        let hub = self.clone();
        let service = tower::service_fn(move |request: Request<kube::client::Body>| {
            let hub = hub.clone();
            async move { Ok::<_, std::convert::Infallible>(hub.handle(request).await) }
        });
        kube::Client::new(service, "default")
    }

    async fn handle(&self, request: Request<kube::client::Body>) -> Response<Full<Bytes>> {
        let (parts, body) = request.into_parts();
        let body = body.collect().await.map(|b| b.to_bytes()).unwrap_or_default();
        let at = self.start.elapsed().as_secs();
        let path = parts.uri.path().to_owned();
        let mut state = self.lock();
        match parts.method {
            Method::GET => match &state.object {
                Some(object) => reply(StatusCode::OK, object.clone()),
                None => failure(StatusCode::NOT_FOUND, "NotFound"),
            },
            Method::POST => {
                let mut object: Value = serde_json::from_slice(&body).unwrap_or_default();
                state.resource_version += 1;
                object["metadata"]["resourceVersion"] = json!(state.resource_version.to_string());
                state.object = Some(object.clone());
                reply(StatusCode::CREATED, object)
            }
            Method::PUT if path.ends_with("/status") => {
                if state.fail_status_writes > 0 {
                    state.fail_status_writes -= 1;
                    state.events.push(Event::Refused { at });
                    return failure(StatusCode::INTERNAL_SERVER_ERROR, "InternalError");
                }
                let mut object: Value = serde_json::from_slice(&body).unwrap_or_default();
                state.resource_version += 1;
                object["metadata"]["resourceVersion"] = json!(state.resource_version.to_string());
                let valid_until = object["status"]["validUntil"]
                    .as_str()
                    .and_then(|t| t.parse::<Timestamp>().ok())
                    .map_or(0, |t| (t.as_second() - BASE) as u64);
                let score = object["status"]["scores"][0]["value"]
                    .as_i64()
                    .unwrap_or(i64::MIN);
                state.events.push(wrote(at, valid_until, score));
                state.object = Some(object.clone());
                reply(StatusCode::OK, object)
            }
            _ => failure(StatusCode::METHOD_NOT_ALLOWED, "MethodNotAllowed"),
        }
    }
}

fn reply(code: StatusCode, body: Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = code;
    response
}

fn failure(code: StatusCode, reason: &str) -> Response<Full<Bytes>> {
    reply(
        code,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason,
               "message": reason, "code": code.as_u16()}),
    )
}

/// Free cpu of a cluster with 100 cores, set by the scenario.
struct Script {
    free_millicores: Arc<Mutex<i128>>,
    cpu: usize,
}

impl ReadSources for Script {
    async fn read(&mut self) -> Result<Snapshot, (&'static str, SourceError)> {
        let free = *lock(&self.free_millicores);
        let mut view = ResourceView::default();
        view.figures.resize(self.cpu + 1, None);
        view.figures[self.cpu] = Some(crate::accounting::Figures {
            cluster_free: free,
            cluster_capacity: CAPACITY_MILLICORES,
            node_free: free,
            node_capacity: CAPACITY_MILLICORES,
        });
        view.eligible_nodes = 1;
        Ok(Snapshot {
            view,
            detail: "scripted".into(),
            counted_pods: None,
            fits: Vec::new(),
            shapes: None,
        })
    }

    fn synced(&self) -> bool {
        true
    }
}

/// What a scenario does while the loop runs.
enum Step {
    /// At this second, set free cpu (in cores) and report a change, as a watch event would.
    Load { at: u64, free_cores: i128 },
    /// At this second, make the hub refuse the next status write.
    FailNextWrite { at: u64 },
}

/// Runs the agent loop for five simulated minutes (up to and including the refresh at 300s) with
/// `flags` on top of the defaults, the score `cpuClusterAvailable` over 0..100 cores, 50 cores free
/// to begin with, and `steps`. Returns what the hub saw.
async fn five_minutes(flags: &[&str], steps: Vec<Step>) -> Vec<Event> {
    let dir = TempDir::new("run-timing");
    std::fs::write(dir.path().join("kubeconfig"), "apiVersion: v1\nkind: Config\n").expect("write");
    let hub_dir = dir.path().to_str().expect("utf-8 path").to_owned();
    let mut argv = vec![
        "ocm-score-agent",
        "run",
        "--hub-kubeconfig",
        &hub_dir,
        "--cluster-name",
        CLUSTER,
        "--source=host",
        "--scores=cpuClusterAvailable",
        "--normalize=cpuClusterAvailable=absolute:0:100",
    ];
    argv.extend_from_slice(flags);
    let Command::Run(args) = Cli::try_parse_from(argv).expect("flags parse").command else {
        unreachable!("run was given")
    };
    let cfg = RunConfig::from_args(args).expect("valid configuration");

    let start = Instant::now();
    let hub = Hub {
        state: Arc::default(),
        start,
    };
    let free_millicores = Arc::new(Mutex::new(50_000));
    let cpu = cfg
        .scoring
        .resources
        .index_of(crate::accounting::resources::CPU)
        .expect("cpu is built in");
    let metrics = Arc::new(Metrics::default());
    let heartbeat = Arc::new(Heartbeat::default());
    let probes = Arc::new(Probes {
        metrics: metrics.clone(),
        heartbeat: heartbeat.clone(),
        max_silence: cfg.refresh_interval * 3,
        ready: AtomicBool::new(false),
        not_ready_because: std::sync::Mutex::new(None),
    });
    let publisher = publisher(&cfg, HubConnection::pinned(hub.client()));
    let mut agent = Agent {
        cfg,
        metrics,
        probes,
        sources: Script {
            free_millicores: free_millicores.clone(),
            cpu,
        },
        publisher,
        clock: Clock::FollowsTokio {
            wall: Timestamp::from_second(BASE).expect("valid"),
            at: start,
        },
        // The middle of every spread: refreshes exactly one interval apart, backoffs as computed.
        spread: |base, _| base,
        failed_writes: 0,
        failing_since: None,
        clock_off: false,
        replicas: None,
    };

    let changed = Notify::new();
    let stop = CancellationToken::new();
    let scenario = async {
        for step in steps {
            match step {
                Step::Load { at, free_cores } => {
                    tokio::time::sleep_until(start + Duration::from_secs(at)).await;
                    *lock(&free_millicores) = free_cores * 1000;
                    changed.notify_one();
                }
                Step::FailNextWrite { at } => {
                    tokio::time::sleep_until(start + Duration::from_secs(at)).await;
                    hub.lock().fail_status_writes += 1;
                }
            }
        }
        tokio::time::sleep_until(start + Duration::from_millis(300_500)).await;
        stop.cancel();
    };
    tokio::join!(agent.drive(&changed, &stop, &heartbeat), scenario);
    hub.lock().events.clone()
}

/// By default validUntil is 97s ahead: one refresh 10 % late (66s), a slow read (10s) and write (20s),
/// and the second whole-second rounding may take.
#[tokio::test(start_paused = true)]
async fn by_default_every_refresh_renews_valid_until() {
    assert_eq!(
        five_minutes(&[], vec![]).await,
        vec![
            wrote(0, 97, 0),
            wrote(60, 157, 0),
            wrote(120, 217, 0),
            wrote(180, 277, 0),
            wrote(240, 337, 0),
            wrote(300, 397, 0),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn renewing_every_second_refresh_halves_the_writes() {
    // validUntil 163s ahead: two late refreshes (132s) plus the same 31s.
    assert_eq!(
        five_minutes(&["--renew-every=2"], vec![]).await,
        vec![wrote(0, 163, 0), wrote(120, 283, 0), wrote(240, 403, 0)]
    );
}

/// A change below the step (50 → 51 cores, +2) is computed 5s later (the debounce) and written
/// nowhere; a change by the step (→ 80 cores, 60) is written at once, and the refreshes keep their
/// cadence.
fn load_changes() -> Vec<Step> {
    vec![
        Step::Load {
            at: 30,
            free_cores: 51,
        },
        Step::Load {
            at: 90,
            free_cores: 80,
        },
    ]
}

#[tokio::test(start_paused = true)]
async fn by_default_a_load_change_adds_one_write() {
    assert_eq!(
        five_minutes(&[], load_changes()).await,
        vec![
            wrote(0, 97, 0),
            wrote(60, 157, 2),
            wrote(95, 192, 60),
            wrote(120, 217, 60),
            wrote(180, 277, 60),
            wrote(240, 337, 60),
            wrote(300, 397, 60),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn renewing_every_second_refresh_a_load_change_restarts_the_renewal_count() {
    assert_eq!(
        five_minutes(&["--renew-every=2"], load_changes()).await,
        vec![
            wrote(0, 163, 0),
            wrote(95, 258, 60),
            wrote(180, 343, 60),
            wrote(300, 463, 60),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn by_default_a_refused_write_is_retried_after_the_backoff() {
    // The refresh at 120s is refused; the retry 2s later renews, the next refresh renews again.
    assert_eq!(
        five_minutes(&[], vec![Step::FailNextWrite { at: 119 }]).await,
        vec![
            wrote(0, 97, 0),
            wrote(60, 157, 0),
            Event::Refused { at: 120 },
            wrote(122, 219, 0),
            wrote(180, 277, 0),
            wrote(240, 337, 0),
            wrote(300, 397, 0),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn renewing_every_second_refresh_a_refused_write_is_retried_after_the_backoff() {
    assert_eq!(
        five_minutes(&["--renew-every=2"], vec![Step::FailNextWrite { at: 119 }]).await,
        vec![
            wrote(0, 163, 0),
            Event::Refused { at: 120 },
            wrote(122, 285, 0),
            wrote(240, 403, 0),
        ]
    );
}

#[test]
fn a_retry_doubles_and_never_waits_longer_than_one_refresh() {
    let latest: fn(Duration, f64) -> Duration = |d, spread| d.mul_f64(1.0 + spread);
    let middle: fn(Duration, f64) -> Duration = |d, _| d;
    let refresh = Duration::from_secs(10);
    let delays: Vec<u64> = (1..=6)
        .map(|n| retry_delay(n, Duration::from_secs(60), middle).as_secs())
        .collect();
    assert_eq!(delays, [2, 4, 8, 16, 30, 30]);
    // Spread late, a capped backoff would come 12 s after the failure; it comes at the refresh.
    assert_eq!(retry_delay(5, refresh, latest), refresh);
    assert_eq!(retry_delay(1, refresh, latest), Duration::from_millis(2400));
}
