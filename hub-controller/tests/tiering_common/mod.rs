//! Shared by the TieredPlacement controller's end-to-end tests: a hub (the API server double with
//! the upstream OCM CRDs, our CRD and the controller's RBAC from `manifests/hub`, RBAC enforced),
//! a stand-in for OCM's placement controller, and the `ocm-score-hub tiering` process.
//!
//! The double has no placement controller. The stand-in schedules every Placement with
//! `scheduler-core`'s OCM-exact engine (`placement::sync_placement`) a few times a second and
//! writes the PlacementDecisions and the Placement status as OCM's placement controller does. It
//! reads the double's store in process, so cut watches and injected faults (which the tests aim
//! at the controller's `patch` requests) do not touch it. Deviation from a real hub, documented
//! here: the double has no OCM mutating webhook, so taints carry an explicit
//! `timeAdded`.

#![allow(dead_code)]

use jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use ocm_score_api::crd::tiered_placement::TieredPlacement;
use ocm_score_api::{
    AddOnPlacementScore, ManagedCluster, ManagedClusterSet, ManagedClusterSetBinding, Placement,
    PlacementDecision,
};
use ocm_score_kube_double::crd::Crd;
use ocm_score_kube_double::{ApiServer, Gvr, Identity};
use ocm_score_scheduler::placement::writes::DecisionWrite;
use ocm_score_scheduler::placement::{HubObjects, HubSnapshot, SyncOutcome, sync_placement};
use ocm_score_tests::support::TempDir;
pub use ocm_score_tests::tiering::ControllerProcess;
use ocm_score_tests::tiering::TieringView;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// How long any single wait may take on a loaded machine.
pub const CONVERGE: Duration = Duration::from_secs(90);
/// Where the TieredPlacements live.
pub const NAMESPACE: &str = "apps";
pub const CONTROLLER_USER: &str = "system:serviceaccount:ocm-score:ocm-score-tiering";
pub const UNREACHABLE: &str = "cluster.open-cluster-management.io/unreachable";
pub const SCORE_RESOURCE: &str = "resource-usage-score";

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/hub")
}

/// The tiering controller's objects from `manifests/hub`: its namespace, account and roles.
fn tiering_manifests() -> Vec<Value> {
    let mut out = Vec::new();
    for file in [
        "namespace.yaml",
        "tiering-service-account.yaml",
        "tiering-cluster-role.yaml",
        "tiering-leader-election-rbac.yaml",
    ] {
        let path = manifests_dir().join(file);
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        out.extend(ocm_score_kube_double::parse_objects(file, &text).expect("YAML"));
    }
    out
}

/// One of our CRDs, as `manifests/hub/crds` installs it.
fn own_crd(plural: &str) -> Crd {
    let path = manifests_dir().join(format!("crds/tiering.ocm-score.io_{plural}.yaml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    Crd::from_yaml(&path, &text).unwrap_or_else(|e| panic!("the {plural} CRD: {e:?}"))
}

pub fn gvr<K: kube::Resource<DynamicType = ()>>() -> Gvr {
    Gvr::of::<K>()
}

fn typed<K: DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).expect("an object of the expected kind")
}

/// A hub with two cluster sets bound to `apps`: `primary` (p1, p2) and `secondary` (s1, s2).
pub struct Hub {
    pub server: Arc<ApiServer>,
    pub admin: kube::Client,
    standin: JoinHandle<()>,
    dir: TempDir,
}

impl Drop for Hub {
    fn drop(&mut self) {
        self.standin.abort();
    }
}

