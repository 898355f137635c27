//! The planner's property 7 (1–6 are in scheduler-core/tests/tiering_properties.rs): every child
//! Placement the TieredPlacement planner renders passes the
//! upstream Placement CRD schema (strictly), and every TieredPlacement with the status it writes
//! passes our own generated CRD. Random configurations from a fixed seed, so a failure replays.

use ocm_score_api::crd::tiered_placement::{FailbackMode, TieredPlacement, TieredPlacementSpec, TieringMode};
use ocm_score_api::{
    AddOnPlacementScore, AddOnPlacementScoreItem, AddOnPlacementScoreStatus, ManagedCluster,
    ManagedClusterSet, ManagedClusterSetBinding, ManagedClusterSetBindingSpec, ObjectMeta, SortBy, Taint,
    Time, well_known,
};
use ocm_score_kube_double::crd::{Crd, SchemaValidator, next_release_crds, upstream_crds};
use ocm_score_scheduler::placement::{HubObjects, HubSnapshot};
use ocm_score_scheduler::tiering::{WorkIndex, plan};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn coin(&mut self) -> bool {
        self.next() & 1 == 1
    }
}

fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: namespace.map(str::to_string),
        name: Some(name.to_string()),
        ..ObjectMeta::default()
    }
}

fn validator(crd: &Crd) -> SchemaValidator {
    SchemaValidator::new(crd, crd.storage_version().expect("a storage version")).expect("schema compiles")
}

const PREDICATES: [&str; 4] = [
    "[]",
    "[{requiredClusterSelector: {labelSelector: {matchLabels: {gpu: a100}}}}]",
    "[{requiredClusterSelector: {claimSelector: {matchExpressions: [{key: region, operator: Exists}]}}}, {requiredClusterSelector: {celSelector: {celExpressions: [\"managedCluster.metadata.labels['gpu'] == 'a100'\"]}}}]",
    "[{requiredClusterSelector: {labelSelector: {matchExpressions: [{key: gpu, operator: In, values: [a100, h100]}]}}}]",
];

const TEMPLATES: [&str; 3] = [
    "{}",
    "{tolerations: [{key: cluster.open-cluster-management.io/unreachable, operator: Exists, tolerationSeconds: 120}]}",
    "{prioritizerPolicy: {mode: Exact, configurations: [{scoreCoordinate: {type: AddOn, addOn: {resourceName: resource-usage-score, scoreName: mem}}, weight: 2}]}, decisionStrategy: {groupStrategy: {clustersPerDecisionGroup: 50%}}}",
];

fn random_case(rng: &mut Rng) -> (TieredPlacement, HubObjects) {
    let tiers = 1 + rng.below(4) as usize;
    let mut yaml = String::from("tiers:\n");
    for t in 0..tiers {
        yaml.push_str(&format!(
            "- {{name: tier-{t}, clusterSets: [set-{t}], predicates: {}}}\n",
            PREDICATES[rng.below(PREDICATES.len() as u64) as usize]
        ));
    }
    yaml.push_str(&format!(
        "template: {}\n",
        TEMPLATES[rng.below(TEMPLATES.len() as u64) as usize]
    ));
    let mut spec: TieredPlacementSpec = serde_norway::from_str(&yaml).expect("spec");
    if rng.coin() {
        spec.mode = TieringMode::Overflow;
        spec.number_of_clusters = Some(1 + rng.below(4) as i32);
    } else if rng.coin() {
        spec.number_of_clusters = Some(rng.below(3) as i32);
    }
    spec.failback.policy =
        [FailbackMode::Never, FailbackMode::Manual, FailbackMode::Automatic][rng.below(3) as usize];
    if rng.coin() {
        spec.capacity = Some(
            serde_norway::from_str(
                "{rules: [{score: {resourceName: resource-usage-score, scoreName: mem, atLeast: 0}}], debounce: 1m}",
            )
            .expect("capacity"),
        );
    }
    let mut m = meta(Some("apps"), "app");
    m.uid = Some("5f0c3f6e-0000-4000-8000-000000000001".into());
    m.generation = Some(1);
    let tp = TieredPlacement {
        metadata: m,
        spec,
        status: None,
    };
    let mut objects = HubObjects::default();
    for t in 0..tiers {
        let set = format!("set-{t}");
        objects.cluster_sets.push(ManagedClusterSet {
            metadata: meta(None, &set),
            ..ManagedClusterSet::default()
        });
        objects.bindings.push(ManagedClusterSetBinding {
            metadata: meta(Some("apps"), &set),
            spec: ManagedClusterSetBindingSpec {
                cluster_set: set.clone(),
                ..Default::default()
            },
            ..ManagedClusterSetBinding::default()
        });
        for c in 0..rng.below(4) {
            let name = format!("c-{t}-{c}");
            let mut cm = meta(None, &name);
            let mut labels = BTreeMap::from([(well_known::CLUSTER_SET_LABEL.to_string(), set.clone())]);
            if rng.coin() {
                labels.insert("gpu".into(), "a100".into());
            }
            cm.labels = Some(labels);
            let mut cluster = ManagedCluster {
                metadata: cm,
                ..ManagedCluster::default()
            };
            if rng.below(4) == 0 {
                cluster.spec.taints.push(Taint {
                    key: "cluster.open-cluster-management.io/unreachable".into(),
                    value: None,
                    effect: "NoSelect".into(),
                    time_added: Some(Time("2026-11-22T09:59:00Z".parse().expect("time"))),
                });
            }
            objects.clusters.push(cluster);
            objects.scores.push(AddOnPlacementScore {
                metadata: meta(Some(&name), "resource-usage-score"),
                status: Some(AddOnPlacementScoreStatus {
                    scores: vec![AddOnPlacementScoreItem {
                        name: "mem".into(),
                        value: rng.below(201) as i32 - 100,
                    }],
                    valid_until: Some(Time("2026-11-22T11:00:00Z".parse().expect("time"))),
                    ..Default::default()
                }),
            });
        }
    }
    (tp, objects)
}

