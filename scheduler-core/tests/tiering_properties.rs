//! Properties of the TieredPlacement planner over random tiers and event sequences
//! (properties 1–6 below; property 7, the rendered child against the upstream Placement CRD, is in
//! `tests/tests/tiering_child.rs`, where the CRD validator lives). Plus the differential check:
//! the prediction equals what the engine selects for the rendered child itself (CEL pins and all).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tiering_support;

use k8s_openapi::jiff::Timestamp;
use ocm_score_api::crd::tiered_placement::{
    CapacityPolicy, CapacityRule, FailbackMode, ScoreRule, TieredPlacementSpec, TieredPlacementStatus,
    TieringMode, TransitionKind, WhenStale,
};
use ocm_score_api::{Time, Toleration};
use ocm_score_scheduler::tiering::{Plan, WorkIndex, condition, plan};
use proptest::prelude::*;
use tiering_support::*;

const CLUSTERS: [&[&str]; 3] = [&["a-1", "a-2"], &["b-1", "b-2"], &["c-1"]];

#[derive(Clone, Debug)]
enum Op {
    Taint(usize),
    Untaint(usize),
    Score(usize, i32),
    Expire(usize),
    Trigger(u8),
    Nothing,
}

fn all_clusters() -> Vec<&'static str> {
    CLUSTERS.iter().flat_map(|c| c.iter().copied()).collect()
}

fn op() -> impl Strategy<Value = Op> {
    let n = all_clusters().len();
    prop_oneof![
        (0..n).prop_map(Op::Taint),
        (0..n).prop_map(Op::Untaint),
        ((0..n), -100i32..=100).prop_map(|(c, v)| Op::Score(c, v)),
        (0..n).prop_map(Op::Expire),
        (0u8..3).prop_map(Op::Trigger),
        Just(Op::Nothing),
    ]
}

#[derive(Clone, Debug)]
struct Config {
    overflow: bool,
    n: i32,
    policy: FailbackMode,
    rules: bool,
    debounce: u64,
    disqualify: bool,
    tolerate: bool,
}

fn config() -> impl Strategy<Value = Config> {
    (
        any::<bool>(),
        1i32..=3,
        prop_oneof![
            Just(FailbackMode::Never),
            Just(FailbackMode::Manual),
            Just(FailbackMode::Automatic)
        ],
        any::<bool>(),
        prop_oneof![Just(0u64), Just(60), Just(120)],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(overflow, n, policy, rules, debounce, disqualify, tolerate)| Config {
                overflow,
                n,
                policy,
                rules,
                debounce,
                disqualify,
                tolerate,
            },
        )
}

fn build(c: &Config) -> (TieredPlacementSpec, World) {
    let mut spec = spec_yaml(
        r#"
tiers:
- {name: a, clusterSets: [set-a]}
- {name: b, clusterSets: [set-b]}
- {name: c, clusterSets: [set-c]}
failback: {holdDown: 10m, maxHoldDown: 1h}
stabilization: {minDwell: 3m, maxTransitionsPerHour: 3}
"#,
    );
    if c.overflow {
        spec.mode = TieringMode::Overflow;
        spec.number_of_clusters = Some(c.n);
    }
    spec.failback.policy = c.policy;
    if c.rules {
        spec.capacity = Some(CapacityPolicy {
            rules: vec![CapacityRule {
                score: Some(ScoreRule {
                    resource_name: "resource-usage-score".into(),
                    score_name: "mem".into(),
                    at_least: 10,
                    exit_below: Some(-10),
                }),
                ..CapacityRule::default()
            }],
            debounce: Some(format!("{}s", c.debounce)),
            when_stale: if c.disqualify {
                WhenStale::Disqualify
            } else {
                WhenStale::KeepLastVerdict
            },
            stale_grace: Some("5m".into()),
        });
    }
    if c.tolerate {
        spec.template.tolerations = vec![Toleration {
            key: Some(UNREACHABLE.into()),
            operator: Some("Exists".into()),
            toleration_seconds: Some(90),
            ..Toleration::default()
        }];
    }
    let mut w = World::default()
        .set("set-a", CLUSTERS[0])
        .set("set-b", CLUSTERS[1])
        .set("set-c", CLUSTERS[2]);
    for c in all_clusters() {
        w.score(c, "mem", 50, Some(at(100_000)));
    }
    (spec, w)
}

