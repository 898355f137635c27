//! The live differential check at CI size (`ocm_score_control_plane::differential::live`):
//! random Placements on the real hub, each decided by OCM's own placement controller and predicted
//! by `ocm-score-hub simulate` from a snapshot taken before the placement existed (the prediction,
//! judged against OCM's first decision as a watch recorded it); then, once OCM settled it, a
//! consistency check, not a prediction: `simulate` on the settled hub must give OCM's settled
//! answer. The seed is new every run and printed with the line that replays it;
//! `cargo bench -p ocm-score-tests --bench differential` runs 1,000 placements and prints the
//! tally by feature.
//!
//! `OCM_SCORE_DIFFERENTIAL_N` (default 50, at least 20), `OCM_SCORE_DIFFERENTIAL_SEED` and
//! `OCM_SCORE_DIFFERENTIAL_CLUSTERS` (default 16) choose the run.

use ocm_score_control_plane::differential::live::{self, Config};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ocm_and_simulate_agree_on_random_placements() {
    let config = Config::from_env(50).unwrap_or_else(|e| panic!("{e}"));
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
