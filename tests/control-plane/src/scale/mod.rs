//! The hub at scale on a real control plane, shared by the CI-size test
//! (`tests/tests/control_plane_scale.rs`) and the full-size benchmark
//! (`tests/benches/control_plane_scale.rs`):
//! - [`load_fleet`]: bare ManagedClusters (no klusterlet) and their namespaces created through the
//!   API by a parallel loader, each marked joined and available as its klusterlet would;
//! - [`addon_manager_at_scale`]: `manifests/hub` installed with kubectl and our add-on manager run
//!   as its Deployment says: time until every cluster has its ManifestWork, the requests the
//!   manager made (from the hub's audit log), its peak RSS, and its requests in a quiet window once
//!   it has settled, with the passes (resyncs) it counted in that window;
//! - [`fleet`]: simulated agents of a whole fleet renewing their scores through the agent's own loop,
//!   with the add-on, tiering and the explain server as shipped (issue 45, docs/scale.md);
//! - [`score_to_decision`]: Placements prioritizing by `resource-usage-score`, one cluster's score
//!   changed at a time so that it enters or leaves every Placement's decisions: how long OCM's
//!   placement controller takes to rewrite the PlacementDecisions.
//!
//! Each scenario checks correctness as it goes and fails naming what was wrong; the figures are the
//! caller's to assert on or print. The loader's own time is never part of a figure.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use ocm_score_api::well_known::{ADDON_NAME_LABEL, PLACEMENT_LABEL, RESOURCE_USAGE_SCORE};
use ocm_score_api::{
    AddOnPlacementScore, ManagedCluster, ManagedClusterSetBinding, ManifestWork, Placement, PlacementDecision,
};
use serde_json::{Value, json};

use super::addon::{
    ADDON, HUB_NAMESPACE, decision_clusters, hub_snapshot, kubectl, start_manager_with, workspace_binary,
};
use super::process::Component;
use super::{ControlPlane, Error};

mod addon_manager;
mod decisions;
mod fleet;
mod observe;

pub use addon_manager::*;
pub use decisions::*;
pub use fleet::*;
pub use observe::*;

/// Who the loader is, in `managedFields`.
const LOADER_FIELD_MANAGER: &str = "ocm-score-scale-loader";
/// Requests the loader keeps in flight: enough to keep a 2-core API server busy.
const LOADER_PARALLELISM: usize = 16;
/// The lease duration the loader gives each cluster: OCM's lease controller declares a cluster
/// unreachable after five of them without a renewal, so an hour keeps a bare fleet available
/// for the whole run.
const LEASE_DURATION_SECONDS: i64 = 3600;
const CLUSTER_GROUP: &str = "cluster.open-cluster-management.io";
const UNREACHABLE: &str = "cluster.open-cluster-management.io/unreachable";
const UNAVAILABLE: &str = "cluster.open-cluster-management.io/unavailable";
/// The ServiceAccount `manifests/hub` runs the add-on manager as.
const MANAGER_USER: &str = "system:serviceaccount:ocm-score:ocm-score-addon-manager";
/// How long the manager must go without a write before it counts as settled.
const SETTLED_AFTER: Duration = Duration::from_secs(10);

fn resource<K: Resource<DynamicType = ()>>() -> ApiResource {
    ApiResource::erase::<K>(&())
}

fn kube_error(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Error {
    let what = what.into();
    move |source| Error::Kube { what, source }
}

fn check(what: impl Into<String>, problem: impl Into<String>) -> Error {
    Error::Check {
        what: what.into(),
        problem: problem.into(),
    }
}

fn object(value: Value) -> Result<DynamicObject, Error> {
    serde_json::from_value(value).map_err(|e| Error::Options(format!("an object the scenario builds: {e}")))
}

/// Creates `object`; one that exists already is fine (a loader run twice, or OCM first).
async fn create(api: &Api<DynamicObject>, value: Value, what: &str) -> Result<(), Error> {
    match api.create(&PostParams::default(), &object(value)?).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(source) => Err(Error::Kube {
            what: what.to_owned(),
            source,
        }),
    }
}

