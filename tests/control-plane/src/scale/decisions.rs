//! [`score_to_decision`]: how long OCM's placement controller takes to rewrite PlacementDecisions after one cluster's score changes.

use super::*;

/// The score-to-decision scenario's size and patience.
#[derive(Clone, Debug)]
pub struct ScoreToDecision {
    pub clusters: usize,
    pub placements: usize,
    pub changes: usize,
    /// Patience for loading, the first decisions, and each change.
    pub timeout: Duration,
    /// After each change settles, also compare OCM's decisions with `ocm-score-hub simulate` on a
    /// snapshot taken with kubectl (slow at full size; the CI test does it).
    pub check_with_simulate: bool,
}

/// One score change and how long OCM took to follow it.
#[derive(Clone, Debug)]
pub struct ChangeTiming {
    pub cluster: String,
    pub value: i64,
    /// Whether the cluster entered the decisions (else it left them).
    pub entered: bool,
    /// From the score write until the first rewritten PlacementDecision arrived.
    pub first: Duration,
    /// From the score write until every Placement's decisions were the new ones.
    pub all: Duration,
    /// PlacementDecision events (writes by OCM's placement controller) from the score write until
    /// the decisions were the new ones.
    pub decision_events: usize,
    /// How many Placements OCM had given the cluster before the write, and after it.
    pub placements_with_cluster: (usize, usize),
    /// How many Placements' decisions OCM changed (before the write vs after).
    pub placements_changed: usize,
}

/// What [`score_to_decision`] measured.
#[derive(Clone, Debug)]
pub struct ScoreToDecisionReport {
    pub clusters: usize,
    pub placements: usize,
    pub load: Duration,
    /// From the first Placement's creation until every Placement decided (scores in place).
    pub first_decisions: Duration,
    pub changes: Vec<ChangeTiming>,
}

/// Where the scenario's Placements live (bound to the `global` cluster set).
pub const PLACEMENT_NAMESPACE: &str = "scale-placements";
/// The score the Placements prioritize by.
pub const SCORE_NAME: &str = "cpuClusterAvailable";
/// The highest-ranked clusters start with distinct scores 90, 89, ..; a Placement takes 1..=TOP.
pub(super) const TOP: usize = 10;
/// The score that puts a cluster ahead of every other.
pub(super) const ENTERING_SCORE: i64 = 100;

/// A cluster's score before any change: the first [`TOP`] distinct and high, the rest at or below 0.
pub(super) fn initial_score(index: usize) -> i64 {
    if index < TOP {
        90 - index as i64
    } else {
        -((index * 37 % 100) as i64)
    }
}

/// How many clusters Placement `index` asks for.
pub(super) fn placement_size(index: usize) -> usize {
    1 + index % TOP
}

pub(super) fn placement_name(index: usize) -> String {
    format!("scale-{index:03}")
}

/// What OCM decides for a Placement of `size` clusters prioritized by one AddOn score with weight 1
/// (mode Exact): the highest scores, ties to the smaller name; sorted by name.
pub fn top_clusters(scores: &BTreeMap<String, i64>, size: usize) -> Vec<String> {
    let mut ranked: Vec<(&String, i64)> = scores.iter().map(|(c, s)| (c, *s)).collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let mut top: Vec<String> = ranked.into_iter().take(size).map(|(c, _)| c.clone()).collect();
    top.sort();
    top
}

/// The change of step `step`: an outsider is raised above everyone (it enters every Placement's
/// decisions and each Placement's last cluster leaves), then put back (the reverse); the next pair
/// moves the next outsider.
pub(super) fn change(step: usize, names: &[String]) -> (usize, i64, bool) {
    let index = TOP + (step / 2) % (names.len() - TOP);
    if step.is_multiple_of(2) {
        (index, ENTERING_SCORE, true)
    } else {
        (index, initial_score(index), false)
    }
}

