//! The kinds the server serves: CRDs loaded from YAML and the built-in kinds our code touches,
//! and the discovery documents that describe them.

use crate::crd::{Crd, SchemaValidator};
use serde_json::{Value, json};
use std::{
    collections::HashMap,
    sync::{
        Arc,
        atomic::{AtomicBool, Ordering},
    },
};

/// Server-side behaviour that differs between kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Special {
    None,
    /// Gets `spec.finalizers: [kubernetes]`, `status.phase`, and is emptied before it disappears.
    Namespace,
    /// `spec.username/uid/groups` are set from the requester; `approval` subresource.
    CertificateSigningRequest,
    /// Create-only review objects answered from RBAC and never stored.
    SubjectAccessReview,
    SelfSubjectAccessReview,
}

/// One served resource (`addonplacementscores.cluster.open-cluster-management.io`).
#[derive(Debug)]
pub struct ResourceType {
    pub group: String,
    /// Served versions, preferred (storage) version first.
    pub versions: Vec<String>,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub list_kind: String,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub namespaced: bool,
    /// Subresources with `get`/`update`/`patch` (`status`, `approval`).
    pub subresources: Vec<&'static str>,
    pub(crate) verbs: Vec<&'static str>,
    /// Whether `status` sent on create is dropped (CRDs with a status subresource, most built-ins).
    pub(crate) create_drops_status: bool,
    /// Whether `metadata.generation` is maintained.
    pub(crate) has_generation: bool,
    /// Field selector paths beyond `metadata.name` and `metadata.namespace`.
    pub(crate) field_selectors: Vec<String>,
    pub(crate) special: Special,
    /// For CRDs: per served version, the schema and its compiled validator.
    pub(crate) schemas: HashMap<String, Arc<VersionSchema>>,
    pub(crate) custom: bool,
    /// Whether it is served: a CRD held back at start ([`crate::ApiServerBuilder::crd_installed_later`])
    /// is not, neither routed nor in discovery, until [`crate::ApiServer::install_crd`].
    pub(crate) served: AtomicBool,
}

#[derive(Debug)]
pub(crate) struct VersionSchema {
    pub(crate) schema: Value,
    pub(crate) validator: SchemaValidator,
}

impl ResourceType {
    pub fn storage_version(&self) -> &str {
        &self.versions[0]
    }

    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// Whether requests reach it now (false for a CRD not installed yet).
    pub fn is_served(&self) -> bool {
        self.served.load(Ordering::Acquire)
    }

    pub fn has_status(&self) -> bool {
        self.subresources.contains(&"status")
    }

    pub(crate) fn schema(&self, version: &str) -> Option<&Arc<VersionSchema>> {
        self.schemas.get(version)
    }
}

const ALL_VERBS: [&str; 8] = [
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

struct Builtin {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    namespaced: bool,
    subresources: &'static [&'static str],
    short_names: &'static [&'static str],
    create_drops_status: bool,
    has_generation: bool,
    field_selectors: &'static [&'static str],
    special: Special,
}

const fn builtin(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
) -> Builtin {
    Builtin {
        group,
        version,
        plural,
        kind,
        namespaced: true,
        subresources: &[],
        short_names: &[],
        create_drops_status: false,
        has_generation: false,
        field_selectors: &[],
        special: Special::None,
    }
}

const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];

