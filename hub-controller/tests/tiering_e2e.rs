//! End to end: `ocm-score-hub tiering` as a process, as its service account with the RBAC of
//! `manifests/hub` enforced, against the API server double (upstream OCM CRDs and our CRD, so every
//! child and status it writes is schema-checked), with a stand-in for OCM's placement controller
//! that writes PlacementDecisions with scheduler-core's OCM-exact engine (tiering_common).
//!
//! Durations in the specs are seconds, so the tests wait on real time, but always for a positive
//! sign (a transition in the status, a condition, decisions), never a fixed sleep. In every settled
//! step OCM's decisions equal the planner's prediction (`PlanDiverged=False`).

mod tiering_common;

use jiff::Timestamp;
use ocm_score_api::crd::tiered_placement::{TieredPlacement, TransitionKind};
use ocm_score_kube_double::RequestMatch;
use ocm_score_tests::support::Exposition;
use ocm_score_tests::tiering::{assert_pinned, set, single_cluster_swaps, whole_seconds_after};
use serde_json::json;
use std::collections::BTreeSet;
use tiering_common::{CONVERGE, ControllerProcess, Hub, eventually};

const NAME: &str = "web";

/// Failover between two tiers of two clusters; `failback` and `minDwell` vary per test.
fn failover_spec(toleration_seconds: u32, failback: &str) -> String {
    format!(
        "
apiVersion: tiering.ocm-score.io/v1alpha1
kind: TieredPlacement
metadata: {{name: {NAME}, namespace: apps}}
spec:
  mode: Failover
  tiers:
  - {{name: primary, clusterSets: [primary]}}
  - {{name: secondary, clusterSets: [secondary]}}
  template:
    tolerations:
    - {{key: cluster.open-cluster-management.io/unreachable, operator: Exists, tolerationSeconds: {toleration_seconds}}}
  failback: {failback}
  stabilization: {{minDwell: 0s, maxTransitionsPerHour: 9}}
"
    )
}

/// Waits until the controller has planned the current generation, the active tiers are `active`,
/// OCM's decisions are `clusters`, and they equal the prediction (`PlanDiverged=False`).
async fn settled(
    hub: &Hub,
    controller: &ControllerProcess,
    active: &[&str],
    clusters: &[&str],
) -> TieredPlacement {
    hub.view()
        .settled(NAME, active, clusters, CONVERGE, || controller.log())
        .await
}

/// Waits for a transition of `kind` at or after `after`; returns it.
async fn transition(
    hub: &Hub,
    controller: &ControllerProcess,
    kind: TransitionKind,
    after: Timestamp,
) -> ocm_score_api::crd::tiered_placement::Transition {
    hub.view()
        .transition(NAME, kind, after, CONVERGE, || controller.log())
        .await
}

