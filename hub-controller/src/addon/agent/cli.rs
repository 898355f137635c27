//! The `ocm-score-agent` command line as the hub renders it into the agent Deployment.
//!
//! Flag names, defaults, limits and the rules across flags are the agent's contract
//! (`ocm_score_agent_contract`, the crate the agent parses its own flags with); this module re-exports the
//! parts the hub renders and adds what only the Deployment needs. `tests/addon_agent_cli.rs` runs
//! the rendered command line through the agent's real clap definition.

pub use ocm_score_agent_contract::flag::{
    ADDON_NAME, ADDON_NAMESPACE, CLUSTER_NAME, DEDUCT_PENDING, EXTENDED_RESOURCE, HUB_KUBECONFIG,
    METRICS_BIND_ADDRESS, NORMALIZE, REFRESH_INTERVAL, RENEW_EVERY, SCORE_STEP, SCORES, SOURCE, VALIDITY,
    arg,
};
pub use ocm_score_agent_contract::{BINARY, RUN as SUBCOMMAND};

/// The process shell's log flag (shared by every binary mode, not part of the agent's own contract).
pub const LOG_FORMAT: &str = "--log-format";

/// Every flag the hub renders, for the test that checks them against the agent.
pub const ALL_FLAGS: &[&str] = &[
    HUB_KUBECONFIG,
    CLUSTER_NAME,
    ADDON_NAME,
    ADDON_NAMESPACE,
    METRICS_BIND_ADDRESS,
    LOG_FORMAT,
    SOURCE,
    REFRESH_INTERVAL,
    VALIDITY,
    RENEW_EVERY,
    NORMALIZE,
    SCORE_STEP,
    EXTENDED_RESOURCE,
    SCORES,
    DEDUCT_PENDING,
];

/// Port of the agent's /metrics, /healthz and /readyz inside the pod.
pub const METRICS_PORT: i32 = 8080;

/// Where the hub kubeconfig Secret is mounted: the agent reads `<dir>/kubeconfig`, whose relative
/// certificate paths resolve against the same directory, and picks up rotated certificates.
pub const HUB_KUBECONFIG_DIR: &str = "/var/run/secrets/ocm/hub-kubeconfig";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_long_unique_and_kebab_case() {
        let mut seen = std::collections::BTreeSet::new();
        for flag in ALL_FLAGS {
            assert!(flag.starts_with("--"), "{flag}");
            assert!(
                flag[2..].chars().all(|c| c.is_ascii_lowercase() || c == '-'),
                "{flag}"
            );
            assert!(seen.insert(flag), "duplicate {flag}");
        }
        assert_eq!(arg(VALIDITY, "-1s"), "--validity=-1s");
    }
}
