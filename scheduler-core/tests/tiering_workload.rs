//! TieredPlacement following the workload (issue 33, design `docs/design/workload-failover.md`)
//! with an injected clock: every boundary of the toleration, never-healthy arrivals, missing
//! feedback, the purge modes, `failback.overlap`, and a workload broken everywhere.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tiering_support;

use ocm_score_api::crd::tiered_placement::{RELEASE_ANNOTATION, TransitionKind, WorkloadState};
use ocm_score_scheduler::tiering::{Plan, condition};
use std::collections::BTreeMap;
use tiering_support::*;

fn spec(health: &str, extra: &str) -> ocm_score_api::crd::tiered_placement::TieredPlacementSpec {
    spec_yaml(&format!(
        r#"
tiers:
- {{name: east, clusterSets: [dc-east]}}
- {{name: west, clusterSets: [dc-west]}}
failback: {{policy: Never}}
stabilization: {{minDwell: 1m, maxTransitionsPerHour: 9}}
workloadHealth: {health}
{extra}
"#
    ))
}

fn world() -> World {
    let mut w = World::default()
        .set("dc-east", &["east-1"])
        .set("dc-west", &["west-1"]);
    w.follow = true;
    w
}

/// Started on east (work applied at 0 s, healthy from 10 s).
fn healthy_on_east(health: &str) -> Scenario {
    let mut s = Scenario::new(spec(health, ""), world());
    s.world.set_ready("east-1", 1);
    s.step(at(0));
    assert_eq!(s.active(), ["east"]);
    s.step(at(10));
    assert_eq!(state(&s, "east-1"), WorkloadState::Healthy);
    s
}

fn state(s: &Scenario, cluster: &str) -> WorkloadState {
    s.status()
        .workload_health
        .as_ref()
        .and_then(|w| w.clusters.iter().find(|c| c.cluster == cluster))
        .map_or(WorkloadState::Unknown, |c| c.state)
}

/// Whether the plan publishes an event `reason` whose message names `text`.
fn has_event(p: &Plan, reason: &str, text: &str) -> bool {
    p.events
        .iter()
        .any(|e| e.reason == reason && e.message.contains(text))
}

fn retained(s: &Scenario) -> Vec<String> {
    s.status()
        .workload_health
        .as_ref()
        .map(|w| w.retained.iter().map(|r| r.cluster.clone()).collect())
        .unwrap_or_default()
}

const IMMEDIATELY: &str = "{manifestWorkReplicaSet: web, tolerationSeconds: 300, purge: Immediately}";
const GRACIOUSLY: &str = "{manifestWorkReplicaSet: web, tolerationSeconds: 300, gracePeriodSeconds: 600}";

#[test]
fn an_unhealthy_workload_fails_over_exactly_at_the_toleration() {
    let mut s = healthy_on_east(IMMEDIATELY);
    // Unhealthy from T = 100 s.
    s.world.set_ready("east-1", 0);
    let p = s.step(at(100));
    assert_eq!(p.transition, None, "at T");
    assert_eq!(state(&s, "east-1"), WorkloadState::Unhealthy);
    assert_eq!(p.requeue_at, Some(at(400)), "requeue at T + toleration");
    assert_eq!(
        s.condition(condition::WORKLOAD_HEALTHY),
        ("False".into(), "Unhealthy".into())
    );
    let p = s.peek(at(399));
    assert_eq!(p.transition, None, "at T + toleration - 1 s");
    let p = s.step(at(400));
    assert_eq!(p.transition, Some(TransitionKind::Failover), "at T + toleration");
    assert_eq!(s.status().transitions[0].reason, "WorkloadFailed");
    assert_eq!(
        p.predicted,
        ["west-1"],
        "Immediately: the failed cluster is dropped at once"
    );
    assert!(retained(&s).is_empty());
    assert_eq!(state(&s, "east-1"), WorkloadState::Failed);
    assert!(has_event(&p, "WorkloadFailed", "east-1"), "{:?}", p.events);
    let east = &p.tiers[0];
    assert!(
        east.excluded
            .iter()
            .any(|(c, why)| c == "east-1" && why.contains("workload Failed")),
        "{east:?}"
    );
}

