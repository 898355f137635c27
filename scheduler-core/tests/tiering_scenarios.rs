//! TieredPlacement timelines with an injected clock: the user stories, the exact
//! boundaries and Karmada #4990.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tiering_support;

use ocm_score_api::crd::tiered_placement::TransitionKind;
use ocm_score_scheduler::tiering::condition;
use tiering_support::*;

const DR: &str = r#"
tiers:
- {name: east, clusterSets: [dc-east]}
- {name: west, clusterSets: [dc-west]}
template:
  tolerations:
  - {key: cluster.open-cluster-management.io/unreachable, operator: Exists, tolerationSeconds: 120}
failback: {policy: Manual}
stabilization: {minDwell: 5m}
"#;

fn dr_world() -> World {
    World::default()
        .set("dc-east", &["east-1"])
        .set("dc-west", &["west-1"])
}

#[test]
fn story_1_primary_backup_with_manual_failback() {
    let mut s = Scenario::new(spec_yaml(DR), dr_world());
    let p = s.step(at(0));
    assert_eq!(s.active(), ["east"]);
    assert_eq!(p.transition, Some(TransitionKind::Initial));
    assert_eq!(p.predicted, ["east-1"]);
    assert!(p.write_child && p.write_status);
    let child = p.child.as_ref().unwrap();
    assert_eq!(
        child.spec.cluster_sets,
        ["dc-east"],
        "unpinned form: the tier verbatim"
    );
    assert_eq!(
        child.metadata.owner_references.as_ref().unwrap()[0].kind,
        "TieredPlacement"
    );

    // East unreachable at 100 s: OCM keeps it until 220 s; we move at 219 s (1 s lead).
    s.world.taint("east-1", UNREACHABLE, at(100));
    assert_eq!(s.step(at(150)).transition, None);
    let p = s.step(at(219));
    assert_eq!(p.transition, Some(TransitionKind::Failover));
    assert_eq!(s.active(), ["west"]);
    assert_eq!(p.predicted, ["west-1"]);
    assert_eq!(s.status().transitions[0].reason, "TierUnavailable");

    // East recovers: no automatic move, the failback waits for the trigger.
    s.world.untaint("east-1");
    let p = s.step(at(1000));
    assert_eq!(p.transition, None);
    assert_eq!(s.active(), ["west"]);
    assert_eq!(
        s.condition(condition::FAILBACK_PENDING),
        ("True".into(), "AwaitingTrigger".into())
    );
    assert_eq!(s.condition(condition::ON_PREFERRED_TIER).0, "False");

    // The operator presses "fail back": back to east although west is healthy.
    s.edit(|spec| spec.failback.trigger = "2026-11-22-1".into());
    let p = s.step(at(1100));
    assert_eq!(p.transition, Some(TransitionKind::Failback));
    assert_eq!(s.active(), ["east"]);
    assert_eq!(
        s.status().failback.as_ref().unwrap().observed_trigger,
        "2026-11-22-1"
    );
    // The trigger is one-shot.
    assert_eq!(s.step(at(1200)).transition, None);
    assert_eq!(s.condition(condition::ON_PREFERRED_TIER).0, "True");
}

#[test]
fn toleration_boundary_is_exact_with_the_one_second_lead() {
    // T = 120 s, timeAdded = 100 s: OCM drops east-1 at 220 s; we must move at 219 s exactly.
    let mut s = Scenario::new(spec_yaml(DR), dr_world());
    s.step(at(0));
    s.world.taint("east-1", UNREACHABLE, at(100));
    let p = s.peek(at_ns(218, 999_999_999));
    assert_eq!(p.transition, None, "before timeAdded + T - 1 s nothing moves");
    assert_eq!(
        p.requeue_at,
        Some(at(219)),
        "requeue at the deadline minus the lead"
    );
    let p = s.peek(at(219));
    assert_eq!(
        p.transition,
        Some(TransitionKind::Failover),
        "at timeAdded + T - 1 s"
    );
    let p = s.peek(at(220));
    assert_eq!(p.transition, Some(TransitionKind::Failover), "at timeAdded + T");
}