/// OCM's placement controller following our scores: `clusters` bare clusters (prefix `score`),
/// each with a `resource-usage-score` as its agent would publish it; `placements` Placements in
/// [`PLACEMENT_NAMESPACE`] of 1..=10 clusters prioritized by [`SCORE_NAME`]; then `changes` score
/// writes, one cluster at a time, each timed until OCM's PlacementDecisions are the new top
/// clusters of every Placement (checked exactly, and with `simulate` when asked).
pub async fn score_to_decision(
    cp: &ControlPlane,
    dir: &Path,
    scenario: &ScoreToDecision,
    progress: &dyn Fn(&str),
) -> Result<ScoreToDecisionReport, Error> {
    if scenario.clusters <= TOP {
        return Err(Error::Options(format!(
            "score to decision needs more than {TOP} clusters, got {}",
            scenario.clusters
        )));
    }
    let hub = cp.hub_client().await?;
    let names = fleet_names("score", scenario.clusters);
    let load_started = Instant::now();
    load_fleet(&hub, &names, scenario.timeout).await?;

    let valid_until = timestamp(jiff::Timestamp::now() + jiff::SignedDuration::from_hours(12));
    let score_api = resource::<AddOnPlacementScore>();
    let mut scores: BTreeMap<String, i64> = BTreeMap::new();
    futures::stream::iter(names.iter().enumerate())
        .map(|(index, cluster)| {
            let api: Api<DynamicObject> = Api::namespaced_with(hub.clone(), cluster, &score_api);
            let valid_until = valid_until.clone();
            async move {
                create(
                    &api,
                    json!({"apiVersion": format!("{CLUSTER_GROUP}/v1alpha1"), "kind": "AddOnPlacementScore",
                           "metadata": {"name": RESOURCE_USAGE_SCORE, "namespace": cluster}}),
                    &format!("creating {cluster}'s score"),
                )
                .await?;
                write_score(&api, cluster, initial_score(index), &valid_until).await
            }
        })
        .buffer_unordered(LOADER_PARALLELISM)
        .try_collect::<Vec<()>>()
        .await?;
    for (index, cluster) in names.iter().enumerate() {
        scores.insert(cluster.clone(), initial_score(index));
    }
    let namespaces: Api<DynamicObject> = Api::all_with(hub.clone(), &resource::<Namespace>());
    create(
        &namespaces,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PLACEMENT_NAMESPACE}}),
        "creating the Placements' namespace",
    )
    .await?;
    let bindings: Api<DynamicObject> = Api::namespaced_with(
        hub.clone(),
        PLACEMENT_NAMESPACE,
        &resource::<ManagedClusterSetBinding>(),
    );
    create(
        &bindings,
        json!({"apiVersion": format!("{CLUSTER_GROUP}/v1beta2"), "kind": "ManagedClusterSetBinding",
               "metadata": {"name": "global", "namespace": PLACEMENT_NAMESPACE},
               "spec": {"clusterSet": "global"}}),
        "binding the global cluster set",
    )
    .await?;
    let load = load_started.elapsed();
    progress(&format!(
        "{} clusters with scores loaded in {:.1} s",
        names.len(),
        load.as_secs_f64()
    ));

    let decisions_api: Api<DynamicObject> =
        Api::namespaced_with(hub.clone(), PLACEMENT_NAMESPACE, &resource::<PlacementDecision>());
    let decisions = Watch::start(decisions_api, watcher::Config::default());
    decisions
        .until(Instant::now() + scenario.timeout, |state| Some(state.synced))
        .await;
    let placements: Api<DynamicObject> =
        Api::namespaced_with(hub.clone(), PLACEMENT_NAMESPACE, &resource::<Placement>());
    let created = Instant::now();
    for index in 0..scenario.placements {
        create(
            &placements,
            json!({
                "apiVersion": format!("{CLUSTER_GROUP}/v1beta1"), "kind": "Placement",
                "metadata": {"name": placement_name(index), "namespace": PLACEMENT_NAMESPACE},
                "spec": {
                    "numberOfClusters": placement_size(index),
                    "clusterSets": ["global"],
                    "prioritizerPolicy": {"mode": "Exact", "configurations": [{
                        "scoreCoordinate": {"type": "AddOn",
                                            "addOn": {"resourceName": RESOURCE_USAGE_SCORE, "scoreName": SCORE_NAME}},
                        "weight": 1,
                    }]},
                },
            }),
            &format!("creating Placement {}", placement_name(index)),
        )
        .await?;
    }
    let expected = |scores: &BTreeMap<String, i64>| -> BTreeMap<String, Vec<String>> {
        (0..scenario.placements)
            .map(|i| (placement_name(i), top_clusters(scores, placement_size(i))))
            .collect()
    };
    let want = expected(&scores);
    decisions
        .until(created + scenario.timeout, |state| {
            (decided_by_placement(&state.objects) == want).then_some(())
        })
        .await
        .ok_or_else(|| {
            let state = decisions.watched.lock();
            mismatch(
                "the first decisions",
                &decided_by_placement(&state.objects),
                &want,
                &cp.log_tail("hub-placement-controller", 20),
            )
        })?;
    let first_decisions = created.elapsed();
    progress(&format!(
        "{} Placements decided {:.1} s after their creation",
        scenario.placements,
        first_decisions.as_secs_f64()
    ));
    if scenario.check_with_simulate {
        simulate_agrees(cp, dir, &want).await?;
    }

    let mut timings = Vec::with_capacity(scenario.changes);
    for step in 0..scenario.changes {
        let (index, value, entered) = change(step, &names);
        let cluster = &names[index];
        scores.insert(cluster.clone(), value);
        let want = expected(&scores);
        let api: Api<DynamicObject> = Api::namespaced_with(hub.clone(), cluster, &score_api);
        let (arrived_before, decided_before) = {
            let state = decisions.watched.lock();
            (state.arrivals.len(), decided_by_placement(&state.objects))
        };
        let written = Instant::now();
        write_score(&api, cluster, value, &valid_until).await?;
        let done = decisions
            .until(written + scenario.timeout, |state| {
                let decided = decided_by_placement(&state.objects);
                (decided == want).then(|| {
                    let first = state.arrivals.get(arrived_before).copied().unwrap_or(written);
                    let last = state.arrivals.last().copied().unwrap_or(written);
                    (first, last, state.arrivals.len() - arrived_before, decided)
                })
            })
            .await;
        let Some((first, last, decision_events, decided_after)) = done else {
            let state = decisions.watched.lock();
            return Err(mismatch(
                &format!("after {cluster}'s score became {value} (change {})", step + 1),
                &decided_by_placement(&state.objects),
                &want,
                &cp.log_tail("hub-placement-controller", 20),
            ));
        };
        let with_cluster = |decided: &BTreeMap<String, Vec<String>>| {
            decided.values().filter(|c| c.contains(cluster)).count()
        };
        timings.push(ChangeTiming {
            cluster: cluster.clone(),
            value,
            entered,
            first: first.saturating_duration_since(written),
            all: last.saturating_duration_since(written),
            decision_events,
            placements_with_cluster: (with_cluster(&decided_before), with_cluster(&decided_after)),
            placements_changed: decided_after
                .iter()
                .filter(|(p, c)| decided_before.get(*p) != Some(*c))
                .count(),
        });
        if scenario.check_with_simulate {
            simulate_agrees(cp, dir, &want).await?;
        }
    }
    Ok(ScoreToDecisionReport {
        clusters: names.len(),
        placements: scenario.placements,
        load,
        first_decisions,
        changes: timings,
    })
}

