//! Properties of the placement engine over random fleets and placements.

use k8s_openapi::jiff::Timestamp;
use ocm_score_api::{
    AddOnPlacementScore, AddOnPlacementScoreItem, AddOnPlacementScoreStatus, AddOnScore, ClusterDecision,
    ClusterPredicate, ClusterSelector, LabelSelector, ManagedCluster, ManagedClusterSet,
    ManagedClusterSetBinding, ManagedClusterSetBindingSpec, ManagedClusterSpec, ManagedClusterStatus,
    ObjectMeta, Placement, PlacementDecision, PlacementDecisionStatus, PlacementSpec, PrioritizerConfig,
    PrioritizerPolicy, Quantity, ScoreCoordinate, Taint, Time, Toleration, well_known,
};
use ocm_score_scheduler::placement::{HubObjects, HubSnapshot, PlacementResult, SyncOutcome, sync};
use proptest::prelude::*;
use std::collections::BTreeMap;

const NOW: &str = "2026-06-01T00:00:00Z";
const ENVS: [&str; 3] = ["prod", "dev", "staging"];
const TAINT_KEYS: [&str; 2] = ["gpu", "spot"];
const EFFECTS: [&str; 3] = ["NoSelect", "NoSelectIfNew", "PreferNoSelect"];

fn now() -> Timestamp {
    NOW.parse().expect("valid time")
}

fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: namespace.map(str::to_string),
        name: Some(name.to_string()),
        ..ObjectMeta::default()
    }
}

/// One cluster's random traits.
#[derive(Clone, Debug)]
struct ClusterSeed {
    env: usize,
    taint: Option<(usize, usize, i64)>,
    cpu: Option<u32>,
    score: Option<(i32, bool)>,
    other_decisions: u8,
    own_decision: bool,
}

fn cluster_seed() -> impl Strategy<Value = ClusterSeed> {
    (
        0..ENVS.len(),
        proptest::option::of((
            0..TAINT_KEYS.len(),
            0..EFFECTS.len(),
            -400_000_000i64..100_000_000,
        )),
        proptest::option::of(0u32..64),
        proptest::option::of((-100i32..=100, any::<bool>())),
        0u8..4,
        any::<bool>(),
    )
        .prop_map(
            |(env, taint, cpu, score, other_decisions, own_decision)| ClusterSeed {
                env,
                taint,
                cpu,
                score,
                other_decisions,
                own_decision,
            },
        )
}

#[derive(Clone, Debug)]
struct PlacementSeed {
    number_of_clusters: Option<i32>,
    predicate_env: Option<usize>,
    tolerate: Option<(usize, Option<i64>)>,
    exact: bool,
    weights: [i32; 4],
}

fn placement_seed() -> impl Strategy<Value = PlacementSeed> {
    (
        proptest::option::of(0i32..30),
        proptest::option::of(0..ENVS.len()),
        proptest::option::of((0..TAINT_KEYS.len(), proptest::option::of(0i64..1_000_000_000))),
        any::<bool>(),
        [-10i32..=10, -10i32..=10, -10i32..=10, -10i32..=10],
    )
        .prop_map(
            |(number_of_clusters, predicate_env, tolerate, exact, weights)| PlacementSeed {
                number_of_clusters,
                predicate_env,
                tolerate,
                exact,
                weights,
            },
        )
}

