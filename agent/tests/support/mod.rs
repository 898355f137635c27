//! Shared harness of the agent's end-to-end tests: two API server doubles (the managed cluster and the
//! hub, both enforcing RBAC with the permissions the agent is deployed with), the kubeconfigs the agent
//! reads (the hub one as OCM mounts it: a directory holding `kubeconfig` and `cluster-name`), the real
//! `ocm-score-agent` binary as a child process with fast timings, and polling with deadlines.

#![allow(dead_code)]

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Api, Patch, PatchParams};
use ocm_score_api::{AddOnPlacementScore, AddOnPlacementScoreStatus, Condition};
use ocm_score_kube_double::crd::{self, SchemaValidator};
use ocm_score_kube_double::{ApiServer, Gvr, Identity};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

pub const AGENT: &str = env!("CARGO_BIN_EXE_ocm-score-agent");

/// The managed cluster's name, i.e. its namespace on the hub.
pub const CLUSTER: &str = "cluster1";
/// Another managed cluster's namespace on the hub, which the agent must not be able to write.
pub const OTHER_CLUSTER: &str = "cluster2";
pub const ADDON: &str = "resource-usage-collect";
pub const INSTALL_NAMESPACE: &str = "open-cluster-management-agent-addon";
pub const SCORE_NAME: &str = "resource-usage-score";
/// The agent's service account on the managed cluster.
pub const AGENT_SA: &str = "resource-usage-collect-agent";

/// The CRDs `manifests/hub` installs.
const HUB_CRDS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../manifests/hub/crds");
/// The WorkloadShape CRD's name.
pub const SHAPES_CRD: &str = "workloadshapes.tiering.ocm-score.io";

/// How long the agent may take to start, list both watches and publish for the first time (or
/// reach any other state a test waits for): only a bound on a hang, generous for a loaded machine.
pub const STARTUP: Duration = Duration::from_secs(60);
/// How long a SIGTERM may take to stop the agent: the grace period Kubernetes gives a pod by
/// default (the agent's Deployment sets none) before it kills it.
pub const STOP_WITHIN: Duration = Duration::from_secs(30);

pub use ocm_score_tests::support::TempDir;

/// The hub user and groups OCM's registration gives the add-on agent of [`CLUSTER`].
pub fn hub_user() -> (String, Vec<String>) {
    (
        format!("system:open-cluster-management:cluster:{CLUSTER}:addon:{ADDON}:agent:{ADDON}"),
        vec![
            format!("system:open-cluster-management:cluster:{CLUSTER}:addon:{ADDON}"),
            format!("system:open-cluster-management:addon:{ADDON}"),
            "system:authenticated".to_owned(),
        ],
    )
}

/// The hub's RBAC for the agent, as the add-on manager grants it (`hub-controller/src/addon/registration/hub_rbac.rs`):
/// a Role in the cluster's own namespace only, bound to the agent's user and its per-cluster group,
/// and read access to the cluster-scoped WorkloadShapes.
fn hub_rbac() -> Vec<Value> {
    let (user, groups) = hub_user();
    let role = format!("open-cluster-management-{ADDON}-agent");
    let mut out = shapes_rbac();
    out.extend([
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": role, "namespace": CLUSTER},
            "rules": [
                {"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["addonplacementscores"],
                 "verbs": ["get", "list", "watch", "create", "update", "patch"]},
                {"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["addonplacementscores/status"],
                 "verbs": ["update", "patch"]},
            ],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": role, "namespace": CLUSTER},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user},
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": groups[0]},
            ],
        }),
    ]);
    out
}

/// The agent's read access to WorkloadShapes, as the add-on manager grants it.
pub fn shapes_rbac() -> Vec<Value> {
    let (user, groups) = hub_user();
    let name = format!("open-cluster-management-{ADDON}-agent-shapes");
    vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [{"apiGroups": ["tiering.ocm-score.io"], "resources": ["workloadshapes"],
                       "verbs": ["get", "list", "watch"]}],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": groups[0]},
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user},
            ],
        }),
    ]
}

