//! Leader election with a `coordination.k8s.io/v1` Lease, so of several replicas of a mode exactly
//! one writes. One elector for every mode, following client-go's rules:
//!
//! - a standby judges expiry by its own monotonic clock: a Lease whose record (resourceVersion) has
//!   not changed for a whole lease duration since this replica first saw it is expired, whatever the
//!   clocks of other machines say;
//! - the leader renews every retry period; every write is conditional on the resourceVersion read,
//!   so two replicas cannot both win;
//! - a leader that could not renew within the renew deadline, or finds the Lease taken, **steps
//!   down** and competes again. A mode that must not go on after a loss (the add-on manager) watches
//!   [`Leadership`] and stops itself;
//! - when told to stop, a leader releases the Lease so a standby takes over at once.
//!
//! The decisions are [`Election`]'s, a pure state machine with the clock passed in; [`LeaderElector`]
//! does the I/O through a [`LeaseStore`]. `kube-lease-manager` (kube 5) was considered: it judges
//! expiry by comparing `renewTime` with the local wall clock (so clock skew between replicas moves
//! takeovers) and times itself with the system clock, which Tokio's paused clock in our tests cannot
//! drive.

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::api::{Api, PostParams};
use std::future::Future;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Everything an elector needs, resolved from [`crate::args::LeaderElectionArgs`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderConfig {
    pub namespace: String,
    pub lease_name: String,
    pub identity: String,
    /// How long a holder's claim lasts without renewal.
    pub lease_duration: Duration,
    /// A leader that could not renew for this long steps down (shorter than `lease_duration`, so it
    /// stops before anyone may take over).
    pub renew_deadline: Duration,
    /// Time between two attempts to acquire or renew.
    pub retry_period: Duration,
}

/// What to write after reading the Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// No Lease yet: create it, holding it.
    Create,
    /// Free, expired, or ours: write ourselves in as holder (acquire or renew).
    Take,
    /// Someone else holds it and it is fresh.
    Wait { holder: String },
}

/// The election's memory between attempts and its decisions; the clock is an argument.
#[derive(Clone, Debug)]
pub struct Election {
    identity: String,
    default_duration: Duration,
    renew_deadline: Duration,
    /// Someone else's record (resourceVersion) and when this replica first saw it.
    observed: Option<(String, Instant)>,
    /// When the Lease last named us after a write of ours.
    renewed: Option<Instant>,
}

impl Election {
    pub fn new(identity: impl Into<String>, lease_duration: Duration, renew_deadline: Duration) -> Self {
        Election {
            identity: identity.into(),
            default_duration: lease_duration,
            renew_deadline,
            observed: None,
            renewed: None,
        }
    }

    /// Decides the next write from the Lease just read (`None`: it does not exist).
    pub fn step(&mut self, lease: Option<&Lease>, now: Instant) -> Step {
        let Some(lease) = lease else {
            self.observed = None;
            return Step::Create;
        };
        let spec = lease.spec.as_ref();
        let holder = spec.and_then(|s| s.holder_identity.clone()).unwrap_or_default();
        if holder.is_empty() || holder == self.identity {
            self.observed = None;
            return Step::Take;
        }
        let version = lease.metadata.resource_version.clone().unwrap_or_default();
        let since = match &self.observed {
            Some((seen, since)) if *seen == version => *since,
            _ => {
                self.observed = Some((version, now));
                now
            }
        };
        let duration = spec
            .and_then(|s| s.lease_duration_seconds)
            .and_then(|s| u64::try_from(s).ok())
            .map_or(self.default_duration, Duration::from_secs);
        if now.duration_since(since) >= duration {
            Step::Take
        } else {
            Step::Wait { holder }
        }
    }

    /// Our write went through: the Lease names us as of `now`.
    pub fn renewed(&mut self, now: Instant) {
        self.renewed = Some(now);
    }

    /// The Lease names someone else: we do not lead, whatever we thought.
    pub fn lost(&mut self) {
        self.renewed = None;
    }

    /// Whether we lead at `now`: the last renewal is younger than the renew deadline.
    pub fn leading(&self, now: Instant) -> bool {
        self.time_left(now).is_some()
    }

