//! Our Rust models of OCM kinds must match what a real hub serves: OCM's CRDs are the reference for
//! identity (group, version, kind, plural, scope, status subresource) and for the shape of every
//! object we build or read. Two releases of the `open-cluster-management.io/api` module, each
//! pinned by a go.mod: the one the control plane runs (`tests/control-plane/go.mod`, v1.2.0) and
//! the next one users move to (`tests/ocm-next/go.mod`, v1.3.0); every check runs against both.

#![allow(clippy::unwrap_used)] // test helpers outside #[test] functions

use ocm_score_api::*;
use ocm_score_kube_double::crd::{Crd, SchemaValidator, next_release_crds, upstream_crds};
use ocm_score_kube_double::ocm_api;
use serde_json::{Value, json};

/// The identity an OcmKind claims, as plain data so a test can also feed a deliberately wrong one.
#[derive(Clone, Debug)]
struct Identity {
    group: String,
    version: String,
    kind: String,
    plural: String,
    namespaced: bool,
    status_subresource: bool,
}

fn identity<K: OcmKind>() -> Identity {
    Identity {
        group: K::GROUP.into(),
        version: K::VERSION.into(),
        kind: K::KIND.into(),
        plural: K::PLURAL.into(),
        namespaced: K::NAMESPACED,
        status_subresource: K::STATUS_SUBRESOURCE,
    }
}

/// Every way `id` disagrees with the upstream CRDs; empty when it matches.
fn identity_mismatches(id: &Identity, crds: &[Crd]) -> Vec<String> {
    let Some(crd) = crds.iter().find(|c| c.group == id.group && c.kind == id.kind) else {
        return vec![format!(
            "no upstream CRD for kind {} in group {}",
            id.kind, id.group
        )];
    };
    let mut out = Vec::new();
    if crd.plural != id.plural {
        out.push(format!(
            "{}: plural {} != upstream {}",
            id.kind, id.plural, crd.plural
        ));
    }
    if crd.namespaced != id.namespaced {
        out.push(format!(
            "{}: namespaced {} != upstream {}",
            id.kind, id.namespaced, crd.namespaced
        ));
    }
    match crd.version(&id.version) {
        None => out.push(format!("{}: version {} not served upstream", id.kind, id.version)),
        Some(v) => {
            if !v.served || !v.storage {
                out.push(format!(
                    "{}: version {} is not the served storage version",
                    id.kind, id.version
                ));
            }
            if v.status_subresource != id.status_subresource {
                out.push(format!(
                    "{}: status subresource {} != upstream {}",
                    id.kind, id.status_subresource, v.status_subresource
                ));
            }
        }
    }
    out
}

fn all_identities() -> Vec<Identity> {
    vec![
        identity::<AddOnPlacementScore>(),
        identity::<ManagedCluster>(),
        identity::<ManagedClusterSet>(),
        identity::<ManagedClusterSetBinding>(),
        identity::<Placement>(),
        identity::<PlacementDecision>(),
        identity::<ManifestWork>(),
        identity::<ManagedClusterAddOn>(),
        identity::<ClusterManagementAddOn>(),
        identity::<AddOnDeploymentConfig>(),
    ]
}

fn crds() -> Vec<Crd> {
    upstream_crds().unwrap_or_else(|e| panic!("{e}"))
}

/// Both releases' CRDs, each with the API module version it came from (for failure messages).
fn crd_sets() -> Vec<(String, Vec<Crd>)> {
    let pinned = ocm_api::module().unwrap_or_else(|e| panic!("{e}"));
    let next = ocm_api::next_release_module().unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(
        pinned.version, next.version,
        "tests/ocm-next/go.mod must pin another release"
    );
    vec![
        (pinned.version.clone(), crds()),
        (
            next.version.clone(),
            next_release_crds().unwrap_or_else(|e| panic!("{e}")),
        ),
    ]
}

fn validator_for(crds: &[Crd], api_version: &str, kind: &str) -> SchemaValidator {
    let (group, version) = api_version.rsplit_once('/').expect("grouped apiVersion");
    let crd = crds
        .iter()
        .find(|c| c.group == group && c.kind == kind)
        .expect("upstream CRD");
    SchemaValidator::new(crd, crd.version(version).expect("version")).expect("schema compiles")
}