/// The managed cluster's RBAC for the agent, as its README lists it: nodes and pods list/watch
/// cluster-wide, the Lease in the install namespace.
fn managed_rbac() -> Vec<Value> {
    let subject = json!({"kind": "ServiceAccount", "name": AGENT_SA, "namespace": INSTALL_NAMESPACE});
    vec![
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "ocm-score-agent"},
            "rules": [{"apiGroups": [""], "resources": ["nodes", "pods"], "verbs": ["list", "watch"]}],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "ocm-score-agent"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "ocm-score-agent"},
            "subjects": [subject],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "ocm-score-agent-lease", "namespace": INSTALL_NAMESPACE},
            "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["patch", "create"]}],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "ocm-score-agent-lease", "namespace": INSTALL_NAMESPACE},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "ocm-score-agent-lease"},
            "subjects": [subject],
        }),
    ]
}

pub fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// A node with `allocatable` (resource → quantity), Ready or not, cordoned or not.
pub fn node(name: &str, allocatable: Value, ready: bool, unschedulable: bool) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
        "spec": {"unschedulable": unschedulable},
        "status": {
            "allocatable": allocatable,
            "capacity": allocatable,
            "conditions": [
                {"type": "MemoryPressure", "status": "False"},
                {"type": "Ready", "status": if ready { "True" } else { "False" }},
            ],
        },
    })
}

/// A pod in namespace `shop` with one container requesting `requests`, bound to `node` if given.
pub fn pod(name: &str, node: Option<&str>, requests: Value) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": {"containers": [{"name": "main", "image": "busybox", "resources": {"requests": requests}}]},
    });
    if let Some(node) = node {
        pod["spec"]["nodeName"] = json!(node);
    }
    pod
}

/// The managed cluster every test starts from. Eligible nodes: `node-a` and `node-b`.
///
/// | node | allocatable | effective requests of its counted pods | free |
/// |---|---|---|---|
/// | node-a | 32 cpu, 128Gi, 4 nvidia.com/gpu, 4 example.com/fpga | web: 7.25 cpu, 4.75Gi, 1 gpu, 1 fpga | 24.75 cpu, 123.25Gi, 3 gpu, 3 fpga |
/// | node-b | 16 cpu, 64Gi, 2 example.com/fpga | db: 4 cpu, 16Gi | 12 cpu, 48Gi, 0 gpu, 2 fpga |
/// | node-cordoned | 64 cpu, 256Gi, 8 gpu (unschedulable) | — | not counted |
/// | node-notready | 64 cpu, 256Gi, 8 gpu (Ready=False) | — | not counted |
///
/// `web` = max(apps 1.5+0.5 + sidecar 1, init `migrate` 6 + sidecar 1 started before it) + overhead
/// 0.25 = 7.25 cpu; memory max(3Gi+512Mi + 1Gi, 1Gi + 1Gi) + 256Mi = 4.75Gi. The pod `batch` on node-b
/// has Succeeded, `queued` is bound to no node: neither holds anything.
///
/// Cluster: 36.75 cpu, 171.25Gi, 3 gpu, 0 tpu, 5 of 6 fpga free; best node: 24.75 cpu, 123.25Gi,
/// 3 gpu, 3 fpga (largest fpga allocatable 4).
pub fn managed_objects() -> Vec<Value> {
    let big = json!({"cpu": "64", "memory": "256Gi", "nvidia.com/gpu": "8", "pods": "110"});
    vec![
        namespace("shop"),
        node(
            "node-a",
            json!({"cpu": "32", "memory": "128Gi", "nvidia.com/gpu": "4", "example.com/fpga": "4", "pods": "110"}),
            true,
            false,
        ),
        node(
            "node-b",
            json!({"cpu": "16000m", "memory": "64Gi", "example.com/fpga": "2", "pods": "110"}),
            true,
            false,
        ),
        node("node-cordoned", big.clone(), true, true),
        node("node-notready", big, false, false),
        json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "nodeName": "node-a",
                "overhead": {"cpu": "250m", "memory": "256Mi"},
                "initContainers": [
                    {"name": "log-shipper", "image": "x", "restartPolicy": "Always",
                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                    {"name": "migrate", "image": "x",
                     "resources": {"requests": {"cpu": "6", "memory": "1Gi"}, "limits": {"cpu": "12"}}},
                ],
                "containers": [
                    {"name": "app", "image": "x", "resources": {
                        "requests": {"cpu": "1500m", "memory": "3Gi", "nvidia.com/gpu": "1", "example.com/fpga": "1"},
                        "limits": {"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": "1"}}},
                    {"name": "proxy", "image": "x", "resources": {"requests": {"cpu": "0.5", "memory": "512Mi"}}},
                ],
            },
        }),
        pod("db", Some("node-b"), json!({"cpu": "4", "memory": "16Gi"})),
        pod("batch", Some("node-b"), json!({"cpu": "8", "memory": "32Gi"})),
        pod("queued", None, json!({"cpu": "8", "memory": "32Gi"})),
        pod(
            "on-cordoned",
            Some("node-cordoned"),
            json!({"cpu": "2", "memory": "2Gi"}),
        ),
    ]
}

