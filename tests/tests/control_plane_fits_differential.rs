//! The fits differential at CI size (`ocm_score_control_plane::fits_differential::live`): random
//! clusters of Node objects and pods, random WorkloadShapes, and for each shape the agent's
//! `fits.<shape>` (read from the running agent, as shipped, before any replica exists) against the
//! replicas the real kube-scheduler binds, created one at a time until one stays Unschedulable.
//! The seed is new every run and printed with the line that replays it;
//! `cargo bench -p ocm-score-tests --bench fits_differential` runs 1,000 cases and prints the tally
//! by feature.
//!
//! `OCM_SCORE_FITS_N` (default 30, at least 10), `OCM_SCORE_FITS_SEED` and
//! `OCM_SCORE_FITS_FEATURES` choose the run.

use ocm_score_control_plane::fits_differential::live::{self, Config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_agents_fits_equal_what_kube_scheduler_binds() {
    let config = Config::from_env(30).unwrap_or_else(|e| panic!("{e}"));
    let report = live::run(config, &|l| eprintln!("{l}"))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{}\n{}", report.tally.table(), report.summary());
    let problems = report.problems();
    assert!(
        problems.is_empty(),
        "{}\n{}",
        report.summary(),
        problems.join("\n")
    );
}
