//! One ManagedClusterAddOn: registration, hub RBAC, the agent ManifestWork, the score's owner
//! reference and the add-on status. Removal is the garbage collector's: everything here is owned by
//! the add-on (see `ownership`).

use super::{Context, Error, adopt_score, ensure, error_policy, merge_metadata, observed};
use crate::addon::agent::{self, work};
use crate::addon::configuration::deployment_config::{AgentConfig, agent_config};
use crate::addon::configuration::references::{self, ConfigKey, ObservedConfig};
use crate::addon::configuration::rollout::{self, Hold};
use crate::addon::lifecycle::availability::{self, HealthMode};
use crate::addon::lifecycle::install::{self, Lifecycle};
use crate::addon::lifecycle::ownership;
use crate::addon::names;
use crate::addon::registration::{self, hub_rbac};
use crate::addon::status::conditions::{
    CONFIGURED, Change, DEGRADED, Desired, MANIFEST_APPLIED, REGISTRATION_APPLIED, Status,
};
use crate::addon::status::{OwnedStatus, status_patch};
use jiff::Timestamp;
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{Api, ApiResource, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use ocm_score_api::{
    AddOnDeploymentConfig, AddOnDeploymentConfigSpec, ClusterManagementAddOn, ManagedClusterAddOn,
    ManifestWork, OcmKind,
};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::Ordering;

const CONTROLLER: &str = "addon";

pub async fn reconcile(addon: Arc<ManagedClusterAddOn>, ctx: Arc<Context>) -> Result<Action, Error> {
    observed(
        CONTROLLER,
        addon.as_ref(),
        &ctx,
        reconcile_inner(addon.clone(), ctx.clone()),
    )
    .await
}

pub fn on_error(addon: Arc<ManagedClusterAddOn>, error: &Error, ctx: Arc<Context>) -> Action {
    error_policy(CONTROLLER, addon.as_ref(), error, &ctx)
}

async fn reconcile_inner(addon: Arc<ManagedClusterAddOn>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.stores.synced().await?;
    let name = addon.name_any();
    let Some(cluster) = addon.namespace() else {
        return Ok(Action::await_change());
    };
    if name != ctx.settings.addon {
        return Ok(Action::await_change());
    }
    let deleting = addon.metadata.deletion_timestamp.is_some();
    // Upgrade from a version that held deletions with a finalizer: make sure the score goes with the
    // add-on, then let go. Done whatever the gates say, so nothing stays stuck.
    if let Some(patch) = ownership::legacy_finalizer_removal(&addon) {
        adopt_score(&ctx, &addon, &cluster).await?;
        patch_addon(
            &ctx,
            &addon,
            &cluster,
            &patch,
            "removing the legacy finalizer from",
        )
        .await?;
        tracing::info!(%cluster, "legacy cleanup finalizer removed; owner references take over");
        return Ok(Action::await_change());
    }
    // The garbage collector removes what the add-on owns; a deleted add-on needs nothing from us.
    if deleting {
        ctx.set_config_invalid(&cluster, false);
        return Ok(Action::await_change());
    }
    let cma = ctx.stores.cmas.get(&ObjectRef::new(&ctx.settings.addon));
    // A cluster being deleted gets nothing (re)applied, as in addon-framework.
    let cluster_exists = ctx
        .stores
        .clusters
        .get(&ObjectRef::new(&cluster))
        .is_some_and(|c| c.metadata.deletion_timestamp.is_none());
    // OCM's gates: nothing happens for an add-on its ClusterManagementAddOn does not own, or on a
    // cluster that does not exist.
    let gated = !install::owned_by_cma(&addon, &ctx.settings.addon) || !cluster_exists;
    match cma {
        Some(cma) if !gated => apply(&addon, &cma, &cluster, &ctx).await,
        _ => {
            tracing::debug!(%cluster, "waiting: no owning ClusterManagementAddOn or no ManagedCluster");
            Ok(Action::await_change())
        }
    }
}

/// Whether the add-on (this very object, by uid) still exists and is not being deleted, as the
/// server says.
async fn still_exists(ctx: &Context, addon: &ManagedClusterAddOn, cluster: &str) -> Result<bool, Error> {
    let api: Api<ManagedClusterAddOn> = Api::namespaced(ctx.client.clone(), cluster);
    let name = addon.name_any();
    let live = api.get_opt(&name).await.map_err(|e| {
        Error::api(
            "reading",
            ManagedClusterAddOn::KIND,
            format!("{cluster}/{name}"),
            e,
        )
    })?;
    Ok(live.is_some_and(|live| {
        live.metadata.uid == addon.metadata.uid && live.metadata.deletion_timestamp.is_none()
    }))
}

/// A merge patch of the add-on's metadata. A 404 or 409 means it changed meanwhile: the watch brings
/// the new version and we decide again.
async fn patch_addon(
    ctx: &Context,
    addon: &ManagedClusterAddOn,
    cluster: &str,
    patch: &serde_json::Value,
    action: &'static str,
) -> Result<(), Error> {
    let api: Api<ManagedClusterAddOn> = Api::namespaced(ctx.client.clone(), cluster);
    let name = addon.name_any();
    ctx.metrics.wrote(ManagedClusterAddOn::KIND, "patch");
    match api
        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(e) if matches!(super::status_code(&e), Some(404 | 409)) => Ok(()),
        Err(e) => Err(Error::api(
            action,
            ManagedClusterAddOn::KIND,
            format!("{cluster}/{name}"),
            e,
        )),
    }
}

