//! An in-memory Kubernetes API server that speaks the real HTTP/JSON protocol, for tests.
//!
//! Start one with [`ApiServer::builder`], talk to it with [`ApiServer::admin_client`] or
//! [`ApiServer::client_for`], point binaries at it with [`ApiServer::write_kubeconfig`], program
//! failures with [`ApiServer::faults`], and check what happened with [`ApiServer::objects`] and
//! [`ApiServer::requests`]. Its README (`tests/kube-double/README.md`) lists where it deviates from
//! a real API server.

pub mod crd;
mod faults;
mod fields;
mod handlers;
mod meta;
pub mod ocm_api;
mod rbac;
mod registry;
mod selectors;
mod server;
mod status;
mod store;

pub use faults::{Faults, RequestMatch};
pub use rbac::{Identity, MASTERS_GROUP};
pub use registry::{Registry, ResourceType};
pub use status::{ApiError, Cause};

use crd::{Crd, CrdError};
use serde_json::{Value, json};
use std::{
    collections::HashMap,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
    time::Duration,
};
use tokio::{sync::watch, task::JoinHandle};

/// Locks a mutex, carrying on past a panic elsewhere (the data stays consistent per operation).
/// Resolves once `flag` is true (shutdown began).
pub(crate) async fn raised(flag: &mut watch::Receiver<bool>) {
    // The guard `wait_for` returns is not `Send`; it is dropped within this statement.
    let _ = flag.wait_for(|s| *s).await.is_ok();
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Group, version and plural resource name: how tests name a resource (`Gvr::of::<Pod>()`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Gvr {
    pub group: String,
    pub version: String,
    pub resource: String,
}

impl Gvr {
    pub fn new(group: &str, version: &str, resource: &str) -> Self {
        Self {
            group: group.into(),
            version: version.into(),
            resource: resource.into(),
        }
    }

    /// The resource a typed kube object lives in.
    pub fn of<K: kube::Resource<DynamicType = ()>>() -> Self {
        Self::new(&K::group(&()), &K::version(&()), &K::plural(&()))
    }
}

/// One handled request, as recorded for assertions ("no write happened").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    pub user: String,
    /// Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection
    /// (or the HTTP method, lowercased, for non-resource paths).
    pub verb: String,
    pub group: String,
    pub resource: String,
    pub subresource: String,
    pub namespace: String,
    pub name: String,
    /// Non-resource path (`/api`, `/version`), empty for resource requests.
    pub path: String,
    pub code: u16,
}

impl RequestRecord {
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }
}

/// How many request records are kept; counters keep counting past it.
pub const REQUEST_LOG_LIMIT: usize = 200_000;

/// Handled requests: a bounded log and unbounded counters.
#[derive(Default)]
pub(crate) struct RequestLog {
    records: std::collections::VecDeque<RequestRecord>,
    /// By (verb, resource, subresource).
    counts: HashMap<(String, String, String), usize>,
    writes: usize,
}

impl RequestLog {
    pub(crate) fn push(&mut self, record: RequestRecord) {
        let key = (
            record.verb.clone(),
            record.resource.clone(),
            record.subresource.clone(),
        );
        *self.counts.entry(key).or_default() += 1;
        self.writes += usize::from(record.is_write());
        if self.records.len() == REQUEST_LOG_LIMIT {
            self.records.pop_front();
        }
        self.records.push_back(record);
    }
}

/// Why a server did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error(transparent)]
    Crd(#[from] CrdError),
    #[error("binding 127.0.0.1:{port}: {source}")]
    Bind { port: u16, source: std::io::Error },
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: {message}")]
    Parse { path: String, message: String },
    #[error("initial object {what}: {error}")]
    Object { what: String, error: Box<ApiError> },
}

/// Where CRDs come from, kept in the order the builder was told so the registry's order is too.
#[derive(Debug)]
enum CrdSource {
    Dir(PathBuf),
    Upstream,
}

