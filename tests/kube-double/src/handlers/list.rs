//! Lists: field and label filters, resourceVersion semantics and continue tokens.

use super::*;

/// Namespace, label and field filters of a list or watch.
pub(super) struct Filter {
    pub(super) namespace: Option<String>,
    pub(super) labels: LabelSelector,
    pub(super) fields: FieldSelector,
}

impl Filter {
    pub(super) fn new(
        rt: &ResourceType,
        r: &ResourceRequest,
        q: &HashMap<String, String>,
    ) -> Result<Self, ApiError> {
        Ok(Self {
            namespace: (rt.namespaced && !r.namespace.is_empty()).then(|| r.namespace.clone()),
            labels: LabelSelector::parse(q.get("labelSelector").map(String::as_str).unwrap_or(""))?,
            fields: FieldSelector::parse(
                q.get("fieldSelector").map(String::as_str).unwrap_or(""),
                &rt.field_selectors,
            )?,
        })
    }

    pub(super) fn matches(&self, object: &Value) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| meta::namespace(object) == ns)
            && (self.labels.is_empty() || self.labels.matches(object))
            && (self.fields.is_empty() || self.fields.matches(object))
    }

    pub(super) fn unselective(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty()
    }

    /// What a watcher with this filter sees of `event` (objects moving in or out of the selection
    /// become ADDED / DELETED, as upstream).
    pub(super) fn view(&self, event: &Event) -> Option<EventKind> {
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

pub(super) fn parse_rv(text: &str) -> Result<u64, ApiError> {
    text.parse().map_err(|_| {
        ApiError::bad_request(format!(
            "resourceVersion: Invalid value: \"{text}\": must be a non-negative integer"
        ))
    })
}

#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct ContinueToken {
    pub(super) v: String,
    pub(super) rv: u64,
    pub(super) start: String,
}

pub(super) fn encode_continue(rv: u64, last: &ObjKey) -> String {
    let token = ContinueToken {
        v: "meta.k8s.io/v1".into(),
        rv,
        start: format!("{}/{}\u{0}", last.0, last.1),
    };
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(serde_json::to_vec(&token).unwrap_or_default())
}

pub(super) fn decode_continue(text: &str) -> Result<(u64, ObjKey), ApiError> {
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

pub(super) fn invalid_option(kind: &str, field: &str, message: &str) -> ApiError {
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

pub(super) fn list(shared: &Shared, r: &ResourceRequest, call: &Call) -> Result<Reply, ApiError> {
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
