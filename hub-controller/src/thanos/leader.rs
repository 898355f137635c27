//! Leader election with a `coordination.k8s.io/v1` Lease, so that of several replicas exactly one
//! writes scores. It follows client-go's rules: the holder renews every retry period; another replica
//! takes over once it has seen the same Lease record unchanged for a whole lease duration (measured
//! on its own monotonic clock, so clock skew between replicas does not matter); a leader that could
//! not renew for the renew deadline stops acting as leader; every update is conditional on the
//! resourceVersion read, so two replicas cannot both win.

use super::{config::LeaderElectionConfig, stop_requested};
use k8s_openapi::{
    api::coordination::v1::{Lease, LeaseSpec},
    apimachinery::pkg::apis::meta::v1::MicroTime,
};
use kube::{
    Api,
    api::{ObjectMeta, PostParams},
};
use std::time::{Duration, Instant};
use tokio::sync::watch;

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("reading or writing Lease {namespace}/{name}: {source}")]
    Kube {
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// Competes for the Lease and publishes whether this replica leads.
pub struct LeaderElector {
    api: Api<Lease>,
    namespace: String,
    config: LeaderElectionConfig,
    /// The last Lease record seen from someone else, and when it was first seen.
    observed: Option<(Option<String>, Option<MicroTime>, Instant)>,
}

impl LeaderElector {
    pub fn new(client: kube::Client, namespace: String, config: LeaderElectionConfig) -> Self {
        Self {
            api: Api::namespaced(client, &namespace),
            namespace,
            config,
            observed: None,
        }
    }

    /// Runs until `shutdown`, sending `true` on `leading` while this replica holds the Lease. On
    /// shutdown a held Lease is released so another replica takes over without waiting.
    pub async fn run(mut self, leading: watch::Sender<bool>, mut shutdown: watch::Receiver<bool>) {
        let mut last_renewed: Option<Instant> = None;
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => {
                    if !*leading.borrow() {
                        tracing::info!(lease = %self.config.lease_name, identity = %self.config.identity, "became leader");
                    }
                    last_renewed = Some(Instant::now());
                    leading.send_replace(true);
                }
                Ok(false) => {
                    if *leading.borrow() {
                        tracing::warn!(lease = %self.config.lease_name, "lost the Lease to another replica");
                    }
                    last_renewed = None;
                    leading.send_replace(false);
                }
                Err(e) => {
                    tracing::warn!(error = %e, "leader election attempt failed");
                    let overdue = last_renewed.is_none_or(|t| t.elapsed() >= self.config.renew_deadline);
                    if overdue && *leading.borrow() {
                        tracing::warn!(lease = %self.config.lease_name, "could not renew the Lease in time, stepping down");
                        leading.send_replace(false);
                    }
                }
            }
            tokio::select! {
                () = stop_requested(&mut shutdown) => break,
                _ = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
        if *leading.borrow() {
            leading.send_replace(false);
            match self.release().await {
                Ok(()) => tracing::info!(lease = %self.config.lease_name, "released the Lease"),
                Err(e) => {
                    tracing::warn!(error = %e, "releasing the Lease failed; another replica takes over when it expires")
                }
            }
        }
    }

    /// One round of client-go's `tryAcquireOrRenew`: true when this replica holds the Lease afterwards.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaderError> {
        let now = MicroTime(jiff::Timestamp::now());
        let Some(mut lease) = self
            .api
            .get_opt(&self.config.lease_name)
            .await
            .map_err(|e| self.error(e))?
        else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.lease_name.clone()),
                    namespace: Some(self.namespace.clone()),
                    ..Default::default()
                },
                spec: Some(self.record(now.clone(), now, 0)),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(e) if is_conflict(&e) => Ok(false),
                Err(e) => Err(self.error(e)),
            };
        };

        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let ours = holder.as_deref() == Some(self.config.identity.as_str());
        if !ours && holder.is_some() {
            let record = (holder.clone(), spec.renew_time.clone());
            let first_seen = match &self.observed {
                Some((h, r, at)) if (h, r) == (&record.0, &record.1) => *at,
                _ => Instant::now(),
            };
            self.observed = Some((record.0, record.1, first_seen));
            let duration = Duration::from_secs(spec.lease_duration_seconds.unwrap_or(0).max(0) as u64);
            if first_seen.elapsed() < duration {
                return Ok(false);
            }
            tracing::info!(previous = ?holder, "the Lease expired, taking over");
        }

        let (acquired, transitions) = if ours {
            (
                spec.acquire_time.clone().unwrap_or_else(|| now.clone()),
                spec.lease_transitions.unwrap_or(0),
            )
        } else {
            (now.clone(), spec.lease_transitions.unwrap_or(0).saturating_add(1))
        };
        lease.spec = Some(self.record(acquired, now, transitions));
        // `replace` sends the resourceVersion we read: a concurrent writer makes this a 409.
        match self
            .api
            .replace(&self.config.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => {
                self.observed = None;
                Ok(true)
            }
            Err(e) if is_conflict(&e) => Ok(false),
            Err(e) => Err(self.error(e)),
        }
    }

    async fn release(&self) -> Result<(), LeaderError> {
        let Some(mut lease) = self
            .api
            .get_opt(&self.config.lease_name)
            .await
            .map_err(|e| self.error(e))?
        else {
            return Ok(());
        };
        let mut spec = lease.spec.take().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(jiff::Timestamp::now()));
        lease.spec = Some(spec);
        self.api
            .replace(&self.config.lease_name, &PostParams::default(), &lease)
            .await
            .map_err(|e| self.error(e))?;
        Ok(())
    }

    fn record(&self, acquired: MicroTime, renewed: MicroTime, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(
                self.config
                    .lease_duration
                    .as_secs()
                    .try_into()
                    .unwrap_or(i32::MAX),
            ),
            acquire_time: Some(acquired),
            renew_time: Some(renewed),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    fn error(&self, source: kube::Error) -> LeaderError {
        LeaderError::Kube {
            namespace: self.namespace.clone(),
            name: self.config.lease_name.clone(),
            source: Box::new(source),
        }
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.code == 409)
}
