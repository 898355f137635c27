//! Field ownership (`metadata.managedFields`) and server-side apply.
//!
//! Ownership is tracked per manager as a set of field paths in the `FieldsV1` vocabulary
//! (`f:spec`, `k:{"name":"x"}` for items of map-lists, `v:"x"` for items of sets), which is
//! also how it is written back into `managedFields`. List semantics come from the CRD schema
//! (`x-kubernetes-list-type`, `x-kubernetes-list-map-keys`); for built-in kinds, which carry no
//! schema here, a short table of well-known lists stands in for the strategic-merge schema.

use serde_json::{Map, Value, json};
use std::collections::BTreeSet;

pub(crate) type FieldPath = Vec<String>;
pub(crate) type FieldSet = BTreeSet<FieldPath>;

/// Which part of an object a write may touch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scope {
    /// The main resource; `status` is excluded when the kind has a status subresource.
    Main { status_separate: bool },
    /// A subresource that writes only `status`.
    Status,
}

impl Scope {
    fn subresource(self) -> &'static str {
        match self {
            Scope::Main { .. } => "",
            Scope::Status => "status",
        }
    }

    fn includes(self, top: &str) -> bool {
        match (self, top) {
            (_, "apiVersion" | "kind") => false,
            (Scope::Status, t) => t == "status",
            (Scope::Main { status_separate }, "status") => !status_separate,
            (Scope::Main { .. }, _) => true,
        }
    }
}

/// Metadata fields whose ownership is tracked (the server manages the others itself).
const TRACKED_METADATA: [&str; 4] = ["labels", "annotations", "finalizers", "ownerReferences"];

enum ListKind {
    Atomic,
    Map(Vec<String>),
    Set,
}

fn list_kind(schema: Option<&Value>, name: &str) -> ListKind {
    match schema {
        Some(s) => match s.get("x-kubernetes-list-type").and_then(Value::as_str) {
            Some("map") => ListKind::Map(
                s.get("x-kubernetes-list-map-keys")
                    .and_then(Value::as_array)
                    .map(|k| k.iter().filter_map(Value::as_str).map(str::to_string).collect())
                    .unwrap_or_default(),
            ),
            Some("set") => ListKind::Set,
            _ => ListKind::Atomic,
        },
        // Built-in kinds and object metadata: the strategic-merge keys of the usual lists.
        None => match name {
            "finalizers" => ListKind::Set,
            "ownerReferences" => ListKind::Map(vec!["uid".into()]),
            "containers" | "initContainers" | "ephemeralContainers" | "volumes" | "env" | "volumeMounts" => {
                ListKind::Map(vec!["name".into()])
            }
            "conditions" => ListKind::Map(vec!["type".into()]),
            _ => ListKind::Atomic,
        },
    }
}

fn child_schema<'a>(schema: Option<&'a Value>, field: &str) -> Option<&'a Value> {
    let s = schema?;
    s.get("properties")
        .and_then(|p| p.get(field))
        .or_else(|| s.get("additionalProperties").filter(|a| a.is_object()))
}

fn item_key(item: &Value, keys: &[String]) -> String {
    let mut sorted: Vec<&String> = keys.iter().collect();
    sorted.sort();
    let parts: Vec<String> = sorted
        .iter()
        .map(|k| {
            format!(
                "{}:{}",
                json!(k),
                item.get(k.as_str()).cloned().unwrap_or(Value::Null)
            )
        })
        .collect();
    format!("k:{{{}}}", parts.join(","))
}

fn collect(value: &Value, schema: Option<&Value>, name: &str, path: &mut FieldPath, out: &mut FieldSet) {
    match value {
        Value::Object(fields) if !fields.is_empty() => {
            for (k, v) in fields {
                path.push(format!("f:{k}"));
                collect(v, child_schema(schema, k), k, path, out);
                path.pop();
            }
        }
        Value::Array(items) => match list_kind(schema, name) {
            ListKind::Map(keys) => {
                let item_schema = schema.and_then(|s| s.get("items"));
                for item in items {
                    path.push(item_key(item, &keys));
                    out.insert(path.clone());
                    if let Value::Object(fields) = item {
                        for (k, v) in fields {
                            path.push(format!("f:{k}"));
                            collect(v, child_schema(item_schema, k), k, path, out);
                            path.pop();
                        }
                    }
                    path.pop();
                }
            }
            ListKind::Set => {
                for item in items {
                    path.push(format!("v:{item}"));
                    out.insert(path.clone());
                    path.pop();
                }
            }
            ListKind::Atomic => {
                out.insert(path.clone());
            }
        },
        _ => {
            out.insert(path.clone());
        }
    }
}

