//! A real OCM control plane on 127.0.0.1, as processes: etcd, kube-apiserver and
//! kube-controller-manager from `k8s.io/kubernetes`, and OCM's hub controllers, add-on conversion
//! webhook and klusterlet agents from `open-cluster-management.io/ocm`, all compiled from the Go
//! module in `tests/control-plane/` (see [`go_components`]).
//!
//! Layout: the hub's API server is also managed cluster `cluster1` (OCM's self-managed hub, as
//! `clusteradm init` + `join` set up); `cluster2`.. each get their own etcd, API server and
//! controller manager. Every cluster has its own CA; clients authenticate with certificates;
//! authorization is RBAC (plus the Node authorizer). The controller manager signs CSRs with the
//! cluster CA, so OCM's registration works exactly as on a real hub.
//!
//! ```no_run
//! # async fn demo() -> Result<(), ocm_score_control_plane::Error> {
//! use ocm_score_control_plane::ControlPlane;
//! let cp = ControlPlane::builder().clusters(2).start().await?;
//! let hub = cp.hub_client().await?;           // kube::Client as system:masters
//! let path = cp.hub_kubeconfig();              // for kubectl and our binaries
//! # Ok(()) }
//! ```
//!
//! Dropping a [`ControlPlane`] stops every process it started (SIGTERM, then SIGKILL) and removes
//! its directory unless the caller chose one.

pub mod addon;
mod boot;
pub mod chart;
pub mod differential;
pub mod fits_differential;
pub mod go_components;
pub mod image;
pub mod kube;
pub mod node;
pub mod observe;
pub mod ocm;
pub mod pki;
pub mod pods;
pub mod process;
pub mod scale;
pub mod support;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use ::kube::api::{Api, DynamicObject, Patch, PatchParams};
use ::kube::core::GroupVersionKind;
use ::kube::{Client, Config};
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use serde_json::{Value, json};

use self::go_components::Components;
use self::kube::KubeCluster;
use self::process::{Component, Tier};
use crate::support::TempDir;

pub use boot::free_port;

/// The field manager of everything the launcher applies.
pub const FIELD_MANAGER: &str = "ocm-score-control-plane";

/// Why the control plane could not be built or started.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Go(#[from] ocm_score_go_build::Error),
    #[error("{what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("certificates: {what}: {message}")]
    Pki { what: String, message: String },
    #[error("{file}: {message}")]
    Manifest { file: PathBuf, message: String },
    #[error("starting {component} ({program}): {source}")]
    Spawn {
        component: String,
        program: PathBuf,
        source: std::io::Error,
    },
    #[error("{component} exited ({status}); last lines of {log}:\n{tail}")]
    Exited {
        component: String,
        status: String,
        log: PathBuf,
        tail: String,
    },
    #[error("port {port} ({what} of {component}) is in use on this machine{hint}")]
    PortInUse {
        component: String,
        what: String,
        port: u16,
        hint: String,
    },
    #[error("{what} did not happen within {waited:?}; last lines of {log}:\n{tail}")]
    NotReady {
        what: String,
        waited: Duration,
        log: PathBuf,
        tail: String,
    },
    #[error("{what}: {source}")]
    Kube { what: String, source: ::kube::Error },
    #[error("invalid option: {0}")]
    Options(String),
    /// An operation on one component that does not apply to it now (kill, restart, lookup).
    #[error("{component}: {problem}")]
    Component { component: String, problem: String },
    /// What a scenario found on the hub is not what it must be.
    #[error("{what}: {problem}")]
    Check { what: String, problem: String },
}

/// How to start a control plane.
#[derive(Clone, Debug)]
pub struct Builder {
    clusters: usize,
    dir: Option<PathBuf>,
    ocm_addon_manager: bool,
    audit_namespace: Option<String>,
    timeout: Duration,
    nodes: bool,
    spoke_schedulers: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            clusters: 2,
            dir: None,
            ocm_addon_manager: true,
            audit_namespace: None,
            timeout: Duration::from_secs(240),
            nodes: false,
            spoke_schedulers: false,
        }
    }
}

impl Builder {
    /// How many managed clusters: `cluster1` is the hub itself, the others get their own API server.
    /// 0 is a hub alone, no klusterlet at all: for fleets of bare ManagedClusters created through
    /// the API (see [`scale`]).
    pub fn clusters(mut self, n: usize) -> Self {
        self.clusters = n;
        self
    }

