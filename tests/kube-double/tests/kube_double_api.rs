//! The API server double driven through the kube client: discovery, CRUD, concurrency, status
//! subresource, patches, server-side apply, selectors, pagination, validation, finalizers, GC.
#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::{
    Api, Client, Discovery, ResourceExt,
    api::{
        ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch, PatchParams,
        PostParams,
    },
};
use ocm_score_api::{AddOnPlacementScore, ManagedCluster};
use ocm_score_kube_double::{ApiServer, Gvr};
use serde_json::{Value, json};

async fn server() -> ApiServer {
    ApiServer::builder()
        .upstream_crds()
        .builtin_kinds()
        .start()
        .await
        .expect("server starts")
}

fn api_error(e: kube::Error) -> kube::core::Status {
    match e {
        kube::Error::Api(status) => *status,
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn config_map(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "data": data.iter().map(|(k, v)| (k.to_string(), json!(v))).collect::<serde_json::Map<_, _>>(),
    }))
    .unwrap()
}

fn score(name: &str, namespace: &str) -> AddOnPlacementScore {
    serde_json::from_value(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
        "kind": "AddOnPlacementScore",
        "metadata": {"name": name, "namespace": namespace},
    }))
    .unwrap()
}

async fn namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

#[tokio::test]
async fn discovery_and_version_work_for_kube() {
    let server = server().await;
    let client = server.admin_client();
    let version = client.apiserver_version().await.unwrap();
    assert_eq!((version.major.as_str(), version.minor.as_str()), ("1", "33"));

    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    let gvk = GroupVersionKind::gvk(
        "cluster.open-cluster-management.io",
        "v1alpha1",
        "AddOnPlacementScore",
    );
    let (resource, caps) = discovery
        .resolve_gvk(&gvk)
        .expect("AddOnPlacementScore discovered");
    assert_eq!(resource.plural, "addonplacementscores");
    assert_eq!(caps.scope, kube::discovery::Scope::Namespaced);
    assert!(caps.subresources.iter().any(|(r, _)| r.plural == "status"));
    assert!(
        discovery
            .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Pod"))
            .is_some()
    );
    assert!(
        discovery
            .resolve_gvk(&GroupVersionKind::gvk("coordination.k8s.io", "v1", "Lease"))
            .is_some()
    );

    let aggregated = Discovery::new(client).run_aggregated().await.unwrap();
    assert!(
        aggregated.resolve_gvk(&gvk).is_some(),
        "aggregated discovery serves the same resources"
    );
}

#[tokio::test]
async fn a_crd_installed_later_is_not_served_until_installed_and_requests_for_it_are_logged() {
    let crds = ocm_score_kube_double::crd::upstream_crds().unwrap();
    let scores = crds
        .iter()
        .find(|c| c.kind == "AddOnPlacementScore")
        .unwrap()
        .clone();
    let server = ApiServer::builder()
        .upstream_crds()
        .crd_installed_later(scores)
        .start()
        .await
        .unwrap();
    let client = server.admin_client();
    let gvk = GroupVersionKind::gvk(
        "cluster.open-cluster-management.io",
        "v1alpha1",
        "AddOnPlacementScore",
    );
    let scores: Api<AddOnPlacementScore> = Api::all(client.clone());
    let error = api_error(scores.list(&ListParams::default()).await.unwrap_err());
    assert_eq!(error.code, 404);
    assert_eq!(server.request_count("list", "addonplacementscores"), 1);
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    assert!(discovery.resolve_gvk(&gvk).is_none(), "not discovered");
    assert!(
        discovery
            .resolve_gvk(&GroupVersionKind::gvk(
                "cluster.open-cluster-management.io",
                "v1",
                "ManagedCluster"
            ))
            .is_some(),
        "the rest of its group is"
    );
    assert!(
        server
            .create(serde_json::to_value(score("s", "default")).unwrap())
            .is_err()
    );

    assert!(server.install_crd("addonplacementscores.cluster.open-cluster-management.io"));
    assert!(!server.install_crd("addonplacementscores.cluster.open-cluster-management.io"));
    let discovery = Discovery::new(client.clone()).run().await.unwrap();
    assert!(discovery.resolve_gvk(&gvk).is_some(), "discovered once installed");
    Api::<AddOnPlacementScore>::namespaced(client, "default")
        .create(&PostParams::default(), &score("s", "default"))
        .await
        .unwrap();
    assert_eq!(scores.list(&ListParams::default()).await.unwrap().items.len(), 1);
}

