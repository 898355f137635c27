//! Our add-on on a running [`ControlPlane`], the way a user installs it: `manifests/hub` applied with
//! `kubectl`, the add-on manager run as that Deployment's container with its ServiceAccount's token,
//! each agent run as the Deployment OCM's work agent created says. Shared by the end-to-end tests
//! and `control-plane demo`.
//!
//! No kubelet runs here, so a Deployment never gets pods: [`start_agent`] plays the kubelet for the
//! agent (same args and env, the mounted Secret copied to a directory, the pod's ServiceAccount as
//! a token), and [`add_nodes`] / [`add_pod`] create the API objects the agent counts.

use std::collections::BTreeSet;
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

mod agent;
mod fixtures;
mod manual_install;
mod reads;

pub use agent::*;
pub use fixtures::*;
pub use manual_install::*;
pub use reads::*;

/// The add-on's name in `manifests/hub` (drop-in for OCM's `resource-usage-collect`).
pub const ADDON: &str = "resource-usage-collect";
/// Where the agent runs on a managed cluster.
pub const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
/// The namespace `manifests/hub` installs the add-on manager into.
pub const HUB_NAMESPACE: &str = "ocm-score";

/// The workspace root (manifests, examples).
pub fn workspace_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
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
    let build = NestedBuild::of_this_executable()?;
    let path = build.profile_dir.join(name);
    // One build per process builds every binary of the workspace: later calls (a harness that starts
    // a process per test) reuse it instead of running cargo, and its lock, again.
    static BUILT: std::sync::OnceLock<Result<std::process::ExitStatus, String>> = std::sync::OnceLock::new();
    let built = BUILT.get_or_init(|| {
        build
            .cargo("build")
            .args(["--quiet", "--workspace", "--bins"])
            .status()
            .map_err(|e| e.to_string())
    });
    let status = built.clone().map_err(|message| Error::Io {
        what: "running cargo build --workspace --bins".into(),
        source: std::io::Error::other(message),
    })?;
    if !status.success() || !path.is_file() {
        return Err(Error::Options(format!(
            "cargo build --workspace --bins --profile {} did not produce {}",
            build.profile,
            path.display()
        )));
    }
    Ok(path)
}

/// Where the running executable was built, so that a build it starts lands beside it.
pub(crate) struct NestedBuild {
    /// `target/<profile>`: the running executable's directory (`deps` dropped).
    pub profile_dir: PathBuf,
    /// `target`.
    pub target_dir: PathBuf,
    /// The cargo profile (`dev` for `target/debug`).
    pub profile: String,
}

impl NestedBuild {
    pub(crate) fn of_this_executable() -> Result<Self, Error> {
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
        Ok(Self {
            profile_dir: dir,
            target_dir,
            profile,
        })
    }

    /// `cargo <subcommand>` in the workspace, with this build's profile and target directory; the
    /// caller adds the rest of the arguments.
    pub(crate) fn cargo(&self, subcommand: &str) -> Command {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let mut command = Command::new(cargo);
        // A test process carries the variables cargo sets for its crate (CARGO_PKG_NAME, ...). Build
        // scripts watch some of them (ring's `rerun-if-env-changed=CARGO_PKG_NAME`), so passing them on
        // rebuilt ring, rustls, kube and our crates whenever the caller's package differed from the last
        // build's: minutes per switch on two cores.
        for (key, _) in std::env::vars_os() {
            if key.to_str().is_some_and(set_by_cargo_for_a_crate) {
                command.env_remove(key);
            }
        }
        command
            .arg(subcommand)
            .arg("--profile")
            .arg(&self.profile)
            .arg("--target-dir")
            .arg(&self.target_dir)
            .current_dir(workspace_dir());
        command
    }
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

/// `kubectl apply -k` of `manifests/hub` annotated `lifecycle: self` ([`self_lifecycle_overlay`]:
/// for tests whose agents run as processes, with no kubelet), then the add-on manager as the applied
/// Deployment's container: its args (metrics on a free loopback port instead of the pod's), the
/// downward-API env, and a token of its ServiceAccount, so it has exactly the RBAC the manifests
/// grant.
pub async fn install_and_start_manager(cp: &ControlPlane, dir: &Path) -> Result<Component, Error> {
    let overlay = self_lifecycle_overlay(dir)?;
    install_from_and_start_manager(cp, &overlay, dir).await
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
    let overlay = self_lifecycle_overlay(dir)?;
    kubectl(&hub_kc, &["apply", "-k", &overlay.to_string_lossy()])?;
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
                // A failed read is retried.
                let d = agent_deployment(&managed).await.ok()??;
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
pub(crate) fn container_env(
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

/// The agent Deployment OCM's work agent created on a managed cluster, if any. A failed list is
/// an error, never "no agent": a test that waits for the agent to go must not read it as gone.
pub async fn agent_deployment(managed: &kube::Client) -> Result<Option<Deployment>, kube::Error> {
    let api: Api<Deployment> = Api::namespaced(managed.clone(), INSTALL_NAMESPACE);
    Ok(api.list(&ListParams::default()).await?.items.into_iter().next())
}

#[cfg(test)]
mod tests {
    use super::{INSTALL_NAMESPACE, agent_deployment, set_by_cargo_for_a_crate};
    use ocm_score_kube_double::{ApiServer, RequestMatch};
    use serde_json::json;

    #[tokio::test]
    async fn a_failed_list_is_an_error_never_no_agent() {
        let server = ApiServer::builder()
            .builtin_kinds()
            .object(json!({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": INSTALL_NAMESPACE}}))
            .start()
            .await
            .expect("kube-double");
        let client = server.admin_client();
        // A 500: kube's client itself retries a 503.
        server
            .faults()
            .fail_next(1, RequestMatch::any().verb("list").resource("deployments"), 500);
        let failed = agent_deployment(&client).await;
        assert!(failed.is_err(), "a 500 read as {failed:?}");
        // Only a list that succeeded and is empty means no agent.
        let listed = agent_deployment(&client).await.expect("the list after the fault");
        assert!(listed.is_none());
    }

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
