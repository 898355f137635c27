//! The Prometheus / Thanos Query HTTP client: one instant query per score for the whole fleet,
//! with a per-attempt timeout, retries with exponential backoff for failures that may pass, bearer
//! token, custom CA bundle, client certificate and TLS server name, and Thanos's own parameters
//! ([`ThanosParams`]).
//!
//! Secrets never reach a log line: the token file is read per request and only its path is kept, and
//! URLs are shown without their password.

use super::{
    config::QueryConfig,
    params::{PartialPolicy, ThanosParams},
    response::{QueryData, ResponseError, VectorSample, is_promql_annotation, parse_response},
};
use jiff::Timestamp;
use reqwest::{
    Url,
    dns::{Addrs, Name, Resolve, Resolving},
};
use std::{net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(5);

/// The client could not be built from the configuration (bad certificate or key material).
#[derive(Debug, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct ClientBuildError {
    pub field: &'static str,
    pub problem: String,
}

/// One score query failed (after retries, for failures worth retrying).
#[derive(Debug, thiserror::Error)]
pub enum QueryError {
    #[error("reading the bearer token file {path}: {message}")]
    Token { path: PathBuf, message: String },
    #[error("request to {url} timed out after {timeout:?}")]
    Timeout { url: String, timeout: Duration },
    #[error("request to {url} failed: {message}")]
    Transport { url: String, message: String },
    #[error(transparent)]
    Response(#[from] ResponseError),
    /// Warnings other than PromQL annotations mean a partial answer (a Thanos store did not
    /// respond): the fleet's minimum and maximum would be wrong, so, unless partial answers are
    /// accepted, it is not used.
    #[error("partial response (the answer carries warnings): {}", .0.join("; "))]
    Partial(Vec<String>),
    #[error("expected an instant vector (aggregate `by` the cluster label), got a {0}")]
    NotAVector(&'static str),
}

impl QueryError {
    /// A short stable name for the error metric.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Token { .. } => "token",
            Self::Timeout { .. } => "timeout",
            Self::Transport { .. } => "transport",
            Self::Response(e) => e.kind(),
            Self::Partial(_) => "partial_response",
            Self::NotAVector(_) => "not_a_vector",
        }
    }

    fn is_retryable(&self) -> bool {
        match self {
            // A store that failed one attempt may answer the next.
            Self::Timeout { .. } | Self::Transport { .. } | Self::Partial(_) => true,
            Self::Response(e) => e.is_retryable(),
            Self::Token { .. } | Self::NotAVector(_) => false,
        }
    }
}

/// The samples of one score query, and the warnings of an accepted partial answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub samples: Vec<VectorSample>,
    /// Empty unless the answer was partial and [`PartialPolicy::Accept`] let it through (PromQL
    /// annotations are not kept: they say nothing about missing data).
    pub warnings: Vec<String>,
}

/// Queries one Prometheus-compatible API.
pub struct PromClient {
    http: reqwest::Client,
    endpoint: Url,
    /// `endpoint` without a password, for messages.
    shown: String,
    token_file: Option<PathBuf>,
    timeout: Duration,
    retries: u32,
    thanos: ThanosParams,
    partial: PartialPolicy,
}

