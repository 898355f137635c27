//! The `ocm-score-agent` command-line contract, in one place: flag names, value types and their
//! parsers, defaults, limits and the rules across flags, with the names of the scores the agent
//! publishes.
//!
//! Two programs speak it: the agent parses its flags with it, and the hub's add-on manager checks
//! AddOnDeploymentConfig variables with it before it renders them into agent flags. Changing a flag
//! is one edit here.
//!
//! Why a crate of its own: the hub must not link the agent's library (node and pod watches, the
//! kubelet scraper, sysinfo, an HTTP server) to learn a few names and rules, and `scheduler-core`
//! is about OCM's API and Placement, not about one agent's flags. This crate is pure (no I/O, no
//! clock): both sides depend on it, it depends on neither.

use ocm_score_api::duration;
use std::fmt;
use std::time::Duration;

/// The image every ocm-score binary runs from, as the repository's Dockerfile and
/// `control-plane image` build it: `localhost/` is where a local build lands (`docker build -t`,
/// `ctr images import`), the tag is the workspace's version. The add-on manager deploys the agent
/// from it unless told otherwise, and the shipped manifests name it (a test keeps them equal).
pub const IMAGE: &str = concat!("localhost/ocm-score:", env!("CARGO_PKG_VERSION"));

/// Flag names as written on a command line. The agent's clap definition takes [`long`] of them, the
/// hub renders `--flag=value` with [`arg`].
pub mod flag {
    pub const SOURCE: &str = "--source";
    pub const EXTENDED_RESOURCE: &str = "--extended-resource";
    pub const NORMALIZE: &str = "--normalize";
    pub const SCORES: &str = "--scores";
    pub const SCORE_OBJECT_NAME: &str = "--score-object-name";
    pub const VALIDITY: &str = "--validity";
    pub const RENEW_EVERY: &str = "--renew-every";
    pub const MANAGED_KUBECONFIG: &str = "--managed-kubeconfig";
    pub const HUB_KUBECONFIG: &str = "--hub-kubeconfig";
    pub const CLUSTER_NAME: &str = "--cluster-name";
    pub const API_TIMEOUT: &str = "--api-timeout";
    pub const HUB_TIMEOUT: &str = "--hub-timeout";
    pub const KUBELET_CONCURRENCY: &str = "--kubelet-concurrency";
    pub const REFRESH_INTERVAL: &str = "--refresh-interval";
    pub const JITTER: &str = "--jitter";
    pub const DEBOUNCE: &str = "--debounce";
    pub const MIN_WRITE_INTERVAL: &str = "--min-write-interval";
    pub const SCORE_STEP: &str = "--score-step";
    pub const ADDON_NAME: &str = "--addon-name";
    pub const ADDON_NAMESPACE: &str = "--addon-namespace";
    pub const LEASE_INTERVAL: &str = "--lease-interval";
    /// Whether the score object the agent creates is owned by its ManagedClusterAddOn.
    pub const OWNED_BY_ADDON: &str = "--owned-by-addon";
    pub const PUBLISH: &str = "--publish";
    /// WorkloadShapes from a file instead of the hub (standalone runs and `once`).
    pub const SHAPES: &str = "--shapes";
    /// Whether pending pods are deducted before counting `fits.<shape>`.
    pub const DEDUCT_PENDING: &str = "--deduct-pending";
    /// How often `run` checks whether a hub without the WorkloadShape CRD has it now.
    pub const SHAPES_RECHECK_INTERVAL: &str = "--shapes-recheck-interval";
    /// The process shell's probe address flag (`ocm_score_shell::args::ProbeArgs`), which the agent
    /// takes like every mode; `--metrics-addr` is its deprecated spelling.
    pub const METRICS_BIND_ADDRESS: &str = "--metrics-bind-address";

