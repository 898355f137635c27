//! AddOnDeploymentConfig → agent configuration, validated before anything is rendered.
//!
//! | customized variable | agent flag | value |
//! |---|---|---|
//! | `SOURCES` | `--source` | comma list of `cluster`, `kubelet` (needs `cluster`), `host` |
//! | `REFRESH_INTERVAL` | `--refresh-interval` | duration, e.g. `60s`, `2m`, `1m30s`, `90`; at least 5s |
//! | `SCORE_VALIDITY` | `--validity` | duration from 10s to 24h, longer than refresh × 1.1 + 30s and than 15s |
//! | `NORMALIZE` | `--normalize` | comma list of `SCORE=absolute:MIN:MAX`, `SCORE=percent` or `SCORE=percent:MIN:MAX` |
//! | `SCORE_STEP` | `--score-step` | integer 1..=200 |
//! | `EXTENDED_RESOURCES` | `--extended-resource` | comma list of `RESOURCE[=PREFIX]`, e.g. `amd.com/gpu=amdGpu` |
//! | `SCORES` | `--scores` | comma list of score names to publish |
//!
//! Score names (in `NORMALIZE` and `SCORES`) must be ones the agent publishes: the built-in ones or
//! `<prefix>{Node,Cluster}Available` of a configured extended resource. These are the agent's own
//! rules, checked here so a bad value is reported before any agent is rolled.
//! | `LOG_FORMAT` | `--log-format` | `text` or `json` |
//!
//! `nodePlacement` sets the agent pod's nodeSelector and tolerations, `registries` rewrite its image
//! (a rule with a `source` replaces that image prefix; one without replaces the registry host; the
//! last matching rule wins), `agentInstallNamespace` moves the agent. Unknown variable names are
//! errors: a typo must not silently leave the default in place.

use super::agent_cli as cli;
use k8s_openapi::api::core::v1::Toleration;
use scheduler_core::api::{AddOnDeploymentConfigSpec, ImageMirror};
use std::collections::BTreeMap;
use std::time::Duration;

/// One configuration problem, naming the field and the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}={value:?}: {reason}")]
pub struct ConfigError {
    pub field: String,
    pub value: String,
    pub reason: String,
}

impl ConfigError {
    fn new(field: impl Into<String>, value: impl Into<String>, reason: impl Into<String>) -> Self {
        ConfigError {
            field: field.into(),
            value: value.into(),
            reason: reason.into(),
        }
    }
}

/// The agent's data sources; they decide the agent's permissions on the managed cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sources {
    pub cluster: bool,
    pub kubelet: bool,
    pub host: bool,
}

impl Default for Sources {
    /// The agent's own default: `cluster`.
    fn default() -> Self {
        Sources {
            cluster: true,
            kubelet: false,
            host: false,
        }
    }
}

/// A validated configuration, ready to render.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AgentConfig {
    /// Agent flags set from variables, in a fixed order (the rendered args are stable).
    pub flags: Vec<(&'static str, String)>,
    pub sources: Sources,
    pub node_selector: Option<BTreeMap<String, String>>,
    pub tolerations: Option<Vec<Toleration>>,
    pub registries: Vec<ImageMirror>,
    /// `agentInstallNamespace`, when non-empty.
    pub install_namespace: Option<String>,
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Sources,
    Duration,
    Normalize,
    Step,
    ExtendedResources,
    ScoreNames,
    LogFormat,
}

struct Variable {
    name: &'static str,
    flag: &'static str,
    kind: Kind,
}

/// The variables we understand, in the order their flags are rendered.
const VARIABLES: &[Variable] = &[
    Variable {
        name: "SOURCES",
        flag: cli::SOURCE,
        kind: Kind::Sources,
    },
    Variable {
        name: "REFRESH_INTERVAL",
        flag: cli::REFRESH_INTERVAL,
        kind: Kind::Duration,
    },
    Variable {
        name: "SCORE_VALIDITY",
        flag: cli::VALIDITY,
        kind: Kind::Duration,
    },
    Variable {
        name: "NORMALIZE",
        flag: cli::NORMALIZE,
        kind: Kind::Normalize,
    },
    Variable {
        name: "SCORE_STEP",
        flag: cli::SCORE_STEP,
        kind: Kind::Step,
    },
    Variable {
        name: "EXTENDED_RESOURCES",
        flag: cli::EXTENDED_RESOURCE,
        kind: Kind::ExtendedResources,
    },
    Variable {
        name: "SCORES",
        flag: cli::SCORES,
        kind: Kind::ScoreNames,
    },
    Variable {
        name: "LOG_FORMAT",
        flag: cli::LOG_FORMAT,
        kind: Kind::LogFormat,
    },
];

