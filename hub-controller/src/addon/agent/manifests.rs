//! The agent as the managed cluster receives it: the objects the ManifestWork carries.
//!
//! Least privilege on the managed cluster: the agent reads nodes and pods only when it watches the
//! cluster, reaches the kubelet through `nodes/proxy` only when the kubelet source is on, and may
//! touch only its own Lease. The pod runs non-root with a read-only root filesystem, no privilege
//! escalation and no capabilities; the hub kubeconfig Secret is mounted as a directory so the
//! kubeconfig's relative certificate paths resolve and rotated certificates appear in place.

use crate::addon::agent::cli;
use crate::addon::configuration::deployment_config::{AgentConfig, override_image};
use crate::addon::names;
use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EnvVar, HTTPGetAction, LocalObjectReference, Namespace,
    PodSecurityContext, PodSpec, PodTemplateSpec, Probe, ResourceRequirements, SeccompProfile,
    SecretVolumeSource, SecurityContext, ServiceAccount, Volume, VolumeMount,
};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use serde_json::Value;
use std::collections::BTreeMap;

/// What the hub's own flags say about the agent, before any AddOnDeploymentConfig.
#[derive(Clone, Debug, PartialEq)]
pub struct AgentDefaults {
    pub image: String,
    pub image_pull_policy: String,
    pub resources: ResourceRequirements,
}

/// Everything one cluster's agent is rendered from.
#[derive(Clone, Copy, Debug)]
pub struct RenderInput<'a> {
    pub addon: &'a str,
    pub cluster: &'a str,
    /// The install namespace (`status.namespace` of the add-on).
    pub namespace: &'a str,
    pub defaults: &'a AgentDefaults,
    pub config: &'a AgentConfig,
}

/// Renders the agent's manifests, each a complete object with apiVersion and kind.
pub fn render(input: &RenderInput<'_>) -> Result<Vec<Value>, serde_json::Error> {
    let mut out = vec![
        serde_json::to_value(namespace(input))?,
        serde_json::to_value(service_account(input))?,
    ];
    let rules = cluster_rules(input);
    if !rules.is_empty() {
        out.push(serde_json::to_value(cluster_role(input, rules))?);
        out.push(serde_json::to_value(cluster_role_binding(input))?);
    }
    out.push(serde_json::to_value(lease_role(input))?);
    out.push(serde_json::to_value(lease_role_binding(input))?);
    out.push(serde_json::to_value(deployment(input))?);
    Ok(out)
}

fn labels(addon: &str) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("app.kubernetes.io/name".to_string(), names::agent_name(addon)),
        ("app.kubernetes.io/part-of".to_string(), "ocm-score".to_string()),
    ])
}

fn namespaced_meta(input: &RenderInput<'_>, name: String) -> ObjectMeta {
    ObjectMeta {
        name: Some(name),
        namespace: Some(input.namespace.to_string()),
        labels: Some(labels(input.addon)),
        ..Default::default()
    }
}

/// The install namespace, kept on uninstall: other add-ons' agents and their hub kubeconfig
/// Secrets may live in it (the klusterlet shares it between add-ons).
fn namespace(input: &RenderInput<'_>) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(input.namespace.to_string()),
            labels: Some(BTreeMap::from([(
                names::AGENT_NAMESPACE_LABEL.to_string(),
                "true".to_string(),
            )])),
            annotations: Some(BTreeMap::from([(
                names::DELETION_ORPHAN_ANNOTATION.to_string(),
                "true".to_string(),
            )])),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn service_account(input: &RenderInput<'_>) -> ServiceAccount {
    ServiceAccount {
        metadata: namespaced_meta(input, names::agent_name(input.addon)),
        ..Default::default()
    }
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(vec![group.to_string()]),
        resources: Some(resources.iter().map(|r| r.to_string()).collect()),
        verbs: verbs.iter().map(|v| v.to_string()).collect(),
        ..Default::default()
    }
}

/// Cluster-wide reads, by data source.
fn cluster_rules(input: &RenderInput<'_>) -> Vec<PolicyRule> {
    let sources = input.config.sources;
    let mut rules = Vec::new();
    if sources.cluster {
        rules.push(rule("", &["nodes", "pods"], &["get", "list", "watch"]));
    }
    if sources.kubelet {
        rules.push(rule("", &["nodes/proxy"], &["get"]));
    }
    rules
}

fn cluster_role(input: &RenderInput<'_>, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: ObjectMeta {
            name: Some(names::agent_cluster_role_name(input.addon)),
            labels: Some(labels(input.addon)),
            ..Default::default()
        },
        rules: Some(rules),
        ..Default::default()
    }
}