/// Writes a cluster's score as its agent does: one score, and how long it is valid.
pub(super) async fn write_score(
    api: &Api<DynamicObject>,
    cluster: &str,
    value: i64,
    valid_until: &str,
) -> Result<(), Error> {
    api.patch_status(
        RESOURCE_USAGE_SCORE,
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {
            "scores": [{"name": SCORE_NAME, "value": value}],
            "validUntil": valid_until,
        }})),
    )
    .await
    .map_err(kube_error(format!("writing {cluster}'s score")))?;
    Ok(())
}

/// Each Placement's decided clusters (sorted), from its PlacementDecisions.
pub(super) fn decided_by_placement(
    decisions: &BTreeMap<String, DynamicObject>,
) -> BTreeMap<String, Vec<String>> {
    let mut by_placement: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for decision in decisions.values() {
        let Some(placement) = decision
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(PLACEMENT_LABEL))
        else {
            continue;
        };
        by_placement
            .entry(placement.clone())
            .or_default()
            .extend(decision_clusters([decision]));
    }
    by_placement
        .into_iter()
        .map(|(p, clusters)| (p, clusters.into_iter().collect()))
        .collect()
}

pub(super) fn mismatch(
    when: &str,
    got: &BTreeMap<String, Vec<String>>,
    want: &BTreeMap<String, Vec<String>>,
    log: &str,
) -> Error {
    let wrong: Vec<String> = want
        .iter()
        .filter(|(p, w)| got.get(*p) != Some(*w))
        .take(5)
        .map(|(p, w)| format!("{p}: OCM decided {:?}, expected {w:?}", got.get(p)))
        .collect();
    check(
        format!("OCM's PlacementDecisions {when}"),
        format!(
            "{} of {} Placements differ, e.g.\n{}\n--- placement controller:\n{log}",
            want.iter().filter(|(p, w)| got.get(*p) != Some(*w)).count(),
            want.len(),
            wrong.join("\n")
        ),
    )
}

