//! The `ocm-score-hub tiering` mode in the process shell (`ocm_score_shell`: shutdown token, probe
//! server, leader elector): the watches, the controller, and leadership. A replica that loses the
//! Lease stops its controller (no more writes), drops its caches and competes again as a standby.

use super::config::{Settings, TieringArgs};
use super::metrics::Metrics;
use super::reconcile::{self, Context};
use super::reports::Reports;
use super::reservations::SharedLedger;
use super::snapshot::Stores;
use futures::channel::mpsc;
use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource, ResourceExt};
use ocm_score_shell::CancellationToken;
use ocm_score_shell::leader::{LeaderElector, Leadership};
use ocm_score_shell::probes::ControllerProbes;
use scheduler_core::api::tiering::TieredPlacement;
use scheduler_core::api::{
    AddOnPlacementScore, ManagedCluster, ManagedClusterSet, ManagedClusterSetBinding, Placement,
    PlacementDecision, WorkloadShape,
};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// Exit code for a configuration the process cannot start with.
const EXIT_CONFIG: u8 = 2;
/// The label OCM puts on a placement's decisions.
const PLACEMENT_LABEL: &str = "cluster.open-cluster-management.io/placement";
/// The events' reporting controller.
const REPORTER: &str = "ocm-score-tiering";

/// Runs until `shutdown` (SIGTERM or Ctrl-C). Exit code 2 for a bad configuration, 1 when the
/// process cannot run, 0 after a clean shutdown.
pub async fn run(args: TieringArgs, shutdown: CancellationToken) -> ExitCode {
    let (settings, leader_election) = match args.validate() {
        Ok(valid) => valid,
        Err(error) => {
            eprintln!("error: invalid configuration: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
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
    tracing::info!(workers = settings.workers, "tiering controller starting");
    match leader_election {
        None => lead(&client, &settings, &metrics, &probes, None, &shutdown).await,
        Some(le) => {
            let mut leadership = LeaderElector::new(client.clone(), le.config(&client)).spawn();
            while leadership.acquired(&shutdown).await {
                tracing::info!("leading: starting the controller");
                lead(
                    &client,
                    &settings,
                    &metrics,
                    &probes,
                    Some(&leadership),
                    &shutdown,
                )
                .await;
                if shutdown.is_cancelled() {
                    break;
                }
                tracing::warn!("leadership lost: controller stopped, standing by");
            }
            // The controller has stopped: release the Lease so a standby takes over at once.
            leadership.stop(Duration::from_secs(5)).await;
        }
    }
    server.stopped().await;
    ExitCode::SUCCESS
}

/// Life as the leader: run the controller until shutdown or until leadership is lost.
async fn lead(
    client: &Client,
    settings: &Settings,
    metrics: &Arc<Metrics>,
    probes: &Arc<ControllerProbes>,
    leadership: Option<&Leadership>,
    shutdown: &CancellationToken,
) {
    metrics.set_leader(true);
    probes.set_synced(false);
    probes.set_leading(true);
    let stop = shutdown.child_token();
    let loss = leadership.map(|leadership| {
        let mut leading = leadership.watch();
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                // A closed channel means the election ended: no longer leading either.
                _ = leading.wait_for(|leading| !*leading) => stop.cancel(),
                () = stop.cancelled() => {}
            }
        })
    });
    run_controller(
        client.clone(),
        settings.clone(),
        metrics.clone(),
        probes.clone(),
        stop.clone(),
    )
    .await;
    stop.cancel();
    if let Some(task) = loss {
        let _ = task.await;
    }
    probes.set_leading(false);
    metrics.set_leader(false);
}

