//! Every manifest under `manifests/` is one a real hub accepts as written:
//! - built-in kinds deserialize into the k8s-openapi types with no field left over (a typo or a
//!   field of another API version would be silently dropped by the server);
//! - OCM kinds validate against the upstream CRDs, strictly (unknown fields rejected), ours against
//!   our generated CRDs, and Argo CD's (the ApplicationSets of `manifests/examples/argocd`) against
//!   the CRDs of the Argo CD module `tests/argocd/go.mod` pins, which the tests run;
//! - every kustomization lists exactly the files beside it;
//! - the add-on manager's RBAC grants exactly what it needs (the end-to-end tests in
//!   `hub-controller/tests/addon_e2e.rs` run the binary with these rules and RBAC on, proving they
//!   are enough; this test proves they are no more);
//! - the workloads run non-root, read-only, without privilege escalation or capabilities.

use ocm_score_go_build::argocd;
use ocm_score_kube_double::crd::{Crd, SchemaValidator, load_files, upstream_crds};
use ocm_score_kube_double::ocm_api::locate_module;
use ocm_score_kube_double::parse_objects;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests")
}

/// One object and the file it came from.
struct Doc {
    file: String,
    object: Value,
}

impl Doc {
    fn kind(&self) -> &str {
        self.object["kind"].as_str().unwrap_or_default()
    }
    fn api_version(&self) -> &str {
        self.object["apiVersion"].as_str().unwrap_or_default()
    }
    fn name(&self) -> String {
        format!(
            "{} {} ({})",
            self.kind(),
            self.object["metadata"]["name"].as_str().unwrap_or("?"),
            self.file
        )
    }
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

/// Every object of every manifest file (kustomizations excluded).
fn documents() -> Vec<Doc> {
    let mut files = Vec::new();
    yaml_files(&manifests_dir(), &mut files);
    let mut docs = Vec::new();
    for path in files
        .iter()
        .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
    {
        let text =
            std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let file = path
            .strip_prefix(manifests_dir())
            .unwrap_or(path)
            .display()
            .to_string();
        let objects = parse_objects(&file, &text).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(!objects.is_empty(), "{file} holds no object");
        docs.extend(objects.into_iter().map(|object| Doc {
            file: file.clone(),
            object,
        }));
    }
    assert!(
        docs.len() >= 15,
        "expected the hub install and the examples, found {} objects",
        docs.len()
    );
    docs
}

#[test]
fn kustomizations_list_exactly_the_files_beside_them() {
    let mut files = Vec::new();
    yaml_files(&manifests_dir(), &mut files);
    let kustomizations: Vec<&PathBuf> = files
        .iter()
        .filter(|p| p.ends_with("kustomization.yaml"))
        .collect();
    assert!(kustomizations.len() >= 2, "{kustomizations:?}");
    for kustomization in kustomizations {
        let dir = kustomization.parent().expect("a directory");
        let parsed: Value =
            serde_norway::from_str(&std::fs::read_to_string(kustomization).expect("read")).expect("YAML");
        assert_eq!(parsed["kind"], "Kustomization", "{}", kustomization.display());
        let listed: BTreeSet<String> = parsed["resources"]
            .as_array()
            .expect("resources")
            .iter()
            .filter_map(|r| r.as_str().map(String::from))
            .collect();
        // A subdirectory that is a kustomization of its own may be listed too (the hub's CRDs).
        let subdirectories: BTreeSet<String> = files
            .iter()
            .filter(|f| f.ends_with("kustomization.yaml") && f.parent().and_then(Path::parent) == Some(dir))
            .filter_map(|f| f.parent()?.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        // So may another directory of manifests/ that is a kustomization (manifests/hub's CRDs).
        let elsewhere: BTreeSet<String> = listed
            .iter()
            .filter(|r| r.starts_with("../") && dir.join(r).join("kustomization.yaml").is_file())
            .cloned()
            .collect();
        let listed: BTreeSet<String> = listed
            .difference(&subdirectories)
            .filter(|r| !elsewhere.contains(*r))
            .cloned()
            .collect();
        let present: BTreeSet<String> = files
            .iter()
            .filter(|f| f.parent() == Some(dir) && !f.ends_with("kustomization.yaml"))
            .filter_map(|f| f.file_name().map(|n| n.to_string_lossy().into_owned()))
            .collect();
        assert_eq!(
            listed,
            present,
            "{} must list exactly the manifests beside it",
            kustomization.display()
        );
    }
}

/// Paths of `original` that a typed round trip lost: fields the type does not know.
fn lost_fields(original: &Value, round_trip: &Value, path: &str, out: &mut Vec<String>) {
    match (original, round_trip) {
        (Value::Object(o), Value::Object(r)) => {
            for (key, value) in o {
                match r.get(key) {
                    Some(back) => lost_fields(value, back, &format!("{path}.{key}"), out),
                    None => out.push(format!("{path}.{key}")),
                }
            }
        }
        (Value::Array(o), Value::Array(r)) => {
            for (i, (value, back)) in o.iter().zip(r).enumerate() {
                lost_fields(value, back, &format!("{path}[{i}]"), out);
            }
            if o.len() != r.len() {
                out.push(format!("{path} (length {} became {})", o.len(), r.len()));
            }
        }
        _ => {}
    }
}

fn unknown_fields<T: DeserializeOwned + Serialize>(object: &Value) -> Result<Vec<String>, String> {
    let typed: T = serde_json::from_value(object.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    let mut lost = Vec::new();
    lost_fields(object, &back, "", &mut lost);
    Ok(lost)
}

/// Unknown fields of a built-in object, or `None` for kinds that are not built in.
fn builtin_unknown_fields(
    api_version: &str,
    kind: &str,
    object: &Value,
) -> Option<Result<Vec<String>, String>> {
    use k8s_openapi::api::{
        admissionregistration::v1 as admission, apps::v1 as apps, core::v1 as core, policy::v1 as policy,
        rbac::v1 as rbac,
    };
    Some(match (api_version, kind) {
        ("v1", "Namespace") => unknown_fields::<core::Namespace>(object),
        ("v1", "ConfigMap") => unknown_fields::<core::ConfigMap>(object),
        ("policy/v1", "PodDisruptionBudget") => unknown_fields::<policy::PodDisruptionBudget>(object),
        ("v1", "ServiceAccount") => unknown_fields::<core::ServiceAccount>(object),
        ("apps/v1", "Deployment") => unknown_fields::<apps::Deployment>(object),
        ("rbac.authorization.k8s.io/v1", "ClusterRole") => unknown_fields::<rbac::ClusterRole>(object),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding") => {
            unknown_fields::<rbac::ClusterRoleBinding>(object)
        }
        ("rbac.authorization.k8s.io/v1", "Role") => unknown_fields::<rbac::Role>(object),
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy") => {
            unknown_fields::<admission::ValidatingAdmissionPolicy>(object)
        }
        ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicyBinding") => {
            unknown_fields::<admission::ValidatingAdmissionPolicyBinding>(object)
        }
        ("rbac.authorization.k8s.io/v1", "RoleBinding") => unknown_fields::<rbac::RoleBinding>(object),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => unknown_fields::<
            k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
        >(object),
        _ => return None,
    })
}

