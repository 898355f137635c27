//! Validated configuration. Flag values are parsed by clap with the parsers of the agent's contract
//! (`agent_contract`); [`RunConfig::from_args`] / [`OnceConfig::from_args`] then check the flags
//! against each other with the contract's rules and return a [`ConfigError`] naming the flag and value.

use crate::accounting::ResourceSet;
use crate::cli::{LogFormat, OnceArgs, RunArgs, ScoringArgs};
use crate::scores::ScoreDef;
use agent_contract::{Timing, flag};
use scheduler_core::duration::format as fmt_duration;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use agent_contract::{FlagError as ConfigError, Sources};

/// Where scores are written on the hub.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubTarget {
    /// The kubeconfig file (inside the mounted Secret directory when a directory was given).
    pub kubeconfig: PathBuf,
    pub cluster_name: String,
}

/// What is scored and how, shared by `run` and `once`.
#[derive(Clone, Debug)]
pub struct ScoringConfig {
    pub sources: Sources,
    pub resources: ResourceSet,
    pub scores: Vec<ScoreDef>,
    pub score_object_name: String,
    pub validity: Duration,
    pub managed_kubeconfig: Option<PathBuf>,
    pub hub: Option<HubTarget>,
    /// Known even without a hub (then only used as the printed object's namespace).
    pub cluster_name: Option<String>,
    pub api_timeout: Duration,
    pub hub_timeout: Duration,
    pub kubelet_concurrency: usize,
    pub log_format: LogFormat,
}

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
    pub metrics_addr: SocketAddr,
    pub lease: Option<LeaseConfig>,
}

#[derive(Clone, Debug)]
pub struct OnceConfig {
    pub scoring: ScoringConfig,
    /// Set when `--publish` was given.
    pub publish: Option<HubTarget>,
}

impl RunConfig {
    pub fn from_args(args: RunArgs) -> Result<Self, ConfigError> {
        let RunArgs {
            scoring,
            refresh_interval,
            jitter,
            debounce,
            min_write_interval,
            score_step,
            renew_every,
            metrics_addr,
            addon_name,
            addon_namespace,
            lease,
            lease_interval,
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
        let lease = if lease {
            check_dns_subdomain(flag::ADDON_NAME, &addon_name)?;
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
            metrics_addr,
            lease,
        })
    }
}

impl OnceConfig {
    pub fn from_args(args: OnceArgs) -> Result<Self, ConfigError> {
        let OnceArgs { scoring, publish } = args;
        let scoring = ScoringConfig::from_args(scoring, agent_contract::ONCE_VALIDITY)?;
        let publish = if publish {
            Some(scoring.require_hub()?)
        } else {
            None
        };
        Ok(OnceConfig { scoring, publish })
    }
}

impl ScoringConfig {
    /// `default_validity` applies when --validity is not given.
    pub fn from_args(args: ScoringArgs, default_validity: Duration) -> Result<Self, ConfigError> {
        let ScoringArgs {
            sources,
            extended_resources,
            normalize,
            scores,
            score_object_name,
            validity,
            managed_kubeconfig,
            hub_kubeconfig,
            cluster_name,
            api_timeout,
            hub_timeout,
            kubelet_concurrency,
            log_format,
        } = args;

        let sources = Sources::from_list(&sources)?;
        let specs = agent_contract::published_scores(&extended_resources, &normalize, &scores)?;
        let resources = ResourceSet::with_extended(extended_resources.iter().map(|e| e.resource.clone()))
            .map_err(|e| {
                let listed: Vec<&str> = extended_resources.iter().map(|e| e.resource.as_str()).collect();
                ConfigError::new(flag::EXTENDED_RESOURCE, listed.join(","), e.to_string())
            })?;
        // Every published score is about a built-in or configured resource, which `resources` holds.
        let defs: Vec<ScoreDef> = specs
            .into_iter()
            .filter_map(|spec| ScoreDef::from_spec(spec, &resources))
            .collect();

        check_dns_subdomain(flag::SCORE_OBJECT_NAME, &score_object_name)?;
        let validity = validity.map_or(default_validity, |v| v.0);
        agent_contract::check_validity(validity)?;
        agent_contract::check_timeouts(api_timeout.0, hub_timeout.0)?;

        let hub_kubeconfig = hub_kubeconfig.map(|p| locate_hub_kubeconfig(&p)).transpose()?;
        let cluster_name = match cluster_name {
            Some(name) => {
                check_dns_label(flag::CLUSTER_NAME, &name)?;
                Some(name)
            }
            None => hub_kubeconfig.as_ref().and_then(|h| h.cluster_name_file.clone()),
        };
        let hub = match (&hub_kubeconfig, &cluster_name) {
            (Some(h), Some(name)) => Some(HubTarget {
                kubeconfig: h.kubeconfig.clone(),
                cluster_name: name.clone(),
            }),
            _ => None,
        };
        if let Some(path) = &managed_kubeconfig
            && !path.is_file()
        {
            return Err(ConfigError::new(
                flag::MANAGED_KUBECONFIG,
                path.display().to_string(),
                "no such file",
            ));
        }

        Ok(ScoringConfig {
            sources,
            resources,
            scores: defs,
            score_object_name,
            validity,
            managed_kubeconfig,
            hub,
            cluster_name,
            api_timeout: api_timeout.0,
            hub_timeout: hub_timeout.0,
            kubelet_concurrency: usize::from(kubelet_concurrency),
            log_format,
        })
    }

