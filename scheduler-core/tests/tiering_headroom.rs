//! A TieredPlacement with `spec.workload` moves only to clusters whose `fits` hold it, and its
//! status says before an outage whether a failover would fit (`status.tiers[].headroomReplicas`,
//! `FailoverFits`; docs/fits-and-reservations.md, "Failover headroom"). Through the planner's
//! public entry point with an injected clock; the property checks the condition against what the
//! planner then does when the active tier fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tiering_support;

use ocm_score_api::crd::tiered_placement::TransitionKind;
use proptest::prelude::*;
use tiering_support::*;

const FAILOVER_FITS: &str = "FailoverFits";

/// Tiers `primary`, `secondary`, `tertiary` of the given clusters; each cluster reports
/// `fits.gpu` = the given replicas.
fn world(tiers: [&[(&str, i32)]; 3]) -> World {
    let mut w = World::default();
    for (name, clusters) in ["primary", "secondary", "tertiary"].iter().zip(tiers) {
        let names: Vec<&str> = clusters.iter().map(|(c, _)| *c).collect();
        w = w.set(name, &names);
        for (c, fits) in clusters {
            w.score(c, "fits.gpu", fits - 100, None);
        }
    }
    w
}

/// Failover over the three tiers, `replicas` of `gpu` per cluster; no capacity rule.
fn spec(extra: &str, replicas: i32) -> ocm_score_api::TieredPlacementSpec {
    spec_yaml(&format!(
        "
mode: Failover
tiers:
- {{name: primary, clusterSets: [primary]}}
- {{name: secondary, clusterSets: [secondary]}}
- {{name: tertiary, clusterSets: [tertiary]}}
workload: {{shape: gpu, replicasPerCluster: {replicas}}}
failback: {{policy: Never}}
{extra}
"
    ))
}

fn headroom(s: &Scenario) -> Vec<Option<i32>> {
    s.status().tiers.iter().map(|t| t.headroom_replicas).collect()
}

