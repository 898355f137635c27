//! Authentication, RBAC, every fault-injection mode, and the `kube-double` binary.
#![allow(clippy::unwrap_used)] // a failed unwrap is a failed test

use futures::StreamExt;
use k8s_openapi::api::{
    authorization::v1::SubjectAccessReview,
    core::v1::{ConfigMap, Namespace},
};
use kube::{
    Api, Client, ResourceExt,
    api::{ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams},
};
use ocm_score_api::AddOnPlacementScore;
use ocm_score_kube_double::{ApiServer, Identity, RequestMatch};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

fn from<T: DeserializeOwned>(v: Value) -> T {
    serde_json::from_value(v).unwrap()
}

fn code(e: kube::Error) -> (u16, String) {
    match e {
        kube::Error::Api(s) => (s.code, s.message),
        other => panic!("expected an API error, got {other:?}"),
    }
}

async fn rbac_server() -> ApiServer {
    let server = ApiServer::builder()
        .upstream_crds()
        .builtin_kinds()
        .rbac(true)
        .start()
        .await
        .unwrap();
    let admin = server.admin_client();
    for ns in ["cluster1", "cluster2"] {
        Api::<Namespace>::all(admin.clone())
            .create(&PostParams::default(), &from(json!({"metadata": {"name": ns}})))
            .await
            .unwrap();
    }
    server
}

/// Test setup through the library (as the admin, without HTTP).
fn create(server: &ApiServer, api_version: &str, kind: &str, namespace: Option<&str>, mut object: Value) {
    object["apiVersion"] = json!(api_version);
    object["kind"] = json!(kind);
    if let Some(ns) = namespace {
        object["metadata"]["namespace"] = json!(ns);
    }
    server.create(object).unwrap();
}

const RBAC: &str = "rbac.authorization.k8s.io/v1";

/// A Role with `rules` in `namespace`, bound to `user` (both named after the user).
fn grant_role(server: &ApiServer, namespace: &str, user: &str, rules: Value) {
    create(
        server,
        RBAC,
        "Role",
        Some(namespace),
        json!({"metadata": {"name": user}, "rules": rules}),
    );
    create(
        server,
        RBAC,
        "RoleBinding",
        Some(namespace),
        json!({
            "metadata": {"name": user},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": user},
            "subjects": [{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}],
        }),
    );
}

fn score(name: &str) -> AddOnPlacementScore {
    from(json!({
        "apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "AddOnPlacementScore",
        "metadata": {"name": name},
    }))
}

#[tokio::test]
async fn unknown_tokens_are_unauthorized() {
    let server = rbac_server().await;
    let stranger = Identity {
        user: "x".into(),
        groups: vec![],
        token: "not-a-token".into(),
    };
    let err = Api::<ConfigMap>::namespaced(server.client(&stranger), "default")
        .list(&ListParams::default())
        .await;
    assert_eq!(code(err.unwrap_err()).0, 401);
}

