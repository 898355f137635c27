//! Which AddOnPlacementScore updates re-plan which TieredPlacements.
//!
//! Every agent renews its scores each minute, so a hub of N clusters sees N/60 score updates a
//! second, nearly all of them renewals that change no plan. [`ScoreUpdates`] tells those apart on
//! the watch (`ocm_score_scheduler::placement::renewal`), and [`Holdings`] sends a real change
//! only to the TieredPlacements whose last plan read that cluster's scores (`Plan::holds`).
//!
//! A plan reads the stores at one instant and records what it holds after, so a change can land
//! in between: before the plan's snapshot it is in the plan; after the record it is sent by the
//! new holds. Only a change after the snapshot of a cluster the new holds add and the old ones
//! lacked may reach neither, and [`Holdings::record`] reports that so the reconciler plans again.

use jiff::Timestamp;
use kube::ResourceExt;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use ocm_score_api::crd::tiered_placement::TieredPlacement;
use ocm_score_api::{AddOnPlacementScore, AddOnPlacementScoreStatus};
use ocm_score_scheduler::placement::renewal::is_renewal;
use ocm_score_scheduler::tiering::Holds;
use ocm_score_shell::sync::lock;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// The key a TieredPlacement is held under: `namespace/name`.
pub fn key_of(tp: &TieredPlacement) -> String {
    format!("{}/{}", tp.namespace().unwrap_or_default(), tp.name_any())
}

/// The last status seen of every AddOnPlacementScore, to tell renewals from changes.
#[derive(Debug, Default)]
pub struct ScoreUpdates {
    last: HashMap<(String, String), Option<AddOnPlacementScoreStatus>>,
}

impl ScoreUpdates {
    /// Whether `event` may change a plan made at `now`: a new, deleted or changed score object,
    /// not a renewal or a re-list of what was already seen.
    pub fn can_change_plans(&mut self, event: &watcher::Event<AddOnPlacementScore>, now: Timestamp) -> bool {
        match event {
            watcher::Event::Apply(object) | watcher::Event::InitApply(object) => {
                let key = (object.namespace().unwrap_or_default(), object.name_any());
                let renewal = is_renewal(self.last.get(&key), &object.status, now.as_nanosecond());
                self.last.insert(key, object.status.clone());
                !renewal
            }
            watcher::Event::Delete(object) => {
                self.last
                    .remove(&(object.namespace().unwrap_or_default(), object.name_any()));
                true
            }
            watcher::Event::Init | watcher::Event::InitDone => false,
        }
    }
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
    use ocm_score_api::{AddOnPlacementScoreItem, ObjectMeta, Time};

    fn score(cluster: &str, cpu: i32, valid_until_s: i64) -> AddOnPlacementScore {
        AddOnPlacementScore {
            metadata: ObjectMeta {
                namespace: Some(cluster.into()),
                name: Some("resource-usage-score".into()),
                ..Default::default()
            },
            status: Some(AddOnPlacementScoreStatus {
                scores: vec![AddOnPlacementScoreItem {
                    name: "cpu".into(),
                    value: cpu,
                }],
                valid_until: Some(Time(Timestamp::from_second(valid_until_s).unwrap())),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn renewals_and_re_lists_of_the_same_scores_change_no_plan() {
        let now = Timestamp::from_second(1_000).unwrap();
        let mut updates = ScoreUpdates::default();
        use watcher::Event::{Apply, Delete, InitApply, InitDone};
        assert!(
            updates.can_change_plans(&InitApply(score("a", 10, 1_100)), now),
            "first seen"
        );
        assert!(!updates.can_change_plans(&InitDone, now));
        assert!(
            !updates.can_change_plans(&Apply(score("a", 10, 1_160)), now),
            "renewed"
        );
        assert!(
            !updates.can_change_plans(&InitApply(score("a", 10, 1_220)), now),
            "re-listed"
        );
        assert!(
            updates.can_change_plans(&Apply(score("a", 11, 1_220)), now),
            "a new value"
        );
        assert!(
            updates.can_change_plans(&Apply(score("b", 11, 1_220)), now),
            "another cluster"
        );
        assert!(updates.can_change_plans(&Delete(score("a", 11, 1_220)), now));
        assert!(
            updates.can_change_plans(&Apply(score("a", 11, 1_220)), now),
            "back after a delete"
        );
    }

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
