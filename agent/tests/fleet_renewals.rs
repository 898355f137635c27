//! A fleet's renewals on Tokio's paused clock, through `run::run_simulated` (the run loop, publisher,
//! renewal timer, jitter and retry backoff as shipped): 600 agents, started over one refresh
//! interval, against an in-process hub holding one AddOnPlacementScore per cluster. The writes
//! that land per 5 s window stay within twice their mean in steady state and after the hub has
//! been down for 20 s and every agent comes back at once (issue 45: a restarted hub API server
//! must not be met by a synchronized burst).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Method, Request, Response, StatusCode};
use ocm_score_agent::accounting::{Figures, ResourceView};
use ocm_score_agent::config::RunConfig;
use ocm_score_agent::run::{SimulatedFigures, run_simulated};
use ocm_score_shell::CancellationToken;
use serde_json::{Value, json};
use tokio::sync::Notify;
use tokio::time::Instant;

const AGENTS: usize = 600;
const WINDOW: u64 = 5;

#[derive(Default)]
struct HubState {
    objects: BTreeMap<String, Value>,
    resource_version: u64,
    /// Every request fails while down (an API server restarting).
    down: bool,
    /// Seconds since the start of each status write that landed.
    writes: Vec<u64>,
}

#[derive(Clone)]
struct Hub {
    state: Arc<Mutex<HubState>>,
    start: Instant,
}

impl Hub {
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
        let path = parts.uri.path().to_owned();
        // .../namespaces/<cluster>/addonplacementscores[/<name>[/status]]
        let namespace = path
            .split("/namespaces/")
            .nth(1)
            .and_then(|rest| rest.split('/').next())
            .unwrap_or_default()
            .to_owned();
        let mut state = self.state.lock().expect("hub state");
        if state.down {
            return failure(StatusCode::SERVICE_UNAVAILABLE, "ServiceUnavailable");
        }
        match parts.method {
            Method::GET => match state.objects.get(&namespace) {
                Some(object) => reply(StatusCode::OK, object.clone()),
                None => failure(StatusCode::NOT_FOUND, "NotFound"),
            },
            Method::POST | Method::PUT => {
                let mut object: Value = serde_json::from_slice(&body).unwrap_or_default();
                state.resource_version += 1;
                object["metadata"]["resourceVersion"] = json!(state.resource_version.to_string());
                if parts.method == Method::PUT {
                    state.writes.push(self.start.elapsed().as_secs());
                }
                state.objects.insert(namespace, object.clone());
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

/// Half of every resource free.
fn figures(cfg: &RunConfig) -> SimulatedFigures {
    let resources = cfg.scoring.resources.clone();
    Arc::new(move || {
        let figures = (0..resources.len())
            .map(|_| {
                Some(Figures {
                    cluster_free: 50_000,
                    cluster_capacity: 100_000,
                    node_free: 50_000,
                    node_capacity: 100_000,
                })
            })
            .collect();
        ResourceView {
            figures,
            eligible_nodes: 1,
        }
    })
}

/// Writes per window over `[from, to)` seconds.
fn per_window(writes: &[u64], from: u64, to: u64) -> Vec<usize> {
    (from..to)
        .step_by(WINDOW as usize)
        .map(|w| writes.iter().filter(|t| (w..w + WINDOW).contains(t)).count())
        .collect()
}

/// Runs the fleet with the hub down over `outage` (seconds), until `end`; returns the writes' times.
async fn fleet(outage: std::ops::Range<u64>, end: u64) -> Vec<u64> {
    let hub = Hub {
        state: Arc::default(),
        start: Instant::now(),
    };
    let client = hub.client();
    let shutdown = CancellationToken::new();
    // The flag must name an existing directory; the shared client is what the agents use.
    let kubeconfig_dir = env!("CARGO_TARGET_TMPDIR");
    std::fs::write(
        std::path::Path::new(kubeconfig_dir).join("kubeconfig"),
        "apiVersion: v1\nkind: Config\n",
    )
    .expect("a placeholder kubeconfig");
    let mut tasks = Vec::new();
    for i in 0..AGENTS {
        let cfg = RunConfig::from_argv([
            "ocm-score-agent".to_owned(),
            "run".to_owned(),
            format!("--hub-kubeconfig={kubeconfig_dir}"),
            format!("--cluster-name=c{i:04}"),
        ])
        .expect("the default command line");
        let start_at = hub.start + cfg.refresh_interval.mul_f64(i as f64 / AGENTS as f64);
        let (client, shutdown) = (client.clone(), shutdown.clone());
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start_at).await;
            let figures = figures(&cfg);
            run_simulated(cfg, client, figures, Arc::new(Notify::new()), shutdown).await;
        }));
    }
    tokio::time::sleep_until(hub.start + Duration::from_secs(outage.start)).await;
    hub.state.lock().expect("hub state").down = true;
    tokio::time::sleep_until(hub.start + Duration::from_secs(outage.end)).await;
    hub.state.lock().expect("hub state").down = false;
    tokio::time::sleep_until(hub.start + Duration::from_secs(end)).await;
    shutdown.cancel();
    for task in tasks {
        task.await.expect("agent task");
    }
    hub.state.lock().expect("hub state").writes.clone()
}

#[tokio::test(start_paused = true)]
async fn renewals_stay_spread_after_the_hub_comes_back() {
    // Down from 300 s to 320 s: a restarted API server's 20 s.
    let writes = fleet(300..320, 480).await;
    let steady = per_window(&writes, 180, 300);
    let mean = steady.iter().sum::<usize>() as f64 / steady.len() as f64;
    // Every agent renews once a refresh (60 s ± 10 %).
    assert!(
        (AGENTS as f64 * WINDOW as f64 / 66.0..=AGENTS as f64 * WINDOW as f64 / 54.0).contains(&mean),
        "steady writes per {WINDOW} s window: {steady:?}"
    );
    let steady_max = *steady.iter().max().expect("windows");
    assert!(
        steady_max as f64 <= 2.0 * mean,
        "steady: max {steady_max} over mean {mean:.1}: {steady:?}"
    );
    let after = per_window(&writes, 320, 420);
    eprintln!("writes per {WINDOW} s: steady {steady:?} (mean {mean:.1}); after the hub came back {after:?}");
    let after_max = *after.iter().max().expect("windows");
    // Retries that still renew in time land at most at the agents' own rate on top of their
    // refreshes (twice the mean); three standard deviations of a count of that size allow for the
    // random spread. Retrying on the backoff alone landed 3.2 to 3.6 times the mean in the first window.
    let allowed = 2.0 * mean + 3.0 * (2.0 * mean).sqrt();
    assert!(
        after_max as f64 <= allowed,
        "after the hub came back: max {after_max} per {WINDOW} s, more than {allowed:.0} (twice the steady mean {mean:.1}): {after:?}"
    );
}
