//! [`fleet`]: a fleet of simulated clusters on one hub, with everything a user runs on it at once
//! (issue 45). The clusters are bare ManagedClusters ([`load_fleet`]); their agents run in this
//! process through the agent's own loop and publisher ([`ocm_score_agent::run::run_simulated`]:
//! refresh jitter, renewal, debounce, write rules and retry backoff as shipped), sharing one hub
//! client that authenticates as a ServiceAccount of `ocm-score`, so the hub's audit log holds
//! every score write. On top: `manifests/hub` (the chart's defaults: our add-on manager and the
//! tiering controller) and the chart's explain server, each run as its Deployment says with its
//! own ServiceAccount; Placements naming `resource-usage-score`; TieredPlacements of three tiers;
//! one explain request a second. Measured over a steady window, then again after the hub's
//! kube-apiserver is restarted: see [`FleetReport`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use k8s_openapi::api::apps::v1::Deployment;
use ocm_score_agent::accounting::Figures;
use ocm_score_agent::config::RunConfig;
use ocm_score_agent::run::{SimulatedFigures, run_simulated};
use ocm_score_shell::CancellationToken;
use tokio::sync::Notify;

use super::*;
use crate::addon::container_env;
use crate::process::Tier;
use crate::support::http_get;

/// The fleet scenario's size and windows.
#[derive(Clone, Debug)]
pub struct Fleet {
    pub clusters: usize,
    /// The steady window the figures are taken over.
    pub window: Duration,
    /// Share of the clusters whose score changes each minute (0.01: 1 %).
    pub changes_per_minute: f64,
    pub placements: usize,
    pub tiered_placements: usize,
    /// How long the writes are watched after the API server's restart.
    pub after_restart: Duration,
    /// Patience for each setup step.
    pub timeout: Duration,
    /// The `ocm-score-hub` binary to run the hub's components from (a release build for figures).
    pub hub_binary: PathBuf,
}

/// The ServiceAccount the simulated agents write as.
const AGENTS_ACCOUNT: &str = "ocm-score-fleet-agents";
const AGENTS_USER: &str = "system:serviceaccount:ocm-score:ocm-score-fleet-agents";
/// Where the Placements and the explain server's caller live.
const WORKLOADS: &str = "fleet-workloads";
/// Where the TieredPlacements live.
const TIERS: &str = "fleet-tiers";
/// The cluster whose score the latency probe moves.
const PROBE: &str = "fleet-00000";
/// How often the probe moves its cluster's score: longer than the agent's debounce (5 s) and
/// minimum write interval (15 s) and OCM's round of scheduling passes under load, so each move is
/// timed on its own.
const PROBE_EVERY: Duration = Duration::from_secs(45);
/// Audit windows.
const BUCKET: Duration = Duration::from_secs(5);
/// Free share (percent) of a cluster's resources: the probe's high and low, and the range of the rest.
const PROBE_HIGH: u8 = 100;
const PROBE_LOW: u8 = 1;
const OTHERS: std::ops::RangeInclusive<u8> = 5..=90;

/// What [`fleet`] measured.
#[derive(Clone, Debug, Default)]
pub struct FleetReport {
    pub clusters: usize,
    pub window: Duration,
    pub load: Duration,
    /// Score writes of the agents (status replaces and creates) per 5 s window, steady and after
    /// the restart.
    pub steady_buckets: Vec<usize>,
    pub restart_buckets: Vec<usize>,
    /// How long the restarted API server took to answer again.
    pub restart_down: Duration,
    /// Every audited request in the steady window by user and verb.
    pub steady_requests_by_user: BTreeMap<String, Requests>,
    /// CPU (cores, averaged over the window) and RSS (MiB at its end) of every process.
    pub processes: Vec<(String, f64, f64)>,
    pub etcd_db_before: u64,
    pub etcd_db_after: u64,
    /// Counters of our components moving in the window, per second.
    pub counters: Vec<(String, String, f64)>,
    /// OCM's placement controller's counters moving in the window, per second (its own metrics).
    pub score_changes: usize,
    /// From the probe's score landing on the hub to the probe's PlacementDecision and to the
    /// tiering controller's plan, and from the probe's figures changing to its score landing.
    pub to_decision: Vec<Duration>,
    pub to_plan: Vec<Duration>,
    pub to_score: Vec<Duration>,
    pub probe_misses: Vec<String>,
    pub explain: Vec<Duration>,
    pub explain_failures: Vec<String>,
    pub load_before: String,
    pub load_after: String,
}

/// CPU seconds (user + system) a process has used, from `/proc/<pid>/stat` (clock ticks of 1/100 s,
/// Linux's `USER_HZ`).
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) / 100.0)
}