/// What the server runs with; see [`ApiServer::builder`].
#[derive(Debug)]
pub struct ApiServerBuilder {
    crds: Vec<Crd>,
    crd_sources: Vec<CrdSource>,
    crds_later: Vec<Crd>,
    builtins: bool,
    rbac: bool,
    port: u16,
    watch_window: usize,
    bookmark_interval: Duration,
    objects: Vec<(String, Value)>,
    object_files: Vec<PathBuf>,
    identities: Vec<Identity>,
    token_files: Vec<PathBuf>,
}

pub(crate) struct Shared {
    pub(crate) registry: Arc<Registry>,
    pub(crate) store: Mutex<store::Store>,
    pub(crate) tokens: Mutex<HashMap<String, Identity>>,
    pub(crate) ids: Mutex<meta::Ids>,
    pub(crate) rbac: bool,
    pub(crate) faults: Faults,
    pub(crate) requests: Mutex<RequestLog>,
    pub(crate) bookmark_interval: Duration,
    /// `true` once shutdown began: watches end, connections drain.
    pub(crate) shutdown: watch::Sender<bool>,
    pub(crate) address: Mutex<SocketAddr>,
}

/// A running server. Dropping it stops it; [`ApiServer::shutdown`] also waits for it.
pub struct ApiServer {
    shared: Arc<Shared>,
    address: SocketAddr,
    admin: Identity,
    task: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for ApiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiServer")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

/// The admin identity's user name; it is in [`MASTERS_GROUP`] and so bypasses RBAC.
pub const ADMIN_USER: &str = "kube-double-admin";

/// Parses a static token file in the API server's CSV format: `token,user,uid,"group1,group2"`.
pub fn parse_token_file(text: &str) -> Result<Vec<Identity>, String> {
    let mut out = Vec::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
    {
        let mut fields = Vec::new();
        let (mut field, mut quoted) = (String::new(), false);
        for c in line.chars() {
            match c {
                '"' => quoted = !quoted,
                ',' if !quoted => fields.push(std::mem::take(&mut field)),
                c => field.push(c),
            }
        }
        fields.push(field);
        if fields.len() < 3 || fields[0].is_empty() || fields[1].is_empty() {
            return Err(format!(
                "line {}: expected token,user,uid[,\"groups\"], got {line:?}",
                n + 1
            ));
        }
        let groups = fields
            .get(3)
            .map(|g| {
                g.split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        out.push(Identity {
            token: fields[0].trim().into(),
            user: fields[1].trim().into(),
            groups,
        });
    }
    Ok(out)
}

/// Splits multi-document YAML into objects, skipping empty documents and unrolling `List`s.
pub fn parse_objects(source: &str, text: &str) -> Result<Vec<Value>, StartError> {
    let mut out = Vec::new();
    for doc in serde_norway::Deserializer::from_str(text) {
        let value = <Value as serde::Deserialize>::deserialize(doc).map_err(|e| StartError::Parse {
            path: source.into(),
            message: e.to_string(),
        })?;
        match value {
            Value::Null => {}
            Value::Object(ref m)
                if m.get("kind")
                    .and_then(Value::as_str)
                    .is_some_and(|k| k.ends_with("List")) =>
            {
                out.extend(
                    m.get("items")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                );
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

impl ApiServerBuilder {
    /// Loads every CRD YAML directly inside `dir` when the server starts.
    pub fn crds_from_dir(mut self, dir: impl AsRef<Path>) -> Self {
        self.crd_sources.push(CrdSource::Dir(dir.as_ref().to_path_buf()));
        self
    }

    /// OCM's CRDs from the Go module `tests/control-plane/go.mod` pins ([`crd::upstream_crds`]);
    /// `start` fails, saying how to get Go, when they cannot be located.
    pub fn upstream_crds(mut self) -> Self {
        self.crd_sources.push(CrdSource::Upstream);
        self
    }

    pub fn crd(mut self, crd: Crd) -> Self {
        self.crds.push(crd);
        self
    }

    /// A CRD the server knows but does not serve (404, absent from discovery, even if loaded by
    /// another call too) until [`ApiServer::install_crd`]: a hub that gets the CRD installed while
    /// clients run. (The double serves no `customresourcedefinitions` to create one through.)
    pub fn crd_installed_later(mut self, crd: Crd) -> Self {
        self.crds_later.push(crd);
        self
    }

    /// Serves the built-in kinds (Node, Pod, Secret, ConfigMap, ServiceAccount, RBAC, Lease,
    /// Deployment, Events, CertificateSigningRequest, SubjectAccessReview). Namespaces are always served.
    pub fn builtin_kinds(mut self) -> Self {
        self.builtins = true;
        self
    }

    /// Decides every request by RBAC (default: off, every authenticated user may do anything).
    pub fn rbac(mut self, on: bool) -> Self {
        self.rbac = on;
        self
    }

    /// Port on 127.0.0.1; 0 (the default) picks a free one.
    pub fn port(mut self, port: u16) -> Self {
        self.port = port;
        self
    }

    /// How many events per resource the server keeps for watch resumption (default 10,000);
    /// a watch from a resourceVersion older than that gets 410 Gone.
    pub fn watch_window(mut self, events: usize) -> Self {
        self.watch_window = events.max(1);
        self
    }

    /// How often watches with `allowWatchBookmarks` get a BOOKMARK (default 5 s; the real server ~1 min).
    pub fn bookmark_interval(mut self, every: Duration) -> Self {
        self.bookmark_interval = every;
        self
    }

    /// An object created (by the admin) when the server starts, in order.
    pub fn object(mut self, object: Value) -> Self {
        self.objects.push(("builder".into(), object));
        self
    }

    /// Objects from a multi-document YAML file or a directory of them, created at start.
    pub fn objects_from(mut self, path: impl AsRef<Path>) -> Self {
        self.object_files.push(path.as_ref().to_path_buf());
        self
    }

    /// An identity that exists from the start (e.g. with a fixed token).
    pub fn identity(mut self, identity: Identity) -> Self {
        self.identities.push(identity);
        self
    }

    /// Identities from a static token file (`token,user,uid,"group1,group2"` per line).
    pub fn token_file(mut self, path: impl AsRef<Path>) -> Self {
        self.token_files.push(path.as_ref().to_path_buf());
        self
    }

    pub async fn start(self) -> Result<ApiServer, StartError> {
        let mut crds = self.crds;
        for source in &self.crd_sources {
            crds.extend(match source {
                CrdSource::Dir(dir) => crd::load_dir(dir)?,
                CrdSource::Upstream => crd::upstream_crds()?,
            });
        }
        let registry = Arc::new(Registry::new(&crds, &self.crds_later, self.builtins, self.rbac)?);
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|source| StartError::Read {
                path: path.into(),
                source,
            })
        };
        let mut ids = meta::Ids::new();
        let admin = Identity {
            user: ADMIN_USER.into(),
            groups: vec![MASTERS_GROUP.into()],
            token: ids.token(),
        };
        let mut tokens: HashMap<String, Identity> = HashMap::new();
        tokens.insert(admin.token.clone(), admin.clone());
        let mut identities = self.identities;
        for path in &self.token_files {
            identities.extend(
                parse_token_file(&read(path)?).map_err(|message| StartError::Parse {
                    path: path.display().to_string(),
                    message,
                })?,
            );
        }
        for identity in identities {
            tokens.insert(identity.token.clone(), identity);
        }
        let (shutdown, _) = watch::channel(false);
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", self.port))
            .await
            .map_err(|source| StartError::Bind {
                port: self.port,
                source,
            })?;
        let address = listener.local_addr().map_err(|source| StartError::Bind {
            port: self.port,
            source,
        })?;
        let shared = Arc::new(Shared {
            store: Mutex::new(store::Store::new(registry.clone(), self.watch_window)),
            registry,
            tokens: Mutex::new(tokens),
            ids: Mutex::new(ids),
            rbac: self.rbac,
            faults: Faults::default(),
            requests: Mutex::new(RequestLog::default()),
            bookmark_interval: self.bookmark_interval,
            shutdown,
            address: Mutex::new(address),
        });
        let mut server = ApiServer {
            shared: shared.clone(),
            address,
            admin,
            task: None,
        };
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            server
                .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}))
                .map_err(|error| StartError::Object {
                    what: format!("namespace {ns}"),
                    error: Box::new(error),
                })?;
        }
        let mut objects = self.objects;
        for path in &self.object_files {
            let files = if path.is_dir() {
                let mut files: Vec<PathBuf> = std::fs::read_dir(path)
                    .map_err(|source| StartError::Read {
                        path: path.clone(),
                        source,
                    })?
                    .filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| {
                        p.extension()
                            .is_some_and(|e| e == "yaml" || e == "yml" || e == "json")
                    })
                    .collect();
                files.sort();
                files
            } else {
                vec![path.clone()]
            };
            for file in files {
                let source = file.display().to_string();
                objects.extend(
                    parse_objects(&source, &read(&file)?)?
                        .into_iter()
                        .map(|o| (source.clone(), o)),
                );
            }
        }
        for (source, object) in objects {
            let what = format!(
                "{} {} from {source}",
                object["kind"].as_str().unwrap_or("?"),
                meta::name(&object)
            );
            server.create(object).map_err(|error| StartError::Object {
                what,
                error: Box::new(error),
            })?;
        }
        server.task = Some(tokio::spawn(server::run(shared, listener)));
        Ok(server)
    }
}