#[test]
fn the_unknown_field_check_catches_typos() {
    let typo = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"},
        "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "c", "imagePullPolicy": "Always",
        "securityContex": {"runAsNonRoot": true}}]}}}});
    let lost = builtin_unknown_fields("apps/v1", "Deployment", &typo)
        .expect("built in")
        .expect("parses");
    assert_eq!(lost, vec![".spec.template.spec.containers[0].securityContex"]);
}

fn crd_for<'a>(crds: &'a [Crd], api_version: &str, kind: &str) -> Option<(&'a Crd, String)> {
    let (group, version) = api_version.split_once('/')?;
    crds.iter()
        .find(|c| c.group == group && c.kind == kind)
        .map(|c| (c, version.to_string()))
}

/// Kinds whose CRD is not among the upstream copies here but is served by the test control plane,
/// where the API server validates them strictly: `tests/tests/control_plane_addon.rs` applies the
/// ManifestWorkReplicaSet example, `control_plane_addon_template.rs` `manifests/addon-template`.
const SERVER_CHECKED: &[(&str, &str)] = &[
    (
        "work.open-cluster-management.io/v1alpha1",
        "ManifestWorkReplicaSet",
    ),
    ("addon.open-cluster-management.io/v1alpha1", "AddOnTemplate"),
];

