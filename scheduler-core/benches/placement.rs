//! Placement scheduling speed over growing fleets.
//!
//! One Placement (Exact: AddOn + ResourceAllocatableCPU + Balance, weights 1, numberOfClusters
//! 10) over fleets of 100 to 50,000 clusters, each with an AddOnPlacementScore, plus 1,000
//! PlacementDecisions of other placements. Building the objects and the snapshot is not timed. Run
//! with `cargo bench -p ocm-score-scheduler`; prints a markdown table.
//!
//! A second table runs the same Placement with one CEL predicate added (a regular expression over
//! a label and a `scores()` filter), next to it without, at 10,000 clusters; the goal is at most
//! twice the cost. It also shows the fastest runs (on a shared machine the longer run is
//! preempted more often, which inflates its median) and the cost of the predicate's parts.
//! `cargo bench -p ocm-score-scheduler --bench placement -- cel` runs only that table (`-- fleet`
//! only the first).

use k8s_openapi::jiff::Timestamp;
use ocm_score_api::{
    AddOnPlacementScore, AddOnPlacementScoreItem, AddOnPlacementScoreStatus, AddOnScore, ClusterCelSelector,
    ClusterDecision, ClusterPredicate, ClusterSelector, ManagedCluster, ManagedClusterSet,
    ManagedClusterSetBinding, ManagedClusterSetBindingSpec, ManagedClusterSpec, ManagedClusterStatus,
    ObjectMeta, Placement, PlacementDecision, PlacementDecisionStatus, PlacementSpec, PrioritizerConfig,
    PrioritizerPolicy, Quantity, ScoreCoordinate, Time, well_known,
};
use ocm_score_scheduler::placement::{
    HubObjects, HubSnapshot, HubSnapshotBuilder, SyncOutcome, candidates, schedule, sync,
};
use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

#[path = "placement/vs_ocm.rs"]
mod vs_ocm;

const FLEETS: [usize; 4] = [100, 1_000, 10_000, 50_000];
const OTHER_DECISIONS: usize = 1_000;
/// The CEL predicate of the second table.
const CEL_PREDICATE: &str = "managedCluster.metadata.labels['env'].matches('^(prod|staging)$') && \
    managedCluster.scores('resource-usage-score').exists(s, s.name == 'cpuAvailable' && s.value > -50)";
/// Its parts, and the cheapest predicate, to show where the cost of the whole goes:
/// (Placement name, CEL expression).
const CEL_PARTS: [(&str, &str); 3] = [
    ("web-cel-true", "true"),
    (
        "web-cel-regex",
        "managedCluster.metadata.labels['env'].matches('^(prod|staging)$')",
    ),
    (
        "web-cel-scores",
        "managedCluster.scores('resource-usage-score').exists(s, s.name == 'cpuAvailable' && s.value > -50)",
    ),
];
const CEL_FLEET: usize = 10_000;
const CLUSTERS_PER_OTHER_DECISION: usize = 10;

fn meta(namespace: Option<&str>, name: &str) -> ObjectMeta {
    ObjectMeta {
        namespace: namespace.map(str::to_string),
        name: Some(name.to_string()),
        ..ObjectMeta::default()
    }
}

/// A small deterministic generator, so every run sees the same fleet.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

