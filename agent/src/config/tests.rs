//! The configuration through the agent's real command line.

use super::*;
use crate::cli::{Cli, Command};
use crate::scores::Normalization;
use clap::Parser;
use ocm_score_tests::support::TempDir;
use std::time::Duration;

fn run(args: &[&str]) -> Result<RunConfig, ConfigError> {
    let mut argv = vec!["ocm-score-agent", "run"];
    argv.extend_from_slice(args);
    match Cli::try_parse_from(argv).expect("clap parses").command {
        Command::Run(args) => RunConfig::from_args(args),
        Command::Once(_) => unreachable!("run was given"),
    }
}

fn once(args: &[&str]) -> Result<OnceConfig, ConfigError> {
    let mut argv = vec!["ocm-score-agent", "once"];
    argv.extend_from_slice(args);
    match Cli::try_parse_from(argv).expect("clap parses").command {
        Command::Once(args) => OnceConfig::from_args(args),
        Command::Run(_) => unreachable!("once was given"),
    }
}

fn hub_dir(cluster_name: Option<&str>) -> TempDir {
    let dir = TempDir::new("config");
    std::fs::write(dir.path().join("kubeconfig"), "apiVersion: v1\nkind: Config\n").expect("write");
    if let Some(name) = cluster_name {
        std::fs::write(dir.path().join("cluster-name"), format!("{name}\n")).expect("write");
    }
    dir
}

#[test]
fn defaults_are_valid_and_publish_every_upstream_name() {
    let dir = hub_dir(Some("prod-1"));
    let hub = dir.path().to_str().expect("utf-8 path");
    let cfg = run(&["--hub-kubeconfig", hub]).expect("valid");
    assert_eq!(cfg.hub.cluster_name, "prod-1", "read from the secret directory");
    assert_eq!(cfg.hub.kubeconfig, dir.path().join("kubeconfig"));
    assert_eq!(cfg.scoring.scores.len(), 10);
    assert_eq!(cfg.refresh_interval, Duration::from_secs(60));
    assert_eq!(cfg.renew_margin, Duration::from_secs(96), "66s + 10s + 20s");
    assert_eq!(
        (cfg.scoring.validity, cfg.renew_every),
        (Duration::from_secs(97), 1),
        "the margin and a second for rounding"
    );
    let saving = run(&["--hub-kubeconfig", hub, "--renew-every=2"]).expect("valid");
    assert_eq!(
        saving.scoring.validity,
        Duration::from_secs(163),
        "2 × 66s + 30s + 1s"
    );
    let explicit = run(&["--hub-kubeconfig", hub, "--validity=3m"]).expect("valid");
    assert_eq!(explicit.scoring.validity, Duration::from_secs(180));
    assert_eq!(
        once(&["--source=host"]).expect("valid").scoring.validity,
        Duration::from_secs(180),
        "once keeps its own default"
    );
    assert_eq!(cfg.shapes_recheck, Duration::from_secs(180));
    let lease = cfg.lease.expect("lease on by default");
    assert_eq!(
        (lease.name.as_str(), lease.namespace.as_str()),
        ("resource-usage-collect", "open-cluster-management-agent-addon")
    );
}

