//! One TieredPlacement: snapshot → plan → child → observe → status → events → requeue.
//!
//! Order matters for exactly-once effects: the child is applied first (OCM starts moving at once),
//! the status next (it records the transition), and the plan's events last, only once the status
//! that explains them is stored. A failed status write is retried from the old status, so the
//! planner derives the same transition again and its events are published then.

use super::args::Settings;
use super::child;
use super::divergence::{self, Divergence, Verdict};
use super::metrics::Metrics;
use super::reservations::SharedLedger;
use super::score_updates::{Holdings, key_of};
use super::snapshot::{CacheGone, Stores};
use super::status;
use jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Resource, ResourceExt};
use ocm_score_api::Condition;
use ocm_score_api::crd::tiered_placement::TieredPlacement;
use ocm_score_scheduler::placement::PlacementError;
use ocm_score_scheduler::tiering::condition::PLAN_DIVERGED;
use ocm_score_scheduler::tiering::{PlanEvent, WorkIndex, plan_and_assume};
use ocm_score_shell::controller::{Backoff, MetricLabel};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Shortest requeue: a plan time in the past means "now", but not a busy loop.
const MIN_REQUEUE: Duration = Duration::from_millis(200);
/// The `controller` label of the reconcile metrics.
const CONTROLLER: &str = "tiered_placement";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    CacheGone(#[from] CacheGone),
    #[error("TieredPlacement without a namespace")]
    NoNamespace,
    #[error("the hub snapshot for namespace {namespace} is unusable: {source}")]
    Snapshot {
        namespace: String,
        #[source]
        source: PlacementError,
    },
    #[error("applying the child Placement {namespace}/{name}: {source}")]
    ApplyChild {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing the status of TieredPlacement {namespace}/{name}: {source}")]
    WriteStatus {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl MetricLabel for Error {
    fn metric_label(&self) -> &'static str {
        match self {
            Error::CacheGone(_) => "cache_gone",
            Error::NoNamespace => "no_namespace",
            Error::Snapshot { .. } => "snapshot",
            Error::ApplyChild { .. } => "apply_child",
            Error::WriteStatus { .. } => "write_status",
        }
    }
}

/// What every reconcile shares.
pub struct Context {
    pub client: kube::Client,
    pub stores: Stores,
    pub settings: Settings,
    pub metrics: Arc<Metrics>,
    pub recorder: Recorder,
    pub divergence: Divergence,
    /// The hub's reservations.
    pub ledger: Arc<SharedLedger>,
    /// Which clusters' scores each TieredPlacement's last plan read.
    pub holdings: Arc<Holdings>,
    /// Consecutive failures per TieredPlacement, for the retry delay.
    backoff: Backoff,
}

impl Context {
    pub fn new(
        client: kube::Client,
        stores: Stores,
        settings: Settings,
        metrics: Arc<Metrics>,
        recorder: Recorder,
        ledger: Arc<SharedLedger>,
        holdings: Arc<Holdings>,
    ) -> Self {
        Context {
            client,
            stores,
            settings,
            metrics,
            recorder,
            divergence: Divergence::default(),
            ledger,
            holdings,
            backoff: Backoff::default(),
        }
    }
}

/// One pass over a TieredPlacement, timed and counted whatever its outcome.
pub async fn reconcile(tp: Arc<TieredPlacement>, ctx: Arc<Context>) -> Result<Action, Error> {
    let started = Instant::now();
    let result = reconcile_once(tp.clone(), ctx.clone()).await;
    ctx.metrics.reconcile.reconciled(CONTROLLER, started.elapsed());
    if result.is_ok() {
        ctx.backoff.succeeded(&key_of(&tp));
        ctx.metrics.completed(Timestamp::now());
    }
    result
}

async fn reconcile_once(tp: Arc<TieredPlacement>, ctx: Arc<Context>) -> Result<Action, Error> {
    ctx.stores.synced().await?;
    let key = key_of(&tp);
    if tp.meta().deletion_timestamp.is_some() {
        // The garbage collector removes the child with its owner.
        ctx.divergence.forget(&key);
        ctx.ledger.forget(&tp);
        ctx.holdings.forget(&key);
        return Ok(Action::await_change());
    }
    let namespace = tp.namespace().ok_or(Error::NoNamespace)?;
    let name = tp.name_any();
    // Before the stores are read: score changes after this one may not be in the snapshot.
    let seen = ctx.holdings.sequence();
    let snapshot = ctx
        .stores
        .snapshot(&namespace, Timestamp::now())
        .map_err(|source| Error::Snapshot {
            namespace: namespace.clone(),
            source,
        })?;
    let shapes = ctx.stores.shape_catalog();
    // Only a TieredPlacement that judges works needs them (indexed once per change of the store).
    let index = match tp.spec.workload_health {
        Some(_) => ctx.stores.work_index.index(&ctx.stores.works),
        None => Arc::new(WorkIndex::default()),
    };
    let now = Timestamp::now();
    // Plan and assume under the ledger's lock: the next TieredPlacement sees these reservations.
    let (mut plan, errors) = ctx.ledger.with(&ctx.stores.tiered, &ctx.metrics, |ledger| {
        plan_and_assume(ledger, &tp, &snapshot, &shapes, &index, now)
    });
    for error in &errors {
        tracing::warn!(tiered = %key, %error, "a stored reservation cannot be loaded");
    }
    let missed_a_change = ctx.holdings.record(&key, std::mem::take(&mut plan.holds), seen);
    let child_name = tp.spec.child_name(&name).to_owned();
    let live = snapshot.placement(&namespace, &child_name);
    tracing::debug!(
        tiered = %key,
        write_child = plan.write_child,
        write_status = plan.write_status,
        transition = ?plan.transition,
        requeue_at = ?plan.requeue_at,
        scores_expire_at = ?plan.scores_expire_at,
        "planned"
    );

    // The child: when the plan changed, or someone changed what we own.
    let mut notes: Vec<PlanEvent> = Vec::new();
    let mut wrote_child = false;
    if let Some(rendered) = &plan.child {
        let drift = live.and_then(|l| child::drift(rendered, l));
        if plan.write_child || drift.is_some() {
            child::apply(&ctx.client, rendered)
                .await
                .map_err(|source| Error::ApplyChild {
                    namespace: namespace.clone(),
                    name: child_name.clone(),
                    source,
                })?;
            ctx.metrics.wrote("Placement");
            wrote_child = true;
            let had_child = tp
                .status
                .as_ref()
                .and_then(|s| s.placement.as_ref())
                .is_some_and(|p| p.observed_generation.is_some());
            match (&drift, live) {
                (Some(what), _) if !plan.write_child => notes.push(PlanEvent {
                    type_: "Warning",
                    reason: "ChildRestored".into(),
                    message: format!(
                        "the child Placement {child_name} was changed by someone else; restored ({what})"
                    ),
                }),
                (_, None) if had_child => notes.push(PlanEvent {
                    type_: "Warning",
                    reason: "ChildRecreated".into(),
                    message: format!("the child Placement {child_name} was deleted; recreated"),
                }),
                _ => {}
            }
            tracing::info!(tiered = %key, child = %child_name, drift = ?drift, "applied the child Placement");
        }
    }

    // Observe what OCM made of the child (not of one we just changed: OCM has not seen it yet).
    let actual: BTreeSet<String> = snapshot
        .decisions_of(&namespace, &child_name)
        .filter_map(|d| d.status.as_ref())
        .flat_map(|s| s.decisions.iter().map(|d| d.cluster_name.clone()))
        .collect();
    let verdict = if wrote_child {
        Verdict::Keep
    } else {
        ctx.divergence.judge(
            &key,
            live,
            &plan.predicted,
            &actual,
            now,
            ctx.settings.divergence_grace,
        )
    };
    if divergence::apply(&mut plan.status.conditions, &verdict, tp.meta().generation, now) {
        ctx.metrics.diverged();
        let message = match &verdict {
            Verdict::Diverged(m) => m.clone(),
            _ => String::new(),
        };
        tracing::warn!(tiered = %key, %message, "OCM's decisions differ from the plan");
        notes.push(PlanEvent {
            type_: "Warning",
            reason: "PlanDiverged".into(),
            message,
        });
    }

    // The planner cannot see OCM's verdict: a PlanDiverged that changed is a status to write even
    // when the plan is the same (decisions that arrive after the plan's own write, with no later
    // event, would otherwise leave it unwritten).
    let diverged = |conditions: &[Condition]| conditions.iter().find(|c| c.type_ == PLAN_DIVERGED).cloned();
    let stored = tp.status.as_ref().and_then(|s| diverged(&s.conditions));
    if plan.write_status || diverged(&plan.status.conditions) != stored {
        status::write(&ctx.client, &namespace, &name, tp.status.as_ref(), &plan.status)
            .await
            .map_err(|source| Error::WriteStatus {
                namespace: namespace.clone(),
                name: name.clone(),
                source,
            })?;
        ctx.metrics.wrote("TieredPlacement/status");
    }
    if let Some(kind) = plan.transition {
        ctx.metrics.transition(&format!("{kind:?}"));
    }
    for event in plan.events.iter().chain(&notes) {
        publish(&ctx, &tp, event).await;
    }

    let mut next = if missed_a_change {
        MIN_REQUEUE
    } else {
        ctx.settings.resync
    };
    let mut until = |at: Timestamp| {
        let wait = at.duration_since(Timestamp::now());
        let wait = Duration::try_from(wait)
            .unwrap_or(Duration::ZERO)
            .max(MIN_REQUEUE);
        next = next.min(wait);
    };
    // Only the planner's own timers: a score that expires without a renewal re-plans its
    // holders through the score watch's expiry wheel, and one renewed in time re-plans nothing.
    if let Some(at) = plan.requeue_at {
        until(at);
    }
    if let Verdict::Watching(at) = verdict {
        until(at);
    }
    Ok(Action::requeue(next))
}

async fn publish(ctx: &Context, tp: &TieredPlacement, event: &PlanEvent) {
    let event = Event {
        type_: if event.type_ == "Warning" {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: event.reason.clone(),
        // The events API caps the note at 1 kB.
        note: Some(truncate(&event.message, 1000)),
        action: "Reconcile".into(),
        secondary: None,
    };
    if let Err(error) = ctx.recorder.publish(&event, &tp.object_ref(&())).await {
        ctx.metrics.event_failed();
        tracing::warn!(tiered = %key_of(tp), reason = %event.reason, %error, "publishing an event failed");
    }
}

fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// Retries a failed TieredPlacement after a delay that doubles with each consecutive failure.
pub fn on_error(tp: Arc<TieredPlacement>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.metrics.reconcile.failed(CONTROLLER, error.metric_label());
    let key = key_of(&tp);
    let (failures, delay) = ctx.backoff.failed(&key);
    tracing::warn!(tiered = %key, %error, failures, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_cut_at_a_character_boundary() {
        assert_eq!(truncate("abc", 5), "abc");
        assert_eq!(truncate("ééé", 3), "é…");
    }
}
