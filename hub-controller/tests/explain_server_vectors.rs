//! The explain server's request handling held to OCM's own unit tests of its placement debug
//! endpoint: every `debug*` vector of `tests/conformance/ocm-unit/ocm-unit-cases.yaml`
//! (translated from OCM's `pkg/placement/debugger/debugger_test.go`), run through
//! `explain_server::handler::handle` with an `Access` that answers as each vector's user and
//! SubjectAccessReview do, and a hub holding the vector's objects (or failing where it injects a
//! failure). scheduler-core skips these vectors (it serves no HTTP); this is where they run.
//!
//! Every `expect` key of a vector is checked (`checked_keys`). Where OCM's test stubs its scheduler
//! (`debugAggregate`), the stub's results are handed to our answer's maker as a scheduling result
//! and what it makes of them (names, keys, the aggregated scores' order) is compared; the dry run is
//! also scheduled for real. `debugReportErr`'s error is brought about and answered by the server's
//! HTTP handler ([`handler::respond`]).

use hyper::Method;
use ocm_score_api::{ManagedCluster, ManagedClusterSet, ManagedClusterSetBinding, Placement};
use ocm_score_hub::explain_server::access::{Access, ReviewError, User, Verb, Verdict};
use ocm_score_hub::explain_server::answer::DebugAnswer;
use ocm_score_hub::explain_server::handler::{self, DebugRequest, HubError, HubView};
use ocm_score_scheduler::placement::schedule::{FilterRecord, PrioritizerResult as ScheduledPrioritizer};
use ocm_score_scheduler::placement::weights::PrioritizerKind;
use ocm_score_scheduler::placement::{ClusterId, HubObjects, HubSnapshot, ScheduleResult, Status};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Mutex;

const VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/conformance/ocm-unit/ocm-unit-cases.yaml"
);

const TOKEN: &str = "a-token";

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_owned()
}

fn list(v: &Value) -> Vec<Value> {
    v.as_array().cloned().unwrap_or_default()
}

/// The hub of a vector: its objects, and the lister it makes fail.
struct Hub {
    objects: HubObjects,
    failure: Value,
}

impl HubView for Hub {
    fn placement(&self, namespace: &str, name: &str) -> Result<Option<Placement>, HubError> {
        if let Some(e) = self.failure.get("placementGet") {
            return Err(HubError::Failed(s(e)));
        }
        Ok(self
            .objects
            .placements
            .iter()
            .find(|p| {
                p.metadata.namespace.as_deref() == Some(namespace) && p.metadata.name.as_deref() == Some(name)
            })
            .cloned())
    }

    fn snapshot(
        &self,
        namespace: &str,
        _now: jiff::Timestamp,
    ) -> Result<std::sync::Arc<HubSnapshot>, HubError> {
        for injected in ["bindingList", "clusterList"] {
            if let Some(e) = self.failure.get(injected) {
                return Err(HubError::Failed(s(e)));
            }
        }
        let mut objects = self.objects.clone();
        objects
            .bindings
            .retain(|b| b.metadata.namespace.as_deref() == Some(namespace));
        HubSnapshot::new(objects)
            .map(std::sync::Arc::new)
            .map_err(|e| HubError::Failed(e.to_string()))
    }
}

/// The vector's user and SubjectAccessReview; records the verbs asked.
struct Auth {
    user: Option<User>,
    allowed: bool,
    reason: String,
    error: Option<String>,
    asked: Mutex<Vec<(Verb, String)>>,
}

impl Auth {
    fn of(auth: Option<&Value>) -> Self {
        let auth = auth
            .cloned()
            .unwrap_or_else(|| json!({"user": "test-user", "groups": ["system:authenticated"]}));
        Auth {
            user: auth["user"].as_str().map(|name| User {
                name: name.to_owned(),
                groups: list(&auth["groups"]).iter().map(s).collect(),
                ..User::default()
            }),
            allowed: auth["sarAllowed"].as_bool().unwrap_or(true),
            reason: s(&auth["sarReason"]),
            error: auth["sarError"].as_str().map(str::to_owned),
            asked: Mutex::new(Vec::new()),
        }
    }
}

impl Access for Auth {
    async fn authenticate(&self, token: &str) -> Result<Option<User>, ReviewError> {
        Ok(self.user.clone().filter(|_| token == TOKEN))
    }

