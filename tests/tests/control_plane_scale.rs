//! The hub at scale, CI size, on the real control plane: fleets of 100 bare ManagedClusters
//! loaded through the API (see `ocm_score_control_plane::scale`, shared with the full-size
//! benchmark `cargo bench -p ocm-score-tests --bench control_plane_scale`). Correctness only; no
//! figure is asserted:
//! - our add-on manager, installed from `manifests/hub`, gives every cluster its ManifestWork with
//!   the right content and then writes nothing through resyncs: the resyncs ran (its own pass
//!   counter moved by at least one pass per add-on in the window) and neither the hub's audit log
//!   nor its own write counter saw a write;
//! - OCM's placement controller follows every change of our score: after each one, every
//!   Placement's decisions are the top clusters by score, as `ocm-score-hub simulate` predicts, and
//!   OCM really moved: the changed cluster entered (or left) every Placement's decisions.

use std::time::Duration;

use ocm_score_control_plane::ControlPlane;
use ocm_score_control_plane::addon::HUB_NAMESPACE;
use ocm_score_control_plane::scale::{
    AddonScale, ScoreToDecision, addon_manager_at_scale, score_to_decision,
};
use ocm_score_tests::support::TempDir;

const CLUSTERS: usize = 100;
/// Patience for each step on a loaded 2-core machine.
const TIMEOUT: Duration = Duration::from_secs(300);

fn progress(line: &str) {
    eprintln!("{line}");
}

async fn hub_only(builder: ocm_score_control_plane::Builder) -> ControlPlane {
    builder
        .clusters(0)
        .start_with_progress(&progress)
        .await
        .unwrap_or_else(|e| panic!("the control plane did not start: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn addon_manager_gives_every_cluster_its_work_then_writes_nothing() {
    let cp = hub_only(ControlPlane::builder().audit_namespace(HUB_NAMESPACE)).await;
    let dir = TempDir::new("scale-addon");
    let scale = AddonScale {
        clusters: CLUSTERS,
        resync: Duration::from_secs(10),
        quiet: Duration::from_secs(25),
        timeout: TIMEOUT,
    };
    // Every add-on is requeued one resync after its last pass; a window of at least two resync
    // periods holds at least one pass of each even if every pass comes up to `quiet - resync`
    // (a whole period or more) late.
    assert!(scale.quiet >= 2 * scale.resync, "{scale:?}");
    let report = addon_manager_at_scale(&cp, dir.path(), &scale, &progress)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{report:?}");
    assert!(
        report.until_all_works.writes() >= CLUSTERS,
        "the audit log counts the manager's writes: at least one ManifestWork per cluster, got {:?}",
        report.until_all_works
    );
    let counted = &report.in_quiet_counted;
    assert!(
        counted.addon_passes >= CLUSTERS as f64,
        "the quiet {:?} held the manager's resyncs (every {:?}): at least one pass per add-on, \
         {CLUSTERS}, by its reconcile counter; it counted {counted:?}",
        report.quiet,
        report.resync,
    );
    assert_eq!(
        counted.failed_passes, 0.0,
        "the passes in the quiet window succeeded (a failed pass writes nothing and proves nothing): {counted:?}"
    );
    assert_eq!(
        report.in_quiet.writes(),
        0,
        "writes in a quiet {:?} holding resyncs every {:?}: {:?}",
        report.quiet,
        report.resync,
        report.in_quiet.write_samples
    );
    assert_eq!(
        counted.writes, 0.0,
        "the manager's own write counter agrees with the audit log: nothing sent in the quiet window"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ocm_decisions_follow_every_score_change() {
    let cp = hub_only(ControlPlane::builder()).await;
    let dir = TempDir::new("scale-decisions");
    let scenario = ScoreToDecision {
        clusters: CLUSTERS,
        placements: 10,
        changes: 5,
        timeout: TIMEOUT,
        check_with_simulate: true,
    };
    let report = score_to_decision(&cp, dir.path(), &scenario, &progress)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    eprintln!("{report:?}");
    // Each change raises an outsider above every cluster (it enters every Placement's decisions,
    // pushing out each one's last cluster) or puts it back (the reverse). The scenario waits
    // until OCM's decisions are the expected ones; these check that OCM really moved, so that a
    // change that changed nothing cannot pass as followed.
    for (step, change) in report.changes.iter().enumerate() {
        let placements = scenario.placements;
        let expected = if change.entered {
            (0, placements)
        } else {
            (placements, 0)
        };
        assert_eq!(
            change.placements_with_cluster,
            expected,
            "change {}: Placements whose OCM decisions held {} (before, after) when its score became {}: {change:?}",
            step + 1,
            change.cluster,
            change.value
        );
        assert_eq!(
            change.placements_changed,
            placements,
            "change {}: OCM rewrote every Placement's decisions: {change:?}",
            step + 1
        );
    }
}
