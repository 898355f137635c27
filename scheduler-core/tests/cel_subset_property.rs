//! Property: expressions of the CEL subset the interpreter supported before OCM's full
//! environment give the same result now as then, on any cluster.
//!
//! The previous interpreter is kept in `cel_legacy/` as the reference. Random well-typed
//! expressions of that subset (labels, name, claims, string and integer operators, the string
//! methods it had, comprehensions, `has`, `in`, conditionals) are evaluated on random clusters
//! by both: the new one through the public `ClusterMatcher`, the old one directly on the same
//! JSON; both must agree on selected / not selected / runtime error. Only expressions cel-go's
//! checker accepts are generated (the old interpreter also ran ill-typed ones such as `1 == 1.0`,
//! which OCM refuses and the new one now refuses too), and no `split('')`, which the old one got
//! wrong (Rust's empty-pattern split instead of Go's split into characters).

mod cel_legacy;

use proptest::prelude::*;
use scheduler_core::api::{ClusterCelSelector, ClusterSelector, ManagedCluster};
use scheduler_core::placement::selector::{ClusterMatcher, SelectorMiss};
use scheduler_core::placement::{HubObjects, HubSnapshot};
use std::collections::BTreeMap;

const KEYS: [&str; 4] = ["env", "zone", "n", "tier"];
const VALUES: [&str; 7] = ["prod", "dev", "3", "-1", "", "us-east-1", "Prod "];

#[derive(Debug, PartialEq)]
enum Outcome {
    Selected,
    NotSelected,
    Error,
}

fn key() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&KEYS[..])
}

fn text() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&VALUES[..])
}

fn string_expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("managedCluster.metadata.name".to_string()),
        key().prop_map(|k| format!("managedCluster.metadata.labels['{k}']")),
        key().prop_map(|k| format!("managedCluster.metadata.labels.{k}")),
        text().prop_map(|v| format!("'{v}'")),
        Just("managedCluster.status.clusterClaims[0].value".to_string()),
    ];
    leaf.prop_recursive(3, 16, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} + {b})")),
            inner.clone().prop_map(|a| format!("{a}.lowerAscii()")),
            inner.clone().prop_map(|a| format!("{a}.upperAscii()")),
            inner.clone().prop_map(|a| format!("{a}.trim()")),
            // Not an empty separator: the old interpreter split "" unlike Go (and cel-go).
            (inner.clone(), prop::sample::select(&["-", "e", "3"][..]))
                .prop_map(|(a, s)| format!("{a}.split('{s}')[0]")),
            (-3i64..12).prop_map(|i| format!("string({i})")),
            (any::<bool>(), inner.clone(), inner).prop_map(|(c, a, b)| format!("({c} ? {a} : {b})")),
        ]
    })
}

fn int_expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        (-5i64..20).prop_map(|i| i.to_string()),
        string_expr().prop_map(|s| format!("size({s})")),
        string_expr().prop_map(|s| format!("{s}.size()")),
        string_expr().prop_map(|s| format!("int({s})")),
        (string_expr(), string_expr()).prop_map(|(a, b)| format!("{a}.indexOf({b})")),
        Just("size(managedCluster.metadata.labels)".to_string()),
        Just("managedCluster.status.clusterClaims.size()".to_string()),
    ];
    leaf.prop_recursive(2, 8, 2, |inner| {
        (
            inner.clone(),
            prop::sample::select(&["+", "-", "*", "/", "%"][..]),
            inner,
        )
            .prop_map(|(a, op, b)| format!("({a} {op} {b})"))
    })
}

fn comparison() -> impl Strategy<Value = &'static str> {
    prop::sample::select(&["==", "!=", "<", "<=", ">", ">="][..])
}

