//! `fits.<shape>` scores from the real `ocm-score-agent` against two API server doubles: shapes from
//! the hub (added, changed, deleted while the agent runs, one needing a resource not counted before),
//! shapes from a file (more than 32, an unreadable entry), a bad shape, a hub that refuses them, and
//! a hub without the WorkloadShape CRD that gets it while the agent runs.
//!
//! Replica counts of the fixture (`support::managed_objects`): node-a has 24.75 cpu, 123.25Gi, 3 GPUs,
//! 3 fpga and 109 pod slots free, node-b 12 cpu, 48Gi, no GPU, 2 fpga and 109 slots; the pending
//! pod `queued` (8 cpu, 32Gi) is deducted first-fit onto node-a, leaving it 16.75 cpu, 91.25Gi and
//! 108 slots.

mod support;

use kube::Api;
use kube::api::{Patch, PatchParams};
use ocm_score_api::{AddOnPlacementScore, AddOnPlacementScoreStatus, WorkloadShape};
use ocm_score_kube_double::Gvr;
use serde_json::json;
use std::process::Command;
use std::time::{Duration, Instant};
use support::*;

/// Every move of a score is written (`--score-step=1`), so each change shows within the debounce.
const ARGS: [&str; 5] = [
    "--refresh-interval=2s",
    "--debounce=300ms",
    "--validity=60s",
    "--min-write-interval=1s",
    "--score-step=1",
];

/// The published status once its `fits.*` scores are `want` (in name order) and the agent's
/// condition is True.
async fn wait_fits(clusters: &Clusters, what: &str, want: &[(&str, i32)]) -> AddOnPlacementScoreStatus {
    let want = owned(want);
    eventually(what, STARTUP, async || {
        let status = clusters.score()?.status?;
        let healthy = condition(&status).is_some_and(|c| c.status == "True");
        (healthy && fits_of(&status) == want).then_some(status)
    })
    .await
}