#[test]
fn an_untolerated_taint_fails_over_at_once_and_toleration_minus_one_second_does_not() {
    let mut s = Scenario::new(spec_yaml(DR), dr_world());
    s.step(at(0));
    s.world.taint("east-1", UNREACHABLE, at(0));
    // timeAdded + T - 1 s - 1 ns: still tolerated at now + lead.
    assert_eq!(s.peek(at_ns(118, 999_999_999)).transition, None);
    assert_eq!(s.peek(at(119)).transition, Some(TransitionKind::Failover));
}

const AUTO: &str = r#"
tiers:
- {name: primary, clusterSets: [dc-a]}
- {name: backup, clusterSets: [dc-b]}
failback: {policy: Automatic, holdDown: 15m, maxHoldDown: 4h}
stabilization: {minDwell: 1m, maxTransitionsPerHour: 9}
"#;

fn ab_world() -> World {
    World::default().set("dc-a", &["a-1"]).set("dc-b", &["b-1"])
}

#[test]
fn automatic_failback_waits_for_the_hold_down_to_the_nanosecond() {
    let mut s = Scenario::new(spec_yaml(AUTO), ab_world());
    s.step(at(0));
    s.world.taint("a-1", UNREACHABLE, at(10));
    assert_eq!(s.step(at(10)).transition, Some(TransitionKind::Failover));
    // Recovery at 500.3 s: healthySince rounds up to 501 s; eligible at 501 + 900 s.
    s.world.untaint("a-1");
    let p = s.step(at_ns(500, 300_000_000));
    assert_eq!(p.transition, None);
    let pending = s.status().failback.as_ref().unwrap().pending.clone().unwrap();
    assert_eq!(pending.eligible_at.unwrap().0, at(1401));
    assert_eq!(p.requeue_at, Some(at(1401)));
    assert_eq!(
        s.condition(condition::FAILBACK_PENDING),
        ("True".into(), "HoldDown".into())
    );
    let tier = &s.status().tiers[0];
    assert_eq!(tier.failback_eligible_at.as_ref().unwrap().0, at(1401));
    assert_eq!(format!("{:?}", tier.state), "Recovering");

    let before = s.peek(at_ns(1400, 999_999_999));
    assert_eq!(before.transition, None, "eligibleAt - 1 ns");
    let p = s.step(at(1401));
    assert_eq!(p.transition, Some(TransitionKind::Failback), "at eligibleAt");
    assert_eq!(s.active(), ["primary"]);
}

#[test]
fn a_relapse_doubles_the_hold_down_and_quarantines() {
    let mut s = Scenario::new(spec_yaml(AUTO), ab_world());
    s.step(at(0));
    s.world.taint("a-1", UNREACHABLE, at(10));
    s.step(at(10));
    s.world.untaint("a-1");
    s.step(at(100));
    assert_eq!(s.step(at(1000)).transition, Some(TransitionKind::Failback));
    // Relapse: the primary fails again right after the failback.
    s.world.taint("a-1", UNREACHABLE, at(1100));
    assert_eq!(s.step(at(1100)).transition, Some(TransitionKind::Failover));
    let t = &s.status().tiers[0];
    assert_eq!(t.penalty, 1);
    assert_eq!(t.effective_hold_down.as_deref(), Some("30m"));
    s.world.untaint("a-1");
    s.step(at(1200));
    // 30 min of health are needed now, not 15.
    assert_eq!(s.peek(at(1200 + 1799)).transition, None);
    assert_eq!(s.step(at(1200 + 1800)).transition, Some(TransitionKind::Failback));
}

const CAPACITY: &str = r#"
tiers:
- {name: primary, clusterSets: [dc-a]}
- {name: backup, clusterSets: [dc-b]}
capacity:
  rules:
  - score: {resourceName: resource-usage-score, scoreName: mem, atLeast: 10, exitBelow: -10}
  debounce: 2m
failback: {policy: Never}
"#;

