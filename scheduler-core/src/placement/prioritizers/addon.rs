//! `AddOn/<resourceName>/<scoreName>`: the value a third party published in
//! `AddOnPlacementScore <cluster>/<resourceName>`.
//!
//! Missing object: 0. Expired (`now > validUntil`, strictly): 0, and the placement gets a Warning
//! naming the expired objects. `validUntil` unset: never expires. Otherwise the *last* item named
//! `scoreName` (0 when there is none), without clamping. Upstream never says which clusters had
//! no object or no such score name; [`AddOnFindings`] keeps that for the explanation.

use super::ScoreContext;
use crate::placement::nanos::timestamp;
use crate::placement::snapshot::{ClusterId, HubSnapshot};
use crate::placement::status::Status;
use k8s_openapi::jiff::Timestamp;

/// What the add-on prioritizer noticed while scoring.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AddOnFindings {
    /// Clusters without the AddOnPlacementScore object.
    pub missing: Vec<ClusterId>,
    /// Clusters whose object expired, with its `validUntil`.
    pub expired: Vec<(ClusterId, Timestamp)>,
    /// Clusters whose (valid) object has no item with the score name.
    pub score_name_absent: Vec<ClusterId>,
}

impl AddOnFindings {
    /// Upstream's status: a Warning listing every expired object in feasible order.
    pub fn status(
        &self,
        plugin: impl FnOnce() -> String,
        snapshot: &HubSnapshot,
        resource_name: &str,
    ) -> Status {
        if self.expired.is_empty() {
            return Status::success();
        }
        let plugin = plugin();
        let mut message = String::from("AddOnPlacementScores");
        for (id, _) in &self.expired {
            message.push(' ');
            message.push_str(snapshot.cluster_name(*id));
            message.push('/');
            message.push_str(resource_name);
        }
        message.push_str(" expired");
        Status::warning(plugin, message)
    }
}

pub fn score(
    ctx: &ScoreContext<'_>,
    resource_name: &str,
    score_name: &str,
) -> (Vec<Option<i64>>, AddOnFindings) {
    let mut findings = AddOnFindings::default();
    let snapshot = ctx.snapshot;
    let resource = snapshot.score_name_id(resource_name);
    let score = snapshot.score_name_id(score_name);
    let scores = ctx
        .feasible
        .iter()
        .map(|&id| {
            let Some(entry) = resource.and_then(|r| snapshot.score_entry(id, r)) else {
                findings.missing.push(id);
                return Some(0);
            };
            if let Some(until) = entry.valid_until_ns
                && snapshot.score_expired(entry, ctx.now_ns)
            {
                findings.expired.push((id, timestamp(until)));
                return Some(0);
            }
            let value = snapshot.last_score(entry, score);
            if value.is_none() {
                findings.score_name_absent.push(id);
            }
            Some(i64::from(value.unwrap_or(0)))
        })
        .collect();
    (scores, findings)
}
