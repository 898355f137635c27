//! The Helm chart on the real control plane, with pods on real kubelets: the real API server
//! accepts everything the chart renders (server-side dry run, defaults and optional parts on); a
//! real `helm install` runs the add-on under `lifecycle: self`, and `helm upgrade` to the default
//! (OCM's addon-manager runs the install strategy) replaces nothing: no add-on, work, agent pod or
//! score; a cluster is disabled and enabled under both install strategies as OCM users do it (a label
//! and the Placement; `clusteradm addon enable/disable`'s ManagedClusterAddOn); `helm upgrade`
//! reaches the agents' Deployments; `helm uninstall` leaves
//! nothing of ours but the CRDs Helm never deletes, and the documented command removes those.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::{
    ADDON, HUB_NAMESPACE, INSTALL_NAMESPACE, agent_deployment, dynamic, kubectl, leftovers, score_object,
};
use ocm_score_control_plane::chart;
use ocm_score_control_plane::pods::{all_pods, ready_pods_read};
use ocm_score_tests::support::{TempDir, eventually};

/// Patience for one convergence on a loaded 2-core machine (pods start, OCM syncs).
const WAIT: Duration = Duration::from_secs(300);

fn run(kubeconfig: &Path, args: &[&str]) -> String {
    kubectl(kubeconfig, args).unwrap_or_else(|e| panic!("{e}"))
}

/// `helm <args>` against the hub.
fn helm(kubeconfig: &Path, args: &[&str]) -> String {
    chart::helm_on(kubeconfig, args).unwrap_or_else(|e| panic!("{e}"))
}

/// `helm upgrade` of the release, keeping its values but for `sets` (`--set` each), and waiting.
fn upgrade(kubeconfig: &Path, sets: &[&str]) {
    let mut args = vec![
        "upgrade",
        chart::RELEASE,
        chart::CHART,
        "--namespace",
        HUB_NAMESPACE,
        "--reuse-values",
        "--wait",
    ];
    for set in sets {
        args.extend(["--set", set]);
    }
    helm(kubeconfig, &args);
}

/// The agent's container arguments on a cluster, once its Deployment exists.
async fn agent_args(cp: &ControlPlane, cluster: &str) -> Option<Vec<String>> {
    let managed = cp.cluster_client(cluster).await.ok()?;
    let deployment = agent_deployment(&managed).await.ok()??;
    deployment.spec?.template.spec?.containers.first()?.args.clone()
}

/// Whether a cluster runs a Ready agent pod; a failed read is retried for 30 s, then an error,
/// never "no agent".
async fn agent_ready(cp: &ControlPlane, cluster: &str) -> Result<bool, String> {
    let managed = cp
        .cluster_client(cluster)
        .await
        .map_err(|e| format!("{cluster}'s client: {e}"))?;
    let pods = ready_pods_read(&managed, INSTALL_NAMESPACE, "")
        .await
        .map_err(|e| format!("listing {cluster}'s agent pods: {e}"))?;
    Ok(!pods.is_empty())
}

/// Whether a cluster has no agent at all: no Deployment and no pod left, both read successfully
/// (a failed read is "not known yet", never "gone").
async fn agent_gone(cp: &ControlPlane, cluster: &str) -> bool {
    let Ok(managed) = cp.cluster_client(cluster).await else {
        return false;
    };
    matches!(agent_deployment(&managed).await, Ok(None))
        && all_pods(&managed, INSTALL_NAMESPACE)
            .await
            .is_ok_and(|pods| pods.is_empty())
}

/// The ClusterManagementAddOn's `addon.open-cluster-management.io/lifecycle` annotation, empty when
/// it has none.
fn lifecycle_annotation(hub_kc: &Path) -> String {
    run(
        hub_kc,
        &[
            "get",
            "clustermanagementaddon",
            ADDON,
            "-o",
            "jsonpath={.metadata.annotations.addon\\.open-cluster-management\\.io/lifecycle}",
        ],
    )
    .trim()
    .to_owned()
}

