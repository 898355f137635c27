//! The verbs: discovery, get, list, watch, create, update, patch (merge, JSON, apply), delete,
//! deletecollection, and the access reviews.

use super::{
    Identity, Shared,
    fields::{self, Scope, Write},
    lock, meta, rbac,
    registry::{ResourceType, Special},
    selectors::{FieldSelector, LabelSelector},
    server::{JSON, Reply, ResourceRequest},
    status::{ApiError, Cause},
    store::{Event, EventKind, ObjKey, Preconditions, Propagation, Store},
};
use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Frame;
use serde_json::{Value, json};
use std::{collections::HashMap, sync::Arc, time::Duration};

/// One resource request's inputs beyond its route.
pub(crate) struct Call<'a> {
    pub(crate) identity: &'a Identity,
    pub(crate) query: &'a HashMap<String, String>,
    pub(crate) content_type: &'a str,
    pub(crate) user_agent: &'a str,
    pub(crate) body: Bytes,
}

/// `object` as served at `version` (versions differ only in `apiVersion`: conversion strategy None).
pub(crate) fn converted(rt: &ResourceType, version: &str, object: &Value) -> Value {
    let mut out = object.clone();
    if version != rt.storage_version() {
        out["apiVersion"] = json!(rt.api_version(version));
    }
    out
}

fn render(rt: &ResourceType, version: &str, object: &Value, out: &mut Vec<u8>) {
    if version == rt.storage_version() {
        serde_json::to_writer(&mut *out, object).unwrap_or_default();
    } else {
        serde_json::to_writer(&mut *out, &converted(rt, version, object)).unwrap_or_default();
    }
}

fn object_reply(code: u16, rt: &ResourceType, version: &str, object: &Value, warnings: Vec<String>) -> Reply {
    let mut body = Vec::with_capacity(512);
    render(rt, version, object, &mut body);
    Reply::Json {
        code,
        body,
        warnings,
        content_type: JSON,
    }
}

/// The media type of aggregated discovery, which clients request through `Accept`.
pub(crate) const AGGREGATED_DISCOVERY: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";

pub(crate) fn non_resource(shared: &Shared, path: &str, accept: &str) -> Result<Reply, ApiError> {
    let registry = &shared.registry;
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let wants_aggregated = accept
        .split(',')
        .any(|a| a.contains("as=APIGroupDiscoveryList") && a.contains("v=v2"));
    if wants_aggregated && matches!(segments.as_slice(), ["api"] | ["apis"]) {
        let body = serde_json::to_vec(&registry.aggregated(segments == ["api"])).unwrap_or_default();
        return Ok(Reply::Json {
            code: 200,
            body,
            warnings: vec![],
            content_type: AGGREGATED_DISCOVERY,
        });
    }
    let doc = match segments.as_slice() {
        ["api"] => registry.core_versions(&lock(&shared.address).to_string()),
        ["api", "v1"] => registry.resource_list("", "v1").ok_or_else(ApiError::no_route)?,
        ["apis"] => registry.group_list(),
        ["apis", g] => registry.group(g).ok_or_else(ApiError::no_route)?,
        ["apis", g, v] => registry.resource_list(g, v).ok_or_else(ApiError::no_route)?,
        ["version"] => json!({
            "major": "1", "minor": "33", "gitVersion": "v1.33.0-kube-double", "gitCommit": "",
            "gitTreeState": "clean", "buildDate": "", "goVersion": "", "compiler": "rust", "platform": "linux/amd64",
        }),
        ["healthz"] | ["livez"] | ["readyz"] => {
            return Ok(Reply::Json {
                code: 200,
                body: b"ok".to_vec(),
                warnings: Vec::new(),
                content_type: "text/plain",
            });
        }
        _ => return Err(ApiError::no_route()),
    };
    Ok(Reply::json(200, &doc))
}

pub(crate) fn resource(shared: &Arc<Shared>, r: &ResourceRequest, call: Call) -> Result<Reply, ApiError> {
    let rt = &shared.registry.types[r.t];
    match (r.verb.as_str(), rt.special) {
        ("create", Special::SubjectAccessReview | Special::SelfSubjectAccessReview) => {
            access_review(shared, r, &call)
        }
        ("get", _) => get(shared, r),
        ("list", _) => list(shared, r, &call),
        ("watch", _) => watch(shared, r, &call),
        ("create", _) => create(shared, r, &call),
        ("update", _) => update(shared, r, &call),
        ("patch", _) => patch(shared, r, &call),
        ("delete", _) => delete(shared, r, &call),
        ("deletecollection", _) => delete_collection(shared, r, &call),
        _ => Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        )),
    }
}

fn key_of(rt: &ResourceType, r: &ResourceRequest) -> ObjKey {
    (
        if rt.namespaced {
            r.namespace.clone()
        } else {
            String::new()
        },
        r.name.clone(),
    )
}

fn get(shared: &Shared, r: &ResourceRequest) -> Result<Reply, ApiError> {
    let rt = &shared.registry.types[r.t];
    let object = lock(&shared.store).get(r.t, &key_of(rt, r)).cloned();
    let object = object.ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, &r.name))?;
    Ok(object_reply(200, rt, &r.version, &object, Vec::new()))
}

/// Namespace, label and field filters of a list or watch.
struct Filter {
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn new(rt: &ResourceType, r: &ResourceRequest, q: &HashMap<String, String>) -> Result<Self, ApiError> {
        Ok(Self {
            namespace: (rt.namespaced && !r.namespace.is_empty()).then(|| r.namespace.clone()),
            labels: LabelSelector::parse(q.get("labelSelector").map(String::as_str).unwrap_or(""))?,
            fields: FieldSelector::parse(
                q.get("fieldSelector").map(String::as_str).unwrap_or(""),
                &rt.field_selectors,
            )?,
        })
    }

