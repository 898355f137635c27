//! Validated configuration. Flag values are parsed by the `parse_*` functions (clap reports their
//! errors with the flag and value); [`RunConfig::from_args`] / [`OnceConfig::from_args`] then check the
//! flags against each other and return a [`ConfigError`] naming the flag and value.

use crate::accounting::ResourceSet;
use crate::accounting::resources::BUILT_IN;
use crate::cli::{LogFormat, OnceArgs, RunArgs, ScoringArgs};
use crate::scores::{Normalization, ScoreDef, built_in_defs, extended_defs};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// `--renew-every` default: validUntil is renewed at every refresh, as the add-on's contract says.
pub const DEFAULT_RENEW_EVERY: u32 = 1;
/// `validUntil` of `once` when --validity is not given (nothing renews it).
pub const ONCE_VALIDITY: Duration = Duration::from_secs(180);
pub const MIN_VALIDITY: Duration = Duration::from_secs(10);
pub const MAX_VALIDITY: Duration = Duration::from_secs(24 * 3600);

/// The renew-margin rule for `refreshes` refreshes: the longest they may take, one after the other, to
/// land a write: each as late as the jitter allows, the last one reading the managed cluster as slowly
/// as `api_timeout` allows and writing the hub as slowly as `hub_timeout` allows.
pub fn renewal_margin(
    refreshes: u32,
    refresh: Duration,
    jitter: f64,
    api_timeout: Duration,
    hub_timeout: Duration,
) -> Duration {
    let late_refreshes =
        Duration::try_from_secs_f64(refresh.as_secs_f64() * f64::from(refreshes) * (1.0 + jitter))
            .unwrap_or(Duration::MAX);
    late_refreshes
        .saturating_add(api_timeout)
        .saturating_add(hub_timeout)
}

/// The validity when --validity is not given: the renew-margin rule for `renew_every` refreshes, plus
/// the second `validUntil` loses to whole-second rounding, and at least [`MIN_VALIDITY`]. A dead agent's
/// scores so expire once `renew_every` refreshes were missed and the slack a late, slow one needs has
/// passed; a live agent renews at every `renew_every`-th refresh (the run loop renews once the next
/// refresh might land after validUntil, which with this validity is exactly then).
pub fn derived_validity(
    renew_every: u32,
    refresh: Duration,
    jitter: f64,
    api_timeout: Duration,
    hub_timeout: Duration,
) -> Duration {
    let margin = renewal_margin(renew_every, refresh, jitter, api_timeout, hub_timeout);
    let whole_seconds = margin
        .as_secs()
        .saturating_add(u64::from(margin.subsec_nanos() > 0));
    Duration::from_secs(whole_seconds.saturating_add(1)).max(MIN_VALIDITY)
}

/// A configuration error: which flag, which value (empty when the flag is missing), and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub flag: &'static str,
    pub value: String,
    pub reason: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.value.is_empty() {
            write!(f, "missing '{}': {}", self.flag, self.reason)
        } else {
            write!(
                f,
                "invalid value '{}' for '{}': {}",
                self.value, self.flag, self.reason
            )
        }
    }
}

impl std::error::Error for ConfigError {}

impl ConfigError {
    fn new(flag: &'static str, value: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            flag,
            value: value.into(),
            reason: reason.into(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceArg {
    Cluster,
    Kubelet,
    Host,
}

pub fn parse_source(text: &str) -> Result<SourceArg, String> {
    match text.trim() {
        "cluster" => Ok(SourceArg::Cluster),
        "kubelet" => Ok(SourceArg::Kubelet),
        "host" => Ok(SourceArg::Host),
        other => Err(format!(
            "unknown source {other:?}; expected cluster, kubelet or host"
        )),
    }
}

/// A duration such as `60s`, `3m`, `1m30s`, `500ms`, `1h`, or a bare number of seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DurationArg(pub Duration);

pub fn parse_duration(text: &str) -> Result<DurationArg, String> {
    scheduler_core::duration::parse(text)
        .map(DurationArg)
        .map_err(|_| format!("expected a duration such as 60s, 3m, 1m30s or 500ms, got {text:?}"))
}

/// `RESOURCE[=PREFIX]` of `--extended-resource`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtendedResourceArg {
    pub resource: String,
    pub prefix: String,
}

pub fn parse_extended_resource(text: &str) -> Result<ExtendedResourceArg, String> {
    let (resource, prefix) = match text.split_once('=') {
        Some((r, p)) => (r.trim(), Some(p.trim())),
        None => (text.trim(), None),
    };
    let valid_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/');
    if resource.is_empty() || !resource.chars().all(valid_char) || resource.matches('/').count() > 1 {
        return Err(format!("{resource:?} is not a resource name such as amd.com/gpu"));
    }
    if BUILT_IN.contains(&resource) {
        return Err(format!("{resource} is scored already"));
    }
    let prefix = match prefix {
        Some(p) => p.to_owned(),
        None => default_prefix(resource),
    };
    let mut chars = prefix.chars();
    if !chars.next().is_some_and(|c| c.is_ascii_lowercase()) || !chars.all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "score prefix {prefix:?} must be a lowerCamelCase word (e.g. amdGpu)"
        ));
    }
    Ok(ExtendedResourceArg {
        resource: resource.to_owned(),
        prefix,
    })
}