/// The etcd database file's size (its data directory from its arguments).
fn etcd_db_size(cp: &ControlPlane) -> u64 {
    cp.component_args("hub-etcd")
        .and_then(|args| {
            args.iter()
                .find_map(|a| a.strip_prefix("--data-dir="))
                .map(PathBuf::from)
        })
        .and_then(|dir| std::fs::metadata(dir.join("member/snap/db")).ok())
        .map_or(0, |m| m.len())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Audited requests with their times: reads the log from where it last stopped.
struct AuditTail {
    path: PathBuf,
    offset: u64,
}

/// One audited request (counted once, as [`Requests::count`] does).
struct Audited {
    at: jiff::Timestamp,
    user: String,
    event: Value,
    score_write: bool,
}

impl AuditTail {
    fn at_end(path: &Path) -> Result<Self, Error> {
        let mut tail = AuditTail {
            path: path.to_owned(),
            offset: 0,
        };
        tail.read()?;
        Ok(tail)
    }

    fn read(&mut self) -> Result<Vec<Audited>, Error> {
        use std::io::{Read, Seek, SeekFrom};
        let what = || format!("reading the audit log {}", self.path.display());
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(source) => return Err(Error::Io { what: what(), source }),
        };
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(self.offset))
            .and_then(|_| file.read_to_end(&mut bytes))
            .map_err(|source| Error::Io { what: what(), source })?;
        let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        self.offset += complete as u64;
        let mut out = Vec::new();
        for line in bytes[..complete].split(|b| *b == b'\n') {
            let Ok(event) = serde_json::from_slice::<Value>(line) else {
                continue;
            };
            let verb = event["verb"].as_str().unwrap_or_default();
            let counted = if verb == "watch" {
                "ResponseStarted"
            } else {
                "ResponseComplete"
            };
            if event["stage"] != counted {
                continue;
            }
            let Some(at) = event["stageTimestamp"]
                .as_str()
                .and_then(|t| t.parse::<jiff::Timestamp>().ok())
            else {
                continue;
            };
            let user = event
                .pointer("/user/username")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned();
            let write = matches!(verb, "create" | "update" | "patch");
            let score_write = write
                && user == AGENTS_USER
                && event.pointer("/objectRef/resource") == Some(&json!("addonplacementscores"))
                && event.pointer("/responseStatus/code").and_then(Value::as_u64) < Some(300);
            out.push(Audited {
                at,
                user,
                event,
                score_write,
            });
        }
        Ok(out)
    }
}

/// Score writes per [`BUCKET`] from `start` for `length` (complete windows only).
fn buckets(events: &[Audited], start: jiff::Timestamp, length: Duration) -> Vec<usize> {
    let n = (length.as_secs() / BUCKET.as_secs()) as usize;
    let mut counts = vec![0; n];
    for e in events.iter().filter(|e| e.score_write) {
        let since = e.at.duration_since(start).as_secs_f64();
        if since >= 0.0 {
            let i = (since / BUCKET.as_secs_f64()) as usize;
            if i < n {
                counts[i] += 1;
            }
        }
    }
    counts
}

/// `max / mean` of per-window counts (0 when there are none).
pub fn spread_of(counts: &[usize]) -> (f64, usize, f64) {
    if counts.is_empty() {
        return (0.0, 0, 0.0);
    }
    let mean = counts.iter().sum::<usize>() as f64 / counts.len() as f64;
    let max = counts.iter().copied().max().unwrap_or(0);
    let ratio = if mean > 0.0 { max as f64 / mean } else { 0.0 };
    (mean, max, ratio)
}

/// A small deterministic generator (xorshift): which cluster changes and to what.
struct Dice(u64);

impl Dice {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn free(&mut self) -> u8 {
        OTHERS.start() + self.below(u64::from(OTHERS.end() - OTHERS.start() + 1)) as u8
    }
}

/// A cluster's figures with `free` percent of every resource free (capacity 100 natural units).
fn figures(cfg: &RunConfig, free: &Arc<AtomicU8>) -> SimulatedFigures {
    let resources = cfg.scoring.resources.clone();
    let free = free.clone();
    Arc::new(move || {
        let percent = i128::from(free.load(Ordering::Relaxed));
        let figures = (0..resources.len())
            .map(|r| {
                let unit = resources.units_per_natural_unit(r).max(1.0) as i128;
                Some(Figures {
                    cluster_free: percent * unit,
                    cluster_capacity: 100 * unit,
                    node_free: percent * unit,
                    node_capacity: 100 * unit,
                })
            })
            .collect();
        ocm_score_agent::accounting::ResourceView {
            figures,
            eligible_nodes: 1,
        }
    })
}

/// A Deployment of the hub's, run here as its container says: its args (probe server on a free
/// loopback port), its env, a token of its ServiceAccount; `rewrite` adjusts the args.
async fn start_deployment(
    cp: &ControlPlane,
    dir: &Path,
    deployment: &Deployment,
    program: &Path,
    rewrite: &dyn Fn(Vec<String>) -> Vec<String>,
) -> Result<Component, Error> {
    let name = deployment.metadata.name.clone().unwrap_or_default();
    let pod = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.clone())
        .ok_or_else(|| Error::Options(format!("Deployment {name} has no pod template")))?;
    let account = pod
        .service_account_name
        .clone()
        .ok_or_else(|| Error::Options(format!("Deployment {name} names no ServiceAccount")))?;
    let container = pod
        .containers
        .into_iter()
        .next()
        .ok_or_else(|| Error::Options(format!("Deployment {name} has no container")))?;
    let kubeconfig = dir.join(format!("{name}.kubeconfig"));
    cp.write_service_account_kubeconfig(
        "hub",
        HUB_NAMESPACE,
        &account,
        Duration::from_secs(8 * 3600),
        &kubeconfig,
    )
    .await?;
    let mut args: Vec<String> = container.args.clone().unwrap_or_default();
    args.retain(|a| !a.starts_with("--metrics-bind-address"));
    args.push(format!(
        "--metrics-bind-address=127.0.0.1:{}",
        crate::free_port()?
    ));
    args.push(format!("--kubeconfig={}", kubeconfig.display()));
    let args = rewrite(args);
    let mut env = container_env(&container, HUB_NAMESPACE, &format!("{name}-0"))?;
    env.push(("RUST_LOG".into(), "info,kube=warn".into()));
    env.push(("NO_COLOR".into(), "1".into()));
    let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    Component::spawn(&name, Tier::Client, program, &args, &env, dir)
}