    /// Keep everything (kubeconfigs, logs, data) in `dir` instead of a temp dir removed on drop.
    pub fn dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.dir = Some(dir.into());
        self
    }

    /// Run OCM's own addon-manager on the hub (default: yes, as a real hub does).
    pub fn ocm_addon_manager(mut self, on: bool) -> Self {
        self.ocm_addon_manager = on;
        self
    }

    /// Makes the hub's API server write an audit log ([`ControlPlane::audit_log`]) of every request
    /// made by the ServiceAccounts of `namespace` (metadata only): how a benchmark counts the
    /// requests one component makes, whatever its own metrics say.
    pub fn audit_namespace(mut self, namespace: &str) -> Self {
        self.audit_namespace = Some(namespace.to_owned());
        self
    }

    /// Give every cluster a node that runs pods (a kubelet, containerd and kube-proxy; see [`node`]),
    /// with our image, the sandbox image and the test workload image (`load`) loaded, and a
    /// kube-scheduler. Without (the default),
    /// Deployments get no pods and nodes are API objects a test creates.
    pub fn nodes(mut self, on: bool) -> Self {
        self.nodes = on;
        self
    }

    /// Run a kube-scheduler on every cluster with its own API server (`cluster2`..), also without
    /// [`nodes`](Self::nodes): pods a test creates are bound to the Node objects it creates, by the
    /// real scheduler, with no kubelet behind them (the fits differential). The hub gets none, so
    /// the hub's own Deployments stay unscheduled as before.
    pub fn spoke_schedulers(mut self, on: bool) -> Self {
        self.spoke_schedulers = on;
        self
    }

    /// How long start-up may take before it fails naming what it waited for (default 240 s;
    /// generous because CI's two cores may also be compiling).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// Builds the Go components if needed, starts everything, and returns once every managed
    /// cluster is `Joined` and `Available` on the hub.
    pub async fn start(self) -> Result<ControlPlane, Error> {
        self.start_with_progress(&|line| tracing::info!("{line}")).await
    }

    /// [`start`](Self::start), reporting each step to `progress`.
    pub async fn start_with_progress(self, progress: &dyn Fn(&str)) -> Result<ControlPlane, Error> {
        if self.clusters > 50 {
            return Err(Error::Options(format!(
                "clusters must be 0..=50, got {}",
                self.clusters
            )));
        }
        let components = go_components::ensure_built(progress)?;
        let (dir, scratch) = match &self.dir {
            Some(dir) => {
                std::fs::create_dir_all(dir).map_err(|source| Error::Io {
                    what: format!("creating {}", dir.display()),
                    source,
                })?;
                (dir.clone(), None)
            }
            None => {
                let t = TempDir::new("control-plane");
                (t.path().to_path_buf(), Some(t))
            }
        };
        let mut cp = ControlPlane {
            dir,
            log_dir: PathBuf::new(),
            components: Vec::new(),
            hub: None,
            spokes: Vec::new(),
            cluster_names: (1..=self.clusters).map(|i| format!("cluster{i}")).collect(),
            versions: components.versions(),
            nodes: Vec::new(),
            host_bridge: false,
            image: None,
            _machine_lock: None,
            start_seconds: 0.0,
            _scratch: scratch,
        };
        cp.log_dir = cp.dir.join("logs");
        std::fs::create_dir_all(&cp.log_dir).map_err(|source| Error::Io {
            what: format!("creating {}", cp.log_dir.display()),
            source,
        })?;
        if let Err(error) = cp.boot(&components, &self, progress).await {
            // A start that fails on a loaded machine is rare and hard to replay: keep every
            // component's log for diagnosis instead of removing them with the scratch directory.
            if let Some(scratch) = cp._scratch.take() {
                progress(&format!(
                    "the control plane did not start; its logs are kept in {}",
                    scratch.keep().join("logs").display()
                ));
            }
            return Err(error);
        }
        progress(&format!("control plane ready in {:.1} s", cp.start_seconds));
        Ok(cp)
    }
}

