//! The `thanos-scorer` mode: configuration, hub caches and the round loop, in the process shell
//! (`ocm_score_shell`: shutdown token, probe server, leader elector).

use super::{
    config::{Config, ThanosScorerArgs},
    health::Health,
    metrics::Metrics,
    scorer::{PartialAnswer, RecentWrites, RoundPlan, Scorer, count_expired, current_scores},
    writer::ScoreWriter,
};
use futures::{Stream, StreamExt};
use kube::{
    Api,
    runtime::{reflector, watcher},
};
use ocm_score_api::{AddOnPlacementScore, ManagedCluster};
use ocm_score_shell::{
    CancellationToken,
    leader::{LeaderElector, Leadership},
    probes::{BindError, ProbeServer},
    watch::WatchRetryExt,
};
use std::{process::ExitCode, sync::Arc, time::Duration};
use tokio::{sync::watch, time::MissedTickBehavior};

/// Exit code for configuration errors (as for a bad command line).
pub const EXIT_CONFIG: u8 = 2;

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Bind(#[from] BindError),
    #[error("connecting to the hub: {0}")]
    Client(#[from] ocm_score_shell::client::ClientError),
    #[error("the hub cache of {0} stopped before it synced")]
    CacheGone(&'static str),
}

/// Runs the scorer until `shutdown` (SIGTERM or Ctrl-C). Exit code 2 for a bad configuration (the
/// message names the field), 1 when the process cannot start, 0 after a clean shutdown.
pub async fn run(args: ThanosScorerArgs, shutdown: CancellationToken) -> ExitCode {
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
    match run_until_stopped(scorer, metrics, shutdown).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "thanos-scorer cannot run");
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The scorer's life after configuration: everything stops when `shutdown` is cancelled.
pub async fn run_until_stopped(
    scorer: Scorer,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    let config = scorer.config().clone();
    let queries = u32::try_from(scorer.query_count()).unwrap_or(u32::MAX);
    let query_budget = config
        .query
        .timeout
        .saturating_mul(config.query.retries + 1)
        .saturating_mul(queries);
    let health = Arc::new(Health::new(
        metrics.clone(),
        (config.interval * 3 + query_budget).max(Duration::from_secs(300)),
    ));
    let server = ProbeServer::start(config.metrics_bind_address, health.clone(), shutdown.clone()).await?;
    tracing::info!(
        endpoint = scorer.client().endpoint(),
        scores = config.scores.len(),
        mapping = %config.cluster_mapping,
        placement_score = %config.placement_score_name,
        "thanos-scorer starting"
    );

    let client = ocm_score_shell::client::client(config.kubeconfig.as_deref(), "--kubeconfig").await?;
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
            .watch_backoff(),
        ),
    ));
    tokio::spawn(drive(
        "AddOnPlacementScore",
        reflector(
            scores_writer,
            watcher(Api::<AddOnPlacementScore>::all(client.clone()), by_name).watch_backoff(),
        ),
    ));

    // Without leader election this replica always writes. With it, a replica that loses the Lease
    // steps down (stops writing) and competes again.
    let leadership = config
        .leader_election
        .as_ref()
        .map(|le| LeaderElector::new(client.clone(), le.config(&client)).spawn());
    let leading = leadership
        .as_ref()
        .map_or_else(|| watch::channel(true).1, Leadership::watch);

    tokio::select! {
        () = shutdown.cancelled() => return finish(leadership, server).await,
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
    let mut was_partial = false;
    let mut ticker = tokio::time::interval(config.interval);
    ticker.set_missed_tick_behavior(MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => break,
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
            // A standby publishes nothing by design; what it saw as leader no longer holds.
            health.set_not_publishing(None);
            metrics.set_partial_response(false);
            was_partial = false;
            continue;
        }
        let answers = tokio::select! {
            () = shutdown.cancelled() => break,
            answers = scorer.query_all(now) => answers,
        };
        let plan = scorer.plan(answers, &clusters.state(), &current, now);
        let partial_now = match &plan {
            RoundPlan::PartialResponse { partial } => Some(partial.as_slice()),
            RoundPlan::Ready { partial, .. } if !partial.is_empty() => Some(partial.as_slice()),
            _ => None,
        };
        metrics.set_partial_response(partial_now.is_some());
        if partial_now.is_none() && was_partial {
            tracing::info!("every store answered again");
        }
        was_partial = partial_now.is_some();
        match plan {
            RoundPlan::QueryFailed { failed } => {
                metrics.round("query_failed");
                health.set_not_publishing(None);
                let scores: Vec<&str> = failed.iter().map(|(s, _)| s.as_str()).collect();
                tracing::warn!(failed = ?scores, "not every score could be queried; writing nothing this round");
            }
            RoundPlan::PartialResponse { partial } => {
                metrics.round("partial_response");
                let why = partial_round_detail(&partial);
                tracing::warn!(
                    scores = ?partial.iter().map(|p| p.score.as_str()).collect::<Vec<_>>(),
                    warnings = ?distinct_warnings(&partial),
                    "partial response: some stores did not answer, so the fleet's bounds would come from a \
                     subset and shift every cluster's score; writing nothing this round (query.allowPartialResponse accepts such answers)"
                );
                health.set_not_publishing(Some(why));
            }
            RoundPlan::Ready {
                fleet,
                writes,
                partial,
            } => {
                health.set_not_publishing(None);
                if !partial.is_empty() {
                    tracing::warn!(
                        warnings = ?distinct_warnings(&partial),
                        "partial response accepted (query.allowPartialResponse): scoring from the stores that answered"
                    );
                }
                let planned = writes.len();
                let summary = writer.write_all(writes, &leading, &metrics).await;
                let written = summary.written.len();
                recent.record(&cached, summary.written);
                metrics.set_clusters_scored(fleet.clusters.len());
                metrics.set_last_complete_round(now);
                metrics.round(if summary.failed != 0 || summary.abandoned != 0 {
                    "write_failed"
                } else if !partial.is_empty() {
                    "partial_accepted"
                } else {
                    "complete"
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
    finish(leadership, server).await
}

/// The readiness detail of a round that refused partial answers.
fn partial_round_detail(partial: &[PartialAnswer]) -> String {
    format!(
        "not publishing: the latest round's answers were partial (some stores did not answer): {}",
        distinct_warnings(partial).join("; ")
    )
}

/// The warnings of every partial answer, each once (the same store fails every score's query).
fn distinct_warnings(partial: &[PartialAnswer]) -> Vec<&str> {
    let mut warnings: Vec<&str> = partial
        .iter()
        .flat_map(|p| p.warnings.iter().map(String::as_str))
        .collect();
    warnings.sort_unstable();
    warnings.dedup();
    warnings
}

/// After the round loop stopped writing: release the Lease (so a standby takes over at once) and
/// let the probe server go.
async fn finish(leadership: Option<Leadership>, server: ProbeServer) -> Result<(), RunError> {
    if let Some(leadership) = leadership {
        leadership.stop(Duration::from_secs(5)).await;
    }
    server.stopped().await;
    Ok(())
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
