//! `kube-double`: the in-memory Kubernetes API server as a process, for people and end-to-end tests.
//!
//! Prints its URL as the first line of stdout, writes kubeconfigs, and serves until SIGINT/SIGTERM.

use anyhow::{Context, bail};
use clap::Parser;
use ocm_score_kube_double::{ApiServer, RequestMatch};
use std::{path::PathBuf, time::Duration};

#[derive(Parser, Debug)]
#[command(about = "In-memory Kubernetes API server for tests (see tests/README.md)")]
struct Args {
    /// Directory of CRD YAML files to serve (repeatable).
    #[arg(long = "crds", value_name = "DIR")]
    crds: Vec<PathBuf>,
    /// Also serve OCM's CRDs, from the open-cluster-management.io/api Go module that
    /// tests/control-plane/go.mod pins (needs Go; `bash scripts/test.sh` installs it).
    #[arg(long)]
    upstream_crds: bool,
    /// Serve only namespaces, RBAC (with --rbac) and the CRDs, not the other built-in kinds.
    #[arg(long)]
    no_builtin_kinds: bool,
    /// Authorize every request with RBAC (the admin identity bypasses it).
    #[arg(long)]
    rbac: bool,
    /// Port on 127.0.0.1 (0 picks a free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
    /// Write the admin kubeconfig here.
    #[arg(long, value_name = "FILE")]
    kubeconfig_out: Option<PathBuf>,
    /// Identity `user[:group1,group2]` to create; its kubeconfig goes to --kubeconfig-dir/<user>.kubeconfig.
    #[arg(long = "identity", value_name = "USER[:GROUPS]")]
    identities: Vec<String>,
    /// Where identity kubeconfigs are written (default: the directory of --kubeconfig-out, or .).
    #[arg(long, value_name = "DIR")]
    kubeconfig_dir: Option<PathBuf>,
    /// Static token file: `token,user,uid,"group1,group2"` per line.
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// YAML file or directory of objects to create at start (repeatable).
    #[arg(long = "objects", value_name = "PATH")]
    objects: Vec<PathBuf>,
    /// Fail requests: `verb=patch,resource=addonplacementscores/status,namespace=c1,code=503,count=5`
    /// (code 429 takes `retry-after=SECONDS`).
    #[arg(long = "fault", value_name = "SPEC")]
    faults: Vec<String>,
    /// Delay requests: `verb=list,resource=pods,ms=250`.
    #[arg(long = "latency", value_name = "SPEC")]
    latencies: Vec<String>,
    /// Events kept per resource for watch resumption; older resourceVersions get 410 Gone.
    #[arg(long, default_value_t = 10_000)]
    watch_window: usize,
    /// Seconds between watch bookmarks.
    #[arg(long, default_value_t = 5)]
    bookmark_seconds: u64,
}

/// Splits `key=value,...` into the request match and the numeric settings named in `settings`.
fn split_spec(spec: &str, settings: &[&str]) -> anyhow::Result<(RequestMatch, Vec<Option<u64>>)> {
    let mut matching = Vec::new();
    let mut values = vec![None; settings.len()];
    for part in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .with_context(|| format!("{spec:?}: expected key=value, got {part:?}"))?;
        match settings.iter().position(|s| *s == key) {
            Some(i) => {
                values[i] = Some(
                    value
                        .parse()
                        .with_context(|| format!("{spec:?}: {key} must be a number, got {value:?}"))?,
                )
            }
            None => matching.push(part),
        }
    }
    let matching = RequestMatch::parse(&matching.join(",")).map_err(|e| anyhow::anyhow!("{spec:?}: {e}"))?;
    Ok((matching, values))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let mut builder = ApiServer::builder()
        .rbac(args.rbac)
        .port(args.port)
        .watch_window(args.watch_window)
        .bookmark_interval(Duration::from_secs(args.bookmark_seconds.max(1)));
    if !args.no_builtin_kinds {
        builder = builder.builtin_kinds();
    }
    if args.upstream_crds {
        builder = builder.upstream_crds();
    }
    for dir in &args.crds {
        builder = builder.crds_from_dir(dir);
    }
    for path in &args.objects {
        builder = builder.objects_from(path);
    }
    if let Some(path) = &args.token_file {
        builder = builder.token_file(path);
    }
    let server = builder.start().await.context("starting the API server")?;
    for spec in &args.faults {
        let (matching, values) = split_spec(spec, &["code", "count", "retry-after"])?;
        let Some(code) = values[0] else {
            bail!("--fault {spec:?}: code=N is required")
        };
        let count = values[1].unwrap_or(1) as usize;
        match (code, values[2]) {
            (429, retry) => server.faults().throttle_next(count, matching, retry.unwrap_or(1)),
            (code, None) if (100..600).contains(&code) => {
                server.faults().fail_next(count, matching, code as u16)
            }
            (_, Some(_)) => bail!("--fault {spec:?}: retry-after only goes with code=429"),
            (code, None) => bail!("--fault {spec:?}: code {code} is not an HTTP status code"),
        }
    }
    for spec in &args.latencies {
        let (matching, values) = split_spec(spec, &["ms"])?;
        let Some(ms) = values[0] else {
            bail!("--latency {spec:?}: ms=N is required")
        };
        server.faults().add_latency(matching, Duration::from_millis(ms));
    }
    println!("{}", server.url());
    if let Some(path) = &args.kubeconfig_out {
        server
            .write_kubeconfig(server.admin(), path)
            .with_context(|| format!("writing {}", path.display()))?;
        tracing::info!(path = %path.display(), user = %server.admin().user, "wrote kubeconfig");
    }
    let dir = args
        .kubeconfig_dir
        .clone()
        .or_else(|| {
            args.kubeconfig_out
                .as_ref()
                .and_then(|p| p.parent().map(PathBuf::from))
        })
        .unwrap_or_else(|| PathBuf::from("."));
    for spec in &args.identities {
        let (user, groups) = spec.split_once(':').unwrap_or((spec, ""));
        if user.is_empty() {
            bail!("--identity {spec:?}: the user name is empty");
        }
        let groups: Vec<&str> = groups.split(',').filter(|g| !g.is_empty()).collect();
        let identity = server.identity(user, &groups);
        let file_name: String = user
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let path = dir.join(format!("{file_name}.kubeconfig"));
        server
            .write_kubeconfig(&identity, &path)
            .with_context(|| format!("writing {}", path.display()))?;
        tracing::info!(path = %path.display(), user, "wrote kubeconfig");
    }
    tracing::info!(url = %server.url(), rbac = args.rbac, "serving");
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = terminate.recv() => {}
    }
    tracing::info!("shutting down");
    server.shutdown().await;
    Ok(())
}
