//! The kinds ocm-score owns, declared with kube's `CustomResource` derive so their CRDs are
//! generated from the types.

pub mod tiered_placement;
pub mod workload_shape;