/// Serializes a typed object and validates it against its upstream schema.
fn assert_valid<K: OcmKind + serde::Serialize>(crds: &[Crd], object: &K) -> Value {
    let json = serde_json::to_value(object).expect("serializes");
    assert_eq!(json["apiVersion"], K::API_VERSION);
    assert_eq!(json["kind"], K::KIND);
    let errors = validator_for(crds, K::API_VERSION, K::KIND).errors(&json);
    assert!(
        errors.is_empty(),
        "{} does not validate: {errors:?}\n{json:#}",
        K::KIND
    );
    json
}

#[test]
fn every_kind_matches_its_upstream_crd() {
    for (release, crds) in crd_sets() {
        let ids = all_identities();
        assert_eq!(ids.len(), 10);
        let mismatches: Vec<String> = ids.iter().flat_map(|id| identity_mismatches(id, &crds)).collect();
        assert!(mismatches.is_empty(), "api {release}: {mismatches:#?}");
    }
}

#[test]
fn a_wrong_identity_is_caught_field_by_field() {
    let crds = crds();
    let good = identity::<AddOnPlacementScore>();
    let wrongs: Vec<(&str, Identity)> = vec![
        (
            "group",
            Identity {
                group: "cluster.open-cluster-management.com".into(),
                ..good.clone()
            },
        ),
        (
            "version",
            Identity {
                version: "v1beta1".into(),
                ..good.clone()
            },
        ),
        (
            "kind",
            Identity {
                kind: "AddonPlacementScore".into(),
                ..good.clone()
            },
        ),
        (
            "plural",
            Identity {
                plural: "addonplacementscore".into(),
                ..good.clone()
            },
        ),
        (
            "scope",
            Identity {
                namespaced: false,
                ..good.clone()
            },
        ),
        (
            "status",
            Identity {
                status_subresource: false,
                ..good.clone()
            },
        ),
    ];
    for (what, wrong) in wrongs {
        assert!(
            !identity_mismatches(&wrong, &crds).is_empty(),
            "a wrong {what} went unnoticed"
        );
    }
}

fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: namespace.map(Into::into),
        ..Default::default()
    }
}

fn condition(type_: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: "True".into(),
        reason: "Testing".into(),
        message: "built by a test".into(),
        last_transition_time: Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap()),
        observed_generation: Some(1),
    }
}

#[test]
fn objects_we_build_validate_against_upstream_schemas() {
    for (release, crds) in crd_sets() {
        eprintln!("api {release}");
        objects_we_build_validate_against(&crds);
    }
}