    /// The name clap wants: the flag without its leading `--`.
    pub fn long(flag: &'static str) -> &'static str {
        flag.strip_prefix("--").unwrap_or(flag)
    }

    /// `--flag=value`, the form that survives values starting with `-`.
    pub fn arg(flag: &str, value: &str) -> String {
        format!("{flag}={value}")
    }
}

/// The agent executable and the subcommand the add-on's Deployment runs.
pub const BINARY: &str = "ocm-score-agent";
pub const RUN: &str = "run";

pub const DEFAULT_SOURCES: &str = "cluster";
pub const DEFAULT_REFRESH_INTERVAL: Duration = Duration::from_secs(60);
/// Refreshes come up to 10 % early or late.
pub const DEFAULT_JITTER: f64 = 0.1;
pub const MAX_JITTER: f64 = 0.5;
/// After a node or pod change, wait this long for more; the refresh interval may not be shorter.
pub const DEFAULT_DEBOUNCE: Duration = Duration::from_secs(5);
pub const DEFAULT_MIN_WRITE_INTERVAL: Duration = Duration::from_secs(15);
pub const DEFAULT_API_TIMEOUT: Duration = Duration::from_secs(10);
pub const DEFAULT_HUB_TIMEOUT: Duration = Duration::from_secs(20);
pub const MIN_TIMEOUT: Duration = Duration::from_millis(100);
pub const MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(1);
pub const DEFAULT_SCORE_STEP: u8 = 5;
pub const MIN_SCORE_STEP: u8 = 1;
pub const MAX_SCORE_STEP: u8 = 200;
/// validUntil is renewed at every refresh, as the add-on's contract says.
pub const DEFAULT_RENEW_EVERY: u32 = 1;
pub const MAX_RENEW_EVERY: u32 = 60;
pub const MIN_VALIDITY: Duration = Duration::from_secs(10);
pub const MAX_VALIDITY: Duration = Duration::from_secs(24 * 3600);
/// validUntil of `once` when --validity is not given (nothing renews it).
pub const ONCE_VALIDITY: Duration = Duration::from_secs(180);
/// Pending, unbound pods are deducted first-fit before `fits.<shape>` is counted.
pub const DEFAULT_DEDUCT_PENDING: bool = true;
/// A hub without the WorkloadShape CRD is asked again about this often (spread ±1/3: 2 to 4
/// minutes), one discovery request each time, instead of watching a resource that is not there.
pub const DEFAULT_SHAPES_RECHECK_INTERVAL: Duration = Duration::from_secs(180);
pub const MIN_SHAPES_RECHECK_INTERVAL: Duration = Duration::from_secs(1);
/// The log formats `--log-format` takes.
pub const LOG_FORMATS: [&str; 2] = ["text", "json"];

/// A flag's value that breaks the contract: which flag, which value (empty when the flag is
/// missing), and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct FlagError {
    pub flag: &'static str,
    pub value: String,
    pub reason: String,
}

impl FlagError {
    pub fn new(flag: &'static str, value: impl Into<String>, reason: impl Into<String>) -> Self {
        Self {
            flag,
            value: value.into(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for FlagError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
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

// ---- values ------------------------------------------------------------------------------------

/// A duration such as `60s`, `3m`, `1m30s`, `500ms`, `1h`, or a bare number of seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DurationArg(pub Duration);

impl fmt::Display for DurationArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&duration::format(self.0))
    }
}

/// A flag value in the Go-style grammar of `ocm_score_api::duration`, the only one the agent takes.
pub fn duration_arg(text: &str) -> Result<DurationArg, String> {
    duration::parse(text)
        .map(DurationArg)
        .map_err(|_| format!("expected a duration such as 60s, 3m, 1m30s or 500ms, got {text:?}"))
}

/// One `--source`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Cluster,
    Kubelet,
    Host,
}

pub fn parse_source(text: &str) -> Result<Source, String> {
    match text.trim() {
        "cluster" => Ok(Source::Cluster),
        "kubelet" => Ok(Source::Kubelet),
        "host" => Ok(Source::Host),
        other => Err(format!(
            "unknown source {other:?}; expected cluster, kubelet or host"
        )),
    }
}

/// Which sources are enabled.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Sources {
    pub cluster: bool,
    pub kubelet: bool,
    pub host: bool,
}

impl Sources {
    /// The sources without `--source` ([`DEFAULT_SOURCES`]).
    pub const DEFAULT: Sources = Sources {
        cluster: true,
        kubelet: false,
        host: false,
    };

