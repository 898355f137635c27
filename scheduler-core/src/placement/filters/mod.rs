//! The filter pipeline: `Predicate`, then `TaintToleration`, in that fixed order.

pub mod predicate;
pub mod taints;

use super::snapshot::ClusterId;
use k8s_openapi::jiff::Timestamp;

/// Why a candidate cluster did not pass the filters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FilterReason {
    /// None of the placement's predicates selects the cluster.
    Predicate,
    /// A taint of the cluster (index into `spec.taints`) is not tolerated.
    Taint {
        taint: usize,
        /// A toleration (index into `spec.tolerations`) matched the taint but its
        /// `tolerationSeconds` ran out at this time.
        expired: Option<(usize, Timestamp)>,
    },
}

/// The clusters one filter kept, and the reasons for the ones it dropped.
#[derive(Clone, Debug, Default)]
pub struct FilterOutput {
    pub passed: Vec<ClusterId>,
    pub rejected: Vec<(ClusterId, FilterReason)>,
}