const BUILTINS: &[Builtin] = &[
    Builtin {
        namespaced: false,
        subresources: &["status"],
        short_names: &["ns"],
        field_selectors: &["status.phase"],
        special: Special::Namespace,
        ..builtin("", "v1", "namespaces", "Namespace")
    },
    Builtin {
        namespaced: false,
        subresources: &["status"],
        short_names: &["no"],
        field_selectors: &["spec.unschedulable"],
        ..builtin("", "v1", "nodes", "Node")
    },
    Builtin {
        subresources: &["status"],
        short_names: &["po"],
        create_drops_status: true,
        field_selectors: &[
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        ..builtin("", "v1", "pods", "Pod")
    },
    Builtin {
        field_selectors: &["type"],
        ..builtin("", "v1", "secrets", "Secret")
    },
    Builtin {
        short_names: &["cm"],
        ..builtin("", "v1", "configmaps", "ConfigMap")
    },
    Builtin {
        short_names: &["sa"],
        ..builtin("", "v1", "serviceaccounts", "ServiceAccount")
    },
    Builtin {
        short_names: &["ev"],
        field_selectors: EVENT_FIELDS,
        ..builtin("", "v1", "events", "Event")
    },
    builtin("rbac.authorization.k8s.io", "v1", "roles", "Role"),
    builtin("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding"),
    Builtin {
        namespaced: false,
        ..builtin("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole")
    },
    Builtin {
        namespaced: false,
        ..builtin(
            "rbac.authorization.k8s.io",
            "v1",
            "clusterrolebindings",
            "ClusterRoleBinding",
        )
    },
    builtin("coordination.k8s.io", "v1", "leases", "Lease"),
    Builtin {
        subresources: &["status"],
        short_names: &["deploy"],
        create_drops_status: true,
        has_generation: true,
        ..builtin("apps", "v1", "deployments", "Deployment")
    },
    // The hub install's disruption budgets (stored and served; the double evicts nothing).
    Builtin {
        subresources: &["status"],
        short_names: &["pdb"],
        create_drops_status: true,
        has_generation: true,
        ..builtin("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget")
    },
    Builtin {
        short_names: &["ev"],
        field_selectors: &[
            "reason",
            "type",
            "reportingController",
            "regarding.kind",
            "regarding.name",
            "regarding.namespace",
            "regarding.uid",
        ],
        ..builtin("events.k8s.io", "v1", "events", "Event")
    },
    Builtin {
        namespaced: false,
        subresources: &["status", "approval"],
        short_names: &["csr"],
        create_drops_status: true,
        field_selectors: &["spec.signerName"],
        special: Special::CertificateSigningRequest,
        ..builtin(
            "certificates.k8s.io",
            "v1",
            "certificatesigningrequests",
            "CertificateSigningRequest",
        )
    },
    Builtin {
        namespaced: false,
        special: Special::SubjectAccessReview,
        ..builtin(
            "authorization.k8s.io",
            "v1",
            "subjectaccessreviews",
            "SubjectAccessReview",
        )
    },
    Builtin {
        namespaced: false,
        special: Special::SelfSubjectAccessReview,
        ..builtin(
            "authorization.k8s.io",
            "v1",
            "selfsubjectaccessreviews",
            "SelfSubjectAccessReview",
        )
    },
];

/// Kinds that are always served: namespaces (namespaced kinds need them) and, with RBAC on, its kinds.
const CORE_KINDS: &[&str] = &["namespaces"];
const RBAC_KINDS: &[&str] = &["roles", "rolebindings", "clusterroles", "clusterrolebindings"];

fn from_builtin(b: &Builtin) -> ResourceType {
    let create_only = matches!(
        b.special,
        Special::SubjectAccessReview | Special::SelfSubjectAccessReview
    );
    ResourceType {
        group: b.group.into(),
        versions: vec![b.version.into()],
        plural: b.plural.into(),
        singular: b.kind.to_lowercase(),
        kind: b.kind.into(),
        list_kind: format!("{}List", b.kind),
        short_names: b.short_names.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        namespaced: b.namespaced,
        subresources: b.subresources.to_vec(),
        verbs: if create_only {
            vec!["create"]
        } else {
            ALL_VERBS.to_vec()
        },
        create_drops_status: b.create_drops_status,
        has_generation: b.has_generation,
        field_selectors: b.field_selectors.iter().map(|s| s.to_string()).collect(),
        special: b.special,
        schemas: HashMap::new(),
        custom: false,
        served: AtomicBool::new(true),
    }
}

/// Builds the served type for a CRD: served versions (storage version first) with compiled schemas.
pub(crate) fn from_crd(crd: &Crd) -> Result<ResourceType, crate::crd::CrdError> {
    let mut served: Vec<&crate::crd::CrdVersion> = crd.versions.iter().filter(|v| v.served).collect();
    served.sort_by_key(|v| !v.storage);
    let mut schemas = HashMap::new();
    for v in &served {
        let validator = SchemaValidator::new(crd, v)?;
        schemas.insert(
            v.name.clone(),
            Arc::new(VersionSchema {
                schema: v.schema.clone(),
                validator,
            }),
        );
    }
    let status = served.iter().any(|v| v.status_subresource);
    let categories = crd
        .raw
        .pointer("/spec/names/categories")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default();
    // `selectableFields` (`jsonPath: .spec.x`) extend field selectors, as since Kubernetes 1.31.
    let field_selectors = crd
        .raw
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|v| v.get("selectableFields").and_then(Value::as_array))
        .flatten()
        .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
        .map(|p| p.trim_start_matches('.').to_string())
        .collect();
    Ok(ResourceType {
        group: crd.group.clone(),
        versions: served.iter().map(|v| v.name.clone()).collect(),
        plural: crd.plural.clone(),
        singular: crd.singular.clone(),
        kind: crd.kind.clone(),
        list_kind: crd.list_kind.clone(),
        short_names: crd.short_names.clone(),
        categories,
        namespaced: crd.namespaced,
        subresources: if status { vec!["status"] } else { Vec::new() },
        verbs: ALL_VERBS.to_vec(),
        create_drops_status: status,
        has_generation: true,
        field_selectors,
        special: Special::None,
        schemas,
        custom: true,
        served: AtomicBool::new(true),
    })
}

