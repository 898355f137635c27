//! The agent command line the hub renders must be one the real `ocm-score-agent` accepts, and the
//! hub's checks of AddOnDeploymentConfig variables must agree with the agent's own validation.

use clap::CommandFactory;
use k8s_openapi::api::core::v1::ResourceRequirements;
use ocm_score_agent::cli::Cli;
use ocm_score_agent::config::RunConfig;
use ocm_score_api::{AddOnDeploymentConfigSpec, CustomizedVariable};
use ocm_score_hub::addon::agent::cli;
use ocm_score_hub::addon::agent::manifests::{AgentDefaults, RenderInput, agent_args};
use ocm_score_hub::addon::configuration::deployment_config::{AgentConfig, agent_config};

/// The long flags of `ocm-score-agent run`, as its `--help` lists them.
fn agent_run_flags() -> Vec<String> {
    let command = Cli::command();
    let run = command
        .find_subcommand("run")
        .expect("the agent has a run subcommand");
    run.get_arguments()
        .filter_map(|a| a.get_long())
        .map(|l| format!("--{l}"))
        .collect()
}

#[test]
fn every_rendered_flag_is_an_agent_flag() {
    let flags = agent_run_flags();
    for flag in cli::ALL_FLAGS {
        assert!(
            flags.iter().any(|f| f == flag),
            "{flag} is not an `ocm-score-agent run` flag; it has {flags:?}"
        );
    }
    let help = Cli::command()
        .find_subcommand_mut("run")
        .expect("run")
        .render_long_help()
        .to_string();
    for flag in cli::ALL_FLAGS {
        assert!(
            help.contains(flag),
            "{flag} missing from `ocm-score-agent run --help`"
        );
    }
}

fn defaults() -> AgentDefaults {
    AgentDefaults {
        image: "ocm-score:0.1.0".into(),
        image_pull_policy: "IfNotPresent".into(),
        resources: ResourceRequirements::default(),
    }
}

/// What the agent makes of the args the hub renders for `config`: `Ok` or the agent's error. The
/// hub kubeconfig path is swapped for a real file, as the mounted Secret would provide.
fn agent_verdict(config: &AgentConfig, kubeconfig: &std::path::Path) -> Result<RunConfig, String> {
    let d = defaults();
    let input = RenderInput {
        addon: "resource-usage-collect",
        cluster: "c1",
        namespace: "agents",
        defaults: &d,
        config,
    };
    let mut argv = vec![cli::BINARY.to_string()];
    for arg in agent_args(&input) {
        if arg.starts_with(cli::HUB_KUBECONFIG) {
            argv.push(cli::arg(cli::HUB_KUBECONFIG, &kubeconfig.display().to_string()));
        } else {
            argv.push(arg);
        }
    }
    RunConfig::from_argv(&argv)
}

fn kubeconfig_file() -> tempfile_path::TempFile {
    tempfile_path::TempFile::new("apiVersion: v1\nkind: Config\n")
}

/// A file removed on drop (no tempfile crate needed for one file).
mod tempfile_path {
    pub struct TempFile(pub std::path::PathBuf);
    impl TempFile {
        pub fn new(content: &str) -> Self {
            let path = std::env::temp_dir().join(format!(
                "ocm-score-hub-agent-cli-{}-{:?}",
                std::process::id(),
                std::thread::current().id()
            ));
            std::fs::write(&path, content).expect("writing a temp file");
            TempFile(path)
        }
    }
    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

#[test]
fn the_default_rendering_is_accepted_and_matches_the_agent_defaults() {
    let file = kubeconfig_file();
    let run =
        agent_verdict(&AgentConfig::default(), &file.0).expect("the agent accepts the default rendering");
    // The hub checks with the same contract the agent parses with: its defaults are the agent's.
    let renewal = ocm_score_agent_contract::Timing::default()
        .check()
        .expect("valid defaults");
    assert_eq!(
        run.refresh_interval,
        ocm_score_agent_contract::DEFAULT_REFRESH_INTERVAL
    );
    assert_eq!(
        (run.scoring.validity, run.renew_every),
        (renewal.validity, renewal.renew_every)
    );
    assert_eq!(run.hub.cluster_name, "c1");
    let lease = run.lease.expect("the agent renews the add-on Lease");
    assert_eq!(
        (lease.name.as_str(), lease.namespace.as_str()),
        ("resource-usage-collect", "agents")
    );
    let scores: Vec<&str> = run.scoring.scores.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        scores,
        ocm_score_agent_contract::built_in_score_names().collect::<Vec<_>>()
    );
}

