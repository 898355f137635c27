//! Watches: the event stream of one request, with bookmarks and resumption from a resourceVersion.

use super::*;

pub(super) fn watch_line(kind: &str, rt: &ResourceType, version: &str, object: &Value) -> Bytes {
    let mut line = Vec::with_capacity(512);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    render(rt, version, object, &mut line);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

pub(super) fn bookmark(rt: &ResourceType, version: &str, rv: u64, initial_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let object = json!({"kind": rt.kind, "apiVersion": rt.api_version(version), "metadata": metadata});
    watch_line("BOOKMARK", rt, version, &object)
}

type Frames = tokio::sync::mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>;

pub(super) fn watch(shared: &Arc<Shared>, r: &ResourceRequest, call: &Call) -> Result<Reply, ApiError> {
    let rt = &shared.registry.types[r.t];
    let q = call.query;
    let filter = Filter::new(rt, r, q)?;
    let send_initial = q.get("sendInitialEvents").map(|v| v == "true");
    let bookmarks = q.get("allowWatchBookmarks").is_some_and(|v| v == "true");
    let rv = q.get("resourceVersion").filter(|v| !v.is_empty()).cloned();
    let rv_match = q.get("resourceVersionMatch").filter(|v| !v.is_empty());
    if send_initial.is_some() {
        if rv_match.map(String::as_str) != Some("NotOlderThan") {
            return Err(invalid_option(
                "ListOptions",
                "resourceVersionMatch",
                "Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
            ));
        }
        if send_initial == Some(true) && !bookmarks {
            return Err(invalid_option(
                "ListOptions",
                "allowWatchBookmarks",
                "Forbidden: sendInitialEvents requires allowWatchBookmarks=true",
            ));
        }
    } else if rv_match.is_some() {
        return Err(invalid_option(
            "ListOptions",
            "resourceVersionMatch",
            "Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
        ));
    }
    let timeout = match q.get("timeoutSeconds") {
        Some(t) => Some(Duration::from_secs(t.parse().map_err(|_| {
            ApiError::bad_request(format!("timeoutSeconds: Invalid value: \"{t}\""))
        })?)),
        None => None,
    };
    let from = rv.as_deref().map(parse_rv).transpose()?;
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, std::io::Error>>(256);
    let mut initial: Vec<Bytes> = Vec::new();
    let (events, last_rv) = {
        let store = lock(&shared.store);
        let data = &store.types[r.t];
        let events = data.tx.subscribe();
        let error_event = |error: ApiError| {
            let line = format!("{{\"type\":\"ERROR\",\"object\":{}}}\n", error.to_status());
            let body = StreamBody::new(futures::stream::iter([Ok::<_, std::io::Error>(Frame::data(
                Bytes::from(line),
            ))]));
            Ok(Reply::Stream(body.boxed()))
        };
        match (send_initial, from) {
            // A streaming list must start at or after the version asked for (upstream waits up to
            // 3 s for it, then ends the watch with this error).
            (Some(true), Some(from)) if from > store.rv => {
                return error_event(ApiError::too_large_resource_version(from, store.rv));
            }
            (Some(true), _) | (None, None | Some(0)) => {
                for object in data.objects.values().filter(|o| filter.matches(o)) {
                    initial.push(watch_line("ADDED", rt, &r.version, object));
                }
                if send_initial == Some(true) {
                    initial.push(bookmark(rt, &r.version, store.rv, true));
                }
            }
            (_, Some(from)) if from < data.compacted_through => {
                return error_event(ApiError::expired(format!(
                    "too old resource version: {from} ({})",
                    data.compacted_through
                )));
            }
            // sendInitialEvents=false without a version: only what happens from now on.
            (Some(false), None | Some(0)) => {}
            (_, from) => {
                let from = from.unwrap_or(0);
                for event in data.log.iter().filter(|e| e.rv > from) {
                    if let Some(kind) = filter.view(event) {
                        initial.push(watch_line(kind.as_str(), rt, &r.version, &event.object));
                    }
                }
            }
        }
        // Events up to the version asked for are not sent, even when the server has not reached it
        // yet (as the real watch cache filters them).
        (events, store.rv.max(from.unwrap_or(0)))
    };
    let task = WatchTask {
        shared: shared.clone(),
        t: r.t,
        version: r.version.clone(),
        filter,
        bookmarks,
        timeout,
        last_rv,
    };
    tokio::spawn(task.run(initial, events, tx));
    let stream = futures::stream::poll_fn(move |cx| rx.poll_recv(cx));
    Ok(Reply::Stream(StreamBody::new(stream).boxed()))
}

pub(super) struct WatchTask {
    pub(super) shared: Arc<Shared>,
    pub(super) t: usize,
    pub(super) version: String,
    pub(super) filter: Filter,
    pub(super) bookmarks: bool,
    pub(super) timeout: Option<Duration>,
    pub(super) last_rv: u64,
}

impl WatchTask {
    async fn run(
        mut self,
        initial: Vec<Bytes>,
        mut events: tokio::sync::broadcast::Receiver<Arc<Event>>,
        tx: Frames,
    ) {
        for line in initial {
            if tx.send(Ok(Frame::data(line))).await.is_err() {
                return;
            }
        }
        let shared = self.shared.clone();
        let rt = &shared.registry.types[self.t];
        let mut cut = shared.faults.cut.subscribe();
        let mut shutdown = shared.shutdown.subscribe();
        let deadline = tokio::time::sleep(self.timeout.unwrap_or(Duration::from_secs(365 * 24 * 3600)));
        tokio::pin!(deadline);
        let mut ticks = tokio::time::interval(shared.bookmark_interval);
        ticks.tick().await;
        loop {
            tokio::select! {
                received = events.recv() => match received {
                    Ok(event) => {
                        if event.rv <= self.last_rv {
                            continue;
                        }
                        self.last_rv = event.rv;
                        if let Some(kind) = self.filter.view(&event)
                            && tx.send(Ok(Frame::data(watch_line(kind.as_str(), rt, &self.version, &event.object)))).await.is_err()
                        {
                            return;
                        }
                    }
                    // Too slow a watcher is dropped, as the real watch cache does; it resumes from its last version.
                    Err(_) => return,
                },
                _ = ticks.tick(), if self.bookmarks => {
                    // Everything up to the store's version has reached us only if nothing is queued.
                    let rv = {
                        let store = lock(&shared.store);
                        if events.is_empty() { store.rv } else { self.last_rv }
                    };
                    // A watch from a version the server has not reached gets no bookmark before it.
                    if rv < self.last_rv {
                        continue;
                    }
                    self.last_rv = rv;
                    if tx.send(Ok(Frame::data(bookmark(rt, &self.version, rv, false)))).await.is_err() {
                        return;
                    }
                }
                _ = &mut deadline => return,
                _ = cut.changed() => {
                    let _ = tx.send(Err(std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "watch cut by fault injection"))).await;
                    return;
                }
                _ = super::super::raised(&mut shutdown) => return,
                _ = tx.closed() => return,
            }
        }
    }
}
