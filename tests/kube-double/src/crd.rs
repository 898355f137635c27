//! CustomResourceDefinitions as data: load them from YAML and validate objects against their
//! `openAPIV3Schema` the way the API server does with strict field validation.
//!
//! Kubernetes schemas are OpenAPI v3.0 "structural" schemas. They are turned into JSON Schema
//! draft 4 (the dialect OpenAPI 3.0 extends) with these translations:
//! - `nullable: true` admits `null`;
//! - `x-kubernetes-int-or-string` admits an integer or a string;
//! - an object with `properties` and no `additionalProperties` rejects unknown fields unless it
//!   carries `x-kubernetes-preserve-unknown-fields` (what `fieldValidation=Strict` reports);
//! - `x-kubernetes-list-type: map|set` uniqueness is checked in a second pass, since JSON Schema
//!   cannot express "unique by these keys".
//!
//! CEL rules (`x-kubernetes-validations`) are not evaluated.

use serde_json::{Map, Value};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("parsing {path}: {source}")]
    Parse {
        path: PathBuf,
        source: serde_norway::Error,
    },
    #[error("{path}: field {field} is missing or malformed")]
    Field { path: PathBuf, field: &'static str },
    #[error("locating OCM's CRDs: {0}")]
    Upstream(String),
    #[error("CRD {crd} version {version}: schema does not compile: {message}")]
    Schema {
        crd: String,
        version: String,
        message: String,
    },
}

/// What one CRD declares, reduced to what clients and the API server double need.
#[derive(Clone, Debug)]
pub struct Crd {
    pub group: String,
    pub kind: String,
    pub list_kind: String,
    pub plural: String,
    pub singular: String,
    pub short_names: Vec<String>,
    pub namespaced: bool,
    pub versions: Vec<CrdVersion>,
    /// The CRD object as loaded, for whoever needs more (e.g. serving it back).
    pub raw: Value,
}

#[derive(Clone, Debug)]
pub struct CrdVersion {
    pub name: String,
    pub served: bool,
    pub storage: bool,
    pub status_subresource: bool,
    /// The version's `openAPIV3Schema`, untranslated.
    pub schema: Value,
}

/// One reason an object does not validate, at a Kubernetes-style field path (`status.scores[0].value`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

impl Crd {
    /// Parses one CRD YAML document.
    pub fn from_yaml(path: &Path, text: &str) -> Result<Crd, CrdError> {
        let raw: Value = serde_norway::from_str(text).map_err(|source| CrdError::Parse {
            path: path.into(),
            source,
        })?;
        Self::from_value(path, raw)
    }

    pub fn from_value(path: &Path, raw: Value) -> Result<Crd, CrdError> {
        let field = |field: &'static str| CrdError::Field {
            path: path.into(),
            field,
        };
        let spec = raw.get("spec").ok_or_else(|| field("spec"))?;
        let names = spec.get("names").ok_or_else(|| field("spec.names"))?;
        let text = |v: &Value, key: &str| v.get(key).and_then(Value::as_str).map(str::to_string);
        let kind = text(names, "kind").ok_or_else(|| field("spec.names.kind"))?;
        let versions = spec
            .get("versions")
            .and_then(Value::as_array)
            .ok_or_else(|| field("spec.versions"))?
            .iter()
            .map(|v| {
                Ok(CrdVersion {
                    name: text(v, "name").ok_or_else(|| field("spec.versions[].name"))?,
                    served: v.get("served").and_then(Value::as_bool).unwrap_or(false),
                    storage: v.get("storage").and_then(Value::as_bool).unwrap_or(false),
                    status_subresource: v.pointer("/subresources/status").is_some(),
                    schema: v
                        .pointer("/schema/openAPIV3Schema")
                        .cloned()
                        .ok_or_else(|| field("spec.versions[].schema.openAPIV3Schema"))?,
                })
            })
            .collect::<Result<Vec<_>, CrdError>>()?;
        Ok(Crd {
            group: text(spec, "group").ok_or_else(|| field("spec.group"))?,
            list_kind: text(names, "listKind").unwrap_or_else(|| format!("{kind}List")),
            plural: text(names, "plural").ok_or_else(|| field("spec.names.plural"))?,
            singular: text(names, "singular").unwrap_or_else(|| kind.to_lowercase()),
            short_names: names
                .get("shortNames")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
                .unwrap_or_default(),
            namespaced: match text(spec, "scope").as_deref() {
                Some("Namespaced") => true,
                Some("Cluster") => false,
                _ => return Err(field("spec.scope")),
            },
            kind,
            versions,
            raw,
        })
    }

    pub fn version(&self, name: &str) -> Option<&CrdVersion> {
        self.versions.iter().find(|v| v.name == name)
    }

    pub fn storage_version(&self) -> Option<&CrdVersion> {
        self.versions.iter().find(|v| v.storage)
    }
}