fn fleet(size: usize, now: Timestamp) -> HubObjects {
    let mut rng = Lcg(size as u64);
    let mut objects = HubObjects::default();
    let valid_until = Time(Timestamp::from_second(now.as_second() + 3600).expect("in range"));
    for i in 0..size {
        let name = format!("cluster-{i:05}");
        let cpu = Quantity(format!("{}m", 500 + rng.next(64_000)));
        let labels = BTreeMap::from([
            (well_known::CLUSTER_SET_LABEL.to_string(), "fleet".to_string()),
            ("env".to_string(), ["prod", "dev", "staging"][i % 3].to_string()),
        ]);
        objects.clusters.push(ManagedCluster {
            metadata: ObjectMeta {
                labels: Some(labels),
                ..meta(None, &name)
            },
            spec: ManagedClusterSpec {
                hub_accepts_client: true,
                ..ManagedClusterSpec::default()
            },
            status: Some(ManagedClusterStatus {
                allocatable: BTreeMap::from([("cpu".to_string(), cpu.clone())]),
                capacity: BTreeMap::from([("cpu".to_string(), Quantity("64".into()))]),
                ..ManagedClusterStatus::default()
            }),
        });
        objects.scores.push(AddOnPlacementScore {
            metadata: meta(Some(&name), well_known::RESOURCE_USAGE_SCORE),
            status: Some(AddOnPlacementScoreStatus {
                scores: vec![
                    AddOnPlacementScoreItem {
                        name: "cpuAvailable".into(),
                        value: rng.next(201) as i32 - 100,
                    },
                    AddOnPlacementScoreItem {
                        name: "memAvailable".into(),
                        value: rng.next(201) as i32 - 100,
                    },
                ],
                valid_until: Some(valid_until.clone()),
                ..AddOnPlacementScoreStatus::default()
            }),
        });
    }
    for d in 0..OTHER_DECISIONS {
        let decisions = (0..CLUSTERS_PER_OTHER_DECISION)
            .map(|_| ClusterDecision {
                cluster_name: format!("cluster-{:05}", rng.next(size as u64)),
                reason: String::new(),
                score: None,
            })
            .collect();
        objects.decisions.push(PlacementDecision {
            metadata: ObjectMeta {
                labels: Some(BTreeMap::from([(
                    well_known::PLACEMENT_LABEL.to_string(),
                    format!("other-{d}"),
                )])),
                ..meta(
                    Some(&format!("team-{}", d % 20)),
                    &format!("other-{d}-decision-1"),
                )
            },
            status: Some(PlacementDecisionStatus {
                decisions,
                extra: Default::default(),
            }),
        });
    }
    objects.cluster_sets.push(ManagedClusterSet {
        metadata: meta(None, "fleet"),
        ..ManagedClusterSet::default()
    });
    objects.bindings.push(ManagedClusterSetBinding {
        metadata: meta(Some("apps"), "fleet"),
        spec: ManagedClusterSetBindingSpec {
            cluster_set: "fleet".into(),
            ..ManagedClusterSetBindingSpec::default()
        },
        status: None,
    });
    let config = |type_: &str, built_in: Option<&str>, add_on: Option<AddOnScore>| PrioritizerConfig {
        score_coordinate: Some(ScoreCoordinate {
            type_: type_.into(),
            built_in: built_in.map(str::to_string),
            add_on,
        }),
        weight: Some(1),
        ..PrioritizerConfig::default()
    };
    let web = Placement {
        metadata: meta(Some("apps"), "web"),
        spec: PlacementSpec {
            number_of_clusters: Some(10),
            prioritizer_policy: Some(PrioritizerPolicy {
                mode: Some("Exact".into()),
                configurations: vec![
                    config(
                        "AddOn",
                        None,
                        Some(AddOnScore {
                            resource_name: well_known::RESOURCE_USAGE_SCORE.into(),
                            score_name: "cpuAvailable".into(),
                        }),
                    ),
                    config("BuiltIn", Some("ResourceAllocatableCPU"), None),
                    config("BuiltIn", Some("Balance"), None),
                ],
            }),
            ..PlacementSpec::default()
        },
        status: None,
    };
    // The same Placement with one CEL predicate: production-like environments by regular
    // expression, and a CPU score above -50.
    let with_cel = |name: &str, expression: &str| {
        let mut p = web.clone();
        p.metadata = meta(Some("apps"), name);
        p.spec.predicates = vec![ClusterPredicate {
            required_cluster_selector: Some(ClusterSelector {
                cel_selector: Some(ClusterCelSelector {
                    cel_expressions: vec![expression.into()],
                }),
                ..ClusterSelector::default()
            }),
        }];
        p
    };
    objects.placements.push(with_cel("web-cel", CEL_PREDICATE));
    for (name, expression) in CEL_PARTS {
        objects.placements.push(with_cel(name, expression));
    }
    objects.placements.push(web);
    objects
}

/// Median of repeated runs: at least 7, and up to ~1.5 s of work per measurement.
fn median(f: impl FnMut()) -> Duration {
    let samples = samples(f);
    samples[samples.len() / 2]
}

/// Repeated runs' wall times, sorted: at least 7, and up to ~1.5 s of work.
fn samples(mut f: impl FnMut()) -> Vec<Duration> {
    let budget = Duration::from_millis(1500);
    let started = Instant::now();
    let mut samples = Vec::new();
    while samples.len() < 7 || (started.elapsed() < budget && samples.len() < 501) {
        let t = Instant::now();
        f();
        samples.push(t.elapsed());
    }
    samples.sort_unstable();
    samples
}

/// Median and fastest run. On a shared machine a run is often preempted, the longer the more
/// often; the fastest run is the one that was not.
#[derive(Clone, Copy)]
struct Timing {
    median: Duration,
    fastest: Duration,
}

fn timing(f: impl FnMut()) -> Timing {
    let samples = samples(f);
    Timing {
        median: samples[samples.len() / 2],
        fastest: samples[0],
    }
}

