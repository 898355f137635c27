//! `ocm-score-agent run`: keep the hub's AddOnPlacementScore current.
//!
//! One loop owns the sources and the publisher. It computes scores on a jittered refresh tick, and
//! shortly after node or pod changes (debounced), then lets the publisher decide whether a write is
//! worth it. A failing source stops renewal (scores expire) and is reported in the condition; a
//! failing hub is retried with backoff while the loop keeps running.
//!
//! Renewal: the refresh ticks keep their own cadence (computations caused by changes or retries in
//! between do not move them), so every computation knows when the next refresh comes. It renews
//! `validUntil` when that refresh, reading and writing as slowly as the timeouts allow, might land
//! after it. With the derived validity (see `ocm_score_agent_contract::derived_validity`) that is every
//! `--renew-every`-th refresh, and never a computation in between.

use crate::accounting::resources::{CPU, MEMORY};
use crate::accounting::{ResourceView, ShapeFits};
use crate::config::RunConfig;
use crate::hub::HubConnection;
use crate::hub_clock;
use crate::lease::LeaseRenewer;
use crate::metrics::{Metrics, WriteResult};
use crate::publish::{Outcome, Publisher, WritePolicy};
use crate::scores;
use crate::server::{Probes, serve};
use crate::shapes::{self, ShapeSource, ShapesCondition, ShapesStatus};
use crate::sources::cluster::{self, Accounts, ClusterSource};
use crate::sources::host::{HostSource, MIN_SAMPLE_INTERVAL};
use crate::sources::kubelet::{KubeletSource, NodeRequests};
use crate::sources::{Reading, SourceError};
use crate::unschedulable::ReplicaWatch;
use futures::FutureExt;
use jiff::Timestamp;
use ocm_score_api::duration::format as fmt_duration;
use ocm_score_shell::CancellationToken;
use ocm_score_shell::jitter::spread;
use ocm_score_shell::probes::Heartbeat;
use ocm_score_shell::task::AbortOnDrop;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use tokio::sync::Notify;
use tokio::time::Instant;

#[cfg(test)]
#[path = "run_timing_tests.rs"]
mod timing_tests;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("listening on {addr}: {source}")]
    Bind {
        addr: std::net::SocketAddr,
        source: std::io::Error,
    },
    #[error(
        "connecting to the managed cluster: {0} (use --managed-kubeconfig, or --lease=false with --source host)"
    )]
    ManagedCluster(String),
    #[error(transparent)]
    Source(#[from] SourceError),
}

/// How often sources are re-read while they fail, to notice recovery.
const FAILING_RECHECK: Duration = Duration::from_secs(5);

/// Longest a hub write failure delays the next attempt.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

struct Agent<S> {
    cfg: RunConfig,
    metrics: Arc<Metrics>,
    probes: Arc<Probes>,
    sources: S,
    publisher: Publisher,
    clock: Clock,
    /// Randomly spreads an interval by a fraction ([`spread`]; fixed in tests).
    spread: fn(Duration, f64) -> Duration,
    failed_writes: u32,
    /// Since when the sources have been failing (the agent's start counts as failing until the first
    /// successful read).
    failing_since: Option<Instant>,
    /// Whether the hub's clock was last seen further off than [`hub_clock::WARN_AT`] (warned once).
    clock_off: bool,
    /// Replicas of WorkloadShapes that kube-scheduler left Unschedulable, judged against each
    /// computation's fits (with the cluster source and shapes).
    replicas: Option<ReplicaWatch>,
}

/// Wall-clock time for `validUntil` and the condition.
#[derive(Clone, Copy, Debug)]
enum Clock {
    System,
    /// Wall time that advances with Tokio's clock, so a paused clock drives it in tests.
    #[cfg_attr(not(test), allow(dead_code))]
    FollowsTokio {
        wall: Timestamp,
        at: Instant,
    },
}

impl Clock {
    fn now(self) -> Timestamp {
        match self {
            Clock::System => Timestamp::now(),
            Clock::FollowsTokio { wall, at } => wall.checked_add(at.elapsed()).unwrap_or(Timestamp::MAX),
        }
    }

