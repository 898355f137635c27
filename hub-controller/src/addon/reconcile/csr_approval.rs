//! Approves or denies the add-on's certificate signing requests through the `approval` subresource.

use super::{Context, Error, error_policy, observed, status_code};
use crate::addon::names;
use crate::addon::registration::csr::{CsrFacts, Decision, decide};
use jiff::Timestamp;
use k8s_openapi::api::certificates::v1::{CertificateSigningRequest, CertificateSigningRequestCondition};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use std::sync::Arc;

const CONTROLLER: &str = "csr";

pub async fn reconcile(csr: Arc<CertificateSigningRequest>, ctx: Arc<Context>) -> Result<Action, Error> {
    observed(
        CONTROLLER,
        csr.as_ref(),
        &ctx,
        reconcile_inner(csr.clone(), ctx.clone()),
    )
    .await
}

pub fn on_error(csr: Arc<CertificateSigningRequest>, error: &Error, ctx: Arc<Context>) -> Action {
    error_policy(CONTROLLER, csr.as_ref(), error, &ctx)
}

/// The CSRs of one cluster, for re-deciding them when its add-on or ManagedCluster appears.
pub fn csrs_of_cluster(
    ctx_csrs: &kube::runtime::reflector::Store<CertificateSigningRequest>,
    cluster: &str,
) -> Vec<ObjectRef<CertificateSigningRequest>> {
    ctx_csrs
        .state()
        .iter()
        .filter(|c| c.labels().get(names::CLUSTER_NAME_LABEL).map(String::as_str) == Some(cluster))
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

async fn reconcile_inner(csr: Arc<CertificateSigningRequest>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.stores.synced().await?;
    let name = csr.name_any();
    let labels = csr.labels();
    let cluster_label = labels.get(names::CLUSTER_NAME_LABEL).map(String::as_str);
    let decided = csr
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| {
            cs.iter()
                .any(|c| matches!(c.type_.as_str(), "Approved" | "Denied" | "Failed"))
        });
    let cluster_has_addon = cluster_label.is_some_and(|cluster| {
        ctx.stores.clusters.get(&ObjectRef::new(cluster)).is_some()
            && ctx
                .stores
                .addons
                .get(&ObjectRef::new(&ctx.settings.addon).within(cluster))
                .is_some()
    });
    let facts = CsrFacts {
        name: &name,
        signer_name: &csr.spec.signer_name,
        requester: csr.spec.username.as_deref().unwrap_or_default(),
        grpc_user: csr
            .annotations()
            .get(names::CSR_USER_ANNOTATION)
            .map(String::as_str),
        request: &csr.spec.request.0,
        addon_label: labels.get(names::ADDON_NAME_LABEL).map(String::as_str),
        cluster_label,
        decided,
        cluster_has_addon,
    };
    let (type_, reason, message, label) = match decide(&ctx.settings.addon, &facts) {
        Decision::Skip(why) => {
            tracing::debug!(csr = %name, %why, "not deciding CSR");
            return Ok(Action::await_change());
        }
        Decision::Approve => (
            "Approved",
            "AutoApprovedByHubCSRApprovingController",
            "Auto approving addon agent certificate.".to_string(),
            "approved",
        ),
        Decision::Deny(why) => ("Denied", "AddonCSRIdentityMismatch", why, "denied"),
    };
    let mut updated = (*csr).clone();
    let now = Time(Timestamp::now());
    updated
        .status
        .get_or_insert_default()
        .conditions
        .get_or_insert_default()
        .push(CertificateSigningRequestCondition {
            type_: type_.into(),
            status: "True".into(),
            reason: Some(reason.into()),
            message: Some(message.clone()),
            last_transition_time: Some(now.clone()),
            last_update_time: Some(now),
        });
    let api: Api<CertificateSigningRequest> = Api::all(ctx.client.clone());
    ctx.metrics.wrote("CertificateSigningRequest", "update");
    match api
        .replace_subresource("approval", &name, &PostParams::default(), &updated)
        .await
    {
        Ok(_) => {}
        // Decided or changed meanwhile: the watch brings the new version.
        Err(e) if matches!(status_code(&e), Some(404 | 409)) => return Ok(Action::await_change()),
        Err(e) => return Err(Error::api("deciding", "CertificateSigningRequest", name, e)),
    }
    ctx.metrics.csr_decided(label);
    if type_ == "Approved" {
        tracing::info!(csr = %name, cluster = cluster_label.unwrap_or_default(), "approved add-on CSR");
    } else {
        tracing::warn!(csr = %name, cluster = cluster_label.unwrap_or_default(), requester = facts.requester, %message, "denied add-on CSR");
    }
    Ok(Action::await_change())
}
