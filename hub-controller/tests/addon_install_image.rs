//! The hub install as `kubectl apply -k manifests/hub` builds it: the image is a fully qualified
//! reference, it is set in one place (`images:` in the kustomization) and the agent's image follows
//! the controller's; no pod pins a user or group id (OpenShift's restricted SCC refuses that).
//!
//! Built with the `kubectl` of the real control plane's Go components (its embedded kustomize), so
//! what is checked is what a user's `kubectl apply -k` sends.

mod addon_common;

use ocm_score_control_plane::go_components;
use ocm_score_hub::addon::AddonManagerArgs;
use ocm_score_hub::addon::args::short_image_name;
use ocm_score_tests::support::TempDir;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn hub_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/hub")
}

/// `kubectl kustomize DIR`, as objects.
fn kustomize(dir: &Path) -> Vec<Value> {
    let components = go_components::ensure_built(&|line| eprintln!("{line}"))
        .unwrap_or_else(|e| panic!("the control plane's kubectl: {e}"));
    let out = Command::new(components.bin("kubectl"))
        .arg("kustomize")
        .arg(dir)
        .output()
        .expect("running kubectl kustomize");
    assert!(
        out.status.success(),
        "kubectl kustomize {}: {}",
        dir.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    ocm_score_kube_double::parse_objects("kustomize output", &text).expect("YAML objects")
}

/// The controller's image and its parsed command line, from the built Deployment.
fn controller(objects: &[Value]) -> (String, AddonManagerArgs) {
    let deployment = objects
        .iter()
        .find(|o| o["kind"] == "Deployment" && o["metadata"]["name"] == "ocm-score-addon-manager")
        .expect("the controller's Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    let parsed = addon_common::manager_args_of(container);
    parsed.validate().expect("valid flags");
    let image = container["image"].as_str().expect("an image").to_owned();
    (image, parsed)
}

#[test]
fn the_shipped_image_is_fully_qualified_and_the_agent_runs_the_same() {
    let objects = kustomize(&hub_dir());
    let (image, args) = controller(&objects);
    assert_eq!(image, "localhost/ocm-score:0.1.0");
    assert_eq!(short_image_name(&image), None, "{image} names its registry");
    assert_eq!(args.agent_image, image, "one image holds both binaries");
    for deployment in objects.iter().filter(|o| o["kind"] == "Deployment") {
        let pod = &deployment["spec"]["template"]["spec"];
        let contexts = std::iter::once(&pod["securityContext"]).chain(
            pod["containers"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| &c["securityContext"]),
        );
        for context in contexts {
            assert!(
                context.get("runAsUser").is_none() && context.get("runAsGroup").is_none(),
                "{}: a fixed id in {context}",
                deployment["metadata"]["name"]
            );
        }
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    }
}

/// Copies the kustomization with its subdirectories (the CRDs are one).
fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("a manifests directory") {
        let path = entry.expect("entry").path();
        let target = to.join(path.file_name().expect("a name"));
        if path.is_dir() {
            std::fs::create_dir_all(&target).expect("mkdir");
            copy_tree(&path, &target);
        } else {
            std::fs::copy(&path, &target).expect("copy");
        }
    }
}

#[test]
fn setting_the_image_in_the_kustomization_moves_the_agent_image_too() {
    let dir = TempDir::new("hub-kustomization");
    copy_tree(&hub_dir(), dir.path());
    let file = dir.path().join("kustomization.yaml");
    let mut kustomization: Value =
        serde_norway::from_str(&std::fs::read_to_string(&file).expect("read")).expect("YAML");
    let images = kustomization["images"].as_array_mut().expect("an images: list");
    assert_eq!(images.len(), 1, "one image reference to set");
    images[0]["newName"] = "quay.io/someone/ocm-score".into();
    images[0]["newTag"] = "1.2.3".into();
    std::fs::write(&file, serde_norway::to_string(&kustomization).expect("YAML")).expect("write");

    let (image, args) = controller(&kustomize(dir.path()));
    assert_eq!(image, "quay.io/someone/ocm-score:1.2.3");
    assert_eq!(args.agent_image, image);
}
