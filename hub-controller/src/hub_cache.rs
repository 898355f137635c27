//! The watches and reflector stores of every kind OCM's placement engine reads, and the
//! [`HubSnapshot`] for one namespace built from them: shared by the modes that decide as OCM does
//! from a live cache (`tiering`, `explain-server`).
//!
//! A snapshot clones every cluster, score and decision of the hub, so it is built once per change
//! and shared until the next ([`SnapshotCache`]). Score renewals are no change
//! ([`ScoreUpdates`]): they only move `validUntil` on, and a snapshot is rebuilt anyway once the
//! earliest `validUntil` it holds has passed, so an expiry it judges is never one a renewal undid.

use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::Store;
use kube::runtime::watcher::{self, Event};
use ocm_score_api::{
    AddOnPlacementScore, AddOnPlacementScoreStatus, ManagedCluster, ManagedClusterSet,
    ManagedClusterSetBinding, Placement, PlacementDecision,
};
use ocm_score_scheduler::placement::renewal::is_renewal;
use ocm_score_scheduler::placement::{HubObjects, HubSnapshot, PlacementError};
use ocm_score_shell::controller::wait_synced;
use ocm_score_shell::sync::lock;
use ocm_score_shell::watch::{SharedWatch, WatchTask, as_is};
use prometheus_client::metrics::counter::Counter;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

pub use ocm_score_shell::controller::CacheGone;

/// One store per kind the engine reads, and the snapshots built from them.
#[derive(Clone)]
pub struct PlacementStores {
    pub clusters: Store<ManagedCluster>,
    pub cluster_sets: Store<ManagedClusterSet>,
    pub bindings: Store<ManagedClusterSetBinding>,
    pub scores: Store<AddOnPlacementScore>,
    pub placements: Store<Placement>,
    pub decisions: Store<PlacementDecision>,
    pub snapshots: Arc<SnapshotCache>,
}

pub fn cloned<K>(store: &Store<K>) -> Vec<K>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store.state().iter().map(|o| (**o).clone()).collect()
}

impl PlacementStores {
    /// Resolves once every store holds its first complete list: an answer from half a picture
    /// (no clusters yet, say) would be wrong, not merely late.
    pub async fn synced(&self) -> Result<(), CacheGone> {
        wait_synced(&[
            ("ManagedClusters", &self.clusters),
            ("ManagedClusterSets", &self.cluster_sets),
            ("ManagedClusterSetBindings", &self.bindings),
            ("AddOnPlacementScores", &self.scores),
            ("Placements", &self.placements),
            ("PlacementDecisions", &self.decisions),
        ])
        .await
    }

    /// What the engine needs at `now` for a placement in `namespace`: every cluster, set, score
    /// and decision (Balance reads other placements' decisions), the namespace's bindings and
    /// placements. The last one built is reused until the stores change or a `validUntil` in it
    /// passes.
    pub fn snapshot(
        &self,
        namespace: &str,
        now: jiff::Timestamp,
    ) -> Result<Arc<HubSnapshot>, PlacementError> {
        self.snapshots
            .get(namespace, now.as_nanosecond(), || self.build(namespace, now))
    }

    /// A new snapshot and the instant until which it judges every expiry as the stores would.
    fn build(&self, namespace: &str, now: jiff::Timestamp) -> Result<(HubSnapshot, i128), PlacementError> {
        let in_namespace = |ns: &Option<String>| ns.as_deref() == Some(namespace);
        let scores = cloned(&self.scores);
        let fresh_until = earliest_valid_until(&scores, now.as_nanosecond());
        let snapshot = HubSnapshot::new(HubObjects {
            clusters: cloned(&self.clusters),
            cluster_sets: cloned(&self.cluster_sets),
            bindings: self
                .bindings
                .state()
                .iter()
                .filter(|b| in_namespace(&b.metadata.namespace))
                .map(|b| (**b).clone())
                .collect(),
            placements: self
                .placements
                .state()
                .iter()
                .filter(|p| in_namespace(&p.metadata.namespace))
                .map(|p| (**p).clone())
                .collect(),
            decisions: cloned(&self.decisions),
            scores,
        })?;
        Ok((snapshot, fresh_until))
    }
}

