// Pins the Prometheus Operator's module for its CRDs only (PodMonitor, PrometheusRule): the chart's
// monitoring objects are validated against them by a real API server (tests/tests/control_plane_helm.rs).
// Nothing here is built.
module github.com/ocm-score/ocm-score/tests/prometheus-operator

go 1.25.0

require github.com/prometheus-operator/prometheus-operator v0.85.0
