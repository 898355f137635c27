//! Over 800 lines on purpose: one experiment read top to bottom (the fleet, the watches, both
//! judgements, the report).
//!
//! The live differential check: a random fleet of bare ManagedClusters, cluster sets, bindings
//! and scores on the real hub, then random Placements created one at a time. OCM's own placement
//! controller decides each one, and `ocm-score-hub simulate` is judged twice:
//!
//! 1. **Without OCM's help**: on a snapshot taken *before* the placement exists, with the
//!    placement as the user wrote it (no defaults, no status), simulate's prediction must equal
//!    OCM's *first* answer: decisions and conditions, recorded by watches on the placement's
//!    PlacementDecisions and on the Placement that start before the placement is created (a
//!    first version the watches missed fails the placement). The snapshot holds no decision of
//!    this placement, so nothing OCM decided for it can steer the answer (Steady,
//!    existing-decision filters).
//! 2. **Consistency with the settled answer** (no prediction): on a snapshot taken once OCM has
//!    settled the placement, simulate must give OCM's settled decisions, groups and conditions
//!    (Balance scores a placement by every *other* placement's decisions at the moment OCM
//!    schedules it, and OCM does not reschedule when those change, so only a snapshot of that
//!    moment holds OCM's inputs).
//!
//! The run's seed is random unless `OCM_SCORE_DIFFERENTIAL_SEED` gives one; it is printed first
//! with the line that replays the run. Every [`MISCONFIGURE_EVERY`]th placement is made
//! misconfigured on purpose ([`super::misconfigure`]); a run fails unless those are misconfigured
//! on both sides and at least [`MIN_SELECTED_PERCENT`] % of the placements selected clusters, so
//! a run that compares only empty answers cannot pass.
//!
//! Cost: the control plane's start, then 1.4 s per placement on an idle 2-core machine (50 in
//! 68 s), 5.6 s beside two parallel builds (1,000 in 94 minutes).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use serde_json::{Value, json};

use super::tally::{Outcome, Tally, features};
use super::{
    Answer, Fleet, Rng, condition, decisions_of, differences, find_placement, misconfigure, ocm_answer,
    ocm_decided, parse_snapshot, placement, simulate_answer,
};
use crate::addon::{dynamic, hub_snapshot, workspace_binary};
use crate::support::TempDir;
use crate::{ControlPlane, apply};

const GROUP: &str = "cluster.open-cluster-management.io";
const PLACEMENT_LABEL: &str = "cluster.open-cluster-management.io/placement";
/// Fewer placements than this cannot show the shares below.
pub const MIN_PLACEMENTS: usize = 20;
/// Every this-many-th placement is misconfigured on purpose.
pub const MISCONFIGURE_EVERY: usize = 10;
/// The share of placements that must select at least one cluster. The generator's placements
/// selected clusters 496 times in 1,000 (the bench's run of 2026-11-27); at 50 placements, fewer
/// than 25 % happens about once in 5,000 healthy runs, while a run that compares mostly empty
/// answers fails.
pub const MIN_SELECTED_PERCENT: usize = 25;

/// What one run checks: `OCM_SCORE_DIFFERENTIAL_N`, `_SEED` (decimal or 0x-hex) and `_CLUSTERS`.
#[derive(Clone, Copy, Debug)]
pub struct Config {
    pub placements: usize,
    pub seed: u64,
    pub clusters: usize,
}

fn env_number(name: &str) -> Result<Option<u64>, String> {
    match std::env::var(name) {
        Err(_) => Ok(None),
        Ok(v) => {
            let v = v.trim();
            let parsed = match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => v.parse(),
            };
            parsed
                .map(Some)
                .map_err(|e| format!("{name}={v:?} is not a number: {e}"))
        }
    }
}

/// A seed nobody chose: the clock's nanoseconds and the process id, mixed.
fn fresh_seed() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default();
    Rng::new(nanos ^ u64::from(std::process::id()).rotate_left(32)).next_u64()
}

