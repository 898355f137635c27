//! OCM's own code as a peer of ours: the Go module in `tests/ocm-bench/`.
//!
//! The module pins the OCM release the control plane runs (`tests/control-plane/go.mod`; a test
//! holds the two to the same versions) and holds two commands: `placement-bench`, OCM's scheduling
//! controller timed on a fleet file that scheduler-core's placement benchmark writes
//! (`scripts/bench-vs-ocm.sh`), and `cel-recorder`, which records
//! `scheduler-core/tests/cel_vectors.tsv` with OCM's CEL environment.

use std::path::PathBuf;

use crate::{GoModule, no_ldflags, nothing_to_finish};

/// Where the Go module lives in the source tree.
pub fn module_dir() -> PathBuf {
    crate::module_in_tests("ocm-bench")
}

/// The module and how it is built: its two `tool`s, no version stamps.
pub fn module() -> GoModule {
    GoModule {
        what: "OCM's scheduler benchmark and CEL recorder",
        first_build_note: "a first build compiles OCM's placement packages and takes a few minutes",
        dir: module_dir(),
        cache: "ocm-bench",
        packages: &[],
        tags: &[],
        commands: &["cel-recorder", "placement-bench"],
        recipe: "1: -trimpath, stripped",
        version_modules: &["open-cluster-management.io/ocm", "github.com/google/cel-go"],
        ldflags: no_ldflags,
        finish: nothing_to_finish,
    }
}