/// Argo CD's CRDs ([`argocd::CRDS`]) from the module `tests/argocd/go.mod` pins, in Go's module
/// cache: the same files the Argo CD build copies beside the controller that
/// `tests/tests/control_plane_argocd.rs` runs, read without building it.
fn argocd_crds() -> Vec<Crd> {
    let module = locate_module(&argocd::module_dir(), argocd::MODULE).unwrap_or_else(|e| panic!("{e}"));
    let files: Vec<PathBuf> = argocd::CRDS
        .iter()
        .map(|name| module.dir.join("manifests/crds").join(name))
        .collect();
    load_files(&files).unwrap_or_else(|e| panic!("Argo CD {}'s CRDs: {e}", module.version))
}

#[test]
fn every_object_is_valid_for_its_api() {
    let mut crds = upstream_crds().expect("the upstream OCM CRDs");
    // ocm-score's own kinds (TieredPlacement, WorkloadShape), as generated from the Rust types.
    for own in [
        "hub/crds/tiering.ocm-score.io_tieredplacements.yaml",
        "hub/crds/tiering.ocm-score.io_workloadshapes.yaml",
    ] {
        let own = manifests_dir().join(own);
        let text = std::fs::read_to_string(&own).unwrap_or_else(|e| panic!("{}: {e}", own.display()));
        crds.push(Crd::from_yaml(&own, &text).unwrap_or_else(|e| panic!("{}: {e}", own.display())));
    }
    crds.extend(argocd_crds());
    let mut problems = Vec::new();
    let mut ocm_objects = 0;
    for doc in documents() {
        if let Some(result) = builtin_unknown_fields(doc.api_version(), doc.kind(), &doc.object) {
            match result {
                Ok(lost) if lost.is_empty() => {}
                Ok(lost) => problems.push(format!("{}: unknown fields {lost:?}", doc.name())),
                Err(e) => problems.push(format!("{}: {e}", doc.name())),
            }
        } else if let Some((crd, version)) = crd_for(&crds, doc.api_version(), doc.kind()) {
            ocm_objects += 1;
            let Some(v) = crd.version(&version).filter(|v| v.served) else {
                problems.push(format!("{}: version {version} is not served", doc.name()));
                continue;
            };
            let validator = SchemaValidator::new(crd, v).expect("the CRD schema compiles");
            if let Err(errors) = validator.validate(&doc.object) {
                problems.push(format!(
                    "{}: {}",
                    doc.name(),
                    errors
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ")
                ));
            }
        } else if SERVER_CHECKED.contains(&(doc.api_version(), doc.kind())) {
            // Applied with `kubectl apply` (strict field validation) to the real control plane.
        } else {
            problems.push(format!(
                "{}: no check for {} {}",
                doc.name(),
                doc.api_version(),
                doc.kind()
            ));
        }
        if doc.object["metadata"]["name"].as_str().is_none_or(str::is_empty) {
            problems.push(format!("{}: no metadata.name", doc.name()));
        }
    }
    assert!(problems.is_empty(), "invalid manifests:\n{}", problems.join("\n"));
    assert!(
        ocm_objects >= 8,
        "expected the OCM objects of the install and examples, saw {ocm_objects}"
    );
}

