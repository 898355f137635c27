//! The shapes a fits index counts: WorkloadShapes selected, validated and compiled into per-replica
//! needs over the tracked resources, and the problems of those that cannot be scored.

use super::constraints::{Constraints, PodSelector};
use crate::accounting::objects::SlimTaint;
use crate::accounting::quantity::{QuantityError, parse_quantity};
use crate::accounting::resources::{BUILT_IN, MAX_RESOURCES, ResourceSet};
use k8s_openapi::api::core::v1::Toleration;
use ocm_score_api::WorkloadShape;
use ocm_score_api::crd::workload_shape::{
    self, MAX_SHAPES, ShapeError, TOO_MANY_SHAPES_REASON, UNSUPPORTED_FIELD_REASON, select_shapes,
};
use std::collections::BTreeSet;

/// A shape that is not scored, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ShapeProblem {
    #[error("WorkloadShape {shape:?} is not scored: {message}")]
    LeftOut { shape: String, message: String },
    #[error("{0}; it is not scored")]
    Invalid(ShapeError),
    /// Valid, but asks for something the count does not model: counting it would over-count.
    #[error("{0}; it is not scored")]
    Unsupported(ShapeError),
    #[error("WorkloadShape {shape:?} is not scored: field {field}: {source}")]
    Quantity {
        shape: String,
        field: String,
        #[source]
        source: QuantityError,
    },
    #[error(
        "WorkloadShape {shape:?} is not scored: it requests {resource:?}, beyond the {MAX_RESOURCES} \
         resources the agent counts at once (shapes earlier by name requested the others)"
    )]
    TooManyResources { shape: String, resource: String },
}

impl ShapeProblem {
    /// The shape the problem is about.
    pub fn shape(&self) -> &str {
        match self {
            ShapeProblem::LeftOut { shape, .. }
            | ShapeProblem::Quantity { shape, .. }
            | ShapeProblem::TooManyResources { shape, .. } => shape,
            ShapeProblem::Invalid(e) | ShapeProblem::Unsupported(e) => &e.shape,
        }
    }

    /// The condition reason to report it with.
    pub fn reason(&self) -> &'static str {
        match self {
            ShapeProblem::LeftOut { .. } => TOO_MANY_SHAPES_REASON,
            ShapeProblem::Unsupported(_) => UNSUPPORTED_FIELD_REASON,
            _ => "InvalidWorkloadShape",
        }
    }
}

/// A shape ready for counting.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Shape {
    pub(super) name: String,
    pub(super) scale: i32,
    /// `(resource index, amount per replica)`, amounts > 0 (requests plus pod overhead).
    pub(super) needs: Vec<(usize, i64)>,
    pub(super) node_selector: Vec<(String, String)>,
    pub(super) tolerations: Vec<Toleration>,
    pub(super) constraints: Constraints,
}

/// The shapes an index counts, and the resources they need.
#[derive(Clone, Debug, PartialEq)]
pub struct ShapeSet {
    pub(super) resources: ResourceSet,
    pub(super) shapes: Vec<Shape>,
    /// The pod selectors of the shapes' anti-affinity terms and spread constraints: each pod is
    /// matched against them once, when its event arrives.
    pub(super) selectors: Vec<PodSelector>,
    /// Some shape binds host ports: the index keeps the pods' host ports.
    pub(super) tracks_ports: bool,
}

impl ShapeSet {
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.shapes.iter().map(|s| s.name.as_str())
    }

    pub fn len(&self) -> usize {
        self.shapes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.shapes.is_empty()
    }

    /// The resources counted: the built-in ones, then the others the shapes request, by name.
    pub fn resources(&self) -> &ResourceSet {
        &self.resources
    }
}

