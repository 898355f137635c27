//! The CEL subset OCM's `celSelector` needs, written for this crate (no external CEL engine).
//!
//! OCM evaluates each expression with one variable, `managedCluster` (the cluster as unstructured
//! JSON), plus the member function `managedCluster.scores("<AddOnPlacementScore name>")`, which
//! returns the score items `{name, value}` and ignores `validUntil`. An expression selects the
//! cluster only when it evaluates to boolean `true`; runtime errors and non-bool results count as
//! false.
//!
//! Supported: literals (null, bool, int, uint, double, strings with escapes, raw and triple-quoted
//! strings), lists, maps, field selection, indexing, all operators, the macros `has`, `all`,
//! `exists`, `exists_one`, `filter`, `map`, the functions `size`, `int`, `uint`, `double`,
//! `string`, `bool`, `dyn`, the string methods `contains`, `startsWith`, `endsWith`,
//! `lowerAscii`, `upperAscii`, `trim`, `split`, `indexOf`, and list `join`.
//! Not supported (they fail to compile here, where upstream would accept them): bytes literals,
//! `matches` (regular expressions), timestamps/durations, message construction and the Kubernetes
//! extension libraries (semver, quantity, url, ...). Type errors that cel-go's checker reports at
//! compile time (e.g. `"a" + 1`) are runtime errors here, so they count as "no match" instead
//! of making the placement misconfigured. The expressions of one selector share a cost budget
//! per cluster ([`COST_BUDGET`]); running past it counts as false. Like cel-go, an expression may be at
//! most 100,000 code points long and `&&`/`||` chains are balanced; it may nest at most
//! 100 levels deep (cel-go: 250), so that no input can exhaust the stack.

mod eval;
mod syntax;

use super::snapshot::{ClusterId, HubSnapshot};
use eval::{Environment, EvalResult, Evaluator, Key, Macro, Value};
use std::cell::{Cell, OnceCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use syntax::Expr;

/// The cost budget of the expressions evaluated for one cluster: the API server's
/// `RuntimeCELCostBudget`, which OCM applies. The units here (evaluation steps, plus the size
/// of every string, list or map built or scanned) approximate cel-go's cost model.
pub const COST_BUDGET: u64 = 10_000_000;

/// A compiled (parsed and reference-checked) CEL expression.
#[derive(Clone, Debug)]
pub struct Program {
    ast: Expr,
}

const GLOBAL_FUNCTIONS: [&str; 7] = ["size", "int", "uint", "double", "string", "bool", "dyn"];
const MEMBER_FUNCTIONS: [&str; 11] = [
    "scores",
    "size",
    "contains",
    "startsWith",
    "endsWith",
    "lowerAscii",
    "upperAscii",
    "trim",
    "split",
    "indexOf",
    "join",
];

impl Program {
    /// Parses and checks `src`; the error is the text OCM puts after `compilation failed: `.
    pub fn compile(src: &str) -> Result<Program, String> {
        let ast = syntax::parse(src).map_err(|e| format!("ERROR: <input>: {e}"))?;
        let mut scope = vec!["managedCluster".to_string()];
        check(&ast, &mut scope).map_err(|e| format!("ERROR: <input>: {e}"))?;
        Ok(Program { ast })
    }

    /// Evaluates to a bool; anything else (or a runtime error) is an `Err` with the reason.
    pub fn eval_bool(&self, activation: &ClusterActivation<'_>) -> Result<bool, String> {
        match Evaluator::new(activation, &activation.budget).eval(&self.ast)? {
            Value::Bool(b) => Ok(b),
            other => Err(format!("returned a {} instead of a bool", other.type_name())),
        }
    }
}

/// Resolves identifiers and function names like cel-go's checker does for a `dyn` variable.
fn check(e: &Expr, scope: &mut Vec<String>) -> Result<(), String> {
    let undeclared = |name: &str| format!("undeclared reference to '{name}' (in container '')");
    match e {
        Expr::Literal(_) => Ok(()),
        Expr::Ident(name) => {
            if scope.iter().any(|s| s == name) {
                Ok(())
            } else {
                Err(undeclared(name))
            }
        }
        Expr::Select(t, _) => check(t, scope),
        Expr::Index(t, i) => {
            check(t, scope)?;
            check(i, scope)
        }
        Expr::List(items) => items.iter().try_for_each(|i| check(i, scope)),
        Expr::Map(entries) => entries.iter().try_for_each(|(k, v)| {
            check(k, scope)?;
            check(v, scope)
        }),
        Expr::Not(i) | Expr::Neg(i) => check(i, scope),
        Expr::Binary(_, l, r) => {
            check(l, scope)?;
            check(r, scope)
        }
        Expr::Conditional(c, t, f) => {
            check(c, scope)?;
            check(t, scope)?;
            check(f, scope)
        }
        Expr::Call(name, args) => {
            if name == "has" {
                return match args.as_slice() {
                    [Expr::Select(t, _)] => check(t, scope),
                    _ => Err("invalid argument to has() macro".into()),
                };
            }
            if !GLOBAL_FUNCTIONS.contains(&name.as_str()) {
                return Err(undeclared(name));
            }
            if args.len() != 1 {
                return Err(format!(
                    "found no matching overload for '{name}' applied to {} arguments",
                    args.len()
                ));
            }
            args.iter().try_for_each(|a| check(a, scope))
        }
        Expr::Method(target, name, args) => {
            check(target, scope)?;
            if Macro::of(name, args.len()).is_some() {
                let Expr::Ident(var) = &args[0] else {
                    return Err(format!("argument must be a simple name in {name}()"));
                };
                scope.push(var.clone());
                let result = args[1..].iter().try_for_each(|a| check(a, scope));
                scope.pop();
                return result;
            }
            if !MEMBER_FUNCTIONS.contains(&name.as_str()) {
                return Err(undeclared(name));
            }
            args.iter().try_for_each(|a| check(a, scope))
        }
    }
}

/// The CEL environment of one cluster: `managedCluster`, its AddOnPlacementScores, and the
/// cost budget its expressions share.
pub struct ClusterActivation<'s> {
    snapshot: &'s HubSnapshot,
    id: ClusterId,
    cluster: OnceCell<Value>,
    budget: Cell<u64>,
}

