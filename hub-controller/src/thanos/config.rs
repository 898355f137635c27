//! Configuration of `ocm-score-hub thanos-scorer`: a YAML file for the score list and anything else,
//! flags (each also an environment variable) that override the file, and validation that runs
//! before anything starts, so a bad value stops the process with exit code 2 and the field named.

use super::mapping::ClusterMapping;
use ocm_score_shell::args::{
    LeaderDefaults, LeaderElection, LeaderElectionArgs, LeaderElectionFile, ProbeArgs, pick,
};
use ocm_score_shell::names::is_dns_subdomain;
use serde::Deserialize;
use std::{
    fmt,
    net::SocketAddr,
    path::{Path, PathBuf},
    str::FromStr,
    time::Duration,
};

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

/// Flags of the `thanos-scorer` subcommand. Every flag can also be set through its environment
/// variable, and overrides the same setting in `--config`.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct ThanosScorerArgs {
    /// YAML configuration file (the list of scores lives here; see the `thanos` module docs).
    #[arg(long, env = "OCM_SCORE_THANOS_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Base URL of the Thanos Query / Prometheus HTTP API, e.g. `https://thanos-query:9090`.
    #[arg(long, env = "OCM_SCORE_THANOS_QUERY_URL", value_name = "URL")]
    pub query_url: Option<String>,
    /// File holding a bearer token sent to the query API (re-read every round, so it may rotate).
    #[arg(long, env = "OCM_SCORE_THANOS_BEARER_TOKEN_FILE", value_name = "FILE")]
    pub bearer_token_file: Option<PathBuf>,
    /// PEM bundle of the CA certificates that may sign the query API's certificate.
    #[arg(long, env = "OCM_SCORE_THANOS_CA_FILE", value_name = "FILE")]
    pub ca_file: Option<PathBuf>,
    /// PEM client certificate presented to the query API (needs --client-key-file).
    #[arg(long, env = "OCM_SCORE_THANOS_CLIENT_CERT_FILE", value_name = "FILE")]
    pub client_cert_file: Option<PathBuf>,
    /// PEM private key of the client certificate.
    #[arg(long, env = "OCM_SCORE_THANOS_CLIENT_KEY_FILE", value_name = "FILE")]
    pub client_key_file: Option<PathBuf>,
    /// Name to expect in the query API's certificate (and send as SNI) instead of the URL's host.
    #[arg(long, env = "OCM_SCORE_THANOS_TLS_SERVER_NAME", value_name = "NAME")]
    pub tls_server_name: Option<String>,
    /// Time limit of one query attempt, e.g. `30s`.
    #[arg(long, env = "OCM_SCORE_THANOS_QUERY_TIMEOUT", value_name = "DURATION")]
    pub query_timeout: Option<String>,
    /// How many score queries run at the same time.
    #[arg(long, env = "OCM_SCORE_THANOS_QUERY_CONCURRENCY", value_name = "N")]
    pub query_concurrency: Option<usize>,
    /// Retries of a failed query within one round (with exponential backoff; at most 10).
    #[arg(long, env = "OCM_SCORE_THANOS_QUERY_RETRIES", value_name = "N")]
    pub query_retries: Option<u32>,
    /// Series label whose value names the cluster (the queries aggregate `by (<label>)`).
    #[arg(long, env = "OCM_SCORE_THANOS_CLUSTER_LABEL", value_name = "LABEL")]
    pub cluster_label: Option<String>,
    /// How label values map to ManagedClusters: `identity`, `label:<key>` or `claim:<name>`.
    #[arg(long, env = "OCM_SCORE_THANOS_CLUSTER_MAPPING", value_name = "MAPPING")]
    pub cluster_mapping: Option<String>,
    /// Name of the AddOnPlacementScore written in each cluster namespace.
    #[arg(long, env = "OCM_SCORE_THANOS_PLACEMENT_SCORE_NAME", value_name = "NAME")]
    pub placement_score_name: Option<String>,
    /// Time between two scoring rounds, e.g. `60s`.
    #[arg(long, env = "OCM_SCORE_THANOS_INTERVAL", value_name = "DURATION")]
    pub interval: Option<String>,
    /// How long a score stays valid after the sample it comes from (default: derived from
    /// --renew-every, see there).
    #[arg(long, env = "OCM_SCORE_THANOS_VALIDITY", value_name = "DURATION")]
    pub validity: Option<String>,
    /// Renew an unchanged score once less than this much validity is left (default: interval + query
    /// timeout, the longest the next round may take to answer; validity / 2 when --validity is given).
    #[arg(long, env = "OCM_SCORE_THANOS_RENEW_BEFORE", value_name = "DURATION")]
    pub renew_before: Option<String>,
    /// Renew `validUntil` at every Nth round of an unchanged cluster [default: 1, every round].
    /// validity is then renew-before + (N − ½) × interval (half an interval of slack for the age of
    /// the samples). The trade, at the 60s default interval: 1 → 60 hub writes per cluster per hour,
    /// scores of a cluster whose series stop (or of a dead scorer) expire within 120s of the last
    /// sample; 2 → 30 writes, 180s. Cannot be combined with --validity.
    #[arg(long, env = "OCM_SCORE_THANOS_RENEW_EVERY", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=MAX_RENEW_EVERY as i64))]
    pub renew_every: Option<u32>,
    /// How many AddOnPlacementScore writes run at the same time.
    #[arg(long, env = "OCM_SCORE_THANOS_WRITE_CONCURRENCY", value_name = "N")]
    pub write_concurrency: Option<usize>,
    /// Kubeconfig of the hub (default: KUBECONFIG, ~/.kube/config, or the in-cluster account).
    #[arg(long, env = "OCM_SCORE_THANOS_KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// `/metrics`, `/healthz` and `/readyz` (the process shell's flags; override `metricsBindAddress`).
    #[command(flatten)]
    pub probes: ProbeArgs,
    /// Leader election (the process shell's flags; override `leaderElection`).
    #[command(flatten)]
    pub leader_election: LeaderElectionArgs,
}

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
    pub allow_partial_response: bool,
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

