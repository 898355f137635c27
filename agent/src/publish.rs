//! Writing the AddOnPlacementScore on the hub, and deciding when not to.
//!
//! Every write makes OCM re-run the Placements that use the score, so the publisher writes only
//! when a score moved by at least `step`, when `validUntil` would pass before the next chance to renew
//! it has landed (the caller says when that is: the run loop knows its next refresh), or when the
//! condition must change (first write, recovery, failure). Writes create `<cluster-ns>/<name>` if absent, then
//! replace `/status` with the read `resourceVersion` (a conflict re-reads and retries), keeping other
//! writers' conditions and unknown fields.

use crate::hub::{HubConnection, HubError};
use crate::scores::ScoreValue;
use crate::shapes::{self, ShapesCondition};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, PostParams};
use ocm_score_api::{
    AddOnPlacementScore, AddOnPlacementScoreItem, AddOnPlacementScoreStatus, Condition, ManagedClusterAddOn,
    ObjectMeta, Time,
};
use std::collections::BTreeMap;
use std::time::Duration;

/// The condition type the agent owns on the score object.
pub const CONDITION_TYPE: &str = "AddOnPlacementScoreUpdated";
pub const REASON_PUBLISHED: &str = "ScoresPublished";
pub const REASON_SOURCE_FAILED: &str = "SourceFailed";

#[derive(Debug, Clone)]
pub struct WritePolicy {
    pub validity: Duration,
    /// Least score movement that is worth a write.
    pub step: i32,
    /// Least time between two writes caused by score movement.
    pub min_write_interval: Duration,
}

