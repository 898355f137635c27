//! The Thanos scorer as shipped, as pods: `helm upgrade --install` of `charts/ocm-score` with only
//! the scorer on runs its two replicas from our image on the real hub's node, under the restricted
//! Pod Security level and the chart's RBAC; one holds the Lease, and the leader scores the hub's
//! ManagedClusters from a real Thanos Querier on the host (over the Sidecars of real Prometheus
//! servers, `thanos_scorer::fleet`), renewing `validUntil`. A config change through `helm upgrade`
//! rolls the pods and the new score appears; `helm uninstall` removes them. `kubectl apply -k
//! manifests/thanos-scorer` (its config edited) runs the scorer again.

use ocm_score_tests::thanos_scorer;

use std::net::IpAddr;
use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::{HUB_NAMESPACE, kubectl, score_object_named};
use ocm_score_control_plane::chart;
use ocm_score_control_plane::node::HOST_ADDRESS;
use ocm_score_control_plane::pods::{all_pods, ready_pods, ready_pods_read};
use ocm_score_tests::support::{TempDir, eventually};
use thanos_scorer::fleet::ThanosFleet;
use thanos_scorer::{FLEET_SCORES, FREE_CPU, MEM_FREE, REQUEST_RATE, require_prometheus};

/// Patience for one convergence on a loaded 2-core machine (pods start, a rollout, a round).
const WAIT: Duration = Duration::from_secs(300);
/// The scorer's Deployment, ServiceAccount and Lease.
const NAME: &str = "ocm-score-thanos-scorer";
const SELECTOR: &str = "app.kubernetes.io/name=ocm-score-thanos-scorer";
/// The AddOnPlacementScore the scorer writes (its default name).
const SCORE_OBJECT: &str = "thanos-score";
/// The ManagedClusters the test creates for the fleet data's `cluster` label: those of
/// [`FLEET_SCORES`] and [`UNSCORED`]. (`ghost` is in the data but no ManagedCluster.)
const CLUSTERS: [&str; 5] = ["a", "b", "c", "d", UNSCORED];
/// A ManagedCluster whose CPU is NaN in the data and has no other series: it gets no score.
const UNSCORED: &str = "e";

fn run(kubeconfig: &Path, args: &[&str]) -> String {
    kubectl(kubeconfig, args).unwrap_or_else(|e| panic!("{e}"))
}

/// `helm <args>` against the hub.
fn helm(kubeconfig: &Path, args: &[&str]) -> String {
    chart::helm_on(kubeconfig, args).unwrap_or_else(|e| panic!("{e}"))
}

/// The scorer's config file: a round every 5 s against `url`; `memFree` only when asked.
fn scorer_config(url: &str, mem_free: bool) -> String {
    let mut config = format!(
        "# The test's Thanos Querier, on the host's address on the nodes' bridge.
query:
  url: {url}
  timeout: 5s
clusterLabel: cluster
clusterMapping: identity
interval: 5s
validity: 30s
scores:
  - name: cpuFree
    query: '{FREE_CPU}'
  - name: requestRate
    query: '{REQUEST_RATE}'
    direction: lowerIsBetter
"
    );
    if mem_free {
        config.push_str(&format!(
            "  - name: memFree\n    query: '{MEM_FREE}'\n    normalization: fixed\n    min: 0\n    max: 1\n"
        ));
    }
    config
}

/// `thanos-score` of a cluster: its scores by name (sorted) and `validUntil`, once it has a status.
/// For positive waits: `None` also while the hub does not answer, and the wait retries.
async fn published(hub: &kube::Client, cluster: &str) -> Option<(Vec<(String, i64)>, Timestamp)> {
    let object = score_object_named(hub, cluster, SCORE_OBJECT).await.ok()??;
    let status = object.data.get("status")?;
    let mut scores: Vec<(String, i64)> = status["scores"]
        .as_array()?
        .iter()
        .filter_map(|s| Some((s["name"].as_str()?.to_owned(), s["value"].as_i64()?)))
        .collect();
    scores.sort();
    let valid_until = status["validUntil"].as_str()?.parse().ok()?;
    Some((scores, valid_until))
}