    async fn authorize(&self, _user: &User, verb: Verb, namespace: &str) -> Result<Verdict, ReviewError> {
        self.asked
            .lock()
            .expect("not poisoned")
            .push((verb, namespace.to_owned()));
        if let Some(e) = &self.error {
            return Err(ReviewError {
                review: "SubjectAccessReview",
                source: kube::Error::Service(e.clone().into()),
            });
        }
        Ok(Verdict {
            allowed: self.allowed,
            reason: self.reason.clone(),
        })
    }
}

fn cluster(v: &Value) -> ManagedCluster {
    serde_json::from_value(json!({"metadata": {"name": v["name"], "labels": v["labels"]}})).expect("cluster")
}

fn cluster_set(v: &Value) -> ManagedClusterSet {
    serde_json::from_value(
        json!({"metadata": {"name": v["name"]}, "spec": {"clusterSelector": v["clusterSelector"]}}),
    )
    .expect("cluster set")
}

fn binding(v: &Value) -> ManagedClusterSetBinding {
    serde_json::from_value(
        json!({"metadata": {"name": v["name"], "namespace": v["namespace"]},
                                  "spec": {"clusterSet": v["clusterSet"]}}),
    )
    .expect("binding")
}

fn placement(v: &Value) -> Placement {
    serde_json::from_value(
        json!({"metadata": {"name": v["name"], "namespace": v["namespace"]}, "spec": v["spec"]}),
    )
    .expect("placement")
}

fn objects(v: &Value) -> HubObjects {
    HubObjects {
        clusters: list(&v["clusters"]).iter().map(cluster).collect(),
        cluster_sets: list(&v["clusterSets"]).iter().map(cluster_set).collect(),
        bindings: list(&v["bindings"]).iter().map(binding).collect(),
        placements: list(&v["placements"]).iter().map(placement).collect(),
        ..HubObjects::default()
    }
}

/// The objects OCM's `TestDebuggerHandlerReportErr` and `TestDebuggerPermissionCheck` share.
fn shared_objects() -> HubObjects {
    objects(&json!({
        "placements": [{"namespace": "test-ns", "name": "test-placement", "spec": {"clusterSets": ["test-set"]}}],
        "clusters": [{"name": "cluster1", "labels": {"clusterset": "test-set"}}],
        "clusterSets": [{"name": "test-set", "clusterSelector": {"selectorType": "LabelSelector",
                          "labelSelector": {"matchLabels": {"clusterset": "test-set"}}}}],
        "bindings": [{"namespace": "test-ns", "name": "test-set", "clusterSet": "test-set"}],
    }))
}

fn request(r: &Value, with_token: bool) -> DebugRequest {
    let body = match (&r["rawBody"], &r["body"]) {
        (Value::String(raw), _) => raw.clone().into_bytes(),
        (_, Value::Null) => Vec::new(),
        (_, body) => serde_json::to_vec(body).expect("body"),
    };
    DebugRequest {
        method: Method::from_bytes(s(&r["method"]).as_bytes()).expect("method"),
        path: s(&r["path"]),
        authorization: with_token.then(|| format!("Bearer {TOKEN}")),
        body,
    }
}

async fn run(auth: &Auth, hub: &Hub, r: &Value) -> handler::Reply {
    let with_token = auth.user.is_some();
    handler::handle(auth, hub, request(r, with_token), jiff::Timestamp::now()).await
}

fn json_of(answer: &DebugAnswer) -> Value {
    serde_json::to_value(answer).expect("serializes")
}

type Check = Result<(), String>;

fn ensure(ok: bool, why: impl FnOnce() -> String) -> Check {
    if ok { Ok(()) } else { Err(why()) }
}

