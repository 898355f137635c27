//! Test support shared by the workspace-level integration and end-to-end tests.

pub mod crd;
