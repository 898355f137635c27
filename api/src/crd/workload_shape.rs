//! `WorkloadShape` (`tiering.ocm-score.io/v1alpha1`, cluster-scoped): one replica of a workload,
//! as the agent counts "how many of these fit on this cluster" (docs/fits-and-reservations.md).
//!
//! Each agent publishes `fits.<shape>` in its `resource-usage-score` AddOnPlacementScore, encoded by
//! [`encode_fits`] and read back by [`decode_fits`]; both live here so the agent that writes the
//! value and the hub that reads it cannot disagree.
//!
//! The CRD is generated from these types (`manifests/hub/crds/`, checked by
//! `api/tests/crds.rs`). The schema says what a structural schema can
//! (`scale ≥ 1`); [`validate`] checks the rest (quantities, names, toleration operators) for shapes
//! that did not come through the API server, such as the agent's `--shapes` file.

use crate::quantity::approximate_f64;
use k8s_openapi::api::core::v1::{NodeSelector, PodAffinityTerm, Toleration, TopologySpreadConstraint};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube_derive::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The resources one replica needs and the nodes it may run on.
#[derive(CustomResource, Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "tiering.ocm-score.io",
    version = "v1alpha1",
    kind = "WorkloadShape",
    plural = "workloadshapes",
    shortname = "wls",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"Scale","type":"integer","jsonPath":".spec.scale"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    crates(
        kube_core = "::kube_core",
        k8s_openapi = "::k8s_openapi",
        schemars = "::schemars",
        serde = "::serde",
        serde_json = "::serde_json"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct WorkloadShapeSpec {
    /// What one replica requests (its pod's effective request), by resource name: `cpu`, `memory`,
    /// `nvidia.com/gpu`, any extended resource. Empty: a pods-only shape, bounded by pod slots.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, Quantity>,
    /// Node labels a node must carry (exact match), as a pod's `nodeSelector`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub node_selector: BTreeMap<String, String>,
    /// Tolerations of the replicas' pods; NoSchedule and NoExecute taints they leave untolerated
    /// make a node ineligible.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tolerations: Vec<Toleration>,
    /// Added to every replica's requests, as a RuntimeClass' pod overhead is.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_overhead: BTreeMap<String, Quantity>,
    /// Replicas per score point: the score is `floor(fits / scale) − 100`, exact up to
    /// `200 × scale` replicas. Raise it for small shapes that fit by the thousand.
    #[serde(default = "default_scale")]
    #[schemars(range(min = 1))]
    pub scale: i32,
    /// The namespace the replicas run in. Required by `podAntiAffinity` and
    /// `topologySpreadConstraints` (their label selectors count pods of this namespace unless a
    /// term names others); the namespace's ResourceQuotas bound the count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The labels every replica's pod carries: what the label selectors of `podAntiAffinity` and
    /// `topologySpreadConstraints` are matched against for the replicas themselves, and what their
    /// `matchLabelKeys` read.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub pod_labels: BTreeMap<String, String>,
    /// Required node affinity, as a pod's
    /// `affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`: the terms are ORed,
    /// the expressions of a term ANDed (preferred terms only score nodes, so they are not stated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_affinity: Option<NodeSelector>,
    /// Required pod anti-affinity terms, as a pod's
    /// `affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution`: no replica goes
    /// into a topology domain (the nodes sharing the `topologyKey` label's value) holding a pod the
    /// term selects, the other replicas included when `podLabels` match the selector.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pod_anti_affinity: Vec<PodAffinityTerm>,
    /// The replicas' pod topology spread constraints, as a pod's. `whenUnsatisfiable:
    /// DoNotSchedule` ones bound the count; `ScheduleAnyway` ones only score nodes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub topology_spread_constraints: Vec<TopologySpreadConstraint>,
    /// Host ports one replica binds: a node takes at most one replica, and none when a pod on it
    /// already binds a conflicting port.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_ports: Vec<HostPort>,
}

/// A host port of a replica, as a container port's `hostPort`, `protocol` and `hostIP`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HostPort {
    /// 1..65535.
    #[schemars(range(min = 1, max = 65535))]
    pub port: i32,
    /// `TCP` (the default), `UDP` or `SCTP`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The host address bound; empty or `0.0.0.0` conflicts with every address.
    #[serde(default, rename = "hostIP", skip_serializing_if = "Option::is_none")]
    pub host_ip: Option<String>,
}

fn default_scale() -> i32 {
    1
}