impl Config {
    /// Reads the file named by `--config` (if any), applies the flags over it and validates the result.
    pub fn load(args: &ThanosScorerArgs) -> Result<Self, ConfigError> {
        let file = match &args.config {
            Some(path) => read_file(path)?,
            None => ConfigFile::default(),
        };
        Self::from_parts(args, file)
    }

    /// Flags over file, then validation. Field names in errors are those of the file, with the
    /// flag named when the value came from a flag.
    pub fn from_parts(args: &ThanosScorerArgs, file: ConfigFile) -> Result<Self, ConfigError> {
        let query = query_config(args, file.query)?;

        let (cluster_label_field, cluster_label) = pick(
            "--cluster-label",
            &args.cluster_label,
            "clusterLabel",
            file.cluster_label,
        );
        let cluster_label = cluster_label.unwrap_or_else(|| DEFAULT_CLUSTER_LABEL.to_owned());
        if !is_label_name(&cluster_label) {
            return Err(ConfigError::invalid(
                cluster_label_field,
                &cluster_label,
                "is not a Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)",
            ));
        }

        let (mapping_field, mapping) = pick(
            "--cluster-mapping",
            &args.cluster_mapping,
            "clusterMapping",
            file.cluster_mapping,
        );
        let cluster_mapping = match mapping {
            Some(text) => ClusterMapping::from_str(&text)
                .map_err(|problem| ConfigError::invalid(mapping_field, &text, problem))?,
            None => ClusterMapping::Identity,
        };

        let (name_field, name) = pick(
            "--placement-score-name",
            &args.placement_score_name,
            "placementScoreName",
            file.placement_score_name,
        );
        let placement_score_name = name.unwrap_or_else(|| DEFAULT_PLACEMENT_SCORE_NAME.to_owned());
        if !is_dns_subdomain(&placement_score_name) {
            return Err(ConfigError::invalid(
                name_field,
                &placement_score_name,
                "is not a valid object name (lowercase DNS subdomain, at most 253 characters)",
            ));
        }

        let scores = scores(file.scores)?;

        let (interval_field, interval) = pick("--interval", &args.interval, "interval", file.interval);
        let interval = optional_duration(interval_field, interval)?.unwrap_or(DEFAULT_INTERVAL);
        let (validity_field, validity) = pick("--validity", &args.validity, "validity", file.validity);
        let validity = optional_duration(validity_field, validity)?;
        let validity_given = validity.is_some();
        let (renew_field, renew_before) = pick(
            "--renew-before",
            &args.renew_before,
            "renewBefore",
            file.renew_before,
        );
        let renew_before = optional_duration(renew_field, renew_before)?;
        let (every_field, renew_every) =
            pick("--renew-every", &args.renew_every, "renewEvery", file.renew_every);
        let (validity, renew_before) = match (validity, renew_every) {
            (Some(_), Some(n)) => {
                return Err(ConfigError::invalid(
                    every_field,
                    n,
                    "cannot be combined with validity, which sets validUntil directly",
                ));
            }
            (Some(validity), None) => (validity, renew_before.unwrap_or(validity / 2)),
            (None, n) => {
                let n = n.unwrap_or(DEFAULT_RENEW_EVERY);
                if !(1..=MAX_RENEW_EVERY).contains(&n) {
                    return Err(ConfigError::invalid(
                        every_field,
                        n,
                        format!("must be between 1 and {MAX_RENEW_EVERY}"),
                    ));
                }
                // The margin: the next round comes one interval on and answers within the query
                // timeout. Every Nth round then finds less than it left, the one before more, with
                // half an interval to spare either way for samples of varying age.
                let renew_before = renew_before.unwrap_or(interval + query.timeout);
                (renew_before + interval * (2 * n - 1) / 2, renew_before)
            }
        };
        // A given validity is judged first; a derived one can be short only because renew-before is.
        if validity_given && validity <= interval {
            return Err(ConfigError::invalid(
                validity_field,
                humantime(validity),
                format!(
                    "must be longer than interval ({}), or scores expire between two rounds",
                    humantime(interval)
                ),
            ));
        }
        if renew_before <= interval {
            return Err(ConfigError::invalid(
                renew_field,
                humantime(renew_before),
                format!(
                    "must be longer than interval ({}), or an unchanged score expires before the \
                     round that would renew it",
                    humantime(interval)
                ),
            ));
        }
        // A derived validity is renew-before + (N - 1/2) × interval, longer than the interval now.
        if renew_before >= validity {
            return Err(ConfigError::invalid(
                renew_field,
                humantime(renew_before),
                format!("must be shorter than validity ({})", humantime(validity)),
            ));
        }

        let (wc_field, write_concurrency) = pick(
            "--write-concurrency",
            &args.write_concurrency,
            "writeConcurrency",
            file.write_concurrency,
        );
        let write_concurrency = write_concurrency.unwrap_or(DEFAULT_WRITE_CONCURRENCY);
        if write_concurrency == 0 {
            return Err(ConfigError::invalid(wc_field, 0, "must be at least 1"));
        }

        let (_, kubeconfig) = pick("--kubeconfig", &args.kubeconfig, "kubeconfig", file.kubeconfig);
        if let Some(path) = &kubeconfig {
            must_be_readable("kubeconfig", path)?;
        }

        let metrics_bind_address = match (args.probes.metrics_bind_address, file.metrics_bind_address) {
            (Some(flag), _) => flag,
            (None, Some(addr)) => addr.parse::<SocketAddr>().map_err(|_| {
                ConfigError::invalid("metricsBindAddress", &addr, "is not an address like 0.0.0.0:8080")
            })?,
            (None, None) => args.probes.address(),
        };

        let leader_election = args
            .leader_election
            .resolve(file.leader_election, &LEADER_DEFAULTS)
            .map_err(|e| ConfigError::invalid(e.field, e.value, e.problem))?;

        Ok(Self {
            query,
            cluster_label,
            cluster_mapping,
            placement_score_name,
            scores,
            interval,
            validity,
            renew_before,
            write_concurrency,
            kubeconfig,
            metrics_bind_address,
            leader_election,
        })
    }
}

