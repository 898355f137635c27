//! HTTP plumbing: the accept loop (with connection refusal), request routing into Kubernetes
//! request attributes, authentication, fault injection, authorization, and response framing.

use super::{
    Identity, RequestLog, RequestRecord, Shared,
    faults::RequestFacts,
    handlers, lock,
    rbac::{self, Attributes},
    status::ApiError,
};
use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::{Request, Response, body::Incoming, header, service::service_fn};
use hyper_util::rt::TokioIo;
use std::{
    collections::HashMap,
    convert::Infallible,
    sync::{Arc, MutexGuard},
    time::Duration,
};
use tokio::{net::TcpListener, task::JoinSet};

pub(crate) type Body = BoxBody<Bytes, std::io::Error>;

pub(crate) const JSON: &str = "application/json";

pub(crate) fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into()).map_err(|never| match never {}).boxed()
}

/// A request to a resource, as the server's request-info parser sees it.
#[derive(Clone, Debug, Default)]
pub(crate) struct ResourceRequest {
    pub(crate) t: usize,
    pub(crate) version: String,
    pub(crate) verb: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) subresource: String,
}

pub(crate) enum Route {
    /// `/api`, `/apis`, `/version`, `/healthz`...
    NonResource(String),
    Resource(ResourceRequest),
}

/// What a handler answers: JSON with a code (and `Warning` headers), or a watch stream.
pub(crate) enum Reply {
    Json {
        code: u16,
        body: Vec<u8>,
        warnings: Vec<String>,
        content_type: &'static str,
    },
    Stream(Body),
}

impl Reply {
    pub(crate) fn json(code: u16, value: &serde_json::Value) -> Self {
        Reply::Json {
            code,
            body: serde_json::to_vec(value).unwrap_or_default(),
            warnings: Vec::new(),
            content_type: JSON,
        }
    }

    /// The HTTP status this reply is answered with (200 for a watch stream or an unknown code).
    fn status(&self) -> hyper::StatusCode {
        match self {
            Reply::Json { code, .. } => hyper::StatusCode::from_u16(*code).unwrap_or(hyper::StatusCode::OK),
            Reply::Stream(_) => hyper::StatusCode::OK,
        }
    }
}

pub(crate) fn query(uri: &hyper::Uri) -> HashMap<String, String> {
    form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
        .into_owned()
        .collect()
}

fn is_true(q: &HashMap<String, String>, key: &str) -> bool {
    q.get(key).is_some_and(|v| v == "true" || v == "1")
}

/// Maps a path and method to a resource request, like the server's RequestInfoFactory. What the
/// URL names goes into `record` before the resource is looked up, so a request for a resource the
/// server does not serve (a CRD not installed) is logged with its verb and resource, as upstream's
/// audit log has it.
fn route(
    shared: &Shared,
    method: &hyper::Method,
    path: &str,
    q: &HashMap<String, String>,
    record: &mut RequestRecord,
) -> Result<Route, ApiError> {
    let segments: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", "v1", rest @ ..] if !rest.is_empty() => ("", "v1", rest),
        ["apis", g, v, rest @ ..] if !rest.is_empty() => (*g, *v, rest),
        _ => return Ok(Route::NonResource(path.to_string())),
    };
    let mut rest: Vec<&str> = rest.to_vec();
    let mut namespace = "";
    if rest[0] == "namespaces" && rest.len() > 1 {
        namespace = rest[1];
        if rest.len() > 2 && !matches!(rest[2], "status" | "finalize") {
            rest.drain(..2);
        }
    }
    if rest.len() > 3 {
        return Err(ApiError::no_route());
    }
    let resource = rest[0];
    let name = rest.get(1).copied().unwrap_or("");
    let subresource = rest.get(2).copied().unwrap_or("");
    let verb = match (method.as_str(), name.is_empty()) {
        ("GET", _) if is_true(q, "watch") => Some("watch"),
        ("GET", true) => Some("list"),
        ("GET", false) => Some("get"),
        ("POST", true) => Some("create"),
        ("PUT", false) => Some("update"),
        ("PATCH", false) => Some("patch"),
        ("DELETE", false) => Some("delete"),
        ("DELETE", true) => Some("deletecollection"),
        _ => None,
    };
    if let Some(verb) = verb {
        record.verb = verb.to_string();
    }
    record.group = group.to_string();
    record.resource = resource.to_string();
    record.subresource = subresource.to_string();
    record.namespace = namespace.to_string();
    record.name = name.to_string();
    let t = shared
        .registry
        .find(group, version, resource)
        .ok_or_else(ApiError::no_route)?;
    let rt = &shared.registry.types[t];
    if !subresource.is_empty() && !rt.subresources.contains(&subresource) {
        return Err(ApiError::no_route());
    }
    let is_namespace_resource = group.is_empty() && resource == "namespaces";
    if !is_namespace_resource && !rt.namespaced && !namespace.is_empty() {
        return Err(ApiError::no_route());
    }
    if rt.namespaced && namespace.is_empty() && !name.is_empty() {
        return Err(ApiError::no_route());
    }
    let Some(verb) = verb else {
        return Err(ApiError::method_not_allowed(format!(
            "the server does not allow this method on the requested resource ({method} {path})"
        )));
    };
    if !rt.verbs.contains(&verb) {
        return Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        ));
    }
    Ok(Route::Resource(ResourceRequest {
        t,
        version: version.to_string(),
        verb: verb.to_string(),
        namespace: namespace.to_string(),
        name: name.to_string(),
        subresource: subresource.to_string(),
    }))
}

