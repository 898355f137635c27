//! One request to `/debug/placements/`, from the caller's token to the answer, over an
//! [`Access`] (who may ask) and a [`HubView`] (what the hub holds), so every rule is tested
//! without a server. In order, so that nothing about a placement reaches a caller who may not
//! see it:
//!
//! 1. the bearer token must name a user (401);
//! 2. `GET /debug/placements/NS/NAME` explains a Placement on the hub, `POST /debug/placements/`
//!    one sent as JSON or YAML in the body (a dry run); other methods get 405;
//! 3. the path or body must name a namespace and, for GET, a name (400; a body over 1 MiB 413);
//! 4. the user must be allowed to `get` (GET) or `create` (POST) placements there (403);
//! 5. then the placement is looked up (404), scheduled on the hub's current state, and answered
//!    in the shape of OCM's debug endpoint ([`DebugAnswer`]).
//!
//! [`respond`] is the HTTP side the server calls for every request (body limit, metrics, log,
//! the response written), generic over the same two so that tests send requests through it too.
//!
//! Status codes and the phrases of error messages follow OCM's endpoint, whose unit tests
//! (`tests/conformance/ocm-unit`) this handler is held to.

use super::access::{Access, User, Verb};
use super::answer::DebugAnswer;
use super::metrics::Metrics;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Body, Bytes};
use hyper::{Method, Request, Response, StatusCode, header};
use jiff::Timestamp;
use ocm_score_api::Placement;
use ocm_score_scheduler::placement::{HubSnapshot, candidates, schedule};
use std::sync::Arc;
use std::time::Instant;

/// Where the endpoint is served, as in OCM.
pub const DEBUG_PATH: &str = "/debug/placements/";
/// The largest Placement a POST may send.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Why the hub's state cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The cache of a kind has not listed it yet (the pod is not ready).
    #[error("the hub cache of {0} has not synced yet; retry shortly")]
    NotSynced(&'static str),
    #[error("{0}")]
    Failed(String),
}

impl HubError {
    fn status(&self) -> StatusCode {
        match self {
            HubError::NotSynced(_) => StatusCode::SERVICE_UNAVAILABLE,
            HubError::Failed(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

/// What the hub holds, as the engine reads it.
pub trait HubView: Send + Sync {
    fn placement(&self, namespace: &str, name: &str) -> Result<Option<Placement>, HubError>;
    /// Every cluster, set, score and decision, and `namespace`'s bindings and placements, as
    /// they are at `now` (shared: a cache may hand the same snapshot to many requests).
    fn snapshot(&self, namespace: &str, now: Timestamp) -> Result<Arc<HubSnapshot>, HubError>;
}

/// A request as the handler sees it.
#[derive(Clone, Debug)]
pub struct DebugRequest {
    pub method: Method,
    pub path: String,
    /// The `Authorization` header's value, if any.
    pub authorization: Option<String>,
    pub body: Vec<u8>,
}

/// The HTTP status and the JSON answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub status: StatusCode,
    pub answer: DebugAnswer,
}

impl Reply {
    /// The HTTP response: the status, the answer as JSON, `Content-Type: application/json` (what
    /// OCM's `reportErr` and its answers send).
    pub fn into_response(self) -> Response<Full<Bytes>> {
        let body = serde_json::to_vec(&self.answer).unwrap_or_else(|_| b"{}".to_vec());
        let mut response = Response::new(Full::new(Bytes::from(body)));
        *response.status_mut() = self.status;
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
        response
    }
}

/// A request answered with an error: its status and message.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Refusal {
    status: StatusCode,
    message: String,
}

impl Refusal {
    fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Refusal {
            status,
            message: message.into(),
        }
    }
}

/// What the request asks for, once its method and path or body are understood.
enum Asked {
    Live { namespace: String, name: String },
    DryRun(Box<Placement>),
}

impl Asked {
    fn verb(&self) -> Verb {
        match self {
            Asked::Live { .. } => Verb::Get,
            Asked::DryRun(_) => Verb::Create,
        }
    }

    fn namespace(&self) -> &str {
        match self {
            Asked::Live { namespace, .. } => namespace,
            Asked::DryRun(p) => p.metadata.namespace.as_deref().unwrap_or_default(),
        }
    }
}

/// One HTTP request to the response the server writes: the body read (at most
/// [`MAX_BODY_BYTES`]), the request answered by [`handle`], counted in `metrics` and logged.
pub async fn respond<B>(
    access: &impl Access,
    hub: &impl HubView,
    metrics: &Metrics,
    request: Request<B>,
    now: Timestamp,
) -> Response<Full<Bytes>>
where
    B: Body,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let started = Instant::now();
    let (parts, body) = request.into_parts();
    let method = parts.method.clone();
    let reply = match Limited::new(body, MAX_BODY_BYTES + 1).collect().await {
        Ok(collected) => {
            let request = DebugRequest {
                method: parts.method,
                path: parts.uri.path().to_owned(),
                authorization: parts
                    .headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
                body: collected.to_bytes().to_vec(),
            };
            handle(access, hub, request, now).await
        }
        Err(error) => Reply {
            status: StatusCode::PAYLOAD_TOO_LARGE,
            answer: DebugAnswer::failed(format!(
                "request body unreadable or over {MAX_BODY_BYTES} bytes: {error}"
            )),
        },
    };
    let took = started.elapsed();
    metrics.answered(method.as_str(), reply.status.as_u16(), took);
    tracing::info!(
        method = %method,
        path = %parts.uri.path(),
        status = reply.status.as_u16(),
        took_ms = took.as_millis() as u64,
        "answered"
    );
    reply.into_response()
}

