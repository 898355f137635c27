//! Reservations between score reports (docs/fits-and-reservations.md) through the planner: several
//! TieredPlacements planned one after the other against one ledger, as the controller does, with
//! an injected clock. The Karmada story (karmada#6783), restart, release paths, and properties:
//! effective ≤ reported and never negative, and the ledger rebuilt from the stored statuses equals
//! the live one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tiering_support;

use k8s_openapi::jiff::Timestamp;
use ocm_score_api::crd::tiered_placement::TieredPlacementStatus;
use ocm_score_scheduler::reservation::{Ledger, ShapeCatalog, Timing, placement_key};
use ocm_score_scheduler::tiering::{Plan, WorkIndex, plan_and_assume};
use proptest::prelude::*;
use std::time::Duration;
use tiering_support::*;

/// Two tiers of one cluster each: `x` is preferred, `y` the fallback. Both report `fits.gpu`.
fn world(x_fits: i32, y_fits: i32) -> World {
    let mut w = World::default().set("near", &["x"]).set("far", &["y"]);
    w.score("x", "fits.gpu", x_fits - 100, None);
    w.score("y", "fits.gpu", y_fits - 100, None);
    w
}

/// One cluster, preferably the near tier, and at least 4 replicas of `gpu` must fit; the
/// workload is 4 replicas of `gpu` per cluster.
fn spec() -> ocm_score_api::TieredPlacementSpec {
    spec_yaml(
        r#"
mode: Overflow
numberOfClusters: 1
tiers:
- {name: near, clusterSets: [near]}
- {name: far, clusterSets: [far]}
capacity:
  rules:
  - fits: {shape: gpu, atLeastReplicas: 4}
workload: {shape: gpu, replicasPerCluster: 4}
failback: {policy: Never}
"#,
    )
}

/// Several TieredPlacements, one world each (each reads only its own child's decisions), the
/// same clusters and scores, and one ledger: what the controller does.
struct Hub {
    tps: Vec<Scenario>,
    ledger: Ledger,
    shapes: ShapeCatalog,
}

impl Hub {
    fn new(ledger: Ledger) -> Hub {
        Hub {
            tps: Vec::new(),
            ledger,
            shapes: ShapeCatalog::default(),
        }
    }

    fn create(&mut self, name: &str, spec: ocm_score_api::TieredPlacementSpec, world: World) -> usize {
        let mut s = Scenario::new(spec, world);
        s.tp.metadata.name = Some(name.into());
        self.tps.push(s);
        self.tps.len() - 1
    }

    /// Plans TieredPlacement `i` at `now` and plays the controller and OCM.
    fn plan(&mut self, i: usize, now: Timestamp) -> Plan {
        let s = &mut self.tps[i];
        let (p, errors) = plan_and_assume(
            &mut self.ledger,
            &s.tp,
            &s.world.snapshot(),
            &self.shapes,
            &WorkIndex::default(),
            now,
        );
        assert_eq!(errors, []);
        s.apply(&p);
        p
    }

    fn plan_all(&mut self, now: Timestamp) {
        for i in 0..self.tps.len() {
            self.plan(i, now);
        }
    }

    /// The agent of `cluster` reports `fits` replicas; the controller observes it at `now`.
    fn report(&mut self, cluster: &str, fits: i32, now: Timestamp) {
        for s in &mut self.tps {
            s.world.score(cluster, "fits.gpu", fits - 100, None);
        }
        self.ledger.observe_report(cluster, now.as_nanosecond());
    }

    fn selected(&self, i: usize) -> Vec<String> {
        self.tps[i].status().placement.as_ref().unwrap().predicted.clone()
    }

    fn reserved(&self, i: usize) -> Vec<(String, i32)> {
        self.tps[i]
            .status()
            .reservations
            .iter()
            .map(|r| (r.cluster.clone(), r.replicas))
            .collect()
    }

    /// A new controller: the ledger rebuilt from the statuses as the API server stores them.
    fn restart(&mut self) {
        let statuses: Vec<(String, Option<TieredPlacementStatus>)> = self
            .tps
            .iter()
            .map(|s| (placement_key(&s.tp), s.tp.status.as_ref().map(round_trip)))
            .collect();
        let (ledger, errors) = Ledger::rebuild(
            self.ledger.timing(),
            true,
            statuses.iter().map(|(k, s)| (k.clone(), s.as_ref())),
        );
        assert_eq!(errors, []);
        self.ledger = ledger;
    }
}

fn round_trip(status: &TieredPlacementStatus) -> TieredPlacementStatus {
    serde_json::from_value(serde_json::to_value(status).unwrap()).unwrap()
}