/// `amd.com/gpu` → `amdGpu`, `nvidia.com/mig-1g.5gb` → `nvidiaMig1g5gb`, `hugepages-2Mi` → `hugepages2Mi`:
/// the first label of the domain, then the name, camel-cased.
fn default_prefix(resource: &str) -> String {
    let (domain, name) = resource.split_once('/').unwrap_or(("", resource));
    let first_label = domain.split('.').next().unwrap_or("");
    let mut out = String::new();
    for word in [first_label]
        .into_iter()
        .chain(name.split(|c: char| !c.is_ascii_alphanumeric()))
    {
        let mut chars = word.chars();
        let Some(first) = chars.next() else { continue };
        if out.is_empty() {
            out.push(first.to_ascii_lowercase());
        } else {
            out.push(first.to_ascii_uppercase());
        }
        out.extend(chars);
    }
    out
}

/// `SCORE=absolute:MIN:MAX` / `SCORE=percent:MIN:MAX` / `SCORE=percent` of `--normalize`.
#[derive(Clone, Debug, PartialEq)]
pub struct NormalizeArg {
    pub score: String,
    pub normalization: Normalization,
}

pub fn parse_normalize(text: &str) -> Result<NormalizeArg, String> {
    let usage = "expected SCORE=absolute:MIN:MAX or SCORE=percent:MIN:MAX";
    let (score, spec) = text.split_once('=').ok_or_else(|| usage.to_owned())?;
    let parts: Vec<&str> = spec.split(':').collect();
    let bounds = |min: &str, max: &str| -> Result<(f64, f64), String> {
        let parse = |s: &str| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("bound {s:?} is not a number"))
        };
        let (min, max) = (parse(min)?, parse(max)?);
        if min >= max {
            return Err(format!("MIN ({min}) must be below MAX ({max})"));
        }
        Ok((min, max))
    };
    let normalization = match parts.as_slice() {
        ["absolute", min, max] => {
            let (min, max) = bounds(min, max)?;
            Normalization::Absolute { min, max }
        }
        ["percent", min, max] => {
            let (min, max) = bounds(min, max)?;
            Normalization::Percent { min, max }
        }
        ["percent"] => Normalization::Percent { min: 0.0, max: 100.0 },
        _ => return Err(usage.to_owned()),
    };
    Ok(NormalizeArg {
        score: score.trim().to_owned(),
        normalization,
    })
}

/// Which sources are enabled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sources {
    pub cluster: bool,
    pub kubelet: bool,
    pub host: bool,
}

impl Sources {
    pub fn needs_managed_cluster(&self) -> bool {
        self.cluster || self.kubelet
    }