#[tokio::test]
async fn typed_crud_with_optimistic_concurrency() {
    let server = server().await;
    let client = server.admin_client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");

    let created = cms
        .create(&PostParams::default(), &config_map("a", &[("k", "1")]))
        .await
        .unwrap();
    assert!(created.uid().is_some());
    assert!(created.creation_timestamp().is_some());
    let rv1: u64 = created.resource_version().unwrap().parse().unwrap();

    let duplicate = api_error(
        cms.create(&PostParams::default(), &config_map("a", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(
        (duplicate.code, duplicate.reason.as_str()),
        (409, "AlreadyExists")
    );

    let mut fresh = cms.get("a").await.unwrap();
    fresh.data.get_or_insert_default().insert("k".into(), "2".into());
    let updated = cms.replace("a", &PostParams::default(), &fresh).await.unwrap();
    let rv2: u64 = updated.resource_version().unwrap().parse().unwrap();
    assert!(rv2 > rv1, "resourceVersion grows: {rv1} -> {rv2}");

    // Writing the stale copy again loses the race.
    let stale = api_error(
        cms.replace("a", &PostParams::default(), &fresh)
            .await
            .unwrap_err(),
    );
    assert_eq!((stale.code, stale.reason.as_str()), (409, "Conflict"));
    assert!(
        stale.message.contains("the object has been modified"),
        "{}",
        stale.message
    );

    // A write that changes nothing does not bump the resourceVersion.
    let same = cms.replace("a", &PostParams::default(), &updated).await.unwrap();
    assert_eq!(same.resource_version(), updated.resource_version());

    let mut generated = config_map("", &[]);
    generated.metadata.generate_name = Some("gen-".into());
    let generated = cms.create(&PostParams::default(), &generated).await.unwrap();
    assert!(generated.name_any().starts_with("gen-") && generated.name_any().len() == 9);

    let missing_ns = Api::<ConfigMap>::namespaced(client.clone(), "nope");
    let err = api_error(
        missing_ns
            .create(&PostParams::default(), &config_map("x", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 404);
    assert!(
        err.message.contains("namespaces \"nope\" not found"),
        "{}",
        err.message
    );

    cms.delete("a", &DeleteParams::default()).await.unwrap();
    let gone = api_error(cms.get("a").await.unwrap_err());
    assert_eq!((gone.code, gone.reason.as_str()), (404, "NotFound"));
    assert_eq!(server.objects(&Gvr::of::<ConfigMap>()).len(), 1);
}

#[tokio::test]
async fn dynamic_custom_resources_patch_and_generation() {
    let server = server().await;
    let client = server.admin_client();
    let gvk = GroupVersionKind::gvk("cluster.open-cluster-management.io", "v1", "ManagedCluster");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "managedclusters");
    let api: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    let mut obj = DynamicObject::new("c1", &ar);
    obj.data = json!({"spec": {"hubAcceptsClient": true}});
    let created = api.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    // CRD defaulting fills `leaseDurationSeconds: 60`.
    assert_eq!(created.data["spec"]["leaseDurationSeconds"], json!(60));

    let labelled = api
        .patch(
            "c1",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"env": "prod"}}})),
        )
        .await
        .unwrap();
    assert_eq!(
        labelled.metadata.generation,
        Some(1),
        "metadata changes do not bump generation"
    );

    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/spec/hubAcceptsClient", "value": false}
    ]))
    .unwrap();
    let patched = api
        .patch("c1", &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
        .unwrap();
    assert_eq!(patched.data["spec"]["hubAcceptsClient"], json!(false));
    assert_eq!(
        patched.metadata.generation,
        Some(2),
        "spec changes bump generation"
    );

    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/spec/hubAcceptsClient", "value": true}]))
            .unwrap();
    let err = api_error(
        api.patch("c1", &PatchParams::default(), &Patch::<()>::Json(failing))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 422);

    let smp = api_error(
        api.patch(
            "c1",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(smp.code, 415, "custom resources take no strategic merge patch");

    // The typed view of the same object, through scheduler-core's hand-written type.
    let typed = Api::<ManagedCluster>::all(client).get("c1").await.unwrap();
    assert_eq!(typed.metadata.labels.unwrap()["env"], "prod");
}

#[tokio::test]
async fn status_subresource_rules_and_schema_validation() {
    let server = server().await;
    let client = server.admin_client();
    namespace(&client, "cluster1").await;
    let scores: Api<AddOnPlacementScore> = Api::namespaced(client.clone(), "cluster1");

    let mut with_status = score("s", "cluster1");
    with_status.status =
        Some(serde_json::from_value(json!({"scores": [{"name": "cpu", "value": 5}]})).unwrap());
    let created = scores.create(&PostParams::default(), &with_status).await.unwrap();
    assert!(
        created.status.is_none(),
        "create drops status when a status subresource exists"
    );

    let main = scores
        .patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}, "status": {"scores": [{"name": "cpu", "value": 1}]}})),
        )
        .await
        .unwrap();
    assert!(main.status.is_none(), "writes to the main resource ignore status");
    assert_eq!(main.labels()["a"], "b");

    let via_status = scores
        .patch_status(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "changed"}}, "status": {"scores": [{"name": "cpu", "value": 42}]}})),
        )
        .await
        .unwrap();
    assert_eq!(via_status.status.as_ref().unwrap().score("cpu"), Some(42));
    assert_eq!(
        via_status.labels()["a"],
        "b",
        "writes to /status ignore everything but status"
    );

    let err = api_error(
        scores
            .patch_status(
                "s",
                &PatchParams::default(),
                &Patch::Merge(json!({"status": {"scores": [{"name": "cpu", "value": 101}]}})),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!((err.code, err.reason.as_str()), (422, "Invalid"));
    assert!(err.message.contains("status.scores[0].value"), "{}", err.message);
    let causes = err.details.unwrap().causes;
    assert_eq!(causes[0].field, "status.scores[0].value");
    let stored = server
        .object(&Gvr::of::<AddOnPlacementScore>(), "cluster1", "s")
        .unwrap();
    assert_eq!(
        stored["status"]["scores"][0]["value"],
        json!(42),
        "the rejected write changed nothing"
    );

    // Unknown fields: pruned with a warning by default, rejected with fieldValidation=Strict.
    let strict = PatchParams {
        field_validation: Some(kube::api::ValidationDirective::Strict),
        ..Default::default()
    };
    let err = api_error(
        scores
            .patch_status("s", &strict, &Patch::Merge(json!({"status": {"bogus": 1}})))
            .await
            .unwrap_err(),
    );
    assert_eq!(err.code, 400);
    assert!(
        err.message.contains("unknown field \"status.bogus\""),
        "{}",
        err.message
    );
    let pruned = scores
        .patch_status(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"bogus": 1}})),
        )
        .await
        .unwrap();
    assert!(pruned.status.unwrap().extra.is_empty());
}