/// Worst case timing against the publisher's decision: every refresh comes as late as the jitter
/// allows, and the cycle that renews spends its whole --api-timeout reading the managed cluster and
/// its whole --hub-timeout writing. The new validUntil must still land before the old one passes.
#[test]
fn the_renewal_margin_lets_no_score_expire_while_sources_and_hub_answer_within_their_timeouts() {
    use crate::publish::{Decision, WritePolicy, decide};
    use crate::scores::ScoreValue;
    use jiff::{SignedDuration, Timestamp};
    let dir = hub_dir(Some("prod-1"));
    let hub = dir.path().to_str().expect("utf-8 path");
    for flags in [
        &[][..],
        &["--renew-every=2"][..],
        &["--renew-every=5", "--jitter=0.5", "--api-timeout=1s"][..],
        &["--refresh-interval=30s", "--jitter=0.5", "--validity=2m"][..],
        &[
            "--refresh-interval=1s",
            "--debounce=200ms",
            "--min-write-interval=1s",
            "--validity=12s",
            "--api-timeout=1s",
            "--hub-timeout=2s",
        ][..],
    ] {
        let mut args = vec!["--hub-kubeconfig", hub];
        args.extend_from_slice(flags);
        let cfg = run(&args).expect("valid");
        let policy = WritePolicy {
            validity: cfg.scoring.validity,
            step: i32::from(cfg.score_step),
            min_write_interval: cfg.min_write_interval,
        };
        let scores = vec![ScoreValue {
            name: "cpuAvailable".into(),
            value: 0,
            free: None,
            capacity: None,
        }];
        let late_tick =
            SignedDuration::try_from(cfg.refresh_interval.mul_f64(1.0 + cfg.jitter)).expect("fits");
        let slow = |d: Duration| SignedDuration::try_from(d).expect("fits");
        let start = Timestamp::from_second(1_700_000_000).expect("valid");
        let mut last = crate::publish::Published {
            scores: [("cpuAvailable".to_owned(), 0)].into(),
            valid_until: Some(crate::publish::valid_until(start, cfg.scoring.validity)),
            healthy: true,
            shapes: None,
            written_at: Some(start),
        };
        let mut cycle_start = start;
        for _ in 0..100 {
            cycle_start += late_tick;
            // The decision is taken once the sources have been read.
            let decided_at = cycle_start + slow(cfg.scoring.api_timeout);
            // The next cycle comes as late as the jitter allows and reads and writes as slowly.
            let renew_by = cycle_start + late_tick + slow(cfg.scoring.api_timeout + cfg.scoring.hub_timeout);
            if let Decision::Write(_) = decide(Some(&last), &scores, None, decided_at, renew_by, &policy) {
                let landed = decided_at + slow(cfg.scoring.hub_timeout);
                let old = last.valid_until.expect("set");
                assert!(landed < old, "{flags:?}: renewal landed at {landed}, after {old}");
                last.valid_until = Some(crate::publish::valid_until(decided_at, cfg.scoring.validity));
                last.written_at = Some(decided_at);
            }
        }
    }
}

#[test]
fn cross_flag_errors_name_flag_and_value() {
    let dir = hub_dir(Some("prod-1"));
    let hub = dir.path().to_str().expect("utf-8 path");
    let err = |args: &[&str]| {
        let mut all = vec!["--hub-kubeconfig", hub];
        all.extend_from_slice(args);
        run(&all).expect_err("invalid")
    };
    let e = err(&["--validity", "3m", "--renew-every", "2"]);
    assert_eq!((e.flag, e.value.as_str()), ("--renew-every", "2"));
    let e = err(&["--refresh-interval", "1h", "--renew-every", "30"]);
    assert_eq!((e.flag, e.value.as_str()), ("--renew-every", "30"));
    assert!(e.reason.contains("at most 24h"), "{e}");
    let e = err(&["--validity", "60s"]);
    assert_eq!((e.flag, e.value.as_str()), ("--validity", "1m"));
    assert!(
        e.to_string()
            .starts_with("invalid value '1m' for '--validity': must exceed"),
        "{e}"
    );
    assert_eq!(err(&["--jitter", "0.9"]).flag, "--jitter");
    assert_eq!(err(&["--debounce", "2m"]).flag, "--debounce");
    assert_eq!(err(&["--source", "kubelet"]).flag, "--source");
    assert_eq!(err(&["--source", "host,host"]).flag, "--source");
    let e = err(&["--normalize", "gpuAvailable=absolute:0:8"]);
    assert_eq!(
        (e.flag, e.value.as_str()),
        ("--normalize", "gpuAvailable=absolute:0:8")
    );
    assert!(
        e.reason.contains("gpuClusterAvailable"),
        "lists the known names: {e}"
    );
    assert_eq!(err(&["--scores", "gpuAvailable"]).value, "gpuAvailable");
    assert_eq!(err(&["--cluster-name", "Prod_1"]).flag, "--cluster-name");
    assert_eq!(err(&["--addon-namespace", "Bad"]).flag, "--addon-namespace");
    let e = err(&["--shapes-recheck-interval", "500ms"]);
    assert_eq!((e.flag, e.value.as_str()), ("--shapes-recheck-interval", "500ms"));
    assert_eq!(
        err(&["--extended-resource", "a.io/x=cpu"]).flag,
        "--extended-resource"
    );
    assert_eq!(
        err(&["--managed-kubeconfig", "/nonexistent/kubeconfig"]).flag,
        "--managed-kubeconfig"
    );

    let no_name = hub_dir(None);
    let e = run(&["--hub-kubeconfig", no_name.path().to_str().expect("utf-8")]).expect_err("no cluster name");
    assert_eq!(e.flag, "--cluster-name");
    let e = run(&["--cluster-name", "c1"]).expect_err("no hub");
    assert_eq!(e.flag, "--hub-kubeconfig");
    let e = run(&["--hub-kubeconfig", "/nonexistent"]).expect_err("missing");
    assert_eq!((e.flag, e.value.as_str()), ("--hub-kubeconfig", "/nonexistent"));
}

