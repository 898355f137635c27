//! The manual install (`manifests/hub` with our manager left out) and what an add-on leaves behind when it goes.

use super::*;

/// Copies the files below `from` into `to`, subdirectories included (the hub install lists its CRD
/// directory as a kustomization of its own).
pub(super) fn copy_tree(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(to).map_err(|source| Error::Io {
        what: format!("creating {}", to.display()),
        source,
    })?;
    let entries = std::fs::read_dir(from).map_err(|source| Error::Io {
        what: format!("reading {}", from.display()),
        source,
    })?;
    for entry in entries.flatten() {
        let path = entry.path();
        let target = to.join(entry.file_name());
        if path.is_dir() {
            copy_tree(&path, &target)?;
        } else if path.is_file() {
            std::fs::copy(&path, &target).map_err(|source| Error::Io {
                what: format!("copying {}", path.display()),
                source,
            })?;
        }
    }
    Ok(())
}

/// Writes, in `dir`, a kustomize overlay of `manifests/hub` whose ClusterManagementAddOn installs
/// nothing by itself (`installStrategy: Manual`): what a user who creates ManagedClusterAddOns by
/// hand applies, here with `lifecycle: self` (see [`self_lifecycle_overlay`]). Returns the overlay's
/// directory.
pub fn manual_install_overlay(dir: &Path) -> Result<PathBuf, Error> {
    hub_overlay(
        dir,
        "hub-manual",
        &[
            ("replace", "/spec/installStrategy", "{type: Manual}".to_owned()),
            self_lifecycle(),
        ],
    )
}

/// Writes, in `dir`, a kustomize overlay of `manifests/hub` whose ClusterManagementAddOn says
/// `addon.open-cluster-management.io/lifecycle: self`: the install of a user who keeps the install
/// strategy with our manager (the chart's `install.lifecycle=self`; docs/install.md, "Who runs the
/// install strategy"). Tests whose agents run as processes need it too: under OCM's lifecycle an
/// agent's work turns Available only once its pods run (the condition rule OCM's rollouts count on),
/// so with no kubelet OCM never records a config as applied. Returns the overlay's directory.
pub fn self_lifecycle_overlay(dir: &Path) -> Result<PathBuf, Error> {
    hub_overlay(dir, "hub-self", &[self_lifecycle()])
}

/// The JSON patch operation that annotates the ClusterManagementAddOn `lifecycle: self`.
fn self_lifecycle() -> (&'static str, &'static str, String) {
    let annotation = ocm_score_api::well_known::LIFECYCLE_ANNOTATION;
    ("add", "/metadata/annotations", format!("{{{annotation}: self}}"))
}

/// A kustomize overlay of `manifests/hub` in `dir/name` that applies JSON patch operations (`op`,
/// `path`, `value` in YAML flow style) to the ClusterManagementAddOn.
fn hub_overlay(dir: &Path, name: &str, operations: &[(&str, &str, String)]) -> Result<PathBuf, Error> {
    let overlay = dir.join(name);
    std::fs::create_dir_all(&overlay).map_err(|source| Error::Io {
        what: format!("creating {}", overlay.display()),
        source,
    })?;
    // kustomize refuses absolute paths, and a temp dir is no fixed distance from the workspace:
    // the overlay gets its own copy of the install as its base.
    let base = overlay.join("base");
    copy_tree(&workspace_dir().join("manifests/hub"), &base)?;
    let kustomization = [
        "apiVersion: kustomize.config.k8s.io/v1beta1".to_owned(),
        "kind: Kustomization".to_owned(),
        "resources:".to_owned(),
        "  - base".to_owned(),
        "patches:".to_owned(),
        "  - target:".to_owned(),
        "      kind: ClusterManagementAddOn".to_owned(),
        format!("      name: {ADDON}"),
        "    patch: |-".to_owned(),
    ]
    .into_iter()
    .chain(operations.iter().flat_map(|(op, path, value)| {
        [
            format!("      - op: {op}"),
            format!("        path: {path}"),
            format!("        value: {value}"),
        ]
    }))
    .chain([String::new()])
    .collect::<Vec<_>>()
    .join("\n");
    let path = overlay.join("kustomization.yaml");
    std::fs::write(&path, kustomization).map_err(|source| Error::Io {
        what: format!("writing {}", path.display()),
        source,
    })?;
    Ok(overlay)
}