    /// How long the leader may still go without renewing; `None` when not leading.
    pub fn time_left(&self, now: Instant) -> Option<Duration> {
        let renewed = self.renewed?;
        self.renew_deadline
            .checked_sub(now.duration_since(renewed))
            .filter(|left| !left.is_zero())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum LeaseStoreError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
    #[error("{0}")]
    Other(String),
}

/// Where the Lease lives: the API server in production, memory in tests.
pub trait LeaseStore: Send + Sync + 'static {
    fn get(&self) -> impl Future<Output = Result<Option<Lease>, LeaseStoreError>> + Send;
    fn create(&self, lease: &Lease) -> impl Future<Output = Result<(), LeaseStoreError>> + Send;
    /// Replaces the Lease; fails if its resourceVersion is no longer current.
    fn replace(&self, lease: &Lease) -> impl Future<Output = Result<(), LeaseStoreError>> + Send;
}

/// One Lease on the API server.
pub struct KubeLease {
    api: Api<Lease>,
    name: String,
}

impl KubeLease {
    pub fn new(client: kube::Client, namespace: &str, name: &str) -> Self {
        KubeLease {
            api: Api::namespaced(client, namespace),
            name: name.to_owned(),
        }
    }
}

impl LeaseStore for KubeLease {
    async fn get(&self) -> Result<Option<Lease>, LeaseStoreError> {
        Ok(self.api.get_opt(&self.name).await?)
    }

    async fn create(&self, lease: &Lease) -> Result<(), LeaseStoreError> {
        self.api.create(&PostParams::default(), lease).await?;
        Ok(())
    }

    async fn replace(&self, lease: &Lease) -> Result<(), LeaseStoreError> {
        self.api
            .replace(&self.name, &PostParams::default(), lease)
            .await?;
        Ok(())
    }
}

/// Competes for the Lease and publishes whether this replica leads.
pub struct LeaderElector<S = KubeLease> {
    store: S,
    config: LeaderConfig,
}

/// A running election: whether this replica leads, and the task that competes.
pub struct Leadership {
    leading: watch::Receiver<bool>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Leadership {
    /// Whether this replica leads now.
    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// The leadership flag, for tasks that check it before each write.
    pub fn watch(&self) -> watch::Receiver<bool> {
        self.leading.clone()
    }

    /// Waits until this replica leads (`true`) or `shutdown` is cancelled first (`false`).
    pub async fn acquired(&mut self, shutdown: &CancellationToken) -> bool {
        tokio::select! {
            led = self.leading.wait_for(|leading| *leading) => led.is_ok(),
            () = shutdown.cancelled() => false,
        }
    }

    /// Resolves when this replica no longer leads (stepped down, or the election ended).
    pub async fn lost(&mut self) {
        let _ = self.leading.wait_for(|leading| !*leading).await;
    }

    /// Stops competing and releases the Lease if held; waits at most `grace` for the release.
    pub async fn stop(mut self, grace: Duration) {
        self.stop.cancel();
        if tokio::time::timeout(grace, &mut self.task).await.is_err() {
            tracing::warn!("leader election did not stop within {grace:?}; the Lease expires instead");
            self.task.abort();
        }
    }
}

impl LeaderElector<KubeLease> {
    pub fn new(client: kube::Client, config: LeaderConfig) -> Self {
        let store = KubeLease::new(client, &config.namespace, &config.lease_name);
        LeaderElector { store, config }
    }
}

impl<S: LeaseStore> LeaderElector<S> {
    pub fn with_store(store: S, config: LeaderConfig) -> Self {
        LeaderElector { store, config }
    }

    /// Starts competing in a task. The election runs until [`Leadership::stop`] (not until process
    /// shutdown: a mode stops its writers first, then releases the Lease).
    pub fn spawn(self) -> Leadership {
        let (sender, leading) = watch::channel(false);
        let stop = CancellationToken::new();
        let task = tokio::spawn(self.run(sender, stop.clone()));
        Leadership { leading, stop, task }
    }

    fn lease_name(&self) -> String {
        format!("{}/{}", self.config.namespace, self.config.lease_name)
    }