async fn debug_http(case: &Value) -> Check {
    let auth = Auth::of(case.get("auth"));
    let hub = Hub {
        objects: shared_objects(),
        failure: case["injectedFailure"].clone(),
    };
    let reply = run(&auth, &hub, &case["request"]).await;
    let e = &case["expect"];
    let body = json_of(&reply.answer);
    let want_status = e["httpStatus"].as_u64().unwrap_or(0);
    ensure(u64::from(reply.status.as_u16()) == want_status, || {
        format!("status {} not {want_status}: {body}", reply.status)
    })?;
    if let Some(want) = e["errorContains"].as_str() {
        let got = s(&body["error"]);
        ensure(got.contains(want), || format!("error {got:?} lacks {want:?}"))?;
    }
    if e.get("error").is_some_and(|v| v.as_str() == Some("")) {
        ensure(body.get("error").is_none(), || {
            format!("an error where none belongs: {body}")
        })?;
    }
    if let Some(verb) = e["sarVerb"].as_str() {
        let asked = auth.asked.lock().expect("not poisoned").clone();
        ensure(
            asked.iter().map(|(v, _)| v.as_str()).collect::<Vec<_>>() == [verb],
            || format!("SubjectAccessReviews asked {asked:?}, want one for {verb:?}"),
        )?;
        ensure(asked.iter().all(|(_, ns)| ns == "test-ns"), || {
            format!("asked about another namespace: {asked:?}")
        })?;
    }
    Ok(())
}

/// OCM maps error messages to codes; here each message's situation is brought about and its code
/// checked.
async fn permission_mapping(case: &Value) -> Check {
    let message = s(&case["input"]["error"]);
    let want = case["expect"]["httpStatus"].as_u64().unwrap_or(0);
    let get = json!({"method": "GET", "path": "/debug/placements/test-ns/test-placement"});
    let post = json!({"method": "POST", "path": "/debug/placements/",
                      "body": {"metadata": {"name": "p", "namespace": "test-ns"}, "spec": {}}});
    let denied = json!({"user": "u", "sarAllowed": false, "sarReason": "denied"});
    let (auth, request) = if message.contains("user information not found") {
        (json!({"user": null}), get)
    } else if message.contains("permission to create") {
        (denied, post)
    } else if message.contains("permission to get") {
        (denied, get)
    } else if let Some(method) = message.strip_prefix("unsupported method ") {
        (
            json!({"user": "u"}),
            json!({"method": method, "path": "/debug/placements/test-ns/test-placement"}),
        )
    } else if message.starts_with("failed to check permissions") {
        (json!({"user": "u", "sarError": "boom"}), get)
    } else {
        return Err(format!("no situation known for {message:?}"));
    };
    let auth = Auth::of(Some(&auth));
    let hub = Hub {
        objects: shared_objects(),
        failure: Value::Null,
    };
    let reply = run(&auth, &hub, &request).await;
    ensure(u64::from(reply.status.as_u16()) == want, || {
        format!("{message:?}: status {} not {want}", reply.status)
    })
}