/// A running control plane. Dropping it stops every process.
pub struct ControlPlane {
    dir: PathBuf,
    log_dir: PathBuf,
    /// In start order; stopped in reverse.
    components: Vec<Component>,
    hub: Option<KubeCluster>,
    /// Clusters with their own API server (`cluster2`..), in order.
    spokes: Vec<KubeCluster>,
    cluster_names: Vec<String>,
    versions: String,
    /// One per cluster when the builder asked for nodes, in cluster order.
    nodes: Vec<node::Node>,
    /// Whether this control plane made the nodes' host bridge (and so removes it).
    host_bridge: bool,
    /// Our image as loaded into the nodes.
    image: Option<crate::image::ImageArchive>,
    /// Held while running; released after the processes stop (field order).
    _machine_lock: Option<std::fs::File>,
    /// From holding the machine lock to ready: the start-up itself, without waiting for another
    /// control plane to stop.
    start_seconds: f64,
    _scratch: Option<TempDir>,
}

impl ControlPlane {
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Two managed clusters, in a temp dir.
    pub async fn start() -> Result<Self, Error> {
        Builder::default().start().await
    }

    /// The directory holding kubeconfigs (`hub.kubeconfig`, `<cluster>.kubeconfig`), `logs/`
    /// and each cluster's data.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Names of the managed clusters (`cluster1`, `cluster2`, ...).
    pub fn cluster_names(&self) -> &[String] {
        &self.cluster_names
    }

    /// `system:masters` kubeconfig of the hub.
    /// Seconds from holding the machine lock to ready (waiting for another control plane excluded).
    pub fn start_seconds(&self) -> f64 {
        self.start_seconds
    }

    pub fn hub_kubeconfig(&self) -> PathBuf {
        self.dir.join("hub.kubeconfig")
    }

    /// The hub's audit log (JSON lines, one per request stage), when the builder asked for one
    /// with [`Builder::audit_namespace`].
    pub fn audit_log(&self) -> Option<PathBuf> {
        self.hub.as_ref().and_then(|h| h.audit_log.clone())
    }

    /// `system:masters` kubeconfig of a managed cluster's own API server.
    pub fn kubeconfig(&self, cluster: &str) -> PathBuf {
        self.dir.join(format!("{cluster}.kubeconfig"))
    }

    /// The hub's API server URL.
    pub fn hub_server(&self) -> &str {
        self.hub.as_ref().map(|h| h.server.as_str()).unwrap_or_default()
    }

    /// The nodes (one per cluster, `cluster1-node`, ...), when the builder asked for them.
    pub fn nodes(&self) -> &[node::Node] {
        &self.nodes
    }

    /// The `ocm-score` image archive loaded into every node, when there are nodes.
    pub fn image(&self) -> Option<&crate::image::ImageArchive> {
        self.image.as_ref()
    }

    /// Module versions of the upstream components (`k8s.io/kubernetes v…`, `…/ocm v…`, `go …`).
    pub fn versions(&self) -> &str {
        &self.versions
    }

    pub async fn hub_client(&self) -> Result<Client, Error> {
        client(&self.hub_kubeconfig()).await
    }

    /// A `system:masters` client of a managed cluster's API server (`cluster1` is the hub).
    pub async fn cluster_client(&self, cluster: &str) -> Result<Client, Error> {
        client(&self.kubeconfig(cluster)).await
    }

    /// Writes a kubeconfig that authenticates to the hub as `user` (in `group`) with a client
    /// certificate from the hub CA: the way to run a process with exactly the RBAC given to it.
    pub fn write_hub_identity(&self, user: &str, group: Option<&str>, path: &Path) -> Result<(), Error> {
        match &self.hub {
            Some(hub) => hub.write_kubeconfig(user, group, path),
            None => Err(Error::Options("the hub is not running".into())),
        }
    }

    /// Writes a kubeconfig that authenticates to `cluster` (`hub`, `cluster1`, `cluster2`, ...) as
    /// ServiceAccount `namespace/name`, with a token from the TokenRequest API valid for `valid_for`:
    /// what a pod running under that account would use.
    pub async fn write_service_account_kubeconfig(
        &self,
        cluster: &str,
        namespace: &str,
        name: &str,
        valid_for: Duration,
        path: &Path,
    ) -> Result<(), Error> {
        let target = self.kube_cluster(cluster)?;
        let token = self
            .service_account_token(cluster, namespace, name, valid_for)
            .await?;
        let user = format!("system:serviceaccount:{namespace}:{name}");
        pki::write(
            path,
            &pki::token_kubeconfig(&target.name, &target.server, &target.ca, &user, &token),
        )
    }

