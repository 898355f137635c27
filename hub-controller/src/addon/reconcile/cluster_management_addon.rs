//! The ClusterManagementAddOn: the spec hashes in its status (always), and its install strategy when
//! we run the add-on's lifecycle ourselves.

use super::{
    Context, Error, adopt_score, delete_if_present, ensure, error_policy, merge_metadata, observed,
    status_code,
};
use crate::addon::agent::spec_hash;
use crate::addon::configuration::cma_hashes;
use crate::addon::configuration::references::ConfigKey;
use crate::addon::lifecycle::install::{self, Lifecycle};
use crate::addon::names;
use crate::addon::registration::hub_rbac;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, ApiResource, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use ocm_score_api::{AddOnDeploymentConfig, ClusterManagementAddOn, ManagedClusterAddOn, OcmKind};
use ocm_score_shell::sync::lock;
use serde_json::json;
use std::collections::BTreeSet;
use std::sync::Arc;

const CONTROLLER: &str = "install";

pub async fn reconcile(cma: Arc<ClusterManagementAddOn>, ctx: Arc<Context>) -> Result<Action, Error> {
    observed(
        CONTROLLER,
        cma.as_ref(),
        &ctx,
        reconcile_inner(cma.clone(), ctx.clone()),
    )
    .await
}

pub fn on_error(cma: Arc<ClusterManagementAddOn>, error: &Error, ctx: Arc<Context>) -> Action {
    error_policy(CONTROLLER, cma.as_ref(), error, &ctx)
}

async fn reconcile_inner(cma: Arc<ClusterManagementAddOn>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.stores.synced().await?;
    if cma.name_any() != ctx.settings.addon || cma.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    fill_config_hashes(&cma, &ctx).await?;
    ensure_shapes_rbac(&cma, &ctx).await?;
    if install::lifecycle(&cma) == Lifecycle::AddonManager {
        lock(&ctx.absences).clear();
        tracing::debug!("OCM's addon-manager runs this add-on's install strategy");
        return Ok(Action::await_change());
    }
    let decided = install::decided_clusters(&cma, ctx.stores.decisions.state().iter().map(AsRef::as_ref));
    let clusters_state = ctx.stores.clusters.state();
    let clusters: BTreeSet<String> = clusters_state
        .iter()
        .filter(|c| c.meta().deletion_timestamp.is_none())
        .map(|c| c.name_any())
        .collect();
    let addons_state = ctx.stores.addons.state();
    let addons: Vec<&ManagedClusterAddOn> = addons_state
        .iter()
        .map(AsRef::as_ref)
        .filter(|a| a.name_any() == ctx.settings.addon)
        .collect();
    let plan = install::plan(&cma, &decided, &clusters, &addons);

    for cluster in &plan.create {
        let Some(managed) = ctx.stores.clusters.get(&ObjectRef::new(cluster)) else {
            continue;
        };
        let api: Api<ManagedClusterAddOn> = Api::namespaced(ctx.client.clone(), cluster);
        ctx.metrics.wrote("ManagedClusterAddOn", "create");
        match api
            .create(&PostParams::default(), &install::new_addon(&cma, &managed))
            .await
        {
            Ok(_) => tracing::info!(%cluster, "add-on enabled by the install strategy"),
            Err(e) if status_code(&e) == Some(409) => {}
            Err(e) => {
                return Err(Error::api(
                    "creating",
                    "ManagedClusterAddOn",
                    format!("{cluster}/{}", ctx.settings.addon),
                    e,
                ));
            }
        }
    }
    let due = lock(&ctx.absences).due(
        &plan.delete,
        tokio::time::Instant::now(),
        ctx.settings.install_removal_grace,
    );
    for cluster in &due.left {
        tracing::info!(
            %cluster,
            grace = ?ctx.settings.install_removal_grace,
            "the install strategy no longer selects the cluster; its add-on goes unless it is selected again within the grace"
        );
    }
    for cluster in &due.back {
        tracing::info!(%cluster, "the install strategy selects the cluster again; its add-on stays");
    }
    for cluster in &due.remove {
        // A score published since the add-on's last pass must still go with it.
        if let Some(addon) = addons
            .iter()
            .find(|a| a.namespace().as_deref() == Some(cluster.as_str()))
        {
            adopt_score(&ctx, addon, cluster).await?;
        }
        let api: Api<ManagedClusterAddOn> = Api::namespaced(ctx.client.clone(), cluster);
        delete_if_present(&ctx, &api, &ctx.settings.addon).await?;
        lock(&ctx.absences).removed(cluster);
        tracing::info!(%cluster, "add-on disabled: the install strategy no longer selects the cluster");
    }
    for cluster in &plan.adopt {
        let Some(addon) = addons
            .iter()
            .find(|a| a.namespace().as_deref() == Some(cluster.as_str()))
        else {
            continue;
        };
        let owners = install::adopted_owner_references(addon, &cma);
        let patch =
            json!({"metadata": {"ownerReferences": owners, "resourceVersion": addon.resource_version()}});
        let api: Api<ManagedClusterAddOn> = Api::namespaced(ctx.client.clone(), cluster);
        ctx.metrics.wrote("ManagedClusterAddOn", "patch");
        match api
            .patch(
                &ctx.settings.addon,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => tracing::info!(%cluster, "add-on adopted by its ClusterManagementAddOn"),
            // Changed meanwhile: the watch brings the new version and we come back.
            Err(e) if matches!(status_code(&e), Some(404 | 409)) => {}
            Err(e) => {
                return Err(Error::api(
                    "adopting",
                    "ManagedClusterAddOn",
                    format!("{cluster}/{}", ctx.settings.addon),
                    e,
                ));
            }
        }
    }
    Ok(Action::requeue(
        due.next
            .map_or(ctx.settings.resync, |w| w.min(ctx.settings.resync)),
    ))
}