fn objects_we_build_validate_against(crds: &[Crd]) {
    let score = AddOnPlacementScore {
        metadata: meta(Some("cluster1"), well_known::RESOURCE_USAGE_SCORE),
        status: Some(AddOnPlacementScoreStatus {
            conditions: vec![condition("AddOnPlacementScoreUpdated")],
            scores: vec![
                AddOnPlacementScoreItem {
                    name: "cpuAvailable".into(),
                    value: -100,
                },
                AddOnPlacementScoreItem {
                    name: "memAvailable".into(),
                    value: 100,
                },
            ],
            valid_until: Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(1_800_000_180).unwrap(),
            )),
            ..Default::default()
        }),
    };
    let json = assert_valid(crds, &score);
    assert_eq!(json["status"]["validUntil"], "2027-01-15T08:03:00Z");

    assert_valid(
        crds,
        &ManagedCluster {
            metadata: meta(None, "cluster1"),
            spec: ManagedClusterSpec {
                hub_accepts_client: true,
                taints: vec![Taint {
                    key: "gpu".into(),
                    value: None,
                    effect: "NoSelect".into(),
                    time_added: None,
                }],
                ..Default::default()
            },
            status: Some(ManagedClusterStatus {
                conditions: vec![condition("ManagedClusterConditionAvailable")].into(),
                allocatable: [("cpu".to_string(), Quantity("4".into()))].into(),
                capacity: [("cpu".to_string(), Quantity("8".into()))].into(),
                cluster_claims: vec![ManagedClusterClaim {
                    name: "region".into(),
                    value: "eu".into(),
                }],
                ..Default::default()
            }),
        },
    );
    assert_valid(
        crds,
        &ManagedClusterSet {
            metadata: meta(None, "global"),
            spec: ManagedClusterSetSpec {
                cluster_selector: Some(ManagedClusterSelector {
                    selector_type: "LabelSelector".into(),
                    label_selector: Some(LabelSelector::default()),
                }),
                ..Default::default()
            },
            status: None,
        },
    );
    assert_valid(
        crds,
        &ManagedClusterSetBinding {
            metadata: meta(Some("ns1"), "global"),
            spec: ManagedClusterSetBindingSpec {
                cluster_set: "global".into(),
                ..Default::default()
            },
            status: None,
        },
    );
    assert_valid(
        crds,
        &Placement {
            metadata: meta(Some("ns1"), "p1"),
            spec: PlacementSpec {
                cluster_sets: vec!["global".into()],
                number_of_clusters: Some(2),
                prioritizer_policy: Some(PrioritizerPolicy {
                    mode: Some("Exact".into()),
                    configurations: vec![PrioritizerConfig {
                        score_coordinate: Some(ScoreCoordinate {
                            type_: "AddOn".into(),
                            built_in: None,
                            add_on: Some(AddOnScore {
                                resource_name: "resource-usage-score".into(),
                                score_name: "cpuAvailable".into(),
                            }),
                        }),
                        weight: Some(3),
                        ..Default::default()
                    }],
                }),
                tolerations: vec![Toleration {
                    key: Some("gpu".into()),
                    operator: Some("Exists".into()),
                    ..Default::default()
                }],
                decision_strategy: Some(DecisionStrategy {
                    group_strategy: Some(GroupStrategy {
                        decision_groups: vec![],
                        clusters_per_decision_group: Some(IntOrString::String("25%".into())),
                    }),
                }),
                ..Default::default()
            },
            status: None,
        },
    );
    assert_valid(
        crds,
        &PlacementDecision {
            metadata: meta(Some("ns1"), "p1-decision-1"),
            status: Some(PlacementDecisionStatus {
                decisions: vec![ClusterDecision {
                    cluster_name: "cluster1".into(),
                    reason: String::new(),
                    score: None,
                }],
                ..Default::default()
            }),
        },
    );
    assert_valid(
        crds,
        &ManifestWork {
            metadata: meta(Some("cluster1"), "addon-resource-usage-collect-deploy-0"),
            spec: ManifestWorkSpec {
                workload: ManifestsTemplate {
                    manifests: vec![json!({"apiVersion": "v1", "kind": "ServiceAccount",
                        "metadata": {"name": "agent", "namespace": "open-cluster-management-agent-addon"}})],
                },
                manifest_configs: vec![ManifestConfigOption {
                    resource_identifier: ResourceIdentifier {
                        group: "apps".into(),
                        resource: "deployments".into(),
                        name: "agent".into(),
                        namespace: "open-cluster-management-agent-addon".into(),
                    },
                    feedback_rules: vec![FeedbackRule {
                        type_: "WellKnownStatus".into(),
                        json_paths: vec![],
                    }],
                    ..Default::default()
                }],
                ..Default::default()
            },
            status: None,
        },
    );
    assert_valid(
        crds,
        &ManagedClusterAddOn {
            metadata: meta(Some("cluster1"), "resource-usage-collect"),
            spec: ManagedClusterAddOnSpec::default(),
            status: Some(ManagedClusterAddOnStatus {
                conditions: vec![condition("RegistrationApplied")],
                namespace: Some("open-cluster-management-agent-addon".into()),
                registrations: vec![RegistrationConfig {
                    signer_name: "kubernetes.io/kube-apiserver-client".into(),
                    subject: Some(Subject {
                        user: "system:open-cluster-management:cluster:cluster1:addon:resource-usage-collect:agent:agent".into(),
                        groups: vec!["system:open-cluster-management:cluster:cluster1:addon:resource-usage-collect".into()],
                        organization_unit: vec![],
                    }),
                }],
                health_check: Some(HealthCheck { mode: "Lease".into() }),
                ..Default::default()
            }),
        },
    );
    assert_valid(
        crds,
        &ClusterManagementAddOn {
            metadata: meta(None, "resource-usage-collect"),
            spec: ClusterManagementAddOnSpec {
                add_on_meta: Some(AddOnMeta {
                    display_name: "Resource usage scores".into(),
                    description: String::new(),
                }),
                supported_configs: vec![ConfigMeta {
                    group: "addon.open-cluster-management.io".into(),
                    resource: "addondeploymentconfigs".into(),
                    default_config: Some(ConfigReferent {
                        namespace: "ocm-score".into(),
                        name: "default".into(),
                    }),
                }],
                install_strategy: Some(InstallStrategy {
                    type_: "Manual".into(),
                    placements: vec![],
                }),
                ..Default::default()
            },
            status: None,
        },
    );
    assert_valid(
        crds,
        &AddOnDeploymentConfig {
            metadata: meta(Some("ocm-score"), "default"),
            spec: AddOnDeploymentConfigSpec {
                customized_variables: vec![CustomizedVariable {
                    name: "REFRESH_INTERVAL".into(),
                    value: "60s".into(),
                }],
                registries: vec![ImageMirror {
                    mirror: "quay.example/ocm".into(),
                    source: String::new(),
                }],
                ..Default::default()
            },
            status: None,
        },
    );
}