#[tokio::test]
async fn server_side_apply_owns_fields_and_reports_conflicts() {
    let server = server().await;
    let client = server.admin_client();
    namespace(&client, "cluster1").await;
    let scores: Api<AddOnPlacementScore> = Api::namespaced(client.clone(), "cluster1");
    let apply = |manager: &str, force: bool| PatchParams {
        force,
        ..PatchParams::apply(manager)
    };

    let missing_manager = api_error(
        scores
            .patch(
                "s",
                &PatchParams::default(),
                &Patch::Apply(score("s", "cluster1")),
            )
            .await
            .unwrap_err(),
    );
    assert_eq!(missing_manager.code, 422);

    let created = scores
        .patch("s", &apply("agent", false), &Patch::Apply(score("s", "cluster1")))
        .await
        .unwrap();
    assert!(created.uid().is_some(), "apply creates a missing object");

    let status = |cpu: i32, extra: Option<(&str, i32)>| {
        let mut scores = vec![json!({"name": "cpu", "value": cpu})];
        if let Some((n, v)) = extra {
            scores.push(json!({"name": n, "value": v}));
        }
        json!({
            "apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "AddOnPlacementScore",
            "metadata": {"name": "s"}, "status": {"scores": scores},
        })
    };
    scores
        .patch_status(
            "s",
            &apply("agent", false),
            &Patch::Apply(status(10, Some(("mem", 20)))),
        )
        .await
        .unwrap();
    let conflict = api_error(
        scores
            .patch_status("s", &apply("intruder", false), &Patch::Apply(status(99, None)))
            .await
            .unwrap_err(),
    );
    assert_eq!((conflict.code, conflict.reason.as_str()), (409, "Conflict"));
    assert!(
        conflict.message.contains("conflict with \"agent\""),
        "{}",
        conflict.message
    );

    // The agent stops publishing "mem": a field it alone applied disappears.
    let after = scores
        .patch_status("s", &apply("agent", false), &Patch::Apply(status(11, None)))
        .await
        .unwrap();
    let names: Vec<String> = after
        .status
        .as_ref()
        .unwrap()
        .scores
        .iter()
        .map(|s| s.name.clone())
        .collect();
    assert_eq!(names, ["cpu"]);
    let managers: Vec<String> = after
        .managed_fields()
        .iter()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(managers.contains(&"agent".to_string()), "{managers:?}");

    let forced = scores
        .patch_status("s", &apply("intruder", true), &Patch::Apply(status(99, None)))
        .await
        .unwrap();
    assert_eq!(forced.status.unwrap().score("cpu"), Some(99));
}