async fn started(hub: &Hub, identity: &str) -> ControllerProcess {
    let mut controller = hub.controller(identity);
    controller
        .wait_ready(CONVERGE, || hub.controller_requests())
        .await;
    controller
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fails_over_after_the_toleration_and_back_after_the_hold_down() {
    let hub = Hub::start().await;
    let controller = started(&hub, "tiering-a").await;
    hub.create_tiered(&failover_spec(
        3,
        "{policy: Automatic, holdDown: 3s, maxHoldDown: 1m}",
    ));

    // Initial placement: the first tier, owned by the TieredPlacement.
    let tp = settled(&hub, &controller, &["primary"], &["p1", "p2"]).await;
    let status = tp.status.as_ref().expect("status");
    assert_eq!(status.transitions[0].kind, TransitionKind::Initial);
    assert_eq!(
        hub.condition(NAME, "Ready"),
        Some(("True".into(), "PlacementSynced".into()))
    );
    let child = hub.child(NAME).expect("the child Placement");
    let owner = &child.metadata.owner_references.as_ref().expect("an owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.uid.as_str()),
        ("TieredPlacement", tp.metadata.uid.as_deref().unwrap_or_default())
    );
    assert_eq!(child.spec.cluster_sets, ["primary"]);
    assert!(
        !hub.events("Initial").is_empty(),
        "an event for the initial placement"
    );

    // An input change that does not change the plan is reconciled without any write.
    let writes = hub.controller_writes();
    let reconciles = controller
        .metric("ocm_score_tiering_reconciles_total", &[])
        .await
        .unwrap_or(0.0);
    hub.server
        .create(
            json!({"apiVersion": "cluster.open-cluster-management.io/v1alpha1",
            "kind": "AddOnPlacementScore", "metadata": {"name": "unrelated", "namespace": "s1"}}),
        )
        .expect("an unrelated score object");
    let deadline = std::time::Instant::now() + tiering_common::CONVERGE;
    while controller
        .metric("ocm_score_tiering_reconciles_total", &[])
        .await
        .unwrap_or(0.0)
        <= reconciles
    {
        assert!(
            std::time::Instant::now() < deadline,
            "no reconcile after the change:\n{}",
            controller.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        hub.controller_writes(),
        writes,
        "no write when the plan did not change"
    );

    // Both primary clusters unreachable: failover once the toleration has run out (the planner
    // looks 1 s ahead so its switch reaches OCM before OCM's own deadline).
    let tainted = Timestamp::now();
    hub.taint("p1", tainted).await;
    hub.taint("p2", tainted).await;
    let failover = transition(&hub, &controller, TransitionKind::Failover, tainted).await;
    assert!(
        failover.time.0 >= whole_seconds_after(tainted, 2),
        "failover at {} is before the toleration (3 s, 1 s lead) from {tainted}",
        failover.time.0
    );
    settled(&hub, &controller, &["secondary"], &["s1", "s2"]).await;

    // Recovery: the failback waits for the hold-down.
    let recovered = Timestamp::now();
    hub.untaint("p1").await;
    hub.untaint("p2").await;
    let eligible_at = hub
        .view()
        .failback_pending(NAME, &["HoldDown"], CONVERGE, || controller.log())
        .await
        .expect("an eligibleAt");
    assert!(
        eligible_at >= whole_seconds_after(recovered, 3),
        "{eligible_at} vs {recovered}"
    );
    let failback = transition(&hub, &controller, TransitionKind::Failback, recovered).await;
    assert!(
        failback.time.0 >= eligible_at,
        "failback at {} before {eligible_at}",
        failback.time.0
    );
    settled(&hub, &controller, &["primary"], &["p1", "p2"]).await;
    assert_eq!(
        hub.condition(NAME, "FailbackPending").map(|c| c.0),
        Some("False".into())
    );
    assert!(!hub.events("Failover").is_empty() && !hub.events("Failback").is_empty());
    assert!(
        controller
            .metric("ocm_score_tiering_transitions_total", &[("kind", "Failback")])
            .await
            >= Some(1.0)
    );
    assert_eq!(
        controller.metric("ocm_score_tiering_leader", &[]).await,
        Some(1.0)
    );
    assert_eq!(controller.terminate().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn manual_failback_waits_for_the_trigger() {
    let hub = Hub::start().await;
    let controller = started(&hub, "tiering-a").await;
    hub.create_tiered(&failover_spec(1, "{policy: Manual}"));
    settled(&hub, &controller, &["primary"], &["p1", "p2"]).await;
    let tainted = Timestamp::now();
    hub.taint("p1", tainted).await;
    hub.taint("p2", tainted).await;
    transition(&hub, &controller, TransitionKind::Failover, tainted).await;
    settled(&hub, &controller, &["secondary"], &["s1", "s2"]).await;

    // Recovered, but Manual: pending until someone pulls the trigger.
    let recovered = Timestamp::now();
    hub.untaint("p1").await;
    hub.untaint("p2").await;
    hub.view()
        .failback_pending(NAME, &["AwaitingTrigger"], CONVERGE, || controller.log())
        .await;
    let status = hub.tiered(NAME).status.expect("status");
    assert_eq!(status.active_tiers, ["secondary"]);
    assert!(
        !status
            .transitions
            .iter()
            .any(|t| t.kind == TransitionKind::Failback)
    );

    hub.patch_tiered(NAME, json!({"spec": {"failback": {"trigger": "go-1"}}}))
        .await;
    transition(&hub, &controller, TransitionKind::Failback, recovered).await;
    let tp = settled(&hub, &controller, &["primary"], &["p1", "p2"]).await;
    assert_eq!(
        tp.status.and_then(|s| s.failback).map(|f| f.observed_trigger),
        Some("go-1".into())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overflow_spills_and_consolidates_one_cluster_at_a_time() {
    let hub = Hub::start().await;
    let controller = started(&hub, "tiering-a").await;
    hub.create_tiered(&format!(
        "
apiVersion: tiering.ocm-score.io/v1alpha1
kind: TieredPlacement
metadata: {{name: {NAME}, namespace: apps}}
spec:
  mode: Overflow
  numberOfClusters: 2
  tiers:
  - {{name: primary, clusterSets: [primary]}}
  - {{name: secondary, clusterSets: [secondary]}}
  template:
    tolerations:
    - {{key: cluster.open-cluster-management.io/unreachable, operator: Exists, tolerationSeconds: 1}}
  failback: {{policy: Automatic, holdDown: 2s, maxHoldDown: 1m, maxClustersPerStep: 1}}
  stabilization: {{minDwell: 2s, maxTransitionsPerHour: 9}}
"
    ));
    settled(&hub, &controller, &["primary"], &["p1", "p2"]).await;

    // Both primary clusters gone: the two places spill to the next tier.
    let tainted = Timestamp::now();
    hub.taint("p1", tainted).await;
    hub.taint("p2", tainted).await;
    transition(&hub, &controller, TransitionKind::Overflow, tainted).await;
    settled(&hub, &controller, &["secondary"], &["s1", "s2"]).await;

    // Back: one swap per step, minDwell apart, until both places are on the primary tier again.
    let recovered = Timestamp::now();
    hub.untaint("p1").await;
    hub.untaint("p2").await;
    let tp = settled(&hub, &controller, &["primary"], &["p1", "p2"]).await;
    single_cluster_swaps(&tp, recovered, 2, jiff::SignedDuration::from_secs(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_scores_are_unknown_not_bad_so_nothing_moves() {
    let hub = Hub::start().await;
    let fresh = Timestamp::now() + jiff::SignedDuration::from_hours(1);
    hub.score("s1", "cpu", 50, fresh).await;
    hub.score("s2", "cpu", 50, fresh).await;
    // The primary clusters' scores stop being renewed shortly.
    let expiring = Timestamp::now() + jiff::SignedDuration::from_secs(4);
    hub.score("p1", "cpu", 50, expiring).await;
    hub.score("p2", "cpu", 50, expiring).await;
    let controller = started(&hub, "tiering-a").await;
    hub.create_tiered(&format!(
        "
apiVersion: tiering.ocm-score.io/v1alpha1
kind: TieredPlacement
metadata: {{name: {NAME}, namespace: apps}}
spec:
  mode: Failover
  tiers:
  - {{name: primary, clusterSets: [primary]}}
  - {{name: secondary, clusterSets: [secondary]}}
  capacity:
    rules:
    - score: {{resourceName: resource-usage-score, scoreName: cpu, atLeast: 10}}
  failback: {{policy: Automatic, holdDown: 1s, maxHoldDown: 1m}}
  stabilization: {{minDwell: 0s}}
"
    ));
    settled(&hub, &controller, &["primary"], &["p1", "p2"]).await;
    // Pinned (capacity rules): the child names the clusters with a CEL pin.
    assert_pinned(&hub.child(NAME).expect("child"));

    let (status, reason) = eventually(
        "ScoresStale=True",
        || {
            hub.tiered(NAME)
                .status
                .map(|s| format!("{s:#?}"))
                .unwrap_or_default()
        },
        || {
            let c = hub.condition(NAME, "ScoresStale")?;
            (c.0 == "True").then_some(c)
        },
    )
    .await;
    assert_eq!(status, "True", "{reason}");
    let tp = settled(&hub, &controller, &["primary"], &["p1", "p2"]).await;
    let transitions = tp.status.expect("status").transitions;
    assert_eq!(
        transitions.len(),
        1,
        "only the initial placement: {transitions:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_during_the_hold_down_keeps_its_end() {
    let hub = Hub::start().await;
    let first = started(&hub, "tiering-a").await;
    hub.create_tiered(&failover_spec(
        1,
        "{policy: Automatic, holdDown: 8s, maxHoldDown: 1m}",
    ));
    settled(&hub, &first, &["primary"], &["p1", "p2"]).await;
    let tainted = Timestamp::now();
    hub.taint("p1", tainted).await;
    hub.taint("p2", tainted).await;
    transition(&hub, &first, TransitionKind::Failover, tainted).await;
    settled(&hub, &first, &["secondary"], &["s1", "s2"]).await;
    let recovered = Timestamp::now();
    hub.untaint("p1").await;
    hub.untaint("p2").await;
    let eligible_at = hub
        .view()
        .failback_pending(NAME, &["HoldDown"], CONVERGE, || first.log())
        .await
        .expect("an eligibleAt");
    assert_eq!(first.terminate().await, Some(0));

    // A new process resumes from the status: same eligibleAt, failback at it.
    let second = started(&hub, "tiering-b").await;
    let (failback, seen) = hub
        .view()
        .failback_keeping_eligible_at(NAME, recovered, CONVERGE, || second.log())
        .await;
    assert!(
        seen.iter().all(|at| *at == eligible_at),
        "the hold-down restarted: {seen:?} vs {eligible_at}"
    );
    assert!(failback.time.0 >= eligible_at);
    settled(&hub, &second, &["primary"], &["p1", "p2"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_deleted_and_edited_children_are_survived() {
    let hub = Hub::start().await;
    let controller = started(&hub, "tiering-a").await;
    let child_patch = || {
        RequestMatch::any()
            .verb("patch")
            .resource("placements")
            .name(NAME)
    };
    let status_patch = || {
        RequestMatch::any()
            .verb("patch")
            .resource("tieredplacements/status")
            .name(NAME)
    };
    hub.server.faults().fail_next(2, child_patch(), 409);
    hub.server.faults().throttle_next(1, child_patch(), 1);
    hub.server.faults().fail_next(1, status_patch(), 500);
    hub.server.faults().fail_next(1, status_patch(), 409);
    hub.create_tiered(&failover_spec(
        1,
        "{policy: Automatic, holdDown: 2s, maxHoldDown: 1m}",
    ));
    settled(&hub, &controller, &["primary"], &["p1", "p2"]).await;
    assert_eq!(hub.server.faults().pending(), 0, "every fault was hit");
    for error in ["apply_child", "write_status"] {
        assert!(
            controller
                .metric("ocm_score_tiering_reconcile_errors_total", &[("error", error)])
                .await
                >= Some(1.0),
            "{error} counted"
        );
    }

    // Watches cut: they resume, and a failover still happens.
    hub.server.faults().cut_watches();
    let tainted = Timestamp::now();
    hub.taint("p1", tainted).await;
    hub.taint("p2", tainted).await;
    transition(&hub, &controller, TransitionKind::Failover, tainted).await;
    settled(&hub, &controller, &["secondary"], &["s1", "s2"]).await;

    // The child deleted: recreated as it was, with an event.
    let old_uid = hub.child(NAME).and_then(|c| c.metadata.uid).expect("uid");
    hub.delete_child(NAME).await;
    eventually(
        "the child recreated",
        || controller.log(),
        || {
            let child = hub.child(NAME)?;
            (child.metadata.uid.as_ref() != Some(&old_uid) && child.spec.cluster_sets == ["secondary"])
                .then_some(())
        },
    )
    .await;
    eventually(
        "a ChildRecreated event",
        || controller.log(),
        || (!hub.events("ChildRecreated").is_empty()).then_some(()),
    )
    .await;
    settled(&hub, &controller, &["secondary"], &["s1", "s2"]).await;

    // The child edited by hand (its plan hash kept): restored, with an event naming the field.
    kube::Api::<ocm_score_api::Placement>::namespaced(hub.admin.clone(), "apps")
        .patch(
            NAME,
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"clusterSets": ["primary"]}})),
        )
        .await
        .expect("editing the child");
    let note = eventually(
        "a ChildRestored event",
        || controller.log(),
        || hub.events("ChildRestored").into_iter().next(),
    )
    .await;
    assert!(note.contains("spec.clusterSets"), "{note}");
    eventually(
        "the child restored",
        || controller.log(),
        || (hub.child(NAME)?.spec.cluster_sets == ["secondary"]).then_some(()),
    )
    .await;
    settled(&hub, &controller, &["secondary"], &["s1", "s2"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_spec_is_reported_and_the_child_left_alone() {
    let hub = Hub::start().await;
    let controller = started(&hub, "tiering-a").await;
    hub.create_tiered(&failover_spec(1, "{policy: Never}"));
    settled(&hub, &controller, &["primary"], &["p1", "p2"]).await;
    let child_version = hub
        .child(NAME)
        .and_then(|c| c.metadata.resource_version)
        .expect("rv");

    hub.patch_tiered(NAME, json!({"spec": {"override": {"tier": "nowhere"}}}))
        .await;
    let message = eventually(
        "Ready=False, InvalidSpec",
        || controller.log(),
        || {
            let tp = hub.tiered(NAME);
            let status = tp.status?;
            let ready = status.conditions.iter().find(|c| c.type_ == "Ready")?;
            (status.observed_generation == tp.metadata.generation && ready.reason == "InvalidSpec")
                .then(|| (ready.status.clone(), ready.message.clone()))
        },
    )
    .await;
    assert_eq!(message.0, "False");
    assert!(message.1.contains("spec.override.tier"), "{}", message.1);
    assert_eq!(
        hub.child(NAME).and_then(|c| c.metadata.resource_version),
        Some(child_version),
        "the child is left as it was"
    );
    assert_eq!(hub.decisions(NAME), set(&["p1", "p2"]));
    eventually(
        "an InvalidSpec event",
        || controller.log(),
        || (!hub.events("InvalidSpec").is_empty()).then_some(()),
    )
    .await;
}

// ---------------------------------------------------------------------------------------------
// Reservations between score reports (docs/fits-and-reservations.md)

/// Overflow to one cluster, at least 4 replicas of `gpu` must fit, 4 replicas per cluster.
fn reserving_spec(name: &str) -> String {
    format!(
        "
apiVersion: tiering.ocm-score.io/v1alpha1
kind: TieredPlacement
metadata: {{name: {name}, namespace: apps}}
spec:
  mode: Overflow
  numberOfClusters: 1
  tiers:
  - {{name: primary, clusterSets: [primary]}}
  - {{name: secondary, clusterSets: [secondary]}}
  capacity:
    rules:
    - fits: {{shape: gpu, atLeastReplicas: 4}}
  workload: {{shape: gpu, replicasPerCluster: 4}}
"
    )
}

/// Agents' reports: p1 fits 6 replicas of `gpu` (one placement of 4), p2 none, s1 and s2 8.
async fn gpu_reports(hub: &Hub) {
    let until = Timestamp::now() + jiff::SignedDuration::from_hours(1);
    for (cluster, fits) in [("p1", 6), ("p2", 0), ("s1", 8), ("s2", 8)] {
        hub.score(cluster, "fits.gpu", fits - 100, until).await;
    }
}

/// Waits until `name`'s current generation is planned and OCM selected what the plan predicted;
/// returns that selection and the placement's reservations (cluster, replicas).
async fn placed(
    hub: &Hub,
    controller: &ControllerProcess,
    name: &str,
) -> (BTreeSet<String>, Vec<(String, i32)>) {
    eventually(
        &format!("{name} placed as predicted"),
        || {
            format!(
                "{:#?}\n{}",
                hub.find_tiered(name).map(|t| t.status),
                controller.log()
            )
        },
        || {
            let tp = hub.find_tiered(name)?;
            let status = tp.status.as_ref()?;
            let predicted: BTreeSet<String> = status.placement.as_ref()?.predicted.iter().cloned().collect();
            let decided = hub.decisions(name);
            (status.observed_generation == tp.metadata.generation
                && !predicted.is_empty()
                && decided == predicted)
                .then(|| {
                    let reserved = status
                        .reservations
                        .iter()
                        .map(|r| (r.cluster.clone(), r.replicas))
                        .collect();
                    (decided, reserved)
                })
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_reservations_two_placements_a_moment_apart_take_the_same_cluster() {
    let hub = Hub::start().await;
    gpu_reports(&hub).await;
    let controller = hub.controller_with("tiering-a", &["--reservations=false"]);
    let mut controller = controller;
    controller
        .wait_ready(CONVERGE, || hub.controller_requests())
        .await;
    hub.create_tiered(&reserving_spec("first"));
    assert_eq!(placed(&hub, &controller, "first").await, (set(&["p1"]), vec![]));
    hub.create_tiered(&reserving_spec("second"));
    assert_eq!(
        placed(&hub, &controller, "second").await,
        (set(&["p1"]), vec![]),
        "both saw p1's 6 free replicas"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reservations_send_the_second_placement_elsewhere_survive_a_restart_and_end_with_a_report() {
    const SETTLE: i64 = 10;
    let hub = Hub::start().await;
    gpu_reports(&hub).await;
    let flags = ["--reservation-settle=10s", "--reservation-ttl=10m"];
    let mut first_process = hub.controller_with("tiering-a", &flags);
    first_process
        .wait_ready(CONVERGE, || hub.controller_requests())
        .await;

    // The first placement takes p1 and reserves 4 replicas there.
    hub.create_tiered(&reserving_spec("first"));
    assert_eq!(
        placed(&hub, &first_process, "first").await,
        (set(&["p1"]), vec![("p1".to_string(), 4)])
    );
    let status = hub.tiered("first").status.expect("status");
    let reservation = status.reservations[0].clone();
    assert_eq!(reservation.shape, "gpu");
    assert_eq!(
        reservation.expires_at.0,
        reservation.created_at.0 + jiff::SignedDuration::from_mins(10)
    );
    assert_eq!(status.workload.map(|w| w.replicas_per_cluster), Some(4));
    assert_eq!(
        first_process.metric("ocm_score_tiering_reservations", &[]).await,
        Some(1.0)
    );
    // Plain Placements see it too: p1's ocm-score-reserved takes the 4 replicas off, valid as long
    // as the reservation; no other cluster has one.
    let reserved = eventually(
        "p1's reserved capacity published",
        || first_process.log(),
        || hub.reserved_score("p1").filter(|r| !r.is_null()),
    )
    .await;
    assert_eq!(
        reserved,
        json!({"scores": [{"name": "fits.gpu", "value": -4}],
               "validUntil": reservation.expires_at.0.to_string()})
    );
    for cluster in ["p2", "s1", "s2"] {
        assert_eq!(hub.reserved_score(cluster), None, "{cluster}");
    }

    // A moment later, before p1's agent reports again: p1 has 6 - 4 = 2 left, so the second
    // placement overflows to the secondary tier.
    hub.create_tiered(&reserving_spec("second"));
    let (second, reserved) = placed(&hub, &first_process, "second").await;
    assert_eq!(second.len(), 1);
    assert!(second.is_subset(&set(&["s1", "s2"])), "{second:?}");
    assert_eq!(reserved.len(), 1);
    let status = hub.tiered("second").status.expect("status");
    assert_eq!(status.active_tiers, ["secondary"]);
    let s = second.iter().next().expect("one cluster").clone();
    eventually(
        "the second placement's reserved capacity published",
        || first_process.log(),
        || hub.reserved_score(&s).filter(|r| r["scores"][0]["value"] == -4),
    )
    .await;

    // A new controller process rebuilds the ledger from the statuses: a third placement still
    // sees p1 reserved.
    assert_eq!(first_process.terminate().await, Some(0));
    let mut second_process = hub.controller_with("tiering-b", &flags);
    second_process
        .wait_ready(CONVERGE, || hub.controller_requests())
        .await;
    hub.create_tiered(&reserving_spec("third"));
    let (third, _) = placed(&hub, &second_process, "third").await;
    assert!(third.is_subset(&set(&["s1", "s2"])), "{third:?}");
    assert_eq!(
        placed(&hub, &second_process, "first").await,
        (set(&["p1"]), vec![("p1".to_string(), 4)]),
        "the reservation survived the restart"
    );

    // p1's agent reports after the settle time (its pods counted: 2 left): released; the first
    // placement keeps p1 (its own 4 replicas are credited back).
    let settled_at = reservation.created_at.0 + jiff::SignedDuration::from_secs(SETTLE);
    eventually(
        "the settle time passed",
        || format!("waiting for {settled_at}"),
        || (Timestamp::now() >= settled_at).then_some(()),
    )
    .await;
    let until = Timestamp::now() + jiff::SignedDuration::from_hours(1);
    hub.score("p1", "fits.gpu", 2 - 100, until).await;
    let released = eventually(
        "the report released the reservation",
        || format!("{:#?}\n{}", hub.tiered("first").status, second_process.log()),
        || {
            let status = hub.tiered("first").status?;
            status.reservations.is_empty().then_some(status)
        },
    )
    .await;
    assert_eq!(
        released.placement.map(|p| p.predicted),
        Some(vec!["p1".to_string()])
    );
    assert!(
        second_process
            .metric("ocm_score_tiering_reservations_released_by_report_total", &[])
            .await
            >= Some(1.0)
    );
    assert_eq!(placed(&hub, &second_process, "first").await.0, set(&["p1"]));
    // The others' reservations on the secondary clusters are untouched by p1's report.
    assert_eq!(placed(&hub, &second_process, "second").await.1.len(), 1);
    // p1's reserved capacity goes with its reservation (published again by the new process, which
    // rebuilt the ledger), the second placement's stays.
    eventually(
        "p1's reserved capacity deleted",
        || second_process.log(),
        || hub.reserved_score("p1").is_none().then_some(()),
    )
    .await;
    assert!(
        hub.reserved_score(&s).is_some(),
        "{s}'s reservation is still in flight"
    );
    // The third placement's too, on s1 or s2: one object per cluster with reservations.
    let published = ["p1", "p2", "s1", "s2"]
        .into_iter()
        .filter(|c| hub.reserved_score(c).is_some())
        .count();
    assert_eq!(
        second_process
            .metric("ocm_score_tiering_reserved_scores", &[])
            .await,
        Some(published as f64)
    );
}

/// A one-tier TieredPlacement `name` over `set`, its clusters qualifying while cpu ≥ 10 (no
/// hysteresis, no debounce: a change below shows in the next plan).
fn one_tier_spec(name: &str, set: &str) -> String {
    format!(
        "
apiVersion: tiering.ocm-score.io/v1alpha1
kind: TieredPlacement
metadata: {{name: {name}, namespace: apps}}
spec:
  mode: Failover
  tiers:
  - {{name: {set}, clusterSets: [{set}]}}
  capacity:
    debounce: 0s
    rules:
    - score: {{resourceName: resource-usage-score, scoreName: cpu, atLeast: 10, exitBelow: 10}}
  stabilization: {{minDwell: 0s}}
"
    )
}

/// Lines where the controller logged a plan of `apps/name`.
fn plans_of(controller: &ControllerProcess, name: &str) -> usize {
    let tiered = format!("tiered=apps/{name} ");
    controller
        .log()
        .lines()
        .filter(|line| line.contains(" planned ") && line.contains(&tiered))
        .count()
}

/// The controller's metrics now; a failed scrape fails the test (retried a few times first).
async fn scrape(controller: &ControllerProcess) -> Exposition {
    for _ in 0..10 {
        if let Some((200, text)) = controller.get("/metrics").await
            && let Ok(exposition) = Exposition::parse(&text)
        {
            return exposition;
        }
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    panic!("/metrics did not answer:\n{}", controller.log());
}

/// A counter of `scrape` (a counter not yet touched is not rendered: 0).
fn count(metrics: &Exposition, name: &str, labels: &[(&str, &str)]) -> f64 {
    metrics.value(name, labels).unwrap_or(0.0)
}

const RECONCILES: &str = "ocm_score_tiering_reconciles_total";
const SCORE_UPDATES: &str = "ocm_score_tiering_score_updates_total";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewals_replan_nothing_and_a_change_replans_only_the_placements_holding_its_cluster() {
    let hub = Hub::start().await;
    let valid = || Timestamp::now() + jiff::SignedDuration::from_mins(10);
    let clusters = ["p1", "p2", "s1", "s2"];
    for cluster in clusters {
        hub.score(cluster, "cpu", 50, valid()).await;
    }
    let controller = started(&hub, "tiering-a").await;
    hub.create_tiered(&one_tier_spec("left", "primary"));
    hub.create_tiered(&one_tier_spec("right", "secondary"));
    let view = hub.view();
    view.settled("left", &["primary"], &["p1", "p2"], CONVERGE, || controller.log())
        .await;
    view.settled("right", &["secondary"], &["s1", "s2"], CONVERGE, || {
        controller.log()
    })
    .await;
    // Quiet: no reconcile for 3 s (the decisions' and statuses' own events have passed).
    let started_quiet = std::time::Instant::now();
    let mut last = count(&scrape(&controller).await, RECONCILES, &[]);
    let mut quiet_since = std::time::Instant::now();
    while quiet_since.elapsed() < std::time::Duration::from_secs(3) {
        assert!(
            started_quiet.elapsed() < CONVERGE,
            "the controller never went quiet:\n{}",
            controller.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let now = count(&scrape(&controller).await, RECONCILES, &[]);
        if now != last {
            (last, quiet_since) = (now, std::time::Instant::now());
        }
    }
    let renewal = [("effect", "renewal")];
    let renewals_before = count(&scrape(&controller).await, SCORE_UPDATES, &renewal);
    let (left_before, right_before) = (plans_of(&controller, "left"), plans_of(&controller, "right"));
    assert!(
        left_before > 0 && right_before > 0,
        "both were planned:\n{}",
        controller.log()
    );

    // 40 renewals: the same scores, a later validUntil.
    for _ in 0..10 {
        for cluster in clusters {
            hub.score(cluster, "cpu", 50, valid()).await;
        }
    }
    ocm_score_tests::support::eventually(
        "the controller saw 40 renewals",
        CONVERGE,
        || controller.log(),
        || async {
            let seen = count(&scrape(&controller).await, SCORE_UPDATES, &renewal);
            (seen >= renewals_before + 40.0).then_some(())
        },
    )
    .await;
    assert_eq!(
        count(&scrape(&controller).await, RECONCILES, &[]),
        last,
        "renewals re-planned:\n{}",
        controller.log()
    );
    // A real change of s1, after the renewals on the same watch: right re-plans, left does not.
    hub.score("s1", "cpu", 5, valid()).await;
    eventually(
        "right re-planned with s1 short of cpu",
        || controller.log(),
        || {
            let tp = hub.tiered("right");
            let qualifying = tp.status?.tiers.first()?.qualifying;
            (qualifying == 1).then_some(())
        },
    )
    .await;
    let metrics = scrape(&controller).await;
    assert!(count(&metrics, SCORE_UPDATES, &[("effect", "change")]) >= 1.0);
    assert!(plans_of(&controller, "right") > right_before);
    assert_eq!(
        plans_of(&controller, "left"),
        left_before,
        "left holds neither a renewed score nor s1:\n{}",
        controller.log()
    );
    assert_eq!(controller.terminate().await, Some(0));
}

// ---------------------------------------------------------------------------------------------
// Score expiries (docs/tiering.md#what-re-plans-a-tieredplacement)

const SNAPSHOT_BUILDS: &str = "ocm_score_tiering_snapshot_builds_total";

/// Failover from `primary` to `secondary` once the primary clusters' scores are unknown: a cluster
/// whose scores expired loses its verdict at once (`staleGrace: 0s`).
fn stale_fails_over_spec() -> String {
    format!(
        "
apiVersion: tiering.ocm-score.io/v1alpha1
kind: TieredPlacement
metadata: {{name: {NAME}, namespace: apps}}
spec:
  mode: Failover
  tiers:
  - {{name: primary, clusterSets: [primary]}}
  - {{name: secondary, clusterSets: [secondary]}}
  capacity:
    debounce: 0s
    whenStale: Disqualify
    staleGrace: 0s
    rules:
    - score: {{resourceName: resource-usage-score, scoreName: cpu, atLeast: 10}}
  failback: {{policy: Never}}
  stabilization: {{minDwell: 0s}}
"
    )
}

/// Renews `cpu = 50` of the clusters `renewing` names, every second, valid for `valid` seconds
/// from the whole second, as agents do (with a shorter validity) until the task is aborted.
fn renew_every_second(
    admin: kube::Client,
    renewing: tokio::sync::watch::Receiver<Vec<&'static str>>,
    valid: i64,
) -> tokio::task::JoinHandle<()> {
    use kube::api::{Api, Patch, PatchParams};
    use ocm_score_api::AddOnPlacementScore;
    tokio::spawn(async move {
        loop {
            let now = Timestamp::now().as_second();
            let until = Timestamp::from_second(now + valid).expect("in range");
            let clusters = renewing.borrow().clone();
            for cluster in clusters {
                let api = Api::<AddOnPlacementScore>::namespaced(admin.clone(), cluster);
                let status = json!({"status": {
                    "scores": [{"name": "cpu", "value": 50}],
                    "validUntil": until.to_string(),
                }});
                api.patch_status(
                    tiering_common::SCORE_RESOURCE,
                    &PatchParams::default(),
                    &Patch::Merge(status),
                )
                .await
                .expect("renewing a score");
            }
            tokio::time::sleep(std::time::Duration::from_secs(1)).await;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renewed_scores_replan_nothing_at_their_old_valid_until_and_an_expiry_fails_over_at_once() {
    const VALID: i64 = 3;
    let hub = Hub::start().await;
    let clusters = ["p1", "p2", "s1", "s2"];
    let first_until = Timestamp::from_second(Timestamp::now().as_second() + VALID).expect("in range");
    for cluster in clusters {
        hub.score(cluster, "cpu", 50, first_until).await;
    }
    let (renewing, to_renew) = tokio::sync::watch::channel(clusters.to_vec());
    let renewer = renew_every_second(hub.admin.clone(), to_renew, VALID);
    let controller = started(&hub, "tiering-a").await;
    hub.create_tiered(&stale_fails_over_spec());
    settled(&hub, &controller, &["primary"], &["p1", "p2"]).await;

    // Quiet: no reconcile for 4 s, though every validUntil a plan read passes in 3 s. A plan that
    // requeued at the earliest validUntil it read would re-plan every few seconds here.
    let started_quiet = std::time::Instant::now();
    let mut last = count(&scrape(&controller).await, RECONCILES, &[]);
    let mut quiet_since = std::time::Instant::now();
    while quiet_since.elapsed() < std::time::Duration::from_secs(4) {
        assert!(
            started_quiet.elapsed() < std::time::Duration::from_secs(30),
            "renewals alone kept re-planning for 30 s: {} plans of {NAME}\n{}",
            plans_of(&controller, NAME),
            controller.log()
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let now = count(&scrape(&controller).await, RECONCILES, &[]);
        if now != last {
            (last, quiet_since) = (now, std::time::Instant::now());
        }
    }
    // Ten more seconds of renewals: every score's validUntil seen by the last plan passes, and
    // nothing is planned or built.
    let before = scrape(&controller).await;
    tokio::time::sleep(std::time::Duration::from_secs(10)).await;
    let after = scrape(&controller).await;
    let delta =
        |name: &str, labels: &[(&str, &str)]| count(&after, name, labels) - count(&before, name, labels);
    assert!(
        delta(SCORE_UPDATES, &[("effect", "renewal")]) >= 30.0,
        "the renewals reached the controller"
    );
    assert_eq!(
        (delta(RECONCILES, &[]), delta(SNAPSHOT_BUILDS, &[])),
        (0.0, 0.0),
        "(reconciles, snapshot builds) while scores were only renewed:\n{}",
        controller.log()
    );

    // p1 and p2 stop renewing: their scores expire at their last validUntil, and the
    // TieredPlacement fails over within about a second of it.
    renewing.send_replace(vec!["s1", "s2"]);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let valid_until = |cluster: &str| {
        let score = hub
            .server
            .object(
                &tiering_common::gvr::<ocm_score_api::AddOnPlacementScore>(),
                cluster,
                tiering_common::SCORE_RESOURCE,
            )
            .expect("the score");
        score["status"]["validUntil"]
            .as_str()
            .and_then(|t| t.parse::<Timestamp>().ok())
            .expect("a validUntil")
    };
    let expires = valid_until("p1").max(valid_until("p2"));
    assert!(Timestamp::now() < expires, "read before {expires}");
    let failover = transition(&hub, &controller, TransitionKind::Failover, expires).await;
    assert!(
        failover.time.0 <= whole_seconds_after(expires, 2),
        "failover at {} for scores expired at {expires}:\n{}",
        failover.time.0,
        controller.log()
    );
    let stale = hub
        .tiered(NAME)
        .status
        .and_then(|s| s.conditions.into_iter().find(|c| c.type_ == "ScoresStale"))
        .expect("ScoresStale");
    assert_eq!(stale.status, "True");
    assert!(
        stale.last_transition_time.0 <= whole_seconds_after(expires, 2),
        "stale since {} for scores expired at {expires}",
        stale.last_transition_time.0
    );
    settled(&hub, &controller, &["secondary"], &["s1", "s2"]).await;
    renewer.abort();
    assert_eq!(controller.terminate().await, Some(0));
}
