//! `ocm-score-hub addon-manager` as a process against the API server double, RBAC on, with exactly
//! the permissions of `manifests/hub/`: what appears on the hub for each cluster, and how it changes.

mod addon_common;

use addon_common::*;
use kube::api::{Api, Patch, PatchParams, PostParams};
use ocm_score_api::{AddOnPlacementScore, AddOnPlacementScoreItem, AddOnPlacementScoreStatus, ObjectMeta};
use ocm_score_hub::addon::agent::spec_hash::spec_hash;
use serde_json::{Value, json};
use std::time::Duration;

fn condition<'a>(object: &'a Value, type_: &str) -> Option<&'a Value> {
    object["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

fn condition_is(object: &Value, type_: &str, status: &str) -> bool {
    condition(object, type_).is_some_and(|c| c["status"] == status)
}

fn agent_groups(cluster: &str) -> Vec<String> {
    vec![
        format!("system:open-cluster-management:cluster:{cluster}:addon:{ADDON}"),
        format!("system:open-cluster-management:addon:{ADDON}"),
        "system:authenticated".to_string(),
    ]
}

fn agent_user(cluster: &str) -> String {
    format!("system:open-cluster-management:cluster:{cluster}:addon:{ADDON}:agent:{ADDON}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_clusters_get_registration_rbac_and_work_as_the_contract_says() {
    let hub = Hub::start().await;
    let clusters = ["c1", "c2", "c3"];
    for c in clusters {
        hub.add_cluster(c);
    }
    hub.decide(&clusters).await;
    let controller = hub.controller("replica-a", &["--health-check=deployment-availability"]);
    for c in clusters {
        controller
            .wait_for(&format!("the work of {c}"), || hub.work(c))
            .await;
        controller
            .wait_for(&format!("RegistrationApplied on {c}"), || {
                hub.addon(c)
                    .filter(|a| condition_is(a, "RegistrationApplied", "True"))
            })
            .await;
    }
    let cma_uid = hub.cma().expect("cma")["metadata"]["uid"].clone();
    // WorkloadShapes are cluster-scoped: one ClusterRole reading them and nothing else, bound to
    // exactly the three agents' identities, both owned by the ClusterManagementAddOn.
    let readers = controller
        .wait_for("the agents' read access to WorkloadShapes", || {
            let readers = hub.shapes_readers();
            (readers.len() == 6).then_some(readers)
        })
        .await;
    let mut expected: Vec<String> = clusters
        .iter()
        .flat_map(|c| {
            [
                format!("Group:system:open-cluster-management:cluster:{c}:addon:{ADDON}"),
                format!("User:{}", agent_user(c)),
            ]
        })
        .collect();
    expected.sort();
    assert_eq!(readers, expected);
    let (shapes_role, shapes_binding) = hub.shapes_rbac();
    let (shapes_role, shapes_binding) = (shapes_role.expect("role"), shapes_binding.expect("binding"));
    assert_eq!(
        shapes_role["rules"],
        json!([{"apiGroups": ["tiering.ocm-score.io"], "resources": ["workloadshapes"], "verbs": ["get", "list", "watch"]}])
    );
    assert_eq!(shapes_binding["roleRef"]["name"], shapes_role["metadata"]["name"]);
    for object in [&shapes_role, &shapes_binding] {
        assert_eq!(
            object["metadata"]["ownerReferences"][0]["kind"],
            "ClusterManagementAddOn"
        );
        assert_eq!(object["metadata"]["ownerReferences"][0]["uid"], cma_uid);
    }
    let config_hash = spec_hash(&hub.config());
    let hash_key = format!("addondeploymentconfigs.addon.open-cluster-management.io/{NAMESPACE}/{ADDON}");

    for c in clusters {
        let addon = hub.addon(c).expect("add-on");
        // Created by the install strategy, owned by the ClusterManagementAddOn, and with no finalizer:
        // owner references do the cleanup, so nothing waits for our controller.
        let owners = addon["metadata"]["ownerReferences"].as_array().expect("owners");
        assert!(
            owners
                .iter()
                .any(|o| o["kind"] == "ClusterManagementAddOn" && o["uid"] == cma_uid),
            "{addon}"
        );
        assert_eq!(
            addon["metadata"]["finalizers"],
            Value::Null,
            "{addon}\nrequests on {c}'s add-on: {:?}\ncontroller log:\n{}",
            hub.server
                .requests()
                .into_iter()
                .filter(|r| r.resource == "managedclusteraddons" && r.namespace == c)
                .map(|r| format!(
                    "{} {} {}/{} {}",
                    r.user, r.verb, r.resource, r.subresource, r.code
                ))
                .collect::<Vec<_>>(),
            controller.tail()
        );
        // Registration: the exact subject and both groups.
        let status = &addon["status"];
        assert_eq!(
            status["registrations"],
            json!([{"signerName": "kubernetes.io/kube-apiserver-client", "subject": {
                "user": agent_user(c),
                "groups": [format!("system:open-cluster-management:cluster:{c}:addon:{ADDON}"),
                           format!("system:open-cluster-management:addon:{ADDON}")]}}])
        );
        assert_eq!(status["namespace"], "open-cluster-management-agent-addon");
        assert_eq!(status["healthCheck"]["mode"], "Customized");
        assert_eq!(
            status["supportedConfigs"],
            json!([{"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs"}])
        );
        let reference = &status["configReferences"][0];
        assert_eq!(
            (&reference["name"], &reference["namespace"]),
            (&json!(ADDON), &json!(NAMESPACE))
        );
        assert_eq!(reference["desiredConfig"]["specHash"], config_hash);
        assert!(condition_is(&addon, "Configured", "True"), "{addon}");

        // Hub RBAC: scores in this namespace only, bound to this cluster's agent identity.
        let role = hub.role(c).expect("role");
        assert_eq!(
            role["rules"],
            json!([
                {"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["addonplacementscores"],
                 "verbs": ["get", "list", "watch", "create", "update", "patch"]},
                {"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["addonplacementscores/status"],
                 "verbs": ["update", "patch"]}
            ])
        );
        let binding = hub.role_binding(c).expect("role binding");
        let subjects: Vec<(String, String)> = binding["subjects"]
            .as_array()
            .expect("subjects")
            .iter()
            .map(|s| {
                (
                    s["kind"].as_str().unwrap_or_default().into(),
                    s["name"].as_str().unwrap_or_default().into(),
                )
            })
            .collect();
        assert_eq!(
            subjects,
            vec![
                ("User".to_string(), agent_user(c)),
                (
                    "Group".to_string(),
                    format!("system:open-cluster-management:cluster:{c}:addon:{ADDON}")
                ),
            ]
        );
        for object in [&role, &binding] {
            assert_eq!(
                object["metadata"]["ownerReferences"][0]["kind"],
                "ManagedClusterAddOn"
            );
            assert_eq!(
                object["metadata"]["ownerReferences"][0]["uid"],
                addon["metadata"]["uid"]
            );
        }

        // The ManifestWork as addon-framework builds it.
        let work = hub.work(c).expect("work");
        let meta = &work["metadata"];
        assert_eq!(meta["labels"]["open-cluster-management.io/addon-name"], ADDON);
        assert_eq!(
            meta["annotations"]["open-cluster-management.io/config-spec-hash"],
            format!("{{\"{hash_key}\":\"{config_hash}\"}}")
        );
        assert_eq!(
            meta["ownerReferences"],
            json!([{"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
                    "name": ADDON, "uid": addon["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true}])
        );
        assert_eq!(
            work["spec"]["deleteOption"]["propagationPolicy"],
            "SelectivelyOrphan"
        );
        let kinds: Vec<&str> = work["spec"]["workload"]["manifests"]
            .as_array()
            .expect("manifests")
            .iter()
            .filter_map(|m| m["kind"].as_str())
            .collect();
        assert_eq!(
            kinds,
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
        let deployment = &work["spec"]["workload"]["manifests"][6];
        let container = &deployment["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(container["image"], AGENT_IMAGE);
        let args: Vec<&str> = container["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(args.contains(&format!("--cluster-name={c}").as_str()), "{args:?}");
        // The shipped configuration renews at every refresh: no validity of its own.
        assert!(
            args.contains(&"--refresh-interval=60s") && !args.iter().any(|a| a.starts_with("--validity")),
            "{args:?}"
        );
    }

    // The work agent reports: ManifestApplied and Available follow, and the config counts as applied.
    for c in clusters {
        hub.report_work_applied(c, 1).await;
    }
    for c in clusters {
        let addon = controller
            .wait_for(&format!("ManifestApplied and Available on {c}"), || {
                hub.addon(c).filter(|a| {
                    condition_is(a, "ManifestApplied", "True") && condition_is(a, "Available", "True")
                })
            })
            .await;
        assert_eq!(
            addon["status"]["configReferences"][0]["lastAppliedConfig"]["specHash"],
            config_hash
        );
    }

    // The agent's hub identity may publish its own cluster's score and nothing else.
    let agent = hub.server.client_for(
        &agent_user("c1"),
        &agent_groups("c1").iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let own: Api<AddOnPlacementScore> = Api::namespaced(agent.clone(), "c1");
    let score = AddOnPlacementScore {
        metadata: ObjectMeta {
            name: Some("resource-usage-score".into()),
            ..Default::default()
        },
        status: None,
    };
    own.create(&PostParams::default(), &score)
        .await
        .expect("the agent creates its score");
    // A patch, not a replace: the manager may add its owner reference in between (a new
    // resourceVersion), which the agent's own writes never depend on either.
    let status = AddOnPlacementScoreStatus {
        scores: vec![AddOnPlacementScoreItem {
            name: "cpuNodeAvailable".into(),
            value: 42,
        }],
        ..Default::default()
    };
    own.patch_status(
        "resource-usage-score",
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "status": status })),
    )
    .await
    .expect("and writes its status");
    let other: Api<AddOnPlacementScore> = Api::namespaced(agent, "c2");
    let refused = other
        .create(&PostParams::default(), &score)
        .await
        .expect_err("another cluster's namespace");
    assert!(
        matches!(&refused, kube::Error::Api(s) if s.code == 403),
        "{refused:?}"
    );

    assert!(
        hub.forbidden().is_empty(),
        "the manifests' RBAC refused the controller: {:?}",
        hub.forbidden()
    );
    assert_eq!(controller.terminate().await, 0);
}

/// Files a CSR for the add-on of `cluster` as `requester` (a klusterlet identity), with `pem` as the
/// request. The test PEMs were made with Python's `cryptography` (real ECDSA-signed requests; the
/// subject strings are longer than OpenSSL's 64-character limit, as OCM's are).
async fn file_csr(hub: &Hub, requester: &str, requester_groups: &[&str], cluster: &str, pem: &str) -> String {
    use base64::Engine as _;
    let client = hub.server.client_for(requester, requester_groups);
    let api: Api<k8s_openapi::api::certificates::v1::CertificateSigningRequest> = Api::all(client);
    let csr = serde_json::from_value(json!({
        "apiVersion": "certificates.k8s.io/v1", "kind": "CertificateSigningRequest",
        "metadata": {"generateName": format!("addon-{cluster}-{ADDON}-"),
                     "labels": {"open-cluster-management.io/cluster-name": cluster,
                                "open-cluster-management.io/addon-name": ADDON}},
        "spec": {"signerName": "kubernetes.io/kube-apiserver-client",
                 "request": base64::engine::general_purpose::STANDARD.encode(pem),
                 "usages": ["digital signature", "key encipherment", "client auth"]}
    }))
    .expect("a CSR");
    let created = api
        .create(&PostParams::default(), &csr)
        .await
        .expect("filing the CSR");
    created.metadata.name.expect("a generated name")
}

fn csr_decision(hub: &Hub, name: &str) -> Option<(String, String)> {
    let csr = hub.object(
        &ocm_score_kube_double::Gvr::new("certificates.k8s.io", "v1", "certificatesigningrequests"),
        "",
        name,
    )?;
    let c = csr["status"]["conditions"].as_array()?.first()?.clone();
    Some((
        c["type"].as_str()?.to_string(),
        c["message"].as_str().unwrap_or_default().to_string(),
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_klusterlet_csr_is_approved_and_a_forged_one_denied() {
    let hub = Hub::start().await;
    for c in ["c1", "c2"] {
        hub.add_cluster(c);
    }
    hub.decide(&["c1", "c2"]).await;
    let controller = hub.controller("replica-a", &[]);
    controller
        .wait_for("both add-ons", || hub.addon("c1").and(hub.addon("c2")))
        .await;
    let c1_pem = include_str!("testdata/addon-csr-c1.pem");
    let c2_pem = include_str!("testdata/addon-csr-c2.pem");
    let klusterlet = |c: &str| format!("system:open-cluster-management:{c}:x7k2p");
    let groups = |c: &str| {
        vec![
            format!("system:open-cluster-management:{c}"),
            "system:authenticated".to_string(),
        ]
    };
    let g1 = groups("c1");
    let g2 = groups("c2");
    let g1: Vec<&str> = g1.iter().map(String::as_str).collect();
    let g2: Vec<&str> = g2.iter().map(String::as_str).collect();

    // c1's klusterlet asks for c1's agent: approved.
    let genuine = file_csr(&hub, &klusterlet("c1"), &g1, "c1", c1_pem).await;
    // c2's klusterlet asks, labelled and subjected as c1: denied, naming the requester.
    let forged = file_csr(&hub, &klusterlet("c2"), &g2, "c1", c1_pem).await;
    // c1's klusterlet asks for a certificate of c2's agent: denied, naming the common name.
    let wrong_subject = file_csr(&hub, &klusterlet("c1"), &g1, "c1", c2_pem).await;

    let (kind, _) = controller
        .wait_for("the genuine CSR decided", || csr_decision(&hub, &genuine))
        .await;
    assert_eq!(kind, "Approved");
    let (kind, message) = controller
        .wait_for("the forged CSR decided", || csr_decision(&hub, &forged))
        .await;
    assert_eq!(kind, "Denied");
    assert!(
        message.contains("system:open-cluster-management:c2:x7k2p"),
        "{message}"
    );
    let (kind, message) = controller
        .wait_for("the mismatched CSR decided", || {
            csr_decision(&hub, &wrong_subject)
        })
        .await;
    assert_eq!(kind, "Denied");
    assert!(message.contains("common name"), "{message}");
    assert!(hub.forbidden().is_empty(), "{:?}", hub.forbidden());
    assert_eq!(controller.terminate().await, 0);
}

async fn set_variables(hub: &Hub, variables: &[(&str, &str)]) {
    let api: Api<ocm_score_api::AddOnDeploymentConfig> = Api::namespaced(hub.admin.clone(), NAMESPACE);
    let vars: Vec<Value> = variables
        .iter()
        .map(|(n, v)| json!({"name": n, "value": v}))
        .collect();
    let patch = json!({"spec": {"customizedVariables": vars}});
    api.patch(
        ADDON,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .expect("changing the config");
}

fn agent_args(work: &Value) -> Vec<String> {
    work["spec"]["workload"]["manifests"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["kind"] == "Deployment")
        .and_then(|d| {
            d["spec"]["template"]["spec"]["containers"][0]["args"]
                .as_array()
                .cloned()
        })
        .unwrap_or_default()
        .iter()
        .filter_map(|a| a.as_str().map(str::to_string))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_config_change_rolls_the_work_and_a_bad_one_keeps_the_last_good() {
    let hub = Hub::start().await;
    for c in ["c1", "c2"] {
        hub.add_cluster(c);
    }
    hub.decide(&["c1", "c2"]).await;
    let controller = hub.controller("replica-a", &[]);
    for c in ["c1", "c2"] {
        controller.wait_for("the work", || hub.work(c)).await;
    }

    set_variables(
        &hub,
        &[
            ("SOURCES", "cluster,kubelet"),
            ("REFRESH_INTERVAL", "30s"),
            ("SCORE_VALIDITY", "2m"),
        ],
    )
    .await;
    let hash = spec_hash(&hub.config());
    for c in ["c1", "c2"] {
        let work = controller
            .wait_for(&format!("the rolled work of {c}"), || {
                hub.work(c)
                    .filter(|w| agent_args(w).contains(&"--refresh-interval=30s".to_string()))
            })
            .await;
        let args = agent_args(&work);
        assert!(
            args.contains(&"--source=cluster,kubelet".to_string())
                && args.contains(&"--validity=2m".to_string()),
            "{args:?}"
        );
        let annotation = work["metadata"]["annotations"]["open-cluster-management.io/config-spec-hash"]
            .as_str()
            .unwrap_or_default();
        assert!(annotation.contains(&hash), "{annotation} vs {hash}");
        // The kubelet source brings nodes/proxy into the agent's managed-cluster role.
        let cluster_role = work["spec"]["workload"]["manifests"]
            .as_array()
            .expect("manifests")
            .iter()
            .find(|m| m["kind"] == "ClusterRole")
            .cloned()
            .expect("cluster role");
        assert!(
            cluster_role["rules"].to_string().contains("nodes/proxy"),
            "{cluster_role}"
        );
    }

    let good: Vec<Value> = ["c1", "c2"].iter().map(|c| hub.work(c).expect("work")).collect();
    set_variables(
        &hub,
        &[
            ("SOURCES", "cluster,kubelet"),
            ("REFRESH_INTERVAL", "30s"),
            ("SCORE_VALIDITY", "20s"),
        ],
    )
    .await;
    for (c, before) in ["c1", "c2"].iter().zip(&good) {
        let addon = controller
            .wait_for(&format!("Configured=False on {c}"), || {
                hub.addon(c).filter(|a| condition_is(a, "Configured", "False"))
            })
            .await;
        let message = condition(&addon, "Configured").expect("condition")["message"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        assert!(
            message.contains("SCORE_VALIDITY") && message.contains("20s"),
            "{message}"
        );
        // The desired hash moved, the work did not: the last good agent keeps running.
        assert_eq!(
            addon["status"]["configReferences"][0]["desiredConfig"]["specHash"],
            spec_hash(&hub.config())
        );
        let after = hub.work(c).expect("work");
        assert_eq!(
            after["metadata"]["resourceVersion"], before["metadata"]["resourceVersion"],
            "the work was rewritten"
        );
    }
    let (_, metrics) = controller.get("/metrics").await;
    assert!(metrics.contains("ocm_score_addon_config_invalid 2"), "{metrics}");

    // Fixing the config rolls again and clears the condition.
    set_variables(&hub, &[("REFRESH_INTERVAL", "30s")]).await;
    for c in ["c1", "c2"] {
        controller
            .wait_for("Configured=True again", || {
                hub.addon(c).filter(|a| condition_is(a, "Configured", "True"))
            })
            .await;
        let work = hub.work(c).expect("work");
        assert!(
            !agent_args(&work).iter().any(|a| a.starts_with("--validity")),
            "{:?}",
            agent_args(&work)
        );
    }
    assert!(hub.forbidden().is_empty(), "{:?}", hub.forbidden());
    assert_eq!(controller.terminate().await, 0);
}

fn score_object(hub: &Hub, cluster: &str) -> Option<Value> {
    hub.object(
        &addon_common::gvr::<AddOnPlacementScore>(),
        cluster,
        "resource-usage-score",
    )
}

/// As the agent does: creates the score object, then writes its status.
async fn publish_score(hub: &Hub, cluster: &str) {
    let groups = agent_groups(cluster);
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    let agent = hub.server.client_for(&agent_user(cluster), &groups);
    let api: Api<AddOnPlacementScore> = Api::namespaced(agent, cluster);
    let score = AddOnPlacementScore {
        metadata: ObjectMeta {
            name: Some("resource-usage-score".into()),
            ..Default::default()
        },
        status: None,
    };
    api.create(&PostParams::default(), &score)
        .await
        .expect("the agent publishes");
    let status = AddOnPlacementScoreStatus {
        scores: vec![AddOnPlacementScoreItem {
            name: "cpuNodeAvailable".into(),
            value: 42,
        }],
        ..Default::default()
    };
    api.patch_status(
        "resource-usage-score",
        &PatchParams::default(),
        &Patch::Merge(json!({ "status": status })),
    )
    .await
    .expect("and writes its status");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn removal_cleans_up_the_work_rbac_and_score() {
    let hub = Hub::start().await;
    let clusters = ["c1", "c2", "c3"];
    for c in clusters {
        hub.add_cluster(c);
    }
    hub.decide(&clusters).await;
    let grace = Duration::from_secs(10);
    let controller = hub.controller("replica-a", &["--install-removal-grace=10s"]);
    for c in clusters {
        controller
            .wait_for("the work and RBAC", || hub.work(c).and(hub.role_binding(c)))
            .await;
        publish_score(&hub, c).await;
    }

    // c3 leaves the placement and comes back within the grace (OCM rewriting its decisions):
    // nothing of it goes.
    let said = |what: &'static str| {
        let controller = &controller;
        move || {
            controller
                .logs()
                .into_iter()
                .find(|l| l.contains(what) && l.contains("cluster=c3"))
        }
    };
    // What c3 has before it leaves: the same objects (not new ones of the same name) must be there
    // after it comes back.
    let c3_objects = || {
        let uid = |object: Option<Value>| object.map(|o| o["metadata"]["uid"].clone());
        (
            uid(hub.addon("c3")),
            uid(hub.work("c3")),
            uid(hub.role("c3")),
            uid(hub.role_binding("c3")),
            score_object(&hub, "c3").map(|o| (o["metadata"]["uid"].clone(), o["status"].clone())),
        )
    };
    let before = c3_objects();
    assert!(
        before.0.is_some()
            && before.1.is_some()
            && before.2.is_some()
            && before.3.is_some()
            && before
                .4
                .as_ref()
                .is_some_and(|(_, status)| status["scores"][0]["value"].is_i64()),
        "c3's add-on, work, RBAC and its score with the value it published: {before:?}"
    );
    hub.decide(&["c1", "c2"]).await;
    let left = std::time::Instant::now();
    controller
        .wait_for("c3 seen left out", said("no longer selects the cluster"))
        .await;
    hub.decide(&clusters).await;
    controller
        .wait_for("c3 seen selected again", said("selects the cluster again"))
        .await;
    // Out and back must take less than the grace, or this run shows nothing about it.
    let out_and_back = left.elapsed();
    assert!(
        out_and_back < grace,
        "c3 was out {out_and_back:?}, not less than the grace {grace:?}: too slow to test the grace"
    );
    assert_eq!(
        c3_objects(),
        before,
        "c3's add-on, work, RBAC or score were replaced while it was out for {out_and_back:?}, less than the grace"
    );
    // c3 leaves for good: after the grace its add-on, work, hub RBAC and score go; the others stay.
    hub.decide(&["c1", "c2"]).await;
    let left = std::time::Instant::now();
    controller
        .wait_for("c3 cleaned up", || {
            (hub.addon("c3").is_none()
                && hub.work("c3").is_none()
                && hub.role("c3").is_none()
                && hub.role_binding("c3").is_none()
                && score_object(&hub, "c3").is_none()
                && !hub.shapes_readers().iter().any(|s| s.contains(":cluster:c3:")))
            .then_some(())
        })
        .await;
    assert!(
        left.elapsed() >= grace,
        "c3 was removed {:?} after it left, before the grace",
        left.elapsed()
    );
    assert_eq!(
        hub.shapes_readers().len(),
        4,
        "c1's and c2's agents still read shapes"
    );
    for c in ["c1", "c2"] {
        assert!(
            hub.work(c).is_some() && score_object(&hub, c).is_some(),
            "{c} lost something"
        );
    }

    // Deleting the ClusterManagementAddOn removes everything of every cluster.
    let api: Api<ocm_score_api::ClusterManagementAddOn> = Api::all(hub.admin.clone());
    api.delete(ADDON, &Default::default())
        .await
        .expect("deleting the ClusterManagementAddOn");
    controller
        .wait_for("everything cleaned up", || {
            clusters
                .iter()
                .all(|c| {
                    hub.addon(c).is_none()
                        && hub.work(c).is_none()
                        && hub.role(c).is_none()
                        && hub.role_binding(c).is_none()
                        && score_object(&hub, c).is_none()
                })
                .then_some(())
                .filter(|()| hub.shapes_rbac() == (None, None))
        })
        .await;
    assert!(hub.forbidden().is_empty(), "{:?}", hub.forbidden());
    assert_eq!(controller.terminate().await, 0);
}

/// Requests that are `user`'s reads of the leader Lease, and all others.
fn lease_reads_and_the_rest(
    requests: Vec<ocm_score_kube_double::RequestRecord>,
) -> (usize, Vec<ocm_score_kube_double::RequestRecord>) {
    let (reads, rest): (Vec<_>, Vec<_>) = requests.into_iter().partition(|r| {
        r.verb == "get"
            && r.group == "coordination.k8s.io"
            && r.resource == "leases"
            && r.namespace == NAMESPACE
            && r.name == "ocm-score-addon-manager"
    });
    (reads.len(), rest)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_replica_stays_passive_until_the_first_stops() {
    let hub = Hub::start().await;
    for c in ["c1", "c2"] {
        hub.add_cluster(c);
    }
    hub.decide(&["c1", "c2"]).await;
    let first = hub.controller("replica-a", &[]);
    for c in ["c1", "c2"] {
        first.wait_for("the work", || hub.work(c)).await;
    }
    // The second replica has its own identity (and the same roles), so the server's request log
    // says which replica did what.
    let standby = hub.grant_controller_roles("ocm-score-addon-manager-standby");
    let second = hub.controller_as(&standby, "replica-b", &[]);
    second
        .wait_for("replica-b to stand by", || {
            second.logged("standing by").then_some(())
        })
        .await;

    // While the first leads, a change is handled by the first only.
    let mark = hub.request_mark();
    hub.add_cluster("c3");
    hub.decide(&["c1", "c2", "c3"]).await;
    first.wait_for("the work of c3", || hub.work("c3")).await;
    let c3_writers: Vec<String> = hub
        .server
        .requests()
        .into_iter()
        .skip(mark)
        .filter(|r| r.is_write() && r.namespace == "c3")
        .map(|r| r.user)
        .collect();
    assert!(
        !c3_writers.is_empty() && c3_writers.iter().all(|u| u == CONTROLLER_USER),
        "c3's objects are written by replica-a alone: {c3_writers:?}"
    );
    // The positive sign that the second saw the change happen and still decided to wait: it read
    // the Lease twice more after c3's work existed.
    let (reads_then, _) = lease_reads_and_the_rest(hub.requests_of_since(&standby, 0));
    second
        .wait_for("replica-b to check the Lease twice more", || {
            let (reads, _) = lease_reads_and_the_rest(hub.requests_of_since(&standby, 0));
            (reads >= reads_then + 2).then_some(())
        })
        .await;
    // Everything replica-b ever asked the server was the Lease: no watch, no read, no write.
    let (reads, rest) = lease_reads_and_the_rest(hub.requests_of_since(&standby, 0));
    assert!(reads >= 2, "replica-b polls the Lease");
    assert_eq!(rest, vec![], "a standby replica touches nothing but the Lease");
    assert!(!second.logged("became leader"), "{}", second.tail());
    let (code, metrics) = second.get("/metrics").await;
    assert_eq!(code, 200);
    assert!(metrics.contains("ocm_score_addon_leader 0"), "{metrics}");
    assert!(!metrics.contains("ocm_score_addon_writes_total{"), "{metrics}");
    assert_eq!(
        second.get("/readyz").await.0,
        200,
        "a standby replica is ready to take over"
    );
    let first_metrics = first.get("/metrics").await.1;
    assert!(
        first_metrics.contains("ocm_score_addon_leader 1"),
        "{first_metrics}"
    );

    // The first stops cleanly and releases the Lease: the second takes over at once and acts.
    assert_eq!(first.terminate().await, 0);
    second
        .wait_for("replica-b to lead", || {
            second.logged("became leader").then_some(())
        })
        .await;
    let mark = hub.request_mark();
    hub.add_cluster("c4");
    hub.decide(&["c1", "c2", "c3", "c4"]).await;
    second
        .wait_for("the work of c4, by replica-b", || hub.work("c4"))
        .await;
    // Every attempt to create c4's work is replica-b's, and one succeeded (a pass on a cache that
    // has not seen the new work yet may try again and get 409, which the controller handles).
    let work_creates: Vec<(String, u16)> = hub
        .server
        .requests()
        .into_iter()
        .skip(mark)
        .filter(|r| r.verb == "create" && r.resource == "manifestworks" && r.namespace == "c4")
        .map(|r| (r.user, r.code))
        .collect();
    assert!(
        work_creates.iter().all(|(user, _)| *user == standby),
        "{work_creates:?}"
    );
    assert_eq!(
        work_creates
            .iter()
            .filter(|(_, code)| (200..300).contains(code))
            .count(),
        1,
        "{work_creates:?}"
    );
    assert!(hub.forbidden().is_empty(), "{:?}", hub.forbidden());
    assert_eq!(second.terminate().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_with_nothing_changed_makes_zero_writes() {
    let hub = Hub::start().await;
    let clusters = ["c1", "c2", "c3"];
    for c in clusters {
        hub.add_cluster(c);
    }
    hub.decide(&clusters).await;
    let controller = hub.controller("replica-a", &["--health-check=deployment-availability"]);
    for c in clusters {
        controller.wait_for("the work", || hub.work(c)).await;
        hub.report_work_applied(c, 1).await;
    }
    for c in clusters {
        controller
            .wait_for("a settled add-on", || {
                hub.addon(c).filter(|a| {
                    condition_is(a, "Available", "True") && condition_is(a, "ManifestApplied", "True")
                })
            })
            .await;
    }
    assert_eq!(controller.terminate().await, 0);

    let mark = hub.request_mark();
    let restarted = hub.controller("replica-a", &["--health-check=deployment-availability"]);
    // The restarted process has made its first full pass when the install strategy and every
    // add-on have been reconciled once (there are no CSRs); a pass that wrote nothing triggers no
    // other.
    restarted.wait_reconciled("install", "", ADDON).await;
    for c in clusters {
        restarted.wait_reconciled("addon", c, ADDON).await;
    }
    let writes: Vec<_> = hub
        .controller_requests_since(mark)
        .into_iter()
        .filter(|r| r.is_write())
        .collect();
    assert!(
        writes.is_empty(),
        "a restart with nothing changed wrote: {writes:#?}"
    );
    let reads: Vec<_> = hub
        .controller_requests_since(mark)
        .into_iter()
        .filter(|r| r.verb == "get")
        .collect();
    assert!(
        reads.is_empty(),
        "everything should come from the watch caches: {reads:#?}"
    );
    assert_eq!(restarted.get("/readyz").await.0, 200);
    assert_eq!(restarted.terminate().await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_ocm_addon_manager_nothing_happens_before_the_owner_reference() {
    // No lifecycle annotation: OCM's addon-manager runs the install strategy and sets owner
    // references; we must not create add-ons, and must wait for the owner reference.
    let hub = Hub::start_with(|o| o["kind"] != "ClusterManagementAddOn").await;
    let mut cma = hub_manifests()
        .into_iter()
        .find(|o| o["kind"] == "ClusterManagementAddOn")
        .expect("cma");
    cma["metadata"]["annotations"] = json!({});
    let cma = hub.server.create(cma).expect("cma");
    for c in ["c1", "c2"] {
        hub.add_cluster(c);
    }
    hub.decide(&["c1", "c2"]).await;
    // An add-on made by hand (no owner reference yet), there before the controller starts, so that
    // its first passes see everything.
    let created = hub
        .server
        .create(
            json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
                       "metadata": {"name": ADDON, "namespace": "c1"}, "spec": {}}),
        )
        .expect("a hand-made add-on");
    let controller = hub.controller("replica-a", &[]);
    controller.wait_reconciled("install", "", ADDON).await;
    let pass = controller.wait_reconciled("addon", "c1", ADDON).await;
    let version = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default();
    assert!(
        pass.contains(&format!("resource_version=\"{version}\"")),
        "the pass saw the add-on as created ({version}): {pass}"
    );
    assert!(hub.addon("c2").is_none(), "the install strategy is OCM's here");
    assert!(
        hub.work("c1").is_none() && hub.role("c1").is_none(),
        "acted before the owner reference"
    );
    assert!(
        hub.controller_writes().is_empty(),
        "{:?}",
        hub.controller_writes()
    );

    // OCM's addon-manager sets the owner reference: now we register (the work waits for the config).
    let api: Api<ocm_score_api::ManagedClusterAddOn> = Api::namespaced(hub.admin.clone(), "c1");
    let patch = json!({"metadata": {"ownerReferences": [{"apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "ClusterManagementAddOn", "name": ADDON, "uid": cma["metadata"]["uid"], "controller": true}]}});
    api.patch(
        ADDON,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&patch),
    )
    .await
    .expect("owner");
    // OCM names the config before it knows its hash (ours, in the ClusterManagementAddOn's status)
    // and before this cluster's turn in its rollout: no work yet, and the add-on says why.
    let reference = |hash: &str| {
        json!({"group": "addon.open-cluster-management.io", "resource": "addondeploymentconfigs",
               "name": ADDON, "namespace": NAMESPACE,
               "desiredConfig": {"name": ADDON, "namespace": NAMESPACE, "specHash": hash}})
    };
    api.patch_status(
        ADDON,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&json!({"status": {"configReferences": [reference("")]}})),
    )
    .await
    .expect("config ref");
    let waiting = controller
        .wait_for("c1 waiting for OCM's rollout", || {
            hub.addon("c1").filter(|a| {
                condition(a, "ManifestApplied").is_some_and(|c| c["reason"] == "WaitingForConfiguration")
            })
        })
        .await;
    assert!(condition_is(&waiting, "ManifestApplied", "False"), "{waiting}");
    assert!(hub.work("c1").is_none(), "rendered before OCM configured c1");
    assert!(
        waiting["status"]["configReferences"][0]["desiredConfig"]["specHash"]
            .as_str()
            .is_none_or(str::is_empty),
        "the placement's config hash is OCM's to write: {waiting}"
    );
    // OCM's rollout reaches c1: the hash it copied from the ClusterManagementAddOn, Configured=True.
    let hash = spec_hash(&hub.config());
    let configured = json!({"status": {"configReferences": [reference(&hash)],
        "conditions": [{"type": "Configured", "status": "True", "reason": "ConfigurationsConfigured",
                        "message": "Configurations configured", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    api.patch_status(
        ADDON,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(&configured),
    )
    .await
    .expect("configured");
    controller
        .wait_for("the work of c1 with the config's spec hash", || {
            hub.work("c1").filter(|w| {
                w["metadata"]["annotations"]["open-cluster-management.io/config-spec-hash"]
                    .as_str()
                    .is_some_and(|a| a.contains(hash.as_str()))
            })
        })
        .await;
    let addon = controller
        .wait_for("the config marked valid", || {
            hub.addon("c1").filter(|a| condition(a, "Degraded").is_some())
        })
        .await;
    assert_eq!(
        addon["status"]["configReferences"][0]["desiredConfig"]["specHash"], hash,
        "{addon}"
    );
    assert!(
        condition_is(&addon, "Configured", "True"),
        "Configured is OCM's under its addon-manager, left as OCM wrote it: {addon}"
    );
    assert!(condition_is(&addon, "Degraded", "False"), "{addon}");
    assert!(hub.addon("c2").is_none());
    assert!(hub.forbidden().is_empty(), "{:?}", hub.forbidden());
    assert_eq!(controller.terminate().await, 0);
}

/// The real agent code (`ocm-score-agent once --source host --publish`), run with the hub identity
/// the registration gives cluster `c1`'s agent: it publishes c1's score, and is refused for c2.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agent_publishes_with_the_granted_identity_and_is_refused_elsewhere() {
    use clap::Parser;
    let hub = Hub::start().await;
    for c in ["c1", "c2"] {
        hub.add_cluster(c);
    }
    hub.decide(&["c1", "c2"]).await;
    let controller = hub.controller("replica-a", &[]);
    for c in ["c1", "c2"] {
        controller.wait_for("the hub RBAC", || hub.role_binding(c)).await;
    }
    let groups = agent_groups("c1");
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    let identity = hub.server.identity(&agent_user("c1"), &groups);
    let kubeconfig =
        std::env::temp_dir().join(format!("ocm-score-agent-e2e-{}.kubeconfig", std::process::id()));
    hub.server
        .write_kubeconfig(&identity, &kubeconfig)
        .expect("agent kubeconfig");
    let publish = |cluster: &str| {
        let argv = [
            "ocm-score-agent".to_string(),
            "once".into(),
            "--source=host".into(),
            "--publish".into(),
            format!("--hub-kubeconfig={}", kubeconfig.display()),
            format!("--cluster-name={cluster}"),
        ];
        let cli = ocm_score_agent::cli::Cli::try_parse_from(argv).expect("agent flags");
        let ocm_score_agent::cli::Command::Once(args) = cli.command else {
            panic!("not once")
        };
        let config = ocm_score_agent::config::OnceConfig::from_args(args).expect("agent config");
        ocm_score_agent::once::once(config)
    };
    publish("c1")
        .await
        .expect("the agent publishes its own cluster's score");
    let score = score_object(&hub, "c1").expect("the score object");
    assert!(score["status"]["validUntil"].is_string(), "{score}");
    assert!(
        score["status"]["scores"]
            .as_array()
            .is_some_and(|s| !s.is_empty()),
        "{score}"
    );
    let refused = publish("c2").await.expect_err("another cluster's namespace");
    assert!(
        refused.to_string().contains("403") || refused.to_string().contains("forbidden"),
        "{refused}"
    );
    assert!(score_object(&hub, "c2").is_none());

    // WorkloadShapes: the agent may read them, not write them; an identity of a cluster without the
    // add-on may not even read them.
    use ocm_score_api::WorkloadShape;
    controller
        .wait_for("the agents' read access to WorkloadShapes", || {
            (hub.shapes_readers().len() == 4).then_some(())
        })
        .await;
    let shapes: Api<WorkloadShape> = Api::all(hub.server.client(&identity));
    shapes
        .list(&Default::default())
        .await
        .expect("the agent lists WorkloadShapes");
    let shape: WorkloadShape = serde_json::from_value(json!({
        "apiVersion": "tiering.ocm-score.io/v1alpha1", "kind": "WorkloadShape",
        "metadata": {"name": "x"}, "spec": {}
    }))
    .expect("a shape");
    let created = shapes.create(&Default::default(), &shape).await;
    assert!(
        matches!(&created, Err(kube::Error::Api(s)) if s.code == 403),
        "{created:?}"
    );
    let other_groups = agent_groups("c9");
    let other_groups: Vec<&str> = other_groups.iter().map(String::as_str).collect();
    let stranger = hub.server.identity(&agent_user("c9"), &other_groups);
    let listed = Api::<WorkloadShape>::all(hub.server.client(&stranger))
        .list(&Default::default())
        .await;
    assert!(
        matches!(&listed, Err(kube::Error::Api(s)) if s.code == 403),
        "{listed:?}"
    );
    let _ = std::fs::remove_file(&kubeconfig);
    assert_eq!(controller.terminate().await, 0);
}

/// The managed-cluster side: the permissions the rendered work grants the agent's service account
/// are enough for the real agent to read the cluster (source `cluster`), and no more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rendered_agent_rbac_lets_the_agent_read_its_cluster_and_nothing_else() {
    use clap::Parser;
    use ocm_score_kube_double::ApiServer;
    let hub = Hub::start().await;
    hub.add_cluster("c1");
    hub.decide(&["c1"]).await;
    let controller = hub.controller("replica-a", &[]);
    let work = controller.wait_for("the work", || hub.work("c1")).await;
    controller
        .wait_for("the hub RBAC", || hub.role_binding("c1"))
        .await;

    // The managed cluster: what the work agent would apply, applied to a second API server.
    let managed = ApiServer::builder()
        .builtin_kinds()
        .rbac(true)
        .start()
        .await
        .expect("managed cluster");
    for manifest in work["spec"]["workload"]["manifests"]
        .as_array()
        .expect("manifests")
    {
        managed
            .create(manifest.clone())
            .unwrap_or_else(|e| panic!("applying {}: {e:?}", manifest["kind"]));
    }
    managed
        .create(
            json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                       "conditions": [{"type": "Ready", "status": "True"}]}}),
        )
        .expect("a node");
    let namespace = "open-cluster-management-agent-addon";
    let sa_user = format!("system:serviceaccount:{namespace}:{ADDON}-agent");
    let sa_groups = [
        "system:serviceaccounts",
        "system:serviceaccounts:open-cluster-management-agent-addon",
        "system:authenticated",
    ];
    let sa = managed.identity(&sa_user, &sa_groups);
    let dir = std::env::temp_dir().join(format!("ocm-score-agent-rbac-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let managed_kubeconfig = dir.join("managed.kubeconfig");
    managed
        .write_kubeconfig(&sa, &managed_kubeconfig)
        .expect("managed kubeconfig");
    let groups = agent_groups("c1");
    let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    let hub_kubeconfig = dir.join("hub.kubeconfig");
    hub.server
        .write_kubeconfig(&hub.server.identity(&agent_user("c1"), &groups), &hub_kubeconfig)
        .expect("hub kubeconfig");

    let argv = [
        "ocm-score-agent".to_string(),
        "once".into(),
        "--source=cluster".into(),
        "--publish".into(),
        format!("--managed-kubeconfig={}", managed_kubeconfig.display()),
        format!("--hub-kubeconfig={}", hub_kubeconfig.display()),
        "--cluster-name=c1".into(),
    ];
    let cli = ocm_score_agent::cli::Cli::try_parse_from(argv).expect("agent flags");
    let ocm_score_agent::cli::Command::Once(args) = cli.command else {
        panic!("not once")
    };
    let config = ocm_score_agent::config::OnceConfig::from_args(args).expect("agent config");
    ocm_score_agent::once::once(config)
        .await
        .expect("the agent reads its cluster and publishes");
    // One Ready node with 8 cores and 32 GiB allocatable and no pods, under the default bounds
    // (cpu: 0..100 cores, memory: 0..1024 GiB, devices: 0..20, truncated toward zero):
    // 8 cores → -100 + 200 × 8/100 = -84; 32 GiB → -100 + 200 × 32/1024 = -93.75 → -93; no
    // GPU or TPU → -100. The upstream names in upstream order, then the legacy ones.
    let score = score_object(&hub, "c1").expect("score");
    let published: Vec<(String, i64)> = score["status"]["scores"]
        .as_array()
        .expect("scores")
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap_or_default().to_string(),
                s["value"].as_i64().unwrap_or(i64::MIN),
            )
        })
        .collect();
    let expected: Vec<(String, i64)> = [
        ("cpuNodeAvailable", -84),
        ("cpuClusterAvailable", -84),
        ("memNodeAvailable", -93),
        ("memClusterAvailable", -93),
        ("gpuNodeAvailable", -100),
        ("gpuClusterAvailable", -100),
        ("tpuNodeAvailable", -100),
        ("tpuClusterAvailable", -100),
        ("cpuAvailable", -84),
        ("memAvailable", -93),
    ]
    .iter()
    .map(|(n, v)| (n.to_string(), *v))
    .collect();
    assert_eq!(published, expected, "{score}");

    // Nothing else: every verb on every resource and subresource the managed cluster serves, in the
    // agent's namespace, another namespace and cluster-wide, with and without an object name, is
    // allowed exactly where the agent needs it, beyond what any authenticated user may do.
    let allowed = allowed_requests(&managed, &sa_user, &sa_groups).await;
    let anyone = allowed_requests(&managed, "someone-else", &["system:authenticated"]).await;
    assert!(
        !anyone.is_empty() && anyone.iter().all(|a| a.1.ends_with("accessreviews")),
        "an authenticated user may only ask about its own access: {anyone:?}"
    );
    let mut expected = anyone.clone();
    for name in ["", ADDON] {
        for verb in ["get", "list", "watch"] {
            expected.insert(access("", "nodes", verb, "", name));
            for ns in ["", namespace, "default"] {
                expected.insert(access("", "pods", verb, ns, name));
            }
        }
        expected.insert(access("coordination.k8s.io", "leases", "create", namespace, name));
    }
    for verb in ["get", "update", "patch"] {
        expected.insert(access("coordination.k8s.io", "leases", verb, namespace, ADDON));
    }
    assert_eq!(
        allowed,
        expected,
        "allowed beyond the need: {:?}; needed but refused: {:?}",
        allowed.difference(&expected).collect::<Vec<_>>(),
        expected.difference(&allowed).collect::<Vec<_>>()
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(controller.terminate().await, 0);
}

/// (group, resource[/subresource], verb, namespace, name) of one access check; empty for none.
type Access = (String, String, String, String, String);

fn access(group: &str, resource: &str, verb: &str, namespace: &str, name: &str) -> Access {
    (
        group.into(),
        resource.into(),
        verb.into(),
        namespace.into(),
        name.into(),
    )
}

/// Every access `user` is granted on `server`, asked through SubjectAccessReviews over everything
/// the server's discovery lists: each resource and subresource, each verb, in the agent's
/// namespace, in `default` and cluster-wide, with no name and with the add-on's name.
async fn allowed_requests(
    server: &ocm_score_kube_double::ApiServer,
    user: &str,
    groups: &[&str],
) -> std::collections::BTreeSet<Access> {
    use futures::StreamExt;
    use k8s_openapi::api::authorization::v1::SubjectAccessReview;
    let admin = server.admin_client();
    let mut resources: Vec<(String, String, bool)> = Vec::new();
    let core = admin.list_core_api_resources("v1").await.expect("core discovery");
    resources.extend(
        core.resources
            .into_iter()
            .map(|r| (String::new(), r.name, r.namespaced)),
    );
    for group in admin.list_api_groups().await.expect("discovery").groups {
        for version in &group.versions {
            let list = admin
                .list_api_group_resources(&version.group_version)
                .await
                .expect("group discovery");
            resources.extend(
                list.resources
                    .into_iter()
                    .map(|r| (group.name.clone(), r.name, r.namespaced)),
            );
        }
    }
    resources.sort();
    resources.dedup();
    assert!(
        resources
            .iter()
            .any(|(g, r, _)| g.is_empty() && r == "pods/status"),
        "discovery lists subresources: {resources:?}"
    );
    let verbs = [
        "get",
        "list",
        "watch",
        "create",
        "update",
        "patch",
        "delete",
        "deletecollection",
    ];
    let namespace = "open-cluster-management-agent-addon";
    let mut checks = Vec::new();
    for (group, resource, namespaced) in &resources {
        let namespaces: &[&str] = if *namespaced {
            &["", namespace, "default"]
        } else {
            &[""]
        };
        for verb in verbs {
            for ns in namespaces {
                for name in ["", ADDON] {
                    checks.push(access(group, resource, verb, ns, name));
                }
            }
        }
    }
    let reviews: Api<SubjectAccessReview> = Api::all(admin);
    let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
    let answers: Vec<(Access, bool)> = futures::stream::iter(checks)
        .map(|check| {
            let reviews = reviews.clone();
            let groups = groups.clone();
            async move {
                let (resource, subresource) = check
                    .1
                    .split_once('/')
                    .map_or((check.1.as_str(), ""), |(r, s)| (r, s));
                let review: SubjectAccessReview = serde_json::from_value(json!({
                    "spec": {"user": user, "groups": groups, "resourceAttributes": {
                        "group": check.0, "resource": resource, "subresource": subresource,
                        "verb": check.2, "namespace": check.3, "name": check.4}}
                }))
                .expect("a SubjectAccessReview");
                let answer = reviews
                    .create(&PostParams::default(), &review)
                    .await
                    .expect("a review answer");
                let allowed = answer.status.is_some_and(|s| s.allowed);
                (check, allowed)
            }
        })
        .buffer_unordered(16)
        .collect()
        .await;
    answers
        .into_iter()
        .filter_map(|(check, allowed)| allowed.then_some(check))
        .collect()
}