#[tokio::test]
async fn selectors_and_consistent_pagination() {
    let server = server().await;
    let client = server.admin_client();
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    for i in 0..7 {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": format!("p{i}"), "labels": {"parity": if i % 2 == 0 { "even" } else { "odd" }}},
            "spec": {"nodeName": format!("n{}", i % 3), "containers": [{"name": "c", "image": "x"}]},
        }))
        .unwrap();
        pods.create(&PostParams::default(), &pod).await.unwrap();
    }
    let names =
        |list: kube::core::ObjectList<Pod>| list.items.iter().map(|p| p.name_any()).collect::<Vec<_>>();
    assert_eq!(
        names(
            pods.list(&ListParams::default().labels("parity=even"))
                .await
                .unwrap()
        ),
        ["p0", "p2", "p4", "p6"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().labels("parity in (odd),parity!=even"))
                .await
                .unwrap()
        ),
        ["p1", "p3", "p5"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("spec.nodeName=n1"))
                .await
                .unwrap()
        ),
        ["p1", "p4"]
    );
    assert_eq!(
        names(
            pods.list(&ListParams::default().fields("metadata.name=p3"))
                .await
                .unwrap()
        ),
        ["p3"]
    );
    let unsupported = api_error(
        pods.list(&ListParams::default().fields("spec.priority=1"))
            .await
            .unwrap_err(),
    );
    assert_eq!(unsupported.code, 400);
    assert!(unsupported.message.contains("field label not supported"));

    // Pages come from one snapshot even while objects change between them.
    let first = pods.list(&ListParams::default().limit(3)).await.unwrap();
    assert_eq!(names(first.clone()), ["p0", "p1", "p2"]);
    let token = first.metadata.continue_.clone().expect("more pages");
    pods.delete("p4", &DeleteParams::default()).await.unwrap();
    let second = pods
        .list(&ListParams::default().limit(3).continue_token(&token))
        .await
        .unwrap();
    assert_eq!(
        names(second.clone()),
        ["p3", "p4", "p5"],
        "the deleted pod is still in the snapshot"
    );
    assert_eq!(second.metadata.resource_version, first.metadata.resource_version);
    let third = pods
        .list(
            &ListParams::default()
                .limit(3)
                .continue_token(second.metadata.continue_.as_ref().unwrap()),
        )
        .await
        .unwrap();
    assert_eq!(names(third.clone()), ["p6"]);
    assert!(third.metadata.continue_.is_none());

    // After compaction the continuation is gone (410) and a fresh token is offered.
    server.compact();
    let expired = api_error(
        pods.list(&ListParams::default().limit(3).continue_token(&token))
            .await
            .unwrap_err(),
    );
    assert_eq!((expired.code, expired.reason.as_str()), (410, "Expired"));
    assert!(expired.metadata.and_then(|m| m.continue_).is_some());
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let server = server().await;
    let client = server.admin_client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut cm = config_map("held", &[]);
    cm.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &cm).await.unwrap();

    let deleting = cms
        .delete("held", &DeleteParams::default())
        .await
        .unwrap()
        .left()
        .expect("object returned");
    assert!(deleting.metadata.deletion_timestamp.is_some());
    assert!(
        cms.get("held").await.is_ok(),
        "still there while a finalizer remains"
    );

    let err = api_error(
        cms.patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.com/hold", "new"]}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(err.code, 422, "no new finalizers while deleting");

    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(api_error(cms.get("held").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn owner_references_are_garbage_collected() {
    let server = server().await;
    let client = server.admin_client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let owner = cms
        .create(&PostParams::default(), &config_map("owner", &[]))
        .await
        .unwrap();
    let owned_by = |o: &ConfigMap, block: bool| json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": o.name_any(), "uid": o.uid().unwrap(), "blockOwnerDeletion": block}]);
    for name in ["child1", "child2"] {
        let mut child = config_map(name, &[]);
        child.metadata.owner_references = Some(serde_json::from_value(owned_by(&owner, false)).unwrap());
        cms.create(&PostParams::default(), &child).await.unwrap();
    }
    let mut grandchild = config_map("grandchild", &[]);
    let child1 = cms.get("child1").await.unwrap();
    grandchild.metadata.owner_references = Some(serde_json::from_value(owned_by(&child1, false)).unwrap());
    cms.create(&PostParams::default(), &grandchild).await.unwrap();

    cms.delete("owner", &DeleteParams::background()).await.unwrap();
    let left: Vec<String> = server
        .objects(&Gvr::of::<ConfigMap>())
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(
        left.iter().all(|n| !n.contains("child") && n != "owner"),
        "cascade removed dependents: {left:?}"
    );

    // Orphan keeps dependents and strips the reference; foreground waits for blocking dependents.
    let owner = cms
        .create(&PostParams::default(), &config_map("owner2", &[]))
        .await
        .unwrap();
    let mut kept = config_map("kept", &[]);
    kept.metadata.owner_references = Some(serde_json::from_value(owned_by(&owner, false)).unwrap());
    cms.create(&PostParams::default(), &kept).await.unwrap();
    cms.delete("owner2", &DeleteParams::orphan()).await.unwrap();
    let kept = cms.get("kept").await.unwrap();
    assert!(kept.metadata.owner_references.is_none());

    let owner = cms
        .create(&PostParams::default(), &config_map("owner3", &[]))
        .await
        .unwrap();
    let mut blocker = config_map("blocker", &[]);
    blocker.metadata.owner_references = Some(serde_json::from_value(owned_by(&owner, true)).unwrap());
    blocker.metadata.finalizers = Some(vec!["example.com/slow".into()]);
    cms.create(&PostParams::default(), &blocker).await.unwrap();
    cms.delete("owner3", &DeleteParams::foreground()).await.unwrap();
    let waiting = cms.get("owner3").await.unwrap();
    assert!(waiting.finalizers().contains(&"foregroundDeletion".to_string()));
    assert!(
        cms.get("blocker")
            .await
            .unwrap()
            .metadata
            .deletion_timestamp
            .is_some()
    );
    cms.patch(
        "blocker",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(
        api_error(cms.get("owner3").await.unwrap_err()).code,
        404,
        "owner goes once the blocker is gone"
    );
}

#[tokio::test]
async fn namespace_deletion_empties_it_first() {
    let server = server().await;
    let client = server.admin_client();
    namespace(&client, "doomed").await;
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "doomed");
    let mut cm = config_map("held", &[]);
    cm.metadata.finalizers = Some(vec!["example.com/hold".into()]);
    cms.create(&PostParams::default(), &cm).await.unwrap();
    cms.create(&PostParams::default(), &config_map("free", &[]))
        .await
        .unwrap();

    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    let ns = namespaces.get("doomed").await.unwrap();
    assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Terminating"));
    assert_eq!(api_error(cms.get("free").await.unwrap_err()).code, 404);
    let refused = api_error(
        cms.create(&PostParams::default(), &config_map("late", &[]))
            .await
            .unwrap_err(),
    );
    assert_eq!((refused.code, refused.reason.as_str()), (403, "Forbidden"));

    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert_eq!(api_error(namespaces.get("doomed").await.unwrap_err()).code, 404);
}

#[tokio::test]
async fn setup_objects_and_request_counters() {
    let server = ApiServer::builder()
        .upstream_crds()
        .builtin_kinds()
        .object(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "cluster1"}}))
        .object(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "cluster1"}}))
        .start()
        .await
        .unwrap();
    let client = server.admin_client();
    // As upstream, items of a built-in list carry no kind/apiVersion (the list's type says it).
    let raw = hyper::Request::get("/api/v1/namespaces/cluster1/configmaps")
        .body(vec![])
        .unwrap();
    let list: Value = serde_json::from_str(&client.request_text(raw).await.unwrap()).unwrap();
    assert_eq!(list["kind"], "ConfigMapList");
    assert!(list["items"][0].get("kind").is_none() && list["items"][0]["metadata"]["name"] == "cfg");
    server.reset_requests();
    let cms: Api<ConfigMap> = Api::namespaced(client, "cluster1");
    cms.get("cfg").await.unwrap();
    cms.list(&ListParams::default()).await.unwrap();
    assert_eq!(server.request_count("get", "configmaps"), 1);
    assert_eq!(server.request_count("list", "configmaps"), 1);
    assert_eq!(server.write_count(), 0, "reads only");
    cms.patch(
        "cfg",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "b"}})),
    )
    .await
    .unwrap();
    assert_eq!(server.write_count(), 1);
    let record = server.requests().into_iter().find(|r| r.is_write()).unwrap();
    assert_eq!(
        (record.verb.as_str(), record.namespace.as_str(), record.code),
        ("patch", "cluster1", 200)
    );
    let value: Value = server.object(&Gvr::of::<ConfigMap>(), "cluster1", "cfg").unwrap();
    assert_eq!(value["data"]["a"], "b");
}

