//! Publishes the ledger's reservations for plain OCM Placements: the `ocm-score-reserved`
//! AddOnPlacementScore (`ocm_score_scheduler::reservation::deduction`) on each cluster with reservations
//! in flight, rewritten when they change and deleted when they end. Runs beside the controller
//! while this replica leads; the objects' `validUntil` (the reservations' TTL) ends them in OCM's
//! eyes if no one is left to delete them.

use super::child::FIELD_MANAGER;
use super::metrics::Metrics;
use super::reservations::SharedLedger;
use super::snapshot::Stores;
use jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use ocm_score_api::{AddOnPlacementScore, AddOnPlacementScoreItem, AddOnPlacementScoreStatus};
use ocm_score_scheduler::reservation::deduction::{Deduction, RESOURCE_NAME, deductions};
use ocm_score_shell::CancellationToken;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// After a failed write, the next attempt.
const RETRY: Duration = Duration::from_secs(5);

/// What the hub should hold: each cluster's deduction as the object's status.
fn desired(all: BTreeMap<String, Deduction>) -> BTreeMap<String, AddOnPlacementScoreStatus> {
    all.into_iter()
        .map(|(cluster, deduction)| {
            let status = AddOnPlacementScoreStatus {
                scores: deduction
                    .scores
                    .into_iter()
                    .map(|(name, value)| AddOnPlacementScoreItem { name, value })
                    .collect(),
                valid_until: Some(deduction.valid_until),
                ..Default::default()
            };
            (cluster, status)
        })
        .collect()
}

/// The published status of every `ocm-score-reserved` object, by cluster.
fn published(stores: &Stores) -> BTreeMap<String, Option<AddOnPlacementScoreStatus>> {
    stores
        .hub
        .scores
        .state()
        .iter()
        .filter(|s| s.metadata.name.as_deref() == Some(RESOURCE_NAME))
        .filter_map(|s| Some((s.namespace()?, s.status.clone())))
        .collect()
}

/// The earliest TTL among the reservations in flight: the deductions change then.
fn next_expiry(ledger: &SharedLedger, now: i128) -> Option<i128> {
    ledger
        .peek(|l| {
            l.entries()
                .filter(|(_, _, e)| e.in_flight(now))
                .map(|(_, _, e)| e.expires_at)
                .min()
        })
        .flatten()
}

/// Keeps the objects equal to the ledger until `stop`.
pub async fn publish(
    client: kube::Client,
    stores: Stores,
    ledger: Arc<SharedLedger>,
    metrics: Arc<Metrics>,
    stop: CancellationToken,
) {
    loop {
        let now = Timestamp::now().as_nanosecond();
        let shapes = stores.shape_catalog();
        // Before the first plan the ledger is not built: what is published stays as it is.
        let mut wake = None;
        if let Some(want) = ledger.peek(|l| desired(deductions(l, &shapes, now))) {
            metrics.reserved_scores(want.len());
            let failed = sync(&client, &want, &published(&stores), &metrics).await;
            wake = next_expiry(&ledger, now).map(|at| {
                let ns = u64::try_from((at - now).max(0)).unwrap_or(u64::MAX);
                Duration::from_nanos(ns)
            });
            if failed {
                wake = Some(wake.map_or(RETRY, |w| w.min(RETRY)));
            }
        }
        let sleep = async {
            match wake {
                Some(after) => tokio::time::sleep(after).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            () = ledger.changed() => {}
            () = sleep => {}
            () = stop.cancelled() => return,
        }
    }
}

/// Writes what differs and deletes what is no longer reserved; true if something failed.
async fn sync(
    client: &kube::Client,
    want: &BTreeMap<String, AddOnPlacementScoreStatus>,
    have: &BTreeMap<String, Option<AddOnPlacementScoreStatus>>,
    metrics: &Metrics,
) -> bool {
    let mut failed = false;
    for (cluster, status) in want {
        if have.get(cluster) == Some(&Some(status.clone())) {
            continue;
        }
        let api: Api<AddOnPlacementScore> = Api::namespaced(client.clone(), cluster);
        match write(&api, status).await {
            Ok(()) => {
                metrics.wrote("AddOnPlacementScore");
                tracing::info!(%cluster, scores = ?status.scores, "published the reserved capacity");
            }
            Err(error) => {
                failed = true;
                metrics.reserved_score_failed();
                tracing::warn!(%cluster, %error, "publishing the reserved capacity failed; retrying");
            }
        }
    }
    for cluster in have.keys().filter(|c| !want.contains_key(*c)) {
        let api: Api<AddOnPlacementScore> = Api::namespaced(client.clone(), cluster);
        match api.delete(RESOURCE_NAME, &DeleteParams::default()).await {
            Ok(_) => {
                metrics.wrote("AddOnPlacementScore");
                tracing::info!(%cluster, "no reservation left: deleted the reserved capacity");
            }
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(error) => {
                failed = true;
                metrics.reserved_score_failed();
                tracing::warn!(%cluster, %error, "deleting the reserved capacity failed; retrying");
            }
        }
    }
    failed
}

/// Server-side apply of the object (created if missing) and of its status.
async fn write(
    api: &Api<AddOnPlacementScore>,
    status: &AddOnPlacementScoreStatus,
) -> Result<(), kube::Error> {
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let object = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
        "kind": "AddOnPlacementScore",
        "metadata": {"name": RESOURCE_NAME, "labels": {"app.kubernetes.io/managed-by": FIELD_MANAGER}},
    });
    api.patch(RESOURCE_NAME, &params, &Patch::Apply(&object)).await?;
    let with_status = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
        "kind": "AddOnPlacementScore",
        "metadata": {"name": RESOURCE_NAME},
        "status": status,
    });
    api.patch_status(RESOURCE_NAME, &params, &Patch::Apply(&with_status))
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocm_score_api::Time;

    #[test]
    fn a_deduction_becomes_the_status_ocm_reads() {
        let all = BTreeMap::from([(
            "c1".to_string(),
            Deduction {
                scores: BTreeMap::from([("fits.a".to_string(), -3), ("fits.b".to_string(), -1)]),
                valid_until: Time(Timestamp::from_second(1_800_000_000).expect("in range")),
            },
        )]);
        let want = desired(all);
        let status = serde_json::to_value(&want["c1"]).expect("serializes");
        assert_eq!(
            status,
            json!({"scores": [{"name": "fits.a", "value": -3}, {"name": "fits.b", "value": -1}],
                   "validUntil": "2027-01-15T08:00:00Z"})
        );
    }
}
