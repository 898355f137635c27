//! Configuration of `ocm-score-hub thanos-scorer`: a YAML file for the score list and anything else,
//! flags (each also an environment variable) that override the file, and validation that runs
//! before anything starts, so a bad value stops the process with exit code 2 and the field named.
//!
//! - [`flags`]: the command line ([`ThanosScorerArgs`]);
//! - [`file`]: the YAML file's schema ([`ConfigFile`]);
//! - [`resolve`]: flags over file, defaults, and the rules across settings, giving a [`Config`];
//! - [`checks`]: the checks of single values (durations, files, names, URLs in messages).
//!
//! This module holds what the rest of the scorer reads: the validated [`Config`] and its parts.

mod args;
mod checks;
mod file;
mod resolve;

pub use args::ThanosScorerArgs;
pub use checks::checked_duration;
pub use file::{ConfigFile, Direction, NormalizationKind, QueryFile, ScoreFile};

use super::mapping::ClusterMapping;
use super::params::{PartialPolicy, ThanosParams};
use ocm_score_shell::args::{LeaderDefaults, LeaderElection};
use std::{fmt, net::SocketAddr, path::PathBuf, time::Duration};

/// The AddOnPlacementScore written by default. Distinct from the agent's `resource-usage-score`, so
/// the hub scorer and an agent never overwrite each other.
pub const DEFAULT_PLACEMENT_SCORE_NAME: &str = "thanos-score";
/// The series label naming the cluster by default (the common Thanos external label).
pub const DEFAULT_CLUSTER_LABEL: &str = "cluster";
/// The Lease that decides which replica writes, and the other leader election defaults.
pub const LEADER_DEFAULTS: LeaderDefaults = LeaderDefaults {
    lease_name: "ocm-score-thanos-scorer",
    namespace: None,
    identity_fallback: "thanos-scorer",
};

const DEFAULT_INTERVAL: Duration = Duration::from_secs(60);
/// By default every round renews `validUntil`, as the add-on's contract says.
const DEFAULT_RENEW_EVERY: u32 = 1;
const MAX_RENEW_EVERY: u32 = 60;
const DEFAULT_QUERY_TIMEOUT: Duration = Duration::from_secs(30);
const DEFAULT_QUERY_CONCURRENCY: usize = 4;
const DEFAULT_QUERY_RETRIES: u32 = 2;
const MAX_QUERY_RETRIES: u32 = 10;
const DEFAULT_WRITE_CONCURRENCY: usize = 16;

/// How query values become -100..100.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Normalization {
    Fleet,
    Fixed { min: f64, max: f64 },
}

/// One score: a fleet-wide PromQL expression and how its values become a score.
#[derive(Debug, Clone, PartialEq)]
pub struct ScoreSpec {
    pub name: String,
    pub query: String,
    pub direction: Direction,
    pub normalization: Normalization,
}

/// Where and how to query. Holds paths only: secrets are read when the client is built.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryConfig {
    pub url: reqwest::Url,
    pub bearer_token_file: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
    pub client_cert_file: Option<PathBuf>,
    pub client_key_file: Option<PathBuf>,
    pub tls_server_name: Option<String>,
    pub timeout: Duration,
    pub concurrency: usize,
    pub retries: u32,
    /// What to do with an answer that carries warnings (a Thanos partial response).
    pub partial: PartialPolicy,
    /// Thanos's own query parameters.
    pub thanos: ThanosParams,
}

/// Validated leader election settings (the process shell's).
pub type LeaderElectionConfig = LeaderElection;

/// The validated configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub query: QueryConfig,
    pub cluster_label: String,
    pub cluster_mapping: ClusterMapping,
    pub placement_score_name: String,
    pub scores: Vec<ScoreSpec>,
    pub interval: Duration,
    pub validity: Duration,
    pub renew_before: Duration,
    pub write_concurrency: usize,
    pub kubeconfig: Option<PathBuf>,
    pub metrics_bind_address: SocketAddr,
    /// `None` when leader election is off.
    pub leader_election: Option<LeaderElectionConfig>,
}

/// A configuration value that cannot be used, with the field it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    #[error("{field}: {value:?} {problem}")]
    Invalid {
        field: String,
        value: String,
        problem: String,
    },
    #[error("{field} is required ({hint})")]
    Missing { field: String, hint: String },
    #[error("config file {path}: {message}")]
    File { path: String, message: String },
}

impl ConfigError {
    fn invalid(field: impl Into<String>, value: impl fmt::Display, problem: impl Into<String>) -> Self {
        Self::Invalid {
            field: field.into(),
            value: value.to_string(),
            problem: problem.into(),
        }
    }

    /// The setting the error is about (the file itself for a file that does not parse).
    pub fn field(&self) -> &str {
        match self {
            Self::Invalid { field, .. } | Self::Missing { field, .. } => field,
            Self::File { .. } => "--config",
        }
    }
}
