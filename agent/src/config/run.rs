//! `run`'s settings: the refresh, write and renewal timing (the contract's [`Timing`] rules), the
//! probe address and the add-on Lease.

use super::{ConfigError, HubTarget, ScoringConfig, check_dns_label, check_dns_subdomain};
use crate::cli::{Cli, Command, RunArgs};
use ocm_score_agent_contract::{Timing, flag};
use ocm_score_api::duration::format as fmt_duration;
use std::net::SocketAddr;
use std::time::Duration;

#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub name: String,
    pub namespace: String,
    pub interval: Duration,
}

#[derive(Clone, Debug)]
pub struct RunConfig {
    pub scoring: ScoringConfig,
    pub hub: HubTarget,
    pub refresh_interval: Duration,
    pub jitter: f64,
    pub debounce: Duration,
    pub min_write_interval: Duration,
    pub score_step: u8,
    /// The renew-margin rule: the longest one refresh may take to land its write (a refresh as late
    /// as the jitter allows, a read as slow as --api-timeout, a write as slow as --hub-timeout).
    pub renew_margin: Duration,
    /// `--renew-every`: validUntil is renewed at every Nth refresh (1 unless --validity was given).
    pub renew_every: u32,
    /// Where `/metrics`, `/healthz` and `/readyz` are served.
    pub metrics_bind_address: SocketAddr,
    pub lease: Option<LeaseConfig>,
    /// `--owned-by-addon`: the ManagedClusterAddOn the score object is created owned by.
    pub score_owner: Option<String>,
    /// `--shapes-recheck-interval`: how often a hub without the WorkloadShape CRD is asked again.
    pub shapes_recheck: Duration,
}

impl RunConfig {
    /// What the agent makes of a `run` command line (`argv[0]` first): its validated settings, or
    /// the usage or validation error it would exit with. For the hub, which renders the command
    /// line and must know that the agent accepts it.
    pub fn from_argv<I, T>(argv: I) -> Result<Self, String>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let cli = <Cli as clap::Parser>::try_parse_from(argv).map_err(|e| e.to_string())?;
        let Command::Run(args) = cli.command else {
            return Err(format!("not the {} subcommand", ocm_score_agent_contract::RUN));
        };
        Self::from_args(args).map_err(|e| e.to_string())
    }

    pub fn from_args(args: RunArgs) -> Result<Self, ConfigError> {
        let RunArgs {
            scoring,
            refresh_interval,
            jitter,
            debounce,
            min_write_interval,
            score_step,
            renew_every,
            probes,
            addon_name,
            addon_namespace,
            lease,
            owned_by_addon,
            lease_interval,
            shapes_recheck_interval,
        } = args;
        let renewal = Timing {
            refresh: refresh_interval.0,
            jitter,
            debounce: debounce.0,
            min_write_interval: min_write_interval.0,
            api_timeout: scoring.api_timeout.0,
            hub_timeout: scoring.hub_timeout.0,
            validity: scoring.validity.map(|v| v.0),
            renew_every,
        }
        .check()?;
        let scoring = ScoringConfig::from_args(scoring, renewal.validity)?;
        let hub = scoring.require_hub()?;
        if lease || owned_by_addon {
            check_dns_subdomain(flag::ADDON_NAME, &addon_name)?;
        }
        let score_owner = owned_by_addon.then(|| addon_name.clone());
        let lease = if lease {
            check_dns_label(flag::ADDON_NAMESPACE, &addon_namespace)?;
            if lease_interval.0 < Duration::from_secs(1) {
                return Err(ConfigError::new(
                    flag::LEASE_INTERVAL,
                    fmt_duration(lease_interval.0),
                    "must be at least 1s",
                ));
            }
            Some(LeaseConfig {
                name: addon_name,
                namespace: addon_namespace,
                interval: lease_interval.0,
            })
        } else {
            None
        };
        if shapes_recheck_interval.0 < ocm_score_agent_contract::MIN_SHAPES_RECHECK_INTERVAL {
            return Err(ConfigError::new(
                flag::SHAPES_RECHECK_INTERVAL,
                fmt_duration(shapes_recheck_interval.0),
                format!(
                    "must be at least {}",
                    fmt_duration(ocm_score_agent_contract::MIN_SHAPES_RECHECK_INTERVAL)
                ),
            ));
        }
        Ok(RunConfig {
            scoring,
            hub,
            refresh_interval: refresh_interval.0,
            jitter,
            debounce: debounce.0,
            min_write_interval: min_write_interval.0,
            score_step,
            renew_margin: renewal.renew_margin,
            renew_every: renewal.renew_every,
            metrics_bind_address: probes.address(),
            lease,
            score_owner,
            shapes_recheck: shapes_recheck_interval.0,
        })
    }
}
