//! The `thanos-scorer` process: configuration, hub caches, leader election, probes and the round loop.

use super::{
    config::{Config, ThanosScorerArgs},
    health::Health,
    leader::LeaderElector,
    metrics::Metrics,
    scorer::{RecentWrites, RoundPlan, Scorer, count_expired, current_scores},
    stop_requested,
    writer::ScoreWriter,
};
use futures::{Stream, StreamExt};
use kube::{
    Api, Client,
    config::{KubeConfigOptions, Kubeconfig},
    runtime::{WatchStreamExt, reflector, watcher},
};
use scheduler_core::api::{AddOnPlacementScore, ManagedCluster};
use std::{process::ExitCode, sync::Arc, time::Duration};
use tokio::{net::TcpListener, sync::watch, time::MissedTickBehavior};

/// Exit code for configuration errors (as for a bad command line).
pub const EXIT_CONFIG: u8 = 2;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("binding {address} for /metrics, /healthz and /readyz: {source}")]
    Bind {
        address: std::net::SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("reading the hub kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        #[source]
        source: Box<kube::config::KubeconfigError>,
    },
    #[error("connecting to the hub: {0}")]
    Client(#[source] Box<kube::Error>),
    #[error("the hub cache of {0} stopped before it synced")]
    CacheGone(&'static str),
}

/// Runs the scorer until SIGTERM or Ctrl-C. Exit code 2 for a bad configuration (the message names
/// the field), 1 when the process cannot start, 0 after a clean shutdown.
pub async fn run(args: ThanosScorerArgs) -> ExitCode {
    let config = match Config::load(&args) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("error: invalid configuration: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let metrics = Arc::new(Metrics::new());
    let scorer = match Scorer::new(config, metrics.clone()) {
        Ok(scorer) => scorer,
        Err(e) => {
            eprintln!("error: invalid configuration: {e}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let (stop, stopped) = watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutting down");
        stop.send_replace(true);
    });
    match run_until_stopped(scorer, metrics, stopped).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "thanos-scorer cannot run");
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The scorer's life after configuration: everything stops when `stopped` turns true.
pub async fn run_until_stopped(
    scorer: Scorer,
    metrics: Arc<Metrics>,
    stopped: watch::Receiver<bool>,
) -> Result<(), RunError> {
    let config = scorer.config().clone();
    let listener = TcpListener::bind(config.metrics_bind_address)
        .await
        .map_err(|source| RunError::Bind {
            address: config.metrics_bind_address,
            source,
        })?;
    let query_budget = config.query.timeout * (config.query.retries + 1) * (config.scores.len() as u32);
    let health = Arc::new(Health::new(
        metrics.clone(),
        (config.interval * 3 + query_budget).max(Duration::from_secs(300)),
    ));
    tracing::info!(
        address = %listener.local_addr().map(|a| a.to_string()).unwrap_or_default(),
        endpoint = scorer.client().endpoint(),
        scores = config.scores.len(),
        mapping = %config.cluster_mapping,
        placement_score = %config.placement_score_name,
        "thanos-scorer starting"
    );
    let server = tokio::spawn(crate::serve::serve(listener, health.clone(), stopped.clone()));

    let client = hub_client(&config).await?;
    let (clusters, clusters_writer) = reflector::store::<ManagedCluster>();
    let (scores, scores_writer) = reflector::store::<AddOnPlacementScore>();
    let by_name =
        watcher::Config::default().fields(&format!("metadata.name={}", config.placement_score_name));
    tokio::spawn(drive(
        "ManagedCluster",
        reflector(
            clusters_writer,
            watcher(
                Api::<ManagedCluster>::all(client.clone()),
                watcher::Config::default(),
            )
            .default_backoff(),
        ),
    ));
    tokio::spawn(drive(
        "AddOnPlacementScore",
        reflector(
            scores_writer,
            watcher(Api::<AddOnPlacementScore>::all(client.clone()), by_name).default_backoff(),
        ),
    ));

    let (leading_tx, leading) = watch::channel(config.leader_election.is_none());
    let elector = config.leader_election.clone().map(|le| {
        let namespace = le
            .namespace
            .clone()
            .unwrap_or_else(|| client.default_namespace().to_owned());
        tokio::spawn(LeaderElector::new(client.clone(), namespace, le).run(leading_tx, stopped.clone()))
    });

    let mut stop = stopped.clone();
    tokio::select! {
        () = stop_requested(&mut stop) => return finish(elector, server).await,
        synced = async { (clusters.wait_until_ready().await, scores.wait_until_ready().await) } => {
            if synced.0.is_err() { return Err(RunError::CacheGone("ManagedClusters")); }
            if synced.1.is_err() { return Err(RunError::CacheGone("AddOnPlacementScores")); }
        }
    }
    health.set_ready();
    tracing::info!(
        clusters = clusters.len(),
        objects = scores.len(),
        "hub caches synced"
    );

    let writer = ScoreWriter::new(
        client,
        config.placement_score_name.clone(),
        config.write_concurrency,
    );
    let mut recent = RecentWrites::default();
    let mut ticker = tokio::time::interval(config.interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = stop_requested(&mut stop) => break,
            _ = ticker.tick() => {}
        }
        health.beat();
        let is_leader = *leading.borrow();
        metrics.set_leader(is_leader);
        let now = jiff::Timestamp::now();
        let cached = current_scores(&scores.state(), &config.placement_score_name);
        let mut current = cached.clone();
        recent.overlay(&mut current);
        metrics.set_clusters_stale(count_expired(&current, now));
        if !is_leader {
            metrics.round("not_leader");
            continue;
        }
        let answers = tokio::select! {
            () = stop_requested(&mut stop) => break,
            answers = scorer.query_all(now) => answers,
        };
        match scorer.plan(answers, &clusters.state(), &current, now) {
            RoundPlan::QueryFailed { failed } => {
                metrics.round("query_failed");
                let scores: Vec<&str> = failed.iter().map(|(s, _)| s.as_str()).collect();
                tracing::warn!(failed = ?scores, "not every score could be queried; writing nothing this round");
            }
            RoundPlan::Ready { fleet, writes } => {
                let planned = writes.len();
                let summary = writer.write_all(writes, &leading, &metrics).await;
                let written = summary.written.len();
                recent.record(&cached, summary.written);
                metrics.set_clusters_scored(fleet.clusters.len());
                metrics.set_last_complete_round(now);
                metrics.round(if summary.failed == 0 && summary.abandoned == 0 {
                    "complete"
                } else {
                    "write_failed"
                });
                let skipped: u64 = fleet.skipped.values().sum();
                tracing::info!(
                    clusters_scored = fleet.clusters.len(),
                    series_skipped = skipped,
                    writes_planned = planned,
                    written,
                    write_failures = summary.failed,
                    "round complete"
                );
            }
        }
    }
    finish(elector, server).await
}

async fn finish(
    elector: Option<tokio::task::JoinHandle<()>>,
    server: tokio::task::JoinHandle<()>,
) -> Result<(), RunError> {
    // The elector releases the Lease on its way out; give it a few seconds.
    if let Some(elector) = elector
        && tokio::time::timeout(Duration::from_secs(5), elector)
            .await
            .is_err()
    {
        tracing::warn!("leader election did not stop within 5s");
    }
    let _ = tokio::time::timeout(Duration::from_secs(1), server).await;
    Ok(())
}

async fn hub_client(config: &Config) -> Result<Client, RunError> {
    let kube_config = match &config.kubeconfig {
        Some(path) => {
            let kubeconfig = Kubeconfig::read_from(path).map_err(|e| RunError::Kubeconfig {
                path: path.display().to_string(),
                source: Box::new(e),
            })?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .map_err(|e| RunError::Kubeconfig {
                    path: path.display().to_string(),
                    source: Box::new(e),
                })?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| RunError::Client(Box::new(kube::Error::InferConfig(e))))?,
    };
    Client::try_from(kube_config).map_err(|e| RunError::Client(Box::new(e)))
}

/// Keeps a reflector's watch running; the watcher retries with backoff on its own.
async fn drive<K>(kind: &'static str, stream: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>>) {
    stream
        .for_each(|event| async move {
            if let Err(e) = event {
                tracing::warn!(kind, error = %e, "watching the hub failed, retrying");
            }
        })
        .await;
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM; stopping on Ctrl-C only");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