fn read_file(path: &Path) -> Result<ConfigFile, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError::File {
        path: path.display().to_string(),
        message: format!("cannot be read: {e}"),
    })?;
    serde_norway::from_str(&text).map_err(|e| ConfigError::File {
        path: path.display().to_string(),
        message: e.to_string(),
    })
}

fn query_config(args: &ThanosScorerArgs, file: QueryFile) -> Result<QueryConfig, ConfigError> {
    let (url_field, url) = pick("--query-url", &args.query_url, "query.url", file.url);
    let url = url.ok_or_else(|| ConfigError::Missing {
        field: "query.url".into(),
        hint: "set --query-url, OCM_SCORE_THANOS_QUERY_URL or query.url in the config file".into(),
    })?;
    // Error messages show the URL without any password it carries.
    let shown = redact_userinfo(&url);
    let parsed = reqwest::Url::parse(&url)
        .map_err(|e| ConfigError::invalid(url_field, &shown, format!("is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
        return Err(ConfigError::invalid(
            url_field,
            &shown,
            "must be an http:// or https:// URL with a host",
        ));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(ConfigError::invalid(
            url_field,
            &shown,
            "must not carry a query string or fragment",
        ));
    }

    let (token_field, bearer_token_file) = pick(
        "--bearer-token-file",
        &args.bearer_token_file,
        "query.bearerTokenFile",
        file.bearer_token_file,
    );
    if let Some(path) = &bearer_token_file {
        must_be_readable(token_field, path)?;
    }
    let (ca_field, ca_file) = pick("--ca-file", &args.ca_file, "query.caFile", file.ca_file);
    let (cert_field, client_cert_file) = pick(
        "--client-cert-file",
        &args.client_cert_file,
        "query.clientCertFile",
        file.client_cert_file,
    );
    let (key_field, client_key_file) = pick(
        "--client-key-file",
        &args.client_key_file,
        "query.clientKeyFile",
        file.client_key_file,
    );
    let (sni_field, tls_server_name) = pick(
        "--tls-server-name",
        &args.tls_server_name,
        "query.tlsServerName",
        file.tls_server_name,
    );
    for (field, path) in [
        (ca_field, &ca_file),
        (cert_field, &client_cert_file),
        (key_field, &client_key_file),
    ] {
        if let Some(path) = path {
            must_be_readable(field, path)?;
        }
    }
    match (&client_cert_file, &client_key_file) {
        (Some(_), None) => {
            return Err(ConfigError::Missing {
                field: "query.clientKeyFile".into(),
                hint: "a client certificate needs its key (--client-key-file)".into(),
            });
        }
        (None, Some(_)) => {
            return Err(ConfigError::Missing {
                field: "query.clientCertFile".into(),
                hint: "a client key needs its certificate (--client-cert-file)".into(),
            });
        }
        _ => {}
    }
    if parsed.scheme() == "http" {
        let tls_setting = [
            (ca_field, ca_file.is_some()),
            (cert_field, client_cert_file.is_some()),
            (sni_field, tls_server_name.is_some()),
        ]
        .into_iter()
        .find(|(_, set)| *set);
        if let Some((field, _)) = tls_setting {
            return Err(ConfigError::invalid(
                field,
                "set",
                format!("needs an https:// query URL, but the URL is {shown}"),
            ));
        }
    }
    if let Some(name) = &tls_server_name
        && !is_dns_name(name)
    {
        return Err(ConfigError::invalid(sni_field, name, "is not a DNS name"));
    }

    let (timeout_field, timeout) = pick(
        "--query-timeout",
        &args.query_timeout,
        "query.timeout",
        file.timeout,
    );
    let timeout = optional_duration(timeout_field, timeout)?.unwrap_or(DEFAULT_QUERY_TIMEOUT);
    let (conc_field, concurrency) = pick(
        "--query-concurrency",
        &args.query_concurrency,
        "query.concurrency",
        file.concurrency,
    );
    let concurrency = concurrency.unwrap_or(DEFAULT_QUERY_CONCURRENCY);
    if concurrency == 0 {
        return Err(ConfigError::invalid(conc_field, 0, "must be at least 1"));
    }
    let (retries_field, retries) = pick(
        "--query-retries",
        &args.query_retries,
        "query.retries",
        file.retries,
    );
    // Each retry waits up to 5 s within one round; more than this only delays the next round.
    if let Some(n) = retries
        && n > MAX_QUERY_RETRIES
    {
        return Err(ConfigError::invalid(
            retries_field,
            n,
            format!("must be at most {MAX_QUERY_RETRIES}"),
        ));
    }
    Ok(QueryConfig {
        url: parsed,
        bearer_token_file,
        ca_file,
        client_cert_file,
        client_key_file,
        tls_server_name,
        timeout,
        concurrency,
        retries: retries.unwrap_or(DEFAULT_QUERY_RETRIES),
        allow_partial_response: file.allow_partial_response.unwrap_or(false),
    })
}

fn scores(files: Vec<ScoreFile>) -> Result<Vec<ScoreSpec>, ConfigError> {
    if files.is_empty() {
        return Err(ConfigError::Missing {
            field: "scores".into(),
            hint: "the config file must list at least one score with a name and a query".into(),
        });
    }
    let mut specs: Vec<ScoreSpec> = Vec::with_capacity(files.len());
    for (i, score) in files.into_iter().enumerate() {
        let field = |f: &str| format!("scores[{i}].{f}");
        let name = score.name.trim();
        if name.is_empty() || name.chars().any(char::is_whitespace) {
            return Err(ConfigError::invalid(
                field("name"),
                &score.name,
                "must be a non-empty word",
            ));
        }
        if specs.iter().any(|s| s.name == name) {
            return Err(ConfigError::invalid(
                field("name"),
                name,
                "is used by an earlier score",
            ));
        }
        if score.query.trim().is_empty() {
            return Err(ConfigError::invalid(
                field("query"),
                &score.query,
                "must be a PromQL expression",
            ));
        }
        let normalization = match score.normalization {
            NormalizationKind::Fleet => {
                if let Some((f, v)) = [("min", score.min), ("max", score.max)]
                    .into_iter()
                    .find_map(|(f, v)| v.map(|v| (f, v)))
                {
                    return Err(ConfigError::invalid(
                        field(f),
                        v,
                        "is only used with `normalization: fixed` (fleet normalization takes its \
                         bounds from the fleet)",
                    ));
                }
                Normalization::Fleet
            }
            NormalizationKind::Fixed => {
                let bound = |f: &str, v: Option<f64>| -> Result<f64, ConfigError> {
                    let v = v.ok_or_else(|| ConfigError::Missing {
                        field: field(f),
                        hint: "`normalization: fixed` needs both min and max".into(),
                    })?;
                    if !v.is_finite() {
                        return Err(ConfigError::invalid(field(f), v, "must be a finite number"));
                    }
                    Ok(v)
                };
                let (min, max) = (bound("min", score.min)?, bound("max", score.max)?);
                if min >= max {
                    return Err(ConfigError::invalid(
                        field("max"),
                        max,
                        format!("must be above min ({min})"),
                    ));
                }
                Normalization::Fixed { min, max }
            }
        };
        specs.push(ScoreSpec {
            name: name.to_owned(),
            query: score.query,
            direction: score.direction,
            normalization,
        });
    }
    Ok(specs)
}

fn optional_duration(field: &str, text: Option<String>) -> Result<Option<Duration>, ConfigError> {
    text.map(|t| parse_duration(field, &t)).transpose()
}

/// Parses `90s`, `1m30s`, `2m`, `1h` (jiff's friendly format, also ISO 8601); must be positive.
pub fn parse_duration(field: &str, text: &str) -> Result<Duration, ConfigError> {
    let signed: jiff::SignedDuration = text
        .trim()
        .parse()
        .map_err(|_| ConfigError::invalid(field, text, "is not a duration like 30s, 5m or 1h30m"))?;
    if signed.is_negative() || signed.is_zero() {
        return Err(ConfigError::invalid(field, text, "must be longer than zero"));
    }
    // Far beyond any sensible setting, and small enough that sums and multiples of durations (3 ×
    // interval, timeout × attempts × scores) cannot overflow.
    if signed > MAX_DURATION {
        return Err(ConfigError::invalid(field, text, "must be at most a year"));
    }
    Duration::try_from(signed).map_err(|_| ConfigError::invalid(field, text, "is out of range"))
}

const MAX_DURATION: jiff::SignedDuration = jiff::SignedDuration::from_hours(365 * 24);

/// Formats a duration for messages, e.g. `90s` or `1.5s`.
pub fn humantime(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}s", d.as_secs_f64())
    }
}