fn apply(s: &mut Scenario, op: &Op, now: Timestamp) {
    let names = all_clusters();
    match op {
        Op::Taint(i) => s.world.taint(names[*i], UNREACHABLE, now),
        Op::Untaint(i) => s.world.untaint(names[*i]),
        Op::Score(i, v) => s.world.score(names[*i], "mem", *v, Some(at(100_000))),
        Op::Expire(i) => {
            let aps = s.world.scores.get_mut(names[*i]).unwrap();
            aps.status.as_mut().unwrap().valid_until = Some(Time(now));
        }
        Op::Trigger(t) => s.tp.spec.failback.trigger = format!("t{t}"),
        Op::Nothing => {}
    }
}

/// Status as it comes back from the API server (JSON, whole seconds).
fn round_trip(status: &TieredPlacementStatus) -> TieredPlacementStatus {
    serde_json::from_value(serde_json::to_value(status).unwrap()).unwrap()
}

fn tier_index(spec: &TieredPlacementSpec, name: &str) -> usize {
    spec.tiers.iter().position(|t| t.name == name).unwrap()
}

/// Whether tier `i` may be entered: one of its qualifying clusters also meets the capacity rule's
/// enter threshold (`atLeast`) on fresh data. A cluster qualifying only inside the hysteresis band
/// (below `atLeast`, not below `exitBelow`) keeps the tier it serves, but is no reason to move into
/// a tier (docs/tiering.md, the failover rules).
fn may_enter(s: &Scenario, p: &Plan, i: usize, now: Timestamp) -> bool {
    let qualifying = &p.tiers[i].qualifying;
    let rule =
        s.tp.spec
            .capacity
            .as_ref()
            .and_then(|c| c.rules.first())
            .and_then(|r| r.score.as_ref());
    let Some(rule) = rule else {
        return !qualifying.is_empty();
    };
    qualifying.iter().any(|cluster| {
        let status = s
            .world
            .scores
            .get(cluster.as_str())
            .and_then(|aps| aps.status.as_ref());
        status.is_some_and(|st| {
            st.valid_until.as_ref().is_some_and(|v| v.0 > now)
                && st
                    .scores
                    .iter()
                    .any(|x| x.name == rule.score_name && x.value >= rule.at_least)
        })
    })
}

