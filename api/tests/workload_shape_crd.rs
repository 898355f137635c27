//! The committed WorkloadShape CRD (the chart's `crds/`; `manifests/hub/crds` is rendered from the chart) is
//! exactly what the Rust types generate.
//!
//! After changing `api/src/crd/workload_shape.rs`, regenerate it with
//! `UPDATE_CRDS=1 cargo test -p ocm-score-api --test workload_shape_crd` and commit the YAML.

use kube_core::CustomResourceExt;
use ocm_score_api::WorkloadShape;
use std::path::Path;

const HEADER: &str = "# Generated from api/src/crd/workload_shape.rs; do not edit.\n\
# Regenerate: UPDATE_CRDS=1 cargo test -p ocm-score-api --test workload_shape_crd\n";

fn generated() -> String {
    let crd = WorkloadShape::crd();
    let yaml = serde_norway::to_string(&crd).expect("serialize the CRD");
    format!("{HEADER}{yaml}")
}

#[test]
fn committed_crd_matches_the_types() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../charts/ocm-score/crds/tiering.ocm-score.io_workloadshapes.yaml");
    let want = generated();
    if std::env::var_os("UPDATE_CRDS").is_some() {
        std::fs::write(&path, &want).expect("write the CRD");
    }
    let have = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run UPDATE_CRDS=1 cargo test -p ocm-score-api --test workload_shape_crd",
            path.display()
        )
    });
    assert!(
        have == want,
        "{} is out of date with the Rust types; run UPDATE_CRDS=1 cargo test -p ocm-score-api --test workload_shape_crd",
        path.display()
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
