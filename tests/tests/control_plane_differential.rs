//! The live differential check: a seeded random fleet of bare ManagedClusters, cluster sets,
//! bindings and scores on the real hub, then N random Placements; OCM's own placement controller
//! decides each one, and `ocm-score-hub simulate` on a `kubectl get ... -A -o yaml` snapshot must
//! give the same decisions, decision groups and conditions.
//!
//! Placements are created one at a time and each is compared on a snapshot taken once OCM has
//! settled it: Balance (on by default in Additive mode) scores a placement by every *other*
//! placement's decisions at the moment OCM schedules it, and OCM does not reschedule a placement
//! when other placements' decisions change, so only a snapshot of that moment holds OCM's inputs.
//!
//! Cost: the control plane's start, then about 2 s per placement (150 placements and the fleet took
//! 285 s on the 2-core CI machine, 2026-11-23).
//!
//! `OCM_SCORE_DIFFERENTIAL_N` (default 50), `OCM_SCORE_DIFFERENTIAL_SEED` (decimal or 0x-hex) and
//! `OCM_SCORE_DIFFERENTIAL_CLUSTERS` (default 16) choose the run; the test prints them first so a
//! failure can be replayed exactly.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use ocm_score_tests::control_plane::addon::{dynamic, hub_snapshot, workspace_binary};
use ocm_score_tests::control_plane::differential::{
    self, Answer, Fleet, Rng, decisions_of, find_placement, ocm_answer, ocm_decided, parse_snapshot,
    simulate_answer,
};
use ocm_score_tests::control_plane::{ControlPlane, apply};
use ocm_score_tests::support::TempDir;
use serde_json::{Value, json};

const GROUP: &str = "cluster.open-cluster-management.io";
/// The seed CI runs (any other is a local exploration).
const DEFAULT_SEED: u64 = 20_261_123;

