//! Side by side with OCM's own scheduler (`scripts/bench-vs-ocm.sh`).
//!
//! `vs-ocm OCM_BENCH [CLUSTERS...]` writes each fleet of [`fleet`](super::fleet) once to a file (one
//! JSON object per line: a `FleetHeader` with the time the scores are valid at, then the hub's
//! objects as the API server would serve them), then, one size at a time and each as its own
//! process, runs OCM's side (`OCM_BENCH -fleet FILE -placement apps/web`, the program of
//! `tests/ocm-bench/placement-bench`) and ours (this benchmark with `peer FILE apps/web`). Both read
//! the same file; each prints one JSON line with its median time for a full scheduling pass with
//! decisions, the clusters it decided and its peak resident memory. The decided clusters must be the
//! same on both sides. Then one markdown table, and one row for the CEL placement at
//! [`CEL_FLEET`](super::CEL_FLEET) clusters.

use super::{
    CEL_FLEET, HubObjects, HubSnapshot, HubSnapshotBuilder, SyncOutcome, black_box, fleet, ms, peak_rss_mib,
    samples, sync,
};
use k8s_openapi::jiff::Timestamp;
use ocm_score_scheduler::placement::{candidates, schedule};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One side's result for one fleet and placement: the JSON line both programs print.
#[derive(Debug, Serialize, Deserialize)]
struct PeerResult {
    clusters: usize,
    placement: String,
    runs: usize,
    sync_median_ms: f64,
    sync_fastest_ms: f64,
    schedule_median_ms: f64,
    decisions: Vec<String>,
    peak_rss_mib: f64,
    other_decisions: usize,
}

/// The first line of a fleet file.
#[derive(Serialize, Deserialize)]
struct FleetHeader {
    kind: String,
    now: Timestamp,
}

#[derive(Deserialize)]
struct KindOnly {
    kind: String,
}

const HEADER_KIND: &str = "FleetHeader";

/// Writes `objects` as a fleet file: the header, then one object per line.
fn write_fleet(path: &Path, objects: &HubObjects, now: Timestamp) -> std::io::Result<()> {
    let mut out = BufWriter::new(std::fs::File::create(path)?);
    let mut line = |value: &dyn erased::Json| -> std::io::Result<()> {
        value.write(&mut out)?;
        out.write_all(b"\n")
    };
    line(&FleetHeader {
        kind: HEADER_KIND.into(),
        now,
    })?;
    for o in &objects.cluster_sets {
        line(o)?;
    }
    for o in &objects.bindings {
        line(o)?;
    }
    for o in &objects.clusters {
        line(o)?;
    }
    for o in &objects.scores {
        line(o)?;
    }
    for o in &objects.placements {
        line(o)?;
    }
    for o in &objects.decisions {
        line(o)?;
    }
    out.into_inner().map_err(|e| e.into_error())?.sync_all()
}

/// Serializing objects of different types through one closure.
mod erased {
    pub trait Json {
        fn write(&self, out: &mut dyn std::io::Write) -> std::io::Result<()>;
    }
    impl<T: serde::Serialize> Json for T {
        fn write(&self, out: &mut dyn std::io::Write) -> std::io::Result<()> {
            serde_json::to_writer(out, self).map_err(std::io::Error::other)
        }
    }
}

/// A fleet file's objects, indexed as they are read.
struct Fleet {
    now: Timestamp,
    snapshot: HubSnapshot,
    /// How many PlacementDecisions the file holds.
    decisions: usize,
}

