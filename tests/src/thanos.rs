//! Thanos (`thanos query`, `thanos sidecar`, ...), compiled once from the Go module in
//! `tests/thanos/` and cached under `~/.cache/ocm-score/thanos/<hash>/` like the control plane's components
//! (see [`crate::go_module`]).
//!
//! `tests/thanos/go.mod` pins `github.com/thanos-io/thanos` and lists `cmd/thanos` as a `tool`;
//! `go.sum` pins every byte. The build uses the tags of Thanos's own release build (`netgo`,
//! `slicelabels`: Thanos converts label slices to Prometheus labels in place, which is only sound
//! with Prometheus's slice representation of labels) and stamps the release version.

use std::path::{Path, PathBuf};

use crate::go_module::{self, Build, Error, GoModule, nothing_to_finish, version_of};

/// The pinned module.
pub const MODULE: &str = "github.com/thanos-io/thanos";

/// Where the Go module lives in the source tree.
pub fn module_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("thanos")
}

/// Thanos's Go module and how it is built.
pub fn module() -> GoModule {
    GoModule {
        what: "Thanos",
        first_build_note: "a first build compiles Thanos and its dependencies and takes minutes",
        dir: module_dir(),
        cache: "thanos",
        packages: &[],
        tags: &["netgo", "slicelabels"],
        commands: &["thanos"],
        recipe: "1: -trimpath, stripped, tags netgo and slicelabels, release version stamped",
        version_modules: &[MODULE],
        ldflags: version_ldflags,
        finish: nothing_to_finish,
    }
}

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

/// `thanos --version` shows the release, as Thanos's own release build stamps it.
fn version_ldflags(versions: &str) -> String {
    let version = version_of(versions, MODULE);
    format!(
        "-X github.com/prometheus/common/version.Version={}",
        version.trim_start_matches('v')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_version_is_stamped_without_its_v() {
        assert_eq!(
            version_ldflags("github.com/thanos-io/thanos v0.41.0\n"),
            "-X github.com/prometheus/common/version.Version=0.41.0"
        );
    }
}