/// The names of every variable we understand (for documentation and tests).
pub fn variable_names() -> impl Iterator<Item = &'static str> {
    VARIABLES.iter().map(|v| v.name)
}

/// Validates a config spec. The first problem found is returned; a config is used whole or not at all.
pub fn agent_config(spec: &AddOnDeploymentConfigSpec) -> Result<AgentConfig, ConfigError> {
    let mut config = AgentConfig::default();
    let mut values: BTreeMap<&str, &str> = BTreeMap::new();
    for var in &spec.customized_variables {
        let field = variable_field(&var.name);
        if !VARIABLES.iter().any(|v| v.name == var.name) {
            let known: Vec<&str> = variable_names().collect();
            return Err(ConfigError::new(
                field,
                &var.value,
                format!("unknown variable; known: {}", known.join(", ")),
            ));
        }
        if values.insert(var.name.as_str(), var.value.as_str()).is_some() {
            return Err(ConfigError::new(field, &var.value, "set more than once"));
        }
    }
    let mut checked = Checked::default();
    for variable in VARIABLES {
        let Some(value) = values.get(variable.name).map(|v| v.trim()) else {
            continue;
        };
        let err = |reason: String| ConfigError::new(variable_field(variable.name), value, reason);
        match variable.kind {
            Kind::Sources => config.sources = parse_sources(value).map_err(err)?,
            Kind::Duration => {
                let duration = parse_duration(value).map_err(err)?;
                match variable.flag {
                    cli::REFRESH_INTERVAL => checked.refresh = Some(duration),
                    _ => checked.validity = Some(duration),
                }
            }
            Kind::Normalize => checked.normalized = list(value, parse_normalization).map_err(err)?,
            Kind::Step => match value.parse::<u16>() {
                Ok(1..=200) => {}
                _ => return Err(err("expected an integer from 1 to 200".into())),
            },
            Kind::ExtendedResources => {
                checked.prefixes = list(value, parse_extended_resource).map_err(err)?
            }
            Kind::ScoreNames => checked.selected = list(value, |name| Ok(name.to_string())).map_err(err)?,
            Kind::LogFormat => {
                if value != "text" && value != "json" {
                    return Err(err("expected text or json".into()));
                }
            }
        }
        config.flags.push((variable.flag, value.to_string()));
    }
    checked.check(&values)?;
    if let Some(placement) = &spec.node_placement {
        config.node_selector.clone_from(&placement.node_selector);
        if let Some(tolerations) = &placement.tolerations {
            for (i, t) in tolerations.iter().enumerate() {
                check_toleration(i, t)?;
            }
        }
        config.tolerations.clone_from(&placement.tolerations);
    }
    // The CRD says a rule with an empty mirror is ignored.
    config.registries = spec
        .registries
        .iter()
        .filter(|r| !r.mirror.is_empty())
        .cloned()
        .collect();
    if let Some(ns) = spec
        .agent_install_namespace
        .as_deref()
        .filter(|ns| !ns.is_empty())
    {
        if !is_dns_label(ns) {
            return Err(ConfigError::new(
                "spec.agentInstallNamespace",
                ns,
                "not a DNS label (lowercase letters, digits and '-', at most 63)",
            ));
        }
        config.install_namespace = Some(ns.to_string());
    }
    Ok(config)
}

fn variable_field(name: &str) -> String {
    format!("spec.customizedVariables[{name}]")
}

/// What the checks across variables need, collected while each is parsed.
#[derive(Default)]
struct Checked {
    refresh: Option<Duration>,
    validity: Option<Duration>,
    /// Score prefixes of the extended resources.
    prefixes: Vec<String>,
    /// Scores named by NORMALIZE.
    normalized: Vec<String>,
    /// Scores named by SCORES.
    selected: Vec<String>,
}

