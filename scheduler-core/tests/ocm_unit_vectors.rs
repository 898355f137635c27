//! The vectors translated from OCM's own unit and integration tests
//! (`tests/conformance/ocm-unit/ocm-unit-cases.yaml`), run against the public placement API.
//!
//! Every vector runs, except those whose subject is not part of a scheduling library. Those are
//! skipped by kind, each with its reason (see `skip_reason`; `EXPECTED_SKIPS` names each one):
//! - `debugHttp`, `debugReportErr`, `debugPermissionErrMapping`: the HTTP debug endpoint's status
//!   codes, JSON error bodies and SubjectAccessReview checks. This crate has no HTTP server; they
//!   run against `ocm-score-hub explain-server`'s handler in
//!   `hub-controller/tests/explain_server_vectors.rs`.
//! - `debugAggregate`: the endpoint's JSON envelope around a *stubbed* scheduler; it runs there too.

use k8s_openapi::jiff::Timestamp;
use ocm_score_api::{
    AddOnPlacementScore, AddOnPlacementScoreItem, AddOnPlacementScoreStatus, ClusterDecision,
    ClusterSelector, Condition, ManagedCluster, ManagedClusterClaim, ManagedClusterSet,
    ManagedClusterSetBinding, ManagedClusterSetBindingSpec, ManagedClusterSetSpec, ManagedClusterSpec,
    ManagedClusterStatus, ObjectMeta, Placement, PlacementDecision, PlacementDecisionStatus, PlacementSpec,
    PlacementStatus, Quantity, Taint, Time,
};
use ocm_score_scheduler::placement::candidates;
use ocm_score_scheduler::placement::conditions::{self, SatisfiedInputs};
use ocm_score_scheduler::placement::events::{self, EventType};
use ocm_score_scheduler::placement::filters::{predicate, taints};
use ocm_score_scheduler::placement::prioritizers::{self, ScoreContext};
use ocm_score_scheduler::placement::schedule::{self, ScheduleResult};
use ocm_score_scheduler::placement::selector::{ClusterMatcher, cluster_claims};
use ocm_score_scheduler::placement::triggers::{self, Trigger};
use ocm_score_scheduler::placement::weights::PrioritizerKind;
use ocm_score_scheduler::placement::writes::{self, DecisionWrite};
use ocm_score_scheduler::placement::{
    ClusterId, HubObjects, HubSnapshot, Status, StatusCode, SyncOutcome, groups, sync, sync_placement,
};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

const VECTORS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/conformance/ocm-unit/ocm-unit-cases.yaml"
);

type Check = Result<(), String>;

fn ensure(ok: bool, what: impl FnOnce() -> String) -> Check {
    if ok { Ok(()) } else { Err(what()) }
}

fn eq<T: PartialEq + std::fmt::Debug>(what: &str, got: T, want: T) -> Check {
    ensure(got == want, || format!("{what}: got {got:?}, want {want:?}"))
}

// ---------------------------------------------------------------------------------------------
// Building objects from the vector notation
// ---------------------------------------------------------------------------------------------

fn s(v: &Value) -> String {
    v.as_str().unwrap_or_default().to_string()
}

fn str_map(v: Option<&Value>) -> BTreeMap<String, String> {
    v.and_then(Value::as_object)
        .map(|m| m.iter().map(|(k, v)| (k.clone(), s(v))).collect())
        .unwrap_or_default()
}

fn time(v: Option<&Value>) -> Option<Time> {
    v.and_then(Value::as_str)
        .map(|t| Time(t.parse::<Timestamp>().expect("RFC 3339 time in a vector")))
}

fn now_of(v: &Value) -> Timestamp {
    time(v.get("now")).map_or(Timestamp::UNIX_EPOCH, |t| t.0)
}

