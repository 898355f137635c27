//! Argo CD's ApplicationSet controller on the real control plane: the build of `tests/argocd/`
//! (through `ocm-score-go-build`, cached under `~/.cache/ocm-score/argocd/`), what Argo CD's own
//! install would put on the hub for it, the controller as a process of the [`ControlPlane`], and
//! reads of the ApplicationSets and Applications it writes.
//!
//! Only the ApplicationSet controller runs: no API server, repo server or application controller,
//! so the Applications it generates are never synced (nothing goes to the network).
//! `tests/argocd/README.md` lists what the controller needs at runtime and why.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use jiff::Timestamp;
use kube::api::{DynamicObject, ListParams};
use ocm_score_control_plane::addon::{dynamic, kubectl};
use ocm_score_control_plane::{ControlPlane, Error as ControlPlaneError, apply};
use serde_json::{Value, json};

use crate::go_module::{self, Build, Error};
pub use ocm_score_go_build::argocd::{CRDS, MODULE, RBAC, module, module_dir};

/// Argo CD's namespace: the controller's, where its ApplicationSets, Applications, AppProjects and
/// cluster Secrets live, and where it lists the generator's PlacementDecisions.
pub const NAMESPACE: &str = "argocd";
/// The controller's command, component name and ServiceAccount (as Argo CD's install names it).
pub const CONTROLLER: &str = "argocd-applicationset-controller";
/// The ApplicationSet annotation that makes the controller reconcile it at once.
pub const REFRESH_ANNOTATION: &str = "argocd.argoproj.io/application-set-refresh";

/// The controller and the manifests of one build.
#[derive(Clone, Debug)]
pub struct ArgoCd {
    build: Build,
}

impl ArgoCd {
    pub fn bin(&self) -> PathBuf {
        self.build.bin(CONTROLLER)
    }

    /// The Application, ApplicationSet and AppProject CRDs of the same module.
    pub fn crds(&self) -> Vec<PathBuf> {
        CRDS.iter()
            .map(|n| self.build.root().join("crds").join(n))
            .collect()
    }

    /// The controller's ServiceAccount, Role and RoleBinding, without a namespace.
    pub fn rbac(&self) -> Vec<PathBuf> {
        RBAC.iter()
            .map(|n| self.build.root().join("rbac").join(n))
            .collect()
    }

    /// `module version` lines of what was built (Argo CD, Go).
    pub fn versions(&self) -> String {
        self.build.versions()
    }
}

/// Builds the controller unless this exact build is cached; `progress` hears about long steps.
pub fn ensure_built(progress: &dyn Fn(&str)) -> Result<ArgoCd, Error> {
    Ok(ArgoCd {
        build: go_module::ensure_built(&module(), progress)?,
    })
}

fn check(what: impl Into<String>, problem: impl Into<String>) -> ControlPlaneError {
    ControlPlaneError::Check {
        what: what.into(),
        problem: problem.into(),
    }
}

