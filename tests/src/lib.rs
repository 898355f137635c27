//! Test support shared by the workspace-level integration and end-to-end tests.

pub mod chart;
pub mod control_plane;
pub mod go_module;
pub mod golden;
pub mod image;
pub mod ocm_bench;
pub mod support;
pub mod thanos;
pub mod tiering;