/// The expected scores of a cluster (sorted), of the named scores only.
fn expected(cluster: &str, names: &[&str]) -> Vec<(String, i64)> {
    let (_, scores) = FLEET_SCORES
        .iter()
        .find(|(c, _)| *c == cluster)
        .unwrap_or_else(|| panic!("no expected scores for {cluster}"));
    let mut scores: Vec<(String, i64)> = scores
        .iter()
        .filter(|(name, _)| names.contains(name))
        .map(|(name, value)| ((*name).to_owned(), i64::from(*value)))
        .collect();
    scores.sort();
    scores
}

/// Waits until every cluster with expected scores has exactly `names` of them, valid now.
async fn wait_scores(hub: &kube::Client, names: &[&str], logs: &dyn Fn() -> String) -> Vec<Timestamp> {
    let mut valid_until = Vec::new();
    for (cluster, _) in FLEET_SCORES {
        let want = expected(cluster, names);
        let what = format!("{cluster}'s {SCORE_OBJECT} to be {want:?}, valid now");
        let until = eventually(&what, WAIT, logs, || {
            let (hub, want) = (hub.clone(), want.clone());
            async move {
                let (scores, until) = published(&hub, cluster).await?;
                (scores == want && until > Timestamp::now()).then_some(until)
            }
        })
        .await;
        valid_until.push(until);
    }
    valid_until
}

