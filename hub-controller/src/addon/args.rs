//! `ocm-score-hub addon-manager` flags. Every flag is also an environment variable (`--x` is
//! `OCM_SCORE_X`; the old names are `ocm_score_shell::cli::RENAMED_MODE_ENV`); values are
//! checked by clap (bad ones exit 2 naming the flag and value), then combined into [`Settings`].

use super::names;
use crate::addon::agent::manifests::AgentDefaults;
use crate::addon::lifecycle::availability::HealthMode;
use clap::{Args, ValueEnum};
use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use ocm_score_api::quantity::approximate_f64;
use ocm_score_shell::args::parse_duration;
use ocm_score_shell::args::{
    LeaderDefaults, LeaderElection, LeaderElectionArgs, LeaderElectionFile, ProbeArgs,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Args, Debug, Clone)]
pub struct AddonManagerArgs {
    /// Name of the add-on: the ClusterManagementAddOn and every ManagedClusterAddOn carry it.
    #[arg(long, env = "OCM_SCORE_ADDON_NAME", default_value = names::DEFAULT_ADDON_NAME, value_parser = parse_dns_label)]
    pub addon_name: String,

    /// Image of the agent deployed to every managed cluster, with its registry (`quay.io/org/ocm-score:0.1.0`);
    /// AddOnDeploymentConfig registries may rewrite it. The default is the image this release
    /// builds (the Dockerfile's and `control-plane image`'s tag).
    #[arg(long, env = "OCM_SCORE_AGENT_IMAGE", default_value = ocm_score_agent_contract::IMAGE)]
    pub agent_image: String,

    /// Pull policy of the agent image.
    #[arg(long, env = "OCM_SCORE_AGENT_IMAGE_PULL_POLICY", default_value = "IfNotPresent",
          value_parser = ["Always", "IfNotPresent", "Never"])]
    pub agent_image_pull_policy: String,

    /// Resource requests of the agent container, `name=quantity` comma separated.
    #[arg(long, env = "OCM_SCORE_AGENT_REQUESTS", default_value = "cpu=20m,memory=64Mi", value_parser = parse_resources)]
    pub agent_requests: ResourceList,

    /// Resource limits of the agent container, `name=quantity` comma separated.
    #[arg(long, env = "OCM_SCORE_AGENT_LIMITS", default_value = "memory=256Mi", value_parser = parse_resources)]
    pub agent_limits: ResourceList,

    /// How the add-on's `Available` condition is decided: `lease` (the klusterlet reads the Lease the
    /// agent renews) or `deployment-availability` (we read the agent Deployment's status from the work).
    #[arg(long, env = "OCM_SCORE_HEALTH_CHECK", value_enum, default_value_t = HealthCheckArg::Lease)]
    pub health_check: HealthCheckArg,

    /// `/metrics`, `/healthz` and `/readyz` (the process shell's flags).
    #[command(flatten)]
    pub probes: ProbeArgs,

    /// Leader election (the process shell's flags).
    #[command(flatten)]
    pub leader_election: LeaderElectionArgs,

    /// How many add-ons are reconciled at once.
    #[arg(long, env = "OCM_SCORE_WORKERS", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..=256))]
    pub workers: u16,

    /// Re-check every add-on this often even without events.
    #[arg(long, env = "OCM_SCORE_RESYNC_PERIOD", default_value = "10m", value_parser = parse_duration)]
    pub resync_period: Duration,

    /// Remove a cluster's add-on only once the install strategy's Placements have left it out this
    /// long: OCM rewrites a Placement's PlacementDecisions one at a time, and a cluster missing
    /// for that moment must keep its agent.
    #[arg(long, env = "OCM_SCORE_INSTALL_REMOVAL_GRACE", default_value = "30s", value_parser = parse_duration)]
    pub install_removal_grace: Duration,

    /// Kubeconfig of the hub; default: $KUBECONFIG, ~/.kube/config, or the in-cluster account.
    #[arg(long, env = "OCM_SCORE_KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
}

/// The add-on manager's Lease, in its own namespace unless told otherwise.
pub const LEADER_DEFAULTS: LeaderDefaults = LeaderDefaults {
    lease_name: "ocm-score-addon-manager",
    namespace: Some("ocm-score"),
    identity_fallback: "addon-manager",
};

#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum HealthCheckArg {
    Lease,
    DeploymentAvailability,
}

/// `name=quantity` pairs.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResourceList(pub BTreeMap<String, Quantity>);

/// The settings the controllers run with, derived from the flags.
#[derive(Clone, Debug)]
pub struct Settings {
    pub addon: String,
    pub agent: AgentDefaults,
    pub health: HealthMode,
    pub resync: Duration,
    pub install_removal_grace: Duration,
    pub workers: u16,
}