impl Checked {
    /// The agent's rules across flags: scores must exist, and published scores must stay valid from
    /// one refresh to the next (refresh at most 10 % late, plus a margin).
    fn check(&self, values: &BTreeMap<&str, &str>) -> Result<(), ConfigError> {
        let raw = |name: &str| values.get(name).map(|v| v.trim().to_string()).unwrap_or_default();
        let refresh = self.refresh.unwrap_or(cli::DEFAULT_REFRESH_INTERVAL);
        // Without SCORE_VALIDITY the agent derives it: the renew-margin rule for one refresh, rounded
        // up to whole seconds, plus one.
        let margin =
            refresh.mul_f64(1.0 + cli::DEFAULT_JITTER) + cli::DEFAULT_API_TIMEOUT + cli::DEFAULT_HUB_TIMEOUT;
        let derived = Duration::from_secs(margin.as_secs() + u64::from(margin.subsec_nanos() > 0) + 1);
        let validity = self.validity.unwrap_or(derived.max(cli::MIN_VALIDITY));
        if refresh < cli::MIN_REFRESH_INTERVAL.max(cli::DEFAULT_DEBOUNCE) {
            return Err(ConfigError::new(
                variable_field("REFRESH_INTERVAL"),
                raw("REFRESH_INTERVAL"),
                format!(
                    "must be at least {:?} (the agent's change debounce)",
                    cli::DEFAULT_DEBOUNCE
                ),
            ));
        }
        let validity_err = |reason: String| {
            let shown = if self.validity.is_some() {
                raw("SCORE_VALIDITY")
            } else {
                format!("{validity:?} (default)")
            };
            ConfigError::new(variable_field("SCORE_VALIDITY"), shown, reason)
        };
        if !(cli::MIN_VALIDITY..=cli::MAX_VALIDITY).contains(&validity) {
            return Err(validity_err("must be between 10s and 24h".into()));
        }
        if validity <= margin || validity <= cli::DEFAULT_MIN_WRITE_INTERVAL {
            return Err(validity_err(format!(
                "must be longer than {margin:?} (the refresh interval {refresh:?} + 10 %, plus 30s for a \
                 slow read and write) and than 15s, or scores would expire between refreshes"
            )));
        }
        let mut known: Vec<String> = cli::BUILT_IN_SCORES.iter().map(|s| s.to_string()).collect();
        for prefix in &self.prefixes {
            for name in [
                format!("{prefix}NodeAvailable"),
                format!("{prefix}ClusterAvailable"),
            ] {
                if known.contains(&name) {
                    return Err(ConfigError::new(
                        variable_field("EXTENDED_RESOURCES"),
                        raw("EXTENDED_RESOURCES"),
                        format!("score name {name} is taken; choose another prefix"),
                    ));
                }
                known.push(name);
            }
        }
        for (variable, names) in [("NORMALIZE", &self.normalized), ("SCORES", &self.selected)] {
            if let Some(unknown) = names.iter().find(|n| !known.contains(n)) {
                return Err(ConfigError::new(
                    variable_field(variable),
                    raw(variable),
                    format!("unknown score {unknown:?}; known: {}", known.join(", ")),
                ));
            }
        }
        Ok(())
    }
}

fn list<T>(value: &str, item: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    if value.is_empty() {
        return Err("empty list".into());
    }
    value.split(',').map(str::trim).map(item).collect()
}

fn parse_sources(value: &str) -> Result<Sources, String> {
    let mut sources = Sources {
        cluster: false,
        kubelet: false,
        host: false,
    };
    if value.is_empty() {
        return Err("expected at least one of cluster, kubelet, host".into());
    }
    for source in value.split(',').map(str::trim) {
        let slot = match source {
            "cluster" => &mut sources.cluster,
            "kubelet" => &mut sources.kubelet,
            "host" => &mut sources.host,
            other => {
                return Err(format!(
                    "unknown source {other:?}; expected cluster, kubelet or host"
                ));
            }
        };
        if std::mem::replace(slot, true) {
            return Err(format!("source {source:?} listed twice"));
        }
    }
    if sources.kubelet && !sources.cluster {
        return Err("the kubelet source needs the cluster source".into());
    }
    Ok(sources)
}