    fn require_hub(&self) -> Result<HubTarget, ConfigError> {
        match (&self.hub, &self.cluster_name) {
            (Some(hub), _) => Ok(hub.clone()),
            (None, None) => Err(ConfigError::new(
                flag::CLUSTER_NAME,
                "",
                "needed to publish: set it, or point --hub-kubeconfig at OCM's secret directory holding cluster-name",
            )),
            (None, Some(_)) => Err(ConfigError::new(
                flag::HUB_KUBECONFIG,
                "",
                "needed to publish: the hub kubeconfig file or OCM's <addon>-hub-kubeconfig secret directory",
            )),
        }
    }
}

struct HubKubeconfigLocation {
    kubeconfig: PathBuf,
    cluster_name_file: Option<String>,
}

/// A hub kubeconfig file, or OCM's mounted Secret directory with `kubeconfig` (and `cluster-name`).
fn locate_hub_kubeconfig(path: &Path) -> Result<HubKubeconfigLocation, ConfigError> {
    let shown = path.display().to_string();
    if path.is_dir() {
        let kubeconfig = path.join("kubeconfig");
        if !kubeconfig.is_file() {
            return Err(ConfigError::new(
                flag::HUB_KUBECONFIG,
                shown,
                "the directory holds no `kubeconfig` file",
            ));
        }
        let cluster_name_file = match std::fs::read_to_string(path.join("cluster-name")) {
            Ok(text) => {
                let name = text.trim().to_owned();
                check_dns_label(flag::HUB_KUBECONFIG, &name).map_err(|e| {
                    ConfigError::new(
                        flag::HUB_KUBECONFIG,
                        shown.clone(),
                        format!("its cluster-name file: {}", e.reason),
                    )
                })?;
                Some(name)
            }
            Err(_) => None,
        };
        Ok(HubKubeconfigLocation {
            kubeconfig,
            cluster_name_file,
        })
    } else if path.is_file() {
        Ok(HubKubeconfigLocation {
            kubeconfig: path.to_owned(),
            cluster_name_file: None,
        })
    } else {
        Err(ConfigError::new(
            flag::HUB_KUBECONFIG,
            shown,
            "no such file or directory",
        ))
    }
}

fn check_dns_label(flag: &'static str, value: &str) -> Result<(), ConfigError> {
    let ok = !value.is_empty()
        && value.len() <= 63
        && value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !value.starts_with('-')
        && !value.ends_with('-');
    if ok {
        Ok(())
    } else {
        Err(ConfigError::new(
            flag,
            value,
            "must be a DNS label (a-z, 0-9, '-', at most 63)",
        ))
    }
}

