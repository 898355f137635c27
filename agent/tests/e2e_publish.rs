//! The real `ocm-score-agent` against two API server doubles (managed cluster and hub): what it
//! publishes, how fast a change reaches the hub, and that nothing is written when nothing changed.

mod support;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use ocm_score_api::AddOnPlacementScore;
use ocm_score_kube_double::Gvr;
use serde_json::json;
use std::time::{Duration, Instant};
use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_score_object_appears_with_hand_computed_values_and_a_future_valid_until() {
    let clusters = Clusters::start("values").await;
    let started = jiff::Timestamp::now();
    let agent = clusters
        .agent(
            "values",
            &[
                "--refresh-interval=2s",
                "--debounce=500ms",
                "--validity=60s",
                "--lease-interval=1s",
                "--extended-resource=example.com/fpga=fpga",
            ],
        )
        .await;

    let status = clusters
        .wait_published("the first publication", -26, STARTUP)
        .await;
    assert_eq!(scores_of(&status), owned(&expected_scores(true)));
    // Written while the agent ran: validUntil is the 60s validity after a moment between its start
    // and now (whole seconds).
    let valid_until = status.valid_until.clone().expect("validUntil").0.as_second();
    let now = jiff::Timestamp::now().as_second();
    assert!(
        (started.as_second() + 60..=now + 60).contains(&valid_until),
        "validUntil {valid_until} is not 60s after a moment in {}..={now}",
        started.as_second()
    );
    let condition = condition(&status).expect("the agent's condition");
    assert_eq!(condition.reason, "ScoresPublished");
    assert!(
        condition
            .message
            .starts_with("cluster: 2 of 4 nodes Ready and schedulable"),
        "{}",
        condition.message
    );

    // The stored object (the double already refused anything the schema rejects) validates against
    // the upstream CRD, and the validator is not vacuous.
    let stored = clusters
        .hub
        .object(&Gvr::of::<AddOnPlacementScore>(), CLUSTER, SCORE_NAME)
        .expect("stored");
    let validator = score_validator();
    assert_eq!(validator.validate(&stored), Ok(()));
    let mut broken = stored.clone();
    broken["status"]["scores"][0]["value"] = json!(101);
    assert!(validator.validate(&broken).is_err());

    // The raw figures behind the integers, in base units.
    let figures = [
        ("ocm_score_agent_free{resource=\"cpu\",scope=\"cluster\"}", 36.75),
        ("ocm_score_agent_free{resource=\"cpu\",scope=\"node\"}", 24.75),
        (
            "ocm_score_agent_free{resource=\"memory\",scope=\"cluster\"}",
            171.25 * (1u64 << 30) as f64,
        ),
        (
            "ocm_score_agent_capacity{resource=\"cpu\",scope=\"cluster\"}",
            48.0,
        ),
        (
            "ocm_score_agent_free{resource=\"nvidia.com/gpu\",scope=\"cluster\"}",
            3.0,
        ),
        ("ocm_score_agent_eligible_nodes", 2.0),
        // Bound and not finished, wherever bound: web, db and on-cordoned.
        ("ocm_score_agent_counted_pods", 3.0),
    ];
    for (sample, want) in figures {
        assert_eq!(agent.metric(sample).await, Some(want), "{sample}");
    }
    eventually("/readyz to turn 200", STARTUP, async || {
        (agent.get("/readyz").await.0 == 200).then_some(())
    })
    .await;
    assert_eq!(agent.get("/healthz").await.0, 200);

    // The add-on Lease in the install namespace, for OCM's Lease health mode.
    let leases: Api<Lease> = Api::namespaced(clusters.managed.admin_client(), INSTALL_NAMESPACE);
    let lease = eventually("the add-on Lease", STARTUP, async || {
        leases.get_opt(ADDON).await.ok().flatten()
    })
    .await;
    let spec = lease.spec.expect("spec");
    assert_eq!(spec.lease_duration_seconds, Some(60));
    let renewed = spec.renew_time.expect("renewTime").0;
    assert!(
        started <= renewed && renewed <= jiff::Timestamp::now(),
        "renewTime {renewed} is not a moment since the agent started at {started}"
    );

    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pod_changes_reach_the_hub_after_the_debounce_window_in_one_write() {
    const DEBOUNCE: Duration = Duration::from_secs(2);
    // The periodic refresh is an hour away, so only the change can explain a write during the test,
    // however slowly a loaded machine gets there.
    let clusters = Clusters::start("debounce").await;
    let agent = clusters
        .agent(
            "debounce",
            &[
                "--refresh-interval=1h",
                "--debounce=2s",
                "--validity=3h",
                "--min-write-interval=1s",
            ],
        )
        .await;
    clusters
        .wait_published("the first publication", -26, STARTUP)
        .await;
    // No sleep here: the initial lists must not leave a debounce window open after the first
    // computation, or the burst below would ride along on it and be published too early.
    let writes_before = clusters.hub_status_writes();

    // Three pods within a few milliseconds: one window, one computation, one write.
    let changed_at = Instant::now();
    for name in ["burst-1", "burst-2", "burst-3"] {
        clusters.create(pod(name, Some("node-a"), json!({"cpu": "8", "memory": "1Gi"})));
    }
    // node-a keeps 0.75 cpu free: cluster 12.75 cores → −74.5, best node (node-b) 12 → −76.
    let status = clusters
        .wait_published("the burst on the hub", -74, STARTUP)
        .await;
    let took = changed_at.elapsed();
    assert!(
        took >= DEBOUNCE,
        "published {took:?} after the change, before the debounce window closed"
    );
    assert_eq!(status.score("cpuNodeAvailable"), Some(-76));
    assert_eq!(
        clusters.hub_status_writes(),
        writes_before + 1,
        "the three changes were debounced into one write"
    );

    // Deleting them goes the same way back.
    let changed_at = Instant::now();
    for name in ["burst-1", "burst-2", "burst-3"] {
        clusters.delete_pod(name).await;
    }
    let status = clusters
        .wait_published("the deletions on the hub", -26, STARTUP)
        .await;
    assert!(changed_at.elapsed() >= DEBOUNCE);
    assert_eq!(scores_of(&status), owned(&expected_scores(false)));
    assert_eq!(clusters.hub_status_writes(), writes_before + 2);

    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_is_written_when_nothing_moved_by_a_step_not_even_after_a_restart() {
    // Refresh every second; validity 10m leaves validUntil far from the renewal margin
    // (refresh × (1 + jitter) + api-timeout + hub-timeout = 31s), so no renewal is due during the test.
    let args = [
        "--refresh-interval=1s",
        "--debounce=200ms",
        "--validity=10m",
        "--min-write-interval=1s",
    ];
    let clusters = Clusters::start("quiet").await;
    let agent = clusters.agent("quiet", &args).await;
    clusters
        .wait_published("the first publication", -26, STARTUP)
        .await;
    let first = clusters.score().expect("published");
    clusters.hub.reset_requests();

    // A change below the step (5): cpu scores move by 4 (cluster 34.75 cores → −30, node 22.75 → −54).
    clusters.create(pod(
        "small",
        Some("node-a"),
        json!({"cpu": "2", "memory": "64Mi"}),
    ));
    eventually("the agent to compute the small change", STARTUP, async || {
        let cluster = agent
            .metric("ocm_score_agent_score{score=\"cpuClusterAvailable\"}")
            .await;
        (cluster == Some(-30.0)).then_some(())
    })
    .await;
    // Several more refreshes, each one deciding not to write.
    let skipped = agent.hub_writes("skipped").await;
    eventually("four more refreshes", STARTUP, async || {
        (agent.hub_writes("skipped").await >= skipped + 4.0).then_some(())
    })
    .await;
    assert_eq!(agent.hub_writes("written").await, 1.0);
    assert_eq!(clusters.hub.write_count(), 0, "{:?}", clusters.hub.requests());
    assert_eq!(clusters.score(), Some(first.clone()), "the object is untouched");

    // A restarted agent reads the object, finds nothing worth writing, and writes nothing.
    agent.stop().await;
    let agent = clusters.agent("quiet-restarted", &args).await;
    eventually("the restarted agent to decide twice", STARTUP, async || {
        (agent.hub_writes("skipped").await >= 2.0).then_some(())
    })
    .await;
    assert_eq!(agent.hub_writes("written").await, 0.0);
    assert!(clusters.hub.request_count("get", "addonplacementscores") >= 1);
    assert_eq!(clusters.hub.write_count(), 0, "{:?}", clusters.hub.requests());
    assert_eq!(clusters.score(), Some(first));
    agent.stop().await;
}

/// `--owned-by-addon` (the AddOnTemplate install, where no add-on manager of ours adopts the score):
/// the score object is created owned by the cluster's ManagedClusterAddOn, so removing the add-on
/// removes it, and never while that add-on is missing: an agent outliving its add-on does not bring
/// the score back after the garbage collector removed it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owned_score_exists_only_with_its_addon_and_names_it_owner() {
    let clusters = Clusters::start("owned").await;
    // What the AddOnTemplate install's hub ClusterRole adds for the agent, bound in its namespace.
    let (user, _) = hub_user();
    for object in [
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "addon-reader", "namespace": CLUSTER},
               "rules": [{"apiGroups": ["addon.open-cluster-management.io"], "resources": ["managedclusteraddons"],
                          "resourceNames": [ADDON], "verbs": ["get"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": "addon-reader", "namespace": CLUSTER},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "addon-reader"},
               "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}]}),
    ] {
        clusters
            .hub
            .create(object)
            .expect("creating the agent's add-on read access");
    }
    let agent = clusters
        .agent(
            "owned",
            &[
                "--refresh-interval=2s",
                "--debounce=500ms",
                "--owned-by-addon=true",
            ],
        )
        .await;
    let refusals = || {
        agent
            .logged("hub write failed")
            .into_iter()
            .filter(|l| {
                l["fields"]["error"].as_str().is_some_and(|e| {
                    e.contains(&format!("ManagedClusterAddOn {CLUSTER}/{ADDON}")) && e.contains("is missing")
                })
            })
            .count()
    };
    eventually("the agent to name the missing add-on", STARTUP, async || {
        (refusals() > 0).then_some(())
    })
    .await;
    assert!(clusters.score().is_none(), "a score without its add-on");

    let addon = clusters
        .hub
        .create(
            json!({"apiVersion": "addon.open-cluster-management.io/v1alpha1", "kind": "ManagedClusterAddOn",
                       "metadata": {"name": ADDON, "namespace": CLUSTER}, "spec": {}}),
        )
        .expect("creating the add-on");
    let status = clusters
        .wait_published("the first publication once the add-on exists", -26, STARTUP)
        .await;
    assert!(status.valid_until.is_some());
    let score = clusters.score().expect("published");
    let owners = score.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1, "{owners:?}");
    assert_eq!(owners[0].kind, "ManagedClusterAddOn");
    assert_eq!(owners[0].api_version, "addon.open-cluster-management.io/v1alpha1");
    assert_eq!(owners[0].name, ADDON);
    assert_eq!(Some(owners[0].uid.as_str()), addon["metadata"]["uid"].as_str());
    assert_eq!(
        owners[0].controller, None,
        "the agent writes the score, the add-on does not"
    );

    // The add-on goes, and the garbage collector takes the score with it (the double's collector
    // does it before the DELETE returns). The agent, still running, writes again at its next
    // refreshes and refuses to create the score.
    let addons: Api<ocm_score_api::ManagedClusterAddOn> =
        Api::namespaced(clusters.hub.admin_client(), CLUSTER);
    addons
        .delete(ADDON, &Default::default())
        .await
        .expect("deleting the add-on");
    assert!(clusters.score().is_none(), "the score outlived its owner");
    let before = refusals();
    // A new pod moves the scores, so the agent has something to write.
    clusters.create(pod("late", Some("node-a"), json!({"cpu": "4", "memory": "64Mi"})));
    eventually(
        "the agent to refuse again without its add-on",
        STARTUP,
        async || (refusals() > before).then_some(()),
    )
    .await;
    assert!(
        clusters.score().is_none(),
        "the score came back without its add-on"
    );
}