/// Names of the scorer's pods that are Running and Ready, sorted; `None` when the list failed
/// (the caller's wait retries it).
async fn ready_scorers(hub: &kube::Client) -> Option<Vec<String>> {
    let mut names: Vec<String> = ready_pods(hub, HUB_NAMESPACE, SELECTOR)
        .await
        .ok()?
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    names.sort();
    Some(names)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[cfg_attr(
    skip_prometheus,
    ignore = "OCM_SCORE_SKIP_PROMETHEUS=1: needs a real Prometheus"
)]
async fn helm_runs_the_thanos_scorer_as_pods_scoring_from_a_real_thanos() {
    require_prometheus();
    // The hub alone is enough: the scorer runs on the hub and scores ManagedCluster objects.
    let cp = ControlPlane::builder()
        .clusters(1)
        .nodes(true)
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let hub = cp.hub_client().await.expect("hub client");
    let hub_kc = cp.hub_kubeconfig();

    // Thanos, with its querier on the bridge where pods reach the host. The fleet data spans ten
    // minutes either side of t0: a t0 five minutes ahead leaves a quarter of an hour of it.
    let t0 = Timestamp::now().as_second() + 300;
    let fleet = ThanosFleet::start_on(t0, IpAddr::V4(HOST_ADDRESS)).await;
    let logs = || {
        let get = |args: &[&str]| kubectl(&hub_kc, args).unwrap_or_else(|e| e.to_string());
        let querier = fleet.querier.log();
        let querier: Vec<&str> = querier.lines().rev().take(10).collect();
        format!(
            "--- pods\n{}\n--- scorer logs\n{}\n--- events\n{}\n--- cluster1-kubelet\n{}\n--- querier\n{}",
            get(&["get", "pods", "-n", HUB_NAMESPACE, "-o", "wide"]),
            get(&[
                "logs",
                "-n",
                HUB_NAMESPACE,
                "-l",
                SELECTOR,
                "--prefix",
                "--tail=20",
            ]),
            get(&["get", "events", "-n", HUB_NAMESPACE, "--sort-by=.lastTimestamp",]),
            cp.log_tail("cluster1-kubelet", 10),
            querier.into_iter().rev().collect::<Vec<_>>().join("\n"),
        )
    };

    // The fleet data's clusters as ManagedClusters (no agent behind them: the scorer reads Thanos,
    // not the clusters).
    let dir = TempDir::new("thanos-scorer-pods");
    let clusters: String = CLUSTERS
        .iter()
        .map(|c| {
            format!(
                "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {c}\n---\n\
                 apiVersion: cluster.open-cluster-management.io/v1\nkind: ManagedCluster\n\
                 metadata:\n  name: {c}\nspec:\n  hubAcceptsClient: true\n---\n"
            )
        })
        .collect();
    let clusters_file = dir.path().join("clusters.yaml");
    std::fs::write(&clusters_file, clusters).expect("writing the ManagedClusters");
    run(&hub_kc, &["apply", "-f", &clusters_file.display().to_string()]);

    // The scorer's namespace enforces the restricted Pod Security level: its pods must be admitted.
    run(&hub_kc, &["create", "namespace", HUB_NAMESPACE]);
    run(
        &hub_kc,
        &[
            "label",
            "namespace",
            HUB_NAMESPACE,
            "pod-security.kubernetes.io/enforce=restricted",
        ],
    );

    // 1. helm install, the scorer alone, with its config pointing at the querier.
    let install = |config: &str| {
        let file = dir.path().join("config.yaml");
        std::fs::write(&file, config).expect("writing the scorer config");
        let config_value = format!("thanosScorer.config={}", file.display());
        chart::install(
            &hub_kc,
            HUB_NAMESPACE,
            &[
                "--set",
                "addonManager.enabled=false",
                "--set",
                "tiering.enabled=false",
                "--set",
                "thanosScorer.enabled=true",
                "--set-file",
                &config_value,
            ],
        )
        .unwrap_or_else(|e| panic!("{e}"));
    };
    let started = std::time::Instant::now();
    install(&scorer_config(&fleet.url(), false));
    let pods = eventually("both scorer replicas Ready on the hub's node", WAIT, logs, || {
        let hub = hub.clone();
        async move {
            let pods = ready_scorers(&hub).await?;
            (pods.len() == 2).then_some(pods)
        }
    })
    .await;
    eprintln!("scorer pods Ready {:.0?} after helm install", started.elapsed());
    // Our image as the nodes hold it (the chart's default), on the hub's own node.
    let scorer_pods = ready_pods_read(&hub, HUB_NAMESPACE, SELECTOR)
        .await
        .expect("listing the scorer pods");
    for pod in scorer_pods {
        let spec = pod.spec.as_ref().expect("a pod has a spec");
        assert_eq!(spec.node_name.as_deref(), Some("cluster1-node"));
        assert_eq!(
            spec.containers[0].image.as_deref(),
            Some(ocm_score_agent_contract::IMAGE)
        );
    }
    let holder = || {
        kubectl(
            &hub_kc,
            &[
                "get",
                "lease",
                "-n",
                HUB_NAMESPACE,
                NAME,
                "-o",
                "jsonpath={.spec.holderIdentity}",
            ],
        )
        .map(|h| h.trim().to_owned())
        .unwrap_or_default()
    };
    let leader = eventually("a scorer pod holding the Lease", WAIT, logs, || {
        let holder = holder();
        let pods = &pods;
        async move { pods.contains(&holder).then_some(holder) }
    })
    .await;
    eprintln!("{leader} leads");

    // 2. The leader scores every ManagedCluster in the data from Thanos, and renews validUntil.
    let first = wait_scores(&hub, &["cpuFree", "requestRate"], &logs).await;
    eprintln!("scores published {:.0?} after helm install", started.elapsed());
    for (i, (cluster, _)) in FLEET_SCORES.iter().enumerate() {
        let what = format!("{cluster}'s validUntil renewed past {}", first[i]);
        eventually(&what, WAIT, logs, || {
            let (hub, before) = (hub.clone(), first[i]);
            async move {
                let (_, until) = published(&hub, cluster).await?;
                (until > before).then_some(())
            }
        })
        .await;
    }
    // An absence: read so that a failed read fails the test instead of passing as "no score".
    let unscored = score_object_named(&hub, UNSCORED, SCORE_OBJECT)
        .await
        .unwrap_or_else(|e| panic!("reading {UNSCORED}'s score: {e}"));
    assert!(
        unscored.as_ref().and_then(|o| o.data.get("status")).is_none(),
        "{UNSCORED} has no usable series, so no score: {unscored:?}\n{}",
        logs()
    );

    // 3. A config change through helm upgrade rolls the pods (the checksum annotation) and the new
    //    score appears.
    let checksum = || {
        run(
            &hub_kc,
            &[
                "get",
                "deployment",
                "-n",
                HUB_NAMESPACE,
                NAME,
                "-o",
                "jsonpath={.spec.template.metadata.annotations.checksum/config}",
            ],
        )
    };
    let old_checksum = checksum();
    install(&scorer_config(&fleet.url(), true));
    let new_checksum = checksum();
    assert_ne!(old_checksum, new_checksum, "the config's checksum changed");
    let rolled = eventually("two new scorer pods Ready, the old ones gone", WAIT, logs, || {
        let (hub, old) = (hub.clone(), &pods);
        async move {
            let now = ready_scorers(&hub).await?;
            // A failed list is retried.
            let all = all_pods(&hub, HUB_NAMESPACE).await.ok()?;
            let new = now.len() == 2 && now.iter().all(|p| !old.contains(p));
            (new && all.len() == 2).then_some(now)
        }
    })
    .await;
    wait_scores(&hub, &["cpuFree", "memFree", "requestRate"], &logs).await;
    let leader = holder();
    assert!(
        rolled.contains(&leader),
        "the Lease is held by {leader}, not a new pod {rolled:?}"
    );
    eprintln!(
        "rolled to {rolled:?} with memFree published {:.0?} after helm install",
        started.elapsed()
    );

    // 4. helm uninstall removes the pods.
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
    eventually("no scorer pod left", WAIT, logs, || {
        let hub = hub.clone();
        async move { all_pods(&hub, HUB_NAMESPACE).await.ok()?.is_empty().then_some(()) }
    })
    .await;
    let left = run(
        &hub_kc,
        &[
            "get",
            "deployment,serviceaccount,role,rolebinding,configmap",
            "-n",
            HUB_NAMESPACE,
            "-l",
            "app.kubernetes.io/part-of=ocm-score",
            "-o",
            "name",
        ],
    );
    assert!(left.trim().is_empty(), "left after helm uninstall: {left}");
    let cluster_wide = run(&hub_kc, &["get", "clusterrole,clusterrolebinding", "-o", "name"]);
    assert!(
        !cluster_wide.contains(NAME),
        "cluster-wide RBAC left after helm uninstall: {cluster_wide}"
    );

    // 5. The kustomize install, `manifests/thanos-scorer` with its config edited (here by an
    //    overlay's patch): a scorer runs again and renews the scores nobody renewed since.
    let (_, frozen) = published(&hub, "a")
        .await
        .unwrap_or_else(|| panic!("a's score outlives the scorer\n{}", logs()));
    let overlay = kustomize_overlay(dir.path(), &scorer_config(&fleet.url(), true));
    let overlay = overlay.display().to_string();
    run(&hub_kc, &["apply", "-k", &overlay]);
    eventually("both replicas of the kustomize install Ready", WAIT, logs, || {
        let hub = hub.clone();
        async move {
            ready_scorers(&hub)
                .await
                .is_some_and(|p| p.len() == 2)
                .then_some(())
        }
    })
    .await;
    eventually(
        "a's validUntil renewed by the kustomize install",
        WAIT,
        logs,
        || {
            let hub = hub.clone();
            async move {
                let (_, until) = published(&hub, "a").await?;
                (until > frozen).then_some(())
            }
        },
    )
    .await;
    wait_scores(&hub, &["cpuFree", "memFree", "requestRate"], &logs).await;
    run(&hub_kc, &["delete", "-k", &overlay]);
    eventually("no pod left after kubectl delete -k", WAIT, logs, || {
        let hub = hub.clone();
        async move { all_pods(&hub, HUB_NAMESPACE).await.ok()?.is_empty().then_some(()) }
    })
    .await;
    eprintln!("done {:.0?} after helm install", started.elapsed());
}

/// A kustomization in `dir` over `manifests/thanos-scorer` as shipped, with the ConfigMap's file
/// replaced by `config` (what a user does by editing thanos-scorer-config.yaml). Kustomize takes
/// no absolute path to a resource, so the manifests are named relative to `dir`.
fn kustomize_overlay(dir: &Path, config: &str) -> std::path::PathBuf {
    let overlay = dir.join("kustomize");
    std::fs::create_dir_all(&overlay).expect("creating the overlay");
    let manifests = ocm_score_control_plane::addon::workspace_dir().join("manifests/thanos-scorer");
    let up = "../".repeat(overlay.components().count() - 1);
    let manifests = format!("{up}{}", manifests.display().to_string().trim_start_matches('/'));
    let kustomization = format!(
        "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - {manifests}\n\
         patches:\n  - path: config.yaml\n"
    );
    std::fs::write(overlay.join("kustomization.yaml"), kustomization).expect("writing the kustomization");
    let indented: String = config.lines().map(|l| format!("    {l}\n")).collect();
    let patch = format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {NAME}\n  namespace: {HUB_NAMESPACE}\n\
         data:\n  config.yaml: |\n{indented}"
    );
    std::fs::write(overlay.join("config.yaml"), patch).expect("writing the config patch");
    overlay
}
