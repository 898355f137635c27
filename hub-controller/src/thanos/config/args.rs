//! The `thanos-scorer` command line. Each flag overrides the same setting of the file
//! ([`super::file`]); [`super::resolve`] combines them.

use super::MAX_RENEW_EVERY;
use ocm_score_shell::args::{LeaderElectionArgs, ProbeArgs};
use std::path::PathBuf;

/// Flags of the `thanos-scorer` subcommand. Every flag can also be set through its environment
/// variable (`--x` is `OCM_SCORE_X`; the old `OCM_SCORE_THANOS_X` still works, with a warning), and
/// overrides the same setting in `--config`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ThanosScorerArgs {
    /// YAML configuration file (the list of scores lives here; see the `thanos` module docs).
    #[arg(long, env = "OCM_SCORE_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Base URL of the Thanos Query / Prometheus HTTP API, e.g. `https://thanos-query:9090`.
    #[arg(long, env = "OCM_SCORE_QUERY_URL", value_name = "URL")]
    pub query_url: Option<String>,
    /// File holding a bearer token sent to the query API (re-read every round, so it may rotate).
    #[arg(long, env = "OCM_SCORE_BEARER_TOKEN_FILE", value_name = "FILE")]
    pub bearer_token_file: Option<PathBuf>,
    /// PEM bundle of the CA certificates that may sign the query API's certificate.
    #[arg(long, env = "OCM_SCORE_CA_FILE", value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate presented to the query API (needs --client-key-file).
    #[arg(long, env = "OCM_SCORE_CLIENT_CERT_FILE", value_name = "FILE")]
    pub client_cert_file: Option<PathBuf>,
    /// PEM private key of the client certificate.
    #[arg(long, env = "OCM_SCORE_CLIENT_KEY_FILE", value_name = "FILE")]
    pub client_key_file: Option<PathBuf>,
    /// Name to expect in the query API's certificate (and send as SNI) instead of the URL's host.
    #[arg(long, env = "OCM_SCORE_TLS_SERVER_NAME", value_name = "NAME")]
    pub tls_server_name: Option<String>,
    /// Time limit of one query attempt, e.g. `30s`.
    #[arg(long, env = "OCM_SCORE_QUERY_TIMEOUT", value_name = "DURATION")]
    pub query_timeout: Option<String>,
    /// How many score queries run at the same time.
    #[arg(long, env = "OCM_SCORE_QUERY_CONCURRENCY", value_name = "N")]
    pub query_concurrency: Option<usize>,
    /// Retries of a failed query within one round (with exponential backoff; at most 10).
    #[arg(long, env = "OCM_SCORE_QUERY_RETRIES", value_name = "N")]
    pub query_retries: Option<u32>,
    /// Thanos `partial_response`: whether Thanos may answer without stores that fail, naming them in
    /// warnings [default: true]. Whatever it is, an answer with warnings publishes nothing unless
    /// --query-allow-partial-response.
    #[arg(long, env = "OCM_SCORE_QUERY_PARTIAL_RESPONSE", value_name = "BOOL")]
    pub query_partial_response: Option<bool>,
    /// Score from partial answers (some Thanos stores did not answer) instead of publishing nothing
    /// that round [default: false]. The clusters that answered are then normalized among themselves
    /// (the bounds of a subset), and the missing clusters' scores are not renewed.
    #[arg(long, env = "OCM_SCORE_QUERY_ALLOW_PARTIAL_RESPONSE", value_name = "BOOL")]
    pub query_allow_partial_response: Option<bool>,
    /// Thanos `dedup`: merge the series of HA replicas (by the querier's replica labels) [default:
    /// true]. Without it, sums over an HA pair count every sample twice.
    #[arg(long, env = "OCM_SCORE_QUERY_DEDUP", value_name = "BOOL")]
    pub query_dedup: Option<bool>,
    /// Thanos `max_source_resolution`: `auto`, or the coarsest downsampled data to read (`0s` raw
    /// only, `5m`, `1h`) [default: not sent, the querier's default].
    #[arg(
        long,
        env = "OCM_SCORE_QUERY_MAX_SOURCE_RESOLUTION",
        value_name = "RESOLUTION"
    )]
    pub query_max_source_resolution: Option<String>,
    /// Series label whose value names the cluster (the queries aggregate `by (<label>)`).
    #[arg(long, env = "OCM_SCORE_CLUSTER_LABEL", value_name = "LABEL")]
    pub cluster_label: Option<String>,
    /// How label values map to ManagedClusters: `identity`, `label:<key>` or `claim:<name>`.
    #[arg(long, env = "OCM_SCORE_CLUSTER_MAPPING", value_name = "MAPPING")]
    pub cluster_mapping: Option<String>,
    /// Name of the AddOnPlacementScore written in each cluster namespace.
    #[arg(long, env = "OCM_SCORE_PLACEMENT_SCORE_NAME", value_name = "NAME")]
    pub placement_score_name: Option<String>,
    /// Time between two scoring rounds, e.g. `60s`.
    #[arg(long, env = "OCM_SCORE_INTERVAL", value_name = "DURATION")]
    pub interval: Option<String>,
    /// How long a score stays valid after the sample it comes from (default: derived from
    /// --renew-every, see there).
    #[arg(long, env = "OCM_SCORE_VALIDITY", value_name = "DURATION")]
    pub validity: Option<String>,
    /// Renew an unchanged score once less than this much validity is left (default: interval + query
    /// timeout, the longest the next round may take to answer; validity / 2 when --validity is given).
    #[arg(long, env = "OCM_SCORE_RENEW_BEFORE", value_name = "DURATION")]
    pub renew_before: Option<String>,
    /// Renew `validUntil` at every Nth round of an unchanged cluster [default: 1, every round].
    /// validity is then renew-before + (N − ½) × interval (half an interval of slack for the age of
    /// the samples). The trade, at the 60s default interval: 1 → 60 hub writes per cluster per hour,
    /// scores of a cluster whose series stop (or of a dead scorer) expire within 120s of the last
    /// sample; 2 → 30 writes, 180s. Cannot be combined with --validity.
    #[arg(long, env = "OCM_SCORE_RENEW_EVERY", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=MAX_RENEW_EVERY as i64))]
    pub renew_every: Option<u32>,
    /// How many AddOnPlacementScore writes run at the same time.
    #[arg(long, env = "OCM_SCORE_WRITE_CONCURRENCY", value_name = "N")]
    pub write_concurrency: Option<usize>,
    /// Kubeconfig of the hub (default: KUBECONFIG, ~/.kube/config, or the in-cluster account).
    #[arg(long, env = "OCM_SCORE_KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// `/metrics`, `/healthz` and `/readyz` (the process shell's flags; override `metricsBindAddress`).
    #[command(flatten)]
    pub probes: ProbeArgs,
    /// Leader election (the process shell's flags; override `leaderElection`).
    #[command(flatten)]
    pub leader_election: LeaderElectionArgs,
}
