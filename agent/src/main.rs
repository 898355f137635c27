//! `ocm-score-agent`: parse and validate the command line (bad values exit 2 naming the flag), set up
//! logging and the runtime, then hand over to `run` or `once`.

use anyhow::Context;
use clap::{CommandFactory, Parser};
use ocm_score_agent::cli::{Cli, Command, LogFormat, with_default_subcommand};
use ocm_score_agent::config::{ConfigError, OnceConfig, RunConfig};
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let cli = Cli::parse_from(with_default_subcommand(std::env::args_os()));
    let result = match cli.command {
        Command::Run(args) => {
            let cfg = RunConfig::from_args(args).unwrap_or_else(|e| exit_with_config_error(&e));
            init_logging(cfg.scoring.log_format);
            runtime().and_then(|rt| {
                let result = rt.block_on(run(cfg));
                rt.shutdown_timeout(Duration::from_secs(1));
                result
            })
        }
        Command::Once(args) => {
            let cfg = OnceConfig::from_args(args).unwrap_or_else(|e| exit_with_config_error(&e));
            init_logging(cfg.scoring.log_format);
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

async fn run(cfg: RunConfig) -> anyhow::Result<()> {
    let (stop, shutdown) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("termination signal received");
        let _ = stop.send(true);
    });
    ocm_score_agent::run::run(cfg, shutdown).await.context("run")
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops the agent");
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Structured logs on stderr (stdout is reserved for `once`'s YAML); level from RUST_LOG, default info.
/// kube's client logs every failed request at ERROR; the agent logs the same failure with context,
/// so that line is off unless RUST_LOG asks for it.
fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube_client::client::builder=off"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    match format {
        LogFormat::Json => builder.json().init(),
        LogFormat::Text => builder.init(),
    }
}
