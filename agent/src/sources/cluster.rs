//! The `cluster` source: watches Nodes and Pods of the managed cluster and keeps the accounting
//! ledger current, one event at a time.
//!
//! Objects are decoded into the slim structs of `accounting::objects` and folded at once into the
//! ledger (the cluster scores) and the fits index (the `fits.<shape>` scores); nothing else of them
//! is cached. When new shapes need a resource the fits index does not track, the index is rebuilt
//! and both watches re-list into it ([`FitsHandle::set_shapes`]). Pods in phase Succeeded or Failed are filtered out by the API
//! server (field selector) and, should one still arrive, by the ledger.
//!
//! Freshness: the figures count as current only when both watches have completed their initial list,
//! neither is re-listing, neither has reported an error within [`ERROR_WINDOW`], and the API server
//! answers a cheap probe right now. Otherwise scores are not renewed.

use super::{Reading, SourceError};
use crate::accounting::{
    FitsIndex, FitsOptions, Ledger, ObjectError, ResourceSet, ShapeFits, ShapeSet, SlimNode, SlimPod,
};
use crate::metrics::{Metrics, WatchKind};
use futures::{StreamExt, TryStreamExt};
use kube::Client;
use kube::api::{Api, ListParams};
use kube::runtime::watcher::{self, Event};
use ocm_score_shell::sync::lock;
use ocm_score_shell::watch::WatchRetryExt;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, watch as signal};
use tokio::task::JoinHandle;

/// Pods in these phases hold no resources; the API server leaves them out of the watch.
pub const POD_FIELD_SELECTOR: &str = "status.phase!=Succeeded,status.phase!=Failed";

/// A watch error this recent makes the figures stale. A watch that is still failing reports again
/// within [`ocm_score_shell::watch::MAX_WATCH_BACKOFF`] plus a connection attempt, so once no error
/// has come for this long the watch is running again (a resumed watch emits nothing until something
/// changes, so silence is the only sign); any event clears the error at once.
pub const ERROR_WINDOW: Duration = Duration::from_secs(15);

#[derive(Debug, Default, Clone)]
struct WatchState {
    synced: bool,
    relisting: bool,
    last_error: Option<(Instant, String)>,
}

#[derive(Debug, Default)]
struct Health {
    nodes: WatchState,
    pods: WatchState,
}

impl Health {
    fn of(&mut self, kind: WatchKind) -> &mut WatchState {
        match kind {
            WatchKind::Nodes => &mut self.nodes,
            WatchKind::Pods => &mut self.pods,
        }
    }
}

/// What the watches feed: the ledger behind the cluster scores and the fits index behind the
/// `fits.<shape>` scores, updated together under one lock.
pub struct Accounts {
    pub ledger: Ledger,
    pub fits: FitsIndex,
}

impl Accounts {
    pub fn new(resources: ResourceSet, shapes: ShapeSet, options: FitsOptions) -> Self {
        Accounts {
            ledger: Ledger::new(resources),
            fits: FitsIndex::new(shapes, options),
        }
    }

    fn invalid_objects(&self) -> impl Iterator<Item = &ObjectError> {
        self.ledger.invalid_objects().chain(self.fits.invalid_objects())
    }
}

/// Shared state of the running cluster source.
pub struct ClusterSource {
    client: Client,
    accounts: Arc<Mutex<Accounts>>,
    health: Arc<Mutex<Health>>,
    synced: Arc<Notify>,
    relist: Arc<signal::Sender<u64>>,
    api_timeout: Duration,
    tasks: Vec<JoinHandle<()>>,
}

/// Gives the running cluster source new shapes (from the task that reads them).
#[derive(Clone)]
pub struct FitsHandle {
    accounts: Arc<Mutex<Accounts>>,
    health: Arc<Mutex<Health>>,
    relist: Arc<signal::Sender<u64>>,
}

impl FitsHandle {
    /// Counts `shapes` from now on. Shapes over the resources the index tracks take effect at once;
    /// others, and the first shapes of an index started without any (it kept no pods), need a new
    /// index, filled by a re-list of both watches (the figures are not current, so nothing is
    /// renewed, until both lists complete).
    /// Returns whether the counted shapes changed.
    pub fn set_shapes(&self, shapes: ShapeSet) -> bool {
        let mut accounts = lock(&self.accounts);
        let options = accounts.fits.options();
        if let Ok(changed) = accounts.fits.set_shapes(shapes.clone()) {
            return changed;
        }
        tracing::info!("the WorkloadShapes request new resources; re-listing nodes and pods to count them");
        accounts.fits = FitsIndex::new(shapes, options);
        let mut health = lock(&self.health);
        health.nodes.relisting = true;
        health.pods.relisting = true;
        // Under the accounts lock: a watch sees the new generation before its next event.
        self.relist.send_modify(|generation| *generation += 1);
        true
    }
}

