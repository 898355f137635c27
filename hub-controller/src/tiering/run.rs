//! The `ocm-score-hub tiering` mode in the process shell (`ocm_score_shell`: shutdown token, probe
//! server, leader elector): the watches, the controller, and leadership. A replica that loses the
//! Lease stops its controller (no more writes), drops its caches and competes again as a standby.

use super::args::{Settings, TieringArgs};
use super::metrics::Metrics;
use super::reconcile::{self, Context};
use super::reports::Reports;
use super::reservations::SharedLedger;
use super::score_updates::Holdings;
use super::snapshot::{Stores, without_manifests};
use crate::hub_cache::PlacementWatches;
use futures::StreamExt;
use kube::api::Api;
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use ocm_score_api::crd::tiered_placement::MANIFEST_WORK_REPLICA_SET_LABEL;
use ocm_score_api::crd::tiered_placement::TieredPlacement;
use ocm_score_api::{
    AddOnPlacementScore, ManagedCluster, ManagedClusterSet, ManagedClusterSetBinding, ManifestWork,
    Placement, PlacementDecision, WorkloadShape,
};
use ocm_score_shell::CancellationToken;
use ocm_score_shell::probes::ControllerProbes;
use ocm_score_shell::supervise::{Mode, OnLoss, serve_and_lead};
use ocm_score_shell::watch::{SharedWatch, as_is, metadata_only};
use std::process::ExitCode;
use std::sync::Arc;

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
    tracing::info!(workers = settings.workers, "tiering controller starting");
    let metrics = Arc::new(Metrics::default());
    let mode = Mode {
        name: "tiering",
        kubeconfig: args.kubeconfig.as_deref(),
        probes_address: args.probes.address(),
        metrics: metrics.clone(),
        on_loss: OnLoss::StandBy,
    };
    let election = |client: &kube::Client| leader_election.map(|le| le.config(client));
    serve_and_lead(mode, election, &shutdown, |client, probes, stop| {
        let (settings, metrics) = (settings.clone(), metrics.clone());
        async move {
            run_controller(client, settings, metrics, probes, stop).await;
            Ok::<(), std::convert::Infallible>(())
        }
    })
    .await
}

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

/// The TieredPlacements that judge `work`'s health: those naming its ManifestWorkReplicaSet, and
/// every one that selects works by label (few; the plan applies the selector).
fn judging(store: &Store<TieredPlacement>, work: &ManifestWork) -> Vec<ObjectRef<TieredPlacement>> {
    let replica_set = work.labels().get(MANIFEST_WORK_REPLICA_SET_LABEL);
    store
        .state()
        .iter()
        .filter(|tp| {
            let Some(health) = &tp.spec.workload_health else {
                return false;
            };
            let named = replica_set.is_some_and(|value| {
                health
                    .replica_set_label_value(&tp.namespace().unwrap_or_default())
                    .as_ref()
                    == Some(value)
            });
            named || health.manifest_work_selector.is_some()
        })
        .map(|tp| ObjectRef::from_obj(&**tp))
        .collect()
}

/// The object an event carries, if one.
fn event_object<K>(event: &watcher::Event<K>) -> Option<&K> {
    match event {
        watcher::Event::Apply(object)
        | watcher::Event::Delete(object)
        | watcher::Event::InitApply(object) => Some(object),
        watcher::Event::Init | watcher::Event::InitDone => None,
    }
}