/// Every served type, looked up by group and plural (or kind).
#[derive(Debug, Default)]
pub struct Registry {
    pub(crate) types: Vec<ResourceType>,
    by_resource: HashMap<(String, String), usize>,
}

impl Registry {
    /// The built-in kinds asked for and `crds`; `later` are registered but not served until
    /// [`Registry::install`].
    pub(crate) fn new(
        crds: &[Crd],
        later: &[Crd],
        builtins: bool,
        rbac: bool,
    ) -> Result<Self, crate::crd::CrdError> {
        let mut registry = Registry::default();
        for b in BUILTINS {
            let wanted =
                builtins || CORE_KINDS.contains(&b.plural) || (rbac && RBAC_KINDS.contains(&b.plural));
            if wanted {
                registry.add(from_builtin(b));
            }
        }
        for crd in crds {
            registry.add(from_crd(crd)?);
        }
        for crd in later {
            let t = from_crd(crd)?;
            t.served.store(false, Ordering::Release);
            registry.add(t);
        }
        Ok(registry)
    }

    /// Starts serving a CRD held back at start, named `<plural>.<group>`; `false` if there is none
    /// such (or it is served already).
    pub(crate) fn install(&self, name: &str) -> bool {
        self.types
            .iter()
            .filter(|t| t.custom && format!("{}.{}", t.plural, t.group) == name)
            .any(|t| !t.served.swap(true, Ordering::AcqRel))
    }

    /// The types served now.
    fn served(&self) -> impl Iterator<Item = &ResourceType> {
        self.types.iter().filter(|t| t.is_served())
    }

    fn add(&mut self, t: ResourceType) {
        let key = (t.group.clone(), t.plural.clone());
        if let Some(&i) = self.by_resource.get(&key) {
            self.types[i] = t;
        } else {
            self.by_resource.insert(key, self.types.len());
            self.types.push(t);
        }
    }

    pub(crate) fn index(&self, group: &str, plural: &str) -> Option<usize> {
        self.by_resource
            .get(&(group.to_string(), plural.to_string()))
            .copied()
            .filter(|&i| self.types[i].is_served())
    }

    /// The type serving `plural` in `group` at `version`, if that version is served.
    pub(crate) fn find(&self, group: &str, version: &str, plural: &str) -> Option<usize> {
        self.index(group, plural)
            .filter(|&i| self.types[i].versions.iter().any(|v| v == version))
    }

    pub(crate) fn by_kind(&self, api_version: &str, kind: &str) -> Option<(usize, String)> {
        let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
        self.types
            .iter()
            .position(|t| {
                t.is_served() && t.group == group && t.kind == kind && t.versions.iter().any(|v| v == version)
            })
            .map(|i| (i, version.to_string()))
    }

    fn groups(&self) -> Vec<(String, Vec<String>)> {
        let mut groups: Vec<(String, Vec<String>)> = Vec::new();
        for t in self.served().filter(|t| !t.group.is_empty()) {
            let i = match groups.iter().position(|(g, _)| *g == t.group) {
                Some(i) => i,
                None => {
                    groups.push((t.group.clone(), Vec::new()));
                    groups.len() - 1
                }
            };
            for v in &t.versions {
                if !groups[i].1.contains(v) {
                    groups[i].1.push(v.clone());
                }
            }
        }
        groups
    }