impl ApiServer {
    pub fn builder() -> ApiServerBuilder {
        ApiServerBuilder {
            crds: Vec::new(),
            crd_sources: Vec::new(),
            crds_later: Vec::new(),
            builtins: false,
            rbac: false,
            port: 0,
            watch_window: 10_000,
            bookmark_interval: Duration::from_secs(5),
            objects: Vec::new(),
            object_files: Vec::new(),
            identities: Vec::new(),
            token_files: Vec::new(),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The identity that bypasses RBAC (member of `system:masters`).
    pub fn admin(&self) -> &Identity {
        &self.admin
    }

    /// Registers (or finds) a user with these groups and returns its identity and bearer token.
    pub fn identity(&self, user: &str, groups: &[&str]) -> Identity {
        let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        let mut tokens = lock(&self.shared.tokens);
        if let Some(found) = tokens.values().find(|i| i.user == user && i.groups == groups) {
            return found.clone();
        }
        let identity = Identity {
            user: user.into(),
            groups,
            token: lock(&self.shared.ids).token(),
        };
        tokens.insert(identity.token.clone(), identity.clone());
        identity
    }

    /// A kube client for `identity` (must be called inside a Tokio runtime).
    pub fn client(&self, identity: &Identity) -> kube::Client {
        let uri: hyper::Uri = self.url().parse().unwrap_or_default();
        let mut config = kube::Config::new(uri);
        if let Ok(value) = hyper::header::HeaderValue::from_str(&format!("Bearer {}", identity.token)) {
            config.headers.push((hyper::header::AUTHORIZATION, value));
        }
        // `Config` without TLS or exec plugins cannot fail to build a client.
        kube::Client::try_from(config)
            .unwrap_or_else(|e| panic!("building a kube client for {}: {e}", self.url()))
    }

    pub fn admin_client(&self) -> kube::Client {
        self.client(&self.admin)
    }

    pub fn client_for(&self, user: &str, groups: &[&str]) -> kube::Client {
        self.client(&self.identity(user, groups))
    }

    /// A kubeconfig (YAML) that reaches this server as `identity`.
    pub fn kubeconfig(&self, identity: &Identity) -> String {
        let context = format!("{}@kube-double", identity.user);
        let config = json!({
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "kube-double", "cluster": {"server": self.url()}}],
            "users": [{"name": identity.user, "user": {"token": identity.token}}],
            "contexts": [{"name": context, "context": {"cluster": "kube-double", "user": identity.user, "namespace": "default"}}],
            "current-context": context,
            "preferences": {},
        });
        serde_norway::to_string(&config).unwrap_or_default()
    }

