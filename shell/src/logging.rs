//! Logging setup, the same for every mode: `tracing` events on stderr (stdout is reserved for what a
//! command prints, such as `once`'s YAML), as text or JSON (`--log-format`), level from `RUST_LOG`
//! (default `info`).

use clap::{Args, ValueEnum};

#[derive(ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    #[default]
    Text,
    Json,
}

/// The logging flags every mode takes (global: accepted before or after a subcommand).
#[derive(Args, Debug, Clone, Default, PartialEq, Eq)]
pub struct LogArgs {
    /// Log format on stderr.
    #[arg(long = "log-format", env = "OCM_SCORE_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    pub format: LogFormat,
}

/// kube's client logs every failed request at ERROR; our modes log the same failure with context,
/// so that line is off unless RUST_LOG asks for it.
const DEFAULT_FILTER: &str = "info,kube_client::client::builder=off";

/// Installs the global subscriber. A second call (tests running several modes in one process) keeps
/// the first subscriber.
pub fn init(args: &LogArgs) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(DEFAULT_FILTER));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    let _ = match args.format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