#[test]
fn the_crd_check_catches_a_bad_placement() {
    let crds = upstream_crds().expect("CRDs");
    let (crd, version) =
        crd_for(&crds, "cluster.open-cluster-management.io/v1beta1", "Placement").expect("placement CRD");
    let validator = SchemaValidator::new(crd, crd.version(&version).expect("v1beta1")).expect("compiles");
    let bad = json!({"apiVersion": "cluster.open-cluster-management.io/v1beta1", "kind": "Placement",
        "metadata": {"name": "p", "namespace": "n"},
        "spec": {"prioritizerPolicy": {"mode": "Exact", "configurations": [{"scoreCoordinate": {"type": "AddOn",
                 "addon": {"resourceName": "resource-usage-score", "scoreName": "cpuNodeAvailable"}}}]}}});
    assert!(
        validator.validate(&bad).is_err(),
        "`addon` (for `addOn`) must be rejected"
    );
}

#[test]
fn the_crd_check_catches_a_bad_applicationset() {
    let crds = argocd_crds();
    let (crd, version) =
        crd_for(&crds, "argoproj.io/v1alpha1", "ApplicationSet").expect("ApplicationSet CRD");
    let validator = SchemaValidator::new(crd, crd.version(&version).expect("v1alpha1")).expect("compiles");
    let appset = |sync: &str| {
        json!({"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
            "metadata": {"name": "a", "namespace": "argocd"},
            "spec": {"generators": [], "syncPolicy": {"applicationsSync": sync},
                     "template": {"metadata": {}, "spec": {"project": "default",
                         "destination": {}, "source": {"repoURL": "https://example.com/r.git"}}}}})
    };
    assert!(validator.validate(&appset("create-update")).is_ok());
    assert!(
        validator.validate(&appset("create-updates")).is_err(),
        "an applicationsSync policy Argo CD does not know must be rejected"
    );
}

/// The Argo CD example's objects refer to each other as Argo CD and OCM look them up: the
/// generator's ConfigMap (in the ApplicationSet's namespace) names the PlacementDecision resource
/// by its lowercase plural, and each ApplicationSet selects the decisions of a Placement of its own
/// namespace, or of a TieredPlacement's child there. A mismatch is no error anywhere: Argo CD just
/// generates nothing.
#[test]
fn the_argocd_example_is_wired_as_argo_cd_reads_it() {
    let docs = documents();
    let in_example = |d: &&Doc| d.file.starts_with("examples/argocd/");
    let appsets: Vec<&Doc> = docs
        .iter()
        .filter(in_example)
        .filter(|d| d.kind() == "ApplicationSet")
        .collect();
    assert_eq!(appsets.len(), 2, "the plain and the tiered ApplicationSet");
    for appset in appsets {
        let namespace = &appset.object["metadata"]["namespace"];
        assert_eq!(namespace, "argocd", "{}: Argo CD's namespace", appset.name());
        for generator in appset.object["spec"]["generators"]
            .as_array()
            .expect("generators")
        {
            let cdr = &generator["clusterDecisionResource"];
            let config = docs
                .iter()
                .find(|d| {
                    d.kind() == "ConfigMap"
                        && d.object["metadata"]["name"] == cdr["configMapRef"]
                        && &d.object["metadata"]["namespace"] == namespace
                })
                .unwrap_or_else(|| panic!("{}: no ConfigMap {}", appset.name(), cdr["configMapRef"]));
            let data = &config.object["data"];
            assert_eq!(data["apiVersion"], "cluster.open-cluster-management.io/v1beta1");
            assert_eq!(data["kind"], "placementdecisions", "the resource, not the kind");
            assert_eq!(data["statusListKey"], "decisions");
            assert_eq!(data["matchKey"], "clusterName");
            let placement =
                cdr["labelSelector"]["matchLabels"]["cluster.open-cluster-management.io/placement"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{}: selects no Placement's decisions", appset.name()));
            let decided_here = docs.iter().any(|d| {
                &d.object["metadata"]["namespace"] == namespace
                    && match d.kind() {
                        "Placement" => d.object["metadata"]["name"] == placement,
                        "TieredPlacement" => {
                            d.object["spec"]["placementName"]
                                .as_str()
                                .or(d.object["metadata"]["name"].as_str())
                                == Some(placement)
                        }
                        _ => false,
                    }
            });
            assert!(
                decided_here,
                "{}: no Placement or TieredPlacement child {placement} in {namespace}",
                appset.name()
            );
        }
    }
}

/// One permission: scope (cluster or a namespace), API group, resource, verb, resource name.
type Permission = (String, String, String, String, String);

fn expand(scope: &str, rules: &Value) -> BTreeSet<Permission> {
    let mut out = BTreeSet::new();
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(String::from))
            .collect()
    };
    for rule in rules.as_array().into_iter().flatten() {
        let names = strings(&rule["resourceNames"]);
        let names = if names.is_empty() {
            vec!["*".to_string()]
        } else {
            names
        };
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                for verb in strings(&rule["verbs"]) {
                    for name in &names {
                        out.insert((
                            scope.into(),
                            group.clone(),
                            resource.clone(),
                            verb.clone(),
                            name.clone(),
                        ));
                    }
                }
            }
        }
    }
    out
}

