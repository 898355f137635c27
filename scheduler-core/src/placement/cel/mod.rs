//! CEL as OCM's placement controller evaluates a `celSelector`, function for function.
//!
//! The environment matched is OCM v1.2.1's `pkg/placement/helpers/cel.go` (`NewEnv`) with
//! open-cluster-management sdk-go v1.2.0, cel-go v0.26.1 and k8s.io/apiserver v0.34.3 (the
//! versions OCM v1.2.1 builds with; the conformance answers in `tests/conformance/cel/` come
//! from OCM commit 00f84c3 and agree with it on every case). That environment is:
//! - the variable `managedCluster` (`map(string, dyn)`, the cluster as unstructured JSON) and
//!   `managedCluster.scores(name)` (sdk-go `ManagedClusterLib`): the items `{name, value}` of the
//!   cluster's AddOnPlacementScore `name`, `validUntil` ignored; an error when there is none;
//! - `parseJSON` (sdk-go `JsonLib`);
//! - sdk-go's `BaseEnvOpts`: cel-go's standard library, `cel.OptionalTypes()`, `ext.Strings()`
//!   (latest version), and the Kubernetes libraries `Lists`, `Regex`, `URLs`, `Quantity`, `IP`,
//!   `CIDR`, `Format` and `SemverLib` (version 0: no normalising `semver(s, true)`).
//!
//! Not in it, so refused like upstream: cel-go's math, sets, encoders and two-variable
//! comprehensions, cross-type numeric comparisons (`1 < 1.5`), and the Kubernetes authz library.
//!
//! An expression is parsed ([`syntax`]), then checked and planned ([`check`]) against the
//! function table ([`library`]) with cel-go's typing rules ([`types`]), so what cel-go's checker
//! refuses (`'a' + 1`, `isSemver(s, true)`, `math.greatest(1, 2)`) fails to compile with OCM's
//! message shape, `compilation failed: ERROR: <input>: ...` (without cel-go's line:column and
//! source excerpt). A cluster matches only when the expression evaluates to `true`; runtime
//! errors and non-bool results count as false.
//!
//! Why our own interpreter and not a CEL crate: the `cel` crate (0.15) has no type checker, so
//! it would accept what OCM refuses (cases cel-09 and cel-60), and no cost limit, so a hostile
//! comprehension would run unbounded.
//!
//! What protects the controller: the expressions of one selector share a cost budget per cluster
//! ([`COST_BUDGET`]; running past it counts as false); an expression is at most 100,000 code
//! points long; `&&`/`||` chains are balanced; nesting is capped at 100 levels (cel-go: 250) so
//! that no input can exhaust the stack; regular expressions are linear-time with bounded size.
//!
//! What keeps a predicate cheap over a large fleet, without changing a result or a charge
//! (a test evaluates expressions with and without these shortcuts at every budget):
//! - an expression is compiled once per source text, its constant regular expressions with it
//!   ([`Program::compile`] keeps programs in a bounded cache), not per cluster or per sync;
//! - `managedCluster` is never built as a value unless an expression uses it whole:
//!   `metadata.name` and `metadata.labels[k]` are read borrowed from the snapshot's interned
//!   labels, and compared or matched without allocating;
//! - `managedCluster.scores('<constant>')` in a comprehension lends the snapshot's interned
//!   items; a body of `&&`/`||` over comparisons of `s.name`/`s.value` with constants is planned
//!   at check time ([`node::ItemPredicate`]) and runs without the tree walk; a score item
//!   becomes a map only when the variable is used whole;
//! - the boolean skeleton of an expression (`&&`, `||`, `!`, constants, `matches` and
//!   comparisons of the name or a label with constants, quantifiers over `scores()`) runs as a
//!   [`plan`] bound to the snapshot once per sync: label keys, values and score names become
//!   interned ids, a pattern runs once per distinct label value, and only the rest is walked;
//! - the scheduler asks only whether a cluster matches; the reason is built only for
//!   explanations.
//!
//! Known differences: quantities are exact only up to about 10^29 (larger ones are refused);
//! the `format` library's validation messages are worded by us; regex error texts follow the
//! `regex` crate's wording after Go's `error parsing regexp:` prefix.

mod check;
mod eval;
mod library;
mod node;
mod plan;
mod syntax;
mod types;
mod value;

