//! The hub at scale on a real control plane, shared by the CI-size test
//! (`tests/tests/control_plane_scale.rs`) and the full-size benchmark
//! (`tests/benches/control_plane_scale.rs`):
//! - [`load_fleet`]: bare ManagedClusters (no klusterlet) and their namespaces created through the
//!   API by a parallel loader, each marked joined and available as its klusterlet would;
//! - [`addon_manager_at_scale`]: `manifests/hub` installed with kubectl and our add-on manager run
//!   as its Deployment says: time until every cluster has its ManifestWork, the requests the
//!   manager made (from the hub's audit log), its peak RSS, and its requests in a quiet window once
//!   it has settled, with the passes (resyncs) it counted in that window;
//! - [`score_to_decision`]: Placements prioritizing by `resource-usage-score`, one cluster's score
//!   changed at a time so that it enters or leaves every Placement's decisions: how long OCM's
//!   placement controller takes to rewrite the PlacementDecisions.
//!
//! Each scenario checks correctness as it goes and fails naming what was wrong; the figures are the
//! caller's to assert on or print. The loader's own time is never part of a figure.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use ocm_score_api::well_known::{ADDON_NAME_LABEL, PLACEMENT_LABEL, RESOURCE_USAGE_SCORE};
use ocm_score_api::{
    AddOnPlacementScore, ManagedCluster, ManagedClusterSetBinding, ManifestWork, Placement, PlacementDecision,
};
use serde_json::{Value, json};

use super::addon::{
    ADDON, HUB_NAMESPACE, decision_clusters, hub_snapshot, kubectl, start_manager_with, workspace_binary,
};
use super::process::Component;
use super::{ControlPlane, Error};

/// Who the loader is, in `managedFields`.
const LOADER_FIELD_MANAGER: &str = "ocm-score-scale-loader";
/// Requests the loader keeps in flight: enough to keep a 2-core API server busy.
const LOADER_PARALLELISM: usize = 16;
/// The lease duration the loader gives each cluster: OCM's lease controller declares a cluster
/// unreachable after five of them without a renewal, so an hour keeps a bare fleet available
/// for the whole run.
const LEASE_DURATION_SECONDS: i64 = 3600;
const CLUSTER_GROUP: &str = "cluster.open-cluster-management.io";
const UNREACHABLE: &str = "cluster.open-cluster-management.io/unreachable";
const UNAVAILABLE: &str = "cluster.open-cluster-management.io/unavailable";
/// The ServiceAccount `manifests/hub` runs the add-on manager as.
const MANAGER_USER: &str = "system:serviceaccount:ocm-score:ocm-score-addon-manager";
/// How long the manager must go without a write before it counts as settled.
const SETTLED_AFTER: Duration = Duration::from_secs(10);

fn resource<K: Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

fn kube_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Kube { what, source }
}

fn check(what: impl Into<String>, problem: impl Into<String>) -> Error {
    Error::Check {
        what: what.into(),
        problem: problem.into(),
    }
}

fn object(value: Value) -> Result<DynamicObject, Error> {
    serde_json::from_value(value).map_err(|e| Error::Options(format!("an object the scenario builds: {e}")))
}

/// Creates `object`; one that exists already is fine (a loader run twice, or OCM first).
async fn create(api: &Api<DynamicObject>, value: Value, what: &str) -> Result<(), Error> {
    match api.create(&PostParams::default(), &object(value)?).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(source) => Err(Error::Kube {
            what: what.to_owned(),
            source,
        }),
    }
}

/// Timestamps to the second, as Kubernetes writes them.
fn timestamp(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `count` cluster names `<prefix>-00000`.. (same width, so no name is part of another).
pub fn fleet_names(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}-{i:05}")).collect()
}