impl Config {
    /// From the environment, with `default_placements` placements and a fresh seed unless set.
    pub fn from_env(default_placements: usize) -> Result<Config, String> {
        let placements = env_number("OCM_SCORE_DIFFERENTIAL_N")?.map_or(default_placements, |n| n as usize);
        if placements < MIN_PLACEMENTS {
            return Err(format!(
                "OCM_SCORE_DIFFERENTIAL_N={placements}: the check needs at least {MIN_PLACEMENTS} placements \
                 (fewer cannot show that {MIN_SELECTED_PERCENT} % selected clusters and that misconfigured \
                 ones are recognized)"
            ));
        }
        let clusters = env_number("OCM_SCORE_DIFFERENTIAL_CLUSTERS")?.map_or(16, |n| n as usize);
        if clusters == 0 {
            return Err("OCM_SCORE_DIFFERENTIAL_CLUSTERS=0: the fleet needs clusters".to_owned());
        }
        Ok(Config {
            placements,
            seed: env_number("OCM_SCORE_DIFFERENTIAL_SEED")?.unwrap_or_else(fresh_seed),
            clusters,
        })
    }

    /// The environment that replays this run.
    pub fn replay(&self) -> String {
        format!(
            "OCM_SCORE_DIFFERENTIAL_SEED={} OCM_SCORE_DIFFERENTIAL_N={} OCM_SCORE_DIFFERENTIAL_CLUSTERS={}",
            self.seed, self.placements, self.clusters
        )
    }
}

/// What a run found.
#[derive(Debug)]
pub struct Report {
    pub config: Config,
    pub tally: Tally,
    /// Placements misconfigured on purpose.
    pub forced_misconfigured: usize,
    /// One report per placement that disagreed or could not be compared.
    pub failures: Vec<String>,
    /// Until the control plane was ready, and the whole run.
    pub ready: Duration,
    pub elapsed: Duration,
}

impl Report {
    /// Why the run fails (empty: it passes).
    pub fn problems(&self) -> Vec<String> {
        let mut out = self.failures.clone();
        let n = self.tally.placements();
        if self.tally.selected() * 100 < n * MIN_SELECTED_PERCENT {
            out.push(format!(
                "only {} of {n} placements selected clusters (at least {MIN_SELECTED_PERCENT} % must): \
                 the comparison mostly compared empty answers",
                self.tally.selected()
            ));
        }
        if self.tally.misconfigured() < self.forced_misconfigured {
            out.push(format!(
                "{} placements were misconfigured on both sides, fewer than the {} made misconfigured \
                 on purpose",
                self.tally.misconfigured(),
                self.forced_misconfigured
            ));
        }
        out
    }

    pub fn summary(&self) -> String {
        format!(
            "differential check: {} placements over {} clusters, seed {}: {} disagree; {} selected clusters, \
             {} misconfigured on both sides ({} on purpose); control plane ready after {:.1} s, run {:.1} s\n\
             replay: {}",
            self.tally.placements(),
            self.config.clusters,
            self.config.seed,
            self.tally.disagreements(),
            self.tally.selected(),
            self.tally.misconfigured(),
            self.forced_misconfigured,
            self.ready.as_secs_f64(),
            self.elapsed.as_secs_f64(),
            self.config.replay(),
        )
    }
}

