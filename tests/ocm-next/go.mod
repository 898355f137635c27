// Pins the OCM API release after the one the control plane runs (tests/control-plane/go.mod), for
// its CRDs only: our models are checked against both (tests/tests/api_types.rs). Nothing here is
// built. The module proxy serves open-cluster-management.io/api v1.3.0 but not ocm v1.3.x.
module github.com/ocm-score/ocm-score/tests/ocm-next

go 1.25.0

require open-cluster-management.io/api v1.3.0