/// Answers one request at `now`.
pub async fn handle(
    access: &impl Access,
    hub: &impl HubView,
    request: DebugRequest,
    now: Timestamp,
) -> Reply {
    match answer(access, hub, request, now).await {
        Ok(reply) => reply,
        Err(refusal) => Reply {
            status: refusal.status,
            answer: DebugAnswer::failed(refusal.message),
        },
    }
}

async fn answer(
    access: &impl Access,
    hub: &impl HubView,
    request: DebugRequest,
    now: Timestamp,
) -> Result<Reply, Refusal> {
    let user = authenticate(access, request.authorization.as_deref()).await?;
    let asked = understand(&request)?;
    let (verb, namespace) = (asked.verb(), asked.namespace().to_owned());
    let verdict = access.authorize(&user, verb, &namespace).await.map_err(|e| {
        Refusal::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("failed to check permissions: {e}"),
        )
    })?;
    if !verdict.allowed {
        let reason = if verdict.reason.is_empty() {
            "no RBAC rule allows it".to_owned()
        } else {
            verdict.reason
        };
        return Err(Refusal::new(
            StatusCode::FORBIDDEN,
            format!(
                "user {:?} does not have permission to {} placements in namespace {namespace}: {reason}",
                user.name,
                verb.as_str()
            ),
        ));
    }
    let unreadable = |e: HubError| Refusal::new(e.status(), e.to_string());
    let placement = match asked {
        Asked::DryRun(placement) => *placement,
        Asked::Live { namespace, name } => {
            hub.placement(&namespace, &name)
                .map_err(unreadable)?
                .ok_or_else(|| {
                    Refusal::new(
                        StatusCode::NOT_FOUND,
                        format!("placement '{name}' not found in namespace {namespace}"),
                    )
                })?
        }
    };
    let snapshot = hub.snapshot(&namespace, now).map_err(unreadable)?;
    let internal = |e: ocm_score_scheduler::placement::PlacementError| {
        Refusal::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string())
    };
    let candidates = candidates::candidates(&snapshot, &placement).map_err(internal)?;
    let result = schedule(&snapshot, &placement, &candidates.clusters, now).map_err(internal)?;
    Ok(Reply {
        status: StatusCode::OK,
        answer: DebugAnswer::scheduled(&snapshot, &placement, &result),
    })
}

async fn authenticate(access: &impl Access, authorization: Option<&str>) -> Result<User, Refusal> {
    let unauthenticated = |why: &str| {
        Refusal::new(
            StatusCode::UNAUTHORIZED,
            format!("user information not found in request context: {why}"),
        )
    };
    let token = authorization
        .and_then(|h| h.strip_prefix("Bearer ").or_else(|| h.strip_prefix("bearer ")))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| unauthenticated("send a token the hub accepts as `Authorization: Bearer <token>`"))?;
    match access.authenticate(token).await {
        Ok(Some(user)) => Ok(user),
        Ok(None) => Err(unauthenticated("the hub did not accept the bearer token")),
        Err(e) => Err(Refusal::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("failed to authenticate the caller: {e}"),
        )),
    }
}

fn understand(request: &DebugRequest) -> Result<Asked, Refusal> {
    let Some(key) = request.path.strip_prefix(DEBUG_PATH) else {
        return Err(Refusal::new(
            StatusCode::NOT_FOUND,
            format!(
                "{} is not served here; ask {DEBUG_PATH}NAMESPACE/NAME",
                request.path
            ),
        ));
    };
    let bad = |message: String| Refusal::new(StatusCode::BAD_REQUEST, message);
    match request.method {
        Method::GET => {
            let parts: Vec<&str> = key.split('/').collect();
            match parts.as_slice() {
                [namespace, name] if !namespace.is_empty() && !name.is_empty() => Ok(Asked::Live {
                    namespace: (*namespace).to_owned(),
                    name: (*name).to_owned(),
                }),
                _ => Err(bad(format!(
                    "invalid debug path {:?}: namespace and name required ({DEBUG_PATH}NAMESPACE/NAME)",
                    request.path
                ))),
            }
        }
        Method::POST => dry_run(&request.body).map(|p| Asked::DryRun(Box::new(p))),
        ref other => Err(Refusal::new(
            StatusCode::METHOD_NOT_ALLOWED,
            format!(
                "method {other} not allowed: GET {DEBUG_PATH}NAMESPACE/NAME explains a placement, POST {DEBUG_PATH} one in the body"
            ),
        )),
    }
}

/// The Placement a POST sends, in JSON (or YAML, as kubectl users keep them).
fn dry_run(body: &[u8]) -> Result<Placement, Refusal> {
    if body.len() > MAX_BODY_BYTES {
        return Err(Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "request body too large: {} bytes exceeds the maximum of {MAX_BODY_BYTES}",
                body.len()
            ),
        ));
    }
    let bad = |message: String| Refusal::new(StatusCode::BAD_REQUEST, message);
    let value: serde_json::Value = match serde_json::from_slice(body) {
        Ok(value) => value,
        Err(json_error) => serde_norway::from_slice(body)
            .map_err(|_| bad(format!("failed to unmarshal placement JSON: {json_error}")))?,
    };
    if let Some(kind) = value.get("kind").and_then(|k| k.as_str())
        && kind != "Placement"
    {
        return Err(bad(format!("kind: {kind:?}: only a Placement can be explained")));
    }
    let placement: Placement =
        serde_json::from_value(value).map_err(|e| bad(format!("failed to unmarshal placement JSON: {e}")))?;
    if placement
        .metadata
        .namespace
        .as_deref()
        .unwrap_or_default()
        .is_empty()
    {
        return Err(bad(
            "metadata.namespace: required: the namespace whose ManagedClusterSetBindings the placement would use"
                .to_owned(),
        ));
    }
    Ok(placement)
}
