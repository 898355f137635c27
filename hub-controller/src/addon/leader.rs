//! Leader election with a coordination.k8s.io Lease, so two replicas never both write.
//!
//! As client-go does it, a standby replica judges expiry by its own monotonic clock: a Lease whose
//! record has not changed for a full lease duration since this replica first saw it is expired,
//! whatever the clocks of other machines say. The leader renews every retry period and gives up
//! (the process then exits and restarts as a standby) when it could not renew for two thirds of
//! the lease duration, well before anyone else may take over. On shutdown it releases the Lease so
//! a standby takes over at once.

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    #[error("lost the leader Lease {lease}: {reason}")]
    Lost { lease: String, reason: String },
}

#[derive(Clone, Debug)]
pub struct LeaderConfig {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub retry_period: Duration,
}

/// What a standby replica knows about the current holder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observation {
    /// The Lease's resourceVersion when first seen; any renewal changes it.
    pub resource_version: String,
    pub since: Instant,
}

/// What to do after reading the Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// No Lease yet: create it holding it.
    Create,
    /// Free or expired (or already ours): write ourselves in as holder.
    Take,
    /// Someone else holds it and it is fresh.
    Wait { holder: String },
}

/// Decides a standby's next step. `observation` is updated so expiry is measured locally.
pub fn standby_step(
    lease: Option<&Lease>,
    identity: &str,
    observation: &mut Option<Observation>,
    now: Instant,
    default_duration: Duration,
) -> Step {
    let Some(lease) = lease else {
        *observation = None;
        return Step::Create;
    };
    let spec = lease.spec.as_ref();
    let holder = spec.and_then(|s| s.holder_identity.clone()).unwrap_or_default();
    if holder.is_empty() || holder == identity {
        return Step::Take;
    }
    let version = lease.metadata.resource_version.clone().unwrap_or_default();
    let seen = match observation {
        Some(o) if o.resource_version == version => o.since,
        _ => {
            *observation = Some(Observation {
                resource_version: version,
                since: now,
            });
            now
        }
    };
    let duration = spec
        .and_then(|s| s.lease_duration_seconds)
        .and_then(|s| u64::try_from(s).ok())
        .map_or(default_duration, Duration::from_secs);
    if now.duration_since(seen) >= duration {
        Step::Take
    } else {
        Step::Wait { holder }
    }
}

pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderConfig,
}