impl<'s> ClusterActivation<'s> {
    pub fn new(snapshot: &'s HubSnapshot, id: ClusterId) -> Self {
        Self {
            snapshot,
            id,
            cluster: OnceCell::new(),
            budget: Cell::new(COST_BUDGET),
        }
    }

    fn cluster_value(&self) -> Value {
        self.cluster
            .get_or_init(|| {
                // Serializing our own typed object cannot fail; Null only guards the impossible.
                serde_json::to_value(self.snapshot.cluster(self.id))
                    .map(|v| Value::from_json(&v))
                    .unwrap_or(Value::Null)
            })
            .clone()
    }
}

impl Environment for ClusterActivation<'_> {
    fn variable(&self, name: &str) -> Option<Value> {
        (name == "managedCluster").then(|| self.cluster_value())
    }

    fn scores(&self, target: &Value, resource: &str) -> EvalResult {
        let cluster_name = match target {
            Value::Map(m) => match m.get(&Key::String(Rc::from("metadata"))) {
                Some(Value::Map(meta)) => match meta.get(&Key::String(Rc::from("name"))) {
                    Some(Value::String(n)) => n.clone(),
                    _ => return Err("scores() needs a cluster with metadata.name".into()),
                },
                _ => return Err("scores() needs a cluster with metadata.name".into()),
            },
            other => return Err(format!("no such overload: scores({}, string)", other.type_name())),
        };
        let score = self
            .snapshot
            .cluster_id(&cluster_name)
            .and_then(|id| self.snapshot.score_of(id, resource))
            .ok_or_else(|| {
                format!("failed to get score: addonplacementscores.cluster.open-cluster-management.io \"{resource}\" not found")
            })?;
        let items = score
            .status
            .iter()
            .flat_map(|s| s.scores.iter())
            .map(|item| {
                let mut m = BTreeMap::new();
                m.insert(Key::String(Rc::from("name")), Value::str(&item.name));
                m.insert(Key::String(Rc::from("value")), Value::Int(i64::from(item.value)));
                Value::Map(Rc::new(m))
            })
            .collect();
        Ok(Value::List(Rc::new(items)))
    }
}

