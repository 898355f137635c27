//! The scorer against a real Thanos: a Thanos Querier over the Sidecars of three real Prometheus
//! servers, two of them an HA pair holding clusters a–c (external label `replica` A and B), the third
//! holding d, e and ghost (see `thanos_scorer::fleet`). The fleet data is that of
//! `thanos_prometheus.rs`, so a deduplicated Thanos must score exactly as one Prometheus holding it
//! all does there.

use ocm_score_tests::thanos_scorer;

use jiff::Timestamp;
use ocm_score_api::{ManagedCluster, ObjectMeta};
use ocm_score_hub::thanos::{
    client::Answer,
    config::{Config, ConfigFile, ThanosScorerArgs},
    diff::{CurrentScores, PlannedWrite},
    metrics::Metrics,
    response::SampleValue,
    scorer::{RoundPlan, Scorer},
};
use std::{collections::BTreeMap, sync::Arc};
use thanos_scorer::{FREE_CPU, FakeMode, FakeQueryApi, MEM_FREE, REQUEST_RATE};

fn at(t0: i64, offset: i64) -> Timestamp {
    Timestamp::from_second(t0 + offset).expect("valid time")
}

/// The scores of `thanos_prometheus.rs`; `query` adds settings to the `query:` section.
fn config(url: &str, query: &str) -> Config {
    let yaml = format!(
        "query: {{url: '{url}', timeout: 10s, retries: 1{query}}}
leaderElection: {{enabled: false}}
interval: 60s
validity: 180s
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

fn scorer(url: &str, query: &str) -> Scorer {
    Scorer::new(config(url, query), Arc::new(Metrics::new())).expect("client builds")
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

/// Score values by cluster, then score name.
fn scores(writes: &[PlannedWrite]) -> BTreeMap<String, BTreeMap<String, i32>> {
    writes
        .iter()
        .map(|w| {
            let scores = w
                .status
                .scores
                .iter()
                .map(|s| (s.name.clone(), s.value))
                .collect();
            (w.cluster.clone(), scores)
        })
        .collect()
}

fn expect(rows: &[(&str, &[(&str, i32)])]) -> BTreeMap<String, BTreeMap<String, i32>> {
    rows.iter()
        .map(|(cluster, scores)| {
            let scores = scores.iter().map(|(n, v)| (n.to_string(), *v)).collect();
            (cluster.to_string(), scores)
        })
        .collect()
}

/// Query values by cluster of one answer.
fn values(answer: &Answer) -> BTreeMap<String, f64> {
    answer
        .samples
        .iter()
        .filter_map(|s| match s.value {
            SampleValue::Float(v) => Some((s.labels.get("cluster")?.clone(), v)),
            SampleValue::Histogram => None,
        })
        .collect()
}

/// Equal up to floating-point rounding: Thanos evaluates PromQL with a newer engine than Debian's
/// Prometheus, whose `rate()` may differ in the last bit (0.09999999999999999 for 0.1).
fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The scores of the whole fleet ([`thanos_scorer::FLEET_SCORES`]).
fn whole_fleet_scores() -> BTreeMap<String, BTreeMap<String, i32>> {
    expect(thanos_scorer::FLEET_SCORES)
}

#[tokio::test]
async fn thanos_parameters_are_sent_as_configured() {
    let fake = FakeQueryApi::start(FakeMode::Vector(vec![("a".to_owned(), 1.0)])).await;
    let sent = |scorer: Scorer| {
        let fake = &fake;
        async move {
            let before = fake.forms().len();
            for answer in scorer.query_all(Timestamp::now()).await {
                answer.expect("the fake answers");
            }
            let forms = fake.forms();
            let form = forms.get(before).expect("a request").clone();
            let thanos: Vec<(String, String)> = form
                .into_iter()
                .filter(|(k, _)| ["partial_response", "dedup", "max_source_resolution"].contains(&k.as_str()))
                .collect();
            thanos
        }
    };
    let pairs = |list: &[(&str, &str)]| -> Vec<(String, String)> {
        list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    };
    // By default Thanos may answer partially (the scorer then sees which stores are missing, and
    // refuses the answer) and deduplicates HA replicas; the querier's own resolution default holds.
    assert_eq!(
        sent(scorer(&fake.url(), "")).await,
        pairs(&[("partial_response", "true"), ("dedup", "true")])
    );
    assert_eq!(
        sent(scorer(
            &fake.url(),
            ", partialResponse: false, dedup: false, maxSourceResolution: 5m"
        ))
        .await,
        pairs(&[
            ("partial_response", "false"),
            ("dedup", "false"),
            ("max_source_resolution", "300s")
        ])
    );
    assert_eq!(
        sent(scorer(&fake.url(), ", maxSourceResolution: auto")).await,
        pairs(&[
            ("partial_response", "true"),
            ("dedup", "true"),
            ("max_source_resolution", "auto")
        ])
    );
}

/// Tests that start real Prometheus servers (and Thanos): `.config/nextest.toml` runs the tests of
/// modules with this name one at a time, and `OCM_SCORE_SKIP_PROMETHEUS=1` builds them as ignored.
mod real_prometheus {
    use super::*;
    use thanos_scorer::fleet::{HA_CLUSTERS, Store, ThanosFleet};
    use thanos_scorer::{ScorerProcess, eventually, require_prometheus, scores_of, start_hub};

    const CLUSTERS: &[&str] = &["a", "b", "c", "d", "e"];

    #[tokio::test]
    #[cfg_attr(
        skip_prometheus,
        ignore = "OCM_SCORE_SKIP_PROMETHEUS=1: needs a real Prometheus"
    )]
    async fn deduplicated_answers_equal_one_replica_and_score_as_one_prometheus() {
        require_prometheus();
        let t0 = Timestamp::now().as_second();
        let fleet = ThanosFleet::start(t0).await;
        let now = at(t0, 30);

        let through_thanos = scorer(&fleet.url(), "").query_all(now).await;
        let one_replica = scorer(&fleet.replica_a.prometheus.url(), "").query_all(now).await;
        let the_others = scorer(&fleet.other.prometheus.url(), "").query_all(now).await;
        let without_dedup = scorer(&fleet.url(), ", dedup: false").query_all(now).await;
        for (i, score) in ["cpuFree", "requestRate", "memFree"].iter().enumerate() {
            let thanos = through_thanos[i]
                .as_ref()
                .unwrap_or_else(|e| panic!("{score} through Thanos: {e}\n{}", fleet.logs()));
            assert!(thanos.warnings.is_empty(), "{score}: {:?}", thanos.warnings);
            let thanos = values(thanos);
            let replica = values(one_replica[i].as_ref().expect("the replica answers"));
            let others = values(the_others[i].as_ref().expect("the third Prometheus answers"));
            let doubled = values(without_dedup[i].as_ref().expect("Thanos answers without dedup"));
            // Every series of every store, once: what the replica and the third Prometheus hold.
            let mut expected = replica.clone();
            expected.extend(others.clone());
            assert_eq!(thanos.len(), expected.len(), "{score}: {thanos:?}");
            for (cluster, value) in &expected {
                assert!(
                    thanos.get(cluster).is_some_and(|v| same(*v, *value)),
                    "{score} of {cluster}: {thanos:?} against {expected:?}"
                );
            }
            for cluster in HA_CLUSTERS {
                // Without dedup the pair's series both count: sums double, a maximum does not.
                let factor = if *score == "memFree" { 1.0 } else { 2.0 };
                assert!(
                    same(doubled[*cluster], factor * replica[*cluster]),
                    "{score} of {cluster} without dedup: {doubled:?}"
                );
            }
            assert!(same(doubled["d"], thanos["d"]), "{score}: d has one replica");
        }

        let clusters = managed(CLUSTERS);
        let plan = scorer(&fleet.url(), "").plan(through_thanos, &clusters, &CurrentScores::new(), now);
        let RoundPlan::Ready { writes, partial, .. } = plan else {
            panic!("a complete answer: {plan:?}")
        };
        assert!(partial.is_empty());
        assert_eq!(scores(&writes), whole_fleet_scores());

        // Doubled sums move the fleet's bounds: d's own data did not change, its score does.
        let plan =
            scorer(&fleet.url(), ", dedup: false").plan(without_dedup, &clusters, &CurrentScores::new(), now);
        let RoundPlan::Ready { writes, .. } = plan else {
            panic!("a complete answer: {plan:?}")
        };
        // cpuFree a 24, b 4, c 44, d 7 → d = 200·(7 − 4)/40 − 100.
        assert_eq!(scores(&writes)["d"]["cpuFree"], -85);
    }

    #[tokio::test]
    #[cfg_attr(
        skip_prometheus,
        ignore = "OCM_SCORE_SKIP_PROMETHEUS=1: needs a real Prometheus"
    )]
    async fn a_store_that_is_down_gives_partial_answers_refused_by_default() {
        require_prometheus();
        let t0 = Timestamp::now().as_second();
        let mut fleet = ThanosFleet::start(t0).await;
        let now = at(t0, 30);
        let clusters = managed(CLUSTERS);
        fleet.sidecar(Store::Other).process.stop();
        let down = fleet.other.grpc_address.clone();

        // Default: Thanos answers what it has, with warnings naming the store; the round is refused.
        let refusing = scorer(&fleet.url(), "");
        let answers = refusing.query_all(now).await;
        for answer in &answers {
            let error = answer.as_ref().expect_err("a partial answer is refused");
            assert_eq!(error.kind(), "partial_response", "{error}");
            assert!(
                error.to_string().contains(&down),
                "the warning names {down}: {error}"
            );
        }
        let plan = refusing.plan(answers, &clusters, &CurrentScores::new(), now);
        let RoundPlan::PartialResponse { partial } = plan else {
            panic!("a partial round: {plan:?}")
        };
        assert_eq!(partial.len(), 3);

        // partial_response=false does not change that: Thanos answers without a store it cannot
        // reach at all with the same warning (it aborts only when a store fails inside its stream),
        // so the scorer's refusal must not rely on the parameter.
        let strict = scorer(&fleet.url(), ", partialResponse: false");
        for answer in strict.query_all(now).await {
            let error = answer.expect_err("a partial answer is refused");
            assert_eq!(error.kind(), "partial_response", "{error}");
            assert!(
                error.to_string().contains(&down),
                "the warning names {down}: {error}"
            );
        }

        // Opted in: the clusters that answered are scored among themselves. Without d (request
        // rate 7, the fleet's worst) the bounds of requestRate shrink to 1..4.5, and b and c move.
        let accepting = scorer(&fleet.url(), ", allowPartialResponse: true");
        let plan = accepting.plan(
            accepting.query_all(now).await,
            &clusters,
            &CurrentScores::new(),
            now,
        );
        let RoundPlan::Ready { writes, partial, .. } = plan else {
            panic!("an accepted partial answer: {plan:?}")
        };
        assert_eq!(partial.len(), 3);
        assert!(
            partial
                .iter()
                .all(|p| p.warnings.iter().any(|w| w.contains(&down))),
            "{partial:?}"
        );
        assert_eq!(
            scores(&writes),
            expect(&[
                ("a", &[("cpuFree", 0), ("requestRate", 100), ("memFree", 50)]),
                ("b", &[("cpuFree", -100), ("requestRate", 42), ("memFree", -75)]),
                ("c", &[("cpuFree", 100), ("requestRate", -100), ("memFree", 0)]),
            ])
        );

        // The store is back: complete answers, the whole fleet's scores. The querier's store list
        // can call the sidecar healthy before its gRPC connection has left reconnect backoff, so
        // the sign waited for is a complete answer itself.
        fleet.sidecar(Store::Other).process.restart().await;
        fleet.wait_stores_healthy(3).await;
        let deadline = std::time::Instant::now() + thanos_scorer::CONVERGE;
        let writes = loop {
            let plan = refusing.plan(
                refusing.query_all(now).await,
                &clusters,
                &CurrentScores::new(),
                now,
            );
            match plan {
                RoundPlan::Ready { writes, partial, .. } if partial.is_empty() => break writes,
                plan => assert!(
                    std::time::Instant::now() < deadline,
                    "no complete answer again: {plan:?}\n{}",
                    fleet.logs()
                ),
            }
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        };
        assert_eq!(scores(&writes), whole_fleet_scores());
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[cfg_attr(
        skip_prometheus,
        ignore = "OCM_SCORE_SKIP_PROMETHEUS=1: needs a real Prometheus"
    )]
    async fn the_scorer_publishes_nothing_while_a_store_is_down_and_resumes_when_it_is_back() {
        require_prometheus();
        let t0 = Timestamp::now().as_second();
        let mut fleet = ThanosFleet::start(t0).await;
        let hub = start_hub(CLUSTERS).await;
        // A round starts every ROUND_INTERVAL; each of its two queries may take QUERY_TIMEOUT.
        const ROUND_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);
        const QUERY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);
        let yaml = format!(
            "query: {{url: '{}', timeout: {}s, retries: 0}}
interval: {}s
validity: 30s
leaderElection: {{enabled: false}}
scores:
  - {{name: cpuFree, query: '{FREE_CPU}'}}
  - {{name: requestRate, query: '{REQUEST_RATE}', direction: lowerIsBetter}}
",
            fleet.url(),
            QUERY_TIMEOUT.as_secs(),
            ROUND_INTERVAL.as_secs(),
        );
        let mut scorer = ScorerProcess::start(&hub, "thanos-scorer-1", &yaml, &[]).await;
        scorer.wait_ready().await;
        let whole = whole_fleet_scores();
        let published = |cluster: &str| {
            let want: Vec<(String, i32)> = whole[cluster]
                .iter()
                .filter(|(name, _)| name.as_str() != "memFree")
                .map(|(n, v)| (n.clone(), *v))
                .collect();
            let hub = &hub;
            let cluster = cluster.to_owned();
            move || (scores_of(hub, &cluster, "thanos-score")? == want).then_some(())
        };
        for cluster in ["a", "b", "c", "d"] {
            eventually("the whole fleet's scores", published(cluster)).await;
        }

        fleet.sidecar(Store::Other).process.stop();
        let rounds = |outcome: &'static str| {
            let scorer = &scorer;
            async move {
                scorer
                    .metric("ocm_score_thanos_rounds_total", &[("outcome", outcome)])
                    .await
                    .unwrap_or(0.0)
            }
        };
        let deadline = std::time::Instant::now() + thanos_scorer::CONVERGE;
        while rounds("partial_response").await < 2.0 {
            assert!(
                std::time::Instant::now() < deadline,
                "no partial rounds:\n{}\n{}",
                scorer.log(),
                fleet.logs()
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        let writes = |hub: &ocm_score_kube_double::ApiServer| {
            hub.requests()
                .iter()
                .filter(|r| r.resource == "addonplacementscores" && r.is_write())
                .count()
        };
        let writes_during = writes(&hub);
        let partial_rounds = rounds("partial_response").await;
        // Two more rounds, each as slow as its queries may be, three times over for a loaded machine:
        // a scorer that stalls fails here with its log instead of hanging until nextest ends it.
        let two_rounds = 2 * (ROUND_INTERVAL + 2 * QUERY_TIMEOUT);
        let deadline = std::time::Instant::now() + 3 * two_rounds;
        while rounds("partial_response").await < partial_rounds + 2.0 {
            assert!(
                std::time::Instant::now() < deadline,
                "no two more partial rounds after {partial_rounds} within {:?}:\n{}\n{}",
                3 * two_rounds,
                scorer.log(),
                fleet.logs()
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert_eq!(
            writes(&hub),
            writes_during,
            "nothing is written from partial answers"
        );
        assert_eq!(
            scorer.metric("ocm_score_thanos_partial_response", &[]).await,
            Some(1.0)
        );
        let (code, detail) = scorer.get("/readyz").await.expect("the probe server answers");
        assert_eq!(code, 503, "{detail}");
        assert!(
            detail.contains("not publishing") && detail.contains(&fleet.other.grpc_address),
            "{detail}"
        );
        assert!(scorer.log().contains("partial response"), "{}", scorer.log());
        assert_eq!(scorer.get("/healthz").await.map(|(code, _)| code), Some(200));

        fleet.sidecar(Store::Other).process.restart().await;
        let complete = rounds("complete").await;
        let deadline = std::time::Instant::now() + thanos_scorer::CONVERGE;
        while scorer.get("/readyz").await.map(|(code, _)| code) != Some(200) {
            assert!(
                std::time::Instant::now() < deadline,
                "still not ready with the store back:\n{}\n{}",
                scorer.log(),
                fleet.logs()
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(rounds("complete").await > complete);
        assert_eq!(
            scorer.metric("ocm_score_thanos_partial_response", &[]).await,
            Some(0.0)
        );
        assert!(
            scorer.log().contains("every store answered again"),
            "{}",
            scorer.log()
        );
        for cluster in ["a", "b", "c", "d"] {
            eventually("the whole fleet's scores again", published(cluster)).await;
        }
        assert!(scorer.running());
    }
}
