//! The `ocm-score-agent` command line as the hub renders it into the agent Deployment.
//!
//! Every flag name the hub writes is here and nowhere else, so one test can hold them against the
//! agent's real clap definition (`ocm-score-agent run --help`).

use std::time::Duration;

/// The agent executable, looked up on the image's PATH (the project image holds both binaries).
pub const BINARY: &str = "ocm-score-agent";

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

/// The agent's defaults and limits the hub checks configurations against before rolling them out
/// (`hub-controller/tests/addon_agent_cli.rs` holds them against the agent's own validation).
pub const DEFAULT_REFRESH_INTERVAL: Duration = Duration::from_secs(60);
/// `--validity` as the agent derives it at the default refresh, jitter and timeouts (66s + 30s + 1s).
pub const DEFAULT_VALIDITY: Duration = Duration::from_secs(97);
/// `--debounce` default: the refresh interval may not be shorter.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_secs(5);
/// `--jitter` default: refreshes come up to 10 % late.
pub const DEFAULT_JITTER: f64 = 0.1;
/// `--min-write-interval` default: validity must be longer.
pub const DEFAULT_MIN_WRITE_INTERVAL: Duration = Duration::from_secs(15);
/// `--api-timeout` and `--hub-timeout` defaults: validity must exceed refresh × (1 + jitter) plus both,
/// so a late refresh that reads slowly and writes slowly still lands before the scores expire.
pub const DEFAULT_API_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_HUB_TIMEOUT: Duration = Duration::from_secs(20);
pub const MIN_VALIDITY: Duration = Duration::from_secs(10);
pub const MAX_VALIDITY: Duration = Duration::from_secs(24 * 3600);
pub const MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(1);

/// Resources the agent scores without configuration (an extended resource may not repeat them).
pub const BUILT_IN_RESOURCES: &[&str] = &["cpu", "memory", "nvidia.com/gpu", "google.com/tpu"];
/// Scores the agent publishes without configuration; an extended resource `R=prefix` adds
/// `<prefix>NodeAvailable` and `<prefix>ClusterAvailable`.
pub const BUILT_IN_SCORES: &[&str] = &[
    "cpuNodeAvailable",
    "cpuClusterAvailable",
    "memNodeAvailable",
    "memClusterAvailable",
    "gpuNodeAvailable",
    "gpuClusterAvailable",
    "tpuNodeAvailable",
    "tpuClusterAvailable",
    "cpuAvailable",
    "memAvailable",
];

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
