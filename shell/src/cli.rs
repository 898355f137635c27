//! Parsing a mode's command line with the deprecated spellings of the naming-scheme change still
//! accepted until [`REMOVED_IN`]: old flag names are hidden clap aliases (every hidden alias is a
//! deprecated spelling, [`deprecated_flags`]), old environment variables are listed in
//! [`RENAMED_ENV`] (shared flags) and [`RENAMED_MODE_ENV`] (one mode's flags) and read when the new
//! one is unset. Each use yields a warning naming that release, logged once logging is up
//! ([`warn_deprecated`]). CHANGELOG.md lists every deprecated spelling under its `Deprecated`
//! heading; `tests/tests/changelog.rs` keeps that list and these tables equal.

use clap::{Command, Parser};
use std::ffi::{OsStr, OsString};

/// The ocm-score release from which every deprecated spelling (a hidden flag alias, an old name in
/// [`RENAMED_ENV`] or [`RENAMED_MODE_ENV`]) stops working: the release after the one that renamed
/// them. Every deprecation warning names it, and so does CHANGELOG.md.
pub const REMOVED_IN: &str = "0.2.0";

/// Environment variables renamed to the `OCM_SCORE_<FLAG>` scheme: (new name, old name). An old name
/// applies to whichever argument of the running mode reads the new one.
pub const RENAMED_ENV: &[(&str, &str)] = &[
    ("OCM_SCORE_METRICS_BIND_ADDRESS", "OCM_SCORE_METRICS_ADDR"),
    ("OCM_SCORE_METRICS_BIND_ADDRESS", "METRICS_BIND_ADDRESS"),
    (
        "OCM_SCORE_METRICS_BIND_ADDRESS",
        "OCM_SCORE_THANOS_METRICS_BIND_ADDRESS",
    ),
    ("OCM_SCORE_LEADER_ELECT", "OCM_SCORE_THANOS_LEADER_ELECT"),
    ("OCM_SCORE_LEADER_ELECTION_NAMESPACE", "POD_NAMESPACE"),
    (
        "OCM_SCORE_LEADER_ELECTION_NAMESPACE",
        "OCM_SCORE_THANOS_LEADER_ELECTION_NAMESPACE",
    ),
    ("OCM_SCORE_LEADER_ELECTION_ID", "LEADER_ELECTION_ID"),
    (
        "OCM_SCORE_LEADER_ELECTION_ID",
        "OCM_SCORE_THANOS_LEADER_ELECTION_ID",
    ),
    ("OCM_SCORE_LEADER_ELECTION_IDENTITY", "POD_NAME"),
    (
        "OCM_SCORE_LEADER_ELECTION_IDENTITY",
        "OCM_SCORE_THANOS_LEADER_IDENTITY",
    ),
    (
        "OCM_SCORE_LEADER_ELECTION_LEASE_DURATION",
        "LEADER_ELECTION_LEASE_DURATION",
    ),
    (
        "OCM_SCORE_LEADER_ELECTION_LEASE_DURATION",
        "OCM_SCORE_THANOS_LEASE_DURATION",
    ),
    (
        "OCM_SCORE_LEADER_ELECTION_RENEW_DEADLINE",
        "OCM_SCORE_THANOS_RENEW_DEADLINE",
    ),
    (
        "OCM_SCORE_LEADER_ELECTION_RETRY_PERIOD",
        "LEADER_ELECTION_RETRY_PERIOD",
    ),
    (
        "OCM_SCORE_LEADER_ELECTION_RETRY_PERIOD",
        "OCM_SCORE_THANOS_RETRY_PERIOD",
    ),
];