/// `{generate: {prefix, from, to}}` or `{lexSlice: {..., start, end}}` or a plain list.
fn names(v: &Value) -> Vec<String> {
    if let Some(g) = v.get("generate") {
        let prefix = s(&g["prefix"]);
        let (from, to) = (g["from"].as_u64().unwrap_or(1), g["to"].as_u64().unwrap_or(0));
        return (from..=to).map(|i| format!("{prefix}{i}")).collect();
    }
    if let Some(l) = v.get("lexSlice") {
        let prefix = s(&l["prefix"]);
        let (from, to) = (l["from"].as_u64().unwrap_or(1), l["to"].as_u64().unwrap_or(0));
        let mut all: Vec<String> = (from..=to).map(|i| format!("{prefix}{i}")).collect();
        all.sort();
        let (start, end) = (
            l["start"].as_u64().unwrap_or(0) as usize,
            l["end"].as_u64().unwrap_or(0) as usize,
        );
        return all[start..end].to_vec();
    }
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|x| x.as_str().map_or_else(|| s(&x["name"]), str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Cluster entries: a list of cluster objects or a `generate` spec (plain clusters).
fn cluster_values(v: Option<&Value>) -> Vec<Value> {
    match v {
        Some(Value::Array(a)) => a.clone(),
        Some(other) if other.get("generate").is_some() => names(other)
            .into_iter()
            .map(|n| serde_json::json!({"name": n}))
            .collect(),
        _ => Vec::new(),
    }
}

fn quantities(v: Option<&Value>) -> BTreeMap<String, Quantity> {
    str_map(v).into_iter().map(|(k, q)| (k, Quantity(q))).collect()
}

fn cluster(v: &Value) -> ManagedCluster {
    let labels = str_map(v.get("labels"));
    let mut allocatable = quantities(v.get("allocatable"));
    let mut capacity = quantities(v.get("capacity"));
    if let Some(res) = v.get("res").and_then(Value::as_array) {
        let q = |i: usize| Quantity(s(&res[i]));
        allocatable.insert("cpu".into(), q(0));
        capacity.insert("cpu".into(), q(1));
        allocatable.insert("memory".into(), q(2));
        capacity.insert("memory".into(), q(3));
    }
    let claims: Vec<ManagedClusterClaim> = str_map(v.get("claims"))
        .into_iter()
        .map(|(name, value)| ManagedClusterClaim { name, value })
        .collect();
    let taints = v
        .get("taints")
        .and_then(Value::as_array)
        .map(|ts| {
            ts.iter()
                .map(|t| Taint {
                    key: s(&t["key"]),
                    value: t.get("value").and_then(Value::as_str).map(str::to_string),
                    effect: s(&t["effect"]),
                    time_added: time(t.get("timeAdded")),
                })
                .collect()
        })
        .unwrap_or_default();
    let terminating = v.get("terminating").and_then(Value::as_bool).unwrap_or(false);
    ManagedCluster {
        metadata: ObjectMeta {
            name: Some(s(&v["name"])),
            labels: Some(labels),
            deletion_timestamp: terminating.then_some(Time(Timestamp::UNIX_EPOCH)),
            ..ObjectMeta::default()
        },
        spec: ManagedClusterSpec {
            hub_accepts_client: true,
            taints,
            ..ManagedClusterSpec::default()
        },
        status: Some(ManagedClusterStatus {
            allocatable,
            capacity,
            cluster_claims: claims,
            ..ManagedClusterStatus::default()
        }),
    }
}

/// The vectors are written without CRD defaulting: an omitted weight is 0.
fn placement(v: &Value) -> Placement {
    let mut spec_value = v
        .get("spec")
        .cloned()
        .unwrap_or(Value::Object(Default::default()));
    if let Some(configs) = spec_value
        .pointer_mut("/prioritizerPolicy/configurations")
        .and_then(Value::as_array_mut)
    {
        for c in configs {
            if let Some(obj) = c.as_object_mut() {
                obj.entry("weight").or_insert(Value::from(0));
                if let Some(sc) = obj.get_mut("scoreCoordinate").and_then(Value::as_object_mut) {
                    sc.entry("type").or_insert(Value::from(""));
                }
            }
        }
    }
    let spec: PlacementSpec = serde_json::from_value(spec_value).expect("placement spec in a vector");
    let status = v.get("status").map(|st| {
        let mut st = st.clone();
        // Vectors leave lastTransitionTime out; any fixed instant will do.
        if let Some(conds) = st.get_mut("conditions").and_then(Value::as_array_mut) {
            for c in conds {
                c.as_object_mut().map(|o| {
                    o.entry("lastTransitionTime")
                        .or_insert(Value::from("2020-01-01T00:00:00Z"))
                });
            }
        }
        serde_json::from_value::<PlacementStatus>(st).expect("placement status in a vector")
    });
    let annotations = v.get("annotations").map(|a| str_map(Some(a)));
    Placement {
        metadata: ObjectMeta {
            namespace: Some(s(&v["namespace"])),
            name: Some(s(&v["name"])),
            annotations,
            ..ObjectMeta::default()
        },
        spec,
        status,
    }
}

fn decision(v: &Value) -> PlacementDecision {
    PlacementDecision {
        metadata: ObjectMeta {
            namespace: Some(s(&v["namespace"])),
            name: Some(s(&v["name"])),
            labels: v.get("labels").filter(|l| !l.is_null()).map(|l| str_map(Some(l))),
            ..ObjectMeta::default()
        },
        status: Some(PlacementDecisionStatus {
            decisions: names(&v["decisions"])
                .into_iter()
                .map(|cluster_name| ClusterDecision {
                    cluster_name,
                    reason: String::new(),
                    score: None,
                })
                .collect(),
            extra: Default::default(),
        }),
    }
}

fn score(v: &Value) -> AddOnPlacementScore {
    AddOnPlacementScore {
        metadata: ObjectMeta {
            namespace: Some(s(&v["namespace"])),
            name: Some(s(&v["name"])),
            ..ObjectMeta::default()
        },
        status: Some(AddOnPlacementScoreStatus {
            scores: v["scores"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|i| AddOnPlacementScoreItem {
                            name: s(&i["name"]),
                            value: i["value"].as_i64().unwrap_or(0) as i32,
                        })
                        .collect()
                })
                .unwrap_or_default(),
            valid_until: time(v.get("validUntil")),
            ..AddOnPlacementScoreStatus::default()
        }),
    }
}

fn cluster_set(v: &Value) -> ManagedClusterSet {
    ManagedClusterSet {
        metadata: ObjectMeta {
            name: Some(s(&v["name"])),
            ..ObjectMeta::default()
        },
        spec: ManagedClusterSetSpec {
            cluster_selector: v.get("clusterSelector").map(|cs| {
                let mut cs = cs.clone();
                // Vector notation: an omitted selectorType is the Go zero value "".
                cs.as_object_mut()
                    .map(|o| o.entry("selectorType").or_insert(Value::from("")));
                serde_json::from_value(cs).expect("cluster selector in a vector")
            }),
            ..ManagedClusterSetSpec::default()
        },
        status: None,
    }
}

fn binding(v: &Value) -> ManagedClusterSetBinding {
    ManagedClusterSetBinding {
        metadata: ObjectMeta {
            namespace: Some(s(&v["namespace"])),
            name: Some(s(&v["name"])),
            ..ObjectMeta::default()
        },
        spec: ManagedClusterSetBindingSpec {
            cluster_set: s(&v["clusterSet"]),
            ..ManagedClusterSetBindingSpec::default()
        },
        status: None,
    }
}

