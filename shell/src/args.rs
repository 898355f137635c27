//! The flags every mode shares, flattened into each mode's own flags (`#[command(flatten)]`), and
//! their resolution. One naming scheme: flag `--some-thing` has environment variable
//! `OCM_SCORE_SOME_THING`. Old spellings are hidden clap aliases and [`crate::cli::RENAMED_ENV`]
//! entries, read with a warning until [`crate::cli::REMOVED_IN`].

use clap::Args;
use serde::Deserialize;
use std::net::SocketAddr;
use std::time::Duration;

/// `/metrics`, `/healthz` and `/readyz`.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeArgs {
    /// Address of the /metrics, /healthz and /readyz endpoint (port 0 picks a free port, logged)
    /// [default: 0.0.0.0:8080].
    #[arg(
        long = "metrics-bind-address",
        alias = "metrics-addr",
        env = "OCM_SCORE_METRICS_BIND_ADDRESS",
        value_name = "ADDR"
    )]
    pub metrics_bind_address: Option<SocketAddr>,
}

pub const DEFAULT_METRICS_BIND_ADDRESS: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED), 8080);

impl ProbeArgs {
    /// The address given, else the default.
    pub fn address(&self) -> SocketAddr {
        self.metrics_bind_address.unwrap_or(DEFAULT_METRICS_BIND_ADDRESS)
    }
}

/// Lease-based leader election, so of several replicas one writes.
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct LeaderElectionArgs {
    /// Elect a leader through a Lease so only one replica writes (`false` for a single replica)
    /// [default: true].
    #[arg(long = "leader-elect", env = "OCM_SCORE_LEADER_ELECT", value_name = "BOOL")]
    pub enabled: Option<bool>,

    /// Namespace of the Lease (normally the process's own namespace, e.g. from the downward API).
    #[arg(
        long = "leader-election-namespace",
        env = "OCM_SCORE_LEADER_ELECTION_NAMESPACE",
        value_name = "NS"
    )]
    pub namespace: Option<String>,

    /// Name of the Lease.
    #[arg(
        long = "leader-election-id",
        env = "OCM_SCORE_LEADER_ELECTION_ID",
        value_name = "NAME"
    )]
    pub lease_name: Option<String>,

    /// This replica's identity in the Lease [default: the host (pod) name and process id].
    #[arg(
        long = "leader-election-identity",
        alias = "leader-identity",
        env = "OCM_SCORE_LEADER_ELECTION_IDENTITY",
        value_name = "ID"
    )]
    pub identity: Option<String>,

    /// How long a holder's claim lasts without renewal; a standby takes over after it [default: 15s].
    #[arg(long = "leader-election-lease-duration", alias = "lease-duration",
          env = "OCM_SCORE_LEADER_ELECTION_LEASE_DURATION", value_name = "DURATION", value_parser = parse_duration)]
    pub lease_duration: Option<Duration>,

    /// A leader that could not renew for this long steps down [default: 10s].
    #[arg(long = "leader-election-renew-deadline", alias = "renew-deadline",
          env = "OCM_SCORE_LEADER_ELECTION_RENEW_DEADLINE", value_name = "DURATION", value_parser = parse_duration)]
    pub renew_deadline: Option<Duration>,

    /// Time between two attempts to acquire or renew the Lease [default: 2s].
    #[arg(long = "leader-election-retry-period", alias = "retry-period",
          env = "OCM_SCORE_LEADER_ELECTION_RETRY_PERIOD", value_name = "DURATION", value_parser = parse_duration)]
    pub retry_period: Option<Duration>,
}

/// The `leaderElection` section of a mode's configuration file; flags override it.
#[derive(Debug, Default, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LeaderElectionFile {
    pub enabled: Option<bool>,
    pub namespace: Option<String>,
    pub lease_name: Option<String>,
    pub identity: Option<String>,
    pub lease_duration: Option<String>,
    pub renew_deadline: Option<String>,
    pub retry_period: Option<String>,
}

/// What differs between modes.
#[derive(Clone, Copy, Debug)]
pub struct LeaderDefaults {
    pub lease_name: &'static str,
    /// `None`: the namespace of the hub client's configuration (the service account's in a pod).
    pub namespace: Option<&'static str>,
    /// Identity when neither flag nor file gives one and the host name is unknown.
    pub identity_fallback: &'static str,
}

pub const DEFAULT_LEASE_DURATION: Duration = Duration::from_secs(15);
pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

/// Validated leader election settings; the namespace may still wait for the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElection {
    /// `None`: the namespace of the hub client's configuration.
    pub namespace: Option<String>,
    pub lease_name: String,
    pub identity: String,
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub retry_period: Duration,
}

impl LeaderElection {
    /// The elector's configuration, the namespace defaulting to `client`'s.
    pub fn config(&self, client: &kube::Client) -> crate::leader::LeaderConfig {
        crate::leader::LeaderConfig {
            namespace: self
                .namespace
                .clone()
                .unwrap_or_else(|| client.default_namespace().to_owned()),
            lease_name: self.lease_name.clone(),
            identity: self.identity.clone(),
            lease_duration: self.lease_duration,
            renew_deadline: self.renew_deadline,
            retry_period: self.retry_period,
        }
    }
}

