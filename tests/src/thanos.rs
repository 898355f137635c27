//! Thanos (`thanos query`, `thanos sidecar`, ...), compiled once from the Go module in
//! `tests/thanos/` and cached under `~/.cache/ocm-score/thanos/<hash>/` like the control plane's components
//! (see [`crate::go_module`]).
//!
//! `tests/thanos/go.mod` pins `github.com/thanos-io/thanos` and lists `cmd/thanos` as a `tool`;
//! `go.sum` pins every byte. The build uses the tags of Thanos's own release build (`netgo`,
//! `slicelabels`: Thanos converts label slices to Prometheus labels in place, which is only sound
//! with Prometheus's slice representation of labels) and stamps the release version.

use std::path::{Path, PathBuf};

use crate::go_module::{self, Build, Error};
pub use ocm_score_go_build::thanos::{MODULE, module, module_dir};

/// The `thanos` binary of this build.
#[derive(Clone, Debug)]
pub struct Thanos {
    build: Build,
}

impl Thanos {
    pub fn bin(&self) -> PathBuf {
        self.build.bin("thanos")
    }

    /// `module version` lines of what was built (Thanos, Go).
    pub fn versions(&self) -> String {
        self.build.versions()
    }

    pub fn root(&self) -> &Path {
        self.build.root()
    }
}

/// Builds Thanos unless this exact build is cached; `progress` hears about long steps.
pub fn ensure_built(progress: &dyn Fn(&str)) -> Result<Thanos, Error> {
    Ok(Thanos {
        build: go_module::ensure_built(&module(), progress)?,
    })
}