fn build(clusters: &[ClusterSeed], p: &PlacementSeed) -> HubObjects {
    let mut objects = HubObjects::default();
    let time = |offset: i64| Time(Timestamp::from_second(now().as_second() + offset).expect("in range"));
    let mut own = Vec::new();
    let mut others = Vec::new();
    for (i, c) in clusters.iter().enumerate() {
        let name = format!("c{i:03}");
        let labels = BTreeMap::from([
            (well_known::CLUSTER_SET_LABEL.to_string(), "set-a".to_string()),
            ("env".to_string(), ENVS[c.env].to_string()),
        ]);
        let taints = c
            .taint
            .map(|(k, e, offset)| {
                vec![Taint {
                    key: TAINT_KEYS[k].into(),
                    value: Some("true".into()),
                    effect: EFFECTS[e].into(),
                    time_added: Some(time(offset)),
                }]
            })
            .unwrap_or_default();
        let resources: BTreeMap<String, Quantity> = c
            .cpu
            .map(|cpu| ("cpu".to_string(), Quantity(format!("{cpu}"))))
            .into_iter()
            .collect();
        objects.clusters.push(ManagedCluster {
            metadata: ObjectMeta {
                labels: Some(labels),
                ..meta(None, &name)
            },
            spec: ManagedClusterSpec {
                hub_accepts_client: true,
                taints,
                ..ManagedClusterSpec::default()
            },
            status: Some(ManagedClusterStatus {
                allocatable: resources.clone(),
                capacity: resources,
                ..ManagedClusterStatus::default()
            }),
        });
        if let Some((value, expired)) = c.score {
            objects.scores.push(AddOnPlacementScore {
                metadata: meta(Some(&name), "usage"),
                status: Some(AddOnPlacementScoreStatus {
                    scores: vec![AddOnPlacementScoreItem {
                        name: "cpu".into(),
                        value,
                    }],
                    valid_until: Some(time(if expired { -3600 } else { 3600 })),
                    ..AddOnPlacementScoreStatus::default()
                }),
            });
        }
        for _ in 0..c.other_decisions {
            others.push(name.clone());
        }
        if c.own_decision {
            own.push(name);
        }
    }
    let pd = |ns: &str, name: &str, placement: &str, clusters: &[String]| PlacementDecision {
        metadata: ObjectMeta {
            labels: Some(BTreeMap::from([(
                well_known::PLACEMENT_LABEL.to_string(),
                placement.to_string(),
            )])),
            ..meta(Some(ns), name)
        },
        status: Some(PlacementDecisionStatus {
            decisions: clusters
                .iter()
                .map(|c| ClusterDecision {
                    cluster_name: c.clone(),
                    reason: String::new(),
                    score: None,
                })
                .collect(),
            extra: Default::default(),
        }),
    };
    objects.decisions.push(pd("ns1", "p1-decision-1", "p1", &own));
    objects.decisions.push(pd("other", "o-decision-1", "o", &others));
    objects.cluster_sets.push(ManagedClusterSet {
        metadata: meta(None, "set-a"),
        ..ManagedClusterSet::default()
    });
    objects.bindings.push(ManagedClusterSetBinding {
        metadata: meta(Some("ns1"), "set-a"),
        spec: ManagedClusterSetBindingSpec {
            cluster_set: "set-a".into(),
            ..ManagedClusterSetBindingSpec::default()
        },
        status: None,
    });
    let coordinate = |builtin: Option<&str>| ScoreCoordinate {
        type_: if builtin.is_some() {
            "BuiltIn".into()
        } else {
            "AddOn".into()
        },
        built_in: builtin.map(str::to_string),
        add_on: builtin.is_none().then(|| AddOnScore {
            resource_name: "usage".into(),
            score_name: "cpu".into(),
        }),
    };
    let configurations = [
        Some("Balance"),
        Some("Steady"),
        Some("ResourceAllocatableCPU"),
        None,
    ]
    .into_iter()
    .zip(p.weights)
    .map(|(b, w)| PrioritizerConfig {
        score_coordinate: Some(coordinate(b)),
        weight: Some(w),
        ..PrioritizerConfig::default()
    })
    .collect();
    let predicates = p
        .predicate_env
        .map(|e| {
            vec![ClusterPredicate {
                required_cluster_selector: Some(ClusterSelector {
                    label_selector: Some(LabelSelector {
                        match_labels: Some(BTreeMap::from([("env".to_string(), ENVS[e].to_string())])),
                        ..LabelSelector::default()
                    }),
                    ..ClusterSelector::default()
                }),
            }]
        })
        .unwrap_or_default();
    let tolerations = p
        .tolerate
        .map(|(k, seconds)| {
            vec![Toleration {
                key: Some(TAINT_KEYS[k].into()),
                operator: Some("Exists".into()),
                toleration_seconds: seconds,
                ..Toleration::default()
            }]
        })
        .unwrap_or_default();
    objects.placements.push(Placement {
        metadata: meta(Some("ns1"), "p1"),
        spec: PlacementSpec {
            number_of_clusters: p.number_of_clusters,
            predicates,
            tolerations,
            prioritizer_policy: Some(PrioritizerPolicy {
                mode: Some(if p.exact { "Exact" } else { "Additive" }.into()),
                configurations,
            }),
            ..PlacementSpec::default()
        },
        status: None,
    });
    objects
}

fn run(objects: HubObjects) -> PlacementResult {
    let snapshot = HubSnapshot::new(objects).expect("generated snapshot is valid");
    match sync(&snapshot, "ns1", "p1", now()).expect("generated placement schedules") {
        SyncOutcome::Scheduled(r) => *r,
        SyncOutcome::Skipped(reason) => panic!("unexpected skip: {reason:?}"),
    }
}