/// A setting that cannot be used, naming the flag (or file key) it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {value:?} {problem}")]
pub struct SettingError {
    pub field: String,
    pub value: String,
    pub problem: String,
}

fn invalid(field: &str, value: impl std::fmt::Display, problem: impl Into<String>) -> SettingError {
    SettingError {
        field: field.to_owned(),
        value: value.to_string(),
        problem: problem.into(),
    }
}

impl LeaderElectionArgs {
    /// Flags over `file`, then validation; `None` when leader election is off.
    pub fn resolve(
        &self,
        file: LeaderElectionFile,
        defaults: &LeaderDefaults,
    ) -> Result<Option<LeaderElection>, SettingError> {
        let enabled = self.enabled.or(file.enabled).unwrap_or(true);
        if !enabled {
            return Ok(None);
        }
        let (ns_field, namespace) = pick(
            "--leader-election-namespace",
            &self.namespace,
            "leaderElection.namespace",
            file.namespace,
        );
        let namespace = namespace.or_else(|| defaults.namespace.map(str::to_owned));
        if let Some(ns) = &namespace
            && !ocm_score_api::names::is_dns_label(ns)
        {
            return Err(invalid(ns_field, ns, "is not a namespace name"));
        }
        let (name_field, lease_name) = pick(
            "--leader-election-id",
            &self.lease_name,
            "leaderElection.leaseName",
            file.lease_name,
        );
        let lease_name = lease_name.unwrap_or_else(|| defaults.lease_name.to_owned());
        if !ocm_score_api::names::is_dns_subdomain(&lease_name) {
            return Err(invalid(name_field, &lease_name, "is not a valid object name"));
        }
        let (id_field, identity) = pick(
            "--leader-election-identity",
            &self.identity,
            "leaderElection.identity",
            file.identity,
        );
        let identity = identity.unwrap_or_else(|| default_identity(defaults.identity_fallback));
        if identity.trim().is_empty() {
            return Err(invalid(id_field, &identity, "must not be empty"));
        }
        let duration = |flag: &'static str,
                        value: Option<Duration>,
                        key: &'static str,
                        text: Option<String>| {
            match value {
                Some(d) => Ok((flag, Some(d))),
                None => text
                    .map(|t| parse_duration(&t).map_err(|problem| invalid(key, &t, problem)))
                    .transpose()
                    .map(|d| (key, d)),
            }
        };
        let (d_field, lease_duration) = duration(
            "--leader-election-lease-duration",
            self.lease_duration,
            "leaderElection.leaseDuration",
            file.lease_duration,
        )?;
        let lease_duration = lease_duration.unwrap_or(DEFAULT_LEASE_DURATION);
        let (r_field, renew_deadline) = duration(
            "--leader-election-renew-deadline",
            self.renew_deadline,
            "leaderElection.renewDeadline",
            file.renew_deadline,
        )?;
        let renew_deadline = renew_deadline.unwrap_or(DEFAULT_RENEW_DEADLINE);
        let (p_field, retry_period) = duration(
            "--leader-election-retry-period",
            self.retry_period,
            "leaderElection.retryPeriod",
            file.retry_period,
        )?;
        let retry_period = retry_period.unwrap_or(DEFAULT_RETRY_PERIOD);
        let show = |d: Duration| format!("{d:?}");
        if lease_duration < Duration::from_secs(1) {
            return Err(invalid(d_field, show(lease_duration), "must be at least 1s"));
        }
        if renew_deadline >= lease_duration {
            return Err(invalid(
                r_field,
                show(renew_deadline),
                format!("must be shorter than the lease duration ({lease_duration:?})"),
            ));
        }
        if retry_period.is_zero() || retry_period >= renew_deadline {
            return Err(invalid(
                p_field,
                show(retry_period),
                format!("must be above zero and shorter than the renew deadline ({renew_deadline:?})"),
            ));
        }
        Ok(Some(LeaderElection {
            namespace,
            lease_name,
            identity,
            lease_duration,
            renew_deadline,
            retry_period,
        }))
    }
}

/// The flag's value if given, else the file's; with the name to blame if the value is bad.
pub fn pick<T: Clone>(
    flag: &'static str,
    flag_value: &Option<T>,
    key: &'static str,
    file_value: Option<T>,
) -> (&'static str, Option<T>) {
    match flag_value {
        Some(v) => (flag, Some(v.clone())),
        None => (key, file_value),
    }
}

/// The pod name (`HOSTNAME` in a pod, else the kernel's host name) and the process id, so two
/// processes on one machine never share an identity.
pub fn default_identity(fallback: &str) -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| fallback.to_owned());
    format!("{host}-{}", std::process::id())
}

