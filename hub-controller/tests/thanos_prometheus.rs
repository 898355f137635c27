//! The scorer's query → map → normalize → plan pipeline against a real Prometheus server with
//! backfilled data, and against a fake query API that fails in every way a Thanos endpoint can.
//!
//! Backfilled data spans ten minutes either side of the test's start, so rounds can be evaluated at
//! chosen instants (`query_all(at)`) without waiting for time to pass.

use ocm_score_tests::thanos_scorer;

use jiff::Timestamp;
use ocm_score_api::{AddOnPlacementScore, ManagedCluster, ObjectMeta, Time};
use ocm_score_hub::thanos::{
    config::{Config, ConfigFile, ThanosScorerArgs},
    diff::{CurrentScores, PlannedWrite, WriteReason},
    fleet::SkipReason,
    metrics::Metrics,
    response::VectorSample,
    scorer::{RoundPlan, Scorer, count_expired},
};
use std::{collections::BTreeMap, sync::Arc, time::Duration};
use thanos_scorer::{
    FREE_CPU, FakeMode, FakeQueryApi, MEM_FREE, Prometheus, REQUEST_RATE, TempDir, TestPki, fleet_data,
    require_prometheus, require_tools,
};

fn start_time() -> i64 {
    Timestamp::now().as_second()
}

fn at(t0: i64, offset: i64) -> Timestamp {
    Timestamp::from_second(t0 + offset).expect("valid time")
}

fn config(url: &str, extra_yaml: &str) -> Config {
    let yaml = format!(
        "query: {{url: '{url}', timeout: 10s, retries: 1}}
leaderElection: {{enabled: false}}
interval: 60s
validity: 180s
{extra_yaml}
scores:
  - name: cpuFree
    query: '{FREE_CPU}'
  - name: requestRate
    query: '{REQUEST_RATE}'
    direction: lowerIsBetter
  - name: memFree
    query: '{MEM_FREE}'
    normalization: fixed
    min: 0
    max: 1
"
    );
    let file: ConfigFile = serde_norway::from_str(&yaml).expect("test config parses");
    Config::from_parts(&ThanosScorerArgs::default(), file).expect("test config is valid")
}

fn managed(names: &[&str]) -> Vec<Arc<ManagedCluster>> {
    names
        .iter()
        .map(|n| {
            Arc::new(ManagedCluster {
                metadata: ObjectMeta {
                    name: Some(n.to_string()),
                    ..Default::default()
                },
                ..Default::default()
            })
        })
        .collect()
}

fn scores(write: &PlannedWrite) -> BTreeMap<String, i32> {
    write
        .status
        .scores
        .iter()
        .map(|s| (s.name.clone(), s.value))
        .collect()
}

fn by_cluster(writes: &[PlannedWrite]) -> BTreeMap<String, &PlannedWrite> {
    writes.iter().map(|w| (w.cluster.clone(), w)).collect()
}

fn expect(pairs: &[(&str, i32)]) -> BTreeMap<String, i32> {
    pairs.iter().map(|(n, v)| (n.to_string(), *v)).collect()
}

fn apply(current: &mut CurrentScores, writes: &[PlannedWrite]) {
    for w in writes {
        let object = AddOnPlacementScore {
            metadata: ObjectMeta {
                name: Some("thanos-score".into()),
                namespace: Some(w.cluster.clone()),
                ..Default::default()
            },
            status: Some(w.status.clone()),
        };
        current.insert(w.cluster.clone(), Arc::new(object));
    }
}