/// `90s`, `5m`, `1h30m`, `500ms`, or plain seconds (`90`), as the agent reads durations.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    scheduler_core::duration::parse(text)
        .map_err(|_| format!("expected a duration such as 60s, 5m or 1m30s, got {text:?}"))
}

/// `SCORE=absolute:MIN:MAX`, `SCORE=percent` or `SCORE=percent:MIN:MAX`, with MIN < MAX. Returns the score.
fn parse_normalization(item: &str) -> Result<String, String> {
    let (score, rule) = item
        .split_once('=')
        .ok_or_else(|| format!("{item:?}: expected SCORE=absolute:MIN:MAX"))?;
    let parts: Vec<&str> = rule.split(':').collect();
    let bounds = match parts.as_slice() {
        ["percent"] => return Ok(score.trim().to_string()),
        ["absolute" | "percent", min, max] => (min, max),
        _ => {
            return Err(format!(
                "{item:?}: expected absolute:MIN:MAX, percent or percent:MIN:MAX"
            ));
        }
    };
    let number = |text: &str| match text.trim().parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        _ => Err(format!("{item:?}: {text:?} is not a finite number")),
    };
    let (min, max) = (number(bounds.0)?, number(bounds.1)?);
    if min >= max {
        return Err(format!("{item:?}: MIN {min} must be below MAX {max}"));
    }
    Ok(score.trim().to_string())
}

/// `RESOURCE[=PREFIX]`: a resource name (at most one `/`) that is not built in, and a lowerCamelCase
/// score prefix (by default derived from the name: `amd.com/gpu` → `amdGpu`). Returns the prefix.
fn parse_extended_resource(item: &str) -> Result<String, String> {
    let (resource, prefix) = match item.split_once('=') {
        Some((r, p)) => (r.trim(), Some(p.trim().to_string())),
        None => (item.trim(), None),
    };
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | '/');
    if resource.is_empty() || !resource.chars().all(valid) || resource.matches('/').count() > 1 {
        return Err(format!("{resource:?} is not a resource name such as amd.com/gpu"));
    }
    if cli::BUILT_IN_RESOURCES.contains(&resource) {
        return Err(format!("{resource} is scored already"));
    }
    let prefix = prefix.unwrap_or_else(|| default_prefix(resource));
    let mut chars = prefix.chars();
    if !chars.next().is_some_and(|c| c.is_ascii_lowercase()) || !chars.all(|c| c.is_ascii_alphanumeric()) {
        return Err(format!(
            "score prefix {prefix:?} must be a lowerCamelCase word such as amdGpu"
        ));
    }
    Ok(prefix)
}