    pub fn names(&self) -> Vec<&'static str> {
        [
            (self.cluster, "cluster"),
            (self.kubelet, "kubelet"),
            (self.host, "host"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect()
    }
}

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
        let refresh = refresh_interval.0;
        if refresh < Duration::from_secs(1) {
            return Err(ConfigError::new(
                "--refresh-interval",
                fmt_duration(refresh),
                "must be at least 1s",
            ));
        }
        if !(0.0..=0.5).contains(&jitter) {
            return Err(ConfigError::new(
                "--jitter",
                jitter.to_string(),
                "must be between 0 and 0.5",
            ));
        }
        // The next refresh comes (even at maximum jitter) within refresh × (1 + jitter), reads the
        // managed cluster within --api-timeout and writes the hub within --hub-timeout: renewing once
        // less than all of that is left lands the new validUntil before the old one passes.
        let renew_margin = renewal_margin(1, refresh, jitter, scoring.api_timeout.0, scoring.hub_timeout.0);
        let (validity, renew_every) = match (scoring.validity, renew_every) {
            (Some(validity), None) => (validity.0, 1),
            (Some(_), Some(n)) => {
                return Err(ConfigError::new(
                    "--renew-every",
                    n.to_string(),
                    "cannot be combined with --validity, which sets validUntil directly",
                ));
            }
            (None, n) => {
                let n = n.unwrap_or(DEFAULT_RENEW_EVERY);
                let validity =
                    derived_validity(n, refresh, jitter, scoring.api_timeout.0, scoring.hub_timeout.0);
                if validity > MAX_VALIDITY {
                    return Err(ConfigError::new(
                        "--renew-every",
                        n.to_string(),
                        format!(
                            "makes validUntil {} ahead with --refresh-interval {}; at most {} is allowed",
                            fmt_duration(validity),
                            fmt_duration(refresh),
                            fmt_duration(MAX_VALIDITY)
                        ),
                    ));
                }
                (validity, n)
            }
        };
        let scoring = ScoringConfig::from_args(scoring, validity)?;
        let hub = scoring.require_hub()?;
        if debounce.0 > refresh {
            return Err(ConfigError::new(
                "--debounce",
                fmt_duration(debounce.0),
                format!("must not exceed --refresh-interval ({})", fmt_duration(refresh)),
            ));
        }
        if scoring.validity <= renew_margin {
            return Err(ConfigError::new(
                "--validity",
                fmt_duration(scoring.validity),
                format!(
                    "must exceed --refresh-interval × (1 + --jitter) + --api-timeout + --hub-timeout = {}, \
                     or scores would expire between refreshes",
                    fmt_duration(renew_margin)
                ),
            ));
        }
        if min_write_interval.0 >= scoring.validity {
            return Err(ConfigError::new(
                "--min-write-interval",
                fmt_duration(min_write_interval.0),
                "must be below --validity",
            ));
        }
        let lease = if lease {
            check_dns_subdomain("--addon-name", &addon_name)?;
            check_dns_label("--addon-namespace", &addon_namespace)?;
            if lease_interval.0 < Duration::from_secs(1) {
                return Err(ConfigError::new(
                    "--lease-interval",
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
            refresh_interval: refresh,
            jitter,
            debounce: debounce.0,
            min_write_interval: min_write_interval.0,
            score_step,
            renew_margin,
            renew_every,
            metrics_addr,
            lease,
        })
    }
}

impl OnceConfig {
    pub fn from_args(args: OnceArgs) -> Result<Self, ConfigError> {
        let OnceArgs { scoring, publish } = args;
        let scoring = ScoringConfig::from_args(scoring, ONCE_VALIDITY)?;
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

        let sources = check_sources(&sources)?;

        let resources = ResourceSet::with_extended(extended_resources.iter().map(|e| e.resource.clone()))
            .map_err(|e| {
                ConfigError::new(
                    "--extended-resource",
                    joined(&extended_resources, |e| &e.resource),
                    e.to_string(),
                )
            })?;
        let mut defs = built_in_defs();
        for extended in &extended_resources {
            let Some(index) = resources.index_of(&extended.resource) else {
                continue;
            };
            for def in extended_defs(&extended.prefix, index) {
                if defs.iter().any(|d| d.name == def.name) {
                    return Err(ConfigError::new(
                        "--extended-resource",
                        format!("{}={}", extended.resource, extended.prefix),
                        format!("score name {} is taken; choose another prefix", def.name),
                    ));
                }
                defs.push(def);
            }
        }
        for n in &normalize {
            let Some(def) = defs.iter_mut().find(|d| d.name == n.score) else {
                return Err(ConfigError::new(
                    "--normalize",
                    format!("{}={}", n.score, n.normalization),
                    format!("unknown score {:?}; known: {}", n.score, names(&defs)),
                ));
            };
            def.normalization = n.normalization;
        }
        if !scores.is_empty() {
            for name in &scores {
                if !defs.iter().any(|d| &d.name == name) {
                    return Err(ConfigError::new(
                        "--scores",
                        name.clone(),
                        format!("unknown score; known: {}", names(&defs)),
                    ));
                }
            }
            defs.retain(|d| scores.contains(&d.name));
        }

        check_dns_subdomain("--score-object-name", &score_object_name)?;
        let validity = validity.map_or(default_validity, |v| v.0);
        if validity < MIN_VALIDITY || validity > MAX_VALIDITY {
            return Err(ConfigError::new(
                "--validity",
                fmt_duration(validity),
                "must be between 10s and 24h",
            ));
        }
        for (flag, d) in [("--api-timeout", api_timeout.0), ("--hub-timeout", hub_timeout.0)] {
            if d < Duration::from_millis(100) {
                return Err(ConfigError::new(flag, fmt_duration(d), "must be at least 100ms"));
            }
        }

        let hub_kubeconfig = hub_kubeconfig.map(|p| locate_hub_kubeconfig(&p)).transpose()?;
        let cluster_name = match cluster_name {
            Some(name) => {
                check_dns_label("--cluster-name", &name)?;
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
                "--managed-kubeconfig",
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
                "--cluster-name",
                "",
                "needed to publish: set it, or point --hub-kubeconfig at OCM's secret directory holding cluster-name",
            )),
            (None, Some(_)) => Err(ConfigError::new(
                "--hub-kubeconfig",
                "",
                "needed to publish: the hub kubeconfig file or OCM's <addon>-hub-kubeconfig secret directory",
            )),
        }
    }
}

