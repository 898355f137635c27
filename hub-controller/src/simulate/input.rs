//! Reading hub snapshots: `kubectl get ... -A -o yaml` Lists, multi-document YAML, and
//! conformance case files (a YAML list of `{name, now, placement, objects, expect}`).
//! TieredPlacements (`tiering.ocm-score.io`) are collected beside the OCM objects.

use super::decode::decode;
use ocm_score_api::{
    AddOnPlacementScore, ManagedCluster, ManagedClusterSet, ManagedClusterSetBinding, Placement,
    PlacementDecision, TieredPlacement,
};
use ocm_score_scheduler::placement::HubObjects;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use thiserror::Error;

/// Input that cannot be used; always names the file and, where there is one, the object and field.
#[derive(Debug, Error)]
pub enum InputError {
    /// The cause follows in the error chain (`{:#}`).
    #[error("{path}: cannot read")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}: document {document}: not valid YAML: {message}")]
    Yaml {
        path: PathBuf,
        document: usize,
        message: String,
    },
    #[error("{path}: {location}: {message}")]
    Shape {
        path: PathBuf,
        location: String,
        message: String,
    },
    #[error("{path}: {location}: field {field}: {message}")]
    Field {
        path: PathBuf,
        location: String,
        field: String,
        message: String,
    },
}

/// One thing to schedule: a set of objects, optionally with its own clock and placement.
#[derive(Debug, Default)]
pub struct Scenario {
    /// The case name, or the file name for plain snapshots.
    pub label: String,
    /// Whether this came from a conformance case (output is keyed by case name).
    pub is_case: bool,
    pub now: Option<jiff::Timestamp>,
    pub placement: Option<(String, String)>,
    pub objects: HubObjects,
    /// TieredPlacements, planned on top of the objects.
    pub tiered: Vec<TieredPlacement>,
}

/// Reads `path` (`-` is stdin) as text.
fn read_text(path: &Path) -> Result<String, InputError> {
    if path.as_os_str() == "-" {
        std::io::read_to_string(std::io::stdin())
    } else {
        std::fs::read_to_string(path)
    }
    .map_err(|source| InputError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The YAML documents of `text` (read from `path`) as JSON values.
fn documents(path: &Path, text: &str) -> Result<Vec<Value>, InputError> {
    let mut docs = Vec::new();
    for (i, doc) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(doc).map_err(|e| InputError::Yaml {
            path: path.to_path_buf(),
            document: i + 1,
            message: e.to_string(),
        })?;
        docs.push(value);
    }
    Ok(docs)
}

fn is_case(v: &Value) -> bool {
    v.get("objects").is_some() && v.get("placement").is_some()
}

/// Loads one file: either cases (one scenario each) or objects (one scenario for the file).
pub fn load(path: &Path) -> Result<Vec<Scenario>, InputError> {
    parse(path, &read_text(path)?)
}

/// Reads the text of one file (`path` names it in errors): cases or objects, as [`load`] does.
pub fn parse(path: &Path, text: &str) -> Result<Vec<Scenario>, InputError> {
    let docs = documents(path, text)?;
    let mut scenarios = Vec::new();
    let mut objects = HubObjects::default();
    let mut tiered = Vec::new();
    let mut saw_objects = false;
    for (d, doc) in docs.iter().enumerate() {
        let location = format!("document {}", d + 1);
        match doc {
            Value::Null => {}
            Value::Array(items) if !items.is_empty() && items.iter().all(is_case) => {
                for (i, case) in items.iter().enumerate() {
                    scenarios.push(load_case(path, &format!("{location}, case #{}", i + 1), case)?);
                }
            }
            v if is_case(v) => scenarios.push(load_case(path, &location, v)?),
            Value::Array(items) => {
                saw_objects = true;
                for (i, item) in items.iter().enumerate() {
                    add_object(
                        path,
                        &format!("{location}, item #{}", i + 1),
                        item,
                        &mut objects,
                        &mut tiered,
                    )?;
                }
            }
            v => {
                saw_objects = true;
                add_object(path, &location, v, &mut objects, &mut tiered)?;
            }
        }
    }
    if !saw_objects && scenarios.is_empty() {
        return Err(shape(
            path,
            "file",
            "no objects and no cases (nothing to schedule)",
        ));
    }
    if saw_objects {
        if !scenarios.is_empty() {
            return Err(InputError::Shape {
                path: path.to_path_buf(),
                location: "file".into(),
                message: "mixes conformance cases and plain objects".into(),
            });
        }
        scenarios.push(Scenario {
            label: path.display().to_string(),
            objects,
            tiered,
            ..Scenario::default()
        });
    }
    Ok(scenarios)
}

/// Merges the objects of several plain-snapshot files into one scenario.
pub fn merge(mut scenarios: Vec<Scenario>) -> Scenario {
    let mut merged = scenarios.remove(0);
    for s in scenarios {
        merged.label = format!("{}, {}", merged.label, s.label);
        let o = s.objects;
        merged.objects.clusters.extend(o.clusters);
        merged.objects.cluster_sets.extend(o.cluster_sets);
        merged.objects.bindings.extend(o.bindings);
        merged.objects.placements.extend(o.placements);
        merged.objects.decisions.extend(o.decisions);
        merged.objects.scores.extend(o.scores);
        merged.tiered.extend(s.tiered);
    }
    merged
}

fn shape(path: &Path, location: &str, message: impl Into<String>) -> InputError {
    InputError::Shape {
        path: path.to_path_buf(),
        location: location.to_string(),
        message: message.into(),
    }
}

fn load_case(path: &Path, location: &str, case: &Value) -> Result<Scenario, InputError> {
    let name = case
        .get("name")
        .and_then(Value::as_str)
        .ok_or_else(|| shape(path, location, "field name: a case needs a string `name`"))?
        .to_string();
    let location = format!("{location} ({name:?})");
    let now = match case.get("now") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.parse::<jiff::Timestamp>().map_err(|e| InputError::Field {
            path: path.to_path_buf(),
            location: location.clone(),
            field: "now".into(),
            message: format!("{s:?} is not an RFC 3339 time: {e}"),
        })?),
        Some(other) => {
            return Err(shape(
                path,
                &location,
                format!("field now: expected a string, got {other}"),
            ));
        }
    };
    let placement = case
        .get("placement")
        .ok_or_else(|| shape(path, &location, "field placement is missing"))?;
    let key = |field: &str| {
        placement
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| InputError::Field {
                path: path.to_path_buf(),
                location: location.clone(),
                field: format!("placement.{field}"),
                message: "expected a string".into(),
            })
    };
    let placement = (key("namespace")?, key("name")?);
    let Some(Value::Array(items)) = case.get("objects") else {
        return Err(shape(
            path,
            &location,
            "field objects: expected a list of objects",
        ));
    };
    let mut objects = HubObjects::default();
    let mut tiered = Vec::new();
    for (i, item) in items.iter().enumerate() {
        add_object(
            path,
            &format!("{location}, objects[{i}]"),
            item,
            &mut objects,
            &mut tiered,
        )?;
    }
    Ok(Scenario {
        label: name,
        is_case: true,
        now,
        placement: Some(placement),
        objects,
        tiered,
    })
}