fn check_step(s: &Scenario, p: &Plan, prior: Option<&TieredPlacementStatus>, now: Timestamp) {
    let spec = &s.tp.spec;
    let status = &p.status;
    // 2. No voluntary transition within minDwell of the last one, none while Frozen (a score
    //    expiring as the only cause is checked against a counterfactual in the test body).
    if let Some(kind @ (TransitionKind::Failback | TransitionKind::Contract)) = p.transition {
        let manual = spec.failback.policy == FailbackMode::Manual;
        if let Some(last) = prior.and_then(|p| p.transitions.first())
            && !manual
        {
            let dwell = k8s_openapi::jiff::SignedDuration::from_secs(180);
            assert!(now >= last.time.0 + dwell, "{kind:?} within minDwell at {now}");
        }
        if let Some(until) = prior.and_then(|p| p.frozen_until.as_ref()) {
            assert!(manual || now >= until.0, "{kind:?} while frozen");
        }
    }
    let satisfied = |t: &ocm_score_api::crd::tiered_placement::TierStatus| t.qualifying >= 1;
    let stale = status
        .conditions
        .iter()
        .any(|c| c.type_ == condition::SCORES_STALE && c.status == "True");
    match spec.mode {
        TieringMode::Failover => {
            assert_eq!(status.active_tiers.len(), 1);
            let a = tier_index(spec, &status.active_tiers[0]);
            // 3. If any tier may be entered (with fresh data), the active one is satisfied.
            let enterable: Vec<bool> = (0..status.tiers.len()).map(|i| may_enter(s, p, i, now)).collect();
            if !stale && enterable.iter().any(|e| *e) {
                assert!(
                    satisfied(&status.tiers[a]),
                    "active {a} unsatisfied: {:?}",
                    status.tiers
                );
            }
            // 5. An infeasible active tier is left whenever another tier can take over.
            if status.tiers[a].feasible == 0 && !stale {
                assert!(
                    !enterable.iter().enumerate().any(|(i, e)| *e && i != a),
                    "stuck on an infeasible tier: {:?}",
                    status.tiers
                );
            }
        }
        TieringMode::Overflow => {
            // 4. min(N, Σ qualifying) clusters, never a lower tier's new cluster while a higher
            //    tier has an unused qualifying one.
            let n = spec.number_of_clusters.unwrap() as usize;
            let total: usize = status.tiers.iter().map(|t| t.qualifying as usize).sum();
            if !stale && total > 0 {
                assert_eq!(p.predicted.len(), n.min(total), "{:?}", status.tiers);
            }
            let before: Vec<String> = prior
                .and_then(|p| p.placement.as_ref())
                .map(|p| p.predicted.clone())
                .unwrap_or_default();
            for added in p.predicted.iter().filter(|c| !before.contains(c)) {
                let k = CLUSTERS.iter().position(|t| t.contains(&added.as_str())).unwrap();
                for higher in 0..k {
                    let unused = p.tiers[higher]
                        .qualifying
                        .iter()
                        .any(|c| !p.predicted.contains(c) && !stale);
                    assert!(
                        !unused,
                        "added {added} of tier {k} while tier {higher} has room: {:?}",
                        p.tiers
                    );
                }
            }
        }
    }
}

/// The engine's selection for the rendered child itself: candidates from its cluster sets,
/// CEL-pinned predicates, tolerations, prioritizers.
fn engine_selects(s: &Scenario, p: &Plan, now: Timestamp) -> Vec<String> {
    let mut world = s.world.clone();
    let child = p.child.clone().unwrap();
    world.child = Some(child.clone());
    ocm_selects(&world, &child, now)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn planner_properties(cfg in config(), ops in prop::collection::vec((1i64..900, op()), 1..14)) {
        let (spec, world) = build(&cfg);
        let mut s = Scenario::new(spec, world);
        let mut t = 0i64;
        s.step(at(0));
        for (dt, op) in &ops {
            t += dt;
            let now = at(t);
            apply(&mut s, op, now);
            let prior = s.tp.status.clone();
            let p = s.peek(now);
            check_step(&s, &p, prior.as_ref(), now);
            // 2. Unknown is never the only cause: without the expiry the plan moves the same way.
            if let Op::Expire(i) = op
                && !cfg.disqualify
            {
                let mut fresh = Scenario::new(s.tp.spec.clone(), s.world.clone());
                fresh.tp = s.tp.clone();
                let aps = fresh.world.scores.get_mut(all_clusters()[*i]).unwrap();
                aps.status.as_mut().unwrap().valid_until = Some(Time(at(100_000)));
                prop_assert_eq!(fresh.peek(now).predicted, p.predicted.clone(), "stale scores moved the workload");
            }

            // 6. Restart equivalence: the status as stored gives the same plan.
            let mut stored = s.tp.clone();
            stored.status = prior.as_ref().map(round_trip);
            let restarted = plan(&stored, &s.world.snapshot(), &WorkIndex::default(), now);
            prop_assert_eq!(&restarted.status, &p.status);
            prop_assert_eq!(&restarted.child, &p.child);
            prop_assert_eq!(restarted.requeue_at, p.requeue_at);
            prop_assert_eq!(restarted.scores_expire_at, p.scores_expire_at);

            // The prediction is what the engine selects for the rendered child.
            if p.child.is_some() {
                prop_assert_eq!(engine_selects(&s, &p, now), p.predicted.clone());
            }
            s.apply(&p);

            // 1. No input change: an identical plan and no write.
            let again = s.peek(now);
            prop_assert_eq!(&again.status, &p.status);
            prop_assert_eq!(&again.predicted, &p.predicted);
            prop_assert!(!again.write_status, "status rewritten without a change");
            prop_assert!(!again.write_child, "child re-applied without a change");
            prop_assert_eq!(again.transition, None);
        }
    }
}

