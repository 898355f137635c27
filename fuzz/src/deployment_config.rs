//! AddOnDeploymentConfig specs as the add-on manager reads them: either a JSON spec (starting with
//! `{`), or `NAME=VALUE` lines of `customizedVariables`. Must hold: no panic; a config the hub
//! accepts renders, and the agent's own command-line parser accepts the rendered flags; a config of
//! known, distinct variables the hub refuses, the agent refuses too (the hub and the agent agree).

use k8s_openapi::api::core::v1::ResourceRequirements;
use ocm_score_agent::config::RunConfig;
use ocm_score_api::{AddOnDeploymentConfigSpec, CustomizedVariable};
use ocm_score_hub::addon::agent::cli;
use ocm_score_hub::addon::agent::manifests::{AgentDefaults, RenderInput, agent_args, render};
use ocm_score_hub::addon::configuration::deployment_config::{AgentConfig, agent_config, override_image};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::LazyLock;

/// Each variable's agent flag (the hub's table, repeated so a renamed flag is noticed here).
const FLAGS: [(&str, &str); 9] = [
    ("SOURCES", cli::SOURCE),
    ("REFRESH_INTERVAL", cli::REFRESH_INTERVAL),
    ("SCORE_VALIDITY", cli::VALIDITY),
    ("RENEW_EVERY", cli::RENEW_EVERY),
    ("NORMALIZE", cli::NORMALIZE),
    ("SCORE_STEP", cli::SCORE_STEP),
    ("EXTENDED_RESOURCES", cli::EXTENDED_RESOURCE),
    ("SCORES", cli::SCORES),
    ("LOG_FORMAT", cli::LOG_FORMAT),
];

/// A hub kubeconfig file, as the mounted Secret provides it (the agent checks that it exists).
/// One file for every process (not one per process, which each test run would leave behind): written
/// under a process-own name and renamed into place, so concurrent writers never expose half a file.
static KUBECONFIG: LazyLock<PathBuf> = LazyLock::new(|| {
    let path = std::env::temp_dir().join("ocm-score-fuzz-kubeconfig");
    let partial = std::env::temp_dir().join(format!("ocm-score-fuzz-kubeconfig.{}", std::process::id()));
    std::fs::write(&partial, "apiVersion: v1\nkind: Config\n").expect("writing the kubeconfig");
    std::fs::rename(&partial, &path).expect("moving the kubeconfig into place");
    path
});

static DEFAULTS: LazyLock<AgentDefaults> = LazyLock::new(|| AgentDefaults {
    image: "quay.io/ocm-score/agent:0.1.0".into(),
    image_pull_policy: "IfNotPresent".into(),
    resources: ResourceRequirements::default(),
});

fn spec(text: &str) -> Option<AddOnDeploymentConfigSpec> {
    if text.starts_with('{') {
        return serde_json::from_str(text).ok();
    }
    let customized_variables = text
        .lines()
        .map(|line| {
            let (name, value) = line.split_once('=').unwrap_or((line, ""));
            CustomizedVariable {
                name: name.into(),
                value: value.into(),
            }
        })
        .collect();
    Some(AddOnDeploymentConfigSpec {
        customized_variables,
        ..Default::default()
    })
}

fn input(config: &AgentConfig) -> RenderInput<'_> {
    RenderInput {
        addon: "resource-usage-collect",
        cluster: "cluster1",
        namespace: config
            .install_namespace
            .as_deref()
            .unwrap_or("open-cluster-management-agent-addon"),
        defaults: &DEFAULTS,
        config,
    }
}

/// What the agent makes of the flags rendered for `config`, with the mounted kubeconfig's path
/// swapped for a file that exists: `Ok` or its error.
fn agent_verdict(config: &AgentConfig) -> Result<RunConfig, String> {
    let kubeconfig = cli::arg(cli::HUB_KUBECONFIG, &KUBECONFIG.display().to_string());
    let rendered = agent_args(&input(config));
    let args = rendered.into_iter().map(|arg| {
        if arg.starts_with(cli::HUB_KUBECONFIG) {
            kubeconfig.clone()
        } else {
            arg
        }
    });
    RunConfig::from_argv(std::iter::once(cli::BINARY.to_string()).chain(args))
}

/// The checks on one input: what the fuzz target runs, and the seed replay test for each seed.
pub fn check(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Some(spec) = spec(text) else {
        return;
    };
    let hub = agent_config(&spec);
    if let Ok(config) = &hub {
        render(&input(config)).expect("an accepted config renders");
        let image = override_image(&DEFAULTS.image, &config.registries);
        assert!(!image.is_empty(), "empty image from {:?}", config.registries);
        if let Err(e) = agent_verdict(config) {
            panic!("the hub accepts {spec:?} but the agent refuses its flags: {e}");
        }
        return;
    }
    // Refused by the hub: if every variable is a known one, set once, ask the agent about the same
    // values (as the hub would have rendered them, trimmed).
    let mut seen = BTreeSet::new();
    let mut flags = Vec::new();
    for var in &spec.customized_variables {
        let Some((_, flag)) = FLAGS.iter().find(|(name, _)| *name == var.name) else {
            return;
        };
        if !seen.insert(var.name.as_str()) {
            return;
        }
        flags.push((*flag, var.value.trim().to_string()));
    }
    if spec.node_placement.is_some()
        || spec
            .agent_install_namespace
            .as_deref()
            .is_some_and(|ns| !ns.is_empty())
    {
        // Refusals the agent cannot see (tolerations, namespace names) are the hub's alone.
        return;
    }
    let raw = AgentConfig {
        flags,
        ..Default::default()
    };
    if let Ok(run) = agent_verdict(&raw) {
        panic!(
            "the hub refuses {spec:?} ({}) but the agent accepts it: {run:?}",
            hub.err().map(|e| e.to_string()).unwrap_or_default()
        );
    }
}
