//! Command line: every flag is also an environment variable, `--some-thing` ↔ `OCM_SCORE_SOME_THING`
//! (the old names are `ocm_score_shell::cli::RENAMED_MODE_ENV`). Values are parsed (and so rejected with
//! the flag and value named, exit code 2) by clap with the parsers of the agent's contract
//! (`ocm_score_agent_contract`, shared with the hub), which also names the flags and holds their defaults;
//! `config` then checks the flags against each other.

use clap::{ArgAction, Args, Parser, Subcommand};
use ocm_score_agent_contract::{
    self as contract, DurationArg, ExtendedResource, NormalizeArg, Source, duration_arg, flag,
    parse_extended_resource, parse_normalize, parse_source,
};
use ocm_score_shell::args::ProbeArgs;
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "ocm-score-agent",
    version,
    about = "Publishes this cluster's free resources as OCM AddOnPlacementScores",
    long_about = "Publishes this cluster's free resources as the OCM AddOnPlacementScore \
                  `resource-usage-score`, with scores that expire when the data stops.\n\n\
                  Without a subcommand, `run` is assumed. Try `ocm-score-agent once --source host` \
                  on any machine."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Watch the cluster, keep the hub's AddOnPlacementScore current and renew the add-on Lease (the default).
    Run(RunArgs),
    /// Compute the scores once, print the AddOnPlacementScore as YAML and exit.
    Once(OnceArgs),
}