/// The agents' read access to WorkloadShapes: the ClusterRole, and the ClusterRoleBinding to the
/// agents of the add-ons OCM's gates let through (owned by the ClusterManagementAddOn, on a cluster
/// that exists; see `hub_rbac`). Nothing is created before there is such an add-on. Whoever runs
/// the lifecycle, the add-ons' hub permissions are ours.
async fn ensure_shapes_rbac(cma: &ClusterManagementAddOn, ctx: &Context) -> Result<(), Error> {
    let addon = ctx.settings.addon.as_str();
    let name = names::shapes_reader_name(addon);
    let addons_state = ctx.stores.addons.state();
    let addons: Vec<&ManagedClusterAddOn> = addons_state
        .iter()
        .map(AsRef::as_ref)
        .filter(|a| install::owned_by_cma(a, addon))
        .filter(|a| {
            let cluster = a.namespace().unwrap_or_default();
            ctx.stores
                .clusters
                .get(&ObjectRef::new(&cluster))
                .is_some_and(|c| c.metadata.deletion_timestamp.is_none())
        })
        .collect();
    let cached_role = ctx.stores.cluster_roles.get(&ObjectRef::new(&name));
    let cached_binding = ctx.stores.cluster_bindings.get(&ObjectRef::new(&name));
    if addons.is_empty() && cached_role.is_none() && cached_binding.is_none() {
        return Ok(());
    }
    let owner = install::cma_owner_reference(cma, true);
    let role = hub_rbac::shapes_cluster_role(addon, &owner);
    let api: Api<ClusterRole> = Api::all(ctx.client.clone());
    ensure(
        ctx,
        &api,
        cached_role,
        &role,
        hub_rbac::cluster_role_up_to_date,
        |existing, desired| {
            let mut updated = existing.clone();
            updated.rules.clone_from(&desired.rules);
            merge_metadata(&mut updated.metadata, &desired.metadata);
            updated
        },
    )
    .await?;
    let binding = hub_rbac::shapes_cluster_role_binding(addon, &addons, &owner);
    let api: Api<ClusterRoleBinding> = Api::all(ctx.client.clone());
    ensure(
        ctx,
        &api,
        cached_binding,
        &binding,
        hub_rbac::cluster_role_binding_up_to_date,
        |existing, desired| {
            let mut updated = existing.clone();
            updated.subjects.clone_from(&desired.subjects);
            merge_metadata(&mut updated.metadata, &desired.metadata);
            updated
        },
    )
    .await?;
    Ok(())
}

/// Writes the spec hashes of the configs the ClusterManagementAddOn's status names (see
/// `configuration::cma_hashes`). A 404 or 409 means it changed meanwhile: the watch brings it back here.
async fn fill_config_hashes(cma: &ClusterManagementAddOn, ctx: &Context) -> Result<(), Error> {
    let resource = ApiResource::erase::<AddOnDeploymentConfig>(&());
    let hash_of = |key: &ConfigKey| {
        ctx.stores
            .configs
            .get(&ObjectRef::new_with(&key.name, resource.clone()).within(&key.namespace))
            .map(|object| spec_hash::spec_hash_of_object(&object))
    };
    let status = serde_json::to_value(&cma.status).ok();
    let Some(patch) = cma_hashes::hash_patch(status.as_ref(), cma.resource_version().as_deref(), hash_of)
    else {
        return Ok(());
    };
    let api: Api<ClusterManagementAddOn> = Api::all(ctx.client.clone());
    ctx.metrics.wrote(ClusterManagementAddOn::KIND, "patch");
    match api
        .patch_status(&cma.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {
            tracing::info!("config spec hashes written into the ClusterManagementAddOn's status");
            Ok(())
        }
        Err(e) if matches!(status_code(&e), Some(404 | 409)) => Ok(()),
        Err(e) => Err(Error::api(
            "writing the config spec hashes of",
            ClusterManagementAddOn::KIND,
            cma.name_any(),
            e,
        )),
    }
}
