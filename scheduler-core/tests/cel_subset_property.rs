//! Properties of random well-typed CEL expressions on random clusters, checked against our engine
//! alone (cel-go's own answers are in `cel_vectors.tsv`, OCM's in the conformance cases).
//!
//! Expressions of the subset OCM selectors mostly use (labels, name, claims, string and integer
//! operators, string methods, comprehensions, `has`, `in`, conditionals) are generated so that
//! cel-go's checker accepts them; on any cluster:
//! - they compile (the checker refuses nothing well-typed), and evaluating never panics;
//! - `ClusterMatcher::matches` (the scheduler's path) agrees with `ClusterMatcher::miss` (the
//!   explanation's);
//! - `!(e)` selects exactly where `e` evaluates to false, and errors stay errors;
//! - `&&` and `||` are commutative, errors included (`error && false` is false, as in cel-go).

use ocm_score_api::{ClusterCelSelector, ClusterSelector, ManagedCluster};
use ocm_score_scheduler::placement::selector::{ClusterMatcher, SelectorMiss};
use ocm_score_scheduler::placement::{HubObjects, HubSnapshot};
use proptest::prelude::*;
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
            (inner.clone(), prop::sample::select(&["-", "e", "3", ""][..]))
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

/// What the selector with the one expression does with the cluster, asked both ways.
fn outcome(expression: &str, cluster: &ManagedCluster) -> Result<Outcome, String> {
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
    let outcome = match matcher.miss(&snapshot, id) {
        None => Outcome::Selected,
        Some(SelectorMiss::Cel { reason, .. }) if reason == "evaluated to false" => Outcome::NotSelected,
        Some(_) => Outcome::Error,
    };
    if matcher.matches(&snapshot, id) != (outcome == Outcome::Selected) {
        return Err(format!("matches() disagrees with miss(), which gave {outcome:?}"));
    }
    Ok(outcome)
}

fn negated(outcome: &Outcome) -> Outcome {
    match outcome {
        Outcome::Selected => Outcome::NotSelected,
        Outcome::NotSelected => Outcome::Selected,
        Outcome::Error => Outcome::Error,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(768))]

    #[test]
    fn well_typed_expressions_compile_and_negate(expression in bool_expr(), cluster in cluster()) {
        let plain = outcome(&expression, &cluster).map_err(|e| TestCaseError::fail(format!("{expression}: {e}")))?;
        let not = outcome(&format!("!({expression})"), &cluster);
        prop_assert_eq!(not, Ok(negated(&plain)), "{}", expression);
    }
}

proptest! {
    // Two expressions and four evaluations a case: fewer cases keep the run near the other's.
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn and_and_or_commute(a in bool_expr(), b in bool_expr(), cluster in cluster()) {
        for op in ["&&", "||"] {
            let ab = outcome(&format!("({a}) {op} ({b})"), &cluster);
            prop_assert!(ab.is_ok(), "({a}) {op} ({b}): {ab:?}");
            let ba = outcome(&format!("({b}) {op} ({a})"), &cluster);
            prop_assert_eq!(ab, ba, "({}) {} ({})", a, op, b);
        }
    }
}
