//! Which AddOnPlacementScore updates re-plan which TieredPlacements.
//!
//! Every agent renews its scores each minute, so a hub of N clusters sees N/60 score updates a
//! second, nearly all of them renewals that change no plan. `crate::hub_cache::ScoreUpdates` tells
//! those apart on the watch, and [`Holdings`] sends a real change (a score that expires without a
//! renewal is one) only to the TieredPlacements whose last plan read that cluster's scores
//! (`Plan::holds`).
//!
//! A plan reads the stores at one instant and records what it holds after, so a change can land
//! in between: before the plan's snapshot it is in the plan; after the record it is sent by the
//! new holds. Only a change after the snapshot of a cluster the new holds add and the old ones
//! lacked may reach neither, and [`Holdings::record`] reports that so the reconciler plans again.

use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use ocm_score_api::crd::tiered_placement::TieredPlacement;
use ocm_score_scheduler::tiering::Holds;
use ocm_score_shell::sync::lock;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// The key a TieredPlacement is held under: `namespace/name`.
pub fn key_of(tp: &TieredPlacement) -> String {
    format!("{}/{}", tp.namespace().unwrap_or_default(), tp.name_any())
}

/// Changes remembered for [`Holdings::record`]; a plan that took longer than this many changes
/// is planned again.
const RECENT_CHANGES: usize = 4096;

/// What each TieredPlacement's last plan holds, and the recent score changes.
#[derive(Debug, Default)]
pub struct Holdings {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Score changes seen so far.
    sequence: u64,
    /// The last [`RECENT_CHANGES`] changes: (sequence, cluster).
    recent: VecDeque<(u64, String)>,
    held: HashMap<String, Holds>,
}

impl Holdings {
    /// The count of changes so far: read it before the stores a plan is made from.
    pub fn sequence(&self) -> u64 {
        lock(&self.inner).sequence
    }

    /// A score of `cluster` changed (after the store took it, before the triggers are mapped).
    pub fn changed(&self, cluster: &str) {
        let mut inner = lock(&self.inner);
        inner.sequence += 1;
        let sequence = inner.sequence;
        if inner.recent.len() == RECENT_CHANGES {
            inner.recent.pop_front();
        }
        inner.recent.push_back((sequence, cluster.to_string()));
    }

    /// The TieredPlacements a change of `cluster`'s scores may re-plan: those whose last plan
    /// holds it, and those not planned yet.
    pub fn holders(&self, store: &Store<TieredPlacement>, cluster: &str) -> Vec<ObjectRef<TieredPlacement>> {
        let inner = lock(&self.inner);
        store
            .state()
            .iter()
            .filter(|tp| inner.held.get(&key_of(tp)).is_none_or(|h| h.includes(cluster)))
            .map(|tp| ObjectRef::from_obj(&**tp))
            .collect()
    }

    /// Records what `key`'s plan, made from stores read after change `seen`, holds. True when a
    /// change since then may have been sent to nobody (see the module doc): plan again.
    pub fn record(&self, key: &str, holds: Holds, seen: u64) -> bool {
        let mut inner = lock(&self.inner);
        let oldest_kept = inner.recent.front().map_or(inner.sequence + 1, |(s, _)| *s);
        let missed = if oldest_kept > seen + 1 {
            // Changes since `seen` were forgotten.
            true
        } else {
            let old = inner.held.get(key);
            inner.recent.iter().any(|(sequence, cluster)| {
                *sequence > seen && holds.includes(cluster) && old.is_some_and(|h| !h.includes(cluster))
            })
        };
        inner.held.insert(key.to_string(), holds);
        missed
    }

    /// A TieredPlacement that is gone.
    pub fn forget(&self, key: &str) {
        lock(&self.inner).held.remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_change_during_a_plan_is_caught_when_the_new_holds_add_its_cluster() {
        let holdings = Holdings::default();
        let only = |names: &[&str]| Holds::Clusters(names.iter().map(|n| n.to_string()).collect());
        assert!(!holdings.record("ns/tp", only(&["a"]), holdings.sequence()));
        // `b` changes while the next plan runs; that plan holds `b` now, the old one did not.
        let seen = holdings.sequence();
        holdings.changed("b");
        assert!(
            holdings.record("ns/tp", only(&["a", "b"]), seen),
            "b was sent by the old holds to nobody"
        );
        // Held before: the trigger reached this placement, so nothing is missed.
        let seen = holdings.sequence();
        holdings.changed("b");
        assert!(!holdings.record("ns/tp", only(&["a", "b"]), seen));
        // A change of a cluster the plan does not hold.
        let seen = holdings.sequence();
        holdings.changed("c");
        assert!(!holdings.record("ns/tp", only(&["a"]), seen));
        // More changes than are remembered.
        let seen = holdings.sequence();
        for _ in 0..=RECENT_CHANGES {
            holdings.changed("z");
        }
        assert!(holdings.record("ns/tp", only(&["a"]), seen));
    }
}
