//! Evaluation of a checked expression. Errors are values in CEL: `&&`, `||` and the
//! comprehension macros absorb them when the other operands decide the result, everything else
//! propagates them. Every step is charged to a cost budget shared by a cluster's expressions.
//!
//! Over 800 lines on purpose: one `match` over the node kinds, each arm beside the cost it charges;
//! split, an arm and its charge would be read in different files.

use super::library::regex::{find_all_with, find_with};
use super::library::{self, optional::some, standard};
use super::node::{ItemField, ItemPredicate, Macro, Node, RegexOp};
use super::syntax::BinaryOp;
use super::value::{EvalResult, Key, Value, key_value, lookup_key, no_overload};
use std::borrow::Cow;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::{Arc, LazyLock};

/// The error once the cost budget is spent (cel-go's text); it ends the evaluation.
pub const COST_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

/// Takes `units` from `budget`; false, leaving it at 0, when they are more than it holds. The tree
/// walk and the bound plan both spend through this, so they run out at the same step.
#[inline]
pub(super) fn spend(budget: &Cell<u64>, units: usize) -> bool {
    let units = u64::try_from(units).unwrap_or(u64::MAX);
    match budget.get().checked_sub(units) {
        Some(left) => {
            budget.set(left);
            true
        }
        None => {
            budget.set(0);
            false
        }
    }
}

/// What the evaluator needs from its environment.
pub trait Environment {
    /// The value of `managedCluster`.
    fn root(&self) -> Value;
    /// `managedCluster` followed by `path` (see [`Node::RootPath`]), when the environment can
    /// answer it directly; `None` to have it walked from [`Environment::root`]. A shortcut must
    /// give exactly what the walk would.
    fn root_path(&self, path: &[(Key, bool)]) -> Option<EvalResult> {
        self.root_path_str(path).map(|r| r.map(Value::str))
    }
    /// [`Environment::root_path`] for a path that leads to a string the environment holds,
    /// borrowed, so that comparing or matching it allocates nothing. `None` when it cannot say.
    fn root_path_str(&self, _path: &[(Key, bool)]) -> Option<Result<&str, String>> {
        None
    }
    /// OCM's `target.scores(name)`.
    fn scores(&self, target: &Value, resource: &str) -> EvalResult;
    /// OCM's `managedCluster.scores(name)`, without building the cluster value.
    fn root_scores(&self, resource: &str) -> EvalResult {
        self.scores(&self.root(), resource)
    }
    /// The items of `managedCluster.scores(name)` borrowed, so that a comprehension over them
    /// builds no map per item; each item stands for [`score_item_value`]. `None` when the
    /// environment cannot lend them (then [`Environment::root_scores`] is used).
    fn root_score_items(&self, _resource: &str) -> Option<Result<ScoreItems<'_>, String>> {
        None
    }
}

/// The items of one AddOnPlacementScore, borrowed: `(name id, value)` pairs whose names are
/// `names[id]`.
#[derive(Clone, Copy)]
pub struct ScoreItems<'e> {
    pub names: &'e [Arc<str>],
    pub items: &'e [(u32, i32)],
}

/// One borrowed score item.
#[derive(Clone, Copy)]
pub struct ScoreItem<'e> {
    pub name: &'e Arc<str>,
    pub value: i32,
}

impl<'e> ScoreItems<'e> {
    pub fn get(&self, i: usize) -> Option<ScoreItem<'e>> {
        let (name, value) = *self.items.get(i)?;
        let name = self.names.get(name as usize)?;
        Some(ScoreItem { name, value })
    }
}

/// The keys of a score item, allocated once.
pub(super) static NAME_KEY: LazyLock<Key> = LazyLock::new(|| Key::String(Arc::from("name")));
pub(super) static VALUE_KEY: LazyLock<Key> = LazyLock::new(|| Key::String(Arc::from("value")));

/// One item of `scores(...)` as OCM's library gives it to CEL: the map `{name, value}`.
pub fn score_item_value(item: ScoreItem<'_>) -> Value {
    let mut m = BTreeMap::new();
    m.insert(NAME_KEY.clone(), Value::String(item.name.clone()));
    m.insert(VALUE_KEY.clone(), Value::Int(i64::from(item.value)));
    Value::Map(Arc::new(m))
}