/// A reflector over every object of a kind (managedFields dropped: nothing here reads them),
/// run in its own task so the store syncs whatever the controller is doing. Returns the stream of
/// objects added, changed or deleted, reduced to their metadata (the reconciler reads the store;
/// triggers only need names, namespaces and labels), and whether the first list is in the store.
///
/// `observe` sees every event first, before the triggers it causes reach the controller.
fn reflect<K, F>(
    client: &Client,
    writer: reflector::store::Writer<K>,
    tasks: &mut Vec<JoinHandle<()>>,
    mut observe: F,
) -> (
    impl Stream<Item = Result<K, watcher::Error>> + Send + 'static + use<K, F>,
    watch::Receiver<bool>,
)
where
    K: Resource<DynamicType = ()> + Clone + Debug + Default + DeserializeOwned + Send + Sync + 'static,
    F: FnMut(&watcher::Event<K>) + Send + 'static,
{
    let (sender, receiver) = mpsc::unbounded();
    let (listed_tx, listed) = watch::channel(false);
    let kind = K::kind(&()).to_string();
    let events = watcher(Api::<K>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .modify(|object: &mut K| object.managed_fields_mut().clear())
        .reflect(writer);
    tasks.push(tokio::spawn(events.for_each(move |event| {
        if let Ok(event) = &event {
            observe(event);
        }
        match event {
            Ok(
                watcher::Event::Apply(object)
                | watcher::Event::Delete(object)
                | watcher::Event::InitApply(object),
            ) => {
                let mut trigger = K::default();
                *trigger.meta_mut() = object.meta().clone();
                // A closed channel only means the controller has stopped.
                let _ = sender.unbounded_send(trigger);
            }
            Ok(watcher::Event::InitDone) => {
                listed_tx.send_replace(true);
            }
            Ok(watcher::Event::Init) => {}
            Err(error) => tracing::warn!(%kind, %error, "watch failed; retrying"),
        }
        futures::future::ready(())
    })));
    (receiver.map(Ok), listed)
}

/// For the kinds whose events need no observing beyond the store.
fn ignore<K>(_: &watcher::Event<K>) {}

fn every(store: &Store<TieredPlacement>) -> Vec<ObjectRef<TieredPlacement>> {
    store
        .state()
        .iter()
        .map(|tp| ObjectRef::from_obj(&**tp))
        .collect()
}

fn in_namespace(store: &Store<TieredPlacement>, namespace: Option<&str>) -> Vec<ObjectRef<TieredPlacement>> {
    store
        .state()
        .iter()
        .filter(|tp| tp.namespace().as_deref() == namespace)
        .map(|tp| ObjectRef::from_obj(&**tp))
        .collect()
}

/// The TieredPlacements whose child is `namespace/placement`.
fn owning(
    store: &Store<TieredPlacement>,
    namespace: Option<&str>,
    placement: Option<&str>,
) -> Vec<ObjectRef<TieredPlacement>> {
    let Some(placement) = placement else {
        return Vec::new();
    };
    store
        .state()
        .iter()
        .filter(|tp| {
            tp.namespace().as_deref() == namespace && tp.spec.child_name(&tp.name_any()) == placement
        })
        .map(|tp| ObjectRef::from_obj(&**tp))
        .collect()
}

/// Runs the controller until `stop` is cancelled.
async fn run_controller(
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    probes: Arc<ControllerProbes>,
    stop: CancellationToken,
) {
    let (tiered, tiered_w) = reflector::store::<TieredPlacement>();
    let (clusters, clusters_w) = reflector::store::<ManagedCluster>();
    let (cluster_sets, cluster_sets_w) = reflector::store::<ManagedClusterSet>();
    let (bindings, bindings_w) = reflector::store::<ManagedClusterSetBinding>();
    let (scores, scores_w) = reflector::store::<AddOnPlacementScore>();
    let (placements, placements_w) = reflector::store::<Placement>();
    let (decisions, decisions_w) = reflector::store::<PlacementDecision>();
    let (shapes, shapes_w) = reflector::store::<WorkloadShape>();
    let ledger = Arc::new(SharedLedger::new(settings.reservations));
    let mut tasks = Vec::new();
    let forget = {
        let ledger = ledger.clone();
        move |event: &watcher::Event<TieredPlacement>| {
            if let watcher::Event::Delete(tp) = event {
                ledger.forget(tp);
            }
        }
    };
    let (tiered_triggers, tiered_listed) = reflect(&client, tiered_w, &mut tasks, forget);
    let (cluster_triggers, clusters_listed) = reflect(&client, clusters_w, &mut tasks, ignore);
    let (set_triggers, sets_listed) = reflect(&client, cluster_sets_w, &mut tasks, ignore);
    // A report releases reservations before the reconciles it triggers plan with them.
    let report = {
        let (ledger, metrics) = (ledger.clone(), metrics.clone());
        let mut reports = Reports::default();
        move |event: &watcher::Event<AddOnPlacementScore>| {
            if let Some(cluster) = reports.observe(event) {
                ledger.report(&cluster, jiff::Timestamp::now(), &metrics);
            }
        }
    };
    let (score_triggers, scores_listed) = reflect(&client, scores_w, &mut tasks, report);
    let (binding_triggers, bindings_listed) = reflect(&client, bindings_w, &mut tasks, ignore);
    let (placement_triggers, placements_listed) = reflect(&client, placements_w, &mut tasks, ignore);
    let (decision_triggers, decisions_listed) = reflect(&client, decisions_w, &mut tasks, ignore);
    // Shapes only change the deduction across shapes: the next plan uses them.
    let (_, shapes_listed) = reflect(&client, shapes_w, &mut tasks, ignore);
    let stores = Stores {
        tiered: tiered.clone(),
        clusters,
        cluster_sets,
        bindings,
        scores,
        placements,
        decisions,
        shapes,
        listed: vec![
            ("TieredPlacements", tiered_listed),
            ("ManagedClusters", clusters_listed),
            ("ManagedClusterSets", sets_listed),
            ("ManagedClusterSetBindings", bindings_listed),
            ("AddOnPlacementScores", scores_listed),
            ("Placements", placements_listed),
            ("PlacementDecisions", decisions_listed),
            ("WorkloadShapes", shapes_listed),
        ],
    };
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: REPORTER.into(),
            instance: Some(settings.identity.clone()),
        },
    );
    let ctx = Arc::new(Context::new(
        client.clone(),
        stores.clone(),
        settings.clone(),
        metrics,
        recorder,
        ledger,
    ));
    {
        let (stores, probes, stop) = (stores.clone(), probes.clone(), stop.clone());
        tokio::spawn(async move {
            tokio::select! {
                synced = stores.synced() => match synced {
                    Ok(()) => {
                        probes.set_synced(true);
                        tracing::info!("hub caches synced");
                    }
                    Err(error) => tracing::error!(%error, "hub caches did not sync"),
                },
                () = stop.cancelled() => {}
            }
        });
    }

    let (all1, all2, all3) = (tiered.clone(), tiered.clone(), tiered.clone());
    let (ns1, owner1, owner2) = (tiered.clone(), tiered.clone(), tiered.clone());
    Controller::for_stream(tiered_triggers, tiered)
        .with_config(ControllerConfig::default().concurrency(settings.workers))
        .watches_stream(cluster_triggers, move |_: ManagedCluster| every(&all1))
        .watches_stream(set_triggers, move |_: ManagedClusterSet| every(&all2))
        .watches_stream(score_triggers, move |_: AddOnPlacementScore| every(&all3))
        .watches_stream(binding_triggers, move |b: ManagedClusterSetBinding| {
            in_namespace(&ns1, b.namespace().as_deref())
        })
        // By name rather than owner reference: a child whose reference was edited away, or a
        // child deleted, still brings its TieredPlacement back.
        .watches_stream(placement_triggers, move |p: Placement| {
            owning(&owner1, p.namespace().as_deref(), p.metadata.name.as_deref())
        })
        .watches_stream(decision_triggers, move |d: PlacementDecision| {
            let placement = d.labels().get(PLACEMENT_LABEL).cloned();
            owning(&owner2, d.namespace().as_deref(), placement.as_deref())
        })
        .graceful_shutdown_on(stop.clone().cancelled_owned())
        .run(reconcile::reconcile, reconcile::on_error, ctx)
        .for_each(|result| async move {
            match result {
                Ok(_) => {}
                // Failed reconciles were logged by the error policy.
                Err(kube::runtime::controller::Error::ReconcilerFailed(..)) => {}
                Err(error) => tracing::debug!(%error, "controller"),
            }
        })
        .await;
    for task in tasks {
        task.abort();
    }
}
