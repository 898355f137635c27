//! Upgrades of a running install, by the routes the documentation gives, on the real control plane
//! with pods on real kubelets: from the kustomize install to the Helm chart (CHANGELOG.md, "From
//! 0.1.0 installed with `kubectl apply -k manifests/hub` to the Helm chart": label and annotate the
//! objects with `-k manifests/hub`, then `helm upgrade --install`), then a chart upgrade
//! (docs/install.md, "Upgrading": apply the CRDs, then `helm upgrade --reuse-values`). Neither
//! deletes or replaces anything: the hub's objects, every add-on object on the hub (each cluster's
//! ManagedClusterAddOn, agent ManifestWork and AddOnPlacementScore among them), the agents'
//! Deployments and every pod keep their uids, and the agents go on renewing their scores.
//!
//! The kustomize install is `manifests/hub` of this tree, applied as the README shows: it is the
//! non-Helm install users have, and it runs the same image as the chart; only this tree's release
//! can be built here, so "0.1.0" is the kustomize route, not an older image.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::{
    ADDON, HUB_NAMESPACE, INSTALL_NAMESPACE, addon_objects, kubectl, score_valid_until,
};
use ocm_score_control_plane::chart;
use ocm_score_control_plane::pods::{all_pods, ready_pods};
use ocm_score_tests::support::eventually;

/// Patience for one convergence on a loaded 2-core machine (pods start, OCM syncs).
const WAIT: Duration = Duration::from_secs(300);
const CLUSTERS: [&str; 2] = ["cluster1", "cluster2"];

fn run(kubeconfig: &Path, args: &[&str]) -> String {
    kubectl(kubeconfig, args).unwrap_or_else(|e| panic!("{e}"))
}

fn helm(kubeconfig: &Path, args: &[&str]) -> String {
    chart::helm_on(kubeconfig, args).unwrap_or_else(|e| panic!("{e}"))
}

/// The uid of everything an upgrade must keep, by what it is: each object `manifests/hub` installs
/// (read with `kubectl get -k manifests/hub`), every object of the add-on on the hub and the agents'
/// Deployments ([`addon_objects`]), and every pod of ours, on the hub and on the managed clusters.
/// `None` while a read fails or something that must be there is not (each cluster's
/// ManagedClusterAddOn, agent ManifestWork, score and a Ready agent pod; both replicas of the add-on
/// manager and of the tiering controller Ready): a caller polls until all of it is read.
async fn uids(cp: &ControlPlane) -> Option<BTreeMap<String, String>> {
    let hub = cp.hub_client().await.ok()?;
    let mut uids = BTreeMap::new();
    let installed = kubectl(
        &cp.hub_kubeconfig(),
        &[
            "get",
            "-k",
            "manifests/hub",
            "-o",
            "jsonpath={range .items[*]}{.kind} {.metadata.namespace}/{.metadata.name} {.metadata.uid}{\"\\n\"}{end}",
        ],
    )
    .ok()?;
    for line in installed.lines() {
        let (what, uid) = line.rsplit_once(' ')?;
        uids.insert(format!("manifests/hub: {what}"), uid.to_owned());
    }
    for (what, meta) in addon_objects(cp, &CLUSTERS).await.ok()? {
        uids.insert(what, meta.uid?);
    }
    for cluster in CLUSTERS {
        for kind in [
            "ManagedClusterAddOn".to_owned(),
            "AddOnPlacementScore resource-usage-score".to_owned(),
            format!("ManifestWork addon-{ADDON}-deploy-0"),
        ] {
            uids.get(&format!("{cluster}: {kind}"))?;
        }
        let managed = cp.cluster_client(cluster).await.ok()?;
        if ready_pods(&managed, INSTALL_NAMESPACE, "").await.ok()?.is_empty() {
            return None;
        }
        for pod in all_pods(&managed, INSTALL_NAMESPACE).await.ok()? {
            let name = pod.metadata.name.unwrap_or_default();
            uids.insert(format!("{cluster}: agent pod {name}"), pod.metadata.uid?);
        }
    }
    // Both Deployments' two replicas.
    for name in ["ocm-score-addon-manager", "ocm-score-tiering"] {
        let selector = format!("app.kubernetes.io/name={name}");
        if ready_pods(&hub, HUB_NAMESPACE, &selector).await.ok()?.len() < 2 {
            return None;
        }
    }
    for pod in all_pods(&hub, HUB_NAMESPACE).await.ok()? {
        let name = pod.metadata.name.unwrap_or_default();
        uids.insert(format!("hub: pod {name}"), pod.metadata.uid?);
    }
    Some(uids)
}

/// Every cluster's score renewed past the validUntil it had in `from`: the agents still publish.
async fn renewed(cp: &ControlPlane, from: &BTreeMap<&str, String>, context: impl Fn() -> String) {
    let hub = cp.hub_client().await.expect("hub client");
    for cluster in CLUSTERS {
        let previous = from[cluster].clone();
        eventually(
            &format!("{cluster}'s score renewed (validUntil was {previous})"),
            Duration::from_secs(100),
            &context,
            || {
                let hub = hub.clone();
                let previous = previous.clone();
                async move { score_valid_until(&hub, cluster).await.filter(|v| *v > previous) }
            },
        )
        .await;
    }
}

