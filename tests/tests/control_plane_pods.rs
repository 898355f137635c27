//! The add-on as users run it: pods from our image on real kubelets. `kubectl apply -k
//! manifests/hub`, as shipped, runs the add-on manager (two replicas, one leading) and the tiering
//! controller as pods on the hub's node; OCM registers the add-on and its work agent applies our
//! agent's Deployment on each managed cluster, where the kubelet runs it with the hub kubeconfig
//! OCM's registration wrote; the agents' scores reach the hub and are renewed; OCM's placement
//! controller decides by them. The agent's namespace follows OCM's add-on convention (the
//! klusterlet operator's controller copies the pull secret into it) and Prometheus scrapes the
//! agents where their pods' scrape annotations point. The kubelet restarts a killed agent, and
//! uninstalling removes every pod of ours.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ListParams};
use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::{
    HUB_NAMESPACE, INSTALL_NAMESPACE, decided, expect_renewals_a_minute_apart, kubectl, score_valid_until,
};
use ocm_score_control_plane::ocm::OPERATOR_NAMESPACE;
use ocm_score_control_plane::pods::{is_ready, ready_pods, ready_pods_read, restarts};
use ocm_score_tests::support::eventually;
use ocm_score_tests::thanos_scorer::{Prometheus, require_prometheus};
use serde_json::Value;

/// Patience for one convergence on a loaded 2-core machine (pods start, images unpack, OCM syncs).
const WAIT: Duration = Duration::from_secs(300);

fn run(kubeconfig: &Path, args: &[&str]) -> String {
    kubectl(kubeconfig, args).unwrap_or_else(|e| panic!("{e}"))
}

/// The pull secret a hub admin gives the klusterlet operator, which copies it into add-on namespaces.
const PULL_SECRET: &str = "open-cluster-management-image-pull-credentials";
/// OCM's mark of an add-on agent namespace.
const ADDON_NAMESPACE_LABEL: &str = "addon.open-cluster-management.io/namespace";