/// Selected clusters, totals, and each prioritizer's (name, weight, scores), all by cluster name.
type Observed = (
    Vec<String>,
    BTreeMap<String, i64>,
    Vec<(String, i32, Vec<(String, i64)>)>,
);

/// The observable outcome by cluster name, independent of snapshot-internal ids.
fn by_name(objects: HubObjects) -> Observed {
    let snapshot = HubSnapshot::new(objects).expect("generated snapshot is valid");
    let SyncOutcome::Scheduled(r) = sync(&snapshot, "ns1", "p1", now()).expect("schedules") else {
        panic!("unexpected skip")
    };
    let name = |id| snapshot.cluster_name(id).to_string();
    let selected = r.schedule.selected.iter().map(|id| name(*id)).collect();
    let totals = r
        .schedule
        .feasible
        .iter()
        .zip(&r.schedule.totals)
        .map(|(id, t)| (name(*id), *t))
        .collect();
    let prioritizers = r
        .schedule
        .prioritizers
        .iter()
        .map(|p| {
            let scores = r
                .schedule
                .feasible
                .iter()
                .zip(&p.scores)
                .filter_map(|(id, s)| s.map(|s| (name(*id), s)))
                .collect();
            (p.name(), p.weight, scores)
        })
        .collect();
    (selected, totals, prioritizers)
}

fn shuffled(mut objects: HubObjects, seed: u64) -> HubObjects {
    // A deterministic shuffle driven by the generated seed (xorshift).
    let mut state = seed | 1;
    let mut next = move |n: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n.max(1) as u64) as usize
    };
    for i in (1..objects.clusters.len()).rev() {
        let j = next(i + 1);
        objects.clusters.swap(i, j);
    }
    for i in (1..objects.scores.len()).rev() {
        let j = next(i + 1);
        objects.scores.swap(i, j);
    }
    objects.decisions.reverse();
    objects
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn decisions_are_feasible_and_sized(clusters in proptest::collection::vec(cluster_seed(), 0..40), p in placement_seed()) {
        let result = run(build(&clusters, &p));
        let s = &result.schedule;
        for id in &s.selected {
            prop_assert!(s.feasible.contains(id), "selected cluster is not feasible");
        }
        let expected = match p.number_of_clusters {
            Some(n) => (n as usize).min(s.feasible.len()),
            None => s.feasible.len(),
        };
        prop_assert_eq!(s.selected.len(), expected);
        let decided: usize = result.decisions.iter().map(|d| d.status.as_ref().map_or(0, |s| s.decisions.len())).sum();
        prop_assert_eq!(decided, s.selected.len());
        if let Some(n) = p.number_of_clusters {
            prop_assert_eq!(s.unscheduled, i64::from(n) - s.selected.len() as i64);
        }
        for pd in &result.decisions {
            let names: Vec<&str> = pd.status.iter().flat_map(|s| s.decisions.iter()).map(|d| d.cluster_name.as_str()).collect();
            prop_assert!(names.len() <= 100);
            prop_assert!(names.windows(2).all(|w| w[0] < w[1]), "decisions inside a page are sorted by name");
        }
    }

    #[test]
    fn scores_stay_in_range(clusters in proptest::collection::vec(cluster_seed(), 0..40), p in placement_seed()) {
        let result = run(build(&clusters, &p));
        let s = &result.schedule;
        let mut bound = 0i64;
        for pr in &s.prioritizers {
            bound += 100 * i64::from(pr.weight).abs();
            for score in pr.scores.iter().flatten() {
                prop_assert!((-100..=100).contains(score), "{} scored {}", pr.name(), score);
                if pr.name() == "Balance" {
                    prop_assert_eq!(score % 2, 0, "Balance scores are even");
                }
            }
        }
        for t in &s.totals {
            prop_assert!(t.abs() <= bound, "total {} beyond {}", t, bound);
        }
        let ranked: Vec<i64> = s.ranked().map(|(_, t)| t).collect();
        prop_assert!(ranked.windows(2).all(|w| w[0] >= w[1]), "ranking is by total, descending");
    }

    #[test]
    fn input_order_does_not_matter(clusters in proptest::collection::vec(cluster_seed(), 0..30), p in placement_seed(), seed in any::<u64>()) {
        let objects = build(&clusters, &p);
        prop_assert_eq!(by_name(objects.clone()), by_name(shuffled(objects, seed)));
    }

    #[test]
    fn same_input_same_output(clusters in proptest::collection::vec(cluster_seed(), 0..30), p in placement_seed()) {
        let objects = build(&clusters, &p);
        prop_assert_eq!(run(objects.clone()), run(objects));
    }
}