    fn matches(&self, object: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| meta::namespace(object) == ns)
            && (self.labels.is_empty() || self.labels.matches(object))
            && (self.fields.is_empty() || self.fields.matches(object))
    }

    fn unselective(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    /// What a watcher with this filter sees of `event` (objects moving in or out of the selection
    /// become ADDED / DELETED, as upstream).
    fn view(&self, event: &Event) -> Option<EventKind> {
        let now = self.matches(&event.object);
        let before = event.previous.as_deref().is_some_and(|p| self.matches(p));
        match event.kind {
            EventKind::Added => now.then_some(EventKind::Added),
            EventKind::Modified => match (before, now) {
                (true, true) => Some(EventKind::Modified),
                (false, true) => Some(EventKind::Added),
                (true, false) => Some(EventKind::Deleted),
                (false, false) => None,
            },
            EventKind::Deleted => (before || now).then_some(EventKind::Deleted),
        }
    }
}

fn parse_rv(text: &str) -> Result<u64, ApiError> {
    text.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "resourceVersion: Invalid value: \"{text}\": must be a non-negative integer"
        ))
    })
}

#[derive(serde::Serialize, serde::Deserialize)]
struct ContinueToken {
    v: String,
    rv: u64,
    start: String,
}

fn encode_continue(rv: u64, last: &ObjKey) -> String {
    let token = ContinueToken {
        v: "meta.k8s.io/v1".into(),
        rv,
        start: format!("{}/{}\u{0}", last.0, last.1),
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(&token).unwrap_or_default())
}

fn decode_continue(text: &str) -> Result<(u64, ObjKey), ApiError> {
    let bad = || {
        ApiError::bad_request(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)",
        )
    };
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(text.trim_end_matches('='))
        .map_err(|_| bad())?;
    let token: ContinueToken = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let start = token.start.trim_end_matches('\u{0}');
    let (ns, name) = start.split_once('/').ok_or_else(bad)?;
    Ok((token.rv, (ns.to_string(), name.to_string())))
}

fn invalid_option(kind: &str, field: &str, message: &str) -> ApiError {
    ApiError::invalid(
        "meta.k8s.io",
        kind,
        "",
        vec![Cause {
            reason: "FieldValueForbidden".into(),
            message: message.into(),
            field: field.into(),
        }],
    )
}

fn list(shared: &Shared, r: &ResourceRequest, call: &Call) -> Result<Reply, ApiError> {
    let rt = &shared.registry.types[r.t];
    let q = call.query;
    let filter = Filter::new(rt, r, q)?;
    let limit: usize = match q.get("limit") {
        Some(l) => l
            .parse()
            .map_err(|_| ApiError::bad_request(format!("limit: Invalid value: \"{l}\"")))?,
        None => 0,
    };
    let rv = q.get("resourceVersion").filter(|v| !v.is_empty());
    let rv_match = q.get("resourceVersionMatch").filter(|v| !v.is_empty());
    let continue_from = q.get("continue").filter(|v| !v.is_empty());
    if rv_match.is_some() && rv.is_none() {
        return Err(invalid_option(
            "ListOptions",
            "resourceVersionMatch",
            "Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided",
        ));
    }
    if continue_from.is_some() && (rv.is_some_and(|v| v != "0") || rv_match.is_some()) {
        return Err(invalid_option(
            "ListOptions",
            "resourceVersion",
            "Forbidden: specifying resource version is not allowed when using continue",
        ));
    }
    if let Some(m) = rv_match
        && m != "Exact"
        && m != "NotOlderThan"
    {
        return Err(invalid_option(
            "ListOptions",
            "resourceVersionMatch",
            &format!("Unsupported value: \"{m}\""),
        ));
    }
    let store = lock(&shared.store);
    let (snapshot_rv, start) = match (continue_from, rv_match.map(String::as_str)) {
        (Some(token), _) => {
            let (rv, start) = decode_continue(token)?;
            (Some(rv), Some(start))
        }
        (None, Some("Exact")) => {
            let exact = parse_rv(rv.map(String::as_str).unwrap_or(""))?;
            if exact == 0 {
                return Err(invalid_option(
                    "ListOptions",
                    "resourceVersionMatch",
                    "Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                ));
            }
            (Some(exact), None)
        }
        _ => {
            // NotOlderThan (explicit, or the legacy meaning of a bare version): "0" is any version,
            // anything else must have been reached.
            if let Some(v) = rv
                && let at = parse_rv(v)?
                && at > store.rv
            {
                return Err(ApiError::too_large_resource_version(at, store.rv));
            }
            (None, None)
        }
    };
    // A paged or exact list reads one consistent snapshot; history older than the window is gone.
    let older;
    let (objects, list_rv) = match snapshot_rv {
        Some(at)
            if at < store.rv && (store.changed_since(r.t, at) || at < store.types[r.t].compacted_through) =>
        {
            match store.snapshot(r.t, at) {
                Ok(snapshot) => {
                    older = snapshot;
                    (&older, at)
                }
                Err(_) if continue_from.is_some() => {
                    let mut error = ApiError::expired(
                        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
                    );
                    if let Some(start) = &start {
                        error.continue_token = Some(encode_continue(store.rv, start));
                    }
                    return Err(error);
                }
                Err(oldest) => {
                    return Err(ApiError::expired(format!(
                        "too old resource version: {at} ({oldest})"
                    )));
                }
            }
        }
        Some(at) if at > store.rv => return Err(ApiError::too_large_resource_version(at, store.rv)),
        Some(at) => (&store.types[r.t].objects, at.max(1)),
        None => (&store.types[r.t].objects, store.rv),
    };
    let list_rv = if snapshot_rv.is_some() { list_rv } else { store.rv };
    // Storage order is (namespace, name): a namespace is one contiguous range, and objects are
    // only dereferenced when a selector needs them (pointer chasing dominates large lists).
    let lower = match (&start, &filter.namespace) {
        (Some(after), _) => std::ops::Bound::Excluded(after.clone()),
        (None, Some(ns)) => std::ops::Bound::Included((ns.clone(), String::new())),
        (None, None) => std::ops::Bound::Unbounded,
    };
    let mut items: Vec<Arc<Value>> = Vec::new();
    let mut last_key = None;
    let mut more = false;
    for (key, object) in objects.range::<ObjKey, _>((lower, std::ops::Bound::Unbounded)) {
        if filter.namespace.as_ref().is_some_and(|ns| key.0 != *ns) {
            break;
        }
        if !filter.unselective() && !filter.matches(object) {
            continue;
        }
        if limit > 0 && items.len() == limit {
            more = true;
            break;
        }
        items.push(object.clone());
        last_key = Some(key.clone());
    }
    drop(store);
    let mut metadata = json!({"resourceVersion": list_rv.to_string()});
    if more && let Some(last) = &last_key {
        metadata["continue"] = json!(encode_continue(list_rv, last));
    }
    let mut body = Vec::with_capacity(256 + items.len() * 512);
    body.extend_from_slice(
        format!(
            "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",\"metadata\":{},\"items\":[",
            rt.list_kind,
            rt.api_version(&r.version),
            metadata
        )
        .as_bytes(),
    );
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            body.push(b',');
        }
        if rt.custom {
            render(rt, &r.version, item, &mut body);
        } else {
            // Built-in lists are typed upstream: their items carry no kind/apiVersion.
            body.push(b'{');
            let fields = item
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(k, _)| *k != "kind" && *k != "apiVersion");
            for (i, (key, value)) in fields.enumerate() {
                if i > 0 {
                    body.push(b',');
                }
                serde_json::to_writer(&mut body, key).unwrap_or_default();
                body.push(b':');
                serde_json::to_writer(&mut body, value).unwrap_or_default();
            }
            body.push(b'}');
        }
    }
    body.extend_from_slice(b"]}");
    Ok(Reply::Json {
        code: 200,
        body,
        warnings: Vec::new(),
        content_type: JSON,
    })
}

