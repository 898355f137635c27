//! Scores expire on the hub's clock (issue 48, item 5). OCM's placement controller compares
//! `validUntil` with the hub's clock, so the agent measures how far its own clock is from the hub's
//! and stamps `validUntil` on the hub's.
//!
//! The real agent binary runs under Debian's `faketime` with its clock 5 minutes ahead of the hub
//! and, beside it, one 5 minutes behind, both writing to the real hub's API server (which runs on
//! this machine's clock, as this test does). For each, every write it makes carries a `validUntil`
//! one validity after the moment the write appeared on the hub, never 5 minutes off; its
//! `hub_clock_offset_seconds` metric shows the offset, and its log warns naming it.

use std::path::Path;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::Api;
use ocm_score_control_plane::addon::{dynamic, workspace_binary};
use ocm_score_control_plane::observe::scrape;
use ocm_score_control_plane::process::{Component, Tier};
use ocm_score_control_plane::{ControlPlane, free_port};
use serde_json::{Value, json};

const SHIFT_SECONDS: i64 = 300;
const REFRESH: &str = "10s";
/// The shortest validity the agent accepts at a 10 s refresh (see the fault tests).
const VALIDITY: SignedDuration = SignedDuration::from_secs(45);
/// How much earlier than one validity after its appearance a write's `validUntil` may be: the
/// agent stamps it before writing, the poll sees the write up to [`POLL`] later, and `validUntil` is
/// whole seconds from an offset known to within a second.
const EARLY: SignedDuration = SignedDuration::from_secs(4);
/// How much later: the rounding and the offset's uncertainty only.
const LATE: SignedDuration = SignedDuration::from_secs(1);
const POLL: Duration = Duration::from_millis(500);
const SCORE: &str = "resource-usage-score";
const WAIT: Duration = Duration::from_secs(180);

/// `faketime`'s path: CI installs Debian's package with the node packages (scripts/test.sh).
fn faketime() -> String {
    let found = std::process::Command::new("sh")
        .args(["-c", "command -v faketime"])
        .output()
        .expect("running sh");
    let path = String::from_utf8_lossy(&found.stdout).trim().to_owned();
    assert!(
        found.status.success() && !path.is_empty(),
        "faketime is not installed (Debian's `faketime` package; scripts/test.sh installs it)"
    );
    path
}

/// The agent for namespace `cluster`, its clock shifted by `shift_seconds` from the hub's.
fn start_shifted_agent(
    hub_kubeconfig: &Path,
    cluster: &str,
    shift_seconds: i64,
    log_dir: &Path,
) -> Component {
    let agent = workspace_binary("ocm-score-agent").expect("building the agent");
    let port = free_port().expect("a free port");
    let args: Vec<String> = [
        "-m".to_owned(),
        "-f".to_owned(),
        format!("{shift_seconds:+}s"),
        agent.display().to_string(),
        "run".to_owned(),
        "--source=host".to_owned(),
        "--lease=false".to_owned(),
        format!("--hub-kubeconfig={}", hub_kubeconfig.display()),
        format!("--cluster-name={cluster}"),
        format!("--refresh-interval={REFRESH}"),
        format!("--validity={}s", VALIDITY.as_secs()),
        format!("--metrics-bind-address=127.0.0.1:{port}"),
    ]
    .into();
    let env = [
        ("RUST_LOG", "info,kube=warn".to_owned()),
        ("NO_COLOR", "1".to_owned()),
    ];
    Component::spawn(
        &format!("agent-{cluster}"),
        Tier::Client,
        Path::new(&faketime()),
        &args,
        &env,
        log_dir,
    )
    .expect("starting the agent under faketime")
}

/// One write of the agent as the hub stored it.
#[derive(Debug, Clone, PartialEq)]
struct Write {
    resource_version: String,
    valid_until: Timestamp,
    /// When this test first saw it (the hub's clock: the same machine's).
    seen_at: Timestamp,
}

fn timestamp(value: &Value, what: &str) -> Timestamp {
    value
        .as_str()
        .unwrap_or_else(|| panic!("{what} is not a string: {value}"))
        .parse()
        .unwrap_or_else(|e| panic!("{what} {value}: {e}"))
}

/// The score object as JSON, if there is one; a failed read fails the test.
async fn score_object(scores: &Api<kube::api::DynamicObject>) -> Option<Value> {
    match scores.get_opt(SCORE).await {
        Ok(object) => Some(serde_json::to_value(object?).expect("object as JSON")),
        Err(e) => panic!("reading {SCORE}: {e}"),
    }
}