fn describe(v: &Value) -> String {
    let kind = v.get("kind").and_then(Value::as_str).unwrap_or("object");
    let meta = v.get("metadata");
    let name = meta
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("<unnamed>");
    match meta.and_then(|m| m.get("namespace")).and_then(Value::as_str) {
        Some(ns) => format!("{kind} {ns}/{name}"),
        None => format!("{kind} {name}"),
    }
}

fn add_object(
    path: &Path,
    location: &str,
    v: &Value,
    objects: &mut HubObjects,
    tiered: &mut Vec<TieredPlacement>,
) -> Result<(), InputError> {
    let Some(kind) = v.get("kind").and_then(Value::as_str) else {
        return Err(shape(
            path,
            location,
            "field kind: expected a Kubernetes object with a string `kind`",
        ));
    };
    if kind == "List" || kind.ends_with("List") {
        let Some(Value::Array(items)) = v.get("items") else {
            return Err(shape(
                path,
                location,
                format!("field items: a {kind} needs a list of items"),
            ));
        };
        for (i, item) in items.iter().enumerate() {
            add_object(path, &format!("{location}, items[{i}]"), item, objects, tiered)?;
        }
        return Ok(());
    }
    let group = v
        .get("apiVersion")
        .and_then(Value::as_str)
        .map(|a| a.split_once('/').map_or("", |(g, _)| g))
        .unwrap_or("");
    if group == ocm_score_api::crd::tiered_placement::TIERING_GROUP && kind == "TieredPlacement" {
        let location = format!("{location} ({})", describe(v));
        let tp = decode::<TieredPlacement>(v).map_err(|(field, message)| InputError::Field {
            path: path.to_path_buf(),
            location,
            field,
            message,
        })?;
        tiered.push(tp);
        return Ok(());
    }
    if group != "cluster.open-cluster-management.io" {
        tracing::debug!(kind, group, "ignoring an object the scheduler does not read");
        return Ok(());
    }
    let location = format!("{location} ({})", describe(v));
    let err = |(field, message): (String, String)| InputError::Field {
        path: path.to_path_buf(),
        location: location.clone(),
        field,
        message,
    };
    match kind {
        "ManagedCluster" => objects.clusters.push(decode::<ManagedCluster>(v).map_err(err)?),
        "ManagedClusterSet" => objects
            .cluster_sets
            .push(decode::<ManagedClusterSet>(v).map_err(err)?),
        "ManagedClusterSetBinding" => objects
            .bindings
            .push(decode::<ManagedClusterSetBinding>(v).map_err(err)?),
        "Placement" => {
            let placement = decode::<Placement>(v).map_err(err)?;
            // No API server checked a file: refuse what api v1.3.0's CRD would (the models keep it).
            if let Some(e) = placement.spec.v1_3_field_errors("spec").into_iter().next() {
                return Err(err((e.field, e.message)));
            }
            objects.placements.push(placement);
        }
        "PlacementDecision" => objects
            .decisions
            .push(decode::<PlacementDecision>(v).map_err(err)?),
        "AddOnPlacementScore" => objects
            .scores
            .push(decode::<AddOnPlacementScore>(v).map_err(err)?),
        other => tracing::debug!(kind = other, "ignoring a kind the scheduler does not read"),
    }
    Ok(())
}
