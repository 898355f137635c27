//! Failed requests as the API server reports them: an HTTP code and a `meta.k8s.io/v1` `Status`.

use serde_json::{Value, json};

/// One reason a write is invalid, as in `Status.details.causes`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cause {
    pub reason: String,
    pub message: String,
    pub field: String,
}

/// A request that failed, with everything needed to render the `Status` body.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// Sent as the `Retry-After` header and `details.retryAfterSeconds`.
    pub retry_after: Option<u64>,
    /// A continue token offered with a 410 on an expired list continuation.
    pub continue_token: Option<String>,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// `group` and `resource` of a resource, as the server names it in messages (`pods`, `leases.coordination.k8s.io`).
pub(crate) fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

fn details(group: &str, kind: &str, name: &str) -> Value {
    let mut d = serde_json::Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    d.insert("kind".into(), json!(kind));
    Value::Object(d)
}

impl ApiError {
    /// The HTTP status this error is answered with (500 for a code HTTP does not have).
    pub(crate) fn status(&self) -> hyper::StatusCode {
        hyper::StatusCode::from_u16(self.code).unwrap_or(hyper::StatusCode::INTERNAL_SERVER_ERROR)
    }

    pub(crate) fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
            retry_after: None,
            continue_token: None,
        }
    }

    pub(crate) fn not_found(group: &str, plural: &str, name: &str) -> Self {
        Self {
            details: Some(details(group, plural, name)),
            ..Self::new(
                404,
                "NotFound",
                format!("{} \"{name}\" not found", qualified(group, plural)),
            )
        }
    }

    /// The answer for a path that names no resource the server knows.
    pub(crate) fn no_route() -> Self {
        Self {
            details: Some(json!({})),
            ..Self::new(
                404,
                "NotFound",
                "the server could not find the requested resource",
            )
        }
    }

    pub(crate) fn already_exists(group: &str, plural: &str, name: &str) -> Self {
        Self {
            details: Some(details(group, plural, name)),
            ..Self::new(
                409,
                "AlreadyExists",
                format!("{} \"{name}\" already exists", qualified(group, plural)),
            )
        }
    }

    pub(crate) fn conflict(group: &str, plural: &str, name: &str, why: &str) -> Self {
        Self {
            details: Some(details(group, plural, name)),
            ..Self::new(
                409,
                "Conflict",
                format!(
                    "Operation cannot be fulfilled on {} \"{name}\": {why}",
                    qualified(group, plural)
                ),
            )
        }
    }

    pub(crate) fn stale(group: &str, plural: &str, name: &str) -> Self {
        Self::conflict(
            group,
            plural,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 with one cause per field, worded like the server (`Kind.group "name" is invalid: field: message`).
    pub(crate) fn invalid(group: &str, kind: &str, name: &str, causes: Vec<Cause>) -> Self {
        let listed: Vec<String> = causes
            .iter()
            .map(|c| {
                if c.field.is_empty() {
                    c.message.clone()
                } else {
                    format!("{}: {}", c.field, c.message)
                }
            })
            .collect();
        let joined = if listed.len() == 1 {
            listed[0].clone()
        } else {
            format!("[{}]", listed.join(", "))
        };
        let qualified_kind = if group.is_empty() {
            kind.to_string()
        } else {
            format!("{kind}.{group}")
        };
        let mut d = details(group, kind, name);
        d["causes"] = Value::Array(
            causes
                .iter()
                .map(|c| json!({"reason": c.reason, "message": c.message, "field": c.field}))
                .collect(),
        );
        Self {
            details: Some(d),
            ..Self::new(
                422,
                "Invalid",
                format!("{qualified_kind} \"{name}\" is invalid: {joined}"),
            )
        }
    }

    pub(crate) fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub(crate) fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    pub(crate) fn forbidden(message: impl Into<String>, group: &str, kind: &str, name: &str) -> Self {
        Self {
            details: Some(details(group, kind, name)),
            ..Self::new(403, "Forbidden", message)
        }
    }

    pub(crate) fn method_not_allowed(message: impl Into<String>) -> Self {
        Self {
            details: Some(json!({})),
            ..Self::new(405, "MethodNotAllowed", message)
        }
    }

    pub(crate) fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    pub(crate) fn unsupported_media_type(content_type: &str, accepted: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {accepted}"
            ),
        )
        .with_details(json!({"causes": [{"reason": "UnexpectedServerResponse", "message": content_type}]}))
    }

    /// A list or streaming watch asked for a version the server has not reached (upstream: after
    /// waiting up to 3 s for its watch cache to catch up).
    pub(crate) fn too_large_resource_version(requested: u64, current: u64) -> Self {
        let mut error = Self::new(
            504,
            "Timeout",
            format!("Too large resource version: {requested}, current: {current}"),
        )
        .with_details(json!({
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        }));
        error.retry_after = Some(1);
        error
    }

    pub(crate) fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// A failure with only a code, as fault injection produces it; reason and message follow the server's
    /// generic wording for that code.
    pub(crate) fn from_code(code: u16, retry_after: Option<u64>) -> Self {
        let (reason, message) = match code {
            400 => (
                "BadRequest",
                "the server rejected our request for an unknown reason",
            ),
            401 => ("Unauthorized", "Unauthorized"),
            403 => ("Forbidden", "forbidden: injected fault"),
            404 => ("NotFound", "the server could not find the requested resource"),
            405 => (
                "MethodNotAllowed",
                "the server does not allow this method on the requested resource",
            ),
            409 => (
                "Conflict",
                "Operation cannot be fulfilled: the object has been modified; please apply your changes to the latest version and try again",
            ),
            410 => ("Expired", "the resource version requested has been compacted"),
            422 => (
                "Invalid",
                "the server rejected our request due to an error in our request",
            ),
            429 => (
                "TooManyRequests",
                "the server has received too many requests and has asked us to try again later",
            ),
            500 => (
                "InternalError",
                "an error on the server (\"injected fault\") has prevented the request from succeeding",
            ),
            503 => (
                "ServiceUnavailable",
                "the server is currently unable to handle the request",
            ),
            504 => (
                "Timeout",
                "the server was unable to return a response in the time allotted, but may still be processing the request",
            ),
            _ => ("", "injected fault"),
        };
        let mut error = Self::new(code, reason, message);
        if let Some(secs) = retry_after {
            error.retry_after = Some(secs);
            error.details = Some(json!({"retryAfterSeconds": secs}));
        }
        error
    }

    pub(crate) fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// The `Status` object sent as the response body (or inside a watch `ERROR` event).
    pub fn to_status(&self) -> Value {
        let mut metadata = serde_json::Map::new();
        if let Some(token) = &self.continue_token {
            metadata.insert("continue".into(), json!(token));
        }
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": metadata,
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            status["details"] = d.clone();
        }
        status
    }
}
