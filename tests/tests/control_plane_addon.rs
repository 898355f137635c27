//! The add-on end to end on the real control plane: installed from `manifests/hub` with `kubectl`
//! (annotated `lifecycle: self`: the agents run as processes, see `self_lifecycle_overlay`),
//! our add-on manager running with exactly the identity those manifests give it, OCM's klusterlet
//! registering the add-on (CSR approved by us, signed by kube-controller-manager), OCM's work
//! agent deploying the agent, the agent run as its Deployment says with the certificate OCM issued,
//! its scores published, OCM's placement controller choosing by them as `simulate` predicts, a
//! quiet minute beside OCM's own addon-manager, and removal.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DynamicObject, ListParams};
use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::{
    ADDON, INSTALL_NAMESPACE, add_nodes, add_pod, addon_objects, agent_deployment, condition_true, decided,
    dynamic, hub_snapshot, install_and_start_manager, install_from_and_start_manager, kubectl,
    kubectl_binary, leftovers, manual_install_overlay, quiet_window, score, score_object, start_agent,
    wait_agent_certificate, workspace_binary,
};
use ocm_score_control_plane::process::Component;
use ocm_score_tests::support::{TempDir, eventually};
use serde_json::Value;

/// Patience for one convergence: generous, because a loaded 2-core machine runs two API servers,
/// etcd, OCM's controllers and two klusterlets beside the test.
const WAIT: Duration = Duration::from_secs(240);

/// [`eventually`] with this test's patience.
async fn wait_for<T, Fut>(what: &str, context: impl Fn() -> String, check: impl FnMut() -> Fut) -> T
where
    Fut: std::future::Future<Output = Option<T>>,
{
    eventually(what, WAIT, context, check).await
}

async fn api(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    dynamic(client, group, version, kind, ns)
        .await
        .expect("kind served")
}

