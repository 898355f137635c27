//! The one harness of the workspace-level tests: what the agent's, the hub's and these tests share
//! beyond the real control plane (which is `ocm_score_control_plane`, `tests/control-plane/`).

pub mod argocd;
pub mod go_module;
pub mod golden;
pub mod ocm_bench;
pub mod support;
pub mod thanos;
pub mod thanos_scorer;
pub mod tiering;
