//! `control-plane`: a real OCM hub and managed clusters on 127.0.0.1, for tests and for people.
//!
//! `build` compiles the upstream Go components once (cached under `~/.cache/ocm-score/control-plane/`),
//! and with the same Go build cache `tests/ocm-bench/`'s CEL recorder and OCM scheduler benchmark;
//! `up` starts everything, writes kubeconfigs, prints `ready`, and runs until SIGINT/SIGTERM,
//! then stops every process it started.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};
use ocm_score_control_plane::{ControlPlane, go_components};
use tokio::signal::unix::{SignalKind, signal};

mod demo;

#[derive(Parser, Debug)]
#[command(
    about = "A real OCM control plane (kube-apiserver, etcd, kube-controller-manager, OCM hub and klusterlets) as local processes"
)]
struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Compile the Go components (Kubernetes and OCM at the versions pinned in tests/control-plane/go.mod)
    /// and tests/ocm-bench's commands (the same pins), cached.
    Build,
    /// Start the control plane and run until SIGINT/SIGTERM.
    Up {
        /// Directory for kubeconfigs (hub.kubeconfig, <cluster>.kubeconfig), logs and data; created if missing.
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// Managed clusters: cluster1 is the hub itself, cluster2.. get their own API server.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u16).range(1..=50))]
        clusters: u16,
        /// Do not run OCM's own addon-manager on the hub.
        #[arg(long)]
        without_ocm_addon_manager: bool,
        /// Seconds start-up may take before it fails naming what it waited for.
        #[arg(long, default_value_t = 240)]
        timeout: u64,
        /// No nodes: no kubelet, containerd or kube-proxy, so Deployments get no pods (for a
        /// machine that cannot run containers).
        #[arg(long)]
        without_nodes: bool,
    },
    /// Build the ocm-score image (what the Dockerfile builds) as an OCI archive from this build's
    /// binaries, for `docker load`, `podman load`, `kind load image-archive` or `ctr images import`.
    /// Run with `cargo run --release ...` for release binaries.
    Image {
        /// Where to write the archive.
        #[arg(long, value_name = "FILE", default_value = "target/ocm-score-image.tar")]
        out: PathBuf,
        /// Platforms to build it for, comma-separated (linux/amd64, linux/arm64); two make one
        /// archive of both (an OCI image index). A platform other than this machine's is
        /// cross-compiled with Debian's cross toolchain (gcc-aarch64-linux-gnu and
        /// libc6-dev-arm64-cross for arm64). Default: this machine's.
        #[arg(long, value_name = "OS/ARCH,...", value_delimiter = ',')]
        platforms: Vec<String>,
    },
    /// Start a hub with two clusters, install the add-on from manifests/hub, load one cluster,
    /// place the example Placements, print scores, OCM's decisions and simulate's explanation, stop.
    Demo {
        /// Keep kubeconfigs, logs and the snapshot here (default: a temp dir, removed at the end).
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// A fleet on one hub (docs/scale.md): `FLEET_CLUSTERS` simulated clusters whose agents run in
    /// this process through the agent's own loop, the add-on as shipped, Placements,
    /// TieredPlacements and explain requests; prints the hub's figures as markdown. Sizes from the
    /// environment: `FLEET_CLUSTERS` (1000), `FLEET_WINDOW_SECONDS` (600),
    /// `FLEET_CHANGE_PERCENT` (share of clusters whose score changes each minute; 1),
    /// `FLEET_PLACEMENTS` (20), `FLEET_TIERED_PLACEMENTS` (100), `FLEET_AFTER_RESTART_SECONDS` (120).
    Fleet {
        /// Keep kubeconfigs, logs and data here (default: a temp dir, removed at the end).
        #[arg(long, value_name = "DIR")]
        dir: PathBuf,
        /// The `ocm-score-hub` binary the hub's components run from (build it with
        /// `cargo build --release -p ocm-score-hub`); default: this build's.
        #[arg(long, value_name = "FILE")]
        hub_binary: Option<PathBuf>,
    },
}

fn env_number<T: std::str::FromStr>(name: &str, default: T) -> anyhow::Result<T> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .map_err(|_| anyhow::anyhow!("{name}={v:?} is not a number")),
        Err(_) => Ok(default),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,kube_client=off")),
        )
        .with_writer(std::io::stderr)
        .init();
    match run(Args::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("control-plane: {e}");
            ExitCode::FAILURE
        }
    }
}