fn parse_yaml_documents(text: &str) -> Result<Vec<Value>, Error> {
    let mut out = Vec::new();
    for document in text.split("\n---") {
        let value: Value = serde_norway::from_str(document)
            .map_err(|e| Error::Options(format!("a document of helm template: {e}")))?;
        if value.is_object() {
            out.push(value);
        }
    }
    Ok(out)
}

async fn wait_ready(component: &mut Component, timeout: Duration) -> Result<(), Error> {
    let deadline = Instant::now() + timeout;
    let address = crate::observe::probe_address(component);
    loop {
        component.check_running()?;
        if let Ok((200, _)) = http_get(&address, "/readyz").await {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(check(
                format!("{} ready", component.name()),
                format!("not ready within {timeout:?}; log tail:\n{}", component.tail()),
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn counters(component: &Component) -> BTreeMap<String, f64> {
    let Ok((200, body)) = http_get(&crate::observe::probe_address(component), "/metrics").await else {
        return BTreeMap::new();
    };
    let mut sums = BTreeMap::new();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let (series, value) = match line.rsplit_once(' ') {
            Some(split) => split,
            None => continue,
        };
        let name = series.split('{').next().unwrap_or(series);
        if !(name.ends_with("_total") || name.ends_with("_count")) {
            continue;
        }
        if let Ok(v) = value.parse::<f64>() {
            *sums.entry(name.to_owned()).or_insert(0.0) += v;
        }
    }
    sums
}

async fn apply_json(hub: &Client, objects: Vec<Value>) -> Result<(), Error> {
    futures::stream::iter(objects)
        .map(|o| {
            let hub = hub.clone();
            async move { crate::apply(&hub, &o).await }
        })
        .buffer_unordered(LOADER_PARALLELISM)
        .try_collect::<Vec<()>>()
        .await
        .map(|_| ())
}

fn placement(i: usize) -> Value {
    let mode = if i.is_multiple_of(2) { "Additive" } else { "Exact" };
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": format!("placement-{i:02}"), "namespace": WORKLOADS},
        "spec": {
            "numberOfClusters": 10 + i,
            "clusterSets": ["global"],
            "predicates": [{"requiredClusterSelector": {"celSelector": {"celExpressions": [
                format!("managedCluster.metadata.name.startsWith('fleet-') && managedCluster.metadata.labels['fleet-tier'] != '{}'", ["a", "b", "c"][i % 3])
            ]}}}],
            "prioritizerPolicy": {"mode": mode, "configurations": [
                {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": RESOURCE_USAGE_SCORE, "scoreName": "cpuAvailable"}}, "weight": 2},
                {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": RESOURCE_USAGE_SCORE, "scoreName": "memAvailable"}}, "weight": 1},
                {"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Steady"}, "weight": 1},
            ]},
            "decisionStrategy": {"groupStrategy": {"clustersPerDecisionGroup": "25%"}},
        },
    })
}

fn tiered(name: &str, tiers: &[(&str, &str)], clusters: i32, at_least: i32) -> Value {
    let tiers: Vec<Value> = tiers
        .iter()
        .map(|(tier, set)| json!({"name": tier, "clusterSets": [set]}))
        .collect();
    json!({
        "apiVersion": "tiering.ocm-score.io/v1alpha1", "kind": "TieredPlacement",
        "metadata": {"name": name, "namespace": TIERS},
        "spec": {
            "mode": "Overflow",
            "numberOfClusters": clusters,
            "tiers": tiers,
            "stabilization": {"minDwell": "0s"},
            "capacity": {"debounce": "0s", "rules": [{"score": {
                "resourceName": RESOURCE_USAGE_SCORE, "scoreName": "cpuAvailable", "atLeast": at_least}}]},
            "template": {"prioritizerPolicy": {"mode": "Exact", "configurations": [
                {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": RESOURCE_USAGE_SCORE, "scoreName": "cpuAvailable"}}, "weight": 1},
            ]}},
        },
    })
}

fn cluster_set(name: &str, label: &str, value: &str) -> Value {
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet",
        "metadata": {"name": name},
        "spec": {"clusterSelector": {"selectorType": "LabelSelector",
                 "labelSelector": {"matchLabels": {label: value}}}},
    })
}

fn binding(set: &str, namespace: &str) -> Value {
    json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSetBinding",
        "metadata": {"name": set, "namespace": namespace}, "spec": {"clusterSet": set},
    })
}

fn score_of(object: &DynamicObject, name: &str) -> Option<i64> {
    object
        .data
        .pointer("/status/scores")?
        .as_array()?
        .iter()
        .find_map(|s| (s["name"] == name).then(|| s["value"].as_i64()).flatten())
}