/// The earliest `validUntil` of `scores` not yet passed at `now_ns` (`i128::MAX`: none). A score
/// that has expired stays expired until its object changes; one still in force may be renewed
/// without the snapshot knowing, which only matters once its old `validUntil` has passed.
fn earliest_valid_until(scores: &[AddOnPlacementScore], now_ns: i128) -> i128 {
    scores
        .iter()
        .filter_map(|s| s.status.as_ref()?.valid_until.as_ref())
        .map(|t| t.0.as_nanosecond())
        .filter(|until| *until >= now_ns)
        .min()
        .unwrap_or(i128::MAX)
}

/// Snapshots kept per namespace at most; beyond, the cache starts over (few namespaces hold
/// placements that are planned or explained).
const CACHED_NAMESPACES: usize = 64;

/// The last snapshot built per namespace, and a count of the store changes it was built after.
#[derive(Debug, Default)]
pub struct SnapshotCache {
    /// Bumped by the watches after each change reached a store.
    changes: AtomicU64,
    built: Mutex<HashMap<String, Built>>,
    /// Snapshots built so far (a mode's metric).
    builds: Counter,
}

#[derive(Debug)]
struct Built {
    changes: u64,
    fresh_until_ns: i128,
    snapshot: Arc<HubSnapshot>,
}

impl SnapshotCache {
    /// A store changed (called after the change is in it).
    pub fn changed(&self) {
        self.changes.fetch_add(1, Ordering::AcqRel);
    }

    /// Snapshots built so far.
    pub fn builds(&self) -> u64 {
        self.builds.get()
    }

    /// The snapshot of `namespace` at `now_ns`: the cached one while no change came and no
    /// `validUntil` in it passed, else `build()`'s.
    pub fn get(
        &self,
        namespace: &str,
        now_ns: i128,
        build: impl FnOnce() -> Result<(HubSnapshot, i128), PlacementError>,
    ) -> Result<Arc<HubSnapshot>, PlacementError> {
        // Read before the stores: a change in between is in the snapshot and rebuilds it next time.
        let changes = self.changes.load(Ordering::Acquire);
        let mut built = lock(&self.built);
        if let Some(b) = built.get(namespace)
            && b.changes == changes
            && now_ns <= b.fresh_until_ns
        {
            return Ok(b.snapshot.clone());
        }
        let (snapshot, fresh_until_ns) = build()?;
        self.builds.inc();
        let snapshot = Arc::new(snapshot);
        if built.len() >= CACHED_NAMESPACES && !built.contains_key(namespace) {
            built.clear();
        }
        built.insert(
            namespace.to_string(),
            Built {
                changes,
                fresh_until_ns,
                snapshot: snapshot.clone(),
            },
        );
        Ok(snapshot)
    }
}

/// The last status seen of every AddOnPlacementScore, to tell renewals from changes.
#[derive(Debug, Default)]
pub struct ScoreUpdates {
    last: HashMap<(String, String), Option<AddOnPlacementScoreStatus>>,
}

impl ScoreUpdates {
    /// Whether `event` may change a decision made at `now`: a new, deleted or changed score
    /// object, not a renewal or a re-list of what was already seen
    /// (`ocm_score_scheduler::placement::renewal`).
    pub fn can_change_decisions(&mut self, event: &Event<AddOnPlacementScore>, now: jiff::Timestamp) -> bool {
        match event {
            Event::Apply(object) | Event::InitApply(object) => {
                let key = (object.namespace().unwrap_or_default(), object.name_any());
                let renewal = is_renewal(self.last.get(&key), &object.status, now.as_nanosecond());
                self.last.insert(key, object.status.clone());
                !renewal
            }
            Event::Delete(object) => {
                self.last
                    .remove(&(object.namespace().unwrap_or_default(), object.name_any()));
                true
            }
            Event::Init | Event::InitDone => false,
        }
    }
}

/// What a mode adds to the score watch: it sees each event and whether the update can change a
/// decision, and says whether the watch's subscribers are sent it.
type ScoreHook = Box<dyn FnMut(&Event<AddOnPlacementScore>, bool) -> bool + Send>;

/// The watches of the engine's kinds, before they start: subscribe to them, then
/// [`PlacementWatches::spawn`]. Every change they deliver invalidates the snapshots.
pub struct PlacementWatches {
    pub clusters: SharedWatch<ManagedCluster>,
    pub cluster_sets: SharedWatch<ManagedClusterSet>,
    pub bindings: SharedWatch<ManagedClusterSetBinding>,
    pub scores: SharedWatch<AddOnPlacementScore>,
    pub placements: SharedWatch<Placement>,
    pub decisions: SharedWatch<PlacementDecision>,
    score_hook: Option<ScoreHook>,
    snapshots: Arc<SnapshotCache>,
}

