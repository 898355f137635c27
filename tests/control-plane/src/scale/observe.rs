//! What the scenarios observe of the hub: the requests a user made (from the audit log), the objects of a kind as a watch sees them, and a process's memory.

use super::*;

/// Requests counted from the audit log, by verb. Requests on Leases (leader election) are counted
/// apart: renewing a lease is how a leader stays leader, not a read or write of the add-on's state.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requests {
    pub get: usize,
    pub list: usize,
    pub watch: usize,
    pub create: usize,
    pub update: usize,
    pub patch: usize,
    pub delete: usize,
    /// Leader election: gets and updates of the leader Lease.
    pub lease: usize,
    /// The first few writes (verb, resource, namespace/name), to name them when there should be none.
    pub write_samples: Vec<String>,
}

impl Requests {
    pub fn writes(&self) -> usize {
        self.create + self.update + self.patch + self.delete
    }

    pub fn total(&self) -> usize {
        self.get + self.list + self.watch + self.writes() + self.lease
    }

    pub(super) fn add(&mut self, other: &Requests) {
        self.get += other.get;
        self.list += other.list;
        self.watch += other.watch;
        self.create += other.create;
        self.update += other.update;
        self.patch += other.patch;
        self.delete += other.delete;
        self.lease += other.lease;
        let room = 10usize.saturating_sub(self.write_samples.len());
        self.write_samples
            .extend(other.write_samples.iter().take(room).cloned());
    }

    /// Counts one audit event of `user`'s: a watch once its response has started, every other
    /// request once it has completed (each request is counted once).
    pub(super) fn count(&mut self, event: &Value, user: &str) {
        if event.pointer("/user/username").and_then(Value::as_str) != Some(user) {
            return;
        }
        let verb = event["verb"].as_str().unwrap_or_default();
        let stage = event["stage"].as_str().unwrap_or_default();
        let counted_stage = if verb == "watch" {
            "ResponseStarted"
        } else {
            "ResponseComplete"
        };
        if stage != counted_stage {
            return;
        }
        let reference = &event["objectRef"];
        let lease = reference["apiGroup"] == "coordination.k8s.io" && reference["resource"] == "leases";
        let slot = match verb {
            _ if lease => &mut self.lease,
            "get" => &mut self.get,
            "list" => &mut self.list,
            "watch" => &mut self.watch,
            "create" => &mut self.create,
            "update" => &mut self.update,
            "patch" => &mut self.patch,
            "delete" | "deletecollection" => &mut self.delete,
            _ => return,
        };
        *slot += 1;
        if !lease && !matches!(verb, "get" | "list" | "watch") && self.write_samples.len() < 10 {
            let sub = reference["subresource"]
                .as_str()
                .map(|s| format!("/{s}"))
                .unwrap_or_default();
            self.write_samples.push(format!(
                "{verb} {}{sub} {}/{} ({})",
                reference["resource"].as_str().unwrap_or_default(),
                reference["namespace"].as_str().unwrap_or_default(),
                reference["name"].as_str().unwrap_or_default(),
                event.pointer("/responseStatus/code").unwrap_or(&Value::Null),
            ));
        }
    }
}

/// Reads the hub's audit log from where it last stopped: the requests of one user since then.
pub struct AuditCursor {
    pub(super) path: PathBuf,
    pub(super) user: String,
    pub(super) offset: u64,
}

impl AuditCursor {
    /// A cursor at the current end of the log: it counts what comes after.
    pub fn at_end(path: &Path, user: &str) -> Result<Self, Error> {
        let mut cursor = AuditCursor {
            path: path.to_owned(),
            user: user.to_owned(),
            offset: 0,
        };
        cursor.advance()?;
        Ok(cursor)
    }

