//! The Go builds the tests run, from the `ocm-score-go-build` crate (`tests/go-build/`): this
//! module is that crate's API under the name the harness has always used.

pub use ocm_score_go_build::*;