    /// The wall time `instant` stands for.
    fn at(self, instant: Instant) -> Timestamp {
        let now = Instant::now();
        let wall = self.now();
        if instant >= now {
            wall.checked_add(instant - now).unwrap_or(Timestamp::MAX)
        } else {
            wall.checked_sub(now - instant).unwrap_or(Timestamp::MIN)
        }
    }
}

/// One read of all enabled sources, combined.
struct Snapshot {
    view: ResourceView,
    /// What the figures are, for the condition and logs.
    detail: String,
    /// Pods counted by the cluster source.
    counted_pods: Option<usize>,
    /// The replicas of each WorkloadShape that fit (cluster source only).
    fits: Vec<ShapeFits>,
    /// What to say about the WorkloadShapes.
    shapes: Option<ShapesCondition>,
}

/// Where a computation's figures come from: the configured sources, or a script in tests.
trait ReadSources {
    /// Reads every enabled source and combines them, or says which one failed.
    async fn read(&mut self) -> Result<Snapshot, (&'static str, SourceError)>;
    /// Whether everything the sources watch has been listed (readiness).
    fn synced(&self) -> bool;
}

/// The sources the configuration enables.
struct ConfiguredSources {
    resources: crate::accounting::ResourceSet,
    cluster: Option<ClusterSource>,
    kubelet: Option<KubeletSource>,
    host: Option<HostSource>,
    shapes: Option<Arc<ShapesStatus>>,
}

/// Runs until `shutdown` is cancelled (the process shell's token: SIGTERM or Ctrl-C).
pub async fn run(cfg: RunConfig, shutdown: CancellationToken) -> Result<(), RunError> {
    let metrics = Arc::new(Metrics::default());
    let heartbeat = Arc::new(Heartbeat::default());
    heartbeat.beat();
    let probes = Arc::new(Probes {
        metrics: metrics.clone(),
        heartbeat: heartbeat.clone(),
        max_silence: cfg.refresh_interval * 3 + cfg.scoring.hub_timeout * 2 + cfg.scoring.api_timeout * 2,
        ready: AtomicBool::new(false),
        not_ready_because: std::sync::Mutex::new(None),
    });

    let listener = tokio::net::TcpListener::bind(cfg.metrics_bind_address)
        .await
        .map_err(|source| RunError::Bind {
            addr: cfg.metrics_bind_address,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| RunError::Bind {
        addr: cfg.metrics_bind_address,
        source,
    })?;
    tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
    let server = AbortOnDrop(tokio::spawn(serve(listener, probes.clone())));

    let sources = cfg.scoring.sources;
    let managed = if sources.needs_managed_cluster() || cfg.lease.is_some() {
        Some(
            cluster::connect(cfg.scoring.managed_kubeconfig.as_deref())
                .await
                .map_err(RunError::ManagedCluster)?,
        )
    } else {
        None
    };
    let changed = Arc::new(Notify::new());
    // The shapes first, so the watches list nodes and pods once, already counting them.
    let shapes_status = Arc::new(ShapesStatus::default());
    let initial_shapes = match &cfg.scoring.shapes {
        ShapeSource::None => None,
        ShapeSource::File {
            shapes, unreadable, ..
        } => Some(shapes_status.compile(shapes, unreadable)),
        ShapeSource::Hub => shapes::list_hub(&cfg.hub.kubeconfig, cfg.scoring.hub_timeout)
            .await
            .map(|shapes| shapes_status.compile(&shapes, &[])),
    };
    let cluster = match (&managed, sources.cluster) {
        (Some(client), true) => Some(ClusterSource::start(
            client.clone(),
            Accounts::new(
                cfg.scoring.resources.clone(),
                initial_shapes.unwrap_or_else(|| crate::accounting::compile_shapes(&[]).0),
                cfg.scoring.fits,
            ),
            cfg.scoring.api_timeout,
            changed.clone(),
            metrics.clone(),
        )),
        _ => None,
    };
    let _shapes_watch = match (&cluster, &cfg.scoring.shapes) {
        (Some(cluster), ShapeSource::Hub) => Some(AbortOnDrop(tokio::spawn(shapes::watch_hub(
            cfg.hub.kubeconfig.clone(),
            shapes_status.clone(),
            cluster.fits_handle(),
            changed.clone(),
            shapes::HubWatch {
                recheck: cfg.shapes_recheck,
                timeout: cfg.scoring.hub_timeout,
            },
        )))),
        _ => None,
    };
    let shapes_status = (cfg.scoring.shapes != ShapeSource::None).then_some(shapes_status);
    let (replicas, _replica_watch) = match (&managed, &cluster, &shapes_status) {
        (Some(client), Some(_), Some(_)) => {
            let (watch, task) = ReplicaWatch::start(client.clone());
            (Some(watch), Some(AbortOnDrop(task)))
        }
        _ => (None, None),
    };
    let kubelet = match (&managed, sources.kubelet) {
        (Some(client), true) => Some(KubeletSource::new(
            client.clone(),
            cfg.scoring.kubelet_concurrency,
            cfg.scoring.api_timeout,
            metrics.clone(),
        )),
        _ => None,
    };
    let host = if sources.host {
        Some(HostSource::new()?)
    } else {
        None
    };

    let _lease = match (&managed, &cfg.lease) {
        (Some(client), Some(lease)) => {
            let renewer = LeaseRenewer::new(
                client.clone(),
                lease.namespace.clone(),
                lease.name.clone(),
                cfg.scoring.api_timeout,
            );
            tracing::info!(lease = %lease.name, namespace = %lease.namespace, "renewing the add-on lease");
            Some(AbortOnDrop(tokio::spawn(renewer.run(
                lease.interval,
                heartbeat.clone(),
                probes.max_silence,
                metrics.clone(),
            ))))
        }
        _ => None,
    };

    let publisher = publisher(&cfg, HubConnection::new(cfg.hub.kubeconfig.clone()));
    tracing::info!(
        cluster = %cfg.hub.cluster_name,
        object = %cfg.scoring.score_object_name,
        sources = ?sources.names(),
        refresh = %fmt_duration(cfg.refresh_interval),
        validity = %fmt_duration(cfg.scoring.validity),
        renew_every = cfg.renew_every,
        "agent started"
    );

    let mut agent = Agent {
        sources: ConfiguredSources {
            resources: cfg.scoring.resources.clone(),
            cluster,
            kubelet,
            host,
            shapes: shapes_status,
        },
        cfg,
        metrics,
        probes,
        publisher,
        clock: Clock::System,
        spread,
        failed_writes: 0,
        failing_since: Some(Instant::now()),
        clock_off: false,
        replicas,
    };

    // First computation: as soon as the watches have listed everything (or the host has two CPU
    // samples), but no later than one refresh interval.
    let first = async {
        if let Some(cluster) = &agent.sources.cluster {
            cluster.wait_synced().await;
        }
        if let Some(shapes) = &agent.sources.shapes {
            shapes.wait_settled().await;
        }
        if agent.sources.host.is_some() {
            tokio::time::sleep(MIN_SAMPLE_INTERVAL).await;
        }
    };
    tokio::select! {
        _ = shutdown.cancelled() => return Ok(()),
        _ = tokio::time::timeout(agent.cfg.refresh_interval, first) => {}
    }

    // The initial lists notified `changed`; the first computation below reads everything they brought,
    // so drop that notification rather than let it open a debounce window for a needless second one.
    let _ = changed.notified().now_or_never();

    agent.drive(&changed, &shutdown, &heartbeat).await;
    tracing::info!("shutting down");
    drop(agent);
    drop(server);
    Ok(())
}

/// The figures of a simulated cluster, read at every computation.
pub type SimulatedFigures = Arc<dyn Fn() -> ResourceView + Send + Sync>;

/// `run`'s loop, publisher and timing (refresh jitter, renewal, retry backoff) with the figures
/// given by `figures` instead of read from a managed cluster, writing through `hub` (one client
/// may serve many agents): how one process simulates a fleet of agents on a real hub
/// (`tests/benches/control_plane_fleet.rs`). `changed` is what a watch event would notify. No
/// probe server, no Lease. Runs until `shutdown` is cancelled.
pub async fn run_simulated(
    cfg: RunConfig,
    hub: kube::Client,
    figures: SimulatedFigures,
    changed: Arc<Notify>,
    shutdown: CancellationToken,
) {
    let metrics = Arc::new(Metrics::default());
    let heartbeat = Arc::new(Heartbeat::default());
    let probes = Arc::new(Probes {
        metrics: metrics.clone(),
        heartbeat: heartbeat.clone(),
        max_silence: cfg.refresh_interval * 3,
        ready: AtomicBool::new(false),
        not_ready_because: std::sync::Mutex::new(None),
    });
    let publisher = publisher(&cfg, HubConnection::pinned(hub));
    let mut agent = Agent {
        sources: Simulated(figures),
        cfg,
        metrics,
        probes,
        publisher,
        clock: Clock::System,
        spread,
        failed_writes: 0,
        failing_since: None,
        clock_off: false,
        // Simulated clusters have no pods to judge.
        replicas: None,
    };
    agent.drive(&changed, &shutdown, &heartbeat).await;
}

/// Sources of [`run_simulated`]: the caller's figures.
struct Simulated(SimulatedFigures);

impl ReadSources for Simulated {
    async fn read(&mut self) -> Result<Snapshot, (&'static str, SourceError)> {
        Ok(Snapshot {
            view: (self.0)(),
            detail: "simulated".into(),
            counted_pods: None,
            fits: Vec::new(),
            shapes: None,
        })
    }

    fn synced(&self) -> bool {
        true
    }
}

/// The publisher of `run`'s score object, writing through `hub`.
fn publisher(cfg: &RunConfig, hub: HubConnection) -> Publisher {
    Publisher::new(
        hub,
        cfg.hub.cluster_name.clone(),
        cfg.scoring.score_object_name.clone(),
        WritePolicy {
            validity: cfg.scoring.validity,
            step: i32::from(cfg.score_step),
            min_write_interval: cfg.min_write_interval,
        },
        cfg.scoring.hub_timeout,
    )
    .owned_by(cfg.score_owner.clone())
}

impl<S: ReadSources> Agent<S> {
    /// Refresh ticks, debounced changes and retries, until `shutdown` is cancelled.
    async fn drive(&mut self, changed: &Notify, shutdown: &CancellationToken, heartbeat: &Heartbeat) {
        let mut next_tick = Instant::now();
        let mut debounce_until: Option<Instant> = None;
        let mut retry_at: Option<Instant> = None;
        loop {
            heartbeat.beat();
            let wake = [Some(next_tick), debounce_until, retry_at]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(next_tick);
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = changed.notified() => {
                    // Trailing-edge debounce: the first change starts the window, later ones ride along.
                    debounce_until.get_or_insert_with(|| Instant::now() + self.cfg.debounce);
                    continue;
                }
                _ = tokio::time::sleep_until(wake) => {}
            }
            // Whatever woke us, this computation covers pending changes and retries. Only a refresh
            // tick sets the next one, a (jittered) interval on: the cadence, and so the renewal
            // schedule, does not move with changes in between.
            let woke = Instant::now();
            if woke >= next_tick {
                next_tick = woke + (self.spread)(self.cfg.refresh_interval, self.cfg.jitter);
            }
            debounce_until = None;
            heartbeat.beat();
            tokio::select! {
                _ = shutdown.cancelled() => break,
                retry = self.cycle(next_tick) => {
                    retry_at = retry;
                    self.watch_hub_clock();
                }
            }
        }
    }

    /// Computes and (maybe) publishes once; `next_tick` is when the next refresh comes. Returns when
    /// to try again if sooner than the next tick.
    async fn cycle(&mut self, next_tick: Instant) -> Option<Instant> {
        let read_at = Instant::now();
        let read = self.sources.read().await;
        // After the read (which may take up to --api-timeout): validUntil and the renewal decision
        // count from when the figures were current, not from when the cycle began.
        let now = self.clock.now();
        match read {
            Ok(Snapshot {
                view,
                detail,
                counted_pods,
                fits,
                shapes,
            }) => {
                self.failing_since = None;
                let resources = &self.cfg.scoring.resources;
                let mut scores = scores::compute(&self.cfg.scoring.scores, &view, resources);
                scores.extend(shapes::fits_scores(&fits));
                self.metrics
                    .computed(&view, resources, &scores, counted_pods, now.as_second());
                self.metrics.set_fits(&fits);
                if let Some(replicas) = &self.replicas {
                    replicas.judge(&fits, read_at, &self.metrics);
                }
                // The next refresh has read the sources within --api-timeout of its tick and written
                // within --hub-timeout after that.
                let renew_by = self
                    .clock
                    .at(next_tick)
                    .checked_add(self.cfg.scoring.api_timeout + self.cfg.scoring.hub_timeout)
                    .unwrap_or(Timestamp::MAX);
                let result = self
                    .publisher
                    .publish(&scores, shapes.as_ref(), &detail, now, renew_by)
                    .await;
                match result {
                    Ok(Outcome::Written(reason)) => {
                        self.hub_ok(WriteResult::Written);
                        let summary: Vec<String> =
                            scores.iter().map(|s| format!("{}={}", s.name, s.value)).collect();
                        tracing::info!(reason = ?reason, scores = %summary.join(","), %detail, "scores published");
                        if let Some(valid_until) = self.publisher.last().and_then(|p| p.valid_until) {
                            self.metrics.set_valid_until(valid_until.as_second());
                        }
                        None
                    }
                    Ok(Outcome::Skipped | Outcome::FailureReported) => {
                        self.hub_ok(WriteResult::Skipped);
                        tracing::debug!(%detail, "scores unchanged; nothing written");
                        None
                    }
                    Ok(Outcome::Deferred(at)) => {
                        self.hub_ok(WriteResult::Skipped);
                        let wait = at.duration_since(now).unsigned_abs();
                        tracing::debug!(
                            in_secs = wait.as_secs(),
                            "scores moved; writing after the minimum interval"
                        );
                        Some(Instant::now() + wait)
                    }
                    Err(error) => Some(self.hub_failed(&error)),
                }
            }
            Err((source, error)) => {
                self.metrics.source_failure(source);
                let since = *self.failing_since.get_or_insert_with(Instant::now);
                // Nothing is renewed while a source fails. A blip (a watch reconnecting, a re-list
                // after 410 Gone) is not worth two writes (failure, then recovery) that would make
                // OCM reschedule: the condition reports a failure once it lasts a refresh interval.
                let retry = Some(Instant::now() + FAILING_RECHECK.min(self.cfg.refresh_interval));
                if since.elapsed() < self.cfg.refresh_interval {
                    tracing::info!(source, %error, "source not current; not renewing scores for now");
                    return retry;
                }
                tracing::warn!(source, %error, "source failed; scores are not renewed and will expire");
                match self
                    .publisher
                    .report_failure(&format!("source {source}: {error}"), now)
                    .await
                {
                    Ok(_) => {
                        self.failed_writes = 0;
                        retry
                    }
                    Err(error) => Some(self.hub_failed(&error)),
                }
            }
        }
    }

    /// Exports the hub's clock offset and warns, once each time it goes past [`hub_clock::WARN_AT`]:
    /// `validUntil` is right whatever the offset, but a cluster clock that far off is wrong for
    /// everything else (certificates, Leases, logs).
    fn watch_hub_clock(&mut self) {
        let Some(offset) = self.publisher.hub_clock().offset() else {
            return;
        };
        let seconds = offset.as_secs_f64();
        self.metrics.set_hub_clock_offset(seconds);
        let off = offset.abs() >= hub_clock::WARN_AT;
        if off && !self.clock_off {
            let (way, by) = if seconds > 0.0 {
                ("behind", seconds)
            } else {
                ("ahead of", -seconds)
            };
            tracing::warn!(
                offset_seconds = format!("{seconds:.1}"),
                "this cluster's clock is {by:.1} s {way} the hub's; validUntil is stamped on the hub's clock, \
                 but the cluster's clock needs fixing (NTP)"
            );
        } else if !off && self.clock_off {
            tracing::info!(
                offset_seconds = format!("{seconds:.1}"),
                "this cluster's clock is back in step with the hub's"
            );
        }
        self.clock_off = off;
    }

    fn hub_ok(&mut self, result: WriteResult) {
        self.metrics.write(result);
        self.failed_writes = 0;
        if self.sources.synced() {
            self.probes.set_ready();
        }
    }

    fn hub_failed(&mut self, error: &crate::publish::PublishError) -> Instant {
        self.metrics.write(WriteResult::Failed);
        self.failed_writes = self.failed_writes.saturating_add(1);
        if self.failed_writes >= UNREADY_AFTER_FAILED_WRITES {
            self.probes.set_not_ready(format!(
                "the last {} writes to the hub failed, the last with: {error}",
                self.failed_writes
            ));
        }
        let delay = retry_delay(self.failed_writes, self.cfg.refresh_interval, self.spread);
        tracing::warn!(%error, retry_in_ms = delay.as_millis() as u64, "hub write failed");
        Instant::now() + delay
    }
}

/// Hub writes that fail in a row before the agent reports itself not ready (about 14 s of retries
/// at the shortest backoff): one failed write is a blip, three are a hub the agent cannot reach.
const UNREADY_AFTER_FAILED_WRITES: u32 = 3;

/// How long after the `failures`-th hub write failure in a row to try again: doubling from 2 s up to
/// [`MAX_RETRY_DELAY`], spread ±20 % so that a fleet's agents do not retry in step, and never later
/// than one refresh interval, so an agent is back within one interval of the hub's return.
fn retry_delay(failures: u32, refresh: Duration, spread: fn(Duration, f64) -> Duration) -> Duration {
    let backoff = Duration::from_secs(1u64 << failures.min(5))
        .min(MAX_RETRY_DELAY)
        .min(refresh);
    spread(backoff, 0.2).min(refresh)
}

impl ReadSources for ConfiguredSources {
    async fn read(&mut self) -> Result<Snapshot, (&'static str, SourceError)> {
        let resources = &self.resources;
        let mut readings: Vec<Reading> = Vec::new();
        let mut counted_pods = None;
        let mut fits = Vec::new();
        if let Some(cluster) = &self.cluster {
            let (reading, counts) = cluster.read().await.map_err(|e| ("cluster", e))?;
            readings.push(reading);
            fits = counts;
            counted_pods = Some(cluster.accounts().ledger.counted_pods());
        }
        if let (Some(kubelet), Some(cluster)) = (&self.kubelet, &self.cluster) {
            let nodes = node_requests(&cluster.accounts().ledger);
            readings.push(kubelet.read(nodes, resources).await.map_err(|e| ("kubelet", e))?);
        }
        if let Some(host) = &mut self.host {
            readings.push(host.read(resources).map_err(|e| ("host", e))?);
        }
        let (view, detail) = Reading::combine(&readings);
        Ok(Snapshot {
            view,
            detail,
            counted_pods,
            fits,
            shapes: self.shapes.as_ref().and_then(|s| s.condition()),
        })
    }

    fn synced(&self) -> bool {
        self.cluster.as_ref().is_none_or(ClusterSource::is_synced)
    }
}

/// cpu and memory of every eligible node, copied out of the ledger.
pub(crate) fn node_requests(ledger: &crate::accounting::Ledger) -> Vec<NodeRequests> {
    let resources = ledger.resources();
    let (Some(cpu), Some(memory)) = (resources.index_of(CPU), resources.index_of(MEMORY)) else {
        return Vec::new();
    };
    ledger
        .eligible_nodes()
        .map(|n| NodeRequests {
            name: n.name.to_owned(),
            allocatable_cpu: n.allocatable[cpu],
            allocatable_memory: n.allocatable[memory],
            requested_cpu: n.requested[cpu],
            requested_memory: n.requested[memory],
        })
        .collect()
}