/// The uid of every object of the add-on that an upgrade must keep, by what it is: each cluster's
/// ManagedClusterAddOn, agent ManifestWork, agent pods and score. Reads are retried until they all
/// succeed, and every object must exist (a failed or empty read is never an answer).
async fn addon_uids(cp: &ControlPlane) -> BTreeMap<String, String> {
    let hub = cp.hub_client().await.expect("hub client");
    let work = format!("addon-{ADDON}-deploy-0");
    eventually("the add-on's objects, each read", WAIT, String::new, || {
        let hub = hub.clone();
        let work = work.clone();
        async move {
            let mut uids = BTreeMap::new();
            for cluster in ["cluster1", "cluster2"] {
                for (kind, name, group, version) in [
                    (
                        "ManagedClusterAddOn",
                        ADDON,
                        "addon.open-cluster-management.io",
                        "v1alpha1",
                    ),
                    (
                        "ManifestWork",
                        work.as_str(),
                        "work.open-cluster-management.io",
                        "v1",
                    ),
                ] {
                    let api = dynamic(&hub, group, version, kind, Some(cluster)).await.ok()?;
                    let object = api.get_opt(name).await.ok()??;
                    uids.insert(format!("{cluster}: {kind}"), object.metadata.uid?);
                }
                let score = score_object(&hub, cluster).await.ok()??;
                uids.insert(format!("{cluster}: score"), score.metadata.uid?);
                let managed = cp.cluster_client(cluster).await.ok()?;
                let pods = all_pods(&managed, INSTALL_NAMESPACE).await.ok()?;
                if pods.is_empty() {
                    return None;
                }
                for pod in pods {
                    let name = pod.metadata.name.unwrap_or_default();
                    uids.insert(format!("{cluster}: pod {name}"), pod.metadata.uid?);
                }
            }
            Some(uids)
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_installs_upgrades_and_uninstalls_the_addon_on_real_kubelets() {
    let control_plane = ControlPlane::builder()
        .clusters(2)
        .nodes(true)
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // A reference, so that `async move` blocks copy it.
    let cp = &control_plane;
    let started = std::time::Instant::now();
    let step = |what: &str| eprintln!("[{:6.1} s] {what}", started.elapsed().as_secs_f64());
    let hub = cp.hub_client().await.expect("hub client");
    let hub_kc = cp.hub_kubeconfig();
    let logs = || {
        cp.log_tails(
            &["hub-addon-manager", "cluster1-kubelet", "cluster2-klusterlet"],
            15,
        )
    };

    step("server-side dry run");
    // 1. The real API server accepts every object the chart renders, with the defaults and with
    //    its optional parts on (server-side dry run: admission and schema validation, nothing
    //    stored). The namespace exists, as `helm install --create-namespace` makes it, and so do
    //    the Prometheus Operator's CRDs of the monitoring objects (from its pinned module).
    run(&hub_kc, &["create", "namespace", HUB_NAMESPACE]);
    for crd in chart::monitoring_crds().unwrap_or_else(|e| panic!("{e}")) {
        run(
            &hub_kc,
            &["apply", "--server-side", "-f", &crd.display().to_string()],
        );
    }
    run(
        &hub_kc,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=120s",
            "crd/podmonitors.monitoring.coreos.com",
            "crd/prometheusrules.monitoring.coreos.com",
        ],
    );
    let dir = TempDir::new("helm-dry-run");
    for (name, values) in [
        ("defaults", vec![]),
        (
            "optional parts on",
            vec![
                "thanosScorer.enabled=true",
                "thanosScorer.secretName=thanos-client",
                "explainServer.enabled=true",
                "explainServer.tls.secretName=explain-tls",
                "install.strategy=Manual",
                "agent.nodeSelector.pool=agents",
                "agent.tolerations[0].key=dedicated",
                "agent.tolerations[0].operator=Exists",
                "agent.registries[0].source=localhost",
                "agent.registries[0].mirror=registry.example",
                "monitoring.podMonitor.enabled=true",
                "monitoring.prometheusRule.enabled=true",
                "monitoring.dashboard.enabled=true",
            ],
        ),
    ] {
        let rendered = chart::template(&values, true).unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join(format!("{}.yaml", name.replace(' ', "-")));
        std::fs::write(&file, rendered).expect("writing the rendering");
        let file = file.display().to_string();
        let out = run(
            &hub_kc,
            &["apply", "--server-side", "--dry-run=server", "-f", &file],
        );
        assert!(
            out.contains("deployment.apps/ocm-score-addon-manager"),
            "{name}: {out}"
        );
        if name == "optional parts on" {
            for object in [
                "deployment.apps/ocm-score-explain-server",
                "service/ocm-score-explain-server",
                "clusterrole.rbac.authorization.k8s.io/ocm-score-explain-server",
            ] {
                assert!(out.contains(object), "{name}: no {object} in {out}");
            }
        }
    }

    step("helm install, lifecycle self");
    // 2. helm install as releases before OCM's lifecycle became the default ran (`lifecycle: self`,
    //    our manager running the install strategy): the Placements strategy puts the agent on every
    //    cluster.
    chart::install(
        &hub_kc,
        HUB_NAMESPACE,
        &["--wait", "--timeout", "5m", "--set", "install.lifecycle=self"],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(lifecycle_annotation(&hub_kc), "self");
    let managers = ready_pods_read(
        &hub,
        HUB_NAMESPACE,
        "app.kubernetes.io/name=ocm-score-addon-manager",
    )
    .await
    .expect("listing the add-on manager's pods");
    assert_eq!(
        managers.len(),
        2,
        "helm --wait returned before both managers were Ready"
    );
    for cluster in ["cluster1", "cluster2"] {
        eventually(
            &format!("the agent Ready on {cluster}"),
            WAIT,
            logs,
            || async move { agent_ready(cp, cluster).await.ok()?.then_some(()) },
        )
        .await;
        eventually(&format!("{cluster}'s score"), WAIT, logs, || {
            let hub = hub.clone();
            async move { score_object(&hub, cluster).await.ok().flatten() }
        })
        .await;
    }

    step("helm upgrade: OCM's lifecycle, the default");
    // 3. Upgrading to the default hands the install strategy to OCM's addon-manager (an empty value,
    //    as a release installed with the old default reuses it): OCM takes the add-ons over (its
    //    install progression completes) and nothing is deleted, created again or restarted: the
    //    add-ons, their works, the agent pods and the scores keep their uids.
    let before = addon_uids(cp).await;
    upgrade(&hub_kc, &["install.lifecycle="]);
    assert_eq!(lifecycle_annotation(&hub_kc), "", "the annotation is gone");
    eventually("OCM's install progression completed", WAIT, logs, || async {
        let message = run(
            &hub_kc,
            &[
                "get",
                "clustermanagementaddon",
                ADDON,
                "-o",
                "jsonpath={.status.installProgressions[0].conditions[?(@.type==\"Progressing\")].message}",
            ],
        );
        (message.trim() == "2/2 completed with no errors, 0 failed 0 timeout.").then_some(())
    })
    .await;
    // Long enough for a re-render of a work, or a recreated add-on, to reach a pod.
    tokio::time::sleep(Duration::from_secs(30)).await;
    let after = addon_uids(cp).await;
    assert_eq!(
        before,
        after,
        "the upgrade to OCM's lifecycle replaced something\n{}",
        logs()
    );

    step("opt-out label");
    // 4. Under Placements a cluster is left out by its label (the Placement excludes it): its
    //    ManagedClusterAddOn and agent go. Removing the label brings them back.
    let opt_out = "addons.ocm-score.io/resource-usage-collect";
    run(
        &hub_kc,
        &["label", "managedcluster", "cluster2", &format!("{opt_out}=false")],
    );
    eventually("cluster2's agent removed", WAIT, logs, || async {
        agent_gone(cp, "cluster2").await.then_some(())
    })
    .await;
    assert!(
        agent_ready(cp, "cluster1")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        "cluster1 keeps its agent"
    );
    run(
        &hub_kc,
        &["label", "managedcluster", "cluster2", &format!("{opt_out}-")],
    );
    eventually("cluster2's agent back", WAIT, logs, || async {
        agent_ready(cp, "cluster2").await.ok()?.then_some(())
    })
    .await;

    step("helm upgrade: agent values");
    // 5. helm upgrade: changed agent values reach every agent's Deployment. RENEW_EVERY works by
    //    itself on the shipped configuration (no SCORE_VALIDITY to conflict with), and the add-ons
    //    stay Configured.
    upgrade(
        &hub_kc,
        &[
            "agent.variables.REFRESH_INTERVAL=30s",
            "agent.variables.RENEW_EVERY=2",
        ],
    );
    for cluster in ["cluster1", "cluster2"] {
        eventually(
            &format!("{cluster}'s agent refreshing every 30s, renewing every 2nd"),
            WAIT,
            logs,
            || async move {
                let args = agent_args(cp, cluster).await?;
                let has = |flag: &str| args.iter().any(|a| a == flag);
                (has("--refresh-interval=30s") && has("--renew-every=2")).then_some(())
            },
        )
        .await;
        let configured = run(
            &hub_kc,
            &[
                "get",
                "managedclusteraddon",
                ADDON,
                "-n",
                cluster,
                "-o",
                "jsonpath={.status.conditions[?(@.type==\"Configured\")].status}",
            ],
        );
        assert_eq!(configured.trim(), "True", "{cluster}'s add-on Configured");
    }

    step("helm upgrade: Manual");
    // 6. helm upgrade to the Manual strategy: the add-ons that exist stay (OCM's Manual strategy
    //    deletes nothing). Disabling is deleting the ManagedClusterAddOn (`clusteradm addon
    //    disable`); enabling is creating it (`clusteradm addon enable`), and only then does the
    //    cluster get the agent again.
    upgrade(&hub_kc, &["install.strategy=Manual"]);
    run(
        &hub_kc,
        &[
            "delete",
            "managedclusteraddon",
            ADDON,
            "-n",
            "cluster1",
            "--wait=true",
        ],
    );
    eventually("cluster1's agent removed", WAIT, logs, || async {
        agent_gone(cp, "cluster1").await.then_some(())
    })
    .await;
    // Nothing brings it back by itself (under Placements the strategy would have).
    tokio::time::sleep(Duration::from_secs(15)).await;
    assert!(
        run(
            &hub_kc,
            &["get", "managedclusteraddon", "-n", "cluster1", "-o", "name"]
        )
        .trim()
        .is_empty(),
        "the Manual strategy recreated cluster1's add-on"
    );
    assert!(
        agent_ready(cp, "cluster2")
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        "cluster2 keeps its agent"
    );
    let enable = dir.path().join("enable.yaml");
    std::fs::write(
        &enable,
        format!(
            "apiVersion: addon.open-cluster-management.io/v1alpha1\nkind: ManagedClusterAddOn\n\
             metadata:\n  name: {ADDON}\n  namespace: cluster1\nspec:\n  installNamespace: {INSTALL_NAMESPACE}\n"
        ),
    )
    .expect("writing the add-on");
    run(&hub_kc, &["apply", "-f", &enable.display().to_string()]);
    eventually("cluster1's agent enabled by hand", WAIT, logs, || async {
        agent_ready(cp, "cluster1").await.ok()?.then_some(())
    })
    .await;

    step("helm uninstall");
    // 7. helm uninstall: nothing of ours is left but the CRDs (Helm never deletes a chart's
    //    `crds/`, so TieredPlacements survive a reinstall); the documented command removes them.
    helm(
        &hub_kc,
        &[
            "uninstall",
            chart::RELEASE,
            "--namespace",
            HUB_NAMESPACE,
            "--wait",
            "--timeout",
            "5m",
        ],
    );
    let clusters = ["cluster1", "cluster2"];
    for cluster in clusters {
        eventually(
            &format!("no agent left on {cluster}"),
            WAIT,
            logs,
            || async move { agent_gone(cp, cluster).await.then_some(()) },
        )
        .await;
    }
    let left = eventually("nothing of the add-on left on the hub", WAIT, logs, || async {
        let left = leftovers(cp, &clusters).await.ok()?;
        // The namespace was made by --create-namespace (and by us above): Helm leaves it.
        let left: Vec<String> = left
            .into_iter()
            .filter(|l| l != &format!("Namespace {HUB_NAMESPACE}"))
            .collect();
        left.is_empty().then_some(left)
    })
    .await;
    assert!(left.is_empty());
    let pods = all_pods(&hub, HUB_NAMESPACE)
        .await
        .expect("listing the hub's pods");
    assert!(pods.is_empty(), "pods left: {}", pods.len());
    let crds = run(&hub_kc, &["get", "crd", "-o", "name"]);
    let ours: Vec<&str> = crds.lines().filter(|l| l.contains("ocm-score.io")).collect();
    assert_eq!(ours.len(), 2, "{crds}");
    run(&hub_kc, &["delete", "-f", "charts/ocm-score/crds/"]);
    let crds = run(&hub_kc, &["get", "crd", "-o", "name"]);
    assert!(!crds.contains("ocm-score.io"), "{crds}");
    step("done");
}
