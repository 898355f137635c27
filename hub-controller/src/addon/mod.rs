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
//! # Layout
//!
//! The modules follow OCM's add-on contract as its addon-framework reads: [`registration`] (the
//! agent's identity, CSR approval, hub RBAC), [`agent`] (what is shipped: command line, manifests,
//! ManifestWork, spec hash), [`configuration`] (AddOnDeploymentConfig, config references, the
//! ClusterManagementAddOn's hashes, rollout), [`lifecycle`] (install strategy, ownership,
//! availability) and [`status`] (the add-on's status and conditions). Decisions are pure
//! functions in those; [`reconcile`] (one controller per kind) and [`run`] do the I/O, [`args`]
//! holds the mode's flags.

pub mod agent;
pub mod args;
pub mod configuration;
pub mod lifecycle;
pub mod metrics;
pub mod names;
pub mod reconcile;
pub mod registration;
pub mod run;
pub mod status;

pub use args::AddonManagerArgs;
pub use run::run;