#[derive(Args, Debug, Clone)]
pub struct ScoringArgs {
    /// Where the figures come from, comma separated: `cluster` (Nodes and Pods of the managed cluster),
    /// `kubelet` (adds real usage from each node's /metrics/resource; needs `cluster`), `host` (this
    /// machine, through the OS; needs no cluster). Several sources: each figure is the smallest reported.
    #[arg(long = flag::long(flag::SOURCE), env = "OCM_SCORE_SOURCE", value_delimiter = ',',
          default_value = contract::DEFAULT_SOURCES, value_parser = parse_source)]
    pub sources: Vec<Source>,

    /// Extra extended resources to score, comma separated, each `RESOURCE[=PREFIX]`, e.g.
    /// `amd.com/gpu=amdGpu` publishes `amdGpuNodeAvailable` and `amdGpuClusterAvailable`.
    #[arg(long = flag::long(flag::EXTENDED_RESOURCE), env = "OCM_SCORE_EXTENDED_RESOURCE", value_delimiter = ',',
          value_parser = parse_extended_resource)]
    pub extended_resources: Vec<ExtendedResource>,

    /// Normalization per score, comma separated, each `SCORE=absolute:MIN:MAX` (natural units: cores,
    /// GiB, devices) or `SCORE=percent:MIN:MAX` (percent of capacity; `SCORE=percent` means 0:100).
    #[arg(long = flag::long(flag::NORMALIZE), env = "OCM_SCORE_NORMALIZE", value_delimiter = ',', value_parser = parse_normalize)]
    pub normalize: Vec<NormalizeArg>,

    /// Publish only these scores (comma separated names); default: all of them.
    #[arg(long = flag::long(flag::SCORES), env = "OCM_SCORE_SCORES", value_delimiter = ',')]
    pub scores: Vec<String>,

    /// Name of the AddOnPlacementScore object written in the cluster namespace on the hub.
    #[arg(long = flag::long(flag::SCORE_OBJECT_NAME), env = "OCM_SCORE_SCORE_OBJECT_NAME", default_value = ocm_score_api::well_known::RESOURCE_USAGE_SCORE)]
    pub score_object_name: String,

    /// How long published scores stay valid (`validUntil` = now + this). Default for `run`: derived
    /// from --renew-every (see there); for `once`: 3m.
    #[arg(long = flag::long(flag::VALIDITY), env = "OCM_SCORE_VALIDITY", value_parser = duration_arg)]
    pub validity: Option<DurationArg>,

    /// Kubeconfig of the managed cluster; default: $KUBECONFIG, ~/.kube/config, or the in-cluster account.
    #[arg(long = flag::long(flag::MANAGED_KUBECONFIG), env = "OCM_SCORE_MANAGED_KUBECONFIG")]
    pub managed_kubeconfig: Option<PathBuf>,

    /// Hub kubeconfig: a file, or the directory OCM mounts the `<addon>-hub-kubeconfig` Secret into
    /// (holding `kubeconfig`, `tls.crt`, `tls.key`, `cluster-name`). Rotated certificates are picked up.
    #[arg(long = flag::long(flag::HUB_KUBECONFIG), env = "OCM_SCORE_HUB_KUBECONFIG")]
    pub hub_kubeconfig: Option<PathBuf>,

    /// The managed cluster's name (its namespace on the hub); default: `cluster-name` in the hub
    /// kubeconfig directory.
    #[arg(long = flag::long(flag::CLUSTER_NAME), env = "OCM_SCORE_CLUSTER_NAME")]
    pub cluster_name: Option<String>,

    /// Timeout of each request to the managed cluster's API server (health probe, kubelet scrape).
    #[arg(long = flag::long(flag::API_TIMEOUT), env = "OCM_SCORE_API_TIMEOUT",
          default_value_t = DurationArg(contract::DEFAULT_API_TIMEOUT), value_parser = duration_arg)]
    pub api_timeout: DurationArg,

    /// Timeout of each request to the hub (a write is a read, maybe a create, and the status update).
    #[arg(long = flag::long(flag::HUB_TIMEOUT), env = "OCM_SCORE_HUB_TIMEOUT",
          default_value_t = DurationArg(contract::DEFAULT_HUB_TIMEOUT), value_parser = duration_arg)]
    pub hub_timeout: DurationArg,

    /// How many nodes the kubelet source scrapes at once.
    #[arg(long = flag::long(flag::KUBELET_CONCURRENCY), env = "OCM_SCORE_KUBELET_CONCURRENCY", default_value_t = 8,
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub kubelet_concurrency: u16,

    /// WorkloadShapes to publish `fits.<shape>` scores for, from this YAML file (a list of
    /// WorkloadShape objects, a `kind: List`, or one per document) instead of the hub's. Needs the
    /// cluster source. Without it, with the cluster source, `run` watches the hub's WorkloadShapes and
    /// `once` lists them once when it has the hub kubeconfig and cluster name (without those: none).
    #[arg(long = flag::long(flag::SHAPES), env = "OCM_SCORE_SHAPES", value_name = "FILE")]
    pub shapes: Option<PathBuf>,

    /// Deduct pending, unbound pods (first-fit onto eligible nodes, in name order) before counting
    /// the replicas of each WorkloadShape that fit.
    #[arg(long = flag::long(flag::DEDUCT_PENDING), env = "OCM_SCORE_DEDUCT_PENDING",
          default_value_t = contract::DEFAULT_DEDUCT_PENDING, action = ArgAction::Set)]
    pub deduct_pending: bool,

    /// Log format.
    #[arg(long, env = "OCM_SCORE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[command(flatten)]
    pub scoring: ScoringArgs,

    /// How often scores are recomputed when nothing changes.
    #[arg(long = flag::long(flag::REFRESH_INTERVAL), env = "OCM_SCORE_REFRESH_INTERVAL",
          default_value_t = DurationArg(contract::DEFAULT_REFRESH_INTERVAL), value_parser = duration_arg)]
    pub refresh_interval: DurationArg,

    /// Random spread of each refresh, as a fraction of the interval (0.1 = ±10 %), so a fleet of agents
    /// does not write to the hub in lockstep.
    #[arg(long = flag::long(flag::JITTER), env = "OCM_SCORE_JITTER", default_value_t = contract::DEFAULT_JITTER)]
    pub jitter: f64,

    /// After a node or pod change, wait this long for more changes before recomputing.
    #[arg(long = flag::long(flag::DEBOUNCE), env = "OCM_SCORE_DEBOUNCE",
          default_value_t = DurationArg(contract::DEFAULT_DEBOUNCE), value_parser = duration_arg)]
    pub debounce: DurationArg,

    /// Renew `validUntil` at every Nth refresh of an unchanged cluster [default: 1, every refresh].
    /// `validUntil` is then N × refresh × (1 + jitter) + api timeout + hub timeout (+1s) ahead: just
    /// long enough for N late refreshes with slow reads and writes. The trade, at the 60s default
    /// refresh: 1 → 60 hub writes per cluster per hour, a dead agent's scores expire within 97s; 2 → 30
    /// writes, 163s. Cannot be combined with --validity.
    #[arg(long = flag::long(flag::RENEW_EVERY), env = "OCM_SCORE_RENEW_EVERY", value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=i64::from(contract::MAX_RENEW_EVERY)))]
    pub renew_every: Option<u32>,

    /// Least time between two writes caused by score changes (renewals are never delayed).
    #[arg(long = flag::long(flag::MIN_WRITE_INTERVAL), env = "OCM_SCORE_MIN_WRITE_INTERVAL",
          default_value_t = DurationArg(contract::DEFAULT_MIN_WRITE_INTERVAL), value_parser = duration_arg)]
    pub min_write_interval: DurationArg,

    /// Write only when some score moved by at least this much (or validUntil needs renewing): every
    /// write makes OCM reschedule Placements.
    #[arg(long = flag::long(flag::SCORE_STEP), env = "OCM_SCORE_SCORE_STEP", default_value_t = contract::DEFAULT_SCORE_STEP,
          value_parser = clap::value_parser!(u8).range(i64::from(contract::MIN_SCORE_STEP)..=i64::from(contract::MAX_SCORE_STEP)))]
    pub score_step: u8,

    /// `/metrics`, `/healthz` and `/readyz` (the process shell's flag, `--metrics-bind-address`;
    /// `--metrics-addr` is its deprecated spelling).
    #[command(flatten)]
    pub probes: ProbeArgs,

    /// The add-on's name: the Lease renewed for OCM's Lease health check is named after it.
    #[arg(long = flag::long(flag::ADDON_NAME), env = "OCM_SCORE_ADDON_NAME", default_value = "resource-usage-collect")]
    pub addon_name: String,

    /// The add-on's install namespace on the managed cluster (where the Lease lives).
    #[arg(
        long = flag::long(flag::ADDON_NAMESPACE),
        env = "OCM_SCORE_ADDON_NAMESPACE",
        default_value = "open-cluster-management-agent-addon"
    )]
    pub addon_namespace: String,

    /// Renew the add-on Lease (OCM's Lease health mode).
    #[arg(long, env = "OCM_SCORE_LEASE", default_value_t = true, action = ArgAction::Set)]
    pub lease: bool,

    /// Create the score object owned by the ManagedClusterAddOn `--addon-name` of the cluster
    /// namespace, and only while that add-on exists, so removing the add-on removes the score. For
    /// installs where no add-on manager of ours adopts the score (the AddOnTemplate install); needs
    /// `get` on that add-on on the hub.
    #[arg(long = flag::long(flag::OWNED_BY_ADDON), env = "OCM_SCORE_OWNED_BY_ADDON", default_value_t = false, action = ArgAction::Set)]
    pub owned_by_addon: bool,

    /// How often the Lease is renewed.
    #[arg(long = flag::long(flag::LEASE_INTERVAL), env = "OCM_SCORE_LEASE_INTERVAL", default_value = "60s", value_parser = duration_arg)]
    pub lease_interval: DurationArg,

    /// When the hub lacks the WorkloadShape CRD (no fits scores), check again about this often
    /// (spread ±1/3), with one discovery request, and watch WorkloadShapes once it is there.
    #[arg(long = flag::long(flag::SHAPES_RECHECK_INTERVAL), env = "OCM_SCORE_SHAPES_RECHECK_INTERVAL",
          default_value_t = DurationArg(contract::DEFAULT_SHAPES_RECHECK_INTERVAL), value_parser = duration_arg)]
    pub shapes_recheck_interval: DurationArg,
}

