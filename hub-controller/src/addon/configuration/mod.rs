//! An add-on's configuration as OCM's add-on contract defines it: which AddOnDeploymentConfig applies
//! and the `status.configReferences` recording it ([`references`]), that config turned into the
//! agent's settings ([`deployment_config`]), the spec hashes in the ClusterManagementAddOn's status
//! ([`cma_hashes`]) and, under OCM's addon-manager, whether its rollout lets a cluster's agent
//! change yet ([`rollout`]).

pub mod cma_hashes;
pub mod deployment_config;
pub mod references;
pub mod rollout;