impl Default for WorkloadShapeSpec {
    fn default() -> Self {
        Self {
            requests: BTreeMap::new(),
            node_selector: BTreeMap::new(),
            tolerations: Vec::new(),
            pod_overhead: BTreeMap::new(),
            scale: default_scale(),
            namespace: None,
            pod_labels: BTreeMap::new(),
            node_affinity: None,
            pod_anti_affinity: Vec::new(),
            topology_spread_constraints: Vec::new(),
            host_ports: Vec::new(),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The score

/// Scores of shapes are named `fits.<shape>` in the agent's `resource-usage-score`.
pub const FITS_SCORE_PREFIX: &str = "fits.";

/// The replica count below which the encoding is exact, per unit of `scale`.
pub const FITS_EXACT_BELOW: u64 = 200;

/// The score name of a shape.
pub fn fits_score_name(shape: &str) -> String {
    format!("{FITS_SCORE_PREFIX}{shape}")
}

/// `clamp(floor(fits / scale) − 100, −100, 100)`; a `scale` below 1 counts as 1.
pub fn encode_fits(fits: u64, scale: i32) -> i32 {
    let scale = u64::try_from(scale.max(1)).unwrap_or(1);
    // At most 200 after `min`, so the cast cannot truncate.
    (fits / scale).min(FITS_EXACT_BELOW) as i32 - 100
}

/// What a `fits` score says about the replicas that fit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DecodedFits {
    /// At least this many fit: `(value + 100) × scale`. Exact (up to the `scale` rounding) unless
    /// `saturated`.
    pub at_least: u64,
    /// The value is +100: `200 × scale` or more fit.
    pub saturated: bool,
}

/// The inverse of [`encode_fits`]: values outside −100..100 are clamped first, a `scale` below 1
/// counts as 1.
pub fn decode_fits(value: i32, scale: i32) -> DecodedFits {
    let points = u64::try_from(value.clamp(-100, 100) + 100).unwrap_or(0);
    let scale = u64::try_from(scale.max(1)).unwrap_or(1);
    DecodedFits {
        at_least: points * scale,
        saturated: points >= FITS_EXACT_BELOW,
    }
}

// ---------------------------------------------------------------------------------------------
// Selection: at most 32 shapes

/// The most shapes an agent scores; it bounds the score object's size and its write churn.
pub const MAX_SHAPES: usize = 32;

/// The reason of the condition reporting shapes left out.
pub const TOO_MANY_SHAPES_REASON: &str = "TooManyWorkloadShapes";

/// The shapes an agent uses: the first [`MAX_SHAPES`] by name, one per name.
#[derive(Clone, Debug, PartialEq)]
pub struct ShapeSelection<'a> {
    /// In name order.
    pub used: Vec<&'a WorkloadShape>,
    /// Shapes not used, in name order, each with why.
    pub left_out: Vec<(String, &'static str)>,
}

impl ShapeSelection<'_> {
    /// A message for the condition and the log line, when shapes were left out.
    pub fn message(&self) -> Option<String> {
        if self.left_out.is_empty() {
            return None;
        }
        let names: Vec<String> = self
            .left_out
            .iter()
            .map(|(name, why)| format!("{name:?} ({why})"))
            .collect();
        Some(format!(
            "{} WorkloadShapes are not scored: {}; at most {MAX_SHAPES} are, the first by name",
            self.left_out.len(),
            names.join(", ")
        ))
    }
}

/// Picks the first [`MAX_SHAPES`] shapes by name (independently of their validity, so a new shape
/// never silently displaces another by being invalid); a repeated name keeps its first occurrence.
pub fn select_shapes(shapes: &[WorkloadShape]) -> ShapeSelection<'_> {
    let mut sorted: Vec<&WorkloadShape> = shapes.iter().collect();
    sorted.sort_by(|a, b| shape_name(a).cmp(shape_name(b)));
    let mut used: Vec<&WorkloadShape> = Vec::new();
    let mut left_out = Vec::new();
    for shape in sorted {
        let name = shape_name(shape);
        if used.last().is_some_and(|u| shape_name(u) == name) {
            left_out.push((name.to_owned(), "a shape of the same name comes first"));
        } else if used.len() == MAX_SHAPES {
            left_out.push((name.to_owned(), "beyond the first 32 by name"));
        } else {
            used.push(shape);
        }
    }
    ShapeSelection { used, left_out }
}