/// Reads a fleet file one line at a time into a snapshot, so that the typed objects are never
/// all held at once (the snapshot keeps what it reads of them).
fn read_fleet(path: &Path) -> Fleet {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("opening {}: {e}", path.display()));
    let mut builder = HubSnapshotBuilder::new();
    let mut now = None;
    let mut decisions = 0;
    for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
        let line = line.unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let at = || format!("{}:{}", path.display(), n + 1);
        let kind: KindOnly = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{}: {e}", at()));
        let parse_err = |e: serde_json::Error| -> ! { panic!("{}: {e}", at()) };
        match kind.kind.as_str() {
            HEADER_KIND => {
                let h: FleetHeader = serde_json::from_str(&line).unwrap_or_else(|e| parse_err(e));
                now = Some(h.now);
            }
            "ManagedCluster" => {
                builder.add_cluster(serde_json::from_str(&line).unwrap_or_else(|e| parse_err(e)))
            }
            "ManagedClusterSet" => {
                builder.add_cluster_set(serde_json::from_str(&line).unwrap_or_else(|e| parse_err(e)))
            }
            "ManagedClusterSetBinding" => {
                builder.add_binding(serde_json::from_str(&line).unwrap_or_else(|e| parse_err(e)))
            }
            "Placement" => {
                builder.add_placement(serde_json::from_str(&line).unwrap_or_else(|e| parse_err(e)))
            }
            "PlacementDecision" => {
                decisions += 1;
                builder.add_decision(serde_json::from_str(&line).unwrap_or_else(|e| parse_err(e)))
            }
            "AddOnPlacementScore" => {
                builder.add_score(serde_json::from_str(&line).unwrap_or_else(|e| parse_err(e)))
            }
            other => panic!("{}: unexpected kind {other:?}", at()),
        }
    }
    Fleet {
        now: now.unwrap_or_else(|| panic!("{}: no {HEADER_KIND} line", path.display())),
        snapshot: builder.build().expect("the fleet file is a valid hub"),
        decisions,
    }
}

/// `peer FLEET_FILE NAMESPACE/NAME`: our side of one fleet, printed as one JSON line.
pub fn peer(args: &[String]) {
    let [path, key] = args else {
        panic!("usage: peer FLEET_FILE NAMESPACE/NAME")
    };
    let (namespace, name) = key.split_once('/').expect("placement as namespace/name");
    let Fleet {
        now,
        snapshot,
        decisions: other_decisions,
    } = read_fleet(Path::new(path));
    let placement = snapshot.placement(namespace, name).expect("placement").clone();
    let cands = candidates::candidates(&snapshot, &placement).expect("candidates");

    let mut decided = Vec::new();
    let sync_times = samples(|| {
        let r = sync(&snapshot, namespace, name, black_box(now)).expect("syncs");
        let SyncOutcome::Scheduled(r) = r else {
            panic!("placement {key} skipped")
        };
        decided = r
            .decisions
            .iter()
            .filter_map(|d| d.status.as_ref())
            .flat_map(|s| s.decisions.iter().map(|c| c.cluster_name.clone()))
            .collect();
        black_box(r);
    });
    decided.sort();
    let schedule_times = samples(|| {
        let r =
            schedule::schedule(&snapshot, &placement, black_box(&cands.clusters), now).expect("schedules");
        black_box(r);
    });
    let result = PeerResult {
        clusters: snapshot.cluster_count(),
        placement: key.clone(),
        runs: sync_times.len(),
        sync_median_ms: ms(sync_times[sync_times.len() / 2]),
        sync_fastest_ms: ms(sync_times[0]),
        schedule_median_ms: ms(schedule_times[schedule_times.len() / 2]),
        decisions: decided,
        peak_rss_mib: peak_rss_mib().expect("VmHWM in /proc/self/status"),
        other_decisions,
    };
    println!("{}", serde_json::to_string(&result).expect("serializes"));
}

/// Runs one side as its own process and reads its JSON line.
fn run_side(what: &str, mut command: Command) -> PeerResult {
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("running {what} ({command:?}): {e}"));
    assert!(
        out.status.success(),
        "{what} failed ({}): {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|e| panic!("{what} printed {stdout:?}: {e}"))
}

/// The fleet file of `size` clusters in `dir`, written on first use.
fn fleet_file(dir: &Path, size: usize, now: Timestamp) -> PathBuf {
    let path = dir.join(format!("fleet-{size}.ndjson"));
    if !path.is_file() {
        write_fleet(&path, &fleet(size, now), now)
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
    }
    path
}