/// The scores of [`managed_objects`] under the default normalizations (`absolute:MIN:MAX`: free in
/// natural units, MIN → -100, MAX → 100, truncated toward zero; nothing free → -100), plus the
/// `percent:0:100` scores of `--extended-resource example.com/fpga=fpga` when `fpga` is set.
pub fn expected_scores(fpga: bool) -> Vec<(&'static str, i32)> {
    let mut scores = vec![
        ("cpuNodeAvailable", -50),     // 24.75 of 0..100 cores: 200 × 0.2475 − 100 = −50.5
        ("cpuClusterAvailable", -26),  // 36.75 cores: −26.5
        ("memNodeAvailable", -75),     // 123.25 of 0..1024 GiB: 24.07 − 100 = −75.9
        ("memClusterAvailable", -66),  // 171.25 GiB: 33.45 − 100 = −66.6
        ("gpuNodeAvailable", -70),     // 3 of 0..20 devices: 30 − 100
        ("gpuClusterAvailable", -70),  // 3 devices
        ("tpuNodeAvailable", -100),    // none at all
        ("tpuClusterAvailable", -100), // none at all
        ("cpuAvailable", -26),         // as cpuClusterAvailable
        ("memAvailable", -66),         // as memClusterAvailable
    ];
    if fpga {
        scores.push(("fpgaNodeAvailable", 50)); // 3 free of the largest node's 4: 75 % → 50
        scores.push(("fpgaClusterAvailable", 66)); // 5 of 6: 83.3 % → 66.7
    }
    scores
}

/// The managed cluster and the hub, and the files the agent reads to reach them.
pub struct Clusters {
    pub managed: ApiServer,
    pub hub: ApiServer,
    /// The agent's identity on the hub.
    pub hub_identity: Identity,
    pub managed_kubeconfig: PathBuf,
    /// OCM's mounted `<addon>-hub-kubeconfig` Secret: `kubeconfig` and `cluster-name`.
    pub hub_secret: PathBuf,
    pub dir: TempDir,
}

impl Clusters {
    /// Both doubles with RBAC on, the fixture of [`managed_objects`] (with the pod `batch` Succeeded),
    /// the install namespace, and the namespaces of [`CLUSTER`] and [`OTHER_CLUSTER`] on the hub.
    pub async fn start(what: &str) -> Clusters {
        Self::start_with(what, true).await
    }

    /// As [`Clusters::start`]; without `shapes_readable` the agent may not read WorkloadShapes.
    pub async fn start_with(what: &str, shapes_readable: bool) -> Clusters {
        Self::start_hub(what, shapes_readable, true).await
    }