/// Environment variables of one mode renamed to the `OCM_SCORE_<FLAG>` scheme: (the subcommands
/// that read the old name, new name, old name). An old name applies only within those subcommands,
/// so one that two modes spelled alike (`HUB_KUBECONFIG`) keeps each mode's meaning.
pub const RENAMED_MODE_ENV: &[(&[&str], &str, &str)] = &[
    // ocm-score-agent
    (
        &["run", "once"],
        "OCM_SCORE_MANAGED_KUBECONFIG",
        "MANAGED_KUBECONFIG",
    ),
    (&["run", "once"], "OCM_SCORE_HUB_KUBECONFIG", "HUB_KUBECONFIG"),
    (&["run", "once"], "OCM_SCORE_CLUSTER_NAME", "CLUSTER_NAME"),
    (
        &["run", "once"],
        "OCM_SCORE_EXTENDED_RESOURCE",
        "OCM_SCORE_EXTENDED_RESOURCES",
    ),
    (
        &["run", "once"],
        "OCM_SCORE_SCORE_OBJECT_NAME",
        "OCM_SCORE_OBJECT_NAME",
    ),
    (&["run"], "OCM_SCORE_SCORE_STEP", "OCM_SCORE_STEP"),
    // (the agent's and the add-on manager's --addon-name)
    (&["run", "addon-manager"], "OCM_SCORE_ADDON_NAME", "ADDON_NAME"),
    (&["run"], "OCM_SCORE_ADDON_NAMESPACE", "ADDON_NAMESPACE"),
    // ocm-score-hub addon-manager
    (&["addon-manager"], "OCM_SCORE_AGENT_IMAGE", "AGENT_IMAGE"),
    (
        &["addon-manager"],
        "OCM_SCORE_AGENT_IMAGE_PULL_POLICY",
        "AGENT_IMAGE_PULL_POLICY",
    ),
    (&["addon-manager"], "OCM_SCORE_AGENT_REQUESTS", "AGENT_REQUESTS"),
    (&["addon-manager"], "OCM_SCORE_AGENT_LIMITS", "AGENT_LIMITS"),
    (&["addon-manager"], "OCM_SCORE_HEALTH_CHECK", "HEALTH_CHECK"),
    (&["addon-manager"], "OCM_SCORE_WORKERS", "WORKERS"),
    (&["addon-manager"], "OCM_SCORE_RESYNC_PERIOD", "RESYNC_PERIOD"),
    (&["addon-manager"], "OCM_SCORE_KUBECONFIG", "HUB_KUBECONFIG"),
    // ocm-score-hub thanos-scorer
    (&["thanos-scorer"], "OCM_SCORE_CONFIG", "OCM_SCORE_THANOS_CONFIG"),
    (
        &["thanos-scorer"],
        "OCM_SCORE_QUERY_URL",
        "OCM_SCORE_THANOS_QUERY_URL",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_BEARER_TOKEN_FILE",
        "OCM_SCORE_THANOS_BEARER_TOKEN_FILE",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_CA_FILE",
        "OCM_SCORE_THANOS_CA_FILE",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_CLIENT_CERT_FILE",
        "OCM_SCORE_THANOS_CLIENT_CERT_FILE",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_CLIENT_KEY_FILE",
        "OCM_SCORE_THANOS_CLIENT_KEY_FILE",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_TLS_SERVER_NAME",
        "OCM_SCORE_THANOS_TLS_SERVER_NAME",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_QUERY_TIMEOUT",
        "OCM_SCORE_THANOS_QUERY_TIMEOUT",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_QUERY_CONCURRENCY",
        "OCM_SCORE_THANOS_QUERY_CONCURRENCY",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_QUERY_RETRIES",
        "OCM_SCORE_THANOS_QUERY_RETRIES",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_CLUSTER_LABEL",
        "OCM_SCORE_THANOS_CLUSTER_LABEL",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_CLUSTER_MAPPING",
        "OCM_SCORE_THANOS_CLUSTER_MAPPING",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_PLACEMENT_SCORE_NAME",
        "OCM_SCORE_THANOS_PLACEMENT_SCORE_NAME",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_INTERVAL",
        "OCM_SCORE_THANOS_INTERVAL",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_VALIDITY",
        "OCM_SCORE_THANOS_VALIDITY",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_RENEW_BEFORE",
        "OCM_SCORE_THANOS_RENEW_BEFORE",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_RENEW_EVERY",
        "OCM_SCORE_THANOS_RENEW_EVERY",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_WRITE_CONCURRENCY",
        "OCM_SCORE_THANOS_WRITE_CONCURRENCY",
    ),
    (
        &["thanos-scorer"],
        "OCM_SCORE_KUBECONFIG",
        "OCM_SCORE_THANOS_KUBECONFIG",
    ),
];

/// Parses like `C::parse_from` (a usage error exits 2 with clap's message), accepting the old
/// spellings; returns the deprecation warnings to log.
pub fn parse<C: Parser>(args: impl IntoIterator<Item = OsString>) -> (C, Vec<String>) {
    match try_parse_with_env(args, |name| std::env::var_os(name)) {
        Ok(parsed) => parsed,
        Err(error) => error.exit(),
    }
}