/// A workload broken on every cluster (docs/design/workload-failover.md §4): whatever the purge
/// mode, failback policy,
/// toleration and hold-down, hours of reconciles make at most `tiers − 1` transitions, then none;
/// every step is restart-equivalent and idempotent.
mod broken_everywhere {
    use super::*;
    use ocm_score_api::crd::tiered_placement::PurgeMode;

    fn world(tiers: usize) -> World {
        let mut w = World::default();
        for (i, clusters) in CLUSTERS.iter().enumerate().take(tiers) {
            w = w.set(&format!("set-{}", ["a", "b", "c"][i]), clusters);
        }
        w.follow = true;
        w
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn at_most_tiers_minus_one_transitions_then_none(
            tiers in 2usize..=3,
            purge in prop_oneof![Just(PurgeMode::Immediately), Just(PurgeMode::Graciously), Just(PurgeMode::Never)],
            automatic in any::<bool>(),
            toleration in prop_oneof![Just(0i32), Just(60), Just(300)],
            hold_minutes in prop_oneof![Just(1u32), Just(10)],
            steps in prop::collection::vec(1i64..900, 20..80),
        ) {
            let names = ["a", "b", "c"];
            let mut yaml = String::from("tiers:\n");
            for name in names.iter().take(tiers) {
                yaml.push_str(&format!("- {{name: {name}, clusterSets: [set-{name}]}}\n"));
            }
            yaml.push_str(&format!(
                "failback: {{policy: {}, holdDown: {hold_minutes}m}}\n\
                 stabilization: {{minDwell: 1m, maxTransitionsPerHour: 9}}\n\
                 workloadHealth: {{manifestWorkReplicaSet: web, tolerationSeconds: {toleration}, purge: {purge:?}}}\n",
                if automatic { "Automatic" } else { "Never" }
            ));
            let mut s = Scenario::new(spec_yaml(&yaml), world(tiers));
            s.step(at(0));
            let mut moves = 0usize;
            let mut t = 0i64;
            for dt in steps {
                t += dt;
                let prior = s.tp.status.clone();
                let p = s.peek(at(t));
                let restarted = s.peek_with(prior.as_ref().map(round_trip).as_ref(), at(t));
                prop_assert_eq!(&restarted.status, &p.status);
                prop_assert_eq!(&restarted.child, &p.child);
                prop_assert_eq!(restarted.requeue_at, p.requeue_at);
                prop_assert_eq!(restarted.scores_expire_at, p.scores_expire_at);
                if p.transition.is_some() {
                    moves += 1;
                }
                prop_assert!(moves < tiers, "{moves} transitions at {t} s: {:?}", p.status.transitions);
                s.apply(&p);
                let again = s.peek(at(t));
                prop_assert!(!again.write_status, "status rewritten without a change at {t} s");
                prop_assert!(!again.write_child, "child re-applied without a change at {t} s");
                // Then OCM's ManifestWorkReplicaSet follows the child.
                s.world.sync_works(at(t));
            }
        }
    }
}
