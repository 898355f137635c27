//! The life of a leader-elected controller mode (`addon-manager`, `tiering`), written once: compete
//! for the Lease, run the mode's controllers while this replica leads, stop them the moment it no
//! longer does, and then either stand by again or end the process, as the mode chooses.
//!
//! The mode supplies `lead`, which runs its controllers until the token it is given is cancelled
//! (by shutdown, or by the loss of the Lease). Probes and the mode's leader gauge are kept in step:
//! a leader is ready only once its caches synced, a standby is always ready.

use crate::leader::{LeaderConfig, LeaderElector, Leadership};
use crate::probes::ControllerProbes;
use std::fmt::Display;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How long a stopping replica waits for the Lease to be released before letting it expire.
const RELEASE_GRACE: Duration = Duration::from_secs(5);

/// What a mode does after losing the Lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnLoss {
    /// End the process (exit 1) and restart as a standby with empty caches.
    Exit,
    /// Stop the controllers, drop their caches and compete again.
    StandBy,
}

/// Why a supervised mode stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// Shutdown was requested (or the controllers finished on their own).
    Shutdown,
    /// The Lease was lost and the mode chose [`OnLoss::Exit`].
    LostLeadership,
}

/// The parts of the shell a supervised mode reports through.
pub struct Supervision<'a> {
    /// The mode's probes: leading and synced are set here.
    pub probes: &'a ControllerProbes,
    /// The mode's leader gauge.
    pub set_leader: &'a (dyn Fn(bool) + Sync),
    /// The process's shutdown token.
    pub shutdown: &'a CancellationToken,
}

impl Supervision<'_> {
    fn leading(&self, leading: bool) {
        if !leading {
            // A new term lists everything again before it is ready.
            self.probes.set_synced(false);
        }
        self.probes.set_leading(leading);
        (self.set_leader)(leading);
    }
}

/// What the shell needs of a mode's metrics: the exposition it serves on `/metrics`, and the
/// leader gauge it keeps in step with the Lease.
pub trait ModeMetrics: Send + Sync + 'static {
    /// The OpenMetrics text of every family.
    fn render(&self) -> String;
    fn set_leader(&self, leading: bool);
}

/// What a leader-elected controller mode brings to [`serve_and_lead`].
pub struct Mode<'a> {
    /// For the error line (`addon-manager`, `tiering`).
    pub name: &'static str,
    /// `--kubeconfig`, if given.
    pub kubeconfig: Option<&'a Path>,
    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    pub probes_address: SocketAddr,
    /// The mode's metrics: served on `/metrics`, their leader gauge set here.
    pub metrics: Arc<dyn ModeMetrics>,
    pub on_loss: OnLoss,
}