/// The first label of the domain, then the name's words, camel-cased (`nvidia.com/mig-1g.5gb` →
/// `nvidiaMig1g5gb`).
fn default_prefix(resource: &str) -> String {
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

fn check_toleration(index: usize, t: &Toleration) -> Result<(), ConfigError> {
    let field = |name: &str| format!("spec.nodePlacement.tolerations[{index}].{name}");
    let operator = t.operator.as_deref().unwrap_or("Equal");
    match operator {
        "Equal" | "" => {}
        "Exists" => {
            if let Some(value) = t.value.as_deref().filter(|v| !v.is_empty()) {
                return Err(ConfigError::new(
                    field("value"),
                    value,
                    "must be empty when operator is Exists",
                ));
            }
        }
        other => {
            return Err(ConfigError::new(
                field("operator"),
                other,
                "expected Equal or Exists",
            ));
        }
    }
    if let Some(effect) = t.effect.as_deref()
        && !matches!(effect, "" | "NoSchedule" | "PreferNoSchedule" | "NoExecute")
    {
        return Err(ConfigError::new(
            field("effect"),
            effect,
            "expected NoSchedule, PreferNoSchedule or NoExecute",
        ));
    }
    Ok(())
}

fn is_dns_label(s: &str) -> bool {
    s.len() <= 63
        && s.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
        && s.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Applies the registry rules to an image reference; the last matching rule wins.
pub fn override_image(image: &str, registries: &[ImageMirror]) -> String {
    let mut result = image.to_string();
    for rule in registries.iter().filter(|r| !r.mirror.is_empty()) {
        if rule.source.is_empty() {
            result = format!("{}/{}", rule.mirror.trim_end_matches('/'), repository_path(image));
        } else if let Some(rest) = image.strip_prefix(rule.source.as_str()) {
            result = format!("{}{rest}", rule.mirror);
        }
    }
    result
}

/// The image reference without its registry host (`quay.io/a/b:1` → `a/b:1`, `busybox` → `busybox`).
/// As in Docker references, the first segment is a host when it has a `.` or `:` or is `localhost`.
fn repository_path(image: &str) -> &str {
    match image.split_once('/') {
        Some((first, rest)) if first.contains('.') || first.contains(':') || first == "localhost" => rest,
        _ => image,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler_core::api::{CustomizedVariable, NodePlacement};

    fn spec(vars: &[(&str, &str)]) -> AddOnDeploymentConfigSpec {
        AddOnDeploymentConfigSpec {
            customized_variables: vars
                .iter()
                .map(|(n, v)| CustomizedVariable {
                    name: n.to_string(),
                    value: v.to_string(),
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn empty_config_is_the_agent_default() {
        let config = agent_config(&AddOnDeploymentConfigSpec::default()).expect("valid");
        assert_eq!(config, AgentConfig::default());
        assert!(config.sources.cluster && !config.sources.kubelet);
    }

    #[test]
    fn variables_become_flags_in_a_fixed_order() {
        let config = agent_config(&spec(&[
            ("SCORE_VALIDITY", "5m"),
            ("SOURCES", "cluster,kubelet"),
            (
                "NORMALIZE",
                "cpuNodeAvailable=absolute:0:64, memNodeAvailable=percent",
            ),
            ("SCORE_STEP", "10"),
            ("LOG_FORMAT", "json"),
        ]))
        .expect("valid");
        let flags: Vec<(&str, &str)> = config.flags.iter().map(|(f, v)| (*f, v.as_str())).collect();
        assert_eq!(
            flags,
            vec![
                ("--source", "cluster,kubelet"),
                ("--validity", "5m"),
                (
                    "--normalize",
                    "cpuNodeAvailable=absolute:0:64, memNodeAvailable=percent"
                ),
                ("--score-step", "10"),
                ("--log-format", "json"),
            ]
        );
        assert_eq!(
            config.sources,
            Sources {
                cluster: true,
                kubelet: true,
                host: false
            }
        );
    }

    #[test]
    fn every_bad_value_names_the_variable_and_the_value() {
        let cases: &[(&str, &str, &str)] = &[
            ("SOURCES", "cluster,moon", "moon"),
            ("SOURCES", "kubelet", "needs the cluster source"),
            ("SOURCES", "host,host", "twice"),
            ("REFRESH_INTERVAL", "soon", "duration"),
            ("REFRESH_INTERVAL", "2s", "at least"),
            (
                "SCORE_VALIDITY",
                "30s",
                "or scores would expire between refreshes",
            ),
            ("SCORE_VALIDITY", "48h", "between 10s and 24h"),
            ("NORMALIZE", "cpuNodeAvailable=absolute:64:0", "below"),
            ("NORMALIZE", "cpuNodeAvailable=linear", "expected absolute"),
            ("NORMALIZE", "cpuNodeAvailable=absolute:0:inf", "finite"),
            ("SCORE_STEP", "0", "1 to 200"),
            ("EXTENDED_RESOURCES", "a/b/c", "not a resource name"),
            ("EXTENDED_RESOURCES", "nvidia.com/gpu", "scored already"),
            ("EXTENDED_RESOURCES", "amd.com/gpu=AmdGpu", "lowerCamelCase"),
            ("NORMALIZE", "cpuFree=percent", "unknown score"),
            ("SCORES", "cpu-node", "unknown score"),
            ("LOG_FORMAT", "xml", "text or json"),
            ("REFRESH_INTERVL", "60s", "unknown variable"),
        ];
        for (name, value, needle) in cases {
            let err = agent_config(&spec(&[(name, value)])).expect_err(name);
            assert!(err.field.contains(name), "{err}");
            assert_eq!(err.value, *value, "{err}");
            assert!(err.to_string().contains(needle), "{name}={value}: {err}");
        }
    }

    #[test]
    fn validity_is_checked_against_the_configured_interval() {
        assert!(agent_config(&spec(&[("REFRESH_INTERVAL", "5m"), ("SCORE_VALIDITY", "10m")])).is_ok());
        assert!(
            agent_config(&spec(&[("REFRESH_INTERVAL", "5m")])).is_ok(),
            "the derived validity follows the interval"
        );
        let err = agent_config(&spec(&[("REFRESH_INTERVAL", "5m"), ("SCORE_VALIDITY", "3m")]))
            .expect_err("3m validity < 5m");
        assert!(err.field.contains("SCORE_VALIDITY") && err.value == "3m", "{err}");
        // Extended resources add score names NORMALIZE and SCORES may use.
        let ok = spec(&[
            ("EXTENDED_RESOURCES", "amd.com/gpu"),
            ("SCORES", "amdGpuNodeAvailable,cpuNodeAvailable"),
        ]);
        assert!(agent_config(&ok).is_ok());
        let taken = spec(&[("EXTENDED_RESOURCES", "example.com/x=cpu")]);
        assert!(
            agent_config(&taken)
                .expect_err("cpuNodeAvailable is built in")
                .reason
                .contains("taken")
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("60"), Ok(Duration::from_secs(60)));
        assert_eq!(default_prefix("nvidia.com/mig-1g.5gb"), "nvidiaMig1g5gb");
        for bad in ["", "s", "1.5m", "-1s", "1 m", "1d", "m5"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn node_placement_namespace_and_registries() {
        let mut s = spec(&[]);
        s.node_placement = Some(NodePlacement {
            node_selector: Some([("role".to_string(), "infra".to_string())].into()),
            tolerations: Some(vec![Toleration {
                key: Some("infra".into()),
                operator: Some("Exists".into()),
                effect: Some("NoSchedule".into()),
                ..Default::default()
            }]),
        });
        s.agent_install_namespace = Some("scores".into());
        s.registries = vec![
            ImageMirror {
                mirror: "".into(),
                source: "quay.io".into(),
            },
            ImageMirror {
                mirror: "mirror.local".into(),
                source: "".into(),
            },
        ];
        let config = agent_config(&s).expect("valid");
        assert_eq!(config.install_namespace.as_deref(), Some("scores"));
        assert_eq!(config.registries.len(), 1, "empty mirrors are ignored");
        assert_eq!(config.tolerations.as_ref().map(Vec::len), Some(1));

        s.agent_install_namespace = Some("Not_A_Label".into());
        let err = agent_config(&s).expect_err("bad namespace");
        assert_eq!(err.field, "spec.agentInstallNamespace");

        s.agent_install_namespace = None;
        if let Some(p) = s.node_placement.as_mut() {
            p.tolerations = Some(vec![Toleration {
                operator: Some("Maybe".into()),
                ..Default::default()
            }]);
        }
        let err = agent_config(&s).expect_err("bad operator");
        assert_eq!(
            (err.field.as_str(), err.value.as_str()),
            ("spec.nodePlacement.tolerations[0].operator", "Maybe")
        );
    }

    #[test]
    fn image_overrides() {
        let rules = |pairs: &[(&str, &str)]| -> Vec<ImageMirror> {
            pairs
                .iter()
                .map(|(s, m)| ImageMirror {
                    source: s.to_string(),
                    mirror: m.to_string(),
                })
                .collect()
        };
        let image = "quay.io/ocm/score-agent:v1";
        assert_eq!(override_image(image, &[]), image);
        assert_eq!(
            override_image(image, &rules(&[("quay.io/ocm", "reg.local/ocm")])),
            "reg.local/ocm/score-agent:v1"
        );
        assert_eq!(
            override_image(image, &rules(&[("", "reg.local")])),
            "reg.local/ocm/score-agent:v1"
        );
        assert_eq!(
            override_image("busybox:1", &rules(&[("", "reg.local/")])),
            "reg.local/busybox:1"
        );
        assert_eq!(
            override_image("localhost:5000/a:1", &rules(&[("", "r")])),
            "r/a:1"
        );
        // Last matching rule wins; non-matching rules change nothing.
        assert_eq!(
            override_image(
                image,
                &rules(&[("quay.io", "a.io"), ("docker.io", "x"), ("quay.io/ocm", "b.io/o")])
            ),
            "b.io/o/score-agent:v1"
        );
    }
}
