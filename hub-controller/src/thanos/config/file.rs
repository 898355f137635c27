//! The YAML configuration file (`--config`). Unknown keys are rejected so a typo cannot silently
//! fall back to a default; values are checked when [`super::resolve`] combines file and flags.

use super::ConfigError;
use ocm_score_shell::args::LeaderElectionFile;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The configuration file. Unknown keys are rejected so a typo cannot silently fall back to a default.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ConfigFile {
    #[serde(default)]
    pub query: QueryFile,
    pub cluster_label: Option<String>,
    pub cluster_mapping: Option<String>,
    pub placement_score_name: Option<String>,
    #[serde(default)]
    pub scores: Vec<ScoreFile>,
    pub interval: Option<String>,
    pub validity: Option<String>,
    pub renew_before: Option<String>,
    pub renew_every: Option<u32>,
    pub write_concurrency: Option<usize>,
    pub kubeconfig: Option<PathBuf>,
    pub metrics_bind_address: Option<String>,
    #[serde(default)]
    pub leader_election: LeaderElectionFile,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct QueryFile {
    pub url: Option<String>,
    pub bearer_token_file: Option<PathBuf>,
    pub ca_file: Option<PathBuf>,
    pub client_cert_file: Option<PathBuf>,
    pub client_key_file: Option<PathBuf>,
    pub tls_server_name: Option<String>,
    pub timeout: Option<String>,
    pub concurrency: Option<usize>,
    pub retries: Option<u32>,
    /// Accept answers that carry warnings (Thanos partial responses). Off by default: a partial
    /// answer shifts the fleet minimum and maximum and would publish wrong scores.
    pub allow_partial_response: Option<bool>,
    /// Thanos `partial_response` (default true).
    pub partial_response: Option<bool>,
    /// Thanos `dedup` (default true).
    pub dedup: Option<bool>,
    /// Thanos `max_source_resolution`: `auto` or a duration (default: not sent).
    pub max_source_resolution: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ScoreFile {
    pub name: String,
    pub query: String,
    #[serde(default)]
    pub direction: Direction,
    #[serde(default)]
    pub normalization: NormalizationKind,
    pub min: Option<f64>,
    pub max: Option<f64>,
}

/// Whether a larger query value makes a cluster more or less attractive.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Direction {
    #[default]
    HigherIsBetter,
    LowerIsBetter,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum NormalizationKind {
    /// Bounds are the smallest and largest value in the fleet this round.
    #[default]
    Fleet,
    /// Bounds are fixed by `min` and `max`.
    Fixed,
}

pub(super) fn read_file(path: &Path) -> Result<ConfigFile, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
        path: path.display().to_string(),
        message: format!("cannot be read: {e}"),
    })?;
    serde_norway::from_str(&text).map_err(|e| ConfigError::File {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_and_bad_enums_are_rejected() {
        for yaml in [
            "query: {url: x}\nintervall: 5s\n",
            "scores: [{name: a, query: x, direction: sideways}]\n",
            "query: {url: x, tiemout: 5s}\n",
        ] {
            assert!(serde_norway::from_str::<ConfigFile>(yaml).is_err(), "{yaml}");
        }
    }
}