impl Hub {
    pub async fn start() -> Hub {
        let server = ApiServer::builder()
            .upstream_crds()
            .crd(own_crd("tieredplacements"))
            .crd(own_crd("workloadshapes"))
            .builtin_kinds()
            .rbac(true)
            .bookmark_interval(Duration::from_secs(1))
            .start()
            .await
            .expect("starting the API server double");
        for object in tiering_manifests() {
            let what = format!("{} {}", object["kind"], object["metadata"]["name"]);
            server
                .create(object)
                .unwrap_or_else(|e| panic!("installing {what}: {e:?}"));
        }
        server
            .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}))
            .expect("namespace");
        for set in ["primary", "secondary"] {
            server
                .create(json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2",
                    "kind": "ManagedClusterSet", "metadata": {"name": set},
                    "spec": {"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}}}))
                .expect("cluster set");
            server
                .create(json!({"apiVersion": "cluster.open-cluster-management.io/v1beta2",
                    "kind": "ManagedClusterSetBinding", "metadata": {"name": set, "namespace": NAMESPACE},
                    "spec": {"clusterSet": set}}))
                .expect("binding");
        }
        for (cluster, set) in [
            ("p1", "primary"),
            ("p2", "primary"),
            ("s1", "secondary"),
            ("s2", "secondary"),
        ] {
            server
                .create(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": cluster}}))
                .expect("cluster namespace");
            server
                .create(json!({"apiVersion": "cluster.open-cluster-management.io/v1",
                    "kind": "ManagedCluster",
                    "metadata": {"name": cluster,
                                 "labels": {"cluster.open-cluster-management.io/clusterset": set}},
                    "spec": {"hubAcceptsClient": true}}))
                .expect("cluster");
        }
        let server = Arc::new(server);
        let admin = server.admin_client();
        let standin = tokio::spawn(stand_in(server.clone(), admin.clone()));
        Hub {
            server,
            admin,
            standin,
            dir: TempDir::new("tiering-e2e"),
        }
    }

    /// Starts `ocm-score-hub tiering` as the controller's service account (the manifests' RBAC).
    pub fn controller(&self, identity: &str) -> ControllerProcess {
        self.controller_with(identity, &[])
    }

    /// [`Hub::controller`] with more flags.
    pub fn controller_with(&self, identity: &str, flags: &[&str]) -> ControllerProcess {
        let groups = [
            "system:serviceaccounts",
            "system:serviceaccounts:ocm-score",
            "system:authenticated",
        ];
        let id: Identity = self.server.identity(CONTROLLER_USER, &groups);
        let kubeconfig = self.dir.path().join(format!("{identity}.kubeconfig"));
        self.server
            .write_kubeconfig(&id, &kubeconfig)
            .expect("writing a kubeconfig");
        ControllerProcess::tiering(
            Path::new(env!("CARGO_BIN_EXE_ocm-score-hub")),
            &kubeconfig,
            identity,
            Duration::from_secs(5),
            flags,
        )
    }

    /// The TieredPlacements of [`NAMESPACE`], read through the API.
    pub fn view(&self) -> TieringView {
        TieringView::new(self.admin.clone(), NAMESPACE)
    }

    pub fn create_tiered(&self, yaml: &str) {
        let object: Value = serde_norway::from_str(yaml).expect("TieredPlacement YAML");
        self.server.create(object).expect("creating the TieredPlacement");
    }

    pub async fn patch_tiered(&self, name: &str, patch: Value) {
        Api::<TieredPlacement>::namespaced(self.admin.clone(), NAMESPACE)
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patching the TieredPlacement");
    }

    /// The TieredPlacement `name`, if it exists.
    pub fn find_tiered(&self, name: &str) -> Option<TieredPlacement> {
        self.server
            .object(&gvr::<TieredPlacement>(), NAMESPACE, name)
            .map(typed)
    }

    pub fn tiered(&self, name: &str) -> TieredPlacement {
        typed(
            self.server
                .object(&gvr::<TieredPlacement>(), NAMESPACE, name)
                .expect("the TieredPlacement exists"),
        )
    }

    pub fn child(&self, name: &str) -> Option<Placement> {
        self.server
            .object(&gvr::<Placement>(), NAMESPACE, name)
            .map(typed)
    }

    /// The clusters in the placement's decisions (what a consumer reads, by label).
    pub fn decisions(&self, placement: &str) -> BTreeSet<String> {
        self.server
            .objects(&gvr::<PlacementDecision>())
            .into_iter()
            .filter(|d| {
                d["metadata"]["namespace"] == NAMESPACE
                    && d["metadata"]["labels"]["cluster.open-cluster-management.io/placement"] == placement
            })
            .flat_map(|d| {
                d["status"]["decisions"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default()
                    .into_iter()
                    .filter_map(|c| c["clusterName"].as_str().map(str::to_owned))
            })
            .collect()
    }

    /// The condition `type_` of the TieredPlacement: (status, reason).
    pub fn condition(&self, name: &str, type_: &str) -> Option<(String, String)> {
        let tp = self.tiered(name);
        let status = tp.status?;
        status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status.clone(), c.reason.clone()))
    }

    /// Events on the TieredPlacement with this reason: their notes.
    pub fn events(&self, reason: &str) -> Vec<String> {
        self.server
            .objects(&Gvr::new("events.k8s.io", "v1", "events"))
            .into_iter()
            .filter(|e| e["reason"] == reason && e["regarding"]["kind"] == "TieredPlacement")
            .map(|e| e["note"].as_str().unwrap_or_default().to_owned())
            .collect()
    }

    pub async fn taint(&self, cluster: &str, added: Timestamp) {
        self.patch_cluster(
            cluster,
            json!({"spec": {"taints": [{"key": UNREACHABLE, "effect": "NoSelect", "timeAdded": added.to_string()}]}}),
        )
        .await;
    }

    pub async fn untaint(&self, cluster: &str) {
        self.patch_cluster(cluster, json!({"spec": {"taints": null}}))
            .await;
    }

    async fn patch_cluster(&self, cluster: &str, patch: Value) {
        Api::<ManagedCluster>::all(self.admin.clone())
            .patch(cluster, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .expect("patching a ManagedCluster");
    }

    /// Publishes `resource-usage-score` of `cluster` with one score, valid until `valid_until`.
    pub async fn score(&self, cluster: &str, name: &str, value: i32, valid_until: Timestamp) {
        let api = Api::<AddOnPlacementScore>::namespaced(self.admin.clone(), cluster);
        if self
            .server
            .object(&gvr::<AddOnPlacementScore>(), cluster, SCORE_RESOURCE)
            .is_none()
        {
            let object: AddOnPlacementScore = typed(json!({
                "apiVersion": "cluster.open-cluster-management.io/v1alpha1",
                "kind": "AddOnPlacementScore",
                "metadata": {"name": SCORE_RESOURCE, "namespace": cluster},
            }));
            api.create(&PostParams::default(), &object)
                .await
                .expect("creating a score");
        }
        api.patch_status(
            SCORE_RESOURCE,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {
                "scores": [{"name": name, "value": value}],
                "validUntil": valid_until.to_string(),
            }})),
        )
        .await
        .expect("writing a score");
    }

    /// The status of `cluster`'s `ocm-score-reserved` score, if the object exists.
    pub fn reserved_score(&self, cluster: &str) -> Option<Value> {
        self.server
            .object(&gvr::<AddOnPlacementScore>(), cluster, "ocm-score-reserved")
            .map(|o| o["status"].clone())
    }

    pub async fn delete_child(&self, name: &str) {
        Api::<Placement>::namespaced(self.admin.clone(), NAMESPACE)
            .delete(name, &DeleteParams::default())
            .await
            .expect("deleting the child");
    }

    /// The controller's requests so far: verb, resource, code.
    pub fn controller_requests(&self) -> String {
        self.server
            .requests()
            .iter()
            .filter(|r| r.user == CONTROLLER_USER)
            .map(|r| format!("{} {} {}/{} {}", r.verb, r.resource, r.namespace, r.name, r.code))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Writes to the TieredPlacement's status or child by the controller so far.
    pub fn controller_writes(&self) -> usize {
        self.server
            .requests()
            .iter()
            .filter(|r| {
                r.is_write()
                    && r.user == CONTROLLER_USER
                    && (r.resource == "placements" || r.resource == "tieredplacements")
            })
            .count()
    }
}