fn read_yaml(path: &Path) -> Result<Value, ControlPlaneError> {
    let text = std::fs::read_to_string(path).map_err(|source| ControlPlaneError::Io {
        what: format!("reading {}", path.display()),
        source,
    })?;
    serde_norway::from_str(&text).map_err(|e| ControlPlaneError::Manifest {
        file: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// What installing Argo CD leaves on the hub for its ApplicationSet controller, in [`NAMESPACE`]:
/// the namespace; the three CRDs (server-side applied: the ApplicationSet CRD is too large for
/// `kubectl apply`'s last-applied annotation), Established; the controller's ServiceAccount, Role
/// and RoleBinding, in the namespace Argo CD's kustomization would set; the AppProject `default`
/// every Application names, which Argo CD's API server creates at its start (as it creates it);
/// and one cluster Secret per managed cluster, whose `name` is the OCM cluster name and `server`
/// that cluster's API server (which the ApplicationSet controller never contacts).
pub async fn install(cp: &ControlPlane, argocd: &ArgoCd) -> Result<(), ControlPlaneError> {
    let hub_kc = cp.hub_kubeconfig();
    let hub = cp.hub_client().await?;
    kubectl(&hub_kc, &["create", "namespace", NAMESPACE])?;
    for crd in argocd.crds() {
        kubectl(
            &hub_kc,
            &["apply", "--server-side", "-f", &crd.display().to_string()],
        )?;
    }
    // `kubectl wait` fails outright on a CRD the API server has not given a status yet (no
    // conditions to read), so it is asked again until the CRDs are Established.
    let started = Instant::now();
    while let Err(error) = kubectl(
        &hub_kc,
        &[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "crd/applications.argoproj.io",
            "crd/applicationsets.argoproj.io",
            "crd/appprojects.argoproj.io",
        ],
    ) {
        if started.elapsed() > Duration::from_secs(120) {
            return Err(error);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for file in argocd.rbac() {
        let mut object = read_yaml(&file)?;
        object["metadata"]["namespace"] = json!(NAMESPACE);
        if let Some(subjects) = object.get_mut("subjects").and_then(Value::as_array_mut) {
            for subject in subjects {
                subject["namespace"] = json!(NAMESPACE);
            }
        }
        apply(&hub, &object).await?;
    }
    let project = json!({
        "apiVersion": "argoproj.io/v1alpha1", "kind": "AppProject",
        "metadata": {"name": "default", "namespace": NAMESPACE},
        "spec": {"sourceRepos": ["*"], "destinations": [{"namespace": "*", "server": "*"}],
                 "clusterResourceWhitelist": [{"group": "*", "kind": "*"}]},
    });
    // The API server serves a kind a moment after its CRD is Established; discovery may not list it
    // yet.
    let started = Instant::now();
    while let Err(error) = apply(&hub, &project).await {
        if started.elapsed() > Duration::from_secs(60) {
            return Err(error);
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    for cluster in cp.cluster_names() {
        let server = kubeconfig_server(&cp.kubeconfig(cluster))?;
        apply(
            &hub,
            &json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": format!("cluster-{cluster}"), "namespace": NAMESPACE,
                             "labels": {"argocd.argoproj.io/secret-type": "cluster"}},
                "data": {"name": BASE64.encode(cluster), "server": BASE64.encode(&server)},
            }),
        )
        .await?;
    }
    Ok(())
}

/// The `server` of a kubeconfig's first cluster.
fn kubeconfig_server(path: &Path) -> Result<String, ControlPlaneError> {
    let config = kube::config::Kubeconfig::read_from(path).map_err(|e| ControlPlaneError::Kube {
        what: format!("reading {}", path.display()),
        source: kube::Error::InferKubeconfig(e),
    })?;
    config
        .clusters
        .first()
        .and_then(|c| c.cluster.as_ref())
        .and_then(|c| c.server.clone())
        .ok_or_else(|| check(path.display().to_string(), "names no server"))
}

/// Starts the controller as a client component of `cp` ([`CONTROLLER`]; log
/// `logs/argocd-applicationset-controller.log`), as its ServiceAccount (a TokenRequest token in a
/// kubeconfig under `dir`), for [`NAMESPACE`], with no metrics or probe listener (fixed ports
/// otherwise). The controller's manager reads its kubeconfig from `KUBECONFIG` (its
/// `--kubeconfig` only reaches the command's own client), so both are set. Returns once its
/// workers run (its caches synced), within `timeout`.
pub async fn start_controller(
    cp: &mut ControlPlane,
    argocd: &ArgoCd,
    dir: &Path,
    timeout: Duration,
) -> Result<(), ControlPlaneError> {
    let kubeconfig = dir.join("argocd-applicationset-controller.kubeconfig");
    cp.write_service_account_kubeconfig(
        "hub",
        NAMESPACE,
        CONTROLLER,
        Duration::from_secs(4 * 3600),
        &kubeconfig,
    )
    .await?;
    let kubeconfig = kubeconfig.display().to_string();
    let args: Vec<String> = [
        "--kubeconfig",
        &kubeconfig,
        "--namespace",
        NAMESPACE,
        "--metrics-addr",
        "0",
        "--probe-addr",
        "0",
        "--loglevel",
        "info",
        "--logformat",
        "text",
    ]
    .map(str::to_owned)
    .to_vec();
    cp.spawn_client(
        CONTROLLER,
        &argocd.bin(),
        &args,
        &[("KUBECONFIG", kubeconfig.clone())],
    )?;
    let started = Instant::now();
    loop {
        cp.check_running()?;
        if cp.log_tail(CONTROLLER, 200).contains("Starting workers") {
            return Ok(());
        }
        if started.elapsed() > timeout {
            return Err(check(
                "Argo CD's ApplicationSet controller starting its workers",
                format!("not within {timeout:?}:\n{}", cp.log_tail(CONTROLLER, 30)),
            ));
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// An Application the controller generated.
#[derive(Clone, Debug, PartialEq)]
pub struct Application {
    pub name: String,
    /// `spec.destination.name`: the Argo CD cluster it deploys to.
    pub destination: String,
    pub created: Option<Timestamp>,
}

/// The Applications in [`NAMESPACE`] that ApplicationSet `appset` owns, by name. A failed read is
/// an error, never "none".
pub async fn applications(hub: &kube::Client, appset: &str) -> Result<Vec<Application>, ControlPlaneError> {
    let api = dynamic(hub, "argoproj.io", "v1alpha1", "Application", Some(NAMESPACE)).await?;
    let listed = api
        .list(&ListParams::default())
        .await
        .map_err(|source| ControlPlaneError::Kube {
            what: format!("listing Applications in {NAMESPACE}"),
            source,
        })?;
    let mut owned: Vec<Application> = listed
        .items
        .iter()
        .filter(|app| {
            app.metadata
                .owner_references
                .iter()
                .flatten()
                .any(|o| o.kind == "ApplicationSet" && o.name == appset)
        })
        .map(|app| Application {
            name: app.metadata.name.clone().unwrap_or_default(),
            destination: app
                .data
                .pointer("/spec/destination/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            created: app.metadata.creation_timestamp.as_ref().map(|t| t.0),
        })
        .collect();
    owned.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(owned)
}

/// The ApplicationSet `name` in [`NAMESPACE`].
pub async fn application_set(hub: &kube::Client, name: &str) -> Result<DynamicObject, ControlPlaneError> {
    dynamic(hub, "argoproj.io", "v1alpha1", "ApplicationSet", Some(NAMESPACE))
        .await?
        .get(name)
        .await
        .map_err(|source| ControlPlaneError::Kube {
            what: format!("reading ApplicationSet {NAMESPACE}/{name}"),
            source,
        })
}

/// The message of the ApplicationSet's `ErrorOccurred` condition while it is True.
pub fn error_occurred(appset: &DynamicObject) -> Option<String> {
    appset
        .data
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == "ErrorOccurred" && c["status"] == "True")
        .map(|c| c["message"].as_str().unwrap_or_default().to_owned())
}

/// `kubectl annotate applicationset NAME -n argocd argocd.argoproj.io/application-set-refresh=true`:
/// Argo CD's way to have an ApplicationSet reconciled now rather than at its next requeue. The
/// controller removes the annotation once it has.
pub fn refresh_args(name: &str) -> Vec<String> {
    [
        "annotate",
        "applicationset",
        name,
        "-n",
        NAMESPACE,
        "--overwrite",
        &format!("{REFRESH_ANNOTATION}=true"),
    ]
    .map(str::to_owned)
    .to_vec()
}

/// When the controller last ended a reconcile of ApplicationSet `name`, by its log lines (text
/// format: `time="2026-12-07T12:13:08Z" level=info msg="end reconcile in 4ms"
/// applicationset=argocd/NAME requeueAfter=30s`; whole seconds).
pub fn last_reconcile_ended(cp: &ControlPlane, name: &str) -> Option<Timestamp> {
    let log = cp.dir().join("logs").join(format!("{CONTROLLER}.log"));
    let field = format!("applicationset={NAMESPACE}/{name}");
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("msg=\"end reconcile in "))
        .filter(|l| l.split_whitespace().any(|word| word == field))
        .filter_map(|l| l.strip_prefix("time=\"")?.split('"').next()?.parse().ok())
        .max()
}

/// The clusters of a Placement's PlacementDecisions in `namespace` and when they were last written
/// (the latest time of their `managedFields`: whole seconds, the API server's clock; OCM writes
/// the decisions through the status subresource and nothing else writes these objects). A failed
/// read is an error.
pub async fn decisions_written(
    hub: &kube::Client,
    namespace: &str,
    placement: &str,
) -> Result<(Vec<String>, Option<Timestamp>), ControlPlaneError> {
    let api = dynamic(
        hub,
        "cluster.open-cluster-management.io",
        "v1beta1",
        "PlacementDecision",
        Some(namespace),
    )
    .await?;
    let listed = api
        .list(&ListParams::default().labels(&format!(
            "cluster.open-cluster-management.io/placement={placement}"
        )))
        .await
        .map_err(|source| ControlPlaneError::Kube {
            what: format!("listing the PlacementDecisions of {namespace}/{placement}"),
            source,
        })?;
    let mut clusters = ocm_score_control_plane::addon::decision_clusters(&listed.items);
    clusters.sort();
    let written = listed
        .items
        .iter()
        .flat_map(|d| d.metadata.managed_fields.iter().flatten())
        .filter_map(|f| f.time.as_ref().map(|t| t.0))
        .max();
    Ok((clusters, written))
}
