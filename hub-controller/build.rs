//! With `OCM_SCORE_SKIP_PROMETHEUS=1` the tests that need a real Prometheus are built as ignored, so
//! a machine without Prometheus reports them as skipped; a test that returns early would count as
//! passed. Nothing else of the crate depends on it. `tests/Cargo.toml` names this same script, for
//! `tests/tests/control_plane_thanos_scorer.rs`.

const SKIP_ENV: &str = "OCM_SCORE_SKIP_PROMETHEUS";

fn main() {
    println!("cargo::rustc-check-cfg=cfg(skip_prometheus)");
    // This one script is the build script of two packages (hub-controller, tests); a path relative
    // to either package names it for both. A missing path (tests/build.rs) would rerun it, and
    // rebuild the tests crate and every test binary, at every cargo command.
    println!(
        "cargo::rerun-if-changed={}/../hub-controller/build.rs",
        env!("CARGO_MANIFEST_DIR")
    );
    println!("cargo::rerun-if-env-changed={SKIP_ENV}");
    if std::env::var(SKIP_ENV).as_deref() == Ok("1") {
        println!("cargo::rustc-cfg=skip_prometheus");
        println!(
            "cargo::warning={SKIP_ENV}=1: the tests that need a real Prometheus are built as ignored \
             and reported as skipped"
        );
    }
}