/// A duration as every mode's flags and configuration files take it: the Go-style grammar of
/// `ocm_score_api::duration` (`90s`, `1m30s`, `500ms`, `1h`, bare seconds `90`), which is what we
/// write; and, read only, the forms the Thanos scorer's settings took before its grammar was folded
/// in here (jiff's friendly format: `1.5s`, `2 minutes`, `1h 30m`; ISO 8601: `PT1M30S`), so no
/// setting that worked stops working. Negative durations are refused; a mode checks its own bounds.
///
/// The agent's flags keep the Go-style grammar alone (`ocm_score_agent_contract::duration_arg`): the hub
/// renders them and checks add-on variables with the same parser, and `TieredPlacement` fields are API.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    ocm_score_api::duration::parse(text)
        .ok()
        .or_else(|| {
            let signed: jiff::SignedDuration = text.trim().parse().ok()?;
            Duration::try_from(signed).ok()
        })
        .ok_or_else(|| format!("expected a duration such as 15s, 2m or 1m30s, got {text:?}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        probes: ProbeArgs,
        #[command(flatten)]
        leader: LeaderElectionArgs,
    }

    const DEFAULTS: LeaderDefaults = LeaderDefaults {
        lease_name: "ocm-score-test",
        namespace: Some("ocm-score"),
        identity_fallback: "test",
    };

    fn parse(args: &[&str]) -> Cli {
        Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied())).expect("parses")
    }

    #[test]
    fn defaults() {
        let cli = parse(&[]);
        assert_eq!(cli.probes.address(), "0.0.0.0:8080".parse().expect("addr"));
        let le = cli
            .leader
            .resolve(LeaderElectionFile::default(), &DEFAULTS)
            .expect("valid")
            .expect("on by default");
        assert_eq!(le.namespace.as_deref(), Some("ocm-score"));
        assert_eq!(le.lease_name, "ocm-score-test");
        assert_eq!(
            (le.lease_duration, le.renew_deadline, le.retry_period),
            (
                DEFAULT_LEASE_DURATION,
                DEFAULT_RENEW_DEADLINE,
                DEFAULT_RETRY_PERIOD
            )
        );
        assert!(
            le.identity.ends_with(&format!("-{}", std::process::id())),
            "{}",
            le.identity
        );
    }

    #[test]
    fn flags_override_the_file_and_old_spellings_still_parse() {
        let file = LeaderElectionFile {
            lease_name: Some("from-file".into()),
            lease_duration: Some("30s".into()),
            renew_deadline: Some("20s".into()),
            ..Default::default()
        };
        let cli = parse(&[
            "--lease-duration",
            "40s",
            "--leader-identity=me",
            "--metrics-addr=127.0.0.1:9",
        ]);
        let le = cli.leader.resolve(file, &DEFAULTS).expect("valid").expect("on");
        assert_eq!(le.lease_name, "from-file");
        assert_eq!(le.lease_duration, Duration::from_secs(40));
        assert_eq!(le.renew_deadline, Duration::from_secs(20));
        assert_eq!(le.identity, "me");
        assert_eq!(cli.probes.address(), "127.0.0.1:9".parse().expect("addr"));
        let off = parse(&["--leader-elect=false"]);
        assert_eq!(
            off.leader.resolve(LeaderElectionFile::default(), &DEFAULTS),
            Ok(None)
        );
    }

    #[test]
    fn durations_in_the_go_style_grammar_and_the_forms_thanos_took() {
        for (text, millis) in [
            ("90s", 90_000),
            ("1m30s", 90_000),
            ("500ms", 500),
            ("1h", 3_600_000),
            ("90", 90_000),
            ("0s", 0),
            ("1.5s", 1_500),
            ("2 minutes", 120_000),
            ("1h 30m", 5_400_000),
            ("PT1M30S", 90_000),
        ] {
            assert_eq!(parse_duration(text), Ok(Duration::from_millis(millis)), "{text}");
        }
        for bad in ["", "soon", "-5s", "-PT5S", "1x"] {
            let err = parse_duration(bad).expect_err(bad);
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
    }

    #[test]
    fn bad_values_name_the_flag_or_key() {
        let err = Cli::try_parse_from(["x", "--leader-election-lease-duration", "soon"]).expect_err("bad");
        assert!(
            err.to_string().contains("--leader-election-lease-duration") && err.to_string().contains("soon")
        );
        assert_eq!(err.exit_code(), 2);
        let err = parse(&["--leader-election-retry-period", "20s"])
            .leader
            .resolve(LeaderElectionFile::default(), &DEFAULTS)
            .expect_err("retry beyond the renew deadline");
        assert_eq!(err.field, "--leader-election-retry-period");
        let file = LeaderElectionFile {
            renew_deadline: Some("1m".into()),
            ..Default::default()
        };
        let err = parse(&[])
            .leader
            .resolve(file, &DEFAULTS)
            .expect_err("deadline beyond duration");
        assert_eq!(err.field, "leaderElection.renewDeadline");
        let file = LeaderElectionFile {
            namespace: Some("Not_A_Namespace".into()),
            ..Default::default()
        };
        let err = parse(&[])
            .leader
            .resolve(file, &DEFAULTS)
            .expect_err("bad namespace");
        assert!(err.to_string().contains("Not_A_Namespace"), "{err}");
    }
}
