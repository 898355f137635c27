//! Golden files: a test compares what the code generates with a committed file and, when an
//! environment variable asks, rewrites the file first. Never under CI: a check that rewrites what
//! it checks cannot fail. Used by `tests/tests/chart.rs` and, through `#[path]` (the api crate
//! cannot depend on this one), by `api/tests/crds.rs`.

/// Whether `variable` (`UPDATE_CRDS`, `UPDATE_MANIFESTS`) asks for the files to be rewritten;
/// panics when `CI` is set too.
pub fn updating(variable: &str) -> bool {
    let update = std::env::var_os(variable).is_some();
    assert!(
        !(update && std::env::var_os("CI").is_some()),
        "{variable} is refused when CI is set: it would rewrite the files this test checks"
    );
    update
}

/// Runs test `test` of the current test binary as CI would with `variable` left set, and fails
/// unless it refuses.
pub fn assert_ci_refuses_update(test: &str, variable: &str) {
    let out = std::process::Command::new(std::env::current_exe().expect("the test binary"))
        .args([test, "--exact", "--nocapture"])
        .env("CI", "true")
        .env(variable, "1")
        .output()
        .expect("running the test binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !out.status.success() && text.contains(&format!("{variable} is refused when CI is set")),
        "{test} ran with {variable} under CI: {text}"
    );
}
