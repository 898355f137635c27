//! The `ocm-score-agent` binary as a process, with no cluster at all: `once --source host` prints an
//! AddOnPlacementScore that the upstream CRD accepts, after comments explaining its normalization;
//! bad configuration exits 2 naming the flag; `run` keeps going while the hub is unreachable and stops
//! within the 30 s grace period Kubernetes gives a pod after SIGTERM.

use ocm_score_api::AddOnPlacementScore;
use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const AGENT: &str = env!("CARGO_BIN_EXE_ocm-score-agent");
/// The schema of OCM's AddOnPlacementScore CRD (from the pinned Go module, see `ocm_api`).
fn aps_schema() -> Value {
    let crds = ocm_score_kube_double::crd::upstream_crds().unwrap_or_else(|e| panic!("{e}"));
    let crd = crds
        .iter()
        .find(|c| c.kind == "AddOnPlacementScore")
        .expect("OCM's CRDs include AddOnPlacementScore");
    crd.raw["spec"]["versions"][0]["schema"]["openAPIV3Schema"].clone()
}

#[test]
fn once_source_host_prints_an_object_the_upstream_crd_accepts() {
    let out = Command::new(AGENT)
        .args(["once", "--source", "host"])
        .output()
        .expect("runs");
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let yaml = String::from_utf8(out.stdout).expect("utf-8");

    // Comment lines before the object say what each score is normalized against and how to change
    // it: a small machine scores near -100 against the default bounds, and should not wonder why.
    let comments: Vec<&str> = yaml.lines().take_while(|l| l.starts_with('#')).collect();
    let cpu = comments
        .iter()
        .find(|l| l.starts_with("# cpuNodeAvailable "))
        .unwrap_or_else(|| panic!("no cpuNodeAvailable line:\n{yaml}"));
    assert!(
        cpu.ends_with("absolute:0:100 (0 cores → -100, 100 cores → 100)"),
        "{cpu}"
    );
    assert!(
        comments
            .iter()
            .any(|l| l.contains("--normalize SCORE=absolute:MIN:MAX")),
        "{yaml}"
    );

    let object: Value = serde_norway::from_str(&yaml).expect("stdout is YAML");
    let validator = jsonschema::validator_for(&aps_schema()).expect("schema compiles");
    let errors: Vec<String> = validator.iter_errors(&object).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "{errors:?}\n{yaml}");

    // The validator is not vacuous: the same object with a score out of range is rejected.
    let mut broken = object.clone();
    broken["status"]["scores"][0]["value"] = 101.into();
    assert!(!validator.is_valid(&broken));

    let score: AddOnPlacementScore = serde_norway::from_str(&yaml).expect("typed");
    assert_eq!(score.metadata.name.as_deref(), Some("resource-usage-score"));
    let status = score.status.expect("status");
    let names: Vec<&str> = status.scores.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "cpuNodeAvailable",
            "cpuClusterAvailable",
            "memNodeAvailable",
            "memClusterAvailable",
            "gpuNodeAvailable",
            "gpuClusterAvailable",
            "tpuNodeAvailable",
            "tpuClusterAvailable",
            "cpuAvailable",
            "memAvailable"
        ]
    );
    assert!(status.scores.iter().all(|s| (-100..=100).contains(&s.value)));
    assert_eq!(
        status.score("gpuNodeAvailable"),
        Some(-100),
        "the host source cannot see GPUs"
    );
    let valid_until = status.valid_until.expect("validUntil").0;
    let ahead = valid_until.as_second() - jiff::Timestamp::now().as_second();
    assert!(
        (170..=181).contains(&ahead),
        "validUntil {ahead}s ahead, expected 3 minutes"
    );
    let condition = &status.conditions[0];
    assert_eq!(
        (condition.type_.as_str(), condition.status.as_str()),
        ("AddOnPlacementScoreUpdated", "True")
    );
    assert!(condition.message.starts_with("host: "), "{}", condition.message);
}

