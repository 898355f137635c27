//! The committed CRDs of our kinds (the chart's `crds/`; `manifests/hub/crds` is rendered from the
//! chart) are exactly what the Rust types in `api/src/crd/` generate.
//!
//! After changing a type, regenerate them with `bash scripts/generate.sh` (it sets `UPDATE_CRDS=1`
//! for this test, then re-renders the manifests) and commit the YAML.

use kube_core::CustomResourceExt;
use ocm_score_api::{TieredPlacement, WorkloadShape};
use std::path::Path;

#[path = "../../tests/src/golden.rs"]
mod golden;

/// Compares (or, with `UPDATE_CRDS`, writes) the chart's copy of `K`'s CRD, generated from `source`.
fn committed_crd_matches<K: CustomResourceExt>(file: &str, source: &str) {
    let header = format!("# Generated from {source}; do not edit.\n# Regenerate: bash scripts/generate.sh\n");
    let yaml = serde_norway::to_string(&K::crd()).expect("serialize the CRD");
    let want = format!("{header}{yaml}");
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../charts/ocm-score/crds")
        .join(file);
    if golden::updating("UPDATE_CRDS") {
        std::fs::write(&path, &want).expect("write the CRD");
    }
    let have = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}; run bash scripts/generate.sh", path.display()));
    assert!(
        have == want,
        "{} is out of date with {source}; run bash scripts/generate.sh",
        path.display()
    );
}

#[test]
fn committed_crds_match_the_types() {
    committed_crd_matches::<TieredPlacement>(
        "tiering.ocm-score.io_tieredplacements.yaml",
        "api/src/crd/tiered_placement.rs",
    );
    committed_crd_matches::<WorkloadShape>(
        "tiering.ocm-score.io_workloadshapes.yaml",
        "api/src/crd/workload_shape.rs",
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

#[test]
fn the_crd_is_cluster_scoped_with_scale_at_least_1() {
    let crd = serde_json::to_value(WorkloadShape::crd()).expect("json");
    assert_eq!(crd["spec"]["group"], "tiering.ocm-score.io");
    assert_eq!(crd["spec"]["scope"], "Cluster");
    assert_eq!(crd["spec"]["names"]["kind"], "WorkloadShape");
    assert_eq!(crd["spec"]["names"]["plural"], "workloadshapes");
    let v = &crd["spec"]["versions"][0];
    assert_eq!(v["name"], "v1alpha1");
    let spec = &v["schema"]["openAPIV3Schema"]["properties"]["spec"];
    assert_eq!(spec["properties"]["scale"]["minimum"].as_f64(), Some(1.0));
    assert_eq!(spec["properties"]["scale"]["default"], 1);
    // Any resource name may be requested; values are Kubernetes quantities.
    let requests = &spec["properties"]["requests"];
    assert_eq!(requests["type"], "object");
    assert_eq!(
        requests["additionalProperties"]["x-kubernetes-int-or-string"],
        true
    );
    assert_eq!(
        spec["properties"]["tolerations"]["items"]["properties"]["operator"]["type"],
        "string"
    );
}

#[test]
fn ci_refuses_to_rewrite_the_crds() {
    golden::assert_ci_refuses_update("committed_crds_match_the_types", "UPDATE_CRDS");
}
