//! The Helm chart `charts/ocm-score`, without a cluster: it lints, renders what its values say,
//! refuses bad values naming them, and `manifests/hub` and `manifests/thanos-scorer` are exactly
//! its renderings (`UPDATE_MANIFESTS=1` rewrites them), the rollout example its ClusterManagementAddOn
//! with that example's rollout strategy. The real API server's view of the same
//! output, and a real `helm install`/`upgrade`/`uninstall`, are `control_plane_helm.rs`.

use ocm_score_control_plane::addon::workspace_dir;
use ocm_score_control_plane::chart::{self, RENDERINGS};
use ocm_score_kube_double::parse_objects;
use ocm_score_tests::golden;
use serde_json::Value;

/// Every optional part of the chart switched on.
const ALL_ON: &[&str] = &[
    "createNamespace=true",
    "thanosScorer.enabled=true",
    "thanosScorer.secretName=thanos-client",
    "explainServer.enabled=true",
    "explainServer.tls.secretName=explain-tls",
    "monitoring.podMonitor.enabled=true",
    "monitoring.prometheusRule.enabled=true",
    "monitoring.dashboard.enabled=true",
];

fn objects(values: &[&str]) -> Vec<Value> {
    let text = chart::template(values, false).unwrap_or_else(|e| panic!("{e}"));
    parse_objects("helm template", &text).unwrap_or_else(|e| panic!("{e}"))
}

fn find<'a>(objects: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
}

