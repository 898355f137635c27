//! `ocm-score-hub`: the hub side of ocm-score.

mod simulate;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(name = "ocm-score-hub", version, about = "OCM hub side of ocm-score")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show which clusters a Placement would select from a hub snapshot, and why.
    Simulate(simulate::SimulateArgs),
    /// Install the score agent on every managed cluster as an OCM add-on (registration, hub RBAC,
    /// ManifestWork, configuration, health).
    AddonManager(ocm_score_hub::addon::AddonManagerArgs),
    /// Score every ManagedCluster from Thanos/Prometheus metrics in one pass, normalized across the
    /// fleet, and publish the scores as AddOnPlacementScores.
    ThanosScorer(Box<ocm_score_hub::thanos::ThanosScorerArgs>),
}

/// Exit code for input the user must fix (files, flags, objects), like clap's usage errors.
const EXIT_BAD_INPUT: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let result: anyhow::Result<()> = match cli.command {
        Command::Simulate(args) => simulate::run(args).map_err(anyhow::Error::from),
        Command::AddonManager(args) => return block_on(ocm_score_hub::addon::run(args)),
        Command::ThanosScorer(args) => return block_on(ocm_score_hub::thanos::run(*args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            let bad_input = err
                .downcast_ref::<simulate::SimulateError>()
                .is_some_and(|e| e.is_bad_input());
            ExitCode::from(if bad_input { EXIT_BAD_INPUT } else { 1 })
        }
    }
}

/// Runs an async subcommand to completion on a multi-threaded runtime.
fn block_on(run: impl std::future::Future<Output = ExitCode>) -> ExitCode {
    match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime.block_on(run),
        Err(err) => {
            eprintln!("error: starting the async runtime: {err}");
            ExitCode::FAILURE
        }
    }
}