/// A test that sees a write's effect and then reads the request log must find the write there: the
/// log may not trail the store. An observer thread polls the store while creates land and reads the
/// log the moment each object shows; before writes were logged under the log's lock, it caught the
/// log behind in three runs of five on a 2-core machine.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_is_in_the_request_log_once_its_object_is_seen() {
    const CREATES: usize = 300;
    let server = std::sync::Arc::new(server().await);
    let client = server.admin_client();
    namespace(&client, "seen").await;
    let created_before = server.request_count("create", "configmaps");
    let observer = {
        let server = server.clone();
        std::thread::spawn(move || {
            let gvr = Gvr::of::<ConfigMap>();
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
            let mut behind = Vec::new();
            for i in 0..CREATES {
                let name = format!("cm-{i}");
                while server.object(&gvr, "seen", &name).is_none() {
                    assert!(std::time::Instant::now() < deadline, "{name} never appeared");
                    std::hint::spin_loop();
                }
                let logged = server.request_count("create", "configmaps") - created_before;
                if logged < i + 1 {
                    behind.push((name, logged));
                }
            }
            behind
        })
    };
    let cms: Api<ConfigMap> = Api::namespaced(client, "seen");
    for i in 0..CREATES {
        cms.create(&PostParams::default(), &config_map(&format!("cm-{i}"), &[]))
            .await
            .unwrap();
    }
    let behind = tokio::task::spawn_blocking(move || observer.join())
        .await
        .unwrap()
        .unwrap();
    assert!(
        behind.is_empty(),
        "objects seen before their create was logged (name, creates logged): {behind:?}"
    );
}
