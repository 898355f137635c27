//! The upstream components of the control plane, compiled once from the Go module in
//! `tests/control-plane/` and cached (see [`ocm_score_go_build`]).
//!
//! `tests/control-plane/go.mod` pins `k8s.io/kubernetes` and `open-cluster-management.io/ocm` and
//! lists their commands as `tool`s; `go.sum` pins every byte. The build runs `go build` on those
//! tools plus our small etcd wrapper, copies the CRDs OCM's operators would install from the same
//! OCM module, and stores it all under `~/.cache/ocm-score/control-plane/<hash>/`.

use std::path::{Path, PathBuf};

use super::Error;
use ocm_score_go_build as go_module;
pub use ocm_score_go_build::control_plane::{COMMANDS, module, module_dir};

/// The compiled components and the CRDs of one build.
#[derive(Clone, Debug)]
pub struct Components {
    build: go_module::Build,
}

impl Components {
    /// The path of a compiled command (`kube-apiserver`, `registration`, ...).
    pub fn bin(&self, name: &str) -> PathBuf {
        self.build.bin(name)
    }

    /// CRDs a hub serves (ClusterManager's set, some with `{{ }}` template fields to render).
    pub fn hub_crds(&self) -> PathBuf {
        self.build.root().join("crds").join("hub")
    }

    /// CRDs the klusterlet needs on a managed cluster.
    pub fn managed_crds(&self) -> PathBuf {
        self.build.root().join("crds").join("managed")
    }

    /// `module version` lines of what was built (Kubernetes, OCM, Go).
    pub fn versions(&self) -> String {
        self.build.versions()
    }

    pub fn root(&self) -> &Path {
        self.build.root()
    }
}

/// Builds the components unless this exact build is cached; `progress` hears about long steps.
pub fn ensure_built(progress: &dyn Fn(&str)) -> Result<Components, Error> {
    let build = go_module::ensure_built(&module(), progress)?;
    Ok(Components { build })
}

/// Builds the components and then, through the same Go build cache, `tests/ocm-bench/`'s two
/// commands (OCM's CEL recorder and scheduler benchmark), which pin the same packages: what
/// `control-plane build` (and so `scripts/test.sh`) does before the tests, so that no test compiles
/// Go. Returns the components and the ocm-bench build's directory.
pub fn ensure_built_with_ocm_bench(progress: &dyn Fn(&str)) -> Result<(Components, PathBuf), Error> {
    let builds = go_module::ensure_all_built(&[module(), ocm_score_go_build::ocm_bench::module()], progress)?;
    match <[go_module::Build; 2]>::try_from(builds) {
        Ok([build, ocm_bench]) => Ok((Components { build }, ocm_bench.root().to_path_buf())),
        Err(builds) => Err(go_module::Error::Io {
            what: "building the control plane and ocm-bench".into(),
            source: std::io::Error::other(format!("{} builds returned, not 2", builds.len())),
        }
        .into()),
    }
}