fn shape_name(shape: &WorkloadShape) -> &str {
    shape.metadata.name.as_deref().unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// Validation

/// One reason a shape cannot be scored, naming the shape, the field and the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("WorkloadShape {shape:?}: field {field}: {message}")]
pub struct ShapeError {
    pub shape: String,
    pub field: String,
    pub message: String,
}

/// Checks what the CRD schema cannot (or what a shape read from a file skipped): every error found,
/// an empty list when the shape can be scored. A shape with no requests at all is valid (pods-only).
pub fn validate(shape: &WorkloadShape) -> Vec<ShapeError> {
    let name = shape_name(shape);
    let mut errors = Vec::new();
    let mut err = |field: String, message: String| {
        errors.push(ShapeError {
            shape: name.to_owned(),
            field,
            message,
        })
    };
    if !is_dns_label(name) {
        err(
            "metadata.name".into(),
            format!(
                "{name:?} is not a DNS label (lowercase letters, digits and '-', at most 63): \
                 it names the score fits.<name> and TieredPlacement fits rules"
            ),
        );
    }
    let spec = &shape.spec;
    for (list, field) in [(&spec.requests, "requests"), (&spec.pod_overhead, "podOverhead")] {
        for (resource, quantity) in list {
            let field = format!("spec.{field}[{resource:?}]");
            if !is_qualified_name(resource) {
                err(field.clone(), format!("{resource:?} is not a resource name"));
            } else if resource == "pods" {
                err(
                    field.clone(),
                    "\"pods\" cannot be requested: every replica takes one pod slot anyway".into(),
                );
            }
            match approximate_f64(&quantity.0) {
                Err(e) => err(field, format!("{:?} is not a quantity: {e}", quantity.0)),
                Ok(v) if v < 0.0 => err(field, format!("{:?} is negative", quantity.0)),
                Ok(_) => {}
            }
        }
    }
    for (key, value) in &spec.node_selector {
        let field = format!("spec.nodeSelector[{key:?}]");
        if !is_qualified_name(key) {
            err(field, format!("{key:?} is not a label key"));
        } else if !is_label_value(value) {
            err(field, format!("{value:?} is not a label value"));
        }
    }
    for (i, t) in spec.tolerations.iter().enumerate() {
        let field = format!("spec.tolerations[{i}]");
        let key = t.key.as_deref().unwrap_or_default();
        let value = t.value.as_deref().unwrap_or_default();
        match t.operator.as_deref().unwrap_or_default() {
            "" | "Equal" => {
                if key.is_empty() {
                    err(
                        format!("{field}.key"),
                        "empty: only operator Exists may leave the key empty (tolerating every taint)".into(),
                    );
                }
            }
            "Exists" => {
                if !value.is_empty() {
                    err(
                        format!("{field}.value"),
                        format!("{value:?}: operator Exists takes no value"),
                    );
                }
            }
            other => err(
                format!("{field}.operator"),
                format!("{other:?}; it must be Equal or Exists"),
            ),
        }
        if !key.is_empty() && !is_qualified_name(key) {
            err(format!("{field}.key"), format!("{key:?} is not a taint key"));
        }
        if let Some(effect) = t.effect.as_deref()
            && !matches!(effect, "" | "NoSchedule" | "PreferNoSchedule" | "NoExecute")
        {
            err(
                format!("{field}.effect"),
                format!("{effect:?}; it must be NoSchedule, PreferNoSchedule or NoExecute"),
            );
        }
    }
    if spec.scale < 1 {
        err(
            "spec.scale".into(),
            format!("{}; it must be at least 1", spec.scale),
        );
    }
    validate_placement(spec, &mut err);
    errors
}

/// The checks of the placement constraints (namespace, pod labels, affinity, spread, host ports).
fn validate_placement(spec: &WorkloadShapeSpec, err: &mut impl FnMut(String, String)) {
    if let Some(namespace) = &spec.namespace
        && !is_dns_label(namespace)
    {
        err(
            "spec.namespace".into(),
            format!("{namespace:?} is not a namespace name"),
        );
    }
    let selects_pods = !spec.pod_anti_affinity.is_empty() || !spec.topology_spread_constraints.is_empty();
    if selects_pods && spec.namespace.is_none() {
        err(
            "spec.namespace".into(),
            "missing: podAntiAffinity and topologySpreadConstraints select pods of the replicas' namespace"
                .into(),
        );
    }
    for (key, value) in &spec.pod_labels {
        let field = format!("spec.podLabels[{key:?}]");
        if !is_qualified_name(key) {
            err(field, format!("{key:?} is not a label key"));
        } else if !is_label_value(value) {
            err(field, format!("{value:?} is not a label value"));
        }
    }
    if let Some(affinity) = &spec.node_affinity {
        if affinity.node_selector_terms.is_empty() {
            err(
                "spec.nodeAffinity.nodeSelectorTerms".into(),
                "empty: at least one term is required (an empty list would match no node)".into(),
            );
        }
        for (t, term) in affinity.node_selector_terms.iter().enumerate() {
            let field = format!("spec.nodeAffinity.nodeSelectorTerms[{t}]");
            for (i, e) in term.match_expressions.iter().flatten().enumerate() {
                let field = format!("{field}.matchExpressions[{i}]");
                if !is_qualified_name(&e.key) {
                    err(format!("{field}.key"), format!("{:?} is not a label key", e.key));
                }
                check_node_operator(&field, &e.operator, e.values.as_deref().unwrap_or_default(), err);
            }
            for (i, e) in term.match_fields.iter().flatten().enumerate() {
                let field = format!("{field}.matchFields[{i}]");
                if e.key != "metadata.name" {
                    err(
                        format!("{field}.key"),
                        format!("{:?}; the only field is metadata.name", e.key),
                    );
                }
                let values = e.values.as_deref().unwrap_or_default();
                if !matches!(e.operator.as_str(), "In" | "NotIn") || values.len() != 1 {
                    err(
                        format!("{field}.operator"),
                        format!(
                            "{:?} with {} value(s); matchFields takes In or NotIn with exactly one value",
                            e.operator,
                            values.len()
                        ),
                    );
                }
            }
        }
    }
    for (i, term) in spec.pod_anti_affinity.iter().enumerate() {
        let field = format!("spec.podAntiAffinity[{i}]");
        if !is_qualified_name(&term.topology_key) {
            err(
                format!("{field}.topologyKey"),
                format!("{:?} is not a label key", term.topology_key),
            );
        }
        check_label_selector(
            &format!("{field}.labelSelector"),
            term.label_selector.as_ref(),
            err,
        );
        for (n, namespace) in term.namespaces.iter().flatten().enumerate() {
            if !is_dns_label(namespace) {
                err(
                    format!("{field}.namespaces[{n}]"),
                    format!("{namespace:?} is not a namespace name"),
                );
            }
        }
        for (list, name) in [
            (&term.match_label_keys, "matchLabelKeys"),
            (&term.mismatch_label_keys, "mismatchLabelKeys"),
        ] {
            check_label_keys(
                &format!("{field}.{name}"),
                list.as_deref().unwrap_or_default(),
                err,
            );
        }
    }
    for (i, c) in spec.topology_spread_constraints.iter().enumerate() {
        let field = format!("spec.topologySpreadConstraints[{i}]");
        if c.max_skew < 1 {
            err(
                format!("{field}.maxSkew"),
                format!("{}; it must be at least 1", c.max_skew),
            );
        }
        if !is_qualified_name(&c.topology_key) {
            err(
                format!("{field}.topologyKey"),
                format!("{:?} is not a label key", c.topology_key),
            );
        }
        match c.when_unsatisfiable.as_str() {
            "DoNotSchedule" | "ScheduleAnyway" => {}
            other => err(
                format!("{field}.whenUnsatisfiable"),
                format!("{other:?}; it must be DoNotSchedule or ScheduleAnyway"),
            ),
        }
        if let Some(min) = c.min_domains {
            if min < 1 {
                err(
                    format!("{field}.minDomains"),
                    format!("{min}; it must be at least 1"),
                );
            } else if c.when_unsatisfiable != "DoNotSchedule" {
                err(
                    format!("{field}.minDomains"),
                    format!("{min}: only whenUnsatisfiable DoNotSchedule takes minDomains"),
                );
            }
        }
        for (policy, name) in [
            (&c.node_affinity_policy, "nodeAffinityPolicy"),
            (&c.node_taints_policy, "nodeTaintsPolicy"),
        ] {
            if let Some(p) = policy
                && !matches!(p.as_str(), "Honor" | "Ignore")
            {
                err(
                    format!("{field}.{name}"),
                    format!("{p:?}; it must be Honor or Ignore"),
                );
            }
        }
        check_label_selector(&format!("{field}.labelSelector"), c.label_selector.as_ref(), err);
        check_label_keys(
            &format!("{field}.matchLabelKeys"),
            c.match_label_keys.as_deref().unwrap_or_default(),
            err,
        );
    }
    for (i, port) in spec.host_ports.iter().enumerate() {
        let field = format!("spec.hostPorts[{i}]");
        if !(1..=65535).contains(&port.port) {
            err(
                format!("{field}.port"),
                format!("{}; it must be 1..65535", port.port),
            );
        }
        if let Some(protocol) = &port.protocol
            && !matches!(protocol.as_str(), "TCP" | "UDP" | "SCTP")
        {
            err(
                format!("{field}.protocol"),
                format!("{protocol:?}; it must be TCP, UDP or SCTP"),
            );
        }
        if let Some(ip) = port.host_ip.as_deref().filter(|ip| !ip.is_empty())
            && ip.parse::<std::net::IpAddr>().is_err()
        {
            err(format!("{field}.hostIP"), format!("{ip:?} is not an IP address"));
        }
    }
}

/// A node selector requirement's operator and values, as the API server checks them.
fn check_node_operator(field: &str, operator: &str, values: &[String], err: &mut impl FnMut(String, String)) {
    match operator {
        "In" | "NotIn" if values.is_empty() => err(
            format!("{field}.values"),
            format!("empty: operator {operator} needs at least one value"),
        ),
        "Exists" | "DoesNotExist" if !values.is_empty() => err(
            format!("{field}.values"),
            format!("{values:?}: operator {operator} takes no values"),
        ),
        "Gt" | "Lt" if values.len() != 1 || values[0].parse::<i64>().is_err() => err(
            format!("{field}.values"),
            format!("{values:?}: operator {operator} takes exactly one integer"),
        ),
        "In" | "NotIn" | "Exists" | "DoesNotExist" | "Gt" | "Lt" => {
            for (v, value) in values.iter().enumerate() {
                if !is_label_value(value) {
                    err(
                        format!("{field}.values[{v}]"),
                        format!("{value:?} is not a label value"),
                    );
                }
            }
        }
        other => err(
            format!("{field}.operator"),
            format!("{other:?}; it must be In, NotIn, Exists, DoesNotExist, Gt or Lt"),
        ),
    }
}

/// A label selector, as the API server checks it (absent is valid: it selects no pod).
fn check_label_selector(field: &str, selector: Option<&LabelSelector>, err: &mut impl FnMut(String, String)) {
    let Some(selector) = selector else {
        return;
    };
    for (key, value) in selector.match_labels.iter().flatten() {
        let field = format!("{field}.matchLabels[{key:?}]");
        if !is_qualified_name(key) {
            err(field, format!("{key:?} is not a label key"));
        } else if !is_label_value(value) {
            err(field, format!("{value:?} is not a label value"));
        }
    }
    for (i, e) in selector.match_expressions.iter().flatten().enumerate() {
        let field = format!("{field}.matchExpressions[{i}]");
        if !is_qualified_name(&e.key) {
            err(format!("{field}.key"), format!("{:?} is not a label key", e.key));
        }
        let values = e.values.as_deref().unwrap_or_default();
        match e.operator.as_str() {
            "In" | "NotIn" if values.is_empty() => err(
                format!("{field}.values"),
                format!("empty: operator {} needs at least one value", e.operator),
            ),
            "Exists" | "DoesNotExist" if !values.is_empty() => err(
                format!("{field}.values"),
                format!("{values:?}: operator {} takes no values", e.operator),
            ),
            "In" | "NotIn" | "Exists" | "DoesNotExist" => {}
            other => err(
                format!("{field}.operator"),
                format!("{other:?}; it must be In, NotIn, Exists or DoesNotExist"),
            ),
        }
    }
}

fn check_label_keys(field: &str, keys: &[String], err: &mut impl FnMut(String, String)) {
    for (i, key) in keys.iter().enumerate() {
        if !is_qualified_name(key) {
            err(format!("{field}[{i}]"), format!("{key:?} is not a label key"));
        }
    }
}

/// The reason of the condition reporting a shape that asks for a constraint the count does not
/// model (docs/fits-and-reservations.md, "What the count leaves out").
pub const UNSUPPORTED_FIELD_REASON: &str = "UnsupportedWorkloadShapeField";

/// Fields a valid shape may state that the count does not model: such a shape is reported, not
/// counted, rather than over-counted. Empty when every stated constraint is counted.
pub fn unsupported(shape: &WorkloadShape) -> Vec<ShapeError> {
    let name = shape_name(shape);
    let mut errors = Vec::new();
    for (i, term) in shape.spec.pod_anti_affinity.iter().enumerate() {
        if term.namespace_selector.is_some() {
            errors.push(ShapeError {
                shape: name.to_owned(),
                field: format!("spec.podAntiAffinity[{i}].namespaceSelector"),
                message: "not supported: the agent does not read namespaces' labels; list the namespaces in \
                          `namespaces` instead"
                    .into(),
            });
        }
    }
    errors
}

fn is_dns_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// A Kubernetes qualified name: an optional DNS-subdomain prefix and '/', then up to 63
/// alphanumerics, '-', '_' or '.', starting and ending alphanumeric.
fn is_qualified_name(name: &str) -> bool {
    let (prefix, local) = match name.split_once('/') {
        Some((prefix, local)) => (Some(prefix), local),
        None => (None, name),
    };
    let prefix_ok = prefix.is_none_or(|p| p.len() <= 253 && p.split('.').all(is_dns_label));
    prefix_ok && !local.is_empty() && local.len() <= 63 && is_label_value(local)
}

/// A label value: empty, or up to 63 alphanumerics, '-', '_' or '.', starting and ending
/// alphanumeric.
fn is_label_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
            && value.as_bytes()[0].is_ascii_alphanumeric()
            && value.as_bytes()[value.len() - 1].is_ascii_alphanumeric())
}

