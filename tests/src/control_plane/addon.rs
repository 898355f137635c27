//! Our add-on on a running [`ControlPlane`], the way a user installs it: `manifests/hub` applied with
//! `kubectl`, the add-on manager run as that Deployment's container with its ServiceAccount's token,
//! each agent run as the Deployment OCM's work agent created says. Shared by the end-to-end tests
//! and `control-plane demo`.
//!
//! No kubelet runs here, so a Deployment never gets pods: [`start_agent`] plays the kubelet for the
//! agent (same args and env, the mounted Secret copied to a directory, the pod's ServiceAccount as
//! a token), and [`add_nodes`] / [`add_pod`] create the API objects the agent counts.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, Namespace, Node, Pod, Secret, ServiceAccount};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use serde_json::{Value, json};

use super::process::{Component, Tier};
use super::{ControlPlane, Error, free_port, go_components};

/// The add-on's name in `manifests/hub` (drop-in for OCM's `resource-usage-collect`).
pub const ADDON: &str = "resource-usage-collect";
/// Where the agent runs on a managed cluster.
pub const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
/// The namespace `manifests/hub` installs the add-on manager into.
pub const HUB_NAMESPACE: &str = "ocm-score";

/// The workspace root (manifests, examples).
pub fn workspace_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    dir.canonicalize().unwrap_or(dir)
}

/// A binary of this workspace (`ocm-score-hub`, `ocm-score-agent`) in the target directory and
/// profile of the running executable. It is always (re)built first: a test run of one package
/// would otherwise run whatever older build of the other package's binary lies there. When it is
/// up to date, the build is a no-op of about a second.
///
/// Every caller builds all of the workspace's binaries in one command (`--workspace --bins`), so
/// there is one feature resolution for them all and their dependencies compile once: a `-p`
/// build per package resolves features per package and would compile the whole dependency tree
/// again for each (minutes, and gigabytes of disk, on a CI machine). `scripts/test.sh` starts the
/// same build, so here it is usually a no-op.
pub fn workspace_binary(name: &str) -> Result<PathBuf, Error> {
    let exe = std::env::current_exe().map_err(|source| Error::Io {
        what: "locating this executable".into(),
        source,
    })?;
    // target/<profile>/<exe> or target/<profile>/deps/<test exe>
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let profile = match dir.file_name().and_then(|n| n.to_str()) {
        Some("debug") | None => "dev".to_owned(),
        Some(other) => other.to_owned(),
    };
    let target_dir = dir.parent().map(Path::to_path_buf).unwrap_or_else(|| dir.clone());
    let path = dir.join(name);
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut build = Command::new(cargo);
    // A test process carries the variables cargo sets for its crate (CARGO_PKG_NAME, ...). Build
    // scripts watch some of them (ring's `rerun-if-env-changed=CARGO_PKG_NAME`), so passing them on
    // rebuilt ring, rustls, kube and our crates whenever the caller's package differed from the last
    // build's: minutes per switch on two cores.
    for (key, _) in std::env::vars_os() {
        if key.to_str().is_some_and(set_by_cargo_for_a_crate) {
            build.env_remove(key);
        }
    }
    let status = build
        .args(["build", "--quiet", "--workspace", "--bins", "--profile", &profile])
        .arg("--target-dir")
        .arg(&target_dir)
        .current_dir(workspace_dir())
        .status()
        .map_err(|source| Error::Io {
            what: "running cargo build --workspace --bins".into(),
            source,
        })?;
    if !status.success() || !path.is_file() {
        return Err(Error::Options(format!(
            "cargo build --workspace --bins --profile {profile} did not produce {}",
            path.display()
        )));
    }
    Ok(path)
}

/// Whether cargo sets `name` for the crate it builds or runs (not configuration of cargo itself,
/// like `CARGO_HOME`, `CARGO_TARGET_DIR` or `CARGO_PROFILE_*`, which a nested build must keep).
fn set_by_cargo_for_a_crate(name: &str) -> bool {
    const EXACT: [&str; 6] = [
        "OUT_DIR",
        "CARGO_CRATE_NAME",
        "CARGO_BIN_NAME",
        "CARGO_PRIMARY_PACKAGE",
        "CARGO_TARGET_TMPDIR",
        "CARGO_RUSTC_CURRENT_DIR",
    ];
    const PREFIXES: [&str; 4] = ["CARGO_PKG_", "CARGO_MANIFEST_", "CARGO_BIN_EXE_", "CARGO_CFG_"];
    EXACT.contains(&name) || PREFIXES.iter().any(|p| name.starts_with(p))
}

