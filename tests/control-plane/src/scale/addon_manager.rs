//! [`addon_manager_at_scale`]: the add-on manager installed as shipped, over a loaded fleet.

use super::*;

/// The add-on manager scenario's size and patience.
#[derive(Clone, Debug)]
pub struct AddonScale {
    pub clusters: usize,
    /// The manager's `--resync-period` (shorter than its default, so the quiet window holds resyncs).
    pub resync: Duration,
    /// How long the settled manager is watched for requests.
    pub quiet: Duration,
    /// Patience for each step (loading, deciding, converging, settling).
    pub timeout: Duration,
}

/// What [`addon_manager_at_scale`] measured.
#[derive(Clone, Debug)]
pub struct AddonScaleReport {
    pub clusters: usize,
    /// The loader's time (kept out of every other figure).
    pub load: Duration,
    /// From the install until OCM's placement decided every cluster (before the manager starts).
    pub install_decided: Duration,
    /// From the manager's start until every cluster's ManifestWork existed.
    pub all_works: Duration,
    pub until_all_works: Requests,
    /// From the manager's start until it had gone [`SETTLED_AFTER`] without a write.
    pub settled: Duration,
    pub until_settled: Requests,
    /// The quiet window after settling, and the requests made in it.
    pub quiet: Duration,
    pub resync: Duration,
    pub in_quiet: Requests,
    /// What the manager's own `/metrics` counted in the quiet window: its passes over add-ons
    /// (the resyncs the window is about), the ones that failed, and the writes it sent.
    pub in_quiet_counted: QuietCounts,
    pub peak_rss_kib: u64,
    pub rss_kib: u64,
}

