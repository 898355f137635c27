//! The `ocm-score-agent` command line as the hub renders it into the agent Deployment.
//!
//! Every flag name the hub writes is here and nowhere else, so one test can hold them against the
//! agent's real clap definition (`ocm-score-agent run --help`).

/// The agent subcommand the Deployment runs.
pub const SUBCOMMAND: &str = "run";

/// Flags the hub always sets.
pub const HUB_KUBECONFIG: &str = "--hub-kubeconfig";
pub const CLUSTER_NAME: &str = "--cluster-name";
pub const ADDON_NAME: &str = "--addon-name";
pub const ADDON_NAMESPACE: &str = "--addon-namespace";
pub const METRICS_ADDR: &str = "--metrics-addr";
pub const LOG_FORMAT: &str = "--log-format";

/// Flags set from AddOnDeploymentConfig customized variables.
pub const SOURCE: &str = "--source";
pub const REFRESH_INTERVAL: &str = "--refresh-interval";
pub const VALIDITY: &str = "--validity";
pub const NORMALIZE: &str = "--normalize";
pub const SCORE_STEP: &str = "--score-step";
pub const EXTENDED_RESOURCE: &str = "--extended-resource";
pub const SCORES: &str = "--scores";

/// Every flag above, for the test that checks them against the agent.
pub const ALL_FLAGS: &[&str] = &[
    HUB_KUBECONFIG,
    CLUSTER_NAME,
    ADDON_NAME,
    ADDON_NAMESPACE,
    METRICS_ADDR,
    LOG_FORMAT,
    SOURCE,
    REFRESH_INTERVAL,
    VALIDITY,
    NORMALIZE,
    SCORE_STEP,
    EXTENDED_RESOURCE,
    SCORES,
];

/// The agent's defaults the hub relies on when no variable overrides them (checked by the same test).
pub const DEFAULT_REFRESH_INTERVAL: &str = "60s";
pub const DEFAULT_VALIDITY: &str = "3m";
pub const DEFAULT_SOURCE: &str = "cluster";

/// Port of the agent's /metrics, /healthz and /readyz inside the pod.
pub const METRICS_PORT: i32 = 8080;

/// Where the hub kubeconfig Secret is mounted: the agent reads `<dir>/kubeconfig`, whose relative
/// certificate paths resolve against the same directory, and picks up rotated certificates.
pub const HUB_KUBECONFIG_DIR: &str = "/var/run/secrets/ocm/hub-kubeconfig";

/// `--flag=value`, the form that survives values starting with `-`.
pub fn arg(flag: &str, value: &str) -> String {
    format!("{flag}={value}")
}

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