/// Runs the scenario on `cp` (which must audit `ocm-score`, [`crate::Builder::audit_namespace`]).
pub async fn fleet(
    cp: &mut ControlPlane,
    dir: &Path,
    fleet: &Fleet,
    progress: &dyn Fn(&str),
) -> Result<FleetReport, Error> {
    let audit_log = cp
        .audit_log()
        .ok_or_else(|| Error::Options(format!("the control plane must audit {HUB_NAMESPACE}")))?;
    let hub = cp.hub_client().await?;
    let admin = cp.hub_kubeconfig();
    let names = fleet_names("fleet", fleet.clusters);
    let mut report = FleetReport {
        clusters: fleet.clusters,
        window: fleet.window,
        load_before: load_average(),
        ..Default::default()
    };
    report.load = load_fleet(&hub, &names, fleet.timeout).await?;
    progress(&format!(
        "{} clusters loaded in {:.0} s",
        names.len(),
        report.load.as_secs_f64()
    ));

    // Tiers and the probe, by label.
    let clusters_api: Api<DynamicObject> = Api::all_with(hub.clone(), &resource::<ManagedCluster>());
    futures::stream::iter(names.iter().enumerate())
        .map(|(i, name)| {
            let api = clusters_api.clone();
            async move {
                let tier = ["a", "b", "c"][i % 3];
                let mut labels = json!({"fleet-tier": tier});
                if name == PROBE {
                    labels["fleet-probe"] = json!("yes");
                }
                api.patch(
                    name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": labels}})),
                )
                .await
                .map(|_| ())
                .map_err(kube_error(format!("labelling {name}")))
            }
        })
        .buffer_unordered(LOADER_PARALLELISM)
        .try_collect::<Vec<()>>()
        .await?;

    // The add-on as shipped: manifests/hub (the chart's defaults), and the chart's explain server.
    kubectl(&admin, &["apply", "-k", "manifests/hub"])?;
    let rendered = crate::chart::template(
        &[
            "addonManager.enabled=false",
            "tiering.enabled=false",
            "explainServer.enabled=true",
            "explainServer.tls.secretName=explain-tls",
        ],
        false,
    )
    .map_err(|e| Error::Options(format!("helm template of the explain server: {e}")))?;
    let explain_objects: Vec<Value> = parse_yaml_documents(&rendered)?
        .into_iter()
        .filter(|o| o["metadata"]["name"] == "ocm-score-explain-server")
        .collect();
    let explain_deployment: Deployment = explain_objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .cloned()
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| Error::Options(format!("the chart's explain server Deployment: {e}")))?
        .ok_or_else(|| Error::Options("the chart renders no explain server Deployment".into()))?;
    let explain_rbac: Vec<Value> = explain_objects
        .iter()
        .filter(|o| o["kind"] != "Deployment" && o["kind"] != "PodDisruptionBudget" && o["kind"] != "Service")
        .cloned()
        .collect();
    crate::apply_all(&hub, &explain_rbac).await?;

    // The agents' account: what OCM's registration grants each agent, for every namespace.
    crate::apply_all(
        &hub,
        &[
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": AGENTS_ACCOUNT, "namespace": HUB_NAMESPACE}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                   "metadata": {"name": AGENTS_ACCOUNT},
                   "rules": [
                       {"apiGroups": ["cluster.open-cluster-management.io"],
                        "resources": ["addonplacementscores", "addonplacementscores/status"],
                        "verbs": ["get", "list", "watch", "create", "update", "patch"]},
                       {"apiGroups": ["addon.open-cluster-management.io"],
                        "resources": ["managedclusteraddons"], "verbs": ["get", "list", "watch"]},
                       {"apiGroups": ["tiering.ocm-score.io"],
                        "resources": ["workloadshapes"], "verbs": ["get", "list", "watch"]},
                   ]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": AGENTS_ACCOUNT},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": AGENTS_ACCOUNT},
                   "subjects": [{"kind": "ServiceAccount", "name": AGENTS_ACCOUNT, "namespace": HUB_NAMESPACE}]}),
        ],
    )
    .await?;
    let agents_kubeconfig = dir.join("fleet-agents.kubeconfig");
    cp.write_service_account_kubeconfig(
        "hub",
        HUB_NAMESPACE,
        AGENTS_ACCOUNT,
        Duration::from_secs(8 * 3600),
        &agents_kubeconfig,
    )
    .await?;

    // The hub's components, as their Deployments say.
    let deployments: Api<Deployment> = Api::namespaced(hub.clone(), HUB_NAMESPACE);
    let mut components = Vec::new();
    for name in ["ocm-score-addon-manager", "ocm-score-tiering"] {
        let deployment = deployments
            .get(name)
            .await
            .map_err(kube_error(format!("reading the Deployment {name}")))?;
        components.push(start_deployment(cp, dir, &deployment, &fleet.hub_binary, &|a| a).await?);
    }
    let ca = crate::pki::ClusterCa::new("fleet-explain")?;
    let tls_dir = dir.join("explain-tls");
    std::fs::create_dir_all(&tls_dir).map_err(|source| Error::Io {
        what: format!("creating {}", tls_dir.display()),
        source,
    })?;
    ca.serving_cert_for_address("explain", std::net::Ipv4Addr::LOCALHOST)?
        .write(&tls_dir, "tls")?;
    let ca_file = dir.join("explain-ca.crt");
    std::fs::write(&ca_file, ca.cert_pem()).map_err(|source| Error::Io {
        what: format!("writing {}", ca_file.display()),
        source,
    })?;
    let mount = explain_deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|p| p.containers.first())
        .and_then(|c| c.volume_mounts.as_ref())
        .and_then(|m| m.first())
        .map(|m| m.mount_path.clone())
        .unwrap_or_default();
    let explain_port = crate::free_port()?;
    let tls_path = tls_dir.display().to_string();
    components.push(
        start_deployment(cp, dir, &explain_deployment, &fleet.hub_binary, &|args| {
            let mut args: Vec<String> = args
                .into_iter()
                .filter(|a| !a.starts_with("--bind-address"))
                .map(|a| {
                    if mount.is_empty() {
                        a
                    } else {
                        a.replace(&mount, &tls_path)
                    }
                })
                .collect();
            args.push(format!("--bind-address=127.0.0.1:{explain_port}"));
            args
        })
        .await?,
    );
    for component in &mut components {
        wait_ready(component, fleet.timeout).await?;
    }
    progress("add-on manager, tiering controller and explain server ready");

    // Placements and TieredPlacements.
    let mut objects = vec![
        cluster_set("fleet-tier-a", "fleet-tier", "a"),
        cluster_set("fleet-tier-b", "fleet-tier", "b"),
        cluster_set("fleet-tier-c", "fleet-tier", "c"),
        cluster_set("fleet-probe", "fleet-probe", "yes"),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": WORKLOADS}}),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TIERS}}),
    ];
    crate::apply_all(&hub, &objects).await?;
    objects = vec![binding("global", WORKLOADS)];
    for set in ["fleet-tier-a", "fleet-tier-b", "fleet-tier-c", "fleet-probe"] {
        objects.push(binding(set, TIERS));
    }
    crate::apply_all(&hub, &objects).await?;
    let mut placements: Vec<Value> = (0..fleet.placements).map(placement).collect();
    placements.push(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": "probe", "namespace": WORKLOADS},
        "spec": {"numberOfClusters": 1, "clusterSets": ["global"],
                 "prioritizerPolicy": {"mode": "Exact", "configurations": [
                     {"scoreCoordinate": {"type": "AddOn", "addOn": {"resourceName": RESOURCE_USAGE_SCORE, "scoreName": "cpuAvailable"}}, "weight": 1}]}},
    }));
    let tier_sets = [
        ("a", "fleet-tier-a"),
        ("b", "fleet-tier-b"),
        ("c", "fleet-tier-c"),
    ];
    for i in 0..fleet.tiered_placements {
        let mut order = tier_sets;
        order.rotate_left(i % 3);
        placements.push(tiered(&format!("tiered-{i:03}"), &order, 5, -50));
    }
    // One tier holding the probe alone: its plan selects the probe while its score qualifies, and
    // no other cluster, so no tier transition (which stabilization limits) is ever needed.
    placements.push(tiered("probe", &[("probe", "fleet-probe")], 1, 90));
    apply_json(&hub, placements).await?;
    progress(&format!(
        "{} Placements and {} TieredPlacements (and a probe of each) created",
        fleet.placements, fleet.tiered_placements
    ));

    // The agents: one task each, started over one refresh interval (a fleet's agents start at
    // unrelated times), sharing one client.
    std::fs::write(dir.join("kubeconfig"), "apiVersion: v1\nkind: Config\n").map_err(|source| Error::Io {
        what: "writing a placeholder hub kubeconfig".into(),
        source,
    })?;
    let agents_client = crate::client(&agents_kubeconfig).await?;
    let shutdown = CancellationToken::new();
    let mut dice = Dice(0x9e37_79b9_7f4a_7c15);
    let mut agents: Vec<(Arc<AtomicU8>, Arc<Notify>)> = Vec::new();
    let mut tasks = Vec::new();
    let mut refresh = Duration::from_secs(60);
    let started_agents = Instant::now();
    for (i, name) in names.iter().enumerate() {
        let argv = [
            "ocm-score-agent".to_owned(),
            "run".to_owned(),
            format!("--hub-kubeconfig={}", dir.display()),
            format!("--cluster-name={name}"),
        ];
        let cfg = RunConfig::from_argv(argv)
            .map_err(|e| Error::Options(format!("the simulated agent's command line: {e}")))?;
        refresh = cfg.refresh_interval;
        let free = Arc::new(AtomicU8::new(if name == PROBE { PROBE_LOW } else { dice.free() }));
        let changed = Arc::new(Notify::new());
        let figures = figures(&cfg, &free);
        agents.push((free, changed.clone()));
        let start_at = started_agents + refresh.mul_f64(i as f64 / names.len() as f64);
        let (client, shutdown) = (agents_client.clone(), shutdown.clone());
        tasks.push(tokio::spawn(async move {
            tokio::time::sleep_until(start_at.into()).await;
            run_simulated(cfg, client, figures, changed, shutdown).await;
        }));
    }
    let _stop_agents = StopOnDrop(shutdown.clone());
    progress(&format!(
        "{} simulated agents starting over {:?}",
        names.len(),
        refresh
    ));

    // Watches for the probe.
    let scores: Api<DynamicObject> =
        Api::namespaced_with(hub.clone(), PROBE, &resource::<AddOnPlacementScore>());
    let probe_score = Watch::start(scores, watcher::Config::default());
    let decisions: Api<DynamicObject> =
        Api::namespaced_with(hub.clone(), WORKLOADS, &resource::<PlacementDecision>());
    let probe_decision = Watch::start(
        decisions,
        watcher::Config::default().labels(&format!("{PLACEMENT_LABEL}=probe")),
    );
    let tiered_resource = ApiResource {
        group: "tiering.ocm-score.io".into(),
        version: "v1alpha1".into(),
        api_version: "tiering.ocm-score.io/v1alpha1".into(),
        kind: "TieredPlacement".into(),
        plural: "tieredplacements".into(),
    };
    let probe_plan = Watch::start(
        Api::namespaced_with(hub.clone(), TIERS, &tiered_resource),
        watcher::Config::default().fields("metadata.name=probe"),
    );

    // Settle: every agent started and past its first write, then one more refresh.
    let settle_until = started_agents + refresh * 2 + Duration::from_secs(30);
    progress(&format!(
        "settling for {:.0} s",
        settle_until
            .saturating_duration_since(Instant::now())
            .as_secs_f64()
    ));
    tokio::time::sleep_until(settle_until.into()).await;

    // The steady window.
    let mut audit = AuditTail::at_end(&audit_log)?;
    report.etcd_db_before = etcd_db_size(cp);
    let processes_before: Vec<(String, u32, f64)> = cp
        .processes()
        .into_iter()
        .chain(components.iter().map(|c| (c.name().to_owned(), c.pid())))
        // This process: the simulated agents, the watches, the explain caller.
        .chain([(
            "this harness (the simulated agents)".to_owned(),
            std::process::id(),
        )])
        .filter_map(|(n, pid)| cpu_seconds(pid).map(|s| (n, pid, s)))
        .collect();
    let mut counters_before = Vec::new();
    for c in &components {
        counters_before.push(counters(c).await);
    }
    let placement_metrics_before = ocm_placement_counters(cp, dir).await;
    let window_start = jiff::Timestamp::now();
    let started = Instant::now();
    let end = started + fleet.window;
    progress(&format!(
        "steady window of {:?} from {window_start}",
        fleet.window
    ));

    let token = {
        kubectl(
            &admin,
            &["create", "serviceaccount", "explainer", "-n", WORKLOADS],
        )?;
        kubectl(
            &admin,
            &[
                "create",
                "clusterrolebinding",
                "fleet-explainer",
                "--clusterrole=cluster-admin",
                &format!("--serviceaccount={WORKLOADS}:explainer"),
            ],
        )?;
        cp.service_account_token("hub", WORKLOADS, "explainer", Duration::from_secs(8 * 3600))
            .await?
    };
    let explain = explain_loop(explain_port, &ca_file, &token, fleet.placements.max(1), end);
    let changes = change_loop(&agents, fleet.changes_per_minute, end, &mut dice);
    let probe = probe_loop(&agents[0], &probe_score, &probe_decision, &probe_plan, end);
    let (explained, changed, probed) = tokio::join!(explain, changes, probe);
    (report.explain, report.explain_failures) = explained;
    report.score_changes = changed;
    (
        report.to_score,
        report.to_decision,
        report.to_plan,
        report.probe_misses,
    ) = probed;

    let elapsed = started.elapsed().as_secs_f64();
    report.etcd_db_after = etcd_db_size(cp);
    for (name, pid, before) in processes_before {
        if let Some(after) = cpu_seconds(pid) {
            let rss = crate::observe::process_figures(pid).map_or(0.0, |f| f.rss_bytes as f64 / 1048576.0);
            report.processes.push((name, (after - before) / elapsed, rss));
        }
    }
    for (c, before) in components.iter().zip(&counters_before) {
        for (name, after) in counters(c).await {
            let delta = after - before.get(&name).copied().unwrap_or(0.0);
            if delta > 0.0 {
                report.counters.push((c.name().to_owned(), name, delta / elapsed));
            }
        }
    }
    for (name, after) in ocm_placement_counters(cp, dir).await {
        let delta = after - placement_metrics_before.get(&name).copied().unwrap_or(0.0);
        if delta > 0.0 {
            report
                .counters
                .push(("OCM placement controller".into(), name, delta / elapsed));
        }
    }
    let events = audit.read()?;
    report.steady_buckets = buckets(&events, window_start, fleet.window);
    for e in &events {
        report
            .steady_requests_by_user
            .entry(e.user.clone())
            .or_default()
            .count(&e.event, &e.user);
    }
    report.load_after = load_average();
    progress("steady window done; restarting the hub's kube-apiserver");

    // The API server restarts: every agent reconnects at once.
    let restart_start = jiff::Timestamp::now();
    let down = Instant::now();
    cp.kill("hub-kube-apiserver")?;
    cp.restart("hub-kube-apiserver")?;
    let deadline = Instant::now() + fleet.timeout;
    while !crate::readyz(&hub).await {
        if Instant::now() > deadline {
            return Err(check("the restarted kube-apiserver", "not ready in time"));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    report.restart_down = down.elapsed();
    progress(&format!(
        "kube-apiserver back after {:.1} s; watching writes for {:?}",
        report.restart_down.as_secs_f64(),
        fleet.after_restart
    ));
    tokio::time::sleep(fleet.after_restart + BUCKET).await;
    let events = audit.read()?;
    report.restart_buckets = buckets(&events, restart_start, fleet.after_restart);

    shutdown.cancel();
    for task in tasks {
        let _ = task.await;
    }
    for mut c in components {
        c.terminate();
    }
    Ok(report)
}

struct StopOnDrop(CancellationToken);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// OCM's placement controller's own counters (its workqueue's adds and its scheduling passes),
/// from its `/metrics` on `--listen` (HTTPS, asked with the hub admin's client certificate); empty
/// when it does not answer.
async fn ocm_placement_counters(cp: &ControlPlane, dir: &Path) -> BTreeMap<String, f64> {
    use base64::Engine;
    let Some(address) = cp
        .component_args("hub-placement-controller")
        .and_then(|args| args.iter().find_map(|a| a.strip_prefix("--listen=")))
        .map(str::to_owned)
    else {
        return BTreeMap::new();
    };
    let Ok(kubeconfig) = std::fs::read_to_string(cp.hub_kubeconfig()) else {
        return BTreeMap::new();
    };
    let Ok(kubeconfig) = serde_norway::from_str::<Value>(&kubeconfig) else {
        return BTreeMap::new();
    };
    let user = &kubeconfig["users"][0]["user"];
    let decode = |key: &str| {
        user[key]
            .as_str()
            .and_then(|d| base64::engine::general_purpose::STANDARD.decode(d).ok())
    };
    let (Some(cert), Some(key)) = (decode("client-certificate-data"), decode("client-key-data")) else {
        return BTreeMap::new();
    };
    let (cert_file, key_file) = (dir.join("metrics-client.crt"), dir.join("metrics-client.key"));
    if std::fs::write(&cert_file, cert).is_err() || std::fs::write(&key_file, key).is_err() {
        return BTreeMap::new();
    }
    let Ok(output) = tokio::process::Command::new("curl")
        .args(["-sk", "--cert"])
        .arg(&cert_file)
        .arg("--key")
        .arg(&key_file)
        .arg(format!("https://{address}/metrics"))
        .output()
        .await
    else {
        return BTreeMap::new();
    };
    let body = String::from_utf8_lossy(&output.stdout);
    let mut sums = BTreeMap::new();
    for line in body.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let name = series.split('{').next().unwrap_or(series);
        let wanted = (name == "workqueue_adds_total" && series.contains("SchedulingController"))
            || (name.contains("scheduling") && name.ends_with("_count"));
        if wanted && let Ok(v) = value.parse::<f64>() {
            *sums.entry(name.to_owned()).or_insert(0.0) += v;
        }
    }
    sums
}

