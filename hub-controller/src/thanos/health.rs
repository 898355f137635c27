//! What the scorer reports on `/metrics`, `/healthz` and `/readyz` (served by [`crate::serve`]).

use super::metrics::Metrics;
use std::{
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, Ordering},
    },
    time::{Duration, Instant},
};

/// Liveness from the round loop's heartbeat, readiness from the hub caches, metrics from [`Metrics`].
pub struct Health {
    metrics: Arc<Metrics>,
    ready: AtomicBool,
    heartbeat: Mutex<Instant>,
    stall_after: Duration,
}

impl Health {
    /// Live while the round loop beats at least every `stall_after`.
    pub fn new(metrics: Arc<Metrics>, stall_after: Duration) -> Self {
        Self {
            metrics,
            ready: AtomicBool::new(false),
            heartbeat: Mutex::new(Instant::now()),
            stall_after,
        }
    }

    /// Ready once the hub caches have synced. A standby replica is ready too: it can take over at once.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    /// Called by the round loop each time it comes round, leader or not.
    pub fn beat(&self) {
        *self.heartbeat.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }
}

impl crate::serve::Probes for Health {
    fn metrics(&self) -> String {
        self.metrics.render()
    }

    fn live(&self) -> Result<(), String> {
        let quiet = self.heartbeat.lock().unwrap_or_else(|p| p.into_inner()).elapsed();
        if quiet <= self.stall_after {
            Ok(())
        } else {
            Err(format!(
                "the scoring loop has not come round for {}s",
                quiet.as_secs()
            ))
        }
    }

    fn ready(&self) -> Result<(), String> {
        if self.ready.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err("hub caches not synced yet".into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::Probes;

    #[test]
    fn liveness_follows_the_heartbeat_and_readiness_the_caches() {
        let metrics = Arc::new(Metrics::new());
        metrics.set_clusters_scored(7);
        let health = Health::new(metrics, Duration::from_secs(60));
        assert!(health.ready().is_err());
        health.set_ready();
        assert_eq!(health.ready(), Ok(()));
        assert_eq!(health.live(), Ok(()));
        assert!(health.metrics().contains("ocm_score_thanos_clusters_scored 7\n"));
        *health.heartbeat.lock().expect("not poisoned") = Instant::now() - Duration::from_secs(61);
        assert!(health.live().expect_err("stalled").contains("not come round"));
        health.beat();
        assert_eq!(health.live(), Ok(()));
    }
}
