//! AddOnDeploymentConfig → agent configuration, validated before anything is rendered.
//!
//! | customized variable | agent flag | value |
//! |---|---|---|
//! | `SOURCES` | `--source` | comma list of `cluster`, `kubelet` (needs `cluster`), `host` |
//! | `REFRESH_INTERVAL` | `--refresh-interval` | duration, e.g. `60s`, `2m`, `1m30s`, `90`; at least 5s (the agent's debounce) |
//! | `SCORE_VALIDITY` | `--validity` | duration from 10s to 24h, longer than refresh × 1.1 + 30s and than 15s; not with `RENEW_EVERY` |
//! | `RENEW_EVERY` | `--renew-every` | renew validUntil at every Nth refresh, 1..=60 (default 1: validity derived, see the agent's README) |
//! | `NORMALIZE` | `--normalize` | comma list of `SCORE=absolute:MIN:MAX`, `SCORE=percent` or `SCORE=percent:MIN:MAX` |
//! | `SCORE_STEP` | `--score-step` | integer 1..=200 |
//! | `EXTENDED_RESOURCES` | `--extended-resource` | comma list of `RESOURCE[=PREFIX]`, e.g. `amd.com/gpu=amdGpu` |
//! | `SCORES` | `--scores` | comma list of score names to publish |
//! | `DEDUCT_PENDING` | `--deduct-pending` | `true` or `false`: deduct pending pods before counting `fits.<shape>` |
//!
//! Score names (in `NORMALIZE` and `SCORES`) must be ones the agent publishes: the built-in ones or
//! `<prefix>{Node,Cluster}Available` of a configured extended resource. These are the agent's own
//! rules (the `ocm_score_agent_contract` crate the agent parses its flags with), checked here so a bad value is
//! reported before any agent is rolled.
//! | `LOG_FORMAT` | `--log-format` | `text` or `json` |
//!
//! `nodePlacement` sets the agent pod's nodeSelector and tolerations, `registries` rewrite its image
//! (a rule with a `source` replaces that image prefix; one without replaces the registry host; the
//! last matching rule wins), `agentInstallNamespace` moves the agent. Unknown variable names are
//! errors: a typo must not silently leave the default in place.

use crate::addon::agent::cli;
use k8s_openapi::api::core::v1::Toleration;
use ocm_score_agent_contract::{ExtendedResource, FlagError, NormalizeArg, Timing};
use ocm_score_api::{AddOnDeploymentConfigSpec, ImageMirror};
use std::collections::BTreeMap;
use std::time::Duration;

pub use ocm_score_agent_contract::Sources;

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

/// A validated configuration, ready to render.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentConfig {
    /// Agent flags set from variables, in a fixed order (the rendered args are stable).
    pub flags: Vec<(&'static str, String)>,
    /// The agent's data sources; they decide the agent's permissions on the managed cluster.
    pub sources: Sources,
    pub node_selector: Option<BTreeMap<String, String>>,
    pub tolerations: Option<Vec<Toleration>>,
    pub registries: Vec<ImageMirror>,
    /// `agentInstallNamespace`, when non-empty.
    pub install_namespace: Option<String>,
}