fn watch_line(kind: &str, rt: &ResourceType, version: &str, object: &Value) -> Bytes {
    let mut line = Vec::with_capacity(512);
    line.extend_from_slice(b"{\"type\":\"");
    line.extend_from_slice(kind.as_bytes());
    line.extend_from_slice(b"\",\"object\":");
    render(rt, version, object, &mut line);
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

fn bookmark(rt: &ResourceType, version: &str, rv: u64, initial_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string()});
    if initial_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let object = json!({"kind": rt.kind, "apiVersion": rt.api_version(version), "metadata": metadata});
    watch_line("BOOKMARK", rt, version, &object)
}

type Frames = tokio::sync::mpsc::Sender<Result<Frame<Bytes>, std::io::Error>>;

fn watch(shared: &Arc<Shared>, r: &ResourceRequest, call: &Call) -> Result<Reply, ApiError> {
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

struct WatchTask {
    shared: Arc<Shared>,
    t: usize,
    version: String,
    filter: Filter,
    bookmarks: bool,
    timeout: Option<Duration>,
    last_rv: u64,
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
                _ = super::raised(&mut shutdown) => return,
                _ = tx.closed() => return,
            }
        }
    }
}

/// How unknown fields are treated (`fieldValidation`): the server's default is Warn.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Validation {
    Strict,
    Warn,
    Ignore,
}

/// Everything a write needs to know besides the objects.
struct WriteCtx<'a> {
    rt: &'a ResourceType,
    t: usize,
    version: &'a str,
    subresource: &'a str,
    manager: String,
    validation: Validation,
    dry_run: bool,
    identity: &'a Identity,
}

enum Ownership {
    /// Record the write as an `Update` by `ctx.manager`.
    Update,
    /// Server-side apply already wrote `managedFields`.
    Applied,
}

impl<'a> WriteCtx<'a> {
    fn new(shared: &'a Shared, r: &'a ResourceRequest, call: &Call<'a>) -> Result<Self, ApiError> {
        let q = call.query;
        let manager = match q.get("fieldManager") {
            Some(m) if m.len() > 128 => {
                return Err(invalid_option(
                    "PatchOptions",
                    "fieldManager",
                    "Too long: may not be more than 128 bytes",
                ));
            }
            Some(m) => m.clone(),
            None => call.user_agent.split('/').next().unwrap_or("").to_string(),
        };
        let validation = match q.get("fieldValidation").map(String::as_str) {
            None | Some("") | Some("Warn") => Validation::Warn,
            Some("Strict") => Validation::Strict,
            Some("Ignore") => Validation::Ignore,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "fieldValidation: Unsupported value: \"{other}\": supported values: \"Ignore\", \"Strict\", \"Warn\""
                )));
            }
        };
        let dry_run = match q.get("dryRun").map(String::as_str) {
            None | Some("") => false,
            Some("All") => true,
            Some(other) => {
                return Err(ApiError::bad_request(format!(
                    "dryRun: Unsupported value: \"{other}\": supported values: \"All\""
                )));
            }
        };
        Ok(Self {
            rt: &shared.registry.types[r.t],
            t: r.t,
            version: &r.version,
            subresource: &r.subresource,
            manager,
            validation,
            dry_run,
            identity: call.identity,
        })
    }

    fn scope(&self) -> Scope {
        if self.subresource.is_empty() {
            Scope::Main {
                status_separate: self.rt.has_status(),
            }
        } else {
            Scope::Status
        }
    }

    fn schema(&self) -> Option<&Value> {
        self.rt.schema(self.version).map(|s| &s.schema)
    }
}

fn parse_body(call: &Call) -> Result<Value, ApiError> {
    let is_yaml =
        call.content_type.starts_with("application/yaml") || call.content_type.contains("apply-patch+yaml");
    let value: Value = if is_yaml {
        serde_norway::from_slice(&call.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding YAML: {e}")))?
    } else {
        serde_json::from_slice(&call.body)
            .map_err(|e| ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}")))?
    };
    Ok(value)
}

/// Checks `apiVersion`/`kind` against the endpoint (defaulting them when absent).
fn check_type(rt: &ResourceType, version: &str, object: &mut Value) -> Result<(), ApiError> {
    let Some(map) = object.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the body of the request must be a JSON object",
        ));
    };
    let expected = rt.api_version(version);
    match map.get("apiVersion").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("apiVersion".into(), json!(expected));
        }
        Some(v) if v != expected => {
            return Err(ApiError::bad_request(format!(
                "the API version in the data ({v}) does not match the expected API version ({expected})"
            )));
        }
        Some(_) => {}
    }
    match map.get("kind").and_then(Value::as_str) {
        None | Some("") => {
            map.insert("kind".into(), json!(rt.kind));
        }
        Some(k) if k != rt.kind => {
            return Err(ApiError::bad_request(format!(
                "the kind in the data ({k}) does not match the expected kind ({})",
                rt.kind
            )));
        }
        Some(_) => {}
    }
    if !map.get("metadata").is_some_and(Value::is_object) {
        map.insert("metadata".into(), json!({}));
    }
    Ok(())
}