fn agent_subject(input: &RenderInput<'_>) -> Subject {
    Subject {
        kind: "ServiceAccount".into(),
        name: names::agent_name(input.addon),
        namespace: Some(input.namespace.to_string()),
        api_group: None,
    }
}

fn cluster_role_binding(input: &RenderInput<'_>) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: ObjectMeta {
            name: Some(names::agent_cluster_role_name(input.addon)),
            labels: Some(labels(input.addon)),
            ..Default::default()
        },
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: names::agent_cluster_role_name(input.addon),
        },
        subjects: Some(vec![agent_subject(input)]),
    }
}

/// The health Lease (named after the add-on, as OCM's Lease health check reads it). `create` cannot
/// be limited to a name, the other verbs are.
fn lease_role(input: &RenderInput<'_>) -> Role {
    let mut named = rule("coordination.k8s.io", &["leases"], &["get", "update", "patch"]);
    named.resource_names = Some(vec![input.addon.to_string()]);
    Role {
        metadata: namespaced_meta(input, names::agent_name(input.addon)),
        rules: Some(vec![rule("coordination.k8s.io", &["leases"], &["create"]), named]),
    }
}

fn lease_role_binding(input: &RenderInput<'_>) -> RoleBinding {
    RoleBinding {
        metadata: namespaced_meta(input, names::agent_name(input.addon)),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name: names::agent_name(input.addon),
        },
        subjects: Some(vec![agent_subject(input)]),
    }
}

/// The agent's command line: fixed flags first, then the configured ones.
pub fn agent_args(input: &RenderInput<'_>) -> Vec<String> {
    let mut args = vec![
        cli::SUBCOMMAND.to_string(),
        cli::arg(
            cli::HUB_KUBECONFIG,
            &format!("{}/kubeconfig", cli::HUB_KUBECONFIG_DIR),
        ),
        cli::arg(cli::CLUSTER_NAME, input.cluster),
        cli::arg(cli::ADDON_NAME, input.addon),
        cli::arg(cli::ADDON_NAMESPACE, input.namespace),
        cli::arg(
            cli::METRICS_BIND_ADDRESS,
            &format!("0.0.0.0:{}", cli::METRICS_PORT),
        ),
    ];
    args.extend(
        input
            .config
            .flags
            .iter()
            .map(|(flag, value)| cli::arg(flag, value)),
    );
    args
}

/// glibc's malloc settings for the agent (read by the dynamic loader at start). A fixed
/// `mmap_threshold` of 128 KiB (glibc's initial value) stops glibc from raising it after the first
/// large free: every list page the agent reads (megabytes of JSON, in several copies) is then
/// mapped and unmapped on its own instead of being carved out of the heap, where the pages left
/// free among the long-lived ledger entries stayed resident. Measured on a real API server with
/// 5,000 nodes and 150,000 pods (docs/benchmarks.md): 16 MiB of the agent's 52 MiB were free heap;
/// with this setting 5 MiB of 41 MiB.
pub const MALLOC_TUNABLES: &str = "glibc.malloc.mmap_threshold=131072";

fn http_probe(path: &str, period: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.to_string()),
            port: IntOrString::String("metrics".into()),
            ..Default::default()
        }),
        period_seconds: Some(period),
        ..Default::default()
    }
}

/// The pod annotations annotation-driven Prometheus scrape configs select by (the `kubernetes-pods`
/// job of Prometheus's example configuration and of its community chart): OCM's managed clusters
/// carry no scrape convention of their own for add-on agents.
fn scrape_annotations() -> BTreeMap<String, String> {
    BTreeMap::from([
        ("prometheus.io/scrape".to_string(), "true".to_string()),
        ("prometheus.io/port".to_string(), cli::METRICS_PORT.to_string()),
        ("prometheus.io/path".to_string(), "/metrics".to_string()),
    ])
}