/// What the hub holds, as far as the agent knows.
#[derive(Debug, Clone, PartialEq)]
pub struct Published {
    pub scores: BTreeMap<String, i32>,
    pub valid_until: Option<Timestamp>,
    /// Whether the agent's condition says True.
    pub healthy: bool,
    /// The agent's condition about WorkloadShapes: status, reason, message.
    pub shapes: Option<(String, String, String)>,
    /// When the agent last wrote scores; unknown for an object found at start-up.
    pub written_at: Option<Timestamp>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteReason {
    /// Nothing of ours is on the hub yet.
    First,
    /// The published score names differ from the configured ones.
    NamesChanged,
    /// What the agent says about its WorkloadShapes changed.
    ShapesChanged,
    /// The last write reported a failure (or someone else's condition).
    Recovered,
    /// `validUntil` is about to run out.
    Renewal,
    /// A score moved by at least the step.
    ScoresMoved,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    Write(WriteReason),
    /// Nothing worth a write.
    Skip,
    /// Scores moved, but the last write was too recent: try again at this instant.
    Defer(Timestamp),
}

/// Whether freshly computed scores should be written now. `renew_by` is when the next chance to renew
/// will, at the latest, have landed its write: a `validUntil` that does not outlast it is renewed now.
pub fn decide(
    last: Option<&Published>,
    scores: &[ScoreValue],
    shapes: Option<&ShapesCondition>,
    now: Timestamp,
    renew_by: Timestamp,
    policy: &WritePolicy,
) -> Decision {
    let Some(last) = last else {
        return Decision::Write(WriteReason::First);
    };
    let names_match =
        last.scores.len() == scores.len() && scores.iter().all(|s| last.scores.contains_key(&s.name));
    if !names_match {
        return Decision::Write(WriteReason::NamesChanged);
    }
    if last.shapes != shapes.map(shapes_key) {
        return Decision::Write(WriteReason::ShapesChanged);
    }
    if !last.healthy {
        return Decision::Write(WriteReason::Recovered);
    }
    let renew = last.valid_until.is_none_or(|valid_until| valid_until <= renew_by);
    if renew {
        return Decision::Write(WriteReason::Renewal);
    }
    let moved = scores.iter().any(|s| {
        last.scores
            .get(&s.name)
            .is_some_and(|old| (s.value - old).abs() >= policy.step)
    });
    if !moved {
        return Decision::Skip;
    }
    let min_interval = SignedDuration::try_from(policy.min_write_interval).unwrap_or(SignedDuration::MAX);
    match last.written_at.and_then(|at| at.checked_add(min_interval).ok()) {
        Some(allowed) if allowed > now => Decision::Defer(allowed),
        _ => Decision::Write(WriteReason::ScoresMoved),
    }
}

/// `now + validity`, whole seconds (the API stores seconds; comparing what was written with what is
/// read back must not trip over sub-second digits).
pub fn valid_until(now: Timestamp, validity: Duration) -> Timestamp {
    let seconds = now
        .as_second()
        .saturating_add(i64::try_from(validity.as_secs()).unwrap_or(i64::MAX / 2));
    Timestamp::from_second(seconds).unwrap_or(Timestamp::MAX)
}

/// Sets or replaces the condition of `condition.type_`, keeping its `lastTransitionTime` when the status
/// did not change, and leaving every other writer's condition alone.
pub fn upsert_condition(conditions: &mut Vec<Condition>, mut condition: Condition) {
    match conditions.iter_mut().find(|c| c.type_ == condition.type_) {
        Some(existing) => {
            if existing.status == condition.status {
                condition.last_transition_time = existing.last_transition_time.clone();
            }
            *existing = condition;
        }
        None => conditions.push(condition),
    }
}

fn shapes_key(c: &ShapesCondition) -> (String, String, String) {
    (c.status.to_owned(), c.reason.to_owned(), c.message.clone())
}

/// Sets the condition about WorkloadShapes, or removes ours when there is nothing to say.
fn set_shapes_condition(conditions: &mut Vec<Condition>, shapes: Option<&ShapesCondition>, now: Timestamp) {
    match shapes {
        Some(c) => upsert_condition(
            conditions,
            Condition {
                type_: shapes::CONDITION_TYPE.to_owned(),
                status: c.status.to_owned(),
                reason: c.reason.to_owned(),
                message: c.message.clone(),
                last_transition_time: Time(second(now)),
                observed_generation: None,
            },
        ),
        None => conditions.retain(|c| c.type_ != shapes::CONDITION_TYPE),
    }
}

fn condition(healthy: bool, message: String, now: Timestamp) -> Condition {
    Condition {
        type_: CONDITION_TYPE.to_owned(),
        status: if healthy { "True" } else { "False" }.to_owned(),
        reason: if healthy {
            REASON_PUBLISHED
        } else {
            REASON_SOURCE_FAILED
        }
        .to_owned(),
        message,
        last_transition_time: Time(Timestamp::from_second(now.as_second()).unwrap_or(now)),
        observed_generation: None,
    }
}

/// The status after publishing `scores`: scores and `validUntil` replaced, our condition set True,
/// the condition about WorkloadShapes set as `shapes` says.
pub fn status_with_scores(
    mut status: AddOnPlacementScoreStatus,
    scores: &[ScoreValue],
    shapes: Option<&ShapesCondition>,
    valid_until: Timestamp,
    detail: &str,
    now: Timestamp,
) -> AddOnPlacementScoreStatus {
    status.scores = scores
        .iter()
        .map(|s| AddOnPlacementScoreItem {
            name: s.name.clone(),
            value: s.value,
        })
        .collect();
    status.valid_until = Some(Time(valid_until));
    let message = format!("{detail}; computed at {}; valid until {valid_until}", second(now));
    upsert_condition(&mut status.conditions, condition(true, message, now));
    set_shapes_condition(&mut status.conditions, shapes, now);
    status
}

/// The status after a source failure: scores and `validUntil` untouched (so they expire), our
/// condition set False with the error. Scores without any `validUntil` (left by an agent that never
/// set one) are expired now: nothing stays trusted forever.
pub fn status_with_failure(
    mut status: AddOnPlacementScoreStatus,
    error: &str,
    now: Timestamp,
) -> AddOnPlacementScoreStatus {
    if status.valid_until.is_none() && !status.scores.is_empty() {
        status.valid_until = Some(Time(second(now)));
    }
    let expiry = match &status.valid_until {
        Some(Time(t)) if *t > now => format!("the last scores expire at {t}"),
        Some(Time(t)) => format!("the last scores expired at {t}"),
        None => "no scores are published".to_owned(),
    };
    let message = format!("{error}; scores not renewed, {expiry} (as of {})", second(now));
    upsert_condition(&mut status.conditions, condition(false, message, now));
    status
}

/// `t` moved by `offset` (saturating: a clock that far off has bigger problems).
fn shifted(t: Timestamp, offset: SignedDuration) -> Timestamp {
    t.checked_add(offset).unwrap_or(if offset.is_negative() {
        Timestamp::MIN
    } else {
        Timestamp::MAX
    })
}

fn second(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

/// What the agent can tell from an object on the hub.
pub fn published_from(status: Option<&AddOnPlacementScoreStatus>) -> Option<Published> {
    let status = status?;
    let ours = status.conditions.iter().find(|c| c.type_ == CONDITION_TYPE);
    let shapes = status
        .conditions
        .iter()
        .find(|c| c.type_ == shapes::CONDITION_TYPE)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()));
    Some(Published {
        scores: status.scores.iter().map(|s| (s.name.clone(), s.value)).collect(),
        valid_until: status.valid_until.as_ref().map(|t| t.0),
        healthy: ours.is_some_and(|c| c.status == "True"),
        shapes,
        written_at: None,
    })
}

