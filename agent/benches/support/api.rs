//! An in-process API server for the cold-start benchmark: serves the initial lists of Nodes and
//! Pods as a real one does (pages of `limit` objects, a continue token, the JSON a kube-apiserver
//! sends: managedFields, status, ...), and holds watches open without events. The agent's real
//! `ClusterSource` runs against it through a `kube::Client` over this service, so what is timed is
//! the agent's own path: kube-rs's watcher paging, JSON decoding, the ledger and the fits index.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::{Request, Response, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;

/// Every page of both lists, serialized once up front.
pub struct ListServer {
    nodes: Vec<Bytes>,
    pods: Vec<Bytes>,
    /// Bytes of JSON in the pod pages.
    pub pod_bytes: usize,
}

impl ListServer {
    /// `nodes` and `pods` (API JSON) in pages of `page` objects.
    pub fn new(nodes: &[Value], pods: &[Value], page: usize) -> Self {
        let pages = |kind: &str, items: &[Value]| -> Vec<Bytes> {
            let chunks: Vec<&[Value]> = items.chunks(page.max(1)).collect();
            let count = chunks.len();
            chunks
                .into_iter()
                .enumerate()
                .map(|(i, chunk)| {
                    let next = if i + 1 < count {
                        format!("page-{}", i + 1)
                    } else {
                        String::new()
                    };
                    let list = json!({
                        "kind": kind, "apiVersion": "v1",
                        "metadata": {"resourceVersion": "1000", "continue": next,
                                     "remainingItemCount": items.len().saturating_sub((i + 1) * page)},
                        "items": chunk,
                    });
                    Bytes::from(list.to_string())
                })
                .collect()
        };
        let pods = pages("PodList", pods);
        let pod_bytes = pods.iter().map(Bytes::len).sum();
        ListServer {
            nodes: pages("NodeList", nodes),
            pods,
            pod_bytes,
        }
    }

    /// The pod list's pages as served.
    pub fn pod_pages(&self) -> impl Iterator<Item = &[u8]> {
        self.pods.iter().map(|p| &p[..])
    }

    pub fn client(self: &Arc<Self>) -> kube::Client {
        let server = self.clone();
        let service = tower::service_fn(move |request: Request<kube::client::Body>| {
            let server = server.clone();
            async move { Ok::<_, std::convert::Infallible>(server.handle(request).await) }
        });
        kube::Client::new(service, "default")
    }

    /// Serves the lists over plain HTTP on a loopback port (for an agent in another process, whose
    /// memory then holds nothing of the server); the port.
    pub async fn serve_http(self: &Arc<Self>) -> std::io::Result<u16> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let server = self.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let server = server.clone();
                tokio::spawn(async move {
                    let service =
                        hyper::service::service_fn(move |request: Request<hyper::body::Incoming>| {
                            let server = server.clone();
                            async move { Ok::<_, std::convert::Infallible>(server.handle(request).await) }
                        });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(io, service)
                        .await;
                });
            }
        });
        Ok(port)
    }

    async fn handle<B>(&self, request: Request<B>) -> Response<Full<Bytes>> {
        let query = request.uri().query().unwrap_or_default().to_owned();
        let param = |name: &str| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
                .map(str::to_owned)
        };
        if param("watch").is_some_and(|w| w == "true") {
            // Nothing changes: the watch stays open.
            return std::future::pending().await;
        }
        let pages = if request.uri().path().ends_with("/nodes") {
            &self.nodes
        } else {
            &self.pods
        };
        let index = param("continue")
            .and_then(|c| c.strip_prefix("page-").and_then(|n| n.parse::<usize>().ok()))
            .unwrap_or(0);
        match pages.get(index) {
            // The freshness probe (`limit=1`) is answered with a whole page; it reads no items.
            Some(page) => Response::new(Full::new(page.clone())),
            None => {
                let mut response = Response::new(Full::new(Bytes::from_static(b"{}")));
                *response.status_mut() = StatusCode::NOT_FOUND;
                response
            }
        }
    }
}

fn managed_fields(manager: &str, subresource: Option<&str>, fields: Value) -> Value {
    let mut entry = json!({"manager": manager, "operation": "Update", "apiVersion": "v1",
        "time": "2026-11-26T00:00:00Z", "fieldsType": "FieldsV1", "fieldsV1": fields});
    if let Some(s) = subresource {
        entry["subresource"] = json!(s);
    }
    entry
}