#[tokio::test]
async fn namespaced_role_confines_an_agent_to_its_cluster_namespace() {
    let server = rbac_server().await;
    grant_role(
        &server,
        "cluster1",
        "agent-cluster1",
        json!([
            {"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["addonplacementscores"], "verbs": ["get", "list", "watch", "create"]},
            {"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["addonplacementscores/status"], "verbs": ["patch", "update"]},
        ]),
    );
    let agent = server.client_for("agent-cluster1", &["ocm:agents"]);
    let own: Api<AddOnPlacementScore> = Api::namespaced(agent.clone(), "cluster1");
    own.create(&PostParams::default(), &score("s")).await.unwrap();
    own.list(&ListParams::default()).await.unwrap();
    let status = Patch::Merge(json!({"status": {"scores": [{"name": "cpu", "value": 3}]}}));
    own.patch_status("s", &PatchParams::default(), &status)
        .await
        .unwrap();

    // The main resource is not writable, only its status subresource.
    let (c, message) = code(
        own.patch(
            "s",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap_err(),
    );
    assert_eq!(c, 403);
    assert_eq!(
        message,
        "addonplacementscores.cluster.open-cluster-management.io \"s\" is forbidden: User \"agent-cluster1\" cannot patch resource \"addonplacementscores\" in API group \"cluster.open-cluster-management.io\" in the namespace \"cluster1\""
    );

    let other: Api<AddOnPlacementScore> = Api::namespaced(agent.clone(), "cluster2");
    assert_eq!(
        code(
            other
                .create(&PostParams::default(), &score("s"))
                .await
                .unwrap_err()
        )
        .0,
        403
    );
    assert_eq!(code(other.list(&ListParams::default()).await.unwrap_err()).0, 403);
    let (c, message) = code(
        Api::<AddOnPlacementScore>::all(agent.clone())
            .list(&ListParams::default())
            .await
            .unwrap_err(),
    );
    assert_eq!(c, 403);
    assert!(message.ends_with("at the cluster scope"), "{message}");
    // Discovery stays open to every authenticated user, as with the default bootstrap roles.
    agent.apiserver_version().await.unwrap();
    let denied_writes: Vec<_> = server
        .requests()
        .into_iter()
        .filter(|r| r.is_write() && r.code == 403)
        .collect();
    assert_eq!(denied_writes.len(), 2);
}

/// A server-side apply is a `patch`; when it would create the object it also needs `create`.
#[tokio::test]
async fn an_apply_that_creates_needs_create_besides_patch() {
    let server = rbac_server().await;
    grant_role(
        &server,
        "cluster1",
        "patcher",
        json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "patch"]}]),
    );
    let maps: Api<ConfigMap> = Api::namespaced(server.client_for("patcher", &[]), "cluster1");
    let applied = Patch::Apply(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c"}, "data": {"k": "v"},
    }));
    let params = PatchParams::apply("patcher");
    let (c, message) = code(maps.patch("c", &params, &applied).await.unwrap_err());
    assert_eq!(c, 403);
    assert_eq!(
        message,
        "configmaps \"c\" is forbidden: User \"patcher\" cannot create resource \"configmaps\" in API group \"\" in the namespace \"cluster1\""
    );
    let configmaps = ocm_score_kube_double::Gvr::new("", "v1", "configmaps");
    assert!(
        server.object(&configmaps, "cluster1", "c").is_none(),
        "nothing was created"
    );

    create(
        &server,
        "v1",
        "ConfigMap",
        Some("cluster1"),
        json!({"metadata": {"name": "c"}}),
    );
    let updated = maps.patch("c", &params, &applied).await.unwrap();
    assert_eq!(
        updated.data.unwrap_or_default().get("k").map(String::as_str),
        Some("v")
    );
}