fn check_dns_subdomain(flag: &'static str, value: &str) -> Result<(), ConfigError> {
    let ok = !value.is_empty()
        && value.len() <= 253
        && value.split('.').all(|label| {
            !label.is_empty()
                && label
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-')
        });
    if ok {
        Ok(())
    } else {
        Err(ConfigError::new(
            flag,
            value,
            "must be a DNS subdomain (a-z, 0-9, '-', '.')",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
    use crate::scores::Normalization;
    use clap::Parser;
    use ocm_score_tests::support::TempDir;

    fn run(args: &[&str]) -> Result<RunConfig, ConfigError> {
        let mut argv = vec!["ocm-score-agent", "run"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv).expect("clap parses").command {
            Command::Run(args) => RunConfig::from_args(args),
            Command::Once(_) => unreachable!("run was given"),
        }
    }

    fn once(args: &[&str]) -> Result<OnceConfig, ConfigError> {
        let mut argv = vec!["ocm-score-agent", "once"];
        argv.extend_from_slice(args);
        match Cli::try_parse_from(argv).expect("clap parses").command {
            Command::Once(args) => OnceConfig::from_args(args),
            Command::Run(_) => unreachable!("once was given"),
        }
    }

    fn hub_dir(cluster_name: Option<&str>) -> TempDir {
        let dir = TempDir::new("config");
        std::fs::write(dir.path().join("kubeconfig"), "apiVersion: v1\nkind: Config\n").expect("write");
        if let Some(name) = cluster_name {
            std::fs::write(dir.path().join("cluster-name"), format!("{name}\n")).expect("write");
        }
        dir
    }

    #[test]
    fn defaults_are_valid_and_publish_every_upstream_name() {
        let dir = hub_dir(Some("prod-1"));
        let hub = dir.path().to_str().expect("utf-8 path");
        let cfg = run(&["--hub-kubeconfig", hub]).expect("valid");
        assert_eq!(cfg.hub.cluster_name, "prod-1", "read from the secret directory");
        assert_eq!(cfg.hub.kubeconfig, dir.path().join("kubeconfig"));
        assert_eq!(cfg.scoring.scores.len(), 10);
        assert_eq!(cfg.refresh_interval, Duration::from_secs(60));
        assert_eq!(cfg.renew_margin, Duration::from_secs(96), "66s + 10s + 20s");
        assert_eq!(
            (cfg.scoring.validity, cfg.renew_every),
            (Duration::from_secs(97), 1),
            "the margin and a second for rounding"
        );
        let saving = run(&["--hub-kubeconfig", hub, "--renew-every=2"]).expect("valid");
        assert_eq!(
            saving.scoring.validity,
            Duration::from_secs(163),
            "2 × 66s + 30s + 1s"
        );
        let explicit = run(&["--hub-kubeconfig", hub, "--validity=3m"]).expect("valid");
        assert_eq!(explicit.scoring.validity, Duration::from_secs(180));
        assert_eq!(
            once(&["--source=host"]).expect("valid").scoring.validity,
            Duration::from_secs(180),
            "once keeps its own default"
        );
        let lease = cfg.lease.expect("lease on by default");
        assert_eq!(
            (lease.name.as_str(), lease.namespace.as_str()),
            ("resource-usage-collect", "open-cluster-management-agent-addon")
        );
    }

    /// Worst case timing against the publisher's decision: every refresh comes as late as the jitter
    /// allows, and the cycle that renews spends its whole --api-timeout reading the managed cluster and
    /// its whole --hub-timeout writing. The new validUntil must still land before the old one passes.
    #[test]
    fn the_renewal_margin_lets_no_score_expire_while_sources_and_hub_answer_within_their_timeouts() {
        use crate::publish::{Decision, WritePolicy, decide};
        use crate::scores::ScoreValue;
        use jiff::{SignedDuration, Timestamp};
        let dir = hub_dir(Some("prod-1"));
        let hub = dir.path().to_str().expect("utf-8 path");
        for flags in [
            &[][..],
            &["--renew-every=2"][..],
            &["--renew-every=5", "--jitter=0.5", "--api-timeout=1s"][..],
            &["--refresh-interval=30s", "--jitter=0.5", "--validity=2m"][..],
            &[
                "--refresh-interval=1s",
                "--debounce=200ms",
                "--min-write-interval=1s",
                "--validity=12s",
                "--api-timeout=1s",
                "--hub-timeout=2s",
            ][..],
        ] {
            let mut args = vec!["--hub-kubeconfig", hub];
            args.extend_from_slice(flags);
            let cfg = run(&args).expect("valid");
            let policy = WritePolicy {
                validity: cfg.scoring.validity,
                step: i32::from(cfg.score_step),
                min_write_interval: cfg.min_write_interval,
            };
            let scores = vec![ScoreValue {
                name: "cpuAvailable".into(),
                value: 0,
                free: None,
                capacity: None,
            }];
            let late_tick =
                SignedDuration::try_from(cfg.refresh_interval.mul_f64(1.0 + cfg.jitter)).expect("fits");
            let slow = |d: Duration| SignedDuration::try_from(d).expect("fits");
            let start = Timestamp::from_second(1_700_000_000).expect("valid");
            let mut last = crate::publish::Published {
                scores: [("cpuAvailable".to_owned(), 0)].into(),
                valid_until: Some(crate::publish::valid_until(start, cfg.scoring.validity)),
                healthy: true,
                written_at: Some(start),
            };
            let mut cycle_start = start;
            for _ in 0..100 {
                cycle_start += late_tick;
                // The decision is taken once the sources have been read.
                let decided_at = cycle_start + slow(cfg.scoring.api_timeout);
                // The next cycle comes as late as the jitter allows and reads and writes as slowly.
                let renew_by =
                    cycle_start + late_tick + slow(cfg.scoring.api_timeout + cfg.scoring.hub_timeout);
                if let Decision::Write(_) = decide(Some(&last), &scores, decided_at, renew_by, &policy) {
                    let landed = decided_at + slow(cfg.scoring.hub_timeout);
                    let old = last.valid_until.expect("set");
                    assert!(landed < old, "{flags:?}: renewal landed at {landed}, after {old}");
                    last.valid_until = Some(crate::publish::valid_until(decided_at, cfg.scoring.validity));
                    last.written_at = Some(decided_at);
                }
            }
        }
    }

    #[test]
    fn cross_flag_errors_name_flag_and_value() {
        let dir = hub_dir(Some("prod-1"));
        let hub = dir.path().to_str().expect("utf-8 path");
        let err = |args: &[&str]| {
            let mut all = vec!["--hub-kubeconfig", hub];
            all.extend_from_slice(args);
            run(&all).expect_err("invalid")
        };
        let e = err(&["--validity", "3m", "--renew-every", "2"]);
        assert_eq!((e.flag, e.value.as_str()), ("--renew-every", "2"));
        let e = err(&["--refresh-interval", "1h", "--renew-every", "30"]);
        assert_eq!((e.flag, e.value.as_str()), ("--renew-every", "30"));
        assert!(e.reason.contains("at most 24h"), "{e}");
        let e = err(&["--validity", "60s"]);
        assert_eq!((e.flag, e.value.as_str()), ("--validity", "1m"));
        assert!(
            e.to_string()
                .starts_with("invalid value '1m' for '--validity': must exceed"),
            "{e}"
        );
        assert_eq!(err(&["--jitter", "0.9"]).flag, "--jitter");
        assert_eq!(err(&["--debounce", "2m"]).flag, "--debounce");
        assert_eq!(err(&["--source", "kubelet"]).flag, "--source");
        assert_eq!(err(&["--source", "host,host"]).flag, "--source");
        let e = err(&["--normalize", "gpuAvailable=absolute:0:8"]);
        assert_eq!(
            (e.flag, e.value.as_str()),
            ("--normalize", "gpuAvailable=absolute:0:8")
        );
        assert!(
            e.reason.contains("gpuClusterAvailable"),
            "lists the known names: {e}"
        );
        assert_eq!(err(&["--scores", "gpuAvailable"]).value, "gpuAvailable");
        assert_eq!(err(&["--cluster-name", "Prod_1"]).flag, "--cluster-name");
        assert_eq!(err(&["--addon-namespace", "Bad"]).flag, "--addon-namespace");
        assert_eq!(
            err(&["--extended-resource", "a.io/x=cpu"]).flag,
            "--extended-resource"
        );
        assert_eq!(
            err(&["--managed-kubeconfig", "/nonexistent/kubeconfig"]).flag,
            "--managed-kubeconfig"
        );

        let no_name = hub_dir(None);
        let e =
            run(&["--hub-kubeconfig", no_name.path().to_str().expect("utf-8")]).expect_err("no cluster name");
        assert_eq!(e.flag, "--cluster-name");
        let e = run(&["--cluster-name", "c1"]).expect_err("no hub");
        assert_eq!(e.flag, "--hub-kubeconfig");
        let e = run(&["--hub-kubeconfig", "/nonexistent"]).expect_err("missing");
        assert_eq!((e.flag, e.value.as_str()), ("--hub-kubeconfig", "/nonexistent"));
    }

    #[test]
    fn once_needs_no_hub_unless_publishing() {
        let cfg = once(&["--source", "host"]).expect("valid");
        assert!(cfg.publish.is_none());
        assert!(cfg.scoring.sources.host && !cfg.scoring.sources.cluster);
        assert_eq!(
            once(&["--source", "host", "--publish"])
                .expect_err("needs hub")
                .flag,
            "--cluster-name"
        );
    }

    #[test]
    fn scores_can_be_selected_renormalized_and_extended() {
        let cfg = once(&[
            "--source=host",
            "--extended-resource=amd.com/gpu",
            "--normalize=cpuNodeAvailable=percent:10:90,amdGpuClusterAvailable=absolute:0:4",
            "--scores=cpuNodeAvailable,amdGpuClusterAvailable",
        ])
        .expect("valid");
        let defs = &cfg.scoring.scores;
        assert_eq!(defs.len(), 2);
        assert_eq!(
            defs[0].normalization,
            Normalization::Percent { min: 10.0, max: 90.0 }
        );
        assert_eq!(defs[1].name, "amdGpuClusterAvailable");
        assert_eq!(
            defs[1].normalization,
            Normalization::Absolute { min: 0.0, max: 4.0 }
        );
        assert_eq!(cfg.scoring.resources.name(defs[1].resource), "amd.com/gpu");
    }
}