#[test]
fn a_workload_never_healthy_on_arrival_counts_from_its_apply() {
    let mut s = Scenario::new(spec(IMMEDIATELY, ""), world());
    s.step(at(0));
    // Work applied at 0 s with no ready replica; first judged at 200 s.
    let p = s.step(at(200));
    assert_eq!(state(&s, "east-1"), WorkloadState::Unhealthy);
    assert_eq!(
        s.status().workload_health.as_ref().unwrap().clusters[0]
            .since
            .as_ref()
            .unwrap()
            .0,
        at(0)
    );
    assert_eq!(p.requeue_at, Some(at(300)));
    assert_eq!(s.peek(at(299)).transition, None);
    assert_eq!(s.step(at(300)).transition, Some(TransitionKind::Failover));
}

#[test]
fn an_applied_work_without_feedback_turns_unhealthy_with_a_hint_then_fails() {
    let mut s = Scenario::new(spec(IMMEDIATELY, ""), world());
    s.world.follow = false;
    s.step(at(0));
    s.world.works.insert("east-1".into(), work("east-1", at(0), None));
    let p = s.step(at(10));
    assert_eq!(state(&s, "east-1"), WorkloadState::Unknown);
    assert_eq!(p.requeue_at, Some(at(300)));
    s.step(at(299));
    assert_eq!(
        state(&s, "east-1"),
        WorkloadState::Unknown,
        "applied + toleration - 1 s"
    );
    let p = s.step(at(300));
    assert_eq!(
        state(&s, "east-1"),
        WorkloadState::Unhealthy,
        "applied + toleration"
    );
    let reason = &s.status().workload_health.as_ref().unwrap().clusters[0].reason;
    assert!(reason.contains("feedbackRules"), "{reason}");
    assert_eq!(p.requeue_at, Some(at(600)));
    assert_eq!(s.peek(at(599)).transition, None);
    assert_eq!(s.step(at(600)).transition, Some(TransitionKind::Failover));
}

#[test]
fn a_work_not_applied_is_never_judged() {
    let mut s = Scenario::new(spec(IMMEDIATELY, ""), world());
    s.world.follow = false;
    s.step(at(0));
    let mut w = work("east-1", at(0), Some((0, 1)));
    w.status.as_mut().unwrap().conditions[0].status = "False".into();
    s.world.works.insert("east-1".into(), w);
    s.step(at(10));
    assert_eq!(s.step(at(5000)).transition, None);
    assert_eq!(state(&s, "east-1"), WorkloadState::Unknown);
    assert_eq!(
        s.condition(condition::WORKLOAD_HEALTHY),
        ("Unknown".into(), "Pending".into())
    );
}

#[test]
fn graciously_keeps_the_failed_cluster_until_the_replacement_is_healthy() {
    let mut s = healthy_on_east(GRACIOUSLY);
    s.world.set_ready("east-1", 0);
    s.step(at(100));
    let p = s.step(at(400));
    assert_eq!(p.transition, Some(TransitionKind::Failover));
    assert_eq!(s.active(), ["west"]);
    assert_eq!(p.predicted, ["east-1", "west-1"], "make-before-break");
    let r = &s.status().workload_health.as_ref().unwrap().retained[0];
    assert_eq!(
        (
            r.cluster.as_str(),
            r.until.as_ref().unwrap().0,
            r.awaiting.clone(),
            r.reason.as_str()
        ),
        ("east-1", at(1000), vec!["west-1".to_string()], "WorkloadFailed")
    );
    let child = p.child.as_ref().unwrap();
    assert!(
        child
            .spec
            .predicates
            .iter()
            .any(|pr| format!("{pr:?}").contains("'east-1'")),
        "the retained cluster is pinned: {:?}",
        child.spec.predicates
    );
    assert_eq!(p.requeue_at, Some(at(1000)));
    // The replacement is not ready yet: still kept.
    assert_eq!(s.step(at(450)).predicted, ["east-1", "west-1"]);
    s.world.set_ready("west-1", 1);
    let p = s.step(at(500));
    assert_eq!(p.predicted, ["west-1"], "dropped once the replacement is Healthy");
    assert!(retained(&s).is_empty());
    assert!(p.events.iter().any(|e| e.reason == "Released"), "{:?}", p.events);
    assert_eq!(
        s.condition(condition::WORKLOAD_HEALTHY),
        ("True".into(), "Healthy".into())
    );
}