/// [`parse`] with the environment given, for tests.
pub fn try_parse_with_env<C: Parser>(
    args: impl IntoIterator<Item = OsString>,
    env: impl Fn(&str) -> Option<OsString>,
) -> Result<(C, Vec<String>), clap::Error> {
    let args: Vec<OsString> = args.into_iter().collect();
    let mut command = C::command();
    let mut warnings = Vec::new();
    // Warnings about one mode's variables, given only when that mode runs.
    let mut mode_warnings = Vec::new();
    let every_mode = RENAMED_ENV.iter().map(|&(new, old)| (None, new, old));
    let one_mode = RENAMED_MODE_ENV
        .iter()
        .flat_map(|&(modes, new, old)| modes.iter().map(move |&mode| (Some(mode), new, old)));
    for (mode, new, old) in every_mode.chain(one_mode) {
        let Some(value) = env(old) else { continue };
        if env(new).is_some() || mode.is_some_and(|mode| command.find_subcommand(mode).is_none()) {
            continue;
        }
        let Some(value) = value.to_str() else {
            warnings.push(format!(
                "environment variable {old} is ignored: its value is not UTF-8"
            ));
            continue;
        };
        let (renamed, found) = match mode {
            None => default_from_old_env(command, new, value),
            Some(mode) => {
                let mut found = false;
                let renamed = command.mut_subcommand(mode, |sub| {
                    let (sub, sub_found) = default_from_old_env(sub, new, value);
                    found = sub_found;
                    sub
                });
                (renamed, found)
            }
        };
        command = renamed;
        if found {
            let warning = format!(
                "environment variable {old} is deprecated and is ignored from ocm-score {REMOVED_IN}; set {new}"
            );
            match mode {
                None => warnings.push(warning),
                Some(mode) => mode_warnings.push((mode, warning)),
            }
        }
    }
    let deprecated = deprecated_flags(&command);
    for arg in &args {
        let Some(flag) = arg.to_str().and_then(|a| a.strip_prefix("--")) else {
            continue;
        };
        let name = flag.split_once('=').map_or(flag, |(name, _)| name);
        if let Some((_, new)) = deprecated.iter().find(|(old, _)| old == name) {
            warnings.push(format!(
                "--{name} is deprecated and is removed in ocm-score {REMOVED_IN}; use --{new}"
            ));
        }
    }
    let matches = command.clone().try_get_matches_from(args)?;
    let running = matches.subcommand_name();
    warnings.extend(
        mode_warnings
            .into_iter()
            .filter(|(mode, _)| Some(*mode) == running)
            .map(|(_, warning)| warning),
    );
    let parsed = C::from_arg_matches(&matches).map_err(|e| e.format(&mut command))?;
    Ok((parsed, warnings))
}

/// Logs each deprecation warning (call after [`crate::logging::init`]).
pub fn warn_deprecated(warnings: &[String]) {
    for warning in warnings {
        tracing::warn!("{warning}");
    }
}

/// Gives every argument of `command` (and its subcommands) that reads `new` the old variable's
/// `value` as its default: the command line still wins, and `new` is unset (or we would not be here).
fn default_from_old_env(mut command: Command, new: &str, value: &str) -> (Command, bool) {
    let ids: Vec<_> = command
        .get_arguments()
        .filter(|a| a.get_env() == Some(OsStr::new(new)))
        .map(|a| a.get_id().clone())
        .collect();
    let mut found = !ids.is_empty();
    for id in ids {
        command = command.mut_arg(id, |a| a.default_value(value.to_owned()));
    }
    let subcommands: Vec<String> = command
        .get_subcommands()
        .map(|s| s.get_name().to_owned())
        .collect();
    for name in subcommands {
        command = command.mut_subcommand(name, |sub| {
            let (sub, sub_found) = default_from_old_env(sub, new, value);
            found |= sub_found;
            sub
        });
    }
    (command, found)
}

/// The deprecated flag spellings of `command` and its subcommands: (old name, flag name) for each
/// hidden alias of a long flag, without the leading `--`. A flag shared by several subcommands is
/// listed once per subcommand.
pub fn deprecated_flags(command: &Command) -> Vec<(String, String)> {
    let mut out = Vec::new();
    hidden_aliases(command, &mut out);
    out
}