/// Creates each cluster's namespace and ManagedCluster (accepted, with a long lease), marks it
/// joined and available as its klusterlet would, and returns once OCM's taint controller has
/// left every one of them untainted: a fleet Placements can select. Returns the loader's time.
pub async fn load_fleet(hub: &Client, names: &[String], timeout: Duration) -> Result<Duration, Error> {
    let started = Instant::now();
    let namespaces: Api<DynamicObject> = Api::all_with(hub.clone(), &resource::<Namespace>());
    let clusters: Api<DynamicObject> = Api::all_with(hub.clone(), &resource::<ManagedCluster>());
    futures::stream::iter(names)
        .map(|name| {
            let (namespaces, clusters) = (namespaces.clone(), clusters.clone());
            async move {
                create(
                    &namespaces,
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
                    &format!("creating namespace {name}"),
                )
                .await?;
                create(
                    &clusters,
                    json!({"apiVersion": format!("{CLUSTER_GROUP}/v1"), "kind": "ManagedCluster",
                           "metadata": {"name": name},
                           "spec": {"hubAcceptsClient": true, "leaseDurationSeconds": LEASE_DURATION_SECONDS}}),
                    &format!("creating ManagedCluster {name}"),
                )
                .await?;
                mark_available(&clusters, name).await
            }
        })
        .buffer_unordered(LOADER_PARALLELISM)
        .try_collect::<Vec<()>>()
        .await?;

    // OCM's registration controller writes the same status (HubAccepted) from its own cache, and
    // may drop a condition written in between: mark again whatever is not available yet.
    let wanted: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    let deadline = started + timeout;
    loop {
        let list = clusters
            .list(&ListParams::default())
            .await
            .map_err(kube_error("listing ManagedClusters"))?;
        let mut pending: Vec<(String, bool)> = Vec::new();
        let mut found = 0;
        for mc in &list.items {
            let name = mc.metadata.name.clone().unwrap_or_default();
            if !wanted.contains(name.as_str()) {
                continue;
            }
            found += 1;
            let available = conditions_true(&mc.data, "ManagedClusterConditionAvailable");
            let tainted = mc
                .data
                .pointer("/spec/taints")
                .and_then(Value::as_array)
                .is_some_and(|ts| {
                    ts.iter()
                        .any(|t| t["key"] == UNREACHABLE || t["key"] == UNAVAILABLE)
                });
            if !available || tainted {
                pending.push((name, available));
            }
        }
        if pending.is_empty() && found == wanted.len() {
            return Ok(started.elapsed());
        }
        if Instant::now() >= deadline {
            return Err(check(
                "loading the fleet",
                format!(
                    "after {:?}, {} of {} clusters found, not yet available and untainted: {:?}",
                    started.elapsed(),
                    found,
                    wanted.len(),
                    pending.iter().take(5).collect::<Vec<_>>()
                ),
            ));
        }
        for (name, _) in pending.iter().filter(|(_, available)| !available) {
            mark_available(&clusters, name).await?;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The klusterlet's part of a cluster's status: Joined and Available, server-side applied (the
/// conditions are a map keyed by type, so OCM's own conditions stay).
async fn mark_available(clusters: &Api<DynamicObject>, name: &str) -> Result<(), Error> {
    let now = timestamp(jiff::Timestamp::now());
    let condition = |kind: &str, reason: &str| {
        json!({"type": kind, "status": "True", "reason": reason, "lastTransitionTime": now,
               "message": "written by the scale loader, as the cluster's klusterlet would"})
    };
    let status = json!({
        "apiVersion": format!("{CLUSTER_GROUP}/v1"), "kind": "ManagedCluster", "metadata": {"name": name},
        "status": {"conditions": [
            condition("ManagedClusterJoined", "ManagedClusterJoined"),
            condition("ManagedClusterConditionAvailable", "ManagedClusterAvailable"),
        ]},
    });
    clusters
        .patch_status(
            name,
            &PatchParams::apply(LOADER_FIELD_MANAGER).force(),
            &Patch::Apply(&status),
        )
        .await
        .map_err(kube_error(format!("marking ManagedCluster {name} available")))?;
    Ok(())
}

fn conditions_true(object: &Value, kind: &str) -> bool {
    super::addon::condition_true(object.pointer("/status/conditions"), kind)
}

/// Requests counted from the audit log, by verb. Requests on Leases (leader election) are counted
/// apart: renewing a lease is how a leader stays leader, not a read or write of the add-on's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    pub get: usize,
    pub list: usize,
    pub watch: usize,
    pub create: usize,
    pub update: usize,
    pub patch: usize,
    pub delete: usize,
    /// Leader election: gets and updates of the leader Lease.
    pub lease: usize,
    /// The first few writes (verb, resource, namespace/name), to name them when there should be none.
    pub write_samples: Vec<String>,
}

impl Requests {
    pub fn writes(&self) -> usize {
        self.create + self.update + self.patch + self.delete
    }

    pub fn total(&self) -> usize {
        self.get + self.list + self.watch + self.writes() + self.lease
    }

    fn add(&mut self, other: &Requests) {
        self.get += other.get;
        self.list += other.list;
        self.watch += other.watch;
        self.create += other.create;
        self.update += other.update;
        self.patch += other.patch;
        self.delete += other.delete;
        self.lease += other.lease;
        let room = 10usize.saturating_sub(self.write_samples.len());
        self.write_samples
            .extend(other.write_samples.iter().take(room).cloned());
    }

    /// Counts one audit event of `user`'s: a watch once its response has started, every other
    /// request once it has completed (each request is counted once).
    fn count(&mut self, event: &Value, user: &str) {
        if event.pointer("/user/username").and_then(Value::as_str) != Some(user) {
            return;
        }
        let verb = event["verb"].as_str().unwrap_or_default();
        let stage = event["stage"].as_str().unwrap_or_default();
        let counted_stage = if verb == "watch" {
            "ResponseStarted"
        } else {
            "ResponseComplete"
        };
        if stage != counted_stage {
            return;
        }
        let reference = &event["objectRef"];
        let lease = reference["apiGroup"] == "coordination.k8s.io" && reference["resource"] == "leases";
        let slot = match verb {
            _ if lease => &mut self.lease,
            "get" => &mut self.get,
            "list" => &mut self.list,
            "watch" => &mut self.watch,
            "create" => &mut self.create,
            "update" => &mut self.update,
            "patch" => &mut self.patch,
            "delete" | "deletecollection" => &mut self.delete,
            _ => return,
        };
        *slot += 1;
        if !lease && !matches!(verb, "get" | "list" | "watch") && self.write_samples.len() < 10 {
            let sub = reference["subresource"]
                .as_str()
                .map(|s| format!("/{s}"))
                .unwrap_or_default();
            self.write_samples.push(format!(
                "{verb} {}{sub} {}/{} ({})",
                reference["resource"].as_str().unwrap_or_default(),
                reference["namespace"].as_str().unwrap_or_default(),
                reference["name"].as_str().unwrap_or_default(),
                event.pointer("/responseStatus/code").unwrap_or(&Value::Null),
            ));
        }
    }
}

/// Reads the hub's audit log from where it last stopped: the requests of one user since then.
pub struct AuditCursor {
    path: PathBuf,
    user: String,
    offset: u64,
}

impl AuditCursor {
    /// A cursor at the current end of the log: it counts what comes after.
    pub fn at_end(path: &Path, user: &str) -> Result<Self, Error> {
        let mut cursor = AuditCursor {
            path: path.to_owned(),
            user: user.to_owned(),
            offset: 0,
        };
        cursor.advance()?;
        Ok(cursor)
    }

    /// The requests logged since the last call (complete lines only; a line being written is read
    /// next time).
    pub fn advance(&mut self) -> Result<Requests, Error> {
        use std::io::{Read, Seek, SeekFrom};
        let what = || format!("reading the audit log {}", self.path.display());
        let mut requests = Requests::default();
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            // Written on the first audited request.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(requests),
            Err(source) => return Err(Error::Io { what: what(), source }),
        };
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(self.offset))
            .and_then(|_| file.read_to_end(&mut bytes))
            .map_err(|source| Error::Io { what: what(), source })?;
        let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        for line in bytes[..complete].split(|b| *b == b'\n') {
            if let Ok(event) = serde_json::from_slice::<Value>(line) {
                requests.count(&event, &self.user);
            }
        }
        self.offset += complete as u64;
        Ok(requests)
    }
}

/// Objects of one kind as a watch sees them, with the time each event arrived: how the scenarios
/// time what OCM and the manager do without polling the API server under test.
struct Watched {
    state: Mutex<WatchedState>,
    changed: tokio::sync::watch::Sender<u64>,
}

#[derive(Default)]
struct WatchedState {
    objects: BTreeMap<String, DynamicObject>,
    /// Objects of a relist under way.
    relisting: Option<BTreeMap<String, DynamicObject>>,
    /// When each event (after the first list) arrived.
    arrivals: Vec<Instant>,
    synced: bool,
}

/// A running watch, stopped on drop.
struct Watch {
    watched: Arc<Watched>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn key(object: &DynamicObject) -> String {
    format!(
        "{}/{}",
        object.metadata.namespace.as_deref().unwrap_or_default(),
        object.metadata.name.as_deref().unwrap_or_default()
    )
}

impl Watch {
    fn start(api: Api<DynamicObject>, config: watcher::Config) -> Watch {
        let (changed, _) = tokio::sync::watch::channel(0);
        let watched = Arc::new(Watched {
            state: Mutex::new(WatchedState::default()),
            changed,
        });
        let shared = watched.clone();
        let task = tokio::spawn(async move {
            let mut events = watcher(api, config).default_backoff().boxed();
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(error) => {
                        tracing::warn!(%error, "scale watch");
                        continue;
                    }
                };
                {
                    let mut state = shared.lock();
                    match event {
                        watcher::Event::Init => state.relisting = Some(BTreeMap::new()),
                        watcher::Event::InitApply(o) => {
                            if let Some(relist) = state.relisting.as_mut() {
                                relist.insert(key(&o), o);
                            }
                        }
                        watcher::Event::InitDone => {
                            if let Some(relist) = state.relisting.take() {
                                state.objects = relist;
                            }
                            if state.synced {
                                state.arrivals.push(Instant::now());
                            }
                            state.synced = true;
                        }
                        watcher::Event::Apply(o) => {
                            state.objects.insert(key(&o), o);
                            state.arrivals.push(Instant::now());
                        }
                        watcher::Event::Delete(o) => {
                            state.objects.remove(&key(&o));
                            state.arrivals.push(Instant::now());
                        }
                    }
                }
                shared.changed.send_modify(|n| *n += 1);
            }
        });
        Watch { watched, task }
    }

    /// Waits until `test` finds what it looks for in the synced objects, or `deadline`.
    async fn until<T>(
        &self,
        deadline: Instant,
        mut test: impl FnMut(&WatchedState) -> Option<T>,
    ) -> Option<T> {
        let mut changes = self.watched.changed.subscribe();
        loop {
            {
                let state = self.watched.lock();
                if state.synced
                    && let Some(found) = test(&state)
                {
                    return Some(found);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, changes.changed()).await {
                Ok(Ok(())) => {}
                // The watch task ended (it never does unless aborted) or time is up.
                Ok(Err(_)) | Err(_) => return None,
            }
        }
    }
}

impl Watched {
    fn lock(&self) -> MutexGuard<'_, WatchedState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The manager's peak and current resident set (KiB), from `/proc/<pid>/status`.
fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}

/// The add-on manager scenario's size and patience.
#[derive(Clone, Debug)]
pub struct AddonScale {
    pub clusters: usize,
    /// The manager's `--resync-period` (shorter than its default, so the quiet window holds resyncs).
    pub resync: Duration,
    /// How long the settled manager is watched for requests.
    pub quiet: Duration,
    /// Patience for each step (loading, deciding, converging, settling).
    pub timeout: Duration,
}

/// What [`addon_manager_at_scale`] measured.
#[derive(Clone, Debug)]
pub struct AddonScaleReport {
    pub clusters: usize,
    /// The loader's time (kept out of every other figure).
    pub load: Duration,
    /// From the install until OCM's placement decided every cluster (before the manager starts).
    pub install_decided: Duration,
    /// From the manager's start until every cluster's ManifestWork existed.
    pub all_works: Duration,
    pub until_all_works: Requests,
    /// From the manager's start until it had gone [`SETTLED_AFTER`] without a write.
    pub settled: Duration,
    pub until_settled: Requests,
    /// The quiet window after settling, and the requests made in it.
    pub quiet: Duration,
    pub resync: Duration,
    pub in_quiet: Requests,
    /// What the manager's own `/metrics` counted in the quiet window: its passes over add-ons
    /// (the resyncs the window is about), the ones that failed, and the writes it sent.
    pub in_quiet_counted: QuietCounts,
    pub peak_rss_kib: u64,
    pub rss_kib: u64,
}

/// Our add-on manager on `scale.clusters` bare clusters (prefix `fleet`): load them, install
/// `manifests/hub` with kubectl, wait for OCM to decide the install Placement, start the manager as
/// its Deployment says (with `--resync-period`), and measure until every ManifestWork exists, until
/// the manager settles, and over a quiet window. Every ManifestWork is checked: the agent for its
/// own cluster, identical to every other cluster's but for the cluster's name, owned by that
/// cluster's ManagedClusterAddOn. `cp` must audit `ocm-score` ([`super::Builder::audit_namespace`]).
pub async fn addon_manager_at_scale(
    cp: &ControlPlane,
    dir: &Path,
    scale: &AddonScale,
    progress: &dyn Fn(&str),
) -> Result<AddonScaleReport, Error> {
    let audit_log = cp
        .audit_log()
        .ok_or_else(|| Error::Options(format!("the control plane must audit {HUB_NAMESPACE}")))?;
    let hub = cp.hub_client().await?;
    let names = fleet_names("fleet", scale.clusters);
    let load = load_fleet(&hub, &names, scale.timeout).await?;
    progress(&format!(
        "{} clusters loaded in {:.1} s",
        names.len(),
        load.as_secs_f64()
    ));

    let installed = Instant::now();
    kubectl(&cp.hub_kubeconfig(), &["apply", "-k", "manifests/hub"])?;
    let decisions: Api<DynamicObject> =
        Api::namespaced_with(hub.clone(), HUB_NAMESPACE, &resource::<PlacementDecision>());
    let decided = Watch::start(
        decisions,
        watcher::Config::default().labels(&format!("{PLACEMENT_LABEL}=all-clusters")),
    );
    let everyone: BTreeSet<String> = names.iter().cloned().collect();
    decided
        .until(installed + scale.timeout, |state| {
            let decided: BTreeSet<String> = decision_clusters(state.objects.values()).into_iter().collect();
            (decided == everyone).then_some(())
        })
        .await
        .ok_or_else(|| {
            check(
                "OCM's install Placement all-clusters",
                format!("did not decide all {} clusters", names.len()),
            )
        })?;
    drop(decided);
    let install_decided = installed.elapsed();
    progress(&format!(
        "Placement all-clusters decided {} clusters {:.1} s after the install",
        names.len(),
        install_decided.as_secs_f64()
    ));

    let work_name = format!("addon-{ADDON}-deploy-0");
    let works_api: Api<DynamicObject> = Api::all_with(hub.clone(), &resource::<ManifestWork>());
    let works = Watch::start(
        works_api,
        watcher::Config::default().fields(&format!("metadata.name={work_name}")),
    );
    works
        .until(Instant::now() + scale.timeout, |state| Some(state.synced))
        .await;
    let mut audit = AuditCursor::at_end(&audit_log, MANAGER_USER)?;
    let resync = format!("--resync-period={}s", scale.resync.as_secs().max(1));
    // The clock starts when the process does: after the ServiceAccount token, the Deployment read
    // and the (no-op) build of the binary that precede the spawn.
    let mut manager = start_manager_with(cp, dir, &[resync]).await?;
    let started = Instant::now();
    let all_works_at = works
        .until(started + scale.timeout, |state| {
            let clusters: BTreeSet<&str> = state
                .objects
                .values()
                .filter_map(|w| w.metadata.namespace.as_deref())
                .filter(|ns| everyone.contains(*ns))
                .collect();
            (clusters.len() == everyone.len()).then(|| state.arrivals.last().copied().unwrap_or(started))
        })
        .await;
    manager.check_running()?;
    let Some(all_works_at) = all_works_at else {
        let have = works.watched.lock().objects.len();
        return Err(not_converged(
            &manager,
            format!(
                "{have} of {} ManifestWorks within {:?}",
                names.len(),
                scale.timeout
            ),
        ));
    };
    let all_works = all_works_at.saturating_duration_since(started);
    let until_all_works = audit.advance()?;
    progress(&format!(
        "every ManifestWork exists {:.1} s after the manager started",
        all_works.as_secs_f64()
    ));
    let agent_image = agent_image(&hub).await?;
    {
        let state = works.watched.lock();
        check_works(state.objects.values(), &names, &agent_image)?;
    }

    // Settled: no write for SETTLED_AFTER.
    let mut until_settled = until_all_works.clone();
    let mut last_write = Instant::now();
    let mut last_writes = until_all_works.write_samples.clone();
    loop {
        manager.check_running()?;
        let more = audit.advance()?;
        if more.writes() > 0 {
            last_write = Instant::now();
            last_writes = more.write_samples.clone();
        }
        until_settled.add(&more);
        if last_write.elapsed() >= SETTLED_AFTER {
            break;
        }
        if started.elapsed() > scale.timeout {
            return Err(not_converged(
                &manager,
                format!(
                    "the manager still writes {:?} after its start, e.g. {last_writes:?}",
                    scale.timeout
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let settled = last_write.saturating_duration_since(started);
    progress(&format!(
        "the manager settled (last write {:.1} s after its start); watching a quiet {:?}",
        settled.as_secs_f64(),
        scale.quiet
    ));

    // The quiet window: an observation of fixed length, as "no write in a minute" is a claim
    // about a minute. Its claim is only worth something if the manager's periodic passes ran in
    // it: its own counters, read at both ends, say how many passes there were.
    let counted_before = quiet_counters(&manager).await?;
    tokio::time::sleep(scale.quiet).await;
    manager.check_running()?;
    let counted_after = quiet_counters(&manager).await?;
    let in_quiet = audit.advance()?;
    let in_quiet_counted = QuietCounts {
        addon_passes: counted_after.addon_passes - counted_before.addon_passes,
        failed_passes: counted_after.failed_passes - counted_before.failed_passes,
        writes: counted_after.writes - counted_before.writes,
    };
    let (peak_rss_kib, rss_kib) = memory_kib(manager.pid());
    {
        let state = works.watched.lock();
        check_works(state.objects.values(), &names, &agent_image)?;
    }
    manager.terminate();
    manager.wait_or_kill(Duration::from_secs(15));
    Ok(AddonScaleReport {
        clusters: names.len(),
        load,
        install_decided,
        all_works,
        until_all_works,
        settled,
        until_settled,
        quiet: scale.quiet,
        resync: scale.resync,
        in_quiet,
        in_quiet_counted,
        peak_rss_kib,
        rss_kib,
    })
}

/// The add-on manager's counters over the quiet window, from its `/metrics` at the window's start
/// and end.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuietCounts {
    /// Passes of the `addon` controller (one per ManagedClusterAddOn and pass): with nothing
    /// changing, only the periodic requeue (`--resync-period`) brings them.
    pub addon_passes: f64,
    /// Passes of any controller that failed (a failed pass writes nothing, and proves nothing).
    pub failed_passes: f64,
    /// Writes the manager sent, by its own count (the audit log's view is [`Requests`]).
    pub writes: f64,
}

/// The counters [`QuietCounts`] is the difference of, read now from the manager's `/metrics`.
async fn quiet_counters(manager: &Component) -> Result<QuietCounts, Error> {
    let metrics = super::observe::scrape(manager)
        .await
        .ok_or_else(|| not_converged(manager, "its /metrics did not answer".into()))?;
    Ok(QuietCounts {
        addon_passes: metrics.sum("ocm_score_addon_reconciles_total", &[("controller", "addon")]),
        failed_passes: metrics.sum("ocm_score_addon_reconcile_errors_total", &[]),
        writes: metrics.sum("ocm_score_addon_writes_total", &[]),
    })
}

fn not_converged(manager: &Component, problem: String) -> Error {
    check("the add-on manager", format!("{problem}\n{}", manager.tail()))
}

/// The agent image the installed Deployment gives the manager (`--agent-image=`).
async fn agent_image(hub: &Client) -> Result<String, Error> {
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(hub.clone(), HUB_NAMESPACE);
    let deployment = deployments
        .get("ocm-score-addon-manager")
        .await
        .map_err(kube_error("reading the add-on manager's Deployment"))?;
    deployment
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|p| p.containers.into_iter().next())
        .and_then(|c| c.args)
        .unwrap_or_default()
        .iter()
        .find_map(|a| a.strip_prefix("--agent-image=").map(str::to_owned))
        .ok_or_else(|| check("the add-on manager's Deployment", "no --agent-image argument"))
}

/// Every cluster has exactly one deploy work, labelled for the add-on and owned by the cluster's
/// ManagedClusterAddOn, whose agent Deployment runs `agent_image` for that cluster; and all works
/// are the same but for the cluster's name.
fn check_works<'a>(
    works: impl Iterator<Item = &'a DynamicObject>,
    clusters: &[String],
    agent_image: &str,
) -> Result<(), Error> {
    let by_cluster: BTreeMap<&str, &DynamicObject> = works
        .filter_map(|w| w.metadata.namespace.as_deref().map(|ns| (ns, w)))
        .collect();
    let mut reference: Option<(String, String)> = None;
    for cluster in clusters {
        let what = format!("{cluster}: ManifestWork addon-{ADDON}-deploy-0");
        let work = by_cluster
            .get(cluster.as_str())
            .ok_or_else(|| check(&what, "missing"))?;
        let label = work
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(ADDON_NAME_LABEL));
        if label.map(String::as_str) != Some(ADDON) {
            return Err(check(&what, format!("label {ADDON_NAME_LABEL} is {label:?}")));
        }
        let owned = work
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "ManagedClusterAddOn" && o.name == ADDON);
        if !owned {
            return Err(check(
                &what,
                format!(
                    "not owned by ManagedClusterAddOn {ADDON}: {:?}",
                    work.metadata.owner_references
                ),
            ));
        }
        let manifests = work
            .data
            .pointer("/spec/workload/manifests")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let container = manifests
            .iter()
            .find(|m| m["kind"] == "Deployment")
            .and_then(|d| d.pointer("/spec/template/spec/containers/0"))
            .ok_or_else(|| check(&what, "no agent Deployment among its manifests"))?;
        if container["image"] != agent_image {
            return Err(check(
                &what,
                format!("agent image {}, not {agent_image}", container["image"]),
            ));
        }
        let cluster_arg = format!("--cluster-name={cluster}");
        let args = container["args"].as_array().cloned().unwrap_or_default();
        if !args.iter().any(|a| a == cluster_arg.as_str()) {
            return Err(check(
                &what,
                format!("the agent's args lack {cluster_arg}: {args:?}"),
            ));
        }
        let spec = work.data["spec"]
            .to_string()
            .replace(cluster.as_str(), "<cluster>");
        match &reference {
            None => reference = Some((cluster.clone(), spec)),
            Some((first, expected)) if *expected != spec => {
                return Err(check(
                    &what,
                    format!("differs from {first}'s but for the cluster name:\n{spec}\nvs\n{expected}"),
                ));
            }
            Some(_) => {}
        }
    }
    if by_cluster.len() != clusters.len() {
        return Err(check(
            "deploy ManifestWorks",
            format!("{} for {} clusters", by_cluster.len(), clusters.len()),
        ));
    }
    Ok(())
}

/// The score-to-decision scenario's size and patience.
#[derive(Clone, Debug)]
pub struct ScoreToDecision {
    pub clusters: usize,
    pub placements: usize,
    pub changes: usize,
    /// Patience for loading, the first decisions, and each change.
    pub timeout: Duration,
    /// After each change settles, also compare OCM's decisions with `ocm-score-hub simulate` on a
    /// snapshot taken with kubectl (slow at full size; the CI test does it).
    pub check_with_simulate: bool,
}

/// One score change and how long OCM took to follow it.
#[derive(Clone, Debug)]
pub struct ChangeTiming {
    pub cluster: String,
    pub value: i64,
    /// Whether the cluster entered the decisions (else it left them).
    pub entered: bool,
    /// From the score write until the first rewritten PlacementDecision arrived.
    pub first: Duration,
    /// From the score write until every Placement's decisions were the new ones.
    pub all: Duration,
    /// PlacementDecision events (writes by OCM's placement controller) from the score write until
    /// the decisions were the new ones.
    pub decision_events: usize,
    /// How many Placements OCM had given the cluster before the write, and after it.
    pub placements_with_cluster: (usize, usize),
    /// How many Placements' decisions OCM changed (before the write vs after).
    pub placements_changed: usize,
}

/// What [`score_to_decision`] measured.
#[derive(Clone, Debug)]
pub struct ScoreToDecisionReport {
    pub clusters: usize,
    pub placements: usize,
    pub load: Duration,
    /// From the first Placement's creation until every Placement decided (scores in place).
    pub first_decisions: Duration,
    pub changes: Vec<ChangeTiming>,
}

/// Where the scenario's Placements live (bound to the `global` cluster set).
pub const PLACEMENT_NAMESPACE: &str = "scale-placements";
/// The score the Placements prioritize by.
pub const SCORE_NAME: &str = "cpuClusterAvailable";
/// The highest-ranked clusters start with distinct scores 90, 89, ..; a Placement takes 1..=TOP.
const TOP: usize = 10;
/// The score that puts a cluster ahead of every other.
const ENTERING_SCORE: i64 = 100;

/// A cluster's score before any change: the first [`TOP`] distinct and high, the rest at or below 0.
fn initial_score(index: usize) -> i64 {
    if index < TOP {
        90 - index as i64
    } else {
        -((index * 37 % 100) as i64)
    }
}

/// How many clusters Placement `index` asks for.
fn placement_size(index: usize) -> usize {
    1 + index % TOP
}

fn placement_name(index: usize) -> String {
    format!("scale-{index:03}")
}

/// What OCM decides for a Placement of `size` clusters prioritized by one AddOn score with weight 1
/// (mode Exact): the highest scores, ties to the smaller name; sorted by name.
pub fn top_clusters(scores: &BTreeMap<String, i64>, size: usize) -> Vec<String> {
    let mut ranked: Vec<(&String, i64)> = scores.iter().map(|(c, s)| (c, *s)).collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let mut top: Vec<String> = ranked.into_iter().take(size).map(|(c, _)| c.clone()).collect();
    top.sort();
    top
}

/// The change of step `step`: an outsider is raised above everyone (it enters every Placement's
/// decisions and each Placement's last cluster leaves), then put back (the reverse); the next pair
/// moves the next outsider.
fn change(step: usize, names: &[String]) -> (usize, i64, bool) {
    let index = TOP + (step / 2) % (names.len() - TOP);
    if step.is_multiple_of(2) {
        (index, ENTERING_SCORE, true)
    } else {
        (index, initial_score(index), false)
    }
}

/// OCM's placement controller following our scores: `clusters` bare clusters (prefix `score`),
/// each with a `resource-usage-score` as its agent would publish it; `placements` Placements in
/// [`PLACEMENT_NAMESPACE`] of 1..=10 clusters prioritized by [`SCORE_NAME`]; then `changes` score
/// writes, one cluster at a time, each timed until OCM's PlacementDecisions are the new top
/// clusters of every Placement (checked exactly, and with `simulate` when asked).
pub async fn score_to_decision(
    cp: &ControlPlane,
    dir: &Path,
    scenario: &ScoreToDecision,
    progress: &dyn Fn(&str),
) -> Result<ScoreToDecisionReport, Error> {
    if scenario.clusters <= TOP {
        return Err(Error::Options(format!(
            "score to decision needs more than {TOP} clusters, got {}",
            scenario.clusters
        )));
    }
    let hub = cp.hub_client().await?;
    let names = fleet_names("score", scenario.clusters);
    let load_started = Instant::now();
    load_fleet(&hub, &names, scenario.timeout).await?;

    let valid_until = timestamp(jiff::Timestamp::now() + jiff::SignedDuration::from_hours(12));
    let score_api = resource::<AddOnPlacementScore>();
    let mut scores: BTreeMap<String, i64> = BTreeMap::new();
    futures::stream::iter(names.iter().enumerate())
        .map(|(index, cluster)| {
            let api: Api<DynamicObject> = Api::namespaced_with(hub.clone(), cluster, &score_api);
            let valid_until = valid_until.clone();
            async move {
                create(
                    &api,
                    json!({"apiVersion": format!("{CLUSTER_GROUP}/v1alpha1"), "kind": "AddOnPlacementScore",
                           "metadata": {"name": RESOURCE_USAGE_SCORE, "namespace": cluster}}),
                    &format!("creating {cluster}'s score"),
                )
                .await?;
                write_score(&api, cluster, initial_score(index), &valid_until).await
            }
        })
        .buffer_unordered(LOADER_PARALLELISM)
        .try_collect::<Vec<()>>()
        .await?;
    for (index, cluster) in names.iter().enumerate() {
        scores.insert(cluster.clone(), initial_score(index));
    }
    let namespaces: Api<DynamicObject> = Api::all_with(hub.clone(), &resource::<Namespace>());
    create(
        &namespaces,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PLACEMENT_NAMESPACE}}),
        "creating the Placements' namespace",
    )
    .await?;
    let bindings: Api<DynamicObject> = Api::namespaced_with(
        hub.clone(),
        PLACEMENT_NAMESPACE,
        &resource::<ManagedClusterSetBinding>(),
    );
    create(
        &bindings,
        json!({"apiVersion": format!("{CLUSTER_GROUP}/v1beta2"), "kind": "ManagedClusterSetBinding",
               "metadata": {"name": "global", "namespace": PLACEMENT_NAMESPACE},
               "spec": {"clusterSet": "global"}}),
        "binding the global cluster set",
    )
    .await?;
    let load = load_started.elapsed();
    progress(&format!(
        "{} clusters with scores loaded in {:.1} s",
        names.len(),
        load.as_secs_f64()
    ));

    let decisions_api: Api<DynamicObject> =
        Api::namespaced_with(hub.clone(), PLACEMENT_NAMESPACE, &resource::<PlacementDecision>());
    let decisions = Watch::start(decisions_api, watcher::Config::default());
    decisions
        .until(Instant::now() + scenario.timeout, |state| Some(state.synced))
        .await;
    let placements: Api<DynamicObject> =
        Api::namespaced_with(hub.clone(), PLACEMENT_NAMESPACE, &resource::<Placement>());
    let created = Instant::now();
    for index in 0..scenario.placements {
        create(
            &placements,
            json!({
                "apiVersion": format!("{CLUSTER_GROUP}/v1beta1"), "kind": "Placement",
                "metadata": {"name": placement_name(index), "namespace": PLACEMENT_NAMESPACE},
                "spec": {
                    "numberOfClusters": placement_size(index),
                    "clusterSets": ["global"],
                    "prioritizerPolicy": {"mode": "Exact", "configurations": [{
                        "scoreCoordinate": {"type": "AddOn",
                                            "addOn": {"resourceName": RESOURCE_USAGE_SCORE, "scoreName": SCORE_NAME}},
                        "weight": 1,
                    }]},
                },
            }),
            &format!("creating Placement {}", placement_name(index)),
        )
        .await?;
    }
    let expected = |scores: &BTreeMap<String, i64>| -> BTreeMap<String, Vec<String>> {
        (0..scenario.placements)
            .map(|i| (placement_name(i), top_clusters(scores, placement_size(i))))
            .collect()
    };
    let want = expected(&scores);
    decisions
        .until(created + scenario.timeout, |state| {
            (decided_by_placement(&state.objects) == want).then_some(())
        })
        .await
        .ok_or_else(|| {
            let state = decisions.watched.lock();
            mismatch(
                "the first decisions",
                &decided_by_placement(&state.objects),
                &want,
                &cp.log_tail("hub-placement-controller", 20),
            )
        })?;
    let first_decisions = created.elapsed();
    progress(&format!(
        "{} Placements decided {:.1} s after their creation",
        scenario.placements,
        first_decisions.as_secs_f64()
    ));
    if scenario.check_with_simulate {
        simulate_agrees(cp, dir, &want).await?;
    }

    let mut timings = Vec::with_capacity(scenario.changes);
    for step in 0..scenario.changes {
        let (index, value, entered) = change(step, &names);
        let cluster = &names[index];
        scores.insert(cluster.clone(), value);
        let want = expected(&scores);
        let api: Api<DynamicObject> = Api::namespaced_with(hub.clone(), cluster, &score_api);
        let (arrived_before, decided_before) = {
            let state = decisions.watched.lock();
            (state.arrivals.len(), decided_by_placement(&state.objects))
        };
        let written = Instant::now();
        write_score(&api, cluster, value, &valid_until).await?;
        let done = decisions
            .until(written + scenario.timeout, |state| {
                let decided = decided_by_placement(&state.objects);
                (decided == want).then(|| {
                    let first = state.arrivals.get(arrived_before).copied().unwrap_or(written);
                    let last = state.arrivals.last().copied().unwrap_or(written);
                    (first, last, state.arrivals.len() - arrived_before, decided)
                })
            })
            .await;
        let Some((first, last, decision_events, decided_after)) = done else {
            let state = decisions.watched.lock();
            return Err(mismatch(
                &format!("after {cluster}'s score became {value} (change {})", step + 1),
                &decided_by_placement(&state.objects),
                &want,
                &cp.log_tail("hub-placement-controller", 20),
            ));
        };
        let with_cluster = |decided: &BTreeMap<String, Vec<String>>| {
            decided.values().filter(|c| c.contains(cluster)).count()
        };
        timings.push(ChangeTiming {
            cluster: cluster.clone(),
            value,
            entered,
            first: first.saturating_duration_since(written),
            all: last.saturating_duration_since(written),
            decision_events,
            placements_with_cluster: (with_cluster(&decided_before), with_cluster(&decided_after)),
            placements_changed: decided_after
                .iter()
                .filter(|(p, c)| decided_before.get(*p) != Some(*c))
                .count(),
        });
        if scenario.check_with_simulate {
            simulate_agrees(cp, dir, &want).await?;
        }
    }
    Ok(ScoreToDecisionReport {
        clusters: names.len(),
        placements: scenario.placements,
        load,
        first_decisions,
        changes: timings,
    })
}

