//! The watches and reflector stores of every kind OCM's placement engine reads, and the
//! [`HubSnapshot`] for one namespace built from them: shared by the modes that decide as OCM does
//! from a live cache (`tiering`, `explain-server`).
//!
//! A snapshot clones every cluster, score and decision of the hub, so it is built once per change
//! and shared until the next ([`SnapshotCache`]). Score renewals are no change
//! ([`ScoreUpdates`]): they only move `validUntil` on. A snapshot judges every score's expiry at
//! the instant it was built (`HubSnapshot::judging_expiry_at`), so a score renewed since stays in
//! force in it; a score that reaches its current `validUntil` without a renewal is a change, found
//! by the score watch's expiry wheel ([`expiries`]), which drops the snapshots and tells the mode
//! ([`PlacementWatches::on_expiries`]). Neither a plan nor a snapshot waits for a `validUntil` it
//! read: with agents renewing every minute, scores valid 97 s, that instant would come about 37 s
//! after every plan, with nothing expired.

use futures::Stream;
use futures::channel::mpsc;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::Store;
use kube::runtime::watcher::{self, Event};
use ocm_score_api::{
    AddOnPlacementScore, AddOnPlacementScoreStatus, ManagedCluster, ManagedClusterSet,
    ManagedClusterSetBinding, ObjectMeta, Placement, PlacementDecision,
};
use ocm_score_scheduler::placement::renewal::is_renewal;
use ocm_score_scheduler::placement::{HubObjects, HubSnapshot, PlacementError};
use ocm_score_shell::controller::wait_synced;
use ocm_score_shell::sync::lock;
use ocm_score_shell::task::AbortOnDrop;
use ocm_score_shell::watch::{SharedWatch, WatchTask, as_is};
use prometheus_client::metrics::counter::Counter;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

pub mod expiries;

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
    /// placements. The last one built is reused until the stores change or a score expires
    /// without renewal (both seen by [`PlacementWatches`]).
    pub fn snapshot(
        &self,
        namespace: &str,
        now: jiff::Timestamp,
    ) -> Result<Arc<HubSnapshot>, PlacementError> {
        self.snapshots.get(namespace, || self.build(namespace, now))
    }

    /// A new snapshot, judging expiries at `now` until the expiry wheel drops it.
    fn build(&self, namespace: &str, now: jiff::Timestamp) -> Result<HubSnapshot, PlacementError> {
        let in_namespace = |ns: &Option<String>| ns.as_deref() == Some(namespace);
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
            scores: cloned(&self.scores),
        })?;
        Ok(snapshot.judging_expiry_at(now))
    }
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
    snapshot: Arc<HubSnapshot>,
}

impl SnapshotCache {
    /// A store changed (called after the change is in it), or a score in it expired.
    pub fn changed(&self) {
        self.changes.fetch_add(1, Ordering::AcqRel);
    }

    /// Snapshots built so far.
    pub fn builds(&self) -> u64 {
        self.builds.get()
    }

    /// The snapshot of `namespace`: the cached one while no change came, else `build()`'s.
    pub fn get(
        &self,
        namespace: &str,
        build: impl FnOnce() -> Result<HubSnapshot, PlacementError>,
    ) -> Result<Arc<HubSnapshot>, PlacementError> {
        // Read before the stores: a change in between is in the snapshot and rebuilds it next time.
        let changes = self.changes.load(Ordering::Acquire);
        let mut built = lock(&self.built);
        if let Some(b) = built.get(namespace)
            && b.changes == changes
        {
            return Ok(b.snapshot.clone());
        }
        let snapshot = build()?;
        self.builds.inc();
        let snapshot = Arc::new(snapshot);
        if built.len() >= CACHED_NAMESPACES && !built.contains_key(namespace) {
            built.clear();
        }
        built.insert(
            namespace.to_string(),
            Built {
                changes,
                snapshot: snapshot.clone(),
            },
        );
        Ok(snapshot)
    }
}

/// An AddOnPlacementScore's namespace (its cluster) and name.
pub type ScoreKey = (String, String);

fn key_of(object: &AddOnPlacementScore) -> ScoreKey {
    (object.namespace().unwrap_or_default(), object.name_any())
}

fn valid_until_ns(status: &Option<AddOnPlacementScoreStatus>) -> Option<i128> {
    Some(status.as_ref()?.valid_until.as_ref()?.0.as_nanosecond())
}

/// The last status seen of every AddOnPlacementScore, to tell renewals from changes, and the
/// expiry wheel's contents: the current `validUntil` of every score in force, soonest first.
#[derive(Debug, Default)]
pub struct ScoreUpdates {
    last: HashMap<ScoreKey, Option<AddOnPlacementScoreStatus>>,
    /// `(validUntil, key)` of each score that was in force when last seen and has not expired.
    in_force_until: BTreeSet<(i128, ScoreKey)>,
    /// During a re-list, the objects listed so far: the others were deleted meanwhile.
    listed: Option<HashSet<ScoreKey>>,
}