/// `status.scores[0].value` to the value there, for error messages.
fn value_at_field(object: &Value, field: &str) -> Option<Value> {
    let mut node = object;
    for part in field.split('.') {
        let (name, indexes) = part
            .split_once('[')
            .map(|(n, i)| (n, Some(i)))
            .unwrap_or((part, None));
        if !name.is_empty() {
            node = node.get(name)?;
        }
        if let Some(indexes) = indexes {
            for index in indexes.split('[') {
                node = node.get(index.trim_end_matches(']').parse::<usize>().ok()?)?;
            }
        }
    }
    Some(node.clone())
}

fn schema_causes(object: &Value, errors: Vec<crate::crd::FieldError>) -> Vec<Cause> {
    errors
        .into_iter()
        .map(|e| {
            // jsonschema reports a missing property at its parent: name the property, as the server does.
            if let Some(rest) = e.message.strip_prefix('"')
                && let Some((property, tail)) = rest.split_once('"')
                && tail.contains("is a required property")
            {
                let field = if e.field == "<root>" {
                    property.to_string()
                } else {
                    format!("{}.{property}", e.field)
                };
                return Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value".into(),
                    field,
                };
            }
            let value = value_at_field(object, &e.field)
                .map(|v| v.to_string())
                .unwrap_or_else(|| "null".into());
            Cause {
                reason: "FieldValueInvalid".into(),
                message: format!("Invalid value: {value}: {} in body {}", e.field, e.message),
                field: e.field,
            }
        })
        .collect()
}

fn name_cause(rt: &ResourceType, name: &str) -> Option<Cause> {
    let (ok, rule) = if rt.group == "rbac.authorization.k8s.io" {
        // RBAC objects only need to be valid path segments (so `system:...` names are fine).
        (
            meta::is_path_segment(name),
            "may not be '.' or '..' and may not contain '/' or '%'",
        )
    } else if rt.special == Special::Namespace {
        (
            meta::is_dns_label(name),
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        )
    } else {
        (
            meta::is_dns_subdomain(name),
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        )
    };
    (!ok).then(|| Cause {
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: \"{name}\": {rule}"),
        field: "metadata.name".into(),
    })
}

/// Pruning, defaulting and schema validation of a custom resource; returns `Warning`s.
fn admit_custom(ctx: &WriteCtx, object: &mut Value) -> Result<Vec<String>, ApiError> {
    let Some(schema) = ctx.rt.schema(ctx.version) else {
        return Ok(Vec::new());
    };
    let pruned = crate::crd::prune(&schema.schema, object);
    let mut warnings = Vec::new();
    if !pruned.is_empty() {
        match ctx.validation {
            Validation::Strict => {
                let listed: Vec<String> = pruned.iter().map(|p| format!("unknown field \"{p}\"")).collect();
                return Err(ApiError::bad_request(format!(
                    "strict decoding error: {}",
                    listed.join(", ")
                )));
            }
            Validation::Warn => warnings.extend(pruned.iter().map(|p| format!("unknown field \"{p}\""))),
            Validation::Ignore => {}
        }
    }
    crate::crd::apply_defaults(&schema.schema, object);
    let errors = schema.validator.errors(object);
    if !errors.is_empty() {
        return Err(ApiError::invalid(
            &ctx.rt.group,
            &ctx.rt.kind,
            meta::name(object),
            schema_causes(object, errors),
        ));
    }
    Ok(warnings)
}

/// Whether two versions of an object differ outside `metadata` (and `status`, when it is separate).
fn spec_changed(rt: &ResourceType, old: &Value, new: &Value) -> bool {
    let (Some(o), Some(n)) = (old.as_object(), new.as_object()) else {
        return true;
    };
    let skip = |k: &str| k == "metadata" || (k == "status" && rt.has_status());
    let keys: std::collections::BTreeSet<&String> = o.keys().chain(n.keys()).filter(|k| !skip(k)).collect();
    keys.into_iter().any(|k| o.get(k) != n.get(k))
}

struct Written {
    object: Arc<Value>,
    warnings: Vec<String>,
}

const SERVER_SET_METADATA: [&str; 6] = [
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
];

/// The shared tail of create, update and patch: validation, server-set metadata, generation,
/// ownership, no-op detection, commit, and removal of a deleting object left without finalizers.
fn finish_write(
    store: &mut Store,
    ctx: &WriteCtx,
    old: Option<&Arc<Value>>,
    mut new: Value,
    ownership: Ownership,
) -> Result<Written, ApiError> {
    let rt = ctx.rt;
    let mut warnings = admit_custom(ctx, &mut new)?;
    if let Some(old) = old {
        let (new_meta, old_meta) = (&mut new["metadata"], &old["metadata"]);
        for field in SERVER_SET_METADATA {
            match old_meta.get(field) {
                Some(v) => new_meta[field] = v.clone(),
                None => {
                    if let Some(m) = new_meta.as_object_mut() {
                        m.remove(field);
                    }
                }
            }
        }
        new_meta["resourceVersion"] = old_meta["resourceVersion"].clone();
        if meta::deleting(old) {
            let before = meta::finalizers(old);
            let added: Vec<String> = meta::finalizers(&new)
                .into_iter()
                .filter(|f| !before.contains(f))
                .collect();
            if !added.is_empty() {
                return Err(ApiError::invalid(
                    &rt.group,
                    &rt.kind,
                    meta::name(old),
                    vec![Cause {
                        reason: "FieldValueForbidden".into(),
                        message: format!(
                            "Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers {added:?}"
                        ),
                        field: "metadata.finalizers".into(),
                    }],
                ));
            }
        }
        if rt.has_generation && spec_changed(rt, old, &new) {
            let g = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            new["metadata"]["generation"] = json!(g + 1);
        }
    }
    if let Some(m) = new["metadata"].as_object_mut()
        && m.get("labels")
            .is_some_and(|l| l.as_object().is_some_and(|l| l.is_empty()))
    {
        m.remove("labels");
    }
    new["apiVersion"] = json!(rt.api_version(rt.storage_version()));
    if let Ownership::Update = ownership {
        let now = meta::now();
        let api_version = rt.api_version(ctx.version);
        let w = Write {
            manager: &ctx.manager,
            scope: ctx.scope(),
            schema: ctx.schema(),
            api_version: &api_version,
            now: &now,
        };
        fields::record_update(old.map(|o| o.as_ref()), &mut new, &w);
    }
    if old.is_some_and(|o| **o == new) {
        return Ok(Written {
            object: old.cloned().unwrap_or_default(),
            warnings,
        });
    }
    if ctx.dry_run {
        return Ok(Written {
            object: Arc::new(new),
            warnings,
        });
    }
    let key = meta::key(&new);
    let stored = store.put(ctx.t, key.clone(), new);
    if store.remove_if_finalized(ctx.t, &key).is_some() {
        store.run_gc();
    }
    warnings.dedup();
    Ok(Written {
        object: stored,
        warnings,
    })
}

