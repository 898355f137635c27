//! `go-build`: compiles the Go modules the tests run, cached (see the library's docs).
//!
//!   go-build control-plane   # Kubernetes and OCM (tests/control-plane), then tests/ocm-bench
//!   go-build thanos          # Thanos (tests/thanos)
//!   go-build argocd          # Argo CD's ApplicationSet controller and CRDs (tests/argocd)
//!
//! Prints each build's directory and the versions built. Arguments are parsed by hand: a clap
//! dependency would cost this launcher, which exists to be compiled in seconds, most of its build.

use std::process::ExitCode;

use ocm_score_go_build::{Build, Error, argocd, control_plane, ensure_all_built, ocm_bench, thanos};

const USAGE: &str = "usage: go-build control-plane | thanos | argocd";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let progress = |line: &str| eprintln!("{line}");
    let built: Result<Vec<Build>, Error> = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        ["control-plane"] => ensure_all_built(&[control_plane::module(), ocm_bench::module()], &progress),
        ["thanos"] => ensure_all_built(&[thanos::module()], &progress),
        ["argocd"] => ensure_all_built(&[argocd::module()], &progress),
        ["-h" | "--help"] => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        _ => {
            eprintln!("go-build: expected one of `control-plane`, `thanos`, `argocd`, got {args:?}\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match built {
        Ok(builds) => {
            for build in &builds {
                println!("{}", build.root().display());
                print!("{}", build.versions());
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("go-build: {e}");
            ExitCode::FAILURE
        }
    }
}