impl WorkloadShape {
    /// A cluster-scoped shape named `name`.
    pub fn named(name: &str, spec: WorkloadShapeSpec) -> Self {
        Self {
            metadata: crate::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec,
        }
    }
}

/// A shape named `name` with the spec `yaml`, for tests.
#[cfg(test)]
#[allow(clippy::unwrap_used)]
fn shape(name: &str, yaml: &str) -> WorkloadShape {
    WorkloadShape::named(name, serde_norway::from_str(yaml).unwrap())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn fields(shape: &WorkloadShape) -> Vec<String> {
        validate(shape).into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn the_design_example_is_valid_and_scale_defaults_to_1() {
        let s = shape(
            "a100-x1",
            r#"
requests: {cpu: "8", memory: 64Gi, nvidia.com/gpu: "1"}
nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}
tolerations:
- {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
podOverhead: {cpu: 250m}
"#,
        );
        assert_eq!(validate(&s), vec![]);
        assert_eq!(s.spec.scale, 1);
        assert_eq!(s.spec.requests["memory"].0, "64Gi");
    }

    #[test]
    fn a_shape_without_requests_is_a_valid_pods_only_shape() {
        assert_eq!(validate(&shape("pods-only", "{}")), vec![]);
    }

    #[test]
    fn errors_name_the_field_and_the_value() {
        let s = shape(
            "bad",
            r#"
requests: {cpu: "1.5 cores", memory: "-1Gi", pods: "1", "Not A Name": "1"}
podOverhead: {memory: 12Q}
scale: 0
"#,
        );
        let errors = validate(&s);
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            fields(&s),
            [
                "spec.requests[\"Not A Name\"]",
                "spec.requests[\"cpu\"]",
                "spec.requests[\"memory\"]",
                "spec.requests[\"pods\"]",
                "spec.podOverhead[\"memory\"]",
                "spec.scale",
            ],
            "{text:#?}"
        );
        assert!(text[1].contains("\"1.5 cores\" is not a quantity"), "{}", text[1]);
        assert!(text[2].contains("\"-1Gi\" is negative"), "{}", text[2]);
        assert!(text[4].contains("\"12Q\""), "{}", text[4]);
        assert_eq!(
            text[5],
            "WorkloadShape \"bad\": field spec.scale: 0; it must be at least 1"
        );
    }

    #[test]
    fn names_selectors_and_tolerations_are_checked() {
        let s = shape(
            "Big_GPU",
            r#"
nodeSelector: {"pool": "gpu pool"}
tolerations:
- {operator: Equal, value: x}
- {key: a, operator: Exists, value: x}
- {key: a, operator: Above}
- {key: a, effect: NoRun}
"#,
        );
        assert_eq!(
            fields(&s),
            [
                "metadata.name",
                "spec.nodeSelector[\"pool\"]",
                "spec.tolerations[0].key",
                "spec.tolerations[1].value",
                "spec.tolerations[2].operator",
                "spec.tolerations[3].effect",
            ]
        );
        let ok = shape(
            "any-taint",
            "tolerations: [{operator: Exists}]\nnodeSelector: {kubernetes.io/arch: amd64}",
        );
        assert_eq!(validate(&ok), vec![]);
    }

    #[test]
    fn placement_constraints_read_as_a_pods_and_are_valid() {
        let s = shape(
            "web-spread",
            r#"
requests: {cpu: 500m}
namespace: shop
podLabels: {app: web}
nodeAffinity:
  nodeSelectorTerms:
  - matchExpressions:
    - {key: topology.kubernetes.io/zone, operator: In, values: [a, b]}
    - {key: cores, operator: Gt, values: ["8"]}
  - matchFields:
    - {key: metadata.name, operator: In, values: [n1]}
podAntiAffinity:
- labelSelector: {matchLabels: {app: web}}
  topologyKey: kubernetes.io/hostname
topologySpreadConstraints:
- {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule,
   minDomains: 3, nodeAffinityPolicy: Ignore, nodeTaintsPolicy: Honor,
   labelSelector: {matchLabels: {app: web}}, matchLabelKeys: [pod-template-hash]}
hostPorts:
- {port: 8080}
- {port: 53, protocol: UDP, hostIP: 10.0.0.1}
"#,
        );
        assert_eq!(validate(&s), vec![]);
        assert_eq!(unsupported(&s), vec![]);
        assert_eq!(s.spec.namespace.as_deref(), Some("shop"));
        assert_eq!(s.spec.host_ports[1].host_ip.as_deref(), Some("10.0.0.1"));
        let terms = &s.spec.node_affinity.as_ref().unwrap().node_selector_terms;
        assert_eq!(terms.len(), 2);
        assert_eq!(s.spec.topology_spread_constraints[0].min_domains, Some(3));
    }

    #[test]
    fn placement_errors_name_the_field_and_the_value() {
        let s = shape(
            "bad-placement",
            r#"
podLabels: {app: "a b"}
nodeAffinity:
  nodeSelectorTerms:
  - matchExpressions:
    - {key: zone, operator: Near, values: [a]}
    - {key: zone, operator: In}
    - {key: cores, operator: Gt, values: ["eight"]}
    matchFields:
    - {key: metadata.labels, operator: In, values: [x]}
podAntiAffinity:
- {topologyKey: "", labelSelector: {matchExpressions: [{key: app, operator: Exists, values: [x]}]}}
topologySpreadConstraints:
- {maxSkew: 0, topologyKey: zone, whenUnsatisfiable: Maybe, nodeTaintsPolicy: Always}
- {maxSkew: 1, topologyKey: zone, whenUnsatisfiable: ScheduleAnyway, minDomains: 2}
hostPorts:
- {port: 70000, protocol: HTTP, hostIP: localhost}
"#,
        );
        let errors = validate(&s);
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            fields(&s),
            [
                "spec.namespace",
                "spec.podLabels[\"app\"]",
                "spec.nodeAffinity.nodeSelectorTerms[0].matchExpressions[0].operator",
                "spec.nodeAffinity.nodeSelectorTerms[0].matchExpressions[1].values",
                "spec.nodeAffinity.nodeSelectorTerms[0].matchExpressions[2].values",
                "spec.nodeAffinity.nodeSelectorTerms[0].matchFields[0].key",
                "spec.podAntiAffinity[0].topologyKey",
                "spec.podAntiAffinity[0].labelSelector.matchExpressions[0].values",
                "spec.topologySpreadConstraints[0].maxSkew",
                "spec.topologySpreadConstraints[0].whenUnsatisfiable",
                "spec.topologySpreadConstraints[0].nodeTaintsPolicy",
                "spec.topologySpreadConstraints[1].minDomains",
                "spec.hostPorts[0].port",
                "spec.hostPorts[0].protocol",
                "spec.hostPorts[0].hostIP",
            ],
            "{text:#?}"
        );
        assert!(text[0].contains("missing"), "{}", text[0]);
        assert!(text[2].contains("\"Near\""), "{}", text[2]);
        assert!(text[4].contains("exactly one integer"), "{}", text[4]);
        assert!(text[5].contains("\"metadata.labels\""), "{}", text[5]);
        assert!(text[12].contains("70000"), "{}", text[12]);
        assert!(text[14].contains("\"localhost\""), "{}", text[14]);
        let empty = shape("no-terms", "nodeAffinity: {nodeSelectorTerms: []}");
        assert_eq!(fields(&empty), ["spec.nodeAffinity.nodeSelectorTerms"]);
    }

    #[test]
    fn a_namespace_selector_is_valid_but_unsupported() {
        let s = shape(
            "cross-namespace",
            "namespace: shop\npodAntiAffinity:\n- {topologyKey: zone, namespaceSelector: {}}\n",
        );
        assert_eq!(validate(&s), vec![]);
        let unsupported = unsupported(&s);
        assert_eq!(unsupported.len(), 1);
        assert_eq!(unsupported[0].field, "spec.podAntiAffinity[0].namespaceSelector");
        assert!(unsupported[0].to_string().contains("\"cross-namespace\""));
    }

    #[test]
    fn encoding_matches_the_design_table() {
        assert_eq!(encode_fits(0, 1), -100);
        assert_eq!(encode_fits(4, 1), -96);
        assert_eq!(encode_fits(199, 1), 99);
        assert_eq!(encode_fits(200, 1), 100);
        assert_eq!(encode_fits(u64::MAX, 1), 100);
        assert_eq!(encode_fits(2999, 10), 100);
        assert_eq!(encode_fits(1999, 10), 99);
        assert_eq!(
            encode_fits(9, 10),
            -100,
            "floor: 9 replicas at scale 10 are 0 points"
        );
        assert_eq!(encode_fits(7, 0), -93, "scale below 1 counts as 1");
        assert_eq!(
            decode_fits(-96, 1),
            DecodedFits {
                at_least: 4,
                saturated: false
            }
        );
        assert_eq!(
            decode_fits(100, 5),
            DecodedFits {
                at_least: 1000,
                saturated: true
            }
        );
        assert_eq!(decode_fits(-300, 1).at_least, 0, "clamped");
        assert_eq!(fits_score_name("a100-x1"), "fits.a100-x1");
    }

    proptest::proptest! {
        #[test]
        fn encode_decode_is_exact_below_saturation(
            fits in 0u64..2_000_000,
            scale in 1i32..=10_000,
            k in 0u64..2_000_000,
            multiple in 0u64..200,
        ) {
            let value = encode_fits(fits, scale);
            let decoded = decode_fits(value, scale);
            let scale = u64::try_from(scale).unwrap();
            if fits < FITS_EXACT_BELOW * scale {
                proptest::prop_assert!(!decoded.saturated);
                proptest::prop_assert_eq!(decoded.at_least, fits / scale * scale);
                proptest::prop_assert_eq!(encode_fits(decoded.at_least, scale as i32), value);
            } else {
                proptest::prop_assert!(decoded.saturated);
                proptest::prop_assert_eq!(decoded.at_least, FITS_EXACT_BELOW * scale);
            }
            // A threshold of k replicas read as `value ≥ ceil(k / scale) − 100` never admits fewer,
            // and is exact when scale divides k (below saturation).
            let threshold = i64::try_from(k.div_ceil(scale)).unwrap() - 100;
            let admitted = i64::from(value) >= threshold;
            if admitted {
                proptest::prop_assert!(fits >= k);
            }
            let k = multiple * scale;
            if !decoded.saturated {
                let threshold = i64::try_from(multiple).unwrap() - 100;
                proptest::prop_assert_eq!(i64::from(value) >= threshold, fits >= k);
            }
        }

        #[test]
        fn every_value_lies_in_minus_100_to_100(fits: u64, scale: i32) {
            proptest::prop_assert!((-100..=100).contains(&encode_fits(fits, scale)));
        }

        #[test]
        fn scale_1_round_trips_every_count_below_200(fits in 0u64..200) {
            proptest::prop_assert_eq!(decode_fits(encode_fits(fits, 1), 1).at_least, fits);
        }
    }

    fn named(names: &[&str]) -> Vec<WorkloadShape> {
        names.iter().map(|n| shape(n, "{}")).collect()
    }

    #[test]
    fn selection_keeps_the_first_32_by_name_and_says_which_are_left_out() {
        let mut names: Vec<String> = (0..34).rev().map(|i| format!("s{i:02}")).collect();
        names.push("s05".into());
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        let shapes = named(&refs);
        let sel = select_shapes(&shapes);
        let used: Vec<&str> = sel.used.iter().map(|s| shape_name(s)).collect();
        assert_eq!(used.len(), 32);
        assert_eq!((used[0], used[31]), ("s00", "s31"));
        let left: Vec<&str> = sel.left_out.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(left, ["s05", "s32", "s33"]);
        let message = sel.message().unwrap();
        assert!(
            message.starts_with("3 WorkloadShapes are not scored: \"s05\" (a shape of the same name comes first), \"s32\" (beyond the first 32 by name)"),
            "{message}"
        );
        assert_eq!(select_shapes(&named(&["b", "a"])).message(), None);
    }
}
