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
//! # async fn demo() -> Result<(), ocm_score_tests::control_plane::Error> {
//! use ocm_score_tests::control_plane::ControlPlane;
//! let cp = ControlPlane::builder().clusters(2).start().await?;
//! let hub = cp.hub_client().await?;           // kube::Client as system:masters
//! let path = cp.hub_kubeconfig();              // for kubectl and our binaries
//! # Ok(()) }
//! ```
//!
//! Dropping a [`ControlPlane`] stops every process it started (SIGTERM, then SIGKILL) and removes
//! its directory unless the caller chose one.

pub mod addon;
pub mod differential;
pub mod go_components;
pub mod kube;
pub mod node;
pub mod observe;
pub mod ocm;
pub mod pki;
pub mod pods;
pub mod process;
pub mod scale;

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

/// The field manager of everything the launcher applies.
pub const FIELD_MANAGER: &str = "ocm-score-control-plane";

/// Why the control plane could not be built or started.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Go(#[from] crate::go_module::Error),
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

    /// Fails naming the first component that has exited, with its log tail.
    pub fn check_running(&mut self) -> Result<(), Error> {
        self.components.iter_mut().try_for_each(Component::check_running)
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

    async fn boot(
        &mut self,
        components: &Components,
        opts: &Builder,
        progress: &dyn Fn(&str),
    ) -> Result<(), Error> {
        // OCM's addon webhook binds two fixed ports on every interface, so one control plane
        // runs on a machine at a time: later ones (parallel tests) wait their turn, up to 20
        // minutes, and only then does the start-up timeout begin.
        self._machine_lock = Some(machine_lock(Instant::now() + Duration::from_secs(1200), progress).await?);
        let locked = Instant::now();
        for (port, what) in ocm::WEBHOOK_FIXED_PORTS {
            if std::net::TcpListener::bind(("0.0.0.0", port)).is_err() {
                return Err(Error::PortInUse {
                    component: "hub-addon-webhook".into(),
                    what: what.into(),
                    port,
                    hint: " (OCM's addon webhook binds it on every interface: is another control plane running?)".into(),
                });
            }
        }

        let images = if opts.nodes {
            node::check_host()?;
            node::sweep_stale();
            progress("assembling the images the nodes run (pause, ocm-score)");
            let images = self.build_images(components)?;
            node::create_host_bridge()?;
            self.host_bridge = true;
            images
        } else {
            Vec::new()
        };

        // The start-up timeout counts from here: assembling the images may first build the
        // workspace's binaries (minutes on a cold target directory), which is not start-up.
        let deadline = Instant::now() + opts.timeout;
        progress("starting etcd and kube-apiserver");
        let hub = KubeCluster::start(
            "hub",
            components,
            &self.dir,
            &self.log_dir,
            opts.audit_namespace.as_deref(),
            opts.nodes,
            &mut self.components,
        )?;
        copy(&hub.admin_kubeconfig, &self.hub_kubeconfig())?;
        copy(&hub.admin_kubeconfig, &self.kubeconfig("cluster1"))?;
        self.hub = Some(hub);
        for name in self.cluster_names.clone().iter().skip(1) {
            let spoke = KubeCluster::start(
                name,
                components,
                &self.dir,
                &self.log_dir,
                None,
                opts.nodes,
                &mut self.components,
            )?;
            copy(&spoke.admin_kubeconfig, &self.kubeconfig(name))?;
            self.spokes.push(spoke);
        }

        let kubeconfigs: Vec<(String, PathBuf)> = std::iter::once(("hub".to_owned(), self.hub_kubeconfig()))
            .chain(
                self.cluster_names
                    .iter()
                    .skip(1)
                    .map(|n| (n.clone(), self.kubeconfig(n))),
            )
            .collect();
        for (name, kubeconfig) in &kubeconfigs {
            let c = client(kubeconfig).await?;
            let log = format!("{name}-kube-apiserver");
            self.wait_for(
                &format!("{name}'s kube-apiserver /readyz"),
                &log,
                deadline,
                || {
                    let c = c.clone();
                    async move { Ok(readyz(&c).await) }
                },
            )
            .await?;
        }
        progress("API servers ready; starting kube-controller-manager");
        for cluster in self.hub.iter().chain(self.spokes.iter()) {
            cluster.start_controller_manager(components, &self.log_dir, &mut self.components)?;
            cluster.start_scheduler(components, &self.log_dir, &mut self.components)?;
        }
        if opts.nodes {
            progress("starting a node per cluster (containerd, kube-proxy, kubelet)");
            let clusters: Vec<&KubeCluster> = self.hub.iter().chain(self.spokes.iter()).collect();
            for (i, cluster) in clusters.into_iter().enumerate() {
                let index = u8::try_from(i + 1).unwrap_or(u8::MAX);
                // The hub's node is cluster1's (the hub manages itself); a hub alone keeps "hub".
                let name = self
                    .cluster_names
                    .get(i)
                    .cloned()
                    .unwrap_or_else(|| cluster.name.clone());
                let node = node::Node::start(
                    &name,
                    cluster,
                    index,
                    components,
                    &images,
                    &self.log_dir,
                    &mut self.components,
                )?;
                self.nodes.push(node);
            }
        }

        let hub_client = self.hub_client().await?;
        let (ca_bundle, hub_server) = {
            let hub = self.hub()?;
            (hub.ca.bundle_base64(), hub.server.clone())
        };
        let _ = hub_server;
        let webhook_port = free_port()?;
        let crds = ocm::hub_crds(
            components,
            &ca_bundle,
            &format!("https://127.0.0.1:{webhook_port}/convert"),
        )?;
        apply_all(&hub_client, &crds).await?;
        apply_all(&hub_client, &ocm::hub_objects()).await?;
        let crd_names = names(&crds);
        self.wait_for(
            "the hub's CRDs to be Established",
            "hub-kube-apiserver",
            deadline,
            || {
                let c = hub_client.clone();
                let names = crd_names.clone();
                async move { crds_established(&c, &names).await }
            },
        )
        .await?;
        progress("OCM CRDs installed");

        {
            let hub = self
                .hub
                .as_ref()
                .ok_or_else(|| Error::Options("the hub is not running".into()))?;
            ocm::start_hub(
                components,
                hub,
                webhook_port,
                opts.ocm_addon_manager,
                &self.dir,
                &self.log_dir,
                &mut self.components,
            )?;
        }

        // cluster1 is the hub's own API server; the rest are spokes.
        let managed_crds = ocm::managed_crds(components)?;
        for name in self.cluster_names.clone() {
            let c = self.cluster_client(&name).await?;
            apply_all(&c, &managed_crds).await?;
            apply_all(&c, &ocm::managed_objects()).await?;
            let names = names(&managed_crds);
            let log = if name == "cluster1" {
                "hub-kube-apiserver".to_owned()
            } else {
                format!("{name}-kube-apiserver")
            };
            self.wait_for(
                &format!("{name}'s klusterlet CRDs to be Established"),
                &log,
                deadline,
                || {
                    let c = c.clone();
                    let names = names.clone();
                    async move { crds_established(&c, &names).await }
                },
            )
            .await?;
            // The controller manager's service-account controller creates `default` in every
            // namespace: a sign that it runs (pods cannot be created before it does its job).
            let kcm_log = if name == "cluster1" {
                "hub-kube-controller-manager".to_owned()
            } else {
                format!("{name}-kube-controller-manager")
            };
            self.wait_for(
                &format!("{name}'s kube-controller-manager (default ServiceAccount)"),
                &kcm_log,
                deadline,
                || {
                    let c = c.clone();
                    async move {
                        let sa: Api<ServiceAccount> = Api::namespaced(c, "default");
                        Ok(sa.get_opt("default").await.ok().flatten().is_some())
                    }
                },
            )
            .await?;
            let hub = self
                .hub
                .as_ref()
                .ok_or_else(|| Error::Options("the hub is not running".into()))?;
            let managed = if name == "cluster1" {
                hub
            } else {
                self.spokes
                    .iter()
                    .find(|s| s.name == name)
                    .ok_or_else(|| Error::Options(format!("no cluster named {name}")))?
            };
            ocm::start_klusterlet(
                components,
                hub,
                &name,
                managed,
                &self.dir,
                &self.log_dir,
                &mut self.components,
            )?;
        }
        progress("OCM hub controllers and klusterlets started; accepting the clusters");

        // What `clusteradm accept` does: approve each cluster's registration CSR and accept it.
        let names = self.cluster_names.clone();
        self.wait_for(
            "every ManagedCluster to be Joined and Available",
            "hub-registration-controller",
            deadline,
            || {
                let c = hub_client.clone();
                let names = names.clone();
                async move { accept_clusters(&c, &names).await }
            },
        )
        .await?;
        if opts.nodes {
            let nodes: Vec<(String, String)> = self
                .nodes
                .iter()
                .map(|n| (n.cluster.clone(), n.name.clone()))
                .collect();
            for (cluster, node) in nodes {
                let c = self.cluster_client(&cluster).await?;
                self.wait_for(
                    &format!("node {node} to be Ready"),
                    &format!("{cluster}-kubelet"),
                    deadline,
                    || {
                        let c = c.clone();
                        let node = node.clone();
                        async move { Ok(node_ready(&c, &node).await) }
                    },
                )
                .await?;
            }
            progress("every node is Ready");
        }
        self.start_seconds = locked.elapsed().as_secs_f64();
        Ok(())
    }

    /// The sandbox image, ours and the test workload's, as archives in the control plane's directory.
    fn build_images(&mut self, components: &Components) -> Result<Vec<crate::image::ImageArchive>, Error> {
        let images = self.dir.join("images");
        let pause = crate::image::pause_image(&components.bin("pause"), &images.join("pause.tar"))?;
        let binaries = crate::image::OCM_SCORE_BINARIES
            .iter()
            .map(|name| addon::workspace_binary(name))
            .collect::<Result<Vec<_>, _>>()?;
        let ours = crate::image::ocm_score_image(&binaries, &images.join("ocm-score.tar"))?;
        self.image = Some(ours.clone());
        let load = crate::image::load_image(&addon::workspace_binary("load")?, &images.join("load.tar"))?;
        Ok(vec![pause, ours, load])
    }

    fn hub(&self) -> Result<&KubeCluster, Error> {
        self.hub
            .as_ref()
            .ok_or_else(|| Error::Options("the hub is not running".into()))
    }

    /// Polls `check` until it says true, failing at `deadline` with `log_component`'s tail, or
    /// as soon as any component exits.
    async fn wait_for<F, Fut>(
        &mut self,
        what: &str,
        log_component: &str,
        deadline: Instant,
        mut check: F,
    ) -> Result<(), Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<bool, Error>>,
    {
        let started = Instant::now();
        loop {
            self.check_running()?;
            if check().await? {
                tracing::debug!(what, elapsed = ?started.elapsed(), "done");
                return Ok(());
            }
            if Instant::now() >= deadline {
                let log = self.log_dir.join(format!("{log_component}.log"));
                return Err(Error::NotReady {
                    what: what.to_owned(),
                    waited: started.elapsed(),
                    tail: process::tail(&log, 25),
                    log,
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
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

fn names(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

async fn crds_established(client: &Client, names: &[String]) -> Result<bool, Error> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in names {
        let Ok(Some(crd)) = api.get_opt(name).await else {
            return Ok(false);
        };
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if !established {
            return Ok(false);
        }
    }
    Ok(true)
}

/// One pass of `clusteradm accept`: approves pending registration CSRs of the named clusters and
/// sets `hubAcceptsClient`; true once every cluster is Joined and Available.
///
/// A cluster's CSR is approved only once its ManagedCluster exists, as `clusteradm accept` waits
/// for both: the klusterlet ends its bootstrap phase as soon as its certificate is signed, and a
/// ManagedCluster create still in flight then is cancelled and never retried, leaving the
/// cluster unregistered for good (seen on a loaded 2-core CI machine).
async fn accept_clusters(client: &Client, clusters: &[String]) -> Result<bool, Error> {
    let gvk = GroupVersionKind::gvk("cluster.open-cluster-management.io", "v1", "ManagedCluster");
    let (resource, _) = ::kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|source| Error::Kube {
            what: "discovering ManagedCluster".into(),
            source,
        })?;
    let mcs: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut registered = Vec::new();
    for cluster in clusters {
        // A read that fails (a loaded API server) is retried on the next pass.
        if let Some(mc) = mcs.get_opt(cluster).await.ok().flatten() {
            registered.push((cluster.clone(), mc));
        }
    }

    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
    let list = csrs
        .list(&Default::default())
        .await
        .map_err(|source| Error::Kube {
            what: "listing CSRs".into(),
            source,
        })?;
    for csr in list.items {
        let labels = csr.metadata.labels.clone().unwrap_or_default();
        let Some(cluster) = labels.get("open-cluster-management.io/cluster-name") else {
            continue;
        };
        // Add-on CSRs are the add-on manager's to approve, never the launcher's.
        if labels.contains_key("open-cluster-management.io/addon-name")
            || !registered.iter().any(|(name, _)| name == cluster)
        {
            continue;
        }
        let decided = csr
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| !c.is_empty());
        if decided {
            continue;
        }
        let name = csr.metadata.name.clone().unwrap_or_default();
        let approval = json!({"status": {"conditions": [{
            "type": "Approved", "status": "True", "reason": "ControlPlaneAccept",
            "message": "approved by the ocm-score test control plane, as `clusteradm accept` does",
        }]}});
        csrs.patch_approval(&name, &PatchParams::default(), &Patch::Merge(&approval))
            .await
            .map_err(|source| Error::Kube {
                what: format!("approving CSR {name}"),
                source,
            })?;
    }

    let mut all_ready = registered.len() == clusters.len();
    for (cluster, mc) in &registered {
        if mc.data.pointer("/spec/hubAcceptsClient") != Some(&Value::Bool(true)) {
            let accept = json!({"spec": {"hubAcceptsClient": true}});
            mcs.patch(cluster, &PatchParams::default(), &Patch::Merge(&accept))
                .await
                .map_err(|source| Error::Kube {
                    what: format!("accepting ManagedCluster {cluster}"),
                    source,
                })?;
        }
        let condition = |t: &str| {
            mc.data
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
        };
        all_ready &= condition("ManagedClusterJoined") && condition("ManagedClusterConditionAvailable");
    }
    Ok(all_ready)
}

/// Takes the machine-wide control-plane lock, waiting (and saying so) while another holds it.
async fn machine_lock(deadline: Instant, progress: &dyn Fn(&str)) -> Result<std::fs::File, Error> {
    let path = std::env::temp_dir().join("ocm-score-control-plane.lock");
    let file = std::fs::File::create(&path).map_err(|source| Error::Io {
        what: format!("creating {}", path.display()),
        source,
    })?;
    let mut said = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => {
                if !said {
                    progress(
                        "waiting for another control plane on this machine to stop (OCM's addon webhook binds fixed ports)",
                    );
                    said = true;
                }
                if Instant::now() >= deadline {
                    return Err(Error::PortInUse {
                        component: "hub-addon-webhook".into(),
                        what: "machine-wide lock".into(),
                        port: ocm::WEBHOOK_FIXED_PORTS[0].0,
                        hint: format!(" (another control plane holds {})", path.display()),
                    });
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(Error::Io {
                    what: format!("locking {}", path.display()),
                    source,
                });
            }
        }
    }
}

/// A free TCP port on 127.0.0.1 for a component to listen on, chosen *below* the kernel's
/// ephemeral range: ports the kernel hands out (to `bind(0)` in parallel tests, and as source ports
/// of outgoing connections) can then never take it between this check and the component's bind.
/// Within this process no port is handed out twice.
pub fn free_port() -> Result<u16, Error> {
    use std::collections::BTreeSet;
    use std::hash::{BuildHasher, RandomState};
    use std::sync::Mutex;
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next().and_then(|p| p.parse::<u16>().ok()))
        .unwrap_or(32768);
    let (low, high) = (10_000u16, ephemeral_start.max(10_001));
    let seed = RandomState::new();
    for attempt in 0u64..2_000 {
        let port = low + (seed.hash_one((std::process::id(), attempt)) % u64::from(high - low)) as u16;
        let Ok(mut given) = GIVEN.lock() else { break };
        if given.contains(&port) {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return Ok(port);
        }
    }
    Err(Error::Io {
        what: format!("finding a free port on 127.0.0.1 in {low}..{high}"),
        source: std::io::Error::new(std::io::ErrorKind::AddrInUse, "every port tried is in use"),
    })
}

fn copy(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::copy(from, to).map(|_| ()).map_err(|source| Error::Io {
        what: format!("copying {} to {}", from.display(), to.display()),
        source,
    })
}
