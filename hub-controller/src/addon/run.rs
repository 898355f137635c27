//! The `ocm-score-hub addon-manager` mode: the shared watches and the three controllers, run by the
//! replica holding the Lease, in the process shell (`ocm_score_shell`: shutdown token, probe server,
//! leader elector). Unlike the Thanos scorer, a manager that loses the Lease does not step down and
//! carry on: it stops its controllers and exits 1, and restarts as a standby with empty caches.

use super::agent::work;
use super::lifecycle::ownership;
use super::metrics::Metrics;
use super::names;
use super::reconcile::{self, Context, Stores, csr_approval::csrs_of_cluster};
use crate::addon::args::{AddonManagerArgs, Settings};
use futures::StreamExt;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::runtime::controller::{Config as ControllerConfig, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Client, ResourceExt};
use ocm_score_api::{
    AddOnDeploymentConfig, AddOnPlacementScore, ClusterManagementAddOn, ManagedCluster, ManagedClusterAddOn,
    ManifestWork, PlacementDecision, well_known,
};
use ocm_score_shell::CancellationToken;
use ocm_score_shell::probes::ControllerProbes;
use ocm_score_shell::supervise::{Mode, OnLoss, serve_and_lead};
use ocm_score_shell::watch::{SharedWatch, as_is, metadata_only, whole};
use std::process::ExitCode;
use std::sync::Arc;

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
    if let Some(warning) = crate::addon::args::short_image_name(&args.agent_image) {
        tracing::warn!("{warning}");
    }
    let settings = args.settings();
    let metrics = Arc::new(Metrics::default());
    let mode = Mode {
        name: "addon-manager",
        kubeconfig: args.kubeconfig.as_deref(),
        probes_address: args.probes.address(),
        metrics: metrics.clone(),
        on_loss: OnLoss::Exit,
    };
    let election = |client: &kube::Client| leader_election.map(|le| le.config(client));
    serve_and_lead(mode, election, &shutdown, |client, probes, stop| {
        run_controllers(client, settings.clone(), metrics.clone(), probes, stop)
    })
    .await
}

/// Scores change with every publication; only their owner references matter here.
fn without_status(score: &mut AddOnPlacementScore) {
    score.status = None;
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

    let mut addons = SharedWatch::<ManagedClusterAddOn>::default();
    let mut cmas = SharedWatch::<ClusterManagementAddOn>::default();
    let mut clusters = SharedWatch::<ManagedCluster>::default();
    let mut decisions = SharedWatch::<PlacementDecision>::default();
    let mut works = SharedWatch::<ManifestWork>::default();
    let mut roles = SharedWatch::<Role>::default();
    let mut bindings = SharedWatch::<RoleBinding>::default();
    let mut cluster_roles = SharedWatch::<ClusterRole>::default();
    let mut cluster_bindings = SharedWatch::<ClusterRoleBinding>::default();
    let mut csrs = SharedWatch::<CertificateSigningRequest>::default();
    let mut scores = SharedWatch::<AddOnPlacementScore>::default();
    // Config objects are read raw (their spec hash must cover exactly what the server holds).
    let config_resource = ApiResource::erase::<AddOnDeploymentConfig>(&());
    let mut configs = SharedWatch::<DynamicObject>::with_type(config_resource.clone());

    let stores = Stores {
        addons: addons.store(),
        cmas: cmas.store(),
        clusters: clusters.store(),
        decisions: decisions.store(),
        configs: configs.store(),
        works: works.store(),
        roles: roles.store(),
        bindings: bindings.store(),
        cluster_roles: cluster_roles.store(),
        cluster_bindings: cluster_bindings.store(),
        csrs: csrs.store(),
        scores: scores.store(),
    };
    metrics.watch_addons(addons.store());
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
    let addon_controller = Controller::for_stream(addons.subscribe(metadata_only), addons.store())
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
            reconcile::managed_cluster_addon::reconcile,
            reconcile::managed_cluster_addon::on_error,
            ctx.clone(),
        )
        .for_each(|_| async {});

    let the_cma = {
        let addon_name = addon.clone();
        move || Some(ObjectRef::<ClusterManagementAddOn>::new(&addon_name))
    };
    let install_controller = Controller::for_stream(cmas.subscribe(metadata_only), cmas.store())
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
            reconcile::cluster_management_addon::reconcile,
            reconcile::cluster_management_addon::on_error,
            ctx.clone(),
        )
        .for_each(|_| async {});

    let csr_store = csrs.store();
    let csr_store_for_clusters = csrs.store();
    let csr_controller = Controller::for_stream(csrs.subscribe(metadata_only), csrs.store())
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
        .run(
            reconcile::csr_approval::reconcile,
            reconcile::csr_approval::on_error,
            ctx.clone(),
        )
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
            return Ok(());
        }
    }
    probes.set_synced(true);
    tracing::info!("hub caches synced");
    tokio::join!(addon_controller, install_controller, csr_controller);
    drop(watches);
    Ok(())
}
