//! OCM on the test clusters: the hub's controllers and conversion webhook, the klusterlet agent
//! of each managed cluster, and the join a `clusteradm join` + `accept` would do.

use std::path::Path;

use serde_json::{Value, json};

use super::Error;
use super::go_components::Components;
use super::kube::KubeCluster;
use super::pki;
use super::process::{Component, Tier};

/// The namespace OCM's hub controllers run in.
pub const HUB_NAMESPACE: &str = "open-cluster-management-hub";
/// The namespace the klusterlet agent runs in on a managed cluster.
pub const AGENT_NAMESPACE: &str = "open-cluster-management-agent";
/// The klusterlet operator's namespace: it holds the image pull secret the operator copies into
/// labelled add-on namespaces.
pub const OPERATOR_NAMESPACE: &str = "open-cluster-management";
/// The klusterlet's default namespace for add-on agents.
pub const ADDON_NAMESPACE: &str = "open-cluster-management-agent-addon";
/// The group of the bootstrap identity a joining klusterlet uses, as in OCM's cluster-manager chart.
pub const BOOTSTRAP_GROUP: &str = "system:bootstrappers:managedcluster";
/// Ports the addon webhook (controller-runtime) binds on every interface, fixed upstream.
pub const WEBHOOK_FIXED_PORTS: [(u16, &str); 2] = [(8000, "health probe"), (8080, "metrics")];

/// The hub's CRDs, rendered: the add-on kinds' conversion webhook points at our webhook process.
pub fn hub_crds(components: &Components, ca_bundle: &str, webhook_url: &str) -> Result<Vec<Value>, Error> {
    let mut crds = read_yaml_dir(&components.hub_crds())?;
    for crd in &mut crds {
        let strategy = crd.pointer("/spec/conversion/strategy").and_then(Value::as_str);
        if strategy == Some("Webhook") {
            // No kube-proxy runs here, so the API server reaches the webhook by URL, not Service.
            crd["spec"]["conversion"]["webhook"]["clientConfig"] =
                json!({"url": webhook_url, "caBundle": ca_bundle});
        }
    }
    Ok(crds)
}

/// The CRDs the klusterlet needs on a managed cluster.
pub fn managed_crds(components: &Components) -> Result<Vec<Value>, Error> {
    read_yaml_dir(&components.managed_crds())
}

/// Namespaces and the bootstrap RBAC a hub needs before klusterlets can join.
pub fn hub_objects() -> Vec<Value> {
    vec![
        namespace(HUB_NAMESPACE),
        // What a joining klusterlet may do with its bootstrap identity: create its cluster and its
        // CSR and watch them, nothing else.
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "open-cluster-management:bootstrap"},
            "rules": [
                {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
                {"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
                 "verbs": ["create", "get", "list", "watch"]},
                {"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclusters"],
                 "verbs": ["get", "create", "list", "watch"]},
                {"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["managedclustersets/join"],
                 "verbs": ["create"]},
            ],
        }),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "open-cluster-management:bootstrap:managedcluster"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "open-cluster-management:bootstrap"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": BOOTSTRAP_GROUP}],
        }),
    ]
}