/// One explain request a second until `end`, with curl: each request's total time.
async fn explain_loop(
    port: u16,
    ca: &Path,
    token: &str,
    placements: usize,
    end: Instant,
) -> (Vec<Duration>, Vec<String>) {
    let (mut times, mut failures) = (Vec::new(), Vec::new());
    let mut i = 0;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    while Instant::now() < end {
        tick.tick().await;
        let url = format!(
            "https://127.0.0.1:{port}/debug/placements/{WORKLOADS}/placement-{:02}",
            i % placements
        );
        i += 1;
        let output = tokio::process::Command::new("curl")
            .args([
                "-sS",
                "-o",
                "/dev/null",
                "-w",
                "%{http_code} %{time_total}",
                "--cacert",
            ])
            .arg(ca)
            .args(["-H", &format!("Authorization: Bearer {token}"), &url])
            .output()
            .await;
        match output {
            Ok(out) => {
                let text = String::from_utf8_lossy(&out.stdout).to_string();
                let mut parts = text.split_whitespace();
                match (parts.next(), parts.next().and_then(|t| t.parse::<f64>().ok())) {
                    (Some("200"), Some(seconds)) => times.push(Duration::from_secs_f64(seconds)),
                    _ => failures.push(format!("{url}: {text} {}", String::from_utf8_lossy(&out.stderr))),
                }
            }
            Err(e) => failures.push(format!("running curl: {e}")),
        }
    }
    (times, failures)
}