#[test]
fn valid_until_equal_to_now_is_fresh_and_one_nanosecond_later_is_stale() {
    let mut s = Scenario::new(spec_yaml(CAPACITY), ab_world());
    s.world.score("a-1", "mem", 50, Some(at(600)));
    s.world.score("b-1", "mem", 50, Some(at(3600)));
    let p = s.step(at(0));
    assert_eq!(s.active(), ["primary"]);
    assert_eq!(
        p.scores_expire_at,
        Some(at_ns(600, 1)),
        "the score expires then, unless renewed"
    );
    assert_eq!(p.requeue_at, None, "no timer of the planner's own");
    assert_eq!(p.replan_at(), Some(at_ns(600, 1)));
    s.step(at(600));
    assert_eq!(
        s.condition(condition::SCORES_STALE).0,
        "False",
        "validUntil == now is fresh"
    );
    let p = s.step(at_ns(600, 1));
    assert_eq!(s.condition(condition::SCORES_STALE).0, "True");
    assert_eq!(p.transition, None, "stale scores alone never move the workload");
    assert_eq!(s.active(), ["primary"]);
    // Much later: still no move.
    assert_eq!(s.step(at(7200)).transition, None);
}

#[test]
fn hysteresis_holds_inside_the_band_and_debounce_delays_the_exit() {
    let mut s = Scenario::new(spec_yaml(CAPACITY), ab_world());
    s.world.score("a-1", "mem", 50, None);
    s.world.score("b-1", "mem", 50, None);
    s.step(at(0));
    // Inside the band (exit -10 <= v < enter 10): still qualified.
    s.world.score("a-1", "mem", 0, None);
    assert_eq!(s.step(at(60)).transition, None);
    assert_eq!(s.status().tiers[0].qualifying, 1);
    // Below the exit threshold at 100.5 s: the change is debounced until 101 + 120 s.
    s.world.score("a-1", "mem", -50, None);
    let p = s.step(at_ns(100, 500_000_000));
    assert_eq!(p.transition, None);
    assert_eq!(p.requeue_at, Some(at(221)));
    assert_eq!(
        s.peek(at_ns(220, 999_999_999)).transition,
        None,
        "debounce expiry - 1 ns"
    );
    let p = s.step(at(221));
    assert_eq!(p.transition, Some(TransitionKind::Failover));
    assert_eq!(s.status().transitions[0].reason, "InsufficientQualifying");
    assert_eq!(s.active(), ["backup"]);
}

#[test]
fn a_flapping_score_that_recovers_within_the_debounce_moves_nothing() {
    let mut s = Scenario::new(spec_yaml(CAPACITY), ab_world());
    s.world.score("a-1", "mem", 50, None);
    s.world.score("b-1", "mem", 50, None);
    s.step(at(0));
    s.world.score("a-1", "mem", -50, None);
    s.step(at(10));
    s.world.score("a-1", "mem", 50, None);
    s.step(at(60));
    s.world.score("a-1", "mem", -50, None);
    s.step(at(100));
    // The second drop restarted the debounce at 100 s.
    assert_eq!(s.step(at(200)).transition, None);
    assert_eq!(s.step(at(220)).transition, Some(TransitionKind::Failover));
}

#[test]
fn karmada_4990_ends_on_the_primary() {
    // Karmada's DR example: terms c0 (primary) and c1 (backup), no automatic failback.
    let spec = spec_yaml(
        r#"
tiers:
- {name: c0, clusterSets: [c0]}
- {name: c1, clusterSets: [c1]}
failback: {policy: Never}
"#,
    );
    let world = World::default().set("c0", &["c0"]).set("c1", &["c1"]);
    let mut s = Scenario::new(spec, world);
    // 1. Deployed on c0.
    s.step(at(0));
    assert_eq!(s.active(), ["c0"]);
    // 2. c0 down: moved to c1.
    s.world.taint("c0", UNREACHABLE, at(60));
    assert_eq!(s.step(at(60)).transition, Some(TransitionKind::Failover));
    assert_eq!(s.active(), ["c1"]);
    // 3. c0 back: stays on c1 (failback Never), never on both.
    s.world.untaint("c0");
    let p = s.step(at(600));
    assert_eq!(p.predicted, ["c1"]);
    // 4. c1 down while c0 is healthy.
    s.world.taint("c1", UNREACHABLE, at(900));
    let p = s.step(at(900));
    // 5. The best available tier in the whole order: c0, not "nothing after c1".
    assert_eq!(p.transition, Some(TransitionKind::Failover));
    assert_eq!(s.active(), ["c0"]);
    assert_eq!(p.predicted, ["c0"]);
}