/// Our add-on manager on `scale.clusters` bare clusters (prefix `fleet`): load them, install
/// `manifests/hub` with kubectl, wait for OCM to decide the install Placement, start the manager as
/// its Deployment says (with `--resync-period`), and measure until every ManifestWork exists, until
/// the manager settles, and over a quiet window. Every ManifestWork is checked: the agent for its
/// own cluster, identical to every other cluster's but for the cluster's name, owned by that
/// cluster's ManagedClusterAddOn. `cp` must audit `ocm-score` ([`crate::Builder::audit_namespace`]).
pub async fn addon_manager_at_scale(
    cp: &ControlPlane,
    dir: &Path,
    scale: &AddonScale,
    progress: &dyn Fn(&str),
) -> Result<AddonScaleReport, Error> {
    let audit_log = cp
        .audit_log()
        .ok_or_else(|| Error::Options(format!("the control plane must audit {HUB_NAMESPACE}")))?;
    let hub = cp.hub_client().await?;
    let names = fleet_names("fleet", scale.clusters);
    let load = load_fleet(&hub, &names, scale.timeout).await?;
    progress(&format!(
        "{} clusters loaded in {:.1} s",
        names.len(),
        load.as_secs_f64()
    ));

    let installed = Instant::now();
    kubectl(&cp.hub_kubeconfig(), &["apply", "-k", "manifests/hub"])?;
    let decisions: Api<DynamicObject> =
        Api::namespaced_with(hub.clone(), HUB_NAMESPACE, &resource::<PlacementDecision>());
    let decided = Watch::start(
        decisions,
        watcher::Config::default().labels(&format!("{PLACEMENT_LABEL}=all-clusters")),
    );
    let everyone: BTreeSet<String> = names.iter().cloned().collect();
    decided
        .until(installed + scale.timeout, |state| {
            let decided: BTreeSet<String> = decision_clusters(state.objects.values()).into_iter().collect();
            (decided == everyone).then_some(())
        })
        .await
        .ok_or_else(|| {
            check(
                "OCM's install Placement all-clusters",
                format!("did not decide all {} clusters", names.len()),
            )
        })?;
    drop(decided);
    let install_decided = installed.elapsed();
    progress(&format!(
        "Placement all-clusters decided {} clusters {:.1} s after the install",
        names.len(),
        install_decided.as_secs_f64()
    ));

    let work_name = format!("addon-{ADDON}-deploy-0");
    let works_api: Api<DynamicObject> = Api::all_with(hub.clone(), &resource::<ManifestWork>());
    let works = Watch::start(
        works_api,
        watcher::Config::default().fields(&format!("metadata.name={work_name}")),
    );
    works
        .until(Instant::now() + scale.timeout, |state| Some(state.synced))
        .await;
    let mut audit = AuditCursor::at_end(&audit_log, MANAGER_USER)?;
    let resync = format!("--resync-period={}s", scale.resync.as_secs().max(1));
    // The clock starts when the process does: after the ServiceAccount token, the Deployment read
    // and the (no-op) build of the binary that precede the spawn.
    let mut manager = start_manager_with(cp, dir, &[resync]).await?;
    let started = Instant::now();
    let all_works_at = works
        .until(started + scale.timeout, |state| {
            let clusters: BTreeSet<&str> = state
                .objects
                .values()
                .filter_map(|w| w.metadata.namespace.as_deref())
                .filter(|ns| everyone.contains(*ns))
                .collect();
            (clusters.len() == everyone.len()).then(|| state.arrivals.last().copied().unwrap_or(started))
        })
        .await;
    manager.check_running()?;
    let Some(all_works_at) = all_works_at else {
        let have = works.watched.lock().objects.len();
        return Err(not_converged(
            &manager,
            format!(
                "{have} of {} ManifestWorks within {:?}",
                names.len(),
                scale.timeout
            ),
        ));
    };
    let all_works = all_works_at.saturating_duration_since(started);
    let until_all_works = audit.advance()?;
    progress(&format!(
        "every ManifestWork exists {:.1} s after the manager started",
        all_works.as_secs_f64()
    ));
    let agent_image = agent_image(&hub).await?;
    {
        let state = works.watched.lock();
        check_works(state.objects.values(), &names, &agent_image)?;
    }

    // Settled: no write for SETTLED_AFTER.
    let mut until_settled = until_all_works.clone();
    let mut last_write = Instant::now();
    let mut last_writes = until_all_works.write_samples.clone();
    loop {
        manager.check_running()?;
        let more = audit.advance()?;
        if more.writes() > 0 {
            last_write = Instant::now();
            last_writes = more.write_samples.clone();
        }
        until_settled.add(&more);
        if last_write.elapsed() >= SETTLED_AFTER {
            break;
        }
        if started.elapsed() > scale.timeout {
            return Err(not_converged(
                &manager,
                format!(
                    "the manager still writes {:?} after its start, e.g. {last_writes:?}",
                    scale.timeout
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let settled = last_write.saturating_duration_since(started);
    progress(&format!(
        "the manager settled (last write {:.1} s after its start); watching a quiet {:?}",
        settled.as_secs_f64(),
        scale.quiet
    ));

    // The quiet window: an observation of fixed length, as "no write in a minute" is a claim
    // about a minute. Its claim is only worth something if the manager's periodic passes ran in
    // it: its own counters, read at both ends, say how many passes there were.
    let counted_before = quiet_counters(&manager).await?;
    tokio::time::sleep(scale.quiet).await;
    manager.check_running()?;
    let counted_after = quiet_counters(&manager).await?;
    let in_quiet = audit.advance()?;
    let in_quiet_counted = QuietCounts {
        addon_passes: counted_after.addon_passes - counted_before.addon_passes,
        failed_passes: counted_after.failed_passes - counted_before.failed_passes,
        writes: counted_after.writes - counted_before.writes,
    };
    let (peak_rss_kib, rss_kib) = memory_kib(manager.pid());
    {
        let state = works.watched.lock();
        check_works(state.objects.values(), &names, &agent_image)?;
    }
    manager.terminate();
    manager.wait_or_kill(Duration::from_secs(15));
    Ok(AddonScaleReport {
        clusters: names.len(),
        load,
        install_decided,
        all_works,
        until_all_works,
        settled,
        until_settled,
        quiet: scale.quiet,
        resync: scale.resync,
        in_quiet,
        in_quiet_counted,
        peak_rss_kib,
        rss_kib,
    })
}

/// The add-on manager's counters over the quiet window, from its `/metrics` at the window's start
/// and end.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct QuietCounts {
    /// Passes of the `addon` controller (one per ManagedClusterAddOn and pass): with nothing
    /// changing, only the periodic requeue (`--resync-period`) brings them.
    pub addon_passes: f64,
    /// Passes of any controller that failed (a failed pass writes nothing, and proves nothing).
    pub failed_passes: f64,
    /// Writes the manager sent, by its own count (the audit log's view is [`Requests`]).
    pub writes: f64,
}

/// The counters [`QuietCounts`] is the difference of, read now from the manager's `/metrics`.
pub(super) async fn quiet_counters(manager: &Component) -> Result<QuietCounts, Error> {
    let metrics = super::super::observe::scrape(manager)
        .await
        .ok_or_else(|| not_converged(manager, "its /metrics did not answer".into()))?;
    Ok(QuietCounts {
        addon_passes: metrics.sum("ocm_score_addon_reconciles_total", &[("controller", "addon")]),
        failed_passes: metrics.sum("ocm_score_addon_reconcile_errors_total", &[]),
        writes: metrics.sum("ocm_score_addon_writes_total", &[]),
    })
}

pub(super) fn not_converged(manager: &Component, problem: String) -> Error {
    check("the add-on manager", format!("{problem}\n{}", manager.tail()))
}

/// The agent image the installed Deployment gives the manager (`--agent-image=`).
pub(super) async fn agent_image(hub: &Client) -> Result<String, Error> {
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(hub.clone(), HUB_NAMESPACE);
    let deployment = deployments
        .get("ocm-score-addon-manager")
        .await
        .map_err(kube_error("reading the add-on manager's Deployment"))?;
    deployment
        .spec
        .and_then(|s| s.template.spec)
        .and_then(|p| p.containers.into_iter().next())
        .and_then(|c| c.args)
        .unwrap_or_default()
        .iter()
        .find_map(|a| a.strip_prefix("--agent-image=").map(str::to_owned))
        .ok_or_else(|| check("the add-on manager's Deployment", "no --agent-image argument"))
}

/// Every cluster has exactly one deploy work, labelled for the add-on and owned by the cluster's
/// ManagedClusterAddOn, whose agent Deployment runs `agent_image` for that cluster; and all works
/// are the same but for the cluster's name.
pub(super) fn check_works<'a>(
    works: impl Iterator<Item = &'a DynamicObject>,
    clusters: &[String],
    agent_image: &str,
) -> Result<(), Error> {
    let by_cluster: BTreeMap<&str, &DynamicObject> = works
        .filter_map(|w| w.metadata.namespace.as_deref().map(|ns| (ns, w)))
        .collect();
    let mut reference: Option<(String, String)> = None;
    for cluster in clusters {
        let what = format!("{cluster}: ManifestWork addon-{ADDON}-deploy-0");
        let work = by_cluster
            .get(cluster.as_str())
            .ok_or_else(|| check(&what, "missing"))?;
        let label = work
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(ADDON_NAME_LABEL));
        if label.map(String::as_str) != Some(ADDON) {
            return Err(check(&what, format!("label {ADDON_NAME_LABEL} is {label:?}")));
        }
        let owned = work
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.kind == "ManagedClusterAddOn" && o.name == ADDON);
        if !owned {
            return Err(check(
                &what,
                format!(
                    "not owned by ManagedClusterAddOn {ADDON}: {:?}",
                    work.metadata.owner_references
                ),
            ));
        }
        let manifests = work
            .data
            .pointer("/spec/workload/manifests")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let container = manifests
            .iter()
            .find(|m| m["kind"] == "Deployment")
            .and_then(|d| d.pointer("/spec/template/spec/containers/0"))
            .ok_or_else(|| check(&what, "no agent Deployment among its manifests"))?;
        if container["image"] != agent_image {
            return Err(check(
                &what,
                format!("agent image {}, not {agent_image}", container["image"]),
            ));
        }
        let cluster_arg = format!("--cluster-name={cluster}");
        let args = container["args"].as_array().cloned().unwrap_or_default();
        if !args.iter().any(|a| a == cluster_arg.as_str()) {
            return Err(check(
                &what,
                format!("the agent's args lack {cluster_arg}: {args:?}"),
            ));
        }
        // Under OCM's lifecycle the work's condition rule names the digest of the Deployment as
        // rendered (its annotation `ocm-score.io/rendered-sha256`), which differs with the cluster
        // name inside it: the digest must be that Deployment's, and is then compared as a name.
        let digest = manifests
            .iter()
            .find(|m| m["kind"] == "Deployment")
            .and_then(|d| d.pointer("/metadata/annotations/ocm-score.io~1rendered-sha256"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let mut spec = work.data["spec"].to_string();
        if !digest.is_empty() {
            let rules = work.data.pointer("/spec/manifestConfigs").map(Value::to_string);
            if rules
                .as_deref()
                .is_some_and(|r| r.contains("rendered-sha256") && !r.contains(digest))
            {
                return Err(check(
                    &what,
                    format!("its condition rule names another Deployment than its own ({digest}): {rules:?}"),
                ));
            }
            spec = spec.replace(digest, "<digest>");
        }
        let spec = spec.replace(cluster.as_str(), "<cluster>");
        match &reference {
            None => reference = Some((cluster.clone(), spec)),
            Some((first, expected)) if *expected != spec => {
                return Err(check(
                    &what,
                    format!("differs from {first}'s but for the cluster name:\n{spec}\nvs\n{expected}"),
                ));
            }
            Some(_) => {}
        }
    }
    if by_cluster.len() != clusters.len() {
        return Err(check(
            "deploy ManifestWorks",
            format!("{} for {} clusters", by_cluster.len(), clusters.len()),
        ));
    }
    Ok(())
}
