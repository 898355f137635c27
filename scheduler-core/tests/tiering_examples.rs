//! The TieredPlacement examples under `manifests/examples/tiering/` parse, pass
//! `validate` and plan to what their comments promise (the CRD schema check is in
//! `tests/tests/manifests.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod tiering_support;

use ocm_score_api::TieredPlacement;
use ocm_score_api::crd::tiered_placement::TransitionKind;
use ocm_score_scheduler::tiering::validate;
use std::path::Path;
use tiering_support::*;

fn example(file: &str) -> TieredPlacement {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../manifests/examples/tiering")
        .join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let tp: TieredPlacement = serde_norway::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    assert_eq!(validate(&tp.spec), vec![], "{file}");
    tp
}

#[test]
fn every_example_file_is_a_valid_tiered_placement() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/examples/tiering");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let name = entry.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".yaml") && name != "kustomization.yaml" {
            example(&name);
            seen += 1;
        }
    }
    assert_eq!(seen, 2);
}

#[test]
fn story_1_example_fails_over_and_waits_for_the_trigger() {
    let tp = example("payments-dr.yaml");
    let world = World::default()
        .set("dc-east", &["east-1"])
        .set("dc-west", &["west-1"]);
    let mut s = Scenario::new(tp.spec, world);
    s.step(at(0));
    assert_eq!(s.active(), ["east"]);
    s.world.taint("east-1", UNREACHABLE, at(60));
    assert_eq!(s.step(at(60 + 119)).transition, Some(TransitionKind::Failover));
    s.world.untaint("east-1");
    assert_eq!(s.step(at(3600)).transition, None);
    s.edit(|spec| spec.failback.trigger = "2026-11-22-1".into());
    assert_eq!(s.step(at(3700)).transition, Some(TransitionKind::Failback));
}

#[test]
fn story_2_example_spills_to_cloud_eu() {
    let tp = example("llm-inference-overflow.yaml");
    let mut world = World::default()
        .set("dc-gpu", &["dc-1", "dc-2", "dc-3"])
        .set("aws-eu-gpu", &["eu-a"])
        .set("aws-gpu", &["any-a"]);
    let gpu = world.clusters.get_mut("eu-a").unwrap();
    gpu.metadata
        .labels
        .as_mut()
        .unwrap()
        .insert("gpu".into(), "a100".into());
    for (c, fits) in [("dc-1", 6), ("dc-2", 5), ("dc-3", 1), ("eu-a", 8), ("any-a", 8)] {
        world.score(c, "fits.a100-x1", fits - 100, None);
        world.score(c, "memClusterAvailable", 40, None);
    }
    let mut s = Scenario::new(tp.spec, world);
    let p = s.step(at(0));
    assert_eq!(s.active(), ["on-prem", "cloud-eu"]);
    assert_eq!(p.predicted, ["dc-1", "dc-2", "eu-a"]);
}