#[test]
fn hub_validation_agrees_with_the_agent() {
    let file = kubeconfig_file();
    let cases: &[&[(&str, &str)]] = &[
        &[],
        &[("SOURCES", "cluster,kubelet")],
        &[("SOURCES", "host")],
        &[("SOURCES", "kubelet")],
        &[("SOURCES", "cluster,moon")],
        &[("SOURCES", "cluster,cluster")],
        &[("REFRESH_INTERVAL", "30s")],
        &[("REFRESH_INTERVAL", "90")],
        &[("REFRESH_INTERVAL", "2s")],
        &[("REFRESH_INTERVAL", "5s")],
        &[("REFRESH_INTERVAL", "1m30s"), ("SCORE_VALIDITY", "5m")],
        &[("REFRESH_INTERVAL", "5m")],
        &[("REFRESH_INTERVAL", "soon")],
        &[("SCORE_VALIDITY", "30s")],
        &[("SCORE_VALIDITY", "96s")],
        &[("SCORE_VALIDITY", "97s")],
        &[("SCORE_VALIDITY", "25h")],
        &[("SCORE_VALIDITY", "10m")],
        &[("RENEW_EVERY", "2")],
        &[("RENEW_EVERY", "0")],
        &[("RENEW_EVERY", "61")],
        &[("RENEW_EVERY", "2"), ("SCORE_VALIDITY", "5m")],
        &[("RENEW_EVERY", "30"), ("REFRESH_INTERVAL", "1h")],
        &[(
            "NORMALIZE",
            "cpuNodeAvailable=absolute:0:64,memNodeAvailable=percent",
        )],
        &[("NORMALIZE", "memClusterAvailable=percent:10:90")],
        &[("NORMALIZE", "cpuNodeAvailable=absolute:64:0")],
        &[("NORMALIZE", "cpuNodeAvailable=linear")],
        &[("NORMALIZE", "nope=percent")],
        &[("SCORE_STEP", "1")],
        &[("SCORE_STEP", "200")],
        &[("SCORE_STEP", "0")],
        &[("SCORE_STEP", "201")],
        &[("EXTENDED_RESOURCES", "amd.com/gpu")],
        &[
            ("EXTENDED_RESOURCES", "amd.com/gpu=amdGpu"),
            ("SCORES", "amdGpuNodeAvailable"),
        ],
        &[("EXTENDED_RESOURCES", "nvidia.com/gpu")],
        &[("EXTENDED_RESOURCES", "a/b/c")],
        &[("EXTENDED_RESOURCES", "amd.com/gpu=AmdGpu")],
        &[("EXTENDED_RESOURCES", "example.com/x=cpu")],
        &[("SCORES", "cpuNodeAvailable,memNodeAvailable")],
        &[("SCORES", "cpuNodeAvailable,unknownScore")],
        &[("LOG_FORMAT", "json")],
        &[("LOG_FORMAT", "xml")],
        &[("DEDUCT_PENDING", "false")],
        &[("DEDUCT_PENDING", "no")],
    ];
    let mut disagreements = Vec::new();
    for vars in cases {
        let spec = AddOnDeploymentConfigSpec {
            customized_variables: vars
                .iter()
                .map(|(n, v)| CustomizedVariable {
                    name: n.to_string(),
                    value: v.to_string(),
                })
                .collect(),
            ..Default::default()
        };
        let hub = agent_config(&spec);
        // When the hub refuses, render the flags anyway to ask the agent about exactly those values.
        let flags_config = match &hub {
            Ok(config) => config.clone(),
            Err(_) => AgentConfig {
                flags: raw_flags(vars),
                ..Default::default()
            },
        };
        let agent = agent_verdict(&flags_config, &file.0);
        if hub.is_ok() != agent.is_ok() {
            disagreements.push(format!("{vars:?}: hub {:?}, agent {:?}", hub.err(), agent.err()));
        }
    }
    assert!(
        disagreements.is_empty(),
        "hub and agent disagree:\n{}",
        disagreements.join("\n")
    );
}

/// The flags a variable list would render to, without the hub's checks.
fn raw_flags(vars: &[(&str, &str)]) -> Vec<(&'static str, String)> {
    let flag = |name: &str| match name {
        "SOURCES" => cli::SOURCE,
        "REFRESH_INTERVAL" => cli::REFRESH_INTERVAL,
        "SCORE_VALIDITY" => cli::VALIDITY,
        "RENEW_EVERY" => cli::RENEW_EVERY,
        "NORMALIZE" => cli::NORMALIZE,
        "SCORE_STEP" => cli::SCORE_STEP,
        "EXTENDED_RESOURCES" => cli::EXTENDED_RESOURCE,
        "SCORES" => cli::SCORES,
        "LOG_FORMAT" => cli::LOG_FORMAT,
        "DEDUCT_PENDING" => cli::DEDUCT_PENDING,
        other => panic!("no flag for {other}"),
    };
    vars.iter().map(|(n, v)| (flag(n), v.to_string())).collect()
}