/// Runs the check on a control plane of its own; `progress` gets a line per step and placement.
pub async fn run(config: Config, progress: &(dyn Fn(&str) + Sync)) -> Result<Report, String> {
    progress(&format!(
        "differential check: N={} seed={} clusters={} (replay: {})",
        config.placements,
        config.seed,
        config.clusters,
        config.replay()
    ));
    let started = Instant::now();
    let simulate_bin: PathBuf = workspace_binary("ocm-score-hub").map_err(|e| e.to_string())?;

    // The launcher always joins cluster1 (the hub itself); the fleet is bare ManagedClusters in
    // sets cluster1 is not in, so its klusterlet's status updates never touch the placements.
    let cp = ControlPlane::builder()
        .clusters(1)
        .ocm_addon_manager(false)
        .start_with_progress(&|l| progress(l))
        .await
        .map_err(|e| format!("the control plane did not start: {e}"))?;
    let ready = started.elapsed();
    let hub = cp.hub_client().await.map_err(|e| format!("hub client: {e}"))?;
    let kubeconfig = cp.hub_kubeconfig();

    let mut rng = Rng::new(config.seed);
    let fleet = Fleet::generate(&mut rng, config.clusters, jiff::Timestamp::now());
    create_fleet(&hub, &fleet).await;
    progress(&format!(
        "fleet of {} clusters, {} cluster sets, {} bindings, {} scores created",
        fleet.clusters.len(),
        fleet.cluster_sets.len(),
        fleet.bindings.len(),
        fleet.scores.len()
    ));

    let dir = TempDir::new("differential");
    let mut report = Report {
        config,
        tally: Tally::default(),
        forced_misconfigured: 0,
        failures: Vec::new(),
        ready,
        elapsed: Duration::ZERO,
    };
    for i in 0..config.placements {
        let name = format!("p-{i:04}");
        let mut generated = placement(&mut rng, &fleet, &name);
        if i % MISCONFIGURE_EVERY == MISCONFIGURE_EVERY - 1 {
            misconfigure(&mut rng, &mut generated);
            report.forced_misconfigured += 1;
        }
        let ns = generated["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let target = Target {
            simulate_bin: &simulate_bin,
            dir: dir.path(),
            seed: config.seed,
            ns: &ns,
            name: &name,
        };
        match compare_one(&hub, &kubeconfig, &target, &generated).await {
            Ok(Verdict::Agree(outcome, line)) => {
                progress(&format!("[{}/{}] {line}", i + 1, config.placements));
                report.tally.add(outcome);
            }
            Ok(Verdict::Disagree(outcome, failure)) => {
                progress(&failure);
                report.tally.add(outcome);
                report.failures.push(failure);
            }
            Err(failure) => {
                progress(&failure);
                report.failures.push(failure);
            }
        }
    }
    report.elapsed = started.elapsed();
    Ok(report)
}

/// What names one placement's comparison and where its files go.
struct Target<'a> {
    simulate_bin: &'a Path,
    dir: &'a Path,
    seed: u64,
    ns: &'a str,
    name: &'a str,
}

/// How one placement compared: with the outcome, a progress line or a full report.
enum Verdict {
    Agree(Outcome, String),
    Disagree(Outcome, String),
}