fn timing() -> Timing {
    Timing {
        ttl: Duration::from_secs(300),
        settle: Duration::from_secs(90),
    }
}

/// x fits 6 replicas (one placement of 4), y fits 8.
fn karmada_story(ledger: Ledger) -> Hub {
    let mut hub = Hub::new(ledger);
    let first = hub.create("first", spec(), world(6, 8));
    let second = hub.create("second", spec(), world(6, 8));
    hub.plan(first, at(0));
    hub.plan(second, at(1));
    hub
}

#[test]
fn without_reservations_two_placements_a_second_apart_both_take_x() {
    let hub = karmada_story(Ledger::disabled());
    assert_eq!(hub.selected(0), ["x"]);
    assert_eq!(hub.selected(1), ["x"], "both saw the same 6 free replicas");
    assert_eq!(hub.reserved(0), []);
}

#[test]
fn with_reservations_the_second_placement_lands_on_the_next_tier() {
    let mut hub = karmada_story(Ledger::new(timing()));
    assert_eq!(hub.selected(0), ["x"]);
    assert_eq!(hub.reserved(0), [("x".to_string(), 4)]);
    assert_eq!(hub.selected(1), ["y"], "x has 6 - 4 = 2 left for the second");
    assert_eq!(hub.reserved(1), [("y".to_string(), 4)]);
    let tiers = &hub.tps[1].last.as_ref().unwrap().tiers;
    let why = &tiers[0].excluded[0];
    assert_eq!(why.0, "x");
    assert!(
        why.1
            .contains("fits.gpu = 2 replicas (4 reserved by other placements) < enter 4"),
        "{}",
        why.1
    );
    let status = hub.tps[0].status();
    assert_eq!(status.workload.as_ref().unwrap().replicas_per_cluster, 4);
    let r = &status.reservations[0];
    assert_eq!((r.created_at.0, r.expires_at.0), (at(0), at(300)));
    // The first placement's plan requeues at its reservation's TTL.
    assert_eq!(hub.tps[0].last.as_ref().unwrap().requeue_at, Some(at(300)));

    // x's agent reports before the settle time, its pods already counted (2 left): the
    // reservation stays, the second placement stays on y, the first keeps x (self-credit).
    hub.report("x", 2, at(60));
    hub.plan_all(at(60));
    assert_eq!(hub.reserved(0), [("x".to_string(), 4)]);
    assert_eq!(
        (hub.selected(0), hub.selected(1)),
        (vec!["x".to_string()], vec!["y".to_string()])
    );

    // The first report at or after createdAt + settle releases it; nothing moves.
    hub.report("x", 2, at(90));
    hub.plan_all(at(90));
    assert_eq!(hub.reserved(0), []);
    assert_eq!(hub.reserved(1), [("y".to_string(), 4)]);
    assert_eq!(
        (hub.selected(0), hub.selected(1)),
        (vec!["x".to_string()], vec!["y".to_string()])
    );
}

#[test]
fn a_restart_keeps_reservations_until_the_next_report_after_settle() {
    let mut hub = karmada_story(Ledger::new(timing()));
    hub.restart();
    // A third placement after the restart still sees the first one's reservation on x.
    let third = hub.create("third", spec(), world(6, 8));
    hub.plan(third, at(30));
    assert_eq!(hub.selected(third), ["y"]);
    hub.plan_all(at(31));
    assert_eq!(hub.reserved(0), [("x".to_string(), 4)]);
    // A report observed before createdAt + settle does not release it; one after does.
    hub.report("x", 2, at(89));
    hub.plan_all(at(89));
    assert_eq!(hub.reserved(0), [("x".to_string(), 4)]);
    hub.restart();
    hub.report("x", 2, at(91));
    hub.plan_all(at(91));
    assert_eq!(hub.reserved(0), []);
}

#[test]
fn a_restart_keeps_reservations_until_the_ttl_without_reports() {
    let mut hub = karmada_story(Ledger::new(timing()));
    hub.restart();
    hub.plan_all(at(299));
    assert_eq!(hub.reserved(0), [("x".to_string(), 4)]);
    hub.restart();
    hub.plan_all(at(300));
    assert_eq!(hub.reserved(0), [], "expiresAt exactly");
    // The second placement still sees y reserved by itself only until its own TTL (301).
    assert_eq!(hub.reserved(1), [("y".to_string(), 4)]);
    hub.plan_all(at(301));
    assert_eq!(hub.reserved(1), []);
}

