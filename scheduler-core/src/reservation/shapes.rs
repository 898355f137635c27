//! What one replica of a shape takes, for deducting a reservation of one shape from the `fits`
//! of another (the "Deduct" step in [`crate::reservation`]).

use ocm_score_api::crd::workload_shape::{self, WorkloadShape};
use ocm_score_api::quantity::approximate_f64;
use std::collections::BTreeMap;

/// Per-replica requests (requests plus pod overhead) of the valid WorkloadShapes, by name.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ShapeCatalog {
    requests: BTreeMap<String, BTreeMap<String, f64>>,
    /// `spec.scale` of each: replicas per `fits` score point.
    scales: BTreeMap<String, i32>,
}

static EMPTY: ShapeCatalog = ShapeCatalog {
    requests: BTreeMap::new(),
    scales: BTreeMap::new(),
};

impl ShapeCatalog {
    /// No shapes known: every cross-shape deduction counts one for one.
    pub fn empty() -> &'static ShapeCatalog {
        &EMPTY
    }

    /// The catalog of `shapes`; a shape the agent would not score (see
    /// [`workload_shape::validate`]) is left out, as if unknown.
    pub fn new(shapes: &[WorkloadShape]) -> ShapeCatalog {
        let mut requests = BTreeMap::new();
        let mut scales = BTreeMap::new();
        for shape in shapes {
            let Some(name) = shape.metadata.name.as_deref() else {
                continue;
            };
            if !workload_shape::validate(shape).is_empty() {
                continue;
            }
            let mut per_replica: BTreeMap<String, f64> = BTreeMap::new();
            for (resource, quantity) in shape.spec.requests.iter().chain(&shape.spec.pod_overhead) {
                // Validation parsed every quantity already.
                *per_replica.entry(resource.clone()).or_default() +=
                    approximate_f64(&quantity.0).unwrap_or(0.0);
            }
            requests.insert(name.to_owned(), per_replica);
            scales.insert(name.to_owned(), shape.spec.scale.max(1));
        }
        ShapeCatalog { requests, scales }
    }

    /// The valid shapes' names.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.requests.keys().map(String::as_str)
    }

    /// Replicas per `fits` score point of `shape`; 1 for a shape the catalog does not know.
    pub fn scale(&self, shape: &str) -> i32 {
        self.scales.get(shape).copied().unwrap_or(1)
    }

    /// How many replicas of `wanted` one replica of `reserved` may take: 1 for the same shape;
    /// otherwise `max_r(reserved[r] / wanted[r])` over the resources `wanted` requests (the
    /// "Deduct" step in [`crate::reservation`]), and 1 when either shape is unknown or `wanted`
    /// requests nothing (it is bounded by
    /// pod slots, and each replica takes one).
    pub fn ratio(&self, reserved: &str, wanted: &str) -> f64 {
        if reserved == wanted {
            return 1.0;
        }
        let (Some(r), Some(w)) = (self.requests.get(reserved), self.requests.get(wanted)) else {
            return 1.0;
        };
        let mut ratio: Option<f64> = None;
        for (resource, need) in w.iter().filter(|(_, v)| **v > 0.0) {
            let take = r.get(resource).copied().unwrap_or(0.0) / need;
            ratio = Some(ratio.map_or(take, |x: f64| x.max(take)));
        }
        ratio.unwrap_or(1.0)
    }
}

/// Replicas of the wanted shape that `replicas` of a reserved shape take: `ceil(replicas ×
/// ratio)`, with a tolerance for the float error of the ratio (so 3 × 0.5/0.25 is 6, not 7).
pub(crate) fn deduction(replicas: u32, ratio: f64) -> u64 {
    if ratio == 1.0 {
        return u64::from(replicas);
    }
    let x = f64::from(replicas) * ratio;
    if x.is_finite() && x > 0.0 {
        (x - 1e-9).ceil().max(0.0) as u64
    } else if x > 0.0 {
        u64::MAX
    } else {
        0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;
    use ocm_score_api::WorkloadShape;

    /// A shape named `name` with the spec `yaml`.
    pub(crate) fn shape(name: &str, yaml: &str) -> WorkloadShape {
        WorkloadShape::named(name, serde_norway::from_str(yaml).unwrap())
    }

    fn catalog() -> ShapeCatalog {
        ShapeCatalog::new(&[
            shape("gpu-x1", r#"requests: {cpu: "4", nvidia.com/gpu: "1"}"#),
            shape("gpu-x2", r#"requests: {cpu: "6", nvidia.com/gpu: "2"}"#),
            shape("small", r#"{requests: {cpu: 500m}, podOverhead: {cpu: 500m}}"#),
            shape("pods-only", "{}"),
            shape("broken", r#"requests: {cpu: "lots"}"#),
        ])
    }

    #[test]
    fn the_same_shape_counts_one_for_one() {
        assert_eq!(catalog().ratio("gpu-x1", "gpu-x1"), 1.0);
        assert_eq!(deduction(4, 1.0), 4);
    }

    #[test]
    fn another_shape_counts_by_its_most_demanding_resource() {
        let c = catalog();
        // One 2-GPU replica takes two 1-GPU replicas' GPUs (and 1.5 of their CPUs).
        assert_eq!(c.ratio("gpu-x2", "gpu-x1"), 2.0);
        assert_eq!(deduction(3, c.ratio("gpu-x2", "gpu-x1")), 6);
        // One 1-GPU replica: half a 2-GPU replica's GPUs, 4/6 of its CPUs: ceil(3 × 2/3) = 2.
        assert_eq!(deduction(3, c.ratio("gpu-x1", "gpu-x2")), 2);
        // The overhead counts: small takes 1 CPU of gpu-x1's 4, so 4 small take one gpu-x1.
        assert_eq!(c.ratio("small", "gpu-x1"), 0.25);
        assert_eq!(deduction(4, 0.25), 1);
        assert_eq!(deduction(5, 0.25), 2);
        assert_eq!(deduction(0, 0.25), 0);
    }

    #[test]
    fn unknown_invalid_and_pods_only_shapes_count_one_for_one() {
        let c = catalog();
        assert_eq!(c.ratio("nowhere", "gpu-x1"), 1.0);
        assert_eq!(c.ratio("gpu-x1", "broken"), 1.0);
        assert_eq!(c.ratio("gpu-x2", "pods-only"), 1.0);
        // A shape requesting nothing the wanted one needs takes none of it.
        assert_eq!(c.ratio("pods-only", "gpu-x1"), 0.0);
        assert_eq!(deduction(7, 0.0), 0);
        assert_eq!(ShapeCatalog::empty().ratio("a", "b"), 1.0);
    }
}
