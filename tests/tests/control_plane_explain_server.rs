//! `ocm-score-hub explain-server` on the real hub, run as the chart deploys it (its Deployment's
//! args, its ServiceAccount with the chart's ClusterRole, its certificate files), asked by curl
//! with ServiceAccount tokens, with OCM's own placement controller deciding:
//! - a caller with `get` on placements: the answer agrees with OCM's PlacementDecisions, and with
//!   OCM's own debug endpoint (the placement controller serves `/debug/placements/` on its
//!   `--listen` port) on the filter pipeline and each prioritizer's scores, for an Exact AddOn
//!   placement and an Additive one (Steady and Balance);
//! - no token or a token the hub rejects → 401; a caller without RBAC → 403; `get` but not `create`
//!   → a dry run is 403; an unknown placement → 404; DELETE → 405; JSON bodies throughout;
//! - a dry run (POST of a YAML Placement) answers for a placement not applied and creates nothing;
//! - the serving certificate replaced on disk is served at the next connection;
//! - OCM's TLS profile: an `ocm-tls-profile` ConfigMap with `minTLSVersion: VersionTLS13` in the
//!   server's namespace refuses TLS 1.2 handshakes from the next connection on, TLS 1.3 still
//!   served; deleted, TLS 1.2 is served again (curl as the client, no restart);
//! - `/metrics` counts the answers by method and code.
//!
//! And the server as the chart installs it, on the hub's kubelet-backed node (second test): its
//! replicas Ready by their probes, reached through its Service (curl on the node, at the Service's
//! ClusterIP through the node's kube-proxy), serving the Secret's certificate; a new TLS Secret
//! applied with kubectl reaches the pods by the kubelet's atomic swap of the mounted files and is
//! served without a restart. (The host-process test above overwrites the files in place instead.)

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use ocm_score_control_plane::addon::{decided, kubectl, workspace_binary};
use ocm_score_control_plane::chart;
use ocm_score_control_plane::pki::ClusterCa;
use ocm_score_control_plane::process::{Component, Tier};
use ocm_score_control_plane::{ControlPlane, apply_all, free_port};
use ocm_score_kube_double::parse_objects;
use ocm_score_tests::support::{TempDir, eventually};
use serde_json::{Value, json};

const NS: &str = "team-a";
const SCORE: &str = "resource-usage-score";
const RELEASE_NS: &str = "ocm-score";
const TOKEN_LIFE: Duration = Duration::from_secs(3600);

/// What curl got: status, content type, body.
struct Got {
    status: u16,
    content_type: String,
    body: Value,
}

fn curl(url: &str, ca: Option<&Path>, token: Option<&str>, extra: &[&str]) -> Result<Got, String> {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "20", "-w", "\n%{http_code} %{content_type}"]);
    match ca {
        Some(ca) => cmd.arg("--cacert").arg(ca),
        None => cmd.arg("-k"),
    };
    if let Some(token) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {token}")]);
    }
    cmd.args(extra).arg(url);
    let out = cmd.output().map_err(|e| format!("running curl: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "curl {url}: exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, trailer) = text.rsplit_once('\n').unwrap_or(("", &text));
    let (status, content_type) = trailer.split_once(' ').unwrap_or((trailer, ""));
    Ok(Got {
        status: status.parse().unwrap_or(0),
        content_type: content_type.to_owned(),
        body: serde_json::from_str(body).unwrap_or_else(|_| Value::String(body.to_owned())),
    })
}

fn scores(cpu1: i32, cpu2: i32) -> Vec<(String, Value)> {
    let valid_until = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(2))
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    [("cluster1", cpu1), ("cluster2", cpu2)]
        .into_iter()
        .map(|(cluster, cpu)| {
            (
                cluster.to_owned(),
                json!({"validUntil": valid_until, "scores": [{"name": "cpuAvailable", "value": cpu}]}),
            )
        })
        .collect()
}

