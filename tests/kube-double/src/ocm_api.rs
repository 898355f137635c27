//! OCM's own CRDs, read from the `open-cluster-management.io/api` Go module that
//! `tests/control-plane/go.mod` pins (and `go.sum` verifies), so a clone of the repository needs
//! nothing beside it. The real control plane (`control_plane`) builds OCM from the same go.mod, so
//! the double and the real hub serve the same API version.
//!
//! `go mod download -json` names the module's directory in Go's module cache (downloading it on
//! first use); that is asked once per process and remembered.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use ocm_score_go_build::control_plane::module_dir;
use ocm_score_go_build::{find_go, go_command};

/// The Go module path of OCM's API types and CRDs.
pub const MODULE: &str = "open-cluster-management.io/api";

/// The CRDs served as OCM's, by their path inside the module: the kinds this project reads or
/// writes, each with one served version. The add-on kinds are the `addon/v1alpha1` files on
/// purpose: their `addon/v1beta1` files list v1alpha1 and v1beta1 together, which a real hub
/// serves only with OCM's conversion webhook; without one an API server would hand out objects
/// of the other layout unconverted.
pub const SINGLE_VERSION_SET: [&str; 10] = [
    "addon/v1alpha1/0000_00_addon.open-cluster-management.io_clustermanagementaddons.crd.yaml",
    "addon/v1alpha1/0000_01_addon.open-cluster-management.io_managedclusteraddons.crd.yaml",
    "addon/v1alpha1/0000_02_addon.open-cluster-management.io_addondeploymentconfigs.crd.yaml",
    "cluster/v1/0000_00_clusters.open-cluster-management.io_managedclusters.crd.yaml",
    "cluster/v1alpha1/0000_05_clusters.open-cluster-management.io_addonplacementscores.crd.yaml",
    "cluster/v1beta1/0000_02_clusters.open-cluster-management.io_placements.crd.yaml",
    "cluster/v1beta1/0000_03_clusters.open-cluster-management.io_placementdecisions.crd.yaml",
    "cluster/v1beta2/0000_00_clusters.open-cluster-management.io_managedclustersets.crd.yaml",
    "cluster/v1beta2/0000_01_clusters.open-cluster-management.io_managedclustersetbindings.crd.yaml",
    "work/v1/0000_00_work.open-cluster-management.io_manifestworks.crd.yaml",
];

/// The pinned module as Go's module cache holds it (read-only files).
#[derive(Clone, Debug)]
pub struct ApiModule {
    /// The version go.mod pins (`v1.2.0`).
    pub version: String,
    /// The module's directory in the module cache.
    pub dir: PathBuf,
}

impl ApiModule {
    /// The files of [`SINGLE_VERSION_SET`], checked to exist, in that order.
    pub fn crd_files(&self) -> Result<Vec<PathBuf>, String> {
        SINGLE_VERSION_SET
            .iter()
            .map(|rel| {
                let path = self.dir.join(rel);
                if path.is_file() {
                    Ok(path)
                } else {
                    Err(format!(
                        "{MODULE} {} has no {rel}: the CRD moved or the pin changed; update \
                         ocm_api::SINGLE_VERSION_SET",
                        self.version
                    ))
                }
            })
            .collect()
    }
}

/// The pinned module, located once per process; the error says what is missing and how to get it.
pub fn module() -> Result<&'static ApiModule, String> {
    static LOCATED: OnceLock<Result<ApiModule, String>> = OnceLock::new();
    LOCATED
        .get_or_init(|| locate(&module_dir()))
        .as_ref()
        .map_err(Clone::clone)
}

/// The Go module that pins the OCM API release after the control plane's (`tests/ocm-next/go.mod`,
/// CRDs only, nothing built): the release users move to next, which our models must also fit.
pub fn next_release_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../ocm-next")
}

/// The next release's module ([`next_release_dir`]), located once per process.
pub fn next_release_module() -> Result<&'static ApiModule, String> {
    static LOCATED: OnceLock<Result<ApiModule, String>> = OnceLock::new();
    LOCATED
        .get_or_init(|| locate(&next_release_dir()))
        .as_ref()
        .map_err(Clone::clone)
}

/// Asks `go mod download -json` in `go_module_dir` where the pinned [`MODULE`] is.
pub fn locate(go_module_dir: &Path) -> Result<ApiModule, String> {
    locate_module(go_module_dir, MODULE)
}

/// Asks `go mod download -json` in `go_module_dir` where the Go module `module` its go.mod pins is
/// (downloading it into Go's module cache on first use, verified by go.sum).
pub fn locate_module(go_module_dir: &Path, module: &str) -> Result<ApiModule, String> {
    let what = format!(
        "the Go module {module} pinned in {}",
        go_module_dir.join("go.mod").display()
    );
    let go = find_go().map_err(|e| format!("{what}, which needs Go: {e}"))?;
    // go_command: GOTOOLCHAIN=local and -mod=readonly, so go.mod and go.sum decide and stay as they are.
    let out = go_command(&go, go_module_dir)
        .args(["mod", "download", "-json", module])
        .output()
        .map_err(|e| {
            format!(
                "{what}, which needs Go: running {} failed: {e}; `bash scripts/test.sh` installs Go \
                 (or set OCM_SCORE_GO to a go binary, 1.25 or newer)",
                go.display()
            )
        })?;
    // On failure the JSON carries an `Error` field and stderr may say more (no network, bad sum).
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let field = |key: &str| info.get(key).and_then(|v| v.as_str()).map(str::to_owned);
    let failed = |why: String| {
        format!(
            "{what}: `{} mod download -json {module}` {why}; stderr: {}",
            go.display(),
            String::from_utf8_lossy(&out.stderr).trim()
        )
    };
    if !out.status.success() || field("Error").is_some() {
        return Err(failed(format!(
            "failed ({}): {}",
            out.status,
            field("Error").unwrap_or_default()
        )));
    }
    match (field("Version"), field("Dir")) {
        (Some(version), Some(dir)) if Path::new(&dir).is_dir() => Ok(ApiModule {
            version,
            dir: PathBuf::from(dir),
        }),
        _ => Err(failed(format!(
            "named no module directory: {}",
            String::from_utf8_lossy(&out.stdout).trim()
        ))),
    }
}