#[test]
fn bad_configuration_exits_2_naming_the_flag_and_value() {
    let cases: &[(&[&str], &str)] = &[
        (&["once", "--source", "moon"], "moon"),
        (&["once", "--source", "host", "--validity", "soon"], "--validity"),
        (
            &[
                "once",
                "--source",
                "host",
                "--normalize",
                "cpuNodeAvailable=absolute:9:1",
            ],
            "--normalize",
        ),
        (
            &["once", "--source", "host", "--scores", "gpuAvailable"],
            "gpuAvailable",
        ),
        (
            &["run", "--source", "host", "--cluster-name", "c1"],
            "--hub-kubeconfig",
        ),
        (
            &["run", "--source", "host", "--hub-kubeconfig", "/nonexistent/dir"],
            "/nonexistent/dir",
        ),
    ];
    for (args, named) in cases {
        let out = Command::new(AGENT).args(*args).output().expect("runs");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(named), "{args:?} should name {named}: {stderr}");
    }
}

/// A hub kubeconfig pointing at a port nothing listens on.
fn unreachable_hub() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ocm-score-agent-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    std::fs::write(dir.join("cluster-name"), "edge-1\n").expect("write");
    std::fs::write(
        dir.join("kubeconfig"),
        "apiVersion: v1\nkind: Config\nclusters:\n- name: hub\n  cluster: {server: 'http://127.0.0.1:9'}\n\
         contexts:\n- name: c\n  context: {cluster: hub, user: u, namespace: configuration}\ncurrent-context: c\n\
         users:\n- name: u\n  user: {token: not-a-real-token}\n",
    )
    .expect("write");
    dir
}

fn http_get(port: u16, path: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .expect("write");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("read");
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (
        status,
        response.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned(),
    )
}

fn metric(body: &str, line_prefix: &str) -> f64 {
    body.lines()
        .find_map(|l| l.strip_prefix(line_prefix))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0.0)
}

#[test]
fn run_survives_an_unreachable_hub_and_stops_promptly_on_sigterm() {
    let hub = unreachable_hub();
    let mut child = Command::new(AGENT)
        .args([
            "--source=host",
            "--lease=false",
            "--refresh-interval=2s",
            "--debounce=1s",
            "--validity=1m",
            // The deprecated spelling of --metrics-bind-address: still works, with a warning naming
            // the release that drops it.
            "--metrics-addr=127.0.0.1:0",
            "--log-format=json",
        ])
        .arg("--hub-kubeconfig")
        .arg(&hub)
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .expect("starts");

    // The bound port is in the first structured log line that carries `addr`.
    let (lines_tx, lines_rx) = mpsc::channel::<String>();
    let stderr = child.stderr.take().expect("stderr");
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    // Only a bound on a hang, generous for a loaded machine.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut port = None;
    let mut deprecation_warned = false;
    while port.is_none() && Instant::now() < deadline {
        let Ok(line) = lines_rx.recv_timeout(Duration::from_millis(200)) else {
            continue;
        };
        let Ok(log) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        deprecation_warned |= log["level"] == "WARN"
            && log["fields"]["message"].as_str().is_some_and(|m| {
                m.contains("--metrics-addr")
                    && m.contains("--metrics-bind-address")
                    && m.contains(&format!("ocm-score {}", ocm_score_shell::cli::REMOVED_IN))
            });
        port = log["fields"]["addr"]
            .as_str()
            .and_then(|a| a.rsplit(':').next())
            .and_then(|p| p.parse::<u16>().ok());
    }
    let port = port.expect("the agent logs its metrics address");
    assert!(
        deprecation_warned,
        "the old flag name is warned about before serving"
    );

    // Hub writes fail, yet the agent keeps computing and stays healthy (but not ready).
    let mut failed = 0.0;
    while failed < 2.0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(300));
        failed = metric(
            &http_get(port, "/metrics").1,
            "ocm_score_agent_hub_writes_total{result=\"failed\"} ",
        );
    }
    assert!(failed >= 2.0, "hub writes were retried ({failed})");
    let body = http_get(port, "/metrics").1;
    assert!(
        metric(
            &body,
            "ocm_score_agent_capacity{resource=\"cpu\",scope=\"cluster\"} "
        ) >= 1.0,
        "{body}"
    );
    assert_eq!(http_get(port, "/healthz").0, 200);
    assert_eq!(http_get(port, "/readyz").0, 503, "no hub write has succeeded");
    assert!(child.try_wait().expect("poll").is_none(), "still running");

    let stopped_at = Instant::now();
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill runs");
    assert!(status.success());
    let exit = loop {
        if let Some(exit) = child.try_wait().expect("poll") {
            break exit;
        }
        assert!(
            stopped_at.elapsed() < Duration::from_secs(30),
            "did not stop within the 30 s grace period of SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(exit.success(), "clean exit: {exit:?}");
    let _ = std::fs::remove_dir_all(hub);
}