/// A bound comprehension variable. An item of `managedCluster.scores(...)` stays borrowed from
/// the environment until something needs it as a whole map.
enum Bound<'e> {
    Value(Value),
    ScoreItem(ScoreItem<'e>),
}

impl Bound<'_> {
    fn to_value(&self) -> Value {
        match self {
            Bound::Value(v) => v.clone(),
            Bound::ScoreItem(item) => score_item_value(*item),
        }
    }
}

/// What a comprehension ranges over.
enum Range<'e, 'v> {
    Values(&'v [Value]),
    ScoreItems(ScoreItems<'e>),
}

impl<'e> Range<'e, '_> {
    fn len(&self) -> usize {
        match self {
            Range::Values(v) => v.len(),
            Range::ScoreItems(s) => s.items.len(),
        }
    }

    fn bound(&self, i: usize) -> Option<Bound<'e>> {
        match self {
            Range::Values(v) => v.get(i).cloned().map(Bound::Value),
            Range::ScoreItems(s) => s.get(i).map(Bound::ScoreItem),
        }
    }
}

/// An evaluated operand: a string borrowed from the environment or the plan, a constant of the
/// plan, or a computed value. Comparing borrowed strings allocates nothing.
enum Operand<'a> {
    Str(&'a str),
    Const(&'a Value),
    Value(Value),
}

impl Operand<'_> {
    fn as_str(&self) -> Option<&str> {
        match self {
            Operand::Str(s) => Some(s),
            Operand::Const(Value::String(s)) | Operand::Value(Value::String(s)) => Some(s),
            _ => None,
        }
    }

    fn as_int(&self) -> Option<i64> {
        match self {
            Operand::Const(Value::Int(i)) | Operand::Value(Value::Int(i)) => Some(*i),
            _ => None,
        }
    }

    fn to_value(&self) -> Cow<'_, Value> {
        match self {
            Operand::Str(s) => Cow::Owned(Value::str(s)),
            Operand::Const(v) => Cow::Borrowed(v),
            Operand::Value(v) => Cow::Borrowed(v),
        }
    }

    fn cost_size(&self) -> usize {
        match self {
            Operand::Str(s) => s.len(),
            Operand::Const(v) => v.cost_size(),
            Operand::Value(v) => v.cost_size(),
        }
    }
}

/// A comparison of two strings or two ints (their CEL order is their Rust order); `None` for
/// the other operators.
#[inline]
pub(super) fn ordered_binary<T: Ord + ?Sized>(op: BinaryOp, x: &T, y: &T) -> Option<bool> {
    use BinaryOp::*;
    Some(match op {
        Eq => x == y,
        Ne => x != y,
        Lt => x < y,
        Le => x <= y,
        Gt => x > y,
        Ge => x >= y,
        _ => return None,
    })
}

pub struct Evaluator<'e> {
    env: &'e dyn Environment,
    /// Comprehension variables by slot.
    locals: Vec<Bound<'e>>,
    /// Cost units left, shared by every expression evaluated for one cluster. Each evaluation
    /// step costs one unit, and building or scanning a string, list or map costs its size.
    budget: &'e Cell<u64>,
}

fn missing_key(key: &Key) -> String {
    match key {
        Key::String(s) => format!("no such key: {s}"),
        Key::Int(i) => format!("no such key: {i}"),
        Key::Uint(u) => format!("no such key: {u}"),
        Key::Bool(b) => format!("no such key: {b}"),
    }
}

/// `target.field`; with `optional`, a missing field is `optional.none()` and a present one is
/// wrapped. Selecting on an optional selects inside it.
fn select(target: &Value, field: &Key, optional: bool) -> EvalResult {
    match target {
        Value::Map(m) => match m.get(field) {
            Some(v) if optional => Ok(some(v.clone())),
            Some(v) => Ok(v.clone()),
            None if optional => Ok(Value::Optional(None)),
            None => Err(missing_key(field)),
        },
        Value::Optional(None) => Ok(Value::Optional(None)),
        Value::Optional(Some(inner)) => select(inner, field, true),
        other => Err(format!(
            "type '{}' does not support field selection",
            other.type_name()
        )),
    }
}