#[test]
fn the_chart_lints_clean_with_defaults_and_everything_on() {
    let lint = [
        "lint",
        "--strict",
        chart::CHART,
        "--kube-version",
        chart::KUBE_VERSION,
    ];
    chart::helm(&lint).unwrap_or_else(|e| panic!("{e}"));
    let mut args = lint.to_vec();
    for value in ALL_ON {
        args.extend(["--set", value]);
    }
    chart::helm(&args).unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn manifests_are_the_chart_rendered() {
    let root = workspace_dir();
    let update = golden::updating("UPDATE_MANIFESTS");
    let mut stale = Vec::new();
    for rendering in &RENDERINGS {
        let files = chart::render(rendering).unwrap_or_else(|e| panic!("{e}"));
        assert!(files.len() >= 5, "{}: {} files", rendering.dir, files.len());
        if update {
            for old in chart::rendered_files_on_disk(rendering) {
                if !files.contains_key(&old) {
                    std::fs::remove_file(root.join(&old)).unwrap_or_else(|e| panic!("{e}"));
                }
            }
            for (file, text) in &files {
                let path = root.join(file);
                if let Some(dir) = path.parent() {
                    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("{e}"));
                }
                std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
        }
        for (file, text) in &files {
            match std::fs::read_to_string(root.join(file)) {
                Ok(have) if &have == text => {}
                Ok(_) => stale.push(format!("{} differs", file.display())),
                Err(e) => stale.push(format!("{}: {e}", file.display())),
            }
        }
        for extra in chart::rendered_files_on_disk(rendering) {
            if !files.contains_key(&extra) {
                stale.push(format!("{} is not rendered from the chart", extra.display()));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "manifests/ is out of step with charts/ocm-score:\n  {}\nrun UPDATE_MANIFESTS=1 cargo test -p ocm-score-tests --test chart",
        stale.join("\n  ")
    );
}

#[test]
fn ci_refuses_to_rewrite_the_manifests() {
    golden::assert_ci_refuses_update("manifests_are_the_chart_rendered", "UPDATE_MANIFESTS");
}

#[test]
fn defaults_install_the_addon_and_tiering_and_keep_the_contract() {
    let objects = objects(&[]);
    for name in ["ocm-score-addon-manager", "ocm-score-tiering"] {
        let deployment = find(&objects, "Deployment", name).unwrap_or_else(|| panic!("{name}"));
        assert_eq!(deployment["spec"]["replicas"], 2, "{name}");
        let pdb = find(&objects, "PodDisruptionBudget", name).unwrap_or_else(|| panic!("{name} PDB"));
        assert_eq!(pdb["spec"]["maxUnavailable"], 1);
        assert_eq!(
            pdb["spec"]["selector"]["matchLabels"],
            deployment["spec"]["selector"]["matchLabels"]
        );
    }
    // Off by default: the scorer (it needs a Thanos to ask), monitoring objects (they need the
    // Prometheus Operator's CRDs) and the namespace (`helm install --create-namespace` makes it).
    for kind in ["Namespace", "ConfigMap", "PodMonitor", "PrometheusRule"] {
        assert!(
            !objects.iter().any(|o| o["kind"] == kind),
            "{kind} rendered by default"
        );
    }
    assert!(find(&objects, "Deployment", "ocm-score-thanos-scorer").is_none());
    // The shipped agent configuration renews validUntil at every refresh: no SCORE_VALIDITY.
    let adc = find(&objects, "AddOnDeploymentConfig", "resource-usage-collect").expect("ADC");
    let variables = adc["spec"]["customizedVariables"].as_array().expect("variables");
    assert!(
        !variables.iter().any(|v| v["name"] == "SCORE_VALIDITY"),
        "{variables:?}"
    );
    assert!(
        variables
            .iter()
            .any(|v| v["name"] == "REFRESH_INTERVAL" && v["value"] == "60s")
    );
    let cma = find(&objects, "ClusterManagementAddOn", "resource-usage-collect").expect("CMA");
    assert_eq!(cma["spec"]["installStrategy"]["type"], "Placements");
    assert_eq!(
        cma["spec"]["installStrategy"]["placements"][0],
        serde_json::json!({"name": "all-clusters", "namespace": "ocm-score"})
    );
    assert!(find(&objects, "Placement", "all-clusters").is_some());
}

#[test]
fn values_reach_the_objects_they_name() {
    let objects = objects(&[
        "image.repository=registry.example/ocm-score",
        "image.tag=9.9.9",
        "agent.variables.RENEW_EVERY=2",
        "agent.nodeSelector.pool=agents",
        "install.strategy=Manual",
        "addonManager.replicas=1",
        "tiering.enabled=false",
        "logLevel=debug",
    ]);
    let manager = find(&objects, "Deployment", "ocm-score-addon-manager").expect("manager");
    let container = &manager["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "registry.example/ocm-score:9.9.9");
    // The agents follow the controllers' image (the second argument, as kustomize's replacement
    // in manifests/hub expects).
    assert_eq!(
        container["args"][1],
        "--agent-image=registry.example/ocm-score:9.9.9"
    );
    assert!(
        container["env"]
            .as_array()
            .expect("env")
            .iter()
            .any(|e| e["name"] == "RUST_LOG" && e["value"] == "debug")
    );
    // One replica: no PDB (it would block every drain).
    assert!(find(&objects, "PodDisruptionBudget", "ocm-score-addon-manager").is_none());
    let adc = find(&objects, "AddOnDeploymentConfig", "resource-usage-collect").expect("ADC");
    assert!(
        adc["spec"]["customizedVariables"]
            .as_array()
            .expect("variables")
            .iter()
            .any(|v| v["name"] == "RENEW_EVERY" && v["value"] == "2")
    );
    assert_eq!(adc["spec"]["nodePlacement"]["nodeSelector"]["pool"], "agents");
    // Manual: no Placement of ours, and the strategy names none.
    let cma = find(&objects, "ClusterManagementAddOn", "resource-usage-collect").expect("CMA");
    assert_eq!(
        cma["spec"]["installStrategy"],
        serde_json::json!({"type": "Manual"})
    );
    assert!(!objects.iter().any(|o| o["kind"] == "Placement"));
    assert!(find(&objects, "Deployment", "ocm-score-tiering").is_none());
}

#[test]
fn ocms_addon_manager_runs_the_install_strategy_unless_self_is_asked_for() {
    let lifecycle = |objects: &[Value]| {
        let cma = find(objects, "ClusterManagementAddOn", "resource-usage-collect").expect("CMA");
        cma["metadata"]["annotations"]["addon.open-cluster-management.io/lifecycle"].clone()
    };
    for values in [
        &[][..],
        &["install.lifecycle="],
        &["install.lifecycle=addon-manager"],
    ] {
        assert_eq!(
            lifecycle(&objects(values)),
            Value::Null,
            "{values:?}: OCM's addon-manager runs the install strategy"
        );
    }
    assert_eq!(
        lifecycle(&objects(&["install.lifecycle=self"])),
        "self",
        "we run it when asked"
    );
    let objects = objects(&[
        "install.rolloutStrategy.type=Progressive",
        "install.rolloutStrategy.progressive.maxConcurrency=1",
        "install.rolloutStrategy.progressive.minSuccessTime=5m",
    ]);
    assert_eq!(
        lifecycle(&objects),
        Value::Null,
        "OCM's addon-manager runs the rollout"
    );
    let cma = find(&objects, "ClusterManagementAddOn", "resource-usage-collect").expect("CMA");
    assert_eq!(
        cma["spec"]["installStrategy"]["placements"][0]["rolloutStrategy"],
        serde_json::json!({"type": "Progressive",
                           "progressive": {"maxConcurrency": 1, "minSuccessTime": "5m"}})
    );
}

/// The add-on manager's defaults for the agents it renders, as the chart's manager Deployment runs it.
fn manager_agent_defaults(objects: &[Value]) -> ocm_score_hub::addon::agent::manifests::AgentDefaults {
    let manager = find(objects, "Deployment", "ocm-score-addon-manager").expect("manager");
    let args = manager["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str);
    ocm_score_hub::addon::AddonManagerArgs::from_container_args(args)
        .unwrap_or_else(|e| panic!("the manager's args do not parse: {e}"))
        .settings()
        .agent
}

/// The AddOnTemplate's manifests as OCM renders them for a cluster, short of its own decorations:
/// each `{{NAME}}` a variable of the AddOnDeploymentConfig `adc` replaced by its value, or by
/// nothing when the config leaves it out (as OCM's template renderer does), `{{CLUSTER_NAME}}` kept.
fn template_manifests(template: &Value, adc: &Value) -> Vec<Value> {
    let mut text =
        serde_json::to_string(&template["spec"]["agentSpec"]["workload"]["manifests"]).expect("serializes");
    let set: Vec<(String, String)> = adc["spec"]["customizedVariables"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| {
            let text = |key: &str| v[key].as_str().unwrap_or_default().to_owned();
            (text("name"), text("value"))
        })
        .collect();
    for (name, _) in ocm_score_hub::addon::configuration::deployment_config::variable_flags() {
        let value = set
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
            .unwrap_or_default();
        text = text.replace(&format!("{{{{{name}}}}}"), value);
    }
    serde_json::from_str(&text).expect("still JSON")
}

#[test]
fn the_template_install_policy_needs_kubernetes_1_30_and_can_be_turned_off() {
    let off = objects(&[
        "install.mode=template",
        "install.template.ownClusterScoresOnly=false",
    ]);
    assert!(!off.iter().any(|o| o["kind"] == "ValidatingAdmissionPolicy"));
    let old = chart::helm(&[
        "template",
        chart::RELEASE,
        chart::CHART,
        "--namespace",
        "ocm-score",
        "--kube-version",
        "1.29.0",
        "--set",
        "install.mode=template",
    ])
    .expect_err("a 1.29 hub is refused the policy")
    .to_string();
    assert!(
        old.contains("install.template.ownClusterScoresOnly=true needs Kubernetes 1.30"),
        "{old}"
    );
}

#[test]
fn the_template_install_deploys_the_agent_the_add_on_manager_renders() {
    use ocm_score_hub::addon::agent::manifests::{RenderInput, render};
    use ocm_score_hub::addon::configuration::deployment_config::{agent_config, variable_flags};
    let defaults = manager_agent_defaults(&objects(&[]));
    for values in [
        &["install.mode=template"][..],
        &[
            "install.mode=template",
            "agent.variables.SOURCES=cluster\\,kubelet",
            "agent.variables.SCORE_STEP=5",
        ][..],
        &["install.mode=template", "agent.variables.SOURCES=host"][..],
    ] {
        let objects = objects(values);
        // No pod of ours on the hub for the add-on.
        for kind in ["Deployment", "ServiceAccount", "PodDisruptionBudget"] {
            assert!(
                find(&objects, kind, "ocm-score-addon-manager").is_none(),
                "{values:?}: the add-on manager's {kind}"
            );
        }
        let cma = find(&objects, "ClusterManagementAddOn", "resource-usage-collect").expect("CMA");
        assert_eq!(
            cma["metadata"]["annotations"],
            Value::Null,
            "{values:?}: OCM's addon-manager runs the lifecycle"
        );
        assert_eq!(
            cma["spec"]["supportedConfigs"][0],
            serde_json::json!({"group": "addon.open-cluster-management.io", "resource": "addontemplates",
                               "defaultConfig": {"name": "ocm-score-agent"}})
        );
        let template = find(&objects, "AddOnTemplate", "ocm-score-agent").expect("AddOnTemplate");
        assert_eq!(template["spec"]["addonName"], "resource-usage-collect");
        // Agents write scores in their own cluster namespace only (OCM's binding alone lets any
        // agent of the add-on write any cluster's), unless the value turns the policy off.
        let policy = "ocm-score-resource-usage-collect-own-cluster-scores";
        assert!(
            find(&objects, "ValidatingAdmissionPolicy", policy).is_some(),
            "{values:?}"
        );
        let binding =
            find(&objects, "ValidatingAdmissionPolicyBinding", policy).expect("the policy's binding");
        assert_eq!(binding["spec"]["validationActions"], serde_json::json!(["Deny"]));
        let adc = find(&objects, "AddOnDeploymentConfig", "resource-usage-collect").expect("ADC");
        let spec: ocm_score_api::AddOnDeploymentConfigSpec =
            serde_json::from_value(adc["spec"].clone()).expect("ADC spec");
        let config = agent_config(&spec).unwrap_or_else(|e| panic!("{values:?}: {e}"));
        let namespace = spec
            .agent_install_namespace
            .clone()
            .expect("the chart sets agentInstallNamespace");

        // The template reads every variable the add-on manager understands, into the same flag.
        let manifests = template["spec"]["agentSpec"]["workload"]["manifests"]
            .as_array()
            .expect("manifests");
        let deployment = manifests
            .iter()
            .find(|m| m["kind"] == "Deployment")
            .expect("Deployment");
        let args: Vec<&str> = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        let variable_args: Vec<String> = args
            .iter()
            .filter(|a| {
                a.contains("={{") && !a.contains("{{HUB_KUBECONFIG}}") && !a.contains("{{CLUSTER_NAME}}")
            })
            .map(|a| a.to_string())
            .collect();
        let expected: Vec<String> = variable_flags()
            .map(|(name, flag)| format!("{flag}={{{{{name}}}}}"))
            .collect();
        assert_eq!(variable_args, expected, "{values:?}");

        // Rendered for a cluster, the template is the add-on manager's agent but for what OCM
        // does its own way: its hub kubeconfig volume, its health check (no Lease), and the
        // agent's install namespace, which OCM sets on every object rather than as a flag.
        let input = RenderInput {
            addon: "resource-usage-collect",
            cluster: "{{CLUSTER_NAME}}",
            namespace: &namespace,
            defaults: &defaults,
            config: &config,
        };
        let mut want = render(&input).expect("renders");
        want.retain(|m| !(["Role", "RoleBinding"].contains(&m["kind"].as_str().unwrap_or_default())));
        let manager_only =
            |arg: &str| arg.starts_with("--hub-kubeconfig=") || arg.starts_with("--addon-namespace=");
        let template_only = |arg: &str| {
            arg == "--hub-kubeconfig={{HUB_KUBECONFIG}}"
                || arg == "--lease=false"
                || arg == "--owned-by-addon=true"
                || arg.ends_with('=')
        };
        let mut got = template_manifests(template, adc);
        // The agent takes the command line OCM gives it: the config's values in, the empty ones
        // read as not given.
        let deployment = got
            .iter()
            .find(|m| m["kind"] == "Deployment")
            .expect("Deployment");
        let argv = std::iter::once("ocm-score-agent".to_owned()).chain(
            deployment["spec"]["template"]["spec"]["containers"][0]["args"]
                .as_array()
                .expect("args")
                .iter()
                .filter_map(Value::as_str)
                .map(|a| a.replace("{{HUB_KUBECONFIG}}", "/managed/hub-kubeconfig/kubeconfig"))
                .map(|a| a.replace("{{CLUSTER_NAME}}", "cluster1")),
        );
        let argv = ocm_score_agent::cli::with_default_subcommand(ocm_score_agent::cli::without_empty_values(
            argv.map(std::ffi::OsString::from),
        ));
        if let Err(e) = <ocm_score_agent::cli::Cli as clap::Parser>::try_parse_from(&argv) {
            panic!("{values:?}: the agent refuses the template's command line {argv:?}: {e}");
        }
        for (objects, drop) in [
            (&mut want, &manager_only as &dyn Fn(&str) -> bool),
            (&mut got, &template_only),
        ] {
            for object in objects.iter_mut().filter(|m| m["kind"] == "Deployment") {
                let pod = &mut object["spec"]["template"]["spec"];
                if let Some(pod) = pod.as_object_mut() {
                    pod.remove("volumes");
                }
                let container = &mut pod["containers"][0];
                if let Some(container) = container.as_object_mut() {
                    container.remove("volumeMounts");
                }
                let args = container["args"].as_array_mut().expect("args");
                args.retain(|a| !drop(a.as_str().unwrap_or_default()));
            }
        }
        let json = |objects: &[Value]| serde_json::to_string_pretty(objects).unwrap_or_default();
        assert_eq!(
            json(&got),
            json(&want),
            "{values:?}: the template's agent differs from the add-on manager's"
        );
    }
}

/// `--set` arguments that give `prefix` the value `value` (an object of scalars, at any depth).
fn set_arguments(prefix: &str, value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(fields) => {
            for (key, field) in fields {
                set_arguments(&format!("{prefix}.{key}"), field, out);
            }
        }
        Value::String(text) => out.push(format!("{prefix}={text}")),
        scalar => out.push(format!("{prefix}={scalar}")),
    }
}

#[test]
fn the_rollout_example_is_the_chart_with_its_rollout_strategy() {
    let file = "manifests/examples/rollout/cluster-management-addon.yaml";
    let text = std::fs::read_to_string(workspace_dir().join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let example = parse_objects(file, &text).unwrap_or_else(|e| panic!("{e}"));
    let [example] = example.as_slice() else {
        panic!("{file}: one object expected, found {}", example.len());
    };
    let strategy = &example["spec"]["installStrategy"]["placements"][0]["rolloutStrategy"];
    assert!(strategy.is_object(), "{file}: no rolloutStrategy");
    let mut values = Vec::new();
    set_arguments("install.rolloutStrategy", strategy, &mut values);
    let values: Vec<&str> = values.iter().map(String::as_str).collect();
    let rendered = objects(&values);
    let cma = find(&rendered, "ClusterManagementAddOn", "resource-usage-collect").expect("CMA");
    assert_eq!(
        cma, example,
        "{file} must be the chart's ClusterManagementAddOn with {values:?}"
    );
}

#[test]
fn the_thanos_scorer_gets_its_config_secrets_and_a_rollout_on_change() {
    let objects = objects(ALL_ON);
    let scorer = find(&objects, "Deployment", "ocm-score-thanos-scorer").expect("scorer");
    let pod = &scorer["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "ocm-score-thanos-scorer");
    let args = &pod["containers"][0]["args"];
    assert_eq!(args[0], "thanos-scorer");
    assert_eq!(args[1], "--config=/etc/ocm-score/thanos/config.yaml");
    let volumes = pod["volumes"].as_array().expect("volumes");
    assert!(
        volumes
            .iter()
            .any(|v| v["configMap"]["name"] == "ocm-score-thanos-scorer")
    );
    assert!(
        volumes
            .iter()
            .any(|v| v["secret"]["secretName"] == "thanos-client")
    );
    let config = find(&objects, "ConfigMap", "ocm-score-thanos-scorer").expect("config");
    let text = config["data"]["config.yaml"].as_str().expect("config.yaml");
    let parsed: Value = serde_norway::from_str(text).expect("the example config is YAML");
    assert!(parsed["query"]["url"].is_string(), "{text}");
    assert!(!parsed["scores"].as_array().expect("scores").is_empty());
    // A changed config changes the pod template, so the scorer restarts with it.
    let checksum = |objects: &[Value]| {
        find(objects, "Deployment", "ocm-score-thanos-scorer").expect("scorer")["spec"]["template"]
            ["metadata"]["annotations"]["checksum/config"]
            .clone()
    };
    let changed = self::objects(&[
        "thanosScorer.enabled=true",
        "thanosScorer.config=query: {url: 'http://other:9090'}",
    ]);
    assert!(checksum(&objects).is_string());
    assert_ne!(checksum(&objects), checksum(&changed));
}

#[test]
fn the_explain_server_serves_tls_from_its_secret_with_a_service_and_no_lease() {
    let objects = objects(ALL_ON);
    let server = find(&objects, "Deployment", "ocm-score-explain-server").expect("explain server");
    let pod = &server["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "ocm-score-explain-server");
    let container = &pod["containers"][0];
    assert_eq!(container["args"][0], "explain-server");
    let env = container["env"].as_array().expect("env");
    assert!(
        !env.iter()
            .any(|e| e["name"].as_str().is_some_and(|n| n.contains("LEADER"))),
        "an unelected mode got Lease settings: {env:?}"
    );
    assert!(
        pod["volumes"]
            .as_array()
            .expect("volumes")
            .iter()
            .any(|v| v["secret"]["secretName"] == "explain-tls")
    );
    let service = find(&objects, "Service", "ocm-score-explain-server").expect("service");
    assert_eq!(service["spec"]["ports"][0]["port"], 443);
    assert_eq!(service["spec"]["ports"][0]["targetPort"], "https");
    assert!(find(&objects, "ClusterRole", "ocm-score-explain-server").is_some());
    assert!(find(&objects, "PodMonitor", "ocm-score-explain-server").is_some());
    // The elected modes keep theirs.
    let tiering = find(&objects, "Deployment", "ocm-score-tiering").expect("tiering");
    assert_eq!(
        tiering["spec"]["template"]["spec"]["containers"][0]["env"][0]["name"],
        "OCM_SCORE_LEADER_ELECTION_NAMESPACE"
    );
}

/// values.schema.json: each kind of mistake is refused before anything renders, naming the value.
#[test]
fn values_the_schema_refuses_are_named() {
    for (value, says) in [
        // A typo in a key.
        (
            "addonManager.replica=3",
            "at '/addonManager': additional properties 'replica' not allowed",
        ),
        (
            "monitoring.podMonitor.enable=true",
            "additional properties 'enable' not allowed",
        ),
        // A wrong type.
        (
            "tiering.replicas=two",
            "at '/tiering/replicas': got string, want integer",
        ),
        (
            "createNamespace=yes",
            "at '/createNamespace': got string, want boolean",
        ),
        // Outside an enum.
        (
            "image.pullPolicy=Sometimes",
            "at '/image/pullPolicy': value must be one of",
        ),
        (
            "install.strategy=Sometimes",
            "at '/install/strategy': value must be one of 'Placements', 'Manual'",
        ),
        (
            "install.mode=both",
            "at '/install/mode': value must be one of 'manager', 'template'",
        ),
        (
            "install.lifecycle=ocm",
            "at '/install/lifecycle': value must be one of '', 'self', 'addon-manager'",
        ),
        // Below a minimum.
        (
            "explainServer.replicas=0",
            "at '/explainServer/replicas': minimum: got 0, want 1",
        ),
        // Not a quantity or a duration.
        (
            "thanosScorer.resources.limits.memory=lots",
            "at '/thanosScorer/resources/limits/memory': 'lots' does not match",
        ),
        (
            "monitoring.podMonitor.interval=30",
            "at '/monitoring/podMonitor/interval'",
        ),
        // Empty where a name is needed.
        (
            "agent.installNamespace=",
            "at '/agent/installNamespace': minLength",
        ),
        // The agent's variables: a name the agent does not know (template mode would drop it
        // silently), and values outside the agent's rules.
        (
            "agent.variables.REFRESH_INTERVALL=30s",
            "at '/agent/variables': additional properties 'REFRESH_INTERVALL' not allowed",
        ),
        (
            "agent.variables.RENEW_EVERY=0",
            "at '/agent/variables/RENEW_EVERY': minimum: got 0, want 1",
        ),
        (
            "agent.variables.SCORE_STEP=500",
            "at '/agent/variables/SCORE_STEP': maximum: got 500, want 200",
        ),
        (
            "agent.variables.LOG_FORMAT=xml",
            "at '/agent/variables/LOG_FORMAT': value must be one of 'text', 'json'",
        ),
        (
            "agent.variables.REFRESH_INTERVAL=soon",
            "at '/agent/variables/REFRESH_INTERVAL': 'soon' does not match",
        ),
        // OCM's rollout strategy, typed as OCM's CRD types it.
        (
            "install.rolloutStrategy.type=Sometimes",
            "at '/install/rolloutStrategy/type': value must be one of 'All', 'Progressive', 'ProgressivePerGroup'",
        ),
        (
            "install.rolloutStrategy.progresive.maxConcurrency=1",
            "at '/install/rolloutStrategy': additional properties 'progresive' not allowed",
        ),
        (
            "install.rolloutStrategy.progressive.maxConcurrency=-1",
            "at '/install/rolloutStrategy/progressive/maxConcurrency': minimum: got -1, want 0",
        ),
        (
            "install.rolloutStrategy.progressive.maxConcurrency=150%",
            "at '/install/rolloutStrategy/progressive/maxConcurrency': '150%' does not match",
        ),
        (
            "install.rolloutStrategy.progressive.progressDeadline=soon",
            "at '/install/rolloutStrategy/progressive/progressDeadline': 'soon' does not match",
        ),
    ] {
        let error = chart::template(&[value], false)
            .err()
            .unwrap_or_else(|| panic!("{value} was accepted"))
            .to_string();
        assert!(error.contains(says), "{value}: {error}");
    }
}

/// The schema's `agent.variables` are the variables the add-on manager understands, no more, no
/// fewer: a variable added to one and not the other fails here.
#[test]
fn the_schema_names_the_agent_variables_the_manager_reads() {
    let file = workspace_dir().join("charts/ocm-score/values.schema.json");
    let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let schema: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
    let variables = &schema["properties"]["agent"]["properties"]["variables"];
    assert_eq!(variables["additionalProperties"], false, "{variables}");
    let in_schema: std::collections::BTreeSet<&str> = variables["properties"]
        .as_object()
        .expect("agent.variables.properties")
        .keys()
        .map(String::as_str)
        .collect();
    let understood: std::collections::BTreeSet<&str> =
        ocm_score_hub::addon::configuration::deployment_config::variable_names().collect();
    assert_eq!(in_schema, understood);
}

#[test]
fn bad_values_are_refused_naming_the_value() {
    for (value, says) in [
        ("install.placements=null", "install.placements"),
        ("install.placements[0].name=", "install.placements[0].name"),
    ] {
        let error = chart::template(&[value], false)
            .err()
            .unwrap_or_else(|| panic!("{value} was accepted"))
            .to_string();
        assert!(error.contains(says), "{value}: {error}");
    }
    let error = chart::template(
        &["install.strategy=Manual", "install.rolloutStrategy.type=All"],
        false,
    )
    .expect_err("a rollout without Placements was accepted")
    .to_string();
    assert!(
        error.contains("install.rolloutStrategy") && error.contains("Manual"),
        "{error}"
    );
    // OCM's addon-manager runs rollouts and the template install: `self` cannot have them.
    for (values, says) in [
        (
            &["install.lifecycle=self", "install.rolloutStrategy.type=All"][..],
            "install.rolloutStrategy",
        ),
        (
            &["install.lifecycle=self", "install.mode=template"][..],
            "install.lifecycle=self",
        ),
    ] {
        let error = chart::template(values, false)
            .err()
            .unwrap_or_else(|| panic!("{values:?} was accepted"))
            .to_string();
        assert!(error.contains(says), "{values:?}: {error}");
    }
    let error = chart::template(&["thanosScorer.enabled=true", "thanosScorer.config="], false)
        .expect_err("an empty scorer config was accepted")
        .to_string();
    assert!(error.contains("thanosScorer.config"), "{error}");
    let error = chart::template(&["explainServer.enabled=true"], false)
        .expect_err("an explain server without a certificate was accepted")
        .to_string();
    assert!(error.contains("explainServer.tls.secretName"), "{error}");
}