/// Namespaces a managed cluster needs before its klusterlet starts.
pub fn managed_objects() -> Vec<Value> {
    vec![namespace(AGENT_NAMESPACE), namespace(ADDON_NAMESPACE)]
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

/// Starts the hub side of OCM: the add-on conversion webhook and the four hub controllers.
pub fn start_hub(
    components: &Components,
    hub: &KubeCluster,
    webhook_port: u16,
    with_addon_manager: bool,
    dir: &Path,
    log_dir: &Path,
    started: &mut Vec<Component>,
) -> Result<(), Error> {
    let webhook_dir = dir.join("addon-webhook");
    std::fs::create_dir_all(&webhook_dir).map_err(|source| Error::Io {
        what: format!("creating {}", webhook_dir.display()),
        source,
    })?;
    let serving = hub.ca.serving_cert("cluster-manager-addon-webhook")?;
    pki::write(&webhook_dir.join("tls.crt"), &serving.cert_pem)?;
    pki::write(&webhook_dir.join("tls.key"), &serving.key_pem)?;
    let kubeconfig = hub.admin_kubeconfig.display().to_string();
    started.push(Component::spawn(
        "hub-addon-webhook",
        Tier::Client,
        &components.bin("addon"),
        &[
            "webhook-server".into(),
            format!("--port={webhook_port}"),
            format!("--certdir={}", webhook_dir.display()),
        ],
        &[("KUBECONFIG", kubeconfig.clone())],
        log_dir,
    )?);

    // The work hub manager runs ManifestWorkReplicaSets only with their (alpha) feature gate, as a
    // ClusterManager with `workConfiguration.featureGates` enabling it would start it.
    let mut controllers = vec![
        ("hub-registration-controller", "registration", "controller", None),
        ("hub-placement-controller", "placement", "controller", None),
        (
            "hub-work-manager",
            "work",
            "manager",
            Some("--feature-gates=ManifestWorkReplicaSet=true"),
        ),
    ];
    if with_addon_manager {
        controllers.push(("hub-addon-manager", "addon", "manager", None));
    }
    for (name, bin, command, extra) in controllers {
        let listen = format!("127.0.0.1:{}", super::free_port()?);
        let mut args = vec![
            command.into(),
            format!("--kubeconfig={kubeconfig}"),
            format!("--namespace={HUB_NAMESPACE}"),
            "--disable-leader-election".into(),
            format!("--listen={listen}"),
        ];
        args.extend(extra.map(str::to_owned));
        started.push(Component::spawn(
            name,
            Tier::Client,
            &components.bin(bin),
            &args,
            &[],
            log_dir,
        )?);
    }
    Ok(())
}

/// Starts the klusterlet agent (registration + work) of `cluster_name`, bootstrapping to the hub
/// with a certificate of the bootstrap group, as `clusteradm join` does with a token.
pub fn start_klusterlet(
    components: &Components,
    hub: &KubeCluster,
    cluster_name: &str,
    managed: &KubeCluster,
    dir: &Path,
    log_dir: &Path,
    started: &mut Vec<Component>,
) -> Result<(), Error> {
    let klusterlet_dir = dir.join(format!("klusterlet-{cluster_name}"));
    let hub_kubeconfig_dir = klusterlet_dir.join("hub-kubeconfig");
    std::fs::create_dir_all(&hub_kubeconfig_dir).map_err(|source| Error::Io {
        what: format!("creating {}", hub_kubeconfig_dir.display()),
        source,
    })?;
    let bootstrap = klusterlet_dir.join("bootstrap.kubeconfig");
    hub.write_kubeconfig(
        &format!("system:ocm:bootstrap:{cluster_name}"),
        Some(BOOTSTRAP_GROUP),
        &bootstrap,
    )?;
    let listen = format!("127.0.0.1:{}", super::free_port()?);
    started.push(Component::spawn(
        &format!("{cluster_name}-klusterlet"),
        Tier::Client,
        &components.bin("registration-operator"),
        &[
            "agent".into(),
            format!("--kubeconfig={}", managed.admin_kubeconfig.display()),
            format!("--namespace={AGENT_NAMESPACE}"),
            "--disable-leader-election".into(),
            format!("--listen={listen}"),
            format!("--spoke-cluster-name={cluster_name}"),
            format!("--bootstrap-kubeconfig={}", bootstrap.display()),
            format!("--hub-kubeconfig-dir={}", hub_kubeconfig_dir.display()),
            // The work agent reads the hub kubeconfig the registration agent writes (its default
            // is the in-pod mount path).
            format!(
                "--workload-source-config={}",
                hub_kubeconfig_dir.join("kubeconfig").display()
            ),
        ],
        &[],
        log_dir,
    )?);
    // What a klusterlet operator runs beside its agents for add-ons: OCM's controller copying the
    // operator namespace's image pull secret into labelled add-on namespaces.
    started.push(Component::spawn(
        &format!("{cluster_name}-addon-namespaces"),
        Tier::Client,
        &components.bin("addon-namespaces"),
        &[
            format!("--kubeconfig={}", managed.admin_kubeconfig.display()),
            format!("--operator-namespace={OPERATOR_NAMESPACE}"),
        ],
        &[],
        log_dir,
    )?);
    Ok(())
}

/// Reads every YAML document of every `.yaml` file in `dir` (sorted by name), rendering OCM's
/// template fields first; a field we do not know is an error naming it.
fn read_yaml_dir(dir: &Path) -> Result<Vec<Value>, Error> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|source| Error::Io {
            what: format!("reading {}", dir.display()),
            source,
        })?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    let mut docs = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).map_err(|source| Error::Io {
            what: format!("reading {}", file.display()),
            source,
        })?;
        // Placeholders the caller overwrites (the conversion webhook's clientConfig).
        let text = text
            .replace("{{ .AddonAPIServiceCABundle }}", "placeholder")
            .replace("{{ .ClusterManagerNamespace }}", HUB_NAMESPACE);
        if let Some(pos) = text.find("{{") {
            let field: String = text[pos..].chars().take_while(|c| *c != '\n').collect();
            return Err(Error::Manifest {
                file: file.clone(),
                message: format!("unknown template field {field}"),
            });
        }
        for doc in serde_norway::Deserializer::from_str(&text) {
            let value: Value = serde::Deserialize::deserialize(doc).map_err(|e| Error::Manifest {
                file: file.clone(),
                message: e.to_string(),
            })?;
            if !value.is_null() {
                docs.push(value);
            }
        }
    }
    Ok(docs)
}