use super::snapshot::{ClusterId, HubSnapshot};
use check::{Checker, CompileError};
use eval::{Environment, ScoreItems, score_item_value};
use plan::{Binding, Plan};
use std::cell::{Cell, OnceCell};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};
use value::{EvalResult, Key, Value};

/// The cost budget of the expressions evaluated for one cluster: the API server's
/// `RuntimeCELCostBudget`, which OCM applies. The units here (evaluation steps, plus the size
/// of every string, list or map built or scanned) approximate cel-go's cost model.
pub const COST_BUDGET: u64 = 10_000_000;

/// A compiled (parsed, checked and planned) CEL expression; clones share the plan.
#[derive(Clone, Debug)]
pub struct Program {
    /// The checked tree, which the plan walks where it has no shortcut (tests walk it whole).
    #[cfg(test)]
    node: Arc<node::Node>,
    /// The boolean skeleton the per-cluster loop runs ([`plan`]).
    plan: Arc<Plan>,
}

/// Compiled expressions by source text, so that a Placement synced again (the controller's
/// steady state) does not parse, check and build its regular expressions again. Bounded: once
/// it holds [`CACHE_ENTRIES`] expressions or [`CACHE_SOURCE_BYTES`] of source it starts over.
static PROGRAMS: LazyLock<Mutex<ProgramCache>> = LazyLock::new(Mutex::default);
type ProgramCache = HashMap<Box<str>, Result<Program, String>>;
const CACHE_ENTRIES: usize = 1024;
const CACHE_SOURCE_BYTES: usize = 4 << 20;

impl Program {
    /// Parses, checks and plans `src`. The error is what OCM reports for it:
    /// `compilation failed: ERROR: <input>: ...`, or `instantiation failed: ...` for what cel-go
    /// only finds when it builds the program (a bad constant pattern of `find`/`findAll`).
    /// The same source gives the same program, so programs are kept by source (see [`PROGRAMS`]).
    pub fn compile(src: &str) -> Result<Program, String> {
        // A poisoned lock only means another thread panicked while holding it; the map stays valid.
        let cached = PROGRAMS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(src)
            .cloned();
        if let Some(program) = cached {
            return program;
        }
        let program = Self::compile_uncached(src);
        let mut cache = PROGRAMS.lock().unwrap_or_else(|e| e.into_inner());
        let bytes: usize = cache.keys().map(|k| k.len()).sum();
        if cache.len() >= CACHE_ENTRIES || bytes + src.len() > CACHE_SOURCE_BYTES {
            cache.clear();
        }
        if src.len() <= CACHE_SOURCE_BYTES {
            cache.insert(Box::from(src), program.clone());
        }
        program
    }

    fn compile_uncached(src: &str) -> Result<Program, String> {
        let ast = syntax::parse(src).map_err(|e| format!("compilation failed: ERROR: <input>: {e}"))?;
        match Checker::new().check(&ast) {
            Ok((node, _)) => Ok(Program {
                plan: Arc::new(Plan::new(&node)),
                #[cfg(test)]
                node: Arc::new(node),
            }),
            Err(CompileError::Check(e)) => Err(format!("compilation failed: ERROR: <input>: {e}")),
            Err(CompileError::Instantiate(e)) => Err(format!("instantiation failed: {e}")),
        }
    }

    /// The program ready to run over the clusters of `snapshot` (its names resolved once).
    pub fn bind<'p, 's>(&'p self, snapshot: &'s HubSnapshot) -> BoundProgram<'p, 's> {
        BoundProgram {
            plan: &self.plan,
            snapshot,
            binding: self.plan.bind(snapshot),
        }
    }

    /// Evaluates to a bool; anything else (or a runtime error) is an `Err` with the reason.
    /// Over many clusters of one snapshot, [`Program::bind`] once instead.
    pub fn eval_bool(&self, activation: &ClusterActivation<'_>) -> Result<bool, String> {
        self.bind(activation.snapshot).eval_bool(activation)
    }
}

/// A [`Program`] bound to one snapshot: what the scheduler evaluates for each cluster.
pub struct BoundProgram<'p, 's> {
    plan: &'p Plan,
    snapshot: &'s HubSnapshot,
    binding: Binding,
}