impl LeaderElector {
    pub fn new(client: kube::Client, config: LeaderConfig) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &config.namespace),
            config,
        }
    }

    fn lease_name(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.name)
    }

    fn duration_seconds(&self) -> i32 {
        i32::try_from(self.config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }

    /// Waits until this replica holds the Lease. Returns `false` if shutdown came first.
    pub async fn acquire(&self, shutdown: &mut watch::Receiver<bool>) -> bool {
        let mut observation = None;
        let mut last_holder = String::new();
        loop {
            match self.try_acquire(&mut observation).await {
                Ok(None) => {
                    tracing::info!(lease = %self.lease_name(), identity = %self.config.identity, "became leader");
                    return true;
                }
                Ok(Some(holder)) => {
                    if holder != last_holder {
                        tracing::info!(lease = %self.lease_name(), %holder, "standing by: another replica leads");
                        last_holder = holder;
                    }
                }
                Err(error) => {
                    tracing::warn!(lease = %self.lease_name(), %error, "leader election attempt failed")
                }
            }
            tokio::select! {
                _ = tokio::time::sleep(self.config.retry_period) => {}
                _ = shutdown.wait_for(|stop| *stop) => return false,
            }
        }
    }

    /// One attempt: `Ok(None)` when we now lead, `Ok(Some(holder))` when someone else does.
    async fn try_acquire(
        &self,
        observation: &mut Option<Observation>,
    ) -> Result<Option<String>, kube::Error> {
        let current = self.api.get_opt(&self.config.name).await?;
        let step = standby_step(
            current.as_ref(),
            &self.config.identity,
            observation,
            Instant::now(),
            self.config.lease_duration,
        );
        let now = MicroTime(Timestamp::now());
        match step {
            Step::Wait { holder } => Ok(Some(holder)),
            Step::Create => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..Default::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.config.identity.clone()),
                        lease_duration_seconds: Some(self.duration_seconds()),
                        acquire_time: Some(now.clone()),
                        renew_time: Some(now),
                        lease_transitions: Some(0),
                        ..Default::default()
                    }),
                };
                self.api.create(&PostParams::default(), &lease).await?;
                Ok(None)
            }
            Step::Take => {
                let Some(mut lease) = current else {
                    return Ok(Some(String::new()));
                };
                let spec = lease.spec.get_or_insert_default();
                let ours = spec.holder_identity.as_deref() == Some(self.config.identity.as_str());
                if !ours {
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
                    spec.acquire_time = Some(now.clone());
                }
                spec.holder_identity = Some(self.config.identity.clone());
                spec.lease_duration_seconds = Some(self.duration_seconds());
                spec.renew_time = Some(now);
                // resourceVersion makes this fail if another replica took it in the meantime.
                self.api
                    .replace(&self.config.name, &PostParams::default(), &lease)
                    .await?;
                Ok(None)
            }
        }
    }

    /// Renews the Lease until shutdown (`Ok`) or until it cannot be renewed in time (`Err`).
    pub async fn hold(&self, shutdown: &mut watch::Receiver<bool>) -> Result<(), LeaderError> {
        let deadline = self.config.lease_duration.mul_f64(2.0 / 3.0);
        let mut last_renewal = Instant::now();
        loop {
            tokio::select! {
                _ = tokio::time::sleep(self.config.retry_period) => {}
                _ = shutdown.wait_for(|stop| *stop) => return Ok(()),
            }
            match self.renew().await {
                Ok(()) => last_renewal = Instant::now(),
                Err(RenewError::TakenBy(holder)) => {
                    return Err(LeaderError::Lost {
                        lease: self.lease_name(),
                        reason: format!("now held by {holder:?}"),
                    });
                }
                Err(RenewError::Api(error)) => {
                    tracing::warn!(lease = %self.lease_name(), %error, "renewing the leader Lease failed");
                    if last_renewal.elapsed() >= deadline {
                        return Err(LeaderError::Lost {
                            lease: self.lease_name(),
                            reason: format!("not renewed for {:?}: {error}", last_renewal.elapsed()),
                        });
                    }
                }
            }
        }
    }

    async fn renew(&self) -> Result<(), RenewError> {
        let mut lease = self.api.get(&self.config.name).await.map_err(RenewError::Api)?;
        let spec = lease.spec.get_or_insert_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        if holder != self.config.identity {
            return Err(RenewError::TakenBy(holder));
        }
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        self.api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
            .map_err(RenewError::Api)?;
        Ok(())
    }

    /// Gives the Lease up so a standby replica takes over without waiting for expiry.
    pub async fn release(&self) {
        let result = async {
            let mut lease = self.api.get(&self.config.name).await?;
            let spec = lease.spec.get_or_insert_default();
            if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return Ok(());
            }
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(MicroTime(Timestamp::now()));
            self.api
                .replace(&self.config.name, &PostParams::default(), &lease)
                .await
                .map(drop)
        }
        .await;
        match result {
            Ok(()) => tracing::info!(lease = %self.lease_name(), "released the leader Lease"),
            Err(error) => {
                tracing::warn!(lease = %self.lease_name(), %error, "could not release the leader Lease")
            }
        }
    }
}

enum RenewError {
    TakenBy(String),
    Api(kube::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lease(holder: Option<&str>, rv: &str, seconds: i32) -> Lease {
        Lease {
            metadata: ObjectMeta {
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: holder.map(Into::into),
                lease_duration_seconds: Some(seconds),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn standby_waits_a_full_duration_of_silence_by_its_own_clock() {
        let t0 = Instant::now();
        let d = Duration::from_secs(15);
        let mut obs = None;
        let held = lease(Some("other"), "1", 15);
        assert_eq!(
            standby_step(Some(&held), "me", &mut obs, t0, d),
            Step::Wait {
                holder: "other".into()
            }
        );
        assert_eq!(
            standby_step(Some(&held), "me", &mut obs, t0 + Duration::from_secs(14), d),
            Step::Wait {
                holder: "other".into()
            }
        );
        // A renewal (new resourceVersion) restarts the count.
        let renewed = lease(Some("other"), "2", 15);
        assert_eq!(
            standby_step(Some(&renewed), "me", &mut obs, t0 + Duration::from_secs(14), d),
            Step::Wait {
                holder: "other".into()
            }
        );
        assert_eq!(
            standby_step(Some(&renewed), "me", &mut obs, t0 + Duration::from_secs(28), d),
            Step::Wait {
                holder: "other".into()
            }
        );
        assert_eq!(
            standby_step(Some(&renewed), "me", &mut obs, t0 + Duration::from_secs(29), d),
            Step::Take
        );
    }

    #[test]
    fn free_missing_or_own_leases_are_taken() {
        let t0 = Instant::now();
        let d = Duration::from_secs(15);
        let mut obs = None;
        assert_eq!(standby_step(None, "me", &mut obs, t0, d), Step::Create);
        assert_eq!(
            standby_step(Some(&lease(None, "1", 1)), "me", &mut obs, t0, d),
            Step::Take
        );
        assert_eq!(
            standby_step(Some(&lease(Some(""), "1", 1)), "me", &mut obs, t0, d),
            Step::Take
        );
        assert_eq!(
            standby_step(Some(&lease(Some("me"), "1", 15)), "me", &mut obs, t0, d),
            Step::Take
        );
    }
}