/// Creates one placement and compares both ways; `Err` when the placement could not be compared
/// (refused, or OCM never settled it).
async fn compare_one(
    hub: &kube::Client,
    kubeconfig: &Path,
    c: &Target<'_>,
    generated: &Value,
) -> Result<Verdict, String> {
    let (ns, name) = (c.ns, c.name);
    let before = snapshot(kubeconfig).await;
    let first = FirstVersions::watch(
        api(hub, "v1beta1", "PlacementDecision", Some(ns)).await,
        watcher::Config::default().labels(&format!("{PLACEMENT_LABEL}={name}")),
        format!("the PlacementDecisions of {ns}/{name}"),
        decided_clusters,
    )
    .await;
    let first_status = FirstVersions::watch(
        api(hub, "v1beta1", "Placement", Some(ns)).await,
        watcher::Config::default().fields(&format!("metadata.name={name}")),
        format!("the Placement {ns}/{name}"),
        placement_conditions,
    )
    .await;
    let placements = api(hub, "v1beta1", "Placement", Some(ns)).await;
    if let Err(e) = placements
        .create(&PostParams::default(), &object(generated))
        .await
    {
        first.stop();
        first_status.stop();
        return Err(format!(
            "== {ns}/{name}: the API server refused the generated placement (a generator bug): {e}\n{}",
            yaml(generated)
        ));
    }
    let (text, items) = match settled(kubeconfig, ns, name).await {
        Ok(settled) => settled,
        Err(e) => {
            first.stop();
            first_status.stop();
            // A placement that never settles would keep every later one from settling too.
            remove(hub, &placements, ns, name).await;
            return Err(format!("== {ns}/{name}: {e}"));
        }
    };
    let first_pds = first.stop();
    let first_placement = first_status.stop();

    let stored = find_placement(&items, ns, name).cloned().unwrap_or(Value::Null);
    let settled_pds = decisions_of(&items, ns, name);
    let ocm_settled: Answer = ocm_answer(&stored, &settled_pds);
    // OCM's first decision, all of it from the watches (nothing from the settled state): each
    // PlacementDecision as first written, and the Placement's conditions as first written.
    let first_versions = match first_decisions(&settled_pds, &first_pds) {
        Ok(first) => first,
        Err(e) => {
            remove(hub, &placements, ns, name).await;
            return Err(format!("== {ns}/{name}: {e}"));
        }
    };
    let Some(first_stored) = first_placement.first.get(name) else {
        remove(hub, &placements, ns, name).await;
        return Err(format!(
            "== {ns}/{name}: the watch saw no status of the Placement with both conditions"
        ));
    };
    let ocm_first: Answer = ocm_answer(first_stored, &first_versions);

    let before_file = c.dir.join("before.yaml");
    let placement_file = c.dir.join("placement.yaml");
    let settled_file = c.dir.join("settled.yaml");
    write(&before_file, &before);
    write(&placement_file, &yaml(generated));
    write(&settled_file, &text);
    let predicted = simulate(
        c.simulate_bin,
        &[&before_file, &placement_file],
        ns,
        name,
        &["-o", "json", "--explain"],
    )
    .await;
    let simulated_on_settled = simulate(
        c.simulate_bin,
        &[&settled_file],
        ns,
        name,
        &["-o", "json", "--explain"],
    )
    .await;
    let mut problems: Vec<String> = Vec::new();
    let first_problems = judge(&ocm_first, &predicted);
    let consistency_problems = judge(&ocm_settled, &simulated_on_settled);
    problems.extend(
        first_problems
            .iter()
            .map(|p| format!("before the placement existed, against OCM's first decision: {p}")),
    );
    // Not a prediction: simulate reads the hub OCM settled on, so this holds our engine to be
    // consistent with OCM's settled answer.
    problems.extend(
        consistency_problems
            .iter()
            .map(|p| format!("consistency with OCM's settled answer, on the settled hub: {p}")),
    );
    let predicted_misconfigured = predicted
        .as_ref()
        .ok()
        .and_then(|e| e.first())
        .is_some_and(|e| e["misconfigured"] == true);
    let outcome = Outcome {
        features: features(generated),
        selected: !ocm_settled.decisions.is_empty(),
        misconfigured: ocm_first.misconfigured && predicted_misconfigured,
        first_agrees: first_problems.is_empty(),
        settled_consistent: consistency_problems.is_empty(),
    };
    let changes: Vec<&String> = first_pds.changed.iter().chain(&first_placement.changed).collect();
    let changed = if changes.is_empty() {
        String::new()
    } else {
        format!(
            " (OCM changed its answer after the first: {})",
            changes.iter().map(|c| c.as_str()).collect::<Vec<_>>().join("; ")
        )
    };
    if problems.is_empty() {
        return Ok(Verdict::Agree(
            outcome,
            format!(
                "{ns}/{name}: agree, {} cluster(s){}{changed}",
                ocm_settled.decisions.len(),
                if ocm_settled.misconfigured {
                    " (misconfigured)"
                } else {
                    ""
                }
            ),
        ));
    }

    // Keep what replays the mismatch without the control plane.
    let kept = std::env::temp_dir().join(format!("ocm-score-differential-{}-{name}", c.seed));
    let _ = std::fs::create_dir_all(&kept);
    for f in [&before_file, &placement_file, &settled_file] {
        if let Some(base) = f.file_name() {
            let _ = std::fs::copy(f, kept.join(base));
        }
    }
    let predicted_table = simulate_text(c.simulate_bin, &[&before_file, &placement_file], ns, name).await;
    let settled_table = simulate_text(c.simulate_bin, &[&settled_file], ns, name).await;
    let report = format!(
        "== {ns}/{name}: MISMATCH\n  - {}\n-- the placement as written:\n{}-- OCM first: decisions {:?}, groups {:?}{changed}\n\
         -- OCM settled: decisions {:?}, groups {:?}, misconfigured {}, satisfied {:?}\n   conditions: {}\n\
         -- simulate before the placement existed:\n{predicted_table}-- simulate on the settled hub (consistency):\n{settled_table}\
         -- files kept in {} (replay: ocm-score-hub simulate -f before.yaml -f placement.yaml -p {ns}/{name}; \
         ocm-score-hub simulate -f settled.yaml -p {ns}/{name})\n",
        problems.join("\n  - "),
        yaml(generated),
        ocm_first.decisions,
        ocm_first.groups,
        ocm_settled.decisions,
        ocm_settled.groups,
        ocm_settled.misconfigured,
        ocm_settled.satisfied,
        stored["status"]["conditions"],
        kept.display(),
    );
    Ok(Verdict::Disagree(outcome, report))
}