#[tokio::test]
async fn cluster_roles_resource_names_and_service_accounts() {
    let server = rbac_server().await;
    let admin = server.admin_client();
    create(
        &server,
        RBAC,
        "ClusterRole",
        None,
        json!({
            "metadata": {"name": "score-reader"},
            "rules": [{"apiGroups": ["cluster.open-cluster-management.io"], "resources": ["*"], "verbs": ["get", "list", "watch"]}],
        }),
    );
    create(
        &server,
        RBAC,
        "ClusterRoleBinding",
        None,
        json!({
            "metadata": {"name": "hub-readers"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "score-reader"},
            "subjects": [{"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "ocm:hub"}],
        }),
    );
    let hub = server.client_for("hub-controller", &["ocm:hub"]);
    Api::<AddOnPlacementScore>::all(hub.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    Api::<AddOnPlacementScore>::namespaced(hub.clone(), "cluster2")
        .list(&ListParams::default())
        .await
        .unwrap();
    let write = Api::<AddOnPlacementScore>::namespaced(hub, "cluster2")
        .create(&PostParams::default(), &score("x"))
        .await;
    assert_eq!(code(write.unwrap_err()).0, 403);

    // resourceNames: one config map by name, in one namespace, bound to a service account.
    create(
        &server,
        "v1",
        "ConfigMap",
        Some("cluster1"),
        json!({"metadata": {"name": "allowed"}}),
    );
    create(
        &server,
        "v1",
        "ConfigMap",
        Some("cluster1"),
        json!({"metadata": {"name": "secret-ish"}}),
    );
    create(
        &server,
        RBAC,
        "ClusterRole",
        None,
        json!({
            "metadata": {"name": "one-config"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "resourceNames": ["allowed"], "verbs": ["get", "list", "watch"]}],
        }),
    );
    create(
        &server,
        RBAC,
        "RoleBinding",
        Some("cluster1"),
        json!({
            "metadata": {"name": "sa-one-config"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "one-config"},
            "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": "cluster1"}],
        }),
    );
    let sa = server.client_for("system:serviceaccount:cluster1:agent", &[]);
    let cms: Api<ConfigMap> = Api::namespaced(sa.clone(), "cluster1");
    cms.get("allowed").await.unwrap();
    assert_eq!(code(cms.get("secret-ish").await.unwrap_err()).0, 403);
    assert_eq!(
        code(cms.list(&ListParams::default()).await.unwrap_err()).0,
        403,
        "a name-restricted rule does not allow listing all"
    );
    let one = cms
        .list(&ListParams::default().fields("metadata.name=allowed"))
        .await
        .unwrap();
    assert_eq!(one.items.len(), 1);
    let elsewhere: Api<ConfigMap> = Api::namespaced(sa, "cluster2");
    assert_eq!(
        code(elsewhere.get("allowed").await.unwrap_err()).0,
        403,
        "a RoleBinding grants only in its namespace"
    );

    // SubjectAccessReview answers from the same rules.
    let review = |user: &str, ns: &str, name: &str| {
        from::<SubjectAccessReview>(json!({
            "spec": {"user": user, "resourceAttributes": {"verb": "get", "resource": "configmaps", "namespace": ns, "name": name}}
        }))
    };
    let sars: Api<SubjectAccessReview> = Api::all(admin);
    let sa_user = "system:serviceaccount:cluster1:agent";
    let yes = sars
        .create(&PostParams::default(), &review(sa_user, "cluster1", "allowed"))
        .await
        .unwrap();
    assert!(yes.status.unwrap().allowed);
    let no = sars
        .create(&PostParams::default(), &review(sa_user, "cluster1", "secret-ish"))
        .await
        .unwrap();
    assert!(!no.status.unwrap().allowed);
}

#[tokio::test]
async fn failures_fire_for_matching_requests_only() {
    let server = ApiServer::builder().builtin_kinds().start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.admin_client(), "default");
    cms.create(&PostParams::default(), &from(json!({"metadata": {"name": "a"}})))
        .await
        .unwrap();

    server.faults().fail_next(
        2,
        RequestMatch::any().verb("get").resource("configmaps").name("a"),
        500,
    );
    cms.list(&ListParams::default()).await.unwrap();
    for _ in 0..2 {
        let (c, message) = code(cms.get("a").await.unwrap_err());
        assert_eq!(c, 500);
        assert!(message.contains("injected fault"), "{message}");
    }
    cms.get("a").await.unwrap();
    assert_eq!(server.faults().pending(), 0);

    server
        .faults()
        .fail_next(1, RequestMatch::any().verb("patch").namespace("default"), 409);
    let patch = Patch::Merge(json!({"data": {"k": "v"}}));
    assert_eq!(
        code(cms.patch("a", &PatchParams::default(), &patch).await.unwrap_err()).0,
        409
    );
    cms.patch("a", &PatchParams::default(), &patch).await.unwrap();

    // kube retries 429 (after Retry-After) and 503 by itself; the server saw every attempt.
    server
        .faults()
        .throttle_next(1, RequestMatch::any().verb("list"), 1);
    let started = Instant::now();
    cms.list(&ListParams::default()).await.unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "waited for Retry-After"
    );
    server.faults().fail_next(2, RequestMatch::any().verb("get"), 503);
    cms.get("a").await.unwrap();
    let codes: Vec<u16> = server
        .requests()
        .iter()
        .filter(|r| r.verb == "get")
        .map(|r| r.code)
        .collect();
    assert_eq!(codes, [500, 500, 200, 503, 503, 200]);
    assert!(
        server
            .requests()
            .iter()
            .any(|r| r.verb == "list" && r.code == 429)
    );
}