/// Waits until `check` gives a value, polling; panics after [`CONVERGE`] with `context()`.
pub async fn eventually<T>(
    what: &str,
    context: impl Fn() -> String,
    mut check: impl FnMut() -> Option<T>,
) -> T {
    ocm_score_tests::support::eventually(what, CONVERGE, context, || {
        let v = check();
        async move { v }
    })
    .await
}

// ---------------------------------------------------------------------------------------------
// The placement stand-in

fn objects<K: DeserializeOwned + kube::Resource<DynamicType = ()>>(server: &ApiServer) -> Vec<K> {
    server.objects(&gvr::<K>()).into_iter().map(typed).collect()
}

/// Schedules every Placement a few times a second and writes what OCM would.
async fn stand_in(server: Arc<ApiServer>, client: kube::Client) {
    loop {
        let placements: Vec<Placement> = objects(&server);
        if !placements.is_empty() {
            let snapshot = HubSnapshot::new(HubObjects {
                clusters: objects::<ManagedCluster>(&server),
                cluster_sets: objects::<ManagedClusterSet>(&server),
                bindings: objects::<ManagedClusterSetBinding>(&server),
                placements: placements.clone(),
                decisions: objects::<PlacementDecision>(&server),
                scores: objects::<AddOnPlacementScore>(&server),
            });
            if let Ok(snapshot) = snapshot {
                for placement in &placements {
                    // A failed write is retried on the next pass, as OCM's queue would.
                    let _ = schedule_one(&client, &snapshot, placement).await;
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn schedule_one(
    client: &kube::Client,
    snapshot: &HubSnapshot,
    placement: &Placement,
) -> Result<(), kube::Error> {
    let Ok(SyncOutcome::Scheduled(result)) = sync_placement(snapshot, placement, Timestamp::now()) else {
        return Ok(());
    };
    let namespace = placement.metadata.namespace.as_deref().unwrap_or_default();
    let decisions = Api::<PlacementDecision>::namespaced(client.clone(), namespace);
    for write in &result.writes {
        match write {
            DecisionWrite::Create(pd) => {
                let name = pd.metadata.name.clone().unwrap_or_default();
                decisions.create(&PostParams::default(), pd).await?;
                decisions
                    .patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": pd.status})),
                    )
                    .await?;
            }
            DecisionWrite::PatchStatus { name, status } => {
                decisions
                    .patch_status(
                        name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": status})),
                    )
                    .await?;
            }
            DecisionWrite::PatchMetadata {
                name,
                labels,
                annotations,
            } => {
                decisions
                    .patch(
                        name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"metadata": {"labels": labels, "annotations": annotations}})),
                    )
                    .await?;
            }
            DecisionWrite::Delete { name } => {
                decisions.delete(name, &DeleteParams::default()).await?;
            }
        }
    }
    if result.status_changed {
        // A full update (PUT), so faults aimed at the controller's patches leave it alone.
        let mut updated = placement.clone();
        updated.status = Some(result.status.clone());
        Api::<Placement>::namespaced(client.clone(), namespace)
            .replace_status(
                placement.metadata.name.as_deref().unwrap_or_default(),
                &PostParams::default(),
                &updated,
            )
            .await?;
    }
    Ok(())
}
