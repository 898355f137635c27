//! Deletes, with preconditions and propagation, and deletion of a collection.

use super::*;

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct DeleteOptions {
    pub(super) propagation_policy: Option<String>,
    pub(super) orphan_dependents: Option<bool>,
    pub(super) preconditions: Option<DeletePreconditions>,
    #[serde(default)]
    pub(super) dry_run: Vec<String>,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub(super) struct DeletePreconditions {
    pub(super) uid: Option<String>,
    pub(super) resource_version: Option<String>,
}

pub(super) fn delete_options(call: &Call) -> Result<(DeleteOptions, Propagation), ApiError> {
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

pub(super) fn delete(shared: &Shared, r: &ResourceRequest, call: &Call) -> Result<Reply, ApiError> {
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

pub(super) fn delete_collection(
    shared: &Shared,
    r: &ResourceRequest,
    call: &Call,
) -> Result<Reply, ApiError> {
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