/// What the manifests grant a service account, through every binding that names it.
fn granted(docs: &[Doc], namespace: &str, account: &str) -> BTreeSet<Permission> {
    let names_account = |binding: &Value| {
        binding["subjects"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|s| s["kind"] == "ServiceAccount" && s["name"] == account && s["namespace"] == namespace)
    };
    let role = |kind: &str, name: &Value, ns: Option<&Value>| {
        docs.iter().find(|d| {
            d.kind() == kind
                && &d.object["metadata"]["name"] == name
                && ns.is_none_or(|n| &d.object["metadata"]["namespace"] == n)
        })
    };
    let mut out = BTreeSet::new();
    for binding in docs.iter().filter(|d| names_account(&d.object)) {
        let role_ref = &binding.object["roleRef"];
        match binding.kind() {
            "ClusterRoleBinding" => {
                let r = role("ClusterRole", &role_ref["name"], None)
                    .unwrap_or_else(|| panic!("{}: no ClusterRole", binding.name()));
                out.extend(expand("cluster", &r.object["rules"]));
            }
            "RoleBinding" => {
                let ns = &binding.object["metadata"]["namespace"];
                let scope = ns.as_str().unwrap_or_default();
                let r = match role_ref["kind"].as_str() {
                    Some("Role") => role("Role", &role_ref["name"], Some(ns)),
                    _ => role("ClusterRole", &role_ref["name"], None),
                };
                let r = r.unwrap_or_else(|| panic!("{}: role not found", binding.name()));
                out.extend(expand(scope, &r.object["rules"]));
            }
            _ => {}
        }
    }
    out
}