impl Default for AgentConfig {
    /// The agent's defaults: no flags beyond the fixed ones.
    fn default() -> Self {
        AgentConfig {
            flags: Vec::new(),
            sources: Sources::DEFAULT,
            node_selector: None,
            tolerations: None,
            registries: Vec::new(),
            install_namespace: None,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Kind {
    Sources,
    Duration,
    Normalize,
    Step,
    RenewEvery,
    ExtendedResources,
    ScoreNames,
    Bool,
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
        name: "RENEW_EVERY",
        flag: cli::RENEW_EVERY,
        kind: Kind::RenewEvery,
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
        name: "DEDUCT_PENDING",
        flag: cli::DEDUCT_PENDING,
        kind: Kind::Bool,
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

/// Every variable we understand with the agent flag it sets, in rendering order (the AddOnTemplate
/// install writes the same flags from the same variables; tests/tests/chart.rs holds it to this).
pub fn variable_flags() -> impl Iterator<Item = (&'static str, &'static str)> {
    VARIABLES.iter().map(|v| (v.name, v.flag))
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
            Kind::Sources => {
                let list = list(value, ocm_score_agent_contract::parse_source).map_err(err)?;
                config.sources = Sources::from_list(&list).map_err(|e| err(e.reason))?;
            }
            Kind::Duration => {
                let duration = ocm_score_agent_contract::duration_arg(value).map_err(err)?.0;
                match variable.flag {
                    cli::REFRESH_INTERVAL => checked.refresh = Some(duration),
                    _ => checked.validity = Some(duration),
                }
            }
            Kind::Normalize => {
                checked.normalize = list(value, ocm_score_agent_contract::parse_normalize).map_err(err)?
            }
            Kind::Step => match value.parse::<u8>() {
                Ok(step)
                    if (ocm_score_agent_contract::MIN_SCORE_STEP
                        ..=ocm_score_agent_contract::MAX_SCORE_STEP)
                        .contains(&step) => {}
                _ => {
                    return Err(err(format!(
                        "expected an integer from {} to {}",
                        ocm_score_agent_contract::MIN_SCORE_STEP,
                        ocm_score_agent_contract::MAX_SCORE_STEP
                    )));
                }
            },
            Kind::RenewEvery => match value.parse::<u32>() {
                Ok(n) => checked.renew_every = Some(n),
                Err(_) => return Err(err("expected a whole number of refreshes".into())),
            },
            Kind::ExtendedResources => {
                checked.extended =
                    list(value, ocm_score_agent_contract::parse_extended_resource).map_err(&err)?;
                ocm_score_agent_contract::check_extended_count(&checked.extended).map_err(&err)?;
            }
            Kind::ScoreNames => checked.selected = list(value, |name| Ok(name.to_string())).map_err(err)?,
            Kind::Bool => {
                if !matches!(value, "true" | "false") {
                    return Err(err("expected true or false".into()));
                }
            }
            Kind::LogFormat => {
                if !ocm_score_agent_contract::LOG_FORMATS.contains(&value) {
                    return Err(err(format!(
                        "expected {}",
                        ocm_score_agent_contract::LOG_FORMATS.join(" or ")
                    )));
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
        if !ocm_score_api::names::is_dns_label(ns) {
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
    renew_every: Option<u32>,
    extended: Vec<ExtendedResource>,
    normalize: Vec<NormalizeArg>,
    /// Scores named by SCORES.
    selected: Vec<String>,
}

impl Checked {
    /// The agent's rules across flags (its contract's), with the hub's own flags at their defaults.
    fn check(&self, values: &BTreeMap<&str, &str>) -> Result<(), ConfigError> {
        let timing = Timing {
            refresh: self
                .refresh
                .unwrap_or(ocm_score_agent_contract::DEFAULT_REFRESH_INTERVAL),
            validity: self.validity,
            renew_every: self.renew_every,
            ..Timing::default()
        };
        timing.check().map_err(|e| blame(e, values))?;
        ocm_score_agent_contract::published_scores(&self.extended, &self.normalize, &self.selected)
            .map_err(|e| blame(e, values))?;
        Ok(())
    }
}

/// The variable to blame for a broken rule of the agent's: the one setting the flag, or for the
/// flags the hub leaves at their defaults, the variable the rule compares them with.
fn blame(error: FlagError, values: &BTreeMap<&str, &str>) -> ConfigError {
    let (flag, reason) = match error.flag {
        ocm_score_agent_contract::flag::DEBOUNCE => (
            cli::REFRESH_INTERVAL,
            format!("the agent's {} of {} {}", error.flag, error.value, error.reason),
        ),
        ocm_score_agent_contract::flag::MIN_WRITE_INTERVAL => (
            cli::VALIDITY,
            format!("the agent's {} of {} {}", error.flag, error.value, error.reason),
        ),
        flag => (flag, error.reason),
    };
    let Some(variable) = VARIABLES.iter().find(|v| v.flag == flag) else {
        return ConfigError::new(error.flag, error.value, reason);
    };
    let value = match values.get(variable.name) {
        Some(v) => v.trim().to_string(),
        None => format!("{} (default)", error.value),
    };
    ConfigError::new(variable_field(variable.name), value, reason)
}

/// A comma list, each item parsed by `item`.
fn list<T>(value: &str, item: impl Fn(&str) -> Result<T, String>) -> Result<Vec<T>, String> {
    if value.is_empty() {
        return Err("empty list".into());
    }
    value.split(',').map(str::trim).map(item).collect()
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
    use ocm_score_api::{CustomizedVariable, NodePlacement};

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
            ("SOURCES", "kubelet", "cluster,kubelet"),
            ("SOURCES", "host,host", "twice"),
            ("REFRESH_INTERVAL", "soon", "duration"),
            ("REFRESH_INTERVAL", "2s", "must not exceed --refresh-interval"),
            ("RENEW_EVERY", "0", "between 1 and 60"),
            ("RENEW_EVERY", "two", "whole number"),
            (
                "SCORE_VALIDITY",
                "30s",
                "or scores would expire between refreshes",
            ),
            ("SCORE_VALIDITY", "48h", "between 10s and 24h"),
            ("NORMALIZE", "cpuNodeAvailable=absolute:64:0", "below"),
            ("NORMALIZE", "cpuNodeAvailable=linear", "absolute:MIN:MAX"),
            ("NORMALIZE", "cpuNodeAvailable=absolute:0:inf", "finite"),
            ("SCORE_STEP", "0", "1 to 200"),
            ("EXTENDED_RESOURCES", "a/b/c", "not a resource name"),
            ("EXTENDED_RESOURCES", "nvidia.com/gpu", "scored already"),
            (
                "EXTENDED_RESOURCES",
                "a/r0,a/r1,a/r2,a/r3,a/r4,a/r5,a/r6,a/r7,a/r8,a/r9,a/r10,a/r11,a/r12",
                "at most 16 resources can be accounted (4 built in), got 17",
            ),
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
