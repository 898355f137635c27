//! `kubectl ocm-score` on the real hub, run by kubectl itself (the workspace's
//! `kubectl-ocm_score` first on kubectl's `PATH`), with OCM's own placement controller deciding:
//! - `explain placement` for an administrator: the engine's answer equals `ocm-score-hub simulate`
//!   on a snapshot taken at the same moment, and agrees with OCM's decisions;
//! - with OCM's placement controller stopped and the scores turned around, the decisions are
//!   flagged STALE and the score written after OCM decided is named; once the controller is back
//!   and OCM has caught up, they agree again;
//! - `explain -f`: a dry run of a Placement not yet applied, nothing written;
//! - `scores`: every score object, `-l` by cluster labels, `--sort-by` a score, JSON;
//! - a user with a namespace-scoped Role: `explain` names what it may not read and what OCM
//!   decided, and exits 1; `scores` names what it leaves out. With a ClusterRole to read the
//!   cluster inventory and scores added, `explain` answers like the administrator's.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kube::api::{Patch, PatchParams};
use ocm_score_control_plane::addon::{
    dynamic, hub_snapshot, kubectl, kubectl_binary, workspace_binary, workspace_dir,
};
use ocm_score_control_plane::{ControlPlane, apply_all};
use ocm_score_tests::support::TempDir;
use serde_json::{Value, json};

const NS: &str = "team-a";
const PLACEMENT: &str = "by-cpu";
const SCORE: &str = "resource-usage-score";

struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `kubectl ocm-score <args> --kubeconfig <kubeconfig>`, with the plugin's directory first on PATH.
fn plugin(plugin_dir: &Path, kubeconfig: &Path, args: &[&str]) -> Ran {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let mut dirs = vec![plugin_dir.to_path_buf()];
    dirs.extend(std::env::split_paths(&path));
    let out = Command::new(kubectl_binary().expect("kubectl"))
        .arg("ocm-score")
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("PATH", std::env::join_paths(dirs).expect("PATH"))
        .output()
        .expect("running kubectl ocm-score");
    Ran {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn ok(ran: Ran, what: &str) -> String {
    assert_eq!(
        ran.code, 0,
        "{what}: exit {}\n{}\n{}",
        ran.code, ran.stdout, ran.stderr
    );
    ran.stdout
}

fn scores(cpu1: i32, cpu2: i32) -> Vec<Value> {
    let valid_until = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(2))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    [("cluster1", cpu1), ("cluster2", cpu2)]
        .into_iter()
        .map(|(cluster, cpu)| {
            json!({
                "apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "AddOnPlacementScore",
                "metadata": {"name": SCORE, "namespace": cluster},
                "status": {"validUntil": valid_until, "scores": [
                    {"name": "cpuAvailable", "value": cpu}, {"name": "memAvailable", "value": 50}]},
            })
        })
        .collect()
}

/// Writes scores as the agent does: the object, then its status through the subresource.
async fn write_scores(hub: &kube::Client, cpu1: i32, cpu2: i32) {
    for s in scores(cpu1, cpu2) {
        let ns = s["metadata"]["namespace"].as_str().unwrap_or_default();
        let api = dynamic(
            hub,
            "cluster.open-cluster-management.io",
            "v1alpha1",
            "AddOnPlacementScore",
            Some(ns),
        )
        .await
        .expect("AddOnPlacementScores are served");
        let mut object = s.clone();
        object.as_object_mut().map(|o| o.remove("status"));
        apply_all(hub, &[object]).await.expect("score object");
        api.patch_status(
            SCORE,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": s["status"]})),
        )
        .await
        .expect("score status");
    }
}

/// The clusters in OCM's PlacementDecisions for the placement.
fn ocm_decisions(hub_kc: &Path) -> Vec<String> {
    let out = kubectl(
        hub_kc,
        &[
            "get",
            "placementdecisions",
            "-n",
            NS,
            "-l",
            &format!("cluster.open-cluster-management.io/placement={PLACEMENT}"),
            "-o",
            "json",
        ],
    )
    .unwrap_or_default();
    let list: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    let mut clusters: Vec<String> = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|pd| pd["status"]["decisions"].as_array().cloned().unwrap_or_default())
        .filter_map(|d| d["clusterName"].as_str().map(str::to_owned))
        .collect();
    clusters.sort();
    clusters
}

async fn wait_for_decisions(hub_kc: &Path, want: &[&str], cp: &ControlPlane) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let now = ocm_decisions(hub_kc);
        if now == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "OCM decided {now:?}, not {want:?}, within 120 s\n{}",
            cp.log_tail("hub-placement-controller", 30)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The plugin's JSON without what only the plugin adds.