#[test]
fn graciously_drops_the_failed_cluster_when_the_grace_runs_out() {
    let mut s = healthy_on_east(GRACIOUSLY);
    s.world.set_ready("east-1", 0);
    s.step(at(100));
    s.step(at(400));
    assert_eq!(s.peek(at(999)).predicted, ["east-1", "west-1"], "grace end - 1 s");
    assert_eq!(s.step(at(1000)).predicted, ["west-1"], "at the grace end");
}

#[test]
fn never_keeps_the_failed_cluster_until_a_human_releases_it() {
    let mut s = healthy_on_east("{manifestWorkReplicaSet: web, tolerationSeconds: 300, purge: Never}");
    s.world.set_ready("east-1", 0);
    s.step(at(100));
    s.step(at(400));
    s.world.set_ready("west-1", 1);
    assert_eq!(s.step(at(500)).predicted, ["east-1", "west-1"]);
    let p = s.step(at(50_000));
    assert_eq!(p.predicted, ["east-1", "west-1"], "kept, however long");
    assert_eq!(p.requeue_at, None, "nothing to wait for");
    s.tp.metadata.annotations = Some(BTreeMap::from([(
        RELEASE_ANNOTATION.to_string(),
        "east-1".to_string(),
    )]));
    let p = s.step(at(50_010));
    assert_eq!(p.predicted, ["west-1"]);
    assert!(retained(&s).is_empty());
}

#[test]
fn retained_clusters_raise_number_of_clusters_in_overflow() {
    let mut spec = spec(GRACIOUSLY, "mode: Overflow\nnumberOfClusters: 1");
    spec.tiers[0].name = "east".into();
    let mut s = Scenario::new(spec, world());
    s.world.set_ready("east-1", 1);
    s.step(at(0));
    assert_eq!(
        s.last
            .as_ref()
            .unwrap()
            .child
            .as_ref()
            .unwrap()
            .spec
            .number_of_clusters,
        Some(1)
    );
    s.step(at(10));
    s.world.set_ready("east-1", 0);
    s.step(at(100));
    let p = s.step(at(400));
    assert_eq!(p.predicted, ["east-1", "west-1"]);
    assert_eq!(
        p.child.as_ref().unwrap().spec.number_of_clusters,
        Some(2),
        "1 + 1 retained"
    );
    assert_eq!(s.status().transitions[0].reason, "WorkloadFailed");
}

const AUTO: &str = r#"
tiers:
- {name: primary, clusterSets: [dc-a]}
- {name: backup, clusterSets: [dc-b]}
failback: {policy: Automatic, holdDown: 15m, overlap: 10m}
stabilization: {minDwell: 1m, maxTransitionsPerHour: 9}
workloadHealth: {manifestWorkReplicaSet: web, tolerationSeconds: 300}
"#;

fn auto_world() -> World {
    let mut w = World::default().set("dc-a", &["a-1"]).set("dc-b", &["b-1"]);
    w.follow = true;
    w.set_ready("a-1", 1);
    w.set_ready("b-1", 1);
    w
}

#[test]
fn a_failed_primary_is_eligible_again_after_its_hold_down_and_the_failback_overlaps() {
    let mut s = Scenario::new(spec_yaml(AUTO), auto_world());
    s.step(at(0));
    s.step(at(10));
    s.world.set_ready("a-1", 0);
    s.step(at(100));
    assert_eq!(s.step(at(400)).transition, Some(TransitionKind::Failover));
    s.step(at(410));
    // The backup is Healthy: a-1 (gone from its work) stays excluded for the hold-down.
    assert!(retained(&s).is_empty(), "b-1 healthy: a-1 released");
    s.world.set_ready("a-1", 1);
    let p = s.step(at(400 + 899));
    assert_eq!(p.transition, None, "failure + holdDown - 1 s");
    assert_eq!(p.requeue_at, Some(at(1300)));
    let p = s.step(at(1300));
    assert_eq!(p.transition, Some(TransitionKind::Failback), "failure + holdDown");
    assert_eq!(p.predicted, ["a-1", "b-1"], "overlap: b-1 stays");
    let r = &s.status().workload_health.as_ref().unwrap().retained[0];
    assert_eq!((r.cluster.as_str(), r.reason.as_str()), ("b-1", "Overlap"));
    assert_eq!(r.until.as_ref().unwrap().0, at(1900));
    // a-1's new work becomes Healthy: b-1 is let go.
    let p = s.step(at(1310));
    assert_eq!(p.predicted, ["a-1"]);
}