/// The agent's last write, once it has written scores (`None` before: no status yet).
fn last_write(object: &Value) -> Option<Write> {
    let valid_until = object.pointer("/status/validUntil")?;
    Some(Write {
        resource_version: object["metadata"]["resourceVersion"].as_str()?.to_owned(),
        valid_until: timestamp(valid_until, "status.validUntil"),
        seen_at: Timestamp::now(),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validity_counts_on_the_hubs_clock_whatever_the_clusters_clock_says() {
    let faketime = faketime();
    let cp = ControlPlane::builder()
        .clusters(0)
        .ocm_addon_manager(false)
        .start()
        .await
        .expect("control plane");
    let hub = cp.hub_client().await.expect("hub client");
    let namespaces: Api<Namespace> = Api::all(hub.clone());
    let cases = [("clock-ahead", SHIFT_SECONDS), ("clock-behind", -SHIFT_SECONDS)];
    for (cluster, _) in cases {
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": cluster}})).expect("namespace");
        namespaces
            .create(&Default::default(), &ns)
            .await
            .unwrap_or_else(|e| panic!("creating namespace {cluster}: {e}"));
    }
    // The shift is real: `date` under the same faketime is 5 minutes off.
    let shifted_date = std::process::Command::new(&faketime)
        .args(["-f", &format!("+{SHIFT_SECONDS}s"), "date", "+%s"])
        .output()
        .expect("faketime date");
    let shifted: i64 = String::from_utf8_lossy(&shifted_date.stdout)
        .trim()
        .parse()
        .expect("date +%s");
    assert!((shifted - Timestamp::now().as_second() - SHIFT_SECONDS).abs() <= 2);

    let agents: Vec<(&str, i64, Component)> = cases
        .iter()
        .map(|&(cluster, shift)| {
            (
                cluster,
                shift,
                start_shifted_agent(&cp.hub_kubeconfig(), cluster, shift, cp.dir()),
            )
        })
        .collect();

    for (cluster, shift, agent) in &agents {
        let scores = dynamic(
            &hub,
            "cluster.open-cluster-management.io",
            "v1alpha1",
            "AddOnPlacementScore",
            Some(cluster),
        )
        .await
        .expect("the AddOnPlacementScore API");
        // Two writes this loop sees happen (what it finds at first may be older than its first read).
        let mut found: Option<String> = None;
        let mut writes: Vec<Write> = Vec::new();
        let mut seen = None;
        let deadline = std::time::Instant::now() + WAIT;
        while writes.len() < 2 {
            assert!(
                std::time::Instant::now() < deadline,
                "{cluster}: {} write(s) within {WAIT:?}: {writes:?}\nthe object: {seen:#?}\nagent log:\n{}",
                writes.len(),
                agent.tail()
            );
            seen = score_object(&scores).await;
            let write = seen.as_ref().and_then(last_write);
            let version = write.as_ref().map(|w| w.resource_version.clone());
            if let Some(write) = write
                && found.is_some()
                && found != version
            {
                let now = Timestamp::now();
                assert!(
                    write.valid_until > now,
                    "{cluster} (clock {shift:+} s): validUntil {} has already passed on the hub ({now})",
                    write.valid_until
                );
                writes.push(write);
            }
            found = version.or(Some(String::new()));
            tokio::time::sleep(POLL).await;
        }
        for write in &writes {
            let ahead = write.valid_until.duration_since(write.seen_at);
            assert!(
                ahead >= VALIDITY - EARLY && ahead <= VALIDITY + LATE,
                "{cluster} (clock {shift:+} s): validUntil {} is {ahead:?} after the write appeared on the hub \
                 at {}, not the validity ({VALIDITY:?})",
                write.valid_until,
                write.seen_at
            );
        }

        let offset = scrape(agent)
            .await
            .and_then(|m| m.value("ocm_score_agent_hub_clock_offset_seconds", &[]))
            .unwrap_or_else(|| panic!("{cluster}: no hub_clock_offset_seconds"));
        assert!(
            (offset + *shift as f64).abs() <= 1.5,
            "{cluster}: hub clock offset {offset} s, the clock is shifted {shift:+} s"
        );
        let log = std::fs::read_to_string(agent.log_path()).expect("agent log");
        let way = if *shift > 0 { "ahead of" } else { "behind" };
        assert!(
            log.lines()
                .any(|l| l.contains("WARN") && l.contains(&format!("s {way} the hub's"))),
            "{cluster}: no warning naming the offset:\n{log}"
        );
    }
}