fn run(kubeconfig: &Path, args: &[&str]) -> String {
    kubectl(kubeconfig, args).unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_from_manifests_the_addon_registers_deploys_publishes_and_places() {
    let cp = two_clusters().await;
    let hub = cp.hub_client().await.expect("hub client");
    let hub_kc = cp.hub_kubeconfig();
    let dir = TempDir::new("addon-real");
    let clusters = ["cluster1", "cluster2"];

    // 1. The install a user runs, keeping the install strategy with our manager (`lifecycle:
    //    self`: the agents run as processes here, and under OCM's lifecycle their works would wait
    //    for pods); our add-on manager as that Deployment's container, with its ServiceAccount's
    //    token and nothing more.
    let manager = install_and_start_manager(&cp, dir.path())
        .await
        .expect("the add-on manager starts");

    // 2. The install strategy (Placement all-clusters over `global`) gives both clusters the add-on.
    let mcas = api(
        &hub,
        "addon.open-cluster-management.io",
        "v1alpha1",
        "ManagedClusterAddOn",
        None,
    )
    .await;
    wait_for(
        "a ManagedClusterAddOn per cluster",
        || manager.tail(),
        || {
            let mcas = mcas.clone();
            async move {
                let list = mcas.list(&ListParams::default()).await.ok()?;
                let mut names: Vec<String> = list
                    .items
                    .iter()
                    .filter(|m| m.metadata.name.as_deref() == Some(ADDON))
                    .filter_map(|m| m.metadata.namespace.clone())
                    .collect();
                names.sort();
                (names == clusters).then_some(())
            }
        },
    )
    .await;

    // 3. OCM's registration agent asks for a certificate, we approve, kube-controller-manager
    //    signs, and the agent's hub kubeconfig lands in the install namespace of each cluster.
    for cluster in clusters {
        wait_agent_certificate(&cp, cluster, WAIT, || manager.tail()).await;
    }

    // 4. OCM's work agent applies our ManifestWork on each cluster.
    for cluster in clusters {
        let works = api(
            &hub,
            "work.open-cluster-management.io",
            "v1",
            "ManifestWork",
            Some(cluster),
        )
        .await;
        let work_name = format!("addon-{ADDON}-deploy-0");
        let context = || cp.log_tail(&format!("{cluster}-klusterlet"), 20);
        wait_for(
            &format!("{cluster}: {work_name} Applied and Available"),
            context,
            || {
                let works = works.clone();
                let name = work_name.clone();
                async move {
                    let w = works.get_opt(&name).await.ok().flatten()?;
                    let conditions = w.data.pointer("/status/conditions");
                    (condition_true(conditions, "Applied") && condition_true(conditions, "Available"))
                        .then_some(())
                }
            },
        )
        .await;
        let managed = cp.cluster_client(cluster).await.expect("managed client");
        assert!(
            agent_deployment(&managed)
                .await
                .expect("reading the agent Deployment")
                .is_some(),
            "{cluster}: the agent Deployment exists"
        );
    }

    // 5. Capacity to count, then each agent run as its Deployment says; scores published.
    for cluster in clusters {
        let managed = cp.cluster_client(cluster).await.expect("managed client");
        add_nodes(&managed, cluster, 2).await.expect("nodes");
    }
    let mut agents: BTreeMap<&str, Component> = BTreeMap::new();
    for cluster in clusters {
        agents.insert(
            cluster,
            start_agent(&cp, cluster, dir.path()).await.expect("agent starts"),
        );
    }
    for cluster in clusters {
        let agent = &agents[cluster];
        wait_for(
            &format!("{cluster}: resource-usage-score published"),
            || agent.tail(),
            || {
                let hub = hub.clone();
                async move { score(&hub, cluster, "cpuClusterAvailable").await }
            },
        )
        .await;
    }

    // The klusterlet's lease controller sees each agent's Lease: the add-on is Available.
    for cluster in clusters {
        let mcas = api(
            &hub,
            "addon.open-cluster-management.io",
            "v1alpha1",
            "ManagedClusterAddOn",
            Some(cluster),
        )
        .await;
        wait_for(
            &format!("{cluster}: ManagedClusterAddOn Available"),
            || agents[cluster].tail(),
            || {
                let mcas = mcas.clone();
                async move {
                    let m = mcas.get_opt(ADDON).await.ok().flatten()?;
                    condition_true(m.data.pointer("/status/conditions"), "Available").then_some(())
                }
            },
        )
        .await;
    }

    // With cluster1's certificate, cluster2's namespace is out of reach.
    let c1_kubeconfig = dir.path().join("agent-cluster1/hub-kubeconfig/kubeconfig");
    let can_i = |ns: &str| {
        let out = Command::new(kubectl_binary().expect("kubectl"))
            .arg("--kubeconfig")
            .arg(&c1_kubeconfig)
            .args(["auth", "can-i", "patch", "addonplacementscores/status", "-n", ns])
            .output()
            .expect("kubectl");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(can_i("cluster1"), "yes", "cluster1's agent writes its own score");
    assert_eq!(
        can_i("cluster2"),
        "no",
        "cluster1's agent may not write cluster2's score"
    );
    // WorkloadShapes (cluster-scoped): the agent's certificate reads them and writes none.
    let can_i_shapes = |verb: &str| {
        let out = Command::new(kubectl_binary().expect("kubectl"))
            .arg("--kubeconfig")
            .arg(&c1_kubeconfig)
            .args(["auth", "can-i", verb, "workloadshapes.tiering.ocm-score.io"])
            .output()
            .expect("kubectl");
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    assert_eq!(
        [
            can_i_shapes("list"),
            can_i_shapes("watch"),
            can_i_shapes("create")
        ],
        ["yes", "yes", "no"]
    );

    // A WorkloadShape applied with kubectl: each running agent publishes `fits.<shape>`. Two nodes
    // of 8 cpu each take 2 replicas of 3 cpu (the agent's own pending pod, 20m, does not change
    // that): 4 replicas, score 4 - 100.
    let shape_file = dir.path().join("shape.yaml");
    std::fs::write(
        &shape_file,
        "apiVersion: tiering.ocm-score.io/v1alpha1\nkind: WorkloadShape\nmetadata: {name: three-cpu}\n\
         spec: {requests: {cpu: \"3\"}}\n",
    )
    .expect("writing the shape");
    run(&hub_kc, &["apply", "-f", &shape_file.display().to_string()]);
    for cluster in clusters {
        let agent = &agents[cluster];
        let fits = wait_for(
            &format!("{cluster}: fits.three-cpu published"),
            || agent.tail(),
            || {
                let hub = hub.clone();
                async move { score(&hub, cluster, "fits.three-cpu").await }
            },
        )
        .await;
        assert_eq!(fits, -96, "{cluster}: 4 replicas of 3 cpu fit");
    }

    // 6. A user's Placement on those scores: OCM decides by them.
    run(&hub_kc, &["apply", "-k", "manifests/examples"]);
    let first = wait_for("OCM decides most-free-memory", String::new, || {
        let hub = hub.clone();
        async move {
            let d = decided(&hub, "ocm-score-examples", "most-free-memory").await;
            (d.len() == 1).then_some(d)
        }
    })
    .await;
    let chosen = first[0].clone();
    let other = if chosen == "cluster1" {
        "cluster2"
    } else {
        "cluster1"
    };

    // A consumer of the decision: OCM's work hub controller deploys the example workload's
    // ManifestWorkReplicaSet to the chosen cluster, where OCM's work agent applies it.
    run(&hub_kc, &["apply", "-k", "manifests/examples/workload"]);
    wait_for(
        &format!("the example workload runs on {chosen} only"),
        || cp.log_tail("hub-work-manager", 20),
        || {
            let cp = &cp;
            let chosen = chosen.clone();
            async move { (workload_placed(cp, &clusters).await == [chosen]).then_some(()) }
        },
    )
    .await;

    // 7. Load on the chosen cluster (each node 30 of 32 Gi requested): its memory score drops
    //    below the other's, its agent publishes, and OCM moves the decision.
    let loaded = cp.cluster_client(&chosen).await.expect("client");
    for node in 0..2 {
        add_pod(&loaded, &chosen, node, "100m", "30Gi")
            .await
            .expect("pod");
    }
    let (low, high) = wait_for(
        &format!("{chosen}'s memory score drops below {other}'s"),
        || agents[chosen.as_str()].tail(),
        || {
            let hub = hub.clone();
            let (chosen, other) = (chosen.clone(), other.to_owned());
            async move {
                let low = score(&hub, &chosen, "memClusterAvailable").await?;
                let high = score(&hub, &other, "memClusterAvailable").await?;
                (low < high).then_some((low, high))
            }
        },
    )
    .await;
    eprintln!("memClusterAvailable after load: {chosen} {low} < {other} {high}");
    wait_for(&format!("OCM moves most-free-memory to {other}"), String::new, || {
        let hub = hub.clone();
        async move { (decided(&hub, "ocm-score-examples", "most-free-memory").await == [other]).then_some(()) }
    })
    .await;
    wait_for(
        &format!("the example workload follows the decision to {other}"),
        || cp.log_tail("hub-work-manager", 20),
        || {
            let cp = &cp;
            async move { (workload_placed(cp, &clusters).await == [other]).then_some(()) }
        },
    )
    .await;

    // simulate, on a snapshot taken the way docs/simulate.md says, predicts every decision OCM made.
    let snapshot = hub_snapshot(&hub_kc).expect("snapshot");
    let snapshot_file = dir.path().join("snapshot.yaml");
    std::fs::write(&snapshot_file, &snapshot).expect("snapshot");
    let out = Command::new(workspace_binary("ocm-score-hub").expect("ocm-score-hub"))
        .args(["simulate", "-f"])
        .arg(&snapshot_file)
        .args(["-o", "json"])
        .output()
        .expect("simulate");
    assert!(
        out.status.success(),
        "simulate failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let simulated: Vec<Value> = serde_json::from_slice(&out.stdout).expect("simulate json");
    for (ns, placement) in [
        ("ocm-score-examples", "most-free-cpu"),
        ("ocm-score-examples", "most-free-memory"),
        ("ocm-score-examples", "cpu-steady"),
        ("ocm-score-examples", "gpu"),
        ("ocm-score", "all-clusters"),
    ] {
        let ocm = decided(&hub, ns, placement).await;
        let ours = simulated
            .iter()
            .find(|p| p["name"] == format!("{ns}/{placement}"))
            .unwrap_or_else(|| panic!("simulate reports {ns}/{placement}: {simulated:?}"));
        let mut predicted: Vec<String> = ours["decisions"]
            .as_array()
            .expect("decisions")
            .iter()
            .filter_map(|d| d.as_str().map(str::to_owned))
            .collect();
        predicted.sort();
        assert_eq!(
            predicted, ocm,
            "{ns}/{placement}: simulate predicts what OCM decided; simulate says {ours}"
        );
    }

    // 8. Steady state beside OCM's own addon-manager: over a quiet minute not a single write to the
    //    add-on's objects on the hub (ClusterManagementAddOn, add-ons, works, hub Roles and
    //    RoleBindings, cluster RBAC), and none goes. Scores are left out: renewing validUntil is
    //    their contract; so are the agents' Deployments on the managed clusters, whose status
    //    their clusters' controllers write (with no kubelet, a Deployment's progress deadline
    //    passes). (Under OCM's lifecycle the klusterlet rewrites the add-ons' status about once a
    //    minute; control_plane_rollout checks that no object has two writers there.)
    let quiet = quiet_window(&cp, &clusters, Duration::from_secs(65))
        .await
        .expect("the add-on's objects");
    let written: Vec<_> = quiet
        .writes
        .iter()
        .filter(|(what, _)| !what.contains("agent Deployment"))
        .collect();
    assert!(
        written.is_empty(),
        "written during a minute of steady state: {written:?}\n{}",
        manager.tail()
    );

    // 9. Removal: with a manual install strategy, deleting cluster2's add-on removes its work, the
    //    agent from cluster2, its hub RBAC and (once the agent is gone, as the kubelet would stop
    //    it) its score.
    run(
        &hub_kc,
        &[
            "patch",
            "clustermanagementaddon",
            ADDON,
            "--type=merge",
            "-p",
            r#"{"spec":{"installStrategy":{"type":"Manual","placements":null}}}"#,
        ],
    );
    run(
        &hub_kc,
        &[
            "delete",
            "managedclusteraddon",
            ADDON,
            "-n",
            "cluster2",
            "--timeout=90s",
        ],
    );
    let c2 = cp.cluster_client("cluster2").await.expect("client");
    wait_for(
        "the agent leaves cluster2",
        || cp.log_tail("cluster2-klusterlet", 20),
        || {
            let c2 = c2.clone();
            async move { matches!(agent_deployment(&c2).await, Ok(None)).then_some(()) }
        },
    )
    .await;
    if let Some(mut agent) = agents.remove("cluster2") {
        agent.terminate();
        agent.wait_or_kill(Duration::from_secs(10));
    }
    let works = api(
        &hub,
        "work.open-cluster-management.io",
        "v1",
        "ManifestWork",
        Some("cluster2"),
    )
    .await;
    let work_name = format!("addon-{ADDON}-deploy-0");
    wait_for(
        "cluster2's ManifestWork goes",
        || manager.tail(),
        || {
            let works = works.clone();
            let name = work_name.clone();
            async move { works.get_opt(&name).await.ok().flatten().is_none().then_some(()) }
        },
    )
    .await;
    wait_for(
        "cluster2's score and hub RBAC go",
        || manager.tail(),
        || {
            let cp = &cp;
            async move {
                // Only a read that succeeded can say they are gone.
                let objects = addon_objects(cp, &["cluster2"]).await.ok()?;
                objects
                    .iter()
                    .all(|(what, _)| !what.starts_with("cluster2:"))
                    .then_some(())
            }
        },
    )
    .await;

    // Uninstall, our manager still running: `kubectl delete -k` returns (nothing hangs on a
    // finalizer), and the garbage collector and OCM's work agent take the rest: nothing of ours is
    // left on the hub or the managed clusters.
    run(
        &hub_kc,
        &["delete", "-k", "manifests/examples/workload", "--timeout=120s"],
    );
    run(&hub_kc, &["delete", "-k", "manifests/hub", "--timeout=180s"]);
    wait_for(
        "nothing of the add-on is left",
        || manager.tail(),
        || {
            let cp = &cp;
            async move { leftovers(cp, &clusters).await.ok().filter(Vec::is_empty) }
        },
    )
    .await;
}

/// The clusters where OCM's work agent runs the example workload: each has the
/// ManifestWorkReplicaSet's ManifestWork in its namespace and the `hello` Deployment applied.
async fn workload_placed(cp: &ControlPlane, clusters: &[&str]) -> Vec<String> {
    let Ok(hub) = cp.hub_client().await else {
        return Vec::new();
    };
    let mut placed = Vec::new();
    for cluster in clusters {
        let Ok(works) = dynamic(
            &hub,
            "work.open-cluster-management.io",
            "v1",
            "ManifestWork",
            Some(cluster),
        )
        .await
        else {
            continue;
        };
        let work = works.get_opt("hello").await.ok().flatten();
        let Ok(managed) = cp.cluster_client(cluster).await else {
            continue;
        };
        let deployments: Api<Deployment> = Api::namespaced(managed, "hello");
        let deployed = deployments.get_opt("hello").await.ok().flatten();
        if work.is_some() && deployed.is_some() {
            placed.push((*cluster).to_owned());
        }
    }
    placed
}

/// A ManagedClusterAddOn as a user creates it by hand when the install strategy is Manual.
/// The config each hand-made add-on names, in its cluster's namespace.
const OWN_CONFIG: &str = "agent-config";
/// The refresh interval that config sets: the agent's flags show that the config was read.
const OWN_REFRESH: &str = "17s";

/// An add-on made by hand with its own AddOnDeploymentConfig, through `version` of the add-on API:
/// `v1alpha1`, or `v1beta1` as newer `clusteradm` writes it (the install namespace as an annotation;
/// OCM's conversion webhook turns one into the other).
fn managed_cluster_addon(cluster: &str, version: &str) -> String {
    let config = format!(
        "apiVersion: addon.open-cluster-management.io/v1alpha1\nkind: AddOnDeploymentConfig\n\
         metadata:\n  name: {OWN_CONFIG}\n  namespace: {cluster}\nspec:\n  agentInstallNamespace: {INSTALL_NAMESPACE}\n\
         \x20 customizedVariables:\n    - name: REFRESH_INTERVAL\n      value: \"{OWN_REFRESH}\"\n\
         \x20   - name: SOURCES\n      value: cluster\n"
    );
    let configs = format!(
        "  configs:\n    - group: addon.open-cluster-management.io\n      resource: addondeploymentconfigs\n\
         \x20     namespace: {cluster}\n      name: {OWN_CONFIG}\n"
    );
    let addon = match version {
        "v1alpha1" => format!(
            "apiVersion: addon.open-cluster-management.io/v1alpha1\nkind: ManagedClusterAddOn\n\
             metadata:\n  name: {ADDON}\n  namespace: {cluster}\nspec:\n  installNamespace: {INSTALL_NAMESPACE}\n{configs}"
        ),
        "v1beta1" => format!(
            "apiVersion: addon.open-cluster-management.io/v1beta1\nkind: ManagedClusterAddOn\n\
             metadata:\n  name: {ADDON}\n  namespace: {cluster}\n  annotations:\n\
             \x20   addon.open-cluster-management.io/v1alpha1-install-namespace: {INSTALL_NAMESPACE}\nspec:\n{configs}"
        ),
        other => panic!("no add-on API version {other}"),
    };
    format!("{config}---\n{addon}")
}

/// What of a ManagedClusterAddOn our manager and OCM decide, with the cluster's name made generic so
/// that two clusters' add-ons compare: the spec, the install namespace (v1alpha1 field or v1beta1
/// annotation), and the status's config references, registrations and supported configs.
fn addon_outcome(addon: &Value, cluster: &str) -> Value {
    let pick = |pointer: &str| addon.pointer(pointer).cloned().unwrap_or(Value::Null);
    let outcome = serde_json::json!({
        "spec": pick("/spec"),
        "installNamespaceAnnotation":
            pick("/metadata/annotations/addon.open-cluster-management.io~1v1alpha1-install-namespace"),
        "configReferences": pick("/status/configReferences"),
        "registrations": pick("/status/registrations"),
        "supportedConfigs": pick("/status/supportedConfigs"),
        "namespace": pick("/status/namespace"),
    });
    serde_json::from_str(&outcome.to_string().replace(cluster, "<cluster>")).expect("JSON")
}

/// Whether the agent's score has expired: `validUntil` is in the past.
async fn score_expired(hub: &kube::Client, cluster: &str) -> Option<String> {
    let object = score_object(hub, cluster).await.ok()??;
    let valid_until = object.data.pointer("/status/validUntil")?.as_str()?.to_owned();
    let at: jiff::Timestamp = valid_until.parse().ok()?;
    (at < jiff::Timestamp::now()).then_some(valid_until)
}

/// A control plane with `cluster1` and `cluster2` joined, its progress on stderr.
async fn two_clusters() -> ControlPlane {
    ControlPlane::builder()
        .clusters(2)
        .start_with_progress(&|l| eprintln!("{l}"))
        .await
        .unwrap_or_else(|e| panic!("the control plane did not start: {e}"))
}

/// The Manual install strategy, an agent that dies, a cluster that leaves, and an uninstall after
/// our manager is gone:
/// - add-ons created by hand get the agent, as with the Placements strategy, each with the config it
///   names; cluster1's is created through the v1alpha1 API, cluster2's through v1beta1 (OCM's
///   conversion webhook between): both come out the same, read through either version;
/// - a killed agent stops renewing its Lease: after the klusterlet's grace (5 × 60 s in OCM v1.2)
///   the add-on is `Available=False` (`ManagedClusterAddOnLeaseUpdateStopped`; `Unknown` is only
///   for a Lease that does not exist), and its score has expired by then;
/// - deleting a ManagedCluster completes (nothing of ours holds it) and takes our objects with it;
/// - with our manager stopped first, `kubectl delete -k` of the install returns and leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_install_dead_agent_detach_and_uninstall_without_our_manager() {
    let cp = two_clusters().await;
    let hub = cp.hub_client().await.expect("hub client");
    let hub_kc = cp.hub_kubeconfig();
    let dir = TempDir::new("addon-manual");
    let clusters = ["cluster1", "cluster2"];

    let overlay = manual_install_overlay(dir.path()).expect("overlay");
    let mut manager = install_from_and_start_manager(&cp, &overlay, dir.path())
        .await
        .expect("the add-on manager starts");
    for (cluster, version) in [("cluster1", "v1alpha1"), ("cluster2", "v1beta1")] {
        let file = dir.path().join(format!("mca-{cluster}.yaml"));
        std::fs::write(&file, managed_cluster_addon(cluster, version)).expect("writing the add-on");
        run(&hub_kc, &["apply", "-f", &file.display().to_string()]);
    }
    for cluster in clusters {
        let managed = cp.cluster_client(cluster).await.expect("managed client");
        wait_for(
            &format!("{cluster}: the agent Deployment, from an add-on made by hand"),
            || {
                format!(
                    "{}\n--- klusterlet:\n{}",
                    manager.tail(),
                    cp.log_tail(&format!("{cluster}-klusterlet"), 20)
                )
            },
            || {
                let managed = managed.clone();
                async move {
                    let deployment = agent_deployment(&managed).await.ok()??;
                    let args = deployment.spec?.template.spec?.containers.first()?.args.clone()?;
                    // Rendered from the add-on's own config, not the default.
                    args.iter()
                        .any(|a| a == &format!("--refresh-interval={OWN_REFRESH}"))
                        .then_some(())
                }
            },
        )
        .await;
        add_nodes(&managed, cluster, 1).await.expect("nodes");
    }
    let mut agents: BTreeMap<&str, Component> = BTreeMap::new();
    for cluster in clusters {
        agents.insert(
            cluster,
            start_agent(&cp, cluster, dir.path()).await.expect("agent starts"),
        );
    }
    let mcas = |cluster: &str| {
        let hub = hub.clone();
        let cluster = cluster.to_owned();
        async move {
            api(
                &hub,
                "addon.open-cluster-management.io",
                "v1alpha1",
                "ManagedClusterAddOn",
                Some(&cluster),
            )
            .await
        }
    };
    for cluster in clusters {
        let mcas = mcas(cluster).await;
        wait_for(
            &format!("{cluster}: scores published and the add-on Available"),
            || agents[cluster].tail(),
            || {
                let (hub, mcas) = (hub.clone(), mcas.clone());
                async move {
                    score(&hub, cluster, "cpuClusterAvailable").await?;
                    let m = mcas.get_opt(ADDON).await.ok().flatten()?;
                    condition_true(m.data.pointer("/status/conditions"), "Available").then_some(())
                }
            },
        )
        .await;
    }

    // Created through v1alpha1 or v1beta1, read through either: the same add-on, once both settled.
    for version in ["v1alpha1", "v1beta1"] {
        let outcome = |cluster: &'static str| {
            let hub = hub.clone();
            async move {
                let addons = api(
                    &hub,
                    "addon.open-cluster-management.io",
                    version,
                    "ManagedClusterAddOn",
                    Some(cluster),
                )
                .await;
                let addon = addons.get(ADDON).await.ok()?;
                Some(addon_outcome(&serde_json::to_value(addon).ok()?, cluster))
            }
        };
        let (first, second) = wait_for(
            &format!("the two add-ons alike through {version}"),
            || manager.tail(),
            || async {
                let (first, second) = (outcome("cluster1").await?, outcome("cluster2").await?);
                // Settled: the config applied on both.
                let applied = |o: &Value| {
                    o.pointer("/configReferences/0/lastAppliedConfig/specHash")
                        .is_some()
                };
                (first == second && applied(&first)).then_some((first, second))
            },
        )
        .await;
        assert_eq!(first, second, "through {version}");
        let desired = first
            .pointer("/configReferences/0/desiredConfig")
            .cloned()
            .unwrap_or_default();
        assert_eq!(desired["name"], OWN_CONFIG, "through {version}: {first:#}");
        assert_eq!(desired["namespace"], "<cluster>", "through {version}: {first:#}");
    }

    // cluster1's agent dies as a crashed pod would: no goodbye, its Lease just stops.
    let killed_at = std::time::Instant::now();
    if let Some(agent) = agents.get_mut("cluster1") {
        // No SIGTERM first: killed outright.
        agent.wait_or_kill(Duration::ZERO);
    }

    // Meanwhile cluster2 leaves the fleet. Its ManagedCluster goes (OCM's cleanup of the cluster
    // namespace finishes; nothing of ours holds it) and takes our objects there with it.
    run(
        &hub_kc,
        &["delete", "managedcluster", "cluster2", "--timeout=240s"],
    );
    wait_for(
        "nothing of ours left in cluster2's namespace",
        || cp.log_tail("hub-registration-controller", 20),
        || {
            let cp = &cp;
            async move {
                let left = leftovers(cp, &["cluster2"]).await.ok()?;
                // The hub-wide objects are still installed; only cluster2's part must be gone, except
                // the agent, which this test runs itself (its Deployment goes with the work).
                let left: Vec<_> = left.into_iter().filter(|l| l.starts_with("cluster2:")).collect();
                left.is_empty().then_some(())
            }
        },
    )
    .await;
    if let Some(mut agent) = agents.remove("cluster2") {
        agent.terminate();
        agent.wait_or_kill(Duration::from_secs(10));
    }

    // The klusterlet notices cluster1's silent agent after its grace; the score expired before.
    let cluster1 = mcas("cluster1").await;
    let reason = eventually(
        "cluster1's add-on no longer Available",
        Duration::from_secs(9 * 60),
        || cp.log_tail("cluster1-klusterlet", 20),
        || {
            let cluster1 = cluster1.clone();
            async move {
                let m = cluster1.get_opt(ADDON).await.ok().flatten()?;
                let available = m
                    .data
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)?
                    .iter()
                    .find(|c| c["type"] == "Available")?
                    .clone();
                (available["status"] == "False")
                    .then(|| available["reason"].as_str().unwrap_or_default().to_owned())
            }
        },
    )
    .await;
    eprintln!(
        "cluster1's add-on Available=False ({reason}) {:.0} s after its agent was killed",
        killed_at.elapsed().as_secs_f64()
    );
    assert_eq!(reason, "ManagedClusterAddOnLeaseUpdateStopped");
    assert!(
        killed_at.elapsed() >= Duration::from_secs(4 * 60),
        "OCM waits out its 5-minute lease grace before calling the add-on unavailable"
    );
    let expired = score_expired(&hub, "cluster1").await;
    assert!(
        expired.is_some(),
        "a dead agent's score has expired by the time OCM marks it unavailable"
    );

    // Our manager goes first; the uninstall must not wait for it.
    manager.terminate();
    manager.wait_or_kill(Duration::from_secs(10));
    run(
        &hub_kc,
        &["delete", "-k", &overlay.display().to_string(), "--timeout=180s"],
    );
    wait_for("nothing of the add-on is left", String::new, || {
        let cp = &cp;
        async move { leftovers(cp, &["cluster1"]).await.ok().filter(Vec::is_empty) }
    })
    .await;
}
