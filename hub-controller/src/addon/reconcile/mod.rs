//! The controllers: I/O around the pure decisions of the sibling modules.
//!
//! Three `kube::runtime::Controller`s share one watch per kind through shared reflector stores:
//! - `addon` reconciles each ManagedClusterAddOn (registration, hub RBAC, agent ManifestWork, the
//!   score's owner reference, status; removal is the garbage collector's);
//! - `install` reconciles the ClusterManagementAddOn: the config spec hashes in its status, and its
//!   install strategy when we run the lifecycle;
//! - `csr` approves or denies the add-on's certificate signing requests.

pub mod cluster_management_addon;
pub mod csr_approval;
pub mod managed_cluster_addon;

use super::metrics::Metrics;
use crate::addon::args::Settings;
use crate::addon::lifecycle::ownership;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};
use ocm_score_api::{
    AddOnPlacementScore, ClusterManagementAddOn, ManagedCluster, ManagedClusterAddOn, ManifestWork, OcmKind,
    PlacementDecision, well_known,
};
use ocm_score_shell::controller::{Backoff, CacheGone, MetricLabel, wait_synced};
use ocm_score_shell::sync::lock;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeSet;
use std::fmt::Debug;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{action} {kind} {name}: {source}")]
    Api {
        action: &'static str,
        kind: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("rendering the agent for cluster {cluster}: {source}")]
    Render {
        cluster: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("{what} {name} kept changing under us ({attempts} conflicts in a row)")]
    Conflict {
        what: String,
        name: String,
        attempts: u32,
    },
    #[error(transparent)]
    CachesGone(#[from] CacheGone),
}

impl Error {
    pub fn api(action: &'static str, kind: &str, name: impl Into<String>, source: kube::Error) -> Self {
        Error::Api {
            action,
            kind: kind.to_string(),
            name: name.into(),
            source: Box::new(source),
        }
    }
}

impl MetricLabel for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::Api { .. } => "api",
            Error::Render { .. } => "render",
            Error::Conflict { .. } => "conflict",
            Error::CachesGone(_) => "caches_gone",
        }
    }
}

/// The HTTP status of an API error, if the server answered.
pub fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// The hub caches the controllers read from; each is fed by exactly one watch.
#[derive(Clone)]
pub struct Stores {
    pub addons: Store<ManagedClusterAddOn>,
    pub cmas: Store<ClusterManagementAddOn>,
    pub clusters: Store<ManagedCluster>,
    pub decisions: Store<PlacementDecision>,
    pub configs: Store<DynamicObject>,
    pub works: Store<ManifestWork>,
    pub roles: Store<Role>,
    pub bindings: Store<RoleBinding>,
    /// The agents' read access to WorkloadShapes (one of each per add-on).
    pub cluster_roles: Store<ClusterRole>,
    pub cluster_bindings: Store<ClusterRoleBinding>,
    pub csrs: Store<CertificateSigningRequest>,
    /// The add-on's scores (`resource-usage-score` in every namespace), metadata only.
    pub scores: Store<AddOnPlacementScore>,
}

impl Stores {
    /// Resolves once every cache holds a full initial list, so no decision is made on half a picture
    /// (a restart must not re-create what merely has not been listed yet).
    pub async fn synced(&self) -> Result<(), Error> {
        wait_synced(&[
            ("ManagedClusterAddOns", &self.addons),
            ("ClusterManagementAddOns", &self.cmas),
            ("ManagedClusters", &self.clusters),
            ("PlacementDecisions", &self.decisions),
            ("AddOnDeploymentConfigs", &self.configs),
            ("ManifestWorks", &self.works),
            ("Roles", &self.roles),
            ("RoleBindings", &self.bindings),
            ("ClusterRoles", &self.cluster_roles),
            ("ClusterRoleBindings", &self.cluster_bindings),
            ("CertificateSigningRequests", &self.csrs),
            ("AddOnPlacementScores", &self.scores),
        ])
        .await?;
        Ok(())
    }
}

/// What every reconciliation gets.
pub struct Context {
    pub client: kube::Client,
    pub settings: Settings,
    pub stores: Stores,
    pub metrics: Arc<Metrics>,
    /// Consecutive failures per object, for the error policy's retry delay.
    backoff: Backoff,
    /// Clusters whose deployment config is currently invalid.
    invalid_configs: Mutex<BTreeSet<String>>,
    /// Add-ons (by uid) whose owned objects this process has created: if those go missing, the
    /// add-on may be gone too.
    provisioned: Mutex<BTreeSet<String>>,
    /// Clusters the install strategy left out, waiting out the removal grace.
    absences: Mutex<crate::addon::lifecycle::install::Absences>,
    /// The hub dropped the condition rule of a work we wrote: render works without it.
    pub hub_prunes_condition_rules: AtomicBool,
}