/// What `ocm-score-hub addon-manager` needs, and why. Keep in step with `manifests/hub/cluster-role.yaml`.
fn addon_manager_needs() -> BTreeSet<Permission> {
    let mut out = BTreeSet::new();
    let mut add = |scope: &str, group: &str, resources: &[&str], verbs: &[&str], name: &str| {
        for r in resources {
            for v in verbs {
                out.insert((
                    scope.into(),
                    group.into(),
                    r.to_string(),
                    v.to_string(),
                    name.into(),
                ));
            }
        }
    };
    let addon = "addon.open-cluster-management.io";
    let cluster = "cluster.open-cluster-management.io";
    // Watches behind the controllers' caches.
    add(
        "cluster",
        addon,
        &["clustermanagementaddons", "addondeploymentconfigs"],
        &["get", "list", "watch"],
        "*",
    );
    add(
        "cluster",
        cluster,
        &["managedclusters", "placementdecisions"],
        &["get", "list", "watch"],
        "*",
    );
    add(
        "cluster",
        "certificates.k8s.io",
        &["certificatesigningrequests"],
        &["get", "list", "watch"],
        "*",
    );
    // Install strategy (create/delete), adoption and the legacy finalizer's removal (patch), conflict
    // re-reads (get).
    add(
        "cluster",
        addon,
        &["managedclusteraddons"],
        &["get", "list", "watch", "create", "patch", "delete"],
        "*",
    );
    add(
        "cluster",
        addon,
        &["managedclusteraddons/status", "clustermanagementaddons/status"],
        &["patch"],
        "*",
    );
    // Owner references with blockOwnerDeletion, where OwnerReferencesPermissionEnforcement is on.
    add(
        "cluster",
        addon,
        &[
            "clustermanagementaddons/finalizers",
            "managedclusteraddons/finalizers",
        ],
        &["update"],
        "*",
    );
    // The agent's ManifestWork and hub Role/RoleBinding: created and replaced (the garbage collector
    // removes them with their add-on).
    add(
        "cluster",
        "work.open-cluster-management.io",
        &["manifestworks"],
        &["get", "list", "watch", "create", "update"],
        "*",
    );
    add(
        "cluster",
        "rbac.authorization.k8s.io",
        &["roles", "rolebindings"],
        &["get", "list", "watch", "create", "update"],
        "*",
    );
    // The agents' read access to WorkloadShapes: a ClusterRole and ClusterRoleBinding per add-on,
    // and holding what they grant.
    add(
        "cluster",
        "rbac.authorization.k8s.io",
        &["clusterroles", "clusterrolebindings"],
        &["get", "list", "watch", "create", "update"],
        "*",
    );
    add(
        "cluster",
        "tiering.ocm-score.io",
        &["workloadshapes"],
        &["get", "list", "watch"],
        "*",
    );
    // Granting the agent's Role requires holding what it grants; the scores are watched and get
    // their owner reference by patch.
    add(
        "cluster",
        cluster,
        &["addonplacementscores"],
        &["get", "list", "watch", "create", "update", "patch"],
        "*",
    );
    add(
        "cluster",
        cluster,
        &["addonplacementscores/status"],
        &["update", "patch"],
        "*",
    );
    // CSR decisions.
    add(
        "cluster",
        "certificates.k8s.io",
        &["certificatesigningrequests/approval"],
        &["update"],
        "*",
    );
    add(
        "cluster",
        "certificates.k8s.io",
        &["signers"],
        &["approve"],
        "kubernetes.io/kube-apiserver-client",
    );
    // Leader election, in its own namespace only.
    add("ocm-score", "coordination.k8s.io", &["leases"], &["create"], "*");
    add(
        "ocm-score",
        "coordination.k8s.io",
        &["leases"],
        &["get", "update"],
        "ocm-score-addon-manager",
    );
    out
}

#[test]
fn the_addon_manager_gets_exactly_what_it_needs() {
    let docs = documents();
    let (granted, needed) = (
        granted(&docs, "ocm-score", "ocm-score-addon-manager"),
        addon_manager_needs(),
    );
    assert_grants_exactly(&granted, &needed);
    // The comparison itself can fail: one extra verb is noticed.
    let mut broader = docs;
    let role = broader
        .iter_mut()
        .find(|d| d.kind() == "ClusterRole" && d.object["metadata"]["name"] == "ocm-score-addon-manager")
        .expect("cluster role");
    role.object["rules"][0]["verbs"]
        .as_array_mut()
        .expect("verbs")
        .push(json!("delete"));
    assert_ne!(granted_for_test(&broader), needed);
}