fn error_response(error: &ApiError) -> Response<Body> {
    let mut response = Response::new(full(serde_json::to_vec(&error.to_status()).unwrap_or_default()));
    *response.status_mut() = error.status();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    if let Some(secs) = error.retry_after
        && let Ok(v) = header::HeaderValue::from_str(&secs.to_string())
    {
        response.headers_mut().insert(header::RETRY_AFTER, v);
    }
    response
}

fn reply_response(reply: Reply) -> Response<Body> {
    let status = reply.status();
    let (body, warnings, content_type) = match reply {
        Reply::Json {
            body,
            warnings,
            content_type,
            ..
        } => (full(body), warnings, content_type),
        Reply::Stream(body) => (body, Vec::new(), JSON),
    };
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    for w in warnings {
        if let Ok(v) = header::HeaderValue::from_str(&format!("299 - \"{}\"", w.replace('"', "\\\""))) {
            headers.append(header::WARNING, v);
        }
    }
    response
}

fn authenticate(shared: &Shared, req: &Request<Incoming>) -> Option<Identity> {
    let value = req.headers().get(header::AUTHORIZATION)?.to_str().ok()?;
    let token = value
        .strip_prefix("Bearer ")
        .or_else(|| value.strip_prefix("bearer "))?
        .trim();
    let mut identity = lock(&shared.tokens).get(token)?.clone();
    for g in rbac::implied_groups(&identity.user) {
        if !identity.groups.contains(&g) {
            identity.groups.push(g);
        }
    }
    Some(identity)
}

async fn handle(shared: Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let q = query(req.uri());
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let mut record = RequestRecord {
        user: String::new(),
        verb: method.as_str().to_lowercase(),
        group: String::new(),
        resource: String::new(),
        subresource: String::new(),
        namespace: String::new(),
        name: String::new(),
        path: String::new(),
        code: 0,
    };
    // An error before the handler runs (authentication, routing, an injected fault, RBAC) is the answer.
    let (outcome, held_log) = handle_inner(&shared, req, &method, &path, &q, &mut record)
        .await
        .unwrap_or_else(|error| (Err(error), None));
    record.code = match &outcome {
        Ok(reply) => reply.status(),
        Err(error) => error.status(),
    }
    .as_u16();
    tracing::debug!(verb = %record.verb, resource = %record.resource, namespace = %record.namespace,
        name = %record.name, user = %record.user, code = record.code, "request");
    held_log.unwrap_or_else(|| lock(&shared.requests)).push(record);
    match outcome {
        Ok(reply) => reply_response(reply),
        Err(error) => error_response(&error),
    }
}

/// A handler's outcome, and for a write the request log, still locked from before the handler ran.
type Handled<'s> = (Result<Reply, ApiError>, Option<MutexGuard<'s, RequestLog>>);

/// Runs a resource request's handler. A write runs with the request log locked and hands the lock
/// back, so its record goes in before anyone can read the log: whoever sees its effect (a watch
/// event, a get) and then reads the log finds it there, as a test asserting on the log needs.
fn run_handler<'s>(
    shared: &'s Arc<Shared>,
    r: &ResourceRequest,
    call: handlers::Call<'_>,
    is_write: bool,
) -> Handled<'s> {
    let held_log = is_write.then(|| lock(&shared.requests));
    (handlers::resource(shared, r, call), held_log)
}