    /// The sources of a `--source` list: each at most once, at least one, `kubelet` only with `cluster`.
    pub fn from_list(list: &[Source]) -> Result<Sources, FlagError> {
        let listed = || {
            list.iter()
                .map(|s| format!("{s:?}").to_lowercase())
                .collect::<Vec<_>>()
                .join(",")
        };
        let mut out = Sources::default();
        for source in list {
            let slot = match source {
                Source::Cluster => &mut out.cluster,
                Source::Kubelet => &mut out.kubelet,
                Source::Host => &mut out.host,
            };
            if std::mem::replace(slot, true) {
                return Err(FlagError::new(flag::SOURCE, listed(), "a source is listed twice"));
            }
        }
        if out == Sources::default() {
            return Err(FlagError::new(
                flag::SOURCE,
                "",
                "at least one source is needed: cluster, kubelet or host",
            ));
        }
        if out.kubelet && !out.cluster {
            return Err(FlagError::new(
                flag::SOURCE,
                listed(),
                "kubelet refines the cluster source with real usage; use --source cluster,kubelet",
            ));
        }
        Ok(out)
    }

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

/// How a score maps its free amount onto -100..100.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Normalization {
    /// Bounds in natural units (cores, GiB, devices).
    Absolute { min: f64, max: f64 },
    /// Bounds in percent of capacity.
    Percent { min: f64, max: f64 },
}

impl fmt::Display for Normalization {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Normalization::Absolute { min, max } => write!(f, "absolute:{min}:{max}"),
            Normalization::Percent { min, max } => write!(f, "percent:{min}:{max}"),
        }
    }
}

/// `SCORE=absolute:MIN:MAX` / `SCORE=percent:MIN:MAX` / `SCORE=percent` of `--normalize`.
#[derive(Clone, Debug, PartialEq)]
pub struct NormalizeArg {
    pub score: String,
    pub normalization: Normalization,
}

pub fn parse_normalize(text: &str) -> Result<NormalizeArg, String> {
    let usage = "expected SCORE=absolute:MIN:MAX, SCORE=percent or SCORE=percent:MIN:MAX";
    let (score, spec) = text.split_once('=').ok_or_else(|| usage.to_owned())?;
    let bounds = |min: &str, max: &str| -> Result<(f64, f64), String> {
        let number = |s: &str| {
            s.trim()
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| format!("bound {s:?} is not a finite number"))
        };
        let (min, max) = (number(min)?, number(max)?);
        if min >= max {
            return Err(format!("MIN ({min}) must be below MAX ({max})"));
        }
        Ok((min, max))
    };
    let parts: Vec<&str> = spec.split(':').collect();
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

/// `RESOURCE[=PREFIX]` of `--extended-resource`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExtendedResource {
    pub resource: String,
    /// The lowerCamelCase prefix of its two score names.
    pub prefix: String,
}

pub fn parse_extended_resource(text: &str) -> Result<ExtendedResource, String> {
    let (resource, prefix) = match text.split_once('=') {
        Some((r, p)) => (r.trim(), Some(p.trim())),
        None => (text.trim(), None),
    };
    let valid_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/');
    if resource.is_empty() || !resource.chars().all(valid_char) || resource.matches('/').count() > 1 {
        return Err(format!("{resource:?} is not a resource name such as amd.com/gpu"));
    }
    if BUILT_IN_RESOURCES.contains(&resource) {
        return Err(format!("{resource} is scored already"));
    }
    let prefix = prefix.map_or_else(|| default_prefix(resource), str::to_owned);
    let mut chars = prefix.chars();
    if !chars.next().is_some_and(|c| c.is_ascii_lowercase()) || !chars.all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "score prefix {prefix:?} must be a lowerCamelCase word such as amdGpu"
        ));
    }
    Ok(ExtendedResource {
        resource: resource.to_owned(),
        prefix,
    })
}

