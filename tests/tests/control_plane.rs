//! The real control plane (kube-apiserver, etcd, kube-controller-manager, OCM's hub and
//! klusterlets built from their Go modules) takes our objects, refuses what OCM's CRDs refuse,
//! runs OCM's placement controller on our scores, and serves the real `kubectl`.
//!
//! Each test starts its own control plane (about half a minute warm); the nextest group
//! `control-plane` runs them one at a time.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, Patch, PatchParams, PostParams};
use ocm_score_api::{
    AddOnPlacementScore, AddOnPlacementScoreItem, AddOnPlacementScoreStatus, ManifestWork, Placement,
};
use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::{decided, kubectl_binary, workspace_dir};
use ocm_score_tests::support::eventually;
use serde_json::{Value, json};

/// Runs kubectl against `kubeconfig`; returns (success, stdout, stderr).
fn run_kubectl(kubeconfig: &Path, args: &[&str]) -> (bool, String, String) {
    let out = Command::new(kubectl_binary().expect("kubectl"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .current_dir(workspace_dir())
        .output()
        .expect("running kubectl");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn kubectl_ok(kubeconfig: &Path, args: &[&str]) -> String {
    let (ok, stdout, stderr) = run_kubectl(kubeconfig, args);
    assert!(ok, "kubectl {} failed:\n{stdout}\n{stderr}", args.join(" "));
    stdout
}

async fn start(clusters: usize) -> ControlPlane {
    match ControlPlane::builder()
        .clusters(clusters)
        .start_with_progress(&|l| eprintln!("{l}"))
        .await
    {
        Ok(cp) => cp,
        Err(e) => panic!("the control plane did not start: {e}"),
    }
}

fn score(cluster: &str, values: &[(&str, i32)], valid_for: Duration) -> AddOnPlacementScore {
    let until = jiff::Timestamp::now() + jiff::SignedDuration::try_from(valid_for).expect("duration");
    AddOnPlacementScore {
        metadata: ObjectMeta {
            name: Some("resource-usage-score".into()),
            namespace: Some(cluster.into()),
            ..Default::default()
        },
        status: Some(AddOnPlacementScoreStatus {
            scores: values
                .iter()
                .map(|(name, value)| AddOnPlacementScoreItem {
                    name: (*name).into(),
                    value: *value,
                })
                .collect(),
            valid_until: Some(
                serde_json::from_value(json!(until.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()))
                    .expect("time"),
            ),
            ..Default::default()
        }),
    }
}

/// Creates the score object and writes its status, as the agent does (status is a subresource).
async fn publish(client: &kube::Client, score: &AddOnPlacementScore) {
    let ns = score.metadata.namespace.as_deref().expect("namespace");
    let api: Api<AddOnPlacementScore> = Api::namespaced(client.clone(), ns);
    let name = score.metadata.name.as_deref().expect("name");
    if api.get_opt(name).await.expect("get score").is_none() {
        let bare = AddOnPlacementScore {
            metadata: score.metadata.clone(),
            status: None,
        };
        api.create(&PostParams::default(), &bare)
            .await
            .expect("create score");
    }
    let status = json!({"status": score.status});
    api.patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("write score status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_api_server_accepts_our_objects_and_refuses_a_score_of_101() {
    let cp = start(1).await;
    let hub = cp.hub_client().await.expect("hub client");

    // A score object built with our types, through the status subresource as the agent writes it.
    publish(
        &hub,
        &score(
            "cluster1",
            &[("cpuNodeAvailable", 40), ("memNodeAvailable", -100)],
            Duration::from_secs(600),
        ),
    )
    .await;
    let stored: AddOnPlacementScore = Api::namespaced(hub.clone(), "cluster1")
        .get("resource-usage-score")
        .await
        .expect("get");
    let status = stored.status.expect("status kept");
    assert_eq!(status.score("cpuNodeAvailable"), Some(40));
    assert_eq!(status.score("memNodeAvailable"), Some(-100));
    assert!(status.valid_until.is_some(), "validUntil kept");

    // 101 is outside the CRD's maximum: 422 from the real server, and nothing changes.
    let api: Api<AddOnPlacementScore> = Api::namespaced(hub.clone(), "cluster1");
    let over = json!({"status": {"scores": [{"name": "cpuNodeAvailable", "value": 101}]}});
    match api
        .patch_status(
            "resource-usage-score",
            &PatchParams::default(),
            &Patch::Merge(&over),
        )
        .await
    {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422, "{e:?}");
            assert!(
                e.message.contains("status.scores[0].value"),
                "names the field: {}",
                e.message
            );
        }
        other => panic!("a score of 101 must be refused with 422, got {other:?}"),
    }
    let after: AddOnPlacementScore = api.get("resource-usage-score").await.expect("get");
    assert_eq!(
        after.status.expect("status").score("cpuNodeAvailable"),
        Some(40),
        "the refused write changed nothing"
    );

    // Every example Placement we ship, deserialized into our type and sent back as JSON.
    let ns: Api<Namespace> = Api::all(hub.clone());
    ns.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "ocm-score-examples"}})).expect("ns"),
    )
    .await
    .expect("namespace");
    let mut placements = 0;
    for entry in std::fs::read_dir(workspace_dir().join("manifests/examples")).expect("examples") {
        let path = entry.expect("entry").path();
        // The Placements are the files here; the subdirectories hold their consumers.
        if !path.is_file() {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("read");
        for doc in serde_norway::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(doc).expect("yaml");
            if value["kind"] != "Placement" {
                continue;
            }
            let placement: Placement =
                serde_json::from_value(value).expect("our Placement type reads the example");
            let api: Api<Placement> = Api::namespaced(hub.clone(), "ocm-score-examples");
            api.create(&PostParams::default(), &placement)
                .await
                .unwrap_or_else(|e| panic!("{}: the real server refused our Placement: {e}", path.display()));
            placements += 1;
        }
    }
    assert!(
        placements >= 4,
        "the examples hold at least four Placements, found {placements}"
    );

    // OCM's CRDs carry CEL rules (x-kubernetes-validations) that only a real server runs: the
    // ManifestWork CRD refuses a CEL condition rule without a condition, naming the rule.
    let bad_work = json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "bad", "namespace": "cluster1"},
        "spec": {
            "workload": {"manifests": []},
            "manifestConfigs": [{
                "resourceIdentifier": {"group": "apps", "resource": "deployments", "namespace": "ns", "name": "d"},
                "conditionRules": [{"type": "CEL", "condition": "", "celExpressions": ["true"]}],
            }],
        },
    });
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), "cluster1");
    let work: ManifestWork = serde_json::from_value(bad_work).expect("our ManifestWork type reads it");
    match works.create(&PostParams::default(), &work).await {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422, "{e:?}");
            assert!(
                e.message.contains("Condition is required for CEL rules"),
                "the CRD's CEL rule speaks: {}",
                e.message
            );
        }
        other => panic!("a CEL condition rule without a condition must be refused, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ocm_placement_controller_decides_on_our_scores() {
    let cp = start(2).await;
    let hub = cp.hub_client().await.expect("hub client");
    let kubeconfig = cp.hub_kubeconfig();

    // The install a user runs for the examples, with the real client.
    kubectl_ok(&kubeconfig, &["apply", "-k", "manifests/examples"]);
    publish(
        &hub,
        &score(
            "cluster1",
            &[("memClusterAvailable", 20)],
            Duration::from_secs(600),
        ),
    )
    .await;
    publish(
        &hub,
        &score(
            "cluster2",
            &[("memClusterAvailable", 80)],
            Duration::from_secs(600),
        ),
    )
    .await;

    let wait = Duration::from_secs(120);
    let first = eventually("OCM picks cluster2 (more free memory)", wait, String::new, || {
        let hub = hub.clone();
        async move {
            let d = decided(&hub, "ocm-score-examples", "most-free-memory").await;
            (d == ["cluster2"]).then_some(d)
        }
    })
    .await;
    assert_eq!(first, ["cluster2"]);

    // The scores turn: OCM's controller follows our objects, not a cached view.
    publish(
        &hub,
        &score(
            "cluster1",
            &[("memClusterAvailable", 90)],
            Duration::from_secs(600),
        ),
    )
    .await;
    eventually("the decision moves to cluster1", wait, String::new, || {
        let hub = hub.clone();
        async move {
            (decided(&hub, "ocm-score-examples", "most-free-memory").await == ["cluster1"]).then_some(())
        }
    })
    .await;

    // Both clusters joined the `global` set the examples bind: the two-cluster Placement takes both.
    let both = decided(&hub, "ocm-score-examples", "most-free-cpu").await;
    assert_eq!(both, ["cluster1", "cluster2"], "most-free-cpu wants two clusters");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_works_against_the_control_plane() {
    let cp = start(2).await;
    let kc = cp.hub_kubeconfig();

    let version: Value =
        serde_json::from_str(&kubectl_ok(&kc, &["version", "-o", "json"])).expect("version json");
    let server = version["serverVersion"]["gitVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(
        cp.versions().contains(&format!("k8s.io/kubernetes {server}")),
        "kubectl shows the real server version {server:?}; built: {}",
        cp.versions()
    );

    let clusters = kubectl_ok(&kc, &["get", "managedclusters"]);
    for name in ["cluster1", "cluster2"] {
        let line = clusters
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("{name} listed:\n{clusters}"));
        let cols: Vec<&str> = line.split_whitespace().collect();
        // NAME, HUB ACCEPTED (`true`), then JOINED and AVAILABLE (`True`); the URL column is empty.
        assert_eq!(cols.get(1), Some(&"true"), "{name} accepted: {line}");
        assert_eq!(
            cols.iter().filter(|c| **c == "True").count(),
            2,
            "{name} joined and available: {line}"
        );
    }

    kubectl_ok(&kc, &["create", "namespace", "kubectl-check"]);
    // Client-side validation on (the default), from the OpenAPI the real server publishes.
    let placement = "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata:\n  name: p\n  namespace: kubectl-check\nspec:\n  numberOfClusters: 1\n";
    let file = cp.dir().join("placement.yaml");
    std::fs::write(&file, placement).expect("write");
    kubectl_ok(
        &kc,
        &["apply", "--validate=strict", "-f", file.to_str().expect("utf-8")],
    );
    let typo = placement.replace("numberOfClusters", "numberOfCluster");
    std::fs::write(&file, typo).expect("write");
    let (ok, _, stderr) = run_kubectl(
        &kc,
        &["apply", "--validate=strict", "-f", file.to_str().expect("utf-8")],
    );
    assert!(
        !ok && stderr.contains("numberOfCluster"),
        "strict validation names the unknown field: {stderr}"
    );

    let explain = kubectl_ok(&kc, &["explain", "placement.spec"]);
    assert!(
        explain.contains("prioritizerPolicy"),
        "explain shows the real schema:\n{explain}"
    );

    assert_eq!(
        kubectl_ok(
            &kc,
            &[
                "auth",
                "can-i",
                "create",
                "addonplacementscores",
                "-n",
                "cluster1"
            ]
        )
        .trim(),
        "yes"
    );
    let (_, no, _) = run_kubectl(
        &kc,
        &[
            "auth",
            "can-i",
            "create",
            "addonplacementscores",
            "-n",
            "cluster1",
            "--as",
            "someone",
            "--as-group",
            "nobody",
        ],
    );
    assert_eq!(
        no.trim(),
        "no",
        "RBAC is on: an unbound user may not write scores"
    );

    // The managed cluster's own API server answers too.
    let nodes = kubectl_ok(&cp.kubeconfig("cluster2"), &["get", "namespaces", "-o", "name"]);
    assert!(
        nodes.contains("namespace/open-cluster-management-agent"),
        "{nodes}"
    );
}