/// Each cluster's validUntil now.
async fn valid_untils(cp: &ControlPlane) -> BTreeMap<&'static str, String> {
    let hub = cp.hub_client().await.expect("hub client");
    let mut out = BTreeMap::new();
    for cluster in CLUSTERS {
        let valid_until = eventually(&format!("{cluster}'s validUntil"), WAIT, String::new, || {
            let hub = hub.clone();
            async move { score_valid_until(&hub, cluster).await }
        })
        .await;
        out.insert(cluster, valid_until);
    }
    out
}

/// Waits long enough for a re-rendered work or a recreated object to reach a pod, then asserts
/// that everything in `before` is still there with its uid and nothing was added.
async fn expect_nothing_replaced(
    cp: &ControlPlane,
    before: &BTreeMap<String, String>,
    what: &str,
    context: impl Fn() -> String,
) {
    tokio::time::sleep(Duration::from_secs(20)).await;
    let after = eventually("everything of ours, each read", WAIT, &context, || uids(cp)).await;
    let changed: Vec<String> = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|k| format!("{k}: {:?} -> {:?}", before.get(k), after.get(k)))
        .collect();
    assert!(
        changed.is_empty(),
        "{what} replaced, deleted or added something:\n{}\n{}",
        changed.join("\n"),
        context()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kustomize_install_upgrades_to_the_chart_and_the_chart_upgrades_in_place() {
    let control_plane = ControlPlane::builder()
        .clusters(2)
        .nodes(true)
        .start()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let cp = &control_plane;
    let started = Instant::now();
    let step = |what: &str| eprintln!("[{:6.1} s] {what}", started.elapsed().as_secs_f64());
    let hub_kc = cp.hub_kubeconfig();
    let logs = || {
        cp.log_tails(
            &["hub-addon-manager", "cluster1-kubelet", "cluster2-klusterlet"],
            15,
        )
    };

    // 1. The kustomize install, as the README shows it; every agent up and scoring.
    step("kubectl apply -k manifests/hub");
    run(&hub_kc, &["apply", "-k", "manifests/hub"]);
    let before = eventually("the kustomize install up and scoring", WAIT, logs, || uids(cp)).await;
    step("installed");

    // 2. CHANGELOG.md's route to the chart: the objects marked as the release's, then the chart
    //    installed over them, as the user runs it (no --wait: the check below waits).
    run(
        &hub_kc,
        &[
            "label",
            "-k",
            "manifests/hub",
            "app.kubernetes.io/managed-by=Helm",
            "--overwrite",
        ],
    );
    run(
        &hub_kc,
        &[
            "annotate",
            "-k",
            "manifests/hub",
            "meta.helm.sh/release-name=ocm-score",
            "meta.helm.sh/release-namespace=ocm-score",
            "--overwrite",
        ],
    );
    helm(
        &hub_kc,
        &[
            "upgrade",
            "--install",
            "ocm-score",
            "charts/ocm-score",
            "-n",
            "ocm-score",
        ],
    );
    step("helm upgrade --install over the kustomize install");
    let status = helm(&hub_kc, &["status", chart::RELEASE, "-n", HUB_NAMESPACE]);
    assert!(status.contains("STATUS: deployed"), "{status}");
    // The release now holds the hub's workloads.
    let manifest = helm(&hub_kc, &["get", "manifest", chart::RELEASE, "-n", HUB_NAMESPACE]);
    for object in [
        "name: ocm-score-addon-manager",
        "name: ocm-score-tiering",
        "kind: ClusterManagementAddOn",
    ] {
        assert!(manifest.contains(object), "the release has no {object}");
    }
    expect_nothing_replaced(cp, &before, "the move to the chart", logs).await;
    step("nothing replaced");

    // 3. docs/install.md's chart upgrade: the CRDs first (Helm applies a chart's crds/ only on the
    //    first install), then `helm upgrade --reuse-values`.
    run(
        &hub_kc,
        &["apply", "--server-side", "-f", "charts/ocm-score/crds/"],
    );
    helm(
        &hub_kc,
        &[
            "upgrade",
            "ocm-score",
            "charts/ocm-score",
            "--namespace",
            "ocm-score",
            "--reuse-values",
        ],
    );
    step("helm upgrade --reuse-values");
    let history = helm(&hub_kc, &["history", chart::RELEASE, "-n", HUB_NAMESPACE]);
    assert!(
        history
            .lines()
            .any(|l| l.trim_start().starts_with('2') && l.contains("deployed")),
        "revision 2 deployed: {history}"
    );
    expect_nothing_replaced(cp, &before, "the chart upgrade", logs).await;
    step("nothing replaced");

    // 4. The add-on still works: every agent renews its score after the upgrades.
    let after_upgrades = valid_untils(cp).await;
    renewed(cp, &after_upgrades, logs).await;
    step("every score renewed");
}
