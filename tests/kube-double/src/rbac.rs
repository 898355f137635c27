//! Authentication by bearer token and authorization by the standard RBAC rules.

use super::{status::qualified, store::Store};
use serde_json::Value;

/// Who a client is: a user name and its groups, and the bearer token that proves it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Identity {
    pub user: String,
    pub groups: Vec<String>,
    pub token: String,
}

/// The group that bypasses authorization, as on a real cluster.
pub const MASTERS_GROUP: &str = "system:masters";

/// What a request asks to do, in RBAC's terms.
#[derive(Clone, Debug, Default)]
pub(crate) struct Attributes {
    pub(crate) verb: String,
    pub(crate) group: String,
    pub(crate) resource: String,
    pub(crate) subresource: String,
    pub(crate) namespace: String,
    pub(crate) name: String,
    /// Set for requests that name no resource (`/api`, `/version`, ...).
    pub(crate) path: Option<String>,
}

impl Attributes {
    /// The 403 message the real authorizer gives.
    pub(crate) fn forbidden_message(&self, user: &str) -> String {
        if let Some(path) = &self.path {
            return format!("forbidden: User \"{user}\" cannot {} path \"{path}\"", self.verb);
        }
        let resource = if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        };
        let what = if self.name.is_empty() {
            qualified(&self.group, &self.resource)
        } else {
            format!("{} \"{}\"", qualified(&self.group, &self.resource), self.name)
        };
        let scope = if self.namespace.is_empty() {
            "at the cluster scope".to_string()
        } else {
            format!("in the namespace \"{}\"", self.namespace)
        };
        format!(
            "{what} is forbidden: User \"{user}\" cannot {} resource \"{resource}\" in API group \"{}\" {scope}",
            self.verb, self.group
        )
    }
}

/// Paths every authenticated user may read: the default `system:discovery`, `system:basic-user`
/// and `system:public-info-viewer` cluster roles.
const DISCOVERY_PATHS: [&str; 10] = [
    "/api",
    "/api/*",
    "/apis",
    "/apis/*",
    "/healthz",
    "/livez",
    "/readyz",
    "/version",
    "/version/",
    "/openapi/*",
];

fn strings(v: &Value, key: &str) -> Vec<String> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

fn has(list: &[String], wanted: &str) -> bool {
    list.iter().any(|x| x == "*" || x == wanted)
}

fn rule_allows(rule: &Value, a: &Attributes) -> bool {
    if !has(&strings(rule, "verbs"), &a.verb) {
        return false;
    }
    if let Some(path) = &a.path {
        return strings(rule, "nonResourceURLs").iter().any(|u| {
            u == "*" || u == path || u.strip_suffix('*').is_some_and(|prefix| path.starts_with(prefix))
        });
    }
    if !has(&strings(rule, "apiGroups"), &a.group) {
        return false;
    }
    let resources = strings(rule, "resources");
    let resource_ok = if a.subresource.is_empty() {
        has(&resources, &a.resource)
    } else {
        let combined = format!("{}/{}", a.resource, a.subresource);
        let any_with_sub = format!("*/{}", a.subresource);
        resources
            .iter()
            .any(|r| r == "*" || *r == combined || *r == any_with_sub)
    };
    if !resource_ok {
        return false;
    }
    let names = strings(rule, "resourceNames");
    names.is_empty() || (!a.name.is_empty() && names.contains(&a.name))
}

fn subject_matches(subject: &Value, binding_namespace: &str, user: &str, groups: &[String]) -> bool {
    let field = |k: &str| subject.get(k).and_then(Value::as_str).unwrap_or("");
    match field("kind") {
        "User" => field("name") == user,
        "Group" => groups.iter().any(|g| g == field("name")),
        "ServiceAccount" => {
            let ns = if field("namespace").is_empty() {
                binding_namespace
            } else {
                field("namespace")
            };
            user == format!("system:serviceaccount:{ns}:{}", field("name"))
        }
        _ => false,
    }
}

/// The groups a user has on top of the ones its token lists (service accounts get theirs).
pub(crate) fn implied_groups(user: &str) -> Vec<String> {
    let mut groups = vec!["system:authenticated".to_string()];
    if let Some(rest) = user.strip_prefix("system:serviceaccount:")
        && let Some((ns, _)) = rest.split_once(':')
    {
        groups.push("system:serviceaccounts".into());
        groups.push(format!("system:serviceaccounts:{ns}"));
    }
    groups
}

/// Decides a request with the RBAC objects in `store`; `Ok` carries the reason it is allowed.
pub(crate) fn authorize(
    store: &Store,
    user: &str,
    groups: &[String],
    a: &Attributes,
) -> Result<String, String> {
    if groups.iter().any(|g| g == MASTERS_GROUP) {
        return Ok(format!("member of {MASTERS_GROUP}"));
    }
    if let Some(path) = &a.path
        && a.verb == "get"
        && DISCOVERY_PATHS
            .iter()
            .any(|p| p == path || p.strip_suffix('*').is_some_and(|pre| path.starts_with(pre)))
    {
        return Ok("discovery is open to authenticated users".into());
    }
    if a.group == "authorization.k8s.io" && a.verb == "create" && a.resource.starts_with("selfsubject") {
        return Ok("system:basic-user".into());
    }
    let registry = &store.registry;
    let objects = |plural: &str| {
        registry
            .index("rbac.authorization.k8s.io", plural)
            .map(|t| store.types[t].objects.values().cloned().collect::<Vec<_>>())
            .unwrap_or_default()
    };
    let role_rules = |kind: &str, name: &str, namespace: &str| -> Vec<Value> {
        let (plural, ns) = if kind == "ClusterRole" {
            ("clusterroles", "")
        } else {
            ("roles", namespace)
        };
        registry
            .index("rbac.authorization.k8s.io", plural)
            .and_then(|t| store.types[t].objects.get(&(ns.to_string(), name.to_string())))
            .and_then(|r| r.get("rules").and_then(Value::as_array).cloned())
            .unwrap_or_default()
    };
    let binding_allows = |binding: &Value, binding_namespace: &str| -> Option<String> {
        let subjects = binding.get("subjects").and_then(Value::as_array)?;
        if !subjects
            .iter()
            .any(|s| subject_matches(s, binding_namespace, user, groups))
        {
            return None;
        }
        let role_ref = binding.get("roleRef")?;
        let kind = role_ref.get("kind").and_then(Value::as_str)?;
        let name = role_ref.get("name").and_then(Value::as_str)?;
        role_rules(kind, name, binding_namespace)
            .iter()
            .any(|r| rule_allows(r, a))
            .then(|| {
                let binding_name = binding
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                format!("allowed by {kind} \"{name}\" via binding \"{binding_name}\"")
            })
    };
    for binding in objects("clusterrolebindings") {
        if let Some(reason) = binding_allows(&binding, "") {
            return Ok(reason);
        }
    }
    if !a.namespace.is_empty() {
        for binding in objects("rolebindings") {
            let ns = binding
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
                .unwrap_or("");
            if ns == a.namespace
                && let Some(reason) = binding_allows(&binding, ns)
            {
                return Ok(reason);
            }
        }
    }
    Err(String::new())
}
