//! Objects a test adds to a managed cluster: fake Nodes and Pods with the resources a scenario needs.

use super::*;

/// Creates `count` Ready nodes of 8 CPUs and 32 GiB on a managed cluster (API objects only).
pub async fn add_nodes(managed: &kube::Client, cluster: &str, count: usize) -> Result<(), Error> {
    let api: Api<Node> = Api::all(managed.clone());
    let status = json!({"status": {
        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}],
    }});
    for i in 0..count {
        let name = format!("{cluster}-node-{i}");
        let node: Node = serde_json::from_value(
            json!({"metadata": {"name": name, "labels": {"kubernetes.io/os": "linux"}}}),
        )
        .map_err(|e| Error::Options(e.to_string()))?;
        api.create(&PostParams::default(), &node)
            .await
            .map_err(|source| Error::Kube {
                what: format!("creating node {name}"),
                source,
            })?;
        // Status is a subresource: create ignores it.
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(|source| Error::Kube {
                what: format!("node {name} status"),
                source,
            })?;
        // The API server's TaintNodesByCondition admission taints every new node not-ready
        // (NoSchedule); the node lifecycle controller, which this control plane does not run,
        // lifts it once the node reports Ready. Lift it here, as it would.
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": null}})),
        )
        .await
        .map_err(|source| Error::Kube {
            what: format!("node {name} taints"),
            source,
        })?;
    }
    Ok(())
}

/// One pod in namespace `load`, bound to `<cluster>-node-<node>`, requesting `cpu` and `memory`.
pub async fn add_pod(
    managed: &kube::Client,
    cluster: &str,
    node: usize,
    cpu: &str,
    memory: &str,
) -> Result<(), Error> {
    let namespaces: Api<Namespace> = Api::all(managed.clone());
    if namespaces.get_opt("load").await.ok().flatten().is_none() {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "load"}}))
            .map_err(|e| Error::Options(e.to_string()))?;
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .map_err(|source| Error::Kube {
                what: "creating namespace load".into(),
                source,
            })?;
    }
    // kube-controller-manager creates `default` in a new namespace; pods are refused until then.
    let accounts: Api<ServiceAccount> = Api::namespaced(managed.clone(), "load");
    for _ in 0..150 {
        if accounts.get_opt("default").await.ok().flatten().is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let pods: Api<Pod> = Api::namespaced(managed.clone(), "load");
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"generateName": "busy-"},
        "spec": {
            "nodeName": format!("{cluster}-node-{node}"),
            "containers": [{"name": "c", "image": "busy", "resources": {"requests": {"cpu": cpu, "memory": memory}}}],
        },
    }))
    .map_err(|e| Error::Options(e.to_string()))?;
    pods.create(&PostParams::default(), &pod)
        .await
        .map_err(|source| Error::Kube {
            what: format!("creating a pod on {cluster}"),
            source,
        })?;
    Ok(())
}