impl ClusterSource {
    /// Starts the Node and Pod watches. `changed` is notified whenever the figures change.
    pub fn start(
        client: Client,
        accounts: Accounts,
        api_timeout: Duration,
        changed: Arc<Notify>,
        metrics: Arc<Metrics>,
    ) -> Self {
        let accounts = Arc::new(Mutex::new(accounts));
        let health = Arc::new(Mutex::new(Health::default()));
        let synced = Arc::new(Notify::new());
        let relist = Arc::new(signal::channel(0u64).0);
        let shared = Shared {
            accounts: accounts.clone(),
            health: health.clone(),
            changed,
            synced: synced.clone(),
            metrics,
            relist: relist.clone(),
        };
        let nodes = tokio::spawn(watch::<SlimNode>(
            Api::all(client.clone()),
            watcher::Config::default(),
            WatchKind::Nodes,
            shared.clone(),
        ));
        let pods = tokio::spawn(watch::<SlimPod>(
            Api::all(client.clone()),
            watcher::Config::default().fields(POD_FIELD_SELECTOR),
            WatchKind::Pods,
            shared,
        ));
        ClusterSource {
            client,
            accounts,
            health,
            synced,
            relist,
            api_timeout,
            tasks: vec![nodes, pods],
        }
    }

    /// A handle to change the shapes counted.
    pub fn fits_handle(&self) -> FitsHandle {
        FitsHandle {
            accounts: self.accounts.clone(),
            health: self.health.clone(),
            relist: self.relist.clone(),
        }
    }

    /// Whether both watches have completed their initial list.
    pub fn is_synced(&self) -> bool {
        let health = lock(&self.health);
        health.nodes.synced && health.pods.synced
    }

    /// Waits until both watches have completed their initial list.
    pub async fn wait_synced(&self) {
        loop {
            let notified = self.synced.notified();
            if self.is_synced() {
                return;
            }
            notified.await;
        }
    }

    /// The ledger and the fits index (the kubelet source needs each node's requests).
    pub fn accounts(&self) -> MutexGuard<'_, Accounts> {
        lock(&self.accounts)
    }

    /// Current figures and fits counts, or why there are none.
    pub async fn read(&self) -> Result<(Reading, Vec<ShapeFits>), SourceError> {
        self.check_watches()?;
        // A watch can sit silent on a dead connection; ask the API server directly.
        let nodes = Api::<SlimNode>::all(self.client.clone());
        let one = ListParams::default().limit(1);
        match tokio::time::timeout(self.api_timeout, nodes.list(&one)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(SourceError::Unreachable(e.to_string())),
            Err(_) => {
                return Err(SourceError::Unreachable(format!(
                    "no answer within {:?}",
                    self.api_timeout
                )));
            }
        }
        // The watches may have failed while the probe was in flight.
        self.check_watches()?;
        let mut accounts = lock(&self.accounts);
        if let Some(first) = accounts.invalid_objects().next() {
            return Err(SourceError::InvalidObjects {
                count: accounts.invalid_objects().count(),
                first: first.clone(),
            });
        }
        Ok((reading_of(&accounts.ledger), accounts.fits.fits()))
    }

    fn check_watches(&self) -> Result<(), SourceError> {
        let health = lock(&self.health);
        for (kind, state) in [(WatchKind::Nodes, &health.nodes), (WatchKind::Pods, &health.pods)] {
            if !state.synced {
                return Err(SourceError::NotSynced(kind.as_str()));
            }
            if state.relisting {
                return Err(SourceError::Relisting(kind.as_str()));
            }
            if let Some((at, message)) = &state.last_error
                && at.elapsed() < ERROR_WINDOW
            {
                return Err(SourceError::Watch {
                    kind: kind.as_str(),
                    ago_secs: at.elapsed().as_secs(),
                    message: message.clone(),
                });
            }
        }
        Ok(())
    }

    pub fn stop(&self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl Drop for ClusterSource {
    fn drop(&mut self) {
        self.stop();
    }
}

fn reading_of(ledger: &Ledger) -> Reading {
    Reading {
        source: "cluster",
        view: ledger.view(),
        detail: format!(
            "cluster: {} of {} nodes Ready and schedulable, {} pods holding resources",
            ledger.eligible_node_count(),
            ledger.known_nodes(),
            ledger.counted_pods()
        ),
    }
}

/// Lists Nodes and Pods once (for `once`): no watch, same accounting.
pub async fn read_once(
    client: Client,
    mut accounts: Accounts,
    timeout: Duration,
) -> Result<(Reading, Accounts), SourceError> {
    let params = ListParams::default().limit(500);
    let nodes = list_all::<SlimNode>(Api::all(client.clone()), params.clone(), timeout, "nodes").await?;
    for node in &nodes {
        if let Err(e) = SlimNode::apply(&mut accounts, node) {
            return Err(invalid(&accounts, e));
        }
    }
    let pods = list_all::<SlimPod>(
        Api::all(client),
        params.fields(POD_FIELD_SELECTOR),
        timeout,
        "pods",
    )
    .await?;
    accounts.ledger.reserve_pods(pods.len());
    accounts.fits.reserve_pods(pods.len());
    for pod in &pods {
        if let Err(e) = SlimPod::apply(&mut accounts, pod) {
            return Err(invalid(&accounts, e));
        }
    }
    Ok((reading_of(&accounts.ledger), accounts))
}

fn invalid(accounts: &Accounts, first: ObjectError) -> SourceError {
    SourceError::InvalidObjects {
        count: accounts.invalid_objects().count(),
        first,
    }
}

async fn list_all<K>(
    api: Api<K>,
    params: ListParams,
    timeout: Duration,
    kind: &'static str,
) -> Result<Vec<K>, SourceError>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut out = Vec::new();
    let mut params = params;
    loop {
        let page = tokio::time::timeout(timeout, api.list(&params))
            .await
            .map_err(|_| SourceError::List {
                kind,
                message: format!("no answer within {timeout:?}"),
            })?
            .map_err(|e| SourceError::List {
                kind,
                message: e.to_string(),
            })?;
        out.extend(page.items);
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(out),
        }
    }
}