/// Combines the two sides of `&&` (decisive = false) or `||` (decisive = true) after the left
/// one did not decide: an error is absorbed only by a deciding right side.
fn combine_logical(left: EvalResult, right: EvalResult, decisive: bool) -> EvalResult {
    match (left, right) {
        (_, Ok(Value::Bool(b))) if b == decisive => Ok(Value::Bool(b)),
        (Ok(Value::Bool(_)), Ok(Value::Bool(b))) => Ok(Value::Bool(b)),
        (Err(e), _) | (_, Err(e)) => Err(e),
        (Ok(a), Ok(b)) => Err(no_overload(if decisive { "_||_" } else { "_&&_" }, &[&a, &b])),
    }
}

/// `item.field` on a score item, as [`select`] on its map would answer.
fn select_score_item(item: ScoreItem<'_>, field: &Key) -> EvalResult {
    if *field == *NAME_KEY {
        Ok(Value::String(item.name.clone()))
    } else if *field == *VALUE_KEY {
        Ok(Value::Int(i64::from(item.value)))
    } else {
        Err(missing_key(field))
    }
}

/// `target[index]` that is `optional.none()` where the plain index would fail for lack of an
/// element or key.
fn optional_index(target: &Value, index: &Value) -> EvalResult {
    match target {
        Value::Optional(None) => Ok(Value::Optional(None)),
        Value::Optional(Some(inner)) => optional_index(inner, index),
        Value::List(l) => {
            let i = match index {
                Value::Int(i) => usize::try_from(*i).ok(),
                Value::Uint(u) => usize::try_from(*u).ok(),
                Value::Double(d) if d.fract() == 0.0 && *d >= 0.0 => Some(*d as usize),
                other => return Err(no_overload("_[?_]", &[target, other])),
            };
            Ok(Value::Optional(i.and_then(|i| l.get(i)).cloned().map(Arc::new)))
        }
        Value::Map(m) => Ok(Value::Optional(lookup_key(m, index).cloned().map(Arc::new))),
        other => Err(no_overload("_[?_]", &[other, index])),
    }
}

impl<'e> Evaluator<'e> {
    pub fn new(env: &'e dyn Environment, budget: &'e Cell<u64>) -> Self {
        Self {
            env,
            locals: Vec::new(),
            budget,
        }
    }

    /// Spends `units` of the budget; once it is exhausted every further step fails too, so the
    /// error cannot be absorbed by `||`, `&&` or a macro into a result.
    #[inline]
    fn charge(&self, units: usize) -> Result<(), String> {
        if spend(self.budget, units) {
            Ok(())
        } else {
            Err(COST_LIMIT_EXCEEDED.into())
        }
    }

    /// What a comprehension gives once its range is walked: the quantifiers their verdict unless an
    /// error was kept, `map` and `filter` the list they built.
    fn macro_result(
        &self,
        kind: Macro,
        first_error: Option<String>,
        trues: usize,
        out: Vec<Value>,
    ) -> EvalResult {
        match kind {
            Macro::All => first_error.map_or(Ok(Value::Bool(true)), Err),
            Macro::Exists => first_error.map_or(Ok(Value::Bool(false)), Err),
            Macro::ExistsOne => first_error.map_or(Ok(Value::Bool(trues == 1)), Err),
            _ => {
                self.charge(out.len())?;
                Ok(Value::list(out))
            }
        }
    }