/// Loads every `*.yaml` CRD directly inside `dir` (not recursing), sorted by file name. A
/// `kustomization.yaml` is kustomize's, not a CRD: a directory `kubectl apply -k` installs loads as is.
pub fn load_dir(dir: &Path) -> Result<Vec<Crd>, CrdError> {
    let read_err = |source| CrdError::Read {
        path: dir.into(),
        source,
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(read_err)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file() && p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .filter(|p| p.file_stem().is_none_or(|stem| stem != "kustomization"))
        .collect();
    files.sort();
    load_files(&files)
}

/// Loads one CRD from each file, in the order given.
pub fn load_files(files: &[PathBuf]) -> Result<Vec<Crd>, CrdError> {
    files
        .iter()
        .map(|path| {
            let text = std::fs::read_to_string(path).map_err(|source| CrdError::Read {
                path: path.clone(),
                source,
            })?;
            Crd::from_yaml(path, &text)
        })
        .collect()
}

/// OCM's CRDs (single-version set, see [`crate::ocm_api::SINGLE_VERSION_SET`]) from the
/// `open-cluster-management.io/api` module that `tests/control-plane/go.mod` pins.
pub fn upstream_crds() -> Result<Vec<Crd>, CrdError> {
    load_files(&upstream_crd_files()?)
}

/// The files [`upstream_crds`] loads, in Go's module cache.
pub fn upstream_crd_files() -> Result<Vec<PathBuf>, CrdError> {
    crate::ocm_api::module()
        .and_then(|m| m.crd_files())
        .map_err(CrdError::Upstream)
}

/// The same set of CRDs from the next OCM API release (`tests/ocm-next/go.mod`), for checking that
/// our models also fit what newer hubs serve.
pub fn next_release_crds() -> Result<Vec<Crd>, CrdError> {
    let files = crate::ocm_api::next_release_module()
        .and_then(|m| m.crd_files())
        .map_err(CrdError::Upstream)?;
    load_files(&files)
}

/// A compiled validator for one CRD version.
pub struct SchemaValidator {
    schema: Value,
    compiled: jsonschema::Validator,
}

impl std::fmt::Debug for SchemaValidator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchemaValidator").finish_non_exhaustive()
    }
}

impl SchemaValidator {
    pub fn new(crd: &Crd, version: &CrdVersion) -> Result<Self, CrdError> {
        let mut translated = to_json_schema(&version.schema);
        // The API server always accepts `apiVersion`, `kind` and `metadata` at the root, whether
        // the schema declares them (OCM's do) or not (kube-derive's do not).
        if let Some(Value::Object(props)) = translated.get_mut("properties") {
            for (key, ty) in [
                ("apiVersion", "string"),
                ("kind", "string"),
                ("metadata", "object"),
            ] {
                props
                    .entry(key)
                    .or_insert_with(|| serde_json::json!({ "type": ty }));
            }
        }
        let compiled = jsonschema::draft4::options()
            .should_validate_formats(true)
            .build(&translated)
            .map_err(|e| CrdError::Schema {
                crd: format!("{}.{}", crd.plural, crd.group),
                version: version.name.clone(),
                message: e.to_string(),
            })?;
        Ok(Self {
            schema: version.schema.clone(),
            compiled,
        })
    }

    /// Every reason `object` is invalid; empty when it is valid.
    pub fn errors(&self, object: &Value) -> Vec<FieldError> {
        let mut out: Vec<FieldError> = self
            .compiled
            .iter_errors(object)
            .map(|e| FieldError {
                field: field_path(e.instance_path().as_str()),
                message: e.to_string(),
            })
            .collect();
        check_list_types(&self.schema, object, &mut String::new(), &mut out);
        out
    }

    pub fn validate(&self, object: &Value) -> Result<(), Vec<FieldError>> {
        let errors = self.errors(object);
        if errors.is_empty() { Ok(()) } else { Err(errors) }
    }
}

/// JSON pointer (`/status/scores/0/value`) to Kubernetes field path (`status.scores[0].value`).
fn field_path(pointer: &str) -> String {
    let mut out = String::new();
    for token in pointer.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        if !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit()) {
            out.push_str(&format!("[{token}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&token);
        }
    }
    if out.is_empty() { "<root>".to_string() } else { out }
}