/// `ocm-score-hub simulate` on a kubectl snapshot of the hub predicts `want` for every Placement of
/// [`PLACEMENT_NAMESPACE`].
pub(super) async fn simulate_agrees(
    cp: &ControlPlane,
    dir: &Path,
    want: &BTreeMap<String, Vec<String>>,
) -> Result<(), Error> {
    let snapshot = dir.join("scale-snapshot.yaml");
    std::fs::write(&snapshot, hub_snapshot(&cp.hub_kubeconfig())?).map_err(|source| Error::Io {
        what: format!("writing {}", snapshot.display()),
        source,
    })?;
    let program = workspace_binary("ocm-score-hub")?;
    let out = tokio::process::Command::new(&program)
        .args(["simulate", "-f"])
        .arg(&snapshot)
        .args(["-o", "json"])
        .output()
        .await
        .map_err(|source| Error::Io {
            what: format!("running {} simulate", program.display()),
            source,
        })?;
    if !out.status.success() {
        return Err(check(
            "ocm-score-hub simulate",
            format!("{}: {}", out.status, String::from_utf8_lossy(&out.stderr)),
        ));
    }
    let simulated: Vec<Value> = serde_json::from_slice(&out.stdout)
        .map_err(|e| check("ocm-score-hub simulate", format!("output is not JSON: {e}")))?;
    let predicted: BTreeMap<String, Vec<String>> = simulated
        .iter()
        .filter_map(|p| {
            let name = p["name"]
                .as_str()?
                .strip_prefix(&format!("{PLACEMENT_NAMESPACE}/"))?;
            let mut decisions: Vec<String> = p["decisions"]
                .as_array()?
                .iter()
                .filter_map(|d| d.as_str().map(str::to_owned))
                .collect();
            decisions.sort();
            Some((name.to_owned(), decisions))
        })
        .collect();
    if predicted != *want {
        return Err(mismatch(
            "as simulate predicts them",
            &predicted,
            want,
            "(simulate's prediction is 'OCM decided' above)",
        ));
    }
    Ok(())
}

/// The median and the 99th percentile (nearest rank) of `samples`.
pub fn median_p99(samples: &[Duration]) -> (Duration, Duration) {
    let mut sorted = samples.to_vec();
    sorted.sort();
    let rank = |q: f64| {
        let n = sorted.len();
        if n == 0 {
            return Duration::ZERO;
        }
        let index = ((q * n as f64).ceil() as usize).clamp(1, n) - 1;
        sorted[index]
    };
    (rank(0.5), rank(0.99))
}