#[tokio::test]
async fn latency_delays_matching_requests() {
    let server = ApiServer::builder().builtin_kinds().start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.admin_client(), "default");
    let delay = Duration::from_millis(300);
    server
        .faults()
        .add_latency(RequestMatch::any().verb("list").resource("configmaps"), delay);
    let started = Instant::now();
    cms.list(&ListParams::default()).await.unwrap();
    assert!(started.elapsed() >= delay);

    // Other requests are not held up: with an hour programmed for lists, a get answers (the bound
    // only catches a hang; nothing is timed).
    server.faults().clear();
    server.faults().add_latency(
        RequestMatch::any().verb("list").resource("configmaps"),
        Duration::from_secs(3600),
    );
    tokio::time::timeout(Duration::from_secs(60), cms.get_opt("other"))
        .await
        .expect("a get is not delayed by a list's latency")
        .unwrap();

    // Cleared latency is gone: a list answers although an hour was programmed.
    server.faults().clear();
    tokio::time::timeout(Duration::from_secs(60), cms.list(&ListParams::default()))
        .await
        .expect("no latency after clear()")
        .unwrap();
}

/// Sends a watch of the default namespace's ConfigMaps over a raw connection and returns it once the
/// response head has arrived, with what was read so far.
async fn raw_watch(server: &ApiServer, query: &str) -> (tokio::net::TcpStream, Vec<u8>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(server.address()).await.unwrap();
    let request = format!(
        "GET /api/v1/namespaces/default/configmaps?watch=true&{query} HTTP/1.1\r\nHost: x\r\n\
         Authorization: Bearer {}\r\n\r\n",
        server.admin().token
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut read = Vec::new();
    let mut buf = [0u8; 4096];
    while !read.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream.read(&mut buf).await.unwrap();
        assert!(n > 0, "the head arrives");
        read.extend_from_slice(&buf[..n]);
    }
    (stream, read)
}