#[test]
fn the_schema_rejects_what_a_real_hub_rejects() {
    for (release, crds) in crd_sets() {
        eprintln!("api {release}");
        the_schema_rejects_what_a_hub_of(&crds);
    }
}

fn the_schema_rejects_what_a_hub_of(crds: &[Crd]) {
    let v = validator_for(
        crds,
        "cluster.open-cluster-management.io/v1alpha1",
        "AddOnPlacementScore",
    );
    let aps = |scores: Value| {
        json!({"apiVersion": "cluster.open-cluster-management.io/v1alpha1", "kind": "AddOnPlacementScore",
               "metadata": {"name": "s", "namespace": "c1"}, "status": {"scores": scores}})
    };
    assert!(v.errors(&aps(json!([{"name": "cpu", "value": 100}]))).is_empty());
    let too_high = v.errors(&aps(json!([{"name": "cpu", "value": 101}])));
    assert_eq!(too_high.len(), 1, "{too_high:?}");
    assert_eq!(too_high[0].field, "status.scores[0].value");
    assert!(!v.errors(&aps(json!([{"name": "cpu", "value": -101}]))).is_empty());
    let misspelled = v.errors(&aps(json!([{"name": "cpu", "val": 3}])));
    assert!(
        misspelled.iter().any(|e| e.message.contains("value")),
        "missing required value: {misspelled:?}"
    );
    assert!(
        misspelled.iter().any(|e| e.message.contains("val")),
        "unknown field val: {misspelled:?}"
    );
    let duplicate = v.errors(&aps(
        json!([{"name": "cpu", "value": 1}, {"name": "cpu", "value": 2}]),
    ));
    assert_eq!(duplicate.len(), 1, "{duplicate:?}");
    assert_eq!(duplicate[0].field, "status.scores[1]");
    let bad_time = v.errors(
        &json!({"apiVersion": "cluster.open-cluster-management.io/v1alpha1",
        "kind": "AddOnPlacementScore", "metadata": {"name": "s"}, "status": {"validUntil": "tomorrow"}}),
    );
    assert!(!bad_time.is_empty(), "validUntil must be a date-time");

    // A typed object with a field name our model got wrong would be caught the same way.
    let mut wrong = serde_json::to_value(ManagedClusterSetBinding {
        metadata: meta(Some("ns1"), "b"),
        spec: ManagedClusterSetBindingSpec {
            cluster_set: "global".into(),
            ..Default::default()
        },
        status: None,
    })
    .unwrap();
    let spec = wrong["spec"].as_object_mut().unwrap();
    let value = spec.remove("clusterSet").unwrap();
    spec.insert("clusterset".into(), value);
    let errors = validator_for(
        crds,
        "cluster.open-cluster-management.io/v1beta2",
        "ManagedClusterSetBinding",
    )
    .errors(&wrong);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert_eq!(errors[0].field, "spec");
}

/// Drops `null` members, as the API server prunes nulls of non-nullable fields before validating.
/// With `drop_empty_lists`, also drops `[]`: Go clients send some unset lists as empty ones and the
/// server stores them so, but to every reader (Go's nil slice included) they mean "absent".
fn pruned(v: &Value, drop_empty_lists: bool) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.iter()
                .filter(|(_, v)| !(v.is_null() || drop_empty_lists && *v == &json!([])))
                .map(|(k, v)| (k.clone(), pruned(v, drop_empty_lists)))
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.iter().map(|v| pruned(v, drop_empty_lists)).collect()),
        other => other.clone(),
    }
}