/// The create path shared by POST, apply-to-create, and setup objects.
fn create_object(
    store: &mut Store,
    ids: &mut meta::Ids,
    ctx: &WriteCtx,
    namespace: &str,
    mut object: Value,
    ownership: Ownership,
) -> Result<Written, ApiError> {
    let rt = ctx.rt;
    check_type(rt, ctx.version, &mut object)?;
    let metadata = object["metadata"]
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))?;
    let mut name = metadata
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if name.is_empty() {
        let prefix = metadata.get("generateName").and_then(Value::as_str).unwrap_or("");
        if prefix.is_empty() {
            return Err(ApiError::invalid(
                &rt.group,
                &rt.kind,
                "",
                vec![Cause {
                    reason: "FieldValueRequired".into(),
                    message: "Required value: name or generateName is required".into(),
                    field: "metadata.name".into(),
                }],
            ));
        }
        name = format!("{prefix}{}", ids.name_suffix());
        metadata.insert("name".into(), json!(name));
    }
    if rt.namespaced {
        match metadata.get("namespace").and_then(Value::as_str) {
            None | Some("") => {
                metadata.insert("namespace".into(), json!(namespace));
            }
            Some(ns) if ns != namespace => {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            Some(_) => {}
        }
    } else {
        metadata.remove("namespace");
    }
    if metadata
        .get("resourceVersion")
        .and_then(Value::as_str)
        .is_some_and(|v| !v.is_empty())
    {
        return Err(ApiError::internal(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    for field in SERVER_SET_METADATA {
        metadata.remove(field);
    }
    metadata.remove("managedFields");
    metadata.insert("uid".into(), json!(ids.uid()));
    metadata.insert("creationTimestamp".into(), json!(meta::now()));
    if rt.has_generation {
        metadata.insert("generation".into(), json!(1));
    }
    if let Some(cause) = name_cause(rt, &name) {
        return Err(ApiError::invalid(&rt.group, &rt.kind, &name, vec![cause]));
    }
    if rt.namespaced {
        match store.namespace(namespace) {
            None => return Err(ApiError::not_found("", "namespaces", namespace)),
            Some(ns) if meta::deleting(ns) => {
                return Err(ApiError::forbidden(
                    format!("{} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated", super::status::qualified(&rt.group, &rt.plural)),
                    &rt.group,
                    &rt.plural,
                    &name,
                )
                .with_details(json!({"name": name, "group": rt.group, "kind": rt.plural, "causes": [{"reason": "NamespaceTerminating", "message": format!("namespace {namespace} is being terminated"), "field": "metadata.namespace"}]})));
            }
            Some(_) => {}
        }
    }
    if rt.create_drops_status
        && let Some(m) = object.as_object_mut()
    {
        m.remove("status");
    }
    match rt.special {
        Special::Namespace => {
            object["metadata"]["labels"]["kubernetes.io/metadata.name"] = json!(name);
            object["spec"]["finalizers"] = json!(["kubernetes"]);
            object["status"] = json!({"phase": "Active"});
        }
        Special::CertificateSigningRequest => {
            object["spec"]["username"] = json!(ctx.identity.user);
            object["spec"]["groups"] = json!(ctx.identity.groups);
        }
        _ => {}
    }
    if rt.group.is_empty() && rt.plural == "pods" {
        object["status"] = json!({"phase": "Pending"});
    }
    let key = meta::key(&object);
    if store.get(ctx.t, &key).is_some() {
        return Err(ApiError::already_exists(&rt.group, &rt.plural, &name));
    }
    finish_write(store, ctx, None, object, ownership)
}

/// Creates an object as `identity` without HTTP (test setup and initial objects).
pub(crate) fn create_direct(shared: &Shared, identity: &Identity, object: Value) -> Result<Value, ApiError> {
    let api_version = object.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
    let (t, version) = shared.registry.by_kind(api_version, kind).ok_or_else(|| {
        ApiError::bad_request(format!(
            "no kind \"{kind}\" is registered for version \"{api_version}\""
        ))
    })?;
    let rt = &shared.registry.types[t];
    let r = ResourceRequest {
        t,
        version: version.clone(),
        verb: "create".into(),
        namespace: meta::namespace(&object).to_string(),
        ..Default::default()
    };
    let query = HashMap::new();
    let call = Call {
        identity,
        query: &query,
        content_type: "application/json",
        user_agent: "kube-double",
        body: Bytes::new(),
    };
    let ctx = WriteCtx::new(shared, &r, &call)?;
    let namespace = if rt.namespaced && r.namespace.is_empty() {
        "default".to_string()
    } else {
        r.namespace.clone()
    };
    let mut store = lock(&shared.store);
    let mut ids = lock(&shared.ids);
    let written = create_object(&mut store, &mut ids, &ctx, &namespace, object, Ownership::Update)?;
    Ok(converted(rt, &version, &written.object))
}

fn create(shared: &Shared, r: &ResourceRequest, call: &Call) -> Result<Reply, ApiError> {
    let ctx = WriteCtx::new(shared, r, call)?;
    let object = parse_body(call)?;
    let mut store = lock(&shared.store);
    let mut ids = lock(&shared.ids);
    let written = create_object(
        &mut store,
        &mut ids,
        &ctx,
        &r.namespace,
        object,
        Ownership::Update,
    )?;
    Ok(object_reply(
        201,
        ctx.rt,
        &r.version,
        &written.object,
        written.warnings,
    ))
}

/// The object a write to `subresource` produces from the stored `old` and the submitted `incoming`:
/// the main resource keeps the stored status, `status` keeps everything but the status, `approval`
/// changes only the approval conditions.
fn overlay(rt: &ResourceType, subresource: &str, old: &Value, mut incoming: Value) -> Value {
    let status_of = |v: &Value| v.get("status").cloned();
    match subresource {
        "" if rt.has_status() => {
            match status_of(old) {
                Some(s) => incoming["status"] = s,
                None => {
                    if let Some(m) = incoming.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            incoming
        }
        "" => incoming,
        "approval" => {
            let mut out = old.clone();
            out["status"]["conditions"] = incoming
                .pointer("/status/conditions")
                .cloned()
                .unwrap_or(json!([]));
            out
        }
        _ => {
            let mut out = old.clone();
            match status_of(&incoming) {
                Some(mut s) => {
                    if rt.special == Special::CertificateSigningRequest {
                        // Approval conditions only change through the approval subresource.
                        let approvals = |v: &Value| -> Vec<Value> {
                            v.pointer("/status/conditions")
                                .and_then(Value::as_array)
                                .into_iter()
                                .flatten()
                                .filter(|c| {
                                    matches!(
                                        c.get("type").and_then(Value::as_str),
                                        Some("Approved" | "Denied")
                                    )
                                })
                                .cloned()
                                .collect()
                        };
                        let mut conditions: Vec<Value> = approvals(old);
                        conditions.extend(
                            s.get("conditions")
                                .and_then(Value::as_array)
                                .into_iter()
                                .flatten()
                                .filter(|c| {
                                    !matches!(
                                        c.get("type").and_then(Value::as_str),
                                        Some("Approved" | "Denied")
                                    )
                                })
                                .cloned(),
                        );
                        s["conditions"] = json!(conditions);
                    }
                    out["status"] = s;
                }
                None => {
                    if let Some(m) = out.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
            if let Some(rv) = incoming.pointer("/metadata/resourceVersion") {
                out["metadata"]["resourceVersion"] = rv.clone();
            }
            if let Some(uid) = incoming.pointer("/metadata/uid") {
                out["metadata"]["uid"] = uid.clone();
            }
            out
        }
    }
}

/// Optimistic concurrency and identity checks of a submitted object against the stored one.
fn preconditions(rt: &ResourceType, old: &Value, incoming: &Value, url_name: &str) -> Result<(), ApiError> {
    let name = incoming
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !name.is_empty() && name != url_name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({url_name})"
        )));
    }
    if rt.namespaced {
        let ns = incoming
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or("");
        if !ns.is_empty() && ns != meta::namespace(old) {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    let uid = incoming
        .pointer("/metadata/uid")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !uid.is_empty() && uid != meta::uid(old) {
        let why = format!(
            "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
            meta::uid(old)
        );
        return Err(ApiError::conflict(&rt.group, &rt.plural, url_name, &why));
    }
    let rv = incoming
        .pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    if !rv.is_empty() && rv != meta::resource_version(old) {
        return Err(ApiError::stale(&rt.group, &rt.plural, url_name));
    }
    Ok(())
}

fn write_existing(
    shared: &Shared,
    r: &ResourceRequest,
    ctx: &WriteCtx,
    change: impl FnOnce(&Value) -> Result<Value, ApiError>,
) -> Result<Reply, ApiError> {
    let rt = ctx.rt;
    let mut store = lock(&shared.store);
    let key = key_of(rt, r);
    let old = store
        .get(r.t, &key)
        .cloned()
        .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, &r.name))?;
    let mut incoming = change(&old)?;
    check_type(rt, &r.version, &mut incoming)?;
    preconditions(rt, &old, &incoming, &r.name)?;
    let mut new = overlay(rt, &r.subresource, &old, incoming);
    new["metadata"]["name"] = json!(r.name);
    if rt.namespaced {
        new["metadata"]["namespace"] = json!(key.0);
    }
    let written = finish_write(&mut store, ctx, Some(&old), new, Ownership::Update)?;
    Ok(object_reply(
        200,
        rt,
        &r.version,
        &written.object,
        written.warnings,
    ))
}

fn update(shared: &Shared, r: &ResourceRequest, call: &Call) -> Result<Reply, ApiError> {
    let ctx = WriteCtx::new(shared, r, call)?;
    let incoming = parse_body(call)?;
    write_existing(shared, r, &ctx, |_| Ok(incoming))
}

const PATCH_TYPES: &str =
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

fn patch(shared: &Shared, r: &ResourceRequest, call: &Call) -> Result<Reply, ApiError> {
    let ctx = WriteCtx::new(shared, r, call)?;
    let media = call.content_type.split(';').next().unwrap_or("").trim();
    match media {
        "application/apply-patch+yaml" | "application/apply-patch+cbor" => apply(shared, r, call, &ctx),
        "application/json-patch+json" => {
            let ops: json_patch::Patch = serde_json::from_slice(&call.body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            write_existing(shared, r, &ctx, |old| {
                let mut doc = old.clone();
                json_patch::patch(&mut doc, &ops).map_err(|e| {
                    ApiError::new(
                        422,
                        "Invalid",
                        format!("the server rejected our request due to an error in our request: {e}"),
                    )
                })?;
                Ok(doc)
            })
        }
        "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
            if media == "application/strategic-merge-patch+json" && ctx.rt.custom {
                return Err(ApiError::unsupported_media_type(media, PATCH_TYPES));
            }
            let patch: Value = serde_json::from_slice(&call.body)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            if !patch.is_object() {
                return Err(ApiError::bad_request(
                    "error decoding patch: a merge patch must be a JSON object",
                ));
            }
            write_existing(shared, r, &ctx, |old| {
                let mut doc = old.clone();
                json_patch::merge(&mut doc, &patch);
                Ok(doc)
            })
        }
        other => Err(ApiError::unsupported_media_type(other, PATCH_TYPES)),
    }
}

/// An apply that creates the object needs `create` besides the `patch` the request was authorized
/// for, as upstream's patch handler checks before it creates.
fn authorize_apply_create(
    shared: &Shared,
    store: &Store,
    r: &ResourceRequest,
    rt: &ResourceType,
    identity: &Identity,
) -> Result<(), ApiError> {
    if !shared.rbac {
        return Ok(());
    }
    let create = rbac::Attributes {
        verb: "create".into(),
        group: rt.group.clone(),
        resource: rt.plural.clone(),
        subresource: String::new(),
        namespace: r.namespace.clone(),
        name: r.name.clone(),
        path: None,
    };
    rbac::authorize(store, &identity.user, &identity.groups, &create)
        .map(|_| ())
        .map_err(|_| {
            ApiError::forbidden(
                create.forbidden_message(&identity.user),
                &rt.group,
                &rt.plural,
                &r.name,
            )
        })
}

/// Server-side apply (`application/apply-patch+yaml`); creates the object when it does not exist.
fn apply(shared: &Shared, r: &ResourceRequest, call: &Call, ctx: &WriteCtx) -> Result<Reply, ApiError> {
    let rt = ctx.rt;
    if !call.query.contains_key("fieldManager") || ctx.manager.is_empty() {
        return Err(invalid_option(
            "PatchOptions",
            "fieldManager",
            "Required value: is required for apply patch",
        ));
    }
    let force = call.query.get("force").is_some_and(|f| f == "true");
    let mut applied = parse_body(call)?;
    let Some(map) = applied.as_object_mut() else {
        return Err(ApiError::bad_request(
            "the applied configuration must be an object",
        ));
    };
    for field in ["apiVersion", "kind"] {
        if map.get(field).and_then(Value::as_str).is_none_or(str::is_empty) {
            return Err(ApiError::bad_request(format!(
                "{field} must be set in an applied configuration"
            )));
        }
    }
    check_type(rt, &r.version, &mut applied)?;
    let name = applied
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name != r.name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({name}) does not match the name on the URL ({})",
            r.name
        )));
    }
    if let Some(m) = applied["metadata"].as_object_mut() {
        m.remove("managedFields");
    }
    // What the endpoint may write: the main resource leaves status alone and vice versa.
    if let Some(m) = applied.as_object_mut() {
        match ctx.scope() {
            Scope::Main {
                status_separate: true,
            } => {
                m.remove("status");
            }
            Scope::Status => {
                m.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"))
            }
            Scope::Main {
                status_separate: false,
            } => {}
        }
    }
    let key = key_of(rt, r);
    let now = meta::now();
    let api_version = rt.api_version(&r.version);
    let w = Write {
        manager: &ctx.manager,
        scope: ctx.scope(),
        schema: ctx.schema(),
        api_version: &api_version,
        now: &now,
    };
    let mut store = lock(&shared.store);
    let old = store.get(r.t, &key).cloned();
    let base = match &old {
        Some(o) => {
            preconditions(rt, o, &applied, &r.name)?;
            (**o).clone()
        }
        None if !r.subresource.is_empty() => return Err(ApiError::not_found(&rt.group, &rt.plural, &r.name)),
        None => {
            authorize_apply_create(shared, &store, r, rt, call.identity)?;
            json!({"apiVersion": api_version, "kind": rt.kind, "metadata": {"name": r.name}})
        }
    };
    let result = fields::apply(&base, &applied, force, &w).map_err(|conflicts| {
        let causes: Vec<Value> = conflicts
            .iter()
            .map(|c| json!({"reason": "FieldManagerConflict", "message": format!("conflict with \"{}\" using {}", c.manager, c.api_version), "field": c.path}))
            .collect();
        let listed: Vec<String> = conflicts.iter().map(|c| format!("conflict with \"{}\" using {}: {}", c.manager, c.api_version, c.path)).collect();
        let plural = if conflicts.len() == 1 { "" } else { "s" };
        ApiError::new(409, "Conflict", format!("Apply failed with {} conflict{plural}: {}", conflicts.len(), listed.join("\n")))
            .with_details(json!({"name": r.name, "group": rt.group, "kind": rt.plural, "causes": causes}))
    })?;
    let written = match &old {
        None => {
            let mut ids = lock(&shared.ids);
            let mut result = result;
            if let Some(m) = result["metadata"].as_object_mut() {
                m.remove("resourceVersion");
            }
            let w = create_object(
                &mut store,
                &mut ids,
                ctx,
                &r.namespace,
                result,
                Ownership::Applied,
            )?;
            return Ok(object_reply(201, rt, &r.version, &w.object, w.warnings));
        }
        Some(old) => {
            let mut new = result;
            new["metadata"]["name"] = json!(r.name);
            finish_write(&mut store, ctx, Some(old), new, Ownership::Applied)?
        }
    };
    Ok(object_reply(
        200,
        rt,
        &r.version,
        &written.object,
        written.warnings,
    ))
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct DeleteOptions {
    propagation_policy: Option<String>,
    orphan_dependents: Option<bool>,
    preconditions: Option<DeletePreconditions>,
    #[serde(default)]
    dry_run: Vec<String>,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct DeletePreconditions {
    uid: Option<String>,
    resource_version: Option<String>,
}

fn delete_options(call: &Call) -> Result<(DeleteOptions, Propagation), ApiError> {
    let mut opts: DeleteOptions = if call.body.iter().all(u8::is_ascii_whitespace) {
        DeleteOptions::default()
    } else {
        serde_json::from_slice(&call.body)
            .map_err(|e| ApiError::bad_request(format!("error decoding DeleteOptions: {e}")))?
    };
    if let Some(p) = call.query.get("propagationPolicy") {
        opts.propagation_policy = Some(p.clone());
    }
    if let Some(o) = call.query.get("orphanDependents") {
        opts.orphan_dependents = Some(o == "true");
    }
    if call.query.get("dryRun").is_some_and(|d| d == "All") {
        opts.dry_run.push("All".into());
    }
    let propagation = match (opts.propagation_policy.as_deref(), opts.orphan_dependents) {
        (Some(_), Some(_)) => {
            return Err(invalid_option(
                "DeleteOptions",
                "propagationPolicy",
                "Invalid value: \"null\": orphanDependents and deletionPropagation cannot be both set",
            ));
        }
        (Some("Background"), _) | (None, None | Some(false)) => Propagation::Background,
        (Some("Foreground"), _) => Propagation::Foreground,
        (Some("Orphan"), _) | (None, Some(true)) => Propagation::Orphan,
        (Some(other), _) => {
            return Err(invalid_option(
                "DeleteOptions",
                "propagationPolicy",
                &format!(
                    "Unsupported value: \"{other}\": supported values: \"Foreground\", \"Background\", \"Orphan\", \"nil\""
                ),
            ));
        }
    };
    Ok((opts, propagation))
}

fn delete(shared: &Shared, r: &ResourceRequest, call: &Call) -> Result<Reply, ApiError> {
    let rt = &shared.registry.types[r.t];
    let (opts, propagation) = delete_options(call)?;
    let key = key_of(rt, r);
    let mut store = lock(&shared.store);
    if !opts.dry_run.is_empty() {
        let current = store
            .get(r.t, &key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, &r.name))?;
        return Ok(object_reply(200, rt, &r.version, &current, Vec::new()));
    }
    let pre = opts.preconditions.unwrap_or_default();
    let preconditions = Preconditions {
        uid: pre.uid,
        resource_version: pre.resource_version,
    };
    let (object, removed) = store.delete(r.t, &key, propagation, &preconditions)?;
    // Upstream answers 202 only when dependents are kept and the object is still there.
    let code = if !removed && opts.orphan_dependents == Some(false) {
        202
    } else {
        200
    };
    Ok(object_reply(code, rt, &r.version, &object, Vec::new()))
}