/// What `ocm-score-hub tiering` needs, and why. Keep in step with
/// `manifests/hub/tiering-cluster-role.yaml`; `hub-controller/tests/tiering_e2e.rs` runs the
/// controller with RBAC on and exactly these rules.
fn tiering_needs() -> BTreeSet<Permission> {
    let mut out = BTreeSet::new();
    let mut add = |scope: &str, group: &str, resources: &[&str], verbs: &[&str], name: &str| {
        for r in resources {
            for v in verbs {
                out.insert((
                    scope.into(),
                    group.into(),
                    r.to_string(),
                    v.to_string(),
                    name.into(),
                ));
            }
        }
    };
    let tiering = "tiering.ocm-score.io";
    let cluster = "cluster.open-cluster-management.io";
    // Reflectors over what it reconciles and what the planner reads.
    add("cluster", tiering, &["tieredplacements"], &["list", "watch"], "*");
    // Shapes: reservations of one shape deducted from another's fits.
    add("cluster", tiering, &["workloadshapes"], &["list", "watch"], "*");
    add(
        "cluster",
        cluster,
        &[
            "managedclusters",
            "managedclustersets",
            "managedclustersetbindings",
            "addonplacementscores",
            "placementdecisions",
        ],
        &["list", "watch"],
        "*",
    );
    // Status by server-side apply; the child by server-side apply, which the real API server
    // authorizes as `create` when the child does not exist yet (found on the real control plane).
    add("cluster", tiering, &["tieredplacements/status"], &["patch"], "*");
    add(
        "cluster",
        cluster,
        &["placements"],
        &["list", "watch", "create", "patch"],
        "*",
    );
    // blockOwnerDeletion on the child's owner reference.
    add(
        "cluster",
        tiering,
        &["tieredplacements/finalizers"],
        &["update"],
        "*",
    );
    add("cluster", "events.k8s.io", &["events"], &["create", "patch"], "*");
    // The workloads' health (spec.workloadHealth): a reflector over the works, read only.
    add(
        "cluster",
        "work.open-cluster-management.io",
        &["manifestworks"],
        &["list", "watch"],
        "*",
    );
    // Reserved capacity for plain Placements: one object name, applied (object, then status) and
    // deleted; the agents' scores stay out of reach.
    add(
        "cluster",
        cluster,
        &["addonplacementscores"],
        &["create", "patch", "delete"],
        "ocm-score-reserved",
    );
    add(
        "cluster",
        cluster,
        &["addonplacementscores/status"],
        &["patch"],
        "ocm-score-reserved",
    );
    add("ocm-score", "coordination.k8s.io", &["leases"], &["create"], "*");
    add(
        "ocm-score",
        "coordination.k8s.io",
        &["leases"],
        &["get", "update"],
        "ocm-score-tiering",
    );
    out
}

#[test]
fn the_tiering_controller_gets_exactly_what_it_needs() {
    let docs = documents();
    let (granted, needed) = (granted(&docs, "ocm-score", "ocm-score-tiering"), tiering_needs());
    assert_grants_exactly(&granted, &needed);
    // Neither account holds the other's rights: the tiering controller reads works, never writes.
    assert!(!granted.iter().any(|(_, g, r, v, _)| {
        g == "addon.open-cluster-management.io"
            || (r == "manifestworks" && !matches!(v.as_str(), "list" | "watch"))
    }));
}

/// What `ocm-score-hub thanos-scorer` needs, and why. `hub-controller/tests/thanos_e2e.rs` runs the
/// scorer with RBAC on and the rules of `manifests/thanos-scorer`.
fn thanos_scorer_needs() -> BTreeSet<Permission> {
    let cluster = "cluster.open-cluster-management.io";
    let mut out = BTreeSet::new();
    let mut add = |scope: &str, group: &str, resource: &str, verbs: &[&str], name: &str| {
        for v in verbs {
            out.insert((
                scope.into(),
                group.into(),
                resource.into(),
                v.to_string(),
                name.into(),
            ));
        }
    };
    // The fleet (a reflector) and the labels or claims that map series to clusters.
    add(
        "cluster",
        cluster,
        "managedclusters",
        &["get", "list", "watch"],
        "*",
    );
    // The scores: a reflector over them, created once, then written through status.
    add(
        "cluster",
        cluster,
        "addonplacementscores",
        &["get", "list", "watch", "create"],
        "*",
    );
    add("cluster", cluster, "addonplacementscores/status", &["patch"], "*");
    add("ocm-score", "coordination.k8s.io", "leases", &["create"], "*");
    add(
        "ocm-score",
        "coordination.k8s.io",
        "leases",
        &["get", "update"],
        "ocm-score-thanos-scorer",
    );
    out
}

#[test]
fn the_thanos_scorer_gets_exactly_what_it_needs() {
    let docs = documents();
    let (granted, needed) = (
        granted(&docs, "ocm-score", "ocm-score-thanos-scorer"),
        thanos_scorer_needs(),
    );
    assert_grants_exactly(&granted, &needed);
}

/// The manifests grant an account exactly what it needs: nothing missing, nothing more.
fn assert_grants_exactly(granted: &BTreeSet<Permission>, needed: &BTreeSet<Permission>) {
    let missing: Vec<_> = needed.difference(granted).collect();
    let extra: Vec<_> = granted.difference(needed).collect();
    assert!(missing.is_empty(), "the manifests do not grant: {missing:#?}");
    assert!(
        extra.is_empty(),
        "the manifests grant more than needed: {extra:#?}"
    );
}