#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    #[error(transparent)]
    Hub(#[from] HubError),
    #[error("{action} {namespace}/{name} on the hub: {source}")]
    Api {
        action: &'static str,
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("{action} {namespace}/{name} on the hub: no answer within {timeout:?}")]
    Timeout {
        action: &'static str,
        namespace: String,
        name: String,
        timeout: Duration,
    },
    #[error(
        "creating {namespace}/{name} on the hub: the ManagedClusterAddOn {namespace}/{addon} that owns it \
         is {state}, and the score lives only while it does (--owned-by-addon)"
    )]
    NoOwner {
        namespace: String,
        name: String,
        addon: String,
        state: &'static str,
    },
    #[error("writing {namespace}/{name} on the hub: still conflicting after {attempts} attempts")]
    Conflicts {
        namespace: String,
        name: String,
        attempts: u32,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Written(WriteReason),
    /// A failure was written into the condition.
    FailureReported,
    Skipped,
    Deferred(Timestamp),
}

pub struct Publisher {
    hub: HubConnection,
    namespace: String,
    name: String,
    policy: WritePolicy,
    timeout: Duration,
    /// What the hub holds, once known (read at start or after a write).
    last: Option<Published>,
    /// Whether `last` reflects the hub (false until the first successful read or write).
    known: bool,
    /// The object as last read or written, for the next replace.
    cached: Option<AddOnPlacementScore>,
    /// The ManagedClusterAddOn the object is created owned by, and only while it exists.
    owner: Option<String>,
}

const WRITE_ATTEMPTS: u32 = 4;

impl Publisher {
    pub fn new(
        hub: HubConnection,
        namespace: String,
        name: String,
        policy: WritePolicy,
        timeout: Duration,
    ) -> Self {
        Publisher {
            hub,
            namespace,
            name,
            policy,
            timeout,
            last: None,
            known: false,
            cached: None,
            owner: None,
        }
    }

    /// Creates the score object owned by the ManagedClusterAddOn `addon` of its namespace, and
    /// not at all while that add-on is missing or being deleted: its removal then removes the
    /// score, and an agent outliving its add-on does not bring the score back.
    pub fn owned_by(mut self, addon: Option<String>) -> Self {
        self.owner = addon;
        self
    }

    pub fn last(&self) -> Option<&Published> {
        self.last.as_ref()
    }

    /// The hub's clock, which `validUntil` and the condition's times must be stamped on.
    pub fn hub_clock(&self) -> &crate::hub_clock::HubClock {
        self.hub.clock()
    }