/// The fields of `object` within `scope`, as ownership paths.
pub(crate) fn field_set(object: &Value, scope: Scope, schema: Option<&Value>) -> FieldSet {
    let mut out = FieldSet::new();
    let Some(top) = object.as_object() else { return out };
    let mut path = Vec::new();
    for (k, v) in top.iter().filter(|(k, _)| scope.includes(k)) {
        if k == "metadata" {
            for (mk, mv) in v
                .as_object()
                .into_iter()
                .flatten()
                .filter(|(mk, _)| TRACKED_METADATA.contains(&mk.as_str()))
            {
                path = vec!["f:metadata".into(), format!("f:{mk}")];
                collect(mv, None, mk, &mut path, &mut out);
            }
            continue;
        }
        path.clear();
        path.push(format!("f:{k}"));
        collect(v, child_schema(schema, k), k, &mut path, &mut out);
    }
    out
}

fn find_item(items: &[Value], element: &str) -> Option<usize> {
    if let Some(keys) = element.strip_prefix("k:") {
        let keys: Map<String, Value> = serde_json::from_str(keys).ok()?;
        items
            .iter()
            .position(|item| keys.iter().all(|(k, v)| item.get(k) == Some(v)))
    } else {
        let wanted: Value = serde_json::from_str(element.strip_prefix("v:")?).ok()?;
        items.iter().position(|item| *item == wanted)
    }
}

pub(crate) fn value_at<'a>(object: &'a Value, path: &[String]) -> Option<&'a Value> {
    let mut node = object;
    for element in path {
        node = match element.strip_prefix("f:") {
            Some(field) => node.get(field)?,
            None => {
                let items = node.as_array()?;
                &items[find_item(items, element)?]
            }
        };
    }
    Some(node)
}

fn remove_at(object: &mut Value, path: &[String]) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut node = object;
    for element in parents {
        node = match element.strip_prefix("f:") {
            Some(field) => match node.get_mut(field) {
                Some(n) => n,
                None => return,
            },
            None => {
                let Some(i) = node.as_array().and_then(|items| find_item(items, element)) else {
                    return;
                };
                &mut node[i]
            }
        };
    }
    match last.strip_prefix("f:") {
        Some(field) => {
            if let Some(m) = node.as_object_mut() {
                m.remove(field);
            }
        }
        None => {
            if let Some(i) = node.as_array().and_then(|items| find_item(items, last))
                && let Some(items) = node.as_array_mut()
            {
                items.remove(i);
            }
        }
    }
}

/// `f:name` directly under `k:{"name":..}`: a map-list item's key.
fn is_key_field(path: &[String]) -> bool {
    let [.., item, field] = path else { return false };
    let (Some(keys), Some(field)) = (item.strip_prefix("k:"), field.strip_prefix("f:")) else {
        return false;
    };
    serde_json::from_str::<Map<String, Value>>(keys).is_ok_and(|k| k.contains_key(field))
}

fn is_item(path: &[String]) -> bool {
    path.last()
        .is_some_and(|e| e.starts_with("k:") || e.starts_with("v:"))
}

/// Merges an applied configuration into the live object with the list semantics above.
fn merge(live: &mut Value, applied: &Value, schema: Option<&Value>, name: &str) {
    match (live, applied) {
        (Value::Object(l), Value::Object(a)) => {
            for (k, av) in a {
                match l.get_mut(k) {
                    Some(lv) if (lv.is_object() && av.is_object()) || (lv.is_array() && av.is_array()) => {
                        merge(lv, av, child_schema(schema, k), k)
                    }
                    _ => {
                        l.insert(k.clone(), av.clone());
                    }
                }
            }
        }
        (live @ Value::Array(_), Value::Array(a)) => match list_kind(schema, name) {
            ListKind::Map(keys) => {
                let item_schema = schema.and_then(|s| s.get("items"));
                let Value::Array(l) = live else { return };
                for item in a {
                    let element = item_key(item, &keys);
                    match find_item(l, &element) {
                        Some(i) => merge(&mut l[i], item, item_schema, ""),
                        None => l.push(item.clone()),
                    }
                }
            }
            ListKind::Set => {
                let Value::Array(l) = live else { return };
                for item in a {
                    if !l.contains(item) {
                        l.push(item.clone());
                    }
                }
            }
            ListKind::Atomic => *live = applied.clone(),
        },
        (live, applied) => *live = applied.clone(),
    }
}

/// One `managedFields` entry.
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    time: String,
    subresource: String,
    fields: FieldSet,
}

fn from_fields_v1(node: &Value, path: &mut FieldPath, out: &mut FieldSet) {
    for (k, child) in node.as_object().into_iter().flatten() {
        if k == "." {
            out.insert(path.clone());
            continue;
        }
        path.push(k.clone());
        if child.as_object().is_some_and(|c| c.is_empty()) {
            out.insert(path.clone());
        } else {
            from_fields_v1(child, path, out);
        }
        path.pop();
    }
}

