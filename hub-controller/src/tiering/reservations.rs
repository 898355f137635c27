//! The hub's one reservation ledger (`ocm_score_scheduler::reservation`), shared by the reconciles and
//! the watches. Plan and assume happen under its lock, one TieredPlacement at a time, so a
//! placement planned right after another sees the other's reservations. It is built from the
//! TieredPlacements' `status.reservations` on the first plan after the caches synced (each
//! leadership term starts a new one), so a new leader continues with the reservations the last
//! one made.

use super::metrics::Metrics;
use jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use ocm_score_api::crd::tiered_placement::TieredPlacement;
use ocm_score_scheduler::reservation::{Ledger, Timing, placement_key};
use ocm_score_shell::sync::lock;
use std::sync::{Mutex, MutexGuard};
use tokio::sync::Notify;

pub struct SharedLedger {
    /// `None` until the first plan.
    ledger: Mutex<Option<Ledger>>,
    /// `None`: reservations are off.
    timing: Option<Timing>,
    /// Woken when the reservations may have changed (the reserved scores follow them).
    changed: Notify,
}

impl SharedLedger {
    pub fn new(timing: Option<Timing>) -> SharedLedger {
        SharedLedger {
            ledger: Mutex::new(None),
            timing,
            changed: Notify::new(),
        }
    }

    /// Runs `f` on the ledger if it has been built (by the first plan); `None` before.
    pub fn peek<R>(&self, f: impl FnOnce(&Ledger) -> R) -> Option<R> {
        self.lock().as_ref().map(f)
    }

    /// Resolves at the next change after the call (or at once if one happened since the last
    /// wait: `Notify` keeps one wake-up).
    pub async fn changed(&self) {
        self.changed.notified().await;
    }

    fn lock(&self) -> MutexGuard<'_, Option<Ledger>> {
        lock(&self.ledger)
    }

    /// Runs `f` on the ledger, building it from `tiered` (synced) first if needed. Keep `f`
    /// short and free of I/O: every plan waits for the lock.
    pub fn with<R>(
        &self,
        tiered: &Store<TieredPlacement>,
        metrics: &Metrics,
        f: impl FnOnce(&mut Ledger) -> R,
    ) -> R {
        let mut guard = self.lock();
        let first = guard.is_none();
        let ledger = guard.get_or_insert_with(|| {
            let objects = tiered.state();
            let (ledger, errors) = match self.timing {
                Some(timing) => Ledger::rebuild(
                    timing,
                    true,
                    objects.iter().map(|tp| (placement_key(tp), tp.status.as_ref())),
                ),
                None => (Ledger::disabled(), Vec::new()),
            };
            for error in &errors {
                tracing::warn!(%error, "a stored reservation cannot be loaded");
            }
            tracing::info!(
                reservations = ledger.entries().count(),
                enabled = self.timing.is_some(),
                "reservation ledger built from the TieredPlacements' status"
            );
            ledger
        });
        let before = fingerprint(ledger);
        let result = f(ledger);
        metrics.reservations(ledger.entries().count());
        // Most plans reserve nothing new: only a change wakes the reserved-score publisher.
        if first || fingerprint(ledger) != before {
            self.changed.notify_one();
        }
        result
    }

    /// A report of `cluster` observed at `at`: releases what it settles. Before the ledger is
    /// built nothing is released (the stored reservations then wait for the next report). True
    /// when it released something.
    pub fn report(&self, cluster: &str, at: Timestamp, metrics: &Metrics) -> bool {
        let mut guard = self.lock();
        let Some(ledger) = guard.as_mut() else {
            return false;
        };
        let released = ledger.observe_report(cluster, at.as_nanosecond());
        if !released.is_empty() {
            tracing::info!(%cluster, placements = ?released, "a report released reservations");
            metrics.released_by_report(released.len());
            metrics.reservations(ledger.entries().count());
            self.changed.notify_one();
        }
        !released.is_empty()
    }

    /// A TieredPlacement that is gone.
    pub fn forget(&self, tp: &TieredPlacement) {
        if let Some(ledger) = self.lock().as_mut()
            && ledger.forget(&placement_key(tp))
        {
            tracing::info!(tiered = %format!("{}/{}", tp.namespace().unwrap_or_default(), tp.name_any()), "released the reservations of a deleted TieredPlacement");
            self.changed.notify_one();
        }
    }
}

/// What the reserved scores depend on: every entry's cluster, shape, replicas and TTL.
fn fingerprint(ledger: &Ledger) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for (cluster, placement, entry) in ledger.entries() {
        (cluster, placement, &entry.shape, entry.replicas, entry.expires_at).hash(&mut hasher);
    }
    hasher.finish()
}
