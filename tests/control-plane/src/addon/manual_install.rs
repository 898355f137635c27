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
/// hand applies. Returns the overlay's directory.
pub fn manual_install_overlay(dir: &Path) -> Result<PathBuf, Error> {
    let overlay = dir.join("hub-manual");
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
        "      - op: replace".to_owned(),
        "        path: /spec/installStrategy".to_owned(),
        "        value: {type: Manual}".to_owned(),
        String::new(),
    ]
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