fn list<T>(v: Option<&Value>, f: impl Fn(&Value) -> T) -> Vec<T> {
    v.and_then(Value::as_array)
        .map(|a| a.iter().map(f).collect())
        .unwrap_or_default()
}

fn snapshot(objects: HubObjects) -> HubSnapshot {
    HubSnapshot::new(objects).expect("vector objects form a valid snapshot")
}

fn ids(snap: &HubSnapshot, names: &[String]) -> Vec<ClusterId> {
    names
        .iter()
        .map(|n| snap.cluster_id(n).expect("cluster in snapshot"))
        .collect()
}

fn cluster_names(snap: &HubSnapshot, ids: &[ClusterId]) -> Vec<String> {
    ids.iter().map(|id| snap.cluster_name(*id).to_string()).collect()
}

fn code(v: &Value) -> StatusCode {
    match v.as_str() {
        Some("Warning") => StatusCode::Warning,
        Some("Error") => StatusCode::Error,
        Some("Misconfigured") => StatusCode::Misconfigured,
        _ => StatusCode::Success,
    }
}

fn status_of(v: &Value) -> Status {
    Status {
        code: code(&v["code"]),
        plugin: s(&v["plugin"]),
        message: s(&v["message"]),
    }
}

fn check_status(got: &Status, want: &Value) -> Check {
    eq("status code", got.code, code(&want["code"]))?;
    if let Some(p) = want.get("plugin") {
        eq("status plugin", got.plugin.as_str(), p.as_str().unwrap_or(""))?;
    }
    if let Some(m) = want.get("message") {
        eq("status message", got.message.as_str(), m.as_str().unwrap_or(""))?;
    }
    Ok(())
}

fn score_map(v: &Value) -> BTreeMap<String, i64> {
    v.as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_i64().unwrap_or(0)))
                .collect()
        })
        .unwrap_or_default()
}

