//! Pods as the tests on nodes look at them: which are Running and Ready, how often restarted.

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams};

/// Pods of a namespace (optionally by label selector) that are Running with every container ready.
pub async fn ready_pods(client: &kube::Client, namespace: &str, selector: &str) -> Vec<Pod> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let listed = pods
        .list(&ListParams::default().labels(selector))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    listed.into_iter().filter(is_ready).collect()
}

/// Every pod of a namespace, ready or not. A failed list is an error, never "no pods": only a
/// list that succeeded and is empty means they are gone.
pub async fn all_pods(client: &kube::Client, namespace: &str) -> Result<Vec<Pod>, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    Ok(pods.list(&ListParams::default()).await?.items)
}

/// When the pod became Ready, if it is.
pub fn ready_since(pod: &Pod) -> Option<jiff::Timestamp> {
    if !is_ready(pod) {
        return None;
    }
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

pub fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// Restarts of all the pod's containers.
pub fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).sum())
        .unwrap_or(0)
}