/// The filter pipeline with every record but the last (rank order) sorted: OCM v1.2's endpoint
/// schedules the clusters in its lister's order, which is a map's.
fn pipeline(results: &Value) -> Vec<Value> {
    let mut list = results.as_array().cloned().unwrap_or_default();
    let last = list.len().saturating_sub(1);
    for record in &mut list[..last] {
        if let Some(clusters) = record["filteredClusters"].as_array_mut() {
            clusters.sort_by_key(|c| c.as_str().unwrap_or_default().to_owned());
        }
    }
    list
}

/// The prioritizer results sorted by name (OCM ranges over a map to run them).
fn by_name(results: &Value) -> Vec<Value> {
    let mut list = results.as_array().cloned().unwrap_or_default();
    list.sort_by_key(|r| r["name"].as_str().unwrap_or_default().to_owned());
    list
}

async fn wait_until(what: &str, within: Duration, mut ok: impl AsyncFnMut() -> Result<(), String>) {
    let deadline = Instant::now() + within;
    loop {
        match ok().await {
            Ok(()) => return,
            Err(why) if Instant::now() >= deadline => panic!("{what} not within {within:?}: {why}"),
            Err(_) => tokio::time::sleep(Duration::from_millis(500)).await,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_server_answers_as_ocm_for_the_callers_rbac_allows() {
    let hub_binary = workspace_binary("ocm-score-hub").expect("ocm-score-hub builds");
    let cp = ControlPlane::builder()
        .clusters(2)
        .ocm_addon_manager(false)
        .start_with_progress(&|l| eprintln!("{l}"))
        .await
        .unwrap_or_else(|e| panic!("the control plane did not start: {e}"));
    let hub = cp.hub_client().await.expect("hub client");
    let admin = cp.hub_kubeconfig();
    let dir = TempDir::new("explain-server");

    // The chart's explain server: its RBAC objects applied, its Deployment's args run here.
    let rendered = chart::template(
        &[
            "addonManager.enabled=false",
            "tiering.enabled=false",
            "explainServer.enabled=true",
            "explainServer.tls.secretName=explain-tls",
        ],
        false,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let objects = parse_objects("helm template", &rendered).expect("rendered objects");
    let of_server = |o: &&Value| o["metadata"]["name"] == "ocm-score-explain-server";
    kubectl(&admin, &["create", "namespace", RELEASE_NS]).expect("release namespace");
    let rbac: Vec<Value> = objects
        .iter()
        .filter(of_server)
        .filter(|o| {
            [
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
            ]
            .contains(&o["kind"].as_str().unwrap_or(""))
        })
        .cloned()
        .collect();
    assert_eq!(
        rbac.len(),
        5,
        "the chart's account, cluster role and binding, TLS profile role and binding"
    );
    apply_all(&hub, &rbac).await.expect("the explain server's RBAC");
    let deployment = objects
        .iter()
        .filter(of_server)
        .find(|o| o["kind"] == "Deployment")
        .expect("the explain server's Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let mount = container["volumeMounts"][0]["mountPath"]
        .as_str()
        .expect("the certificate's mount");
    let ca_a = ClusterCa::new("explain-a").expect("CA a");
    let tls_dir = dir.path().join("tls");
    std::fs::create_dir_all(&tls_dir).expect("tls dir");
    let serving = ca_a
        .serving_cert_for_address("explain", std::net::Ipv4Addr::LOCALHOST)
        .expect("serving certificate");
    serving.write(&tls_dir, "tls").expect("tls.crt, tls.key");
    let ca_a_file = dir.path().join("ca-a.crt");
    std::fs::write(&ca_a_file, ca_a.cert_pem()).expect("CA a file");
    let kubeconfig = dir.path().join("explain-server.kubeconfig");
    cp.write_service_account_kubeconfig(
        "hub",
        RELEASE_NS,
        "ocm-score-explain-server",
        TOKEN_LIFE,
        &kubeconfig,
    )
    .await
    .expect("the explain server's kubeconfig");
    let (port, metrics_port) = (free_port().expect("port"), free_port().expect("port"));
    let mut args: Vec<String> = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(|a| a.as_str())
        .map(|a| a.replace(mount, &tls_dir.display().to_string()))
        .filter(|a| !a.starts_with("--bind-address") && !a.starts_with("--metrics-bind-address"))
        .collect();
    assert_eq!(args[0], "explain-server");
    args.push(format!("--bind-address=127.0.0.1:{port}"));
    args.push(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"));
    args.push(format!("--kubeconfig={}", kubeconfig.display()));
    let mut server = Component::spawn(
        "ocm-score-explain-server",
        Tier::Client,
        &hub_binary,
        &args,
        &[
            ("RUST_LOG", "info,kube=warn".to_owned()),
            ("NO_COLOR", "1".to_owned()),
        ],
        dir.path(),
    )
    .expect("the explain server starts");

    // The fleet: both clusters in OCM's `global` set bound to the namespace; cluster1 labelled
    // env=prod and with more free CPU.
    kubectl(&admin, &["create", "namespace", NS]).expect("namespace");
    kubectl(&admin, &["label", "managedcluster", "cluster1", "env=prod"]).expect("label");
    for (cluster, status) in scores(80, 20) {
        let object = json!({
            "apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "AddOnPlacementScore",
            "metadata": {"name": SCORE, "namespace": cluster},
        });
        apply_all(&hub, &[object]).await.expect("score object");
        let patch = json!({"status": status}).to_string();
        kubectl(
            &admin,
            &[
                "patch",
                "addonplacementscore",
                SCORE,
                "-n",
                &cluster,
                "--subresource=status",
                "--type=merge",
                "-p",
                &patch,
            ],
        )
        .expect("score status");
    }
    let exact = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": "by-cpu", "namespace": NS},
        "spec": {"numberOfClusters": 1, "prioritizerPolicy": {"mode": "Exact", "configurations": [
            {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": SCORE, "scoreName": "cpuAvailable"}}, "weight": 1},
        ]}},
    });
    let additive = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": "spread", "namespace": NS},
        "spec": {"numberOfClusters": 1},
    });
    let prod = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": "prod-cpu", "namespace": NS},
        "spec": {
            "predicates": [{"requiredClusterSelector": {"labelSelector": {"matchLabels": {"env": "prod"}}}}],
            "prioritizerPolicy": {"mode": "Exact", "configurations": [
                {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "ResourceAllocatableCPU"}, "weight": 1},
                {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": SCORE, "scoreName": "cpuAvailable"}}, "weight": 2},
            ]},
        },
    });
    apply_all(
        &hub,
        &[
            json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSetBinding",
                   "metadata": {"name": "global", "namespace": NS}, "spec": {"clusterSet": "global"}}),
            exact,
            additive,
            prod,
        ],
    )
    .await
    .expect("binding and placements");

    // Callers: an administrator, a namespace viewer (get, not create) and an account with no rights.
    for account in ["admin", "viewer", "nobody"] {
        kubectl(&admin, &["create", "serviceaccount", account, "-n", NS]).expect("account");
    }
    kubectl(
        &admin,
        &[
            "create",
            "clusterrolebinding",
            "explain-admin",
            "--clusterrole=cluster-admin",
            &format!("--serviceaccount={NS}:admin"),
        ],
    )
    .expect("admin binding");
    kubectl(
        &admin,
        &[
            "create",
            "role",
            "placement-getter",
            "-n",
            NS,
            "--verb=get",
            "--resource=placements.cluster.open-cluster-management.io",
        ],
    )
    .expect("viewer role");
    kubectl(
        &admin,
        &[
            "create",
            "rolebinding",
            "placement-getter",
            "-n",
            NS,
            "--role=placement-getter",
            &format!("--serviceaccount={NS}:viewer"),
        ],
    )
    .expect("viewer binding");
    let token = async |name: &str| {
        cp.service_account_token("hub", NS, name, TOKEN_LIFE)
            .await
            .unwrap_or_else(|e| panic!("{e}"))
    };
    let (admin_token, viewer_token, nobody_token) =
        (token("admin").await, token("viewer").await, token("nobody").await);

    let base = format!("https://127.0.0.1:{port}/debug/placements/");
    let ours = |path: &str, token: Option<&str>, extra: &[&str]| {
        curl(&format!("{base}{path}"), Some(&ca_a_file), token, extra)
    };
    wait_until("the explain server ready", Duration::from_secs(120), async || {
        server.check_running().map_err(|e| e.to_string())?;
        let got = curl(
            &format!("http://127.0.0.1:{metrics_port}/readyz"),
            None,
            None,
            &[],
        )?;
        (got.status == 200)
            .then_some(())
            .ok_or(format!("readyz {}: {}", got.status, got.body))
    })
    .await;

    // Our answer agrees with OCM's decisions and with OCM's own debug endpoint.
    let ocm_listen = cp
        .component_args("hub-placement-controller")
        .and_then(|args| args.iter().find_map(|a| a.strip_prefix("--listen=")))
        .expect("the placement controller's --listen")
        .to_owned();
    for (placement, first) in [("by-cpu", "cluster1"), ("spread", ""), ("prod-cpu", "cluster1")] {
        wait_until(
            &format!("OCM deciding {placement}"),
            Duration::from_secs(120),
            async || {
                let now = decided(&hub, NS, placement).await;
                (now.len() == 1 && (first.is_empty() || now == [first]))
                    .then_some(())
                    .ok_or(format!("{now:?}"))
            },
        )
        .await;
        let path = format!("{NS}/{placement}");
        let mut last = String::new();
        wait_until(
            &format!("{placement} answered as OCM's endpoint does"),
            Duration::from_secs(60),
            async || {
                let got = ours(&path, Some(&admin_token), &[])?;
                let theirs = curl(
                    &format!("https://{ocm_listen}/debug/placements/{path}"),
                    None,
                    Some(&admin_token),
                    &[],
                )?;
                last = format!(
                    "ours {}: {:#}\nOCM's {}: {:#}",
                    got.status, got.body, theirs.status, theirs.body
                );
                let ocm_decided = decided(&hub, NS, placement).await;
                let agree = got.status == 200
                    && theirs.status == 200
                    && got.content_type == "application/json"
                    && got.body["decisions"] == json!(ocm_decided)
                    && got.body["filteredPipelineResults"] == got.body["filteredPiplieResults"]
                    && pipeline(&got.body["filteredPipelineResults"])
                        == pipeline(&theirs.body["filteredPiplieResults"])
                    && by_name(&got.body["prioritizeResults"]) == by_name(&theirs.body["prioritizeResults"])
                    && theirs.body["prioritizeResults"]
                        .as_array()
                        .is_some_and(|r| !r.is_empty());
                agree.then_some(()).ok_or_else(|| last.clone())
            },
        )
        .await;
        eprintln!("{placement}: {last}");
    }
    let exact = ours(&format!("{NS}/by-cpu"), Some(&viewer_token), &[]).expect("curl");
    assert_eq!(exact.status, 200, "the viewer may get: {}", exact.body);
    assert_eq!(
        exact.body["aggregatedScores"],
        json!([{"clusterName": "cluster1", "score": 80}, {"clusterName": "cluster2", "score": 20}])
    );
    assert_eq!(
        exact.body["placement"]["metadata"],
        json!({"name": "by-cpu", "namespace": NS})
    );
    assert_eq!(exact.body["status"]["code"], "Success");

    // The answers share one snapshot of the hub, kept by the watches: ten requests in a row build
    // at most one more (two, should some object of the hub change meanwhile), not ten.
    let builds = || -> f64 {
        let got = curl(
            &format!("http://127.0.0.1:{metrics_port}/metrics"),
            None,
            None,
            &[],
        )
        .expect("metrics");
        let text = got.body.as_str().expect("metrics text").to_owned();
        text.lines()
            .find_map(|l| l.strip_prefix("ocm_score_explain_snapshot_builds_total "))
            .unwrap_or_else(|| panic!("no ocm_score_explain_snapshot_builds_total in\n{text}"))
            .trim()
            .parse()
            .expect("a count")
    };
    let before = builds();
    for _ in 0..10 {
        let again = ours(&format!("{NS}/by-cpu"), Some(&viewer_token), &[]).expect("curl");
        assert_eq!(again.body["aggregatedScores"], exact.body["aggregatedScores"]);
    }
    let built = builds() - before;
    assert!(built <= 2.0, "{built} snapshots built for 10 requests");

    // Refusals, each with OCM's status code and a JSON error naming the cause.
    let refused = |got: Got, status: u16, says: &str| {
        assert_eq!(got.status, status, "{}", got.body);
        assert_eq!(got.content_type, "application/json");
        let error = got.body["error"].as_str().unwrap_or_default();
        assert!(error.contains(says), "{error:?} lacks {says:?}");
    };
    let path = format!("{NS}/by-cpu");
    refused(
        ours(&path, None, &[]).expect("curl"),
        401,
        "user information not found",
    );
    refused(
        ours(&path, Some("not-a-token"), &[]).expect("curl"),
        401,
        "did not accept the bearer token",
    );
    refused(
        ours(&path, Some(&nobody_token), &[]).expect("curl"),
        403,
        &format!(
            "\"system:serviceaccount:{NS}:nobody\" does not have permission to get placements in namespace {NS}"
        ),
    );
    refused(
        ours(&format!("{NS}/nope"), Some(&admin_token), &[]).expect("curl"),
        404,
        "'nope' not found",
    );
    refused(
        ours(&path, Some(&admin_token), &["-X", "DELETE"]).expect("curl"),
        405,
        "method DELETE not allowed",
    );
    refused(
        ours("only-a-name", Some(&admin_token), &[]).expect("curl"),
        400,
        "namespace and name required",
    );

    // A dry run: a YAML Placement not applied, env=prod only. The viewer may not create placements.
    let draft = dir.path().join("draft.yaml");
    std::fs::write(
        &draft,
        format!(
            "apiVersion: cluster.open-cluster-management.io/v1beta1\nkind: Placement\nmetadata:\n  name: prod-only\n  namespace: {NS}\n\
             spec:\n  predicates:\n    - requiredClusterSelector:\n        labelSelector:\n          matchLabels:\n            env: prod\n"
        ),
    )
    .expect("draft");
    let post = [
        "-X",
        "POST",
        "-H",
        "Content-Type: application/yaml",
        "--data-binary",
    ];
    let body_arg = format!("@{}", draft.display());
    let with_body = |token: &str| {
        let mut extra = post.to_vec();
        extra.push(&body_arg);
        ours("", Some(token), &extra).expect("curl")
    };
    let dry = with_body(&admin_token);
    assert_eq!(dry.status, 200, "{}", dry.body);
    assert_eq!(dry.body["decisions"], json!(["cluster1"]), "{:#}", dry.body);
    assert_eq!(
        dry.body["filteredPipelineResults"][0],
        json!({"name": "Predicate", "filteredClusters": ["cluster1"]})
    );
    assert!(
        kubectl(&admin, &["get", "placement", "prod-only", "-n", NS]).is_err(),
        "the dry run created the placement"
    );
    refused(
        with_body(&viewer_token),
        403,
        "does not have permission to create placements",
    );

    // A new certificate (from another CA) written over the files is served at the next connection.
    let ca_b = ClusterCa::new("explain-b").expect("CA b");
    let ca_b_file = dir.path().join("ca-b.crt");
    std::fs::write(&ca_b_file, ca_b.cert_pem()).expect("CA b file");
    tokio::time::sleep(Duration::from_millis(1100)).await; // mtimes may have 1 s resolution
    ca_b.serving_cert_for_address("explain", std::net::Ipv4Addr::LOCALHOST)
        .expect("new serving certificate")
        .write(&tls_dir, "tls")
        .expect("new tls.crt, tls.key");
    let rotated = curl(
        &format!("{base}{path}"),
        Some(&ca_b_file),
        Some(&admin_token),
        &[],
    )
    .expect("curl with CA b");
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    assert!(
        curl(
            &format!("{base}{path}"),
            Some(&ca_a_file),
            Some(&admin_token),
            &[]
        )
        .is_err(),
        "the old certificate is still served"
    );

    // OCM's TLS profile, from the ConfigMap in the server's namespace: TLS 1.2 is served until a
    // profile forbids it, and again once the profile is gone.
    let tls12 = ["--tlsv1.2", "--tls-max", "1.2"];
    let tls13 = ["--tlsv1.3"];
    let url = format!("{base}{path}");
    let get = |versions: &[&str]| curl(&url, Some(&ca_b_file), Some(&admin_token), versions);
    assert_eq!(
        get(&tls12).map(|g| g.status),
        Ok(200),
        "TLS 1.2 before any profile"
    );
    let profile = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "ocm-tls-profile", "namespace": RELEASE_NS},
        "data": {"minTLSVersion": "VersionTLS13"},
    });
    apply_all(&hub, &[profile])
        .await
        .expect("the TLS profile ConfigMap");
    wait_until(
        "TLS 1.2 refused under the profile",
        Duration::from_secs(60),
        async || match get(&tls12) {
            Err(_) => Ok(()),
            Ok(got) => Err(format!("TLS 1.2 still answered {}", got.status)),
        },
    )
    .await;
    assert_eq!(
        get(&tls13).map(|g| g.status),
        Ok(200),
        "TLS 1.3 under the profile"
    );
    kubectl(
        &admin,
        &["delete", "configmap", "ocm-tls-profile", "-n", RELEASE_NS],
    )
    .expect("deleting the profile");
    wait_until(
        "TLS 1.2 served again without the profile",
        Duration::from_secs(60),
        async || get(&tls12).map(|g| assert_eq!(g.status, 200)),
    )
    .await;

    // The answers, counted.
    let metrics = curl(
        &format!("http://127.0.0.1:{metrics_port}/metrics"),
        None,
        None,
        &[],
    )
    .expect("metrics")
    .body;
    let metrics = metrics.as_str().unwrap_or_default();
    for (method, code) in [
        ("GET", "200"),
        ("GET", "401"),
        ("GET", "403"),
        ("GET", "404"),
        ("DELETE", "405"),
        ("POST", "200"),
        ("POST", "403"),
    ] {
        let line = format!("ocm_score_explain_requests_total{{method=\"{method}\",code=\"{code}\"}}");
        assert!(metrics.contains(&line), "no {line} in\n{metrics}");
    }
    assert!(
        metrics.contains("ocm_score_explain_tls_reloads_total{result=\"loaded\"} 1"),
        "{metrics}"
    );
    server
        .check_running()
        .expect("the explain server is still running");
    server.terminate();
}