    pub fn eval(&mut self, n: &Node) -> EvalResult {
        self.charge(1)?;
        match n {
            Node::Const(v) => Ok(v.clone()),
            Node::Root => Ok(self.env.root()),
            Node::RootPath(path) => {
                self.charge(path.len())?;
                if let Some(result) = self.env.root_path(path) {
                    return result;
                }
                let mut v = self.env.root();
                for (key, is_index) in path {
                    v = if *is_index {
                        standard::index_value(&v, &key_value(key))?
                    } else {
                        select(&v, key, false)?
                    };
                }
                Ok(v)
            }
            Node::Local(slot) => self
                .locals
                .get(*slot)
                .map(Bound::to_value)
                .ok_or_else(|| "comprehension variable out of scope".to_string()),
            Node::Select {
                target,
                field,
                optional,
            } => {
                if !*optional && let Some(item) = self.score_item_local(target) {
                    self.charge(1)?;
                    return select_score_item(item, field);
                }
                let t = self.eval(target)?;
                select(&t, field, *optional)
            }
            // cel-go: a field test on a list fails, on any other non-map value is false.
            Node::Has { target, field } => match self.eval(target)? {
                Value::Map(m) => Ok(Value::Bool(m.contains_key(field))),
                Value::List(_) => Err("unsupported index type 'string' in list".into()),
                _ => Ok(Value::Bool(false)),
            },
            Node::Index {
                target,
                index,
                optional,
            } => {
                let t = self.eval(target)?;
                let i = self.eval(index)?;
                if *optional || matches!(t, Value::Optional(_)) {
                    optional_index(&t, &i)
                } else {
                    standard::index_value(&t, &i)
                }
            }
            Node::List(items) => {
                let mut values = Vec::with_capacity(items.len());
                for (item, optional) in items {
                    match (self.eval(item)?, optional) {
                        (Value::Optional(Some(v)), true) => values.push((*v).clone()),
                        (Value::Optional(None), true) => {}
                        (other, true) => {
                            return Err(format!(
                                "cannot initialize optional list element from non-optional value {}",
                                other.type_name()
                            ));
                        }
                        (v, false) => values.push(v),
                    }
                }
                self.charge(values.len())?;
                Ok(Value::list(values))
            }
            Node::Map(entries) => {
                let mut map = BTreeMap::new();
                for (k, v, optional) in entries {
                    let key = self.eval(k)?.as_key()?;
                    let value = match (self.eval(v)?, optional) {
                        (Value::Optional(Some(v)), true) => (*v).clone(),
                        (Value::Optional(None), true) => continue,
                        (other, true) => {
                            return Err(format!(
                                "cannot initialize optional entry from non-optional value {}",
                                other.type_name()
                            ));
                        }
                        (v, false) => v,
                    };
                    // A repeated key keeps its last value, as in cel-go.
                    map.insert(key, value);
                }
                self.charge(map.len())?;
                Ok(Value::Map(Arc::new(map)))
            }
            Node::Not(inner) => {
                let v = self.eval(inner)?;
                standard::not(std::slice::from_ref(&v))
            }
            Node::Neg(inner) => {
                let v = self.eval(inner)?;
                standard::neg(std::slice::from_ref(&v))
            }
            Node::And(l, r) => self.logical(l, r, false),
            Node::Or(l, r) => self.logical(l, r, true),
            Node::Cond(c, t, f) => match self.eval(c)? {
                Value::Bool(true) => self.eval(t),
                Value::Bool(false) => self.eval(f),
                other => Err(no_overload("_?_:_", &[&other])),
            },
            Node::Binary(op, l, r) => {
                let a = self.operand(l)?;
                let b = self.operand(r)?;
                self.charge(a.cost_size() + b.cost_size())?;
                if let (Some(x), Some(y)) = (a.as_int(), b.as_int())
                    && let Some(result) = ordered_binary(*op, &x, &y)
                {
                    return Ok(Value::Bool(result));
                }
                if let Some(x) = a.as_str() {
                    if let Some(y) = b.as_str()
                        && let Some(result) = ordered_binary(*op, x, y)
                    {
                        return Ok(Value::Bool(result));
                    }
                    // `s in [...]`: cel-go's equality of a string with anything else is false.
                    if let (BinaryOp::In, Operand::Const(Value::List(items))) = (op, &b) {
                        let found = items
                            .iter()
                            .any(|item| matches!(item, Value::String(y) if **y == *x));
                        return Ok(Value::Bool(found));
                    }
                }
                standard::binary(*op, &a.to_value(), &b.to_value())
            }
            Node::Call {
                name,
                overloads,
                args,
            } => {
                let values = args.iter().map(|a| self.eval(a)).collect::<Result<Vec<_>, _>>()?;
                self.charge(values.iter().map(Value::cost_size).sum::<usize>())?;
                let chosen = match overloads.as_slice() {
                    [only] => Some(*only),
                    several => several
                        .iter()
                        .copied()
                        .find(|o| o.params.iter().zip(&values).all(|(p, v)| library::fits(p, v))),
                };
                let result = match chosen {
                    Some(o) => (o.imp)(&values),
                    None => {
                        let refs: Vec<&Value> = values.iter().collect();
                        Err(no_overload(name, &refs))
                    }
                }?;
                self.charge(result.cost_size())?;
                Ok(result)
            }
            Node::OptOr {
                receiver,
                alternative,
                unwrap,
            } => match self.eval(receiver)? {
                Value::Optional(Some(v)) if *unwrap => Ok((*v).clone()),
                present @ Value::Optional(Some(_)) => Ok(present),
                Value::Optional(None) => {
                    let alt = self.eval(alternative)?;
                    if *unwrap || matches!(alt, Value::Optional(_)) {
                        Ok(alt)
                    } else {
                        Err(no_overload("or", &[&Value::Optional(None), &alt]))
                    }
                }
                other => Err(no_overload(if *unwrap { "orValue" } else { "or" }, &[&other])),
            },
            Node::Regex {
                op,
                text,
                regex,
                limit,
                literals,
            } => {
                let t = self.operand(text)?;
                let n = match limit {
                    Some(l) => match self.eval(l)? {
                        Value::Int(n) => n,
                        other => return Err(no_overload("findAll", &[&t.to_value(), &other])),
                    },
                    None => -1,
                };
                let Some(s) = t.as_str() else {
                    return Err(no_overload("matches", &[&t.to_value()]));
                };
                self.charge(s.len())?;
                let re = regex.as_ref().map_err(Clone::clone)?;
                let result = match op {
                    RegexOp::Matches => Value::Bool(match literals {
                        Some(set) => set.iter().any(|l| **l == *s),
                        None => re.is_match(s),
                    }),
                    RegexOp::Find => find_with(re, s),
                    RegexOp::FindAll => find_all_with(re, s, n),
                };
                Ok(result)
            }
            Node::Scores { target, resource } => {
                // On `managedCluster` itself the environment needs only the cluster's identity.
                let t = match **target {
                    Node::Root => {
                        self.charge(1)?;
                        None
                    }
                    _ => Some(self.eval(target)?),
                };
                let r = self.eval(resource)?;
                let Value::String(name) = &r else {
                    return Err(no_overload("scores", &[&r]));
                };
                let scores = match &t {
                    None => self.env.root_scores(name)?,
                    Some(t) => self.env.scores(t, name)?,
                };
                self.charge(scores.cost_size())?;
                Ok(scores)
            }
            Node::Comprehension {
                kind,
                range,
                slot,
                body,
                item_body,
            } => {
                if let Some(items) = self.borrowed_score_items(*kind, range) {
                    let items = items?;
                    // As `range_comprehension` charges for the list.
                    self.charge(items.items.len())?;
                    if let Some(predicate) = item_body {
                        return self.item_comprehension(*kind, items, predicate);
                    }
                    return self.comprehension(*kind, Range::ScoreItems(items), *slot, body);
                }
                let range = self.eval(range)?;
                self.range_comprehension(*kind, &range, *slot, body)
            }
        }
    }