/// The owner reference our objects carry, so the garbage collector removes them with the add-on.
fn owner_reference(addon: &ManagedClusterAddOn) -> OwnerReference {
    OwnerReference {
        api_version: ManagedClusterAddOn::API_VERSION.into(),
        kind: ManagedClusterAddOn::KIND.into(),
        name: addon.name_any(),
        uid: addon.metadata.uid.clone().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// An AddOnDeploymentConfig from the cache.
fn config_object(ctx: &Context, key: &ConfigKey) -> Option<Arc<kube::api::DynamicObject>> {
    let resource = ApiResource::erase::<AddOnDeploymentConfig>(&());
    ctx.stores
        .configs
        .get(&ObjectRef::new_with(&key.name, resource).within(&key.namespace))
}

/// Spec hash and generation of an AddOnDeploymentConfig, `None` when it does not exist.
fn config_state(ctx: &Context, key: &ConfigKey) -> Option<(String, i64)> {
    config_object(ctx, key).map(|object| {
        (
            crate::addon::agent::spec_hash::spec_hash_of_object(&object),
            object.metadata.generation.unwrap_or_default(),
        )
    })
}

/// The desired config object and, when it resolves, the agent configuration from it.
struct Configuration {
    observed: Option<ObservedConfig>,
    result: Result<AgentConfig, String>,
}

fn resolve_configuration(
    ctx: &Context,
    lifecycle: Lifecycle,
    cma: &ClusterManagementAddOn,
    addon: &ManagedClusterAddOn,
    cluster: &str,
) -> Configuration {
    let placements: BTreeSet<(String, String)> =
        install::decided_clusters(cma, ctx.stores.decisions.state().iter().map(AsRef::as_ref))
            .into_iter()
            .filter(|(_, clusters)| clusters.contains(cluster))
            .map(|(placement, _)| placement)
            .collect();
    let Some(key) = references::desired_config(lifecycle, cma, addon, &placements) else {
        return Configuration {
            observed: None,
            result: Ok(AgentConfig::default()),
        };
    };
    let Some(object) = config_object(ctx, &key) else {
        let result = Err(format!("AddOnDeploymentConfig {key} not found"));
        return Configuration {
            observed: Some(ObservedConfig { key, found: None }),
            result,
        };
    };
    let found = Some((
        crate::addon::agent::spec_hash::spec_hash_of_object(&object),
        object.metadata.generation.unwrap_or_default(),
    ));
    let observed = Some(ObservedConfig {
        key: key.clone(),
        found,
    });
    let spec = object.data.get("spec").cloned().unwrap_or_default();
    let result = serde_json::from_value::<AddOnDeploymentConfigSpec>(spec)
        .map_err(|e| format!("AddOnDeploymentConfig {key}: spec: {e}"))
        .and_then(|spec| agent_config(&spec).map_err(|e| format!("AddOnDeploymentConfig {key}: {e}")));
    Configuration { observed, result }
}

async fn apply(
    addon: &ManagedClusterAddOn,
    cma: &ClusterManagementAddOn,
    cluster: &str,
    ctx: &Context,
) -> Result<Action, Error> {
    let settings = &ctx.settings;
    let addon_name = settings.addon.as_str();
    let lifecycle = install::lifecycle(cma);
    let owner = owner_reference(addon);
    let configuration = resolve_configuration(ctx, lifecycle, cma, addon, cluster);
    // Under OCM's addon-manager the references are OCM's list with our part filled in: always
    // derived from the list the write goes into, never from an older read.
    let references = |latest: &ManagedClusterAddOn| {
        let existing = latest
            .status
            .as_ref()
            .map(|s| s.config_references.as_slice())
            .unwrap_or_default();
        references::addon_manager_references(existing, &latest.spec.configs, |key| config_state(ctx, key))
    };
    // Under OCM's addon-manager the work follows OCM's rollout, not the newest config.
    let rollout_references = (lifecycle == Lifecycle::AddonManager).then(|| references(addon));
    let gate = match &rollout_references {
        Some(refs) => rollout::render_gate(addon, refs, |key| config_state(ctx, key).map(|(h, _)| h)),
        None => Ok(()),
    };
    let render_config = match (&gate, &configuration.result) {
        (Ok(()), Ok(config)) => Some(config),
        _ => None,
    };
    // A cluster held back by the rollout does not use the new config, valid or not.
    let config_in_use = gate.as_ref().err().is_none_or(Hold::is_error);
    ctx.set_config_invalid(cluster, config_in_use && configuration.result.is_err());
    let registrations = registration::registrations(addon_name, addon);
    // A config we do not render decides nothing: the namespace stays where the running agent is.
    let namespace = match render_config {
        Some(config) => Some(registration::install_namespace(
            addon,
            config.install_namespace.as_deref(),
        )),
        None => addon.status.as_ref().and_then(|s| s.namespace.clone()),
    };

    // Creating an owned object for an add-on that is already gone would outlive it until the garbage
    // collector notices (and a re-created work would briefly bring the agent back). The cache may
    // still hold an add-on whose deletion it has not seen: the garbage collector's deletions of what
    // it owned can arrive first. So when objects we created for it are missing, ask the server.
    let role_name = names::hub_role_name(addon_name);
    let creates = ctx
        .stores
        .roles
        .get(&ObjectRef::new(&role_name).within(cluster))
        .is_none()
        || ctx
            .stores
            .bindings
            .get(&ObjectRef::new(&role_name).within(cluster))
            .is_none()
        // The work is only created from a valid config the rollout lets us render.
        || (render_config.is_some()
            && ctx
                .stores
                .works
                .get(&ObjectRef::new(&names::deploy_work_name(addon_name)).within(cluster))
                .is_none());
    let uid = addon.metadata.uid.clone().unwrap_or_default();
    if creates && ctx.was_provisioned(&uid) && !still_exists(ctx, addon, cluster).await? {
        tracing::debug!(%cluster, "the add-on is gone; nothing to create for it");
        return Ok(Action::await_change());
    }

    let mut changes = Vec::new();
    let mut failure = None;

    // Hub RBAC: the agent's permission to write its score in this cluster namespace only.
    let rbac = ensure_hub_rbac(ctx, cluster, &registrations, &owner).await;
    changes.push(Change::Set(match &rbac {
        Ok(()) => Desired::new(
            REGISTRATION_APPLIED,
            Status::True,
            "SetPermissionApplied",
            "Registration of the addon agent is configured",
        ),
        Err(e) => Desired::new(
            REGISTRATION_APPLIED,
            Status::False,
            "SetPermissionFailed",
            e.to_string(),
        ),
    }));
    match rbac {
        Ok(()) => ctx.provisioned(&uid),
        Err(e) => failure = Some(e),
    }
    if let Err(e) = adopt_score(ctx, addon, cluster).await {
        failure.get_or_insert(e);
    }

    // The agent ManifestWork: rendered only from a valid config the rollout lets us render;
    // otherwise the last good one stays (never deleted: OCM's rollout may still be on it).
    let cached_work = ctx
        .stores
        .works
        .get(&ObjectRef::new(&names::deploy_work_name(addon_name)).within(cluster));
    let mut work_now = cached_work.as_deref().cloned();
    let mut apply_error = None;
    if let (Some(config), Some(namespace)) = (render_config, &namespace) {
        let input = agent::manifests::RenderInput {
            addon: addon_name,
            cluster,
            namespace,
            defaults: &settings.agent,
            config,
        };
        let manifests = agent::manifests::render(&input).map_err(|source| Error::Render {
            cluster: cluster.into(),
            source,
        })?;
        let hashes = match &rollout_references {
            Some(refs) => references::configs_to_map(refs),
            None => references::work_config_hashes(configuration.observed.as_ref()),
        };
        // OCM's rollout counts a cluster done once its work is Available: make that mean the agent
        // runs the new config. Our own lifecycle has no rollout to inform.
        let prunes_rules = ctx.hub_prunes_condition_rules.load(Ordering::Relaxed);
        let available = match lifecycle {
            Lifecycle::AddonManager if !prunes_rules => work::AgentAvailable::RolledOut,
            _ => work::AgentAvailable::Exists,
        };
        let desired = work::deploy_work(addon_name, cluster, &owner, manifests, &hashes, available);
        let api: Api<ManifestWork> = Api::namespaced(ctx.client.clone(), cluster);
        match ensure(ctx, &api, cached_work, &desired, work::up_to_date, work::updated).await {
            Ok(written) => {
                // A hub whose ManifestWork CRD predates conditionRules drops them: asking again
                // would rewrite the work at every pass.
                if work::rules_pruned(&desired, &written)
                    && !ctx.hub_prunes_condition_rules.swap(true, Ordering::Relaxed)
                {
                    tracing::warn!(
                        %cluster,
                        "the hub's ManifestWork CRD has no conditionRules (OCM older than v1.1?): OCM's rollouts count a cluster done once its agent's Deployment exists, not once it runs"
                    );
                }
                work_now = Some(written);
            }
            Err(e) => {
                apply_error = Some(e.to_string());
                failure.get_or_insert(e);
            }
        }
    }
    let manifest_applied =
        availability::manifest_applied(addon_name, work_now.as_ref(), apply_error.as_deref());
    changes.extend(
        manifest_applied.or_else(|| {
            waiting_for_configuration(lifecycle, work_now.is_some(), &gate, &configuration.result)
        }),
    );
    if settings.health == HealthMode::DeploymentAvailability && !cluster_availability_unknown(ctx, cluster) {
        let ns = namespace
            .clone()
            .unwrap_or_else(|| names::DEFAULT_INSTALL_NAMESPACE.to_string());
        changes.push(Change::Set(availability::available(
            addon_name,
            work_now.as_ref(),
            &ns,
            &names::agent_name(addon_name),
        )));
    }
    changes.extend(config_condition(lifecycle, &configuration, &gate).map(Change::Set));

    let applied_hash = applied_config_hash(work_now.as_ref(), configuration.observed.as_ref());
    let self_managed_references = |latest: &ManagedClusterAddOn| {
        let existing = latest
            .status
            .as_ref()
            .map(|s| s.config_references.as_slice())
            .unwrap_or_default();
        references::self_managed_references(
            existing,
            configuration.observed.as_ref(),
            applied_hash.as_deref(),
        )
    };
    let references_of = |latest: &ManagedClusterAddOn| match lifecycle {
        Lifecycle::AddonManager => references(latest),
        Lifecycle::SelfManaged => self_managed_references(latest),
    };
    let owned = OwnedStatus {
        supported_configs: references::supported_configs(),
        registrations,
        namespace,
        health_mode: settings.health.status_mode(),
        config_references: references_of(addon),
        conditions: changes,
    };
    write_status(ctx, addon, cluster, owned, references_of).await?;
    match failure {
        Some(e) => Err(e),
        None => Ok(Action::requeue(settings.resync)),
    }
}

/// `ManifestApplied=False` for an add-on under OCM's addon-manager that has no work and gets none
/// now. OCM's progressing controller judges nothing until `ManifestApplied` exists; with it, a cluster
/// OCM moved but we cannot render counts toward the rollout's progress deadline.
fn waiting_for_configuration(
    lifecycle: Lifecycle,
    work_exists: bool,
    gate: &Result<(), Hold>,
    config: &Result<AgentConfig, String>,
) -> Option<Change> {
    if lifecycle != Lifecycle::AddonManager || work_exists {
        return None;
    }
    let why = match (gate, config) {
        (Err(hold), _) => hold.to_string(),
        (Ok(()), Err(e)) => e.clone(),
        (Ok(()), Ok(_)) => return None,
    };
    Some(Change::Set(Desired::new(
        MANIFEST_APPLIED,
        Status::False,
        "WaitingForConfiguration",
        why,
    )))
}

/// `Configured` when we run the lifecycle; under OCM's addon-manager that condition is OCM's, so a
/// bad config shows as `Degraded` instead, and only for a config this cluster should run: a cluster
/// the rollout holds back is left as it is (`None`), except when its config is missing.
fn config_condition(
    lifecycle: Lifecycle,
    configuration: &Configuration,
    gate: &Result<(), Hold>,
) -> Option<Desired> {
    let which = configuration
        .observed
        .as_ref()
        .map(|o| format!("AddOnDeploymentConfig {}", o.key));
    match gate {
        Err(hold) if hold.is_error() => {
            return Some(Desired::new(
                DEGRADED,
                Status::True,
                "InvalidConfiguration",
                format!("{hold}; the last good agent configuration stays deployed"),
            ));
        }
        Err(_) => return None,
        Ok(()) => {}
    }
    let desired = match (lifecycle, &configuration.result) {
        (Lifecycle::SelfManaged, Ok(_)) => Desired::new(
            CONFIGURED,
            Status::True,
            "ConfigurationsConfigured",
            which.map_or("No configuration; agent defaults apply".into(), |w| {
                format!("{w} is applied")
            }),
        ),
        (Lifecycle::SelfManaged, Err(e)) => Desired::new(
            CONFIGURED,
            Status::False,
            "ConfigurationsNotConfigured",
            format!("{e}; the last good agent configuration stays deployed"),
        ),
        (Lifecycle::AddonManager, Ok(_)) => Desired::new(
            DEGRADED,
            Status::False,
            "ConfigurationValid",
            "The agent configuration is valid",
        ),
        (Lifecycle::AddonManager, Err(e)) => Desired::new(
            DEGRADED,
            Status::True,
            "InvalidConfiguration",
            format!("{e}; the last good agent configuration stays deployed"),
        ),
    };
    Some(desired)
}

/// The config hash of the current work, when the work agent reports it applied.
fn applied_config_hash(work: Option<&ManifestWork>, observed: Option<&ObservedConfig>) -> Option<String> {
    let work = work?;
    let applied = work
        .status
        .as_ref()
        .and_then(|s| crate::addon::status::conditions::find(&s.conditions, "Applied"));
    if applied.is_none_or(|c| c.status != "True") {
        return None;
    }
    let ObservedConfig {
        key: ConfigKey { namespace, name },
        ..
    } = observed?;
    let map: serde_json::Map<String, serde_json::Value> = work
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(names::CONFIG_SPEC_HASH_ANNOTATION))
        .and_then(|text| serde_json::from_str(text).ok())?;
    let key = names::config_hash_key(
        names::ADDON_GROUP,
        names::ADDON_DEPLOYMENT_CONFIG_RESOURCE,
        namespace,
        name,
    );
    map.get(&key).and_then(|v| v.as_str()).map(str::to_string)
}

/// While the hub cannot reach the cluster, OCM's registration controller owns `Available`.
fn cluster_availability_unknown(ctx: &Context, cluster: &str) -> bool {
    ctx.stores
        .clusters
        .get(&ObjectRef::new(cluster))
        .and_then(|c| c.status.clone())
        .and_then(|s| {
            s.conditions
                .into_iter()
                .find(|c| c.type_ == "ManagedClusterConditionAvailable")
        })
        .is_some_and(|c| c.status == "Unknown")
}

async fn ensure_hub_rbac(
    ctx: &Context,
    cluster: &str,
    registrations: &[ocm_score_api::RegistrationConfig],
    owner: &OwnerReference,
) -> Result<(), Error> {
    let addon = ctx.settings.addon.as_str();
    let name = names::hub_role_name(addon);
    let role = hub_rbac::role(addon, cluster, owner);
    let roles: Api<Role> = Api::namespaced(ctx.client.clone(), cluster);
    let cached = ctx.stores.roles.get(&ObjectRef::new(&name).within(cluster));
    ensure(
        ctx,
        &roles,
        cached,
        &role,
        hub_rbac::role_up_to_date,
        |existing, desired| {
            let mut out = existing.clone();
            out.rules.clone_from(&desired.rules);
            merge_metadata(&mut out.metadata, &desired.metadata);
            out
        },
    )
    .await?;
    let binding = hub_rbac::role_binding(addon, cluster, registrations, owner);
    let bindings: Api<RoleBinding> = Api::namespaced(ctx.client.clone(), cluster);
    let cached = ctx.stores.bindings.get(&ObjectRef::new(&name).within(cluster));
    ensure(
        ctx,
        &bindings,
        cached,
        &binding,
        hub_rbac::role_binding_up_to_date,
        |existing, desired| {
            let mut out = existing.clone();
            out.subjects.clone_from(&desired.subjects);
            out.role_ref.clone_from(&desired.role_ref);
            merge_metadata(&mut out.metadata, &desired.metadata);
            out
        },
    )
    .await?;
    Ok(())
}

/// Writes our part of the status, merging into the latest object on every conflict (the config
/// references are recomputed from the latest ones by `references`).
async fn write_status(
    ctx: &Context,
    addon: &ManagedClusterAddOn,
    cluster: &str,
    mut owned: OwnedStatus,
    references: impl Fn(&ManagedClusterAddOn) -> Vec<ocm_score_api::ConfigReference>,
) -> Result<(), Error> {
    let api: Api<ManagedClusterAddOn> = Api::namespaced(ctx.client.clone(), cluster);
    let name = addon.name_any();
    let mut latest = addon.clone();
    const ATTEMPTS: u32 = 5;
    for _ in 0..ATTEMPTS {
        let Some(patch) = status_patch(&latest, &owned, Timestamp::now()) else {
            return Ok(());
        };
        ctx.metrics.wrote(ManagedClusterAddOn::KIND, "patch");
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(e) if super::status_code(&e) == Some(409) => {
                latest = api.get(&name).await.map_err(|e| {
                    Error::api(
                        "reading",
                        ManagedClusterAddOn::KIND,
                        format!("{cluster}/{name}"),
                        e,
                    )
                })?;
                owned.config_references = references(&latest);
            }
            Err(e) => {
                return Err(Error::api(
                    "writing the status of",
                    ManagedClusterAddOn::KIND,
                    format!("{cluster}/{name}"),
                    e,
                ));
            }
        }
    }
    Err(Error::Conflict {
        what: "status of ManagedClusterAddOn".into(),
        name: format!("{cluster}/{name}"),
        attempts: ATTEMPTS,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key() -> ConfigKey {
        ConfigKey {
            namespace: "hub".into(),
            name: "cfg".into(),
        }
    }

    fn configuration(result: Result<AgentConfig, String>) -> Configuration {
        Configuration {
            observed: Some(ObservedConfig {
                key: key(),
                found: Some(("h1".into(), 1)),
            }),
            result,
        }
    }

    fn held() -> Result<(), Hold> {
        Err(Hold::NotYetCurrent {
            key: key(),
            desired: "h1".into(),
            current: "h2".into(),
        })
    }

    #[test]
    fn a_cluster_held_back_by_the_rollout_is_not_degraded_by_a_config_it_does_not_run() {
        let refused = configuration(Err("REFRESH_INTERVAL=soon: not a duration".into()));
        assert_eq!(config_condition(Lifecycle::AddonManager, &refused, &held()), None);
        assert_eq!(
            config_condition(Lifecycle::AddonManager, &refused, &Err(Hold::NotConfigured)),
            None
        );
        // OCM moved the cluster to the refused config: Degraded, naming the value.
        let degraded = config_condition(Lifecycle::AddonManager, &refused, &Ok(())).expect("a condition");
        assert_eq!(
            (degraded.type_, degraded.status, degraded.reason),
            (DEGRADED, Status::True, "InvalidConfiguration")
        );
        assert!(degraded.message.contains("REFRESH_INTERVAL=soon"), "{degraded:?}");
        // A missing config is an error whoever waits for it.
        let missing = config_condition(
            Lifecycle::AddonManager,
            &configuration(Ok(AgentConfig::default())),
            &Err(Hold::Missing(key())),
        )
        .expect("a condition");
        assert_eq!(
            (missing.status, missing.reason),
            (Status::True, "InvalidConfiguration")
        );
        assert!(missing.message.contains("hub/cfg not found"), "{missing:?}");
        let valid = config_condition(
            Lifecycle::AddonManager,
            &configuration(Ok(AgentConfig::default())),
            &Ok(()),
        )
        .expect("a condition");
        assert_eq!((valid.type_, valid.status), (DEGRADED, Status::False));
    }

    #[test]
    fn without_a_work_the_addon_says_what_it_waits_for() {
        let valid: Result<AgentConfig, String> = Ok(AgentConfig::default());
        let Some(Change::Set(waiting)) =
            waiting_for_configuration(Lifecycle::AddonManager, false, &Err(Hold::NotConfigured), &valid)
        else {
            panic!("no ManifestApplied while OCM has not configured the cluster");
        };
        assert_eq!(
            (waiting.type_, waiting.status, waiting.reason),
            (MANIFEST_APPLIED, Status::False, "WaitingForConfiguration")
        );
        assert!(waiting.message.contains("rollout"), "{waiting:?}");
        let refused: Result<AgentConfig, String> = Err("bad value".into());
        assert!(matches!(
            waiting_for_configuration(Lifecycle::AddonManager, false, &Ok(()), &refused),
            Some(Change::Set(d)) if d.message == "bad value"
        ));
        // Rendering now, an existing work (its own status decides), or our own lifecycle: nothing.
        assert_eq!(
            waiting_for_configuration(Lifecycle::AddonManager, false, &Ok(()), &valid),
            None
        );
        assert_eq!(
            waiting_for_configuration(Lifecycle::AddonManager, true, &held(), &valid),
            None
        );
        assert_eq!(
            waiting_for_configuration(Lifecycle::SelfManaged, false, &Ok(()), &refused),
            None
        );
    }
}