/// `vs-ocm OCM_BENCH [CLUSTERS...]`: both sides, one size at a time, then the table.
pub fn table(args: &[String], now: Timestamp) {
    let (ocm_bench, sizes) = args.split_first().expect("usage: vs-ocm OCM_BENCH [CLUSTERS...]");
    let sizes: Vec<usize> = if sizes.is_empty() {
        super::FLEETS.to_vec()
    } else {
        sizes
            .iter()
            .map(|s| s.parse().unwrap_or_else(|e| panic!("cluster count {s:?}: {e}")))
            .collect()
    };
    let ours = std::env::current_exe().expect("this benchmark's path");
    let dir = std::env::temp_dir().join(format!("ocm-score-vs-ocm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");

    let mut runs: Vec<(String, PeerResult, PeerResult)> = Vec::new();
    let mut cases: Vec<(String, usize, &str)> =
        sizes.iter().map(|&n| (n.to_string(), n, "apps/web")).collect();
    cases.push((format!("{CEL_FLEET} (CEL predicate)"), CEL_FLEET, "apps/web-cel"));
    for (label, size, placement) in cases {
        let file = fleet_file(&dir, size, now);
        eprintln!("{label} clusters: OCM ...");
        let mut ocm_cmd = Command::new(ocm_bench);
        ocm_cmd.arg("-fleet").arg(&file).arg("-placement").arg(placement);
        let ocm = run_side("OCM's placement-bench", ocm_cmd);
        eprintln!("{label} clusters: ours ...");
        let mut ours_cmd = Command::new(&ours);
        ours_cmd.arg("peer").arg(&file).arg(placement);
        let mine = run_side("our placement benchmark", ours_cmd);
        assert_eq!(ocm.clusters, size, "OCM read {} clusters", ocm.clusters);
        assert_eq!(mine.clusters, size, "we read {} clusters", mine.clusters);
        assert_eq!(
            ocm.other_decisions, mine.other_decisions,
            "both read the other decisions"
        );
        runs.push((label, ocm, mine));
    }
    let _ = std::fs::remove_dir_all(&dir);

    println!();
    println!("| clusters | OCM ms | ours ms | ratio | OCM peak MiB | ours peak MiB |");
    println!("|---:|---:|---:|---:|---:|---:|");
    for (label, ocm, mine) in &runs {
        println!(
            "| {label} | {:.3} | {:.3} | {:.0}x | {:.1} | {:.1} |",
            ocm.sync_median_ms,
            mine.sync_median_ms,
            ocm.sync_median_ms / mine.sync_median_ms,
            ocm.peak_rss_mib,
            mine.peak_rss_mib,
        );
    }
    println!();
    println!("Runs per side (OCM / ours), Schedule() alone (OCM / ours), fastest full pass (OCM / ours):");
    println!();
    for (label, ocm, mine) in &runs {
        println!(
            "- {label}: {} / {} runs; {:.3} / {:.3} ms; {:.3} / {:.3} ms",
            ocm.runs,
            mine.runs,
            ocm.schedule_median_ms,
            mine.schedule_median_ms,
            ocm.sync_fastest_ms,
            mine.sync_fastest_ms,
        );
    }
    let differ: Vec<String> = runs
        .iter()
        .filter(|(_, ocm, mine)| ocm.decisions != mine.decisions)
        .map(|(label, ocm, mine)| {
            format!(
                "{label}: OCM decided {:?}, we decided {:?}",
                ocm.decisions, mine.decisions
            )
        })
        .collect();
    println!();
    if differ.is_empty() {
        println!(
            "Both sides decided the same clusters on every fleet ({} each).",
            runs.iter()
                .map(|(_, o, _)| o.decisions.len().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
    } else {
        panic!("the two sides decided differently:\n{}", differ.join("\n"));
    }
}