/// Translates a structural OpenAPI v3 schema into JSON Schema draft 4 (see the module docs).
pub fn to_json_schema(schema: &Value) -> Value {
    let Value::Object(map) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in map {
        let translated = match key.as_str() {
            "properties" | "patternProperties" | "definitions" => match value {
                Value::Object(props) => Value::Object(
                    props
                        .iter()
                        .map(|(k, v)| (k.clone(), to_json_schema(v)))
                        .collect(),
                ),
                other => other.clone(),
            },
            "items" | "additionalProperties" | "not" => to_json_schema(value),
            "allOf" | "anyOf" | "oneOf" => match value {
                Value::Array(items) => Value::Array(items.iter().map(to_json_schema).collect()),
                other => other.clone(),
            },
            // OpenAPI annotations JSON Schema validators do not understand.
            k if k.starts_with("x-kubernetes-") || k == "nullable" || k == "default" => continue,
            _ => value.clone(),
        };
        out.insert(key.clone(), translated);
    }
    let flag = |name: &str| map.get(name).and_then(Value::as_bool).unwrap_or(false);
    if flag("x-kubernetes-int-or-string") {
        out.remove("type");
        out.insert(
            "anyOf".into(),
            serde_json::json!([{"type": "integer"}, {"type": "string"}]),
        );
    }
    if flag("nullable") {
        if let Some(Value::String(t)) = out.get("type").cloned() {
            out.insert("type".into(), serde_json::json!([t, "null"]));
        }
        if let Some(Value::Array(values)) = out.get_mut("enum") {
            values.push(Value::Null);
        }
    }
    let is_object = map.get("type").and_then(Value::as_str) == Some("object");
    if is_object
        && map.contains_key("properties")
        && !map.contains_key("additionalProperties")
        && !flag("x-kubernetes-preserve-unknown-fields")
    {
        out.insert("additionalProperties".into(), Value::Bool(false));
    }
    Value::Object(out)
}

/// Drops every field the structural schema does not declare, as the API server does before it
/// stores a custom resource; returns the dropped fields' paths (`spec.unknown`).
///
/// At the root `apiVersion`, `kind` and `metadata` are kept whatever the schema says (the server
/// handles them itself), and so is everything under `x-kubernetes-preserve-unknown-fields: true`.
pub fn prune(schema: &Value, object: &mut Value) -> Vec<String> {
    let mut pruned = Vec::new();
    prune_at(schema, object, &mut String::new(), true, &mut pruned);
    pruned
}