#[derive(Clone)]
struct Shared {
    accounts: Arc<Mutex<Accounts>>,
    health: Arc<Mutex<Health>>,
    changed: Arc<Notify>,
    synced: Arc<Notify>,
    metrics: Arc<Metrics>,
    /// Bumped (under the accounts lock) when the fits index was rebuilt and needs a re-list.
    relist: Arc<signal::Sender<u64>>,
}

/// How an object kind feeds the ledger and the fits index. The `bool`s say whether a figure or a
/// count may have changed.
trait Accounted:
    kube::Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static
{
    fn apply(accounts: &mut Accounts, object: &Self) -> Result<bool, ObjectError>;
    fn delete(accounts: &mut Accounts, object: &Self) -> bool;
    fn begin_relist(accounts: &mut Accounts);
    fn finish_relist(accounts: &mut Accounts) -> bool;
}

/// Runs `change` on both, and says whether either moved; the ledger's error comes first.
fn both(
    accounts: &mut Accounts,
    ledger: impl FnOnce(&mut Ledger) -> Result<bool, ObjectError>,
    fits: impl FnOnce(&mut FitsIndex) -> Result<(), ObjectError>,
) -> Result<bool, ObjectError> {
    let before = accounts.fits.revision();
    let ledger = ledger(&mut accounts.ledger);
    let fits = fits(&mut accounts.fits);
    let fits_moved = accounts.fits.revision() != before;
    match (ledger, fits) {
        (Err(e), _) | (Ok(_), Err(e)) => Err(e),
        (Ok(changed), Ok(())) => Ok(changed || fits_moved),
    }
}

fn unfailing(result: bool) -> Result<bool, ObjectError> {
    Ok(result)
}

impl Accounted for SlimPod {
    fn apply(accounts: &mut Accounts, pod: &Self) -> Result<bool, ObjectError> {
        both(accounts, |l| l.apply_pod(pod), |f| f.apply_pod(pod))
    }
    fn delete(accounts: &mut Accounts, pod: &Self) -> bool {
        let namespace = pod.metadata.namespace.as_deref().unwrap_or_default();
        let name = pod.metadata.name.as_deref().unwrap_or_default();
        both(
            accounts,
            |l| unfailing(l.delete_pod(namespace, name)),
            |f| {
                f.delete_pod(namespace, name);
                Ok(())
            },
        )
        .unwrap_or(true)
    }
    fn begin_relist(accounts: &mut Accounts) {
        accounts.ledger.begin_pod_relist();
        accounts.fits.begin_pod_relist();
    }
    fn finish_relist(accounts: &mut Accounts) -> bool {
        both(
            accounts,
            |l| unfailing(l.finish_pod_relist()),
            |f| {
                f.finish_pod_relist();
                Ok(())
            },
        )
        .unwrap_or(true)
    }
}

impl Accounted for SlimNode {
    fn apply(accounts: &mut Accounts, node: &Self) -> Result<bool, ObjectError> {
        both(accounts, |l| l.apply_node(node), |f| f.apply_node(node))
    }
    fn delete(accounts: &mut Accounts, node: &Self) -> bool {
        let name = node.metadata.name.as_deref().unwrap_or_default();
        both(
            accounts,
            |l| unfailing(l.delete_node(name)),
            |f| {
                f.delete_node(name);
                Ok(())
            },
        )
        .unwrap_or(true)
    }
    fn begin_relist(accounts: &mut Accounts) {
        accounts.ledger.begin_node_relist();
        accounts.fits.begin_node_relist();
    }
    fn finish_relist(accounts: &mut Accounts) -> bool {
        both(
            accounts,
            |l| unfailing(l.finish_node_relist()),
            |f| {
                f.finish_node_relist();
                Ok(())
            },
        )
        .unwrap_or(true)
    }
}

