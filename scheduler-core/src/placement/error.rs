//! Errors the engine returns instead of a result. Each names the object and the field at fault.
//!
//! These are the cases where OCM's controller fails the whole sync (an invalid cluster-set
//! selector), crashes (a negative `numberOfClusters`), or where the input could never have come
//! from an API server (duplicate names, an unparseable quantity). Placement misconfigurations
//! that OCM reports through the `PlacementMisconfigured` condition are *not* errors: they are part
//! of the normal result (see [`super::status::Status`]).

use thiserror::Error;

#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum PlacementError {
    #[error("{kind} {name:?} appears more than once in the snapshot")]
    DuplicateObject { kind: &'static str, name: String },

    #[error("{kind} {name:?}: field {field}: invalid quantity {value:?}: {reason}")]
    InvalidQuantity {
        kind: &'static str,
        name: String,
        field: String,
        value: String,
        reason: String,
    },

    #[error("Placement {namespace}/{name} is not in the snapshot")]
    PlacementNotFound { namespace: String, name: String },

    #[error(
        "ManagedClusterSet {cluster_set:?}: field spec.clusterSelector.selectorType: selectorType is not right: {value}"
    )]
    InvalidSelectorType { cluster_set: String, value: String },

    #[error("ManagedClusterSet {cluster_set:?}: field spec.clusterSelector.labelSelector: {message}")]
    InvalidClusterSetSelector { cluster_set: String, message: String },

    /// Only reachable with weights or add-on scores outside their CRD ranges; OCM would wrap
    /// the int64 sum and rank the cluster as if it scored the opposite.
    #[error(
        "Placement {namespace}/{name}: the weighted score of cluster {cluster:?} does not fit a 64-bit integer; \
         field spec.prioritizerPolicy.configurations: weights must lie in -10..10 and AddOnPlacementScore values in -100..100"
    )]
    ScoreOverflow {
        namespace: String,
        name: String,
        cluster: String,
    },

    /// OCM panics on this (it slices the sorted cluster list with a negative bound).
    #[error(
        "Placement {namespace}/{name}: field spec.numberOfClusters: {value} is negative; it must be 0 or more"
    )]
    NegativeNumberOfClusters {
        namespace: String,
        name: String,
        value: i32,
    },
}