fn must_be_readable(field: &str, path: &Path) -> Result<(), ConfigError> {
    let file = std::fs::File::open(path)
        .map_err(|e| ConfigError::invalid(field, path.display(), format!("cannot be read: {e}")))?;
    match file.metadata() {
        Ok(meta) if meta.is_file() => Ok(()),
        Ok(_) => Err(ConfigError::invalid(
            field,
            path.display(),
            "is not a regular file",
        )),
        Err(e) => Err(ConfigError::invalid(
            field,
            path.display(),
            format!("cannot be read: {e}"),
        )),
    }
}

/// `scheme://user:password@host/...` → `scheme://***@host/...`, for messages.
fn redact_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}://***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_dns_name(s: &str) -> bool {
    let lower = s.to_ascii_lowercase();
    is_dns_subdomain(lower.trim_end_matches('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(yaml: &str) -> ConfigFile {
        serde_norway::from_str(yaml).expect("test YAML parses")
    }

    const MINIMAL: &str = "
query: {url: 'http://127.0.0.1:9090'}
leaderElection: {enabled: false}
scores:
  - name: cpuFree
    query: sum by (cluster) (node_cpu_free)
";

    #[test]
    fn defaults_fill_in_around_a_minimal_file() {
        let config = Config::from_parts(&ThanosScorerArgs::default(), file(MINIMAL)).expect("valid");
        assert_eq!(config.cluster_label, "cluster");
        assert_eq!(config.placement_score_name, "thanos-score");
        assert_eq!(config.cluster_mapping, ClusterMapping::Identity);
        assert_eq!(config.interval, Duration::from_secs(60));
        // Every round renews: renew before 60s + 30s (interval + query timeout), valid for that plus
        // half an interval.
        assert_eq!(config.renew_before, Duration::from_secs(90));
        assert_eq!(config.validity, Duration::from_secs(120));
        assert_eq!(config.scores[0].direction, Direction::HigherIsBetter);
        assert_eq!(config.scores[0].normalization, Normalization::Fleet);
        assert_eq!(config.leader_election, None);
        assert!(!config.query.allow_partial_response);
    }

    #[test]
    fn flags_override_the_file() {
        let args = ThanosScorerArgs {
            query_url: Some("https://thanos.example:10902".into()),
            interval: Some("30s".into()),
            cluster_mapping: Some("claim:id.k8s.io".into()),
            ..Default::default()
        };
        let config = Config::from_parts(&args, file(MINIMAL)).expect("valid");
        assert_eq!(config.query.url.as_str(), "https://thanos.example:10902/");
        assert_eq!(config.interval, Duration::from_secs(30));
        assert_eq!(config.validity, Duration::from_secs(75), "30s + 30s + 15s");
        assert_eq!(config.cluster_mapping, ClusterMapping::Claim("id.k8s.io".into()));
    }

    #[test]
    fn renewing_less_often_lengthens_the_derived_validity() {
        let every = |n| ThanosScorerArgs {
            renew_every: Some(n),
            ..Default::default()
        };
        let config = Config::from_parts(&every(2), file(MINIMAL)).expect("valid");
        assert_eq!(
            (config.validity, config.renew_before),
            (Duration::from_secs(180), Duration::from_secs(90)),
            "today's defaults before issue 16"
        );
        let config = Config::from_parts(
            &ThanosScorerArgs::default(),
            file(&format!("{MINIMAL}renewEvery: 3\n")),
        )
        .expect("valid");
        assert_eq!(config.validity, Duration::from_secs(240));
        // An explicit validity keeps the old rule: renew once half of it is left.
        let explicit = ThanosScorerArgs {
            validity: Some("10m".into()),
            ..Default::default()
        };
        let config = Config::from_parts(&explicit, file(MINIMAL)).expect("valid");
        assert_eq!(config.renew_before, Duration::from_secs(300));
        let both = ThanosScorerArgs {
            validity: Some("10m".into()),
            renew_every: Some(2),
            ..Default::default()
        };
        assert_eq!(error(both, MINIMAL).field(), "--renew-every");
        assert_eq!(
            error(ThanosScorerArgs::default(), &format!("{MINIMAL}renewEvery: 0\n")).field(),
            "renewEvery"
        );
    }

    fn error(args: ThanosScorerArgs, yaml: &str) -> ConfigError {
        Config::from_parts(&args, file(yaml)).expect_err("must be rejected")
    }

    #[test]
    fn bad_values_name_their_field() {
        let cases: &[(&str, ThanosScorerArgs, &str)] = &[
            (
                "--interval",
                ThanosScorerArgs {
                    interval: Some("soon".into()),
                    ..Default::default()
                },
                "",
            ),
            (
                "--validity",
                ThanosScorerArgs {
                    validity: Some("30s".into()),
                    ..Default::default()
                },
                "",
            ),
            (
                "--renew-before",
                ThanosScorerArgs {
                    validity: Some("3m".into()),
                    renew_before: Some("200s".into()),
                    ..Default::default()
                },
                "",
            ),
            (
                "--renew-before",
                ThanosScorerArgs {
                    renew_before: Some("10s".into()),
                    ..Default::default()
                },
                "",
            ),
            (
                "--cluster-label",
                ThanosScorerArgs {
                    cluster_label: Some("1bad".into()),
                    ..Default::default()
                },
                "",
            ),
            (
                "--cluster-mapping",
                ThanosScorerArgs {
                    cluster_mapping: Some("label:".into()),
                    ..Default::default()
                },
                "",
            ),
            (
                "--query-url",
                ThanosScorerArgs {
                    query_url: Some("ftp://x".into()),
                    ..Default::default()
                },
                "",
            ),
            (
                "--placement-score-name",
                ThanosScorerArgs {
                    placement_score_name: Some("Bad_Name".into()),
                    ..Default::default()
                },
                "",
            ),
            (
                "--write-concurrency",
                ThanosScorerArgs {
                    write_concurrency: Some(0),
                    ..Default::default()
                },
                "",
            ),
            (
                "--ca-file",
                ThanosScorerArgs {
                    ca_file: Some("/nonexistent/ca.pem".into()),
                    ..Default::default()
                },
                "",
            ),
            (
                "--bearer-token-file",
                ThanosScorerArgs {
                    bearer_token_file: Some("/nonexistent/token".into()),
                    ..Default::default()
                },
                "",
            ),
        ];
        for (field, args, _) in cases {
            let err = error(args.clone(), MINIMAL);
            assert_eq!(err.field(), *field, "{err}");
            assert!(err.to_string().starts_with(field), "{err}");
        }
    }

    #[test]
    fn tls_settings_need_https() {
        let dir = std::env::temp_dir();
        let args = ThanosScorerArgs {
            tls_server_name: Some("thanos.example".into()),
            ..Default::default()
        };
        let err = error(args, MINIMAL);
        assert_eq!(err.field(), "--tls-server-name", "{err}");
        let args = ThanosScorerArgs {
            ca_file: Some(dir),
            ..Default::default()
        };
        assert_eq!(error(args, MINIMAL).field(), "--ca-file");
    }

    #[test]
    fn score_list_errors_point_at_the_entry() {
        let base = "query: {url: 'http://127.0.0.1:9090'}\n";
        let cases = [
            ("scores", base.to_owned()),
            (
                "scores[1].name",
                format!("{base}scores: [{{name: a, query: x}}, {{name: a, query: y}}]"),
            ),
            (
                "scores[0].query",
                format!("{base}scores: [{{name: a, query: ' '}}]"),
            ),
            (
                "scores[0].min",
                format!("{base}scores: [{{name: a, query: x, min: 1}}]"),
            ),
            (
                "scores[0].max",
                format!("{base}scores: [{{name: a, query: x, normalization: fixed, min: 1}}]"),
            ),
            (
                "scores[0].max",
                format!("{base}scores: [{{name: a, query: x, normalization: fixed, min: 5, max: 1}}]"),
            ),
            (
                "scores[0].name",
                format!("{base}scores: [{{name: '', query: x}}]"),
            ),
        ];
        for (field, yaml) in cases {
            let err = error(ThanosScorerArgs::default(), &yaml);
            assert_eq!(err.field(), field, "{err}");
        }
    }

    #[test]
    fn absurd_durations_and_retries_are_refused_not_overflowed() {
        // The round budget multiplies timeout, retries and scores, and validity defaults to
        // 3 × interval: values this large used to overflow (a panic) instead of being reported.
        let args = ThanosScorerArgs {
            query_retries: Some(u32::MAX),
            ..Default::default()
        };
        assert_eq!(error(args, MINIMAL).field(), "--query-retries");
        let huge = "2562047788015215h";
        let args = ThanosScorerArgs {
            interval: Some(huge.into()),
            ..Default::default()
        };
        assert_eq!(error(args, MINIMAL).field(), "--interval");
        let args = ThanosScorerArgs {
            query_timeout: Some(huge.into()),
            ..Default::default()
        };
        assert_eq!(error(args, MINIMAL).field(), "--query-timeout");
    }

    #[test]
    fn missing_url_says_how_to_set_it() {
        let err = error(ThanosScorerArgs::default(), "scores: [{name: a, query: x}]");
        assert_eq!(err.field(), "query.url");
        assert!(err.to_string().contains("--query-url"), "{err}");
    }

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

    #[test]
    fn fixed_bounds_and_directions_parse() {
        let yaml = "
query: {url: 'http://127.0.0.1:9090'}
scores:
  - {name: lat, query: x, direction: lowerIsBetter, normalization: fixed, min: -5, max: 250.5}
leaderElection: {namespace: ocm, leaseName: scorer, leaseDuration: 20s, renewDeadline: 15s, retryPeriod: 3s}
";
        let config = Config::from_parts(&ThanosScorerArgs::default(), file(yaml)).expect("valid");
        assert_eq!(config.scores[0].direction, Direction::LowerIsBetter);
        assert_eq!(
            config.scores[0].normalization,
            Normalization::Fixed {
                min: -5.0,
                max: 250.5
            }
        );
        let le = config.leader_election.expect("enabled by default");
        assert_eq!(le.namespace.as_deref(), Some("ocm"));
        assert_eq!(le.lease_name, "scorer");
        assert_eq!(le.lease_duration, Duration::from_secs(20));
    }

    #[test]
    fn lease_timing_must_nest() {
        let args = ThanosScorerArgs {
            leader_election: LeaderElectionArgs {
                renew_deadline: Some(Duration::from_secs(20)),
                ..Default::default()
            },
            ..Default::default()
        };
        let yaml = "query: {url: 'http://127.0.0.1:9090'}\nscores: [{name: a, query: x}]\n";
        assert_eq!(error(args, yaml).field(), "--leader-election-renew-deadline");
        let yaml = "query: {url: 'http://127.0.0.1:9090'}\nscores: [{name: a, query: x}]\nmetricsBindAddress: '8080'\n";
        assert_eq!(
            error(ThanosScorerArgs::default(), yaml).field(),
            "metricsBindAddress"
        );
    }

    #[test]
    fn passwords_in_the_url_stay_out_of_messages() {
        let args = ThanosScorerArgs {
            query_url: Some("ftp://scorer:hunter2@thanos".into()),
            ..Default::default()
        };
        let err = error(args, MINIMAL).to_string();
        assert!(
            !err.contains("hunter2") && err.contains("ftp://***@thanos"),
            "{err}"
        );
        assert_eq!(
            redact_userinfo("http://thanos:9090/a@b"),
            "http://thanos:9090/a@b"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("f", "90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("f", "1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("f", "250ms"), Ok(Duration::from_millis(250)));
        assert!(parse_duration("f", "0s").is_err());
        assert!(parse_duration("f", "-5s").is_err());
        assert!(parse_duration("f", "5 parsecs").is_err());
    }
}