    /// Writes `scores` if worth it (see [`decide`] for `renew_by`). Times are on this cluster's clock;
    /// what is written is stamped on the hub's ([`HubClock`](crate::hub_clock::HubClock)).
    pub async fn publish(
        &mut self,
        scores: &[ScoreValue],
        shapes: Option<&ShapesCondition>,
        detail: &str,
        now: Timestamp,
        renew_by: Timestamp,
    ) -> Result<Outcome, PublishError> {
        self.ensure_known().await?;
        let offset = self.hub_offset();
        let (now, renew_by) = (shifted(now, offset), shifted(renew_by, offset));
        match decide(self.last.as_ref(), scores, shapes, now, renew_by, &self.policy) {
            Decision::Skip => Ok(Outcome::Skipped),
            Decision::Defer(at) => Ok(Outcome::Deferred(shifted(at, -offset))),
            Decision::Write(reason) => {
                self.write_scores_at(scores, shapes, detail, now).await?;
                Ok(Outcome::Written(reason))
            }
        }
    }

    /// Writes `scores` whatever the hub holds; `now` is on this cluster's clock.
    pub async fn write_scores(
        &mut self,
        scores: &[ScoreValue],
        shapes: Option<&ShapesCondition>,
        detail: &str,
        now: Timestamp,
    ) -> Result<(), PublishError> {
        // Reading first costs nothing extra (the write would read anyway) and tells the hub's clock.
        self.ensure_known().await?;
        let now = shifted(now, self.hub_offset());
        self.write_scores_at(scores, shapes, detail, now).await
    }

    /// The hub's clock minus ours, as far as the responses so far tell (zero before any).
    fn hub_offset(&self) -> SignedDuration {
        self.hub.clock().offset().unwrap_or(SignedDuration::ZERO)
    }

    /// [`write_scores`](Self::write_scores) with `hub_now` already on the hub's clock.
    async fn write_scores_at(
        &mut self,
        scores: &[ScoreValue],
        shapes: Option<&ShapesCondition>,
        detail: &str,
        hub_now: Timestamp,
    ) -> Result<(), PublishError> {
        let valid_until = valid_until(hub_now, self.policy.validity);
        let status = self
            .write(|status| status_with_scores(status, scores, shapes, valid_until, detail, hub_now))
            .await?;
        self.last = published_from(Some(&status)).map(|p| Published {
            written_at: Some(hub_now),
            ..p
        });
        self.known = true;
        Ok(())
    }

    /// Records a source failure in the condition, once per failure (scores are left to expire).
    pub async fn report_failure(&mut self, error: &str, now: Timestamp) -> Result<Outcome, PublishError> {
        self.ensure_known().await?;
        let now = shifted(now, self.hub_offset());
        if self.last.as_ref().is_some_and(|p| !p.healthy)
            && self.cached.as_ref().is_some_and(has_our_failure_condition)
        {
            return Ok(Outcome::Skipped);
        }
        let status = self
            .write(|status| status_with_failure(status, error, now))
            .await?;
        let written_at = self.last.as_ref().and_then(|p| p.written_at);
        self.last = published_from(Some(&status)).map(|p| Published { written_at, ..p });
        Ok(Outcome::FailureReported)
    }

    fn api(&self, client: kube::Client) -> Api<AddOnPlacementScore> {
        Api::namespaced(client, &self.namespace)
    }

    /// Reads the object once so a restart with nothing changed writes nothing.
    async fn ensure_known(&mut self) -> Result<(), PublishError> {
        if self.known {
            return Ok(());
        }
        let client = self.client().await?;
        let api = self.api(client);
        let name = self.name.clone();
        let found = self.bounded("reading", api.get_opt(&name)).await?;
        self.last = found.as_ref().and_then(|o| published_from(o.status.as_ref()));
        self.cached = found;
        self.known = true;
        Ok(())
    }

    async fn client(&mut self) -> Result<kube::Client, PublishError> {
        Ok(self.hub.client().await?)
    }