async fn watch<K: Accounted>(api: Api<K>, config: watcher::Config, kind: WatchKind, shared: Shared) {
    let mut relist = shared.relist.subscribe();
    loop {
        // A new stream starts with a full list: what a rebuilt fits index needs.
        let generation = *relist.borrow_and_update();
        if !follow::<K>(&api, &config, kind, &shared, generation, &mut relist).await {
            return;
        }
    }
}

/// Follows one watch stream until the fits index asks for a re-list (`true`) or the stream ends.
async fn follow<K: Accounted>(
    api: &Api<K>,
    config: &watcher::Config,
    kind: WatchKind,
    shared: &Shared,
    generation: u64,
    relist: &mut signal::Receiver<u64>,
) -> bool {
    let mut events = watcher::watcher(api.clone(), config.clone())
        .watch_backoff()
        .boxed();
    loop {
        let next = tokio::select! {
            next = events.try_next() => next,
            _ = relist.changed() => return true,
        };
        match next {
            Ok(Some(event)) => {
                if !handle(event, kind, shared, generation) {
                    return true;
                }
            }
            Ok(None) => {
                tracing::error!(kind = kind.as_str(), "watch stream ended");
                return false;
            }
            Err(error) => {
                shared.metrics.watch_error(kind);
                tracing::warn!(kind = kind.as_str(), %error, "watch failed; retrying with backoff");
                lock(&shared.health).of(kind).last_error = Some((Instant::now(), error.to_string()));
                // Wake the publisher so a failure is reported without waiting for the next tick.
                shared.changed.notify_one();
            }
        }
    }
}

/// Applies one event; `false` when the fits index was rebuilt since this stream began (the event
/// is left to the re-list that follows).
fn handle<K: Accounted>(event: Event<K>, kind: WatchKind, shared: &Shared, generation: u64) -> bool {
    let mut accounts = lock(&shared.accounts);
    if *shared.relist.borrow() != generation {
        return false;
    }
    shared.metrics.watch_event(kind);
    if !matches!(event, Event::Init) {
        // The API server answered: the watch works again.
        lock(&shared.health).of(kind).last_error = None;
    }
    let changed = match event {
        Event::Init => {
            K::begin_relist(&mut accounts);
            lock(&shared.health).of(kind).relisting = true;
            false
        }
        Event::InitApply(object) => {
            report(K::apply(&mut accounts, &object), kind);
            false
        }
        Event::InitDone => {
            // A re-list that found what the ledger already held is no change.
            let changed = K::finish_relist(&mut accounts);
            let mut health = lock(&shared.health);
            let state = health.of(kind);
            state.relisting = false;
            state.synced = true;
            tracing::info!(
                kind = kind.as_str(),
                nodes = accounts.ledger.known_nodes(),
                pods = accounts.ledger.counted_pods(),
                "list complete"
            );
            shared.synced.notify_waiters();
            changed
        }
        Event::Apply(object) => report(K::apply(&mut accounts, &object), kind),
        Event::Delete(object) => K::delete(&mut accounts, &object),
    };
    shared
        .metrics
        .set_invalid_objects(accounts.invalid_objects().count());
    drop(accounts);
    if changed {
        shared.changed.notify_one();
    }
    true
}

fn report(result: Result<bool, ObjectError>, kind: WatchKind) -> bool {
    match result {
        Ok(changed) => changed,
        Err(error) => {
            tracing::warn!(kind = kind.as_str(), %error, "object not accounted");
            true
        }
    }
}

/// A client for the managed cluster: the given kubeconfig, else `$KUBECONFIG` / `~/.kube/config`, else
/// the in-cluster service account.
pub async fn connect(kubeconfig: Option<&std::path::Path>) -> Result<Client, String> {
    let config = match kubeconfig {
        Some(path) => {
            let kubeconfig =
                kube::config::Kubeconfig::read_from(path).map_err(|e| format!("{}: {e}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &kube::config::KubeConfigOptions::default())
                .await
                .map_err(|e| format!("{}: {e}", path.display()))?
        }
        None => kube::Config::infer().await.map_err(|e| e.to_string())?,
    };
    Client::try_from(config).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failing_watch_reports_again_within_the_error_window() {
        assert!(ERROR_WINDOW > ocm_score_shell::watch::MAX_WATCH_BACKOFF * 2);
    }
}
