//! The `ocm-score-hub addon-manager` mode: the shared watches and the three controllers, run by the
//! replica holding the Lease, in the process shell (`ocm_score_shell`: shutdown token, probe server,
//! leader elector). Unlike the Thanos scorer, a manager that loses the Lease does not step down and
//! carry on: it stops its controllers and exits 1, and restarts as a standby with empty caches.

use super::config::{AddonManagerArgs, Settings};
use super::metrics::Metrics;
use super::reconcile::{self, Context, Stores, csr::csrs_of_cluster};
use super::{names, ownership, work};
use futures::channel::mpsc;
use futures::{Stream, StreamExt};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::{self, ObjectRef, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use ocm_score_shell::CancellationToken;
use ocm_score_shell::leader::{LeaderElector, Leadership};
use ocm_score_shell::probes::ControllerProbes;
use scheduler_core::api::{
    AddOnDeploymentConfig, AddOnPlacementScore, ClusterManagementAddOn, ManagedCluster, ManagedClusterAddOn,
    ManifestWork, PlacementDecision, well_known,
};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// Exit code for a configuration the process cannot start with.
const EXIT_CONFIG: u8 = 2;

/// Runs until `shutdown` (SIGTERM or Ctrl-C). Exit code 2 for a bad configuration, 1 when the
/// process cannot run or lost leadership, 0 after a clean shutdown.
pub async fn run(args: AddonManagerArgs, shutdown: CancellationToken) -> ExitCode {
    let leader_election = match args.validate() {
        Ok(leader_election) => leader_election,
        Err(message) => {
            eprintln!("error: invalid configuration: {message}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    if let Some(warning) = super::config::short_image_name(&args.agent_image) {
        tracing::warn!("{warning}");
    }
    let settings = args.settings();
    let client = match ocm_score_shell::client::client(args.kubeconfig.as_deref(), "--kubeconfig").await {
        Ok(client) => client,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let metrics = Arc::new(Metrics::default());
    metrics.set_leader(false);
    let render = {
        let metrics = metrics.clone();
        move || metrics.render()
    };
    let (probes, server) =
        match ControllerProbes::serve(args.probes.address(), render, shutdown.clone()).await {
            Ok(started) => started,
            Err(error) => {
                eprintln!("error: {error}");
                return ExitCode::FAILURE;
            }
        };
    let code = match leader_election {
        None => lead(client, settings, metrics, probes, None, shutdown.clone()).await,
        Some(le) => {
            let mut leadership = LeaderElector::new(client.clone(), le.config(&client)).spawn();
            let code = if leadership.acquired(&shutdown).await {
                lead(
                    client,
                    settings,
                    metrics,
                    probes,
                    Some(&leadership),
                    shutdown.clone(),
                )
                .await
            } else {
                ExitCode::SUCCESS
            };
            // The controllers have stopped: release the Lease so a standby takes over at once.
            leadership.stop(Duration::from_secs(5)).await;
            code
        }
    };
    server.stopped().await;
    code
}

/// Life as the leader: run the controllers until shutdown, or until leadership is lost.
async fn lead(
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    probes: Arc<ControllerProbes>,
    leadership: Option<&Leadership>,
    shutdown: CancellationToken,
) -> ExitCode {
    metrics.set_leader(true);
    probes.set_leading(true);
    let stop = shutdown.child_token();
    let loss = leadership.map(|leadership| {
        let mut leading = leadership.watch();
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                // A closed channel means the election ended: no longer leading either.
                _ = leading.wait_for(|leading| !*leading) => {
                    tracing::error!("stopping: leadership lost");
                    stop.cancel();
                    true
                }
                () = stop.cancelled() => false,
            }
        })
    });
    let result = run_controllers(client, settings, metrics.clone(), probes, stop.clone()).await;
    stop.cancel();
    let lost = match loss {
        Some(task) => task.await.unwrap_or(true),
        None => false,
    };
    metrics.set_leader(false);
    match result {
        Err(e) => {
            tracing::error!(error = %e, "addon-manager cannot run");
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
        Ok(()) if lost => ExitCode::FAILURE,
        Ok(()) => ExitCode::SUCCESS,
    }
}

/// A controller's share of a watch: a channel and what of each object it needs.
struct Subscriber<K> {
    sender: mpsc::UnboundedSender<K>,
    project: fn(&K) -> K,
}

/// Only the metadata: all that owner and name mappings look at (reconcilers read the full object
/// from the store), so queued triggers cost little memory.
fn metadata_only<K: kube::Resource + Default>(object: &K) -> K {
    let mut out = K::default();
    *out.meta_mut() = object.meta().clone();
    out
}

fn whole<K: Clone>(object: &K) -> K {
    object.clone()
}

/// Caches objects as they come (apart from managedFields).
fn as_is<K>(_: &mut K) {}

/// Scores change with every publication; only their owner references matter here.
fn without_status(score: &mut AddOnPlacementScore) {
    score.status = None;
}

/// One watch of a kind: it feeds a store the reconcilers read, and a channel per controller that
/// wants its events as triggers. The channels are unbounded so a busy controller never stalls the
/// watch (or the other controllers); they only ever hold what arrived since the consumer's last poll.
struct Watched<K>
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    store: reflector::Store<K>,
    writer: Writer<K>,
    subscribers: Vec<Subscriber<K>>,
    /// For logs.
    kind: String,
}

impl<K> Watched<K>
where
    K: kube::Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Default + Send + Sync,
{
    fn new() -> Self {
        Self::with_type(Default::default())
    }
}

impl<K> Watched<K>
where
    K: kube::Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    fn with_type(dyntype: K::DynamicType) -> Self {
        let kind = K::kind(&dyntype).to_string();
        let writer = Writer::new(dyntype);
        Watched {
            store: writer.as_reader(),
            writer,
            subscribers: Vec::new(),
            kind,
        }
    }

    /// Every object the watch delivers (added, changed, deleted, or listed again after a restart),
    /// as `project` shapes it.
    fn subscribe(
        &mut self,
        project: fn(&K) -> K,
    ) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static + use<K> {
        let (sender, rx) = mpsc::unbounded();
        self.subscribers.push(Subscriber { sender, project });
        rx.map(Ok)
    }

    /// Starts the watch; the task feeds the store and the subscribers until aborted. `compact`
    /// trims each object before it is cached.
    fn spawn(self, api: Api<K>, config: watcher::Config, compact: fn(&mut K)) -> JoinHandle<()> {
        let Watched {
            writer,
            subscribers,
            kind,
            ..
        } = self;
        let events = watcher(api, config)
            .default_backoff()
            .modify(move |object: &mut K| {
                // Nobody here reads managedFields; on objects as big as ManifestWorks they are a large share.
                object.managed_fields_mut().clear();
                compact(object);
            });
        let stream = reflector::reflector(writer, events);
        tokio::spawn(stream.for_each(move |event| {
            match event {
                Ok(
                    watcher::Event::Apply(object)
                    | watcher::Event::Delete(object)
                    | watcher::Event::InitApply(object),
                ) => {
                    for subscriber in &subscribers {
                        // A closed channel only means that controller has stopped.
                        let _ = subscriber.sender.unbounded_send((subscriber.project)(&object));
                    }
                }
                Ok(_) => {}
                Err(error) => tracing::warn!(%kind, %error, "watch failed; retrying"),
            }
            futures::future::ready(())
        }))
    }
}