fn scores_by_name(
    snap: &HubSnapshot,
    feasible: &[ClusterId],
    scores: &[Option<i64>],
) -> BTreeMap<String, i64> {
    feasible
        .iter()
        .zip(scores)
        .filter_map(|(id, s)| s.map(|s| (snap.cluster_name(*id).to_string(), s)))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Kinds
// ---------------------------------------------------------------------------------------------

/// The hub of a schedule, filter or prioritizer vector: its placement, decisions and scores,
/// and its clusters, returned in the vector's order (the plugin input order).
fn plugin_case(case: &Value) -> (HubSnapshot, Placement, Vec<ClusterId>) {
    let clusters: Vec<ManagedCluster> = cluster_values(case.get("clusters")).iter().map(cluster).collect();
    let order: Vec<String> = clusters
        .iter()
        .map(|c| c.metadata.name.clone().unwrap_or_default())
        .collect();
    let p = placement(&case["placement"]);
    let snap = snapshot(HubObjects {
        clusters,
        decisions: list(case.get("placementDecisions"), decision),
        scores: list(case.get("addOnPlacementScores"), score),
        placements: vec![p.clone()],
        ..HubObjects::default()
    });
    let input = ids(&snap, &order);
    (snap, p, input)
}

fn run_schedule(case: &Value) -> Check {
    let (snap, p, input) = plugin_case(case);
    let result = schedule::schedule(&snap, &p, &input, now_of(case)).map_err(|e| e.to_string())?;
    let expect = &case["expect"];
    if let Some(d) = expect.get("decisions") {
        eq("decisions", cluster_names(&snap, &result.selected), names(d))?;
    }
    eq(
        "unscheduled",
        result.unscheduled,
        expect["unscheduled"].as_i64().unwrap_or(0),
    )?;
    let records: Vec<(String, Vec<String>)> = result
        .filter_records
        .iter()
        .map(|r| (r.name.clone(), cluster_names(&snap, &r.clusters)))
        .collect();
    let want_records: Vec<(String, Vec<String>)> = list(expect.get("filterResults"), |r| {
        (s(&r["name"]), names(&r["filteredClusters"]))
    });
    eq("filterResults", records, want_records)?;
    let mut got: Vec<(String, i32, BTreeMap<String, i64>)> = result
        .prioritizers
        .iter()
        .map(|p| {
            (
                p.name(),
                p.weight,
                scores_by_name(&snap, &result.feasible, &p.scores),
            )
        })
        .collect();
    let mut want: Vec<(String, i32, BTreeMap<String, i64>)> = list(expect.get("prioritizerResults"), |r| {
        (
            s(&r["name"]),
            r["weight"].as_i64().unwrap_or(0) as i32,
            score_map(&r["scores"]),
        )
    });
    got.sort();
    want.sort();
    eq("prioritizerResults", got, want)?;
    check_status(&result.status, &expect["status"])
}

fn run_filter(case: &Value) -> Check {
    let (snap, p, input) = plugin_case(case);
    let now_ns = now_of(case).as_nanosecond();
    let (in_decision, decision_clusters) = schedule::existing_decisions(&snap, &p);
    let (out, status) = match case["plugin"].as_str() {
        Some("Predicate") => predicate::filter(&snap, &p, &input),
        Some("TaintToleration") => taints::filter(&snap, &p, &input, &in_decision, now_ns),
        other => return Err(format!("unknown filter plugin {other:?}")),
    };
    let expect = &case["expect"];
    let got: BTreeSet<String> = cluster_names(&snap, &out.passed).into_iter().collect();
    let want: BTreeSet<String> = names(&expect["filtered"]).into_iter().collect();
    eq("filtered count", out.passed.len(), want.len())?;
    eq("filtered", got, want)?;
    if let Some(st) = expect.get("status") {
        check_status(&status, st)?;
    }
    if let Some(rq) = expect.get("requeueTime") {
        // Upstream's plugin test asks for the requeue time whatever the filter returned.
        let got = taints::requeue_time(&snap, &p, &decision_clusters, now_ns);
        let want = time(Some(rq)).map(|t| t.0.as_nanosecond());
        eq("requeueTime", got, want)?;
    }
    Ok(())
}

fn run_prioritizer(case: &Value) -> Check {
    let (snap, p, feasible) = plugin_case(case);
    let kind = match &case["prioritizer"] {
        Value::String(name) => match name.as_str() {
            "Balance" => PrioritizerKind::Balance,
            "Steady" => PrioritizerKind::Steady,
            "ResourceAllocatableCPU" => PrioritizerKind::ResourceAllocatableCpu,
            "ResourceAllocatableMemory" => PrioritizerKind::ResourceAllocatableMemory,
            other => return Err(format!("unknown prioritizer {other}")),
        },
        v => PrioritizerKind::AddOn {
            resource_name: s(&v["resourceName"]),
            score_name: s(&v["scoreName"]),
        },
    };
    let (in_decision, _) = schedule::existing_decisions(&snap, &p);
    let ctx = ScoreContext {
        snapshot: &snap,
        placement: &p,
        feasible: &feasible,
        in_decision: &in_decision,
        now_ns: now_of(case).as_nanosecond(),
    };
    let scored = prioritizers::score(&kind, &ctx);
    let expect = &case["expect"];
    eq(
        "scores",
        scores_by_name(&snap, &feasible, &scored.scores),
        score_map(&expect["scores"]),
    )?;
    if let Some(st) = expect.get("status") {
        check_status(&scored.status, st)?;
    }
    Ok(())
}

/// `objects` of controllerSync / validBindings / availableClusters / enqueue vectors.
fn hub_objects(o: &Value) -> HubObjects {
    HubObjects {
        clusters: cluster_values(o.get("clusters")).iter().map(cluster).collect(),
        cluster_sets: list(o.get("clusterSets"), cluster_set),
        bindings: list(o.get("bindings"), binding),
        placements: list(o.get("placements"), placement),
        decisions: list(o.get("placementDecisions"), decision),
        scores: Vec::new(),
    }
}

fn check_group_statuses(got: &[ocm_score_api::DecisionGroupStatus], want: &Value) -> Check {
    if let Some(count) = want.get("count") {
        eq(
            "decisionGroups count",
            got.len() as u64,
            count.as_u64().unwrap_or(0),
        )?;
        for (i, part) in want["partial"].as_array().into_iter().flatten().enumerate() {
            let g = got.get(i).ok_or("missing decision group")?;
            eq(
                "decisionGroups clusterCount",
                i64::from(g.cluster_count),
                part["clusterCount"].as_i64().unwrap_or(0),
            )?;
        }
        return Ok(());
    }
    let got: Vec<(i64, String, Vec<String>, i64)> = got
        .iter()
        .map(|g| {
            (
                i64::from(g.decision_group_index),
                g.decision_group_name.clone(),
                g.decisions.clone(),
                i64::from(g.cluster_count),
            )
        })
        .collect();
    let want: Vec<(i64, String, Vec<String>, i64)> = list(Some(want), |g| {
        (
            g["decisionGroupIndex"].as_i64().unwrap_or(0),
            s(&g["decisionGroupName"]),
            names(&g["decisions"]),
            g["clusterCount"].as_i64().unwrap_or(0),
        )
    });
    eq("decisionGroups", got, want)
}

fn run_controller_sync(case: &Value) -> Check {
    let p = placement(&case["placement"]);
    let mut objects = hub_objects(&case["objects"]);
    let stub = &case["schedulerStub"];
    // The stubbed scheduler returns these clusters; they must exist for group selectors.
    for d in stub["decisions"].as_array().into_iter().flatten() {
        let c = cluster(d);
        match objects
            .clusters
            .iter_mut()
            .find(|x| x.metadata.name == c.metadata.name)
        {
            Some(existing) => existing
                .metadata
                .labels
                .get_or_insert_default()
                .extend(str_map(d.get("labels"))),
            None => objects.clusters.push(c),
        }
    }
    objects.placements.push(p.clone());
    let snap = snapshot(objects);
    let now = Timestamp::UNIX_EPOCH;
    let expect = &case["expect"];
    let result = match sync_placement(&snap, &p, now).map_err(|e| e.to_string())? {
        SyncOutcome::Skipped(_) => {
            return eq("apiActions", Vec::<String>::new(), names(&expect["apiActions"]));
        }
        SyncOutcome::Scheduled(_) => {
            let candidates = candidates::candidates(&snap, &p).map_err(|e| e.to_string())?;
            let selected = ids(&snap, &names(&stub["decisions"]));
            let stubbed = stub_schedule(selected, stub["unscheduled"].as_i64().unwrap_or(0));
            ocm_score_scheduler::placement::sync::conclude(&snap, &p, candidates, stubbed, now)
        }
    };
    let mut actions: Vec<String> = result.writes.iter().map(|w| w.verb().to_string()).collect();
    if result.status_changed {
        actions.push("patch".into());
    }
    eq("apiActions", actions, names(&expect["apiActions"]))?;
    if let Some(created) = expect.get("createdPD") {
        let Some(DecisionWrite::Create(pd)) = result.writes.first() else {
            return Err("first write is not a create".into());
        };
        let count = pd.status.as_ref().map_or(0, |s| s.decisions.len());
        eq(
            "created decision count",
            count as u64,
            created["decisionCount"].as_u64().unwrap_or(0),
        )?;
    }
    if let Some(st) = expect.get("placementStatus") {
        eq(
            "numberOfSelectedClusters",
            i64::from(result.status.number_of_selected_clusters),
            st["numberOfSelectedClusters"].as_i64().unwrap_or(0),
        )?;
        check_group_statuses(&result.status.decision_groups, &st["decisionGroups"])?;
    }
    Ok(())
}

/// A schedule result as the stubbed scheduler of the controller tests returns it.
fn stub_schedule(selected: Vec<ClusterId>, unscheduled: i64) -> ScheduleResult {
    ScheduleResult {
        filter_records: Vec::new(),
        rejected: Vec::new(),
        filters_completed: true,
        feasible: selected.clone(),
        prioritizers: Vec::new(),
        totals: vec![0; selected.len()],
        ranking: (0..selected.len() as u32).collect(),
        selected,
        unscheduled,
        status: Status::success(),
        requeue_at_ns: None,
        aborted: false,
    }
}

fn run_bind(case: &Value) -> Check {
    let p = placement(&case["placement"]);
    let selected_values: Vec<Value> = match &case["selectedClusters"] {
        Value::Array(a) => a.clone(),
        other => names(other)
            .into_iter()
            .map(|n| serde_json::json!({"name": n}))
            .collect(),
    };
    let selected_names: Vec<String> = selected_values.iter().map(|v| s(&v["name"])).collect();
    let snap = snapshot(HubObjects {
        clusters: selected_values.iter().map(cluster).collect(),
        decisions: list(case.get("existingPlacementDecisions"), decision),
        placements: vec![p.clone()],
        ..HubObjects::default()
    });
    let (groups, _) = groups::decision_groups(&snap, &p, &ids(&snap, &selected_names));
    let pages = groups::pages(p.metadata.name.as_deref().unwrap_or(""), &groups);
    let pds: Vec<PlacementDecision> = pages
        .iter()
        .map(|pg| groups::placement_decision(&snap, &p, pg))
        .collect();
    let (writes, _) = writes::plan(&snap, &p, &pds, "", &Status::success());
    let expect = &case["expect"];
    eq(
        "apiActions",
        writes.iter().map(|w| w.verb().to_string()).collect::<Vec<_>>(),
        names(&expect["apiActions"]),
    )?;
    for (i, want) in expect["writes"].as_array().into_iter().flatten().enumerate() {
        let w = writes.get(i).ok_or_else(|| format!("write {i} missing"))?;
        eq("verb", w.verb(), want["verb"].as_str().unwrap_or(""))?;
        let (labels, decisions): (BTreeMap<String, String>, Option<Vec<String>>) = match w {
            DecisionWrite::Create(pd) => (
                pd.metadata.labels.clone().unwrap_or_default(),
                pd.status
                    .as_ref()
                    .map(|s| s.decisions.iter().map(|d| d.cluster_name.clone()).collect()),
            ),
            DecisionWrite::PatchStatus { status, .. } => (
                BTreeMap::new(),
                Some(status.decisions.iter().map(|d| d.cluster_name.clone()).collect()),
            ),
            DecisionWrite::PatchMetadata { labels, .. } => (labels.clone(), None),
            DecisionWrite::Delete { .. } => (BTreeMap::new(), None),
        };
        for (k, v) in str_map(want.get("labels")) {
            eq(&format!("write {i} label {k}"), labels.get(&k).cloned(), Some(v))?;
        }
        if let Some(contains) = want.get("containsClusters") {
            let have: BTreeSet<String> = decisions.clone().unwrap_or_default().into_iter().collect();
            for n in names(contains) {
                ensure(have.contains(&n), || format!("write {i} lacks cluster {n}"))?;
            }
        }
        if let Some(count) = want.get("decisionCount") {
            eq(
                "decisionCount",
                decisions.map_or(0, |d| d.len()) as u64,
                count.as_u64().unwrap_or(0),
            )?;
        }
    }
    Ok(())
}

fn run_pd_write(case: &Value) -> Check {
    let p = placement(&case["placement"]);
    let existing = case.get("existingPD").filter(|v| !v.is_null()).map(decision);
    let new = decision(&case["newPD"]);
    let scores = score_map(&case["clusterScores"]);
    let note = events::score_note(scores.iter().map(|(k, v)| (k.as_str(), *v)).collect());
    let status = status_of(&case["status"]);
    let (mut writes, mut events) = (Vec::new(), Vec::new());
    writes::plan_one(
        &p,
        &new,
        existing.as_ref(),
        &note,
        &status,
        &mut writes,
        &mut events,
    );
    let expect = &case["expect"];
    eq(
        "eventCount",
        events.len() as u64,
        expect["eventCount"].as_u64().unwrap_or(0),
    )?;
    for (reason, present) in expect["reasons"].as_object().into_iter().flatten() {
        let has = events.iter().any(|e| e.reason.contains(reason.as_str()));
        eq(
            &format!("event {reason}"),
            has,
            present.as_bool().unwrap_or(false),
        )?;
    }
    if let Some(w) = expect.get("warningEventPresent") {
        eq(
            "warning event",
            events.iter().any(|e| e.type_ == EventType::Warning),
            w.as_bool().unwrap_or(false),
        )?;
    }
    Ok(())
}

fn run_satisfied(case: &Value) -> Check {
    let i = &case["input"];
    let in_spec = names(&i["clusterSetsInSpec"]);
    let eligible = names(&i["eligibleClusterSets"]);
    let status = i
        .get("status")
        .filter(|v| !v.is_null())
        .map_or_else(Status::success, status_of);
    let c = conditions::satisfied(&SatisfiedInputs {
        cluster_sets_in_spec: &in_spec,
        eligible_sets: &eligible,
        valid_bindings: i["numOfBindings"].as_u64().unwrap_or(0) as usize,
        available_clusters: i["numOfAvailableClusters"].as_u64().unwrap_or(0) as usize,
        selected: i["numOfFeasibleClusters"].as_u64().unwrap_or(0) as usize,
        unscheduled: i["numOfUnscheduledDecisions"].as_i64().unwrap_or(0),
        status: &status,
    });
    eq(
        "status",
        c.status,
        case["expect"]["status"].as_str().unwrap_or(""),
    )?;
    eq(
        "reason",
        c.reason,
        case["expect"]["reason"].as_str().unwrap_or(""),
    )
}

fn run_misconfigured(case: &Value) -> Check {
    let c = conditions::misconfigured(&status_of(&case["input"]["status"]));
    let e = &case["expect"];
    eq("status", c.status, e["status"].as_str().unwrap_or(""))?;
    eq("reason", c.reason, e["reason"].as_str().unwrap_or(""))?;
    eq("message", c.message.as_str(), e["message"].as_str().unwrap_or(""))
}

fn run_valid_bindings(case: &Value) -> Check {
    let snap = snapshot(hub_objects(&case["objects"]));
    let got = candidates::valid_bindings(&snap, case["namespace"].as_str().unwrap_or(""));
    eq("bindingNames", got, names(&case["expect"]["bindingNames"]))
}

fn run_eligible_sets(case: &Value) -> Check {
    let p = placement(&case["placement"]);
    let valid: Vec<String> = list(case.get("validBindings"), |b| s(&b["name"]));
    eq(
        "clusterSetNames",
        candidates::eligible_sets(&p, &valid),
        names(&case["expect"]["clusterSetNames"]),
    )
}

fn run_available_clusters(case: &Value) -> Check {
    let snap = snapshot(hub_objects(&case["objects"]));
    let got = candidates::available_clusters(&snap, &names(&case["clusterSetNames"]));
    let expect = &case["expect"];
    if expect.get("error").and_then(Value::as_bool) == Some(true) {
        return ensure(got.is_err(), || format!("expected an error, got {got:?}"));
    }
    let got = got.map_err(|e| e.to_string())?;
    eq(
        "clusterNames",
        cluster_names(&snap, &got),
        names(&expect["clusterNames"]),
    )
}

fn run_selector(case: &Value) -> Check {
    let c = cluster(&case["cluster"]);
    let name = c.metadata.name.clone().unwrap_or_default();
    let snap = snapshot(HubObjects {
        clusters: vec![c],
        ..HubObjects::default()
    });
    let selector: ClusterSelector =
        serde_json::from_value(case["clusterSelector"].clone()).map_err(|e| e.to_string())?;
    let matcher = ClusterMatcher::new(&selector)?;
    let id = snap.cluster_id(&name).ok_or("cluster missing")?;
    eq(
        "match",
        matcher.matches(&snap, id),
        case["expect"]["match"].as_bool().unwrap_or(false),
    )
}

fn run_claims(case: &Value) -> Check {
    let c = cluster(&case["cluster"]);
    eq(
        "claimCount",
        cluster_claims(&c).len() as u64,
        case["expect"]["claimCount"].as_u64().unwrap_or(0),
    )
}

fn run_enqueue(case: &Value) -> Check {
    let mut objects = hub_objects(&case["objects"]);
    let trigger = &case["trigger"];
    // A score event needs the cluster it names to be known.
    let snap_objects = std::mem::take(&mut objects);
    let snap = snapshot(snap_objects);
    let labels = |v: &Value| str_map(v.get("labels"));
    let got = if let Some(e) = trigger.get("clusterSetEvent") {
        triggers::affected_placements(
            &snap,
            Trigger::ClusterSet {
                name: e["clusterSet"]["name"].as_str().unwrap_or(""),
            },
        )
    } else if let Some(e) = trigger.get("bindingEvent") {
        let b = &e["binding"];
        triggers::affected_placements(
            &snap,
            Trigger::Binding {
                namespace: b["namespace"].as_str().unwrap_or(""),
                name: b["name"].as_str().unwrap_or(""),
            },
        )
    } else if let Some(e) = trigger.get("scoreEvent") {
        let sc = &e["score"];
        triggers::affected_placements(
            &snap,
            Trigger::Score {
                cluster: sc["namespace"].as_str().unwrap_or(""),
                resource_name: sc["name"].as_str().unwrap_or(""),
            },
        )
    } else if let Some(e) = trigger
        .get("clusterEvent")
        .or_else(|| trigger.get("clusterDelete"))
    {
        let l = labels(&e["cluster"]);
        triggers::affected_placements(&snap, Trigger::Cluster { labels: &l })
    } else if let Some(e) = trigger.get("clusterUpdate") {
        let (old, new) = (labels(&e["old"]), labels(&e["new"]));
        triggers::affected_placements(&snap, Trigger::ClusterUpdate { old: &old, new: &new })
    } else {
        return Err(format!("unknown trigger {trigger}"));
    };
    let got: BTreeSet<String> = got.into_iter().map(|(ns, n)| format!("{ns}/{n}")).collect();
    let want: BTreeSet<String> = names(&case["expect"]["enqueued"]).into_iter().collect();
    eq("enqueued", got, want)
}

fn run_debug_candidates(case: &Value) -> Check {
    let snap = snapshot(hub_objects(&case["objects"]));
    let path = s(&case["request"]["path"]);
    let parts: Vec<&str> = path.trim_start_matches("/debug/placements/").split('/').collect();
    let [ns, name] = parts.as_slice() else {
        return Err(format!("unexpected path {path}"));
    };
    let p = snap.placement(ns, name).ok_or("placement missing")?;
    let expect = &case["expect"];
    let c = match (
        candidates::candidates(&snap, p),
        expect["error"].as_str().unwrap_or(""),
    ) {
        (Ok(c), "") => c,
        (Ok(_), want) => return Err(format!("expected error {want:?}, got candidates")),
        (Err(e), want) => {
            let got = e.to_string();
            return ensure(!want.is_empty() && got.contains(want), || {
                format!("error: got {got:?}, want {want:?}")
            });
        }
    };
    eq(
        "candidateCount",
        c.clusters.len() as u64,
        expect["candidateCount"].as_u64().unwrap_or(0),
    )
}

fn run_scenario(case: &Value) -> Check {
    let steps = case["steps"].as_array().map_or(&[][..], Vec::as_slice);
    ensure(!steps.is_empty(), || {
        "a scenario without steps checks nothing".into()
    })?;
    for (i, step) in steps.iter().enumerate() {
        run_step(step).map_err(|e| format!("step {}: {e}", i + 1))?;
    }
    Ok(())
}

fn run_step(step: &Value) -> Check {
    let p = placement(&step["placement"]);
    let mut clusters: Vec<ManagedCluster> =
        cluster_values(step.get("clusters")).iter().map(cluster).collect();
    // Unless stated, every cluster is in clusterset1.
    for c in &mut clusters {
        let labels = c.metadata.labels.get_or_insert_default();
        if !labels.contains_key("cluster.open-cluster-management.io/clusterset") {
            labels.insert(
                "cluster.open-cluster-management.io/clusterset".into(),
                "clusterset1".into(),
            );
        }
    }
    let snap = snapshot(HubObjects {
        clusters,
        cluster_sets: list(step.get("clusterSets"), cluster_set),
        bindings: list(step.get("bindings"), binding),
        placements: vec![p.clone()],
        decisions: list(step.get("placementDecisions"), decision),
        scores: list(step.get("addOnPlacementScores"), score),
    });
    let ns = p.metadata.namespace.clone().unwrap_or_default();
    let name = p.metadata.name.clone().unwrap_or_default();
    let SyncOutcome::Scheduled(result) = sync(&snap, &ns, &name, now_of(step)).map_err(|e| e.to_string())?
    else {
        return Err("placement skipped".into());
    };
    let decided: Vec<String> = result
        .decisions
        .iter()
        .flat_map(|pd| pd.status.iter().flat_map(|s| s.decisions.iter()))
        .map(|d| d.cluster_name.clone())
        .collect();
    let e = &step["expect"];
    if let Some(set) = e.get("decisionSet") {
        let got: BTreeSet<String> = decided.iter().cloned().collect();
        eq("decisionSet", got, names(set).into_iter().collect())?;
    }
    if let Some(n) = e.get("decisionCount") {
        eq("decisionCount", decided.len() as u64, n.as_u64().unwrap_or(0))?;
    }
    if let Some(n) = e.get("placementDecisionCount") {
        eq(
            "placementDecisionCount",
            result.decisions.len() as u64,
            n.as_u64().unwrap_or(0),
        )?;
    }
    if let Some(n) = e.get("numberOfSelectedClusters") {
        eq(
            "numberOfSelectedClusters",
            i64::from(result.status.number_of_selected_clusters),
            n.as_i64().unwrap_or(0),
        )?;
    }
    let condition =
        |t: &str| -> Option<&Condition> { result.status.conditions.iter().find(|c| c.type_ == t) };
    for (key, t) in [
        ("satisfied", "PlacementSatisfied"),
        ("misconfigured", "PlacementMisconfigured"),
    ] {
        if let Some(want) = e.get(key) {
            let c = condition(t).ok_or_else(|| format!("no {t} condition"))?;
            eq(
                &format!("{t} status"),
                c.status.as_str(),
                want["status"].as_str().unwrap_or(""),
            )?;
            eq(
                &format!("{t} reason"),
                c.reason.as_str(),
                want["reason"].as_str().unwrap_or(""),
            )?;
        }
    }
    if let Some(groups) = e.get("decisionGroups") {
        check_group_statuses(&result.status.decision_groups, groups)?;
    }
    Ok(())
}

/// The `expect` keys each runner compares. A vector that expects nothing, or something its
/// runner does not look at, fails instead of passing unchecked.
fn checked_keys(kind: &str) -> &'static [&'static str] {
    match kind {
        "schedule" => &[
            "decisions",
            "unscheduled",
            "filterResults",
            "prioritizerResults",
            "status",
        ],
        "filter" => &["filtered", "requeueTime", "status"],
        "prioritizer" => &["scores", "status"],
        "controllerSync" => &["apiActions", "placementStatus", "createdPD"],
        "bind" => &["apiActions", "writes"],
        "pdWrite" => &["eventCount", "reasons", "warningEventPresent"],
        "satisfiedCondition" => &["status", "reason"],
        "misconfiguredCondition" => &["status", "reason", "message"],
        "validBindings" => &["bindingNames"],
        "eligibleClusterSets" => &["clusterSetNames"],
        "availableClusters" => &["clusterNames", "error"],
        "selector" => &["match"],
        "claims" => &["claimCount"],
        "enqueue" => &["enqueued"],
        "debugCandidates" => &["candidateCount", "error"],
        "scenario" => &[
            "decisionSet",
            "decisionCount",
            "placementDecisionCount",
            "numberOfSelectedClusters",
            "satisfied",
            "misconfigured",
            "decisionGroups",
        ],
        _ => &[],
    }
}