    /// Evaluates `n` as an operand, borrowing it where the plan or the environment holds it:
    /// constants, strings at a root path and a score item's `name`. Charged exactly as
    /// [`Evaluator::eval`] would charge it.
    fn operand<'a>(&mut self, n: &'a Node) -> Result<Operand<'a>, String>
    where
        'e: 'a,
    {
        match n {
            Node::Const(v) => {
                self.charge(1)?;
                Ok(Operand::Const(v))
            }
            Node::RootPath(path) => {
                let env: &'e dyn Environment = self.env;
                match env.root_path_str(path) {
                    Some(found) => {
                        self.charge(1 + path.len())?;
                        found.map(Operand::Str)
                    }
                    None => self.eval(n).map(Operand::Value),
                }
            }
            // `s.name` / `s.value` of a score item: the select and the variable.
            Node::Select {
                target,
                field,
                optional: false,
            } => match self.score_item_local(target) {
                Some(item) if *field == *NAME_KEY => {
                    self.charge(2)?;
                    Ok(Operand::Str(item.name))
                }
                Some(item) if *field == *VALUE_KEY => {
                    self.charge(2)?;
                    Ok(Operand::Value(Value::Int(i64::from(item.value))))
                }
                _ => self.eval(n).map(Operand::Value),
            },
            _ => self.eval(n).map(Operand::Value),
        }
    }

    /// The score item bound to `target` when it is a comprehension variable holding one.
    fn score_item_local(&self, target: &Node) -> Option<ScoreItem<'e>> {
        match target {
            Node::Local(slot) => match self.locals.get(*slot) {
                Some(Bound::ScoreItem(item)) => Some(*item),
                _ => None,
            },
            _ => None,
        }
    }

    /// For a comprehension over `managedCluster.scores('<constant>')`: the items borrowed from
    /// the environment, charged as evaluating the call would be; `None` when the range is
    /// anything else or the environment cannot lend them.
    fn borrowed_score_items(&mut self, kind: Macro, range: &Node) -> Option<Result<ScoreItems<'e>, String>> {
        if matches!(kind, Macro::OptMap | Macro::OptFlatMap) {
            return None;
        }
        let Node::Scores { target, resource } = range else {
            return None;
        };
        let (Node::Root, Node::Const(Value::String(name))) = (&**target, &**resource) else {
            return None;
        };
        let env: &'e dyn Environment = self.env;
        let found = env.root_score_items(name)?;
        // The call, its receiver and its argument, then the list's size (see `Node::Scores`).
        Some(self.charge(3).and_then(|()| {
            let items = found?;
            self.charge(items.items.len())?;
            Ok(items)
        }))
    }

    /// `&&` (decisive = false) and `||` (decisive = true), commutative over errors.
    fn logical(&mut self, l: &Node, r: &Node, decisive: bool) -> EvalResult {
        let left = self.eval(l);
        if let Ok(Value::Bool(b)) = left
            && b == decisive
        {
            return Ok(Value::Bool(b));
        }
        let right = self.eval(r);
        if let (Ok(Value::Bool(_)), Ok(Value::Bool(_))) = (&left, &right) {
            return right;
        }
        combine_logical(left, right, decisive)
    }

    /// An [`ItemPredicate`] on one score item, charged as the tree walk of the body it plans.
    /// Every planned node gives a bool, so only running out of budget is an error here.
    fn item_predicate(&mut self, p: &ItemPredicate, item: ScoreItem<'_>) -> Result<bool, String> {
        match p {
            ItemPredicate::And(l, r) | ItemPredicate::Or(l, r) => {
                let decisive = matches!(p, ItemPredicate::Or(..));
                self.charge(1)?;
                let left = self.item_predicate(l, item);
                if left == Ok(decisive) {
                    return left;
                }
                // As `combine_logical` for two bools or errors.
                match (left, self.item_predicate(r, item)) {
                    (_, Ok(b)) if b == decisive => Ok(b),
                    (Ok(_), Ok(b)) => Ok(b),
                    (Err(e), _) | (_, Err(e)) => Err(e),
                }
            }
            ItemPredicate::Compare { field, op, text, int } => {
                // The comparison, the select and its variable, the constant, then both sizes.
                let result = match field {
                    ItemField::Name => {
                        self.charge(4 + item.name.len() + text.len())?;
                        ordered_binary(*op, &**item.name, &**text)
                    }
                    ItemField::Value => {
                        self.charge(6)?;
                        ordered_binary(*op, &i64::from(item.value), int)
                    }
                };
                // `plan` admits only the comparison operators, for which there is a result.
                result.ok_or_else(|| "unplanned score item comparison".to_string())
            }
        }
    }

    /// [`Evaluator::comprehension`] over score items with a planned body.
    fn item_comprehension(&mut self, kind: Macro, items: ScoreItems<'e>, body: &ItemPredicate) -> EvalResult {
        let mut trues = 0usize;
        let mut first_error: Option<String> = None;
        let mut out = Vec::new();
        for i in 0..items.items.len() {
            let Some(item) = items.get(i) else {
                break;
            };
            let result = self.item_predicate(body, item).map(Value::Bool);
            match (kind, result) {
                (Macro::Filter, result) => match result? {
                    Value::Bool(true) => out.push(score_item_value(item)),
                    Value::Bool(false) => {}
                    other => return Err(no_overload("filter", &[&other])),
                },
                (_, Ok(Value::Bool(b))) => {
                    trues += usize::from(b);
                    if kind == Macro::All && !b {
                        return Ok(Value::Bool(false));
                    }
                    if kind == Macro::Exists && b {
                        return Ok(Value::Bool(true));
                    }
                }
                (_, Ok(other)) => {
                    first_error.get_or_insert_with(|| no_overload(kind.name(), &[&other]));
                }
                (_, Err(e)) => {
                    if kind == Macro::ExistsOne || e == COST_LIMIT_EXCEEDED {
                        return Err(e);
                    }
                    first_error.get_or_insert(e);
                }
            }
        }
        self.macro_result(kind, first_error, trues, out)
    }

    /// Evaluates `body` with the variable in `slot` bound to `item`.
    fn with_local(&mut self, slot: usize, item: Bound<'e>, body: &Node) -> EvalResult {
        self.locals.truncate(slot);
        self.locals.push(item);
        let result = self.eval(body);
        self.locals.truncate(slot);
        result
    }

    fn optional_macro(&mut self, kind: Macro, range: &Value, slot: usize, body: &Node) -> EvalResult {
        let inner = match range {
            Value::Optional(None) => return Ok(Value::Optional(None)),
            Value::Optional(Some(v)) => (**v).clone(),
            other => return Err(no_overload(kind.name(), &[other])),
        };
        let result = self.with_local(slot, Bound::Value(inner), body)?;
        match (kind, result) {
            (Macro::OptMap, v) => Ok(some(v)),
            (_, v @ Value::Optional(_)) => Ok(v),
            (_, other) => Err(no_overload("optFlatMap", &[&other])),
        }
    }

    fn range_comprehension(&mut self, kind: Macro, range: &Value, slot: usize, body: &[Node]) -> EvalResult {
        if matches!(kind, Macro::OptMap | Macro::OptFlatMap) {
            return self.optional_macro(kind, range, slot, &body[0]);
        }
        let keys: Vec<Value>;
        let items: &[Value] = match range {
            Value::List(l) => l,
            Value::Map(m) => {
                keys = m.keys().map(key_value).collect();
                &keys
            }
            other => return Err(no_overload(kind.name(), &[other])),
        };
        self.charge(items.len())?;
        self.comprehension(kind, Range::Values(items), slot, body)
    }

    /// `all`, `exists`, `exists_one`, `filter` and `map` over the items of `range` (already
    /// charged for).
    fn comprehension(&mut self, kind: Macro, range: Range<'e, '_>, slot: usize, body: &[Node]) -> EvalResult {
        let mut trues = 0usize;
        let mut first_error: Option<String> = None;
        let mut out = Vec::new();
        for i in 0..range.len() {
            let Some(item) = range.bound(i) else {
                break;
            };
            let result = match (kind, body) {
                (Macro::Map, [filter, transform]) => match self.with_local(slot, item, filter) {
                    Ok(Value::Bool(true)) => match range.bound(i) {
                        Some(item) => self.with_local(slot, item, transform).map(Some),
                        None => Ok(None),
                    },
                    Ok(Value::Bool(false)) => Ok(None),
                    Ok(other) => Err(no_overload("map", &[&other])),
                    Err(e) => Err(e),
                },
                (_, [single, ..]) => self.with_local(slot, item, single).map(Some),
                (_, []) => Err("macro without a body".to_string()),
            };
            match kind {
                Macro::All | Macro::Exists | Macro::ExistsOne => match result {
                    Ok(Some(Value::Bool(b))) => {
                        if b {
                            trues += 1;
                        }
                        if kind == Macro::All && !b {
                            return Ok(Value::Bool(false));
                        }
                        if kind == Macro::Exists && b {
                            return Ok(Value::Bool(true));
                        }
                    }
                    Ok(Some(other)) => {
                        first_error.get_or_insert_with(|| no_overload(kind.name(), &[&other]));
                    }
                    Ok(None) => {}
                    Err(e) => {
                        if kind == Macro::ExistsOne || e == COST_LIMIT_EXCEEDED {
                            return Err(e);
                        }
                        first_error.get_or_insert(e);
                    }
                },
                Macro::Filter => match result? {
                    Some(Value::Bool(true)) => out.extend(range.bound(i).map(|item| item.to_value())),
                    Some(Value::Bool(false)) | None => {}
                    Some(other) => return Err(no_overload("filter", &[&other])),
                },
                _ => {
                    if let Some(v) = result? {
                        out.push(v);
                    }
                }
            }
        }
        self.macro_result(kind, first_error, trues, out)
    }
}