impl ScoreUpdates {
    /// Whether `event` may change a decision made at `now`: a new, deleted or changed score
    /// object, not a renewal or a re-list of what was already seen
    /// (`ocm_score_scheduler::placement::renewal`). A re-list that misses objects seen before is
    /// a change (they were deleted while the watch was down).
    pub fn can_change_decisions(&mut self, event: &Event<AddOnPlacementScore>, now: jiff::Timestamp) -> bool {
        let now_ns = now.as_nanosecond();
        match event {
            Event::Apply(object) | Event::InitApply(object) => {
                let key = key_of(object);
                if let (Event::InitApply(_), Some(listed)) = (event, self.listed.as_mut()) {
                    listed.insert(key.clone());
                }
                let renewal = is_renewal(self.last.get(&key), &object.status, now_ns);
                self.forget(&key);
                if let Some(until) = valid_until_ns(&object.status).filter(|until| *until >= now_ns) {
                    self.in_force_until.insert((until, key.clone()));
                }
                self.last.insert(key, object.status.clone());
                !renewal
            }
            Event::Delete(object) => {
                self.forget(&key_of(object));
                true
            }
            Event::Init => {
                self.listed = Some(HashSet::new());
                false
            }
            Event::InitDone => {
                let Some(listed) = self.listed.take() else {
                    return false;
                };
                let gone: Vec<ScoreKey> = self
                    .last
                    .keys()
                    .filter(|key| !listed.contains(*key))
                    .cloned()
                    .collect();
                for key in &gone {
                    self.forget(key);
                }
                !gone.is_empty()
            }
        }
    }

    /// [`ScoreUpdates::can_change_decisions`], and whether some score now expires sooner than
    /// any did before (the expiry wheel then waits for a later instant: wake it).
    pub fn observe(&mut self, event: &Event<AddOnPlacementScore>, now: jiff::Timestamp) -> (bool, bool) {
        let before = self.next_expiry();
        let changes = self.can_change_decisions(event, now);
        let sooner = self
            .next_expiry()
            .is_some_and(|after| before.is_none_or(|before| after < before));
        (changes, sooner)
    }

    fn forget(&mut self, key: &ScoreKey) {
        if let Some(until) = self.last.remove(key).and_then(|status| valid_until_ns(&status)) {
            self.in_force_until.remove(&(until, key.clone()));
        }
    }

    /// When the soonest score in force expires if it is not renewed first: its `validUntil`
    /// + 1 ns (a score is in force at its `validUntil`, as OCM reads it).
    pub fn next_expiry(&self) -> Option<i128> {
        self.in_force_until.first().map(|(until, _)| until + 1)
    }

    /// The scores whose current `validUntil` is before `now_ns`: they expired without a renewal,
    /// a change of what a decision reads (each is reported once).
    pub fn expired(&mut self, now_ns: i128) -> Vec<ScoreKey> {
        let mut out = Vec::new();
        while let Some(first) = self.in_force_until.first()
            && first.0 < now_ns
        {
            if let Some((_, key)) = self.in_force_until.pop_first() {
                out.push(key);
            }
        }
        out
    }
}

/// What a mode adds to the score watch: it sees each event and whether the update can change a
/// decision, and says whether the watch's subscribers are sent it.
type ScoreHook = Box<dyn FnMut(&Event<AddOnPlacementScore>, bool) -> bool + Send>;

/// What a mode adds to the expiry wheel: it sees each score that expired without a renewal
/// (namespace and name only) before the score is sent on the mode's expiry stream.
type ExpiryHook = Box<dyn FnMut(&AddOnPlacementScore) + Send>;

/// The watches of the engine's kinds, before they start: subscribe to them, then
/// [`PlacementWatches::spawn`]. Every change they deliver invalidates the snapshots, and so does
/// every score that expires without a renewal.
pub struct PlacementWatches {
    pub clusters: SharedWatch<ManagedCluster>,
    pub cluster_sets: SharedWatch<ManagedClusterSet>,
    pub bindings: SharedWatch<ManagedClusterSetBinding>,
    pub scores: SharedWatch<AddOnPlacementScore>,
    pub placements: SharedWatch<Placement>,
    pub decisions: SharedWatch<PlacementDecision>,
    score_hook: Option<ScoreHook>,
    expiry_hook: Option<(ExpiryHook, mpsc::UnboundedSender<AddOnPlacementScore>)>,
    snapshots: Arc<SnapshotCache>,
}

/// The running watches and the expiry wheel; dropping them stops all.
pub struct HubWatchTasks {
    _watches: [WatchTask; 6],
    _expiries: AbortOnDrop<()>,
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
            expiry_hook: None,
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