/// (hidden alias, flag name) of every argument in `command` and its subcommands.
fn hidden_aliases(command: &Command, out: &mut Vec<(String, String)>) {
    for arg in command.get_arguments() {
        let (Some(long), Some(all)) = (arg.get_long(), arg.get_all_aliases()) else {
            continue;
        };
        let visible = arg.get_visible_aliases().unwrap_or_default();
        for alias in all.into_iter().filter(|a| !visible.contains(a)) {
            out.push((alias.to_owned(), long.to_owned()));
        }
    }
    for sub in command.get_subcommands() {
        hidden_aliases(sub, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::args::{LeaderElectionArgs, ProbeArgs};
    use clap::{CommandFactory, Subcommand};
    use std::collections::BTreeMap;

    #[derive(Parser, Debug)]
    struct Cli {
        #[command(subcommand)]
        mode: Mode,
    }

    #[derive(Subcommand, Debug)]
    enum Mode {
        Serve {
            #[command(flatten)]
            probes: ProbeArgs,
            #[command(flatten)]
            leader: LeaderElectionArgs,
        },
    }

    fn run(args: &[&str], env: &[(&str, &str)]) -> (ProbeArgs, LeaderElectionArgs, Vec<String>) {
        let env: BTreeMap<String, OsString> =
            env.iter().map(|(k, v)| ((*k).to_owned(), (*v).into())).collect();
        let argv = std::iter::once("x")
            .chain(args.iter().copied())
            .map(OsString::from);
        let (cli, warnings) = try_parse_with_env::<Cli>(argv, |name| env.get(name).cloned()).expect("parses");
        let Mode::Serve { probes, leader } = cli.mode;
        (probes, leader, warnings)
    }

    #[test]
    fn new_spellings_parse_without_warnings() {
        let (probes, leader, warnings) = run(
            &[
                "serve",
                "--metrics-bind-address=127.0.0.1:1",
                "--leader-election-identity",
                "me",
            ],
            &[],
        );
        assert_eq!(
            probes.metrics_bind_address,
            Some("127.0.0.1:1".parse().expect("addr"))
        );
        assert_eq!(leader.identity.as_deref(), Some("me"));
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn old_flag_names_work_with_a_warning() {
        let (probes, leader, warnings) = run(
            &["serve", "--metrics-addr=127.0.0.1:1", "--lease-duration", "20s"],
            &[],
        );
        assert_eq!(
            probes.metrics_bind_address,
            Some("127.0.0.1:1".parse().expect("addr"))
        );
        assert_eq!(leader.lease_duration, Some(std::time::Duration::from_secs(20)));
        assert_eq!(
            warnings,
            [
                format!(
                    "--metrics-addr is deprecated and is removed in ocm-score {REMOVED_IN}; use --metrics-bind-address"
                ),
                format!(
                    "--lease-duration is deprecated and is removed in ocm-score {REMOVED_IN}; \
                     use --leader-election-lease-duration"
                ),
            ]
        );
    }

    #[test]
    fn old_environment_variables_work_with_a_warning_unless_the_new_one_is_set() {
        let (_, leader, warnings) = run(&["serve"], &[("POD_NAME", "pod-0"), ("POD_NAMESPACE", "ns")]);
        assert_eq!(leader.identity.as_deref(), Some("pod-0"));
        assert_eq!(leader.namespace.as_deref(), Some("ns"));
        assert_eq!(warnings.len(), 2, "{warnings:?}");
        assert!(
            warnings
                .iter()
                .any(|w| w.contains("POD_NAME ") && w.contains("OCM_SCORE_LEADER_ELECTION_IDENTITY"))
        );

        let (_, leader, warnings) = run(
            &["serve"],
            &[
                ("POD_NAME", "pod-0"),
                ("OCM_SCORE_LEADER_ELECTION_IDENTITY", "new"),
            ],
        );
        // clap itself reads the new variable (from the real environment, where it is unset here);
        // the old one must not be used as a fallback.
        assert_ne!(leader.identity.as_deref(), Some("pod-0"));
        assert!(warnings.is_empty(), "{warnings:?}");

        let (_, leader, _) = run(
            &["serve", "--leader-election-identity=flag"],
            &[("POD_NAME", "pod-0")],
        );
        assert_eq!(
            leader.identity.as_deref(),
            Some("flag"),
            "the command line wins over any variable"
        );
    }

    /// Two modes reading one new variable, each with its own old name.
    #[derive(Parser, Debug)]
    struct Hub {
        #[command(subcommand)]
        mode: HubMode,
    }

    #[derive(Subcommand, Debug)]
    enum HubMode {
        AddonManager(Kubeconfig),
        ThanosScorer(Kubeconfig),
    }

    #[derive(clap::Args, Debug)]
    struct Kubeconfig {
        #[arg(long, env = "OCM_SCORE_KUBECONFIG")]
        kubeconfig: Option<String>,
    }

    fn hub(mode: &str, env: &[(&str, &str)]) -> (Option<String>, Vec<String>) {
        let env: BTreeMap<String, OsString> =
            env.iter().map(|(k, v)| ((*k).to_owned(), (*v).into())).collect();
        let argv = ["x", mode].map(OsString::from);
        let (cli, warnings) = try_parse_with_env::<Hub>(argv, |name| env.get(name).cloned()).expect("parses");
        let (HubMode::AddonManager(args) | HubMode::ThanosScorer(args)) = cli.mode;
        (args.kubeconfig, warnings)
    }

    #[test]
    fn a_mode_s_old_variable_applies_to_that_mode_only() {
        let old = [
            ("HUB_KUBECONFIG", "/addon"),
            ("OCM_SCORE_THANOS_KUBECONFIG", "/thanos"),
        ];
        let (kubeconfig, warnings) = hub("addon-manager", &old);
        assert_eq!(kubeconfig.as_deref(), Some("/addon"));
        assert_eq!(
            warnings,
            [format!(
                "environment variable HUB_KUBECONFIG is deprecated and is ignored from ocm-score \
                 {REMOVED_IN}; set OCM_SCORE_KUBECONFIG"
            )]
        );
        let (kubeconfig, warnings) = hub("thanos-scorer", &old);
        assert_eq!(kubeconfig.as_deref(), Some("/thanos"));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        let (kubeconfig, warnings) = hub("thanos-scorer", &[("HUB_KUBECONFIG", "/addon")]);
        assert_eq!(
            kubeconfig, None,
            "the add-on manager's old name is not the scorer's"
        );
        assert!(warnings.is_empty(), "{warnings:?}");
    }

    #[test]
    fn a_variable_two_subcommands_read_is_warned_about_once() {
        #[derive(Parser, Debug)]
        struct Agent {
            #[command(subcommand)]
            mode: AgentMode,
        }
        #[derive(Subcommand, Debug)]
        enum AgentMode {
            Run(Cluster),
            Once(Cluster),
        }
        #[derive(clap::Args, Debug)]
        struct Cluster {
            #[arg(long, env = "OCM_SCORE_CLUSTER_NAME")]
            cluster_name: Option<String>,
        }
        let argv = ["x", "once"].map(OsString::from);
        let (cli, warnings) = try_parse_with_env::<Agent>(argv, |name| {
            (name == "CLUSTER_NAME").then(|| OsString::from("prod-1"))
        })
        .expect("parses");
        let (AgentMode::Run(args) | AgentMode::Once(args)) = cli.mode;
        assert_eq!(args.cluster_name.as_deref(), Some("prod-1"));
        assert_eq!(warnings.len(), 1, "{warnings:?}");
    }

    #[test]
    fn deprecated_flags_are_the_hidden_aliases_of_every_subcommand() {
        let flags = deprecated_flags(&Cli::command());
        let expected = [
            ("metrics-addr", "metrics-bind-address"),
            ("leader-identity", "leader-election-identity"),
            ("lease-duration", "leader-election-lease-duration"),
            ("renew-deadline", "leader-election-renew-deadline"),
            ("retry-period", "leader-election-retry-period"),
        ]
        .map(|(old, new)| (old.to_owned(), new.to_owned()));
        assert_eq!(flags, expected);
    }

    #[test]
    fn usage_errors_keep_clap_exit_code() {
        let argv = ["x", "serve", "--leader-election-retry-period", "often"].map(OsString::from);
        let err = try_parse_with_env::<Cli>(argv, |_| None).expect_err("bad value");
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("often"), "{err}");
    }
}