fn to_fields_v1(set: &FieldSet) -> Value {
    // Indexing a `null` with a key makes it an object, so every path becomes a chain of objects.
    let mut root = json!({});
    for path in set {
        let mut node = &mut root;
        for element in path {
            node = &mut node[element.as_str()];
        }
    }
    for path in set {
        let mut node = &mut root;
        for element in path {
            node = &mut node[element.as_str()];
        }
        match node {
            Value::Object(m) => {
                m.insert(".".into(), json!({}));
            }
            other => *other = json!({}),
        }
    }
    root
}

fn read_entries(object: &Value) -> Vec<Entry> {
    let text = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    object
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(|e| {
            let mut fields = FieldSet::new();
            if let Some(f) = e.get("fieldsV1") {
                from_fields_v1(f, &mut Vec::new(), &mut fields);
            }
            Entry {
                manager: text(e, "manager"),
                operation: text(e, "operation"),
                api_version: text(e, "apiVersion"),
                time: text(e, "time"),
                subresource: text(e, "subresource"),
                fields,
            }
        })
        .collect()
}

fn write_entries(object: &mut Value, entries: Vec<Entry>) {
    let list: Vec<Value> = entries
        .into_iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": to_fields_v1(&e.fields),
            });
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    if let Some(m) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            m.remove("managedFields");
        } else {
            m.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// Sets one manager's entry, keeping its old timestamp when its fields did not change.
fn upsert(entries: &mut Vec<Entry>, mut entry: Entry) {
    match entries.iter_mut().find(|e| {
        e.manager == entry.manager && e.operation == entry.operation && e.subresource == entry.subresource
    }) {
        Some(existing) => {
            if existing.fields == entry.fields && existing.api_version == entry.api_version {
                entry.time = existing.time.clone();
            }
            *existing = entry;
        }
        None => entries.push(entry),
    }
}

/// `.spec.scores[name="cpu"].value`, as conflicts are reported.
pub(crate) fn display_path(path: &[String]) -> String {
    let mut out = String::new();
    for element in path {
        if let Some(f) = element.strip_prefix("f:") {
            out.push('.');
            out.push_str(f);
        } else if let Some(k) = element.strip_prefix("k:") {
            let keys: Map<String, Value> = serde_json::from_str(k).unwrap_or_default();
            let parts: Vec<String> = keys.iter().map(|(k, v)| format!("{k}={v}")).collect();
            out.push_str(&format!("[{}]", parts.join(",")));
        } else if let Some(v) = element.strip_prefix("v:") {
            out.push_str(&format!("[={v}]"));
        }
    }
    out
}

/// What a write is, for ownership bookkeeping.
pub(crate) struct Write<'a> {
    pub(crate) manager: &'a str,
    pub(crate) scope: Scope,
    pub(crate) schema: Option<&'a Value>,
    pub(crate) api_version: &'a str,
    pub(crate) now: &'a str,
}

/// A field owned by another manager that an apply would change without `force`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Conflict {
    pub(crate) manager: String,
    pub(crate) api_version: String,
    pub(crate) path: String,
}

/// Server-side apply of `applied` (already restricted to `w.scope` by the caller) onto `live`
/// (or onto `base` when creating): conflict detection, removal of fields this manager no longer
/// applies and owns alone, merge, and the manager's new `Apply` entry.
pub(crate) fn apply(live: &Value, applied: &Value, force: bool, w: &Write) -> Result<Value, Vec<Conflict>> {
    let mut entries = read_entries(live);
    let applied_set = field_set(applied, w.scope, w.schema);
    let sub = w.scope.subresource();
    let mine = |e: &Entry| e.manager == w.manager && e.operation == "Apply" && e.subresource == sub;
    let mut conflicts = Vec::new();
    for e in entries.iter_mut().filter(|e| !mine(e)) {
        let clashing: Vec<FieldPath> = e
            .fields
            .intersection(&applied_set)
            .filter(|p| !is_item(p) && value_at(live, p) != value_at(applied, p))
            .cloned()
            .collect();
        if force {
            clashing.iter().for_each(|p| {
                e.fields.remove(p);
            });
        } else {
            conflicts.extend(clashing.iter().map(|p| Conflict {
                manager: e.manager.clone(),
                api_version: e.api_version.clone(),
                path: display_path(p),
            }));
        }
    }
    if !conflicts.is_empty() {
        return Err(conflicts);
    }
    let previous = entries
        .iter()
        .find(|e| mine(e))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut result = live.clone();
    // Shortest first, so a removed list item takes its fields with it; key fields stay with their item.
    let mut removed: Vec<&FieldPath> = previous.difference(&applied_set).collect();
    removed.sort_by_key(|p| p.len());
    let mut gone: Vec<&FieldPath> = Vec::new();
    for path in removed {
        if gone.iter().any(|g| path.starts_with(g)) || is_key_field(path) {
            continue;
        }
        let owned_elsewhere = entries
            .iter()
            .filter(|e| !mine(e))
            .any(|e| e.fields.iter().any(|p| p.starts_with(path)));
        if !owned_elsewhere {
            remove_at(&mut result, path);
            gone.push(path);
        }
    }
    merge(&mut result, applied, w.schema, "");
    upsert(
        &mut entries,
        Entry {
            manager: w.manager.to_string(),
            operation: "Apply".into(),
            api_version: w.api_version.to_string(),
            time: w.now.to_string(),
            subresource: sub.to_string(),
            fields: applied_set,
        },
    );
    write_entries(&mut result, entries);
    Ok(result)
}