/// `amd.com/gpu` → `amdGpu`, `nvidia.com/mig-1g.5gb` → `nvidiaMig1g5gb`, `hugepages-2Mi` →
/// `hugepages2Mi`: the first label of the domain, then the name's words, camel-cased.
pub fn default_prefix(resource: &str) -> String {
    let (domain, name) = resource.split_once('/').unwrap_or(("", resource));
    let first_label = domain.split('.').next().unwrap_or_default();
    let mut out = String::new();
    for word in std::iter::once(first_label).chain(name.split(|c: char| !c.is_ascii_alphanumeric())) {
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

// ---- scores ------------------------------------------------------------------------------------

/// Resources the agent scores without configuration, in index order; an extended resource may not
/// repeat them.
pub const BUILT_IN_RESOURCES: [&str; 4] = ["cpu", "memory", "nvidia.com/gpu", "google.com/tpu"];

/// The most resources one agent accounts for, built-in and extended together (the agent's per-pod
/// arithmetic works in fixed scratch space of this size).
pub const MAX_ACCOUNTED_RESOURCES: usize = 16;

/// Checks that `extended` leaves the agent within [`MAX_ACCOUNTED_RESOURCES`] (a resource named
/// twice counts once).
pub fn check_extended_count(extended: &[ExtendedResource]) -> Result<(), String> {
    let mut distinct: Vec<&str> = extended.iter().map(|e| e.resource.as_str()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let got = BUILT_IN_RESOURCES.len() + distinct.len();
    if got > MAX_ACCOUNTED_RESOURCES {
        return Err(format!(
            "at most {MAX_ACCOUNTED_RESOURCES} resources can be accounted ({} built in), got {got}",
            BUILT_IN_RESOURCES.len()
        ));
    }
    Ok(())
}

/// Whether a score is about the whole cluster or the best single node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Summed over the eligible nodes.
    Cluster,
    /// The best single eligible node.
    Node,
}

/// One score the agent publishes.
#[derive(Clone, Debug, PartialEq)]
pub struct ScoreSpec {
    pub name: String,
    /// The resource it is about (one of [`BUILT_IN_RESOURCES`] or an extended resource).
    pub resource: String,
    pub scope: Scope,
    pub normalization: Normalization,
}

/// The built-in scores, upstream's names in upstream's order, then the two legacy names:
/// (name, index into [`BUILT_IN_RESOURCES`], scope, absolute bounds in natural units).
const BUILT_IN_SCORES: [(&str, usize, Scope, f64); 10] = [
    ("cpuNodeAvailable", 0, Scope::Node, 100.0),
    ("cpuClusterAvailable", 0, Scope::Cluster, 100.0),
    ("memNodeAvailable", 1, Scope::Node, 1024.0),
    ("memClusterAvailable", 1, Scope::Cluster, 1024.0),
    ("gpuNodeAvailable", 2, Scope::Node, 20.0),
    ("gpuClusterAvailable", 2, Scope::Cluster, 20.0),
    ("tpuNodeAvailable", 3, Scope::Node, 20.0),
    ("tpuClusterAvailable", 3, Scope::Cluster, 20.0),
    ("cpuAvailable", 0, Scope::Cluster, 100.0),
    ("memAvailable", 1, Scope::Cluster, 1024.0),
];

/// The names of the built-in scores.
pub fn built_in_score_names() -> impl Iterator<Item = &'static str> {
    BUILT_IN_SCORES.iter().map(|(name, ..)| *name)
}

/// The scores published without configuration.
pub fn built_in_scores() -> Vec<ScoreSpec> {
    BUILT_IN_SCORES
        .iter()
        .map(|&(name, resource, scope, max)| ScoreSpec {
            name: name.to_owned(),
            resource: BUILT_IN_RESOURCES[resource].to_owned(),
            scope,
            normalization: Normalization::Absolute { min: 0.0, max },
        })
        .collect()
}

/// The two scores of an extended resource: `<prefix>NodeAvailable`, `<prefix>ClusterAvailable`.
pub fn extended_scores(extended: &ExtendedResource) -> [ScoreSpec; 2] {
    let spec = |suffix: &str, scope| ScoreSpec {
        name: format!("{}{suffix}", extended.prefix),
        resource: extended.resource.clone(),
        scope,
        normalization: Normalization::Percent { min: 0.0, max: 100.0 },
    };
    [
        spec("NodeAvailable", Scope::Node),
        spec("ClusterAvailable", Scope::Cluster),
    ]
}

/// The scores `--extended-resource`, `--normalize` and `--scores` ask for, in publishing order:
/// built-in and extended scores, renormalized, then narrowed to the selection (none: all).
pub fn published_scores(
    extended: &[ExtendedResource],
    normalize: &[NormalizeArg],
    selected: &[String],
) -> Result<Vec<ScoreSpec>, FlagError> {
    let mut scores = built_in_scores();
    for resource in extended {
        for score in extended_scores(resource) {
            if scores.iter().any(|s| s.name == score.name) {
                return Err(FlagError::new(
                    flag::EXTENDED_RESOURCE,
                    format!("{}={}", resource.resource, resource.prefix),
                    format!("score name {} is taken; choose another prefix", score.name),
                ));
            }
            scores.push(score);
        }
    }
    let known = |scores: &[ScoreSpec]| {
        scores
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    for n in normalize {
        let Some(score) = scores.iter_mut().find(|s| s.name == n.score) else {
            return Err(FlagError::new(
                flag::NORMALIZE,
                format!("{}={}", n.score, n.normalization),
                format!("unknown score {:?}; known: {}", n.score, known(&scores)),
            ));
        };
        score.normalization = n.normalization;
    }
    if !selected.is_empty() {
        if let Some(unknown) = selected
            .iter()
            .find(|name| !scores.iter().any(|s| &s.name == *name))
        {
            return Err(FlagError::new(
                flag::SCORES,
                unknown.clone(),
                format!("unknown score; known: {}", known(&scores)),
            ));
        }
        scores.retain(|s| selected.contains(&s.name));
    }
    Ok(scores)
}

// ---- timing ------------------------------------------------------------------------------------

/// The flags that decide when the agent computes and renews, as given (`None`: not given).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Timing {
    pub refresh: Duration,
    pub jitter: f64,
    pub debounce: Duration,
    pub min_write_interval: Duration,
    pub api_timeout: Duration,
    pub hub_timeout: Duration,
    pub validity: Option<Duration>,
    pub renew_every: Option<u32>,
}

impl Default for Timing {
    /// The agent's defaults.
    fn default() -> Self {
        Timing {
            refresh: DEFAULT_REFRESH_INTERVAL,
            jitter: DEFAULT_JITTER,
            debounce: DEFAULT_DEBOUNCE,
            min_write_interval: DEFAULT_MIN_WRITE_INTERVAL,
            api_timeout: DEFAULT_API_TIMEOUT,
            hub_timeout: DEFAULT_HUB_TIMEOUT,
            validity: None,
            renew_every: None,
        }
    }
}

/// How long scores stay valid and how often they are renewed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Renewal {
    pub validity: Duration,
    /// validUntil is renewed at every Nth refresh (1 when --validity was given).
    pub renew_every: u32,
    /// The renew-margin rule for one refresh (see [`renewal_margin`]); the validity must exceed it.
    pub renew_margin: Duration,
}

