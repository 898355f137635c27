//! What a reading of the add-on against upstream OCM found, checked on the real control plane (real
//! API server, garbage collector, CSR signer, PodSecurity admission, OCM's addon-manager, registration
//! and work agents):
//!
//! - under OCM's lifecycle (the shipped default), OCM's addon-manager and ours agree on every config's spec hash
//!   (we write them into the ClusterManagementAddOn's status, where OCM takes them from);
//! - CSRs created by OCM's gRPC server account are decided by the klusterlet its annotation names;
//! - the agent reaches the hub through the `proxy-url` of its kubeconfig;
//! - nothing waits for our controller: an add-on left with the old finalizer is released, the score
//!   goes with its add-on, and deleting the ClusterManagementAddOn with our controller stopped
//!   removes every add-on, work, hub Role, RoleBinding and score;
//! - the install's pods pass PodSecurity `restricted` (no fixed user ids) with the shipped image.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::certificates::v1::CertificateSigningRequest;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::{Api, ApiResource, DynamicObject, ListParams, Patch, PatchParams, PostParams};
use ocm_score_api::{
    AddOnDeploymentConfig, AddOnPlacementScore, ClusterManagementAddOn, ManagedClusterAddOn, ManifestWork,
};
use ocm_score_control_plane::process::{Component, Tier};
use ocm_score_control_plane::{ControlPlane, addon};
use ocm_score_hub::addon::agent::spec_hash::spec_hash_of_object;
use ocm_score_hub::addon::names;
use ocm_score_tests::support::{TempDir, eventually};
use rcgen::{CertificateParams, DistinguishedName, DnType, KeyPair};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const ADDON: &str = names::DEFAULT_ADDON_NAME;
const CLUSTER: &str = "cluster1";
const HUB_NAMESPACE: &str = "ocm-score";
/// Generous for a loaded 2-core machine; only a hang should reach it.
const WAIT: Duration = Duration::from_secs(150);

fn kubectl(kubeconfig: &Path, args: &[&str]) -> String {
    addon::kubectl(kubeconfig, args).unwrap_or_else(|e| panic!("{e}"))
}