impl Context {
    pub fn new(client: kube::Client, settings: Settings, stores: Stores, metrics: Arc<Metrics>) -> Self {
        Context {
            client,
            settings,
            stores,
            metrics,
            backoff: Backoff::default(),
            invalid_configs: Mutex::default(),
            provisioned: Mutex::default(),
            absences: Mutex::default(),
            hub_prunes_condition_rules: AtomicBool::new(false),
        }
    }

    /// Whether this process has created owned objects for the add-on with `uid`.
    pub fn was_provisioned(&self, uid: &str) -> bool {
        lock(&self.provisioned).contains(uid)
    }

    /// Records that the add-on with `uid` got its owned objects, forgetting add-ons that are gone.
    pub fn provisioned(&self, uid: &str) {
        let mut set = lock(&self.provisioned);
        set.insert(uid.to_string());
        let live = self.stores.addons.state().len();
        if set.len() > 2 * live + 16 {
            let uids: BTreeSet<String> = self
                .stores
                .addons
                .state()
                .iter()
                .filter_map(|a| a.metadata.uid.clone())
                .collect();
            set.retain(|u| uids.contains(u));
        }
    }

    pub fn set_config_invalid(&self, cluster: &str, invalid: bool) {
        let mut set = lock(&self.invalid_configs);
        if invalid {
            set.insert(cluster.to_string());
        } else {
            set.remove(cluster);
        }
        // An add-on deleted outright is never reconciled again: forget its cluster here.
        let addon = &self.settings.addon;
        set.retain(|c| {
            self.stores
                .addons
                .get(&ObjectRef::<ManagedClusterAddOn>::new(addon).within(c))
                .is_some()
        });
        self.metrics.set_config_invalid(set.len());
    }
}

fn object_key<K: Resource>(controller: &str, obj: &K) -> String {
    format!(
        "{controller}/{}/{}",
        obj.namespace().unwrap_or_default(),
        obj.name_any()
    )
}

