//! Validated configuration. Flag values are parsed by clap with the parsers of the agent's contract
//! (`ocm_score_agent_contract`); [`RunConfig::from_args`] / [`OnceConfig::from_args`] then check the flags
//! against each other with the contract's rules and return a [`ConfigError`] naming the flag and value.
//!
//! - [`scoring`]: what is scored and how, shared by both subcommands ([`ScoringConfig`]);
//! - [`hub`]: where scores are written ([`HubTarget`], from a kubeconfig or OCM's Secret directory);
//! - [`run`] and [`once`]: each subcommand's own settings and rules.

mod hub;
mod once;
mod run;
mod scoring;
#[cfg(test)]
mod tests;

pub use hub::HubTarget;
pub use ocm_score_agent_contract::{FlagError as ConfigError, Sources};
use ocm_score_api::names;
pub use once::OnceConfig;
pub use run::{LeaseConfig, RunConfig};
pub use scoring::ScoringConfig;

/// An RFC 1123 label (namespace and cluster names), by the process shell's rule.
fn check_dns_label(flag: &'static str, value: &str) -> Result<(), ConfigError> {
    check_name(
        flag,
        value,
        names::is_dns_label,
        "must be a DNS label (a-z, 0-9, '-', at most 63)",
    )
}

/// An RFC 1123 subdomain (object names), by the process shell's rule.
fn check_dns_subdomain(flag: &'static str, value: &str) -> Result<(), ConfigError> {
    check_name(
        flag,
        value,
        names::is_dns_subdomain,
        "must be a DNS subdomain (a-z, 0-9, '-', '.')",
    )
}

fn check_name(
    flag: &'static str,
    value: &str,
    valid: fn(&str) -> bool,
    rule: &str,
) -> Result<(), ConfigError> {
    if valid(value) {
        Ok(())
    } else {
        Err(ConfigError::new(flag, value, rule))
    }
}