/// Selects (first [`MAX_SHAPES`] by name), validates and compiles shapes. Every shape that cannot
/// be scored comes back as a problem naming it; the others are counted.
pub fn compile_shapes(shapes: &[WorkloadShape]) -> (ShapeSet, Vec<ShapeProblem>) {
    let selection = select_shapes(shapes);
    let mut problems: Vec<ShapeProblem> = selection
        .left_out
        .iter()
        .map(|(shape, why)| ShapeProblem::LeftOut {
            shape: shape.clone(),
            message: format!("{why} (at most {MAX_SHAPES} WorkloadShapes are scored)"),
        })
        .collect();
    let mut extended: BTreeSet<String> = BTreeSet::new();
    let mut valid = Vec::new();
    for shape in selection.used {
        let errors = workload_shape::validate(shape);
        if let Some(first) = errors.into_iter().next() {
            problems.push(ShapeProblem::Invalid(first));
            continue;
        }
        if let Some(first) = workload_shape::unsupported(shape).into_iter().next() {
            problems.push(ShapeProblem::Unsupported(first));
            continue;
        }
        let name = shape.metadata.name.clone().unwrap_or_default();
        let wanted: BTreeSet<&String> = shape
            .spec
            .requests
            .keys()
            .chain(shape.spec.pod_overhead.keys())
            .filter(|r| !BUILT_IN.contains(&r.as_str()))
            .collect();
        let fresh: Vec<&String> = wanted.into_iter().filter(|r| !extended.contains(*r)).collect();
        if BUILT_IN.len() + extended.len() + fresh.len() > MAX_RESOURCES {
            problems.push(ShapeProblem::TooManyResources {
                shape: name,
                resource: fresh.last().map(|r| (*r).clone()).unwrap_or_default(),
            });
            continue;
        }
        extended.extend(fresh.into_iter().cloned());
        valid.push(shape);
    }
    let resources = match ResourceSet::with_extended(extended) {
        Ok(resources) => resources,
        // Bounded above: every admitted shape kept the set within MAX_RESOURCES.
        Err(_) => ResourceSet::built_in(),
    };
    let mut compiled = Vec::new();
    let mut selectors = Vec::new();
    for shape in valid {
        match compile(shape, &resources, &mut selectors) {
            Ok(s) => compiled.push(s),
            Err(problem) => problems.push(problem),
        }
    }
    (
        ShapeSet {
            resources,
            tracks_ports: compiled.iter().any(|s| !s.constraints.host_ports.is_empty()),
            shapes: compiled,
            selectors,
        },
        problems,
    )
}

fn compile(
    shape: &WorkloadShape,
    resources: &ResourceSet,
    selectors: &mut Vec<PodSelector>,
) -> Result<Shape, ShapeProblem> {
    let name = shape.metadata.name.clone().unwrap_or_default();
    // Selectors are added only when the whole shape compiles.
    let mut own = selectors.clone();
    let constraints = Constraints::compile(&shape.spec, &mut own).map_err(|(field, message)| {
        ShapeProblem::Unsupported(ShapeError {
            shape: name.clone(),
            field,
            message,
        })
    })?;
    let mut amounts = [0i64; MAX_RESOURCES];
    for (list, field) in [
        (&shape.spec.requests, "requests"),
        (&shape.spec.pod_overhead, "podOverhead"),
    ] {
        for (resource, quantity) in list {
            let Some(r) = resources.index_of(resource) else {
                return Err(ShapeProblem::TooManyResources {
                    shape: name,
                    resource: resource.clone(),
                });
            };
            let amount =
                parse_quantity(&quantity.0, resources.unit(r)).map_err(|source| ShapeProblem::Quantity {
                    shape: name.clone(),
                    field: format!("spec.{field}[{resource:?}]"),
                    source,
                })?;
            amounts[r] = amounts[r].saturating_add(amount);
        }
    }
    Ok(Shape {
        scale: shape.spec.scale.max(1),
        needs: (0..resources.len())
            .filter(|&r| amounts[r] > 0)
            .map(|r| (r, amounts[r]))
            .collect(),
        node_selector: shape
            .spec
            .node_selector
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        tolerations: shape.spec.tolerations.clone(),
        constraints,
        name,
    })
    .inspect(|_| *selectors = own)
}

/// Kubernetes' rule: whether `t` tolerates `taint`.
pub(super) fn tolerates(t: &Toleration, taint: &SlimTaint) -> bool {
    let effect = t.effect.as_deref().unwrap_or_default();
    if !effect.is_empty() && effect != taint.effect {
        return false;
    }
    let key = t.key.as_deref().unwrap_or_default();
    let operator = t.operator.as_deref().unwrap_or_default();
    if key.is_empty() {
        // An empty key with Exists tolerates everything; validation refuses it with Equal.
        return operator == "Exists";
    }
    if key != taint.key {
        return false;
    }
    match operator {
        "Exists" => true,
        "" | "Equal" => t.value.as_deref().unwrap_or_default() == taint.value.as_deref().unwrap_or_default(),
        _ => false,
    }
}