    async fn bounded<T>(
        &mut self,
        action: &'static str,
        call: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, PublishError> {
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(source)) => Err(self.api_error(action, source)),
            Err(_) => Err(self.timeout_error(action)),
        }
    }

    /// An API error; afterwards the hub state is re-read before the next decision.
    fn api_error(&mut self, action: &'static str, source: kube::Error) -> PublishError {
        if let kube::Error::Api(status) = &source
            && status.code == 401
        {
            // Possibly a rotated certificate the files do not show yet: rebuild next time.
            self.hub.reset();
        }
        self.known = false;
        self.cached = None;
        PublishError::Api {
            action,
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            source,
        }
    }

    fn timeout_error(&mut self, action: &'static str) -> PublishError {
        self.known = false;
        self.cached = None;
        PublishError::Timeout {
            action,
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            timeout: self.timeout,
        }
    }

    /// Creates the object if needed, then replaces its status with `change(current status)`, re-reading
    /// and retrying on conflicts. Returns the status the hub now holds.
    async fn write(
        &mut self,
        change: impl Fn(AddOnPlacementScoreStatus) -> AddOnPlacementScoreStatus,
    ) -> Result<AddOnPlacementScoreStatus, PublishError> {
        let client = self.client().await?;
        let api = self.api(client);
        let name = self.name.clone();
        for _ in 0..WRITE_ATTEMPTS {
            let mut object = match self.cached.take() {
                Some(object) => object,
                None => self.get_or_create(&api).await?,
            };
            object.status = Some(change(object.status.take().unwrap_or_default()));
            match tokio::time::timeout(self.timeout, api.replace_status(&name, &post_params(), &object)).await
            {
                Ok(Ok(written)) => {
                    let status = written.status.clone().unwrap_or_default();
                    self.cached = Some(written);
                    return Ok(status);
                }
                Ok(Err(kube::Error::Api(status))) if status.is_conflict() || status.is_not_found() => {
                    tracing::debug!(code = status.code, "score object changed under us; re-reading");
                    continue;
                }
                Ok(Err(source)) => return Err(self.api_error("writing status of", source)),
                Err(_) => return Err(self.timeout_error("writing status of")),
            }
        }
        self.known = false;
        self.cached = None;
        Err(PublishError::Conflicts {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            attempts: WRITE_ATTEMPTS,
        })
    }

    async fn get_or_create(
        &mut self,
        api: &Api<AddOnPlacementScore>,
    ) -> Result<AddOnPlacementScore, PublishError> {
        let name = self.name.clone();
        if let Some(object) = self.bounded("reading", api.get_opt(&name)).await? {
            return Ok(object);
        }
        let owner_references = match self.owner.clone() {
            Some(addon) => Some(vec![self.owner_reference(api, addon).await?]),
            None => None,
        };
        let fresh = AddOnPlacementScore {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(self.namespace.clone()),
                owner_references,
                ..Default::default()
            },
            status: None,
        };
        match tokio::time::timeout(self.timeout, api.create(&post_params(), &fresh)).await {
            Ok(Ok(created)) => {
                tracing::info!(namespace = %self.namespace, name = %self.name, "created the score object");
                Ok(created)
            }
            // Someone created it meanwhile: use theirs.
            Ok(Err(kube::Error::Api(status))) if status.code == 409 => {
                self.bounded("reading", api.get(&name)).await
            }
            Ok(Err(source)) => Err(self.api_error("creating", source)),
            Err(_) => Err(self.timeout_error("creating")),
        }
    }

    /// The reference to the add-on `addon` the object is created with; an error while the add-on
    /// is missing or being deleted.
    async fn owner_reference(
        &mut self,
        scores: &Api<AddOnPlacementScore>,
        addon: String,
    ) -> Result<OwnerReference, PublishError> {
        let addons: Api<ManagedClusterAddOn> = Api::namespaced(scores.clone().into_client(), &self.namespace);
        let found = self
            .bounded("reading the add-on that owns", addons.get_opt(&addon))
            .await?;
        let state = match &found {
            None => "missing",
            Some(a) if a.metadata.deletion_timestamp.is_some() => "being deleted",
            Some(a) => return Ok(a.score_owner_reference()),
        };
        Err(PublishError::NoOwner {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            addon,
            state,
        })
    }
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(crate::FIELD_MANAGER.to_owned()),
        ..Default::default()
    }
}

fn has_our_failure_condition(object: &AddOnPlacementScore) -> bool {
    object.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == CONDITION_TYPE && c.status == "False")
    })
}

#[cfg(test)]
#[path = "publish_tests.rs"]
mod tests;