/// Writes a cluster's score as its agent does: one score, and how long it is valid.
async fn write_score(
    api: &Api<DynamicObject>,
    cluster: &str,
    value: i64,
    valid_until: &str,
) -> Result<(), Error> {
    api.patch_status(
        RESOURCE_USAGE_SCORE,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "scores": [{"name": SCORE_NAME, "value": value}],
            "validUntil": valid_until,
        }})),
    )
    .await
    .map_err(kube_error(format!("writing {cluster}'s score")))?;
    Ok(())
}

/// Each Placement's decided clusters (sorted), from its PlacementDecisions.
fn decided_by_placement(decisions: &BTreeMap<String, DynamicObject>) -> BTreeMap<String, Vec<String>> {
    let mut by_placement: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for decision in decisions.values() {
        let Some(placement) = decision
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(PLACEMENT_LABEL))
        else {
            continue;
        };
        by_placement
            .entry(placement.clone())
            .or_default()
            .extend(decision_clusters([decision]));
    }
    by_placement
        .into_iter()
        .map(|(p, clusters)| (p, clusters.into_iter().collect()))
        .collect()
}

fn mismatch(
    when: &str,
    got: &BTreeMap<String, Vec<String>>,
    want: &BTreeMap<String, Vec<String>>,
    log: &str,
) -> Error {
    let wrong: Vec<String> = want
        .iter()
        .filter(|(p, w)| got.get(*p) != Some(*w))
        .take(5)
        .map(|(p, w)| format!("{p}: OCM decided {:?}, expected {w:?}", got.get(p)))
        .collect();
    check(
        format!("OCM's PlacementDecisions {when}"),
        format!(
            "{} of {} Placements differ, e.g.\n{}\n--- placement controller:\n{log}",
            want.iter().filter(|(p, w)| got.get(*p) != Some(*w)).count(),
            want.len(),
            wrong.join("\n")
        ),
    )
}