/// Peak resident memory since the last reset (Linux), in MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

fn reset_peak_rss() {
    // Writing 5 to clear_refs resets VmHWM to the current RSS; ignored where unsupported.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let now: Timestamp = "2026-06-01T00:00:00Z".parse().expect("valid time");
    // cargo's own `--bench` flag is ignored.
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    match args.first().map(String::as_str) {
        // `-- vs-ocm OCM_BENCH [CLUSTERS...]`: the side-by-side table (scripts/bench-vs-ocm.sh).
        Some("vs-ocm") => vs_ocm::table(&args[1..], now),
        // `-- peer FLEET_FILE NAMESPACE/NAME`: our side of one size, as its own process.
        Some("peer") => vs_ocm::peer(&args[1..]),
        // `-- cel` runs only the CEL table, `-- fleet` only the fleet table.
        filter => {
            let wanted = |table: &str| filter.is_none_or(|f| table.contains(f));
            if wanted("fleet") {
                fleet_table(now);
            }
            if wanted("cel") {
                cel_table(now);
            }
        }
    }
}

/// The Placement without predicates over every fleet size.
fn fleet_table(now: Timestamp) {
    println!("| clusters | Schedule() median | full result median | peak RSS |");
    println!("|---:|---:|---:|---:|");
    let mut per_cluster = Vec::new();
    for size in FLEETS {
        reset_peak_rss();
        let snapshot = HubSnapshot::new(fleet(size, now)).expect("generated fleet is valid");
        let placement = snapshot.placement("apps", "web").expect("placement").clone();
        let cands = candidates::candidates(&snapshot, &placement).expect("candidates");
        assert_eq!(cands.clusters.len(), size);

        let schedule_time = median(|| {
            let r = schedule::schedule(&snapshot, &placement, black_box(&cands.clusters), now)
                .expect("schedules");
            assert_eq!(r.selected.len(), 10);
            black_box(r);
        });
        let full_time = median(|| {
            let r = sync(&snapshot, "apps", "web", black_box(now)).expect("syncs");
            let SyncOutcome::Scheduled(r) = r else {
                panic!("placement skipped")
            };
            assert_eq!(r.decisions.len(), 1);
            black_box(r);
        });
        let rss = peak_rss_mib().map_or("n/a".to_string(), |m| format!("{m:.0} MiB"));
        println!(
            "| {size} | {:.3} ms | {:.3} ms | {rss} |",
            ms(schedule_time),
            ms(full_time),
        );
        per_cluster.push((size, ms(full_time) * 1e3 / size as f64));
    }
    println!();
    let scaling: Vec<String> = per_cluster
        .iter()
        .map(|(n, us)| format!("{n}: {us:.2} µs"))
        .collect();
    println!("Full result per cluster (flat = linear): {}", scaling.join(", "));
    println!();
}

/// The Placement with and without the CEL predicate, full result, at [`CEL_FLEET`] clusters.
fn cel_table(now: Timestamp) {
    let snapshot = HubSnapshot::new(fleet(CEL_FLEET, now)).expect("generated fleet is valid");
    let run = |name: &str| {
        timing(|| {
            let r = sync(&snapshot, "apps", name, black_box(now)).expect("syncs");
            let SyncOutcome::Scheduled(r) = r else {
                panic!("placement {name} skipped")
            };
            assert_eq!(r.decisions.len(), 1);
            black_box(r);
        })
    };
    let plain = run("web");
    let with_cel = run("web-cel");
    println!("CEL predicate: `{CEL_PREDICATE}`");
    println!();
    println!(
        "| clusters | full result, no predicate | full result, CEL predicate | ratio | goal | fastest runs: no predicate / CEL (ratio) |"
    );
    println!("|---:|---:|---:|---:|---:|---:|");
    println!(
        "| {CEL_FLEET} | {:.3} ms | {:.3} ms | {:.2}x | 2x | {:.3} ms / {:.3} ms ({:.2}x) |",
        ms(plain.median),
        ms(with_cel.median),
        ms(with_cel.median) / ms(plain.median),
        ms(plain.fastest),
        ms(with_cel.fastest),
        ms(with_cel.fastest) / ms(plain.fastest),
    );
    println!();
    println!("Where it goes: the same Placement with only a part of the predicate (medians).");
    println!();
    println!("| CEL predicate | full result | ratio to no predicate |");
    println!("|---|---:|---:|");
    for (name, expression) in CEL_PARTS {
        let t = run(name).median;
        println!(
            "| `{expression}` | {:.3} ms | {:.2}x |",
            ms(t),
            ms(t) / ms(plain.median)
        );
    }
}
