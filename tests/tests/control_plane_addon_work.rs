//! The add-on manager's ManifestWork, as it renders it, on the real control plane: the real API
//! server accepts it with OCM's own CRD, and OCM's real work agent applies every manifest to the
//! managed cluster and reports it Applied and Available.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ResourceRequirements;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use ocm_score_api::ManifestWork;
use ocm_score_control_plane::ControlPlane;
use ocm_score_hub::addon::agent::manifests::{AgentDefaults, RenderInput, render};
use ocm_score_hub::addon::agent::work::{AgentAvailable, deploy_work, updated};
use ocm_score_hub::addon::configuration::deployment_config::AgentConfig;
use ocm_score_hub::addon::names;
use serde_json::{Value, json};

async fn dynamic(
    client: &kube::Client,
    group: &str,
    version: &str,
    kind: &str,
    ns: &str,
) -> Api<DynamicObject> {
    let (resource, _) = pinned_kind(client, &GroupVersionKind::gvk(group, version, kind))
        .await
        .expect("kind served");
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// Whether `conditions` (a list of Kubernetes conditions) holds `kind` with status True.
fn condition_true(conditions: Option<&Value>, kind: &str) -> bool {
    conditions
        .and_then(Value::as_array)
        .is_some_and(|cs| cs.iter().any(|c| c["type"] == kind && c["status"] == "True"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_work_agent_applies_our_manifest_work() {
    let cp = match ControlPlane::builder()
        .clusters(1)
        .start_with_progress(&|l| eprintln!("{l}"))
        .await
    {
        Ok(cp) => cp,
        Err(e) => panic!("the control plane did not start: {e}"),
    };
    let hub = cp.hub_client().await.expect("hub client");
    let addon = names::DEFAULT_ADDON_NAME;

    // The work is owned by its ManagedClusterAddOn (the garbage collector is real here: an owner
    // that does not exist would take the work with it).
    let mcas = dynamic(
        &hub,
        "addon.open-cluster-management.io",
        "v1alpha1",
        "ManagedClusterAddOn",
        "cluster1",
    )
    .await;
    let mca: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
        "metadata": {"name": addon, "namespace": "cluster1"},
        "spec": {"installNamespace": names::DEFAULT_INSTALL_NAMESPACE},
    }))
    .expect("object");
    let mca = mcas
        .create(&PostParams::default(), &mca)
        .await
        .expect("ManagedClusterAddOn accepted");
    let owner = OwnerReference {
        api_version: "addon.open-cluster-management.io/v1alpha1".into(),
        kind: "ManagedClusterAddOn".into(),
        name: addon.into(),
        uid: mca.metadata.uid.clone().expect("uid"),
        block_owner_deletion: Some(true),
        controller: Some(true),
    };

    let defaults = AgentDefaults {
        image: "quay.io/ocm-score/ocm-score:v0.1.0".into(),
        image_pull_policy: "IfNotPresent".into(),
        resources: ResourceRequirements::default(),
    };
    let config = AgentConfig::default();
    let input = RenderInput {
        addon,
        cluster: "cluster1",
        namespace: names::DEFAULT_INSTALL_NAMESPACE,
        defaults: &defaults,
        config: &config,
    };
    let manifests = render(&input).expect("renders");
    let kinds: Vec<String> = manifests
        .iter()
        .map(|m| m["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    let work = deploy_work(
        addon,
        "cluster1",
        &owner,
        manifests.clone(),
        &BTreeMap::new(),
        AgentAvailable::Exists,
    );
    let works: Api<ManifestWork> = Api::namespaced(hub.clone(), "cluster1");
    let created = works
        .create(&PostParams::default(), &work)
        .await
        .expect("the real server accepts our ManifestWork");
    let name = created.metadata.name.clone().expect("name");

    // OCM's work agent (in cluster1's klusterlet) applies it and says so per manifest.
    let works_dyn = dynamic(
        &hub,
        "work.open-cluster-management.io",
        "v1",
        "ManifestWork",
        "cluster1",
    )
    .await;
    let started = Instant::now();
    let applied = loop {
        let w = works_dyn.get(&name).await.expect("get work");
        let conditions = w.data.pointer("/status/conditions");
        // The Deployment's WellKnownStatus feedback (the rule we configure) arrives with the
        // agent's next status sync.
        let feedback = w
            .data
            .pointer("/status/resourceStatus/manifests")
            .and_then(Value::as_array)
            .is_some_and(|ms| {
                ms.iter().any(|m| {
                    m["resourceMeta"]["kind"] == "Deployment"
                        && m.pointer("/statusFeedback/values")
                            .and_then(Value::as_array)
                            .is_some_and(|v| !v.is_empty())
                })
            });
        if condition_true(conditions, "Applied") && condition_true(conditions, "Available") && feedback {
            break w;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "work not Applied, Available, with Deployment feedback: {}\nwork agent log:\n{}",
            serde_json::to_string_pretty(&w.data["status"]).unwrap_or_default(),
            cp.log_tail("cluster1-klusterlet", 30)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    let manifests_status = applied
        .data
        .pointer("/status/resourceStatus/manifests")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        manifests_status.len(),
        kinds.len(),
        "one status per manifest: {manifests_status:?}"
    );
    for (m, kind) in manifests_status.iter().zip(&kinds) {
        assert_eq!(m["resourceMeta"]["kind"], kind.as_str());
        assert!(
            condition_true(m.get("conditions"), "Applied"),
            "{kind} applied: {m}"
        );
    }

    // The agent Deployment exists on the managed cluster, exactly as rendered.
    let managed = cp.cluster_client("cluster1").await.expect("cluster1 client");
    let deployments: Api<Deployment> = Api::namespaced(managed, names::DEFAULT_INSTALL_NAMESPACE);
    let list = deployments
        .list(&Default::default())
        .await
        .expect("list deployments");
    let agent = list
        .items
        .first()
        .unwrap_or_else(|| panic!("no agent Deployment on cluster1"));
    let container = &agent
        .spec
        .as_ref()
        .expect("spec")
        .template
        .spec
        .as_ref()
        .expect("pod spec")
        .containers[0];
    assert_eq!(
        container.image.as_deref(),
        Some("quay.io/ocm-score/ocm-score:v0.1.0")
    );

    // Under OCM's rollout the work's Available means the agent runs: the real work agent compiles
    // and evaluates our rule (an expression it cannot compile reads ConditionRuleExpressionError),
    // and with no node to run the pod the Deployment and the work stay unavailable.
    let existing = works.get(&name).await.expect("get work");
    let judged = deploy_work(
        addon,
        "cluster1",
        &owner,
        manifests,
        &BTreeMap::new(),
        AgentAvailable::RolledOut,
    );
    works
        .replace(&name, &PostParams::default(), &updated(&existing, &judged))
        .await
        .expect("the real server accepts our condition rule");
    let (rule, _) = rule_until(&cp, &works_dyn, &name, |rule, work| {
        rule.is_some() && work["status"] == "False"
    })
    .await;
    let rule = rule.expect("the rule's condition");
    assert_eq!(
        (rule["status"].as_str(), rule["reason"].as_str()),
        (Some("False"), Some("ConditionRuleEvaluated")),
        "{rule}"
    );
    assert_eq!(
        rule["message"], "the agent is not rolled out: 1 of 1 replicas updated, 0 available",
        "{rule}"
    );

    // The moment OCM's work agent can catch: the work already names the new Deployment, the
    // Deployment on the cluster is still the old one, fully rolled out. A ReadOnly manifest holds
    // that moment still (the agent reads the Deployment and never applies it).
    let old = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "rollout-probe", "namespace": names::DEFAULT_INSTALL_NAMESPACE},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "rollout-probe"}},
            "template": {
                "metadata": {"labels": {"app": "rollout-probe"}},
                "spec": {"containers": [{"name": "agent", "image": "quay.io/ocm-score/ocm-score:old"}]},
            },
        },
    });
    deployments
        .create(
            &PostParams::default(),
            &serde_json::from_value(old.clone()).expect("a Deployment"),
        )
        .await
        .expect("the old Deployment");
    let mut new = old.clone();
    new["spec"]["template"]["spec"]["containers"][0]["image"] = json!("quay.io/ocm-score/ocm-score:new");
    let mut probe = deploy_work(
        "rollout-probe",
        "cluster1",
        &owner,
        vec![new],
        &BTreeMap::new(),
        AgentAvailable::RolledOut,
    );
    probe.spec.manifest_configs[0]
        .extra
        .insert("updateStrategy".into(), json!({"type": "ReadOnly"}));
    let probe_name = works
        .create(&PostParams::default(), &probe)
        .await
        .expect("the real server accepts a ReadOnly manifest")
        .metadata
        .name
        .expect("name");
    let (rule, work) = rule_until(&cp, &works_dyn, &probe_name, |rule, _| {
        rule.is_some_and(|r| r["observedGeneration"] == 1)
    })
    .await;
    let stale = rule.expect("the rule's condition");
    assert_eq!(
        (
            stale["status"].as_str(),
            stale["message"].as_str(),
            work["status"].as_str()
        ),
        (
            Some("False"),
            Some("the agent Deployment is not yet updated to this configuration"),
            Some("False")
        ),
        "the old, rolled-out Deployment is not the new configuration's: {stale}"
    );
    // The digest is all that held it: the same Deployment carrying it reads Available.
    let digest = probe.spec.workload.manifests[0]["metadata"]["annotations"]
        [names::RENDERED_DIGEST_ANNOTATION]
        .clone();
    deployments
        .patch(
            "rollout-probe",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {names::RENDERED_DIGEST_ANNOTATION: digest}}})),
        )
        .await
        .expect("annotate the Deployment");
    let (rule, _) = rule_until(&cp, &works_dyn, &probe_name, |rule, work| {
        rule.is_some_and(|r| r["status"] == "True") && work["status"] == "True"
    })
    .await;
    assert_eq!(
        rule.expect("the rule's condition")["message"],
        "the agent runs this configuration and is available"
    );
}

