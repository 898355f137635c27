//! The ClusterManagementAddOn's install strategy, when we run the add-on's lifecycle ourselves.

use super::{Context, Error, delete_if_present, error_policy, observed, status_code};
use crate::addon::install::{self, Lifecycle};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use scheduler_core::api::{ClusterManagementAddOn, ManagedClusterAddOn};
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
    if install::lifecycle(&cma) == Lifecycle::AddonManager {
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
    for cluster in &plan.delete {
        let api: Api<ManagedClusterAddOn> = Api::namespaced(ctx.client.clone(), cluster);
        delete_if_present(&ctx, &api, &ctx.settings.addon).await?;
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
    Ok(Action::requeue(ctx.settings.resync))
}
