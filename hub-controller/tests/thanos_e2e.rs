//! End to end: `ocm-score-hub thanos-scorer` as a process, the API server double as the hub (with
//! the upstream OCM CRDs, so every score written is schema-checked), and a real Prometheus server or
//! a fake query API that fails on demand.

use ocm_score_tests::thanos_scorer;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use ocm_score_api::{AddOnPlacementScoreStatus, Time};
use ocm_score_kube_double::{ApiServer, Gvr, RequestMatch};
use std::time::Duration;
use thanos_scorer::{
    FREE_CPU, FakeMode, FakeQueryApi, MEM_FREE, Prometheus, ScorerProcess, ScrapeTarget, eventually,
    fleet_gauges, require_tools, score_status, scores_of, start_hub, start_hub_with,
};

const SCORE: &str = "thanos-score";

fn pairs(list: &[(&str, i32)]) -> Vec<(String, i32)> {
    let mut v: Vec<(String, i32)> = list.iter().map(|(n, s)| (n.to_string(), *s)).collect();
    v.sort();
    v
}

fn status(server: &ApiServer, cluster: &str) -> Option<AddOnPlacementScoreStatus> {
    score_status(server, cluster, SCORE).flatten()
}

fn valid_until(server: &ApiServer, cluster: &str) -> Option<Timestamp> {
    status(server, cluster)
        .and_then(|s| s.valid_until)
        .map(|Time(t)| t)
}

/// Score writes (create, or status patch) made so far, by any user.
fn score_writes(server: &ApiServer) -> usize {
    server
        .requests()
        .iter()
        .filter(|r| r.resource == "addonplacementscores" && r.is_write())
        .count()
}

fn lease_holder(server: &ApiServer) -> Option<String> {
    let lease = server.object(&Gvr::of::<Lease>(), "ocm-score", "ocm-score-thanos-scorer")?;
    lease["spec"]["holderIdentity"].as_str().map(str::to_owned)
}