impl BoundProgram<'_, '_> {
    /// Evaluates to a bool; anything else (or a runtime error) is an `Err` with the reason.
    pub fn eval_bool(&self, activation: &ClusterActivation<'_>) -> Result<bool, String> {
        self.eval(activation).map_err(plan::Fail::message)
    }

    /// Whether the expression evaluates to `true`, without formatting the reason if not.
    pub fn is_true(&self, activation: &ClusterActivation<'_>) -> bool {
        matches!(self.eval(activation), Ok(true))
    }

    fn eval(&self, activation: &ClusterActivation<'_>) -> Result<bool, plan::Fail<'_>> {
        if std::ptr::eq(self.snapshot, activation.snapshot) {
            self.plan.eval(&self.binding, activation)
        } else {
            // Another snapshot's ids mean nothing here: resolve the names for it.
            self.plan.eval(&self.plan.bind(activation.snapshot), activation)
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
                // The snapshot wrote this JSON from a typed object; Null only guards the impossible.
                serde_json::from_slice::<serde_json::Value>(self.snapshot.cluster_json(self.id))
                    .map(|mut v| {
                        as_go_converts_it(&mut v);
                        Value::from_json(&v)
                    })
                    .unwrap_or(Value::Null)
            })
            .clone()
    }
}

/// OCM evaluates CEL on its Go `ManagedCluster` converted to a map
/// (`runtime.DefaultUnstructuredConverter`), where the fields declared without `omitempty` are
/// there even when the object lacks them: `spec.hubAcceptsClient` (false), `status.conditions`
/// (null), `status.version` (a struct: `{}`), and each taint's `timeAdded` (null). So `has()` and
/// `== null` on them answer as in OCM. The rest of the JSON is the object as written.
fn as_go_converts_it(cluster: &mut serde_json::Value) {
    use serde_json::{Map, Value as Json};
    let Some(cluster) = cluster.as_object_mut() else {
        return;
    };
    if let Some(spec) = cluster
        .entry("spec")
        .or_insert_with(|| Json::Object(Map::new()))
        .as_object_mut()
    {
        spec.entry("hubAcceptsClient").or_insert(Json::Bool(false));
        if let Some(taints) = spec.get_mut("taints").and_then(Json::as_array_mut) {
            for taint in taints.iter_mut().filter_map(Json::as_object_mut) {
                taint.entry("timeAdded").or_insert(Json::Null);
            }
        }
    }
    if let Some(status) = cluster
        .entry("status")
        .or_insert_with(|| Json::Object(Map::new()))
        .as_object_mut()
    {
        status.entry("conditions").or_insert(Json::Null);
        status
            .entry("version")
            .or_insert_with(|| Json::Object(Map::new()));
    }
}

impl Environment for ClusterActivation<'_> {
    fn root(&self) -> Value {
        self.cluster_value()
    }

    fn root_path(&self, path: &[(Key, bool)]) -> Option<EvalResult> {
        match self.root_field(path)? {
            RootField::Name(n) => Some(Ok(Value::str(n))),
            RootField::Label(found) => Some(found.map(|v| Value::String(v.clone()))),
        }
    }

    fn root_path_str(&self, path: &[(Key, bool)]) -> Option<Result<&str, String>> {
        match self.root_field(path)? {
            RootField::Name(n) => Some(Ok(n)),
            RootField::Label(found) => Some(found.map(|v| &**v)),
        }
    }

    fn root_scores(&self, resource: &str) -> EvalResult {
        self.score_items(self.id, resource)
    }

    fn root_score_items(&self, resource: &str) -> Option<Result<ScoreItems<'_>, String>> {
        Some(self.borrowed_score_items(self.id, resource))
    }

    fn scores(&self, target: &Value, resource: &str) -> EvalResult {
        let cluster_name = match target {
            Value::Map(m) => match m.get(&Key::String(Arc::from("metadata"))) {
                Some(Value::Map(meta)) => match meta.get(&Key::String(Arc::from("name"))) {
                    Some(Value::String(n)) => n.clone(),
                    _ => return Err("scores() needs a cluster with metadata.name".into()),
                },
                _ => return Err("scores() needs a cluster with metadata.name".into()),
            },
            other => return Err(format!("no such overload: scores({}, string)", other.type_name())),
        };
        match self.snapshot.cluster_id(&cluster_name) {
            Some(id) => self.score_items(id, resource),
            None => Err(format!(
                "failed to get score: addonplacementscores.cluster.open-cluster-management.io \"{resource}\" not found"
            )),
        }
    }
}