#[test]
fn story_3_best_available_not_next() {
    let spec = spec_yaml(
        r#"
tiers:
- {name: region, clusterSets: [r]}
- {name: continent, clusterSets: [c]}
- {name: anywhere, clusterSets: [w]}
failback: {policy: Never}
"#,
    );
    let world = World::default()
        .set("r", &["r-1"])
        .set("c", &["c-1"])
        .set("w", &["w-1"]);
    let mut s = Scenario::new(spec, world);
    s.step(at(0));
    s.world.taint("r-1", UNREACHABLE, at(10));
    s.step(at(10));
    assert_eq!(s.active(), ["continent"]);
    s.world.untaint("r-1");
    s.step(at(100));
    s.world.taint("c-1", UNREACHABLE, at(200));
    s.step(at(200));
    assert_eq!(s.active(), ["region"]);
}

#[test]
fn no_tier_satisfied_keeps_the_current_tier() {
    let mut s = Scenario::new(spec_yaml(AUTO), ab_world());
    s.step(at(0));
    s.world.taint("a-1", UNREACHABLE, at(10));
    s.world.taint("b-1", UNREACHABLE, at(10));
    let p = s.step(at(10));
    assert_eq!(p.transition, None);
    assert_eq!(s.active(), ["primary"]);
    assert_eq!(s.condition(condition::NO_TIER_SATISFIED).0, "True");
}

#[test]
fn the_transition_budget_freezes_voluntary_moves_but_never_forced_ones() {
    let mut spec = spec_yaml(AUTO);
    spec.failback.hold_down = Some("1m".into());
    spec.stabilization.max_transitions_per_hour = Some(2);
    let mut s = Scenario::new(spec, ab_world());
    s.step(at(0));
    s.world.taint("a-1", UNREACHABLE, at(100));
    assert_eq!(s.step(at(100)).transition, Some(TransitionKind::Failover));
    s.world.untaint("a-1");
    s.step(at(200));
    assert_eq!(s.step(at(260)).transition, Some(TransitionKind::Failback));
    assert_eq!(s.condition(condition::FROZEN).0, "False");
    // The third counted transition within the hour exceeds the budget of 2.
    s.world.taint("a-1", UNREACHABLE, at(300));
    let p = s.step(at(300));
    assert_eq!(
        p.transition,
        Some(TransitionKind::Failover),
        "forced failover is never blocked"
    );
    assert_eq!(s.condition(condition::FROZEN).0, "True");
    assert!(p.events.iter().any(|e| e.reason == "Frozen"));
    s.world.untaint("a-1");
    s.step(at(310));
    // Hold-down (doubled to 2m after the relapse) and dwell are long over; Frozen blocks.
    assert_eq!(s.step(at(2000)).transition, None);
    assert_eq!(s.condition(condition::FAILBACK_PENDING).1, "Frozen");
    assert_eq!(s.peek(at_ns(3899, 999_999_999)).transition, None);
    // One hour after freezing, the failback happens.
    assert_eq!(s.step(at(3900)).transition, Some(TransitionKind::Failback));
}

#[test]
fn an_invalid_spec_names_the_field_and_leaves_the_child() {
    let mut s = Scenario::new(spec_yaml(DR), dr_world());
    s.step(at(0));
    let child = s.world.child.clone();
    s.edit(|spec| spec.tiers[1].name = "east".into());
    let p = s.step(at(10));
    assert!(p.child.is_none() && !p.write_child);
    assert_eq!(
        s.condition(condition::READY),
        ("False".into(), "InvalidSpec".into())
    );
    let ready = s.status().conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert!(ready.message.contains("spec.tiers[1].name"), "{}", ready.message);
    assert_eq!(s.world.child, child);
    assert_eq!(p.events[0].reason, "InvalidSpec");
    // Re-planning the same invalid spec writes and reports nothing new.
    let again = s.step(at(20));
    assert!(!again.write_status && again.events.is_empty());
}