fn expectations_are_checked(case: &Value, kind: &str) -> Check {
    let expects: Vec<&Value> = if kind == "scenario" {
        case["steps"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|step| &step["expect"])
            .collect()
    } else {
        vec![&case["expect"]]
    };
    for expect in expects {
        let keys: Vec<&String> = expect.as_object().map(|m| m.keys().collect()).unwrap_or_default();
        ensure(!keys.is_empty(), || "the vector expects nothing".into())?;
        for key in keys {
            ensure(checked_keys(kind).contains(&key.as_str()), || {
                format!("expect key {key:?} is not checked by the {kind} runner")
            })?;
        }
    }
    Ok(())
}

const HTTP_ENDPOINT: &str = "HTTP debug endpoint (status codes, JSON error bodies, SubjectAccessReview): \
     this crate serves no HTTP; hub-controller/tests/explain_server_vectors.rs runs them";
const DEBUG_ENVELOPE: &str = "debug endpoint JSON envelope around a stubbed scheduler: hub-controller/tests/explain_server_vectors.rs checks it";

fn skip_reason(kind: &str) -> Option<&'static str> {
    match kind {
        "debugHttp" | "debugReportErr" | "debugPermissionErrMapping" => Some(HTTP_ENDPOINT),
        "debugAggregate" => Some(DEBUG_ENVELOPE),
        _ => None,
    }
}