#[tokio::test]
async fn failing_query_apis_make_rounds_publish_nothing() {
    let fake = FakeQueryApi::start(FakeMode::ServerError).await;
    let dir = TempDir::new("thanos-token");
    let token = dir.path().join("token");
    std::fs::write(&token, "s3cret-token\n").expect("token file");
    let mut config = config(&fake.url(), "");
    // Generous for a loaded machine: only the answer that never comes may time out.
    config.query.timeout = Duration::from_secs(5);
    config.query.bearer_token_file = Some(token);
    let metrics = Arc::new(Metrics::new());
    let scorer = Scorer::new(config, metrics.clone()).expect("client builds");
    let clusters = managed(&["a", "b"]);
    let samples = vec![("a".to_owned(), 1.0), ("b".to_owned(), 2.0)];
    let now = Timestamp::now();

    // A query that never answers: `a_query_that_never_answers_times_out_twice_on_our_clock`.
    let modes = [
        ("http_status", FakeMode::ServerError),
        ("malformed", FakeMode::Malformed),
        ("malformed", FakeMode::Truncated(samples.clone())),
        ("partial_response", FakeMode::Partial(vec![("a".to_owned(), 1.0)])),
    ];
    for (kind, mode) in modes {
        fake.set(mode.clone());
        let before = fake.requests();
        let answers = scorer.query_all(now).await;
        for answer in &answers {
            let error = answer.as_ref().expect_err("a failing API gives no samples");
            assert_eq!(error.kind(), kind, "{mode:?}: {error}");
        }
        // One retry per query (retries: 1) for these transient failures.
        assert_eq!(
            fake.requests(),
            before + 2 * answers.len(),
            "{mode:?} must be retried once per query"
        );
        let plan = scorer.plan(answers, &clusters, &CurrentScores::new(), now);
        let refused = match &plan {
            RoundPlan::QueryFailed { failed } => failed.len(),
            RoundPlan::PartialResponse { partial } if kind == "partial_response" => partial.len(),
            RoundPlan::PartialResponse { .. } | RoundPlan::Ready { .. } => 0,
        };
        assert_eq!(refused, 3, "{mode:?}: {plan:?}");
    }
    assert!(
        metrics
            .render()
            .contains(r#"ocm_score_thanos_query_errors_total{score="cpuFree",kind="partial_response"} 1"#)
    );

    // A healthy answer again: the same scorer scores as usual, and the token went along every time.
    fake.set(FakeMode::Vector(samples));
    let plan = scorer.plan(scorer.query_all(now).await, &clusters, &CurrentScores::new(), now);
    let RoundPlan::Ready { writes, .. } = plan else {
        panic!("healthy API: {plan:?}")
    };
    assert_eq!(writes.len(), 2);
    let auth = fake.authorizations();
    assert!(
        !auth.is_empty() && auth.iter().all(|a| a == "Bearer s3cret-token"),
        "{auth:?}"
    );
}

/// The query timeout and the retry's backoff are ours, so Tokio's paused clock runs them: the fake API
/// holds each answer for an hour, and the round gives up after two timeouts per query at once.
#[tokio::test(start_paused = true)]
async fn a_query_that_never_answers_times_out_twice_on_our_clock() {
    let samples = vec![("a".to_owned(), 1.0), ("b".to_owned(), 2.0)];
    let fake = FakeQueryApi::start(FakeMode::Slow(Duration::from_secs(3600), samples)).await;
    let mut config = config(&fake.url(), "");
    config.query.timeout = Duration::from_secs(5);
    let metrics = Arc::new(Metrics::new());
    let scorer = Scorer::new(config, metrics.clone()).expect("client builds");
    let now = Timestamp::now();

    let started = tokio::time::Instant::now();
    let answers = scorer.query_all(now).await;
    for answer in &answers {
        let error = answer
            .as_ref()
            .expect_err("an API that never answers gives no samples");
        assert_eq!(error.kind(), "timeout", "{error}");
    }
    // One retry per query (retries: 1), each attempt given up after the 5 s timeout.
    assert_eq!(fake.requests(), 2 * answers.len());
    assert!(
        started.elapsed() >= Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    let plan = scorer.plan(answers, &managed(&["a", "b"]), &CurrentScores::new(), now);
    assert!(
        matches!(plan, RoundPlan::QueryFailed { ref failed } if failed.len() == 3),
        "{plan:?}"
    );
    assert!(
        metrics
            .render()
            .contains(r#"ocm_score_thanos_query_errors_total{score="cpuFree",kind="timeout"} 1"#)
    );
}

/// Tests that start a real Prometheus: `.config/nextest.toml` groups them by this module name, and
/// `OCM_SCORE_SKIP_PROMETHEUS=1` builds them as ignored.
mod real_prometheus {
    use super::*;

    #[tokio::test]
    #[cfg_attr(
        skip_prometheus,
        ignore = "OCM_SCORE_SKIP_PROMETHEUS=1: needs a real Prometheus"
    )]
    async fn fleet_scores_match_hand_computed_normalization() {
        require_prometheus();
        let t0 = start_time();
        let prometheus = Prometheus::start(&fleet_data(t0, 600), "5m").await;
        let metrics = Arc::new(Metrics::new());
        let scorer = Scorer::new(config(&prometheus.url(), ""), metrics.clone()).expect("client builds");
        let now = at(t0, 30);

        let answers = scorer.query_all(now).await;
        for answer in &answers {
            assert!(answer.is_ok(), "query failed: {answer:?}\n{}", prometheus.log());
        }
        let plan = scorer.plan(
            answers,
            &managed(&["a", "b", "c", "d", "e"]),
            &CurrentScores::new(),
            now,
        );
        let RoundPlan::Ready { fleet, writes, .. } = plan else {
            panic!("all queries succeeded: {plan:?}")
        };
        let writes = by_cluster(&writes);

        // cpuFree = allocatable − requests: a 12, b 2, c 22, d 7 → fleet bounds 2..22 (ghost's 99 and
        // e's NaN are not part of the fleet).
        // requestRate (lower is better) = slopes a 1, b 2, c 4.5, d 7 → 200·(7 − v)/6 − 100.
        // memFree fixed 0..1: a 0.75, b 0.125, c 0.5, d 0.875 → 200·v − 100.
        assert_eq!(
            scores(writes["a"]),
            expect(&[("cpuFree", 0), ("requestRate", 100), ("memFree", 50)])
        );
        assert_eq!(
            scores(writes["b"]),
            expect(&[("cpuFree", -100), ("requestRate", 66), ("memFree", -75)])
        );
        assert_eq!(
            scores(writes["c"]),
            expect(&[("cpuFree", 100), ("requestRate", -16), ("memFree", 0)])
        );
        assert_eq!(
            scores(writes["d"]),
            expect(&[("cpuFree", -50), ("requestRate", -100), ("memFree", 75)])
        );
        assert_eq!(
            writes.len(),
            4,
            "e (NaN) and ghost (unknown) get nothing: {:?}",
            writes.keys()
        );
        for write in writes.values() {
            assert_eq!(write.reason, WriteReason::Create);
            // validUntil counts from the newest sample behind the scores (every series has one at
            // t0+30, the evaluation instant).
            assert_eq!(write.status.valid_until, Some(Time(at(t0, 30 + 180))));
        }

        let skipped = |score: &str, reason| {
            fleet
                .skipped
                .get(&(score.to_owned(), reason))
                .copied()
                .unwrap_or(0)
        };
        assert_eq!(skipped("cpuFree", SkipReason::NotANumber), 1);
        for score in ["cpuFree", "requestRate", "memFree"] {
            assert_eq!(skipped(score, SkipReason::UnknownCluster), 1, "{score}");
        }
        let text = metrics.render();
        assert!(
            text.contains(r#"ocm_score_thanos_series_skipped_total{score="cpuFree",reason="nan"} 1"#),
            "{text}"
        );
        assert!(text.contains(
            r#"ocm_score_thanos_series_skipped_total{score="memFree",reason="unknown_cluster"} 1"#
        ));
        assert!(text.contains(r#"ocm_score_thanos_query_duration_seconds_count{score="cpuFree"} 1"#));
    }

    #[tokio::test]
    #[cfg_attr(
        skip_prometheus,
        ignore = "OCM_SCORE_SKIP_PROMETHEUS=1: needs a real Prometheus"
    )]
    async fn label_and_claim_mapping_against_real_results() {
        require_prometheus();
        let t0 = start_time();
        let prometheus = Prometheus::start(&fleet_data(t0, 600), "5m").await;
        let now = at(t0, 30);
        let labelled = |name: &str, value: &str| {
            Arc::new(ManagedCluster {
                metadata: ObjectMeta {
                    name: Some(name.into()),
                    labels: Some([("metrics.example.com/cluster".to_owned(), value.to_owned())].into()),
                    ..Default::default()
                },
                ..Default::default()
            })
        };
        // prod-1 and prod-2 both claim "d": ambiguous, so neither is scored from d's series.
        let clusters = vec![
            labelled("prod-a", "a"),
            labelled("prod-b", "b"),
            labelled("prod-1", "d"),
            labelled("prod-2", "d"),
        ];
        let scorer = Scorer::new(
            config(
                &prometheus.url(),
                "clusterMapping: 'label:metrics.example.com/cluster'",
            ),
            Arc::new(Metrics::new()),
        )
        .expect("client builds");
        let plan = scorer.plan(scorer.query_all(now).await, &clusters, &CurrentScores::new(), now);
        let RoundPlan::Ready { fleet, writes, .. } = plan else {
            panic!("queries succeed: {plan:?}")
        };
        let writes = by_cluster(&writes);
        assert_eq!(
            writes.keys().cloned().collect::<Vec<_>>(),
            vec!["prod-a".to_owned(), "prod-b".to_owned()]
        );
        // Only a (12 free) and b (2 free) are in the fleet now.
        assert_eq!(scores(writes["prod-a"])["cpuFree"], 100);
        assert_eq!(scores(writes["prod-b"])["cpuFree"], -100);
        assert_eq!(
            fleet
                .skipped
                .get(&("cpuFree".to_owned(), SkipReason::AmbiguousCluster)),
            Some(&1)
        );
    }

    #[tokio::test]
    #[cfg_attr(
        skip_prometheus,
        ignore = "OCM_SCORE_SKIP_PROMETHEUS=1: needs a real Prometheus"
    )]
    async fn a_cluster_whose_series_stop_is_not_renewed_and_expires() {
        require_prometheus();
        let t0 = start_time();
        // c's last samples are at t0+55; with a 30 s lookback it leaves results after t0+85.
        let prometheus = Prometheus::start(&fleet_data(t0, 60), "30s").await;
        let scorer =
            Scorer::new(config(&prometheus.url(), ""), Arc::new(Metrics::new())).expect("client builds");
        let clusters = managed(&["a", "b", "c", "d"]);
        let mut current = CurrentScores::new();

        let round = |now: Timestamp, current: &CurrentScores| {
            let scorer = &scorer;
            let clusters = &clusters;
            let current = current.clone();
            async move {
                match scorer.plan(scorer.query_all(now).await, clusters, &current, now) {
                    RoundPlan::Ready { writes, .. } => writes,
                    failed => panic!("queries succeed: {failed:?}"),
                }
            }
        };

        let first = round(at(t0, 10), &current).await;
        assert_eq!(first.len(), 4);
        apply(&mut current, &first);
        let c_valid_until = current["c"]
            .status
            .as_ref()
            .and_then(|s| s.valid_until.clone())
            .expect("validUntil");
        assert_eq!(c_valid_until, Time(at(t0, 190)));

        // 40 s later nothing moved and 140 s of validity are left: no writes at all.
        assert_eq!(round(at(t0, 50), &current).await, vec![]);

        // At t0+150 c has left the results. The fleet's cpu maximum is now a (12): the others' scores
        // move, c is not renewed.
        let later = round(at(t0, 150), &current).await;
        let later_by = by_cluster(&later);
        assert!(!later_by.contains_key("c"), "c must not be renewed: {later:?}");
        assert_eq!(scores(later_by["a"])["cpuFree"], 100);
        assert_eq!(scores(later_by["b"])["cpuFree"], -100);
        assert_eq!(scores(later_by["d"])["cpuFree"], 0);
        apply(&mut current, &later);

        // Past c's validUntil only c has expired; the others were renewed from fresh samples.
        let after = at(t0, 200);
        assert_eq!(count_expired(&current, after), 1);
        assert_eq!(
            current["c"].status.as_ref().and_then(|s| s.valid_until.clone()),
            Some(c_valid_until)
        );
        assert_eq!(
            current["a"].status.as_ref().and_then(|s| s.valid_until.clone()),
            Some(Time(at(t0, 330)))
        );
        assert!(!by_cluster(&round(after, &current).await).contains_key("c"));
    }

    /// With Prometheus' default 5-minute lookback a stopped series keeps answering instant queries,
    /// stamped with the evaluation time; its scores must still date from its last sample.
    #[tokio::test]
    #[cfg_attr(
        skip_prometheus,
        ignore = "OCM_SCORE_SKIP_PROMETHEUS=1: needs a real Prometheus"
    )]
    async fn a_stopped_cluster_expires_one_validity_after_its_last_sample_despite_the_lookback() {
        require_prometheus();
        let t0 = start_time();
        // c's last samples are at t0+50 (one every 5 s); the lookback keeps them in results until
        // t0+350.
        let prometheus = Prometheus::start(&fleet_data(t0, 55), "5m").await;
        let scorer =
            Scorer::new(config(&prometheus.url(), ""), Arc::new(Metrics::new())).expect("client builds");
        let clusters = managed(&["a", "b", "c", "d"]);
        let cluster_sample = |samples: &[VectorSample], cluster: &str| {
            samples
                .iter()
                .find(|s| s.labels.get("cluster").map(String::as_str) == Some(cluster))
                .cloned()
        };
        let valid_until = |write: &PlannedWrite| write.status.valid_until.clone();

        // At t0+150 c still answers the cpuFree and memFree queries, from samples 100 s old.
        let answers = scorer.query_all(at(t0, 150)).await;
        for score in [0, 2] {
            let samples = &answers[score].as_ref().expect("queries succeed").samples;
            let c = cluster_sample(samples, "c").expect("c is within the lookback");
            assert_eq!(
                c.timestamp,
                at(t0, 50),
                "score {score}: c dates from its last sample"
            );
            let a = cluster_sample(samples, "a").expect("a reports");
            assert_eq!(a.timestamp, at(t0, 150), "score {score}: a is current");
        }
        let mut current = CurrentScores::new();
        let RoundPlan::Ready { writes, .. } = scorer.plan(answers, &clusters, &current, at(t0, 150)) else {
            panic!("queries succeed")
        };
        let first = by_cluster(&writes);
        assert_eq!(valid_until(first["c"]), Some(Time(at(t0, 50 + 180))));
        assert_eq!(valid_until(first["a"]), Some(Time(at(t0, 150 + 180))));
        apply(&mut current, &writes);

        // At t0+240 c's samples are still in the results, but a score from them would already have
        // expired: c is skipped and left to expire, at t0+230 rather than t0+530.
        let now = at(t0, 240);
        let RoundPlan::Ready { fleet, writes, .. } =
            scorer.plan(scorer.query_all(now).await, &clusters, &current, now)
        else {
            panic!("queries succeed")
        };
        assert!(!fleet.clusters.contains_key("c"), "{fleet:?}");
        assert!(!by_cluster(&writes).contains_key("c"), "{writes:?}");
        assert_eq!(
            fleet.skipped.get(&("cpuFree".to_owned(), SkipReason::Stale)),
            Some(&1)
        );
        apply(&mut current, &writes);
        assert_eq!(count_expired(&current, now), 1);
        assert_eq!(
            current["c"].status.as_ref().and_then(|s| s.valid_until.clone()),
            Some(Time(at(t0, 230)))
        );
    }

    #[tokio::test]
    #[cfg_attr(
        skip_prometheus,
        ignore = "OCM_SCORE_SKIP_PROMETHEUS=1: needs a real Prometheus"
    )]
    async fn error_answers_name_the_problem() {
        require_prometheus();
        let t0 = start_time();
        let prometheus = Prometheus::start(&fleet_data(t0, 600), "5m").await;
        let yaml = format!(
            "query: {{url: '{}'}}\nleaderElection: {{enabled: false}}\nscores:\n  - {{name: broken, query: 'sum by (cluster) (('}}\n  - {{name: scalar, query: 'scalar(vector(1))'}}\n",
            prometheus.url()
        );
        let file: ConfigFile = serde_norway::from_str(&yaml).expect("parses");
        let config = Config::from_parts(&ThanosScorerArgs::default(), file).expect("valid");
        let scorer = Scorer::new(config, Arc::new(Metrics::new())).expect("client builds");
        let answers = scorer.query_all(at(t0, 0)).await;
        let broken = answers[0].as_ref().expect_err("a PromQL syntax error");
        assert_eq!(broken.kind(), "api_error");
        assert!(broken.to_string().contains("bad_data"), "{broken}");
        let scalar = answers[1].as_ref().expect_err("a scalar is not a fleet vector");
        assert_eq!(scalar.kind(), "not_a_vector");
    }

    #[tokio::test]
    #[cfg_attr(
        skip_prometheus,
        ignore = "OCM_SCORE_SKIP_PROMETHEUS=1: needs a real Prometheus"
    )]
    async fn tls_with_a_ca_bundle_client_certificate_and_server_name() {
        require_tools(&["prometheus", "promtool"]);
        let dir = TempDir::new("thanos-pki");
        // The certificate names prometheus.test, not the 127.0.0.1 we connect to.
        let pki = TestPki::create(dir.path(), "prometheus.test");
        let t0 = start_time();
        let prometheus = Prometheus::start_tls(&fleet_data(t0, 600), "5m", &pki).await;
        let clusters = managed(&["a", "b", "c", "d"]);
        let now = at(t0, 30);
        let tls_config = |name: Option<&str>, client_cert: bool| {
            let mut config = config(&prometheus.url(), "");
            config.query.ca_file = Some(pki.ca.clone());
            config.query.tls_server_name = name.map(str::to_owned);
            if client_cert {
                config.query.client_cert_file = Some(pki.client_cert.clone());
                config.query.client_key_file = Some(pki.client_key.clone());
            }
            config.query.retries = 0;
            config
        };

        let scorer = Scorer::new(
            tls_config(Some("prometheus.test"), true),
            Arc::new(Metrics::new()),
        )
        .expect("client builds");
        let plan = scorer.plan(scorer.query_all(now).await, &clusters, &CurrentScores::new(), now);
        let RoundPlan::Ready { writes, .. } = plan else {
            panic!("TLS queries succeed: {plan:?}\n{}", prometheus.log())
        };
        assert_eq!(scores(by_cluster(&writes)["c"])["cpuFree"], 100);

        // Without the server name the certificate does not match 127.0.0.1; without the client
        // certificate Prometheus refuses the handshake.
        for (name, client_cert) in [(None, true), (Some("prometheus.test"), false)] {
            let scorer =
                Scorer::new(tls_config(name, client_cert), Arc::new(Metrics::new())).expect("client builds");
            for answer in scorer.query_all(now).await {
                let error = answer.expect_err("the TLS handshake must fail");
                assert_eq!(error.kind(), "transport", "{name:?} {client_cert}: {error}");
            }
        }
    }
}
