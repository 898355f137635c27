//! Reads of what the hub holds: a cluster's score object and values, and a Placement's decisions.

use super::*;

/// The `resource-usage-score` object in a cluster's namespace: `Ok(None)` only when the hub says
/// there is none; a failed read is an error, never "no score".
pub async fn score_object(hub: &kube::Client, cluster: &str) -> Result<Option<DynamicObject>, Error> {
    score_object_named(hub, cluster, "resource-usage-score").await
}

/// The AddOnPlacementScore `name` in a cluster's namespace, as [`score_object`] reads it.
pub async fn score_object_named(
    hub: &kube::Client,
    cluster: &str,
    name: &str,
) -> Result<Option<DynamicObject>, Error> {
    let api = dynamic(
        hub,
        "cluster.open-cluster-management.io",
        "v1alpha1",
        "AddOnPlacementScore",
        Some(cluster),
    )
    .await?;
    api.get_opt(name).await.map_err(|source| Error::Kube {
        what: format!("reading AddOnPlacementScore {cluster}/{name}"),
        source,
    })
}

/// A published score of `resource-usage-score` in a cluster's namespace, for positive waits: `None`
/// while it is not there yet, or while the hub does not answer (the wait retries either way).
pub async fn score(hub: &kube::Client, cluster: &str, name: &str) -> Option<i64> {
    score_object(hub, cluster)
        .await
        .ok()??
        .data
        .pointer("/status/scores")
        .and_then(Value::as_array)?
        .iter()
        .find(|s| s["name"] == name)
        .and_then(|s| s["value"].as_i64())
}

/// The clusters OCM's PlacementDecisions list for a Placement, sorted.
pub async fn decided(hub: &kube::Client, namespace: &str, placement: &str) -> Vec<String> {
    let Ok(api) = dynamic(
        hub,
        "cluster.open-cluster-management.io",
        "v1beta1",
        "PlacementDecision",
        Some(namespace),
    )
    .await
    else {
        return Vec::new();
    };
    let selector = format!("cluster.open-cluster-management.io/placement={placement}");
    let items = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut clusters = decision_clusters(&items);
    clusters.sort();
    clusters
}

/// The clusters PlacementDecision objects list, in their order.
pub fn decision_clusters<'a>(decisions: impl IntoIterator<Item = &'a DynamicObject>) -> Vec<String> {
    decisions
        .into_iter()
        .flat_map(|d| {
            d.data
                .pointer("/status/decisions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|d| d["clusterName"].as_str().map(str::to_owned))
        .collect()
}

/// Whether a list of Kubernetes conditions holds `kind` with status True.
pub fn condition_true(conditions: Option<&Value>, kind: &str) -> bool {
    conditions
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

/// `status.validUntil` of a cluster's score object, once it has one (a failed read counts as not
/// yet, for a caller that polls).
pub async fn score_valid_until(hub: &kube::Client, cluster: &str) -> Option<String> {
    score_object(hub, cluster)
        .await
        .ok()??
        .data
        .pointer("/status/validUntil")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// Waits for `renewals` renewals of `cluster`'s score after the validUntil `from` and panics unless
/// each moved validUntil by 45-80 s: what the shipped 60 s refresh gives (it spreads ±10 %, and a
/// write takes a moment). The gaps are those of the validUntil the agent wrote (its write time plus
/// the same validity), not of when the caller happened to poll. Returns the last validUntil.
pub async fn expect_renewals_a_minute_apart(
    hub: &kube::Client,
    cluster: &str,
    from: String,
    renewals: usize,
    context: impl Fn() -> String,
) -> String {
    let instant = |text: &str| -> jiff::Timestamp {
        text.parse()
            .unwrap_or_else(|e| panic!("{cluster}: validUntil {text:?}: {e}"))
    };
    let mut last = from;
    for renewal in 1..=renewals {
        let previous = last.clone();
        last = crate::support::eventually(
            &format!("renewal {renewal} of {cluster}'s validUntil (was {previous})"),
            Duration::from_secs(100),
            &context,
            || {
                let previous = previous.clone();
                async move { score_valid_until(hub, cluster).await.filter(|v| *v > previous) }
            },
        )
        .await;
        let gap = instant(&last).duration_since(instant(&previous));
        assert!(
            (jiff::SignedDuration::from_secs(45)..=jiff::SignedDuration::from_secs(80)).contains(&gap),
            "{cluster}: renewal {renewal} moved validUntil by {gap:?} ({previous} to {last})"
        );
    }
    last
}
