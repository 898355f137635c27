//! End-to-end harness: an in-memory hub (the API server double with the upstream OCM CRDs and RBAC
//! on), our hub manifests installed in it, and `ocm-score-hub addon-manager` run as a real process
//! with exactly the permissions `manifests/hub/` grants.

#![allow(dead_code)]

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use ocm_score_api::{
    AddOnDeploymentConfig, ClusterManagementAddOn, ManagedCluster, ManagedClusterAddOn, ManifestWork,
    PlacementDecision,
};
use ocm_score_kube_double::{ApiServer, Gvr, Identity, RequestRecord};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub const ADDON: &str = "resource-usage-collect";
pub const NAMESPACE: &str = "ocm-score";
pub const CONTROLLER_SA: &str = "ocm-score-addon-manager";
pub const CONTROLLER_USER: &str = "system:serviceaccount:ocm-score:ocm-score-addon-manager";
pub const AGENT_IMAGE: &str = "ocm-score:0.1.0";
pub const WORK_NAME: &str = "addon-resource-usage-collect-deploy-0";
pub const ROLE_NAME: &str = "open-cluster-management-resource-usage-collect-agent";

/// How long a convergence may take before a test gives up.
pub const CONVERGE: Duration = Duration::from_secs(60);

pub fn manifests_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests"))
}

/// Every object of the hub kustomization, in its `resources` order.
pub fn hub_manifests() -> Vec<Value> {
    let dir = manifests_dir().join("hub");
    let kustomization: Value = serde_norway::from_str(
        &std::fs::read_to_string(dir.join("kustomization.yaml")).expect("reading the hub kustomization"),
    )
    .expect("parsing the hub kustomization");
    let mut out = Vec::new();
    for file in kustomization["resources"].as_array().expect("resources") {
        let path = dir.join(file.as_str().expect("a file name"));
        // The CRD kustomization (`crds`): the API server double serves CRDs from their files.
        if path.is_dir() {
            continue;
        }
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        out.extend(ocm_score_kube_double::parse_objects(&path.display().to_string(), &text).expect("YAML"));
    }
    out
}

/// The groups of a service account of the controller's namespace.
fn controller_groups() -> [&'static str; 3] {
    [
        "system:serviceaccounts",
        "system:serviceaccounts:ocm-score",
        "system:authenticated",
    ]
}

pub fn gvr<K: kube::Resource<DynamicType = ()>>() -> Gvr {
    Gvr::of::<K>()
}

/// A hub with our manifests installed and a way to run the controller against it.
pub struct Hub {
    pub server: ApiServer,
    pub admin: kube::Client,
    pub controller_identity: Identity,
    dir: TempDir,
}

impl Hub {
    pub async fn start() -> Hub {
        Self::start_with(|_| true).await
    }