/// `ocm-score-hub simulate` on a kubectl snapshot of the hub predicts `want` for every Placement of
/// [`PLACEMENT_NAMESPACE`].
async fn simulate_agrees(
    cp: &ControlPlane,
    dir: &Path,
    want: &BTreeMap<String, Vec<String>>,
) -> Result<(), Error> {
    let snapshot = dir.join("scale-snapshot.yaml");
    std::fs::write(&snapshot, hub_snapshot(&cp.hub_kubeconfig())?).map_err(|source| Error::Io {
        what: format!("writing {}", snapshot.display()),
        source,
    })?;
    let program = workspace_binary("ocm-score-hub")?;
    let out = tokio::process::Command::new(&program)
        .args(["simulate", "-f"])
        .arg(&snapshot)
        .args(["-o", "json"])
        .output()
        .await
        .map_err(|source| Error::Io {
            what: format!("running {} simulate", program.display()),
            source,
        })?;
    if !out.status.success() {
        return Err(check(
            "ocm-score-hub simulate",
            format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr)),
        ));
    }
    let simulated: Vec<Value> = serde_json::from_slice(&out.stdout)
        .map_err(|e| check("ocm-score-hub simulate", format!("output is not JSON: {e}")))?;
    let predicted: BTreeMap<String, Vec<String>> = simulated
        .iter()
        .filter_map(|p| {
            let name = p["name"]
                .as_str()?
                .strip_prefix(&format!("{PLACEMENT_NAMESPACE}/"))?;
            let mut decisions: Vec<String> = p["decisions"]
                .as_array()?
                .iter()
                .filter_map(|d| d.as_str().map(str::to_owned))
                .collect();
            decisions.sort();
            Some((name.to_owned(), decisions))
        })
        .collect();
    if predicted != *want {
        return Err(mismatch(
            "as simulate predicts them",
            &predicted,
            want,
            "(simulate's prediction is 'OCM decided' above)",
        ));
    }
    Ok(())
}