/// Every vector skipped, by name, for each reason. A vector that starts being skipped (a new kind,
/// a renamed one, a case moved between kinds) fails the test until it is listed here.
const EXPECTED_SKIPS: [(&str, &[&str]); 2] = [
    (
        HTTP_ENDPOINT,
        &[
            "TestDebuggerHandlerReportErr/POST invalid JSON",
            "TestDebuggerHandlerReportErr/GET incomplete path",
            "TestDebuggerHandlerReportErr/GET placement not found",
            "TestDebuggerHandlerReportErr/DELETE method not allowed",
            "TestDebuggerHandlerReportErr/PUT method not allowed",
            "TestDebuggerHandlerReportErr/PATCH method not allowed",
            "TestDebuggerHandlerReportErr/GET placement lister failure",
            "TestDebuggerHandlerReportErr/GET clusterset binding list failure",
            "TestDebuggerHandlerReportErr/GET managed cluster list failure",
            "TestReportErr",
            "TestReportPermissionErr/missing user",
            "TestReportPermissionErr/forbidden create",
            "TestReportPermissionErr/forbidden get",
            "TestReportPermissionErr/unsupported method",
            "TestReportPermissionErr/internal",
            "TestDebuggerPermissionCheck/No user in context - should reject",
            "TestDebuggerPermissionCheck/User with permission - should allow",
            "TestDebuggerPermissionCheck/GET user without permission - should reject with get verb",
            "TestDebuggerPermissionCheck/POST user without permission - should reject with create verb",
            "TestDebuggerPermissionCheck/SAR API call fails",
        ],
    ),
    (
        DEBUG_ENVELOPE,
        &[
            "TestDebuggerGETMethod/A valid placement",
            "TestDebuggerPOSTMethod",
        ],
    ),
];