/// A Prometheus configuration scraping each cluster's agent pods where their `prometheus.io/*`
/// annotations say: what the relabelling of an annotation-driven `kubernetes-pods` job makes of
/// them (keep `scrape: "true"`, the pod's IP with the `port` annotation, the `path` annotation).
/// Debian's Prometheus is built without Kubernetes service discovery, so the test reads the pods
/// and gives Prometheus their targets; the scrape itself is Prometheus's.
async fn annotation_scrape_config(cp: &ControlPlane, clusters: &[&str]) -> String {
    let mut config = "global:\n  scrape_interval: 2s\n  scrape_timeout: 1s\nscrape_configs:\n".to_owned();
    for cluster in clusters {
        let managed = cp.cluster_client(cluster).await.expect("managed client");
        let pods = ready_pods_read(&managed, INSTALL_NAMESPACE, "")
            .await
            .unwrap_or_else(|e| panic!("listing {cluster}'s agent pods: {e}"));
        for pod in pods {
            let annotation = |key: &str| -> String {
                pod.metadata
                    .annotations
                    .as_ref()
                    .and_then(|a| a.get(&format!("prometheus.io/{key}")))
                    .cloned()
                    .unwrap_or_else(|| panic!("{cluster}: the agent pod has no prometheus.io/{key}"))
            };
            assert_eq!(annotation("scrape"), "true", "{cluster}: prometheus.io/scrape");
            let ip = pod
                .status
                .as_ref()
                .and_then(|s| s.pod_ip.clone())
                .unwrap_or_else(|| panic!("{cluster}: a Ready agent pod without an IP"));
            config.push_str(&format!(
                "  - job_name: pods-{cluster}\n    metrics_path: '{path}'\n    static_configs:\n\
                 \x20     - targets: ['{ip}:{port}']\n        labels: {{cluster: {cluster}, namespace: {INSTALL_NAMESPACE}}}\n",
                path = annotation("path"),
                port = annotation("port"),
            ));
        }
    }
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_as_shipped_the_addon_runs_as_pods_on_real_kubelets() {
    require_prometheus();
    let cp = ControlPlane::builder()
        .clusters(2)
        .nodes(true)
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let hub = cp.hub_client().await.expect("hub client");
    let hub_kc = cp.hub_kubeconfig();
    let clusters = ["cluster1", "cluster2"];
    let logs = || {
        cp.log_tails(
            &[
                "cluster1-kubelet",
                "cluster2-kubelet",
                "hub-addon-manager",
                "cluster2-klusterlet",
            ],
            15,
        )
    };

    // Our agents' namespace on every managed cluster enforces the restricted Pod Security level,
    // as `manifests/hub` has the hub's `ocm-score` namespace do: our pods must be admitted there.
    for cluster in clusters {
        run(
            &cp.kubeconfig(cluster),
            &[
                "label",
                "--overwrite",
                "namespace",
                INSTALL_NAMESPACE,
                "pod-security.kubernetes.io/enforce=restricted",
            ],
        );
    }

    // The pull secret a hub admin gave each klusterlet operator (the registry is a made-up one: the
    // nodes hold our image and pull nothing).
    for cluster in clusters {
        let kc = cp.kubeconfig(cluster);
        run(&kc, &["create", "namespace", OPERATOR_NAMESPACE]);
        run(
            &kc,
            &[
                "create",
                "secret",
                "docker-registry",
                PULL_SECRET,
                "-n",
                OPERATOR_NAMESPACE,
                "--docker-server=registry.example.com",
                "--docker-username=ocm",
                "--docker-password=not-a-real-password",
            ],
        );
    }

    // 1. The install a user runs, as shipped: nothing edited, the image is the one the nodes hold.
    let started = Instant::now();
    run(&hub_kc, &["apply", "--server-side", "-k", "manifests/hub"]);
    let managers = eventually(
        "both add-on manager replicas Running and Ready on the hub's node",
        WAIT,
        logs,
        || {
            let hub = hub.clone();
            async move {
                let pods = ready_pods(
                    &hub,
                    HUB_NAMESPACE,
                    "app.kubernetes.io/name=ocm-score-addon-manager",
                )
                .await
                .ok()?;
                (pods.len() == 2).then_some(pods)
            }
        },
    )
    .await;
    for pod in &managers {
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(spec.node_name.as_deref(), Some("cluster1-node"));
        assert_eq!(
            spec.containers[0].image.as_deref(),
            Some(ocm_score_agent_contract::IMAGE)
        );
    }
    // One of them leads: the Lease names a pod of the Deployment.
    let lease = run(
        &hub_kc,
        &[
            "get",
            "lease",
            "-n",
            HUB_NAMESPACE,
            "ocm-score-addon-manager",
            "-o",
            "jsonpath={.spec.holderIdentity}",
        ],
    );
    assert!(
        managers
            .iter()
            .any(|p| p.metadata.name.as_deref() == Some(lease.trim())),
        "the Lease's holder {lease:?} is one of the manager pods"
    );
    eventually(
        "the tiering controller Ready on the hub's node",
        WAIT,
        logs,
        || {
            let hub = hub.clone();
            async move {
                // A failed list is retried.
                let pods = ready_pods(&hub, HUB_NAMESPACE, "app.kubernetes.io/name=ocm-score-tiering")
                    .await
                    .ok()?;
                (!pods.is_empty()).then_some(())
            }
        },
    )
    .await;

    // 2. OCM's work agent applies our agent's Deployment; the kubelet runs it, with the hub
    //    kubeconfig OCM's registration wrote, and the agent's scores reach the hub.
    for cluster in clusters {
        let managed = cp.cluster_client(cluster).await.expect("managed client");
        eventually(&format!("the agent pod Ready on {cluster}"), WAIT, logs, || {
            let managed = managed.clone();
            async move {
                ready_pods(&managed, INSTALL_NAMESPACE, "")
                    .await
                    .is_ok_and(|p| !p.is_empty())
                    .then_some(())
            }
        })
        .await;
        eventually(&format!("{cluster}'s score on the hub"), WAIT, logs, || {
            let hub = hub.clone();
            async move { score_valid_until(&hub, cluster).await }
        })
        .await;
    }
    eprintln!(
        "from `kubectl apply -k manifests/hub` to every cluster's first score: {:.1} s",
        started.elapsed().as_secs_f64()
    );

    // 2b. OCM's conventions for an add-on agent: its namespace carries OCM's add-on label, so the
    //     klusterlet operator's controller (OCM's own code, run as the operator runs it) copies the
    //     admin's pull secret into it, and the agent pod pulls with that secret; Prometheus scrapes
    //     every agent where its pod's scrape annotations point.
    for cluster in clusters {
        let kc = cp.kubeconfig(cluster);
        let label = run(
            &kc,
            &[
                "get",
                "namespace",
                INSTALL_NAMESPACE,
                "-o",
                &format!(
                    "jsonpath={{.metadata.labels.{}}}",
                    ADDON_NAMESPACE_LABEL.replace('.', "\\.")
                ),
            ],
        );
        assert_eq!(
            label.trim(),
            "true",
            "{cluster}: {INSTALL_NAMESPACE}'s {ADDON_NAMESPACE_LABEL} label"
        );
        let managed = cp.cluster_client(cluster).await.expect("managed client");
        let source = Api::<Secret>::namespaced(managed.clone(), OPERATOR_NAMESPACE)
            .get(PULL_SECRET)
            .await
            .unwrap_or_else(|e| panic!("{cluster}: reading {OPERATOR_NAMESPACE}/{PULL_SECRET}: {e}"));
        eventually(
            &format!("{cluster}: OCM copies the pull secret into {INSTALL_NAMESPACE}"),
            WAIT,
            || cp.log_tail(&format!("{cluster}-addon-namespaces"), 20),
            || {
                let managed = managed.clone();
                let data = source.data.clone();
                async move {
                    let copy = Api::<Secret>::namespaced(managed, INSTALL_NAMESPACE)
                        .get_opt(PULL_SECRET)
                        .await
                        .ok()??;
                    (copy.data == data).then_some(())
                }
            },
        )
        .await;
        let agent = ready_pods_read(&managed, INSTALL_NAMESPACE, "")
            .await
            .expect("listing the agent pods")
            .remove(0);
        let pull_secrets: Vec<String> = agent
            .spec
            .and_then(|s| s.image_pull_secrets)
            .into_iter()
            .flatten()
            .map(|r| r.name)
            .collect();
        assert_eq!(
            pull_secrets,
            [PULL_SECRET],
            "{cluster}: the agent pod's imagePullSecrets"
        );
    }
    let prometheus = Prometheus::start_with_config(&annotation_scrape_config(&cp, &clusters).await).await;
    let scraped = eventually(
        "Prometheus scrapes both agents where their annotations say",
        WAIT,
        || prometheus.log(),
        || {
            let prometheus = &prometheus;
            async move {
                let up = prometheus.query("up == 1").await.ok()?;
                let nodes = prometheus.query("ocm_score_agent_eligible_nodes").await.ok()?;
                let clusters_of = |series: &[Value]| -> Vec<String> {
                    let mut names: Vec<String> = series
                        .iter()
                        .filter_map(|s| s.pointer("/metric/cluster")?.as_str().map(str::to_owned))
                        .collect();
                    names.sort();
                    names
                };
                (clusters_of(&up) == clusters && clusters_of(&nodes) == clusters).then_some(up)
            }
        },
    )
    .await;
    for series in &scraped {
        assert_eq!(
            series.pointer("/metric/namespace"),
            Some(&Value::from(INSTALL_NAMESPACE)),
            "{series}"
        );
    }
    drop(prometheus);

    // 3. Renewed at every 60 s refresh, as shipped: three renewals, each 45-80 s after the one
    //    before (the refresh spreads ±10 %, and the agent's write takes a moment). The gaps are the
    //    differences of the validUntil the agent wrote (each is its write time plus the same
    //    validity), not of when this test happened to poll.
    let first = score_valid_until(&hub, "cluster2").await.expect("validUntil");
    expect_renewals_a_minute_apart(&hub, "cluster2", first, 3, logs).await;

    // 4. OCM's placement controller decides by the agents' scores.
    run(&hub_kc, &["apply", "-k", "manifests/examples"]);
    eventually("OCM decides placement-most-free-cpu", WAIT, logs, || {
        let hub = hub.clone();
        async move {
            let chosen = decided(&hub, "ocm-score-examples", "most-free-cpu").await;
            (!chosen.is_empty()).then_some(chosen)
        }
    })
    .await;

    // 5. A killed agent container is restarted by its kubelet.
    let managed = cp.cluster_client("cluster2").await.expect("managed client");
    let agent = ready_pods_read(&managed, INSTALL_NAMESPACE, "")
        .await
        .expect("listing the agent pods")
        .remove(0);
    let before = restarts(&agent);
    let container_id = agent
        .status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs[0].container_id.clone())
        .expect("container id");
    let node = cp
        .nodes()
        .iter()
        .find(|n| n.cluster == "cluster2")
        .expect("cluster2's node");
    // Read before the kill: a validUntil past it was written by the agent that came back.
    let before_kill = score_valid_until(&hub, "cluster2").await.expect("validUntil");
    node.ctr(&[
        "tasks",
        "kill",
        "--signal",
        "SIGKILL",
        container_id.trim_start_matches("containerd://"),
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    let name = agent.metadata.name.clone().expect("name");
    eventually("the kubelet restarts the killed agent", WAIT, logs, || {
        let managed = managed.clone();
        let name = name.clone();
        async move {
            let pods: Api<Pod> = Api::namespaced(managed, INSTALL_NAMESPACE);
            let pod = pods.get_opt(&name).await.ok().flatten()?;
            (restarts(&pod) > before && is_ready(&pod)).then_some(())
        }
    })
    .await;
    // And the restarted agent publishes again: validUntil moves on past what it was at the kill.
    eventually(
        "the restarted agent renews its score",
        Duration::from_secs(100),
        logs,
        || {
            let hub = hub.clone();
            let before_kill = before_kill.clone();
            async move {
                score_valid_until(&hub, "cluster2")
                    .await
                    .filter(|v| *v > before_kill)
            }
        },
    )
    .await;

    // 6. Uninstalling removes every pod of ours, on the hub and on the managed clusters.
    run(
        &hub_kc,
        &["delete", "-k", "manifests/examples", "--ignore-not-found"],
    );
    run(
        &hub_kc,
        &["delete", "-k", "manifests/hub", "--wait=true", "--timeout=240s"],
    );
    for cluster in clusters {
        let managed = cp.cluster_client(cluster).await.expect("managed client");
        eventually(&format!("no agent pod left on {cluster}"), WAIT, logs, || {
            let managed = managed.clone();
            async move {
                let pods: Api<Pod> = Api::namespaced(managed, INSTALL_NAMESPACE);
                let left = pods.list(&ListParams::default()).await.ok()?.items;
                left.is_empty().then_some(())
            }
        })
        .await;
    }
}
