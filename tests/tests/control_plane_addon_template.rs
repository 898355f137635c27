//! The AddOnTemplate install as users run it, pods on real kubelets: `kubectl apply -k
//! manifests/addon-template` as shipped, and OCM's own addon-manager (v1.2.1, the one the control
//! plane runs) renders, registers and deploys our agent from the template, with no pod of ours on
//! the hub. The kubelets run the agent with the hub kubeconfig OCM's registration wrote; every
//! cluster's score reaches the hub owned by its ManagedClusterAddOn and is renewed about every 60 s;
//! the agents read WorkloadShapes through the template's binding (a shape's `fits` score appears).
//! OCM binds the hub ClusterRole to every agent of the add-on in each cluster namespace, so RBAC lets
//! one cluster's agent write another's score; the chart's ValidatingAdmissionPolicy refuses it.
//! Uninstalling leaves nothing of ours on the hub or the managed clusters; the same install through
//! Helm (`install.mode=template`) runs and uninstalls the same way.

use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRole;
use kube::api::{Api, ListParams};
use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::{
    ADDON, HUB_NAMESPACE, INSTALL_NAMESPACE, dynamic, expect_renewals_a_minute_apart, kubectl, leftovers,
    score_object,
};
use ocm_score_control_plane::chart;
use ocm_score_control_plane::pods::ready_pods;
use ocm_score_tests::support::eventually;
use serde_json::Value;

/// Patience for one convergence on a loaded 2-core machine (pods start, OCM syncs).
const WAIT: Duration = Duration::from_secs(300);
const CLUSTERS: [&str; 2] = ["cluster1", "cluster2"];
const KUSTOMIZATION: &str = "manifests/addon-template";

fn run(kubeconfig: &Path, args: &[&str]) -> String {
    kubectl(kubeconfig, args).unwrap_or_else(|e| panic!("{e}"))
}

/// A cluster's score object on the hub, whole, once it exists (a failed read is retried, never
/// taken for "none").
async fn score(hub: &kube::Client, cluster: &str) -> Option<Value> {
    serde_json::to_value(score_object(hub, cluster).await.ok()??).ok()
}