fn round_trip<K: OcmKind + serde::Serialize + serde::de::DeserializeOwned>(object: &Value) -> Value {
    let typed: K = serde_json::from_value(object.clone())
        .unwrap_or_else(|e| panic!("{} does not deserialize: {e}\n{object:#}", K::KIND));
    serde_json::to_value(&typed).unwrap()
}

/// Placement spec fields the conformance cases carry that v1.2.0 does not declare: the cases come
/// from OCM commit 00f84c3, whose Placement CRD (api v1.3.0) defaults them in. Against v1.2.0 they
/// are left out of the schema check only, and still round-trip; against v1.3.0 they are checked.
const NEWER_PLACEMENT_FIELDS: [&str; 2] = ["sortBy", "scoreRateLimit"];

/// Every object in OCM's own conformance cases (thousands, written as a real hub stores them)
/// validates against the upstream schema and survives deserialize + serialize unchanged, so our
/// models neither reject nor drop anything a real hub serves.
#[test]
fn hub_objects_from_the_conformance_cases_validate_and_round_trip_losslessly() {
    for (release, crds) in crd_sets() {
        conformance_cases_fit(&release, &crds);
    }
}

fn conformance_cases_fit(release: &str, crds: &[Crd]) {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/conformance/placement/ocm-coverage.yaml"
    );
    let text = std::fs::read_to_string(path).expect("conformance cases present");
    let placement = crds
        .iter()
        .find(|c| c.kind == "Placement")
        .and_then(|c| c.version("v1beta1"))
        .expect("the Placement CRD serves v1beta1");
    let declared: Vec<bool> = NEWER_PLACEMENT_FIELDS
        .iter()
        .map(|field| {
            placement.schema["properties"]["spec"]["properties"]
                .get(field)
                .is_some()
        })
        .collect();
    // A release declares both or neither; one that declares them is checked with them.
    assert!(
        declared.iter().all(|d| *d == declared[0]),
        "api {release} declares only some of {NEWER_PLACEMENT_FIELDS:?}: {declared:?}"
    );
    let strip_newer = !declared[0];
    let cases: Vec<Value> = serde_norway::from_str(&text).expect("cases parse");
    let mut validators = std::collections::HashMap::new();
    let mut checked = std::collections::BTreeMap::<String, usize>::new();
    for case in &cases {
        for object in case["objects"].as_array().expect("objects") {
            let object = pruned(object, false);
            let kind = object["kind"].as_str().expect("kind").to_string();
            let api_version = object["apiVersion"].as_str().expect("apiVersion").to_string();
            let validator = validators
                .entry(kind.clone())
                .or_insert_with(|| validator_for(crds, &api_version, &kind));
            let mut schema_checked = object.clone();
            if strip_newer
                && kind == "Placement"
                && let Some(spec) = schema_checked["spec"].as_object_mut()
            {
                NEWER_PLACEMENT_FIELDS.iter().for_each(|f| {
                    spec.remove(*f);
                });
            }
            let errors = validator.errors(&schema_checked);
            // FORMAT.md: this one case deliberately holds a v1alpha1-era prioritizer entry with only
            // `name` (no `scoreCoordinate`), which the v1beta1 schema rejects; it must still round-trip.
            let legacy = case["name"] == "misconfigured/legacy-name-field-without-scorecoordinate"
                && kind == "Placement"
                && errors
                    .iter()
                    .all(|e| e.field.starts_with("spec.prioritizerPolicy.configurations"));
            assert!(
                errors.is_empty() || legacy,
                "api {release}, case {}: {kind} invalid: {errors:?}",
                case["name"]
            );
            let back = match kind.as_str() {
                "AddOnPlacementScore" => round_trip::<AddOnPlacementScore>(&object),
                "ManagedCluster" => round_trip::<ManagedCluster>(&object),
                "ManagedClusterSet" => round_trip::<ManagedClusterSet>(&object),
                "ManagedClusterSetBinding" => round_trip::<ManagedClusterSetBinding>(&object),
                "Placement" => round_trip::<Placement>(&object),
                "PlacementDecision" => round_trip::<PlacementDecision>(&object),
                other => panic!("unexpected kind {other} in the conformance cases"),
            };
            assert_eq!(
                pruned(&back, true),
                pruned(&object, true),
                "api {release}, case {}: {kind} changed in a round trip",
                case["name"]
            );
            *checked.entry(kind).or_default() += 1;
        }
    }
    assert_eq!(checked.len(), 6, "{checked:?}");
}