    /// The scores that expire without a renewal, as they do (namespace and name only, in the
    /// shape of the score watch's triggers), each seen by `hook` first.
    pub fn on_expiries<H>(
        &mut self,
        hook: H,
    ) -> impl Stream<Item = Result<AddOnPlacementScore, watcher::Error>> + Send + 'static + use<H>
    where
        H: FnMut(&AddOnPlacementScore) + Send + 'static,
    {
        use futures::StreamExt;
        let (sender, receiver) = mpsc::unbounded();
        self.expiry_hook = Some((Box::new(hook), sender));
        receiver.map(Ok)
    }

    /// Starts the six watches of the whole hub and the expiry wheel; they run until the tasks
    /// are dropped.
    pub fn spawn(self, client: &kube::Client) -> HubWatchTasks {
        let PlacementWatches {
            mut clusters,
            mut cluster_sets,
            mut bindings,
            mut scores,
            mut placements,
            mut decisions,
            score_hook,
            expiry_hook,
            snapshots,
        } = self;
        clusters.observe(invalidates(&snapshots));
        cluster_sets.observe(invalidates(&snapshots));
        bindings.observe(invalidates(&snapshots));
        placements.observe(invalidates(&snapshots));
        decisions.observe(invalidates(&snapshots));
        let updates = Arc::new(Mutex::new(ScoreUpdates::default()));
        // Wakes the wheel when a score expires sooner than the one it waits for.
        let sooner = Arc::new(Notify::new());
        let mut hook = score_hook;
        scores.notify_when({
            let (updates, sooner, snapshots) = (updates.clone(), sooner.clone(), snapshots.clone());
            move |event| {
                let (changes, earlier) = lock(&updates).observe(event, jiff::Timestamp::now());
                if earlier {
                    sooner.notify_one();
                }
                if changes {
                    snapshots.changed();
                }
                hook.as_mut().is_none_or(|hook| hook(event, changes))
            }
        });
        let mut expiry_hook = expiry_hook;
        let wheel = expiries::run(
            updates,
            sooner,
            || jiff::Timestamp::now().as_nanosecond(),
            move |expired| {
                snapshots.changed();
                tracing::debug!(scores = expired.len(), "scores expired without a renewal");
                let Some((hook, sender)) = expiry_hook.as_mut() else {
                    return;
                };
                for (namespace, name) in expired {
                    let score = AddOnPlacementScore {
                        metadata: ObjectMeta {
                            namespace: Some(namespace),
                            name: Some(name),
                            ..ObjectMeta::default()
                        },
                        status: None,
                    };
                    hook(&score);
                    // A closed channel only means the mode's controller has stopped.
                    let _ = sender.unbounded_send(score);
                }
            },
        );
        let everything = watcher::Config::default;
        HubWatchTasks {
            _watches: [
                clusters.spawn(Api::all(client.clone()), everything(), as_is),
                cluster_sets.spawn(Api::all(client.clone()), everything(), as_is),
                bindings.spawn(Api::all(client.clone()), everything(), as_is),
                scores.spawn(Api::all(client.clone()), everything(), as_is),
                placements.spawn(Api::all(client.clone()), everything(), as_is),
                decisions.spawn(Api::all(client.clone()), everything(), as_is),
            ],
            _expiries: AbortOnDrop::spawn(wheel),
        }
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

    const NONE: [ScoreKey; 0] = [];

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

        /// The expiry wheel at `now`: what expired without a renewal.
        fn expire(&mut self, now: jiff::Timestamp) -> Vec<ScoreKey> {
            let expired = self.updates.expired(now.as_nanosecond());
            if !expired.is_empty() {
                self.stores.snapshots.changed();
            }
            expired
        }

        fn cluster(&mut self, name: &str) {
            let mut cluster = ManagedCluster::default();
            cluster.metadata.name = Some(name.into());
            self.clusters.apply_watcher_event(&Event::Apply(cluster));
            self.stores.snapshots.changed();
        }
    }