fn check_sources(sources: &[SourceArg]) -> Result<Sources, ConfigError> {
    let mut out = Sources::default();
    let listed = || {
        sources
            .iter()
            .map(|s| format!("{s:?}").to_lowercase())
            .collect::<Vec<_>>()
            .join(",")
    };
    for source in sources {
        let slot = match source {
            SourceArg::Cluster => &mut out.cluster,
            SourceArg::Kubelet => &mut out.kubelet,
            SourceArg::Host => &mut out.host,
        };
        if *slot {
            return Err(ConfigError::new("--source", listed(), "a source is listed twice"));
        }
        *slot = true;
    }
    if out == Sources::default() {
        return Err(ConfigError::new(
            "--source",
            "",
            "at least one source is needed: cluster, kubelet or host",
        ));
    }
    if out.kubelet && !out.cluster {
        return Err(ConfigError::new(
            "--source",
            listed(),
            "kubelet refines the cluster source with real usage; use --source cluster,kubelet",
        ));
    }
    Ok(out)
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
                "--hub-kubeconfig",
                shown,
                "the directory holds no `kubeconfig` file",
            ));
        }
        let cluster_name_file = match std::fs::read_to_string(path.join("cluster-name")) {
            Ok(text) => {
                let name = text.trim().to_owned();
                check_dns_label("--hub-kubeconfig", &name).map_err(|e| {
                    ConfigError::new(
                        "--hub-kubeconfig",
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
            "--hub-kubeconfig",
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

fn names(defs: &[ScoreDef]) -> String {
    defs.iter()
        .map(|d| d.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

fn joined<T>(items: &[T], f: impl Fn(&T) -> &String) -> String {
    items.iter().map(|i| f(i).as_str()).collect::<Vec<_>>().join(",")
}

/// `90s` → `1m30s`, for messages.
pub fn fmt_duration(d: Duration) -> String {
    let ms = d.as_millis();
    if !ms.is_multiple_of(1000) {
        return format!("{ms}ms");
    }
    let s = ms / 1000;
    match (s / 3600, (s % 3600) / 60, s % 60) {
        (0, 0, s) => format!("{s}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, s) => format!("{m}m{s}s"),
        (h, 0, 0) => format!("{h}h"),
        (h, m, s) => format!("{h}h{m}m{s}s"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{Cli, Command};
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
    fn durations() {
        for (text, secs_ms) in [
            ("60s", 60_000),
            ("3m", 180_000),
            ("1m30s", 90_000),
            ("500ms", 500),
            ("1h", 3_600_000),
            ("45", 45_000),
        ] {
            assert_eq!(
                parse_duration(text),
                Ok(DurationArg(Duration::from_millis(secs_ms))),
                "{text}"
            );
        }
        for bad in ["", "s", "1x", "1.5s", "-1s", "m5", "1 s"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert_eq!(fmt_duration(Duration::from_secs(90)), "1m30s");
        assert_eq!(fmt_duration(Duration::from_millis(1500)), "1500ms");
    }

    #[test]
    fn extended_resource_prefixes() {
        let p = |t| parse_extended_resource(t).map(|e| e.prefix);
        assert_eq!(p("amd.com/gpu"), Ok("amdGpu".into()));
        assert_eq!(p("nvidia.com/mig-1g.5gb"), Ok("nvidiaMig1g5gb".into()));
        assert_eq!(p("hugepages-2Mi"), Ok("hugepages2Mi".into()));
        assert_eq!(p("example.com/fpga=fpga"), Ok("fpga".into()));
        assert!(p("nvidia.com/gpu").is_err(), "built in");
        assert!(p("a b").is_err());
        assert!(p("x.io/y=Bad").is_err());
    }

    #[test]
    fn normalize_specs() {
        assert_eq!(
            parse_normalize("cpuClusterAvailable=absolute:0:500"),
            Ok(NormalizeArg {
                score: "cpuClusterAvailable".into(),
                normalization: Normalization::Absolute { min: 0.0, max: 500.0 }
            })
        );
        assert_eq!(
            parse_normalize("memNodeAvailable=percent").map(|n| n.normalization),
            Ok(Normalization::Percent { min: 0.0, max: 100.0 })
        );
        for bad in [
            "cpu",
            "x=absolute:1",
            "x=absolute:5:5",
            "x=absolute:a:5",
            "x=linear:0:1",
            "x=percent:0:inf",
        ] {
            assert!(parse_normalize(bad).is_err(), "{bad}");
        }
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