/// Runs the controller until `stop` is cancelled.
async fn run_controller(
    client: Client,
    settings: Settings,
    metrics: Arc<Metrics>,
    probes: Arc<ControllerProbes>,
    stop: CancellationToken,
) {
    let mut tiered_watch = SharedWatch::<TieredPlacement>::default();
    let mut hub = PlacementWatches::new(metrics.snapshot_builds.clone());
    // Shapes only change the deduction across shapes: the next plan uses them.
    let shape_watch = SharedWatch::<WorkloadShape>::default();
    let mut work_watch = SharedWatch::<ManifestWork>::default();
    let ledger = Arc::new(SharedLedger::new(settings.reservations));
    tiered_watch.observe({
        let ledger = ledger.clone();
        move |event: &watcher::Event<TieredPlacement>| {
            if let watcher::Event::Delete(tp) = event {
                ledger.forget(tp);
            }
        }
    });
    // A report releases reservations before the reconciles it triggers plan with them. Only an
    // update that can change a plan (or released a reservation) triggers, and only the
    // TieredPlacements holding its cluster: renewals re-plan nothing.
    let holdings = Arc::new(Holdings::default());
    hub.on_scores({
        let (ledger, metrics, holdings) = (ledger.clone(), metrics.clone(), holdings.clone());
        let mut reports = Reports::default();
        move |event: &watcher::Event<AddOnPlacementScore>, can_change: bool| {
            let released = reports
                .observe(event)
                .is_some_and(|cluster| ledger.report(&cluster, jiff::Timestamp::now(), &metrics));
            let changes = can_change || released;
            if let watcher::Event::Apply(_) | watcher::Event::Delete(_) = event {
                metrics.score_update(changes);
            }
            if let (true, Some(object)) = (changes, event_object(event)) {
                holdings.changed(&object.namespace().unwrap_or_default());
            }
            changes
        }
    });
    // A score that expires without a renewal is a change of its cluster, found by the score
    // watch's expiry wheel rather than by a requeue at every validUntil a plan read.
    let expiry_triggers = hub.on_expiries({
        let (metrics, holdings) = (metrics.clone(), holdings.clone());
        move |score: &AddOnPlacementScore| {
            metrics.score_expired();
            holdings.changed(&score.namespace().unwrap_or_default());
        }
    });
    let tiered = tiered_watch.store();
    let stores = Stores {
        tiered: tiered.clone(),
        hub: hub.stores(),
        shapes: shape_watch.store(),
        works: work_watch.store(),
        work_index: Arc::default(),
    };
    // The reconciler reads the stores; triggers only need names, namespaces and labels.
    let tiered_triggers = tiered_watch.subscribe(metadata_only);
    let cluster_triggers = hub.clusters.subscribe(metadata_only);
    let set_triggers = hub.cluster_sets.subscribe(metadata_only);
    let binding_triggers = hub.bindings.subscribe(metadata_only);
    let score_triggers = futures::stream::select(hub.scores.subscribe(metadata_only), expiry_triggers);
    let placement_triggers = hub.placements.subscribe(metadata_only);
    let decision_triggers = hub.decisions.subscribe(metadata_only);
    // A work's health is in its status: the trigger needs only its labels, the store keeps it.
    let work_triggers = work_watch.subscribe(metadata_only);
    work_watch.observe({
        let cache = stores.work_index.clone();
        move |_: &watcher::Event<ManifestWork>| cache.changed()
    });
    let everything = watcher::Config::default;
    let _watches = [
        tiered_watch.spawn(Api::all(client.clone()), everything(), as_is),
        shape_watch.spawn(Api::all(client.clone()), everything(), as_is),
        work_watch.spawn(Api::all(client.clone()), everything(), without_manifests),
    ];
    let _hub_watches = hub.spawn(&client);
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
        holdings.clone(),
    ));
    // Plan nothing on half a picture, and wait here rather than in each worker: kube's store
    // readiness wakes only the last of several tasks waiting on it at once.
    tokio::select! {
        synced = stores.synced() => match synced {
            Ok(()) => {
                probes.set_synced(true);
                tracing::info!("hub caches synced");
            }
            Err(error) => {
                tracing::error!(%error, "hub caches did not sync");
                return;
            }
        },
        () = stop.cancelled() => return,
    }

    // The reserved capacity for plain Placements follows the ledger while this replica leads.
    let _reserved_scores = tokio::spawn(super::reserved_scores::publish(
        client.clone(),
        stores.clone(),
        ctx.ledger.clone(),
        ctx.metrics.clone(),
        stop.clone(),
    ));
    let (all1, all2, holders) = (tiered.clone(), tiered.clone(), tiered.clone());
    let (ns1, owner1, owner2) = (tiered.clone(), tiered.clone(), tiered.clone());
    let judges = tiered.clone();
    Controller::for_stream(tiered_triggers, tiered)
        .with_config(ControllerConfig::default().concurrency(settings.workers))
        .watches_stream(cluster_triggers, move |_: ManagedCluster| every(&all1))
        .watches_stream(set_triggers, move |_: ManagedClusterSet| every(&all2))
        .watches_stream(score_triggers, move |score: AddOnPlacementScore| {
            holdings.holders(&holders, &score.namespace().unwrap_or_default())
        })
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
        .watches_stream(work_triggers, move |w: ManifestWork| judging(&judges, &w))
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
}
