//! Creates and the write path every verb shares: body parsing, type and schema checks, admission, and the stored result.

use super::*;

/// How unknown fields are treated (`fieldValidation`): the server's default is Warn.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Validation {
    Strict,
    Warn,
    Ignore,
}

/// Everything a write needs to know besides the objects.
pub(super) struct WriteCtx<'a> {
    pub(super) rt: &'a ResourceType,
    pub(super) t: usize,
    pub(super) version: &'a str,
    pub(super) subresource: &'a str,
    pub(super) manager: String,
    pub(super) validation: Validation,
    pub(super) dry_run: bool,
    pub(super) identity: &'a Identity,
}

pub(super) enum Ownership {
    /// Record the write as an `Update` by `ctx.manager`.
    Update,
    /// Server-side apply already wrote `managedFields`.
    Applied,
}

impl<'a> WriteCtx<'a> {
    pub(super) fn new(shared: &'a Shared, r: &'a ResourceRequest, call: &Call<'a>) -> Result<Self, ApiError> {
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

    pub(super) fn scope(&self) -> Scope {
        if self.subresource.is_empty() {
            Scope::Main {
                status_separate: self.rt.has_status(),
            }
        } else {
            Scope::Status
        }
    }

    pub(super) fn schema(&self) -> Option<&Value> {
        self.rt.schema(self.version).map(|s| &s.schema)
    }
}

pub(super) fn parse_body(call: &Call) -> Result<Value, ApiError> {
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
pub(super) fn check_type(rt: &ResourceType, version: &str, object: &mut Value) -> Result<(), ApiError> {
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
pub(super) fn value_at_field(object: &Value, field: &str) -> Option<Value> {
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

pub(super) fn schema_causes(object: &Value, errors: Vec<crate::crd::FieldError>) -> Vec<Cause> {
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

pub(super) fn name_cause(rt: &ResourceType, name: &str) -> Option<Cause> {
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
pub(super) fn admit_custom(ctx: &WriteCtx, object: &mut Value) -> Result<Vec<String>, ApiError> {
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
pub(super) fn spec_changed(rt: &ResourceType, old: &Value, new: &Value) -> bool {
    let (Some(o), Some(n)) = (old.as_object(), new.as_object()) else {
        return true;
    };
    let skip = |k: &str| k == "metadata" || (k == "status" && rt.has_status());
    let keys: std::collections::BTreeSet<&String> = o.keys().chain(n.keys()).filter(|k| !skip(k)).collect();
    keys.into_iter().any(|k| o.get(k) != n.get(k))
}

pub(super) struct Written {
    pub(super) object: Arc<Value>,
    pub(super) warnings: Vec<String>,
}

pub(super) const SERVER_SET_METADATA: [&str; 6] = [
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
];

/// The shared tail of create, update and patch: validation, server-set metadata, generation,
/// ownership, no-op detection, commit, and removal of a deleting object left without finalizers.
pub(super) fn finish_write(
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
pub(super) fn create_object(
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
                    format!("{} \"{name}\" is forbidden: unable to create new content in namespace {namespace} because it is being terminated", crate::status::qualified(&rt.group, &rt.plural)),
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

pub(super) fn create(shared: &Shared, r: &ResourceRequest, call: &Call) -> Result<Reply, ApiError> {
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