fn bool_expr() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        any::<bool>().prop_map(|b| b.to_string()),
        (string_expr(), comparison(), string_expr()).prop_map(|(a, op, b)| format!("{a} {op} {b}")),
        (int_expr(), comparison(), int_expr()).prop_map(|(a, op, b)| format!("{a} {op} {b}")),
        (
            string_expr(),
            prop::sample::select(&["startsWith", "endsWith", "contains"][..]),
            string_expr()
        )
            .prop_map(|(a, m, b)| format!("{a}.{m}({b})")),
        key().prop_map(|k| format!("'{k}' in managedCluster.metadata.labels")),
        key().prop_map(|k| format!("has(managedCluster.metadata.labels.{k})")),
        (string_expr(), string_expr(), string_expr()).prop_map(|(a, b, c)| format!("{a} in [{b}, {c}]")),
        (text(), string_expr()).prop_map(|(v, s)| format!(
            "managedCluster.status.clusterClaims.exists(c, c.value == '{v}' || c.name.startsWith({s}))"
        )),
        (0i64..6).prop_map(|n| format!("managedCluster.metadata.labels.all(k, k.size() > {n})")),
        text().prop_map(|v| format!(
            "managedCluster.metadata.labels.exists_one(k, managedCluster.metadata.labels[k] == '{v}')"
        )),
        (text(), 0i64..3).prop_map(|(v, n)| format!(
            "managedCluster.status.clusterClaims.filter(c, c.value != '{v}').size() >= {n}"
        )),
        string_expr().prop_map(|s| format!(
            "managedCluster.metadata.labels.map(k, k + {s}).exists(x, x.endsWith('v'))"
        )),
    ];
    leaf.prop_recursive(3, 24, 2, |inner| {
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} && {b})")),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} || {b})")),
            inner.clone().prop_map(|a| format!("!({a})")),
            (inner.clone(), inner.clone(), inner).prop_map(|(c, a, b)| format!("({c} ? {a} : {b})")),
        ]
    })
}

fn cluster() -> impl Strategy<Value = ManagedCluster> {
    (
        prop::sample::select(&["c1", "prod-eu", "dev-3"][..]),
        prop::collection::btree_map(key(), text(), 0..4),
        prop::collection::vec((key(), text()), 0..3),
    )
        .prop_map(|(name, labels, claims)| {
            let labels: BTreeMap<String, String> = labels
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            let claims: Vec<serde_json::Value> = claims
                .into_iter()
                .map(|(n, v)| serde_json::json!({"name": n, "value": v}))
                .collect();
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "labels": labels},
                "spec": {"hubAcceptsClient": true},
                "status": {"clusterClaims": claims}
            }))
            .expect("a valid ManagedCluster")
        })
}

/// The old interpreter's environment: the cluster as JSON, no scores.
struct Legacy(cel_legacy::eval::Value);

impl cel_legacy::eval::Environment for Legacy {
    fn variable(&self, name: &str) -> Option<cel_legacy::eval::Value> {
        (name == "managedCluster").then(|| self.0.clone())
    }

    fn scores(&self, _: &cel_legacy::eval::Value, _: &str) -> cel_legacy::eval::EvalResult {
        Err("no scores".into())
    }
}

fn legacy_outcome(expression: &str, cluster: &ManagedCluster) -> Result<Outcome, String> {
    let program = cel_legacy::Program::compile(expression)?;
    let json = serde_json::to_value(cluster).map_err(|e| e.to_string())?;
    let env = Legacy(cel_legacy::eval::Value::from_json(&json));
    Ok(match program.eval_bool(&env) {
        Ok(true) => Outcome::Selected,
        Ok(false) => Outcome::NotSelected,
        Err(_) => Outcome::Error,
    })
}

fn new_outcome(expression: &str, cluster: &ManagedCluster) -> Result<Outcome, String> {
    let name = cluster.metadata.name.clone().unwrap_or_default();
    let snapshot = HubSnapshot::new(HubObjects {
        clusters: vec![cluster.clone()],
        ..HubObjects::default()
    })
    .map_err(|e| format!("{e:?}"))?;
    let matcher = ClusterMatcher::new(&ClusterSelector {
        cel_selector: Some(ClusterCelSelector {
            cel_expressions: vec![expression.to_string()],
        }),
        ..ClusterSelector::default()
    })?;
    if let Some(e) = matcher.cel_compile_error() {
        return Err(e);
    }
    let id = snapshot.cluster_id(&name).ok_or("cluster missing")?;
    Ok(match matcher.miss(&snapshot, id) {
        None => Outcome::Selected,
        Some(SelectorMiss::Cel { reason, .. }) if reason == "evaluated to false" => Outcome::NotSelected,
        Some(_) => Outcome::Error,
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(768))]

    #[test]
    fn the_old_subset_gives_the_old_results(expression in bool_expr(), cluster in cluster()) {
        let before = legacy_outcome(&expression, &cluster);
        prop_assert!(before.is_ok(), "the old interpreter refused {expression}: {before:?}");
        let now = new_outcome(&expression, &cluster);
        prop_assert_eq!(now, before, "{}", expression);
    }
}