/// simulate's answer against OCM's, as lines of difference.
fn judge(ocm: &Answer, simulated: &Result<Vec<Value>, String>) -> Vec<String> {
    let answer = simulated.as_ref().map_err(Clone::clone).and_then(|entries| {
        entries
            .first()
            .ok_or_else(|| "simulate printed no result".to_owned())
            .and_then(simulate_answer)
    });
    match answer {
        Ok(sim) => differences(ocm, &sim),
        Err(e) => vec![e],
    }
}

fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
}

/// OCM's first decision as the PlacementDecision watch recorded it, one entry for each settled
/// PlacementDecision: its first version with clusters, or, for one that never held a cluster, the
/// first version the watch saw of it (empty then too). A settled decision the watch never saw at
/// all has no first version to judge by: an error naming it, never its settled state in its place.
fn first_decisions<'a>(settled: &[&'a Value], seen: &'a Seen) -> Result<Vec<&'a Value>, String> {
    settled
        .iter()
        .map(|pd| {
            let pd_name = pd["metadata"]["name"].as_str().unwrap_or_default();
            let clusters = clusters_of(pd);
            match (seen.first.get(pd_name), seen.any.get(pd_name)) {
                (Some(first), _) => Ok(first),
                (None, Some(only_empty)) if clusters.is_empty() => Ok(only_empty),
                (None, Some(_)) => Err(format!(
                    "the watch saw no version of {pd_name} with clusters, though it settled with {clusters:?}"
                )),
                (None, None) => Err(format!(
                    "the watch saw no version of {pd_name} at all (settled with {clusters:?}): no first \
                     decision to judge the prediction by"
                )),
            }
        })
        .collect()
}

