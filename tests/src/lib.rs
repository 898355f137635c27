//! Test support shared by the workspace-level integration and end-to-end tests.

pub mod apiserver;
pub mod control_plane;
pub mod crd;
pub mod support;

pub use apiserver::{ApiServer, Gvr, Identity, RequestMatch};
