//! `kubectl ocm-score`: kubectl runs this executable (`kubectl-ocm_score` on `PATH`) for
//! `kubectl ocm-score ...`; see `ocm_score_hub::kubectl_plugin`.

use clap::Parser;
use ocm_score_hub::kubectl_plugin::{self, Cli};
use std::process::ExitCode;

/// Exit code for a command or file the user must fix, as for kubectl's usage errors.
const EXIT_BAD_INPUT: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // Warnings and errors only: the output is for people and scripts.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(kubectl_plugin::run(cli)) {
        Ok(output) => {
            print!("{}", output.stdout);
            for w in &output.warnings {
                eprintln!("Warning: {w}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            let code = if e.is_bad_input() { EXIT_BAD_INPUT } else { 1 };
            eprintln!("error: {:#}", anyhow::Error::from(e));
            ExitCode::from(code)
        }
    }
}
