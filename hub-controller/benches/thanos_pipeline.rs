//! The Thanos scorer's per-round CPU work for a large fleet: decode the fleet-wide query answers,
//! map series to ManagedClusters, normalize across the fleet and diff against the current
//! AddOnPlacementScores. Goal: ≤ 50 ms for 10,000 clusters, and writes limited to what changed.
//!
//! `cargo bench -p ocm-score-hub --bench thanos_pipeline` prints a markdown table.

use jiff::Timestamp;
use ocm_score_api::{AddOnPlacementScore, ManagedCluster, ObjectMeta};
use ocm_score_hub::thanos::{
    config::{Direction, Normalization, ScoreSpec},
    diff::{CurrentScores, PlannedWrite, Validity, plan_writes},
    fleet::score_fleet,
    mapping::{ClusterIndex, ClusterMapping},
    response::{QueryData, parse_response},
};
use std::{
    hint::black_box,
    sync::Arc,
    time::{Duration, Instant},
};

const GOAL: Duration = Duration::from_millis(50);
const RUNS: usize = 15;

/// Deterministic pseudo-random numbers (no dependency needed for a benchmark's input).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn cluster_name(i: usize) -> String {
    format!("cluster-{i:05}")
}

/// A Prometheus answer with one series per cluster; `drift` is the share of clusters whose value moves.
fn answer(clusters: usize, seed: u64, eval_time: f64, drift: f64, salt: u64) -> Vec<u8> {
    let mut base = Lcg(seed);
    let mut moves = Lcg(seed ^ salt);
    let mut body = String::with_capacity(clusters * 80);
    body.push_str(r#"{"status":"success","data":{"resultType":"vector","result":["#);
    for i in 0..clusters {
        let mut value = base.next() * 64.0;
        if salt != 0 && moves.next() < drift {
            value = moves.next() * 64.0;
        }
        if i > 0 {
            body.push(',');
        }
        body.push_str(&format!(
            r#"{{"metric":{{"cluster":"{}","region":"eu-{}"}},"value":[{eval_time},"{value:.4}"]}}"#,
            cluster_name(i),
            i % 7
        ));
    }
    body.push_str("]}}");
    body.into_bytes()
}

fn managed_clusters(n: usize) -> Vec<ManagedCluster> {
    (0..n)
        .map(|i| ManagedCluster {
            metadata: ObjectMeta {
                name: Some(cluster_name(i)),
                ..Default::default()
            },
            ..Default::default()
        })
        .collect()
}

struct Timings {
    parse: Duration,
    map_normalize: Duration,
    diff: Duration,
    total: Duration,
    writes: usize,
}

/// One full round of CPU work; returns its timings and the planned writes.
fn round(
    bodies: &[Vec<u8>],
    specs: &[ScoreSpec],
    clusters: &[ManagedCluster],
    current: &CurrentScores,
    now: Timestamp,
) -> (Timings, Vec<PlannedWrite>) {
    let validity = Validity {
        validity: Duration::from_secs(180),
        renew_before: Duration::from_secs(90),
    };
    let start = Instant::now();
    let vectors: Vec<_> = bodies
        .iter()
        .map(|b| match parse_response(200, b).map(|r| r.data) {
            Ok(QueryData::Vector(v)) => v,
            other => panic!("benchmark input must decode to a vector: {other:?}"),
        })
        .collect();
    let parsed = Instant::now();
    let index = ClusterIndex::build(&ClusterMapping::Identity, clusters);
    let fleet = score_fleet(specs, &vectors, "cluster", &index, now, validity.validity);
    let scored = Instant::now();
    let writes = plan_writes(&fleet.clusters, current, now, validity);
    let done = Instant::now();
    let timings = Timings {
        parse: parsed - start,
        map_normalize: scored - parsed,
        diff: done - scored,
        total: done - start,
        writes: writes.len(),
    };
    (black_box(timings), writes)
}

fn apply(current: &mut CurrentScores, writes: Vec<PlannedWrite>) {
    for w in writes {
        let object = AddOnPlacementScore {
            metadata: ObjectMeta {
                name: Some("thanos-score".into()),
                namespace: Some(w.cluster.clone()),
                ..Default::default()
            },
            status: Some(w.status),
        };
        current.insert(w.cluster, Arc::new(object));
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64() * 1e3)
}

fn main() {
    let now = Timestamp::from_second(1_800_000_000).expect("valid time");
    let eval_time = now.as_second() as f64 + 0.123;
    println!(
        "| scenario | clusters | scores | answer bytes | parse ms | map+normalize ms | diff ms | total ms (median of {RUNS}) | worst ms | writes planned | goal ≤ 50 ms |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for (clusters, score_count) in [(10_000usize, 1usize), (10_000, 3)] {
        let specs: Vec<ScoreSpec> = (0..score_count)
            .map(|i| ScoreSpec {
                name: format!("score{i}"),
                query: "q".into(),
                direction: if i % 2 == 0 {
                    Direction::HigherIsBetter
                } else {
                    Direction::LowerIsBetter
                },
                normalization: if i == 2 {
                    Normalization::Fixed { min: 0.0, max: 64.0 }
                } else {
                    Normalization::Fleet
                },
            })
            .collect();
        let managed = managed_clusters(clusters);
        let first: Vec<Vec<u8>> = (0..score_count)
            .map(|i| answer(clusters, 7 + i as u64, eval_time, 0.0, 0))
            .collect();
        let bytes: usize = first.iter().map(Vec::len).sum();

        // First round: every object is new.
        let empty = CurrentScores::new();
        let mut runs = Vec::new();
        let mut last = None;
        for _ in 0..RUNS {
            let (t, writes) = round(&first, &specs, &managed, &empty, now);
            runs.push(t);
            last = Some(writes);
        }
        report("first round (all new)", clusters, score_count, bytes, runs);

        // Steady state a round later: 1 % of values moved, validUntil still fresh.
        let mut current = CurrentScores::new();
        apply(&mut current, last.unwrap_or_default());
        let later = now
            .checked_add(jiff::SignedDuration::from_secs(60))
            .expect("valid time");
        let drifted: Vec<Vec<u8>> = (0..score_count)
            .map(|i| answer(clusters, 7 + i as u64, eval_time + 60.0, 0.01, 99))
            .collect();
        let runs: Vec<Timings> = (0..RUNS)
            .map(|_| round(&drifted, &specs, &managed, &current, later).0)
            .collect();
        report(
            "next round, 1 % of values moved",
            clusters,
            score_count,
            bytes,
            runs,
        );

        // Two rounds later with nothing moved: only renewals once validUntil gets close.
        let unchanged: Vec<Vec<u8>> = first.clone();
        let runs: Vec<Timings> = (0..RUNS)
            .map(|_| round(&unchanged, &specs, &managed, &current, later).0)
            .collect();
        report("next round, nothing moved", clusters, score_count, bytes, runs);
    }
}

fn report(scenario: &str, clusters: usize, scores: usize, bytes: usize, runs: Vec<Timings>) {
    let writes = runs.last().map(|t| t.writes).unwrap_or(0);
    let worst = runs.iter().map(|t| t.total).max().unwrap_or_default();
    let total = median(runs.iter().map(|t| t.total).collect());
    let verdict = if total <= GOAL { "met" } else { "MISSED" };
    println!(
        "| {scenario} | {clusters} | {scores} | {bytes} | {} | {} | {} | {} | {} | {writes} | {verdict} |",
        ms(median(runs.iter().map(|t| t.parse).collect())),
        ms(median(runs.iter().map(|t| t.map_normalize).collect())),
        ms(median(runs.iter().map(|t| t.diff).collect())),
        ms(total),
        ms(worst),
    );
}
