//! Our agent run on a managed cluster by hand, as a process: its flags, and `once` for a one-shot score.

use super::*;

/// Plays the kubelet for the agent of `cluster`: runs `ocm-score-agent` with its Deployment's args
/// and env, the hub-kubeconfig Secret copied where the args expect the mount, and a token of the
/// pod's ServiceAccount as its managed-cluster identity.
pub async fn start_agent(cp: &ControlPlane, cluster: &str, dir: &Path) -> Result<Component, Error> {
    let managed = cp.cluster_client(cluster).await?;
    let deployment = agent_deployment(&managed)
        .await
        .map_err(|source| Error::Kube {
            what: format!("reading the agent Deployment on {cluster}"),
            source,
        })?
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
pub(super) const SCORING_FLAGS: [&str; 5] = [
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