/// A root path the snapshot answers without the cluster's JSON.
enum RootField<'s> {
    /// `metadata.name`.
    Name(&'s str),
    /// `metadata.labels[k]` (or `.k`) on a cluster that has labels.
    Label(Result<&'s Arc<str>, String>),
}

impl<'s> ClusterActivation<'s> {
    /// The paths selectors use most: `metadata.name`, `metadata.labels[k]`, read from the typed
    /// cluster and the snapshot's interned labels. Anything else (and any case where the JSON
    /// might differ, such as absent labels) is walked from the full value.
    fn root_field(&self, path: &[(Key, bool)]) -> Option<RootField<'s>> {
        let field = |i: usize| match path.get(i) {
            Some((Key::String(s), _)) => Some(&**s),
            _ => None,
        };
        match (path.len(), field(0), field(1)) {
            (2, Some("metadata"), Some("name")) => {
                self.snapshot.cluster_metadata_name(self.id).map(RootField::Name)
            }
            (3, Some("metadata"), Some("labels")) => {
                let key = field(2)?;
                if !self.snapshot.has_labels(self.id) {
                    return None;
                }
                let value = self.snapshot.label_value(self.id, key);
                Some(RootField::Label(
                    value.ok_or_else(|| format!("no such key: {key}")),
                ))
            }
            _ => None,
        }
    }

    /// The items of cluster `id`'s AddOnPlacementScore `resource`, `validUntil` ignored.
    fn borrowed_score_items(&self, id: ClusterId, resource: &str) -> Result<ScoreItems<'s>, String> {
        let snapshot = self.snapshot;
        let entry = snapshot.score_entry_named(id, resource).ok_or_else(|| {
                format!("failed to get score: addonplacementscores.cluster.open-cluster-management.io \"{resource}\" not found")
            })?;
        Ok(ScoreItems {
            names: snapshot.score_name_text(),
            items: snapshot.score_items_of(entry),
        })
    }

    /// The items of cluster `id`'s AddOnPlacementScore `resource` as CEL maps `{name, value}`.
    fn score_items(&self, id: ClusterId, resource: &str) -> EvalResult {
        let items = self.borrowed_score_items(id, resource)?;
        let values = (0..items.items.len())
            .filter_map(|i| items.get(i))
            .map(score_item_value)
            .collect();
        Ok(Value::list(values))
    }
}

#[cfg(test)]
mod tests {
    use super::eval::{Environment, Evaluator};
    use super::value::{EvalResult, Value};
    use super::*;
    use std::cell::Cell;

    struct Json(serde_json::Value);

    impl Environment for Json {
        fn root(&self) -> Value {
            Value::from_json(&self.0)
        }
        fn scores(&self, _: &Value, _: &str) -> EvalResult {
            Err("no scores".into())
        }
    }

