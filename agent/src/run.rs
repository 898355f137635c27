//! `ocm-score-agent run`: keep the hub's AddOnPlacementScore current.
//!
//! One loop owns the sources and the publisher. It computes scores on a jittered refresh tick, and
//! shortly after node or pod changes (debounced), then lets the publisher decide whether a write is
//! worth it. A failing source stops renewal (scores expire) and is reported in the condition; a
//! failing hub is retried with backoff while the loop keeps running.

use crate::accounting::ResourceView;
use crate::accounting::resources::{CPU, MEMORY};
use crate::config::{RunConfig, fmt_duration};
use crate::hub::HubConnection;
use crate::jitter::spread;
use crate::lease::{Heartbeat, LeaseRenewer};
use crate::metrics::{Metrics, WriteResult};
use crate::publish::{Outcome, Publisher, WritePolicy};
use crate::scores;
use crate::server::{Probes, serve};
use crate::sources::cluster::{self, ClusterSource};
use crate::sources::host::{HostSource, MIN_SAMPLE_INTERVAL};
use crate::sources::kubelet::{KubeletSource, NodeRequests};
use crate::sources::{Reading, SourceError};
use futures::FutureExt;
use jiff::Timestamp;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use tokio::sync::{Notify, watch};
use tokio::time::Instant;

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

struct Agent {
    cfg: RunConfig,
    metrics: Arc<Metrics>,
    probes: Arc<Probes>,
    cluster: Option<ClusterSource>,
    kubelet: Option<KubeletSource>,
    host: Option<HostSource>,
    publisher: Publisher,
    failed_writes: u32,
    /// Since when the sources have been failing (the agent's start counts as failing until the first
    /// successful read).
    failing_since: Option<Instant>,
}