/// Raw objects of kind `K` (what the server holds, for spec hashes and unmodelled status fields).
fn raw<K: kube::Resource<DynamicType = ()>>(
    client: &kube::Client,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let resource = ApiResource::erase::<K>(&());
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

async fn get(api: &Api<DynamicObject>, name: &str) -> Option<Value> {
    let object = api.get_opt(name).await.ok().flatten()?;
    serde_json::to_value(object).ok()
}

fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// The ADC reference in a list of config references.
fn adc_reference(references: &Value) -> Option<&Value> {
    references
        .as_array()?
        .iter()
        .find(|r| r["resource"] == names::ADDON_DEPLOYMENT_CONFIG_RESOURCE)
}

/// Installs `manifests/hub` with kubectl and starts our add-on manager as its Deployment says, with
/// its ServiceAccount's token (so with exactly the RBAC the install grants).
async fn install_and_start_manager(
    cp: &ControlPlane,
    dir: &Path,
    before_start: impl AsyncFnOnce(),
) -> Component {
    kubectl(&cp.hub_kubeconfig(), &["apply", "-k", "manifests/hub"]);
    before_start().await;
    addon::start_manager(cp, dir)
        .await
        .unwrap_or_else(|e| panic!("the add-on manager did not start: {e}"))
}

async fn start_control_plane() -> ControlPlane {
    ControlPlane::builder()
        .clusters(1)
        .start_with_progress(&|l| eprintln!("{l}"))
        .await
        .unwrap_or_else(|e| panic!("the control plane did not start: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_ocm_addon_manager_the_hashes_agree_and_grpc_csrs_are_decided() {
    let cp = start_control_plane().await;
    let hub = cp.hub_client().await.expect("hub client");
    let dir = TempDir::new("addon-real-upstream");

    // The shipped install: OCM's addon-manager runs the install strategy and the configuration
    // rollout; ours registers, deploys and hashes.
    let manager = install_and_start_manager(&cp, dir.path(), async || {
        let cma = Api::<ClusterManagementAddOn>::all(hub.clone())
            .get(ADDON)
            .await
            .expect("the ClusterManagementAddOn");
        assert!(
            !cma.metadata
                .annotations
                .unwrap_or_default()
                .contains_key(names::LIFECYCLE_ANNOTATION),
            "the shipped install leaves the lifecycle to OCM"
        );
    })
    .await;
    let cmas = raw::<ClusterManagementAddOn>(&hub, None);
    let mcas = raw::<ManagedClusterAddOn>(&hub, Some(CLUSTER));
    let configs = raw::<AddOnDeploymentConfig>(&hub, Some(HUB_NAMESPACE));
    let works = raw::<ManifestWork>(&hub, Some(CLUSTER));
    let context = || {
        format!(
            "--- ocm-score-hub:\n{}\n--- OCM addon-manager:\n{}",
            manager.tail(),
            cp.log_tail("hub-addon-manager", 20)
        )
    };

    for (round, refresh) in [(1, None), (2, Some("90s"))] {
        if let Some(refresh) = refresh {
            let patch = json!({"spec": {"customizedVariables": [
                {"name": "SOURCES", "value": "cluster"},
                {"name": "REFRESH_INTERVAL", "value": refresh},
                {"name": "SCORE_VALIDITY", "value": "5m"},
            ]}});
            configs
                .patch(ADDON, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .expect("changing the config");
        }
        let config = configs.get(ADDON).await.expect("the config");
        let hash = spec_hash_of_object(&config);

        // Where OCM takes the hashes from: the ClusterManagementAddOn's status, filled by us.
        eventually(
            &format!("round {round}: the CMA status carries hash {hash}"),
            WAIT,
            context,
            || async {
                let cma = get(&cmas, ADDON).await?;
                let default = adc_reference(cma.pointer("/status/defaultconfigReferences")?)?;
                let progression =
                    adc_reference(cma.pointer("/status/installProgressions/0/configReferences")?)?;
                (default["desiredConfig"]["specHash"] == hash.as_str()
                    && progression["desiredConfig"]["specHash"] == hash.as_str())
                .then_some(())
            },
        )
        .await;
        // OCM copies it into the add-on, and the work we render carries the same.
        eventually(
            &format!("round {round}: the add-on desires {hash} and its work carries it"),
            WAIT,
            context,
            || async {
                let addon = get(&mcas, ADDON).await?;
                let reference = adc_reference(addon.pointer("/status/configReferences")?)?;
                let work = get(&works, &names::deploy_work_name(ADDON)).await?;
                let annotation =
                    work["metadata"]["annotations"][names::CONFIG_SPEC_HASH_ANNOTATION].as_str()?;
                (reference["desiredConfig"]["specHash"] == hash.as_str() && annotation.contains(&hash))
                    .then_some(())
            },
        )
        .await;
        // OCM's progressing controller compares the two before it looks at the work's readiness:
        // "progressing... work is not ready" says they agreed ("... mca and work configs mismatch"
        // says not). It re-evaluates on every change of the work; a condition read at once could
        // still be its verdict on the work before ours re-rendered it, so it is read after a pause.
        // No node runs the agent here, and under OCM's lifecycle the work is Available only once the
        // agent runs, so the rollout of the config never completes (control_plane_rollout.rs shows
        // it completing on nodes).
        tokio::time::sleep(Duration::from_secs(5)).await;
        let addon = eventually(
            &format!("round {round}: OCM finds the work's config hash {hash} equal to the add-on's"),
            WAIT,
            context,
            || async {
                let addon = get(&mcas, ADDON).await?;
                let agreed = condition(&addon, "Progressing").is_some_and(|c| {
                    c["status"] == "True"
                        && c["reason"] == "Progressing"
                        && c["message"]
                            .as_str()
                            .is_some_and(|m| m.ends_with("work is not ready"))
                });
                agreed.then_some(addon)
            },
        )
        .await;
        assert!(
            !addon["metadata"]["finalizers"]
                .to_string()
                .contains(names::LEGACY_CLEANUP_FINALIZER),
            "none of our finalizers: {addon}"
        );
    }

    // CSRs through OCM's gRPC server: created by its account, naming the klusterlet it served.
    let grpc_namespace = "open-cluster-management-hub";
    let requester_rights = |namespace: &str, account: &str| {
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}),
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
                   "metadata": {"name": account, "namespace": namespace}}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                   "metadata": {"name": format!("csr-creator-{account}")},
                   "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                               "name": "csr-creator"},
                   "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}]}),
        ]
    };
    let mut objects = vec![
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "csr-creator"},
        "rules": [{"apiGroups": ["certificates.k8s.io"], "resources": ["certificatesigningrequests"],
                   "verbs": ["create", "get"]}]}),
    ];
    objects.extend(requester_rights(grpc_namespace, "grpc-server-sa"));
    objects.extend(requester_rights("default", "mallory"));
    ocm_score_control_plane::apply_all(&hub, &objects)
        .await
        .expect("the requesters");
    let as_account = |namespace: &'static str, account: &'static str| {
        let path = dir.path().join(format!("{account}.kubeconfig"));
        let cp = &cp;
        async move {
            cp.write_service_account_kubeconfig("hub", namespace, account, Duration::from_secs(3600), &path)
                .await
                .expect("a token");
            ocm_score_control_plane::client(&path).await.expect("a client")
        }
    };
    let grpc_server = as_account(grpc_namespace, "grpc-server-sa").await;
    let mallory = as_account("default", "mallory").await;
    let pem = certificate_request();
    let klusterlet = |cluster: &str| format!("system:open-cluster-management:{cluster}:grpc-agent");
    let cases = [
        ("grpc-approved", &grpc_server, klusterlet(CLUSTER), "Approved"),
        ("grpc-forged", &grpc_server, klusterlet("cluster2"), "Denied"),
        ("impostor", &mallory, klusterlet(CLUSTER), "Denied"),
    ];
    for (suffix, client, annotated, _) in &cases {
        let csr: CertificateSigningRequest = serde_json::from_value(json!({
            "metadata": {
                "name": format!("addon-{CLUSTER}-{ADDON}-{suffix}"),
                "labels": {names::CLUSTER_NAME_LABEL: CLUSTER, names::ADDON_NAME_LABEL: ADDON},
                "annotations": {names::CSR_USER_ANNOTATION: annotated},
            },
            "spec": {
                "request": base64(&pem),
                "signerName": names::KUBE_APISERVER_CLIENT_SIGNER,
                "usages": ["digital signature", "key encipherment", "client auth"],
            },
        }))
        .expect("a CSR");
        Api::<CertificateSigningRequest>::all((*client).clone())
            .create(&PostParams::default(), &csr)
            .await
            .unwrap_or_else(|e| panic!("creating CSR {suffix}: {e}"));
    }
    let csrs = Api::<CertificateSigningRequest>::all(hub.clone());
    for (suffix, _, annotated, decision) in &cases {
        let name = format!("addon-{CLUSTER}-{ADDON}-{suffix}");
        let csr = eventually(&format!("CSR {name} {decision}"), WAIT, context, || async {
            let csr = csrs.get_opt(&name).await.ok().flatten()?;
            let status = csr.status.clone()?;
            let decided = status.conditions.iter().flatten().any(|c| c.type_ == *decision);
            // An approved request is only done once kube-controller-manager has signed it.
            let done = *decision != "Approved" || status.certificate.is_some();
            (decided && done).then_some(csr)
        })
        .await;
        let requester = csr.spec.username.clone().unwrap_or_default();
        eprintln!("CSR {name}: requester {requester}, csr-user {annotated}: {decision}");
        if *suffix == "impostor" {
            assert_eq!(requester, "system:serviceaccount:default:mallory");
        } else {
            assert_eq!(requester, names::GRPC_SERVER_REQUESTER);
        }
    }
}