/// The stored score object validates against the upstream AddOnPlacementScore CRD.
fn assert_valid_upstream(clusters: &Clusters) {
    let stored = clusters
        .hub
        .object(&Gvr::of::<AddOnPlacementScore>(), CLUSTER, SCORE_NAME)
        .expect("stored");
    assert_eq!(score_validator().validate(&stored), Ok(()), "{stored}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fits_scores_follow_the_hubs_workload_shapes_as_they_are_added_changed_and_deleted() {
    let clusters = Clusters::start("fits-hub").await;
    for object in [
        // 16.75 / 8 = 2 on node-a (after the pending pod), 12 / 8 = 1 on node-b.
        shape("batch", json!({"requests": {"cpu": "8", "memory": "16Gi"}})),
        // Fragmented: node-a's 3 free GPUs hold one pair; node-b has no GPU at all.
        shape("gpu-pair", json!({"requests": {"nvidia.com/gpu": "2"}})),
        // Valid for the API server, not as a score name: left out with a condition.
        shape("wide.shape", json!({"requests": {"cpu": "1"}})),
    ] {
        clusters.hub.create(object).expect("creating a WorkloadShape");
    }
    let agent = clusters.agent("fits-hub", &ARGS).await;

    let status = wait_fits(
        &clusters,
        "the first fits scores",
        &[("fits.batch", -97), ("fits.gpu-pair", -99)],
    )
    .await;
    assert_eq!(
        scores_of(&status)[..10],
        owned(&expected_scores(false))[..],
        "the other scores are untouched"
    );
    let shapes = shapes_condition(&status).expect("a condition about the shapes");
    assert_eq!(
        (shapes.status.as_str(), shapes.reason.as_str()),
        ("False", "InvalidWorkloadShape")
    );
    assert!(
        shapes.message.contains("\"wide.shape\"") && shapes.message.contains("field metadata.name"),
        "{}",
        shapes.message
    );
    let warned = agent
        .logs()
        .into_iter()
        .filter(|l| l["fields"]["shape"] == "wide.shape")
        .filter_map(|l| l["fields"]["message"].as_str().map(str::to_owned))
        .collect::<Vec<_>>();
    assert!(
        warned.iter().any(|m| m.contains("field metadata.name")),
        "{warned:?}"
    );
    assert_eq!(
        agent.metric("ocm_score_agent_fits{shape=\"batch\"}").await,
        Some(3.0)
    );
    assert_eq!(
        agent.metric("ocm_score_agent_fits{shape=\"gpu-pair\"}").await,
        Some(1.0)
    );
    assert_valid_upstream(&clusters);

    // Added: a pods-only shape (scale 10): 108 + 109 slots → 21 points.
    clusters
        .hub
        .create(shape("pods", json!({"scale": 10})))
        .expect("creating a WorkloadShape");
    wait_fits(
        &clusters,
        "the added shape",
        &[("fits.batch", -97), ("fits.gpu-pair", -99), ("fits.pods", -79)],
    )
    .await;

    // Changed: half the cpu → 16.75 / 4 = 4 on node-a, 12 / 4 = 3 on node-b.
    let shapes_api: Api<WorkloadShape> = Api::all(clusters.hub.admin_client());
    shapes_api
        .patch(
            "batch",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"requests": {"cpu": "4"}}})),
        )
        .await
        .expect("changing a WorkloadShape");
    wait_fits(
        &clusters,
        "the changed shape",
        &[("fits.batch", -93), ("fits.gpu-pair", -99), ("fits.pods", -79)],
    )
    .await;

    // A resource nothing counted before: the counts are rebuilt from a re-list (3 + 2 fpga free).
    clusters
        .hub
        .create(shape("fpga", json!({"requests": {"example.com/fpga": "1"}})))
        .expect("creating a WorkloadShape");
    wait_fits(
        &clusters,
        "the shape of a new resource",
        &[
            ("fits.batch", -93),
            ("fits.fpga", -95),
            ("fits.gpu-pair", -99),
            ("fits.pods", -79),
        ],
    )
    .await;

    // Deleted, and the bad one fixed by deleting it too: the condition turns True.
    for name in ["gpu-pair", "wide.shape"] {
        shapes_api
            .delete(name, &Default::default())
            .await
            .expect("deleting a WorkloadShape");
    }
    let status = wait_fits(
        &clusters,
        "the deleted shapes gone",
        &[("fits.batch", -93), ("fits.fpga", -95), ("fits.pods", -79)],
    )
    .await;
    let shapes = eventually("the shapes condition to turn True", STARTUP, async || {
        let status = clusters.score()?.status?;
        shapes_condition(&status).filter(|c| c.status == "True").cloned()
    })
    .await;
    assert_eq!(
        shapes.message,
        "3 WorkloadShape(s) scored as fits.<name>: batch, fpga, pods"
    );
    assert!(status.valid_until.is_some());
    assert_eq!(
        agent.metric("ocm_score_agent_fits{shape=\"gpu-pair\"}").await,
        None,
        "a deleted shape's series goes"
    );
    assert_valid_upstream(&clusters);
    assert!(
        agent
            .logged("the WorkloadShapes request new resources; re-listing nodes and pods to count them")
            .len()
            == 1
    );
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shapes_from_a_file_more_than_32_and_an_unreadable_entry_without_pending_deduction() {
    let clusters = Clusters::start("fits-file").await;
    let mut entries = vec![
        shape("batch", json!({"requests": {"cpu": "8", "memory": "16Gi"}})),
        json!({"kind": "WorkloadShape", "metadata": {"name": "broken"}, "spec": {"scale": "many"}}),
    ];
    entries.extend((0..32).map(|i| shape(&format!("z{i:02}"), json!({}))));
    let file = clusters.dir.path().join("shapes.yaml");
    std::fs::write(&file, serde_norway::to_string(&entries).expect("YAML")).expect("writing the shapes");
    let shapes_flag = format!("--shapes={}", file.display());
    let mut args = ARGS.to_vec();
    args.extend([shapes_flag.as_str(), "--deduct-pending=false"]);
    let mut agent = clusters.agent("fits-file", &args).await;

    // The first 32 by name: batch and z00..z30. Without deducting `queued`: 24.75 / 8 = 3 on node-a,
    // 1 on node-b. A pods-only shape has 109 + 109 slots: 200 or more saturates at +100.
    let mut want = vec![("fits.batch".to_owned(), -96)];
    want.extend((0..31).map(|i| (format!("fits.z{i:02}"), 100)));
    let want: Vec<(&str, i32)> = want.iter().map(|(n, v)| (n.as_str(), *v)).collect();
    let status = wait_fits(&clusters, "the file's shapes", &want).await;
    let shapes = shapes_condition(&status).expect("a condition about the shapes");
    assert_eq!(
        (shapes.status.as_str(), shapes.reason.as_str()),
        ("False", "TooManyWorkloadShapes")
    );
    assert!(
        shapes.message.contains("\"z31\"")
            && shapes.message.contains("\"broken\"")
            && shapes.message.contains("field spec.scale"),
        "{}",
        shapes.message
    );
    assert_valid_upstream(&clusters);
    assert_eq!(
        clusters.hub.request_count("list", "workloadshapes")
            + clusters.hub.request_count("watch", "workloadshapes"),
        0,
        "shapes from a file: the hub is not asked"
    );
    assert!(agent.is_running());
    agent.stop().await;

    // `once` reads the same file and prints the same count.
    let out = Command::new(AGENT)
        .args([
            "once",
            &format!("--managed-kubeconfig={}", clusters.managed_kubeconfig.display()),
            &shapes_flag,
            "--deduct-pending=false",
        ])
        .env_clear()
        .output()
        .expect("running once");
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{printed}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        printed.contains("# fits.batch  -96  4 replica(s) fit; scale 1"),
        "{printed}"
    );
    let object: serde_json::Value = serde_norway::from_str(&printed).expect("the object as YAML");
    let status: AddOnPlacementScoreStatus =
        serde_json::from_value(object["status"].clone()).expect("a score status");
    assert_eq!(status.score("fits.z30"), Some(100));
    assert_eq!(fits_of(&status).len(), 32);
    assert_eq!(
        shapes_condition(&status).map(|c| c.reason.as_str()),
        Some("TooManyWorkloadShapes")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_that_refuses_shapes_leaves_the_other_scores_alone_until_it_grants_them() {
    let clusters = Clusters::start_with("fits-refused", false).await;
    clusters
        .hub
        .create(shape(
            "batch",
            json!({"requests": {"cpu": "8", "memory": "16Gi"}}),
        ))
        .expect("creating a WorkloadShape");
    let mut agent = clusters.agent("fits-refused", &ARGS).await;
    let status = eventually(
        "the scores with the refusal in a condition",
        STARTUP,
        async || {
            let status = clusters.score()?.status?;
            let refused = shapes_condition(&status)
                .is_some_and(|c| c.status == "Unknown" && c.reason == "WorkloadShapesUnreadable");
            refused.then_some(status)
        },
    )
    .await;
    assert_eq!(scores_of(&status), owned(&expected_scores(false)));
    assert!(condition(&status).is_some_and(|c| c.status == "True"));
    let message = shapes_condition(&status)
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("403") || message.contains("forbidden"),
        "{message}"
    );
    assert_valid_upstream(&clusters);

    for object in shapes_rbac() {
        clusters.hub.create(object).expect("granting the shapes");
    }
    wait_fits(&clusters, "the fits score once granted", &[("fits.batch", -97)]).await;
    assert!(agent.is_running());
    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hub_without_the_workload_shape_crd_is_asked_again_slowly_and_its_shapes_count_once_installed() {
    // The hub's discovery document for the WorkloadShapes' group version: the agent's re-check.
    const DISCOVERY: &str = "/apis/tiering.ocm-score.io/v1alpha1";
    /// Long enough for a retrying watch (500 ms doubling to 5 s) to list the missing resource
    /// several times over, and for five re-checks at the interval below.
    const WINDOW: Duration = Duration::from_secs(10);
    let clusters = Clusters::start_without_shapes_crd("fits-no-crd").await;
    let started = Instant::now();
    let mut args = ARGS.to_vec();
    args.push("--shapes-recheck-interval=2s");
    let mut agent = clusters.agent("fits-no-crd", &args).await;
    let shape_requests = || {
        clusters
            .hub
            .requests()
            .iter()
            .filter(|r| r.resource == "workloadshapes")
            .count()
    };
    let rechecks = || {
        clusters
            .hub
            .requests()
            .iter()
            .filter(|r| r.path == DISCOVERY)
            .count()
    };

    clusters.wait_published("the first scores", -26, STARTUP).await;
    let computed = || agent.metric("ocm_score_agent_last_computed_timestamp_seconds");
    let computed_before = computed().await;
    let rechecks_before = rechecks();
    tokio::time::sleep(WINDOW).await;
    let requests = shape_requests();
    let rechecked = rechecks() - rechecks_before;
    eprintln!(
        "requests for workloadshapes in the {:.1} s since the hub started: {requests}; discovery re-checks in the {WINDOW:?} window: {rechecked}",
        started.elapsed().as_secs_f64()
    );
    // A list at start, the watch's first list; then only discovery, every 2 s (spread ±1/3).
    assert!(
        requests <= 4,
        "{requests} requests for workloadshapes, a watch retrying the missing resource: {:?}",
        clusters
            .hub
            .requests()
            .iter()
            .filter(|r| r.resource == "workloadshapes")
            .collect::<Vec<_>>()
    );
    assert!(
        (2..=8).contains(&rechecked),
        "{rechecked} discovery re-checks in {WINDOW:?} at a 2 s interval"
    );
    // The other scores are computed and published all along, with the reason there are no fits.
    assert!(
        computed().await > computed_before,
        "the agent kept computing scores"
    );
    let status = clusters
        .score()
        .and_then(|s| s.status)
        .expect("a published status");
    assert_eq!(scores_of(&status), owned(&expected_scores(false)));
    assert!(condition(&status).is_some_and(|c| c.status == "True"));
    assert!(seconds_left(&status) > 0, "the scores are valid");
    let shapes = shapes_condition(&status).expect("a condition about the shapes");
    assert_eq!(
        (shapes.status.as_str(), shapes.reason.as_str()),
        ("False", "WorkloadShapesNotInstalled")
    );
    assert!(
        shapes.message.contains(SHAPES_CRD) && shapes.message.contains("not installed"),
        "{}",
        shapes.message
    );
    let said = "the WorkloadShape CRD is not installed on the hub; fits scores are off until it is";
    assert_eq!(agent.logged(said).len(), 1, "said once, at warn");
    assert_eq!(agent.logged(said)[0]["level"], "WARN");
    assert!(
        agent
            .logged("watching WorkloadShapes on the hub failed; retrying with backoff")
            .is_empty()
    );

    // Installed while the agent runs: the next re-check finds it and the watch counts its shapes.
    assert!(clusters.hub.install_crd(SHAPES_CRD));
    clusters
        .hub
        .create(shape(
            "batch",
            json!({"requests": {"cpu": "8", "memory": "16Gi"}}),
        ))
        .expect("creating a WorkloadShape");
    wait_fits(&clusters, "the fits score once installed", &[("fits.batch", -97)]).await;
    let shapes = eventually("the shapes condition to turn True", STARTUP, async || {
        let status = clusters.score()?.status?;
        shapes_condition(&status).filter(|c| c.status == "True").cloned()
    })
    .await;
    assert_eq!(shapes.message, "1 WorkloadShape(s) scored as fits.<name>: batch");
    assert_eq!(
        agent
            .logged("the WorkloadShape CRD is installed on the hub now; watching WorkloadShapes")
            .len(),
        1
    );
    assert_valid_upstream(&clusters);
    assert!(agent.is_running());
    agent.stop().await;
}