/// What of the add-on is still there after an uninstall: its hub objects (ClusterManagementAddOn,
/// AddOnDeploymentConfig, the `ocm-score` namespace, cluster RBAC, and in each cluster namespace the
/// ManagedClusterAddOn, ManifestWorks, Roles, RoleBindings and score), any object of ours still
/// holding an `ocm-score.io` finalizer, and on each managed cluster the agent's Deployment. Empty
/// when nothing is left.
pub async fn leftovers(cp: &ControlPlane, clusters: &[&str]) -> Result<Vec<String>, Error> {
    Ok(addon_objects(cp, clusters)
        .await?
        .into_iter()
        .map(|(what, meta)| {
            let finalizers = meta.finalizers.unwrap_or_default();
            format!(
                "{what}{}{}",
                if meta.deletion_timestamp.is_some() {
                    " (deleting)"
                } else {
                    ""
                },
                if finalizers.is_empty() {
                    String::new()
                } else {
                    format!(" finalizers {finalizers:?}")
                }
            )
        })
        .collect())
}

/// The add-on's objects (see [`addon_objects`]) written between the snapshots `before` and `after`,
/// each with the field managers its managedFields name as writing since `since`; an object gone by
/// `after` has `None`. The cluster's score, which its agent renews every refresh, is left out.
pub fn writes_between(
    before: &[(String, ObjectMeta)],
    after: &[(String, ObjectMeta)],
    since: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Vec<(String, Option<BTreeSet<String>>)> {
    let version = |objects: &[(String, ObjectMeta)], what: &str| {
        objects
            .iter()
            .find(|(w, _)| w == what)
            .map(|(_, m)| m.resource_version.clone().unwrap_or_default())
    };
    let scored = |what: &str| what.contains("AddOnPlacementScore");
    let mut out = Vec::new();
    for (what, meta) in after.iter().filter(|(w, _)| !scored(w)) {
        if version(before, what) == meta.resource_version.clone() {
            continue;
        }
        let writers = meta
            .managed_fields
            .iter()
            .flatten()
            .filter(|f| f.time.as_ref().is_some_and(|t| t.0 >= since.0))
            .map(|f| f.manager.clone().unwrap_or_default())
            .collect();
        out.push((what.clone(), Some(writers)));
    }
    for (what, _) in before.iter().filter(|(w, _)| !scored(w)) {
        if version(after, what).is_none() {
            out.push((what.clone(), None));
        }
    }
    out
}

/// What [`quiet_window`] saw written: each object of the add-on written in the window, with the field
/// managers that wrote it (`None`: it went).
#[derive(Debug)]
pub struct QuietWindow {
    pub writes: Vec<(String, Option<BTreeSet<String>>)>,
}

impl QuietWindow {
    /// The writes that are a field fight: an object written by two field managers (ours and OCM's,
    /// or two of OCM's), or gone. A writer alone fights with no one: the klusterlet
    /// (`registration-operator`) patches the add-ons' status about once a minute under OCM's
    /// lifecycle, and nobody else does.
    pub fn fights(&self) -> Vec<&(String, Option<BTreeSet<String>>)> {
        self.writes
            .iter()
            .filter(|(_, writers)| writers.as_ref().is_none_or(|w| w.len() > 1))
            .collect()
    }
}

/// Watches the add-on's objects on `clusters` (see [`addon_objects`]; the scores, which their agents
/// renew, left out) over `window` and returns what was written in it ([`writes_between`]). The window
/// opens at the start of the current second: managedFields keep whole seconds, so a write in that
/// second still counts. Every read must succeed.
pub async fn quiet_window(
    cp: &ControlPlane,
    clusters: &[&str],
    window: Duration,
) -> Result<QuietWindow, Error> {
    let now = jiff::Timestamp::now();
    let since = jiff::Timestamp::from_second(now.as_second()).unwrap_or(now);
    let since = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(since);
    let before = addon_objects(cp, clusters).await?;
    tokio::time::sleep(window).await;
    let after = addon_objects(cp, clusters).await?;
    Ok(QuietWindow {
        writes: writes_between(&before, &after, &since),
    })
}

/// The add-on's objects (see [`leftovers`]), each named by a line that says what it is and where
/// (`cluster2: ManifestWork addon-resource-usage-collect-deploy-0`), with its metadata.
pub async fn addon_objects(cp: &ControlPlane, clusters: &[&str]) -> Result<Vec<(String, ObjectMeta)>, Error> {
    let hub = cp.hub_client().await?;
    let mut found = Vec::new();
    let get = |api: Api<DynamicObject>, name: &str| {
        let name = name.to_owned();
        async move { api.get_opt(&name).await }
    };
    let kube_err = |what: &str| {
        let what = what.to_owned();
        move |source| Error::Kube { what, source }
    };
    const ADDON_GROUP: &str = "addon.open-cluster-management.io";
    let cma = dynamic(&hub, ADDON_GROUP, "v1alpha1", "ClusterManagementAddOn", None).await?;
    if let Some(o) = get(cma, ADDON)
        .await
        .map_err(kube_err("reading the ClusterManagementAddOn"))?
    {
        found.push(("ClusterManagementAddOn".to_owned(), o.metadata));
    }
    let namespaces = dynamic(&hub, "", "v1", "Namespace", None).await?;
    if let Some(o) = get(namespaces, HUB_NAMESPACE)
        .await
        .map_err(kube_err("reading the hub namespace"))?
    {
        found.push((format!("Namespace {HUB_NAMESPACE}"), o.metadata));
    }
    for kind in ["ClusterRole", "ClusterRoleBinding"] {
        let api = dynamic(&hub, "rbac.authorization.k8s.io", "v1", kind, None).await?;
        for o in api
            .list(&ListParams::default())
            .await
            .map_err(kube_err("listing cluster RBAC"))?
            .items
        {
            let name = o.metadata.name.clone().unwrap_or_default();
            if name.starts_with("ocm-score") || name.contains(ADDON) {
                found.push((format!("{kind} {name}"), o.metadata));
            }
        }
    }
    for cluster in clusters {
        let mca = dynamic(
            &hub,
            ADDON_GROUP,
            "v1alpha1",
            "ManagedClusterAddOn",
            Some(cluster),
        )
        .await?;
        if let Some(o) = get(mca, ADDON)
            .await
            .map_err(kube_err("reading a ManagedClusterAddOn"))?
        {
            found.push((format!("{cluster}: ManagedClusterAddOn"), o.metadata));
        }
        let score = dynamic(
            &hub,
            "cluster.open-cluster-management.io",
            "v1alpha1",
            "AddOnPlacementScore",
            Some(cluster),
        )
        .await?;
        if let Some(o) = get(score, "resource-usage-score")
            .await
            .map_err(kube_err("reading a score"))?
        {
            found.push((
                format!("{cluster}: AddOnPlacementScore resource-usage-score"),
                o.metadata,
            ));
        }
        for (group, version, kind) in [
            ("work.open-cluster-management.io", "v1", "ManifestWork"),
            ("rbac.authorization.k8s.io", "v1", "Role"),
            ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
        ] {
            let api = dynamic(&hub, group, version, kind, Some(cluster)).await?;
            for o in api
                .list(&ListParams::default())
                .await
                .map_err(kube_err("listing a cluster namespace"))?
                .items
            {
                let name = o.metadata.name.clone().unwrap_or_default();
                let ours = name.contains(ADDON)
                    || o.metadata
                        .finalizers
                        .iter()
                        .flatten()
                        .any(|f| f.starts_with("ocm-score.io"));
                if ours {
                    found.push((format!("{cluster}: {kind} {name}"), o.metadata));
                }
            }
        }
        // A cluster that cannot be read is an error, not a clean one.
        let managed = cp.cluster_client(cluster).await?;
        if let Some(d) = agent_deployment(&managed)
            .await
            .map_err(kube_err("reading the agent Deployment"))?
        {
            found.push((
                format!(
                    "{cluster}: agent Deployment {} on the managed cluster",
                    d.metadata.name.clone().unwrap_or_default()
                ),
                d.metadata,
            ));
        }
    }
    Ok(found)
}