impl std::fmt::Debug for PromClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PromClient")
            .field("endpoint", &self.shown)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl PromClient {
    /// A client of the API at `config.url`, sending `config.thanos` with every query and treating
    /// answers with warnings by `config.partial`.
    pub fn new(config: &QueryConfig) -> Result<Self, ClientBuildError> {
        let mut endpoint = config.url.clone();
        let mut builder = reqwest::Client::builder()
            .timeout(config.timeout)
            .connect_timeout(config.timeout.min(Duration::from_secs(10)))
            .user_agent(concat!(
                "ocm-score-hub/",
                env!("CARGO_PKG_VERSION"),
                " thanos-scorer"
            ));

        if let Some(path) = &config.ca_file {
            let pem = read("query.caFile", path)?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| ClientBuildError {
                field: "query.caFile",
                problem: format!("{}: {e}", path.display()),
            })?;
            if certs.is_empty() {
                return Err(ClientBuildError {
                    field: "query.caFile",
                    problem: format!("{}: no PEM certificate found", path.display()),
                });
            }
            // Only the given CAs: a private Thanos endpoint should not be trusted via public roots.
            builder = builder.tls_built_in_root_certs(false);
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        if let (Some(cert_path), Some(key_path)) = (&config.client_cert_file, &config.client_key_file) {
            let mut pem = read("query.clientCertFile", cert_path)?;
            pem.push(b'\n');
            pem.extend(read("query.clientKeyFile", key_path)?);
            let identity = reqwest::Identity::from_pem(&pem).map_err(|e| ClientBuildError {
                field: "query.clientCertFile",
                problem: format!("{} with key {}: {e}", cert_path.display(), key_path.display()),
            })?;
            builder = builder.identity(identity);
        }
        if let Some(server_name) = &config.tls_server_name {
            // Connect to the configured host but verify (and send SNI for) `server_name`, like
            // `curl --connect-to`: the URL is rewritten to the server name, which resolves to the host.
            let host = endpoint
                .host_str()
                .unwrap_or_default()
                .trim_matches(['[', ']'])
                .to_owned();
            endpoint
                .set_host(Some(server_name))
                .map_err(|e| ClientBuildError {
                    field: "query.tlsServerName",
                    problem: format!("{server_name:?}: {e}"),
                })?;
            builder = builder.dns_resolver(Arc::new(ConnectTo {
                server_name: server_name.to_ascii_lowercase(),
                host,
            }));
        }
        let http = builder.build().map_err(|e| ClientBuildError {
            field: "query.url",
            problem: format!("building the HTTP client: {e}"),
        })?;

        let shown = without_password(&config.url);
        {
            let mut segments = endpoint.path_segments_mut().map_err(|()| ClientBuildError {
                field: "query.url",
                problem: format!("{shown} cannot be a base URL"),
            })?;
            segments.pop_if_empty().extend(["api", "v1", "query"]);
        }
        Ok(Self {
            http,
            shown: without_password(&endpoint),
            endpoint,
            token_file: config.bearer_token_file.clone(),
            timeout: config.timeout,
            retries: config.retries,
            thanos: config.thanos.clone(),
            partial: config.partial,
        })
    }

    /// The query endpoint, without any password, for logs.
    pub fn endpoint(&self) -> &str {
        &self.shown
    }

    /// Evaluates `query` at `at` and returns its instant vector, retrying transient failures (a
    /// partial answer that is refused included).
    pub async fn instant_vector(&self, query: &str, at: Timestamp) -> Result<Answer, QueryError> {
        let mut attempt = 0;
        loop {
            match self.attempt(query, at).await {
                Ok(samples) => return Ok(samples),
                Err(e) if attempt < self.retries && e.is_retryable() => {
                    let backoff = FIRST_BACKOFF
                        .saturating_mul(1 << attempt.min(16))
                        .min(MAX_BACKOFF);
                    tracing::debug!(error = %e, attempt, ?backoff, "query failed, retrying");
                    tokio::time::sleep(backoff).await;
                    attempt += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn attempt(&self, query: &str, at: Timestamp) -> Result<Answer, QueryError> {
        let time = format!("{}.{:03}", at.as_second(), at.subsec_millisecond().max(0));
        let timeout = format!("{}ms", self.timeout.as_millis().max(1));
        let thanos = self.thanos.form();
        let mut form = vec![("query", query), ("time", &time), ("timeout", &timeout)];
        form.extend(thanos.iter().map(|(k, v)| (*k, v.as_str())));
        let mut request = self.http.post(self.endpoint.clone()).form(&form);
        if let Some(path) = &self.token_file {
            let token = tokio::fs::read_to_string(path)
                .await
                .map_err(|e| QueryError::Token {
                    path: path.clone(),
                    message: e.to_string(),
                })?;
            let token = token.trim();
            if token.is_empty() {
                return Err(QueryError::Token {
                    path: path.clone(),
                    message: "the file is empty".into(),
                });
            }
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| self.transport_error(&e))?;
        let status = response.status().as_u16();
        let body = response.bytes().await.map_err(|e| self.transport_error(&e))?;
        let answer = parse_response(status, &body)?;
        // Remarks on the query (PromQL annotations) do not make an answer partial; anything else
        // among the warnings is about the data sources, e.g. a store that did not answer.
        let (annotations, warnings): (Vec<String>, Vec<String>) =
            answer.warnings.into_iter().partition(|w| is_promql_annotation(w));
        if !annotations.is_empty() {
            tracing::debug!(?annotations, query, "PromQL annotations");
        }
        if !warnings.is_empty() && self.partial == PartialPolicy::Refuse {
            return Err(QueryError::Partial(warnings));
        }
        match answer.data {
            QueryData::Vector(samples) => Ok(Answer { samples, warnings }),
            other => Err(QueryError::NotAVector(other.result_type())),
        }
    }

    fn transport_error(&self, e: &reqwest::Error) -> QueryError {
        if e.is_timeout() {
            return QueryError::Timeout {
                url: self.shown.clone(),
                timeout: self.timeout,
            };
        }
        // The full source chain says why (refused, TLS handshake, ...); reqwest's URL is replaced by ours.
        let mut message = String::new();
        let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
        while let Some(s) = source {
            if !message.is_empty() {
                message.push_str(": ");
            }
            message.push_str(&s.to_string());
            source = s.source();
        }
        if message.is_empty() {
            message = e.to_string();
        }
        QueryError::Transport {
            url: self.shown.clone(),
            message,
        }
    }
}

fn read(field: &'static str, path: &std::path::Path) -> Result<Vec<u8>, ClientBuildError> {
    std::fs::read(path).map_err(|e| ClientBuildError {
        field,
        problem: format!("{}: {e}", path.display()),
    })
}

/// The URL with any password replaced, safe to log.
pub fn without_password(url: &Url) -> String {
    let mut shown = url.clone();
    if shown.password().is_some() {
        let _ = shown.set_password(Some("***"));
    }
    shown.to_string()
}

/// Resolves the TLS server name to the configured host; every other name resolves normally.
struct ConnectTo {
    server_name: String,
    host: String,
}

impl Resolve for ConnectTo {
    fn resolve(&self, name: Name) -> Resolving {
        let target = if name.as_str().eq_ignore_ascii_case(&self.server_name) {
            self.host.clone()
        } else {
            name.as_str().to_owned()
        };
        Box::pin(async move {
            if let Ok(ip) = target.parse::<std::net::IpAddr>() {
                let addrs: Addrs = Box::new(std::iter::once(SocketAddr::new(ip, 0)));
                return Ok(addrs);
            }
            let found: Vec<SocketAddr> = tokio::net::lookup_host((target.as_str(), 0)).await?.collect();
            let addrs: Addrs = Box::new(found.into_iter());
            Ok(addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_hidden() {
        let url = Url::parse("https://scorer:s3cret@thanos.example:9090/prefix").expect("url");
        let shown = without_password(&url);
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("scorer:***@thanos.example"), "{shown}");
    }
}