    /// Starts a hub installing the hub manifests for which `keep` is true. The double runs no OCM
    /// addon-manager, so the ClusterManagementAddOn is installed with `lifecycle: self` (the chart's
    /// `install.lifecycle=self`): the install strategy, its removal grace and the owner references
    /// are ours to run and to test here.
    pub async fn start_with(keep: impl Fn(&Value) -> bool) -> Hub {
        let server = ApiServer::builder()
            .upstream_crds()
            // Our own CRDs, as the `crds` kustomization installs them.
            .crds_from_dir(manifests_dir().join("hub/crds"))
            .builtin_kinds()
            .rbac(true)
            .bookmark_interval(Duration::from_secs(1))
            .start()
            .await
            .expect("starting the API server double");
        for mut object in hub_manifests().into_iter().filter(|o| keep(o)) {
            if object["kind"] == "ClusterManagementAddOn" {
                object["metadata"]["annotations"] =
                    json!({ocm_score_api::well_known::LIFECYCLE_ANNOTATION: "self"});
            }
            let what = format!("{} {}", object["kind"], object["metadata"]["name"]);
            server
                .create(object)
                .unwrap_or_else(|e| panic!("installing {what}: {e:?}"));
        }
        // Klusterlets (any authenticated user here) may file CSRs, as OCM's bootstrap role allows.
        server
            .create(
                json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "test-csr-requester"},
                "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
                           "verbs": ["create", "get", "list", "watch"]}]}),
            )
            .expect("csr role");
        server
            .create(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "test-csr-requester"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "test-csr-requester"},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}]}))
            .expect("csr binding");
        let controller_identity = server.identity(CONTROLLER_USER, &controller_groups());
        let admin = server.admin_client();
        Hub {
            server,
            admin,
            controller_identity,
            dir: TempDir::new(),
        }
    }

    /// A managed cluster: its namespace and its ManagedCluster.
    pub fn add_cluster(&self, name: &str) {
        self.server
            .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}))
            .expect("cluster namespace");
        self.server
            .create(json!({"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
                "metadata": {"name": name, "labels": {"cluster.open-cluster-management.io/clusterset": "global"}},
                "spec": {"hubAcceptsClient": true}}))
            .expect("managed cluster");
    }

    /// Makes the install strategy's Placement (`ocm-score/all-clusters`) decide on `clusters`, as the
    /// OCM placement controller would.
    pub async fn decide(&self, clusters: &[&str]) {
        let api: Api<PlacementDecision> = Api::namespaced(self.admin.clone(), NAMESPACE);
        let name = "all-clusters-decision-1";
        if api.get_opt(name).await.expect("reading the decision").is_none() {
            self.server
                .create(json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "PlacementDecision",
                    "metadata": {"name": name, "namespace": NAMESPACE,
                                 "labels": {"cluster.open-cluster-management.io/placement": "all-clusters",
                                            "cluster.open-cluster-management.io/decision-group-index": "0"}}}))
                .expect("placement decision");
        }
        let decisions: Vec<Value> = clusters
            .iter()
            .map(|c| json!({"clusterName": c, "reason": ""}))
            .collect();
        api.patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"decisions": decisions}})),
        )
        .await
        .expect("writing decisions");
    }

    pub fn kubeconfig(&self) -> PathBuf {
        let path = self.dir.0.join("controller.kubeconfig");
        if !path.exists() {
            self.server
                .write_kubeconfig(&self.controller_identity, &path)
                .expect("writing the kubeconfig");
        }
        path
    }

    /// Starts `ocm-score-hub addon-manager` as replica `identity`, with the service account of
    /// `manifests/hub/`.
    pub fn controller(&self, identity: &str, extra: &[&str]) -> Controller {
        let kubeconfig = self.kubeconfig();
        self.spawn_controller(&kubeconfig, identity, extra)
    }

    /// Starts a replica as `user` (made by [`Hub::grant_controller_roles`]), so that the server's
    /// request log tells its requests apart from the other replica's.
    pub fn controller_as(&self, user: &str, identity: &str, extra: &[&str]) -> Controller {
        let kubeconfig = self.dir.0.join(format!("{identity}.kubeconfig"));
        let id = self.server.identity(user, &controller_groups());
        self.server
            .write_kubeconfig(&id, &kubeconfig)
            .expect("writing the kubeconfig");
        self.spawn_controller(&kubeconfig, identity, extra)
    }

    /// Binds a second service account of the controller's namespace to exactly the roles that
    /// `manifests/hub/` binds the controller's to; returns its user name.
    pub fn grant_controller_roles(&self, service_account: &str) -> String {
        let user = format!("system:serviceaccount:{NAMESPACE}:{service_account}");
        for mut binding in hub_manifests()
            .into_iter()
            .filter(|o| o["kind"] == "ClusterRoleBinding" || o["kind"] == "RoleBinding")
        {
            let binds_controller = binding["subjects"].as_array().is_some_and(|s| {
                s.iter()
                    .any(|s| s["kind"] == "ServiceAccount" && s["name"] == CONTROLLER_SA)
            });
            if !binds_controller {
                continue;
            }
            let name = format!(
                "{}-{service_account}",
                binding["metadata"]["name"].as_str().unwrap_or_default()
            );
            binding["metadata"]["name"] = json!(name);
            binding["subjects"] =
                json!([{"kind": "ServiceAccount", "name": service_account, "namespace": NAMESPACE}]);
            self.server
                .create(binding)
                .unwrap_or_else(|e| panic!("binding {name}: {e:?}"));
        }
        user
    }

    /// The controller with short timings where the test waits on them (standby retries), and a
    /// Lease long enough that a replica starved of CPU for seconds keeps it: no test here waits for
    /// a Lease to expire (a stopping leader releases it).
    fn spawn_controller(&self, kubeconfig: &std::path::Path, identity: &str, extra: &[&str]) -> Controller {
        let mut command = Command::new(env!("CARGO_BIN_EXE_ocm-score-hub"));
        command
            .arg("addon-manager")
            .arg(format!("--agent-image={AGENT_IMAGE}"))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg("--metrics-bind-address=127.0.0.1:0")
            .arg(format!("--leader-election-namespace={NAMESPACE}"))
            .arg(format!("--leader-election-identity={identity}"))
            .arg("--leader-election-lease-duration=60s")
            .arg("--leader-election-retry-period=250ms")
            .args(extra)
            .env("RUST_LOG", "info,ocm_score_hub=debug,kube=warn")
            .env("NO_COLOR", "1")
            .env_remove("KUBECONFIG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("starting ocm-score-hub");
        let lines = Arc::new(Mutex::new(Vec::new()));
        if let Some(stderr) = child.stderr.take() {
            let lines = lines.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(stderr).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    lines.lock().unwrap_or_else(|p| p.into_inner()).push(line);
                }
            });
        }
        Controller {
            child,
            lines,
            name: identity.to_string(),
        }
    }

    /// Requests the controller's service account made, leader election excluded.
    pub fn controller_requests(&self) -> Vec<RequestRecord> {
        self.controller_requests_since(0)
    }

    /// For the `addon_scale` benchmark, which measures steady-state traffic: waits until the
    /// controller has been quiet for a second, then forgets all recorded requests. Tests do not use
    /// it (quiet for a second proves nothing); they wait for a finished pass, see
    /// [`Controller::wait_reconciled`].
    pub async fn reset_requests_after_settling(&self, _controller: &Controller) {
        let mut last = usize::MAX;
        loop {
            let now = self.controller_requests().len();
            if now == last {
                break;
            }
            last = now;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        self.server.reset_requests();
    }

    /// Where the server's request log ends now; see [`Hub::controller_requests_since`].
    pub fn request_mark(&self) -> usize {
        self.server.requests().len()
    }

    /// As [`Hub::controller_requests`], from the `mark`-th recorded request on.
    pub fn controller_requests_since(&self, mark: usize) -> Vec<RequestRecord> {
        self.requests_of_since(CONTROLLER_USER, mark)
            .into_iter()
            .filter(|r| r.group != "coordination.k8s.io")
            .collect()
    }

    /// Every request `user` made from the `mark`-th recorded request on, leader election included.
    pub fn requests_of_since(&self, user: &str, mark: usize) -> Vec<RequestRecord> {
        self.server
            .requests()
            .into_iter()
            .skip(mark)
            .filter(|r| r.user == user)
            .collect()
    }

    pub fn controller_writes(&self) -> Vec<RequestRecord> {
        self.controller_requests()
            .into_iter()
            .filter(RequestRecord::is_write)
            .collect()
    }

    /// Requests of any controller replica that RBAC refused.
    pub fn forbidden(&self) -> Vec<RequestRecord> {
        let replica = format!("system:serviceaccount:{NAMESPACE}:{CONTROLLER_SA}");
        self.server
            .requests()
            .into_iter()
            .filter(|r| r.user.starts_with(&replica) && r.code == 403)
            .collect()
    }

    pub fn object(&self, gvr: &Gvr, namespace: &str, name: &str) -> Option<Value> {
        self.server.object(gvr, namespace, name)
    }

    pub fn addon(&self, cluster: &str) -> Option<Value> {
        self.object(&gvr::<ManagedClusterAddOn>(), cluster, ADDON)
    }

    pub fn work(&self, cluster: &str) -> Option<Value> {
        self.object(&gvr::<ManifestWork>(), cluster, WORK_NAME)
    }

    pub fn role(&self, cluster: &str) -> Option<Value> {
        self.object(
            &Gvr::new("rbac.authorization.k8s.io", "v1", "roles"),
            cluster,
            ROLE_NAME,
        )
    }

    pub fn role_binding(&self, cluster: &str) -> Option<Value> {
        self.object(
            &Gvr::new("rbac.authorization.k8s.io", "v1", "rolebindings"),
            cluster,
            ROLE_NAME,
        )
    }

    /// The agents' read access to WorkloadShapes: the ClusterRole and the ClusterRoleBinding.
    pub fn shapes_rbac(&self) -> (Option<Value>, Option<Value>) {
        let name = format!("open-cluster-management-{ADDON}-agent-shapes");
        let rbac =
            |resource: &str| self.object(&Gvr::new("rbac.authorization.k8s.io", "v1", resource), "", &name);
        (rbac("clusterroles"), rbac("clusterrolebindings"))
    }

    /// The `kind:name` of every subject of the agents' WorkloadShapes binding.
    pub fn shapes_readers(&self) -> Vec<String> {
        self.shapes_rbac()
            .1
            .map(|binding| {
                binding["subjects"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|s| {
                        format!(
                            "{}:{}",
                            s["kind"].as_str().unwrap_or_default(),
                            s["name"].as_str().unwrap_or_default()
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn config(&self) -> Value {
        self.object(&gvr::<AddOnDeploymentConfig>(), NAMESPACE, ADDON)
            .expect("the default AddOnDeploymentConfig")
    }

    pub fn cma(&self) -> Option<Value> {
        self.object(&gvr::<ClusterManagementAddOn>(), "", ADDON)
    }

    pub fn cluster(&self, name: &str) -> Option<Value> {
        self.object(&gvr::<ManagedCluster>(), "", name)
    }

    pub fn namespace_exists(&self, name: &str) -> bool {
        self.object(&gvr::<Namespace>(), "", name).is_some()
    }

    /// Plays the work agent: reports the work applied and available, with the agent Deployment's
    /// status feedback (`ready` ready replicas of one).
    pub async fn report_work_applied(&self, cluster: &str, ready: i64) {
        let api: Api<DynamicObject> = Api::namespaced_with(
            self.admin.clone(),
            cluster,
            &kube::api::ApiResource::erase::<ManifestWork>(&()),
        );
        let now = jiff::Timestamp::now().to_string();
        let condition = |t: &str| {
            json!({"type": t, "status": "True", "reason": "AppliedManifestComplete", "message": "done",
                   "lastTransitionTime": now, "observedGeneration": 1})
        };
        let status = json!({"status": {
            "conditions": [condition("Applied"), condition("Available")],
            "resourceStatus": {"manifests": [{
                "resourceMeta": {"ordinal": 6, "group": "apps", "version": "v1", "kind": "Deployment",
                                 "resource": "deployments", "name": "resource-usage-collect-agent",
                                 "namespace": "open-cluster-management-agent-addon"},
                "conditions": [condition("Applied")],
                "statusFeedback": {"values": [
                    {"name": "Replicas", "fieldValue": {"type": "Integer", "integer": 1}},
                    {"name": "ReadyReplicas", "fieldValue": {"type": "Integer", "integer": ready}},
                ]}
            }]}
        }});
        api.patch_status(WORK_NAME, &PatchParams::default(), &Patch::Merge(status))
            .await
            .expect("work status");
    }
}

/// Polls `check` until it returns `Some`, or fails the test naming `what`.
pub async fn eventually<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        if start.elapsed() > timeout {
            panic!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A running `ocm-score-hub addon-manager`.
pub struct Controller {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    pub name: String,
}

impl Controller {
    pub fn logs(&self) -> Vec<String> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub fn logged(&self, needle: &str) -> bool {
        self.logs().iter().any(|l| l.contains(needle))
    }

    /// Waits until `controller` (addon, install or csr) has logged the successful end of a pass over
    /// `namespace/name`, and returns that line: the positive sign that what the controller decided
    /// about the object so far is all it will do until something changes.
    pub async fn wait_reconciled(&self, controller: &str, namespace: &str, name: &str) -> String {
        let fields = [
            format!("controller=\"{controller}\""),
            format!("namespace=\"{namespace}\""),
            format!("name={name} "),
            "ok=true".to_string(),
        ];
        self.wait_for(
            &format!("a finished {controller} pass over {namespace}/{name}"),
            || {
                self.logs()
                    .into_iter()
                    .find(|l| l.contains(" reconciled ") && fields.iter().all(|f| l.contains(f.as_str())))
            },
        )
        .await
    }

    /// The last log lines, for failure messages.
    pub fn tail(&self) -> String {
        let logs = self.logs();
        logs[logs.len().saturating_sub(60)..].join("\n")
    }

    /// The address of /metrics, /healthz and /readyz, from the startup log.
    pub async fn probe_address(&self) -> String {
        eventually(
            &format!("{} to log its probe address", self.name),
            CONVERGE,
            || {
                self.logs()
                    .iter()
                    .find(|l| l.contains("serving /metrics"))
                    .and_then(|l| {
                        l.split("addr=")
                            .nth(1)
                            .map(|rest| rest.split_whitespace().next().unwrap_or_default().to_string())
                    })
            },
        )
        .await
    }

    /// GET on one of the probe endpoints: status code and body.
    pub async fn get(&self, path: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = self.probe_address().await;
        let mut stream = tokio::net::TcpStream::connect(&addr)
            .await
            .expect("connecting to the probe port");
        stream
            .write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
            .await
            .expect("request");
        let mut text = String::new();
        stream.read_to_string(&mut text).await.expect("response");
        let code = text
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = text
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_string())
            .unwrap_or_default();
        (code, body)
    }

    /// Like [`eventually`], but a timeout shows this controller's last log lines.
    pub async fn wait_for<T>(&self, what: &str, mut check: impl FnMut() -> Option<T>) -> T {
        let start = Instant::now();
        loop {
            if let Some(value) = check() {
                return value;
            }
            if start.elapsed() > CONVERGE {
                panic!(
                    "timed out after {CONVERGE:?} waiting for {what}; {} logged:\n{}",
                    self.name,
                    self.tail()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    pub fn has_exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// SIGTERM, then wait for the exit code.
    pub async fn terminate(mut self) -> i32 {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
        }
        // The grace period Kubernetes gives a pod by default before it kills it.
        let status = tokio::time::timeout(Duration::from_secs(30), self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "{} did not stop within 30s of SIGTERM:\n{}",
                    self.name,
                    self.tail()
                )
            })
            .expect("waiting for the controller");
        status.code().unwrap_or(-1)
    }
}

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Self {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "ocm-score-addon-e2e-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).expect("creating a temp dir");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The add-on manager's command line as its Deployment's container gives it: the first argument
/// must be `addon-manager`, the rest must parse as its flags.
pub fn manager_args_of(container: &Value) -> ocm_score_hub::addon::AddonManagerArgs {
    let args = container["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str);
    ocm_score_hub::addon::AddonManagerArgs::from_container_args(args)
        .unwrap_or_else(|e| panic!("the Deployment's args do not parse: {e}"))
}