/// The renew-margin rule for `refreshes` refreshes: the longest they may take, one after the other, to
/// land a write: each as late as the jitter allows, the last one reading the managed cluster as slowly
/// as `api_timeout` allows and writing the hub as slowly as `hub_timeout` allows.
pub fn renewal_margin(refreshes: u32, timing: &Timing) -> Duration {
    let late = timing.refresh.as_secs_f64() * f64::from(refreshes) * (1.0 + timing.jitter);
    Duration::try_from_secs_f64(late)
        .unwrap_or(Duration::MAX)
        .saturating_add(timing.api_timeout)
        .saturating_add(timing.hub_timeout)
}

/// The validity when --validity is not given: the renew-margin rule for `renew_every` refreshes,
/// rounded up to whole seconds, plus the second `validUntil` loses to whole-second rounding, and at
/// least [`MIN_VALIDITY`]. A dead agent's scores so expire once `renew_every` refreshes were missed
/// and the slack a late, slow one needs has passed; a live agent, renewing once the next refresh might
/// land after validUntil, renews at exactly every `renew_every`-th refresh.
pub fn derived_validity(renew_every: u32, timing: &Timing) -> Duration {
    let margin = renewal_margin(renew_every, timing);
    let whole_seconds = margin
        .as_secs()
        .saturating_add(u64::from(margin.subsec_nanos() > 0));
    Duration::from_secs(whole_seconds.saturating_add(1)).max(MIN_VALIDITY)
}