/// The life of a leader-elected controller mode once its configuration is valid: a client from
/// `--kubeconfig`, the probe server, then `lead` (given the client and the probes) in every term
/// of leadership until shutdown; `election` builds the Lease configuration (`None`: election off).
/// Exits 0 after a shutdown, 1 when the mode cannot run or, with [`OnLoss::Exit`], lost its Lease.
pub async fn serve_and_lead<F, Fut, E>(
    mode: Mode<'_>,
    election: impl FnOnce(&kube::Client) -> Option<LeaderConfig>,
    shutdown: &CancellationToken,
    mut lead: F,
) -> ExitCode
where
    F: FnMut(kube::Client, Arc<ControllerProbes>, CancellationToken) -> Fut,
    Fut: Future<Output = Result<(), E>>,
    E: Display,
{
    let client = match crate::client::client(mode.kubeconfig, "--kubeconfig").await {
        Ok(client) => client,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    mode.metrics.set_leader(false);
    let render = {
        let metrics = mode.metrics.clone();
        move || metrics.render()
    };
    let (probes, server) = match ControllerProbes::serve(mode.probes_address, render, shutdown.clone()).await
    {
        Ok(started) => started,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let set_leader = |leading: bool| mode.metrics.set_leader(leading);
    let supervision = Supervision {
        probes: &probes,
        set_leader: &set_leader,
        shutdown,
    };
    let election = election(&client);
    let term = |stop| lead(client.clone(), probes.clone(), stop);
    let code = match run_while_leading(&client, election, mode.on_loss, supervision, term).await {
        Ok(Ending::Shutdown) => ExitCode::SUCCESS,
        Ok(Ending::LostLeadership) => ExitCode::FAILURE,
        Err(e) => {
            tracing::error!(error = %e, "{} cannot run", mode.name);
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    };
    server.stopped().await;
    code
}

/// Runs `lead` whenever this replica leads: at once when `election` is `None` (leader election
/// off), else once the Lease is held, with a token cancelled on shutdown or on losing the Lease.
/// An error from `lead` ends the supervision (the Lease is released first).
pub async fn run_while_leading<F, Fut, E>(
    client: &kube::Client,
    election: Option<LeaderConfig>,
    on_loss: OnLoss,
    supervision: Supervision<'_>,
    lead: F,
) -> Result<Ending, E>
where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    match election {
        None => {
            supervision.leading(true);
            let result = lead_one_term(lead, supervision.shutdown.child_token(), None).await;
            supervision.leading(false);
            result.map(|_| Ending::Shutdown)
        }
        Some(config) => {
            let leadership = LeaderElector::new(client.clone(), config).spawn();
            supervise(leadership, on_loss, supervision, lead).await
        }
    }
}

/// The loop of terms for an election already running; the Lease is released before it returns.
pub async fn supervise<F, Fut, E>(
    mut leadership: Leadership,
    on_loss: OnLoss,
    supervision: Supervision<'_>,
    mut lead: F,
) -> Result<Ending, E>
where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let shutdown = supervision.shutdown;
    let ending = loop {
        if !leadership.acquired(shutdown).await {
            break Ok(Ending::Shutdown);
        }
        tracing::info!("leading: starting the controllers");
        supervision.leading(true);
        let result = lead_one_term(&mut lead, shutdown.child_token(), Some(&leadership)).await;
        supervision.leading(false);
        match result {
            Err(error) => break Err(error),
            Ok(_) if shutdown.is_cancelled() => break Ok(Ending::Shutdown),
            Ok(Term::Lost) if on_loss == OnLoss::Exit => {
                tracing::error!("stopping: leadership lost");
                break Ok(Ending::LostLeadership);
            }
            Ok(Term::Lost) => tracing::warn!("leadership lost: controllers stopped, standing by"),
            // The controllers ended by themselves; nothing left to lead.
            Ok(Term::Finished) => break Ok(Ending::Shutdown),
        }
    };
    // The controllers have stopped: release the Lease so a standby takes over at once.
    leadership.stop(RELEASE_GRACE).await;
    ending
}

/// How one term as leader ended.
enum Term {
    Finished,
    Lost,
}

/// Runs `lead` until it returns; `stop` is cancelled when the Lease is lost.
async fn lead_one_term<F, Fut, E>(
    mut lead: F,
    stop: CancellationToken,
    leadership: Option<&Leadership>,
) -> Result<Term, E>
where
    F: FnMut(CancellationToken) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let loss = leadership.map(|leadership| {
        let mut leading = leadership.watch();
        let stop = stop.clone();
        tokio::spawn(async move {
            tokio::select! {
                // A closed channel means the election ended: no longer leading either.
                _ = leading.wait_for(|leading| !*leading) => {
                    stop.cancel();
                    true
                }
                () = stop.cancelled() => false,
            }
        })
    });
    let result = lead(stop.clone()).await;
    stop.cancel();
    let lost = match loss {
        // A watcher that panicked cannot tell: count it as lost, the safe side.
        Some(task) => task.await.unwrap_or(true),
        None => false,
    };
    result.map(|()| if lost { Term::Lost } else { Term::Finished })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::leader::memory::Memory as MemoryLease;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    fn config(identity: &str) -> LeaderConfig {
        LeaderConfig {
            namespace: "ns".into(),
            lease_name: "lease".into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    struct Observed {
        gauge: AtomicBool,
        terms: AtomicUsize,
    }

    /// A term that runs until stopped, counting terms and checking the gauge and probes say leader.
    async fn term(observed: Arc<Observed>, stop: CancellationToken) -> Result<(), String> {
        observed.terms.fetch_add(1, Ordering::SeqCst);
        if !observed.gauge.load(Ordering::SeqCst) {
            return Err("the leader gauge was not set before the term".into());
        }
        stop.cancelled().await;
        Ok(())
    }

    async fn supervised(on_loss: OnLoss, take_over_after: Duration) -> (Ending, usize, bool) {
        let store = MemoryLease::default();
        let leadership = LeaderElector::with_store(store.clone(), config("me")).spawn();
        let probes = ControllerProbes::new(String::new);
        let observed = Arc::new(Observed {
            gauge: AtomicBool::new(false),
            terms: AtomicUsize::new(0),
        });
        let shutdown = CancellationToken::new();
        let gauge = {
            let observed = observed.clone();
            move |leading: bool| observed.gauge.store(leading, Ordering::SeqCst)
        };
        let thief = {
            let (store, shutdown) = (store.clone(), shutdown.clone());
            tokio::spawn(async move {
                tokio::time::sleep(take_over_after).await;
                store.take_over("other");
                // Long enough for a standby to have competed again, then stop everything.
                tokio::time::sleep(Duration::from_secs(120)).await;
                shutdown.cancel();
            })
        };
        let ending = supervise(
            leadership,
            on_loss,
            Supervision {
                probes: &probes,
                set_leader: &gauge,
                shutdown: &shutdown,
            },
            |stop| term(observed.clone(), stop),
        )
        .await
        .expect("terms succeed");
        thief.abort();
        (
            ending,
            observed.terms.load(Ordering::SeqCst),
            observed.gauge.load(Ordering::SeqCst),
        )
    }

    #[tokio::test(start_paused = true)]
    async fn a_mode_that_exits_on_loss_ends_after_one_term() {
        let (ending, terms, gauge) = supervised(OnLoss::Exit, Duration::from_secs(30)).await;
        assert_eq!(ending, Ending::LostLeadership);
        assert_eq!(terms, 1);
        assert!(!gauge, "the gauge says standby after the term");
    }

    #[tokio::test(start_paused = true)]
    async fn a_mode_that_stands_by_leads_again_once_the_lease_is_free() {
        let (ending, terms, gauge) = supervised(OnLoss::StandBy, Duration::from_secs(30)).await;
        assert_eq!(ending, Ending::Shutdown);
        // The other holder never renews, so its Lease expires and this replica leads again.
        assert_eq!(terms, 2);
        assert!(!gauge);
    }

    #[tokio::test(start_paused = true)]
    async fn an_error_of_the_controllers_ends_the_supervision() {
        let store = MemoryLease::default();
        let leadership = LeaderElector::with_store(store, config("me")).spawn();
        let probes = ControllerProbes::new(String::new);
        let shutdown = CancellationToken::new();
        let ending = supervise(
            leadership,
            OnLoss::StandBy,
            Supervision {
                probes: &probes,
                set_leader: &|_| {},
                shutdown: &shutdown,
            },
            |_stop| async { Err::<(), _>("cannot run") },
        )
        .await;
        assert_eq!(ending, Err("cannot run"));
    }
}
