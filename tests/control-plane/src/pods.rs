//! Pods as the tests on nodes look at them: which are Running and Ready, how often restarted; and
//! pods that take a node's memory, for the tests and the demo that load a cluster.

use ocm_score_agent::accounting::quantity::{AccountingUnit, parse_quantity};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use crate::Error;
use crate::image::PAUSE;

/// Pods of a namespace (optionally by label selector) that are Running with every container ready.
/// A failed list is an error, never "none ready".
pub async fn ready_pods(
    client: &kube::Client,
    namespace: &str,
    selector: &str,
) -> Result<Vec<Pod>, kube::Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let listed = pods.list(&ListParams::default().labels(selector)).await?.items;
    Ok(listed.into_iter().filter(is_ready).collect())
}

/// [`ready_pods`] for a test's one-off read, where a transient failure must neither read as "none
/// ready" nor fail the test at once: a failed list is retried every second for 30 s, then its
/// error returned.
pub async fn ready_pods_read(
    client: &kube::Client,
    namespace: &str,
    selector: &str,
) -> Result<Vec<Pod>, kube::Error> {
    let mut failures = 0;
    loop {
        match ready_pods(client, namespace, selector).await {
            Ok(pods) => return Ok(pods),
            Err(e) if failures >= 30 => return Err(e),
            Err(_) => failures += 1,
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
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

/// Creates pod `name` in `namespace` (which must exist) of the sandbox image, already on every node
/// (nothing to pull), requesting `memory` (a quantity such as `16Gi`) and 10m of CPU: the
/// cluster's scheduler places it on a node and its kubelet runs it. The request is what the
/// scheduler and our agents (source `cluster`) count as taken; the pause process itself uses next
/// to nothing.
pub async fn hold_memory(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    memory: &str,
) -> Result<Pod, Error> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "memory-load"}},
        "spec": {"containers": [{
            "name": "load", "image": PAUSE.reference, "imagePullPolicy": "Never",
            "resources": {"requests": {"cpu": "10m", "memory": memory}},
        }]},
    }))
    .map_err(|e| Error::Options(e.to_string()))?;
    Api::<Pod>::namespaced(client.clone(), namespace)
        .create(&PostParams::default(), &pod)
        .await
        .map_err(|source| Error::Kube {
            what: format!("creating pod {namespace}/{name} requesting {memory} of memory"),
            source,
        })
}