#[test]
fn leaving_the_plan_releases_and_another_placement_may_take_the_room() {
    let mut hub = karmada_story(Ledger::new(timing()));
    // The first placement moves off x (its tier tainted): x's reservation goes with it.
    for s in &mut hub.tps {
        s.world.taint("x", UNREACHABLE, at(10));
    }
    hub.plan(0, at(10));
    assert_eq!(hub.selected(0), ["y"]);
    assert_eq!(hub.reserved(0), [("y".to_string(), 4)]);
    // y is now reserved by both: 8 - 4 = 4 for each other, still enough.
    let p = hub.plan(1, at(11));
    assert_eq!(hub.selected(1), ["y"]);
    assert_eq!(p.transition, None);
}

#[test]
fn another_shape_is_deducted_by_its_requests() {
    let shapes = ShapeCatalog::new(&[
        serde_json::from_value(serde_json::json!({
            "apiVersion": "tiering.ocm-score.io/v1alpha1", "kind": "WorkloadShape",
            "metadata": {"name": "gpu"}, "spec": {"requests": {"nvidia.com/gpu": "1"}}}))
        .unwrap(),
        serde_json::from_value(serde_json::json!({
            "apiVersion": "tiering.ocm-score.io/v1alpha1", "kind": "WorkloadShape",
            "metadata": {"name": "gpu-x2"}, "spec": {"requests": {"nvidia.com/gpu": "2"}}}))
        .unwrap(),
    ]);
    // The first placement runs 1 replica of gpu-x2 (two GPUs) per cluster.
    let mut big = spec();
    big.workload.as_mut().unwrap().shape = "gpu-x2".into();
    big.workload.as_mut().unwrap().replicas_per_cluster = 1;
    big.capacity = None;
    let mut hub = Hub::new(Ledger::new(timing()));
    hub.shapes = shapes;
    // Its workload must fit too: x and y take 2 and 4 two-GPU replicas.
    let mut big_world = world(5, 8);
    big_world.score("x", "fits.gpu-x2", 2 - 100, None);
    big_world.score("y", "fits.gpu-x2", 4 - 100, None);
    let first = hub.create("first", big, big_world);
    let second = hub.create("second", spec(), world(5, 8));
    hub.plan(first, at(0));
    assert_eq!(hub.selected(first), ["x"]);
    assert_eq!(hub.tps[first].status().reservations[0].shape, "gpu-x2");
    // x fits 5 one-GPU replicas; one two-GPU replica takes 2 of them: 3 < 4.
    hub.plan(second, at(1));
    assert_eq!(hub.selected(second), ["y"]);
}

// ---------------------------------------------------------------------------------------------
// Properties

#[derive(Clone, Debug)]
enum Op {
    /// The agent of cluster `i` reports `fits` replicas.
    Report(usize, i32),
    /// TieredPlacement `i` changes `replicasPerCluster`.
    Resize(usize, i32),
    /// Cluster `i` is tainted or untainted.
    Taint(usize, bool),
    /// A new controller.
    Restart,
    Nothing,
}

const CLUSTERS: [&str; 4] = ["x", "x2", "y", "y2"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        ((0..4usize), 0i32..12).prop_map(|(c, f)| Op::Report(c, f)),
        ((0..3usize), 1i32..8).prop_map(|(t, r)| Op::Resize(t, r)),
        ((0..4usize), any::<bool>()).prop_map(|(c, t)| Op::Taint(c, t)),
        Just(Op::Restart),
        Just(Op::Nothing),
    ]
}

fn property_world(fits: &[i32]) -> World {
    let mut w = World::default()
        .set("near", &["x", "x2"])
        .set("far", &["y", "y2"]);
    for (c, f) in CLUSTERS.iter().zip(fits) {
        w.score(c, "fits.gpu", f - 100, None);
    }
    w
}

fn live_statuses(hub: &Hub) -> Vec<(String, Option<TieredPlacementStatus>)> {
    hub.tps
        .iter()
        .map(|s| (placement_key(&s.tp), s.tp.status.as_ref().map(round_trip)))
        .collect()
}

