//! Flags over file, defaults, and the rules across settings: from [`ThanosScorerArgs`] and a
//! [`ConfigFile`] to the validated [`Config`]. Field names in errors are those of the file, with the
//! flag named when the value came from a flag.

use super::checks::{is_dns_name, is_label_name, must_be_readable, optional_duration, redact_userinfo};
use super::file::{NormalizationKind, QueryFile, ScoreFile, read_file};
use super::*;
use crate::thanos::mapping::ClusterMapping;
use crate::thanos::params::{MaxSourceResolution, PartialPolicy, ThanosParams};
use ocm_score_api::duration::format as fmt_duration;
use ocm_score_api::names::is_dns_subdomain;
use ocm_score_shell::args::pick;
use std::str::FromStr;

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
                fmt_duration(validity),
                format!(
                    "must be longer than interval ({}), or scores expire between two rounds",
                    fmt_duration(interval)
                ),
            ));
        }
        if renew_before <= interval {
            return Err(ConfigError::invalid(
                renew_field,
                fmt_duration(renew_before),
                format!(
                    "must be longer than interval ({}), or an unchanged score expires before the \
                     round that would renew it",
                    fmt_duration(interval)
                ),
            ));
        }
        // A derived validity is renew-before + (N - 1/2) × interval, longer than the interval now.
        if renew_before >= validity {
            return Err(ConfigError::invalid(
                renew_field,
                fmt_duration(renew_before),
                format!("must be shorter than validity ({})", fmt_duration(validity)),
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

fn query_config(args: &ThanosScorerArgs, file: QueryFile) -> Result<QueryConfig, ConfigError> {
    let (partial, thanos) = thanos_settings(args, &file)?;
    let (url_field, url) = pick("--query-url", &args.query_url, "query.url", file.url);
    let url = url.ok_or_else(|| ConfigError::Missing {
        field: "query.url".into(),
        hint: "set --query-url, OCM_SCORE_QUERY_URL or query.url in the config file".into(),
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
        partial,
        thanos,
    })
}

/// Whether partial answers are used, and Thanos's own query parameters (defaults: Thanos's).
fn thanos_settings(
    args: &ThanosScorerArgs,
    file: &QueryFile,
) -> Result<(PartialPolicy, ThanosParams), ConfigError> {
    let (_, allow) = pick(
        "--query-allow-partial-response",
        &args.query_allow_partial_response,
        "query.allowPartialResponse",
        file.allow_partial_response,
    );
    let partial = if allow.unwrap_or(false) {
        PartialPolicy::Accept
    } else {
        PartialPolicy::Refuse
    };
    let defaults = ThanosParams::default();
    let (_, partial_response) = pick(
        "--query-partial-response",
        &args.query_partial_response,
        "query.partialResponse",
        file.partial_response,
    );
    let (_, dedup) = pick("--query-dedup", &args.query_dedup, "query.dedup", file.dedup);
    let (resolution_field, resolution) = pick(
        "--query-max-source-resolution",
        &args.query_max_source_resolution,
        "query.maxSourceResolution",
        file.max_source_resolution.clone(),
    );
    let max_source_resolution = resolution
        .map(|text| {
            text.parse::<MaxSourceResolution>()
                .map_err(|problem| ConfigError::invalid(resolution_field, &text, problem))
        })
        .transpose()?;
    let thanos = ThanosParams {
        partial_response: partial_response.unwrap_or(defaults.partial_response),
        dedup: dedup.unwrap_or(defaults.dedup),
        max_source_resolution,
    };
    Ok((partial, thanos))
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

#[cfg(test)]
#[path = "resolve_tests.rs"]
mod tests;
