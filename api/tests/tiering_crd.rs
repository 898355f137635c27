//! The committed TieredPlacement CRD (the chart's `crds/`; `manifests/hub/crds` is rendered from the chart) is
//! exactly what the Rust types generate.
//!
//! After changing `api/src/crd/tiered_placement.rs`, regenerate it with
//! `UPDATE_CRDS=1 cargo test -p ocm-score-api --test tiering_crd` and commit the YAML.

use kube_core::CustomResourceExt;
use ocm_score_api::TieredPlacement;
use std::path::Path;

const HEADER: &str = "# Generated from api/src/crd/tiered_placement.rs; do not edit.\n\
# Regenerate: UPDATE_CRDS=1 cargo test -p ocm-score-api --test tiering_crd\n";

fn generated() -> String {
    let crd = TieredPlacement::crd();
    let yaml = serde_norway::to_string(&crd).expect("serialize the CRD");
    format!("{HEADER}{yaml}")
}

#[test]
fn committed_crd_matches_the_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../charts/ocm-score/crds/tiering.ocm-score.io_tieredplacements.yaml");
    let want = generated();
    if std::env::var_os("UPDATE_CRDS").is_some() {
        std::fs::write(&path, &want).expect("write the CRD");
    }
    let have = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run UPDATE_CRDS=1 cargo test -p ocm-score-api --test tiering_crd",
            path.display()
        )
    });
    assert!(
        have == want,
        "{} is out of date with the Rust types; run UPDATE_CRDS=1 cargo test -p ocm-score-api --test tiering_crd",
        path.display()
    );
}

#[test]
fn the_crd_is_namespaced_with_a_status_subresource() {
    let crd = serde_json::to_value(TieredPlacement::crd()).expect("json");
    assert_eq!(crd["spec"]["group"], "tiering.ocm-score.io");
    assert_eq!(crd["spec"]["scope"], "Namespaced");
    assert_eq!(crd["spec"]["names"]["kind"], "TieredPlacement");
    let v = &crd["spec"]["versions"][0];
    assert_eq!(v["name"], "v1alpha1");
    assert!(v["subresources"]["status"].is_object(), "{v}");
    let spec = &v["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(
        spec["properties"]["mode"]["enum"],
        serde_json::json!(["Failover", "Overflow"])
    );
    assert_eq!(spec["properties"]["tiers"]["maxItems"], 16);
    assert_eq!(
        spec["properties"]["template"]["x-kubernetes-preserve-unknown-fields"],
        true
    );
}