    /// The requests logged since the last call (complete lines only; a line being written is read
    /// next time).
    pub fn advance(&mut self) -> Result<Requests, Error> {
        use std::io::{Read, Seek, SeekFrom};
        let what = || format!("reading the audit log {}", self.path.display());
        let mut requests = Requests::default();
        let mut file = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            // Written on the first audited request.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(requests),
            Err(source) => return Err(Error::Io { what: what(), source }),
        };
        let mut bytes = Vec::new();
        file.seek(SeekFrom::Start(self.offset))
            .and_then(|_| file.read_to_end(&mut bytes))
            .map_err(|source| Error::Io { what: what(), source })?;
        let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
        for line in bytes[..complete].split(|b| *b == b'\n') {
            if let Ok(event) = serde_json::from_slice::<Value>(line) {
                requests.count(&event, &self.user);
            }
        }
        self.offset += complete as u64;
        Ok(requests)
    }
}

/// Objects of one kind as a watch sees them, with the time each event arrived: how the scenarios
/// time what OCM and the manager do without polling the API server under test.
pub(super) struct Watched {
    pub(super) state: Mutex<WatchedState>,
    pub(super) changed: tokio::sync::watch::Sender<u64>,
}

#[derive(Default)]
pub(super) struct WatchedState {
    pub(super) objects: BTreeMap<String, DynamicObject>,
    /// Objects of a relist under way.
    pub(super) relisting: Option<BTreeMap<String, DynamicObject>>,
    /// When each event (after the first list) arrived.
    pub(super) arrivals: Vec<Instant>,
    pub(super) synced: bool,
}

/// A running watch, stopped on drop.
pub(super) struct Watch {
    pub(super) watched: Arc<Watched>,
    pub(super) task: tokio::task::JoinHandle<()>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub(super) fn key(object: &DynamicObject) -> String {
    format!(
        "{}/{}",
        object.metadata.namespace.as_deref().unwrap_or_default(),
        object.metadata.name.as_deref().unwrap_or_default()
    )
}

impl Watch {
    pub(super) fn start(api: Api<DynamicObject>, config: watcher::Config) -> Watch {
        let (changed, _) = tokio::sync::watch::channel(0);
        let watched = Arc::new(Watched {
            state: Mutex::new(WatchedState::default()),
            changed,
        });
        let shared = watched.clone();
        let task = tokio::spawn(async move {
            let mut events = watcher(api, config).default_backoff().boxed();
            while let Some(event) = events.next().await {
                let event = match event {
                    Ok(event) => event,
                    Err(error) => {
                        tracing::warn!(%error, "scale watch");
                        continue;
                    }
                };
                {
                    let mut state = shared.lock();
                    match event {
                        watcher::Event::Init => state.relisting = Some(BTreeMap::new()),
                        watcher::Event::InitApply(o) => {
                            if let Some(relist) = state.relisting.as_mut() {
                                relist.insert(key(&o), o);
                            }
                        }
                        watcher::Event::InitDone => {
                            if let Some(relist) = state.relisting.take() {
                                state.objects = relist;
                            }
                            if state.synced {
                                state.arrivals.push(Instant::now());
                            }
                            state.synced = true;
                        }
                        watcher::Event::Apply(o) => {
                            state.objects.insert(key(&o), o);
                            state.arrivals.push(Instant::now());
                        }
                        watcher::Event::Delete(o) => {
                            state.objects.remove(&key(&o));
                            state.arrivals.push(Instant::now());
                        }
                    }
                }
                shared.changed.send_modify(|n| *n += 1);
            }
        });
        Watch { watched, task }
    }

    /// Waits until `test` finds what it looks for in the synced objects, or `deadline`.
    pub(super) async fn until<T>(
        &self,
        deadline: Instant,
        mut test: impl FnMut(&WatchedState) -> Option<T>,
    ) -> Option<T> {
        let mut changes = self.watched.changed.subscribe();
        loop {
            {
                let state = self.watched.lock();
                if state.synced
                    && let Some(found) = test(&state)
                {
                    return Some(found);
                }
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, changes.changed()).await {
                Ok(Ok(())) => {}
                // The watch task ended (it never does unless aborted) or time is up.
                Ok(Err(_)) | Err(_) => return None,
            }
        }
    }
}

impl Watched {
    pub(super) fn lock(&self) -> MutexGuard<'_, WatchedState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The manager's peak and current resident set (KiB), from `/proc/<pid>/status`.
pub(super) fn memory_kib(pid: u32) -> (u64, u64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmHWM:"), field("VmRSS:"))
}