/// `--validity` within [`MIN_VALIDITY`]..=[`MAX_VALIDITY`].
pub fn check_validity(validity: Duration) -> Result<(), FlagError> {
    if (MIN_VALIDITY..=MAX_VALIDITY).contains(&validity) {
        Ok(())
    } else {
        Err(FlagError::new(
            flag::VALIDITY,
            duration::format(validity),
            "must be between 10s and 24h",
        ))
    }
}

/// `--api-timeout` and `--hub-timeout` at least [`MIN_TIMEOUT`].
pub fn check_timeouts(api_timeout: Duration, hub_timeout: Duration) -> Result<(), FlagError> {
    for (name, timeout) in [(flag::API_TIMEOUT, api_timeout), (flag::HUB_TIMEOUT, hub_timeout)] {
        if timeout < MIN_TIMEOUT {
            return Err(FlagError::new(
                name,
                duration::format(timeout),
                "must be at least 100ms",
            ));
        }
    }
    Ok(())
}

impl Timing {
    /// The rules across the timing flags; the first broken one is returned.
    pub fn check(&self) -> Result<Renewal, FlagError> {
        let show = duration::format;
        if self.refresh < MIN_REFRESH_INTERVAL {
            return Err(FlagError::new(
                flag::REFRESH_INTERVAL,
                show(self.refresh),
                "must be at least 1s",
            ));
        }
        if !(0.0..=MAX_JITTER).contains(&self.jitter) {
            return Err(FlagError::new(
                flag::JITTER,
                self.jitter.to_string(),
                "must be between 0 and 0.5",
            ));
        }
        check_timeouts(self.api_timeout, self.hub_timeout)?;
        if self.debounce > self.refresh {
            return Err(FlagError::new(
                flag::DEBOUNCE,
                show(self.debounce),
                format!("must not exceed --refresh-interval ({})", show(self.refresh)),
            ));
        }
        let renew_margin = renewal_margin(1, self);
        let (validity, renew_every) = match (self.validity, self.renew_every) {
            (Some(_), Some(n)) => {
                return Err(FlagError::new(
                    flag::RENEW_EVERY,
                    n.to_string(),
                    "cannot be combined with --validity, which sets validUntil directly",
                ));
            }
            (Some(validity), None) => (validity, 1),
            (None, n) => {
                let n = n.unwrap_or(DEFAULT_RENEW_EVERY);
                if !(1..=MAX_RENEW_EVERY).contains(&n) {
                    return Err(FlagError::new(
                        flag::RENEW_EVERY,
                        n.to_string(),
                        format!("must be between 1 and {MAX_RENEW_EVERY}"),
                    ));
                }
                let validity = derived_validity(n, self);
                if validity > MAX_VALIDITY {
                    return Err(FlagError::new(
                        flag::RENEW_EVERY,
                        n.to_string(),
                        format!(
                            "makes validUntil {} ahead with --refresh-interval {}; at most {} is allowed",
                            show(validity),
                            show(self.refresh),
                            show(MAX_VALIDITY)
                        ),
                    ));
                }
                (validity, n)
            }
        };
        check_validity(validity)?;
        if validity <= renew_margin {
            return Err(FlagError::new(
                flag::VALIDITY,
                show(validity),
                format!(
                    "must exceed --refresh-interval × (1 + --jitter) + --api-timeout + --hub-timeout = {}, \
                     or scores would expire between refreshes",
                    show(renew_margin)
                ),
            ));
        }
        if self.min_write_interval >= validity {
            return Err(FlagError::new(
                flag::MIN_WRITE_INTERVAL,
                show(self.min_write_interval),
                "must be below --validity",
            ));
        }
        Ok(Renewal {
            validity,
            renew_every,
            renew_margin,
        })
    }
}

#[cfg(test)]
#[path = "lib_tests.rs"]
mod tests;