/// OCM's `reportErr`: the status, the content type and the JSON body of an error. Here the error
/// is brought about and answered by our server's HTTP handler ([`handler::respond`]): a 400 by a
/// POST whose body is the vector's message (YAML reads it as a string, not a Placement), a 500 by
/// a hub whose lister fails with it. The message is ours around the vector's, so the body must
/// have the vector's keys and its `error` contain the vector's message.
async fn report_err(case: &Value) -> Check {
    let input = &case["input"];
    let message = s(&input["error"]);
    let (request, failure) = match input["httpStatus"].as_u64() {
        Some(400) => (
            hyper::Request::post(handler::DEBUG_PATH).body(message.clone()),
            Value::Null,
        ),
        Some(500) => (
            hyper::Request::get("/debug/placements/test-ns/test-placement").body(String::new()),
            json!({"placementGet": message}),
        ),
        other => return Err(format!("no situation known for input httpStatus {other:?}")),
    };
    let request = request
        .map_err(|e| format!("the request: {e}"))?
        .map(|body| http_body_util::Full::new(hyper::body::Bytes::from(body)));
    let (mut parts, body) = request.into_parts();
    parts.headers.insert(
        hyper::header::AUTHORIZATION,
        hyper::header::HeaderValue::from_str(&format!("Bearer {TOKEN}")).map_err(|e| e.to_string())?,
    );
    let hub = Hub {
        objects: shared_objects(),
        failure,
    };
    let metrics = ocm_score_hub::explain_server::metrics::Metrics::default();
    let response = handler::respond(
        &Auth::of(None),
        &hub,
        &metrics,
        hyper::Request::from_parts(parts, body),
        jiff::Timestamp::now(),
    )
    .await;
    let e = &case["expect"];
    let got_status = u64::from(response.status().as_u16());
    ensure(Some(got_status) == e["httpStatus"].as_u64(), || {
        format!("status {got_status} not {}", e["httpStatus"])
    })?;
    let content_type = response
        .headers()
        .get(hyper::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    ensure(Some(content_type.as_str()) == e["contentType"].as_str(), || {
        format!("content type {content_type:?} not {}", e["contentType"])
    })?;
    let bytes = match http_body_util::BodyExt::collect(response.into_body()).await {
        Ok(collected) => collected.to_bytes(),
        Err(never) => match never {},
    };
    let got: Value = serde_json::from_slice(&bytes).map_err(|e| format!("the body is no JSON: {e}"))?;
    let keys = |v: &Value| v.as_object().map(|m| m.keys().cloned().collect::<Vec<_>>());
    ensure(keys(&got) == keys(&e["body"]), || {
        format!("body {got} has other keys than {}", e["body"])
    })?;
    let want = s(&e["body"]["error"]);
    ensure(!want.is_empty() && s(&got["error"]).contains(&want), || {
        format!("body {got}: its error does not carry {want:?}")
    })
}

/// The name our answer gives the stub's prioritizer `name`: our prioritizers are kinds, and an
/// add-on's is the one that carries a name of the caller's.
fn stub_prioritizer_name(name: &str) -> String {
    format!("AddOn/{name}/stub")
}

/// OCM's stubbed scheduler's results as our scheduler's [`ScheduleResult`] over the vector's hub:
/// the filters' survivors, the prioritizers' scores and the totals (OCM's stub hands the totals
/// over; ours are the weighted sums of the same feasible clusters).
fn stub_result(snapshot: &HubSnapshot, stub: &Value) -> Result<ScheduleResult, String> {
    let id = |name: &Value| {
        snapshot
            .cluster_id(&s(name))
            .ok_or_else(|| format!("the stub names cluster {name}, which the hub lacks"))
    };
    let filter_records = list(&stub["filterResults"])
        .iter()
        .map(|f| {
            Ok(FilterRecord {
                name: s(&f["name"]),
                clusters: list(&f["filteredClusters"])
                    .iter()
                    .map(id)
                    .collect::<Result<_, String>>()?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let feasible: Vec<ClusterId> = filter_records
        .last()
        .map(|f| f.clusters.clone())
        .unwrap_or_default();
    let score_of = |scores: &Value, c: ClusterId| scores[snapshot.cluster_name(c)].as_i64();
    let prioritizers = list(&stub["prioritizerResults"])
        .iter()
        .map(|p| ScheduledPrioritizer {
            kind: PrioritizerKind::AddOn {
                resource_name: s(&p["name"]),
                score_name: "stub".to_owned(),
            },
            weight: p["weight"].as_i64().unwrap_or(0) as i32,
            configuration: None,
            scores: feasible.iter().map(|&c| score_of(&p["scores"], c)).collect(),
            addon: None,
        })
        .collect();
    let totals: Vec<i64> = feasible
        .iter()
        .map(|&c| score_of(&stub["prioritizerScores"], c).unwrap_or(0))
        .collect();
    let mut ranking: Vec<u32> = (0..feasible.len() as u32).collect();
    ranking.sort_by(|&a, &b| {
        let (a, b) = (a as usize, b as usize);
        totals[b].cmp(&totals[a]).then_with(|| {
            snapshot
                .cluster_name(feasible[a])
                .cmp(snapshot.cluster_name(feasible[b]))
        })
    });
    let selected = ranking.iter().map(|&i| feasible[i as usize]).collect();
    Ok(ScheduleResult {
        filter_records,
        rejected: Vec::new(),
        filters_completed: true,
        feasible,
        prioritizers,
        totals,
        ranking,
        selected,
        unscheduled: 0,
        status: Status::success(),
        requeue_at_ns: None,
        aborted: false,
    })
}

/// The answer our code makes of the stub scheduler's results ([`DebugAnswer::scheduled`], what
/// the handler answers with), and (for the dry run) the same request scheduled for real through
/// the handler.
async fn aggregate(case: &Value) -> Check {
    let hub_objects = objects(&case["objects"]);
    let placement = match hub_objects.placements.first() {
        Some(p) => p.clone(),
        None => serde_json::from_value(case["request"]["body"].clone())
            .map_err(|e| format!("the request's placement: {e}"))?,
    };
    let snapshot = HubSnapshot::new(hub_objects).map_err(|e| format!("the vector's hub: {e}"))?;
    let result = stub_result(&snapshot, &case["schedulerStub"])?;
    let got = json_of(&DebugAnswer::scheduled(&snapshot, &placement, &result));
    let e = &case["expect"];
    for key in ["filteredPipelineResults", "aggregatedScores"] {
        if let Some(want) = e.get(key) {
            ensure(&got[key] == want, || format!("{key}: {} not {want}", got[key]))?;
        }
    }
    if let Some(want) = e.get("prioritizeResults") {
        let mut want = want.clone();
        for p in want.as_array_mut().into_iter().flatten() {
            p["name"] = json!(stub_prioritizer_name(&s(&p["name"])));
        }
        ensure(got["prioritizeResults"] == want, || {
            format!("prioritizeResults: {} not {want}", got["prioritizeResults"])
        })?;
    }
    if let Some(want) = e.get("filteredPipelineResultsCount") {
        let count = list(&got["filteredPipelineResults"]).len();
        ensure(want.as_u64() == Some(count as u64), || {
            format!("filteredPipelineResultsCount {count} not {want}")
        })?;
    }
    if let Some(want) = e.get("placement") {
        let auth = Auth::of(None);
        let hub = Hub {
            objects: objects(&case["objects"]),
            failure: Value::Null,
        };
        let reply = run(&auth, &hub, &case["request"]).await;
        let body = json_of(&reply.answer);
        ensure(reply.status.as_u16() == 200, || {
            format!("the dry run failed: {body}")
        })?;
        if e.get("error").is_some_and(|v| v.as_str() == Some("")) {
            ensure(body.get("error").is_none(), || {
                format!("the dry run has an error: {body}")
            })?;
        }
        for field in ["name", "namespace"] {
            ensure(body["placement"]["metadata"][field] == want[field], || {
                format!(
                    "placement {field}: {} not {}",
                    body["placement"]["metadata"][field], want[field]
                )
            })?;
        }
        ensure(body["placement"].get("status").is_none(), || {
            "status echoed".into()
        })?;
    }
    Ok(())
}

/// The clusters handed to scheduling: with an empty spec the predicate passes them all.
async fn candidates(case: &Value) -> Check {
    let auth = Auth::of(None);
    let hub = Hub {
        objects: objects(&case["objects"]),
        failure: Value::Null,
    };
    let reply = run(&auth, &hub, &case["request"]).await;
    let body = json_of(&reply.answer);
    ensure(reply.status.as_u16() == 200, || {
        format!("status {}: {body}", reply.status)
    })?;
    if case["expect"]
        .get("error")
        .is_some_and(|v| v.as_str() == Some(""))
    {
        ensure(body.get("error").is_none(), || {
            format!("an error where none belongs: {body}")
        })?;
    }
    let passed = list(&body["filteredPipelineResults"][0]["filteredClusters"]).len() as u64;
    let want = case["expect"]["candidateCount"].as_u64().unwrap_or(u64::MAX);
    ensure(passed == want, || {
        format!("{passed} candidates, not {want}: {body}")
    })
}

/// The `expect` keys each runner above checks: a key a vector gains that no runner reads fails
/// the vector, so an expectation is never silently ignored.
fn checked_keys(kind: &str) -> &'static [&'static str] {
    match kind {
        "debugHttp" => &["httpStatus", "errorContains", "error", "sarVerb"],
        "debugPermissionErrMapping" => &["httpStatus"],
        "debugReportErr" => &["httpStatus", "contentType", "body"],
        "debugAggregate" => &[
            "filteredPipelineResults",
            "prioritizeResults",
            "aggregatedScores",
            "filteredPipelineResultsCount",
            "placement",
            "error",
        ],
        "debugCandidates" => &["candidateCount", "error"],
        _ => &[],
    }
}

fn expectations_are_checked(case: &Value, kind: &str) -> Check {
    let keys: Vec<&String> = case["expect"]
        .as_object()
        .map(|m| m.keys().collect())
        .unwrap_or_default();
    ensure(!keys.is_empty(), || "the vector expects nothing".into())?;
    match keys.iter().find(|k| !checked_keys(kind).contains(&k.as_str())) {
        Some(key) => Err(format!("expect key {key:?} is not checked by the {kind} runner")),
        None => Ok(()),
    }
}

#[tokio::test]
async fn ocm_debug_endpoint_vectors() {
    let text = std::fs::read_to_string(VECTORS).expect("the OCM unit vectors are readable");
    let cases: Vec<Value> = serde_norway::from_str(&text).expect("vectors are a YAML list");
    let mut ran: BTreeMap<String, usize> = BTreeMap::new();
    let mut failed = Vec::new();
    for case in &cases {
        let kind = s(&case["kind"]);
        if !kind.starts_with("debug") {
            continue;
        }
        if let Err(why) = expectations_are_checked(case, &kind) {
            failed.push(format!("{}: {why}", s(&case["name"])));
        }
        let result = match kind.as_str() {
            "debugHttp" => debug_http(case).await,
            "debugPermissionErrMapping" => permission_mapping(case).await,
            "debugReportErr" => report_err(case).await,
            "debugAggregate" => aggregate(case).await,
            "debugCandidates" => candidates(case).await,
            _ => continue,
        };
        *ran.entry(kind).or_default() += 1;
        if let Err(why) = result {
            failed.push(format!("{}: {why}", s(&case["name"])));
        }
    }
    // Every debug vector of the file, by kind: a vector added or dropped shows here.
    let want: BTreeMap<String, usize> = [
        ("debugAggregate", 2),
        ("debugCandidates", 2),
        ("debugHttp", 14),
        ("debugPermissionErrMapping", 5),
        ("debugReportErr", 1),
    ]
    .into_iter()
    .map(|(k, n)| (k.to_owned(), n))
    .collect();
    assert_eq!(ran, want, "the debug vectors run, by kind");
    assert!(
        failed.is_empty(),
        "{} failed:\n  {}",
        failed.len(),
        failed.join("\n  ")
    );
}

/// Our `decisionScores` key: the clusters of `decisions`, in the same order, each with the total
/// it was ranked by; and the placement is echoed with its api v1.3.0 `sortBy` unchanged.
#[tokio::test]
async fn decisions_come_with_their_scores() {
    let mut objects = objects(&json!({
        "placements": [{"namespace": "test-ns", "name": "by-score", "spec": {
            "clusterSets": ["test-set"], "numberOfClusters": 2, "sortBy": "Score",
            "prioritizerPolicy": {"mode": "Exact", "configurations": [{"scoreCoordinate": {
                "type": "AddOn", "addOn": {"resourceName": "usage", "scoreName": "cpu"}}, "weight": 2}]}}}],
        "clusters": [
            {"name": "cluster-a", "labels": {"clusterset": "test-set"}},
            {"name": "cluster-b", "labels": {"clusterset": "test-set"}},
            {"name": "cluster-c", "labels": {"clusterset": "test-set"}},
        ],
        "clusterSets": [{"name": "test-set", "clusterSelector": {"selectorType": "LabelSelector",
                          "labelSelector": {"matchLabels": {"clusterset": "test-set"}}}}],
        "bindings": [{"namespace": "test-ns", "name": "test-set", "clusterSet": "test-set"}],
    }));
    for (cluster, cpu) in [("cluster-a", 10), ("cluster-b", 40), ("cluster-c", -30)] {
        objects.scores.push(
            serde_json::from_value(json!({"metadata": {"namespace": cluster, "name": "usage"},
                "status": {"scores": [{"name": "cpu", "value": cpu}]}}))
            .expect("score"),
        );
    }
    let hub = Hub {
        objects,
        failure: Value::Null,
    };
    let reply = run(
        &Auth::of(None),
        &hub,
        &json!({"method": "GET", "path": "/debug/placements/test-ns/by-score"}),
    )
    .await;
    let body = json_of(&reply.answer);
    assert_eq!(reply.status, hyper::StatusCode::OK, "{body}");
    assert_eq!(body["decisions"], json!(["cluster-b", "cluster-a"]));
    assert_eq!(
        body["decisionScores"],
        json!([{"clusterName": "cluster-b", "score": 80}, {"clusterName": "cluster-a", "score": 20}])
    );
    assert_eq!(body["placement"]["spec"]["sortBy"], "Score");
}