    /// As [`Clusters::start`], on a hub that serves no WorkloadShapes (an install older than them)
    /// until `hub.install_crd(`[`SHAPES_CRD`]`)`.
    pub async fn start_without_shapes_crd(what: &str) -> Clusters {
        Self::start_hub(what, true, false).await
    }

    async fn start_hub(what: &str, shapes_readable: bool, shapes_crd: bool) -> Clusters {
        let mut managed = ApiServer::builder()
            .builtin_kinds()
            .rbac(true)
            .object(namespace(INSTALL_NAMESPACE));
        for object in managed_rbac().into_iter().chain(managed_objects()) {
            managed = managed.object(object);
        }
        let managed = managed.start().await.expect("the managed cluster starts");

        let mut hub = ApiServer::builder()
            .upstream_crds()
            .crds_from_dir(HUB_CRDS)
            .builtin_kinds()
            .rbac(true)
            .object(namespace(CLUSTER))
            .object(namespace(OTHER_CLUSTER));
        if !shapes_crd {
            let crds = crd::load_dir(std::path::Path::new(HUB_CRDS)).expect("the hub CRDs load");
            let shapes = crds
                .into_iter()
                .find(|c| format!("{}.{}", c.plural, c.group) == SHAPES_CRD)
                .expect("the WorkloadShape CRD is among the hub's");
            hub = hub.crd_installed_later(shapes);
        }
        let shapes_rbac = shapes_rbac();
        for object in hub_rbac() {
            if shapes_readable || !shapes_rbac.contains(&object) {
                hub = hub.object(object);
            }
        }
        let hub = hub.start().await.expect("the hub starts");

        // Pods are created Pending, as on a real cluster; the kubelet would report `batch` done.
        set_pod_phase(&managed, "batch", "Succeeded").await;

        let dir = TempDir::new(what);
        let sa = managed.identity(
            &format!("system:serviceaccount:{INSTALL_NAMESPACE}:{AGENT_SA}"),
            &[
                "system:serviceaccounts",
                &format!("system:serviceaccounts:{INSTALL_NAMESPACE}"),
                "system:authenticated",
            ],
        );
        let managed_kubeconfig = dir.path().join("managed.kubeconfig");
        managed
            .write_kubeconfig(&sa, &managed_kubeconfig)
            .expect("writing the managed kubeconfig");

        let (user, groups) = hub_user();
        let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
        let hub_identity = hub.identity(&user, &groups);
        let hub_secret = dir.path().join(format!("{ADDON}-hub-kubeconfig"));
        std::fs::create_dir_all(&hub_secret).expect("creating the secret directory");
        hub.write_kubeconfig(&hub_identity, hub_secret.join("kubeconfig"))
            .expect("writing the hub kubeconfig");
        std::fs::write(hub_secret.join("cluster-name"), CLUSTER).expect("writing cluster-name");

        Clusters {
            managed,
            hub,
            hub_identity,
            managed_kubeconfig,
            hub_secret,
            dir,
        }
    }

    /// Starts the agent against both clusters with `args` after the common ones.
    pub async fn agent(&self, name: &str, args: &[&str]) -> Agent {
        let mut all: Vec<String> = vec![
            "run".into(),
            "--log-format=json".into(),
            "--metrics-bind-address=127.0.0.1:0".into(),
            "--jitter=0".into(),
            format!("--managed-kubeconfig={}", self.managed_kubeconfig.display()),
            format!("--hub-kubeconfig={}", self.hub_secret.display()),
        ];
        all.extend(args.iter().map(|a| (*a).to_owned()));
        Agent::start(name, &all).await
    }

    /// The score object in `namespace` on the hub, typed, if it exists.
    pub fn score_in(&self, namespace: &str) -> Option<AddOnPlacementScore> {
        self.hub
            .object(&Gvr::of::<AddOnPlacementScore>(), namespace, SCORE_NAME)
            .map(|v| serde_json::from_value(v).expect("the stored object is an AddOnPlacementScore"))
    }