fn rebuilt(hub: &Hub) -> Ledger {
    let statuses = live_statuses(hub);
    Ledger::rebuild(
        hub.ledger.timing(),
        true,
        statuses.iter().map(|(k, s)| (k.clone(), s.as_ref())),
    )
    .0
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn reservations_never_add_capacity_and_survive_a_restart(
        fits in prop::collection::vec(0i32..12, 4),
        sizes in prop::collection::vec(1i32..6, 3),
        ops in prop::collection::vec((1i64..120, op()), 1..16),
    ) {
        let mut hub = Hub::new(Ledger::new(timing()));
        for (i, size) in sizes.iter().enumerate() {
            let mut s = spec();
            s.workload.as_mut().unwrap().replicas_per_cluster = *size;
            if i == 2 {
                s.number_of_clusters = Some(2);
            }
            hub.create(&format!("tp-{i}"), s, property_world(&fits));
        }
        let mut reported = fits.clone();
        let mut t = 0i64;
        for (i, _) in sizes.iter().enumerate() {
            hub.plan(i, at(t));
            t += 1;
        }
        for (dt, op) in &ops {
            t += dt;
            let now = at(t);
            match op {
                Op::Report(c, f) => {
                    reported[*c] = *f;
                    hub.report(CLUSTERS[*c], *f, now);
                }
                Op::Resize(i, r) => hub.tps[*i].edit(|s| s.workload.as_mut().unwrap().replicas_per_cluster = *r),
                Op::Taint(c, true) => hub.tps.iter_mut().for_each(|s| s.world.taint(CLUSTERS[*c], UNREACHABLE, now)),
                Op::Taint(c, false) => hub.tps.iter_mut().for_each(|s| s.world.untaint(CLUSTERS[*c])),
                Op::Restart => {
                    hub.restart();
                }
                Op::Nothing => {}
            }
            // Every event reaches every TieredPlacement (the controller's watches).
            hub.plan_all(now);

            // Effective capacity: at most what was reported, never negative, and what each
            // placement's own reservations leave out (self-credit).
            let shapes = ShapeCatalog::empty();
            for s in &hub.tps {
                let key = placement_key(&s.tp);
                let view = hub.ledger.view(&key, shapes, now.as_nanosecond());
                for (c, cluster) in CLUSTERS.iter().enumerate() {
                    let r = u64::try_from(reported[c]).unwrap();
                    let e = view.effective(cluster, "gpu", r);
                    prop_assert!(e <= r, "{cluster}: effective {e} > reported {r}");
                    let others: u64 = hub.ledger.entries()
                        .filter(|(cl, p, en)| cl == cluster && *p != key && en.in_flight(now.as_nanosecond()))
                        .map(|(_, _, en)| u64::from(en.replicas))
                        .sum();
                    prop_assert_eq!(e, r.saturating_sub(others));
                }
            }
            // Every reservation is on a cluster its placement selects, for its footprint.
            for (cluster, placement, e) in hub.ledger.entries() {
                let s = hub.tps.iter().find(|s| placement_key(&s.tp) == placement).unwrap();
                let selected = &s.status().placement.as_ref().unwrap().predicted;
                prop_assert!(selected.iter().any(|c| c == cluster), "{placement} holds {cluster} outside {selected:?}");
                prop_assert!(e.replicas as i32 <= s.tp.spec.workload.as_ref().unwrap().replicas_per_cluster);
            }
            // The ledger rebuilt from the stored statuses is the live one.
            prop_assert_eq!(&rebuilt(&hub), &hub.ledger);
        }
    }
}

/// Failover headroom counts what the other placements hold: the second placement, sent to y by
/// the first's reservation on x, sees x's 6 − 4 = 2 as no headroom; the first sees y's 8 less
/// the second's 4, which still holds one placement.
#[test]
fn failover_headroom_is_fits_less_the_other_placements_reservations() {
    let mut hub = Hub::new(Ledger::new(timing()));
    let first = hub.create("first", spec(), world(6, 8));
    let second = hub.create("second", spec(), world(6, 8));
    hub.plan(first, at(0));
    hub.plan(second, at(1));
    assert_eq!(
        (hub.selected(first), hub.selected(second)),
        (vec!["x".to_string()], vec!["y".to_string()])
    );
    let headroom = |hub: &Hub, i: usize| -> Vec<Option<i32>> {
        hub.tps[i]
            .status()
            .tiers
            .iter()
            .map(|t| t.headroom_replicas)
            .collect()
    };
    let fits = |hub: &Hub, i: usize| hub.tps[i].condition("FailoverFits");
    assert_eq!(headroom(&hub, second), [Some(0), Some(0)]);
    assert_eq!(
        fits(&hub, second),
        ("False".into(), "InsufficientHeadroom".into())
    );
    hub.plan(first, at(2));
    assert_eq!(headroom(&hub, first), [Some(0), Some(4)]);
    assert_eq!(fits(&hub, first), ("True".into(), "HeadroomAvailable".into()));
    // The first's reservation on x ends at its TTL: the second's plan is due then, and x's 6
    // is headroom again.
    assert_eq!(hub.tps[second].last.as_ref().unwrap().requeue_at, Some(at(300)));
    hub.plan(second, at(300));
    assert_eq!(headroom(&hub, second), [Some(4), Some(0)]);
    assert_eq!(fits(&hub, second).0, "True");
}