#[cfg(test)]
mod tests {
    use super::eval::{Environment, EvalResult, Evaluator, Value};
    use super::*;
    use std::cell::Cell;

    struct Json(serde_json::Value);

    impl Environment for Json {
        fn variable(&self, name: &str) -> Option<Value> {
            (name == "managedCluster").then(|| Value::from_json(&self.0))
        }
        fn scores(&self, _: &Value, _: &str) -> EvalResult {
            Err("no scores".into())
        }
    }

    fn eval(src: &str, data: serde_json::Value) -> Result<Value, String> {
        let p = Program::compile(src)?;
        Evaluator::new(&Json(data), &Cell::new(COST_BUDGET)).eval(&p.ast)
    }

    fn truth(src: &str) -> Result<bool, String> {
        let data = serde_json::json!({
            "metadata": {"name": "c1", "labels": {"env": "prod", "n": "3"}},
            "status": {"clusterClaims": [{"name": "cloud", "value": "Amazon"}, {"name": "region", "value": "eu"}]}
        });
        match eval(src, data)? {
            Value::Bool(b) => Ok(b),
            other => Err(format!("not a bool: {other:?}")),
        }
    }

    #[test]
    fn evaluates_common_selector_expressions() {
        assert_eq!(
            truth(r#"managedCluster.metadata.labels["env"] == "prod""#),
            Ok(true)
        );
        assert_eq!(
            truth(r#"managedCluster.metadata.labels.env != "prod""#),
            Ok(false)
        );
        assert_eq!(
            truth(
                r#"managedCluster.status.clusterClaims.exists(c, c.name == "cloud" && c.value == "Amazon")"#
            ),
            Ok(true)
        );
        assert_eq!(
            truth(r#"managedCluster.status.clusterClaims.all(c, c.value.size() > 1)"#),
            Ok(true)
        );
        assert_eq!(
            truth(r#"managedCluster.status.clusterClaims.exists_one(c, c.name.startsWith("r"))"#),
            Ok(true)
        );
        assert_eq!(
            truth(r#"managedCluster.status.clusterClaims.filter(c, c.name == "x").size() == 0"#),
            Ok(true)
        );
        assert_eq!(
            truth(r#"managedCluster.status.clusterClaims.map(c, c.name) == ["cloud", "region"]"#),
            Ok(true)
        );
        assert_eq!(
            truth(r#"has(managedCluster.metadata.labels.env) && !has(managedCluster.metadata.labels.x)"#),
            Ok(true)
        );
        assert_eq!(
            truth(r#"int(managedCluster.metadata.labels.n) * 2 == 6"#),
            Ok(true)
        );
        assert_eq!(truth(r#""prod" in ["dev", "prod"] ? 1 == 1.0 : false"#), Ok(true));
        assert_eq!(truth("1u < 2 && 2.5 > 2"), Ok(true));
        assert_eq!(truth(r#"'env' in managedCluster.metadata.labels"#), Ok(true));
    }

    #[test]
    fn errors_are_absorbed_only_by_logic() {
        // A missing key is an error, which `||` with a true side absorbs.
        assert!(truth(r#"managedCluster.metadata.labels["missing"] == "x""#).is_err());
        assert_eq!(
            truth(r#"managedCluster.metadata.labels["missing"] == "x" || true"#),
            Ok(true)
        );
        assert_eq!(
            truth(r#"false && managedCluster.metadata.labels["missing"] == "x""#),
            Ok(false)
        );
        assert!(truth("1 / 0 == 1").is_err());
        assert!(truth("1 % 0 == 1").is_err());
        assert!(truth("5u / 0u == 1u").is_err());
        assert!(truth("5u % 0u == 1u").is_err());
        assert!(truth("0u - 1u == 0u").is_err());
        assert!(truth("-9223372036854775808 % -1 == 0").is_err());
        assert_eq!(
            truth("7u / 2u == 3u && 7u % 4u == 3u && -7 % 3 == -1 && -7 / 2 == -3"),
            Ok(true)
        );
        assert!(truth("9223372036854775807 + 1 > 0").is_err());
    }

    #[test]
    fn the_deepest_accepted_expression_evaluates_on_a_test_thread_stack() {
        // Each comprehension nests two levels (its argument and the member call); the test
        // thread's 2 MiB stack must hold parsing, checking and evaluation at the limit.
        let levels = syntax::MAX_DEPTH / 2 - 1;
        let src = format!("{}true{}", "[1].all(x, ".repeat(levels), ")".repeat(levels));
        let p = Program::compile(&src).expect("within the nesting limit");
        let result = Evaluator::new(&Json(serde_json::json!({})), &Cell::new(COST_BUDGET)).eval(&p.ast);
        assert!(matches!(result, Ok(Value::Bool(true))), "{result:?}");
        let deeper = format!(
            "{}true{}",
            "[1].all(x, ".repeat(levels + 2),
            ")".repeat(levels + 2)
        );
        assert!(Program::compile(&deeper).is_err());
    }

    #[test]
    fn runaway_expressions_run_out_of_budget() {
        // Ten nested comprehensions over ten items each: 10^10 steps. Upstream's cost budget
        // stops such an expression, which then counts as "no match"; so must this one.
        let src = format!(
            "{}true{}",
            "[0,1,2,3,4,5,6,7,8,9].all(x, ".repeat(10),
            ")".repeat(10)
        );
        let p = Program::compile(&src).expect("compiles");
        let budget = Cell::new(100_000);
        let result = Evaluator::new(&Json(serde_json::json!({})), &budget).eval(&p.ast);
        assert_eq!(result.err().as_deref(), Some(eval::COST_LIMIT_EXCEEDED));
        assert_eq!(budget.get(), 0);
        // Building ever larger values is charged by their size.
        let src = format!(
            "{}[1]{}",
            "[0,1,2,3,4,5,6,7,8,9].map(x, ".repeat(7),
            ")".repeat(7)
        );
        let p = Program::compile(&src).expect("compiles");
        let budget = Cell::new(100_000);
        let result = Evaluator::new(&Json(serde_json::json!({})), &budget).eval(&p.ast);
        assert_eq!(result.err().as_deref(), Some(eval::COST_LIMIT_EXCEEDED));
    }

    #[test]
    fn a_cluster_that_exhausts_the_budget_does_not_match() {
        use crate::api::{ClusterCelSelector, ClusterSelector, ManagedCluster, ObjectMeta};
        use crate::placement::selector::{ClusterMatcher, SelectorMiss};
        use crate::placement::snapshot::{HubObjects, HubSnapshot};
        let cluster = ManagedCluster {
            metadata: ObjectMeta {
                name: Some("c1".into()),
                ..ObjectMeta::default()
            },
            ..ManagedCluster::default()
        };
        let snapshot = HubSnapshot::new(HubObjects {
            clusters: vec![cluster],
            ..HubObjects::default()
        })
        .expect("valid snapshot");
        let id = snapshot.cluster_id("c1").expect("cluster");
        let runaway = format!(
            "{}true{}",
            "[0,1,2,3,4,5,6,7,8,9].all(x, ".repeat(10),
            ")".repeat(10)
        );
        let matcher = ClusterMatcher::new(&ClusterSelector {
            cel_selector: Some(ClusterCelSelector {
                cel_expressions: vec!["true".into(), runaway],
            }),
            ..ClusterSelector::default()
        })
        .expect("valid selector");
        match matcher.miss(&snapshot, id) {
            Some(SelectorMiss::Cel { reason, .. }) => assert!(reason.contains("cost limit"), "{reason}"),
            other => panic!("expected a CEL miss, got {other:?}"),
        }
    }

    #[test]
    fn compile_errors_name_the_reference() {
        let err = Program::compile("invalid.expression").expect_err("the input must be rejected");
        assert!(err.contains("undeclared reference to 'invalid'"), "{err}");
        let err = Program::compile("managedCluster.foo()").expect_err("the input must be rejected");
        assert!(err.contains("undeclared reference to 'foo'"), "{err}");
        assert!(Program::compile("managedCluster.metadata.name ==").is_err());
        assert!(Program::compile("[1,2].all(x, y > 1)").is_err());
        assert!(Program::compile("[1,2].all(x, x > 1)").is_ok());
    }
}