/// Timestamps to the second, as Kubernetes writes them.
fn timestamp(at: jiff::Timestamp) -> String {
    at.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// `count` cluster names `<prefix>-00000`.. (same width, so no name is part of another).
pub fn fleet_names(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}-{i:05}")).collect()
}

/// Creates each cluster's namespace and ManagedCluster (accepted, with a long lease), marks it
/// joined and available as its klusterlet would, and returns once OCM's taint controller has
/// left every one of them untainted: a fleet Placements can select. Returns the loader's time.
pub async fn load_fleet(hub: &Client, names: &[String], timeout: Duration) -> Result<Duration, Error> {
    let started = Instant::now();
    let namespaces: Api<DynamicObject> = Api::all_with(hub.clone(), &resource::<Namespace>());
    let clusters: Api<DynamicObject> = Api::all_with(hub.clone(), &resource::<ManagedCluster>());
    futures::stream::iter(names)
        .map(|name| {
            let (namespaces, clusters) = (namespaces.clone(), clusters.clone());
            async move {
                create(
                    &namespaces,
                    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}),
                    &format!("creating namespace {name}"),
                )
                .await?;
                create(
                    &clusters,
                    json!({"apiVersion": format!("{CLUSTER_GROUP}/v1"), "kind": "ManagedCluster",
                           "metadata": {"name": name},
                           "spec": {"hubAcceptsClient": true, "leaseDurationSeconds": LEASE_DURATION_SECONDS}}),
                    &format!("creating ManagedCluster {name}"),
                )
                .await?;
                mark_available(&clusters, name).await
            }
        })
        .buffer_unordered(LOADER_PARALLELISM)
        .try_collect::<Vec<()>>()
        .await?;

    // OCM's registration controller writes the same status (HubAccepted) from its own cache, and
    // may drop a condition written in between: mark again whatever is not available yet.
    let wanted: BTreeSet<&str> = names.iter().map(String::as_str).collect();
    let deadline = started + timeout;
    loop {
        let list = clusters
            .list(&ListParams::default())
            .await
            .map_err(kube_error("listing ManagedClusters"))?;
        let mut pending: Vec<(String, bool)> = Vec::new();
        let mut found = 0;
        for mc in &list.items {
            let name = mc.metadata.name.clone().unwrap_or_default();
            if !wanted.contains(name.as_str()) {
                continue;
            }
            found += 1;
            let available = conditions_true(&mc.data, "ManagedClusterConditionAvailable");
            let tainted = mc
                .data
                .pointer("/spec/taints")
                .and_then(Value::as_array)
                .is_some_and(|ts| {
                    ts.iter()
                        .any(|t| t["key"] == UNREACHABLE || t["key"] == UNAVAILABLE)
                });
            if !available || tainted {
                pending.push((name, available));
            }
        }
        if pending.is_empty() && found == wanted.len() {
            return Ok(started.elapsed());
        }
        if Instant::now() >= deadline {
            return Err(check(
                "loading the fleet",
                format!(
                    "after {:?}, {} of {} clusters found, not yet available and untainted: {:?}",
                    started.elapsed(),
                    found,
                    wanted.len(),
                    pending.iter().take(5).collect::<Vec<_>>()
                ),
            ));
        }
        for (name, _) in pending.iter().filter(|(_, available)| !available) {
            mark_available(&clusters, name).await?;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// The klusterlet's part of a cluster's status: Joined and Available, server-side applied (the
/// conditions are a map keyed by type, so OCM's own conditions stay).
async fn mark_available(clusters: &Api<DynamicObject>, name: &str) -> Result<(), Error> {
    let now = timestamp(jiff::Timestamp::now());
    let condition = |kind: &str, reason: &str| {
        json!({"type": kind, "status": "True", "reason": reason, "lastTransitionTime": now,
               "message": "written by the scale loader, as the cluster's klusterlet would"})
    };
    let status = json!({
        "apiVersion": format!("{CLUSTER_GROUP}/v1"), "kind": "ManagedCluster", "metadata": {"name": name},
        "status": {"conditions": [
            condition("ManagedClusterJoined", "ManagedClusterJoined"),
            condition("ManagedClusterConditionAvailable", "ManagedClusterAvailable"),
        ]},
    });
    clusters
        .patch_status(
            name,
            &PatchParams::apply(LOADER_FIELD_MANAGER).force(),
            &Patch::Apply(&status),
        )
        .await
        .map_err(kube_error(format!("marking ManagedCluster {name} available")))?;
    Ok(())
}

fn conditions_true(object: &Value, kind: &str) -> bool {
    super::addon::condition_true(object.pointer("/status/conditions"), kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn top_clusters_rank_by_score_then_name() {
        let scores: BTreeMap<String, i64> = [("c", 5), ("a", 7), ("b", 7), ("d", -1)]
            .into_iter()
            .map(|(c, s)| (c.to_owned(), s))
            .collect();
        assert_eq!(top_clusters(&scores, 1), ["a"]);
        assert_eq!(top_clusters(&scores, 3), ["a", "b", "c"]);
        assert_eq!(top_clusters(&scores, 9), ["a", "b", "c", "d"]);
    }

    #[test]
    fn every_change_moves_one_cluster_in_or_out_of_every_placement() {
        let names = fleet_names("score", 15);
        let mut scores: BTreeMap<String, i64> = names
            .iter()
            .enumerate()
            .map(|(i, c)| (c.clone(), initial_score(i)))
            .collect();
        let before: Vec<Vec<String>> = (0..TOP)
            .map(|i| top_clusters(&scores, placement_size(i)))
            .collect();
        for step in 0..12 {
            let (index, value, entered) = change(step, &names);
            scores.insert(names[index].clone(), value);
            for size in 1..=TOP {
                let top = top_clusters(&scores, size);
                assert_eq!(top.contains(&names[index]), entered, "step {step}, size {size}");
            }
            if !entered {
                let after: Vec<Vec<String>> = (0..TOP)
                    .map(|i| top_clusters(&scores, placement_size(i)))
                    .collect();
                assert_eq!(after, before, "step {step} restores the initial decisions");
            }
        }
    }

    #[test]
    fn median_and_p99_by_nearest_rank() {
        let samples: Vec<Duration> = (1..=50).map(Duration::from_millis).collect();
        assert_eq!(
            median_p99(&samples),
            (Duration::from_millis(25), Duration::from_millis(50))
        );
        assert_eq!(median_p99(&[]), (Duration::ZERO, Duration::ZERO));
    }

    #[test]
    fn audit_events_count_once_per_request_and_leases_apart() {
        let event = |verb: &str, stage: &str, group: &str, resource: &str| {
            json!({"stage": stage, "verb": verb, "user": {"username": MANAGER_USER},
                   "objectRef": {"apiGroup": group, "resource": resource, "namespace": "n", "name": "x"},
                   "responseStatus": {"code": 200}})
        };
        let mut requests = Requests::default();
        for e in [
            event(
                "watch",
                "ResponseStarted",
                "work.open-cluster-management.io",
                "manifestworks",
            ),
            event(
                "watch",
                "ResponseComplete",
                "work.open-cluster-management.io",
                "manifestworks",
            ),
            event(
                "create",
                "ResponseComplete",
                "work.open-cluster-management.io",
                "manifestworks",
            ),
            event("get", "ResponseComplete", "coordination.k8s.io", "leases"),
            event("update", "ResponseComplete", "coordination.k8s.io", "leases"),
            event("list", "ResponseComplete", "", "namespaces"),
        ] {
            requests.count(&e, MANAGER_USER);
        }
        let mut other = event("patch", "ResponseComplete", "", "secrets");
        other["user"]["username"] = json!("someone-else");
        requests.count(&other, MANAGER_USER);
        assert_eq!(
            (requests.watch, requests.create, requests.lease, requests.list),
            (1, 1, 2, 1)
        );
        assert_eq!((requests.writes(), requests.total()), (1, 5));
        assert_eq!(requests.write_samples, ["create manifestworks n/x (200)"]);
    }
}
