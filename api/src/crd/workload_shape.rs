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
use k8s_openapi::api::core::v1::Toleration;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
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