/// A PEM certificate request for the add-on's agent on `CLUSTER`, as the klusterlet makes it: CN the
/// agent user, O both add-on groups. rcgen keeps one value per attribute type, so the second
/// organization goes in under its OID (2.5.4.10) spelled as a custom type.
fn certificate_request() -> Vec<u8> {
    let mut subject = DistinguishedName::new();
    subject.push(
        DnType::OrganizationName,
        names::cluster_addon_group(CLUSTER, ADDON),
    );
    subject.push(DnType::CustomDnType(vec![2, 5, 4, 10]), names::addon_group(ADDON));
    subject.push(DnType::CommonName, names::agent_user(CLUSTER, ADDON));
    let mut params = CertificateParams::default();
    params.distinguished_name = subject;
    let key = KeyPair::generate().expect("a key");
    let request = params.serialize_request(&key).expect("a certificate request");
    request.pem().expect("PEM").into_bytes()
}

/// The agent binary, built now: cargo decides whether it is up to date (a binary left from before
/// a feature change would not reach the hub through a proxy).
fn agent_binary() -> PathBuf {
    addon::workspace_binary("ocm-score-agent").expect("the agent binary")
}

fn base64(bytes: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// A minimal HTTP CONNECT proxy on 127.0.0.1 that records each tunnel's target.
async fn connect_proxy() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy port");
    let port = listener.local_addr().expect("address").port();
    let tunnels = Arc::new(Mutex::new(Vec::new()));
    let seen = tunnels.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let _ = tunnel(client, seen).await;
            });
        }
    });
    (port, tunnels)
}

