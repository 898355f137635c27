//! Writing planned AddOnPlacementScores to the hub: create the object when it is missing (its
//! `status` would be dropped on create, because the CRD has a status subresource), then merge-patch
//! `/status` with the scores, `validUntil` and our condition. Writes run with bounded concurrency and
//! stop as soon as this replica is no longer the leader.

use super::{diff::PlannedWrite, metrics::Metrics};
use futures::{StreamExt, stream};
use kube::{
    Api,
    api::{ObjectMeta, Patch, PatchParams, PostParams},
};
use ocm_score_api::AddOnPlacementScore;
use std::collections::BTreeMap;
use tokio::sync::watch;

/// Field manager recorded on our writes.
pub const FIELD_MANAGER: &str = "ocm-score-thanos-scorer";
/// Label on the objects this scorer creates.
pub const MANAGED_BY_LABEL: (&str, &str) = ("app.kubernetes.io/managed-by", "ocm-score-thanos-scorer");

#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("creating AddOnPlacementScore {namespace}/{name}: {source}")]
    Create {
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("writing the status of AddOnPlacementScore {namespace}/{name}: {source}")]
    Status {
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("encoding the status patch: {0}")]
    Encode(#[from] serde_json::Error),
}

/// How a batch of writes went.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteSummary {
    /// The objects as the API server returned them after the status write.
    pub written: Vec<AddOnPlacementScore>,
    pub failed: usize,
    /// Not attempted because leadership was lost mid-way.
    pub abandoned: usize,
}

pub struct ScoreWriter {
    client: kube::Client,
    name: String,
    concurrency: usize,
}

impl ScoreWriter {
    /// Writes AddOnPlacementScores named `name`, at most `concurrency` at a time.
    pub fn new(client: kube::Client, name: String, concurrency: usize) -> Self {
        Self {
            client,
            name,
            concurrency: concurrency.max(1),
        }
    }

    pub async fn write_all(
        &self,
        writes: Vec<PlannedWrite>,
        leading: &watch::Receiver<bool>,
        metrics: &Metrics,
    ) -> WriteSummary {
        let results: Vec<Option<Result<AddOnPlacementScore, ()>>> = stream::iter(writes)
            .map(|write| async move {
                if !*leading.borrow() {
                    return None;
                }
                let result = self.write(&write).await;
                let outcome = if result.is_ok() { "ok" } else { "error" };
                metrics.write(write.reason.as_str(), outcome);
                match result {
                    Ok(object) => {
                        tracing::debug!(cluster = %write.cluster, reason = write.reason.as_str(), "scores written");
                        Some(Ok(object))
                    }
                    Err(e) => {
                        tracing::warn!(cluster = %write.cluster, error = %e, "writing scores failed");
                        Some(Err(()))
                    }
                }
            })
            .buffer_unordered(self.concurrency)
            .collect()
            .await;
        let mut summary = WriteSummary::default();
        for r in results {
            match r {
                Some(Ok(object)) => summary.written.push(object),
                Some(Err(())) => summary.failed += 1,
                None => summary.abandoned += 1,
            }
        }
        summary
    }

    /// Creates the object if the plan says it is missing (or the status write finds it gone),
    /// then writes its status.
    pub async fn write(&self, write: &PlannedWrite) -> Result<AddOnPlacementScore, WriteError> {
        let api: Api<AddOnPlacementScore> = Api::namespaced(self.client.clone(), &write.cluster);
        if write.reason == super::diff::WriteReason::Create {
            self.create(&api, &write.cluster).await?;
        }
        let patch = serde_json::json!({ "status": serde_json::to_value(&write.status)? });
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..Default::default()
        };
        match api.patch_status(&self.name, &params, &Patch::Merge(&patch)).await {
            Ok(object) => Ok(object),
            Err(kube::Error::Api(status)) if status.code == 404 => {
                // Deleted since the cache saw it: create it again and retry once.
                self.create(&api, &write.cluster).await?;
                api.patch_status(&self.name, &params, &Patch::Merge(&patch))
                    .await
                    .map_err(|e| self.status_error(&write.cluster, e))
            }
            Err(e) => Err(self.status_error(&write.cluster, e)),
        }
    }

    async fn create(&self, api: &Api<AddOnPlacementScore>, namespace: &str) -> Result<(), WriteError> {
        let object = AddOnPlacementScore {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(namespace.to_owned()),
                labels: Some(BTreeMap::from([(
                    MANAGED_BY_LABEL.0.to_owned(),
                    MANAGED_BY_LABEL.1.to_owned(),
                )])),
                ..Default::default()
            },
            status: None,
        };
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..Default::default()
        };
        match api.create(&params, &object).await {
            Ok(_) => Ok(()),
            // Created since the cache last looked (another replica, or our own earlier round).
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(e) => Err(WriteError::Create {
                namespace: namespace.to_owned(),
                name: self.name.clone(),
                source: Box::new(e),
            }),
        }
    }

    fn status_error(&self, namespace: &str, e: kube::Error) -> WriteError {
        WriteError::Status {
            namespace: namespace.to_owned(),
            name: self.name.clone(),
            source: Box::new(e),
        }
    }
}