/// What a v1.3 hub writes into every Placement (its defaults `sortBy` and `scoreRateLimit`, the
/// status's `lastScoreUpdateTime`) and into PlacementDecisions (`decisions[].score`) is valid
/// against api v1.3.0 and survives a read and a write of our models; v1.3.0 refuses bad values of
/// the new fields, naming them.
#[test]
fn what_a_v1_3_hub_adds_validates_and_survives_our_models() {
    let crds = next_release_crds().unwrap_or_else(|e| panic!("{e}"));
    let placement = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": "p", "namespace": "ns"},
        "spec": {"clusterSets": ["global"], "sortBy": "Score", "scoreRateLimit": "30s"},
        "status": {"numberOfSelectedClusters": 1, "lastScoreUpdateTime": "2026-12-03T00:00:00Z"}
    });
    let v = validator_for(&crds, "cluster.open-cluster-management.io/v1beta1", "Placement");
    assert!(v.errors(&placement).is_empty(), "{:?}", v.errors(&placement));
    assert_eq!(round_trip::<Placement>(&placement), placement);
    for (field, bad) in [("sortBy", json!("Random")), ("scoreRateLimit", json!("1d"))] {
        let mut wrong = placement.clone();
        wrong["spec"][field] = bad.clone();
        let errors = v.errors(&wrong);
        assert!(
            errors.iter().any(|e| e.field == format!("spec.{field}")),
            "spec.{field}: {bad} was not refused by name: {errors:?}"
        );
    }

    let decision = json!({
        "apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "PlacementDecision",
        "metadata": {"name": "p-decision-1", "namespace": "ns", "labels": {"cluster.open-cluster-management.io/placement": "p"}},
        "status": {"decisions": [{"clusterName": "c1", "reason": "", "score": 87}]}
    });
    let v = validator_for(
        &crds,
        "cluster.open-cluster-management.io/v1beta1",
        "PlacementDecision",
    );
    assert!(v.errors(&decision).is_empty(), "{:?}", v.errors(&decision));
    assert_eq!(round_trip::<PlacementDecision>(&decision), decision);
    let typed: PlacementDecision = serde_json::from_value(decision).unwrap();
    assert_eq!(typed.status.unwrap().decisions[0].score, Some(87));
}

