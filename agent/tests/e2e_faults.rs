//! The real `ocm-score-agent` when things break: a hub answering 500, 503 and 429 or refusing
//! connections, watches cut mid-stream, and a managed cluster whose API server is gone.

mod support;

use ocm_score_kube_double::RequestMatch;
use serde_json::json;
use std::time::Duration;
use support::*;

const SCORES: &str = "addonplacementscores";
const SCORE_STATUS: &str = "addonplacementscores/status";
/// A refusal longer than any test: each one ends when the test has seen the agent meet it.
const REFUSED_UNTIL_ENDED: Duration = Duration::from_secs(3600);

/// Hub writes that failed because the hub refused the connection.
fn refused_writes(agent: &Agent) -> usize {
    agent
        .logged("hub write failed")
        .iter()
        .filter(|l| {
            l["fields"]["error"]
                .as_str()
                .is_some_and(|e| e.contains("client error"))
        })
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_hub_is_retried_while_the_agent_keeps_running_and_it_publishes_once_it_recovers() {
    let clusters = Clusters::start("hub-faults").await;
    let faults = clusters.hub.faults();
    // From the first request on: no connection until the agent has met the refusal, then errors on
    // every step of a first publication (read, create, status write).
    faults.refuse_connections(REFUSED_UNTIL_ENDED);
    faults.fail_next(2, RequestMatch::any().verb("get").resource(SCORES), 500);
    faults.throttle_next(2, RequestMatch::any().verb("create").resource(SCORES), 1);
    faults.fail_next(2, RequestMatch::any().resource(SCORE_STATUS), 503);

    let mut agent = clusters
        .agent(
            "hub-faults",
            &[
                "--refresh-interval=1s",
                "--debounce=200ms",
                "--validity=1m",
                "--min-write-interval=1s",
                "--hub-timeout=2s",
            ],
        )
        .await;
    eventually("a hub write refused at the connection", STARTUP, async || {
        (refused_writes(&agent) >= 1).then_some(())
    })
    .await;
    assert!(agent.is_running());
    assert_eq!(
        agent.get("/healthz").await.0,
        200,
        "failing writes are not a sick agent"
    );
    assert_eq!(
        agent.get("/readyz").await.0,
        503,
        "nothing accepted by the hub yet"
    );
    faults.accept_connections();

    let status = clusters
        .wait_published("a publication after the faults", -26, STARTUP)
        .await;
    assert_eq!(scores_of(&status), owned(&expected_scores(false)));
    assert_eq!(faults.pending(), 0, "every programmed failure was met");
    // The 500s fail two attempts for sure; kube's client retries 429 and 503 itself (honouring
    // Retry-After), so those fail an attempt only when the retries outlast --hub-timeout.
    let failed = agent.hub_writes("failed").await;
    assert!(
        failed >= 3.0,
        "the refusal and the 500s failed attempts ({failed})"
    );
    let codes: Vec<u16> = clusters.hub.requests().iter().map(|r| r.code).collect();
    for code in [500, 429, 503] {
        assert!(codes.contains(&code), "the agent met a {code}: {codes:?}");
    }
    eventually("/readyz to turn 200", STARTUP, async || {
        (agent.get("/readyz").await.0 == 200).then_some(())
    })
    .await;

    // Later trouble: every watch (hub and managed cluster) cut mid-stream, the hub unreachable again
    // until the agent has met that, then failing status writes. Changes made after the cut must
    // still arrive: a big pod on node-a and node-b cordoned (cluster 24.75 − 20 = 4.75 cores → −90).
    let refused_before = refused_writes(&agent);
    clusters.managed.faults().cut_watches();
    faults.cut_watches();
    faults.refuse_connections(REFUSED_UNTIL_ENDED);
    faults.fail_next(2, RequestMatch::any().resource(SCORE_STATUS), 500);
    faults.throttle_next(1, RequestMatch::any().resource(SCORE_STATUS), 1);
    clusters.create(pod("late", Some("node-a"), json!({"cpu": "20", "memory": "1Gi"})));
    clusters.cordon("node-b").await;
    eventually("a hub write refused again", STARTUP, async || {
        (refused_writes(&agent) > refused_before).then_some(())
    })
    .await;
    faults.accept_connections();
    let status = clusters
        .wait_published("the changes made after the cut", -90, STARTUP)
        .await;
    assert_eq!(status.score("cpuNodeAvailable"), Some(-90));
    assert!(agent.is_running());
    assert!(
        agent.hub_writes("failed").await >= failed + 3.0,
        "the second refusal and its 500s failed writes too"
    );
    assert_eq!(faults.pending(), 0, "every programmed failure was met");

    agent.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_managed_cluster_unreachable_scores_are_not_renewed_and_expire() {
    const VALIDITY: i64 = 12;
    let clusters = Clusters::start("managed-down").await;
    // Refresh every second with a 12s validity and 1s + 2s timeouts: the agent renews validUntil once
    // less than 1s + 1s + 2s of it is left, every eight seconds or so, while its data is fresh.
    let agent = clusters
        .agent(
            "managed-down",
            &[
                "--refresh-interval=1s",
                "--debounce=200ms",
                "--validity=12s",
                "--min-write-interval=1s",
                "--api-timeout=1s",
                "--hub-timeout=2s",
                "--lease-interval=1s",
            ],
        )
        .await;
    let published = clusters
        .wait_published("the first publication", -26, STARTUP)
        .await;
    // A renewal proves validUntil moves while the data is fresh.
    let first_valid_until = published.valid_until.clone().expect("validUntil").0;
    eventually("a renewal", STARTUP, async || {
        let status = clusters.score()?.status?;
        (status.valid_until?.0 > first_valid_until).then_some(())
    })
    .await;

    let down_at = jiff::Timestamp::now();
    clusters.managed.faults().refuse_connections(REFUSED_UNTIL_ENDED);
    let failed = eventually("the condition to report the failure", STARTUP, async || {
        let status = clusters.score()?.status?;
        (condition(&status)?.status == "False").then_some(status)
    })
    .await;
    let condition = condition(&failed).expect("condition").clone();
    assert_eq!(condition.reason, "SourceFailed");
    assert!(
        condition.message.contains("source cluster") && condition.message.contains("not renewed"),
        "{}",
        condition.message
    );
    // No renewal computed once the agent knew: validUntil is at most its first word of the failure
    // plus the validity (renewals computed between the cut and that word are legitimate).
    let noticed = agent
        .logs()
        .iter()
        .filter(|l| {
            l["fields"]["source"] == "cluster"
                && l["fields"]["message"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("source not current") || m.starts_with("source failed"))
        })
        .filter_map(|l| l["timestamp"].as_str()?.parse::<jiff::Timestamp>().ok())
        .find(|t| *t >= down_at)
        .expect("the agent logged the source failure");
    let valid_until = failed.valid_until.clone().expect("validUntil").0;
    assert!(
        valid_until.as_second() <= noticed.as_second() + VALIDITY,
        "validUntil {valid_until} was renewed after the agent noticed the failure at {noticed}"
    );
    assert_eq!(
        scores_of(&failed),
        owned(&expected_scores(false)),
        "scores untouched"
    );

    // Let validUntil pass: nothing renews it, the scores stay as they were, now expired.
    let wait = valid_until.as_second() + 2 - jiff::Timestamp::now().as_second();
    tokio::time::sleep(Duration::from_secs(wait.max(0) as u64)).await;
    let expired = clusters.score().expect("still there").status.expect("status");
    assert!(seconds_left(&expired) < 0, "validUntil has passed");
    assert_eq!(
        expired.valid_until.as_ref().map(|t| t.0),
        Some(valid_until),
        "never renewed"
    );
    assert_eq!(
        support::condition(&expired),
        Some(&condition),
        "the failure stays reported"
    );
    let failures = agent
        .metric("ocm_score_agent_source_failures_total{source=\"cluster\"}")
        .await
        .unwrap_or(0.0);
    assert!(failures >= 2.0, "source failures counted ({failures})");
    assert_eq!(agent.get("/healthz").await.0, 200, "the main loop is alive");

    agent.stop().await;
}

/// An agent that cannot reach its hub says so on `/readyz` (a kubelet then marks its pod unready,
/// and the add-on's Deployment unavailable), with the reason, and is ready again once its writes land.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_whose_hub_is_unreachable_turns_unready_and_back() {
    let clusters = Clusters::start("hub-unreachable").await;
    let agent = clusters
        .agent(
            "hub-unreachable",
            &[
                "--refresh-interval=1s",
                "--debounce=200ms",
                "--validity=1m",
                "--min-write-interval=1s",
                "--hub-timeout=2s",
            ],
        )
        .await;
    eventually("/readyz to turn 200", STARTUP, async || {
        (agent.get("/readyz").await.0 == 200).then_some(())
    })
    .await;

    let faults = clusters.hub.faults();
    faults.refuse_connections(REFUSED_UNTIL_ENDED);
    let (_, body) = eventually(
        "/readyz to turn 503 with the hub unreachable",
        STARTUP,
        async || {
            let (code, body) = agent.get("/readyz").await;
            (code == 503).then_some((code, body))
        },
    )
    .await;
    assert!(
        body.contains("writes to the hub failed"),
        "/readyz says why: {body}"
    );
    assert!(
        refused_writes(&agent) >= 3,
        "three refused writes before turning unready"
    );
    assert_eq!(
        agent.get("/healthz").await.0,
        200,
        "alive all along: nothing to restart"
    );

    faults.accept_connections();
    eventually("/readyz to turn 200 once the hub is back", STARTUP, async || {
        (agent.get("/readyz").await.0 == 200).then_some(())
    })
    .await;
}