/// Deletes pod `namespace/name` at once (no grace period) and returns once the API server no
/// longer has it, within `timeout`; a failed read is retried, never taken for "gone".
pub async fn delete_pod(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    timeout: Duration,
) -> Result<(), Error> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let what = || format!("deleting pod {namespace}/{name}");
    match pods.delete(name, &DeleteParams::default().grace_period(0)).await {
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 404 => return Ok(()),
        Err(source) => return Err(Error::Kube { what: what(), source }),
    }
    let started = std::time::Instant::now();
    loop {
        if let Ok(None) = pods.get_opt(name).await {
            return Ok(());
        }
        if started.elapsed() > timeout {
            return Err(Error::Check {
                what: what(),
                problem: format!("still there after {timeout:?}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Bytes of memory on `node` that no pod has requested yet: its allocatable memory less the
/// requests of the pods bound to it that have not ended, each counted as the scheduler counts it
/// (the larger of its containers' sum and its largest init container, plus its overhead).
pub async fn unrequested_memory(client: &kube::Client, node: &str) -> Result<u64, Error> {
    let read = |what: String| move |source| Error::Kube { what, source };
    let allocatable = Api::<Node>::all(client.clone())
        .get(node)
        .await
        .map_err(read(format!("reading node {node}")))?
        .status
        .and_then(|s| s.allocatable)
        .and_then(|a| a.get("memory").map(|q| q.0.clone()))
        .ok_or_else(|| Error::Options(format!("node {node} reports no allocatable memory")))?;
    let allocatable =
        bytes(&allocatable).ok_or_else(|| Error::Options(format!("node {node}: memory {allocatable:?}")))?;
    let pods = Api::<Pod>::all(client.clone())
        .list(&ListParams::default().fields(&format!("spec.nodeName={node}")))
        .await
        .map_err(read(format!("listing the pods on {node}")))?;
    let mut requested = 0u64;
    for pod in &pods.items {
        let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
        if matches!(phase, Some("Succeeded" | "Failed")) {
            continue;
        }
        requested += memory_request(pod).map_err(|q| {
            Error::Options(format!(
                "pod {}: memory {q:?}",
                pod.metadata.name.as_deref().unwrap_or("?")
            ))
        })?;
    }
    Ok(allocatable.saturating_sub(requested))
}

/// A pod's effective memory request, as the scheduler counts it; the quantity it cannot read as
/// the error.
fn memory_request(pod: &Pod) -> Result<u64, String> {
    let Some(spec) = &pod.spec else { return Ok(0) };
    let of = |resources: Option<&k8s_openapi::api::core::v1::ResourceRequirements>| -> Result<u64, String> {
        match resources
            .and_then(|r| r.requests.as_ref())
            .and_then(|r| r.get("memory"))
        {
            Some(q) => bytes(&q.0).ok_or_else(|| q.0.clone()),
            None => Ok(0),
        }
    };
    let mut containers = 0;
    for c in &spec.containers {
        containers += of(c.resources.as_ref())?;
    }
    let mut init = 0;
    for c in spec.init_containers.iter().flatten() {
        init = init.max(of(c.resources.as_ref())?);
    }
    let overhead = match spec.overhead.as_ref().and_then(|o| o.get("memory")) {
        Some(q) => bytes(&q.0).ok_or_else(|| q.0.clone())?,
        None => 0,
    };
    Ok(containers.max(init) + overhead)
}

/// A memory quantity in bytes, rounded up as the API server rounds a fractional byte count: the
/// agent's own parser, the one home of quantity arithmetic.
fn bytes(quantity: &str) -> Option<u64> {
    parse_quantity(quantity, AccountingUnit::Whole)
        .ok()
        .and_then(|v| u64::try_from(v).ok())
}

#[cfg(test)]
mod tests {
    use super::{all_pods, bytes};
    use ocm_score_kube_double::{ApiServer, RequestMatch};
    use serde_json::json;

    #[tokio::test]
    async fn a_failed_list_is_an_error_never_no_pods() {
        let server = ApiServer::builder()
            .builtin_kinds()
            .object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "agents"}}))
            .start()
            .await
            .expect("kube-double");
        let client = server.admin_client();
        // A 500: kube's client itself retries a 503.
        server
            .faults()
            .fail_next(1, RequestMatch::any().verb("list").resource("pods"), 500);
        let failed = all_pods(&client, "agents").await;
        assert!(failed.is_err(), "a 500 read as {failed:?}");
        // Only a list that succeeded and is empty means no pods.
        let listed = all_pods(&client, "agents")
            .await
            .expect("the list after the fault");
        assert!(listed.is_empty());
    }

    #[test]
    fn memory_quantities_read_as_the_api_server_reads_them() {
        assert_eq!(bytes("64Mi"), Some(64 << 20));
        assert_eq!(bytes("24555648Ki"), Some(24_555_648 << 10));
        assert_eq!(bytes("1Gi"), Some(1 << 30));
        assert_eq!(bytes("128M"), Some(128_000_000));
        assert_eq!(bytes("1e9"), Some(1_000_000_000));
        assert_eq!(bytes("1500m"), Some(2));
        assert_eq!(bytes("0"), Some(0));
        assert_eq!(bytes("-1Mi"), None);
        assert_eq!(bytes("1.5Gi"), Some(3 << 29));
        assert_eq!(bytes("12Qi"), None);
    }
}