fn granted_for_test(docs: &[Doc]) -> BTreeSet<Permission> {
    granted(docs, "ocm-score", "ocm-score-addon-manager")
}

#[test]
fn workloads_run_locked_down_as_their_own_account() {
    let docs = documents();
    let deployments: Vec<&Doc> = docs.iter().filter(|d| d.kind() == "Deployment").collect();
    assert!(!deployments.is_empty());
    for doc in deployments {
        let pod = &doc.object["spec"]["template"]["spec"];
        let account = pod["serviceAccountName"].as_str().unwrap_or_default();
        let namespace = &doc.object["metadata"]["namespace"];
        assert!(
            docs.iter().any(|d| d.kind() == "ServiceAccount"
                && d.object["metadata"]["name"] == account
                && &d.object["metadata"]["namespace"] == namespace),
            "{}: service account {account:?} is not in the manifests",
            doc.name()
        );
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true, "{}", doc.name());
        assert_eq!(
            pod["securityContext"]["seccompProfile"]["type"],
            "RuntimeDefault",
            "{}",
            doc.name()
        );
        for container in pod["containers"].as_array().expect("containers") {
            let sc = &container["securityContext"];
            assert_eq!(sc["allowPrivilegeEscalation"], false, "{}", doc.name());
            assert_eq!(sc["readOnlyRootFilesystem"], true, "{}", doc.name());
            assert_eq!(sc["capabilities"]["drop"], json!(["ALL"]), "{}", doc.name());
            assert!(
                container["resources"]["limits"]["memory"].is_string(),
                "{}: no memory limit",
                doc.name()
            );
            assert!(
                container["livenessProbe"].is_object() && container["readinessProbe"].is_object(),
                "{}",
                doc.name()
            );
        }
    }
}

#[test]
fn example_placements_rank_by_published_scores() {
    // The score names the agent publishes (its built-in set); a typo would rank every cluster 0.
    let published = [
        "cpuNodeAvailable",
        "cpuClusterAvailable",
        "memNodeAvailable",
        "memClusterAvailable",
        "gpuNodeAvailable",
        "gpuClusterAvailable",
        "tpuNodeAvailable",
        "tpuClusterAvailable",
        "cpuAvailable",
        "memAvailable",
    ];
    let docs = documents();
    let placements: Vec<&Doc> = docs
        .iter()
        .filter(|d| d.kind() == "Placement" && d.file.starts_with("examples"))
        .collect();
    assert!(placements.len() >= 4, "{}", placements.len());
    let mut steady = false;
    for doc in placements {
        let configurations = doc.object["spec"]["prioritizerPolicy"]["configurations"]
            .as_array()
            .expect("configurations");
        let mut uses_scores = false;
        for c in configurations {
            let coordinate = &c["scoreCoordinate"];
            match coordinate["type"].as_str() {
                Some("AddOn") => {
                    assert_eq!(
                        coordinate["addOn"]["resourceName"],
                        "resource-usage-score",
                        "{}",
                        doc.name()
                    );
                    let score = coordinate["addOn"]["scoreName"].as_str().unwrap_or_default();
                    assert!(
                        published.contains(&score),
                        "{}: {score} is not published",
                        doc.name()
                    );
                    uses_scores = true;
                }
                Some("BuiltIn") => steady |= coordinate["builtIn"] == "Steady",
                other => panic!("{}: score coordinate {other:?}", doc.name()),
            }
        }
        assert!(uses_scores, "{} does not use the scores", doc.name());
        let namespace = &doc.object["metadata"]["namespace"];
        assert!(
            docs.iter()
                .any(|d| d.kind() == "ManagedClusterSetBinding"
                    && &d.object["metadata"]["namespace"] == namespace),
            "{}: no ManagedClusterSetBinding in its namespace, it would select nothing",
            doc.name()
        );
    }
    assert!(steady, "one example combines the scores with Steady");
}