/// The explain server's Service, as a client in the cluster names it (the name its certificates
/// are issued for).
const SERVICE_HOST: &str = "ocm-score-explain-server.ocm-score.svc";
const SERVER_SELECTOR: &str = "app.kubernetes.io/name=ocm-score-explain-server";
/// The TLS Secret the chart is told to mount.
const TLS_SECRET: &str = "explain-tls";

/// What a TLS client on the hub's node is served at `address` (a Service's ClusterIP or a pod's
/// IP) on `port`, for [`SERVICE_HOST`]: curl, run in the node's network namespace, verifying against
/// `ca_bundle`; returns the HTTP status of an unauthenticated GET of `/debug/placements/` and the
/// leaf certificate served (PEM, as curl prints it).
fn served_on_node(
    cp: &ControlPlane,
    address: &str,
    port: u16,
    ca_bundle: &Path,
) -> Result<(u16, String), String> {
    let node = cp.nodes().first().ok_or("the control plane has no node")?;
    let out = node
        .command("curl")
        .args(["-sS", "--max-time", "10", "-o", "/dev/null"])
        .args(["-w", "%{http_code}\n%{certs}"])
        .arg("--cacert")
        .arg(ca_bundle)
        .args(["--resolve", &format!("{SERVICE_HOST}:{port}:{address}")])
        .arg(format!("https://{SERVICE_HOST}:{port}/debug/placements/"))
        .output()
        .map_err(|e| format!("running curl on {}: {e}", node.name))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!(
            "curl {address}:{port} on {}: exit {:?}: {}",
            node.name,
            out.status.code(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let (status, certs) = text.split_once('\n').unwrap_or((&text, ""));
    let status = status
        .parse()
        .map_err(|e| format!("curl {address}:{port}: status {status:?}: {e}"))?;
    Ok((
        status,
        first_pem(certs).ok_or(format!("no certificate in {certs:?}"))?,
    ))
}

/// The first PEM certificate in `text`, its lines trimmed.
fn first_pem(text: &str) -> Option<String> {
    let start = text.find("-----BEGIN CERTIFICATE-----")?;
    let end = text[start..].find("-----END CERTIFICATE-----")? + start;
    let pem: Vec<&str> = text[start..end]
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    Some(format!("{}\n-----END CERTIFICATE-----", pem.join("\n")))
}

/// `kubectl apply -f` of the kubernetes.io/tls Secret [`TLS_SECRET`] holding `cert`, made the way a
/// user makes one (`kubectl create secret tls --dry-run=client -o yaml`).
fn apply_tls_secret(admin: &Path, dir: &Path, stem: &str, cert: &ocm_score_control_plane::pki::KeyedCert) {
    let (crt, key) = cert.write(dir, stem).expect("writing the certificate");
    let secret = kubectl(
        admin,
        &[
            "create",
            "secret",
            "tls",
            TLS_SECRET,
            "-n",
            RELEASE_NS,
            &format!("--cert={}", crt.display()),
            &format!("--key={}", key.display()),
            "--dry-run=client",
            "-o",
            "yaml",
        ],
    )
    .expect("the Secret's manifest");
    let file = dir.join(format!("{stem}-secret.yaml"));
    std::fs::write(&file, secret).expect("writing the Secret's manifest");
    kubectl(admin, &["apply", "-f", &file.display().to_string()]).expect("applying the Secret");
}

/// The explain server as the chart installs it, on the hub's kubelet-backed node, reached through
/// its Service: both replicas Ready by their probes; a client on the node, at the Service's
/// ClusterIP (the node's kube-proxy), is served the certificate of the Secret; a new Secret applied
/// with kubectl reaches the pods through the kubelet's atomic swap of the mounted files, and every
/// replica, and the Service, serves the new certificate without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_server_from_the_chart_serves_through_its_service_and_takes_a_rotated_secret() {
    let cp = ControlPlane::builder()
        .clusters(1)
        .ocm_addon_manager(false)
        .nodes(true)
        .start_with_progress(&|l| eprintln!("{l}"))
        .await
        .unwrap_or_else(|e| panic!("the control plane did not start: {e}"));
    let hub = cp.hub_client().await.expect("hub client");
    let admin = cp.hub_kubeconfig();
    let dir = TempDir::new("explain-server-chart");
    // Timed from the control plane's readiness, its own start added: not the wait for the machine
    // lock.
    let started = Instant::now();
    let took = || Duration::from_secs_f64(cp.start_seconds()) + started.elapsed();
    let logs = || {
        let get = |args: &[&str]| kubectl(&admin, args).unwrap_or_else(|e| e.to_string());
        format!(
            "--- pods\n{}\n--- logs\n{}\n--- events\n{}\n--- cluster1-kubelet\n{}",
            get(&["get", "pods", "-n", RELEASE_NS, "-o", "wide"]),
            get(&[
                "logs",
                "-n",
                RELEASE_NS,
                "-l",
                SERVER_SELECTOR,
                "--prefix",
                "--tail=20"
            ]),
            get(&["get", "events", "-n", RELEASE_NS, "--sort-by=.lastTimestamp"]),
            cp.log_tail("cluster1-kubelet", 10),
        )
    };

    // The namespace under the restricted Pod Security level, the first certificate's Secret, and
    // the chart with the explain server alone.
    kubectl(&admin, &["create", "namespace", RELEASE_NS]).expect("release namespace");
    kubectl(
        &admin,
        &[
            "label",
            "namespace",
            RELEASE_NS,
            "pod-security.kubernetes.io/enforce=restricted",
        ],
    )
    .expect("the namespace's Pod Security level");
    let (ca_a, ca_b) = (
        ClusterCa::new("explain-a").expect("CA a"),
        ClusterCa::new("explain-b").expect("CA b"),
    );
    let cas = dir.path().join("cas.crt");
    std::fs::write(&cas, format!("{}{}", ca_a.cert_pem(), ca_b.cert_pem())).expect("the CA bundle");
    let first = ca_a
        .serving_cert_for("explain", &[SERVICE_HOST])
        .expect("the first certificate");
    apply_tls_secret(&admin, dir.path(), "first", &first);
    chart::install(
        &admin,
        RELEASE_NS,
        &[
            "--set",
            "addonManager.enabled=false",
            "--set",
            "tiering.enabled=false",
            "--set",
            "explainServer.enabled=true",
            "--set",
            &format!("explainServer.tls.secretName={TLS_SECRET}"),
        ],
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let pods = eventually(
        "both explain server replicas Ready",
        Duration::from_secs(300),
        logs,
        || {
            let hub = hub.clone();
            async move {
                // A failed list is retried.
                let pods = ocm_score_control_plane::pods::ready_pods(&hub, RELEASE_NS, SERVER_SELECTOR)
                    .await
                    .ok()?;
                (pods.len() == 2).then_some(pods)
            }
        },
    )
    .await;
    eprintln!(
        "explain server Ready {:.0?} after the control plane started",
        took()
    );
    let pod_ips: Vec<String> = pods
        .iter()
        .map(|p| {
            p.status
                .as_ref()
                .and_then(|s| s.pod_ip.clone())
                .expect("a Ready pod has an IP")
        })
        .collect();
    let mut uids: Vec<String> = pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
    uids.sort();
    let service_ip = kubectl(
        &admin,
        &[
            "get",
            "service",
            "ocm-score-explain-server",
            "-n",
            RELEASE_NS,
            "-o",
            "jsonpath={.spec.clusterIP}",
        ],
    )
    .expect("the Service's ClusterIP");
    let service_ip = service_ip.trim();

    // Through the Service: the first certificate, and the server's own answer (401 without a token).
    let wanted = |cert: &ocm_score_control_plane::pki::KeyedCert| first_pem(&cert.cert_pem).expect("a PEM");
    let (status, served) =
        served_on_node(&cp, service_ip, 443, &cas).unwrap_or_else(|e| panic!("{e}\n{}", logs()));
    assert_eq!(status, 401, "the explain server answers through its Service");
    assert_eq!(served, wanted(&first), "the Secret's certificate is served");

    // A new certificate (another CA) applied as the Secret: the kubelet swaps the mounted files and
    // every replica serves it, as does the Service.
    let second = ca_b
        .serving_cert_for("explain", &[SERVICE_HOST])
        .expect("the second certificate");
    apply_tls_secret(&admin, dir.path(), "second", &second);
    let applied = Instant::now();
    eventually(
        "every replica and the Service serving the new certificate",
        Duration::from_secs(180),
        logs,
        || async {
            for ip in &pod_ips {
                let (_, served) = served_on_node(&cp, ip, 8443, &cas).ok()?;
                (served == wanted(&second)).then_some(())?;
            }
            let (status, served) = served_on_node(&cp, service_ip, 443, &cas).ok()?;
            (status == 401 && served == wanted(&second)).then_some(())
        },
    )
    .await;
    eprintln!(
        "new certificate served {:.0?} after the Secret was applied; {:.0?} since the control plane \
         started",
        applied.elapsed(),
        took()
    );
    // Picked up by the running servers: the same pods, no container restarted.
    let pods = ocm_score_control_plane::pods::all_pods(&hub, RELEASE_NS)
        .await
        .expect("listing the explain server's pods");
    let mut now: Vec<String> = pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
    now.sort();
    assert_eq!(now, uids, "the same pods serve");
    for pod in &pods {
        assert_eq!(
            ocm_score_control_plane::pods::restarts(pod),
            0,
            "{:?} restarted",
            pod.metadata.name
        );
    }
}