/// A config object reduced to its identity: its subscriber only needs to know something changed.
fn config_metadata(object: &DynamicObject) -> DynamicObject {
    DynamicObject {
        types: object.types.clone(),
        metadata: object.metadata.clone(),
        data: serde_json::Value::Null,
    }
}

/// Runs the three controllers until `stop` is cancelled.
async fn run_controllers(
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    probes: Arc<ControllerProbes>,
    stop: CancellationToken,
) -> Result<(), reconcile::Error> {
    let addon = settings.addon.clone();
    let by_name = || watcher::Config::default().fields(&format!("metadata.name={addon}"));
    let by_label = || watcher::Config::default().labels(&format!("{}={addon}", names::ADDON_NAME_LABEL));

    let mut addons = Watched::<ManagedClusterAddOn>::new();
    let mut cmas = Watched::<ClusterManagementAddOn>::new();
    let mut clusters = Watched::<ManagedCluster>::new();
    let mut decisions = Watched::<PlacementDecision>::new();
    let mut works = Watched::<ManifestWork>::new();
    let mut roles = Watched::<Role>::new();
    let mut bindings = Watched::<RoleBinding>::new();
    let mut cluster_roles = Watched::<ClusterRole>::new();
    let mut cluster_bindings = Watched::<ClusterRoleBinding>::new();
    let mut csrs = Watched::<CertificateSigningRequest>::new();
    let mut scores = Watched::<AddOnPlacementScore>::new();
    // Config objects are read raw (their spec hash must cover exactly what the server holds).
    let config_resource = ApiResource::erase::<AddOnDeploymentConfig>(&());
    let mut configs = Watched::<DynamicObject>::with_type(config_resource.clone());

    let stores = Stores {
        addons: addons.store.clone(),
        cmas: cmas.store.clone(),
        clusters: clusters.store.clone(),
        decisions: decisions.store.clone(),
        configs: configs.store.clone(),
        works: works.store.clone(),
        roles: roles.store.clone(),
        bindings: bindings.store.clone(),
        cluster_roles: cluster_roles.store.clone(),
        cluster_bindings: cluster_bindings.store.clone(),
        csrs: csrs.store.clone(),
        scores: scores.store.clone(),
    };
    let ctx = Arc::new(Context::new(
        client.clone(),
        settings.clone(),
        stores.clone(),
        metrics,
    ));
    let shutdown = || stop.clone().cancelled_owned();
    let controller_config = ControllerConfig::default().concurrency(settings.workers);

    // A config change re-renders every add-on; so does a change of the ClusterManagementAddOn.
    let everything_changed = futures::stream::select(
        configs.subscribe(config_metadata).map(drop),
        cmas.subscribe(metadata_only).map(drop),
    );
    let addon_controller = Controller::for_stream(addons.subscribe(metadata_only), addons.store.clone())
        .with_config(controller_config.clone())
        .owns_stream(works.subscribe(metadata_only))
        .owns_stream(roles.subscribe(metadata_only))
        .owns_stream(bindings.subscribe(metadata_only))
        .watches_stream(clusters.subscribe(metadata_only), {
            let addon_name = addon.clone();
            move |cluster: ManagedCluster| {
                Some(ObjectRef::<ManagedClusterAddOn>::new(&addon_name).within(&cluster.name_any()))
            }
        })
        .watches_stream(decisions.subscribe(whole), {
            let addon_name = addon.clone();
            move |decision: PlacementDecision| {
                let clusters: Vec<String> = decision
                    .status
                    .iter()
                    .flat_map(|s| &s.decisions)
                    .map(|d| d.cluster_name.clone())
                    .collect();
                let addon_name = addon_name.clone();
                clusters
                    .into_iter()
                    .map(move |c| ObjectRef::<ManagedClusterAddOn>::new(&addon_name).within(&c))
            }
        })
        // A score without its owner reference gets one from its add-on's next pass.
        .watches_stream(scores.subscribe(metadata_only), {
            let addon_name = addon.clone();
            move |score: AddOnPlacementScore| {
                (!ownership::names_addon_owner(&score.metadata, &addon_name)).then(|| {
                    ObjectRef::<ManagedClusterAddOn>::new(&addon_name)
                        .within(&score.namespace().unwrap_or_default())
                })
            }
        })
        .reconcile_all_on(everything_changed)
        .graceful_shutdown_on(shutdown())
        .run(
            reconcile::addon::reconcile,
            reconcile::addon::on_error,
            ctx.clone(),
        )
        .for_each(|_| async {});

    let the_cma = {
        let addon_name = addon.clone();
        move || Some(ObjectRef::<ClusterManagementAddOn>::new(&addon_name))
    };
    let install_controller = Controller::for_stream(cmas.subscribe(metadata_only), cmas.store.clone())
        .with_config(controller_config.clone())
        // The agents' read access to WorkloadShapes is the ClusterManagementAddOn's.
        .owns_stream(cluster_roles.subscribe(metadata_only))
        .owns_stream(cluster_bindings.subscribe(metadata_only))
        .watches_stream(addons.subscribe(metadata_only), {
            let the_cma = the_cma.clone();
            move |_: ManagedClusterAddOn| the_cma()
        })
        .watches_stream(clusters.subscribe(metadata_only), {
            let the_cma = the_cma.clone();
            move |_: ManagedCluster| the_cma()
        })
        .watches_stream(decisions.subscribe(metadata_only), {
            let the_cma = the_cma.clone();
            move |_: PlacementDecision| the_cma()
        })
        // The spec hashes in its status follow the configs (the store holds only our CMA).
        .reconcile_all_on(configs.subscribe(config_metadata).map(drop))
        .graceful_shutdown_on(shutdown())
        .run(
            reconcile::install::reconcile,
            reconcile::install::on_error,
            ctx.clone(),
        )
        .for_each(|_| async {});

    let csr_store = csrs.store.clone();
    let csr_store_for_clusters = csrs.store.clone();
    let csr_controller = Controller::for_stream(csrs.subscribe(metadata_only), csrs.store.clone())
        .with_config(controller_config)
        .watches_stream(
            addons.subscribe(metadata_only),
            move |addon: ManagedClusterAddOn| {
                csrs_of_cluster(&csr_store, &addon.namespace().unwrap_or_default())
            },
        )
        .watches_stream(
            clusters.subscribe(metadata_only),
            move |cluster: ManagedCluster| csrs_of_cluster(&csr_store_for_clusters, &cluster.name_any()),
        )
        .graceful_shutdown_on(shutdown())
        .run(reconcile::csr::reconcile, reconcile::csr::on_error, ctx.clone())
        .for_each(|_| async {});

    let watches = [
        addons.spawn(Api::all(client.clone()), by_name(), as_is),
        cmas.spawn(Api::all(client.clone()), by_name(), as_is),
        clusters.spawn(Api::all(client.clone()), watcher::Config::default(), as_is),
        decisions.spawn(Api::all(client.clone()), watcher::Config::default(), as_is),
        // Works are the big objects: list them in small pages so a restart never holds many at once.
        works.spawn(
            Api::all(client.clone()),
            by_label().page_size(50),
            work::compact_for_cache,
        ),
        roles.spawn(Api::all(client.clone()), by_label(), as_is),
        bindings.spawn(Api::all(client.clone()), by_label(), as_is),
        cluster_roles.spawn(Api::all(client.clone()), by_label(), as_is),
        cluster_bindings.spawn(Api::all(client.clone()), by_label(), as_is),
        csrs.spawn(Api::all(client.clone()), by_label(), as_is),
        scores.spawn(
            Api::all(client.clone()),
            watcher::Config::default().fields(&format!("metadata.name={}", well_known::RESOURCE_USAGE_SCORE)),
            without_status,
        ),
        configs.spawn(
            Api::all_with(client.clone(), &config_resource),
            watcher::Config::default(),
            as_is,
        ),
    ];
    // Decide nothing on half a picture: a restart must not re-create what is merely not listed yet.
    tokio::select! {
        synced = stores.synced() => synced?,
        _ = shutdown() => {
            watches.iter().for_each(JoinHandle::abort);
            return Ok(());
        }
    }
    probes.set_synced(true);
    tracing::info!("hub caches synced");
    tokio::join!(addon_controller, install_controller, csr_controller);
    for watch in watches {
        watch.abort();
    }
    Ok(())
}