fn delete_collection(shared: &Shared, r: &ResourceRequest, call: &Call) -> Result<Reply, ApiError> {
    let rt = &shared.registry.types[r.t];
    let filter = Filter::new(rt, r, call.query)?;
    let (opts, propagation) = delete_options(call)?;
    let mut store = lock(&shared.store);
    let keys: Vec<ObjKey> = store.types[r.t]
        .objects
        .iter()
        .filter(|(_, o)| filter.matches(o))
        .map(|(k, _)| k.clone())
        .collect();
    let mut items = Vec::new();
    for key in keys {
        if !opts.dry_run.is_empty() {
            items.extend(store.get(r.t, &key).cloned());
            continue;
        }
        if let Ok((object, _)) = store.delete(r.t, &key, propagation, &Preconditions::default()) {
            items.push(object);
        }
    }
    let rendered: Vec<Value> = items.iter().map(|o| converted(rt, &r.version, o)).collect();
    let list = json!({
        "kind": rt.list_kind,
        "apiVersion": rt.api_version(&r.version),
        "metadata": {"resourceVersion": store.rv.to_string()},
        "items": rendered,
    });
    Ok(Reply::json(200, &list))
}

/// SubjectAccessReview and SelfSubjectAccessReview: answered from RBAC, never stored.
fn access_review(shared: &Shared, r: &ResourceRequest, call: &Call) -> Result<Reply, ApiError> {
    let rt = &shared.registry.types[r.t];
    let mut review = parse_body(call)?;
    check_type(rt, &r.version, &mut review)?;
    let spec = review.get("spec").cloned().unwrap_or(json!({}));
    let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let (user, mut groups) = if rt.special == Special::SelfSubjectAccessReview {
        (call.identity.user.clone(), call.identity.groups.clone())
    } else {
        let groups = spec
            .get("groups")
            .and_then(Value::as_array)
            .map(|g| g.iter().filter_map(Value::as_str).map(str::to_string).collect())
            .unwrap_or_default();
        (text(&spec, "user"), groups)
    };
    if user.is_empty() && rt.special == Special::SubjectAccessReview && groups.is_empty() {
        return Err(ApiError::invalid(
            &rt.group,
            &rt.kind,
            "",
            vec![Cause {
                reason: "FieldValueInvalid".into(),
                message: "Invalid value: \"\": at least one of user or group must be specified".into(),
                field: "spec.user".into(),
            }],
        ));
    }
    for g in rbac::implied_groups(&user) {
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    let attributes = if let Some(ra) = spec.get("resourceAttributes") {
        rbac::Attributes {
            verb: text(ra, "verb"),
            group: text(ra, "group"),
            resource: text(ra, "resource"),
            subresource: text(ra, "subresource"),
            namespace: text(ra, "namespace"),
            name: text(ra, "name"),
            path: None,
        }
    } else if let Some(na) = spec.get("nonResourceAttributes") {
        rbac::Attributes {
            verb: text(na, "verb"),
            path: Some(text(na, "path")),
            ..Default::default()
        }
    } else {
        return Err(ApiError::invalid(&rt.group, &rt.kind, "", vec![Cause {
            reason: "FieldValueRequired".into(),
            message: "Required value: exactly one of nonResourceAttributes or resourceAttributes must be specified".into(),
            field: "spec.resourceAttributes".into(),
        }]));
    };
    let decision = if shared.rbac {
        rbac::authorize(&lock(&shared.store), &user, &groups, &attributes)
    } else {
        Ok("RBAC is off".to_string())
    };
    review["status"] = match decision {
        Ok(reason) => json!({"allowed": true, "reason": reason}),
        Err(_) => json!({"allowed": false}),
    };
    review["metadata"]["creationTimestamp"] = Value::Null;
    Ok(Reply::json(201, &review))
}