#[test]
fn ocm_unit_vectors() {
    let text =
        std::fs::read_to_string(VECTORS).expect("tests/conformance/ocm-unit/ocm-unit-cases.yaml is readable");
    let cases: Vec<Value> = serde_norway::from_str(&text).expect("vectors are a YAML list");
    let (mut passed, mut failed) = (0usize, Vec::new());
    let mut skipped: Vec<(String, &'static str)> = Vec::new();
    for case in &cases {
        let name = s(&case["name"]);
        let kind = case["kind"].as_str().unwrap_or("");
        if let Some(reason) = skip_reason(kind) {
            skipped.push((name, reason));
            continue;
        }
        if let Err(e) = expectations_are_checked(case, kind) {
            failed.push(format!("{name} [{kind}]: {e}"));
            continue;
        }
        let result = match kind {
            "schedule" => run_schedule(case),
            "filter" => run_filter(case),
            "prioritizer" => run_prioritizer(case),
            "controllerSync" => run_controller_sync(case),
            "bind" => run_bind(case),
            "pdWrite" => run_pd_write(case),
            "satisfiedCondition" => run_satisfied(case),
            "misconfiguredCondition" => run_misconfigured(case),
            "validBindings" => run_valid_bindings(case),
            "eligibleClusterSets" => run_eligible_sets(case),
            "availableClusters" => run_available_clusters(case),
            "selector" => run_selector(case),
            "claims" => run_claims(case),
            "enqueue" => run_enqueue(case),
            "debugCandidates" => run_debug_candidates(case),
            "scenario" => run_scenario(case),
            other => Err(format!("vector kind {other:?} is not handled")),
        };
        match result {
            Ok(()) => passed += 1,
            Err(e) => failed.push(format!("{name} [{kind}]: {e}")),
        }
    }
    for f in &failed {
        eprintln!("FAILED {f}");
    }
    let mut per_reason: BTreeMap<&str, usize> = BTreeMap::new();
    for (_, reason) in &skipped {
        *per_reason.entry(reason).or_default() += 1;
    }
    for (reason, n) in &per_reason {
        eprintln!("skipped {n}: {reason}");
    }
    println!(
        "{passed} passed, {} failed, {} skipped",
        failed.len(),
        skipped.len()
    );
    assert!(failed.is_empty(), "{} vector(s) failed", failed.len());
    let expected: BTreeSet<(&str, &str)> = EXPECTED_SKIPS
        .iter()
        .flat_map(|(reason, names)| names.iter().map(move |name| (*name, *reason)))
        .collect();
    let got: BTreeSet<(&str, &str)> = skipped.iter().map(|(n, r)| (n.as_str(), *r)).collect();
    let new: Vec<_> = got.difference(&expected).collect();
    let gone: Vec<_> = expected.difference(&got).collect();
    assert!(
        new.is_empty() && gone.is_empty() && skipped.len() == expected.len(),
        "the skipped vectors changed (update EXPECTED_SKIPS if that is meant):\n  newly skipped: {new:#?}\n  \
         no longer skipped: {gone:#?}\n  {} skipped, {} expected",
        skipped.len(),
        expected.len()
    );
    assert_eq!(passed + skipped.len(), cases.len());
}
