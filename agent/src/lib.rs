//! ocm-score-agent: computes resource scores for the managed cluster it runs on and publishes them
//! to the OCM hub as the AddOnPlacementScore `resource-usage-score`.
//!
//! Layout: `accounting` (pure resource arithmetic), `sources` (where figures come from), `scores`
//! (names and normalization), `shapes` (the WorkloadShapes behind the `fits.<shape>` scores), `publish` + `hub` (writing to the hub), `lease`, `server` + `metrics`
//! (operability), `run` / `once` (the two subcommands), `cli` + `config` (flags, validated up front).
//! The binary is a thin `main` over this library so benchmarks and tests reach the same code.

/// Field manager of every write the agent makes (hub score object, managed-cluster Lease).
pub const FIELD_MANAGER: &str = "ocm-score-agent";

pub mod accounting;
pub mod cli;
pub mod config;
pub mod hub;
pub mod hub_clock;
pub mod lease;
pub mod metrics;
pub mod once;
pub mod publish;
pub mod run;
pub mod scores;
pub mod server;
pub mod shapes;
pub mod sources;
pub mod unschedulable;