impl PlacementWatches {
    /// Watches whose snapshots count each build in `snapshot_builds`.
    pub fn new(snapshot_builds: Counter) -> Self {
        PlacementWatches {
            clusters: SharedWatch::default(),
            cluster_sets: SharedWatch::default(),
            bindings: SharedWatch::default(),
            scores: SharedWatch::default(),
            placements: SharedWatch::default(),
            decisions: SharedWatch::default(),
            score_hook: None,
            snapshots: Arc::new(SnapshotCache {
                builds: snapshot_builds,
                ..SnapshotCache::default()
            }),
        }
    }

    /// The stores the watches keep, and their snapshots.
    pub fn stores(&self) -> PlacementStores {
        PlacementStores {
            clusters: self.clusters.store(),
            cluster_sets: self.cluster_sets.store(),
            bindings: self.bindings.store(),
            scores: self.scores.store(),
            placements: self.placements.store(),
            decisions: self.decisions.store(),
            snapshots: self.snapshots.clone(),
        }
    }

    /// Has `hook` see every score event with whether it can change a decision; the score
    /// watch's subscribers are sent only the events `hook` returns true for. Without a hook they
    /// are sent every event.
    pub fn on_scores(
        &mut self,
        hook: impl FnMut(&Event<AddOnPlacementScore>, bool) -> bool + Send + 'static,
    ) {
        self.score_hook = Some(Box::new(hook));
    }

    /// Starts the six watches of the whole hub; they run until the tasks are dropped.
    pub fn spawn(self, client: &kube::Client) -> [WatchTask; 6] {
        let PlacementWatches {
            mut clusters,
            mut cluster_sets,
            mut bindings,
            mut scores,
            mut placements,
            mut decisions,
            score_hook,
            snapshots,
        } = self;
        clusters.observe(invalidates(&snapshots));
        cluster_sets.observe(invalidates(&snapshots));
        bindings.observe(invalidates(&snapshots));
        placements.observe(invalidates(&snapshots));
        decisions.observe(invalidates(&snapshots));
        let mut updates = ScoreUpdates::default();
        let mut hook = score_hook;
        scores.notify_when(move |event| {
            let changes = updates.can_change_decisions(event, jiff::Timestamp::now());
            if changes {
                snapshots.changed();
            }
            hook.as_mut().is_none_or(|hook| hook(event, changes))
        });
        let everything = watcher::Config::default;
        [
            clusters.spawn(Api::all(client.clone()), everything(), as_is),
            cluster_sets.spawn(Api::all(client.clone()), everything(), as_is),
            bindings.spawn(Api::all(client.clone()), everything(), as_is),
            scores.spawn(Api::all(client.clone()), everything(), as_is),
            placements.spawn(Api::all(client.clone()), everything(), as_is),
            decisions.spawn(Api::all(client.clone()), everything(), as_is),
        ]
    }
}

