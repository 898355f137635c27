//! Updates, patches (JSON, merge, strategic) and server-side apply onto an existing object.

use super::*;

/// The object a write to `subresource` produces from the stored `old` and the submitted `incoming`:
/// the main resource keeps the stored status, `status` keeps everything but the status, `approval`
/// changes only the approval conditions.
pub(super) fn overlay(rt: &ResourceType, subresource: &str, old: &Value, mut incoming: Value) -> Value {
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
pub(super) fn preconditions(
    rt: &ResourceType,
    old: &Value,
    incoming: &Value,
    url_name: &str,
) -> Result<(), ApiError> {
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

pub(super) fn write_existing(
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

pub(super) fn update(shared: &Shared, r: &ResourceRequest, call: &Call) -> Result<Reply, ApiError> {
    let ctx = WriteCtx::new(shared, r, call)?;
    let incoming = parse_body(call)?;
    write_existing(shared, r, &ctx, |_| Ok(incoming))
}

pub(super) const PATCH_TYPES: &str =
    "application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml";

pub(super) fn patch(shared: &Shared, r: &ResourceRequest, call: &Call) -> Result<Reply, ApiError> {
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
pub(super) fn authorize_apply_create(
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
pub(super) fn apply(
    shared: &Shared,
    r: &ResourceRequest,
    call: &Call,
    ctx: &WriteCtx,
) -> Result<Reply, ApiError> {
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