async fn tunnel(mut client: TcpStream, seen: Arc<Mutex<Vec<String>>>) -> std::io::Result<()> {
    // The request head ends with an empty line; a CONNECT carries no body.
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 8192 {
        if client.read(&mut byte).await? == 0 {
            return Ok(());
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let mut words = head.split_whitespace();
    let (Some("CONNECT"), Some(target)) = (words.next(), words.next()) else {
        client
            .write_all(b"HTTP/1.1 405 Method Not Allowed\r\ncontent-length: 0\r\n\r\n")
            .await?;
        return Ok(());
    };
    let mut upstream = TcpStream::connect(target).await?;
    if let Ok(mut seen) = seen.lock() {
        seen.push(target.to_owned());
    }
    client
        .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
        .await?;
    tokio::io::copy_bidirectional(&mut client, &mut upstream).await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_waits_for_our_controller_and_the_agent_works_through_a_proxy() {
    let cp = start_control_plane().await;
    let hub = cp.hub_client().await.expect("hub client");
    let dir = TempDir::new("addon-real-upstream");
    let install_namespace = names::DEFAULT_INSTALL_NAMESPACE;
    // cluster1 is the hub itself: its agent pods are admitted by the same API server.
    kubectl(
        &cp.hub_kubeconfig(),
        &[
            "label",
            "--overwrite",
            "namespace",
            install_namespace,
            "pod-security.kubernetes.io/enforce=restricted",
        ],
    );

    // An add-on as earlier builds left it: with the cleanup finalizer.
    let mcas = raw::<ManagedClusterAddOn>(&hub, Some(CLUSTER));
    let manager = install_and_start_manager(&cp, dir.path(), async || {
        let cma = Api::<ClusterManagementAddOn>::all(hub.clone())
            .get(ADDON)
            .await
            .expect("the ClusterManagementAddOn");
        let legacy: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
            "metadata": {"name": ADDON, "namespace": CLUSTER,
                         "finalizers": [names::LEGACY_CLEANUP_FINALIZER],
                         "ownerReferences": [{"apiVersion": "addon.open-cluster-management.io/v1alpha1",
                             "kind": "ClusterManagementAddOn", "name": ADDON,
                             "uid": cma.metadata.uid, "controller": true}]},
            "spec": {},
        }))
        .expect("an add-on");
        // OCM's addon-manager, which runs the shipped install strategy, may have created the add-on
        // already: then the finalizer is added to it.
        match mcas.create(&PostParams::default(), &legacy).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 => {
                let finalizer = json!({"metadata": {"finalizers": [names::LEGACY_CLEANUP_FINALIZER]}});
                mcas.patch(ADDON, &PatchParams::default(), &Patch::Merge(&finalizer))
                    .await
                    .expect("the legacy finalizer on OCM's add-on");
            }
            Err(e) => panic!("the legacy add-on: {e}"),
        }
    })
    .await;
    let context = || manager.tail();
    let addon = eventually("the legacy finalizer removed", WAIT, context, || async {
        let addon = get(&mcas, ADDON).await?;
        let legacy = addon["metadata"]["finalizers"]
            .to_string()
            .contains(names::LEGACY_CLEANUP_FINALIZER);
        (!legacy).then_some(addon)
    })
    .await;
    let addon_uid = addon["metadata"]["uid"].as_str().expect("uid").to_owned();

    // The install's pods pass PodSecurity `restricted`: the controller's in ocm-score, the agent's
    // (applied by OCM's work agent) in the install namespace. Pods exist only once admitted.
    for (namespace, name) in [
        (HUB_NAMESPACE, "ocm-score-addon-manager".to_owned()),
        (install_namespace, names::agent_name(ADDON)),
    ] {
        let pods = Api::<Pod>::namespaced(hub.clone(), namespace);
        let selector = format!("app.kubernetes.io/name={name}");
        let pod = eventually(
            &format!("a pod of {namespace}/{name} admitted"),
            WAIT,
            context,
            || async {
                pods.list(&ListParams::default().labels(&selector))
                    .await
                    .ok()?
                    .items
                    .into_iter()
                    .next()
            },
        )
        .await;
        let spec = pod.spec.expect("pod spec");
        assert_eq!(
            spec.containers[0].image.as_deref(),
            Some("localhost/ocm-score:0.1.0"),
            "{namespace}/{name} runs the shipped image"
        );
    }

    // The agent, run as its Deployment says, reaching the hub only through a CONNECT proxy named by
    // `proxy-url` in the kubeconfig OCM's registration agent wrote.
    let secret = eventually("the agent's hub kubeconfig", WAIT, context, || async {
        let secret = Api::<Secret>::namespaced(hub.clone(), install_namespace)
            .get_opt(&names::hub_kubeconfig_secret(ADDON))
            .await
            .ok()
            .flatten()?;
        secret.data.filter(|d| d.contains_key("tls.crt"))
    })
    .await;
    let (proxy_port, tunnels) = connect_proxy().await;
    let mount = dir.path().join("hub-kubeconfig");
    std::fs::create_dir_all(&mount).expect("mount dir");
    for (key, value) in &secret {
        let mut bytes = value.0.clone();
        if key == "kubeconfig" {
            let mut kubeconfig: Value = serde_norway::from_slice(&bytes).expect("a kubeconfig");
            for cluster in kubeconfig["clusters"].as_array_mut().expect("clusters") {
                cluster["cluster"]["proxy-url"] = format!("http://127.0.0.1:{proxy_port}").into();
            }
            bytes = serde_norway::to_string(&kubeconfig).expect("YAML").into_bytes();
        }
        std::fs::write(mount.join(key), bytes).expect("a key of the secret");
    }
    let deployment = Api::<Deployment>::namespaced(hub.clone(), install_namespace)
        .get(&names::agent_name(ADDON))
        .await
        .expect("the agent Deployment");
    let container = deployment
        .spec
        .expect("spec")
        .template
        .spec
        .expect("pod")
        .containers[0]
        .clone();
    let managed_kubeconfig = dir.path().join("managed.kubeconfig");
    cp.write_service_account_kubeconfig(
        CLUSTER,
        install_namespace,
        &names::agent_name(ADDON),
        Duration::from_secs(3600),
        &managed_kubeconfig,
    )
    .await
    .expect("the agent's identity on its cluster");
    let args: Vec<String> = container
        .args
        .unwrap_or_default()
        .into_iter()
        .map(|a| {
            if a.starts_with("--hub-kubeconfig=") {
                format!("--hub-kubeconfig={}", mount.join("kubeconfig").display())
            } else if a.starts_with("--metrics-bind-address=") {
                "--metrics-bind-address=127.0.0.1:0".to_owned()
            } else {
                a
            }
        })
        .chain([format!("--managed-kubeconfig={}", managed_kubeconfig.display())])
        .collect();
    let mut agent = Component::spawn(
        "ocm-score-agent",
        Tier::Client,
        &agent_binary(),
        &args,
        &[("RUST_LOG", "info,kube=warn".into()), ("NO_COLOR", "1".into())],
        dir.path(),
    )
    .expect("the agent starts");
    let scores = raw::<AddOnPlacementScore>(&hub, Some(CLUSTER));
    let score = eventually(
        "the score published through the proxy, and adopted",
        WAIT,
        || format!("{}\n--- agent:\n{}", manager.tail(), agent.tail()),
        || async {
            let score = get(&scores, well_known_score()).await?;
            let owned = score["metadata"]["ownerReferences"]
                .as_array()?
                .iter()
                .any(|o| o["kind"] == "ManagedClusterAddOn" && o["uid"] == addon_uid.as_str());
            (score.pointer("/status/scores").is_some() && owned).then_some(score)
        },
    )
    .await;
    let hub_address = cp
        .hub_server()
        .trim_start_matches("https://")
        .trim_end_matches('/')
        .to_owned();
    let through_proxy = tunnels.lock().map(|t| t.clone()).unwrap_or_default();
    assert!(
        through_proxy.contains(&hub_address),
        "the agent's hub connections went through the proxy: {through_proxy:?} (hub {hub_address}); score {score}"
    );

    // Uninstall with our controller gone: the garbage collector alone removes everything.
    agent.terminate();
    agent.wait_or_kill(Duration::from_secs(10));
    drop(manager);
    kubectl(
        &cp.hub_kubeconfig(),
        &["delete", "clustermanagementaddon", ADDON, "--wait=false"],
    );
    let works = raw::<ManifestWork>(&hub, Some(CLUSTER));
    let role_name = names::hub_role_name(ADDON);
    let roles = Api::<k8s_openapi::api::rbac::v1::Role>::namespaced(hub.clone(), CLUSTER);
    let bindings = Api::<k8s_openapi::api::rbac::v1::RoleBinding>::namespaced(hub.clone(), CLUSTER);
    eventually(
        "add-on, work, hub Role and RoleBinding and score gone",
        WAIT,
        || cp.log_tail("hub-kube-controller-manager", 20),
        || async {
            let gone = get(&mcas, ADDON).await.is_none()
                && get(&works, &names::deploy_work_name(ADDON)).await.is_none()
                && roles.get_opt(&role_name).await.ok()?.is_none()
                && bindings.get_opt(&role_name).await.ok()?.is_none()
                && get(&scores, well_known_score()).await.is_none();
            gone.then_some(())
        },
    )
    .await;
}

fn well_known_score() -> &'static str {
    ocm_score_api::well_known::RESOURCE_USAGE_SCORE
}
