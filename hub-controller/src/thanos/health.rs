//! What the scorer reports on `/metrics`, `/healthz` and `/readyz` (served by the process shell's
//! probe server).

use super::metrics::Metrics;
use ocm_score_shell::probes::{Heartbeat, Probes};
use ocm_score_shell::sync::lock;
use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::Duration,
};

/// Liveness from the round loop's heartbeat, readiness from the hub caches and from whether the
/// scorer publishes, metrics from [`Metrics`].
pub struct Health {
    metrics: Arc<Metrics>,
    ready: AtomicBool,
    /// Why the latest round published nothing though it could have queried, while that lasts.
    not_publishing: Mutex<Option<String>>,
    heartbeat: Heartbeat,
    stall_after: Duration,
}

impl Health {
    /// Live while the round loop beats at least every `stall_after` (counted from now).
    pub fn new(metrics: Arc<Metrics>, stall_after: Duration) -> Self {
        let heartbeat = Heartbeat::default();
        heartbeat.beat();
        Self {
            metrics,
            ready: AtomicBool::new(false),
            not_publishing: Mutex::new(None),
            heartbeat,
            stall_after,
        }
    }

    /// Ready once the hub caches have synced. A standby replica is ready too: it can take over at once.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    /// Not ready, saying `why`, until called again with `None`: for rounds that refuse partial
    /// answers, so that `/readyz` says the scorer is not publishing and why.
    pub fn set_not_publishing(&self, why: Option<String>) {
        *lock(&self.not_publishing) = why;
    }

    /// Called by the round loop each time it comes round, leader or not.
    pub fn beat(&self) {
        self.heartbeat.beat();
    }
}

impl Probes for Health {
    fn metrics(&self) -> String {
        self.metrics.render()
    }

    fn live(&self) -> Result<(), String> {
        self.heartbeat.live("the scoring loop", self.stall_after)
    }

    fn ready(&self) -> Result<(), String> {
        if !self.ready.load(Ordering::Relaxed) {
            return Err("hub caches not synced yet".into());
        }
        match &*lock(&self.not_publishing) {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn liveness_follows_the_heartbeat_and_readiness_the_caches() {
        let metrics = Arc::new(Metrics::new());
        metrics.set_clusters_scored(7);
        let health = Health::new(metrics, Duration::from_secs(60));
        assert!(health.ready().is_err());
        health.set_ready();
        assert_eq!(health.ready(), Ok(()));
        health.set_not_publishing(Some("partial response from Thanos".into()));
        assert_eq!(health.ready(), Err("partial response from Thanos".into()));
        health.set_not_publishing(None);
        assert_eq!(health.ready(), Ok(()));
        assert_eq!(health.live(), Ok(()));
        assert!(health.metrics().contains("ocm_score_thanos_clusters_scored 7\n"));
        tokio::time::advance(Duration::from_secs(61)).await;
        assert!(health.live().expect_err("stalled").contains("silent for 61s"));
        health.beat();
        assert_eq!(health.live(), Ok(()));
    }
}