/// A node as a kube-apiserver sends it (labels, addresses, images, kubelet's managedFields).
pub fn node_json(node: &ocm_score_agent::accounting::SlimNode) -> Value {
    let list = |l: &ocm_score_agent::accounting::objects::ResourceList| -> Value {
        Value::Object(l.0.iter().map(|(k, v)| (k.clone(), v.0.clone().into())).collect())
    };
    let name = node.metadata.name.clone().unwrap_or_default();
    let images: Vec<Value> = (0..12)
        .map(|i| json!({"names": [format!("registry.example/team/image-{i}@sha256:{i:064x}"),
                                   format!("registry.example/team/image-{i}:v1.{i}.0")], "sizeBytes": 123456789 + i}))
        .collect();
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "uid": "0b1c2d3e-4f50-6172-8394-a5b6c7d8e9f0", "resourceVersion": "123456",
            "creationTimestamp": "2026-11-26T00:00:00Z",
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "m6i.8xlarge", "topology.kubernetes.io/zone": "us-east-1a"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"},
            "managedFields": [managed_fields("kubelet", None, json!({"f:metadata": {"f:labels": {}}})),
                              managed_fields("kubelet", Some("status"), json!({"f:status": {"f:conditions": {}, "f:images": {}}}))]},
        "spec": {"podCIDR": "10.244.0.0/24", "providerID": format!("aws:///us-east-1a/{name}"),
            "unschedulable": node.spec.unschedulable},
        "status": {
            "capacity": list(&node.status.allocatable), "allocatable": list(&node.status.allocatable),
            "conditions": node.status.conditions.iter().map(|c| json!({"type": c.type_, "status": c.status,
                "lastHeartbeatTime": "2026-11-26T00:00:00Z", "lastTransitionTime": "2026-11-26T00:00:00Z",
                "reason": "KubeletReady", "message": "kubelet is posting ready status"})).collect::<Vec<_>>(),
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": "ec2", "systemUUID": "ec2", "bootID": "b", "kernelVersion": "6.1.0",
                "osImage": "Amazon Linux 2023", "containerRuntimeVersion": "containerd://2.0.0",
                "kubeletVersion": "v1.34.3", "kubeProxyVersion": "v1.34.3", "operatingSystem": "linux", "architecture": "amd64"},
            "images": images,
        }
    })
}

/// A pod as a kube-apiserver sends it: what accounting reads plus what it skips (labels,
/// ownerReferences, managedFields, env, volumes, tolerations, the kubelet's status).
pub fn pod_json(pod: &ocm_score_agent::accounting::SlimPod) -> Value {
    use ocm_score_agent::accounting::objects::{ResourceList, SlimContainer};
    let list = |l: &ResourceList| -> Value {
        Value::Object(l.0.iter().map(|(k, v)| (k.clone(), v.0.clone().into())).collect())
    };
    let container = |c: &SlimContainer| {
        let mut out = json!({
            "name": c.name, "image": "registry.example/app:1.2.3", "imagePullPolicy": "IfNotPresent",
            "resources": {"requests": list(&c.resources.requests), "limits": list(&c.resources.requests)},
            "env": [{"name": "LOG_LEVEL", "value": "info"}],
            "ports": [{"containerPort": 8080, "protocol": "TCP"}],
            "volumeMounts": [{"name": "kube-api-access", "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        });
        if let Some(policy) = &c.restart_policy {
            out["restartPolicy"] = json!(policy);
        }
        out
    };
    let mut spec = json!({
        "nodeName": pod.spec.node_name,
        "containers": pod.spec.containers.iter().map(container).collect::<Vec<_>>(),
        "initContainers": pod.spec.init_containers.iter().map(container).collect::<Vec<_>>(),
        "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}],
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default", "schedulerName": "default-scheduler", "priority": 0,
        "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
    });
    if !pod.spec.overhead.0.is_empty() {
        spec["overhead"] = list(&pod.spec.overhead);
    }
    let phase = pod.status.phase.clone().unwrap_or_default();
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": pod.metadata.name, "namespace": pod.metadata.namespace, "resourceVersion": "123456",
            "uid": "6b8f6f0e-8c1e-4f55-9a4c-2f3b5e6d7a8b", "creationTimestamp": "2026-11-26T00:00:00Z",
            "generateName": "web-7d9f8b6c5d-",
            "labels": {"app": "web", "pod-template-hash": "7d9f8b6c5d"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9f8b6c5d",
                "uid": "1a2b3c4d-5e6f-7081-92a3-b4c5d6e7f809", "controller": true, "blockOwnerDeletion": true}],
            "managedFields": [
                managed_fields("kube-controller-manager", None, json!({"f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}}, "f:ownerReferences": {}}, "f:spec": {"f:containers": {}}})),
                managed_fields("kubelet", Some("status"), json!({"f:status": {"f:conditions": {}, "f:containerStatuses": {}, "f:phase": {}, "f:podIP": {}}}))]
        },
        "spec": spec,
        "status": {
            "phase": phase, "hostIP": "10.0.0.1", "podIP": "10.1.2.3", "podIPs": [{"ip": "10.1.2.3"}],
            "startTime": "2026-11-26T00:00:00Z", "qosClass": "Burstable",
            "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-26T00:00:00Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-26T00:00:05Z"},
                {"type": "ContainersReady", "status": "True", "lastTransitionTime": "2026-11-26T00:00:05Z"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-26T00:00:00Z"}],
            "containerStatuses": pod.spec.containers.iter().map(|c| json!({"name": c.name, "ready": true,
                "restartCount": 0, "started": true, "image": "registry.example/app:1.2.3",
                "imageID": "registry.example/app@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "containerID": "containerd://0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                "state": {"running": {"startedAt": "2026-11-26T00:00:04Z"}}})).collect::<Vec<_>>(),
        }
    })
}
