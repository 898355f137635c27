//! Thanos (`thanos query`, `thanos sidecar`, ...): the Go module in `tests/thanos/`.
//!
//! `tests/thanos/go.mod` pins `github.com/thanos-io/thanos` and lists `cmd/thanos` as a `tool`;
//! `go.sum` pins every byte. The build uses the tags of Thanos's own release build (`netgo`,
//! `slicelabels`: Thanos converts label slices to Prometheus labels in place, which is only sound
//! with Prometheus's slice representation of labels) and stamps the release version.

use std::path::PathBuf;

use crate::{GoModule, nothing_to_finish, version_of};

/// The pinned module.
pub const MODULE: &str = "github.com/thanos-io/thanos";

/// Where the Go module lives in the source tree.
pub fn module_dir() -> PathBuf {
    crate::module_in_tests("thanos")
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