    /// `GET /api`.
    pub(crate) fn core_versions(&self, server_address: &str) -> Value {
        json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
        })
    }

    fn group_doc(name: &str, versions: &[String]) -> Value {
        let vs: Vec<Value> = versions
            .iter()
            .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
            .collect();
        json!({"name": name, "versions": vs, "preferredVersion": vs[0]})
    }

    /// `GET /apis`.
    pub(crate) fn group_list(&self) -> Value {
        let groups: Vec<Value> = self
            .groups()
            .iter()
            .map(|(g, vs)| Self::group_doc(g, vs))
            .collect();
        json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
    }

    /// `GET /apis/<group>`.
    pub(crate) fn group(&self, name: &str) -> Option<Value> {
        self.groups().iter().find(|(g, _)| g == name).map(|(g, vs)| {
            let mut doc = Self::group_doc(g, vs);
            doc["kind"] = json!("APIGroup");
            doc["apiVersion"] = json!("v1");
            doc
        })
    }

    /// `GET /api/v1` or `GET /apis/<group>/<version>`.
    pub(crate) fn resource_list(&self, group: &str, version: &str) -> Option<Value> {
        let mut resources = Vec::new();
        for t in self
            .served()
            .filter(|t| t.group == group && t.versions.iter().any(|v| v == version))
        {
            let mut r = json!({
                "name": t.plural,
                "singularName": t.singular,
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": t.verbs,
            });
            if !t.short_names.is_empty() {
                r["shortNames"] = json!(t.short_names);
            }
            if !t.categories.is_empty() {
                r["categories"] = json!(t.categories);
            }
            resources.push(r);
            for sub in &t.subresources {
                resources.push(json!({
                    "name": format!("{}/{sub}", t.plural),
                    "singularName": "",
                    "namespaced": t.namespaced,
                    "kind": t.kind,
                    "verbs": ["get", "patch", "update"],
                }));
            }
        }
        if resources.is_empty() {
            return None;
        }
        let group_version = if group.is_empty() {
            version.to_string()
        } else {
            format!("{group}/{version}")
        };
        Some(
            json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
        )
    }

    /// Aggregated discovery (`apidiscovery.k8s.io/v2` `APIGroupDiscoveryList`) for `/api` (core)
    /// or `/apis` (groups), which kubectl asks for first.
    pub(crate) fn aggregated(&self, core: bool) -> Value {
        let groups: Vec<(String, Vec<String>)> = if core {
            vec![(String::new(), vec!["v1".to_string()])]
        } else {
            self.groups()
        };
        let items: Vec<Value> = groups
            .iter()
            .map(|(group, versions)| {
                let versions: Vec<Value> = versions
                    .iter()
                    .map(|version| {
                        let resources: Vec<Value> = self
                            .served()
                            .filter(|t| t.group == *group && t.versions.contains(version))
                            .map(|t| {
                                let kind = json!({"group": group, "version": version, "kind": t.kind});
                                let subresources: Vec<Value> = t
                                    .subresources
                                    .iter()
                                    .map(|s| json!({"subresource": s, "responseKind": kind, "verbs": ["get", "patch", "update"]}))
                                    .collect();
                                let mut r = json!({
                                    "resource": t.plural,
                                    "responseKind": kind,
                                    "scope": if t.namespaced { "Namespaced" } else { "Cluster" },
                                    "singularResource": t.singular,
                                    "verbs": t.verbs,
                                });
                                if !t.short_names.is_empty() {
                                    r["shortNames"] = json!(t.short_names);
                                }
                                if !t.categories.is_empty() {
                                    r["categories"] = json!(t.categories);
                                }
                                if !subresources.is_empty() {
                                    r["subresources"] = json!(subresources);
                                }
                                r
                            })
                            .collect();
                        json!({"version": version, "resources": resources, "freshness": "Current"})
                    })
                    .collect();
                json!({"metadata": {"name": group, "creationTimestamp": null}, "versions": versions})
            })
            .collect();
        json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "metadata": {}, "items": items})
    }
}