/// The fields api v1.3.0 added are typed exactly as its Placement CRD declares them: `sortBy`'s
/// enum is our [`SortBy`]'s known orders and its default one of them, `scoreRateLimit`'s pattern
/// is ours (checked on values the schema accepts and refuses alike) with its default inside it,
/// and `status.lastScoreUpdateTime` is a date-time, as our `Time` writes it. Against v1.2.0,
/// which declares none of them, a typed object that sets them is refused by name, which is why
/// every one of them is written only when set.
#[test]
fn the_typed_v1_3_fields_match_the_v1_3_schema() {
    let next = next_release_crds().unwrap_or_else(|e| panic!("{e}"));
    let schema = &next
        .iter()
        .find(|c| c.kind == "Placement")
        .and_then(|c| c.version("v1beta1"))
        .expect("api v1.3.0 serves Placement v1beta1")
        .schema;
    let spec = &schema["properties"]["spec"]["properties"];
    let sort_by = &spec["sortBy"];
    assert_eq!(sort_by["type"], "string");
    let orders: Vec<&str> = sort_by["enum"]
        .as_array()
        .expect("sortBy is an enum")
        .iter()
        .map(|v| v.as_str().expect("a string"))
        .collect();
    assert_eq!(orders, [SortBy::CLUSTER_NAME, SortBy::SCORE]);
    for order in &orders {
        let typed: SortBy = serde_json::from_value(json!(order)).unwrap();
        assert!(
            !matches!(typed, SortBy::Other(_)),
            "{order} is not typed: {typed:?}"
        );
        assert_eq!(serde_json::to_value(&typed).unwrap(), json!(order));
    }
    assert_eq!(
        SortBy::from(sort_by["default"].as_str().expect("a default")),
        SortBy::ClusterName
    );

    let rate = &spec["scoreRateLimit"];
    assert_eq!(rate["type"], "string");
    assert_eq!(rate["pattern"], SCORE_RATE_LIMIT_PATTERN);
    assert!(is_score_rate_limit(rate["default"].as_str().expect("a default")));
    let v = validator_for(&next, "cluster.open-cluster-management.io/v1beta1", "Placement");
    for value in [
        "1m", "30s", "24h", "0s", "007m", "1", "m", "1d", "1M", "1m30s", "500ms", "1.5h", "-1m", " 1m",
        "1m ", "1m\n", "",
    ] {
        let object = json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
            "metadata": {"name": "p", "namespace": "ns"}, "spec": {"scoreRateLimit": value}});
        let accepted = v.errors(&object).is_empty();
        assert_eq!(
            is_score_rate_limit(value),
            accepted,
            "scoreRateLimit {value:?}: the CRD {} it, our check does not agree",
            if accepted { "accepts" } else { "refuses" }
        );
        let typed: Placement = serde_json::from_value(object).unwrap();
        assert_eq!(
            typed.spec.v1_3_field_errors("spec").is_empty(),
            accepted,
            "{value:?}"
        );
    }

    let time = &schema["properties"]["status"]["properties"]["lastScoreUpdateTime"];
    assert_eq!(
        (&time["type"], &time["format"]),
        (&json!("string"), &json!("date-time"))
    );

    let typed = Placement {
        metadata: meta(Some("ns1"), "p1"),
        spec: PlacementSpec {
            cluster_sets: vec!["global".into()],
            sort_by: Some(SortBy::Score),
            score_rate_limit: Some("5m".into()),
            ..Default::default()
        },
        status: Some(PlacementStatus {
            number_of_selected_clusters: 2,
            last_score_update_time: Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap(),
            )),
            ..Default::default()
        }),
    };
    let json = assert_valid(&next, &typed);
    assert_eq!(json["spec"]["sortBy"], "Score");
    assert_eq!(json["spec"]["scoreRateLimit"], "5m");
    assert_eq!(json["status"]["lastScoreUpdateTime"], "2027-01-15T08:00:00Z");
    assert_eq!(serde_json::from_value::<Placement>(json.clone()).unwrap(), typed);
    let errors = validator_for(&crds(), Placement::API_VERSION, Placement::KIND).errors(&json);
    for field in ["spec.sortBy", "spec.scoreRateLimit", "status.lastScoreUpdateTime"] {
        let (parent, name) = field.split_once('.').unwrap();
        assert!(
            errors
                .iter()
                .any(|e| e.field == parent && e.message.contains(name)),
            "api v1.2.0 declares no {field}, yet does not refuse it: {errors:?}"
        );
    }
}

/// A Placement as a v1.2 hub stores it (none of the v1.3 fields) reads into our models and is
/// written back unchanged, byte for byte: no new field appears, not even a default.
#[test]
fn a_v1_2_placement_round_trips_unchanged() {
    let pinned = crds();
    let stored = r#"{"apiVersion":"cluster.open-cluster-management.io/v1beta1","kind":"Placement","metadata":{"name":"p","namespace":"ns"},"spec":{"clusterSets":["global"],"numberOfClusters":2,"prioritizerPolicy":{"mode":"Additive"},"spreadPolicy":{"spreadConstraints":[]}},"status":{"conditions":[{"lastTransitionTime":"2026-12-03T00:00:00Z","message":"All cluster decisions scheduled","reason":"AllDecisionsScheduled","status":"True","type":"PlacementSatisfied"}],"decisionGroups":[{"clusterCount":2,"decisionGroupIndex":0,"decisionGroupName":"","decisions":["p-decision-1"]}],"numberOfSelectedClusters":2}}"#;
    let value: Value = serde_json::from_str(stored).unwrap();
    let v = validator_for(&pinned, Placement::API_VERSION, Placement::KIND);
    assert!(v.errors(&value).is_empty(), "{:?}", v.errors(&value));
    let typed: Placement = serde_json::from_str(stored).unwrap();
    assert_eq!(typed.spec.sort_by, None);
    assert_eq!(typed.spec.score_rate_limit, None);
    assert_eq!(typed.status.as_ref().unwrap().last_score_update_time, None);
    let written = serde_json::to_value(&typed).unwrap();
    // serde_json's maps are sorted, so equal values print the same bytes.
    assert_eq!(written.to_string(), value.to_string());
    assert_eq!(written.to_string(), stored);

    // The same for every Placement of the conformance cases, taken back to what v1.2 stores.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/conformance/placement/ocm-coverage.yaml"
    );
    let cases: Vec<Value> = serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut checked = 0;
    for case in &cases {
        for object in case["objects"].as_array().unwrap() {
            if object["kind"] != "Placement" {
                continue;
            }
            let mut old = pruned(object, false);
            if let Some(spec) = old["spec"].as_object_mut() {
                NEWER_PLACEMENT_FIELDS.iter().for_each(|f| {
                    spec.remove(*f);
                });
            }
            if let Some(status) = old.get_mut("status").and_then(Value::as_object_mut) {
                status.remove("lastScoreUpdateTime");
            }
            let back = round_trip::<Placement>(&old);
            for field in NEWER_PLACEMENT_FIELDS {
                assert!(
                    back["spec"].get(field).is_none(),
                    "case {}: {field} appeared",
                    case["name"]
                );
            }
            assert!(
                back["status"].get("lastScoreUpdateTime").is_none(),
                "case {}",
                case["name"]
            );
            assert_eq!(pruned(&back, true), pruned(&old, true), "case {}", case["name"]);
            checked += 1;
        }
    }
    assert!(
        checked > 100,
        "only {checked} Placements in the conformance cases"
    );
}