#[test]
fn overlap_without_workload_health_runs_its_full_time() {
    let mut spec = spec_yaml(AUTO);
    spec.workload_health = None;
    let mut s = Scenario::new(spec, auto_world());
    s.step(at(0));
    s.world.taint("a-1", UNREACHABLE, at(10));
    assert_eq!(s.step(at(10)).transition, Some(TransitionKind::Failover));
    s.world.untaint("a-1");
    s.step(at(100));
    let p = s.step(at(1000));
    assert_eq!(p.transition, Some(TransitionKind::Failback));
    assert_eq!(p.predicted, ["a-1", "b-1"]);
    assert_eq!(s.peek(at(1599)).predicted, ["a-1", "b-1"]);
    assert_eq!(s.step(at(1600)).predicted, ["a-1"]);
}

const THREE: &str = r#"
tiers:
- {name: a, clusterSets: [set-a]}
- {name: b, clusterSets: [set-b]}
- {name: c, clusterSets: [set-c]}
failback: {policy: Automatic, holdDown: 10m}
stabilization: {minDwell: 1m, maxTransitionsPerHour: 9}
workloadHealth: {manifestWorkReplicaSet: web, tolerationSeconds: 120, gracePeriodSeconds: 300}
"#;

fn three_world() -> World {
    let mut w = World::default()
        .set("set-a", &["a-1"])
        .set("set-b", &["b-1"])
        .set("set-c", &["c-1"]);
    w.follow = true;
    w
}

#[test]
fn a_workload_broken_everywhere_moves_at_most_tiers_minus_one_times_and_warns_once() {
    let mut s = Scenario::new(spec_yaml(THREE), three_world());
    let mut transitions = Vec::new();
    let mut warnings = 0;
    for t in (0..6 * 3600).step_by(30) {
        let p = s.step(at(t));
        if let Some(k) = p.transition.filter(|k| *k != TransitionKind::Initial) {
            transitions.push((t, k));
        }
        warnings += p
            .events
            .iter()
            .filter(|e| e.reason == "UnhealthyEverywhere")
            .count();
    }
    assert_eq!(
        transitions,
        [(120, TransitionKind::Failover), (240, TransitionKind::Failover)],
        "a → b → c, then nothing"
    );
    assert_eq!(s.active(), ["c"]);
    assert_eq!(warnings, 1, "one Warning for one set of failed clusters");
    let c = s
        .status()
        .conditions
        .iter()
        .find(|c| c.type_ == condition::WORKLOAD_HEALTHY)
        .unwrap();
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "UnhealthyEverywhere")
    );
    assert!(
        c.message.contains("a-1") && c.message.contains("b-1") && c.message.contains("c-1"),
        "{}",
        c.message
    );
    assert_eq!(
        s.last.as_ref().unwrap().predicted,
        ["c-1"],
        "the plan stays where it is"
    );

    // The user fixes the workload: c-1 turns Healthy, the evidence that lets a and b back in.
    s.world.set_ready("c-1", 1);
    s.world.set_ready("a-1", 1);
    let p = s.step(at(6 * 3600));
    assert_eq!(p.transition, Some(TransitionKind::Failback));
    assert_eq!(s.active(), ["a"]);
}

#[test]
fn a_failed_cluster_is_not_selected_again_by_an_overlapping_tier() {
    // Tier `all` contains east's cluster set too: rendered unpinned, OCM would take east-1 back.
    let spec = spec_yaml(&format!(
        r#"
tiers:
- {{name: east, clusterSets: [dc-east]}}
- {{name: all, clusterSets: [dc-east, dc-west]}}
failback: {{policy: Never}}
stabilization: {{minDwell: 1m, maxTransitionsPerHour: 9}}
workloadHealth: {IMMEDIATELY}
"#
    ));
    let mut s = Scenario::new(spec, world());
    s.world.set_ready("east-1", 1);
    s.step(at(0));
    s.step(at(10));
    s.world.set_ready("east-1", 0);
    s.step(at(100));
    let p = s.step(at(400));
    assert_eq!(p.transition, Some(TransitionKind::Failover));
    assert_eq!(s.active(), ["all"]);
    assert_eq!(p.predicted, ["west-1"], "the prediction leaves east-1 out");
    let child = p.child.as_ref().unwrap();
    assert_eq!(
        ocm_selects(&s.world, child, at(400)),
        ["west-1"],
        "OCM leaves east-1 out: {:?}",
        child.spec.predicates
    );
    // Still unpinned: a new member of the tier is picked up by OCM on its own.
    assert!(
        child
            .spec
            .predicates
            .iter()
            .all(|pr| !format!("{pr:?}").contains("'west-1'")),
        "{:?}",
        child.spec.predicates
    );
}