fn prune_at(schema: &Value, value: &mut Value, path: &mut String, root: bool, pruned: &mut Vec<String>) {
    let preserve = schema
        .get("x-kubernetes-preserve-unknown-fields")
        .and_then(Value::as_bool)
        == Some(true);
    let embedded = schema
        .get("x-kubernetes-embedded-resource")
        .and_then(Value::as_bool)
        == Some(true);
    match value {
        Value::Object(fields) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let keys: Vec<String> = fields.keys().cloned().collect();
            for key in keys {
                let kept_anyway =
                    (root || embedded) && matches!(key.as_str(), "apiVersion" | "kind" | "metadata");
                let child_schema = props.and_then(|p| p.get(&key)).or(match additional {
                    Some(s @ Value::Object(_)) => Some(s),
                    _ => None,
                });
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(&key);
                match child_schema {
                    Some(child) if !(kept_anyway && key == "metadata") => {
                        if let Some(v) = fields.get_mut(&key) {
                            prune_at(child, v, path, false, pruned);
                        }
                    }
                    Some(_) => {}
                    None if kept_anyway || preserve || additional == Some(&Value::Bool(true)) => {}
                    None => {
                        fields.remove(&key);
                        pruned.push(path.clone());
                    }
                }
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for (i, item) in items.iter_mut().enumerate() {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    prune_at(item_schema, item, path, false, pruned);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

/// Fills in `default:` values for absent fields, recursively, as the API server does on writes.
/// A `null` in a field that is not `nullable` is dropped first, so that it is defaulted too.
pub fn apply_defaults(schema: &Value, object: &mut Value) {
    match object {
        Value::Object(fields) => {
            if let Some(props) = schema.get("properties").and_then(Value::as_object) {
                for (name, child) in props {
                    let nullable = child.get("nullable").and_then(Value::as_bool) == Some(true);
                    if fields.get(name) == Some(&Value::Null) && !nullable {
                        fields.remove(name);
                    }
                    if let (false, Some(default)) = (fields.contains_key(name), child.get("default")) {
                        fields.insert(name.clone(), default.clone());
                    }
                    if let Some(v) = fields.get_mut(name) {
                        apply_defaults(child, v);
                    }
                }
            } else if let Some(additional @ Value::Object(_)) = schema.get("additionalProperties") {
                for v in fields.values_mut() {
                    apply_defaults(additional, v);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                items
                    .iter_mut()
                    .for_each(|item| apply_defaults(item_schema, item));
            }
        }
        _ => {}
    }
}

/// Checks `x-kubernetes-list-type` uniqueness (`map` by its keys, `set` by value) everywhere in `value`.
fn check_list_types(schema: &Value, value: &Value, path: &mut String, out: &mut Vec<FieldError>) {
    match value {
        Value::Object(fields) => {
            let props = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties").filter(|v| v.is_object());
            for (name, child) in fields {
                let Some(child_schema) = props.and_then(|p| p.get(name)).or(additional) else {
                    continue;
                };
                let len = path.len();
                if !path.is_empty() {
                    path.push('.');
                }
                path.push_str(name);
                check_list_types(child_schema, child, path, out);
                path.truncate(len);
            }
        }
        Value::Array(items) => {
            let list_type = schema.get("x-kubernetes-list-type").and_then(Value::as_str);
            let keys: Vec<&str> = schema
                .get("x-kubernetes-list-map-keys")
                .and_then(Value::as_array)
                .map(|k| k.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut seen: Vec<Value> = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let identity = match list_type {
                    Some("map") => Value::Array(
                        keys.iter()
                            .map(|k| item.get(*k).cloned().unwrap_or(Value::Null))
                            .collect(),
                    ),
                    Some("set") => item.clone(),
                    _ => Value::Null,
                };
                if list_type == Some("map") || list_type == Some("set") {
                    if seen.contains(&identity) {
                        out.push(FieldError {
                            field: format!("{path}[{i}]"),
                            message: format!("Duplicate value: {identity}"),
                        });
                    } else {
                        seen.push(identity);
                    }
                }
                if let Some(item_schema) = schema.get("items") {
                    let len = path.len();
                    path.push_str(&format!("[{i}]"));
                    check_list_types(item_schema, item, path, out);
                    path.truncate(len);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn field_paths_read_like_kubernetes() {
        assert_eq!(field_path("/status/scores/0/value"), "status.scores[0].value");
        assert_eq!(field_path(""), "<root>");
    }

    #[test]
    fn nullable_and_int_or_string_translate() {
        let s = to_json_schema(&json!({
            "type": "object",
            "properties": {
                "a": {"type": "string", "nullable": true},
                "b": {"x-kubernetes-int-or-string": true},
            }
        }));
        let v = jsonschema::draft4::new(&s).unwrap();
        assert!(v.is_valid(&json!({"a": null, "b": 3})));
        assert!(v.is_valid(&json!({"b": "50%"})));
        assert!(!v.is_valid(&json!({"b": true})));
        assert!(!v.is_valid(&json!({"c": 1})), "unknown field must be rejected");
    }

    #[test]
    fn pruning_drops_undeclared_fields_but_keeps_root_meta_and_preserved_subtrees() {
        let schema = json!({
            "type": "object",
            "properties": {
                "spec": {"type": "object", "properties": {
                    "a": {"type": "string"},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "list": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}},
                }},
            }
        });
        let mut obj = json!({
            "apiVersion": "x/v1", "kind": "K", "metadata": {"name": "n"},
            "spec": {"a": "1", "b": 2, "free": {"anything": 1}, "list": [{"n": "x", "m": 1}]},
            "extra": true,
        });
        let mut pruned = prune(&schema, &mut obj);
        pruned.sort();
        assert_eq!(pruned, vec!["extra", "spec.b", "spec.list[0].m"]);
        assert_eq!(
            obj["spec"],
            json!({"a": "1", "free": {"anything": 1}, "list": [{"n": "x"}]})
        );
        assert_eq!(obj["metadata"], json!({"name": "n"}));
    }

    #[test]
    fn defaults_fill_absent_and_non_nullable_null_fields() {
        let schema = json!({"type": "object", "properties": {"spec": {
            "type": "object", "default": {},
            "properties": {
                "mode": {"type": "string", "default": "Auto"},
                "n": {"type": "integer", "default": 60},
                "keep": {"type": "string", "nullable": true, "default": "x"},
            }
        }}});
        let mut obj = json!({"spec": {"n": null, "keep": null}});
        apply_defaults(&schema, &mut obj);
        assert_eq!(obj["spec"], json!({"mode": "Auto", "n": 60, "keep": null}));
        let mut empty = json!({});
        apply_defaults(&schema, &mut empty);
        assert_eq!(empty["spec"], json!({"mode": "Auto", "n": 60, "keep": "x"}));
    }
}