async fn run(args: Args) -> anyhow::Result<()> {
    let progress = |line: &str| eprintln!("{line}");
    match args.command {
        Command::Build => {
            let (components, ocm_bench) = go_components::ensure_built_with_ocm_bench(&progress)?;
            println!("{}", components.root().display());
            println!("{}", ocm_bench.display());
            print!("{}", components.versions());
            Ok(())
        }
        Command::Image { out, platforms } => {
            use ocm_score_control_plane::image::{self, Platform};
            let platforms = if platforms.is_empty() {
                vec![Platform::host().ok_or_else(|| {
                    anyhow::anyhow!("this machine's architecture is not one the image is built for; name one with --platforms")
                })?]
            } else {
                platforms
                    .iter()
                    .map(|p| Platform::parse(p))
                    .collect::<Result<Vec<_>, _>>()?
            };
            let image = image::ocm_score_platforms_image(&platforms, &out)?;
            let path = image.path.display();
            println!("{path}");
            let names: Vec<String> = platforms.iter().map(Platform::to_string).collect();
            eprintln!(
                "{} for {} ({}, {:.1} MiB)",
                image.reference,
                names.join(", "),
                image.id,
                image.size as f64 / 1048576.0,
            );
            if let [_] = platforms.as_slice() {
                eprintln!(
                    "load it with `docker load -i {path}`, `kind load image-archive {path}` or `ctr -n k8s.io images import {path}`"
                );
            } else {
                // Only containerd-based loaders read the index; `docker load` without Docker's
                // containerd image store reads manifest.json, which holds the first platform.
                eprintln!(
                    "load one platform with `ctr -n k8s.io images import --platform {} {path}` (or `podman load -i {path}`: this machine's); `docker load -i {path}` loads {} unless Docker keeps its images in containerd",
                    names[names.len() - 1],
                    names[0]
                );
            }
            Ok(())
        }
        Command::Fleet { dir, hub_binary } => {
            use ocm_score_control_plane::addon::{HUB_NAMESPACE, workspace_binary};
            use ocm_score_control_plane::scale::{Fleet, fleet};
            use std::time::Duration;
            let fleet_size = Fleet {
                clusters: env_number("FLEET_CLUSTERS", 1000)?,
                window: Duration::from_secs(env_number("FLEET_WINDOW_SECONDS", 600)?),
                changes_per_minute: env_number("FLEET_CHANGE_PERCENT", 1.0)? / 100.0,
                placements: env_number("FLEET_PLACEMENTS", 20)?,
                tiered_placements: env_number("FLEET_TIERED_PLACEMENTS", 100)?,
                after_restart: Duration::from_secs(env_number("FLEET_AFTER_RESTART_SECONDS", 120)?),
                timeout: Duration::from_secs(1800),
                hub_binary: match hub_binary {
                    Some(path) => path,
                    None => workspace_binary("ocm-score-hub")?,
                },
            };
            std::fs::create_dir_all(&dir)?;
            let mut cp = ControlPlane::builder()
                .clusters(0)
                .audit_namespace(HUB_NAMESPACE)
                .dir(dir.join("control-plane"))
                .timeout(Duration::from_secs(600))
                .start_with_progress(&progress)
                .await?;
            let versions = cp.versions().to_owned();
            let work = dir.join("fleet");
            std::fs::create_dir_all(&work)?;
            let report = fleet(&mut cp, &work, &fleet_size, &progress).await;
            cp.stop();
            let report = report?;
            println!("{}", report.markdown(&versions));
            Ok(())
        }
        Command::Demo { dir } => {
            let mut interrupt = signal(SignalKind::interrupt())?;
            let mut terminate = signal(SignalKind::terminate())?;
            // Whatever has started is dropped, and so stopped, when the demo ends or is interrupted.
            tokio::select! {
                outcome = demo::run(dir, &progress) => outcome,
                _ = interrupt.recv() => anyhow::bail!("interrupted; stopped everything"),
                _ = terminate.recv() => anyhow::bail!("terminated; stopped everything"),
            }
        }
        Command::Up {
            dir,
            clusters,
            without_ocm_addon_manager,
            timeout,
            without_nodes,
        } => {
            let mut interrupt = signal(SignalKind::interrupt())?;
            let mut terminate = signal(SignalKind::terminate())?;
            let builder = ControlPlane::builder()
                .clusters(usize::from(clusters))
                .dir(&dir)
                .ocm_addon_manager(!without_ocm_addon_manager)
                .nodes(!without_nodes)
                .timeout(Duration::from_secs(timeout));
            // Start-up may itself be interrupted: the partly started control plane is dropped,
            // which stops what had started.
            let mut cp = tokio::select! {
                cp = builder.start_with_progress(&progress) => cp?,
                _ = interrupt.recv() => anyhow::bail!("interrupted during start-up; stopped everything"),
                _ = terminate.recv() => anyhow::bail!("terminated during start-up; stopped everything"),
            };
            eprintln!("{}", cp.versions().trim_end());
            eprintln!(
                "hub:       kubectl --kubeconfig {} get managedclusters",
                cp.hub_kubeconfig().display()
            );
            for name in cp.cluster_names() {
                eprintln!("{name}: {}", cp.kubeconfig(name).display());
            }
            eprintln!("logs:      {}", dir.join("logs").display());
            println!("ready");
            let mut health = tokio::time::interval(Duration::from_secs(2));
            let outcome = loop {
                tokio::select! {
                    _ = interrupt.recv() => break Ok(()),
                    _ = terminate.recv() => break Ok(()),
                    _ = health.tick() => {
                        if let Err(e) = cp.check_running() {
                            break Err(anyhow::anyhow!(e));
                        }
                    }
                }
            };
            eprintln!("stopping");
            cp.stop();
            outcome
        }
    }
}