    pub fn score(&self) -> Option<AddOnPlacementScore> {
        self.score_in(CLUSTER)
    }

    /// The stored score object's status once it holds `cpuClusterAvailable == value` and the agent's
    /// condition is True.
    pub async fn wait_published(
        &self,
        what: &str,
        value: i32,
        within: Duration,
    ) -> AddOnPlacementScoreStatus {
        eventually(what, within, async || {
            let status = self.score()?.status?;
            let healthy = condition(&status).is_some_and(|c| c.status == "True");
            (healthy && status.score("cpuClusterAvailable") == Some(value)).then_some(status)
        })
        .await
    }

    /// How many status writes (PUT or PATCH of `/status`) and other writes the hub has handled.
    pub fn hub_status_writes(&self) -> usize {
        self.hub.request_count("update", "addonplacementscores/status")
            + self.hub.request_count("patch", "addonplacementscores/status")
    }

    /// Creates an object on the managed cluster (as its admin, not through the agent's identity).
    pub fn create(&self, object: Value) {
        self.managed
            .create(object)
            .expect("creating a managed-cluster object");
    }

    pub async fn delete_pod(&self, name: &str) {
        let pods: Api<Pod> = Api::namespaced(self.managed.admin_client(), "shop");
        pods.delete(name, &Default::default())
            .await
            .expect("deleting a pod");
    }

    pub async fn cordon(&self, node: &str) {
        let nodes: Api<Node> = Api::all(self.managed.admin_client());
        nodes
            .patch(
                node,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"unschedulable": true}})),
            )
            .await
            .expect("cordoning a node");
    }
}

async fn set_pod_phase(server: &ApiServer, name: &str, phase: &str) {
    let pods: Api<Pod> = Api::namespaced(server.admin_client(), "shop");
    pods.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": phase}})),
    )
    .await
    .expect("setting a pod's phase");
}

/// A WorkloadShape named `name` with `spec`.
pub fn shape(name: &str, spec: Value) -> Value {
    json!({
        "apiVersion": "tiering.ocm-score.io/v1alpha1", "kind": "WorkloadShape",
        "metadata": {"name": name},
        "spec": spec,
    })
}

/// The agent's condition about WorkloadShapes on a score object.
pub fn shapes_condition(status: &AddOnPlacementScoreStatus) -> Option<&Condition> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == "WorkloadShapesScored")
}

/// The `fits.*` scores, by name.
pub fn fits_of(status: &AddOnPlacementScoreStatus) -> Vec<(String, i32)> {
    scores_of(status)
        .into_iter()
        .filter(|(name, _)| name.starts_with("fits."))
        .collect()
}

/// The agent's own condition on a score object.
pub fn condition(status: &AddOnPlacementScoreStatus) -> Option<&Condition> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == "AddOnPlacementScoreUpdated")
}

/// Every score, by name, in publication order.
pub fn scores_of(status: &AddOnPlacementScoreStatus) -> Vec<(String, i32)> {
    status.scores.iter().map(|s| (s.name.clone(), s.value)).collect()
}

pub fn owned(scores: &[(&str, i32)]) -> Vec<(String, i32)> {
    scores.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect()
}

/// Seconds from now until `validUntil` (negative once it passed).
pub fn seconds_left(status: &AddOnPlacementScoreStatus) -> i64 {
    let valid_until = status.valid_until.as_ref().expect("validUntil is set").0;
    valid_until.as_second() - jiff::Timestamp::now().as_second()
}

/// A validator for AddOnPlacementScore built from the upstream CRD.
pub fn score_validator() -> SchemaValidator {
    let crds = crd::upstream_crds().expect("the upstream CRDs load");
    let crd = crds
        .iter()
        .find(|c| c.kind == "AddOnPlacementScore")
        .expect("the upstream CRDs define AddOnPlacementScore");
    let version = crd.storage_version().expect("a storage version");
    SchemaValidator::new(crd, version).expect("the schema compiles")
}