/// The v1.3 fields the conformance cases carry land in the typed fields, not in `extra`.
#[test]
fn the_v1_3_fields_of_the_conformance_cases_are_typed() {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/conformance/placement/ocm-coverage.yaml"
    );
    let cases: Vec<Value> = serde_norway::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut typed = 0;
    for case in &cases {
        for object in case["objects"].as_array().unwrap() {
            if object["kind"] != "Placement" {
                continue;
            }
            let p: Placement = serde_json::from_value(pruned(object, false)).unwrap();
            for field in NEWER_PLACEMENT_FIELDS {
                assert!(
                    !p.spec.extra.contains_key(field),
                    "case {}: {field} untyped",
                    case["name"]
                );
            }
            assert_eq!(p.spec.sort_by.is_some(), object["spec"].get("sortBy").is_some());
            assert_eq!(
                p.spec.score_rate_limit.as_deref(),
                object["spec"]["scoreRateLimit"].as_str()
            );
            assert!(
                p.spec.v1_3_field_errors("spec").is_empty(),
                "case {}",
                case["name"]
            );
            typed += usize::from(p.spec.sort_by.is_some());
        }
    }
    assert!(typed > 100, "only {typed} Placements carry sortBy");
}

/// Status conditions and fields written by other controllers survive our read-modify-write.
#[test]
fn unknown_fields_and_foreign_conditions_survive_a_read_modify_write() {
    let stored = json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
        "metadata": {"name": "resource-usage-collect", "namespace": "cluster1"},
        "spec": {"installNamespace": "open-cluster-management-agent-addon", "futureField": {"a": 1}},
        "status": {
            "conditions": [{"type": "ClusterCertificateRotated", "status": "True", "reason": "ClientCertificateUpdated",
                            "message": "rotated", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "kubeClientDriver": "csr",
            "addOnMeta": {"displayName": "x"}
        }
    });
    let mut addon: ManagedClusterAddOn = serde_json::from_value(stored.clone()).unwrap();
    addon
        .status
        .as_mut()
        .unwrap()
        .conditions
        .push(condition("RegistrationApplied"));
    let written = serde_json::to_value(&addon).unwrap();
    assert_eq!(written["spec"]["futureField"], json!({"a": 1}));
    assert_eq!(written["status"]["kubeClientDriver"], "csr");
    assert_eq!(written["status"]["addOnMeta"], json!({"displayName": "x"}));
    assert_eq!(
        written["status"]["conditions"][0]["type"],
        "ClusterCertificateRotated"
    );
    assert_eq!(written["status"]["conditions"][1]["type"], "RegistrationApplied");

    let work = json!({
        "apiVersion": "work.open-cluster-management.io/v1", "kind": "ManifestWork",
        "metadata": {"name": "w", "namespace": "cluster1"},
        "spec": {"workload": {"manifests": [{"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "n"}, "data": {"k": "v"}, "unknownToUs": [1, 2]}]},
            "executor": {"subject": {"type": "ServiceAccount", "serviceAccount": {"name": "a", "namespace": "b"}}}}
    });
    assert_eq!(round_trip::<ManifestWork>(&work), work);
}