/// An observer that marks `snapshots` stale on every event of its watch.
fn invalidates<K>(snapshots: &Arc<SnapshotCache>) -> impl FnMut(&Event<K>) + Send + 'static {
    let snapshots = snapshots.clone();
    move |_| snapshots.changed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::reflector;
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
                valid_until: Some(Time(jiff::Timestamp::from_second(valid_until_s).unwrap())),
                ..Default::default()
            }),
        }
    }

    fn at(s: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(s).unwrap()
    }

    #[test]
    fn renewals_and_re_lists_of_the_same_scores_change_no_decision() {
        let now = at(1_000);
        let mut updates = ScoreUpdates::default();
        use Event::{Apply, Delete, InitApply, InitDone};
        assert!(
            updates.can_change_decisions(&InitApply(score("a", 10, 1_100)), now),
            "first seen"
        );
        assert!(!updates.can_change_decisions(&InitDone, now));
        assert!(
            !updates.can_change_decisions(&Apply(score("a", 10, 1_160)), now),
            "renewed"
        );
        assert!(
            !updates.can_change_decisions(&InitApply(score("a", 10, 1_220)), now),
            "re-listed"
        );
        assert!(
            updates.can_change_decisions(&Apply(score("a", 11, 1_220)), now),
            "a new value"
        );
        assert!(
            updates.can_change_decisions(&Apply(score("b", 11, 1_220)), now),
            "another cluster"
        );
        assert!(updates.can_change_decisions(&Delete(score("a", 11, 1_220)), now));
        assert!(
            updates.can_change_decisions(&Apply(score("a", 11, 1_220)), now),
            "back after a delete"
        );
    }

    /// Stores fed by hand, as the watches feed them, and the cache's view of them.
    struct Fed {
        stores: PlacementStores,
        scores: reflector::store::Writer<AddOnPlacementScore>,
        clusters: reflector::store::Writer<ManagedCluster>,
        updates: ScoreUpdates,
        _rest: (
            reflector::store::Writer<ManagedClusterSet>,
            reflector::store::Writer<ManagedClusterSetBinding>,
            reflector::store::Writer<Placement>,
            reflector::store::Writer<PlacementDecision>,
        ),
    }

    impl Fed {
        fn new() -> Fed {
            let (clusters_store, clusters) = reflector::store();
            let (sets_store, sets) = reflector::store();
            let (bindings_store, bindings) = reflector::store();
            let (scores_store, scores) = reflector::store();
            let (placements_store, placements) = reflector::store();
            let (decisions_store, decisions) = reflector::store();
            Fed {
                stores: PlacementStores {
                    clusters: clusters_store,
                    cluster_sets: sets_store,
                    bindings: bindings_store,
                    scores: scores_store,
                    placements: placements_store,
                    decisions: decisions_store,
                    snapshots: Arc::default(),
                },
                scores,
                clusters,
                updates: ScoreUpdates::default(),
                _rest: (sets, bindings, placements, decisions),
            }
        }

        /// A score event as the watch delivers it: the store first, then the cache's verdict.
        fn score(&mut self, event: Event<AddOnPlacementScore>, now: jiff::Timestamp) {
            self.scores.apply_watcher_event(&event);
            if self.updates.can_change_decisions(&event, now) {
                self.stores.snapshots.changed();
            }
        }

        fn cluster(&mut self, name: &str) {
            let mut cluster = ManagedCluster::default();
            cluster.metadata.name = Some(name.into());
            self.clusters.apply_watcher_event(&Event::Apply(cluster));
            self.stores.snapshots.changed();
        }
    }

    #[test]
    fn a_snapshot_is_built_once_per_change_and_again_when_a_valid_until_in_it_passes() {
        let mut fed = Fed::new();
        fed.cluster("a");
        fed.score(Event::Apply(score("a", 10, 1_100)), at(1_000));
        let first = fed.stores.snapshot("apps", at(1_000)).expect("a snapshot");
        assert_eq!(fed.stores.snapshots.builds(), 1);
        let again = fed.stores.snapshot("apps", at(1_001)).expect("a snapshot");
        assert!(Arc::ptr_eq(&first, &again), "nothing changed: the same snapshot");

        // Renewals change nothing a decision reads.
        for i in 1..=5 {
            fed.score(Event::Apply(score("a", 10, 1_100 + 60 * i)), at(1_000 + i));
        }
        let renewed = fed.stores.snapshot("apps", at(1_010)).expect("a snapshot");
        assert!(Arc::ptr_eq(&first, &renewed), "renewals rebuild nothing");
        assert_eq!(fed.stores.snapshots.builds(), 1);

        // Past the validUntil the snapshot holds, it would call a renewed score expired: rebuilt.
        let past = fed.stores.snapshot("apps", at(1_101)).expect("a snapshot");
        assert!(!Arc::ptr_eq(&first, &past));
        assert_eq!(fed.stores.snapshots.builds(), 2);
        // A value changes, a cluster joins, another namespace asks: each builds once.
        fed.score(Event::Apply(score("a", 20, 1_400)), at(1_102));
        let changed = fed.stores.snapshot("apps", at(1_102)).expect("a snapshot");
        assert!(!Arc::ptr_eq(&past, &changed));
        fed.cluster("b");
        fed.stores.snapshot("apps", at(1_103)).expect("a snapshot");
        fed.stores.snapshot("other", at(1_103)).expect("a snapshot");
        fed.stores.snapshot("other", at(1_104)).expect("a snapshot");
        assert_eq!(fed.stores.snapshots.builds(), 5);
    }
}