    /// A token of ServiceAccount `namespace/name` on `cluster` from the TokenRequest API, valid for
    /// `valid_for` (what `kubectl create token` prints).
    pub async fn service_account_token(
        &self,
        cluster: &str,
        namespace: &str,
        name: &str,
        valid_for: Duration,
    ) -> Result<String, Error> {
        let target = self.kube_cluster(cluster)?;
        let admin = client(&target.admin_kubeconfig).await?;
        let what = || format!("requesting a token for ServiceAccount {namespace}/{name} on {cluster}");
        let body = json!({
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": valid_for.as_secs()},
        });
        let request = http::Request::post(format!(
            "/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token"
        ))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap_or_default())
        .map_err(|e| Error::Options(format!("{}: {e}", what())))?;
        let answer: Value = admin
            .request(request)
            .await
            .map_err(|source| Error::Kube { what: what(), source })?;
        let token = answer
            .pointer("/status/token")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if token.is_empty() {
            return Err(Error::Options(format!("{}: no token in the answer", what())));
        }
        Ok(token.to_owned())
    }

    /// The arguments a component was started with (`hub-placement-controller`, ...).
    pub fn component_args(&self, name: &str) -> Option<&[String]> {
        self.components
            .iter()
            .find(|c| c.name() == name)
            .map(Component::args)
    }

    fn kube_cluster(&self, cluster: &str) -> Result<&KubeCluster, Error> {
        if cluster == "hub" || cluster == "cluster1" {
            return self.hub();
        }
        self.spokes
            .iter()
            .find(|s| s.name == cluster)
            .ok_or_else(|| Error::Options(format!("no cluster named {cluster}")))
    }

    /// The last lines of a component's log (`hub-placement-controller`, `cluster2-klusterlet`, ...).
    pub fn log_tail(&self, component: &str, lines: usize) -> String {
        process::tail(&self.log_dir.join(format!("{component}.log")), lines)
    }

    /// The last `lines` of each of `components`' logs, each under a `--- <component>` line: what a
    /// test prints beside a convergence that did not come.
    pub fn log_tails(&self, components: &[&str], lines: usize) -> String {
        components
            .iter()
            .map(|c| format!("--- {c}\n{}\n", self.log_tail(c, lines)))
            .collect()
    }

    /// Fails naming the first component that has exited, with its log tail.
    pub fn check_running(&mut self) -> Result<(), Error> {
        self.components.iter_mut().try_for_each(Component::check_running)
    }

    /// Starts `program args` (with `env` added) as a client component of this control plane, named
    /// `name`: its log is `logs/<name>.log` ([`log_tail`](Self::log_tail)), [`check_running`]
    /// watches it, and [`stop`](Self::stop) ends it with the other clients, before the API servers.
    /// For a controller a test runs against the hub, such as Argo CD's. Returns once it is
    /// spawned, not once it is ready. Call it from the thread that started the control plane, like
    /// every spawn (see [`process`]).
    ///
    /// [`check_running`]: Self::check_running
    pub fn spawn_client(
        &mut self,
        name: &str,
        program: &Path,
        args: &[String],
        env: &[(&str, String)],
    ) -> Result<(), Error> {
        if self.components.iter().any(|c| c.name() == name) {
            return Err(Error::Component {
                component: name.to_owned(),
                problem: "a component of that name is already running".into(),
            });
        }
        let component = Component::spawn(name, Tier::Client, program, args, env, &self.log_dir)?;
        self.components.push(component);
        Ok(())
    }

    /// Names and process ids of the running components.
    pub fn processes(&self) -> Vec<(String, u32)> {
        self.components
            .iter()
            .map(|c| (c.name().to_owned(), c.pid()))
            .collect()
    }

    /// `kill -9` of one component (`hub-kube-apiserver`, `hub-etcd`, `cluster2-kube-apiserver`,
    /// ...; the names of [`processes`](Self::processes)): a crash, with no shutdown of any kind.
    /// Returns once it has exited. Until [`restart`](Self::restart), [`check_running`](Self::check_running)
    /// fails naming it.
    pub fn kill(&mut self, component: &str) -> Result<(), Error> {
        self.component(component)?.kill()
    }

    /// Starts a killed (or exited) component again with the same arguments, environment and data
    /// directory, as a supervisor would; returns once it is spawned, not once it is ready. Call it
    /// from the thread that started the control plane, like every spawn (see [`process`]).
    pub fn restart(&mut self, component: &str) -> Result<(), Error> {
        self.component(component)?.restart()
    }

    fn component(&mut self, name: &str) -> Result<&mut Component, Error> {
        let known: Vec<String> = self.components.iter().map(|c| c.name().to_owned()).collect();
        self.components
            .iter_mut()
            .find(|c| c.name() == name)
            .ok_or_else(|| Error::Component {
                component: name.to_owned(),
                problem: format!("no such component; there are {}", known.join(", ")),
            })
    }

    /// Stops every process, clients first (then the nodes' pods), then API servers, then etcd:
    /// SIGTERM to a tier, then up to 15 s each before SIGKILL.
    pub fn stop(&mut self) {
        for tier in [Tier::Client, Tier::ApiServer, Tier::Storage] {
            let (mut stopping, rest): (Vec<_>, Vec<_>) = std::mem::take(&mut self.components)
                .into_iter()
                .partition(|c| c.tier() == tier);
            self.components = rest;
            stopping.iter_mut().for_each(Component::terminate);
            for c in &mut stopping {
                c.wait_or_kill(Duration::from_secs(15));
            }
            if tier == Tier::Client {
                // Pods and shims outlive the kubelet and containerd by design; the node removes
                // them before the API servers stop, so no pod's watch holds a server's shutdown.
                for node in std::mem::take(&mut self.nodes) {
                    node.teardown();
                }
            }
        }
        if std::mem::take(&mut self.host_bridge) {
            node::remove_host_bridge();
        }
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A client from a kubeconfig file.
pub async fn client(kubeconfig: &Path) -> Result<Client, Error> {
    let what = || format!("loading {}", kubeconfig.display());
    let kc = ::kube::config::Kubeconfig::read_from(kubeconfig).map_err(|e| Error::Kube {
        what: what(),
        source: ::kube::Error::InferKubeconfig(e),
    })?;
    let config = Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| Error::Kube {
            what: what(),
            source: ::kube::Error::InferKubeconfig(e),
        })?;
    Client::try_from(config).map_err(|source| Error::Kube { what: what(), source })
}