    /// Competes until `stop`, sending on `leading` whether this replica leads; then releases a held Lease.
    pub async fn run(self, leading: watch::Sender<bool>, stop: CancellationToken) {
        let mut election = Election::new(
            self.config.identity.clone(),
            self.config.lease_duration,
            self.config.renew_deadline,
        );
        let lease = self.lease_name();
        let mut last_holder = String::new();
        loop {
            // A leader's attempt may not outlast its renew deadline; a standby's gets as long.
            let budget = election
                .time_left(Instant::now())
                .unwrap_or(self.config.renew_deadline);
            let attempt = tokio::select! {
                () = stop.cancelled() => break,
                attempt = tokio::time::timeout(budget, self.attempt(&mut election)) => attempt,
            };
            match attempt {
                Ok(Ok(None)) => {
                    election.renewed(Instant::now());
                    if !*leading.borrow() {
                        tracing::info!(%lease, identity = %self.config.identity, "became leader");
                        leading.send_replace(true);
                    }
                    last_holder.clear();
                }
                Ok(Ok(Some(holder))) => {
                    election.lost();
                    if *leading.borrow() {
                        tracing::warn!(%lease, %holder, "the Lease was taken over; stepping down");
                        leading.send_replace(false);
                    } else if holder != last_holder {
                        tracing::info!(%lease, %holder, "standing by: another replica leads");
                    }
                    last_holder = holder;
                }
                Ok(Err(error)) => tracing::warn!(%lease, %error, "leader election attempt failed"),
                Err(_) => tracing::warn!(%lease, "leader election attempt timed out"),
            }
            if *leading.borrow() && !election.leading(Instant::now()) {
                tracing::warn!(%lease, deadline = ?self.config.renew_deadline, "could not renew the Lease in time; stepping down");
                leading.send_replace(false);
            }
            tokio::select! {
                () = stop.cancelled() => break,
                () = tokio::time::sleep(self.config.retry_period) => {}
            }
        }
        if leading.send_replace(false) {
            match self.release().await {
                Ok(()) => tracing::info!(%lease, "released the leader Lease"),
                Err(error) => {
                    tracing::warn!(%lease, %error, "could not release the leader Lease; a standby takes over when it expires")
                }
            }
        }
    }

    /// One read and maybe one write: `None` when we hold the Lease afterwards, else its holder.
    async fn attempt(&self, election: &mut Election) -> Result<Option<String>, LeaseStoreError> {
        let current = self.store.get().await?;
        let now = MicroTime(Timestamp::now());
        match election.step(current.as_ref(), Instant::now()) {
            Step::Wait { holder } => Ok(Some(holder)),
            Step::Create => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.lease_name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..Default::default()
                    },
                    spec: Some(self.record(now.clone(), now, 0)),
                };
                self.store.create(&lease).await?;
                Ok(None)
            }
            Step::Take => {
                let Some(mut lease) = current else {
                    return Err(LeaseStoreError::Other("the Lease vanished".into()));
                };
                let spec = lease.spec.take().unwrap_or_default();
                let ours = spec.holder_identity.as_deref() == Some(self.config.identity.as_str());
                let transitions = spec.lease_transitions.unwrap_or(0);
                lease.spec = Some(if ours {
                    self.record(spec.acquire_time.unwrap_or_else(|| now.clone()), now, transitions)
                } else {
                    self.record(now.clone(), now, transitions.saturating_add(1))
                });
                // The resourceVersion read makes this fail if another replica wrote in between.
                self.store.replace(&lease).await?;
                Ok(None)
            }
        }
    }

    fn record(&self, acquired: MicroTime, renewed: MicroTime, transitions: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(
                i32::try_from(self.config.lease_duration.as_secs().max(1)).unwrap_or(i32::MAX),
            ),
            acquire_time: Some(acquired),
            renew_time: Some(renewed),
            lease_transitions: Some(transitions),
            ..Default::default()
        }
    }

    /// Gives the Lease up (no holder, one-second duration) so a standby takes over at once.
    async fn release(&self) -> Result<(), LeaseStoreError> {
        let Some(mut lease) = self.store.get().await? else {
            return Ok(());
        };
        let mut spec = lease.spec.take().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(Timestamp::now()));
        lease.spec = Some(spec);
        self.store.replace(&lease).await
    }
}

