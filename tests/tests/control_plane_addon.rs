//! The add-on end to end on the real control plane: installed from `manifests/hub` with `kubectl`,
//! our add-on manager running with exactly the identity those manifests give it, OCM's klusterlet
//! registering the add-on (CSR approved by us, signed by kube-controller-manager), OCM's work
//! agent deploying the agent, the agent run as its Deployment says with the certificate OCM issued,
//! its scores published, and OCM's placement controller choosing by them as `simulate` predicts.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Node, Pod, Secret};
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use ocm_score_tests::control_plane::ControlPlane;
use ocm_score_tests::support::TempDir;
use serde_json::{Value, json};

const ADDON: &str = "resource-usage-collect";
const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A binary of the workspace, built (once, by cargo) if this test run did not build it already.
fn workspace_binary(package: &str, name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    // target/<profile>/deps/<test> -> target/<profile>/<name>
    let profile_dir = exe.parent().and_then(Path::parent).expect("target dir");
    let path = profile_dir.join(name);
    if !path.is_file() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "--quiet", "-p", package, "--bin", name])
            .current_dir(workspace())
            .status()
            .expect("running cargo build");
        assert!(status.success(), "cargo build -p {package} --bin {name} failed");
    }
    path
}

fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("running kubectl");
    assert!(
        out.status.success(),
        "kubectl {} failed:\n{}\n{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A child process that is killed when the test ends, whatever the outcome.
struct Process {
    child: std::sync::Mutex<Child>,
    log: PathBuf,
}

impl Process {
    fn spawn(program: &Path, args: &[String], env: &[(String, String)], log: PathBuf) -> Self {
        let out = std::fs::File::create(&log).expect("log file");
        let child = Command::new(program)
            .args(args)
            .envs(env.iter().cloned())
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(out.try_clone().expect("log"))
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
        Process {
            child: std::sync::Mutex::new(child),
            log,
        }
    }

    /// The log tail, led by the exit status if the process has ended.
    fn report(&self) -> String {
        let status = self
            .child
            .lock()
            .map(|mut c| c.try_wait().ok().flatten())
            .ok()
            .flatten();
        match status {
            Some(status) => format!("exited ({status}):\n{}", self.tail()),
            _ => self.tail(),
        }
    }

    fn tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(30)..].join("\n")
    }

    fn stop(&mut self) {
        let Ok(child) = self.child.get_mut() else { return };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn eventually<T, F, Fut>(what: &str, timeout: Duration, context: impl Fn() -> String, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            started.elapsed() < timeout,
            "{what}: not within {timeout:?}\n{}",
            context()
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn dynamic(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    ns: Option<&str>,
) -> Api<DynamicObject> {
    let (resource, _) = pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
        .await
        .expect("kind served");
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

fn condition_true(object: &Value, kind: &str) -> bool {
    object
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

/// The Deployment's container, as OCM's work agent created it on the managed cluster.
async fn agent_deployment(managed: &kube::Client) -> Option<Deployment> {
    let api: Api<Deployment> = Api::namespaced(managed.clone(), INSTALL_NAMESPACE);
    api.list(&ListParams::default())
        .await
        .ok()?
        .items
        .into_iter()
        .next()
}

/// Nodes (no kubelet runs them; the API object is what the agent counts) and a pod bound to one.
async fn add_capacity(managed: &kube::Client, cluster: &str, nodes: usize) {
    let api: Api<Node> = Api::all(managed.clone());
    for i in 0..nodes {
        let node: Node = serde_json::from_value(json!({
            "metadata": {"name": format!("{cluster}-node-{i}"), "labels": {"kubernetes.io/os": "linux"}},
            "status": {
                "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        }))
        .expect("node");
        let created = api
            .create(&PostParams::default(), &node)
            .await
            .expect("create node");
        // Status is a subresource: create ignores it.
        let status = json!({"status": node.status});
        api.patch_status(
            created.metadata.name.as_deref().unwrap_or_default(),
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&status),
        )
        .await
        .expect("node status");
    }
}

/// One pod bound to `<cluster>-node-<node>` requesting `cpu` and `memory`.
async fn load(managed: &kube::Client, cluster: &str, node: usize, cpu: &str, memory: &str) {
    let ns: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(managed.clone());
    let _ = ns
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "load"}})).expect("ns"),
        )
        .await;
    // kube-controller-manager creates `default` in the new namespace; pods need it.
    let sas: Api<k8s_openapi::api::core::v1::ServiceAccount> = Api::namespaced(managed.clone(), "load");
    for _ in 0..100 {
        if sas.get_opt("default").await.ok().flatten().is_some() {
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
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .unwrap_or_else(|e| panic!("pod on {cluster}: {e}"));
}

async fn score_of(hub: &kube::Client, cluster: &str, name: &str) -> Option<i64> {
    let scores = dynamic(
        hub,
        "cluster.open-cluster-management.io",
        "v1alpha1",
        "AddOnPlacementScore",
        Some(cluster),
    )
    .await;
    let s = scores.get_opt("resource-usage-score").await.ok().flatten()?;
    s.data
        .pointer("/status/scores")
        .and_then(Value::as_array)?
        .iter()
        .find(|i| i["name"] == name)
        .and_then(|i| i["value"].as_i64())
}

async fn decided(hub: &kube::Client, namespace: &str, placement: &str) -> Vec<String> {
    let api = dynamic(
        hub,
        "cluster.open-cluster-management.io",
        "v1beta1",
        "PlacementDecision",
        Some(namespace),
    )
    .await;
    let list = api
        .list(&ListParams::default().labels(&format!(
            "cluster.open-cluster-management.io/placement={placement}"
        )))
        .await
        .expect("decisions");
    let mut out: Vec<String> = list
        .items
        .iter()
        .flat_map(|d| {
            d.data
                .pointer("/status/decisions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|d| d["clusterName"].as_str().map(str::to_owned))
        .collect();
    out.sort();
    out
}

/// Starts the agent of `cluster` exactly as its Deployment's container says: same args and env,
/// the mounted hub-kubeconfig Secret copied to a directory, the in-cluster identity replaced by a
/// token of the pod's ServiceAccount.
async fn run_agent_like_its_deployment(cp: &ControlPlane, cluster: &str, dir: &Path) -> Process {
    let managed = cp.cluster_client(cluster).await.expect("managed client");
    let deployment = agent_deployment(&managed).await.expect("agent Deployment");
    let pod = deployment.spec.expect("spec").template.spec.expect("pod spec");
    let container = pod.containers.first().expect("container").clone();

    // The Secret OCM's registration agent wrote, where the pod would mount it.
    let agent_dir = dir.join(cluster);
    let mount_dir = agent_dir.join("hub-kubeconfig");
    std::fs::create_dir_all(&mount_dir).expect("dir");
    let volume_mount = container
        .volume_mounts
        .as_ref()
        .and_then(|m| m.iter().find(|m| m.name == "hub-kubeconfig"))
        .expect("hub-kubeconfig mount")
        .clone();
    let secret_name = pod
        .volumes
        .as_ref()
        .and_then(|vs| vs.iter().find(|v| v.name == volume_mount.name))
        .and_then(|v| v.secret.as_ref())
        .and_then(|s| s.secret_name.clone())
        .expect("secret volume");
    let secrets: Api<Secret> = Api::namespaced(managed.clone(), INSTALL_NAMESPACE);
    let secret = secrets.get(&secret_name).await.expect("hub kubeconfig secret");
    for (key, value) in secret.data.unwrap_or_default() {
        let mut text = value.0;
        if key == "kubeconfig" {
            // The kubeconfig names its certificate files by their path in the pod.
            text = String::from_utf8_lossy(&text)
                .replace(&volume_mount.mount_path, &mount_dir.display().to_string())
                .into_bytes();
        }
        std::fs::write(mount_dir.join(&key), text).expect("write secret key");
    }

    let managed_kubeconfig = agent_dir.join("managed.kubeconfig");
    let sa = pod.service_account_name.clone().expect("service account");
    cp.write_service_account_kubeconfig(
        cluster,
        INSTALL_NAMESPACE,
        &sa,
        Duration::from_secs(3600),
        &managed_kubeconfig,
    )
    .await
    .expect("agent's managed-cluster identity");

    let args: Vec<String> = container
        .args
        .unwrap_or_default()
        .into_iter()
        .map(|a| a.replace(&volume_mount.mount_path, &mount_dir.display().to_string()))
        .collect();
    let mut env: Vec<(String, String)> = container
        .env
        .unwrap_or_default()
        .into_iter()
        .filter_map(|e| match (e.value, e.value_from) {
            (Some(v), _) => Some((e.name, v)),
            // The downward API, resolved as the kubelet would for a pod of this Deployment.
            (None, Some(from)) => from.field_ref.map(|f| {
                let value = match f.field_path.as_str() {
                    "metadata.namespace" => INSTALL_NAMESPACE.to_owned(),
                    "metadata.name" => format!("{ADDON}-agent-{cluster}"),
                    "spec.nodeName" => format!("{cluster}-node-0"),
                    other => panic!("unexpected fieldRef {other}"),
                };
                (e.name, value)
            }),
            _ => None,
        })
        .collect();
    env.push(("KUBECONFIG".into(), managed_kubeconfig.display().to_string()));
    env.push(("RUST_LOG".into(), "info,kube=warn".into()));
    // The metrics port inside the pod is free there, not necessarily on this machine.
    let metrics_port = ocm_score_tests::control_plane::free_port().expect("port");
    let argv: Vec<String> = args
        .into_iter()
        .map(|a| {
            if a.starts_with("--metrics-addr") {
                format!("--metrics-addr=127.0.0.1:{metrics_port}")
            } else {
                a
            }
        })
        .collect();
    let program = workspace_binary(
        "ocm-score-agent",
        container
            .command
            .as_ref()
            .and_then(|c| c.first())
            .map(String::as_str)
            .unwrap_or("ocm-score-agent"),
    );
    Process::spawn(&program, &argv, &env, agent_dir.join("agent.log"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn installed_from_manifests_the_addon_registers_deploys_publishes_and_places() {
    let cp = match ControlPlane::builder()
        .clusters(2)
        .start_with_progress(&|l| eprintln!("{l}"))
        .await
    {
        Ok(cp) => cp,
        Err(e) => panic!("the control plane did not start: {e}"),
    };
    let hub = cp.hub_client().await.expect("hub client");
    let hub_kc = cp.hub_kubeconfig();
    let dir = TempDir::new("addon-real");

    // 1. The install a user runs; our add-on manager as that Deployment's container, with its
    //    ServiceAccount's token and nothing more.
    kubectl(&hub_kc, &["apply", "-k", "manifests/hub"]);
    let manager_kubeconfig = dir.path().join("addon-manager.kubeconfig");
    cp.write_service_account_kubeconfig(
        "hub",
        "ocm-score",
        "ocm-score-addon-manager",
        Duration::from_secs(3600),
        &manager_kubeconfig,
    )
    .await
    .expect("the add-on manager's identity");
    let deployments: Api<Deployment> = Api::namespaced(hub.clone(), "ocm-score");
    let manager = deployments
        .get("ocm-score-addon-manager")
        .await
        .expect("the Deployment was applied");
    let container = manager.spec.expect("spec").template.spec.expect("pod").containers[0].clone();
    let mut args: Vec<String> = container.args.unwrap_or_default();
    args.retain(|a| !a.starts_with("--metrics-bind-address"));
    args.push("--metrics-bind-address=127.0.0.1:0".into());
    args.push(format!("--kubeconfig={}", manager_kubeconfig.display()));
    let env = vec![
        ("POD_NAMESPACE".to_owned(), "ocm-score".to_owned()),
        ("POD_NAME".to_owned(), "ocm-score-addon-manager-0".to_owned()),
        ("RUST_LOG".to_owned(), "info,kube=warn".to_owned()),
    ];
    let hub_binary = workspace_binary("ocm-score-hub", "ocm-score-hub");
    let manager = Process::spawn(&hub_binary, &args, &env, dir.path().join("addon-manager.log"));

    // 2. The install strategy (Placement all-clusters over `global`) gives both clusters the add-on.
    let mcas = dynamic(
        &hub,
        "addon.open-cluster-management.io",
        "v1alpha1",
        "ManagedClusterAddOn",
        None,
    )
    .await;
    let wait = Duration::from_secs(120);
    let clusters = ["cluster1", "cluster2"];
    eventually(
        "a ManagedClusterAddOn per cluster",
        wait,
        || manager.report(),
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

    // 3. OCM's registration agent asks for a certificate, we approve, kube-controller-manager signs,
    //    and the agent's hub kubeconfig lands in the install namespace of each managed cluster.
    for cluster in clusters {
        let managed = cp.cluster_client(cluster).await.expect("managed client");
        let secrets: Api<Secret> = Api::namespaced(managed, INSTALL_NAMESPACE);
        let secret_name = format!("{ADDON}-hub-kubeconfig");
        let secret = eventually(
            &format!("{cluster}: {secret_name}"),
            wait,
            || {
                format!(
                    "{}\n--- klusterlet:\n{}",
                    manager.tail(),
                    cp.log_tail(&format!("{cluster}-klusterlet"), 20)
                )
            },
            || {
                let secrets = secrets.clone();
                let name = secret_name.clone();
                async move {
                    let s = secrets.get_opt(&name).await.ok().flatten()?;
                    let data = s.data.clone()?;
                    (data.contains_key("tls.crt") && data.contains_key("kubeconfig")).then_some(s)
                }
            },
        )
        .await;
        // Signed by the hub's CA for the add-on's agent user.
        let cert = String::from_utf8_lossy(&secret.data.expect("data")["tls.crt"].0).into_owned();
        assert!(cert.contains("BEGIN CERTIFICATE"), "{cluster}: a certificate");
    }

    // 4. OCM's work agent applies our ManifestWork on each cluster.
    for cluster in clusters {
        let works = dynamic(
            &hub,
            "work.open-cluster-management.io",
            "v1",
            "ManifestWork",
            Some(cluster),
        )
        .await;
        let work_name = format!("addon-{ADDON}-deploy-0");
        eventually(
            &format!("{cluster}: {work_name} Applied and Available"),
            wait,
            || cp.log_tail(&format!("{cluster}-klusterlet"), 20),
            || {
                let works = works.clone();
                let name = work_name.clone();
                async move {
                    let w = works.get_opt(&name).await.ok().flatten()?;
                    (condition_true(&w.data, "Applied") && condition_true(&w.data, "Available")).then_some(())
                }
            },
        )
        .await;
        let managed = cp.cluster_client(cluster).await.expect("managed client");
        assert!(
            agent_deployment(&managed).await.is_some(),
            "{cluster}: the agent Deployment exists"
        );
    }

    // 5. Capacity to count, then each agent run as its Deployment says.
    for (cluster, nodes) in [("cluster1", 2), ("cluster2", 2)] {
        let managed = cp.cluster_client(cluster).await.expect("managed client");
        add_capacity(&managed, cluster, nodes).await;
    }
    let mut agents = BTreeMap::new();
    for cluster in clusters {
        agents.insert(
            cluster,
            run_agent_like_its_deployment(&cp, cluster, dir.path()).await,
        );
    }
    for cluster in clusters {
        let agent = &agents[cluster];
        eventually(
            &format!("{cluster}: resource-usage-score published"),
            wait,
            || agent.report(),
            || {
                let hub = hub.clone();
                async move { score_of(&hub, cluster, "cpuClusterAvailable").await }
            },
        )
        .await;
    }

    // The klusterlet's lease controller sees each agent's Lease: the add-on is Available.
    for cluster in clusters {
        let mcas = dynamic(
            &hub,
            "addon.open-cluster-management.io",
            "v1alpha1",
            "ManagedClusterAddOn",
            Some(cluster),
        )
        .await;
        eventually(
            &format!("{cluster}: ManagedClusterAddOn Available"),
            wait,
            || agents[cluster].report(),
            || {
                let mcas = mcas.clone();
                async move {
                    let m = mcas.get_opt(ADDON).await.ok().flatten()?;
                    condition_true(&m.data, "Available").then_some(())
                }
            },
        )
        .await;
    }

    // With cluster1's certificate, cluster2's namespace is out of reach.
    let c1_kubeconfig = dir.path().join("cluster1/hub-kubeconfig/kubeconfig");
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&c1_kubeconfig)
        .args([
            "auth",
            "can-i",
            "patch",
            "addonplacementscores/status",
            "-n",
            "cluster2",
        ])
        .output()
        .expect("kubectl");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "no",
        "cluster1's agent may not write cluster2's score"
    );
    let out = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&c1_kubeconfig)
        .args([
            "auth",
            "can-i",
            "patch",
            "addonplacementscores/status",
            "-n",
            "cluster1",
        ])
        .output()
        .expect("kubectl");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "yes",
        "cluster1's agent writes its own score"
    );

    // 6. A user's Placement on those scores: OCM decides by them.
    kubectl(&hub_kc, &["apply", "-k", "manifests/examples"]);
    let first = eventually("OCM decides most-free-memory", wait, String::new, || {
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

    // 7. Load on the chosen cluster (every node 30 of 32 Gi requested): its memory score drops
    //    below the other's, its agent publishes, and OCM moves the decision.
    let loaded = cp.cluster_client(&chosen).await.expect("client");
    for node in 0..2 {
        load(&loaded, &chosen, node, "100m", "30Gi").await;
    }
    let (low, high) = eventually(
        &format!("{chosen}'s memory score drops below {other}'s"),
        wait,
        || agents[chosen.as_str()].report(),
        || {
            let hub = hub.clone();
            let (chosen, other) = (chosen.clone(), other.to_owned());
            async move {
                let low = score_of(&hub, &chosen, "memClusterAvailable").await?;
                let high = score_of(&hub, &other, "memClusterAvailable").await?;
                (low < high).then_some((low, high))
            }
        },
    )
    .await;
    eprintln!("memClusterAvailable after load: {chosen} {low} < {other} {high}");
    eventually(&format!("OCM moves most-free-memory to {other}"), wait, String::new, || {
        let hub = hub.clone();
        async move { (decided(&hub, "ocm-score-examples", "most-free-memory").await == [other]).then_some(()) }
    })
    .await;

    // simulate, on a snapshot taken the way the README says, predicts every decision OCM made.
    let snapshot = kubectl(
        &hub_kc,
        &[
            "get",
            "managedclusters,managedclustersets,managedclustersetbindings,placements,placementdecisions,addonplacementscores",
            "-A",
            "-o",
            "yaml",
        ],
    );
    let snapshot_file = dir.path().join("snapshot.yaml");
    std::fs::write(&snapshot_file, &snapshot).expect("snapshot");
    let out = Command::new(&hub_binary)
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
    for placement in [
        "most-free-cpu",
        "most-free-memory",
        "cpu-steady",
        "gpu",
        "all-clusters",
    ] {
        let ns = if placement == "all-clusters" {
            "ocm-score"
        } else {
            "ocm-score-examples"
        };
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

    // 8. Steady state beside OCM's own addon-manager: one minute without a single write to the
    //    add-on's objects (resourceVersions unchanged). Scores are left out: renewing validUntil is
    //    their contract.
    let before = addon_object_versions(&hub, &clusters).await;
    assert!(
        before.len() >= 7,
        "CMA, ADC, two add-ons, two works and hub RBAC: {before:?}"
    );
    tokio::time::sleep(Duration::from_secs(60)).await;
    let after = addon_object_versions(&hub, &clusters).await;
    let changed: Vec<_> = before
        .iter()
        .filter(|(k, v)| after.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .collect();
    assert!(
        changed.is_empty(),
        "written during a minute of steady state: {changed:?}\n{}",
        manager.report()
    );

    // 9. Removal: with a manual install strategy, deleting cluster2's add-on removes its work, the
    //    agent from cluster2, its hub RBAC and (once the agent is gone, as the kubelet would stop
    //    it) its score.
    kubectl(
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
    kubectl(
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
    eventually(
        "the agent leaves cluster2",
        wait,
        || cp.log_tail("cluster2-klusterlet", 20),
        || {
            let c2 = c2.clone();
            async move { agent_deployment(&c2).await.is_none().then_some(()) }
        },
    )
    .await;
    if let Some(mut agent) = agents.remove("cluster2") {
        agent.stop();
    }
    let works = dynamic(
        &hub,
        "work.open-cluster-management.io",
        "v1",
        "ManifestWork",
        Some("cluster2"),
    )
    .await;
    let work_name = format!("addon-{ADDON}-deploy-0");
    eventually(
        "cluster2's ManifestWork goes",
        wait,
        || manager.report(),
        || {
            let works = works.clone();
            let name = work_name.clone();
            async move { works.get_opt(&name).await.ok().flatten().is_none().then_some(()) }
        },
    )
    .await;
    eventually(
        "cluster2's score and hub RBAC go",
        wait,
        || manager.report(),
        || {
            let hub = hub.clone();
            async move {
                let versions = addon_object_versions(&hub, &["cluster2"]).await;
                let score = score_of(&hub, "cluster2", "cpuClusterAvailable").await;
                (versions.keys().all(|k| !k.contains("cluster2")) && score.is_none()).then_some(())
            }
        },
    )
    .await;
}

/// resourceVersions of the add-on's hub objects: the ClusterManagementAddOn, the
/// AddOnDeploymentConfig, each cluster's ManagedClusterAddOn, ManifestWorks and hub Roles and
/// RoleBindings named for the add-on.
async fn addon_object_versions(hub: &kube::Client, clusters: &[&str]) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut record = |what: String, obj: Option<DynamicObject>| {
        if let Some(o) = obj {
            out.insert(what, o.metadata.resource_version.unwrap_or_default());
        }
    };
    let cma = dynamic(
        hub,
        "addon.open-cluster-management.io",
        "v1alpha1",
        "ClusterManagementAddOn",
        None,
    )
    .await;
    record(
        "ClusterManagementAddOn".into(),
        cma.get_opt(ADDON).await.ok().flatten(),
    );
    let adc = dynamic(
        hub,
        "addon.open-cluster-management.io",
        "v1alpha1",
        "AddOnDeploymentConfig",
        Some("ocm-score"),
    )
    .await;
    record(
        "AddOnDeploymentConfig".into(),
        adc.get_opt(ADDON).await.ok().flatten(),
    );
    for cluster in clusters {
        let mca = dynamic(
            hub,
            "addon.open-cluster-management.io",
            "v1alpha1",
            "ManagedClusterAddOn",
            Some(cluster),
        )
        .await;
        record(
            format!("{cluster}/ManagedClusterAddOn"),
            mca.get_opt(ADDON).await.ok().flatten(),
        );
        let works = dynamic(
            hub,
            "work.open-cluster-management.io",
            "v1",
            "ManifestWork",
            Some(cluster),
        )
        .await;
        for w in works
            .list(&ListParams::default())
            .await
            .map(|l| l.items)
            .unwrap_or_default()
        {
            let name = w.metadata.name.clone().unwrap_or_default();
            if name.contains(ADDON) {
                record(format!("{cluster}/ManifestWork/{name}"), Some(w));
            }
        }
        for kind in ["Role", "RoleBinding"] {
            let api = dynamic(hub, "rbac.authorization.k8s.io", "v1", kind, Some(cluster)).await;
            for o in api
                .list(&ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default()
            {
                let name = o.metadata.name.clone().unwrap_or_default();
                if name.contains(ADDON) {
                    record(format!("{cluster}/{kind}/{name}"), Some(o));
                }
            }
        }
    }
    out
}
