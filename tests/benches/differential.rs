//! The live differential check at full size: 1,000 random Placements on the real hub (OCM's
//! placement controller decides, `ocm-score-hub simulate` predicts from the snapshot before each
//! placement existed and is checked for consistency on the settled hub), then the tally by feature
//! as a markdown table.
//!
//! `cargo bench -p ocm-score-tests --bench differential`; `OCM_SCORE_DIFFERENTIAL_N` (1,000),
//! `OCM_SCORE_DIFFERENTIAL_SEED` (fresh unless set) and `OCM_SCORE_DIFFERENTIAL_CLUSTERS` (16)
//! choose the run. 1.4 s per placement on an idle 2-core machine, 5.6 s beside parallel builds. Exits non-zero on any
//! disagreement, after printing the table.

use ocm_score_control_plane::differential::live::{self, Config};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    if let Some(other) = std::env::args().skip(1).find(|a| a != "--bench") {
        anyhow::bail!("unexpected argument {other:?}: sizes come from OCM_SCORE_DIFFERENTIAL_*");
    }
    let config = Config::from_env(1000).map_err(anyhow::Error::msg)?;
    let report = live::run(config, &|l| eprintln!("{l}"))
        .await
        .map_err(anyhow::Error::msg)?;
    println!("## Live differential: OCM's placement controller and simulate\n");
    println!(
        "- date: {}\n- seed {}, {} placements over {} clusters ({} misconfigured on purpose)\n- replay: {}\n",
        jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC"),
        report.config.seed,
        report.config.placements,
        report.config.clusters,
        report.forced_misconfigured,
        report.config.replay()
    );
    println!("{}", report.tally.table());
    println!("{}", report.summary());
    let problems = report.problems();
    if !problems.is_empty() {
        anyhow::bail!("{}", problems.join("\n"));
    }
    Ok(())
}