/// A Lease store in memory, for the elector's and the supervisor's tests.
#[cfg(test)]
pub(crate) mod memory {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};

    /// A Lease in memory with the API server's optimistic concurrency, and a switch to make it fail.
    #[derive(Clone, Default)]
    pub(crate) struct Memory {
        pub(crate) lease: Arc<Mutex<Option<Lease>>>,
        pub(crate) down: Arc<AtomicBool>,
        version: Arc<Mutex<u64>>,
    }

    impl Memory {
        fn check(&self) -> Result<(), LeaseStoreError> {
            if self.down.load(Ordering::Relaxed) {
                Err(LeaseStoreError::Other("API server unreachable".into()))
            } else {
                Ok(())
            }
        }

        pub(crate) fn store(&self, mut lease: Lease) {
            let mut version = self.version.lock().expect("lock");
            *version += 1;
            lease.metadata.resource_version = Some(version.to_string());
            *self.lease.lock().expect("lock") = Some(lease);
        }

        pub(crate) fn holder(&self) -> Option<String> {
            let lease = self.lease.lock().expect("lock");
            lease.as_ref()?.spec.as_ref()?.holder_identity.clone()
        }
    }

    impl LeaseStore for Memory {
        async fn get(&self) -> Result<Option<Lease>, LeaseStoreError> {
            self.check()?;
            Ok(self.lease.lock().expect("lock").clone())
        }

        async fn create(&self, lease: &Lease) -> Result<(), LeaseStoreError> {
            self.check()?;
            if self.lease.lock().expect("lock").is_some() {
                return Err(LeaseStoreError::Other("already exists".into()));
            }
            self.store(lease.clone());
            Ok(())
        }

        async fn replace(&self, lease: &Lease) -> Result<(), LeaseStoreError> {
            self.check()?;
            let current = self.lease.lock().expect("lock").clone();
            let current_version = current.and_then(|l| l.metadata.resource_version);
            if current_version != lease.metadata.resource_version {
                return Err(LeaseStoreError::Other("conflict".into()));
            }
            self.store(lease.clone());
            Ok(())
        }
    }

    impl Memory {
        /// Another replica takes the Lease (and then never renews it).
        pub(crate) fn take_over(&self, holder: &str) {
            let mut lease = self.lease.lock().expect("lock").clone().unwrap_or_default();
            let mut spec = lease.spec.take().unwrap_or_default();
            spec.holder_identity = Some(holder.into());
            spec.lease_duration_seconds = Some(15);
            lease.spec = Some(spec);
            self.store(lease);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::memory::Memory;
    use super::*;
    use std::sync::atomic::Ordering;

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

    fn wait(holder: &str) -> Step {
        Step::Wait {
            holder: holder.into(),
        }
    }

    const SECOND: Duration = Duration::from_secs(1);

    #[tokio::test(start_paused = true)]
    async fn a_standby_waits_a_full_duration_of_silence_by_its_own_clock() {
        let mut election = Election::new("me", 15 * SECOND, 10 * SECOND);
        let held = lease(Some("other"), "1", 15);
        assert_eq!(election.step(Some(&held), Instant::now()), wait("other"));
        tokio::time::advance(14 * SECOND).await;
        assert_eq!(election.step(Some(&held), Instant::now()), wait("other"));
        // A renewal (new resourceVersion) restarts the count.
        let renewed = lease(Some("other"), "2", 15);
        assert_eq!(election.step(Some(&renewed), Instant::now()), wait("other"));
        tokio::time::advance(14 * SECOND).await;
        assert_eq!(election.step(Some(&renewed), Instant::now()), wait("other"));
        tokio::time::advance(SECOND).await;
        assert_eq!(election.step(Some(&renewed), Instant::now()), Step::Take);
    }

    #[test]
    fn free_missing_or_own_leases_are_taken() {
        let now = Instant::now();
        let mut election = Election::new("me", 15 * SECOND, 10 * SECOND);
        assert_eq!(election.step(None, now), Step::Create);
        assert_eq!(election.step(Some(&lease(None, "1", 1)), now), Step::Take);
        assert_eq!(election.step(Some(&lease(Some(""), "1", 1)), now), Step::Take);
        assert_eq!(election.step(Some(&lease(Some("me"), "1", 15)), now), Step::Take);
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_leads_until_the_renew_deadline_after_its_last_renewal() {
        let mut election = Election::new("me", 15 * SECOND, 10 * SECOND);
        assert!(!election.leading(Instant::now()));
        election.renewed(Instant::now());
        tokio::time::advance(9 * SECOND).await;
        assert_eq!(election.time_left(Instant::now()), Some(SECOND));
        tokio::time::advance(SECOND).await;
        assert!(!election.leading(Instant::now()));
        election.renewed(Instant::now());
        assert!(election.leading(Instant::now()));
        election.lost();
        assert!(!election.leading(Instant::now()));
    }

    fn config(identity: &str) -> LeaderConfig {
        LeaderConfig {
            namespace: "ns".into(),
            lease_name: "lease".into(),
            identity: identity.into(),
            lease_duration: 15 * SECOND,
            renew_deadline: 10 * SECOND,
            retry_period: 2 * SECOND,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_released_lease_passes_to_the_standby_within_a_retry_period() {
        let store = Memory::default();
        let shutdown = CancellationToken::new();
        let mut a = LeaderElector::with_store(store.clone(), config("a")).spawn();
        assert!(a.acquired(&shutdown).await);
        let mut b = LeaderElector::with_store(store.clone(), config("b")).spawn();
        tokio::time::sleep(5 * SECOND).await;
        assert!(a.is_leader() && !b.is_leader());

        let released = Instant::now();
        a.stop(SECOND).await;
        assert_eq!(store.holder(), None, "released");
        assert!(b.acquired(&shutdown).await);
        assert!(released.elapsed() <= 2 * SECOND, "{:?}", released.elapsed());
        assert_eq!(store.holder().as_deref(), Some("b"));
        let transitions = store
            .lease
            .lock()
            .expect("lock")
            .clone()
            .and_then(|l| l.spec?.lease_transitions);
        assert_eq!(transitions, Some(1));
        b.stop(SECOND).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_vanished_leader_is_replaced_only_after_a_lease_duration_of_silence() {
        let store = Memory::default();
        let shutdown = CancellationToken::new();
        let a = LeaderElector::with_store(store.clone(), config("a")).spawn();
        let mut b = LeaderElector::with_store(store.clone(), config("b")).spawn();
        tokio::time::sleep(SECOND).await;
        assert!(a.is_leader());
        // The leader dies without releasing (abort, not stop).
        a.task.abort();
        let died = Instant::now();
        assert!(b.acquired(&shutdown).await);
        let waited = died.elapsed();
        assert!(
            waited >= 15 * SECOND && waited <= 15 * SECOND + 2 * SECOND + 2 * SECOND,
            "took over after {waited:?}"
        );
        b.stop(SECOND).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_that_cannot_renew_steps_down_at_the_deadline_and_competes_again() {
        let store = Memory::default();
        let shutdown = CancellationToken::new();
        let mut a = LeaderElector::with_store(store.clone(), config("a")).spawn();
        assert!(a.acquired(&shutdown).await);
        let last_ok = Instant::now();
        store.down.store(true, Ordering::Relaxed);
        a.lost().await;
        let led_for = last_ok.elapsed();
        assert!(
            led_for >= 8 * SECOND && led_for <= 10 * SECOND,
            "stepped down after {led_for:?} (renew deadline 10s, renewals every 2s)"
        );
        store.down.store(false, Ordering::Relaxed);
        assert!(
            a.acquired(&shutdown).await,
            "competes again and, the Lease being its own, renews"
        );
        a.stop(SECOND).await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_leader_whose_lease_is_taken_steps_down_at_once() {
        let store = Memory::default();
        let shutdown = CancellationToken::new();
        let mut a = LeaderElector::with_store(store.clone(), config("a")).spawn();
        assert!(a.acquired(&shutdown).await);
        let mut taken = store.lease.lock().expect("lock").clone().expect("lease");
        taken.spec.get_or_insert_default().holder_identity = Some("intruder".into());
        store.store(taken);
        let at = Instant::now();
        a.lost().await;
        assert!(at.elapsed() <= 2 * SECOND, "{:?}", at.elapsed());
        a.stop(SECOND).await;
        assert_eq!(store.holder().as_deref(), Some("intruder"), "not ours to release");
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_for_leadership_ends_on_shutdown() {
        let store = Memory::default();
        store.store(lease(Some("other"), "", 15));
        let shutdown = CancellationToken::new();
        let mut a = LeaderElector::with_store(store.clone(), config("a")).spawn();
        let cancel = shutdown.clone();
        tokio::spawn(async move {
            tokio::time::sleep(3 * SECOND).await;
            cancel.cancel();
        });
        assert!(!a.acquired(&shutdown).await);
        a.stop(SECOND).await;
        assert_eq!(store.holder().as_deref(), Some("other"));
    }
}
