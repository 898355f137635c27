//! `ocm-score-agent`: wiring only. Parse and validate the command line (bad values exit 2 naming the
//! flag), set up logging and the runtime (the process shell, `ocm_score_shell`), then hand over to
//! `run` or `once`.

use anyhow::Context;
use clap::CommandFactory;
use ocm_score_agent::cli::{Cli, Command, LogFormat, with_default_subcommand, without_empty_values};
use ocm_score_agent::config::{ConfigError, OnceConfig, RunConfig};
use ocm_score_shell::logging::{self, LogArgs};
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let (cli, deprecated) = ocm_score_shell::cli::parse::<Cli>(with_default_subcommand(
        without_empty_values(std::env::args_os()),
    ));
    let start_logging = |format: LogFormat| {
        logging::init(&LogArgs { format });
        ocm_score_shell::cli::warn_deprecated(&deprecated);
    };
    let result = match cli.command {
        Command::Run(args) => {
            let cfg = RunConfig::from_args(args).unwrap_or_else(|e| exit_with_config_error(&e));
            start_logging(cfg.scoring.log_format);
            runtime().and_then(|rt| {
                let result = rt.block_on(run(cfg));
                rt.shutdown_timeout(Duration::from_secs(1));
                result
            })
        }
        Command::Once(args) => {
            let cfg = OnceConfig::from_args(args).unwrap_or_else(|e| exit_with_config_error(&e));
            start_logging(cfg.scoring.log_format);
            runtime().and_then(|rt| {
                let yaml = rt.block_on(ocm_score_agent::once::once(cfg)).context("once")?;
                print!("{yaml}");
                Ok(())
            })
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("error: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Reports a configuration error like clap does (same format, exit code 2).
fn exit_with_config_error(error: &ConfigError) -> ! {
    Cli::command()
        .error(clap::error::ErrorKind::ValueValidation, error.to_string())
        .exit()
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

/// `run` until SIGTERM or Ctrl-C (the shell's shutdown token).
async fn run(cfg: RunConfig) -> anyhow::Result<()> {
    let shutdown = ocm_score_shell::shutdown::on_signals();
    ocm_score_agent::run::run(cfg, shutdown).await.context("run")
}