#[test]
fn rendered_children_and_statuses_pass_their_crds() {
    let upstream = upstream_crds().expect("upstream CRDs");
    let placement_crd = upstream
        .iter()
        .find(|c| c.kind == "Placement")
        .expect("the Placement CRD");
    let placement = validator(placement_crd);
    let own_path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../manifests/hub/crds/tiering.ocm-score.io_tieredplacements.yaml");
    let own = Crd::from_yaml(&own_path, &std::fs::read_to_string(&own_path).expect("read")).expect("CRD");
    let tiered = validator(&own);
    let now = "2026-11-22T10:00:00Z".parse().expect("time");
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut children = 0;
    for case in 0..300 {
        let (mut tp, objects) = random_case(&mut rng);
        let snapshot = HubSnapshot::new(objects).expect("snapshot");
        let plan = plan(&tp, &snapshot, &WorkIndex::default(), now);
        if let Some(child) = &plan.child {
            children += 1;
            let value = serde_json::to_value(child).expect("json");
            if let Err(errors) = placement.validate(&value) {
                panic!("case {case}: child {value:#} fails the Placement CRD: {errors:?}");
            }
        }
        tp.status = Some(plan.status.clone());
        let value: Value = serde_json::to_value(&tp).expect("json");
        if let Err(errors) = tiered.validate(&value) {
            panic!("case {case}: {value:#} fails the TieredPlacement CRD: {errors:?}");
        }
    }
    assert!(children > 200, "only {children} cases rendered a child");
}

fn placement_validator(crds: &[Crd]) -> SchemaValidator {
    validator(
        crds.iter()
            .find(|c| c.kind == "Placement")
            .expect("the Placement CRD"),
    )
}

/// `sortBy` and `scoreRateLimit` of the template (api v1.3.0) reach the child as they are when set,
/// and the child validates against v1.3.0; unset, the child carries neither key, so a v1.2 hub
/// (whose CRD refuses both, as checked here) receives exactly what it received before.
#[test]
fn the_template_sort_order_and_rate_limit_reach_the_child_only_when_set() {
    let v1_2 = placement_validator(&upstream_crds().expect("upstream CRDs"));
    let v1_3 = placement_validator(&next_release_crds().expect("api v1.3.0 CRDs"));
    let now = "2026-11-22T10:00:00Z".parse().expect("time");
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let mut children = 0;
    for case in 0..60 {
        let (tp, objects) = random_case(&mut rng);
        let snapshot = HubSnapshot::new(objects).expect("snapshot");
        let Some(plain) = plan(&tp, &snapshot, &WorkIndex::default(), now).child else {
            continue;
        };
        let plain = serde_json::to_value(&plain).expect("json");
        for field in ["sortBy", "scoreRateLimit"] {
            assert!(
                plain["spec"].get(field).is_none(),
                "case {case}: {field} set: {plain:#}"
            );
        }
        assert_eq!(v1_2.errors(&plain), [], "case {case}");

        let mut set = tp.clone();
        set.spec.template.sort_by = Some(SortBy::Score);
        set.spec.template.score_rate_limit = Some("30s".into());
        let child = plan(&set, &snapshot, &WorkIndex::default(), now)
            .child
            .unwrap_or_else(|| panic!("case {case}: no child once sortBy is set"));
        assert_eq!(child.spec.sort_by, Some(SortBy::Score), "case {case}");
        assert_eq!(child.spec.score_rate_limit.as_deref(), Some("30s"), "case {case}");
        let child = serde_json::to_value(&child).expect("json");
        assert_eq!(v1_3.errors(&child), [], "case {case}: {child:#}");
        let refused = v1_2.errors(&child);
        assert!(
            ["sortBy", "scoreRateLimit"]
                .iter()
                .all(|f| refused.iter().any(|e| e.field == "spec" && e.message.contains(f))),
            "case {case}: api v1.2.0 should refuse both: {refused:?}"
        );
        // Nothing else of the child changes.
        let mut without = child["spec"].clone();
        let spec = without.as_object_mut().expect("spec is an object");
        spec.remove("sortBy");
        spec.remove("scoreRateLimit");
        assert_eq!(without, plain["spec"], "case {case}");
        children += 1;
    }
    assert!(children > 30, "only {children} cases rendered a child");
}

/// A template value api v1.3.0 would refuse stops the plan, naming the field and the value,
/// instead of a child every apply of which fails.
#[test]
fn a_template_sort_order_or_rate_limit_v1_3_refuses_is_an_invalid_spec() {
    let now = "2026-11-22T10:00:00Z".parse().expect("time");
    let (mut tp, objects) = random_case(&mut Rng(7));
    tp.spec.template.sort_by = Some(SortBy::from("Random"));
    tp.spec.template.score_rate_limit = Some("1d".into());
    let snapshot = HubSnapshot::new(objects).expect("snapshot");
    let plan = plan(&tp, &snapshot, &WorkIndex::default(), now);
    assert!(plan.child.is_none(), "{:?}", plan.child);
    let ready = plan
        .status
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
        .expect("a Ready condition");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "InvalidSpec")
    );
    for want in [
        "spec.template.sortBy",
        "\"Random\"",
        "spec.template.scoreRateLimit",
        "\"1d\"",
    ] {
        assert!(
            ready.message.contains(want),
            "{want} missing from {:?}",
            ready.message
        );
    }
}