/// Runs a reconciliation with timing, metrics and backoff bookkeeping.
pub async fn observed<K, F>(controller: &'static str, obj: &K, ctx: &Context, run: F) -> Result<Action, Error>
where
    K: Resource,
    F: std::future::Future<Output = Result<Action, Error>>,
{
    let started = std::time::Instant::now();
    tracing::debug!(controller, namespace = obj.namespace().unwrap_or_default(), name = %obj.name_any(), "reconciling");
    let result = run.await;
    ctx.metrics.reconcile.reconciled(controller, started.elapsed());
    // The end of a pass over one object, with the version it saw: what a reader (or a test) needs to
    // know that "nothing happened" is a decision, not a pass that has not run yet.
    tracing::debug!(
        controller,
        namespace = obj.namespace().unwrap_or_default(),
        name = %obj.name_any(),
        resource_version = obj.resource_version().unwrap_or_default(),
        ok = result.is_ok(),
        "reconciled"
    );
    if result.is_ok() {
        ctx.backoff.succeeded(&object_key(controller, obj));
    }
    result
}

/// The error policy of every controller: log, count, retry with per-object exponential backoff.
pub fn error_policy<K: Resource>(controller: &'static str, obj: &K, error: &Error, ctx: &Context) -> Action {
    let (_, delay) = ctx.backoff.failed(&object_key(controller, obj));
    ctx.metrics.reconcile.failed(controller, error.metric_label());
    tracing::warn!(
        controller,
        namespace = obj.namespace().unwrap_or_default(),
        name = %obj.name_any(),
        %error,
        retry_in = ?delay,
        "reconciliation failed"
    );
    Action::requeue(delay)
}

/// Creates `desired`, or brings the existing object up to date, writing only when needed.
///
/// `cached` is what the watch cache holds; if it turns out stale (409 on create or update, 404 on
/// update) the object is read fresh and the decision made again.
pub async fn ensure<K>(
    ctx: &Context,
    api: &Api<K>,
    cached: Option<Arc<K>>,
    desired: &K,
    up_to_date: impl Fn(&K, &K) -> bool,
    updated: impl Fn(&K, &K) -> K,
) -> Result<K, Error>
where
    K: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
{
    let kind = K::kind(&()).to_string();
    let kind = kind.as_str();
    let name = desired.name_any();
    let full_name = format!("{}/{name}", desired.namespace().unwrap_or_default());
    let mut current = cached.map(|c| (*c).clone());
    const ATTEMPTS: u32 = 3;
    for _ in 0..ATTEMPTS {
        match &current {
            Some(existing) if up_to_date(existing, desired) => return Ok(existing.clone()),
            Some(existing) => {
                ctx.metrics.wrote(kind, "update");
                match api
                    .replace(&name, &PostParams::default(), &updated(existing, desired))
                    .await
                {
                    Ok(written) => return Ok(written),
                    Err(e) if matches!(status_code(&e), Some(404 | 409)) => {
                        current = api
                            .get_opt(&name)
                            .await
                            .map_err(|e| Error::api("reading", kind, &full_name, e))?;
                    }
                    Err(e) => return Err(Error::api("updating", kind, full_name, e)),
                }
            }
            None => {
                ctx.metrics.wrote(kind, "create");
                match api.create(&PostParams::default(), desired).await {
                    Ok(written) => return Ok(written),
                    Err(e) if status_code(&e) == Some(409) => {
                        current = api
                            .get_opt(&name)
                            .await
                            .map_err(|e| Error::api("reading", kind, &full_name, e))?;
                    }
                    Err(e) => return Err(Error::api("creating", kind, full_name, e)),
                }
            }
        }
    }
    Err(Error::Conflict {
        what: kind.to_string(),
        name: full_name,
        attempts: ATTEMPTS,
    })
}

/// Our labels and owner references onto `existing`, keeping everyone else's.
pub(super) fn merge_metadata(
    existing: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    desired: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) {
    existing
        .labels
        .get_or_insert_default()
        .extend(desired.labels.clone().unwrap_or_default());
    let owners = existing.owner_references.get_or_insert_default();
    for owner in desired.owner_references.iter().flatten() {
        owners.retain(|o| o.uid != owner.uid);
        owners.push(owner.clone());
    }
}

/// Gives the cluster's score (written by the agent) an owner reference to the add-on, so it goes
/// with the add-on. A 404 or 409 means the score changed meanwhile; its watch brings it back here.
pub async fn adopt_score(ctx: &Context, addon: &ManagedClusterAddOn, cluster: &str) -> Result<(), Error> {
    let cached = ctx
        .stores
        .scores
        .get(&ObjectRef::new(well_known::RESOURCE_USAGE_SCORE).within(cluster));
    let Some(patch) = cached.and_then(|score| ownership::score_adoption_patch(&score.metadata, addon)) else {
        return Ok(());
    };
    let api: Api<AddOnPlacementScore> = Api::namespaced(ctx.client.clone(), cluster);
    ctx.metrics.wrote(AddOnPlacementScore::KIND, "patch");
    match api
        .patch(
            well_known::RESOURCE_USAGE_SCORE,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(_) => {
            tracing::info!(%cluster, "score adopted: it now goes with the add-on");
            Ok(())
        }
        Err(e) if matches!(status_code(&e), Some(404 | 409)) => Ok(()),
        Err(e) => Err(Error::api(
            "adopting",
            AddOnPlacementScore::KIND,
            format!("{cluster}/{}", well_known::RESOURCE_USAGE_SCORE),
            e,
        )),
    }
}

/// Deletes an object; absent is fine.
pub async fn delete_if_present<K>(ctx: &Context, api: &Api<K>, name: &str) -> Result<(), Error>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let kind = K::kind(&()).to_string();
    let kind = kind.as_str();
    ctx.metrics.wrote(kind, "delete");
    match api.delete(name, &Default::default()).await {
        Ok(_) => Ok(()),
        Err(e) if status_code(&e) == Some(404) => Ok(()),
        Err(e) => Err(Error::api("deleting", kind, name, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_labels_are_stable() {
        let e = Error::Conflict {
            what: "ManifestWork".into(),
            name: "c1/x".into(),
            attempts: 3,
        };
        assert_eq!(e.metric_label(), "conflict");
        assert!(e.to_string().contains("c1/x"));
        assert_eq!(
            Error::CachesGone(CacheGone("Roles")).metric_label(),
            "caches_gone"
        );
    }
}