/// The condition our rule set on a work's Deployment manifest (`None` until the work agent
/// evaluated it) and the work's own `Available`, once `done` holds of them.
async fn rule_until(
    cp: &ControlPlane,
    works: &Api<DynamicObject>,
    name: &str,
    done: impl Fn(Option<&Value>, &Value) -> bool,
) -> (Option<Value>, Value) {
    let started = Instant::now();
    loop {
        let w = works.get(name).await.expect("get work");
        let rule = w
            .data
            .pointer("/status/resourceStatus/manifests")
            .and_then(Value::as_array)
            .and_then(|ms| ms.iter().find(|m| m["resourceMeta"]["kind"] == "Deployment"))
            .and_then(|m| m.pointer("/conditions")?.as_array())
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"))
            .filter(|c| {
                c["reason"]
                    .as_str()
                    .is_some_and(|r| r.starts_with("ConditionRule"))
            })
            .cloned();
        let work_available = w
            .data
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .and_then(|cs| cs.iter().find(|c| c["type"] == "Available"))
            .cloned()
            .unwrap_or_default();
        if done(rule.as_ref(), &work_available) {
            return (rule, work_available);
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "{name}: our rule not evaluated as expected: {}\nwork agent log:\n{}",
            serde_json::to_string_pretty(&w.data["status"]).unwrap_or_default(),
            cp.log_tail("cluster1-klusterlet", 30)
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