    pub fn write_kubeconfig(&self, identity: &Identity, path: impl AsRef<Path>) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig(identity))
    }

    pub fn faults(&self) -> &Faults {
        &self.shared.faults
    }

    /// Every stored object of a resource, in storage order (namespace, name), as served at `gvr.version`.
    pub fn objects(&self, gvr: &Gvr) -> Vec<Value> {
        let store = lock(&self.shared.store);
        let Some(t) = self.shared.registry.find(&gvr.group, &gvr.version, &gvr.resource) else {
            return Vec::new();
        };
        let rt = &self.shared.registry.types[t];
        store.types[t]
            .objects
            .values()
            .map(|o| handlers::converted(rt, &gvr.version, o))
            .collect()
    }

    pub fn object(&self, gvr: &Gvr, namespace: &str, name: &str) -> Option<Value> {
        let store = lock(&self.shared.store);
        let t = self
            .shared
            .registry
            .find(&gvr.group, &gvr.version, &gvr.resource)?;
        let rt = &self.shared.registry.types[t];
        store
            .get(t, &(namespace.to_string(), name.to_string()))
            .map(|o| handlers::converted(rt, &gvr.version, o))
    }

    /// Starts serving the CRD `<plural>.<group>` held back with
    /// [`ApiServerBuilder::crd_installed_later`], as creating it would; `false` if there is no such
    /// CRD waiting.
    pub fn install_crd(&self, name: &str) -> bool {
        self.shared.registry.install(name)
    }

    /// Creates an object as the admin without going through HTTP (test setup); not recorded as a request.
    pub fn create(&self, object: Value) -> Result<Value, ApiError> {
        handlers::create_direct(&self.shared, &self.admin, object)
    }

    /// The last [`REQUEST_LOG_LIMIT`] requests handled, oldest first. A write is here before anyone
    /// can see its effect (the log is locked while its handler runs).
    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.shared.requests).records.iter().cloned().collect()
    }

    /// How many requests had this verb on this resource (`pods`, or `addonplacementscores/status`),
    /// counted since the start or the last [`ApiServer::reset_requests`] (not limited like the log).
    pub fn request_count(&self, verb: &str, resource: &str) -> usize {
        let (res, sub) = resource.split_once('/').unwrap_or((resource, ""));
        let key = (verb.to_string(), res.to_string(), sub.to_string());
        lock(&self.shared.requests).counts.get(&key).copied().unwrap_or(0)
    }

    /// How many create/update/patch/delete/deletecollection requests were handled.
    pub fn write_count(&self) -> usize {
        lock(&self.shared.requests).writes
    }

    /// Clears the request log and counters.
    pub fn reset_requests(&self) {
        *lock(&self.shared.requests) = RequestLog::default();
    }

    /// The latest resourceVersion handed out.
    pub fn resource_version(&self) -> u64 {
        lock(&self.shared.store).rv
    }

    /// Forgets all watch history, as etcd compaction does: watches and exact lists from any
    /// earlier resourceVersion now get 410 Gone.
    pub fn compact(&self) {
        lock(&self.shared.store).compact();
    }

    pub fn registry(&self) -> &Registry {
        &self.shared.registry
    }

    /// Stops accepting, ends open watches cleanly, lets in-flight requests finish, and waits.
    pub async fn shutdown(mut self) {
        self.shared.shutdown.send_replace(true);
        if let Some(task) = self.task.take() {
            // The server task only ends by itself; a panic in it is already reported by Tokio.
            let _ = task.await;
        }
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.shared.shutdown.send_replace(true);
    }
}