/// The first version of each object a watch that starts before the placement exists sees with
/// content that matters (`significant`): OCM creates a PlacementDecision empty and then writes its
/// clusters through the status subresource, so the first version holding clusters is the first
/// decision; it creates the Placement without a status and then writes its conditions. A later
/// version with other content means OCM changed its mind.
struct FirstVersions {
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

#[derive(Default)]
struct Seen {
    /// The first version with significant content, by object name.
    first: BTreeMap<String, Value>,
    /// The first version of any content, by object name.
    any: BTreeMap<String, Value>,
    changed: Vec<String>,
}

fn clusters_of(pd: &Value) -> Vec<String> {
    pd["status"]["decisions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d["clusterName"].as_str().map(str::to_owned))
        .collect()
}

/// A PlacementDecision's clusters, once it holds any.
fn decided_clusters(pd: &Value) -> Option<Vec<String>> {
    Some(clusters_of(pd)).filter(|c| !c.is_empty())
}

/// A Placement's `PlacementMisconfigured` and `PlacementSatisfied` statuses, once both are written.
fn placement_conditions(placement: &Value) -> Option<Vec<String>> {
    let misconfigured = condition(placement, "PlacementMisconfigured")?;
    let satisfied = condition(placement, "PlacementSatisfied")?;
    Some(vec![misconfigured.0, satisfied.0, satisfied.1])
}

impl FirstVersions {
    async fn watch(
        api: Api<DynamicObject>,
        config: watcher::Config,
        what: String,
        significant: fn(&Value) -> Option<Vec<String>>,
    ) -> FirstVersions {
        let mut events = watcher(api, config).default_backoff().boxed();
        // Only once the initial list is done does every later write reach the stream.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let next = tokio::time::timeout_at(deadline.into(), events.try_next()).await;
            match next {
                Ok(Ok(Some(Event::InitDone))) => break,
                Ok(Ok(Some(_))) | Ok(Err(_)) => {}
                Ok(Ok(None)) => panic!("the watch of {what} ended"),
                Err(_) => panic!("the watch of {what} did not start within 60 s"),
            }
        }
        let seen = Arc::new(Mutex::new(Seen::default()));
        let record = seen.clone();
        let task = tokio::spawn(async move {
            while let Some(event) = events.next().await {
                let (Ok(Event::Apply(object)) | Ok(Event::InitApply(object))) = event else {
                    continue;
                };
                let object = serde_json::to_value(&object).unwrap_or_default();
                let name = object["metadata"]["name"].as_str().unwrap_or_default().to_owned();
                let Ok(mut seen) = record.lock() else { return };
                seen.any.entry(name.clone()).or_insert_with(|| object.clone());
                let Some(content) = significant(&object) else {
                    continue;
                };
                match seen.first.get(&name).and_then(significant) {
                    None => {
                        seen.first.insert(name, object);
                    }
                    Some(first) if first != content => {
                        let line = format!("{name} first {first:?}, then {content:?}");
                        seen.changed.push(line);
                    }
                    Some(_) => {}
                }
            }
        });
        FirstVersions { seen, task }
    }

    /// Ends the watch and returns what it saw.
    fn stop(self) -> Seen {
        self.task.abort();
        match self.seen.lock() {
            Ok(mut seen) => std::mem::take(&mut *seen),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        }
    }
}

async fn api(client: &kube::Client, version: &str, kind: &str, ns: Option<&str>) -> Api<DynamicObject> {
    dynamic(client, GROUP, version, kind, ns)
        .await
        .unwrap_or_else(|e| panic!("{kind} is not served: {e}"))
}

fn object(value: &Value) -> DynamicObject {
    serde_json::from_value(value.clone()).expect("a Kubernetes object")
}

fn yaml(v: &Value) -> String {
    serde_norway::to_string(v).unwrap_or_else(|_| v.to_string())
}

/// Creates the fleet as a user and the agents would: objects, then status through the status
/// subresource; then waits until OCM's taint controller has tainted every cluster that is not
/// Available.
async fn create_fleet(hub: &kube::Client, fleet: &Fleet) {
    let namespaces: Api<Namespace> = Api::all(hub.clone());
    for ns in fleet
        .namespaces
        .iter()
        .chain(fleet.clusters.iter().map(|c| &c.name))
    {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": ns}})).expect("namespace");
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .unwrap_or_else(|e| panic!("creating namespace {ns}: {e}"));
    }
    for o in fleet.cluster_sets.iter().chain(&fleet.bindings) {
        apply(hub, o).await.unwrap_or_else(|e| panic!("{e}\n{}", yaml(o)));
    }
    let clusters = api(hub, "v1", "ManagedCluster", None).await;
    for c in &fleet.clusters {
        clusters
            .create(&PostParams::default(), &object(&c.object))
            .await
            .unwrap_or_else(|e| panic!("creating ManagedCluster {}: {e}\n{}", c.name, yaml(&c.object)));
        clusters
            .patch_status(
                &c.name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": c.status})),
            )
            .await
            .unwrap_or_else(|e| panic!("ManagedCluster {} status: {e}\n{}", c.name, yaml(&c.status)));
    }
    for s in &fleet.scores {
        let ns = s.object["metadata"]["namespace"].as_str().unwrap_or_default();
        let name = s.object["metadata"]["name"].as_str().unwrap_or_default();
        let scores = api(hub, "v1alpha1", "AddOnPlacementScore", Some(ns)).await;
        scores
            .create(&PostParams::default(), &object(&s.object))
            .await
            .unwrap_or_else(|e| panic!("creating AddOnPlacementScore {ns}/{name}: {e}"));
        scores
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"status": s.status})),
            )
            .await
            .unwrap_or_else(|e| panic!("AddOnPlacementScore {ns}/{name} status: {e}\n{}", yaml(&s.status)));
    }

    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let mut waiting = Vec::new();
        for c in &fleet.clusters {
            let live = clusters.get(&c.name).await.expect("get ManagedCluster");
            let ocm_taints: Vec<String> = live.data["spec"]["taints"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["key"].as_str())
                .filter(|k| k.starts_with("cluster.open-cluster-management.io/"))
                .map(str::to_owned)
                .collect();
            let expected: Vec<String> = c.ocm_taint.iter().map(|t| (*t).to_owned()).collect();
            if ocm_taints != expected {
                waiting.push(format!(
                    "{}: OCM taints {ocm_taints:?}, expected {expected:?}",
                    c.name
                ));
            }
        }
        if waiting.is_empty() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "OCM's taint controller did not taint the fleet as its conditions say:\n{}",
            waiting.join("\n")
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// Placements and PlacementDecisions by name and resourceVersion: equal in two snapshots means
/// nothing OCM decides changed in between.
fn fingerprint(items: &[Value]) -> Vec<String> {
    let mut out: Vec<String> = items
        .iter()
        .filter(|o| o["kind"] == "Placement" || o["kind"] == "PlacementDecision")
        .map(|o| {
            let m = &o["metadata"];
            format!(
                "{} {}/{} {}",
                o["kind"].as_str().unwrap_or_default(),
                m["namespace"].as_str().unwrap_or_default(),
                m["name"].as_str().unwrap_or_default(),
                m["resourceVersion"].as_str().unwrap_or_default()
            )
        })
        .collect();
    out.sort();
    out
}