    fn eval(src: &str, data: serde_json::Value) -> Result<Value, String> {
        let p = Program::compile(src)?;
        Evaluator::new(&Json(data), &Cell::new(COST_BUDGET)).eval(&p.node)
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
        assert_eq!(
            truth(r#""prod" in ["dev", "prod"] ? dyn(1) == 1.0 : false"#),
            Ok(true)
        );
        assert_eq!(truth("dyn(1u) < 2 && dyn(2.5) > 2"), Ok(true));
        // Like cel-go's checker: no cross-type numeric operators on statically typed operands.
        assert!(Program::compile("1 == 1.0").is_err());
        assert!(Program::compile("1u < 2").is_err());
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
        let result = Evaluator::new(&Json(serde_json::json!({})), &Cell::new(COST_BUDGET)).eval(&p.node);
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
        let result = Evaluator::new(&Json(serde_json::json!({})), &budget).eval(&p.node);
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
        let result = Evaluator::new(&Json(serde_json::json!({})), &budget).eval(&p.node);
        assert_eq!(result.err().as_deref(), Some(eval::COST_LIMIT_EXCEEDED));
    }

    #[test]
    fn a_cluster_that_exhausts_the_budget_does_not_match() {
        use crate::placement::selector::{ClusterMatcher, SelectorMiss};
        use crate::placement::snapshot::{HubObjects, HubSnapshot};
        use ocm_score_api::{ClusterCelSelector, ClusterSelector, ManagedCluster, ObjectMeta};
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

    /// The environment without any of the shortcuts: every value is walked from the cluster's
    /// JSON and `scores()` builds its list of maps.
    struct Walked<'a>(&'a ClusterActivation<'a>);

    impl Environment for Walked<'_> {
        fn root(&self) -> Value {
            self.0.root()
        }
        fn root_path(&self, _: &[(Key, bool)]) -> Option<EvalResult> {
            None
        }
        fn scores(&self, target: &Value, resource: &str) -> EvalResult {
            self.0.scores(target, resource)
        }
    }

    /// Two clusters (one without labels) and one AddOnPlacementScore.
    fn equivalence_snapshot() -> HubSnapshot {
        use crate::placement::snapshot::HubObjects;
        use ocm_score_api::{AddOnPlacementScore, ManagedCluster};
        let cluster: ManagedCluster = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c1", "labels": {"env": "prod", "zone": "eu-1", "n": "3"}},
            "spec": {"hubAcceptsClient": true}
        }))
        .expect("a valid cluster");
        let bare: ManagedCluster =
            serde_json::from_value(serde_json::json!({"metadata": {"name": "c2"}})).expect("a valid cluster");
        let other: ManagedCluster = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c3", "labels": {"env": "dev", "zone": "us-2"}}
        }))
        .expect("a valid cluster");
        let score: AddOnPlacementScore = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "usage", "namespace": "c1"},
            "status": {"scores": [{"name": "cpu", "value": 60}, {"name": "mem", "value": -5}, {"name": "cpu", "value": 7}]}
        }))
        .expect("a valid score");
        HubSnapshot::new(HubObjects {
            clusters: vec![cluster, bare, other],
            scores: vec![score],
            ..HubObjects::default()
        })
        .expect("a valid snapshot")
    }

    /// The tree walk of `program` without any shortcut, and the budget it leaves.
    fn walked(snapshot: &HubSnapshot, id: ClusterId, program: &Program, budget: u64) -> (String, u64) {
        let activation = ClusterActivation::new(snapshot, id);
        let walked = Walked(&activation);
        let walked_budget = Cell::new(budget);
        let result = Evaluator::new(&walked, &walked_budget).eval(&program.node);
        (format!("{result:?}"), walked_budget.get())
    }

    /// The bound plan's result, as the walk would give it, and the budget it leaves.
    fn planned(
        bound: &BoundProgram<'_, '_>,
        snapshot: &HubSnapshot,
        id: ClusterId,
        budget: u64,
    ) -> (String, u64) {
        let activation = ClusterActivation::new(snapshot, id);
        activation.budget.set(budget);
        let result = plan::Fail::into_walk_result(bound.eval(&activation));
        (format!("{result:?}"), activation.budget.get())
    }

    #[test]
    fn shortcuts_give_what_the_walk_gives_at_every_budget() {
        let snapshot = equivalence_snapshot();
        let expressions = [
            "managedCluster.metadata.labels['env'].matches('^(prod|staging)$') && managedCluster.scores('usage').exists(s, s.name == 'cpu' && s.value > -50)",
            "managedCluster.metadata.labels.env == 'prod' || managedCluster.metadata.labels['missing'] < 'a'",
            "managedCluster.metadata.labels['missing'].matches('x') || true",
            "managedCluster.metadata.labels['zone'].find('[0-9]+') == '1' && managedCluster.metadata.labels['zone'].findAll('.', 2) == ['e', 'u']",
            "managedCluster.metadata.labels['env'] in ['dev', 'prod'] && !(managedCluster.metadata.labels['env'] in {'prod': 1})",
            "managedCluster.metadata.labels['env'] + '-x' == 'prod-x' && managedCluster.metadata.labels['env'] >= 'p'",
            "managedCluster.metadata.name == 'c1' && managedCluster.metadata.name != managedCluster.metadata.labels['env']",
            "managedCluster.scores('usage').all(s, s.value < 100) && managedCluster.scores('usage').exists_one(s, s.value < 0)",
            "managedCluster.scores('usage').filter(s, s.name == 'cpu') == [{'name': 'cpu', 'value': 60}, {'name': 'cpu', 'value': 7}]",
            "managedCluster.scores('usage').map(s, s.value > 0, s.name) == ['cpu', 'cpu']",
            "managedCluster.scores('usage').map(s, s) == managedCluster.scores('usage')",
            "managedCluster.scores('usage').exists(s, s.foo == 1)",
            "managedCluster.scores('usage').exists(s, s.?foo.orValue(1) == 1 && has(s.name) && 'value' in s)",
            "managedCluster.scores('usage').exists(s, s.name.startsWith('me') && s.value == -5.0)",
            "managedCluster.scores('usage').exists(s, s.value == 'cpu' || s.name > 5)",
            "managedCluster.scores('absent').exists(s, true)",
            "managedCluster.scores('usage').exists(s, s.name >= 'd' || s.value != 60) && managedCluster.scores('usage').all(s, s.value == 60 && s.name != 'x' || s.value <= 7)",
            "managedCluster.scores('usage').filter(s, s.value <= 7 || s.name < 'b').size() == 2",
            "managedCluster.scores('usage').exists_one(s, s.name == 'cpu' && s.value > 50 || s.name > 'z')",
            "managedCluster.scores('usage').exists(s, s.value > 1.5 && s.name == 'cpu')",
            "managedCluster.scores('usage').exists(s, managedCluster.scores('usage').exists(t, t.name == s.name && t.value != s.value))",
            "[1, 2].exists(x, managedCluster.scores('usage').all(s, s.value > x - 10))",
            // What the plan covers: constants first, names, `!`, unknown texts, patterns that
            // are not literal sets, every quantifier, and values that are not bools in logic.
            "'prod' == managedCluster.metadata.labels['env'] && 'eu-1' != managedCluster.metadata.labels.zone",
            "managedCluster.metadata.labels['zone'] < 'f' || managedCluster.metadata.name >= 'c2'",
            "'c' < managedCluster.metadata.name && managedCluster.metadata.labels['env'] <= 'q'",
            "managedCluster.metadata.name.matches('^c[0-9]$') && !managedCluster.metadata.labels['zone'].matches('^eu-[0-9]+$')",
            "!(managedCluster.metadata.labels['env'] == 'dev') && managedCluster.metadata.labels['env'] == 'no-such-value' || managedCluster.metadata.labels['no-such-key'] != 'x'",
            "managedCluster.scores('usage').all(s, s.name != 'nope' && s.value >= -5) || managedCluster.scores('nothing').exists(s, s.value > 0)",
            "managedCluster.scores('usage').exists_one(s, s.name == 'mem' || s.value == 60) && managedCluster.scores('usage').exists(s, s.name == 'no-such-name')",
            "managedCluster.scores('usage').all(s, s.name <= 'd') || managedCluster.scores('usage').exists_one(s, s.name == 'cpu')",
            "dyn(managedCluster.metadata.labels['n']) || false",
            "dyn(managedCluster.metadata.labels['n']) && dyn(1)",
            "!dyn(managedCluster.metadata.labels['env'])",
            "false || managedCluster.metadata.labels['env'].matches('^(prod|staging)$') || !true",
        ];
        for src in expressions {
            let program = Program::compile(src).unwrap_or_else(|e| panic!("{src}: {e}"));
            // One binding for every cluster and budget, so that the patterns' answers kept
            // for one cluster are reused for the next.
            let bound = program.bind(&snapshot);
            for name in ["c1", "c2", "c3"] {
                let id = snapshot.cluster_id(name).expect("cluster");
                for budget in (0..80).chain([COST_BUDGET]) {
                    let fast = ClusterActivation::new(&snapshot, id);
                    fast.budget.set(budget);
                    let fast_result = Evaluator::new(&fast, &fast.budget).eval(&program.node);
                    let walked = walked(&snapshot, id, &program, budget);
                    assert_eq!(
                        (format!("{fast_result:?}"), fast.budget.get()),
                        walked,
                        "{name}: {src} with a budget of {budget}"
                    );
                    assert_eq!(
                        planned(&bound, &snapshot, id, budget),
                        walked,
                        "planned, {name}: {src} with a budget of {budget}"
                    );
                }
            }
        }
    }

    /// A bool expression over what the plan covers (and a few things it walks).
    fn planned_expression() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        let text = prop::sample::select(&["prod", "dev", "eu-1", "c1", "", "zz", "cpu", "mem"][..]);
        let key = prop::sample::select(&["env", "zone", "n", "absent"][..]);
        let op = prop::sample::select(&["==", "!=", "<", "<=", ">", ">="][..]);
        let root = prop_oneof![
            key.clone()
                .prop_map(|k| format!("managedCluster.metadata.labels['{k}']")),
            Just("managedCluster.metadata.name".to_string()),
        ];
        let pattern = prop::sample::select(&["^(prod|dev)$", "^e", "[0-9]", "^c1$", "x|y", ""][..]);
        let item = prop_oneof![
            (op.clone(), text.clone()).prop_map(|(o, t)| format!("s.name {o} '{t}'")),
            (op.clone(), -10i64..70).prop_map(|(o, i)| format!("s.value {o} {i}")),
        ];
        let body = item.prop_recursive(2, 6, 2, |inner| {
            prop_oneof![
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} && {b})")),
                (inner.clone(), inner).prop_map(|(a, b)| format!("({a} || {b})")),
            ]
        });
        let leaf = prop_oneof![
            any::<bool>().prop_map(|b| b.to_string()),
            (root.clone(), op, text.clone(), any::<bool>()).prop_map(|(r, o, t, first)| {
                if first {
                    format!("'{t}' {o} {r}")
                } else {
                    format!("{r} {o} '{t}'")
                }
            }),
            (root.clone(), pattern).prop_map(|(r, p)| format!("{r}.matches('{p}')")),
            (
                prop::sample::select(&["all", "exists", "exists_one"][..]),
                prop::sample::select(&["usage", "absent"][..]),
                body
            )
                .prop_map(|(m, r, b)| format!("managedCluster.scores('{r}').{m}(s, {b})")),
            (root, text).prop_map(|(r, t)| format!("{r}.startsWith('{t}')")),
            key.prop_map(|k| format!("dyn(managedCluster.metadata.labels['{k}'])")),
        ];
        leaf.prop_recursive(3, 12, 2, |inner| {
            prop_oneof![
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} && {b})")),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| format!("({a} || {b})")),
                inner.prop_map(|a| format!("!({a})")),
            ]
        })
    }

    proptest::proptest! {
        #[test]
        fn the_plan_gives_what_the_walk_gives(
            src in planned_expression(),
            cluster in 0usize..3,
            budget in proptest::prop_oneof![0u64..120, proptest::strategy::Just(COST_BUDGET)],
        ) {
            let snapshot = equivalence_snapshot();
            // `!` on a `dyn` that is not a bool, or `&&` on two, can fail to compile; skip those.
            let Ok(program) = Program::compile(&src) else {
                return Ok(());
            };
            let id = snapshot.cluster_ids().nth(cluster).expect("cluster");
            let bound = program.bind(&snapshot);
            proptest::prop_assert_eq!(
                planned(&bound, &snapshot, id, budget),
                walked(&snapshot, id, &program, budget),
                "{} with a budget of {}", src, budget
            );
        }
    }

    #[test]
    fn programs_are_compiled_once_per_source_and_the_cache_stays_bounded() {
        let src = "managedCluster.metadata.labels['env'].matches('^p') && 'cache-test' != ''";
        let (a, b) = (Program::compile(src), Program::compile(src));
        match (a, b) {
            (Ok(a), Ok(b)) => assert!(
                Arc::ptr_eq(&a.node, &b.node),
                "the second compile reuses the first"
            ),
            other => panic!("{other:?}"),
        }
        let bad = "managedCluster.metadata.labels['env'].find('(') == ''";
        assert_eq!(Program::compile(bad).err(), Program::compile(bad).err());
        for i in 0..CACHE_ENTRIES + 10 {
            Program::compile(&format!("{i} == {i}")).expect("compiles");
            let len = PROGRAMS.lock().unwrap_or_else(|e| e.into_inner()).len();
            assert!(len <= CACHE_ENTRIES, "{len} cached programs");
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