impl AddonManagerArgs {
    /// The flags of a container's `args` that run `ocm-score-hub addon-manager` (the mode first),
    /// parsed as the binary parses them: for checks of what the shipped manifests run.
    pub fn from_container_args<'a>(args: impl IntoIterator<Item = &'a str>) -> Result<Self, String> {
        #[derive(clap::Parser, Debug)]
        struct AddonManagerCommand {
            #[command(flatten)]
            args: AddonManagerArgs,
        }
        let mut args = args.into_iter();
        match args.next() {
            Some("addon-manager") => {}
            other => return Err(format!("the first argument is {other:?}, not addon-manager")),
        }
        <AddonManagerCommand as clap::Parser>::try_parse_from(std::iter::once("ocm-score-hub").chain(args))
            .map(|command| command.args)
            .map_err(|e| e.to_string())
    }

    pub fn settings(&self) -> Settings {
        let list = |r: &ResourceList| (!r.0.is_empty()).then(|| r.0.clone());
        Settings {
            addon: self.addon_name.clone(),
            agent: AgentDefaults {
                image: self.agent_image.clone(),
                image_pull_policy: self.agent_image_pull_policy.clone(),
                resources: ResourceRequirements {
                    requests: list(&self.agent_requests),
                    limits: list(&self.agent_limits),
                    ..Default::default()
                },
            },
            health: match self.health_check {
                HealthCheckArg::Lease => HealthMode::Lease,
                HealthCheckArg::DeploymentAvailability => HealthMode::DeploymentAvailability,
            },
            resync: self.resync_period,
            install_removal_grace: self.install_removal_grace,
            workers: self.workers,
        }
    }

    /// Checks between flags that clap cannot express; the leader election settings (`None`: off).
    pub fn validate(&self) -> Result<Option<LeaderElection>, String> {
        if self.agent_image.trim().is_empty() {
            return Err("--agent-image: must not be empty".into());
        }
        self.leader_election
            .resolve(LeaderElectionFile::default(), &LEADER_DEFAULTS)
            .map_err(|e| e.to_string())
    }
}

/// Why an image reference may not be pulled the same way on every managed cluster, if it may not: a
/// short name (no registry host) is resolved by each container runtime its own way (containerd
/// prepends `docker.io/`, CRI-O in enforcing mode refuses it).
pub fn short_image_name(image: &str) -> Option<String> {
    let first = image.split_once('/').map(|(first, _)| first);
    let has_registry =
        first.is_some_and(|host| host.contains('.') || host.contains(':') || host == "localhost");
    (!has_registry).then(|| {
        format!(
            "--agent-image={image:?} names no registry; container runtimes resolve short names \
             differently (CRI-O may refuse them): give the full reference, e.g. quay.io/org/{image}"
        )
    })
}

fn parse_dns_label(value: &str) -> Result<String, String> {
    if ocm_score_api::names::is_dns_label(value) {
        Ok(value.to_string())
    } else {
        Err(format!("{value:?} is not a DNS label"))
    }
}

fn parse_resources(value: &str) -> Result<ResourceList, String> {
    let mut out = BTreeMap::new();
    for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        let (name, quantity) = item
            .split_once('=')
            .ok_or_else(|| format!("{item:?}: expected name=quantity"))?;
        let (name, quantity) = (name.trim(), quantity.trim());
        if !is_quantity(quantity) {
            return Err(format!(
                "{item:?}: {quantity:?} is not a quantity such as 100m, 64Mi or 1"
            ));
        }
        if out
            .insert(name.to_string(), Quantity(quantity.to_string()))
            .is_some()
        {
            return Err(format!("{name:?} given twice"));
        }
    }
    Ok(ResourceList(out))
}

/// A quantity the API server accepts (apimachinery's parser, as ported in scheduler-core) that
/// starts with a number: apimachinery reads some bare suffixes (`Ki`, `e3`) as zero, never what is meant.
fn is_quantity(q: &str) -> bool {
    let number_end = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(q.len());
    q[..number_end].contains(|c: char| c.is_ascii_digit()) && approximate_f64(q).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        args: AddonManagerArgs,
    }

    #[test]
    fn defaults_and_settings() {
        let cli = Cli::try_parse_from(["x", "--agent-image", "quay.io/o/a:v1"]).expect("parses");
        cli.args.validate().expect("valid");
        let s = cli.args.settings();
        assert_eq!(s.addon, "resource-usage-collect");
        assert_eq!(s.health, HealthMode::Lease);
        let requests = s.agent.resources.requests.expect("requests");
        assert_eq!(requests["cpu"], Quantity("20m".into()));
        assert_eq!(
            s.agent.resources.limits.expect("limits")["memory"],
            Quantity("256Mi".into())
        );
    }

    #[test]
    fn bad_values_name_the_flag_and_value() {
        let cases = [
            (vec!["--addon-name", "Bad_Name"], "Bad_Name"),
            (vec!["--agent-requests", "cpu=lots"], "lots"),
            (vec!["--resync-period", "often"], "often"),
            (vec!["--health-check", "ping"], "ping"),
        ];
        for (extra, needle) in cases {
            let mut argv = vec!["x", "--agent-image", "i"];
            argv.extend(extra.iter().copied());
            let err = Cli::try_parse_from(argv).expect_err(needle);
            assert_eq!(err.exit_code(), 2);
            assert!(err.to_string().contains(needle), "{err}");
        }
        let cli = Cli::try_parse_from(["x", "--agent-image", "i", "--leader-election-retry-period", "20s"])
            .expect("parses");
        assert!(
            cli.args
                .validate()
                .expect_err("retry >= lease")
                .contains("--leader-election-retry-period")
        );
    }

    #[test]
    fn short_image_names_are_told_apart_from_full_references() {
        for full in [
            "quay.io/o/ocm-score:0.1.0",
            "localhost/ocm-score:0.1.0",
            "registry:5000/ocm-score",
            "docker.io/library/ocm-score@sha256:0123",
        ] {
            assert_eq!(short_image_name(full), None, "{full}");
        }
        for short in ["ocm-score:0.1.0", "org/ocm-score:0.1.0", "ocm-score"] {
            let warning = short_image_name(short).expect(short);
            assert!(
                warning.contains(short) && warning.contains("registry"),
                "{warning}"
            );
        }
    }

    #[test]
    fn quantities() {
        for ok in ["1", "100m", "64Mi", "1.5Gi", "1e3", "0.5", "2E+2"] {
            assert!(is_quantity(ok), "{ok}");
        }
        for bad in ["", "m", "1.2.3", "1Zi", "1e", "1e+-3", "lots", "-"] {
            assert!(!is_quantity(bad), "{bad}");
        }
    }
}