async fn snapshot(kubeconfig: &Path) -> String {
    let kubeconfig = kubeconfig.to_path_buf();
    tokio::task::spawn_blocking(move || hub_snapshot(&kubeconfig))
        .await
        .expect("snapshot task")
        .unwrap_or_else(|e| panic!("snapshot: {e}"))
}

/// Waits until OCM has decided `ns/name` and nothing it decides moves between two snapshots;
/// returns the second snapshot (text and items).
async fn settled(kubeconfig: &Path, ns: &str, name: &str) -> Result<(String, Vec<Value>), String> {
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut previous: Option<Vec<String>> = None;
    loop {
        let text = snapshot(kubeconfig).await;
        let items = parse_snapshot(&text).unwrap_or_else(|e| panic!("{e}"));
        let decided =
            find_placement(&items, ns, name).is_some_and(|p| ocm_decided(p, &decisions_of(&items, ns, name)));
        if decided {
            let now = fingerprint(&items);
            if previous.as_ref() == Some(&now) {
                return Ok((text, items));
            }
            previous = Some(now);
        }
        if Instant::now() >= deadline {
            let placement = find_placement(&items, ns, name).cloned().unwrap_or(Value::Null);
            let pds: Vec<Value> = decisions_of(&items, ns, name).into_iter().cloned().collect();
            return Err(format!(
                "OCM did not settle placement {ns}/{name} within 90 s (decided: {decided}; something \
                 it decides kept changing)\n{}\n{}",
                yaml(&placement),
                yaml(&json!(pds))
            ));
        }
        tokio::time::sleep(Duration::from_millis(600)).await;
    }
}