fn valid_until(score: &Value) -> Option<String> {
    score
        .pointer("/status/validUntil")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ocms_addon_manager_runs_the_agent_from_the_template_and_uninstall_leaves_nothing() {
    let cp = ControlPlane::builder()
        .clusters(CLUSTERS.len())
        .nodes(true)
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let hub = cp.hub_client().await.expect("hub client");
    let hub_kc = cp.hub_kubeconfig();
    let logs = || {
        cp.log_tails(
            &["hub-addon-manager", "cluster2-klusterlet", "cluster2-kubelet"],
            15,
        )
    };

    // 1. The install a user runs, as shipped: nothing edited, the image is the one the nodes hold.
    run(&hub_kc, &["apply", "--server-side", "-k", KUSTOMIZATION]);

    // 2. OCM renders each cluster's agent from the template; its work agent applies it, the
    //    kubelet runs it with the hub kubeconfig OCM mounted, and the score reaches the hub.
    let mut first_scores = Vec::new();
    for cluster in CLUSTERS {
        let managed = cp.cluster_client(cluster).await.expect("managed client");
        let pod = eventually(&format!("the agent pod Ready on {cluster}"), WAIT, logs, || {
            let managed = managed.clone();
            async move {
                // A failed list is retried.
                ready_pods(&managed, INSTALL_NAMESPACE, "")
                    .await
                    .ok()?
                    .into_iter()
                    .next()
            }
        })
        .await;
        let spec = pod.spec.clone().expect("spec");
        let container = &spec.containers[0];
        assert_eq!(container.image.as_deref(), Some(ocm_score_agent_contract::IMAGE));
        let args = container.args.clone().unwrap_or_default();
        assert!(
            args.contains(&format!("--cluster-name={cluster}")),
            "{cluster}: OCM wrote the cluster's name into the template: {args:?}"
        );
        assert!(
            args.contains(&"--hub-kubeconfig=/managed/hub-kubeconfig/kubeconfig".to_owned()),
            "{args:?}"
        );
        // A variable the AddOnDeploymentConfig leaves out reaches the agent as an empty value,
        // which it reads as the flag not given.
        assert!(args.contains(&"--validity=".to_owned()), "{args:?}");
        assert!(
            container
                .volume_mounts
                .iter()
                .flatten()
                .any(|m| m.mount_path == "/managed/hub-kubeconfig"),
            "{cluster}: OCM mounts the hub kubeconfig Secret"
        );
        let score = eventually(&format!("{cluster}'s score on the hub"), WAIT, logs, || {
            let hub = hub.clone();
            async move { score(&hub, cluster).await.filter(|s| valid_until(s).is_some()) }
        })
        .await;
        first_scores.push(score);
    }

    // No pod of ours on the hub: the release namespace holds none, and no Deployment either but
    // cluster1's agent (cluster1 is the hub's own cluster, its agent in the install namespace).
    let pods: Api<Pod> = Api::namespaced(hub.clone(), HUB_NAMESPACE);
    let hub_pods = pods
        .list(&ListParams::default())
        .await
        .expect("listing the hub's pods");
    assert!(hub_pods.items.is_empty(), "pods of ours on the hub");
    let deployments: Api<Deployment> = Api::all(hub.clone());
    let ours: Vec<String> = deployments
        .list(&ListParams::default())
        .await
        .expect("listing the hub's Deployments")
        .items
        .into_iter()
        .filter(|d| d.metadata.namespace.as_deref() != Some(INSTALL_NAMESPACE))
        .filter_map(|d| d.metadata.name)
        .filter(|n| n.contains("ocm-score") || n.contains(ADDON))
        .collect();
    assert!(ours.is_empty(), "Deployments of ours on the hub: {ours:?}");

    // 3. Each score is owned by its cluster's ManagedClusterAddOn (the agent's --owned-by-addon).
    for (cluster, score) in CLUSTERS.iter().zip(&first_scores) {
        let addons = dynamic(
            &hub,
            "addon.open-cluster-management.io",
            "v1alpha1",
            "ManagedClusterAddOn",
            Some(cluster),
        )
        .await
        .expect("the add-on API");
        let addon = addons.get(ADDON).await.expect("the cluster's add-on");
        let owners = score["metadata"]["ownerReferences"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(owners.len(), 1, "{cluster}: {owners:?}");
        assert_eq!(owners[0]["kind"], "ManagedClusterAddOn");
        assert_eq!(owners[0]["uid"].as_str(), addon.metadata.uid.as_deref());
    }

    // 4. Renewed about every 60 s (the shipped REFRESH_INTERVAL): two renewals in a row move
    //    validUntil by a refresh interval, give or take the 10 % jitter and a slow write.
    let first = valid_until(&first_scores[0]).expect("validUntil");
    expect_renewals_a_minute_apart(&hub, "cluster1", first, 2, logs).await;

    // 5. The agents read WorkloadShapes: a new shape's fits score appears on every cluster.
    let shape = r#"{"apiVersion": "tiering.ocm-score.io/v1alpha1", "kind": "WorkloadShape",
        "metadata": {"name": "small"}, "spec": {"requests": {"cpu": "100m", "memory": "64Mi"}}}"#;
    let shape_file = cp.dir().join("shape-small.json");
    std::fs::write(&shape_file, shape).expect("writing the shape");
    run(&hub_kc, &["apply", "-f", &shape_file.display().to_string()]);
    for cluster in CLUSTERS {
        eventually(&format!("{cluster}'s fits.small score"), WAIT, logs, || {
            let hub = hub.clone();
            async move {
                let score = score(&hub, cluster).await?;
                let scores = score.pointer("/status/scores")?.as_array()?.clone();
                scores.iter().any(|s| s["name"] == "fits.small").then_some(())
            }
        })
        .await;
    }

    // 6. What OCM's template registration grants: the hub ClusterRole bound in cluster1's
    //    namespace to every group of the add-on's registration, the add-on-wide group that every
    //    cluster's agent carries among them, so RBAC lets cluster2's agent write cluster1's score.
    //    (If that stops being true, OCM has narrowed it: update docs/install.md, "Install modes".)
    //    The chart's ValidatingAdmissionPolicy refuses that write; the agents' own writes pass it
    //    (every score above was written through it).
    let addons = dynamic(
        &hub,
        "addon.open-cluster-management.io",
        "v1alpha1",
        "ManagedClusterAddOn",
        Some("cluster2"),
    )
    .await
    .expect("the add-on API");
    let cluster2 = addons.get(ADDON).await.expect("cluster2's add-on");
    let subject = cluster2
        .data
        .pointer("/status/registrations/0/subject")
        .cloned()
        .expect("cluster2's registration subject");
    let mut as_cluster2 = vec![format!("--as={}", subject["user"].as_str().expect("user"))];
    for group in subject["groups"].as_array().into_iter().flatten() {
        as_cluster2.push(format!("--as-group={}", group.as_str().expect("group")));
    }
    let with_identity = |command: &[&str]| -> Vec<String> {
        command
            .iter()
            .map(|a| (*a).to_owned())
            .chain(as_cluster2.iter().cloned())
            .collect()
    };
    let can_i = with_identity(&[
        "auth",
        "can-i",
        "patch",
        "addonplacementscores.cluster.open-cluster-management.io",
        "--subresource=status",
        "-n",
        "cluster1",
    ]);
    let can_i: Vec<&str> = can_i.iter().map(String::as_str).collect();
    assert_eq!(
        run(&hub_kc, &can_i).trim(),
        "yes",
        "OCM's RBAC for cluster2's agent identity ({subject}) on cluster1's score"
    );
    // A patch of the object itself (kubectl reads a status subresource first, which the role does
    // not grant; the policy covers both).
    let write = with_identity(&[
        "patch",
        "addonplacementscores.cluster.open-cluster-management.io",
        "resource-usage-score",
        "-n",
        "cluster1",
        "--type=merge",
        "-p",
        r#"{"metadata":{"labels":{"written-by":"cluster2"}}}"#,
    ]);
    let write: Vec<&str> = write.iter().map(String::as_str).collect();
    match kubectl(&hub_kc, &write) {
        Ok(out) => panic!("cluster2's agent identity wrote cluster1's score: {out}"),
        Err(e) => {
            let e = e.to_string();
            assert!(
                e.contains("ocm-score-resource-usage-collect-own-cluster-scores")
                    && e.contains("agent of cluster cluster2 may write AddOnPlacementScores only in its own cluster namespace"),
                "refused, but not by the policy: {e}"
            );
        }
    }

    // 7. Uninstall: nothing of ours is left on the hub (the add-ons, works, OCM's RoleBindings and
    //    the scores go with the ClusterManagementAddOn) or on the managed clusters.
    let shape_arg = shape_file.display().to_string();
    run(&hub_kc, &["delete", "-f", &shape_arg]);
    run(
        &hub_kc,
        &["delete", "-k", KUSTOMIZATION, "--wait=true", "--timeout=240s"],
    );
    eventually("nothing of the add-on left on the hub", WAIT, logs, || {
        let cp = &cp;
        async move { leftovers(cp, &CLUSTERS).await.ok().filter(Vec::is_empty) }
    })
    .await;
    for cluster in CLUSTERS {
        let managed = cp.cluster_client(cluster).await.expect("managed client");
        eventually(&format!("nothing of ours left on {cluster}"), WAIT, logs, || {
            let managed = managed.clone();
            async move {
                let pods: Api<Pod> = Api::namespaced(managed.clone(), INSTALL_NAMESPACE);
                let accounts: Api<ServiceAccount> = Api::namespaced(managed.clone(), INSTALL_NAMESPACE);
                let roles: Api<ClusterRole> = Api::all(managed);
                let left = pods.list(&ListParams::default()).await.ok()?.items.is_empty()
                    && accounts.get_opt(&format!("{ADDON}-agent")).await.ok()?.is_none()
                    && roles
                        .get_opt(&format!("open-cluster-management-{ADDON}-agent"))
                        .await
                        .ok()?
                        .is_none();
                left.then_some(())
            }
        })
        .await;
    }

    // 8. The same install through Helm, as docs/install.md shows it: the agents run and publish
    //    again, and `helm uninstall` leaves nothing of the add-on.
    let helm = |args: &[&str]| chart::helm_on(&hub_kc, args).unwrap_or_else(|e| panic!("{e}"));
    helm(&[
        "upgrade",
        "--install",
        chart::RELEASE,
        chart::CHART,
        "--namespace",
        HUB_NAMESPACE,
        "--create-namespace",
        "--set",
        "install.mode=template",
        "--wait",
    ]);
    for cluster in CLUSTERS {
        eventually(
            &format!("{cluster}'s score after helm install"),
            WAIT,
            logs,
            || {
                let hub = hub.clone();
                async move { score(&hub, cluster).await.filter(|s| valid_until(s).is_some()) }
            },
        )
        .await;
    }
    helm(&[
        "uninstall",
        chart::RELEASE,
        "--namespace",
        HUB_NAMESPACE,
        "--wait",
    ]);
    run(
        &hub_kc,
        &[
            "delete",
            "namespace",
            HUB_NAMESPACE,
            "--wait=true",
            "--timeout=240s",
        ],
    );
    eventually(
        "nothing of the add-on left after helm uninstall",
        WAIT,
        logs,
        || {
            let cp = &cp;
            async move { leftovers(cp, &CLUSTERS).await.ok().filter(Vec::is_empty) }
        },
    )
    .await;
}
