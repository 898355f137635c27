//! `ocm-score-hub`: the hub side of ocm-score. Wiring only: parse the command line, set up logging
//! and the runtime (the process shell, `ocm_score_shell`), hand over to the mode.

use clap::{Parser, Subcommand};
use ocm_score_hub::simulate;
use ocm_score_shell::logging::LogArgs;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(name = "ocm-score-hub", version, about = "OCM hub side of ocm-score")]
struct Cli {
    #[command(flatten)]
    log: LogArgs,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Show which clusters a Placement would select from a hub snapshot, and why.
    Simulate(simulate::SimulateArgs),
    /// Install the score agent on every managed cluster as an OCM add-on (registration, hub RBAC,
    /// ManifestWork, configuration, health).
    AddonManager(Box<ocm_score_hub::addon::AddonManagerArgs>),
    /// Score every ManagedCluster from Thanos/Prometheus metrics in one pass, normalized across the
    /// fleet, and publish the scores as AddOnPlacementScores.
    ThanosScorer(Box<ocm_score_hub::thanos::ThanosScorerArgs>),
    /// Reconcile TieredPlacements: keep one OCM Placement per TieredPlacement steered to the
    /// active tier(s), with failover, overflow and failback.
    Tiering(Box<ocm_score_hub::tiering::TieringArgs>),
    /// Serve OCM's placement debug endpoint (`/debug/placements/`) over HTTPS from the live hub:
    /// why a Placement gets the clusters it does, for callers the hub authenticates and authorizes.
    ExplainServer(Box<ocm_score_hub::explain_server::ExplainServerArgs>),
}

/// Exit code for input the user must fix (files, flags, objects), like clap's usage errors.
const EXIT_BAD_INPUT: u8 = 2;

fn main() -> ExitCode {
    let (cli, deprecated) = ocm_score_shell::cli::parse::<Cli>(std::env::args_os());
    ocm_score_shell::logging::init(&cli.log);
    ocm_score_shell::cli::warn_deprecated(&deprecated);
    let result: anyhow::Result<()> = match cli.command {
        Command::Simulate(args) => simulate::run(args).map_err(anyhow::Error::from),
        Command::AddonManager(args) => {
            return block_on(|shutdown| ocm_score_hub::addon::run(*args, shutdown));
        }
        Command::ThanosScorer(args) => {
            return block_on(|shutdown| ocm_score_hub::thanos::run(*args, shutdown));
        }
        Command::Tiering(args) => {
            return block_on(|shutdown| ocm_score_hub::tiering::run(*args, shutdown));
        }
        Command::ExplainServer(args) => {
            return block_on(|shutdown| ocm_score_hub::explain_server::run(*args, shutdown));
        }
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

/// Runs a long-running mode on a multi-threaded runtime until it returns; SIGTERM or Ctrl-C cancel
/// the token it is given.
fn block_on<F: std::future::Future<Output = ExitCode>>(
    mode: impl FnOnce(ocm_score_shell::CancellationToken) -> F,
) -> ExitCode {
    match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime.block_on(async { mode(ocm_score_shell::shutdown::on_signals()).await }),
        Err(err) => {
            eprintln!("error: starting the async runtime: {err}");
            ExitCode::FAILURE
        }
    }
}