/// `share` of the clusters (the probe aside) get a new score each minute, one at a time at an even
/// pace, until `end`: their figures change and their agent is told, as a watch event would.
async fn change_loop(
    agents: &[(Arc<AtomicU8>, Arc<Notify>)],
    share: f64,
    end: Instant,
    dice: &mut Dice,
) -> usize {
    let per_minute = (agents.len() as f64 * share).max(0.0);
    if per_minute <= 0.0 || agents.len() < 2 {
        tokio::time::sleep_until(end.into()).await;
        return 0;
    }
    let every = Duration::from_secs_f64(60.0 / per_minute);
    let mut changes = 0;
    let mut next = Instant::now() + every;
    while next < end {
        tokio::time::sleep_until(next.into()).await;
        let i = 1 + dice.below(agents.len() as u64 - 1) as usize;
        let (free, changed) = &agents[i];
        // Far enough from the old figure to move the score past the agent's step.
        let old = free.load(Ordering::Relaxed);
        let mut new = dice.free();
        if new.abs_diff(old) < 20 {
            new = if old > 47 { old - 20 } else { old + 20 };
        }
        free.store(new, Ordering::Relaxed);
        changed.notify_one();
        changes += 1;
        next += every;
    }
    changes
}

type Probed = (Vec<Duration>, Vec<Duration>, Vec<Duration>, Vec<String>);