async fn handle_inner<'s>(
    shared: &'s Arc<Shared>,
    req: Request<Incoming>,
    method: &hyper::Method,
    path: &str,
    q: &HashMap<String, String>,
    record: &mut RequestRecord,
) -> Result<Handled<'s>, ApiError> {
    let identity = authenticate(shared, &req);
    if let Some(i) = &identity {
        record.user = i.user.clone();
    }
    let route = route(shared, method, path, q, record);
    let mut attributes = Attributes {
        verb: record.verb.clone(),
        ..Default::default()
    };
    match &route {
        Ok(Route::Resource(r)) => {
            let rt = &shared.registry.types[r.t];
            record.verb = r.verb.clone();
            record.group = rt.group.clone();
            record.resource = rt.plural.clone();
            record.subresource = r.subresource.clone();
            record.namespace = r.namespace.clone();
            record.name = r.name.clone();
            attributes = Attributes {
                verb: r.verb.clone(),
                group: rt.group.clone(),
                resource: rt.plural.clone(),
                subresource: r.subresource.clone(),
                namespace: r.namespace.clone(),
                name: r.name.clone(),
                path: None,
            };
            // A list or watch pinned to one name is authorized against resourceNames, as upstream.
            if r.name.is_empty()
                && (r.verb == "list" || r.verb == "watch")
                && let Some(pinned) = q.get("fieldSelector").and_then(|f| {
                    super::selectors::FieldSelector::parse(f, &rt.field_selectors)
                        .ok()
                        .and_then(|s| s.pinned_name().map(str::to_string))
                })
            {
                attributes.name = pinned;
            }
        }
        Ok(Route::NonResource(p)) => {
            record.path = p.clone();
            attributes.path = Some(p.clone());
            attributes.verb = match *method {
                hyper::Method::GET | hyper::Method::HEAD => "get",
                hyper::Method::POST => "post",
                hyper::Method::PUT => "put",
                hyper::Method::DELETE => "delete",
                _ => "patch",
            }
            .into();
        }
        Err(_) => {}
    }
    let identity = identity.ok_or_else(ApiError::unauthorized)?;
    let facts = RequestFacts {
        verb: record.verb.clone(),
        resource: record.resource.clone(),
        subresource: record.subresource.clone(),
        namespace: record.namespace.clone(),
        name: record.name.clone(),
    };
    let delay = shared.faults.latency(&facts);
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if let Some(error) = shared.faults.take_failure(&facts) {
        return Err(error);
    }
    let route = route?;
    if shared.rbac {
        let decision = {
            let store = lock(&shared.store);
            rbac::authorize(&store, &identity.user, &identity.groups, &attributes)
        };
        if decision.is_err() {
            let rt_kind = if attributes.path.is_some() {
                String::new()
            } else {
                attributes.resource.clone()
            };
            return Err(ApiError::forbidden(
                attributes.forbidden_message(&identity.user),
                &attributes.group,
                &rt_kind,
                &attributes.name,
            ));
        }
    }
    let content_type = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let accept = req
        .headers()
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let user_agent = req
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = req
        .into_body()
        .collect()
        .await
        .map_err(|e| ApiError::bad_request(format!("reading the request body: {e}")))?
        .to_bytes();
    Ok(match route {
        Route::NonResource(p) => (handlers::non_resource(shared, &p, &accept), None),
        Route::Resource(r) => {
            let call = handlers::Call {
                identity: &identity,
                query: q,
                content_type: &content_type,
                user_agent: &user_agent,
                body,
            };
            run_handler(shared, &r, call, record.is_write())
        }
    })
}

/// Serves connections until shutdown; closes the listener and every connection while refusing.
pub(crate) async fn run(shared: Arc<Shared>, listener: TcpListener) {
    let mut shutdown = shared.shutdown.subscribe();
    let mut listener = Some(listener);
    let mut connections = JoinSet::new();
    loop {
        let Some(active) = listener.as_ref() else {
            // Refusing: wait out the period (or shutdown, or the test ending it early), then listen
            // on the same address again. A wake-up whose period still runs only re-checks it.
            let mut stopped = false;
            while let Some(until) = shared.faults.refuse_until() {
                tokio::select! {
                    _ = tokio::time::sleep_until(until.into()) => {}
                    _ = shared.faults.resume.notified() => {}
                    _ = super::raised(&mut shutdown) => {
                        stopped = true;
                        break;
                    }
                }
            }
            if stopped {
                break;
            }
            let address = *lock(&shared.address);
            for _ in 0..50 {
                match TcpListener::bind(address).await {
                    Ok(l) => {
                        listener = Some(l);
                        break;
                    }
                    Err(e) => {
                        tracing::warn!(%address, error = %e, "re-binding after refusing connections");
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                }
            }
            if listener.is_none() {
                tracing::error!(%address, "could not listen again; server stops");
                break;
            }
            continue;
        };
        tokio::select! {
            accepted = active.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let _ = stream.set_nodelay(true);
                let shared = shared.clone();
                let mut conn_shutdown = shared.shutdown.subscribe();
                connections.spawn(async move {
                    let service = service_fn(move |req| {
                        let shared = shared.clone();
                        async move { Ok::<_, Infallible>(handle(shared, req).await) }
                    });
                    let conn = hyper::server::conn::http1::Builder::new()
                        .keep_alive(true)
                        .serve_connection(TokioIo::new(stream), service);
                    tokio::pin!(conn);
                    tokio::select! {
                        _ = conn.as_mut() => {}
                        _ = super::raised(&mut conn_shutdown) => {
                            conn.as_mut().graceful_shutdown();
                            let _ = tokio::time::timeout(Duration::from_secs(5), conn).await;
                        }
                    }
                });
            }
            _ = shared.faults.refuse.notified() => {
                listener = None;
                connections.abort_all();
            }
            _ = super::raised(&mut shutdown) => break,
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    let _ = tokio::time::timeout(Duration::from_secs(5), async {
        while connections.join_next().await.is_some() {}
    })
    .await;
    connections.abort_all();
}