/// The median and the 99th percentile (nearest rank) of `samples`.
pub fn median_p99(samples: &[Duration]) -> (Duration, Duration) {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = |q: f64| {
        let n = sorted.len();
        if n == 0 {
            return Duration::ZERO;
        }
        let index = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
        sorted[index]
    };
    (rank(0.5), rank(0.99))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_clusters_rank_by_score_then_name() {
        let scores: BTreeMap<String, i64> = [("c", 5), ("a", 7), ("b", 7), ("d", -1)]
            .into_iter()
            .map(|(c, s)| (c.to_owned(), s))
            .collect();
        assert_eq!(top_clusters(&scores, 1), ["a"]);
        assert_eq!(top_clusters(&scores, 3), ["a", "b", "c"]);
        assert_eq!(top_clusters(&scores, 9), ["a", "b", "c", "d"]);
    }

    #[test]
    fn every_change_moves_one_cluster_in_or_out_of_every_placement() {
        let names = fleet_names("score", 15);
        let mut scores: BTreeMap<String, i64> = names
            .iter()
            .enumerate()
            .map(|(i, c)| (c.clone(), initial_score(i)))
            .collect();
        let before: Vec<Vec<String>> = (0..TOP)
            .map(|i| top_clusters(&scores, placement_size(i)))
            .collect();
        for step in 0..12 {
            let (index, value, entered) = change(step, &names);
            scores.insert(names[index].clone(), value);
            for size in 1..=TOP {
                let top = top_clusters(&scores, size);
                assert_eq!(top.contains(&names[index]), entered, "step {step}, size {size}");
            }
            if !entered {
                let after: Vec<Vec<String>> = (0..TOP)
                    .map(|i| top_clusters(&scores, placement_size(i)))
                    .collect();
                assert_eq!(after, before, "step {step} restores the initial decisions");
            }
        }
    }

    #[test]
    fn median_and_p99_by_nearest_rank() {
        let samples: Vec<Duration> = (1..=50).map(Duration::from_millis).collect();
        assert_eq!(
            median_p99(&samples),
            (Duration::from_millis(25), Duration::from_millis(50))
        );
        assert_eq!(median_p99(&[]), (Duration::ZERO, Duration::ZERO));
    }

    #[test]
    fn audit_events_count_once_per_request_and_leases_apart() {
        let event = |verb: &str, stage: &str, group: &str, resource: &str| {
            json!({"stage": stage, "verb": verb, "user": {"username": MANAGER_USER},
                   "objectRef": {"apiGroup": group, "resource": resource, "namespace": "n", "name": "x"},
                   "responseStatus": {"code": 200}})
        };
        let mut requests = Requests::default();
        for e in [
            event(
                "watch",
                "ResponseStarted",
                "work.open-cluster-management.io",
                "manifestworks",
            ),
            event(
                "watch",
                "ResponseComplete",
                "work.open-cluster-management.io",
                "manifestworks",
            ),
            event(
                "create",
                "ResponseComplete",
                "work.open-cluster-management.io",
                "manifestworks",
            ),
            event("get", "ResponseComplete", "coordination.k8s.io", "leases"),
            event("update", "ResponseComplete", "coordination.k8s.io", "leases"),
            event("list", "ResponseComplete", "", "namespaces"),
        ] {
            requests.count(&e, MANAGER_USER);
        }
        let mut other = event("patch", "ResponseComplete", "", "secrets");
        other["user"]["username"] = json!("someone-else");
        requests.count(&other, MANAGER_USER);
        assert_eq!(
            (requests.watch, requests.create, requests.lease, requests.list),
            (1, 1, 2, 1)
        );
        assert_eq!((requests.writes(), requests.total()), (1, 5));
        assert_eq!(requests.write_samples, ["create manifestworks n/x (200)"]);
    }
}