    #[test]
    fn a_snapshot_is_built_once_per_change_and_again_when_a_score_in_it_expires_unrenewed() {
        let mut fed = Fed::new();
        fed.cluster("a");
        fed.cluster("b");
        fed.score(Event::Apply(score("a", 10, 1_100)), at(1_000));
        fed.score(Event::Apply(score("b", 10, 1_100)), at(1_000));
        let first = fed.stores.snapshot("apps", at(1_000)).expect("a snapshot");
        assert_eq!(fed.stores.snapshots.builds(), 1);
        let again = fed.stores.snapshot("apps", at(1_001)).expect("a snapshot");
        assert!(Arc::ptr_eq(&first, &again), "nothing changed: the same snapshot");

        // Renewals change nothing a decision reads, and take the scores past the validUntil the
        // snapshot holds: nothing expired, so nothing is built.
        for i in 1..=5 {
            fed.score(
                Event::Apply(score("a", 10, 1_100 + 60 * i)),
                at(1_000 + 60 * i - 30),
            );
            fed.score(
                Event::Apply(score("b", 10, 1_100 + 60 * i)),
                at(1_000 + 60 * i - 30),
            );
            assert_eq!(fed.expire(at(1_000 + 60 * i)), NONE);
        }
        let renewed = fed.stores.snapshot("apps", at(1_300)).expect("a snapshot");
        assert!(Arc::ptr_eq(&first, &renewed), "renewals rebuild nothing");
        assert_eq!(fed.stores.snapshots.builds(), 1);
        let expired = |snapshot: &HubSnapshot, cluster: &str, now: i64| {
            snapshot.score_expired_at(cluster, "resource-usage-score", at(now))
        };
        assert_eq!(
            expired(&renewed, "a", 1_300),
            Some(false),
            "past the validUntil it was built with, a renewed score is in force"
        );

        // b stops renewing; a does not. Past b's last validUntil (1,400) the wheel finds b alone.
        fed.score(Event::Apply(score("a", 10, 1_460)), at(1_370));
        assert_eq!(fed.expire(at(1_400)), NONE, "in force at its validUntil");
        assert_eq!(
            fed.expire(at(1_401)),
            [("b".to_string(), "resource-usage-score".to_string())]
        );
        let lapsed = fed.stores.snapshot("apps", at(1_401)).expect("a snapshot");
        assert!(!Arc::ptr_eq(&first, &lapsed));
        assert_eq!(fed.stores.snapshots.builds(), 2);
        assert_eq!(
            (expired(&lapsed, "a", 1_401), expired(&lapsed, "b", 1_401)),
            (Some(false), Some(true))
        );
        assert_eq!(fed.expire(at(1_402)), NONE, "reported once");
        // b is back: a change. A value changes, a cluster joins, another namespace asks: each
        // builds once.
        fed.score(Event::Apply(score("b", 10, 1_500)), at(1_403));
        let back = fed.stores.snapshot("apps", at(1_403)).expect("a snapshot");
        assert!(!Arc::ptr_eq(&lapsed, &back));
        fed.score(Event::Apply(score("a", 20, 1_500)), at(1_404));
        fed.stores.snapshot("apps", at(1_404)).expect("a snapshot");
        fed.cluster("c");
        fed.stores.snapshot("apps", at(1_405)).expect("a snapshot");
        fed.stores.snapshot("other", at(1_405)).expect("a snapshot");
        fed.stores.snapshot("other", at(1_406)).expect("a snapshot");
        assert_eq!(fed.stores.snapshots.builds(), 6);
    }

    #[test]
    fn the_wheel_holds_each_score_in_force_once_at_its_current_valid_until() {
        let mut updates = ScoreUpdates::default();
        use Event::{Apply, Delete, Init, InitApply, InitDone};
        let key = |cluster: &str| (cluster.to_string(), "resource-usage-score".to_string());
        assert_eq!(
            updates.observe(&Apply(score("a", 10, 1_100)), at(1_000)),
            (true, true)
        );
        assert_eq!(
            updates.observe(&Apply(score("b", 10, 1_050)), at(1_000)),
            (true, true),
            "sooner than a"
        );
        assert_eq!(updates.next_expiry(), Some(at(1_050).as_nanosecond() + 1));
        assert_eq!(
            updates.observe(&Apply(score("b", 10, 1_200)), at(1_010)),
            (false, false),
            "a renewal moves b later"
        );
        assert_eq!(updates.next_expiry(), Some(at(1_100).as_nanosecond() + 1));
        // Already expired when seen: nothing to wait for.
        updates.observe(&Apply(score("c", 10, 900)), at(1_010));
        assert_eq!(updates.expired(at(1_101).as_nanosecond()), [key("a")]);
        // Deleted: gone from the wheel.
        updates.observe(&Delete(score("b", 10, 1_200)), at(1_110));
        assert_eq!(updates.next_expiry(), None);
        // A re-list that no longer has an object: a change, and the object leaves the wheel.
        updates.observe(&Apply(score("d", 10, 2_000)), at(1_110));
        updates.observe(&Apply(score("e", 10, 2_000)), at(1_110));
        updates.observe(&Init, at(1_120));
        updates.observe(&InitApply(score("d", 10, 2_000)), at(1_120));
        assert_eq!(updates.observe(&InitDone, at(1_120)), (true, false));
        assert_eq!(updates.expired(at(3_000).as_nanosecond()), [key("d")]);
        updates.observe(&Init, at(3_000));
        updates.observe(&InitApply(score("d", 10, 2_000)), at(3_000));
        assert_eq!(
            updates.observe(&InitDone, at(3_000)),
            (false, false),
            "every object listed again"
        );
    }
}
