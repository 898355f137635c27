//! `thanos`: compiles Thanos from the Go module in `tests/thanos/` (cached under `~/.cache/ocm-score/thanos/`)
//! for the Thanos scorer's tests, and prints where the binary is.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use ocm_score_tests::thanos;

#[derive(Parser, Debug)]
#[command(about = "Thanos for the tests, built from the version pinned in tests/thanos/go.mod")]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Compile `thanos` (cached); prints the binary's path and the versions built.
    Build,
}

fn main() -> ExitCode {
    let Args {
        command: Command::Build,
    } = Args::parse();
    match thanos::ensure_built(&|line| eprintln!("{line}")) {
        Ok(build) => {
            println!("{}", build.bin().display());
            print!("{}", build.versions());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("thanos: {e}");
            ExitCode::FAILURE
        }
    }
}