#[test]
fn a_cel_predicate_that_does_not_compile_is_an_invalid_spec() {
    let mut spec = spec_yaml(DR);
    spec.tiers[0].predicates = serde_norway::from_str(
        "- requiredClusterSelector: {celSelector: {celExpressions: ['managedCluster.metadata.name ==']}}",
    )
    .unwrap();
    let mut s = Scenario::new(spec, dr_world());
    let p = s.step(at(0));
    assert!(p.child.is_none());
    let ready = s.status().conditions.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(ready.reason, "InvalidSpec");
    assert!(ready.message.contains("spec.tiers[0]"), "{}", ready.message);
}

#[test]
fn override_pins_a_tier_for_maintenance() {
    let mut s = Scenario::new(spec_yaml(AUTO), ab_world());
    s.step(at(0));
    s.edit(|spec| {
        spec.override_ = Some(ocm_score_api::crd::tiered_placement::TierOverride {
            tier: "backup".into(),
        })
    });
    let p = s.step(at(10));
    assert_eq!(p.transition, Some(TransitionKind::Override));
    assert_eq!(s.active(), ["backup"]);
    assert_eq!(s.condition(condition::ON_PREFERRED_TIER).1, "Override");
}

const OVERFLOW: &str = r#"
mode: Overflow
numberOfClusters: 3
tiers:
- {name: on-prem, clusterSets: [dc-gpu]}
- {name: cloud-eu, clusterSets: [aws-eu]}
- {name: cloud-any, clusterSets: [aws]}
capacity:
  rules:
  - fits: {shape: a100-x1, atLeastReplicas: 4, exitBelowReplicas: 2}
workload: {shape: a100-x1, replicasPerCluster: 4}
failback: {policy: Automatic, holdDown: 15m, maxClustersPerStep: 1}
stabilization: {minDwell: 5m, maxTransitionsPerHour: 9}
"#;

fn gpu_world() -> World {
    let mut w = World::default()
        .set("dc-gpu", &["dc-1", "dc-2", "dc-3"])
        .set("aws-eu", &["eu-a", "eu-b"])
        .set("aws", &["any-a"]);
    // fits encoding: value = replicas - 100.
    for (c, replicas) in [
        ("dc-1", 8),
        ("dc-2", 8),
        ("dc-3", 1),
        ("eu-a", 10),
        ("eu-b", 6),
        ("any-a", 50),
    ] {
        w.score(c, "fits.a100-x1", replicas - 100, None);
    }
    w
}

#[test]
fn story_2_overflow_spills_and_consolidates_one_cluster_at_a_time() {
    let mut s = Scenario::new(spec_yaml(OVERFLOW), gpu_world());
    let p = s.step(at(0));
    assert_eq!(s.active(), ["on-prem", "cloud-eu"]);
    assert_eq!(p.predicted, ["dc-1", "dc-2", "eu-a"]);
    let child = p.child.as_ref().unwrap();
    assert_eq!(child.spec.number_of_clusters, Some(3));
    assert_eq!(
        child.spec.predicates.len(),
        2,
        "one pinned predicate per active tier"
    );
    let groups = &child
        .spec
        .decision_strategy
        .as_ref()
        .unwrap()
        .group_strategy
        .as_ref()
        .unwrap()
        .decision_groups;
    assert_eq!(
        groups.iter().map(|g| g.group_name.as_str()).collect::<Vec<_>>(),
        ["on-prem", "cloud-eu"]
    );

    // Self-credit: dc-1 runs 4 replicas of ours; a report of 0 free still counts 4 (>= exit 2).
    s.world.score("dc-1", "fits.a100-x1", -100, None);
    assert_eq!(s.step(at(60)).predicted, ["dc-1", "dc-2", "eu-a"]);

    // dc-3 gains capacity at 100 s: consolidation waits 15 min of health.
    s.world.score("dc-3", "fits.a100-x1", -90, None);
    let p = s.step(at(100));
    assert_eq!(p.transition, None);
    assert_eq!(
        s.condition(condition::FAILBACK_PENDING),
        ("True".into(), "HoldDown".into())
    );
    assert_eq!(s.peek(at(100 + 899)).transition, None);
    let p = s.step(at(100 + 900));
    assert_eq!(p.transition, Some(TransitionKind::Contract));
    assert_eq!(p.predicted, ["dc-1", "dc-2", "dc-3"]);
    assert_eq!(s.active(), ["on-prem"]);
}

