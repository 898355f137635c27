//! A soak on the real control plane (issue 15): the add-on installed from `manifests/hub`, our
//! add-on manager and the agent running as their Deployments' containers, and pods created and
//! deleted on the managed cluster all along, so the agent keeps recomputing, writing and renewing.
//!
//! It runs for `OCM_SCORE_SOAK_SECONDS`: by default 300, CI's size (thirty refreshes, a minute per
//! fifth), and `OCM_SCORE_SOAK_SECONDS=3600` for the hour documented in tests/README.md. The first
//! fifth is warm-up (caches filled, allocator arenas grown, connection pools opened). Then, for the
//! agent and the manager:
//! - resident memory is flat: the mean of the last fifth is within 10 % of the second fifth's;
//! - open connections, file descriptors and threads do not grow: the least of the last fifth is no
//!   more than the most of the second (a leak grows past any earlier peak; a pool that opens and
//!   closes connections does not);
//! - their error counters stay at zero, they never exit, and every published score keeps the
//!   contract (in -100..100, a `validUntil` never further ahead than the validity).

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, ListParams};
use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::{
    add_nodes, add_pod, install_with_timing_and_start_manager, score, start_agent, wait_agent_installed,
};
use ocm_score_control_plane::observe::{ProcessFigures, ScoreSampler, process_figures, scrape};
use ocm_score_tests::support::{Exposition, TempDir, eventually};

const CLUSTER: &str = "cluster1";
/// Short enough that the soak sees dozens of renewals; the validity is the shortest the agent
/// accepts with it (see control_plane_faults.rs).
const REFRESH: Duration = Duration::from_secs(10);
const VALIDITY: Duration = Duration::from_secs(45);
const WAIT: Duration = Duration::from_secs(240);
/// How often the figures are read, and a pod created and another deleted.
const SAMPLE_EVERY: Duration = Duration::from_secs(5);
const CHURN_EVERY: Duration = Duration::from_secs(2);
/// Pods kept on the cluster while churning: one created and the oldest deleted each turn.
const PODS_KEPT: usize = 6;

fn soak_length() -> Duration {
    let seconds = std::env::var("OCM_SCORE_SOAK_SECONDS")
        .ok()
        .map(|v| {
            v.parse::<u64>()
                .unwrap_or_else(|_| panic!("OCM_SCORE_SOAK_SECONDS={v:?} is not a number of seconds"))
        })
        .unwrap_or(300);
    assert!(
        seconds >= 100,
        "OCM_SCORE_SOAK_SECONDS={seconds}: a soak shorter than 100 s has no steady state to compare"
    );
    Duration::from_secs(seconds)
}

/// One reading of a process.
#[derive(Clone, Copy, Debug)]
struct Sample {
    at: Duration,
    figures: ProcessFigures,
}

/// The error counters of each of our processes, summed over their labels; all must stay zero.
const ERROR_COUNTERS: [(&str, &str); 5] = [
    ("agent", "ocm_score_agent_hub_writes_total{result=failed}"),
    ("agent", "ocm_score_agent_source_failures_total"),
    ("agent", "ocm_score_agent_watch_errors_total"),
    ("agent", "ocm_score_agent_invalid_objects"),
    ("manager", "ocm_score_addon_reconcile_errors_total"),
];