/// Polls `check` every 100 ms until it returns `Some`, or panics naming `what` after `within`.
pub async fn eventually<T>(what: &str, within: Duration, mut check: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "gave up after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A running `ocm-score-agent`: its process, the port of its /metrics, and its log lines.
pub struct Agent {
    name: String,
    child: Child,
    pub port: u16,
    log: Arc<Mutex<Vec<String>>>,
}

impl Agent {
    /// Starts the binary with `args` (in an empty environment) and waits for the log line
    /// that names the bound metrics address.
    pub async fn start(name: &str, args: &[String]) -> Agent {
        let mut child = Command::new(AGENT)
            .args(args)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("the agent starts");
        let log = Arc::new(Mutex::new(Vec::new()));
        let stderr = child.stderr.take().expect("stderr is piped");
        let lines = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                lines.lock().unwrap_or_else(|e| e.into_inner()).push(line);
            }
        });
        let mut agent = Agent {
            name: name.to_owned(),
            child,
            port: 0,
            log,
        };
        let port = eventually("the agent to log its metrics address", STARTUP, async || {
            agent.logs().iter().find_map(|line| {
                line["fields"]["addr"]
                    .as_str()
                    .and_then(|a| a.rsplit(':').next())
                    .and_then(|p| p.parse().ok())
            })
        })
        .await;
        agent.port = port;
        agent
    }

    /// The structured log lines so far (lines that are not JSON are skipped).
    pub fn logs(&self) -> Vec<Value> {
        self.log
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Log lines whose message is `message`.
    pub fn logged(&self, message: &str) -> Vec<Value> {
        self.logs()
            .into_iter()
            .filter(|l| l["fields"]["message"] == message)
            .collect()
    }

    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().expect("polling the agent").is_none()
    }

    /// Status code and body of `GET path` on the agent's metrics port.
    pub async fn get(&self, path: &str) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", self.port))
            .await
            .expect("connecting to the agent's metrics port");
        let request = format!("GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
        stream
            .write_all(request.as_bytes())
            .await
            .expect("sending a request");
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .await
            .expect("reading the response");
        let code = response
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or(0);
        let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        (code, body.to_owned())
    }

    /// The value of one sample on /metrics, e.g. `ocm_score_agent_hub_writes_total{result="written"}`.
    pub async fn metric(&self, sample: &str) -> Option<f64> {
        let (_, body) = self.get("/metrics").await;
        body.lines().find_map(|line| {
            line.strip_prefix(sample)
                .and_then(|rest| rest.strip_prefix(' '))
                .and_then(|v| v.trim().parse().ok())
        })
    }

    /// `ocm_score_agent_hub_writes_total{result=...}` (0 before the first such result).
    pub async fn hub_writes(&self, result: &str) -> f64 {
        self.metric(&format!(
            "ocm_score_agent_hub_writes_total{{result=\"{result}\"}}"
        ))
        .await
        .unwrap_or(0.0)
    }

    /// Sends SIGTERM and asserts a clean exit within [`STOP_WITHIN`].
    pub async fn stop(mut self) {
        let pid = self.child.id().to_string();
        let sent = Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("running kill");
        assert!(sent.success(), "kill -TERM {pid}");
        let since = Instant::now();
        let status = eventually("the agent to exit after SIGTERM", STOP_WITHIN, async || {
            self.child.try_wait().expect("polling the agent")
        })
        .await;
        assert!(status.success(), "{}: exit after SIGTERM: {status:?}", self.name);
        assert!(since.elapsed() < STOP_WITHIN);
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        // The log helps whoever reads a failure; `AGENT_E2E_LOGS=1` shows it for passing tests too.
        if std::thread::panicking() || std::env::var_os("AGENT_E2E_LOGS").is_some() {
            eprintln!("----- log of agent {} -----", self.name);
            for line in self.log.lock().unwrap_or_else(|e| e.into_inner()).iter() {
                eprintln!("{line}");
            }
        }
    }
}