#[test]
fn overflow_consolidation_moves_one_cluster_per_dwell() {
    let mut w = gpu_world();
    for c in ["dc-1", "dc-2", "dc-3"] {
        w.score(c, "fits.a100-x1", -100, None);
    }
    let mut s = Scenario::new(spec_yaml(OVERFLOW), w);
    let p = s.step(at(0));
    assert_eq!(s.active(), ["cloud-eu", "cloud-any"]);
    assert_eq!(p.predicted, ["any-a", "eu-a", "eu-b"]);
    assert_eq!(s.condition(condition::INSUFFICIENT_CAPACITY).0, "False");
    for c in ["dc-1", "dc-2"] {
        s.world.score(c, "fits.a100-x1", -90, None);
    }
    s.step(at(10));
    let p = s.step(at(10 + 900));
    assert_eq!(p.transition, Some(TransitionKind::Contract));
    assert_eq!(
        p.predicted,
        ["dc-1", "eu-a", "eu-b"],
        "the lowest tier's cluster goes first"
    );
    assert_eq!(
        s.peek(at(10 + 900 + 299)).transition,
        None,
        "one swap per minDwell"
    );
    let p = s.step(at(10 + 900 + 300));
    assert_eq!(p.transition, Some(TransitionKind::Contract));
    assert_eq!(p.predicted, ["dc-1", "dc-2", "eu-a"]);
}

#[test]
fn overflow_shortfall_selects_everything_and_says_so() {
    let mut w = gpu_world();
    for c in ["dc-1", "dc-2", "dc-3", "eu-a", "eu-b"] {
        w.score(c, "fits.a100-x1", -100, None);
    }
    let mut s = Scenario::new(spec_yaml(OVERFLOW), w);
    let p = s.step(at(0));
    assert_eq!(p.predicted, ["any-a"]);
    assert_eq!(s.condition(condition::INSUFFICIENT_CAPACITY).0, "True");
}

#[test]
fn scale_in_drops_the_lowest_tier_first() {
    let mut s = Scenario::new(spec_yaml(OVERFLOW), gpu_world());
    s.step(at(0));
    s.edit(|spec| spec.number_of_clusters = Some(2));
    let p = s.step(at(10));
    assert_eq!(p.predicted, ["dc-1", "dc-2"]);
    assert_eq!(p.transition, Some(TransitionKind::SpecChange));
}

const DISQUALIFY_AT_ONCE: &str = r#"
tiers:
- {name: primary, clusterSets: [dc-a]}
- {name: backup, clusterSets: [dc-b]}
capacity:
  debounce: 0s
  whenStale: Disqualify
  staleGrace: 0s
  rules:
  - score: {resourceName: resource-usage-score, scoreName: cpu, atLeast: 10}
failback: {policy: Never}
stabilization: {minDwell: 0s}
"#;

#[test]
fn a_score_expiry_is_no_timer_of_the_planner_but_its_stale_grace_is() {
    let mut s = Scenario::new(spec_yaml(DISQUALIFY_AT_ONCE), ab_world());
    s.world.score("a-1", "cpu", 50, Some(at(3)));
    s.world.score("b-1", "cpu", 50, Some(at(100)));
    let p = s.step(at(0));
    assert_eq!(s.active(), ["primary"]);
    assert_eq!((p.requeue_at, p.scores_expire_at), (None, Some(at_ns(3, 1))));
    // Expired at 3.5 s: stale since 4 s (whole seconds), disqualified then.
    let p = s.step(at_ns(3, 500_000_000));
    assert_eq!(s.condition(condition::SCORES_STALE).0, "True");
    assert_eq!(p.transition, None);
    assert_eq!(
        p.requeue_at,
        Some(at(4)),
        "the stale grace is the planner's own timer"
    );
    assert_eq!(s.step(at(4)).transition, Some(TransitionKind::Failover));
    assert_eq!(s.active(), ["backup"]);
}