/// Deletes a placement and waits until the garbage collector has removed its PlacementDecisions.
async fn remove(hub: &kube::Client, placements: &Api<DynamicObject>, ns: &str, name: &str) {
    placements
        .delete(name, &Default::default())
        .await
        .unwrap_or_else(|e| panic!("deleting placement {ns}/{name}: {e}"));
    let decisions = api(hub, "v1beta1", "PlacementDecision", Some(ns)).await;
    let selector = format!("{PLACEMENT_LABEL}={name}");
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let left = decisions
            .list(&kube::api::ListParams::default().labels(&selector))
            .await
            .map(|l| l.items.len())
            .unwrap_or(usize::MAX);
        if left == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the PlacementDecisions of deleted placement {ns}/{name} are still there after 90 s"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn simulate_command(
    binary: &Path,
    files: &[&Path],
    ns: &str,
    name: &str,
    args: &[&str],
) -> std::process::Command {
    let mut command = std::process::Command::new(binary);
    command.arg("simulate");
    for f in files {
        command.arg("-f").arg(f);
    }
    command.arg("-p").arg(format!("{ns}/{name}")).args(args);
    command
}

/// `ocm-score-hub simulate -f <files> -p ns/name -o json ...`: the JSON entries, or why not.
async fn simulate(
    binary: &Path,
    files: &[&Path],
    ns: &str,
    name: &str,
    args: &[&str],
) -> Result<Vec<Value>, String> {
    let mut command = simulate_command(binary, files, ns, name, args);
    let shown = format!("{command:?}");
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .map_err(|e| format!("simulate task: {e}"))?
        .map_err(|e| format!("running {shown}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{shown} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if args.contains(&"json") {
        let text = String::from_utf8_lossy(&out.stdout);
        serde_json::from_str(&text).map_err(|e| format!("simulate's JSON: {e}\n{text}"))
    } else {
        Ok(Vec::new())
    }
}

/// simulate's table for a report.
async fn simulate_text(binary: &Path, files: &[&Path], ns: &str, name: &str) -> String {
    let mut command = simulate_command(binary, files, ns, name, &["-o", "table"]);
    match tokio::task::spawn_blocking(move || command.output()).await {
        Ok(Ok(out)) => String::from_utf8_lossy(&out.stdout).into_owned(),
        Ok(Err(e)) => format!("(simulate did not run: {e})\n"),
        Err(e) => format!("(simulate task: {e})\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::{Seen, first_decisions};
    use serde_json::{Value, json};

    fn decision(name: &str, clusters: &[&str]) -> Value {
        let decisions: Vec<Value> = clusters.iter().map(|c| json!({"clusterName": c})).collect();
        json!({"metadata": {"name": name}, "status": {"decisions": decisions}})
    }

    #[test]
    fn the_first_decision_is_the_watchs_never_the_settled_one() {
        let settled_full = decision("p-decision-1", &["c2"]);
        let settled_empty = decision("p-decision-2", &[]);
        let mut seen = Seen::default();
        // Not seen by the watch: no first decision, whether it settled with clusters or none.
        for settled in [&settled_full, &settled_empty] {
            let error = first_decisions(&[settled], &seen).expect_err("unseen");
            assert!(
                error.contains(settled["metadata"]["name"].as_str().unwrap_or_default()),
                "{error}"
            );
        }
        // Seen with clusters: that first version, not the settled one.
        let first_full = decision("p-decision-1", &["c1"]);
        seen.first.insert("p-decision-1".into(), first_full.clone());
        seen.any
            .insert("p-decision-1".into(), decision("p-decision-1", &[]));
        assert_eq!(first_decisions(&[&settled_full], &seen), Ok(vec![&first_full]));
        // Seen, never with clusters: the watch's version.
        let created = json!({"metadata": {"name": "p-decision-2", "labels": {"group": "0"}}});
        seen.any.insert("p-decision-2".into(), created.clone());
        assert_eq!(first_decisions(&[&settled_empty], &seen), Ok(vec![&created]));
        // Seen only empty, yet settled with clusters: the watch missed the first decision.
        let settled_later = decision("p-decision-2", &["c3"]);
        assert!(first_decisions(&[&settled_later], &seen).is_err());
    }
}