/// Reads until the body's last chunk or the end of the connection (bounded: a hang fails the test).
async fn read_body_end(stream: &mut tokio::net::TcpStream, read: &mut Vec<u8>) {
    use tokio::io::AsyncReadExt;
    tokio::time::timeout(Duration::from_secs(30), async {
        let mut buf = [0u8; 4096];
        while !read.ends_with(LAST_CHUNK) {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => read.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .expect("the watch response ends");
}

/// The last chunk of a chunked body: its presence is a complete response.
const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

#[tokio::test]
async fn cut_watches_end_streams_mid_flight() {
    let server = ApiServer::builder().builtin_kinds().start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.admin_client(), "default");

    // A watch that ends by itself (timeoutSeconds) ends its body properly.
    let (mut timed, mut timed_read) = raw_watch(&server, "timeoutSeconds=1").await;
    read_body_end(&mut timed, &mut timed_read).await;
    assert!(
        timed_read.ends_with(LAST_CHUNK),
        "a watch that times out completes its body: {}",
        String::from_utf8_lossy(&timed_read)
    );

    // A cut one breaks off mid-body: events so far, then the connection closes without the last chunk.
    let (mut raw, mut raw_read) = raw_watch(&server, "resourceVersion=0").await;
    let mut stream = cms.watch(&WatchParams::default(), "0").await.unwrap().boxed();
    cms.create(&PostParams::default(), &from(json!({"metadata": {"name": "a"}})))
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(matches!(first, WatchEvent::Added(ref o) if o.name_any() == "a"));
    server.faults().cut_watches();
    read_body_end(&mut raw, &mut raw_read).await;
    let text = String::from_utf8_lossy(&raw_read).to_string();
    assert!(
        text.contains("\"ADDED\"") && text.contains("\"name\":\"a\""),
        "{text}"
    );
    assert!(!raw_read.ends_with(LAST_CHUNK), "the body was cut: {text}");
    // kube's client reads the broken-off body as the end of its stream (its watcher then resumes).
    let after = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .expect("the cut reaches kube's client");
    assert!(after.is_none(), "the stream ends at the cut: {after:?}");
}

/// Polls `check` every 20 ms until it holds; a hang fails the test naming `what`.
async fn until(what: &str, mut check: impl AsyncFnMut() -> bool) {
    tokio::time::timeout(Duration::from_secs(30), async {
        while !check().await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"));
}

async fn connection_refused(server: &ApiServer) -> bool {
    matches!(
        tokio::net::TcpStream::connect(server.address()).await,
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused
    )
}

#[tokio::test]
async fn refused_connections_recover_on_the_same_address() {
    let server = ApiServer::builder().builtin_kinds().start().await.unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(server.admin_client(), "default");
    cms.list(&ListParams::default()).await.unwrap();
    // A refusal far longer than the test, ended by the test once it has seen what it wants.
    server.faults().refuse_connections(Duration::from_secs(3600));
    until("connections to be refused", async || {
        connection_refused(&server).await
    })
    .await;
    assert!(
        cms.list(&ListParams::default()).await.is_err(),
        "the client's pooled connection was closed too"
    );
    server.faults().accept_connections();
    until("the server to listen on the same address again", async || {
        cms.list(&ListParams::default()).await.is_ok()
    })
    .await;

    // A short refusal ends by itself.
    server.faults().refuse_connections(Duration::from_millis(200));
    until("connections to be refused", async || {
        connection_refused(&server).await
    })
    .await;
    until("the refusal to end by itself", async || {
        cms.list(&ListParams::default()).await.is_ok()
    })
    .await;
    // Ending a refusal that is over changes nothing.
    server.faults().accept_connections();
    cms.list(&ListParams::default()).await.unwrap();
}

#[tokio::test]
async fn binary_serves_kubeconfigs_objects_and_flag_faults() {
    let dir = std::env::temp_dir().join(format!("kube-double-bin-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("objects.yaml"),
        "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: cluster1\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: seed\n  namespace: cluster1\n",
    )
    .unwrap();
    let admin_config = dir.join("admin.kubeconfig");
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_kube-double"))
        .args([
            "--upstream-crds",
            "--rbac",
            "--port",
            "0",
            "--identity",
            "agent:ocm:agents",
        ])
        .arg("--kubeconfig-out")
        .arg(&admin_config)
        .arg("--objects")
        .arg(dir.join("objects.yaml"))
        .args(["--fault", "verb=get,resource=configmaps,code=500,count=1"])
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stdout));
    let url = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    for _ in 0..100 {
        if dir.join("agent.kubeconfig").exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let client_from = |path: std::path::PathBuf| async move {
        let kubeconfig = kube::config::Kubeconfig::read_from(path).unwrap();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .unwrap();
        Client::try_from(config).unwrap()
    };
    let admin = client_from(admin_config).await;
    let cms: Api<ConfigMap> = Api::namespaced(admin, "cluster1");
    assert_eq!(
        code(cms.get("seed").await.unwrap_err()).0,
        500,
        "the --fault flag fires once"
    );
    cms.get("seed").await.unwrap();
    let agent = client_from(dir.join("agent.kubeconfig")).await;
    let err = Api::<ConfigMap>::namespaced(agent, "cluster1")
        .get("seed")
        .await
        .unwrap_err();
    assert_eq!(code(err).0, 403, "the agent identity has no role yet");

    let pid = child.id().unwrap().to_string();
    std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "graceful exit on SIGTERM: {status}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// RBAC object names only have to be path segments, as on a real server (OCM names its roles
/// `open-cluster-management:...`); other objects keep the RFC 1123 subdomain rule.
#[tokio::test]
async fn rbac_names_may_hold_colons_other_names_may_not() {
    let server = rbac_server().await;
    let admin = server.admin_client();
    let role: k8s_openapi::api::rbac::v1::ClusterRole = from(json!({
        "metadata": {"name": "open-cluster-management:addon:reader"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    }));
    let created = Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &role)
        .await
        .unwrap();
    assert_eq!(created.name_any(), "open-cluster-management:addon:reader");
    let bad_role: k8s_openapi::api::rbac::v1::ClusterRole = from(json!({"metadata": {"name": "a/b"}}));
    let err = Api::<k8s_openapi::api::rbac::v1::ClusterRole>::all(admin.clone())
        .create(&PostParams::default(), &bad_role)
        .await
        .unwrap_err();
    assert_eq!(code(err).0, 422);
    let cm: ConfigMap = from(json!({"metadata": {"name": "a:b"}}));
    let err = Api::<ConfigMap>::namespaced(admin, "default")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap_err();
    assert_eq!(code(err).0, 422);
}
