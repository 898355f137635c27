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

mod delete;
mod list;
mod review;
mod update;
mod watch;
mod write;

use delete::*;
use list::*;
use review::*;
use update::*;
use watch::*;
use write::*;

pub(crate) use write::create_direct;

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