#[test]
fn once_needs_no_hub_unless_publishing() {
    let cfg = once(&["--source", "host"]).expect("valid");
    assert!(cfg.publish.is_none());
    assert!(cfg.scoring.sources.host && !cfg.scoring.sources.cluster);
    assert_eq!(
        once(&["--source", "host", "--publish"])
            .expect_err("needs hub")
            .flag,
        "--cluster-name"
    );
}

#[test]
fn scores_can_be_selected_renormalized_and_extended() {
    let cfg = once(&[
        "--source=host",
        "--extended-resource=amd.com/gpu",
        "--normalize=cpuNodeAvailable=percent:10:90,amdGpuClusterAvailable=absolute:0:4",
        "--scores=cpuNodeAvailable,amdGpuClusterAvailable",
    ])
    .expect("valid");
    let defs = &cfg.scoring.scores;
    assert_eq!(defs.len(), 2);
    assert_eq!(
        defs[0].normalization,
        Normalization::Percent { min: 10.0, max: 90.0 }
    );
    assert_eq!(defs[1].name, "amdGpuClusterAvailable");
    assert_eq!(
        defs[1].normalization,
        Normalization::Absolute { min: 0.0, max: 4.0 }
    );
    assert_eq!(cfg.scoring.resources.name(defs[1].resource), "amd.com/gpu");
}

#[test]
fn shapes_come_from_a_file_only_with_the_cluster_source_and_a_bad_file_names_the_flag() {
    let dir = TempDir::new("shapes");
    let file = dir.path().join("shapes.yaml");
    std::fs::write(&file, "- {kind: WorkloadShape, metadata: {name: a}, spec: {}}\n").expect("write");
    let path = file.to_str().expect("utf-8 path");
    let shapes = format!("--shapes={path}");
    let cfg = once(&[&shapes, "--deduct-pending=false"]).expect("valid");
    assert!(!cfg.scoring.fits.deduct_pending);
    assert!(
        matches!(&cfg.scoring.shapes, crate::shapes::ShapeSource::File { shapes, .. } if shapes.len() == 1)
    );
    let e = once(&["--source=host", &shapes]).expect_err("needs the cluster source");
    assert_eq!((e.flag, e.value.as_str()), ("--shapes", path));
    let e = once(&["--shapes=/nonexistent/shapes.yaml"]).expect_err("no such file");
    assert_eq!(e.flag, "--shapes");
    std::fs::write(&file, "a: [").expect("write");
    assert_eq!(once(&[&shapes]).expect_err("not YAML").flag, "--shapes");
    assert_eq!(
        once(&["--source=host"]).expect("valid").scoring.shapes,
        crate::shapes::ShapeSource::None,
        "no cluster source, no shapes"
    );
}
