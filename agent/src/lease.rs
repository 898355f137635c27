//! Renewal of the add-on Lease for OCM's Lease health mode.
//!
//! The klusterlet's registration agent reads a Lease named exactly like the add-on in its install
//! namespace on the managed cluster and reports the add-on Available while `renewTime` is less than
//! five minutes old. The agent renews it every interval (jittered), but only while its own main loop
//! is alive, so a wedged agent reads as unavailable rather than healthy.

use crate::metrics::Metrics;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use ocm_score_api::ObjectMeta;
use ocm_score_shell::probes::Heartbeat;
use std::sync::Arc;
use std::time::Duration;

/// What OCM's own lease updater sets.
pub const LEASE_DURATION_SECONDS: i32 = 60;

pub struct LeaseRenewer {
    api: Api<Lease>,
    name: String,
    namespace: String,
    timeout: Duration,
}

impl LeaseRenewer {
    pub fn new(client: Client, namespace: String, name: String, timeout: Duration) -> Self {
        LeaseRenewer {
            api: Api::namespaced(client, &namespace),
            name,
            namespace,
            timeout,
        }
    }

    /// Sets `renewTime` to now, creating the Lease if it does not exist.
    pub async fn renew(&self, now: Timestamp) -> Result<(), kube::Error> {
        let renew_time = MicroTime(now);
        let patch = serde_json::json!({
            "spec": {"renewTime": renew_time, "leaseDurationSeconds": LEASE_DURATION_SECONDS}
        });
        match self
            .api
            .patch(
                &self.name,
                &PatchParams {
                    field_manager: Some(crate::FIELD_MANAGER.to_owned()),
                    ..Default::default()
                },
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(status)) if status.is_not_found() => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(self.namespace.clone()),
                        ..Default::default()
                    },
                    spec: Some(LeaseSpec {
                        lease_duration_seconds: Some(LEASE_DURATION_SECONDS),
                        renew_time: Some(renew_time),
                        ..Default::default()
                    }),
                };
                self.api
                    .create(
                        &PostParams {
                            field_manager: Some(crate::FIELD_MANAGER.to_owned()),
                            ..Default::default()
                        },
                        &lease,
                    )
                    .await
                    .map(|_| ())
            }
            Err(e) => Err(e),
        }
    }

    /// Renews every `interval` (±25 %) while `heartbeat` is fresh, until the task is dropped.
    pub async fn run(
        self,
        interval: Duration,
        heartbeat: Arc<Heartbeat>,
        max_silence: Duration,
        metrics: Arc<Metrics>,
    ) {
        loop {
            let now = Timestamp::now();
            if heartbeat.alive(max_silence) {
                let result = tokio::time::timeout(self.timeout, self.renew(now)).await;
                match result {
                    Ok(Ok(())) => {
                        metrics.lease_renewal(true);
                        tracing::debug!(lease = %self.name, namespace = %self.namespace, "lease renewed");
                    }
                    Ok(Err(error)) => {
                        metrics.lease_renewal(false);
                        tracing::warn!(lease = %self.name, namespace = %self.namespace, %error, "lease renewal failed");
                    }
                    Err(_) => {
                        metrics.lease_renewal(false);
                        tracing::warn!(lease = %self.name, namespace = %self.namespace, "lease renewal timed out");
                    }
                }
            } else {
                tracing::warn!(lease = %self.name, "main loop silent; not renewing the lease");
            }
            tokio::time::sleep(ocm_score_shell::jitter::spread(interval, 0.25)).await;
        }
    }
}