/// A counter of `ERROR_COUNTERS` in an exposition: `name` or `name{label=value}`, summed over
/// every sample that matches.
fn error_count(metrics: &Exposition, counter: &str) -> f64 {
    let (name, label) = match counter.split_once('{') {
        Some((name, rest)) => (name, rest.trim_end_matches('}').split_once('=')),
        None => (counter, None),
    };
    metrics.sum(name, label.as_slice())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_soak_with_pod_churn_keeps_memory_connections_and_errors_flat() {
    let length = soak_length();
    let cp = ControlPlane::builder()
        .clusters(1)
        .start_with_progress(&|l| eprintln!("{l}"))
        .await
        .unwrap_or_else(|e| panic!("the control plane did not start: {e}"));
    let hub = cp.hub_client().await.expect("hub client");
    let dir = TempDir::new("soak");
    let (mut manager, refresh_arg) =
        install_with_timing_and_start_manager(&cp, REFRESH, VALIDITY, dir.path())
            .await
            .expect("the add-on manager starts");
    wait_agent_installed(&cp, CLUSTER, Some(&refresh_arg), WAIT, || manager.tail()).await;
    let managed = cp.cluster_client(CLUSTER).await.expect("managed client");
    add_nodes(&managed, CLUSTER, 2).await.expect("nodes");
    let mut agent = start_agent(&cp, CLUSTER, dir.path()).await.expect("agent starts");
    eventually(
        "the first score",
        WAIT,
        || agent.tail(),
        || {
            let hub = hub.clone();
            async move { score(&hub, CLUSTER, "cpuAvailable").await }
        },
    )
    .await;

    let sampler = ScoreSampler::start(hub.clone(), VALIDITY);
    let pods: Api<Pod> = Api::namespaced(managed.clone(), "load");
    let started = Instant::now();
    let mut next_sample = started;
    let mut next_churn = started;
    let mut agent_samples: Vec<Sample> = Vec::new();
    let mut manager_samples: Vec<Sample> = Vec::new();
    let mut churned = 0usize;
    eprintln!("soaking for {} s", length.as_secs());
    while started.elapsed() < length {
        let now = Instant::now();
        if now >= next_churn {
            next_churn += CHURN_EVERY;
            // Requests that move the cpu scores by more than the step now and then.
            let cpu = ["250m", "1", "500m", "2"][churned % 4];
            add_pod(&managed, CLUSTER, churned % 2, cpu, "256Mi")
                .await
                .expect("a churn pod");
            churned += 1;
            let mut listed = pods.list(&ListParams::default()).await.expect("pods").items;
            listed.sort_by_key(|p| p.metadata.creation_timestamp.clone().map(|t| t.0));
            for old in listed.iter().take(listed.len().saturating_sub(PODS_KEPT)) {
                let name = old.metadata.name.clone().unwrap_or_default();
                pods.delete(&name, &DeleteParams::default().grace_period(0))
                    .await
                    .expect("deleting a churn pod");
            }
        }
        if now >= next_sample {
            next_sample += SAMPLE_EVERY;
            for (component, samples) in [
                (&mut agent, &mut agent_samples),
                (&mut manager, &mut manager_samples),
            ] {
                assert!(
                    component.exit_status().is_none(),
                    "{} exited during the soak:\n{}",
                    component.name(),
                    component.tail()
                );
                let figures = process_figures(component.pid())
                    .unwrap_or_else(|| panic!("{} has no /proc entry", component.name()));
                samples.push(Sample {
                    at: started.elapsed(),
                    figures,
                });
            }
            if agent_samples.len() % 24 == 1 {
                eprintln!(
                    "{:>4} s: {churned} pods churned; agent {}; manager {}",
                    started.elapsed().as_secs(),
                    describe(agent_samples.last()),
                    describe(manager_samples.last())
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let sampled = sampler.stop();
    assert!(
        sampled.violations.is_empty(),
        "published scores broke the contract:\n{}",
        sampled.violations.join("\n")
    );
    assert!(
        sampled.samples > 0 && sampled.failures == 0,
        "the hub answered every score read: {sampled:?}"
    );
    let fifth = length / 5;
    for (component, samples) in [(&agent, &agent_samples), (&manager, &manager_samples)] {
        let baseline: Vec<ProcessFigures> = window(samples, fifth, 2 * fifth);
        let last: Vec<ProcessFigures> = window(samples, length - fifth, length);
        assert!(
            !baseline.is_empty() && !last.is_empty(),
            "{}: samples in both windows",
            component.name()
        );
        let mean_rss =
            |w: &[ProcessFigures]| w.iter().map(|f| f.rss_bytes as f64).sum::<f64>() / w.len() as f64;
        let (before, after) = (mean_rss(&baseline), mean_rss(&last));
        eprintln!(
            "{}: RSS {:.1} MiB -> {:.1} MiB ({:+.1} %); sockets {:?} -> {:?}; fds {:?} -> {:?}; threads {:?} -> {:?}",
            component.name(),
            before / 1048576.0,
            after / 1048576.0,
            (after / before - 1.0) * 100.0,
            range(&baseline, |f| f.sockets),
            range(&last, |f| f.sockets),
            range(&baseline, |f| f.open_fds),
            range(&last, |f| f.open_fds),
            range(&baseline, |f| f.threads),
            range(&last, |f| f.threads),
        );
        assert!(
            after <= before * 1.10,
            "{}: resident memory grew from {before:.0} to {after:.0} bytes (more than 10 %)",
            component.name()
        );
        for (what, figure) in [
            (
                "open sockets",
                (|f: &ProcessFigures| f.sockets) as fn(&ProcessFigures) -> u64,
            ),
            ("open file descriptors", |f| f.open_fds),
            ("threads", |f| f.threads),
        ] {
            let (_, peak_before) = range(&baseline, figure);
            let (least_after, _) = range(&last, figure);
            assert!(
                least_after <= peak_before,
                "{}: {what} grew: at least {least_after} in the last fifth, at most {peak_before} in the second",
                component.name()
            );
        }
    }
    for (process, counter) in ERROR_COUNTERS {
        let component = if process == "agent" { &agent } else { &manager };
        let metrics = scrape(component)
            .await
            .unwrap_or_else(|| panic!("{} serves /metrics", component.name()));
        assert_eq!(
            error_count(&metrics, counter),
            0.0,
            "{}: {counter} is not zero:\n{}",
            component.name(),
            component.tail()
        );
    }
    // The soak exercised the writes: the validity forces a renewal at least once per validity, and
    // the churn moves scores besides.
    let written = scrape(&agent)
        .await
        .and_then(|m| m.value("ocm_score_agent_hub_writes_total", &[("result", "written")]))
        .unwrap_or_default();
    let renewals_at_least = (length.as_secs() / VALIDITY.as_secs()) as f64;
    assert!(
        written >= renewals_at_least,
        "the agent wrote {written} times in {} s, fewer than one renewal per validity ({renewals_at_least})",
        length.as_secs()
    );
    for component in [&agent, &manager] {
        let log = std::fs::read_to_string(component.log_path()).unwrap_or_default();
        assert!(
            !log.contains("panicked"),
            "{} panicked:\n{}",
            component.name(),
            component.tail()
        );
    }
    eprintln!(
        "{} s soaked, {churned} pods churned, {written} hub writes, {} score reads",
        length.as_secs(),
        sampled.samples
    );
}

/// The figures sampled in `[from, to)`.
fn window(samples: &[Sample], from: Duration, to: Duration) -> Vec<ProcessFigures> {
    samples
        .iter()
        .filter(|s| s.at >= from && s.at < to)
        .map(|s| s.figures)
        .collect()
}

/// The least and the most of a figure over a window.
fn range(window: &[ProcessFigures], figure: impl Fn(&ProcessFigures) -> u64) -> (u64, u64) {
    let values: Vec<u64> = window.iter().map(figure).collect();
    (
        values.iter().copied().min().unwrap_or(0),
        values.iter().copied().max().unwrap_or(0),
    )
}

fn describe(sample: Option<&Sample>) -> String {
    sample.map_or_else(
        || "-".into(),
        |s| {
            format!(
                "RSS {:.1} MiB, {} sockets, {} fds, {} threads",
                s.figures.rss_bytes as f64 / 1048576.0,
                s.figures.sockets,
                s.figures.open_fds,
                s.figures.threads
            )
        },
    )
}