/// Server-side applies each object (cluster-scoped or with `metadata.namespace`), as `FIELD_MANAGER`.
pub async fn apply_all(client: &Client, objects: &[Value]) -> Result<(), Error> {
    for object in objects {
        apply(client, object).await?;
    }
    Ok(())
}

/// Server-side applies one object, finding its resource through discovery.
pub async fn apply(client: &Client, object: &Value) -> Result<(), Error> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let what = format!("applying {kind} {name}");
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, caps) = ::kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|source| Error::Kube {
            what: what.clone(),
            source,
        })?;
    let api: Api<DynamicObject> = match (
        caps.scope,
        object.pointer("/metadata/namespace").and_then(Value::as_str),
    ) {
        (::kube::discovery::Scope::Namespaced, Some(ns)) => {
            Api::namespaced_with(client.clone(), ns, &resource)
        }
        (::kube::discovery::Scope::Namespaced, None) => {
            Api::default_namespaced_with(client.clone(), &resource)
        }
        (::kube::discovery::Scope::Cluster, _) => Api::all_with(client.clone(), &resource),
    };
    api.patch(
        name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(|source| Error::Kube { what, source })?;
    Ok(())
}

/// Whether node `name` reports `Ready`.
pub async fn node_ready(client: &Client, name: &str) -> bool {
    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
    nodes.get_opt(name).await.ok().flatten().is_some_and(|n| {
        n.status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// Whether the API server behind `client` answers `/readyz` with `ok` (its storage included).
pub async fn readyz(client: &Client) -> bool {
    let Ok(request) = http::Request::get("/readyz").body(Vec::new()) else {
        return false;
    };
    client
        .request_text(request)
        .await
        .is_ok_and(|body| body.trim() == "ok")
}