fn env_number(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Err(_) => default,
        Ok(v) => {
            let v = v.trim();
            let parsed = match v.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => v.parse(),
            };
            parsed.unwrap_or_else(|e| panic!("{name}={v:?} is not a number: {e}"))
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

fn yaml(v: &Value) -> String {
    serde_norway::to_string(v).unwrap_or_else(|_| v.to_string())
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
    let selector = format!("{GROUP}/placement={name}");
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

/// Runs `ocm-score-hub simulate -f <snapshot> -p ns/name` with the given extra arguments.
async fn simulate(binary: &Path, snapshot: &Path, ns: &str, name: &str, args: &[&str]) -> String {
    let mut command = std::process::Command::new(binary);
    command
        .arg("simulate")
        .arg("-f")
        .arg(snapshot)
        .arg("-p")
        .arg(format!("{ns}/{name}"))
        .args(args);
    let out = tokio::task::spawn_blocking(move || command.output())
        .await
        .expect("simulate task")
        .expect("running ocm-score-hub simulate");
    assert!(
        out.status.success(),
        "simulate failed on {}: {}",
        snapshot.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ocm_and_simulate_agree_on_random_placements() {
    let n = env_number("OCM_SCORE_DIFFERENTIAL_N", 50);
    let seed = env_number("OCM_SCORE_DIFFERENTIAL_SEED", DEFAULT_SEED);
    let fleet_size = env_number("OCM_SCORE_DIFFERENTIAL_CLUSTERS", 16) as usize;
    eprintln!(
        "differential check: N={n} seed={seed} clusters={fleet_size} \
         (replay: OCM_SCORE_DIFFERENTIAL_SEED={seed} OCM_SCORE_DIFFERENTIAL_N={n} OCM_SCORE_DIFFERENTIAL_CLUSTERS={fleet_size})"
    );
    let started = Instant::now();
    let simulate_bin: PathBuf = workspace_binary("ocm-score-hub").unwrap_or_else(|e| panic!("{e}"));

    // The launcher always joins cluster1 (the hub itself); the fleet is bare ManagedClusters in
    // sets cluster1 is not in, so its klusterlet's status updates never touch the placements.
    let cp = match ControlPlane::builder()
        .clusters(1)
        .ocm_addon_manager(false)
        .start_with_progress(&|l| eprintln!("{l}"))
        .await
    {
        Ok(cp) => cp,
        Err(e) => panic!("the control plane did not start: {e}"),
    };
    let ready = started.elapsed();
    let hub = cp.hub_client().await.expect("hub client");
    let kubeconfig = cp.hub_kubeconfig();

    let mut rng = Rng::new(seed);
    let fleet = Fleet::generate(&mut rng, fleet_size, jiff::Timestamp::now());
    create_fleet(&hub, &fleet).await;
    eprintln!(
        "fleet of {} clusters, {} cluster sets, {} bindings, {} scores created",
        fleet.clusters.len(),
        fleet.cluster_sets.len(),
        fleet.bindings.len(),
        fleet.scores.len()
    );

    let dir = TempDir::new("differential");
    let snapshot_file = dir.path().join("snapshot.yaml");
    let mut failures: Vec<String> = Vec::new();
    let mut misconfigured = 0;
    let mut selected = 0;
    for i in 0..n {
        let name = format!("p-{i:03}");
        let placement = differential::placement(&mut rng, &fleet, &name);
        let ns = placement["metadata"]["namespace"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let placements = api(&hub, "v1beta1", "Placement", Some(&ns)).await;
        if let Err(e) = placements
            .create(&PostParams::default(), &object(&placement))
            .await
        {
            failures.push(format!(
                "== {ns}/{name}: the API server refused the generated placement (a generator bug): {e}\n{}",
                yaml(&placement)
            ));
            continue;
        }
        let (text, items) = match settled(&kubeconfig, &ns, &name).await {
            Ok(settled) => settled,
            Err(e) => {
                eprintln!("== {ns}/{name}: {e}");
                failures.push(format!("== {ns}/{name}: {e}"));
                // A placement that never settles would keep every later one from settling too.
                remove(&hub, &placements, &ns, &name).await;
                continue;
            }
        };
        let stored = find_placement(&items, &ns, &name).cloned().unwrap_or(Value::Null);
        let ocm: Answer = ocm_answer(&stored, &decisions_of(&items, &ns, &name));
        std::fs::write(&snapshot_file, &text).expect("write snapshot");
        let out = simulate(
            &simulate_bin,
            &snapshot_file,
            &ns,
            &name,
            &["-o", "json", "--explain"],
        )
        .await;
        let entries: Vec<Value> =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("simulate's JSON: {e}\n{out}"));
        let answer = entries
            .first()
            .ok_or_else(|| "simulate printed no result".to_owned())
            .and_then(simulate_answer);
        let problems = match &answer {
            Ok(sim) => differential::differences(&ocm, sim),
            Err(e) => vec![e.clone()],
        };
        misconfigured += usize::from(ocm.misconfigured);
        selected += usize::from(!ocm.decisions.is_empty());
        if problems.is_empty() {
            eprintln!(
                "{ns}/{name}: agree, {} cluster(s){}",
                ocm.decisions.len(),
                if ocm.misconfigured { " (misconfigured)" } else { "" }
            );
            continue;
        }
        // Keep what replays the mismatch without the control plane.
        let kept = std::env::temp_dir().join(format!("ocm-score-differential-{seed}-{name}.yaml"));
        let _ = std::fs::write(&kept, &text);
        let table = simulate(&simulate_bin, &snapshot_file, &ns, &name, &["-o", "table"]).await;
        let explanation = entries
            .first()
            .map(|e| serde_json::to_string_pretty(&e["explain"]).unwrap_or_default())
            .unwrap_or_default();
        let report = format!(
            "== {ns}/{name}: MISMATCH\n  - {}\n-- the placement as stored:\n{}-- OCM: decisions {:?}, groups {:?}, misconfigured {}, satisfied {:?}\n   conditions: {}\n-- simulate:\n{table}{explanation}\n-- snapshot kept at {} (replay: ocm-score-hub simulate -f {} -p {ns}/{name})\n",
            problems.join("\n  - "),
            yaml(&json!({"metadata": {"name": name, "namespace": ns}, "spec": stored["spec"]})),
            ocm.decisions,
            ocm.groups,
            ocm.misconfigured,
            ocm.satisfied,
            stored["status"]["conditions"],
            kept.display(),
            kept.display(),
        );
        eprintln!("{report}");
        failures.push(report);
    }
    eprintln!(
        "differential check done: N={n} seed={seed}, {} agree, {} mismatch; {selected} placements selected clusters, \
         {misconfigured} misconfigured; control plane ready after {:.1} s, whole test {:.1} s",
        n as usize - failures.len(),
        failures.len(),
        ready.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    assert!(
        failures.is_empty(),
        "{} of {n} placements differ between OCM and simulate (seed {seed}):\n{}",
        failures.len(),
        failures.join("\n")
    );
}