/// The `kubectl` on `PATH`, else the one built with the control plane (same release as the servers).
pub fn kubectl_binary() -> Result<PathBuf, Error> {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file());
    match on_path {
        Some(p) => Ok(p),
        None => Ok(go_components::ensure_built(&|_| {})?.bin("kubectl")),
    }
}

/// Runs `kubectl --kubeconfig <kubeconfig> <args>` in the workspace; its stdout, or an error with
/// both outputs.
pub fn kubectl(kubeconfig: &Path, args: &[&str]) -> Result<String, Error> {
    let out = Command::new(kubectl_binary()?)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(args)
        .current_dir(workspace_dir())
        .output()
        .map_err(|source| Error::Io {
            what: "running kubectl".into(),
            source,
        })?;
    if !out.status.success() {
        return Err(Error::Options(format!(
            "kubectl {} failed: {}{}",
            args.join(" "),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A namespaced or cluster-scoped dynamic API for a kind, found by discovery.
pub async fn dynamic(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    namespace: Option<&str>,
) -> Result<Api<DynamicObject>, Error> {
    let (resource, _) = pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
        .await
        .map_err(|source| Error::Kube {
            what: format!("discovering {kind}"),
            source,
        })?;
    Ok(match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    })
}

/// `kubectl apply -k manifests/hub`, then the add-on manager as the applied Deployment's container:
/// its args (metrics on a free loopback port instead of the pod's), the downward-API env, and a
/// token of its ServiceAccount, so it has exactly the RBAC the manifests grant.
pub async fn install_and_start_manager(cp: &ControlPlane, dir: &Path) -> Result<Component, Error> {
    install_from_and_start_manager(cp, Path::new("manifests/hub"), dir).await
}

/// [`install_and_start_manager`] from another kustomization (an overlay of `manifests/hub`).
pub async fn install_from_and_start_manager(
    cp: &ControlPlane,
    kustomization: &Path,
    dir: &Path,
) -> Result<Component, Error> {
    let kustomization = kustomization.to_string_lossy();
    kubectl(&cp.hub_kubeconfig(), &["apply", "-k", &kustomization])?;
    start_manager(cp, dir).await
}

/// [`install_and_start_manager`] with the AddOnDeploymentConfig's `customizedVariables` set as a
/// user tunes the agents: counting the cluster's pods, refreshing every `refresh`, scores valid for
/// `validity`. Returns the manager and the `--refresh-interval` argument the agents' Deployments
/// carry once the configuration has reached them.
pub async fn install_with_timing_and_start_manager(
    cp: &ControlPlane,
    refresh: Duration,
    validity: Duration,
    dir: &Path,
) -> Result<(Component, String), Error> {
    let hub_kc = cp.hub_kubeconfig();
    kubectl(&hub_kc, &["apply", "-k", "manifests/hub"])?;
    let refresh = format!("{}s", refresh.as_secs());
    let validity = format!("{}s", validity.as_secs());
    set_agent_variables(
        &hub_kc,
        &[
            ("SOURCES", "cluster"),
            ("REFRESH_INTERVAL", &refresh),
            ("SCORE_VALIDITY", &validity),
        ],
    )?;
    let manager = start_manager(cp, dir).await?;
    Ok((manager, format!("--refresh-interval={refresh}")))
}

/// Replaces the shipped AddOnDeploymentConfig's `customizedVariables` (the agents' environment)
/// with `variables`, as a user's `kubectl patch` does.
pub fn set_agent_variables(hub_kc: &Path, variables: &[(&str, &str)]) -> Result<(), Error> {
    let variables: Vec<Value> = variables
        .iter()
        .map(|(name, value)| json!({"name": name, "value": value}))
        .collect();
    patch_agent_config(hub_kc, &json!({"spec": {"customizedVariables": variables}}))
}

/// Merge-patches the shipped AddOnDeploymentConfig with `patch` (one `kubectl patch`: one new spec
/// hash).
pub fn patch_agent_config(hub_kc: &Path, patch: &Value) -> Result<(), Error> {
    kubectl(
        hub_kc,
        &[
            "patch",
            "addondeploymentconfig",
            ADDON,
            "-n",
            HUB_NAMESPACE,
            "--type=merge",
            "-p",
            &patch.to_string(),
        ],
    )?;
    Ok(())
}

/// Waits (panicking after `wait`, with `context` in the message) until OCM has installed the agent
/// on `cluster`: its Deployment, with `arg` among the container's args when given, and the hub
/// kubeconfig with its certificate ([`wait_agent_certificate`]).
pub async fn wait_agent_installed(
    cp: &ControlPlane,
    cluster: &str,
    arg: Option<&str>,
    wait: Duration,
    context: impl Fn() -> String,
) {
    let managed = match cp.cluster_client(cluster).await {
        Ok(client) => client,
        Err(e) => panic!("{cluster}: no client: {e}"),
    };
    crate::support::eventually(
        &format!("{cluster}: the agent Deployment (with {arg:?})"),
        wait,
        &context,
        || {
            let managed = managed.clone();
            async move {
                let d = agent_deployment(&managed).await?;
                let args = d.spec?.template.spec?.containers.first()?.args.clone()?;
                arg.is_none_or(|arg| args.iter().any(|a| a == arg)).then_some(())
            }
        },
    )
    .await;
    wait_agent_certificate(cp, cluster, wait, context).await;
}

/// Waits (panicking after `wait`) until the agent's hub kubeconfig Secret in `cluster`'s install
/// namespace holds the certificate OCM issued it: OCM's registration agent asked, our manager
/// approved, kube-controller-manager signed. `context` and the klusterlet's log go in the message.
pub async fn wait_agent_certificate(
    cp: &ControlPlane,
    cluster: &str,
    wait: Duration,
    context: impl Fn() -> String,
) {
    let managed = match cp.cluster_client(cluster).await {
        Ok(client) => client,
        Err(e) => panic!("{cluster}: no client: {e}"),
    };
    let secrets: Api<Secret> = Api::namespaced(managed, INSTALL_NAMESPACE);
    let secret_name = format!("{ADDON}-hub-kubeconfig");
    crate::support::eventually(
        &format!("{cluster}: {secret_name} with a certificate"),
        wait,
        || {
            format!(
                "{}\n--- klusterlet:\n{}",
                context(),
                cp.log_tail(&format!("{cluster}-klusterlet"), 20)
            )
        },
        || {
            let secrets = secrets.clone();
            let name = secret_name.clone();
            async move {
                let data = secrets.get_opt(&name).await.ok().flatten()?.data?;
                let cert = String::from_utf8_lossy(&data.get("tls.crt")?.0).into_owned();
                (cert.contains("BEGIN CERTIFICATE") && data.contains_key("kubeconfig")).then_some(())
            }
        },
    )
    .await;
}

/// The add-on manager as the installed Deployment's container (see [`install_and_start_manager`]),
/// for a test that changes something between the install and the start.
pub async fn start_manager(cp: &ControlPlane, dir: &Path) -> Result<Component, Error> {
    start_manager_with(cp, dir, &[]).await
}

/// [`start_manager`] with `extra_args` after the Deployment's (a later flag wins), for a benchmark
/// that shortens a period to observe it.
pub async fn start_manager_with(
    cp: &ControlPlane,
    dir: &Path,
    extra_args: &[String],
) -> Result<Component, Error> {
    let kubeconfig = dir.join("addon-manager.kubeconfig");
    cp.write_service_account_kubeconfig(
        "hub",
        HUB_NAMESPACE,
        "ocm-score-addon-manager",
        Duration::from_secs(4 * 3600),
        &kubeconfig,
    )
    .await?;
    let hub = cp.hub_client().await?;
    let deployments: Api<Deployment> = Api::namespaced(hub, HUB_NAMESPACE);
    let deployment = deployments
        .get("ocm-score-addon-manager")
        .await
        .map_err(|source| Error::Kube {
            what: "reading the add-on manager's Deployment".into(),
            source,
        })?;
    let container = deployment
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|p| p.containers.into_iter().next())
        .ok_or_else(|| Error::Options("the add-on manager's Deployment has no container".into()))?;
    let mut args: Vec<String> = container.args.clone().unwrap_or_default();
    args.retain(|a| !a.starts_with("--metrics-bind-address"));
    args.push(format!("--metrics-bind-address=127.0.0.1:{}", free_port()?));
    args.push(format!("--kubeconfig={}", kubeconfig.display()));
    args.extend(extra_args.iter().cloned());
    // The pod keeps its name across container restarts, and so the manager its leader identity.
    let mut env = container_env(&container, HUB_NAMESPACE, "ocm-score-addon-manager-0")?;
    env.push(("RUST_LOG".into(), "info,kube=warn".into()));
    env.push(("NO_COLOR".into(), "1".into()));
    let program = workspace_binary("ocm-score-hub")?;
    let env_refs: Vec<(&str, String)> = env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    Component::spawn(
        "ocm-score-addon-manager",
        Tier::Client,
        &program,
        &args,
        &env_refs,
        dir,
    )
}

/// A container's environment as the kubelet resolves it for a pod `pod_name` in `namespace`: plain
/// values, and the downward API's namespace and name (a harness that plays the kubelet resolves no
/// other reference, and says so).
fn container_env(
    container: &Container,
    namespace: &str,
    pod_name: &str,
) -> Result<Vec<(String, String)>, Error> {
    let mut env = Vec::new();
    for var in container.env.clone().unwrap_or_default() {
        let value = match (var.value, var.value_from.and_then(|f| f.field_ref)) {
            (Some(v), _) => v,
            (None, Some(field)) => match field.field_path.as_str() {
                "metadata.namespace" => namespace.to_owned(),
                "metadata.name" => pod_name.to_owned(),
                other => {
                    return Err(Error::Options(format!(
                        "container {} asks for fieldRef {other}, which this harness does not resolve",
                        container.name
                    )));
                }
            },
            (None, None) => continue,
        };
        env.push((var.name, value));
    }
    Ok(env)
}

/// The hub snapshot `simulate -f` reads, taken with `kubectl get ... -A -o yaml` as docs/simulate.md says.
pub fn hub_snapshot(hub_kubeconfig: &Path) -> Result<String, Error> {
    kubectl(
        hub_kubeconfig,
        &[
            "get",
            "managedclusters,managedclustersets,managedclustersetbindings,placements,placementdecisions,addonplacementscores",
            "-A",
            "-o",
            "yaml",
        ],
    )
}

/// The agent Deployment OCM's work agent created on a managed cluster, if any.
pub async fn agent_deployment(managed: &kube::Client) -> Option<Deployment> {
    let api: Api<Deployment> = Api::namespaced(managed.clone(), INSTALL_NAMESPACE);
    api.list(&ListParams::default())
        .await
        .ok()?
        .items
        .into_iter()
        .next()
}

/// Plays the kubelet for the agent of `cluster`: runs `ocm-score-agent` with its Deployment's args
/// and env, the hub-kubeconfig Secret copied where the args expect the mount, and a token of the
/// pod's ServiceAccount as its managed-cluster identity.
pub async fn start_agent(cp: &ControlPlane, cluster: &str, dir: &Path) -> Result<Component, Error> {
    let managed = cp.cluster_client(cluster).await?;
    let deployment = agent_deployment(&managed)
        .await
        .ok_or_else(|| Error::Options(format!("no agent Deployment on {cluster} yet")))?;
    let pod = deployment
        .spec
        .and_then(|s| s.template.spec)
        .ok_or_else(|| Error::Options("no pod template".into()))?;
    let container = pod
        .containers
        .first()
        .cloned()
        .ok_or_else(|| Error::Options("no container".into()))?;

    let agent_dir = dir.join(format!("agent-{cluster}"));
    let mount_dir = agent_dir.join("hub-kubeconfig");
    std::fs::create_dir_all(&mount_dir).map_err(|source| Error::Io {
        what: format!("creating {}", mount_dir.display()),
        source,
    })?;
    let mount = container
        .volume_mounts
        .as_ref()
        .and_then(|m| m.iter().find(|m| m.name == "hub-kubeconfig"))
        .cloned()
        .ok_or_else(|| Error::Options("the agent container mounts no hub-kubeconfig".into()))?;
    let secret_name = pod
        .volumes
        .as_ref()
        .and_then(|vs| vs.iter().find(|v| v.name == mount.name))
        .and_then(|v| v.secret.as_ref())
        .and_then(|s| s.secret_name.clone())
        .ok_or_else(|| Error::Options("the hub-kubeconfig volume is not a Secret".into()))?;
    let secrets: Api<Secret> = Api::namespaced(managed.clone(), INSTALL_NAMESPACE);
    let secret = secrets.get(&secret_name).await.map_err(|source| Error::Kube {
        what: format!("reading Secret {secret_name} on {cluster}"),
        source,
    })?;
    let mount_path = mount_dir.display().to_string();
    for (key, value) in secret.data.unwrap_or_default() {
        let mut bytes = value.0;
        if key == "kubeconfig" {
            // The kubeconfig names its certificate files by their path in the pod.
            bytes = String::from_utf8_lossy(&bytes)
                .replace(&mount.mount_path, &mount_path)
                .into_bytes();
        }
        let file = mount_dir.join(&key);
        std::fs::write(&file, bytes).map_err(|source| Error::Io {
            what: format!("writing {}", file.display()),
            source,
        })?;
    }

    let managed_kubeconfig = agent_dir.join("managed.kubeconfig");
    let sa = pod
        .service_account_name
        .clone()
        .unwrap_or_else(|| "default".into());
    cp.write_service_account_kubeconfig(
        cluster,
        INSTALL_NAMESPACE,
        &sa,
        Duration::from_secs(4 * 3600),
        &managed_kubeconfig,
    )
    .await?;

    let metrics_port = free_port()?;
    let args: Vec<String> = container
        .args
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|a| a.replace(&mount.mount_path, &mount_path))
        // The pod's port is free in the pod, not necessarily on this machine.
        .map(|a| {
            if a.starts_with("--metrics-bind-address") {
                format!("--metrics-bind-address=127.0.0.1:{metrics_port}")
            } else {
                a
            }
        })
        .collect();
    let mut env = container_env(&container, INSTALL_NAMESPACE, &format!("{ADDON}-agent-{cluster}"))?;
    env.push(("KUBECONFIG".into(), managed_kubeconfig.display().to_string()));
    env.push(("RUST_LOG".into(), "info,kube=warn".into()));
    env.push(("NO_COLOR".into(), "1".into()));
    let command = container
        .command
        .as_ref()
        .and_then(|c| c.first())
        .cloned()
        .unwrap_or_else(|| "ocm-score-agent".into());
    let program = workspace_binary(&command)?;
    let env_refs: Vec<(&str, String)> = env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    Component::spawn(
        &format!("ocm-score-agent-{cluster}"),
        Tier::Client,
        &program,
        &args,
        &env_refs,
        dir,
    )
}

/// The flags of `ocm-score-agent run` that `once` shares: what to score and how.
const SCORING_FLAGS: [&str; 5] = [
    "--source",
    "--extended-resource",
    "--normalize",
    "--scores",
    "--score-object-name",
];

/// What a fresh agent computes right now: `ocm-score-agent once` with the scoring flags, environment
/// and managed-cluster identity of `agent` (one [`start_agent`] started); the YAML it prints.
pub fn agent_once(agent: &Component) -> Result<String, Error> {
    let scoring = agent
        .args()
        .iter()
        .filter(|a| SCORING_FLAGS.iter().any(|f| a.split('=').next() == Some(*f)));
    let out = Command::new(agent.program())
        .arg("once")
        .args(scoring)
        .envs(agent.env().iter().map(|(k, v)| (k, v)))
        .output()
        .map_err(|source| Error::Io {
            what: format!("running {} once", agent.program().display()),
            source,
        })?;
    if !out.status.success() {
        return Err(Error::Component {
            component: format!("{} once", agent.name()),
            problem: format!(
                "exited ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Creates `count` Ready nodes of 8 CPUs and 32 GiB on a managed cluster (API objects only).
pub async fn add_nodes(managed: &kube::Client, cluster: &str, count: usize) -> Result<(), Error> {
    let api: Api<Node> = Api::all(managed.clone());
    let status = json!({"status": {
        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        "conditions": [{"type": "Ready", "status": "True"}],
    }});
    for i in 0..count {
        let name = format!("{cluster}-node-{i}");
        let node: Node = serde_json::from_value(
            json!({"metadata": {"name": name, "labels": {"kubernetes.io/os": "linux"}}}),
        )
        .map_err(|e| Error::Options(e.to_string()))?;
        api.create(&PostParams::default(), &node)
            .await
            .map_err(|source| Error::Kube {
                what: format!("creating node {name}"),
                source,
            })?;
        // Status is a subresource: create ignores it.
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .map_err(|source| Error::Kube {
                what: format!("node {name} status"),
                source,
            })?;
        // The API server's TaintNodesByCondition admission taints every new node not-ready
        // (NoSchedule); the node lifecycle controller, which this control plane does not run,
        // lifts it once the node reports Ready. Lift it here, as it would.
        api.patch(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": null}})),
        )
        .await
        .map_err(|source| Error::Kube {
            what: format!("node {name} taints"),
            source,
        })?;
    }
    Ok(())
}

/// One pod in namespace `load`, bound to `<cluster>-node-<node>`, requesting `cpu` and `memory`.
pub async fn add_pod(
    managed: &kube::Client,
    cluster: &str,
    node: usize,
    cpu: &str,
    memory: &str,
) -> Result<(), Error> {
    let namespaces: Api<Namespace> = Api::all(managed.clone());
    if namespaces.get_opt("load").await.ok().flatten().is_none() {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "load"}}))
            .map_err(|e| Error::Options(e.to_string()))?;
        namespaces
            .create(&PostParams::default(), &ns)
            .await
            .map_err(|source| Error::Kube {
                what: "creating namespace load".into(),
                source,
            })?;
    }
    // kube-controller-manager creates `default` in a new namespace; pods are refused until then.
    let accounts: Api<ServiceAccount> = Api::namespaced(managed.clone(), "load");
    for _ in 0..150 {
        if accounts.get_opt("default").await.ok().flatten().is_some() {
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
    .map_err(|e| Error::Options(e.to_string()))?;
    pods.create(&PostParams::default(), &pod)
        .await
        .map_err(|source| Error::Kube {
            what: format!("creating a pod on {cluster}"),
            source,
        })?;
    Ok(())
}

/// The `resource-usage-score` object in a cluster's namespace, if there is one.
pub async fn score_object(hub: &kube::Client, cluster: &str) -> Option<DynamicObject> {
    score_object_named(hub, cluster, "resource-usage-score").await
}

/// The AddOnPlacementScore `name` in a cluster's namespace, if there is one.
pub async fn score_object_named(hub: &kube::Client, cluster: &str, name: &str) -> Option<DynamicObject> {
    let api = dynamic(
        hub,
        "cluster.open-cluster-management.io",
        "v1alpha1",
        "AddOnPlacementScore",
        Some(cluster),
    )
    .await
    .ok()?;
    api.get_opt(name).await.ok().flatten()
}

/// A published score of `resource-usage-score` in a cluster's namespace.
pub async fn score(hub: &kube::Client, cluster: &str, name: &str) -> Option<i64> {
    score_object(hub, cluster)
        .await?
        .data
        .pointer("/status/scores")
        .and_then(Value::as_array)?
        .iter()
        .find(|s| s["name"] == name)
        .and_then(|s| s["value"].as_i64())
}

/// The clusters OCM's PlacementDecisions list for a Placement, sorted.
pub async fn decided(hub: &kube::Client, namespace: &str, placement: &str) -> Vec<String> {
    let Ok(api) = dynamic(
        hub,
        "cluster.open-cluster-management.io",
        "v1beta1",
        "PlacementDecision",
        Some(namespace),
    )
    .await
    else {
        return Vec::new();
    };
    let selector = format!("cluster.open-cluster-management.io/placement={placement}");
    let items = api
        .list(&ListParams::default().labels(&selector))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    let mut clusters = decision_clusters(&items);
    clusters.sort();
    clusters
}

/// The clusters PlacementDecision objects list, in their order.
pub fn decision_clusters<'a>(decisions: impl IntoIterator<Item = &'a DynamicObject>) -> Vec<String> {
    decisions
        .into_iter()
        .flat_map(|d| {
            d.data
                .pointer("/status/decisions")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|d| d["clusterName"].as_str().map(str::to_owned))
        .collect()
}

/// Whether a list of Kubernetes conditions holds `kind` with status True.
pub fn condition_true(conditions: Option<&Value>, kind: &str) -> bool {
    conditions
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

/// Copies the files below `from` into `to`, subdirectories included (the hub install lists its CRD
/// directory as a kustomization of its own).
fn copy_tree(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(to).map_err(|source| Error::Io {
        what: format!("creating {}", to.display()),
        source,
    })?;
    let entries = std::fs::read_dir(from).map_err(|source| Error::Io {
        what: format!("reading {}", from.display()),
        source,
    })?;
    for entry in entries.flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_tree(&path, &target)?;
        } else if path.is_file() {
            std::fs::copy(&path, &target).map_err(|source| Error::Io {
                what: format!("copying {}", path.display()),
                source,
            })?;
        }
    }
    Ok(())
}

/// Writes, in `dir`, a kustomize overlay of `manifests/hub` whose ClusterManagementAddOn installs
/// nothing by itself (`installStrategy: Manual`): what a user who creates ManagedClusterAddOns by
/// hand applies. Returns the overlay's directory.
pub fn manual_install_overlay(dir: &Path) -> Result<PathBuf, Error> {
    let overlay = dir.join("hub-manual");
    std::fs::create_dir_all(&overlay).map_err(|source| Error::Io {
        what: format!("creating {}", overlay.display()),
        source,
    })?;
    // kustomize refuses absolute paths, and a temp dir is no fixed distance from the workspace:
    // the overlay gets its own copy of the install as its base.
    let base = overlay.join("base");
    copy_tree(&workspace_dir().join("manifests/hub"), &base)?;
    let kustomization = [
        "apiVersion: kustomize.config.k8s.io/v1beta1".to_owned(),
        "kind: Kustomization".to_owned(),
        "resources:".to_owned(),
        "  - base".to_owned(),
        "patches:".to_owned(),
        "  - target:".to_owned(),
        "      kind: ClusterManagementAddOn".to_owned(),
        format!("      name: {ADDON}"),
        "    patch: |-".to_owned(),
        "      - op: replace".to_owned(),
        "        path: /spec/installStrategy".to_owned(),
        "        value: {type: Manual}".to_owned(),
        String::new(),
    ]
    .join("\n");
    let path = overlay.join("kustomization.yaml");
    std::fs::write(&path, kustomization).map_err(|source| Error::Io {
        what: format!("writing {}", path.display()),
        source,
    })?;
    Ok(overlay)
}

/// What of the add-on is still there after an uninstall: its hub objects (ClusterManagementAddOn,
/// AddOnDeploymentConfig, the `ocm-score` namespace, cluster RBAC, and in each cluster namespace the
/// ManagedClusterAddOn, ManifestWorks, Roles, RoleBindings and score), any object of ours still
/// holding an `ocm-score.io` finalizer, and on each managed cluster the agent's Deployment. Empty
/// when nothing is left.
pub async fn leftovers(cp: &ControlPlane, clusters: &[&str]) -> Result<Vec<String>, Error> {
    Ok(addon_objects(cp, clusters)
        .await?
        .into_iter()
        .map(|(what, meta)| {
            let finalizers = meta.finalizers.unwrap_or_default();
            format!(
                "{what}{}{}",
                if meta.deletion_timestamp.is_some() {
                    " (deleting)"
                } else {
                    ""
                },
                if finalizers.is_empty() {
                    String::new()
                } else {
                    format!(" finalizers {finalizers:?}")
                }
            )
        })
        .collect())
}

/// The add-on's objects (see [`leftovers`]), each named by a line that says what it is and where
/// (`cluster2: ManifestWork addon-resource-usage-collect-deploy-0`), with its metadata.
pub async fn addon_objects(cp: &ControlPlane, clusters: &[&str]) -> Result<Vec<(String, ObjectMeta)>, Error> {
    let hub = cp.hub_client().await?;
    let mut found = Vec::new();
    let get = |api: Api<DynamicObject>, name: &str| {
        let name = name.to_owned();
        async move { api.get_opt(&name).await }
    };
    let kube_err = |what: &str| {
        let what = what.to_owned();
        move |source| Error::Kube { what, source }
    };
    const ADDON_GROUP: &str = "addon.open-cluster-management.io";
    let cma = dynamic(&hub, ADDON_GROUP, "v1alpha1", "ClusterManagementAddOn", None).await?;
    if let Some(o) = get(cma, ADDON)
        .await
        .map_err(kube_err("reading the ClusterManagementAddOn"))?
    {
        found.push(("ClusterManagementAddOn".to_owned(), o.metadata));
    }
    let namespaces = dynamic(&hub, "", "v1", "Namespace", None).await?;
    if let Some(o) = get(namespaces, HUB_NAMESPACE)
        .await
        .map_err(kube_err("reading the hub namespace"))?
    {
        found.push((format!("Namespace {HUB_NAMESPACE}"), o.metadata));
    }
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        let api = dynamic(&hub, "rbac.authorization.k8s.io", "v1", kind, None).await?;
        for o in api
            .list(&ListParams::default())
            .await
            .map_err(kube_err("listing cluster RBAC"))?
            .items
        {
            let name = o.metadata.name.clone().unwrap_or_default();
            if name.starts_with("ocm-score") || name.contains(ADDON) {
                found.push((format!("{kind} {name}"), o.metadata));
            }
        }
    }
    for cluster in clusters {
        let mca = dynamic(
            &hub,
            ADDON_GROUP,
            "v1alpha1",
            "ManagedClusterAddOn",
            Some(cluster),
        )
        .await?;
        if let Some(o) = get(mca, ADDON)
            .await
            .map_err(kube_err("reading a ManagedClusterAddOn"))?
        {
            found.push((format!("{cluster}: ManagedClusterAddOn"), o.metadata));
        }
        let score = dynamic(
            &hub,
            "cluster.open-cluster-management.io",
            "v1alpha1",
            "AddOnPlacementScore",
            Some(cluster),
        )
        .await?;
        if let Some(o) = get(score, "resource-usage-score")
            .await
            .map_err(kube_err("reading a score"))?
        {
            found.push((
                format!("{cluster}: AddOnPlacementScore resource-usage-score"),
                o.metadata,
            ));
        }
        for (group, version, kind) in [
            ("work.open-cluster-management.io", "v1", "ManifestWork"),
            ("rbac.authorization.k8s.io", "v1", "Role"),
            ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
        ] {
            let api = dynamic(&hub, group, version, kind, Some(cluster)).await?;
            for o in api
                .list(&ListParams::default())
                .await
                .map_err(kube_err("listing a cluster namespace"))?
                .items
            {
                let name = o.metadata.name.clone().unwrap_or_default();
                let ours = name.contains(ADDON)
                    || o.metadata
                        .finalizers
                        .iter()
                        .flatten()
                        .any(|f| f.starts_with("ocm-score.io"));
                if ours {
                    found.push((format!("{cluster}: {kind} {name}"), o.metadata));
                }
            }
        }
        if let Ok(managed) = cp.cluster_client(cluster).await
            && let Some(d) = agent_deployment(&managed).await
        {
            found.push((
                format!(
                    "{cluster}: agent Deployment {} on the managed cluster",
                    d.metadata.name.clone().unwrap_or_default()
                ),
                d.metadata,
            ));
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::set_by_cargo_for_a_crate;

    #[test]
    fn a_nested_build_drops_what_cargo_set_for_the_caller_and_keeps_cargo_configuration() {
        for dropped in [
            "CARGO_PKG_NAME",
            "CARGO_PKG_VERSION_MAJOR",
            "CARGO_MANIFEST_DIR",
            "CARGO_MANIFEST_PATH",
            "CARGO_CRATE_NAME",
            "CARGO_BIN_EXE_ocm-score-agent",
            "CARGO_PRIMARY_PACKAGE",
            "OUT_DIR",
        ] {
            assert!(set_by_cargo_for_a_crate(dropped), "{dropped}");
        }
        for kept in [
            "CARGO",
            "CARGO_HOME",
            "CARGO_TARGET_DIR",
            "CARGO_INCREMENTAL",
            "CARGO_PROFILE_DEV_DEBUG",
            "CARGO_BUILD_JOBS",
            "PATH",
        ] {
            assert!(!set_by_cargo_for_a_crate(kept), "{kept}");
        }
    }
}