#[derive(Args, Debug, Clone)]
pub struct OnceArgs {
    #[command(flatten)]
    pub scoring: ScoringArgs,

    /// Also write the object to the hub (needs the hub kubeconfig and cluster name).
    #[arg(long = flag::long(flag::PUBLISH), env = "OCM_SCORE_PUBLISH", default_value_t = false)]
    pub publish: bool,
}

/// The log formats are the process shell's, the same in every mode.
pub use ocm_score_shell::logging::LogFormat;

/// The arguments with `run` inserted when no subcommand is given, so `ocm-score-agent --flags` runs.
pub fn with_default_subcommand<I: IntoIterator<Item = std::ffi::OsString>>(
    args: I,
) -> Vec<std::ffi::OsString> {
    let mut args: Vec<_> = args.into_iter().collect();
    let first = args.get(1).and_then(|a| a.to_str());
    let explicit = matches!(
        first,
        Some("run" | "once" | "help" | "-h" | "--help" | "-V" | "--version")
    );
    if !explicit {
        args.insert(1.min(args.len()), "run".into());
    }
    args
}

/// The arguments without the `--flag=` ones that give no value: such a flag counts as not given,
/// so its default applies. OCM's AddOnTemplate install writes `--flag={{VARIABLE}}` for every
/// variable the agent reads and substitutes an empty string for each one the AddOnDeploymentConfig
/// leaves out (charts/ocm-score/templates/addon-template.yaml).
pub fn without_empty_values<I: IntoIterator<Item = std::ffi::OsString>>(args: I) -> Vec<std::ffi::OsString> {
    args.into_iter()
        .enumerate()
        .filter(|(i, arg)| {
            let empty = arg
                .to_str()
                .and_then(|a| a.strip_prefix("--"))
                .is_some_and(|a| a.len() > 1 && a.find('=') == Some(a.len() - 1));
            *i == 0 || !empty
        })
        .map(|(_, arg)| arg)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn an_empty_flag_value_is_the_flag_not_given() {
        let args = without_empty_values(
            [
                "ocm-score-agent",
                "run",
                "--source=",
                "--refresh-interval=30s",
                "--validity=",
                "--scores==x",
                "--",
                "-=",
            ]
            .map(Into::into),
        );
        assert_eq!(
            args,
            [
                "ocm-score-agent",
                "run",
                "--refresh-interval=30s",
                "--scores==x",
                "--",
                "-="
            ]
            .map(std::ffi::OsString::from)
        );
        let cli = Cli::try_parse_from(with_default_subcommand(without_empty_values(
            ["ocm-score-agent", "--source=", "--validity=", "--source=host"].map(Into::into),
        )))
        .expect("parses");
        let Command::Run(run) = cli.command else {
            panic!("run is the default subcommand")
        };
        assert!(run.scoring.validity.is_none());
    }

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn run_is_the_default_subcommand() {
        let args = with_default_subcommand(["ocm-score-agent", "--source", "host"].map(Into::into));
        let cli = Cli::try_parse_from(args).expect("parses");
        assert!(matches!(cli.command, Command::Run(_)));
        let args = with_default_subcommand(["ocm-score-agent"].map(Into::into));
        assert!(matches!(
            Cli::try_parse_from(args).expect("parses").command,
            Command::Run(_)
        ));
        let args = with_default_subcommand(["ocm-score-agent", "once", "--source=host"].map(Into::into));
        assert!(matches!(
            Cli::try_parse_from(args).expect("parses").command,
            Command::Once(_)
        ));
    }

    #[test]
    fn a_bad_value_names_flag_and_value_and_exits_2() {
        let err = Cli::try_parse_from(["ocm-score-agent", "run", "--refresh-interval", "soon"])
            .expect_err("invalid");
        let text = err.to_string();
        assert!(
            text.contains("--refresh-interval") && text.contains("soon"),
            "{text}"
        );
        assert_eq!(err.exit_code(), 2);
        let err = Cli::try_parse_from(["ocm-score-agent", "once", "--source", "cluster,moon"])
            .expect_err("invalid");
        assert!(err.to_string().contains("moon"), "{err}");
        let err = Cli::try_parse_from(["ocm-score-agent", "run", "--score-step", "0"]).expect_err("invalid");
        assert!(err.to_string().contains("--score-step"), "{err}");
    }
}
