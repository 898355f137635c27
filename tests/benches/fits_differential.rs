//! The fits differential at full size: 1,000 random cases (WorkloadShapes on random clusters of
//! Node objects and pods), each the agent's `fits.<shape>` against the replicas the real
//! kube-scheduler binds, then the tally by feature as a markdown table.
//!
//! `cargo bench -p ocm-score-tests --bench fits_differential`; `OCM_SCORE_FITS_N` (1,000),
//! `OCM_SCORE_FITS_SEED` (fresh unless set) and `OCM_SCORE_FITS_FEATURES` (extra generator
//! features, e.g. `tolerate-all`) choose the run. Exits non-zero on any disagreement, after printing
//! the table.

use ocm_score_control_plane::fits_differential::live::{self, Config};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    // `cargo bench` passes `--bench`; nothing else is accepted.
    if let Some(other) = std::env::args().skip(1).find(|a| a != "--bench") {
        anyhow::bail!("unexpected argument {other:?}: sizes come from OCM_SCORE_FITS_*");
    }
    let config = Config::from_env(1000).map_err(anyhow::Error::msg)?;
    let report = live::run(config, &|l| eprintln!("{l}"))
        .await
        .map_err(anyhow::Error::msg)?;
    println!("## Fits differential: the agent's fits.<shape> and kube-scheduler\n");
    println!(
        "- date: {}\n- seed {}, {} cases over {} random clusters, {:.0} s\n- replay: {}\n",
        jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC"),
        report.config.seed,
        report.tally.outcomes.len(),
        report.config.clusters,
        report.seconds,
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
