//! The hub install in `manifests/hub/` fits the binary it deploys: the Deployment's arguments parse,
//! the agent image is the image the Deployment runs, and the default AddOnDeploymentConfig is one
//! the add-on manager accepts.

mod addon_common;

use addon_common::hub_manifests;
use ocm_score_api::{AddOnDeploymentConfig, ClusterManagementAddOn};
use ocm_score_hub::addon::configuration::deployment_config::agent_config;
use serde_json::Value;

fn find<'a>(objects: &'a [Value], kind: &str) -> &'a Value {
    objects
        .iter()
        .find(|o| o["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in manifests/hub"))
}

#[test]
fn the_deployment_runs_the_addon_manager_with_valid_flags() {
    let objects = hub_manifests();
    let container = &find(&objects, "Deployment")["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["command"], serde_json::json!(["ocm-score-hub"]));
    let parsed = addon_common::manager_args_of(container);
    let leader_election = parsed
        .validate()
        .expect("valid flags")
        .expect("leader election on");
    assert_eq!(
        Some(parsed.agent_image.as_str()),
        container["image"].as_str(),
        "one image holds both binaries"
    );
    assert_eq!(
        parsed.addon_name,
        find(&objects, "ClusterManagementAddOn")["metadata"]["name"]
    );
    // The leader election Lease the Role allows is the one the controller uses.
    let lease_rule = &find(&objects, "Role")["rules"][1];
    assert_eq!(
        lease_rule["resourceNames"][0],
        leader_election.lease_name.as_str()
    );
}

#[test]
fn the_default_config_is_accepted_and_is_the_cma_default() {
    let objects = hub_manifests();
    let config: AddOnDeploymentConfig =
        serde_json::from_value(find(&objects, "AddOnDeploymentConfig").clone())
            .expect("an AddOnDeploymentConfig");
    let agent = agent_config(&config.spec).unwrap_or_else(|e| panic!("the default config is invalid: {e}"));
    assert!(agent.sources.cluster);
    let cma: ClusterManagementAddOn =
        serde_json::from_value(find(&objects, "ClusterManagementAddOn").clone())
            .expect("a ClusterManagementAddOn");
    let default = cma.spec.supported_configs[0]
        .default_config
        .as_ref()
        .expect("a default config");
    assert_eq!(Some(&default.name), config.metadata.name.as_ref());
    assert_eq!(Some(&default.namespace), config.metadata.namespace.as_ref());
    assert_eq!(
        cma.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ocm_score_api::well_known::LIFECYCLE_ANNOTATION))
            .map(String::as_str),
        None,
        "the install strategy is OCM's addon-manager's, not ours"
    );
}