/// Ownership after a non-apply write (create, update, patch): the writer takes the fields it
/// changed or added, and removed fields leave every manager. Writes `new`'s `managedFields`.
pub(crate) fn record_update(old: Option<&Value>, new: &mut Value, w: &Write) {
    let mut entries = old.map(read_entries).unwrap_or_default();
    let empty = json!({});
    let old_value = old.unwrap_or(&empty);
    let old_set = field_set(old_value, w.scope, w.schema);
    let new_set = field_set(new, w.scope, w.schema);
    let changed: FieldSet = new_set
        .iter()
        .filter(|p| {
            if is_item(p) {
                !old_set.contains(*p)
            } else {
                value_at(old_value, p) != value_at(new, p)
            }
        })
        .cloned()
        .collect();
    let removed: FieldSet = old_set.difference(&new_set).cloned().collect();
    let sub = w.scope.subresource();
    let mut mine = entries
        .iter()
        .find(|e| e.manager == w.manager && e.operation == "Update" && e.subresource == sub)
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    for e in &mut entries {
        e.fields.retain(|p| !changed.contains(p) && !removed.contains(p));
    }
    mine.retain(|p| !removed.contains(p));
    mine.extend(changed);
    upsert(
        &mut entries,
        Entry {
            manager: w.manager.to_string(),
            operation: "Update".into(),
            api_version: w.api_version.to_string(),
            time: w.now.to_string(),
            subresource: sub.to_string(),
            fields: mine,
        },
    );
    write_entries(new, entries);
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;

    fn scores_schema() -> Value {
        json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "scores": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                       "items": {"type": "object", "properties": {"name": {"type": "string"}, "value": {"type": "integer"}}}},
            "owner": {"type": "string"},
        }}}})
    }

    fn write<'a>(manager: &'a str, schema: &'a Value) -> Write<'a> {
        Write {
            manager,
            scope: Scope::Main {
                status_separate: true,
            },
            schema: Some(schema),
            api_version: "x/v1",
            now: "t",
        }
    }

    #[test]
    fn fields_v1_round_trips() {
        let schema = scores_schema();
        let obj = json!({"metadata": {"labels": {"a": "b"}, "finalizers": ["f"]},
                         "spec": {"scores": [{"name": "cpu", "value": 1}], "owner": "x"}});
        let set = field_set(
            &obj,
            Scope::Main {
                status_separate: true,
            },
            Some(&schema),
        );
        let v1 = to_fields_v1(&set);
        assert_eq!(v1["f:spec"]["f:scores"]["k:{\"name\":\"cpu\"}"]["."], json!({}));
        assert_eq!(v1["f:metadata"]["f:finalizers"]["v:\"f\""], json!({}));
        let mut back = FieldSet::new();
        from_fields_v1(&v1, &mut Vec::new(), &mut back);
        assert_eq!(back, set);
    }

    #[test]
    fn apply_conflicts_force_and_removal() {
        let schema = scores_schema();
        let live = json!({"apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"}, "spec": {}});
        let a1 = json!({"spec": {"scores": [{"name": "cpu", "value": 1}], "owner": "a"}});
        let live = apply(&live, &a1, false, &write("a", &schema)).unwrap();
        let b1 = json!({"spec": {"owner": "b", "scores": [{"name": "mem", "value": 2}]}});
        let conflicts = apply(&live, &b1, false, &write("b", &schema)).unwrap_err();
        assert_eq!(conflicts.len(), 1);
        assert_eq!(conflicts[0].path, ".spec.owner");
        let live = apply(&live, &b1, true, &write("b", &schema)).unwrap();
        assert_eq!(live["spec"]["owner"], "b");
        assert_eq!(live["spec"]["scores"].as_array().unwrap().len(), 2);
        // "a" stops applying cpu: it owned it alone, so it goes; "owner" now belongs to "b".
        let a2 = json!({"spec": {}});
        let live = apply(&live, &a2, false, &write("a", &schema)).unwrap();
        assert_eq!(live["spec"]["scores"], json!([{"name": "mem", "value": 2}]));
        assert_eq!(live["spec"]["owner"], "b");
    }
}