fn deployment(input: &RenderInput<'_>) -> Deployment {
    let name = names::agent_name(input.addon);
    let selector = BTreeMap::from([("app.kubernetes.io/name".to_string(), name.clone())]);
    let container = Container {
        name: "agent".into(),
        image: Some(override_image(&input.defaults.image, &input.config.registries)),
        image_pull_policy: Some(input.defaults.image_pull_policy.clone()),
        command: Some(vec![cli::BINARY.to_string()]),
        args: Some(agent_args(input)),
        env: Some(vec![EnvVar {
            name: "GLIBC_TUNABLES".into(),
            value: Some(MALLOC_TUNABLES.into()),
            ..Default::default()
        }]),
        ports: Some(vec![ContainerPort {
            name: Some("metrics".into()),
            container_port: cli::METRICS_PORT,
            protocol: Some("TCP".into()),
            ..Default::default()
        }]),
        liveness_probe: Some(http_probe("/healthz", 20)),
        readiness_probe: Some(http_probe("/readyz", 10)),
        resources: Some(input.defaults.resources.clone()),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            privileged: Some(false),
            capabilities: Some(Capabilities {
                drop: Some(vec!["ALL".into()]),
                add: None,
            }),
            ..Default::default()
        }),
        volume_mounts: Some(vec![VolumeMount {
            name: "hub-kubeconfig".into(),
            mount_path: cli::HUB_KUBECONFIG_DIR.into(),
            read_only: Some(true),
            ..Default::default()
        }]),
        ..Default::default()
    };
    Deployment {
        metadata: namespaced_meta(input, name.clone()),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(selector),
                ..Default::default()
            },
            // One writer per cluster at any time: never run the old and new agent side by side.
            strategy: Some(DeploymentStrategy {
                type_: Some("Recreate".into()),
                rolling_update: None,
            }),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels(input.addon)),
                    annotations: Some(scrape_annotations()),
                    ..Default::default()
                }),
                spec: Some(PodSpec {
                    service_account_name: Some(name),
                    // Copied into the labelled namespace by the klusterlet operator when the hub
                    // admin set one; a pod naming a pull secret that does not exist still starts.
                    image_pull_secrets: Some(vec![LocalObjectReference {
                        name: names::IMAGE_PULL_SECRET.to_string(),
                    }]),
                    containers: vec![container],
                    // Non-root, as the image's numeric USER; no fixed ids: OpenShift's restricted
                    // SCC assigns each namespace its own range and refuses pods that pin one.
                    security_context: Some(PodSecurityContext {
                        run_as_non_root: Some(true),
                        seccomp_profile: Some(SeccompProfile {
                            type_: "RuntimeDefault".into(),
                            localhost_profile: None,
                        }),
                        ..Default::default()
                    }),
                    node_selector: input.config.node_selector.clone(),
                    tolerations: input.config.tolerations.clone(),
                    volumes: Some(vec![Volume {
                        name: "hub-kubeconfig".into(),
                        secret: Some(SecretVolumeSource {
                            secret_name: Some(names::hub_kubeconfig_secret(input.addon)),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }]),
                    ..Default::default()
                }),
            },
            ..Default::default()
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addon::configuration::deployment_config::Sources;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use ocm_score_api::ImageMirror;

    fn defaults() -> AgentDefaults {
        AgentDefaults {
            image: "quay.io/ocm-score/ocm-score:v0.1.0".into(),
            image_pull_policy: "IfNotPresent".into(),
            resources: ResourceRequirements {
                requests: Some(BTreeMap::from([("cpu".to_string(), Quantity("20m".into()))])),
                ..Default::default()
            },
        }
    }

    fn kinds(manifests: &[Value]) -> Vec<&str> {
        manifests
            .iter()
            .map(|m| m["kind"].as_str().unwrap_or_default())
            .collect()
    }

    fn find<'a>(manifests: &'a [Value], kind: &str) -> &'a Value {
        manifests
            .iter()
            .find(|m| m["kind"] == kind)
            .unwrap_or(&Value::Null)
    }

    /// Renders the agent for add-on `a` on cluster `c1` into `namespace`, with the test defaults.
    fn render_with(config: &AgentConfig, namespace: &str) -> Vec<Value> {
        let d = defaults();
        let input = RenderInput {
            addon: "a",
            cluster: "c1",
            namespace,
            defaults: &d,
            config,
        };
        render(&input).expect("renders")
    }

    #[test]
    fn renders_every_object_with_identity_and_namespace() {
        let config = AgentConfig::default();
        let manifests = render_with(&config, "agents");
        assert_eq!(
            kinds(&manifests),
            [
                "Namespace",
                "ServiceAccount",
                "ClusterRole",
                "ClusterRoleBinding",
                "Role",
                "RoleBinding",
                "Deployment"
            ]
        );
        for m in &manifests {
            assert!(
                m["apiVersion"].is_string() && m["metadata"]["name"].is_string(),
                "{m}"
            );
            let cluster_scoped = ["Namespace", "ClusterRole", "ClusterRoleBinding"]
                .contains(&m["kind"].as_str().unwrap_or_default());
            assert_eq!(m["metadata"]["namespace"].is_null(), cluster_scoped, "{m}");
            if !cluster_scoped {
                assert_eq!(m["metadata"]["namespace"], "agents");
            }
        }
        let namespace = &find(&manifests, "Namespace")["metadata"];
        assert_eq!(
            namespace["annotations"][names::DELETION_ORPHAN_ANNOTATION],
            "true"
        );
        // OCM's add-on namespace mark, on whatever namespace the agent is installed in.
        assert_eq!(namespace["labels"][names::AGENT_NAMESPACE_LABEL], "true");
        let pod = &find(&manifests, "Deployment")["spec"]["template"];
        assert_eq!(
            pod["spec"]["imagePullSecrets"][0]["name"],
            names::IMAGE_PULL_SECRET
        );
        assert_eq!(pod["metadata"]["annotations"]["prometheus.io/port"], "8080");
    }

    #[test]
    fn deployment_is_locked_down_and_mounts_the_hub_kubeconfig_directory() {
        let config = AgentConfig {
            flags: vec![("--validity", "5m".into())],
            ..Default::default()
        };
        let manifests = render_with(&config, "agents");
        let dep = find(&manifests, "Deployment");
        let pod = &dep["spec"]["template"]["spec"];
        let container = &pod["containers"][0];
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        for context in [&pod["securityContext"], &container["securityContext"]] {
            assert!(
                context.get("runAsUser").is_none() && context.get("runAsGroup").is_none(),
                "no fixed ids (OpenShift's restricted SCC refuses them): {context}"
            );
        }
        assert_eq!(container["securityContext"]["readOnlyRootFilesystem"], true);
        assert_eq!(container["securityContext"]["allowPrivilegeEscalation"], false);
        assert_eq!(container["securityContext"]["capabilities"]["drop"][0], "ALL");
        assert_eq!(pod["volumes"][0]["secret"]["secretName"], "a-hub-kubeconfig");
        assert_eq!(container["volumeMounts"][0]["mountPath"], cli::HUB_KUBECONFIG_DIR);
        assert!(
            container["volumeMounts"][0]["subPath"].is_null(),
            "a subPath mount would not see rotations"
        );
        assert_eq!(container["resources"]["requests"]["cpu"], "20m");
        assert_eq!(container["command"], serde_json::json!(["ocm-score-agent"]));
        assert_eq!(
            container["env"],
            serde_json::json!([{"name": "GLIBC_TUNABLES", "value": MALLOC_TUNABLES}])
        );
        let args: Vec<&str> = container["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(
            args,
            [
                "run",
                "--hub-kubeconfig=/var/run/secrets/ocm/hub-kubeconfig/kubeconfig",
                "--cluster-name=c1",
                "--addon-name=a",
                "--addon-namespace=agents",
                "--metrics-bind-address=0.0.0.0:8080",
                "--validity=5m",
            ]
        );
    }

    #[test]
    fn permissions_follow_the_sources() {
        let rules_for = |sources: Sources| {
            let config = AgentConfig {
                sources,
                ..Default::default()
            };
            let manifests = render_with(&config, "ns");
            find(&manifests, "ClusterRole")["rules"].clone()
        };
        let cluster_only = rules_for(Sources::DEFAULT);
        assert_eq!(cluster_only.as_array().map(Vec::len), Some(1));
        assert_eq!(cluster_only[0]["resources"], serde_json::json!(["nodes", "pods"]));
        assert_eq!(
            cluster_only[0]["verbs"],
            serde_json::json!(["get", "list", "watch"])
        );
        let with_kubelet = rules_for(Sources {
            cluster: true,
            kubelet: true,
            host: false,
        });
        assert_eq!(with_kubelet[1]["resources"], serde_json::json!(["nodes/proxy"]));
        assert_eq!(with_kubelet[1]["verbs"], serde_json::json!(["get"]));
        // Host only: no cluster-wide permission at all.
        assert!(
            rules_for(Sources {
                cluster: false,
                kubelet: false,
                host: true
            })
            .is_null()
        );
    }

    #[test]
    fn config_placement_and_registries_reach_the_pod() {
        let config = AgentConfig {
            node_selector: Some(BTreeMap::from([("role".to_string(), "infra".to_string())])),
            registries: vec![ImageMirror {
                source: "quay.io".into(),
                mirror: "mirror.local".into(),
            }],
            ..Default::default()
        };
        let manifests = render_with(&config, "ns");
        let pod = &find(&manifests, "Deployment")["spec"]["template"]["spec"];
        assert_eq!(pod["nodeSelector"]["role"], "infra");
        assert_eq!(
            pod["containers"][0]["image"],
            "mirror.local/ocm-score/ocm-score:v0.1.0"
        );
    }

    #[test]
    fn lease_role_allows_only_the_addon_lease() {
        let config = AgentConfig::default();
        let manifests = render_with(&config, "ns");
        let role = find(&manifests, "Role");
        assert_eq!(role["rules"][0]["verbs"], serde_json::json!(["create"]));
        assert_eq!(role["rules"][1]["resourceNames"], serde_json::json!(["a"]));
        assert_eq!(role["rules"][1]["resources"], serde_json::json!(["leases"]));
    }
}