/// Runs until `shutdown` turns true.
pub async fn run(cfg: RunConfig, mut shutdown: watch::Receiver<bool>) -> Result<(), RunError> {
    let metrics = Arc::new(Metrics::default());
    let heartbeat = Arc::new(Heartbeat::default());
    heartbeat.beat(Timestamp::now());
    let probes = Arc::new(Probes {
        metrics: metrics.clone(),
        heartbeat: heartbeat.clone(),
        max_silence: cfg.refresh_interval * 3 + cfg.scoring.hub_timeout * 2 + cfg.scoring.api_timeout * 2,
        ready: AtomicBool::new(false),
    });

    let listener = tokio::net::TcpListener::bind(cfg.metrics_addr)
        .await
        .map_err(|source| RunError::Bind {
            addr: cfg.metrics_addr,
            source,
        })?;
    let addr = listener.local_addr().map_err(|source| RunError::Bind {
        addr: cfg.metrics_addr,
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
    let cluster = match (&managed, sources.cluster) {
        (Some(client), true) => Some(ClusterSource::start(
            client.clone(),
            cfg.scoring.resources.clone(),
            cfg.scoring.api_timeout,
            changed.clone(),
            metrics.clone(),
        )),
        _ => None,
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

    let publisher = Publisher::new(
        HubConnection::new(cfg.hub.kubeconfig.clone()),
        cfg.hub.cluster_name.clone(),
        cfg.scoring.score_object_name.clone(),
        WritePolicy {
            validity: cfg.scoring.validity,
            renew_margin: cfg.renew_margin,
            step: i32::from(cfg.score_step),
            min_write_interval: cfg.min_write_interval,
        },
        cfg.scoring.hub_timeout,
    );
    tracing::info!(
        cluster = %cfg.hub.cluster_name,
        object = %cfg.scoring.score_object_name,
        sources = ?sources.names(),
        refresh = %fmt_duration(cfg.refresh_interval),
        validity = %fmt_duration(cfg.scoring.validity),
        "agent started"
    );

    let mut agent = Agent {
        cfg,
        metrics,
        probes,
        cluster,
        kubelet,
        host,
        publisher,
        failed_writes: 0,
        failing_since: Some(Instant::now()),
    };

    // First computation: as soon as the watches have listed everything (or the host has two CPU
    // samples), but no later than one refresh interval.
    let first = async {
        if let Some(cluster) = &agent.cluster {
            cluster.wait_synced().await;
        }
        if agent.host.is_some() {
            tokio::time::sleep(MIN_SAMPLE_INTERVAL).await;
        }
    };
    tokio::select! {
        _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
        _ = tokio::time::timeout(agent.cfg.refresh_interval, first) => {}
    }

    // The initial lists notified `changed`; the first computation below reads everything they brought,
    // so drop that notification rather than let it open a debounce window for a needless second one.
    let _ = changed.notified().now_or_never();

    let mut next_tick = Instant::now();
    let mut debounce_until: Option<Instant> = None;
    let mut retry_at: Option<Instant> = None;
    loop {
        heartbeat.beat(Timestamp::now());
        let wake = [Some(next_tick), debounce_until, retry_at]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(next_tick);
        tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => break,
            _ = changed.notified() => {
                // Trailing-edge debounce: the first change starts the window, later ones ride along.
                debounce_until.get_or_insert_with(|| Instant::now() + agent.cfg.debounce);
                continue;
            }
            _ = tokio::time::sleep_until(wake) => {}
        }
        // Whatever woke us, this computation covers pending changes, retries and the tick: the next
        // refresh is one (jittered) interval after it.
        next_tick = Instant::now() + spread(agent.cfg.refresh_interval, agent.cfg.jitter);
        debounce_until = None;
        heartbeat.beat(Timestamp::now());
        tokio::select! {
            _ = shutdown.wait_for(|stop| *stop) => break,
            retry = agent.cycle() => retry_at = retry,
        }
    }
    tracing::info!("shutting down");
    drop(agent);
    drop(server);
    Ok(())
}

impl Agent {
    /// Computes and (maybe) publishes once. Returns when to try again if sooner than the next tick.
    async fn cycle(&mut self) -> Option<Instant> {
        let read = self.read_sources().await;
        // After the read (which may take up to --api-timeout): validUntil and the renewal decision
        // count from when the figures were current, not from when the cycle began.
        let now = Timestamp::now();
        match read {
            Ok((view, detail, counted_pods)) => {
                self.failing_since = None;
                let resources = &self.cfg.scoring.resources;
                let scores = scores::compute(&self.cfg.scoring.scores, &view, resources);
                self.metrics
                    .computed(&view, resources, &scores, counted_pods, now.as_second());
                let result = self.publisher.publish(&scores, &detail, now).await;
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

    fn hub_ok(&mut self, result: WriteResult) {
        self.metrics.write(result);
        self.failed_writes = 0;
        if self.cluster.as_ref().is_none_or(ClusterSource::is_synced) {
            self.probes.set_ready();
        }
    }

    fn hub_failed(&mut self, error: &crate::publish::PublishError) -> Instant {
        self.metrics.write(WriteResult::Failed);
        self.failed_writes = self.failed_writes.saturating_add(1);
        let backoff = Duration::from_secs(1u64 << self.failed_writes.min(5))
            .min(MAX_RETRY_DELAY)
            .min(self.cfg.refresh_interval);
        let delay = spread(backoff, 0.2);
        tracing::warn!(%error, retry_in_ms = delay.as_millis() as u64, "hub write failed");
        Instant::now() + delay
    }

    /// Reads every enabled source and combines them, or says which one failed.
    async fn read_sources(
        &mut self,
    ) -> Result<(ResourceView, String, Option<usize>), (&'static str, SourceError)> {
        let resources = &self.cfg.scoring.resources;
        let mut readings: Vec<Reading> = Vec::new();
        let mut counted_pods = None;
        if let Some(cluster) = &self.cluster {
            readings.push(cluster.read().await.map_err(|e| ("cluster", e))?);
            counted_pods = Some(cluster.ledger().counted_pods());
        }
        if let (Some(kubelet), Some(cluster)) = (&self.kubelet, &self.cluster) {
            let nodes = node_requests(&cluster.ledger());
            readings.push(kubelet.read(nodes, resources).await.map_err(|e| ("kubelet", e))?);
        }
        if let Some(host) = &mut self.host {
            readings.push(host.read(resources).map_err(|e| ("host", e))?);
        }
        let (view, detail) = Reading::combine(&readings);
        Ok((view, detail, counted_pods))
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

/// Aborts a spawned task when dropped, so shutdown leaves nothing running.
struct AbortOnDrop<T>(tokio::task::JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}