/// Waits until the scorer has completed `n` more rounds with this outcome.
async fn rounds(scorer: &ScorerProcess, outcome: &str, n: f64) {
    let name = "ocm_score_thanos_rounds_total";
    let start = scorer.metric(name, &[("outcome", outcome)]).await.unwrap_or(0.0);
    let deadline = std::time::Instant::now() + thanos_scorer::CONVERGE;
    loop {
        let now = scorer.metric(name, &[("outcome", outcome)]).await.unwrap_or(0.0);
        if now >= start + n {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no {n} {outcome} rounds:\n{}",
            scorer.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Leader election for every test here: a Lease far longer than any stall of a loaded machine, so
/// a leader never loses it to a standby while it runs (a stopping leader releases it; nothing here
/// waits for one to expire), and short retries, which the tests do wait on.
const LEADER_ELECTION: &str =
    "leaderElection: {namespace: ocm-score, leaseDuration: 60s, renewDeadline: 40s, retryPeriod: 300ms}";

fn prometheus_config(url: &str) -> String {
    format!(
        "query: {{url: '{url}', timeout: 5s}}
interval: 1s
validity: 4s
renewBefore: 2s
{LEADER_ELECTION}
scores:
  - {{name: cpuFree, query: '{FREE_CPU}'}}
  - {{name: memFree, query: '{MEM_FREE}', normalization: fixed, min: 0, max: 1}}
"
    )
}

/// Tests that start a real Prometheus: `.config/nextest.toml` groups them by this module name, and
/// `OCM_SCORE_SKIP_PROMETHEUS=1` builds them as ignored.
mod real_prometheus {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[cfg_attr(
        skip_prometheus,
        ignore = "OCM_SCORE_SKIP_PROMETHEUS=1: needs a real Prometheus"
    )]
    async fn publishes_renews_and_lets_stopped_clusters_expire() {
        require_tools(&["prometheus"]);
        // Prometheus scrapes the fleet's gauges from the test; c reports until the test stops it.
        let target = ScrapeTarget::start(fleet_gauges(&["a", "b", "c", "d", "e", "ghost"])).await;
        let prometheus = Prometheus::start_scraping(&target).await;
        let hub = start_hub(&["a", "b", "c", "d", "e"]).await;
        let mut scorer = ScorerProcess::start(
            &hub,
            "thanos-scorer-1",
            &prometheus_config(&prometheus.url()),
            &[],
        )
        .await;
        scorer.wait_ready().await;

        // While c reports, it is the fleet's best on free CPU (22 of 2..22).
        eventually("c's scores", || {
            (scores_of(&hub, "c", SCORE)? == pairs(&[("cpuFree", 100), ("memFree", 0)])).then_some(())
        })
        .await;
        assert_eq!(lease_holder(&hub).as_deref(), Some("thanos-scorer-1"));

        // c stops reporting: the next scrape marks its series stale and they leave query results.
        // Now a (12 free) is the best; c's object is left alone and expires.
        target.set(fleet_gauges(&["a", "b", "d", "e", "ghost"]));
        for (cluster, want) in [
            ("a", pairs(&[("cpuFree", 100), ("memFree", 50)])),
            ("b", pairs(&[("cpuFree", -100), ("memFree", -75)])),
            ("d", pairs(&[("cpuFree", 0), ("memFree", 75)])),
        ] {
            eventually("scores without c", || {
                (scores_of(&hub, cluster, SCORE)? == want).then_some(())
            })
            .await;
        }
        let c_until = valid_until(&hub, "c").expect("c has a validUntil");
        eventually("c's scores to expire", || {
            (Timestamp::now() > c_until).then_some(())
        })
        .await;
        let c_status = status(&hub, "c");
        rounds(&scorer, "complete", 3.0).await;
        assert_eq!(
            status(&hub, "c"),
            c_status,
            "c must not be renewed once its series stopped"
        );
        let a_until = valid_until(&hub, "a").expect("a has a validUntil");
        assert!(
            a_until > Timestamp::now(),
            "a keeps being renewed (validUntil {a_until})"
        );
        assert!(a_until > c_until);

        // e's value is NaN, so it never gets scores; the unknown cluster `ghost` neither.
        assert_eq!(score_status(&hub, "e", SCORE), None);
        for reason in ["nan", "unknown_cluster"] {
            let skipped = scorer
                .metric(
                    "ocm_score_thanos_series_skipped_total",
                    &[("score", "cpuFree"), ("reason", reason)],
                )
                .await;
            assert!(
                skipped.is_some_and(|n| n >= 1.0),
                "{reason}: {skipped:?}\n{}",
                scorer.log()
            );
        }
        assert_eq!(
            scorer.metric("ocm_score_thanos_clusters_stale", &[]).await,
            Some(1.0)
        );
        assert_eq!(
            scorer.metric("ocm_score_thanos_clusters_scored", &[]).await,
            Some(3.0)
        );
        assert_eq!(scorer.metric("ocm_score_thanos_leader", &[]).await, Some(1.0));

        // SIGTERM: clean exit, Lease released for the next replica.
        assert_eq!(scorer.terminate().await, Some(0));
        assert_eq!(lease_holder(&hub), None);
    }
}

fn fake_config(url: &str, validity: &str, renew_before: &str, leader: bool) -> String {
    let leader = if leader {
        LEADER_ELECTION
    } else {
        "leaderElection: {enabled: false}"
    };
    format!(
        "query: {{url: '{url}', timeout: 5s, retries: 1}}
interval: 1s
validity: {validity}
renewBefore: {renew_before}
{leader}
scores:
  - {{name: load, query: 'sum by (cluster) (load)', direction: lowerIsBetter}}
"
    )
}

fn samples(list: &[(&str, f64)]) -> Vec<(String, f64)> {
    list.iter().map(|(c, v)| (c.to_string(), *v)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unchanged_fleet_causes_no_writes() {
    let fake = FakeQueryApi::start(FakeMode::Vector(samples(&[("a", 1.0), ("b", 2.0), ("c", 3.0)]))).await;
    let hub = start_hub(&["a", "b", "c"]).await;
    let mut scorer = ScorerProcess::start(
        &hub,
        "thanos-scorer-1",
        &fake_config(&fake.url(), "120s", "60s", false),
        &[],
    )
    .await;
    scorer.wait_ready().await;
    for (cluster, want) in [("a", 100), ("b", 0), ("c", -100)] {
        let got = eventually("the first scores", || scores_of(&hub, cluster, SCORE)).await;
        assert_eq!(got, pairs(&[("load", want)]), "{cluster}");
    }
    // First round: a create and a status write per cluster. Then several rounds with nothing new.
    rounds(&scorer, "complete", 1.0).await;
    let after_first = score_writes(&hub);
    assert_eq!(after_first, 6, "{:?}", hub.requests());
    rounds(&scorer, "complete", 5.0).await;
    assert_eq!(
        score_writes(&hub),
        after_first,
        "no score moved and validUntil is far: nothing to write"
    );

    // One cluster's value moves, but not past the fleet's bounds: only that cluster is written.
    fake.set(FakeMode::Vector(samples(&[("a", 1.0), ("b", 2.5), ("c", 3.0)])));
    eventually("b's new score", || {
        (scores_of(&hub, "b", SCORE)? == pairs(&[("load", -50)])).then_some(())
    })
    .await;
    rounds(&scorer, "complete", 3.0).await;
    assert_eq!(score_writes(&hub), after_first + 1);
    assert_eq!(scorer.terminate().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lagging_cache_does_not_cause_rewrites() {
    let fake = FakeQueryApi::start(FakeMode::ServerError).await;
    let hub = start_hub(&["a", "b", "c"]).await;
    let config = fake_config(&fake.url(), "120s", "60s", false);
    let mut scorer = ScorerProcess::start(&hub, "thanos-scorer-1", &config, &[]).await;
    scorer.wait_ready().await;
    // The score cache goes blind: its watch is cut and cannot come back for now.
    for verb in ["watch", "list"] {
        hub.faults().fail_next(
            100_000,
            RequestMatch::any().verb(verb).resource("addonplacementscores"),
            500,
        );
    }
    hub.faults().cut_watches();
    fake.set(FakeMode::Vector(samples(&[("a", 1.0), ("b", 2.0), ("c", 3.0)])));
    eventually("the first scores", || scores_of(&hub, "c", SCORE)).await;
    rounds(&scorer, "complete", 4.0).await;
    assert_eq!(
        score_writes(&hub),
        6,
        "what was written is not written again while the cache lags"
    );
    // The watch comes back and the cache catches up: still nothing to write.
    hub.faults().clear();
    rounds(&scorer, "complete", 4.0).await;
    assert_eq!(score_writes(&hub), 6);
    assert_eq!(scorer.terminate().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_queries_publish_nothing_and_the_scorer_keeps_running() {
    let fake = FakeQueryApi::start(FakeMode::Vector(samples(&[("a", 1.0), ("b", 3.0)]))).await;
    let hub = start_hub(&["a", "b"]).await;
    let mut scorer = ScorerProcess::start(
        &hub,
        "thanos-scorer-1",
        &fake_config(&fake.url(), "4s", "2s", false),
        &[],
    )
    .await;
    scorer.wait_ready().await;
    eventually("a's first score", || {
        (scores_of(&hub, "a", SCORE)? == pairs(&[("load", 100)])).then_some(())
    })
    .await;
    eventually("b's first score", || {
        (scores_of(&hub, "b", SCORE)? == pairs(&[("load", -100)])).then_some(())
    })
    .await;
    let good = (status(&hub, "a"), status(&hub, "b"));

    // An answer that never comes is the query timeout's business, tested on the paused clock
    // (thanos_prometheus.rs: a_query_that_never_answers_times_out_twice_on_our_clock).
    let faults = [
        ("http_status", FakeMode::ServerError),
        ("malformed", FakeMode::Malformed),
        (
            "malformed",
            FakeMode::Truncated(samples(&[("a", 9.0), ("b", 1.0)])),
        ),
        // Only a answered: normalized alone it would be 0. It must not be published.
        ("partial_response", FakeMode::Partial(samples(&[("a", 9.0)]))),
    ];
    let writes_before = score_writes(&hub);
    for (kind, mode) in faults {
        let labels = [("score", "load"), ("kind", kind)];
        let before = scorer
            .metric("ocm_score_thanos_query_errors_total", &labels)
            .await
            .unwrap_or(0.0);
        fake.set(mode.clone());
        // Two more errors of this kind: the scorer met this fault (a round already under way when
        // the mode changed may still fail the previous way, so rounds alone would not say).
        let deadline = std::time::Instant::now() + thanos_scorer::CONVERGE;
        loop {
            let now = scorer
                .metric("ocm_score_thanos_query_errors_total", &labels)
                .await
                .unwrap_or(0.0);
            if now >= before + 2.0 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{mode:?} is not counted as {kind} ({before} → {now}):\n{}",
                scorer.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(
            scorer.running(),
            "the scorer must survive {mode:?}:\n{}",
            scorer.log()
        );
        assert_eq!(
            score_writes(&hub),
            writes_before,
            "nothing may be written during {mode:?}"
        );
    }
    // Not renewed through the outage: the last good scores stay untouched until they expire.
    let a_until = valid_until(&hub, "a").expect("validUntil");
    eventually("a's scores to expire", || {
        (Timestamp::now() > a_until).then_some(())
    })
    .await;
    // The last fault is a partial answer, a round outcome of its own.
    rounds(&scorer, "partial_response", 1.0).await;
    assert_eq!((status(&hub, "a"), status(&hub, "b")), good);
    assert_eq!(score_writes(&hub), writes_before);
    assert_eq!(scorer.get("/healthz").await.map(|(code, _)| code), Some(200));

    // The API recovers with new values: published at once, with a fresh validUntil.
    fake.set(FakeMode::Vector(samples(&[("a", 5.0), ("b", 1.0)])));
    // One write per cluster: wait for both, not for a and then look at b.
    eventually("recovered scores", || {
        (scores_of(&hub, "a", SCORE)? == pairs(&[("load", -100)])
            && scores_of(&hub, "b", SCORE)? == pairs(&[("load", 100)]))
        .then_some(())
    })
    .await;
    assert!(valid_until(&hub, "a").is_some_and(|t| t > Timestamp::now()));
    assert_eq!(scorer.terminate().await, Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn of_two_replicas_only_the_leader_writes() {
    let fake = FakeQueryApi::start(FakeMode::Vector(samples(&[("a", 1.0), ("b", 2.0)]))).await;
    let hub = start_hub(&["a", "b"]).await;
    // Short validity so the leader writes renewals all the time.
    let config = fake_config(&fake.url(), "3s", "2s", true);
    let mut first = ScorerProcess::start(&hub, "replica-1", &config, &[]).await;
    first.wait_ready().await;
    eventually("replica-1 to lead", || {
        (lease_holder(&hub)? == "replica-1").then_some(())
    })
    .await;
    let mut second = ScorerProcess::start(&hub, "replica-2", &config, &[]).await;
    second.wait_ready().await;
    rounds(&second, "not_leader", 3.0).await;
    rounds(&first, "complete", 3.0).await;
    let writers = |hub: &ApiServer| -> Vec<String> {
        let mut users: Vec<String> = hub
            .requests()
            .iter()
            .filter(|r| r.resource == "addonplacementscores" && r.is_write())
            .map(|r| r.user.clone())
            .collect();
        users.sort();
        users.dedup();
        users
    };
    assert_eq!(writers(&hub), vec!["replica-1".to_owned()]);
    assert_eq!(second.metric("ocm_score_thanos_leader", &[]).await, Some(0.0));

    // The leader stops and releases the Lease: the standby takes over and keeps scores fresh.
    assert_eq!(first.terminate().await, Some(0));
    eventually("replica-2 to lead", || {
        (lease_holder(&hub)? == "replica-2").then_some(())
    })
    .await;
    hub.reset_requests();
    eventually("replica-2 to renew the scores", || {
        writers(&hub).contains(&"replica-2".to_owned()).then_some(())
    })
    .await;
    assert_eq!(writers(&hub), vec!["replica-2".to_owned()]);
    assert_eq!(second.terminate().await, Some(0));
}

/// The scorer's RBAC as shipped: the ClusterRole, Role and bindings of `manifests/thanos-scorer`
/// (the chart rendered), binding the ServiceAccount `ocm-score/ocm-score-thanos-scorer`.
fn shipped_rbac() -> Vec<serde_json::Value> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/thanos-scorer");
    let mut out = Vec::new();
    for file in [
        "thanos-scorer-cluster-role.yaml",
        "thanos-scorer-leader-election-rbac.yaml",
    ] {
        let path = dir.join(file);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        out.extend(ocm_score_kube_double::parse_objects(file, &text).expect("YAML"));
    }
    assert_eq!(out.len(), 4, "a ClusterRole, a Role and their bindings");
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_with_least_privilege() {
    let user = "system:serviceaccount:ocm-score:ocm-score-thanos-scorer";
    let fake = FakeQueryApi::start(FakeMode::Vector(samples(&[("a", 1.0), ("b", 2.0)]))).await;
    let hub = start_hub_with(&["a", "b"], true).await;
    for object in shipped_rbac() {
        hub.create(object).expect("creating RBAC objects");
    }
    let config = fake_config(&fake.url(), "3s", "2s", true);
    let mut scorer = ScorerProcess::start(&hub, user, &config, &[]).await;
    scorer.wait_ready().await;
    eventually("a's score", || {
        (scores_of(&hub, "a", SCORE)? == pairs(&[("load", 100)])).then_some(())
    })
    .await;
    eventually("b's score", || {
        (scores_of(&hub, "b", SCORE)? == pairs(&[("load", -100)])).then_some(())
    })
    .await;
    // Renewals (status writes) go through too.
    rounds(&scorer, "complete", 3.0).await;
    let forbidden: Vec<_> = hub
        .requests()
        .into_iter()
        .filter(|r| r.user == user && r.code == 403)
        .collect();
    assert_eq!(
        forbidden,
        vec![],
        "every request the scorer makes must be allowed by its role"
    );
    assert_eq!(lease_holder(&hub).as_deref(), Some(user));
    assert_eq!(scorer.terminate().await, Some(0));
}

#[tokio::test]
async fn a_bad_configuration_exits_2_naming_the_field() {
    let dir = thanos_scorer::TempDir::new("thanos-config");
    let config = dir.path().join("config.yaml");
    let cases: &[(&str, &[&str], &str)] = &[
        ("scores: [{name: a, query: x}]\n", &[], "query.url"),
        (
            "query: {url: 'http://127.0.0.1:9'}\nscores: [{name: a, query: x}]\n",
            &["--validity", "10s"],
            "--validity",
        ),
        (
            "query: {url: 'http://127.0.0.1:9'}\nscores: [{name: a, query: x, normalization: fixed, min: 3, max: 1}]\n",
            &[],
            "scores[0].max",
        ),
        (
            "query: {url: 'http://127.0.0.1:9'}\nscorez: []\n",
            &[],
            "unknown field `scorez`",
        ),
        (
            "query: {url: 'http://127.0.0.1:9'}\nscores: [{name: a, query: x}]\n",
            &["--ca-file", "/nonexistent/ca.pem"],
            "--ca-file",
        ),
    ];
    for (yaml, flags, field) in cases {
        std::fs::write(&config, yaml).expect("writing config");
        let output = tokio::process::Command::new(env!("CARGO_BIN_EXE_ocm-score-hub"))
            .arg("thanos-scorer")
            .arg("--config")
            .arg(&config)
            .args(*flags)
            .output()
            .await
            .expect("running ocm-score-hub");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{yaml} {flags:?}: {stderr}");
        assert!(
            stderr.contains(field),
            "{yaml} {flags:?} should name {field}: {stderr}"
        );
    }
}