/// Every [`PROBE_EVERY`] until `end`, the probe cluster's free share flips between high and low:
/// how long until its score lands, and from there until OCM's decision of the Placement `probe`
/// and the tiering plan of the TieredPlacement `probe` hold it (high) or not (low).
async fn probe_loop(
    probe: &(Arc<AtomicU8>, Arc<Notify>),
    score: &Watch,
    decision: &Watch,
    plan: &Watch,
    end: Instant,
) -> Probed {
    let (mut to_score, mut to_decision, mut to_plan, mut misses) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut high = false;
    while Instant::now() + PROBE_EVERY < end {
        let flip_at = Instant::now() + PROBE_EVERY;
        high = !high;
        let before = {
            let state = score.watched.lock();
            state.objects.values().find_map(|o| score_of(o, "cpuAvailable"))
        };
        probe
            .0
            .store(if high { PROBE_HIGH } else { PROBE_LOW }, Ordering::Relaxed);
        let changed_at = Instant::now();
        probe.1.notify_one();
        let patience = changed_at + PROBE_EVERY;
        let landed = score
            .until(patience, |state| {
                state
                    .objects
                    .values()
                    .find_map(|o| score_of(o, "cpuAvailable"))
                    .filter(|v| Some(*v) != before)
                    .map(|_| Instant::now())
            })
            .await;
        let Some(landed) = landed else {
            misses.push(format!("the probe's score did not move within {PROBE_EVERY:?}"));
            tokio::time::sleep_until(flip_at.into()).await;
            continue;
        };
        to_score.push(landed - changed_at);
        let decided = decision.until(patience, |state| {
            let holds = decision_clusters(state.objects.values())
                .iter()
                .any(|c| c == PROBE);
            (holds == high).then(Instant::now)
        });
        let planned = plan.until(patience, |state| {
            let holds = state.objects.values().any(|o| {
                o.data
                    .pointer("/status/placement/predicted")
                    .and_then(Value::as_array)
                    .is_some_and(|p| p.iter().any(|c| c == PROBE))
            });
            (holds == high).then(Instant::now)
        });
        let (decided, planned) = tokio::join!(decided, planned);
        match decided {
            Some(at) => to_decision.push(at.saturating_duration_since(landed)),
            None => misses.push(format!("OCM's decision of probe did not follow (high={high})")),
        }
        match planned {
            Some(at) => to_plan.push(at.saturating_duration_since(landed)),
            None => misses.push(format!("the tiering plan of probe did not follow (high={high})")),
        }
        tokio::time::sleep_until(flip_at.into()).await;
    }
    (to_score, to_decision, to_plan, misses)
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

impl FleetReport {
    /// The report as markdown tables.
    pub fn markdown(&self, versions: &str) -> String {
        use std::fmt::Write;
        let mut out = String::new();
        let _ = writeln!(
            out,
            "## A fleet on one hub: {} clusters, steady window {} s\n",
            self.clusters,
            self.window.as_secs()
        );
        let _ = writeln!(
            out,
            "{} · nproc {} · load average before {} / after the window {} (a shared machine: other engineers' builds run beside it) · {}\n",
            jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC"),
            std::thread::available_parallelism().map_or(0, usize::from),
            self.load_before,
            self.load_after,
            versions.trim_end().replace('\n', ", ")
        );
        let (mean, max, ratio) = spread_of(&self.steady_buckets);
        let (r_mean, r_max, r_ratio) = spread_of(&self.restart_buckets);
        let _ = writeln!(out, "| figure | value |\n|---|---|");
        let _ = writeln!(
            out,
            "| score writes landing on the hub, steady (audit log) | {:.1}/s; per 5 s window mean {mean:.1}, max {max}, max/mean {ratio:.2} |",
            mean / BUCKET.as_secs_f64()
        );
        let _ = writeln!(
            out,
            "| score writes after a kube-apiserver restart (down {:.1} s), first {} s | per 5 s window mean {r_mean:.1}, max {r_max}, max/mean {r_ratio:.2}; windows: {:?} |",
            self.restart_down.as_secs_f64(),
            self.restart_buckets.len() * BUCKET.as_secs() as usize,
            self.restart_buckets
        );
        let _ = writeln!(
            out,
            "| etcd database before / after the window | {:.1} MiB / {:.1} MiB |",
            self.etcd_db_before as f64 / 1048576.0,
            self.etcd_db_after as f64 / 1048576.0
        );
        let _ = writeln!(
            out,
            "| score changes made (besides the probe) | {} ({:.2}/s) |",
            self.score_changes,
            self.score_changes as f64 / self.window.as_secs_f64()
        );
        let pct = |v: &[Duration]| {
            let (p50, p99) = median_p99(v);
            format!("p50 {} · p99 {} · n {}", ms(p50), ms(p99), v.len())
        };
        let _ = writeln!(
            out,
            "| probe figures change → its score lands (agent debounce) | {} |",
            pct(&self.to_score)
        );
        let _ = writeln!(
            out,
            "| probe score lands → tiering plan follows | {} |",
            pct(&self.to_plan)
        );
        let _ = writeln!(
            out,
            "| probe score lands → OCM's PlacementDecision follows | {} |",
            pct(&self.to_decision)
        );
        let _ = writeln!(
            out,
            "| explain request (curl, 1/s) | {}; failures {} |",
            pct(&self.explain),
            self.explain_failures.len()
        );
        if !self.probe_misses.is_empty() {
            let _ = writeln!(out, "| probe misses | {} |", self.probe_misses.join("; "));
        }
        let _ = writeln!(
            out,
            "\n| process | CPU (cores, window average) | RSS at the end |\n|---|---|---|"
        );
        for (name, cpu, rss) in &self.processes {
            let _ = writeln!(out, "| {name} | {cpu:.3} | {rss:.0} MiB |");
        }
        let _ = writeln!(
            out,
            "\n| user (audited) | requests in the window | writes | first writes |\n|---|---|---|---|"
        );
        for (user, r) in &self.steady_requests_by_user {
            let _ = writeln!(
                out,
                "| {user} | {} (get {}, list {}, watch {}, leader election {}) | {} | {} |",
                r.total(),
                r.get,
                r.list,
                r.watch,
                r.lease,
                r.writes(),
                r.write_samples
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
        let _ = writeln!(out, "\n| component | counter | per second |\n|---|---|---|");
        for (component, name, rate) in &self.counters {
            let _ = writeln!(out, "| {component} | {name} | {rate:.3} |");
        }
        if !self.explain_failures.is_empty() {
            let _ = writeln!(
                out,
                "\nexplain failures (first 3): {:?}",
                &self.explain_failures[..self.explain_failures.len().min(3)]
            );
        }
        out
    }
}

#[cfg(test)]
mod fleet_tests {
    use super::*;

    #[test]
    fn spread_is_max_over_mean() {
        assert_eq!(spread_of(&[4, 4, 4, 8]), (5.0, 8, 1.6));
        assert_eq!(spread_of(&[]), (0.0, 0, 0.0));
    }
}
