//! The hub at scale on the real control plane (etcd, kube-apiserver, OCM's hub controllers), one
//! control plane per scenario, printed as markdown tables with the machine's facts:
//! 1. our add-on manager, installed from `manifests/hub`, on a fleet of bare ManagedClusters:
//!    time from its start until every ManifestWork exists, its requests (from the hub's audit log),
//!    peak RSS, and its requests over a quiet window after it settled;
//! 2. OCM's placement controller following our scores: Placements prioritizing by
//!    `resource-usage-score`, one cluster's score changed at a time; time until OCM has rewritten
//!    the affected PlacementDecisions.
//!
//! `cargo bench -p ocm-score-tests --bench control_plane_scale`. Sizes from the environment:
//! `SCALE_ADDON_CLUSTERS` (2000), `SCALE_RESYNC_SECONDS` (20), `SCALE_QUIET_SECONDS` (60),
//! `SCALE_SCORE_CLUSTERS` (1000), `SCALE_PLACEMENTS` (100), `SCALE_CHANGES` (50); a size of 0
//! skips its scenario. The scenarios and their checks are `ocm_score_control_plane::scale`,
//! which the CI-size test `tests/tests/control_plane_scale.rs` runs too.

use std::time::Duration;

use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::HUB_NAMESPACE;
use ocm_score_control_plane::scale::{
    AddonScale, AddonScaleReport, Requests, ScoreToDecision, ScoreToDecisionReport, addon_manager_at_scale,
    median_p99, score_to_decision,
};
use ocm_score_tests::support::TempDir;

/// Patience for each step (loading, converging, each change) at full size on a busy machine.
const TIMEOUT: Duration = Duration::from_secs(1800);

fn env_usize(name: &str, default: usize) -> anyhow::Result<usize> {
    ocm_score_tests::support::env_usize(name, default).map_err(anyhow::Error::msg)
}

fn progress(line: &str) {
    eprintln!("{line}");
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Date, cores, the load average before the scenario started, and the upstream versions.
fn machine(load_before: &str, versions: &str) -> String {
    format!(
        "{} · nproc {} · load average before {} · {}",
        jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M UTC"),
        std::thread::available_parallelism().map_or(0, usize::from),
        load_before,
        versions.trim_end().replace('\n', ", ")
    )
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn secs(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn request_row(phase: &str, time: &str, r: &Requests, rss: &str) -> String {
    format!(
        "| {phase} | {time} | {} | {} | {} | {} | {} ({} create, {} update, {} patch, {} delete) | {} | {rss} |",
        r.total(),
        r.get,
        r.list,
        r.watch,
        r.writes(),
        r.create,
        r.update,
        r.patch,
        r.delete,
        r.lease,
    )
}

fn print_addon(report: &AddonScaleReport, load_before: &str, versions: &str) {
    println!(
        "## ocm-score-hub addon-manager, {} ManagedClusters, real kube-apiserver\n",
        report.clusters
    );
    println!("{}\n", machine(load_before, versions));
    println!("| phase | time | requests | get | list | watch | writes | leader election | manager RSS |");
    println!("|---|---|---|---|---|---|---|---|---|");
    println!(
        "{}",
        request_row(
            "manager start → every ManifestWork exists",
            &secs(report.all_works),
            &report.until_all_works,
            "–"
        )
    );
    println!(
        "{}",
        request_row(
            "manager start → last write (settled)",
            &secs(report.settled),
            &report.until_settled,
            &format!("peak {}", mib(report.peak_rss_kib))
        )
    );
    println!(
        "{}",
        request_row(
            &format!(
                "steady state: quiet window, resync every {} s",
                report.resync.as_secs()
            ),
            &secs(report.quiet),
            &report.in_quiet,
            &format!("now {}", mib(report.rss_kib))
        )
    );
    println!(
        "\nRequests are the manager's own (its ServiceAccount in the hub's audit log); leader election is its \
         gets and updates of its Lease, apart from the rest. Not in the figures: loading the fleet ({}, bare ManagedClusters and namespaces \
         through the API) and OCM deciding the install Placement for every cluster ({} after `kubectl apply -k \
         manifests/hub`).\n",
        secs(report.load),
        secs(report.install_decided)
    );
}

fn print_decisions(report: &ScoreToDecisionReport, load_before: &str, versions: &str) {
    println!(
        "## Score to decision: {} ManagedClusters, {} Placements, {} score changes, OCM's placement controller\n",
        report.clusters,
        report.placements,
        report.changes.len()
    );
    println!("{}\n", machine(load_before, versions));
    let first: Vec<Duration> = report.changes.iter().map(|c| c.first).collect();
    let all: Vec<Duration> = report.changes.iter().map(|c| c.all).collect();
    let (first_median, first_p99) = median_p99(&first);
    let (all_median, all_p99) = median_p99(&all);
    println!("| from the score write until | median | p99 | max |");
    println!("|---|---|---|---|");
    println!(
        "| the first PlacementDecision rewritten | {} | {} | {} |",
        ms(first_median),
        ms(first_p99),
        ms(first.iter().max().copied().unwrap_or_default())
    );
    println!(
        "| all {} Placements' decisions rewritten | {} | {} | {} |",
        report.placements,
        ms(all_median),
        ms(all_p99),
        ms(all.iter().max().copied().unwrap_or_default())
    );
    println!(
        "\nEach change raises one cluster above all (it enters every Placement's decisions and each \
         Placement's last cluster leaves) or puts it back (the reverse), so every Placement's decision is \
         rewritten; times are when our watch received OCM's write; p99 by nearest rank. Every decision \
         was checked against the expected top clusters. Not in the figures: loading the clusters and \
         scores ({}) and the first decisions ({} after the Placements were created).\n",
        secs(report.load),
        secs(report.first_decisions)
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let addon_clusters = env_usize("SCALE_ADDON_CLUSTERS", 2000)?;
    let resync = env_usize("SCALE_RESYNC_SECONDS", 20)?;
    let quiet = env_usize("SCALE_QUIET_SECONDS", 60)?;
    let score_clusters = env_usize("SCALE_SCORE_CLUSTERS", 1000)?;
    let placements = env_usize("SCALE_PLACEMENTS", 100)?;
    let changes = env_usize("SCALE_CHANGES", 50)?;

    if addon_clusters > 0 {
        let load_before = load_average();
        let cp = ControlPlane::builder()
            .clusters(0)
            .audit_namespace(HUB_NAMESPACE)
            .start_with_progress(&progress)
            .await?;
        let dir = TempDir::new("scale-bench-addon");
        let scale = AddonScale {
            clusters: addon_clusters,
            resync: Duration::from_secs(resync as u64),
            quiet: Duration::from_secs(quiet as u64),
            timeout: TIMEOUT,
        };
        let report = addon_manager_at_scale(&cp, dir.path(), &scale, &progress).await?;
        print_addon(&report, &load_before, cp.versions());
    }
    if score_clusters > 0 {
        let load_before = load_average();
        let cp = ControlPlane::builder()
            .clusters(0)
            .start_with_progress(&progress)
            .await?;
        let dir = TempDir::new("scale-bench-decisions");
        let scenario = ScoreToDecision {
            clusters: score_clusters,
            placements,
            changes,
            timeout: TIMEOUT,
            check_with_simulate: false,
        };
        let report = score_to_decision(&cp, dir.path(), &scenario, &progress).await?;
        print_decisions(&report, &load_before, cp.versions());
    }
    Ok(())
}
