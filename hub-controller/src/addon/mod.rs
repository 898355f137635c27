//! `ocm-score-hub addon-manager`: installs the score agent on every managed cluster as an OCM add-on.
//!
//! It plays the part OCM's addon-framework library plays for an add-on written in Go:
//! registration (`status.registrations`, CSR approval), hub RBAC for the agent, the agent's
//! ManifestWork, configuration from AddOnDeploymentConfig (with the spec hashes OCM's addon-manager
//! reads from the ClusterManagementAddOn's status), status and health — and, when the
//! ClusterManagementAddOn says its lifecycle is `self`, the install strategy OCM's addon-manager
//! would otherwise run. Everything it creates for an add-on is owned by the add-on (`ownership`), so
//! removal is the garbage collector's and never waits for this process.
//!
//! Decisions are pure functions in the concept modules below; `reconcile` and `run` do the I/O.

pub mod agent_cli;
pub mod agent_manifests;
pub mod availability;
pub mod cma_config;
pub mod conditions;
pub mod config;
pub mod config_refs;
pub mod csr;
pub mod deployment_config;
pub mod hub_rbac;
pub mod install;
pub mod metrics;
pub mod names;
pub mod ownership;
pub mod reconcile;
pub mod registration;
pub mod rollout;
pub mod run;
pub mod spec_hash;
pub mod status;
pub mod work;

pub use config::AddonManagerArgs;
pub use run::run;
