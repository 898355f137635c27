//! The control plane's upstream components: the Go module in `tests/control-plane/`.
//!
//! `tests/control-plane/go.mod` pins `k8s.io/kubernetes` and `open-cluster-management.io/ocm` and
//! lists their commands as `tool`s; `go.sum` pins every byte. The build runs `go build` on those
//! tools plus our small etcd wrapper and pause binary, copies the CRDs OCM's operators would install
//! from the same OCM module, and stores it all under `~/.cache/ocm-score/control-plane/<hash>/`.

use std::path::{Path, PathBuf};

use crate::{self as go_module, GoModule, go_command, version_of};

/// Where the Go module lives in the source tree.
pub fn module_dir() -> PathBuf {
    crate::module_in_tests("control-plane")
}

/// The commands every control plane needs (binary names as `go build -o DIR/` writes them).
pub const COMMANDS: &[&str] = &[
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "registration",
    "placement",
    "work",
    "addon",
    "registration-operator",
    // The client of the same release, for machines without a `kubectl` of their own.
    "kubectl",
    // What a node is made of: pods run through these (see `node.rs`).
    "kubelet",
    "kube-scheduler",
    "kube-proxy",
    // Our sandbox image's one binary (no registry to pull registry.k8s.io/pause from).
    "pause",
    // The klusterlet operator's add-on namespace controller, alone (see its main.go).
    "addon-namespaces",
    // The chart's client, at a release built against the same Kubernetes libraries.
    "helm",
];

/// The control plane's Go module and how it is built.
pub fn module() -> GoModule {
    GoModule {
        what: "the control plane's Go components",
        first_build_note: "a first build compiles Kubernetes and OCM and takes minutes",
        dir: module_dir(),
        cache: "control-plane",
        packages: &["./etcd", "./pause", "./addon-namespaces"],
        tags: &[],
        commands: COMMANDS,
        recipe: "3: -trimpath, stripped, release versions stamped, CRDs of hub and klusterlet",
        version_modules: &[
            "k8s.io/kubernetes",
            "open-cluster-management.io/ocm",
            "open-cluster-management.io/api",
            "helm.sh/helm/v3",
        ],
        ldflags: version_ldflags,
        finish: copy_crds,
    }
}

/// Copies the CRDs OCM's cluster-manager and klusterlet install, from the pinned OCM module.
fn copy_crds(go: &Path, module: &Path, staging: &Path) -> Result<(), go_module::Error> {
    let out = go_command(go, module)
        .args(["list", "-m", "-f", "{{.Dir}}", "open-cluster-management.io/ocm"])
        .output()
        .map_err(|source| crate::io("running go list -m open-cluster-management.io/ocm".into(), source))?;
    let ocm = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !out.status.success() || !ocm.is_dir() {
        return Err(go_module::Error::GoBuild {
            what: "the control plane's CRDs".into(),
            status: format!("go list -m open-cluster-management.io/ocm: {}", out.status),
            log: PathBuf::new(),
            tail: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    let sets = [
        (
            ocm.join("manifests/cluster-manager/hub/crds"),
            staging.join("crds/hub"),
        ),
        (
            ocm.join("manifests/klusterlet/managed"),
            staging.join("crds/managed"),
        ),
    ];
    for (from, to) in sets {
        std::fs::create_dir_all(&to)
            .map_err(|source| crate::io(format!("creating {}", to.display()), source))?;
        let entries = std::fs::read_dir(&from)
            .map_err(|source| crate::io(format!("reading {}", from.display()), source))?;
        let mut copied = 0;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            // The klusterlet directory also holds RBAC for its own deployment; only CRDs apply here.
            if !name.ends_with(".yaml") || !is_crd_file(&entry.path()) {
                continue;
            }
            std::fs::copy(entry.path(), to.join(&name))
                .map_err(|source| crate::io(format!("copying {name}"), source))?;
            copied += 1;
        }
        if copied == 0 {
            return Err(go_module::Error::GoBuild {
                what: "the control plane's CRDs".into(),
                status: format!("no CRDs found in {}", from.display()),
                log: PathBuf::new(),
                tail: String::new(),
            });
        }
    }
    Ok(())
}

fn is_crd_file(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .map(|text| text.contains("kind: CustomResourceDefinition"))
        .unwrap_or(false)
}

/// Stamps the release versions into the binaries, as the upstream release builds do, so that
/// `kubectl version` and OCM's logs show v1.34.3 and not `v0.0.0-master`.
fn version_ldflags(versions: &str) -> String {
    let version_of = |module: &str| version_of(versions, module);
    let major_minor = |v: &str| {
        let mut parts = v.trim_start_matches('v').split('.');
        (
            parts.next().unwrap_or_default().to_owned(),
            parts.next().unwrap_or_default().to_owned(),
        )
    };
    let mut flags = Vec::new();
    let kube = version_of("k8s.io/kubernetes");
    let (major, minor) = major_minor(&kube);
    for package in ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"] {
        flags.push(format!("-X {package}.gitVersion={kube}"));
        flags.push(format!("-X {package}.gitMajor={major}"));
        flags.push(format!("-X {package}.gitMinor={minor}"));
        flags.push(format!("-X {package}.gitTreeState=clean"));
    }
    let ocm = version_of("open-cluster-management.io/ocm");
    let (major, minor) = major_minor(&ocm);
    let package = "open-cluster-management.io/ocm/pkg/version";
    flags.push(format!("-X {package}.versionFromGit={ocm}"));
    flags.push(format!("-X {package}.majorFromGit={major}"));
    flags.push(format!("-X {package}.minorFromGit={minor}"));
    let helm = version_of("helm.sh/helm/v3");
    flags.push(format!("-X helm.sh/helm/v3/internal/version.version={helm}"));
    flags.join(" ")
}