#[test]
fn one_failure_in_a_tier_larger_than_the_pin_cap_excludes_it_without_pinning() {
    let names: Vec<String> = (0..1_002).map(|i| format!("big-{i:04}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut w = World::default().set("dc-big", &refs).set("dc-west", &["west-1"]);
    w.follow = true;
    for n in &names {
        w.set_ready(n, 1);
    }
    let spec = spec_yaml(&format!(
        r#"
tiers:
- {{name: big, clusterSets: [dc-big]}}
- {{name: west, clusterSets: [dc-west]}}
failback: {{policy: Never}}
stabilization: {{minDwell: 1m, maxTransitionsPerHour: 9}}
workloadHealth: {IMMEDIATELY}
"#
    ));
    let mut s = Scenario::new(spec, w);
    s.step(at(0));
    s.step(at(10));
    assert_eq!(s.last.as_ref().unwrap().predicted.len(), 1_002);
    s.world.set_ready("big-0007", 0);
    s.step(at(100));
    let p = s.step(at(400));
    assert_eq!(s.active(), ["big"], "the tier still has enough clusters");
    assert_eq!(
        s.condition(condition::READY),
        ("True".into(), "PlacementSynced".into()),
        "one failure does not pin 1,000 names"
    );
    let child = p.child.as_ref().expect("the child is written");
    assert_eq!(p.predicted.len(), 1_001);
    assert!(!p.predicted.contains(&"big-0007".to_string()));
    let selected = ocm_selects(&s.world, child, at(400));
    assert_eq!(selected, p.predicted, "OCM agrees with the prediction");
}

#[test]
fn retained_pins_larger_than_the_cap_fall_back_to_no_retention() {
    // Failing over from east to a tier of 1,001 clusters while east-1 is retained would pin
    // 1,001 names exactly: the cap holds, east-1 is dropped at once instead.
    let names: Vec<String> = (0..1_001).map(|i| format!("big-{i:04}")).collect();
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let mut w = World::default().set("dc-east", &["east-1"]).set("dc-big", &refs);
    w.follow = true;
    let spec = spec_yaml(&format!(
        r#"
tiers:
- {{name: east, clusterSets: [dc-east]}}
- {{name: big, clusterSets: [dc-big]}}
failback: {{policy: Never}}
stabilization: {{minDwell: 1m, maxTransitionsPerHour: 9}}
workloadHealth: {GRACIOUSLY}
"#
    ));
    let mut s = Scenario::new(spec, w);
    s.world.set_ready("east-1", 1);
    s.step(at(0));
    s.step(at(10));
    s.world.set_ready("east-1", 0);
    s.step(at(100));
    let p = s.step(at(400));
    assert_eq!(p.transition, Some(TransitionKind::Failover));
    let child = p.child.as_ref().expect("the child is written");
    for pr in &child.spec.predicates {
        for e in pr
            .required_cluster_selector
            .iter()
            .flat_map(|r| r.cel_selector.iter())
            .flat_map(|c| c.cel_expressions.iter())
        {
            assert!(e.matches('\'').count() <= 2 * 1_000, "a pin beyond the cap");
        }
    }
    assert!(retained(&s).is_empty(), "no retention beyond the cap");
    assert!(!p.predicted.contains(&"east-1".to_string()));
    assert_eq!(p.predicted.len(), 1_001);
    assert!(
        p.events
            .iter()
            .any(|e| e.type_ == "Warning" && e.message.contains("east-1")),
        "{:?}",
        p.events
    );
}

#[test]
fn a_failed_cluster_reporting_healthy_again_stays_excluded_through_its_hold_down() {
    let mut s = Scenario::new(spec_yaml(AUTO), auto_world());
    s.step(at(0));
    s.step(at(10));
    s.world.set_ready("a-1", 0);
    s.step(at(100));
    assert_eq!(s.step(at(400)).transition, Some(TransitionKind::Failover));
    s.step(at(410));
    // a-1's work reports Healthy again (someone fixed it by hand) long before the hold-down ends.
    s.world.follow = false;
    s.world
        .works
        .insert("a-1".into(), work("a-1", at(0), Some((1, 1))));
    let p = s.step(at(1000));
    assert_eq!(
        p.transition, None,
        "sticky through the hold-down (failure + 15m = 1300 s)"
    );
    assert_eq!(state(&s, "a-1"), WorkloadState::Failed);
    let entry = s
        .status()
        .workload_health
        .as_ref()
        .unwrap()
        .clusters
        .iter()
        .find(|c| c.cluster == "a-1")
        .unwrap()
        .clone();
    assert_eq!(entry.since.as_ref().unwrap().0, at(400), "failedAt kept");
    assert!(entry.reason.contains("Healthy again"), "{}", entry.reason);
    assert!(
        p.tiers[0].excluded.iter().any(|(c, _)| c == "a-1"),
        "{:?}",
        p.tiers[0].excluded
    );
    assert_eq!(p.requeue_at, Some(at(1300)));
    // Planning again with the same inputs writes nothing.
    assert!(!s.peek(at(1001)).write_status, "the recovery reason is stable");
    let p = s.step(at(1300));
    assert_eq!(
        p.transition,
        Some(TransitionKind::Failback),
        "at failure + holdDown"
    );
}

#[test]
fn an_exclusion_that_ends_writes_the_current_observation_once() {
    let mut s = Scenario::new(spec_yaml(AUTO), auto_world());
    s.step(at(0));
    s.step(at(10));
    s.world.set_ready("a-1", 0);
    s.step(at(100));
    s.step(at(400));
    s.step(at(410));
    s.world.follow = false;
    s.world
        .works
        .insert("a-1".into(), work("a-1", at(0), Some((1, 1))));
    s.step(at(1000));
    // The exclusion ends at failure + holdDown: a-1's entry is what its work says now.
    s.step(at(1300));
    assert_eq!(state(&s, "a-1"), WorkloadState::Healthy);
    let entry = s
        .status()
        .workload_health
        .as_ref()
        .unwrap()
        .clusters
        .iter()
        .find(|c| c.cluster == "a-1")
        .unwrap()
        .clone();
    assert!(
        !entry.reason.contains("Healthy again"),
        "no stale failure: {}",
        entry.reason
    );
    // (The failback's overlap is released by the next plan, a-1 being Healthy: compare the
    // verdicts.)
    let again = s.peek(at(1300));
    assert_eq!(
        again.status.workload_health.as_ref().unwrap().clusters,
        s.status().workload_health.as_ref().unwrap().clusters,
        "planning twice with the same inputs rewrites no verdict"
    );
}

fn until_of(s: &Scenario, cluster: &str) -> Option<Option<k8s_openapi::jiff::Timestamp>> {
    s.status()
        .workload_health
        .as_ref()
        .and_then(|w| w.retained.iter().find(|r| r.cluster == cluster))
        .map(|r| r.until.as_ref().map(|u| u.0))
}

#[test]
fn a_purge_change_recomputes_the_retained_failed_clusters_time() {
    let mut s = healthy_on_east("{manifestWorkReplicaSet: web, tolerationSeconds: 300, purge: Never}");
    s.world.set_ready("east-1", 0);
    s.step(at(100));
    s.step(at(400));
    assert_eq!(until_of(&s, "east-1"), Some(None), "Never: no until");
    // Graciously with 600 s: kept until failure (400 s) + 600 s.
    s.edit(|spec| {
        let w = spec.workload_health.as_mut().unwrap();
        w.purge = ocm_score_api::crd::tiered_placement::PurgeMode::Graciously;
        w.grace_period_seconds = Some(600);
    });
    let p = s.step(at(500));
    assert_eq!(until_of(&s, "east-1"), Some(Some(at(1000))));
    assert!(p.requeue_at.is_some_and(|r| r <= at(1000)), "{:?}", p.requeue_at);
    assert_eq!(s.peek(at(999)).predicted, ["east-1", "west-1"]);
    assert_eq!(s.step(at(1000)).predicted, ["west-1"], "at failure + grace");
}

#[test]
fn a_shorter_grace_or_immediately_applies_to_retained_clusters_at_once() {
    let mut s = healthy_on_east(GRACIOUSLY);
    s.world.set_ready("east-1", 0);
    s.step(at(100));
    s.step(at(400));
    assert_eq!(until_of(&s, "east-1"), Some(Some(at(1000))));
    s.edit(|spec| spec.workload_health.as_mut().unwrap().grace_period_seconds = Some(120));
    let p = s.step(at(450));
    assert_eq!(until_of(&s, "east-1"), Some(Some(at(520))));
    assert_eq!(p.requeue_at, Some(at(520)));
    s.edit(|spec| {
        let w = spec.workload_health.as_mut().unwrap();
        w.purge = ocm_score_api::crd::tiered_placement::PurgeMode::Immediately;
        w.grace_period_seconds = None;
    });
    let p = s.step(at(460));
    assert_eq!(p.predicted, ["west-1"], "Immediately: dropped now");
    assert!(retained(&s).is_empty());
}

#[test]
fn removing_workload_health_drops_the_clusters_retained_for_it() {
    let mut s = healthy_on_east("{manifestWorkReplicaSet: web, tolerationSeconds: 300, purge: Never}");
    s.world.set_ready("east-1", 0);
    s.step(at(100));
    s.step(at(400));
    assert_eq!(retained(&s), ["east-1"]);
    s.edit(|spec| spec.workload_health = None);
    let p = s.step(at(500));
    assert_eq!(p.predicted, ["west-1"]);
    assert!(retained(&s).is_empty());
    assert!(has_event(&p, "Released", "workloadHealth"), "{:?}", p.events);
}

#[test]
fn a_retained_cluster_whose_replacement_failed_too_awaits_the_next_replacement() {
    let mut s = Scenario::new(spec_yaml(THREE), three_world());
    s.step(at(0));
    // a-1 fails at 120 s (never healthy: counted from its apply): b-1 replaces it.
    s.step(at(120));
    assert_eq!(s.active(), ["b"]);
    let r = &s.status().workload_health.as_ref().unwrap().retained;
    assert_eq!(
        (r[0].cluster.as_str(), r[0].awaiting.clone()),
        ("a-1", vec!["b-1".to_string()])
    );
    // b-1 fails too at 240 s: c-1 replaces it; a-1 is not released on a Healthy that never was.
    let p = s.step(at(240));
    assert_eq!(s.active(), ["c"]);
    assert!(
        !has_event(&p, "Released", "a-1"),
        "no release claims a Healthy replacement: {:?}",
        p.events
    );
    let r = &s.status().workload_health.as_ref().unwrap().retained;
    let a = r.iter().find(|r| r.cluster == "a-1").expect("a-1 still retained");
    assert_eq!(a.awaiting, ["c-1"], "re-pointed to this plan's replacement");
    assert_eq!(a.until.as_ref().unwrap().0, at(420), "its time is unchanged");
    // Planning again (c-1's work has just appeared) keeps the retention as it is.
    let again = s.peek(at(240));
    assert_eq!(
        again.status.workload_health.as_ref().unwrap().retained,
        s.status().workload_health.as_ref().unwrap().retained
    );
}

#[test]
fn a_tier_staying_short_keeps_only_as_many_failed_clusters_as_it_needs() {
    let spec = spec_yaml(&format!(
        r#"
tiers:
- {{name: a, clusterSets: [set-a]}}
numberOfClusters: 2
failback: {{policy: Never}}
stabilization: {{minDwell: 1m, maxTransitionsPerHour: 9}}
workloadHealth: {IMMEDIATELY}
"#
    ));
    let mut w = World::default().set("set-a", &["a-1", "a-2", "a-3"]);
    w.follow = true;
    let mut s = Scenario::new(spec, w);
    let p = s.step(at(0));
    assert_eq!(p.predicted.len(), 2);
    let unused: Vec<String> = ["a-1", "a-2", "a-3"]
        .iter()
        .map(|c| c.to_string())
        .filter(|c| !p.predicted.contains(c))
        .collect();
    // Both selected workloads never become ready: Failed at 300 s, and no tier is left.
    let p = s.step(at(300));
    assert_eq!(s.active(), ["a"]);
    assert!(
        p.predicted.contains(&unused[0]),
        "the cluster not known to fail is selected before a failed one: {:?}",
        p.predicted
    );
    assert_eq!(
        p.predicted.len(),
        2,
        "one failed cluster is kept to make up the count"
    );
    let child = p.child.as_ref().unwrap();
    assert_eq!(ocm_selects(&s.world, child, at(300)), p.predicted, "OCM agrees");
}

/// Overflow: a cluster whose workload failed is back at failure + hold-down, not one hold-down
/// after its exclusion ended (failback health counts capacity only, as in Failover).
#[test]
fn overflow_consolidates_back_when_the_exclusion_ends() {
    let mut spec = spec_yaml(AUTO);
    spec.mode = ocm_score_api::crd::tiered_placement::TieringMode::Overflow;
    spec.number_of_clusters = Some(1);
    spec.failback.overlap = None;
    let mut s = Scenario::new(spec, auto_world());
    s.step(at(0));
    s.step(at(10));
    s.world.set_ready("a-1", 0);
    s.step(at(100));
    assert_eq!(s.step(at(400)).transition, Some(TransitionKind::Overflow));
    s.step(at(410));
    s.world.set_ready("a-1", 1);
    // Planned in between, as the controller does on every event and resync.
    for t in [500, 900, 1200, 1299] {
        assert_eq!(s.step(at(t)).transition, None, "at {t} s");
    }
    let p = s.step(at(1300));
    assert_eq!(p.transition, Some(TransitionKind::Contract), "failure + holdDown");
    assert_eq!(p.predicted, ["a-1"]);
}

/// docs/design/workload-failover.md §6 as built: a reservation ends at the first report observed
/// after its workload was
/// seen Healthy on the cluster, long before the settle time; a report before that keeps it.
#[test]
fn a_reservation_ends_at_the_first_report_after_its_workload_is_healthy() {
    use ocm_score_scheduler::reservation::{Ledger, ShapeCatalog, Timing, placement_key};
    use ocm_score_scheduler::tiering::{WorkIndex, plan_and_assume};
    use std::time::Duration;

    let mut s = Scenario::new(
        spec(GRACIOUSLY, "workload: {shape: gpu, replicasPerCluster: 2}"),
        world(),
    );
    let mut ledger = Ledger::new(Timing {
        ttl: Duration::from_secs(600),
        settle: Duration::from_secs(300),
    });
    let key = placement_key(&s.tp);
    let plan = |s: &mut Scenario, ledger: &mut Ledger, t: i64| {
        let (p, errors) = plan_and_assume(
            ledger,
            &s.tp,
            &s.world.snapshot(),
            ShapeCatalog::empty(),
            &WorkIndex::new(s.world.works.values()),
            at(t),
        );
        assert!(errors.is_empty(), "{errors:?}");
        s.apply(&p);
        s.world.sync_works(at(t));
        p
    };
    let reserved = |ledger: &Ledger| {
        ledger
            .reservations_of(&key)
            .iter()
            .map(|r| (r.cluster.clone(), r.replicas))
            .collect::<Vec<_>>()
    };
    // Its workload fits on east (a workload is placed only where its `fits` holds it).
    s.world.score("east-1", "fits.gpu", 2 - 100, None);
    s.world.set_ready("east-1", 1);
    plan(&mut s, &mut ledger, 0);
    assert_eq!(reserved(&ledger), [("east-1".to_string(), 2)]);
    // The agent reports before the pods run: the reservation stays (settle is 300 s).
    assert!(ledger.observe_report("east-1", at(5).as_nanosecond()).is_empty());
    // The work is applied and its Deployment ready: Healthy since 10 s.
    plan(&mut s, &mut ledger, 10);
    assert_eq!(state(&s, "east-1"), WorkloadState::Healthy);
    assert!(
        ledger.observe_report("east-1", at(10).as_nanosecond()).is_empty(),
        "a report at the same instant may predate the pods"
    );
    let released = ledger.observe_report("east-1", at(11).as_nanosecond());
    assert_eq!(
        released.into_iter().collect::<Vec<_>>(),
        std::slice::from_ref(&key)
    );
    assert!(reserved(&ledger).is_empty());
    // Planning on: the selection stays, nothing is reserved again.
    plan(&mut s, &mut ledger, 20);
    assert!(reserved(&ledger).is_empty());
}