fn engine_part(mut v: Value) -> Value {
    if let Some(o) = v.as_object_mut() {
        o.remove("ocm");
        o.remove("dryRun");
    }
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubectl_ocm_score_explains_live_placements_and_scores() {
    let plugin_bin: PathBuf = workspace_binary("kubectl-ocm_score").expect("the plugin builds");
    let simulate_bin: PathBuf = workspace_binary("ocm-score-hub").expect("ocm-score-hub builds");
    let plugin_dir = plugin_bin.parent().expect("plugin dir").to_path_buf();
    let mut cp = ControlPlane::builder()
        .clusters(2)
        .ocm_addon_manager(false)
        .start_with_progress(&|l| eprintln!("{l}"))
        .await
        .unwrap_or_else(|e| panic!("the control plane did not start: {e}"));
    let hub = cp.hub_client().await.expect("hub client");
    let admin = cp.hub_kubeconfig();
    let dir = TempDir::new("kubectl-plugin");

    // The fleet: both clusters (OCM's `global` set), cluster1 labelled env=prod; cluster1 has more
    // free CPU; the placement wants one cluster, by that score.
    kubectl(&admin, &["create", "namespace", NS]).expect("namespace");
    kubectl(&admin, &["label", "managedcluster", "cluster1", "env=prod"]).expect("label");
    write_scores(&hub, 80, 20).await;
    let placement = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": PLACEMENT, "namespace": NS},
        "spec": {"numberOfClusters": 1, "prioritizerPolicy": {"mode": "Exact", "configurations": [
            {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": SCORE, "scoreName": "cpuAvailable"}}, "weight": 1},
        ]}},
    });
    apply_all(
        &hub,
        &[
            json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSetBinding",
                   "metadata": {"name": "global", "namespace": NS}, "spec": {"clusterSet": "global"}}),
            placement.clone(),
        ],
    )
    .await
    .expect("binding and placement");
    wait_for_decisions(&admin, &["cluster1"], &cp).await;

    // The administrator: table, then JSON equal to simulate on a snapshot of the same moment.
    let table = ok(
        plugin(
            &plugin_dir,
            &admin,
            &["explain", "placement", PLACEMENT, "-n", NS],
        ),
        "explain (table)",
    );
    assert!(
        table.contains("cluster1") && table.contains("cluster2"),
        "{table}"
    );
    assert!(table.contains("selects the same clusters"), "{table}");
    let live: Value = serde_json::from_str(&ok(
        plugin(
            &plugin_dir,
            &admin,
            &["explain", "pl", PLACEMENT, "-n", NS, "-o", "json"],
        ),
        "explain (json)",
    ))
    .expect("the plugin's JSON");
    let snapshot = dir.path().join("snapshot.yaml");
    std::fs::write(&snapshot, hub_snapshot(&admin).expect("snapshot")).expect("write snapshot");
    let simulated = Command::new(&simulate_bin)
        .args([
            "simulate",
            "-o",
            "json",
            "--explain",
            "-p",
            &format!("{NS}/{PLACEMENT}"),
            "-f",
        ])
        .arg(&snapshot)
        .output()
        .expect("simulate");
    assert!(
        simulated.status.success(),
        "{}",
        String::from_utf8_lossy(&simulated.stderr)
    );
    let simulated: Vec<Value> = serde_json::from_slice(&simulated.stdout).expect("simulate's JSON");
    assert_eq!(
        engine_part(live.clone()),
        simulated[0],
        "the plugin and simulate differ"
    );
    assert_eq!(live["decisions"], json!(["cluster1"]));
    assert_eq!(live["ocm"]["stale"], json!(false), "{live:#}");
    assert_eq!(live["ocm"]["ocmDecisions"], json!(["cluster1"]));
    let as_yaml = ok(
        plugin(
            &plugin_dir,
            &admin,
            &["explain", "placement", PLACEMENT, "-n", NS, "-o", "yaml"],
        ),
        "explain (yaml)",
    );
    let as_yaml: Value = serde_norway::from_str(&as_yaml).expect("the plugin's YAML");
    assert_eq!(as_yaml["ocm"]["ocmDecisions"], json!(["cluster1"]));

    // OCM's placement controller stops; the scores turn around: the decisions are stale, and the
    // score written after OCM decided is named.
    cp.kill("hub-placement-controller")
        .expect("stop OCM's placement controller");
    tokio::time::sleep(Duration::from_millis(1100)).await; // managedFields times have 1 s resolution
    write_scores(&hub, 10, 90).await;
    let stale = ok(
        plugin(
            &plugin_dir,
            &admin,
            &["explain", "placement", PLACEMENT, "-n", NS],
        ),
        "explain (stale)",
    );
    assert!(stale.contains("STALE"), "{stale}");
    assert!(stale.contains("cluster2/resource-usage-score"), "{stale}");
    let stale_json: Value = serde_json::from_str(&ok(
        plugin(
            &plugin_dir,
            &admin,
            &["explain", "placement", PLACEMENT, "-n", NS, "-o", "json"],
        ),
        "explain (stale, json)",
    ))
    .expect("JSON");
    assert_eq!(stale_json["ocm"]["stale"], json!(true));
    assert_eq!(stale_json["ocm"]["onlyNow"], json!(["cluster2"]));
    assert_eq!(stale_json["ocm"]["onlyInOcm"], json!(["cluster1"]));
    cp.restart("hub-placement-controller")
        .expect("restart OCM's placement controller");
    wait_for_decisions(&admin, &["cluster2"], &cp).await;
    let caught_up = ok(
        plugin(
            &plugin_dir,
            &admin,
            &["explain", "placement", PLACEMENT, "-n", NS],
        ),
        "explain (caught up)",
    );
    assert!(caught_up.contains("selects the same clusters"), "{caught_up}");

    // A dry run: a Placement not applied, for env=prod only; nothing is written.
    let draft = dir.path().join("draft.yaml");
    std::fs::write(
        &draft,
        "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata:\n  name: prod-only\n\
         spec:\n  predicates:\n    - requiredClusterSelector:\n        labelSelector:\n          matchLabels:\n            env: prod\n",
    )
    .expect("draft");
    let draft_arg = draft.display().to_string();
    let dry: Value = serde_json::from_str(&ok(
        plugin(
            &plugin_dir,
            &admin,
            &["explain", "-f", &draft_arg, "-n", NS, "-o", "json"],
        ),
        "explain -f",
    ))
    .expect("JSON");
    assert_eq!(dry["decisions"], json!(["cluster1"]), "{dry:#}");
    assert_eq!(dry["dryRun"], json!(true));
    assert!(
        kubectl(&admin, &["get", "placement", "prod-only", "-n", NS]).is_err(),
        "the dry run created the placement"
    );
    let bad = plugin(&plugin_dir, &admin, &["explain", "-f", "/nonexistent/draft.yaml"]);
    assert_eq!(bad.code, 2, "{}", bad.stderr);
    assert!(bad.stderr.contains("/nonexistent/draft.yaml"), "{}", bad.stderr);
    let missing = plugin(&plugin_dir, &admin, &["explain", "placement", "nope", "-n", NS]);
    assert_eq!(missing.code, 1, "{}", missing.stderr);
    assert!(
        missing.stderr.contains("team-a/nope not found"),
        "{}",
        missing.stderr
    );

    // Scores: all, by label, sorted by a score, as JSON.
    let all = ok(plugin(&plugin_dir, &admin, &["scores"]), "scores");
    assert!(
        all.starts_with("CLUSTER") && all.contains("cpuAvailable"),
        "{all}"
    );
    let sorted = ok(
        plugin(
            &plugin_dir,
            &admin,
            &["scores", "--sort-by", "cpuAvailable", "-o", "json"],
        ),
        "scores --sort-by",
    );
    let sorted: Value = serde_json::from_str(&sorted).expect("JSON");
    let order: Vec<&str> = sorted
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["cluster"].as_str())
        .collect();
    assert_eq!(order, ["cluster2", "cluster1"], "{sorted:#}");
    let prod = ok(
        plugin(&plugin_dir, &admin, &["scores", "-l", "env=prod"]),
        "scores -l",
    );
    assert!(prod.contains("cluster1") && !prod.contains("cluster2"), "{prod}");
    let narrow = ok(
        plugin(
            &plugin_dir,
            &admin,
            &["scores", "--score", "cpuAvailable", "--resource", SCORE],
        ),
        "scores --score --resource",
    );
    assert!(
        narrow.contains("cpuAvailable") && !narrow.contains("memAvailable"),
        "{narrow}"
    );
    let typo = plugin(&plugin_dir, &admin, &["scores", "--score", "cpuAvailabel"]);
    assert_eq!(typo.code, 2, "a name to fix: {}", typo.stderr);
    assert!(
        typo.stderr.contains("--score cpuAvailabel") && typo.stderr.contains("cpuAvailable, memAvailable"),
        "{}",
        typo.stderr
    );

    // A TieredPlacement: its plan, from the live hub, before any controller acted on it.
    let crd = workspace_dir().join("charts/ocm-score/crds/tiering.ocm-score.io_tieredplacements.yaml");
    kubectl(&admin, &["apply", "-f", &crd.display().to_string()]).expect("TieredPlacement CRD");
    kubectl(
        &admin,
        &[
            "wait",
            "--for=condition=Established",
            "crd/tieredplacements.tiering.ocm-score.io",
        ],
    )
    .expect("CRD established");
    let tiered = dir.path().join("tiered.yaml");
    std::fs::write(
        &tiered,
        format!(
            "apiVersion: tiering.ocm-score.io/v1alpha1\nkind: TieredPlacement\nmetadata:\n  name: web\n  namespace: {NS}\n\
             spec:\n  mode: Failover\n  numberOfClusters: 1\n  tiers:\n    - name: everywhere\n      clusterSets: [global]\n"
        ),
    )
    .expect("TieredPlacement file");
    kubectl(&admin, &["apply", "-f", &tiered.display().to_string()]).expect("TieredPlacement");
    let plan = ok(
        plugin(
            &plugin_dir,
            &admin,
            &["explain", "tieredplacement", "web", "-n", NS],
        ),
        "explain tieredplacement",
    );
    assert!(
        plan.contains("TieredPlacement team-a/web") && plan.contains("everywhere"),
        "{plan}"
    );
    let absent = plugin(&plugin_dir, &admin, &["explain", "tp", "nope", "-n", NS]);
    assert_eq!(absent.code, 1, "{}", absent.stdout);
    assert!(
        absent.stderr.contains("team-a/nope not found"),
        "{}",
        absent.stderr
    );

    // A user with a namespace-scoped Role.
    let alice = dir.path().join("alice.kubeconfig");
    cp.write_hub_identity("alice", None, &alice)
        .expect("alice's kubeconfig");
    apply_all(
        &hub,
        &[
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                   "metadata": {"name": "placement-viewer", "namespace": NS},
                   "rules": [{"apiGroups": ["cluster.open-cluster-management.io"],
                              "resources": ["placements", "placementdecisions", "managedclustersetbindings"],
                              "verbs": ["get", "list"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                   "metadata": {"name": "alice", "namespace": NS},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "placement-viewer"},
                   "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]}),
        ],
    )
    .await
    .expect("alice's Role");
    let refused = plugin(
        &plugin_dir,
        &alice,
        &["explain", "placement", PLACEMENT, "-n", NS],
    );
    assert_eq!(refused.code, 1, "{}\n{}", refused.stdout, refused.stderr);
    for named in [
        "managedclusters.cluster.open-cluster-management.io (cluster-wide)",
        "managedclustersets.cluster.open-cluster-management.io (cluster-wide)",
        "addonplacementscores.cluster.open-cluster-management.io",
        "OCM's decisions: cluster2",
    ] {
        assert!(
            refused.stderr.contains(named),
            "not named: {named}\n{}",
            refused.stderr
        );
    }
    let alice_scores = plugin(&plugin_dir, &alice, &["scores", "-n", NS]);
    assert_eq!(alice_scores.code, 0, "{}", alice_scores.stderr);
    assert!(
        alice_scores
            .stderr
            .contains("addonplacementscores.cluster.open-cluster-management.io"),
        "{}",
        alice_scores.stderr
    );
    apply_all(
        &hub,
        &[
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": "fleet-viewer"},
                   "rules": [{"apiGroups": ["cluster.open-cluster-management.io"],
                              "resources": ["managedclusters", "managedclustersets", "addonplacementscores", "placementdecisions"],
                              "verbs": ["get", "list"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": "alice-fleet-viewer"},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "fleet-viewer"},
                   "subjects": [{"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}]}),
        ],
    )
    .await
    .expect("alice's ClusterRole");
    // RBAC takes effect once the API server's authorizer cache has the new binding.
    let deadline = Instant::now() + Duration::from_secs(30);
    let answered = loop {
        let ran = plugin(
            &plugin_dir,
            &alice,
            &["explain", "placement", PLACEMENT, "-n", NS, "-o", "json"],
        );
        if ran.code == 0 || Instant::now() > deadline {
            break ran;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let alice_view: Value = serde_json::from_str(&ok(answered, "explain as alice")).expect("JSON");
    let admin_view: Value = serde_json::from_str(&ok(
        plugin(
            &plugin_dir,
            &admin,
            &["explain", "placement", PLACEMENT, "-n", NS, "-o", "json"],
        ),
        "explain as admin",
    ))
    .expect("JSON");
    assert_eq!(engine_part(alice_view), engine_part(admin_view));
    cp.stop();
}