fn message(s: &Scenario, type_: &str) -> String {
    s.status()
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

#[test]
fn a_failover_skips_a_tier_whose_fits_do_not_hold_the_workload() {
    // The secondary fits 2 of the 4 replicas; the tertiary 6. No capacity rule names `fits`:
    // the workload alone asks for it.
    let mut s = Scenario::new(spec("", 4), world([&[("p1", 8)], &[("s1", 2)], &[("t1", 6)]]));
    s.step(at(0));
    assert_eq!(s.active(), ["primary"]);
    assert_eq!(headroom(&s), [Some(0), Some(0), Some(4)]);
    assert_eq!(
        s.condition(FAILOVER_FITS),
        ("True".into(), "HeadroomAvailable".into())
    );
    assert_eq!(
        message(&s, FAILOVER_FITS),
        "if tier primary failed now, tier tertiary would take 4 of 4 replicas"
    );
    s.world.taint("p1", UNREACHABLE, at(10));
    let p = s.step(at(20));
    assert_eq!(p.transition, Some(TransitionKind::Failover));
    assert_eq!(s.active(), ["tertiary"]);
    assert_eq!(p.predicted, ["t1"]);
    // The secondary's why names the workload's rule.
    let secondary = p.tiers.iter().find(|t| t.name == "secondary").unwrap();
    assert_eq!(
        secondary.excluded,
        [(
            "s1".to_string(),
            "spec.workload: fits.gpu = 2 replicas < enter 4".to_string()
        )]
    );
}

#[test]
fn a_short_failover_is_a_condition_naming_the_tier_and_the_shortfall_before_the_outage() {
    // Two clusters of 4 replicas each; the secondary holds one such cluster, the tertiary none.
    let mut s = Scenario::new(
        spec("numberOfClusters: 2", 4),
        world([&[("p1", 8), ("p2", 8)], &[("s1", 4), ("s2", 3)], &[("t1", 1)]]),
    );
    s.step(at(0));
    assert_eq!(s.active(), ["primary"]);
    assert_eq!(headroom(&s), [Some(0), Some(4), Some(0)]);
    assert_eq!(
        s.condition(FAILOVER_FITS),
        ("False".into(), "InsufficientHeadroom".into())
    );
    assert_eq!(
        message(&s, FAILOVER_FITS),
        "if tier primary failed now, no tier would take the workload: tier secondary would take 4 of 8 \
         replicas (short 4); tier tertiary would take 0 of 8 replicas (short 8)"
    );
    // Planning again on the same inputs writes nothing.
    assert!(!s.peek(at(30)).write_status);

    // The outage: nowhere to go, so the planner stays, and says so.
    s.world.taint("p1", UNREACHABLE, at(40));
    s.world.taint("p2", UNREACHABLE, at(40));
    let p = s.step(at(50));
    assert_eq!(p.transition, None);
    assert_eq!(s.active(), ["primary"]);
    assert_eq!(s.condition(FAILOVER_FITS).0, "False");
    // s2's agent reports room for the workload: now the secondary holds it, and the failover
    // happens.
    s.world.score("s2", "fits.gpu", 4 - 100, None);
    let p = s.step(at(60));
    assert_eq!(p.transition, Some(TransitionKind::Failover));
    assert_eq!(p.predicted, ["s1", "s2"]);
    assert_eq!(
        s.condition(FAILOVER_FITS).0,
        "False",
        "the tertiary is still too small"
    );
}

#[test]
fn a_cluster_without_a_fits_score_is_no_headroom_and_is_named() {
    let mut s = Scenario::new(spec("", 2), world([&[("p1", 8)], &[("s1", 8)], &[]]));
    s.world.scores.remove("s1");
    s.step(at(0));
    assert_eq!(headroom(&s), [Some(0), Some(0), Some(0)]);
    assert!(
        message(&s, FAILOVER_FITS)
            .contains("tier secondary would take 0 of 2 replicas (short 2; 1 cluster without a fits score)"),
        "{}",
        message(&s, FAILOVER_FITS)
    );
}

#[test]
fn without_a_workload_there_is_no_headroom() {
    let mut plain = spec("", 1);
    plain.workload = None;
    let mut s = Scenario::new(plain, world([&[("p1", 8)], &[("s1", 8)], &[]]));
    s.step(at(0));
    assert_eq!(headroom(&s), [None, None, None]);
    assert!(s.status().conditions.iter().all(|c| c.type_ != FAILOVER_FITS));
}

#[test]
fn overflow_counts_every_tiers_unused_clusters() {
    let mut s = Scenario::new(
        spec_yaml(
            "
mode: Overflow
numberOfClusters: 2
tiers:
- {name: primary, clusterSets: [primary]}
- {name: secondary, clusterSets: [secondary]}
- {name: tertiary, clusterSets: [tertiary]}
workload: {shape: gpu, replicasPerCluster: 3}
",
        ),
        world([&[("p1", 3), ("p2", 9)], &[("s1", 3), ("s2", 2)], &[("t1", 0)]]),
    );
    s.step(at(0));
    assert_eq!(s.status().placement.as_ref().unwrap().predicted, ["p1", "p2"]);
    assert_eq!(headroom(&s), [Some(0), Some(3), Some(0)]);
    assert_eq!(
        s.condition(FAILOVER_FITS),
        ("False".into(), "InsufficientHeadroom".into())
    );
    assert_eq!(
        message(&s, FAILOVER_FITS),
        "if the selected clusters failed now, the clusters left would take 3 of 6 replicas \
         (tier secondary 3), short 3"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// Whatever the clusters report: every cluster a plan selects holds the workload, and
    /// `FailoverFits` says True exactly when the planner, once the active tier fails, moves the
    /// workload to another tier.
    #[test]
    fn failover_fits_predicts_the_failover(
        fits in proptest::collection::vec(0..8i32, 6),
        replicas in 1..5i32,
        wanted in 1..3i32,
    ) {
        let names = ["p1", "p2", "s1", "s2", "t1", "t2"];
        let f = |i: usize| (names[i], fits[i]);
        let mut s = Scenario::new(
            spec(&format!("numberOfClusters: {wanted}"), replicas),
            world([&[f(0), f(1)], &[f(2), f(3)], &[f(4), f(5)]]),
        );
        s.step(at(0));
        let holds = |c: &String| fits[names.iter().position(|n| n == c).unwrap()] >= replicas;
        let predicted = s.status().placement.as_ref().unwrap().predicted.clone();
        prop_assert!(predicted.iter().all(holds), "{predicted:?} with {fits:?}");
        let Some(active) = s.active().first().cloned() else {
            // Nowhere fits: nothing selected.
            prop_assert!(predicted.is_empty());
            return Ok(());
        };
        let says = s.condition(FAILOVER_FITS).0 == "True";
        let prefix = &active[..1];
        for c in names.iter().filter(|c| c.starts_with(prefix)) {
            s.world.taint(c, UNREACHABLE, at(10));
        }
        let p = s.step(at(20));
        let moved = p.transition == Some(TransitionKind::Failover);
        prop_assert_eq!(says, moved, "FailoverFits {} but moved {}: {:?}", says, moved, s.status().conditions);
        prop_assert!(p.predicted.iter().all(holds), "{:?} with {:?}", p.predicted, fits);
    }
}
