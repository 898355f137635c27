//! Evaluation of a checked expression. Errors are values in CEL: `&&`, `||` and the
//! comprehension macros absorb them when the other operands decide the result, everything else
//! propagates them. Every step is charged to a cost budget shared by a cluster's expressions.

use super::library::regex::{find_all_with, find_with};
use super::library::{self, Overload, optional::some, standard};
use super::syntax::BinaryOp;
use super::value::{EvalResult, Key, Value, key_value, lookup_key, no_overload};
use regex::Regex;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The error once the cost budget is spent (cel-go's text); it ends the evaluation.
pub const COST_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Macro {
    All,
    Exists,
    ExistsOne,
    Filter,
    Map,
    OptMap,
    OptFlatMap,
}

impl Macro {
    /// The receiver-style macros, by name and argument count.
    pub fn of(name: &str, argc: usize) -> Option<Macro> {
        match (name, argc) {
            ("all", 2) => Some(Macro::All),
            ("exists", 2) => Some(Macro::Exists),
            ("exists_one", 2) => Some(Macro::ExistsOne),
            ("filter", 2) => Some(Macro::Filter),
            ("map", 2 | 3) => Some(Macro::Map),
            ("optMap", 2) => Some(Macro::OptMap),
            ("optFlatMap", 2) => Some(Macro::OptFlatMap),
            _ => None,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Macro::All => "all",
            Macro::Exists => "exists",
            Macro::ExistsOne => "exists_one",
            Macro::Filter => "filter",
            Macro::Map => "map",
            Macro::OptMap => "optMap",
            Macro::OptFlatMap => "optFlatMap",
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub enum RegexOp {
    Matches,
    Find,
    FindAll,
}

/// A checked expression, with every name and call resolved.
#[derive(Clone, Debug)]
pub enum Node {
    Const(Value),
    /// `managedCluster`.
    Root,
    /// `managedCluster.a.b['c']...`: field selections and constant-key indexes from the root,
    /// each step marked `true` when it is an index. The environment may answer it without
    /// building the whole cluster value.
    RootPath(Vec<(Key, bool)>),
    /// A comprehension variable, by slot.
    Local(usize),
    Select {
        target: Box<Node>,
        field: Key,
        optional: bool,
    },
    Has {
        target: Box<Node>,
        field: Key,
    },
    Index {
        target: Box<Node>,
        index: Box<Node>,
        optional: bool,
    },
    List(Vec<(Node, bool)>),
    Map(Vec<(Node, Node, bool)>),
    Not(Box<Node>),
    Neg(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Cond(Box<Node>, Box<Node>, Box<Node>),
    Binary(BinaryOp, Box<Node>, Box<Node>),
    /// A library function; the overloads are those the checker found applicable.
    Call {
        name: Arc<str>,
        overloads: Vec<&'static Overload>,
        args: Vec<Node>,
    },
    /// `or` / `orValue` on an optional: the alternative is evaluated only when needed.
    OptOr {
        receiver: Box<Node>,
        alternative: Box<Node>,
        unwrap: bool,
    },
    /// A regex function with a constant pattern, compiled once.
    Regex {
        op: RegexOp,
        text: Box<Node>,
        regex: Result<Arc<Regex>, String>,
        limit: Option<Box<Node>>,
    },
    /// OCM's `managedCluster.scores(name)`.
    Scores {
        target: Box<Node>,
        resource: Box<Node>,
    },
    Comprehension {
        kind: Macro,
        range: Box<Node>,
        slot: usize,
        body: Vec<Node>,
    },
}

/// What the evaluator needs from its environment.
pub trait Environment {
    /// The value of `managedCluster`.
    fn root(&self) -> Value;
    /// `managedCluster` followed by `path` (see [`Node::RootPath`]), when the environment can
    /// answer it directly; `None` to have it walked from [`Environment::root`]. A shortcut must
    /// give exactly what the walk would.
    fn root_path(&self, _path: &[(Key, bool)]) -> Option<EvalResult> {
        None
    }
    /// OCM's `target.scores(name)`.
    fn scores(&self, target: &Value, resource: &str) -> EvalResult;
    /// OCM's `managedCluster.scores(name)`, without building the cluster value.
    fn root_scores(&self, resource: &str) -> EvalResult {
        self.scores(&self.root(), resource)
    }
}

pub struct Evaluator<'e> {
    env: &'e dyn Environment,
    /// Comprehension variables by slot.
    locals: Vec<Value>,
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
    fn charge(&self, units: usize) -> Result<(), String> {
        let units = u64::try_from(units).unwrap_or(u64::MAX);
        match self.budget.get().checked_sub(units) {
            Some(left) => {
                self.budget.set(left);
                Ok(())
            }
            None => {
                self.budget.set(0);
                Err(COST_LIMIT_EXCEEDED.into())
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
                .cloned()
                .ok_or_else(|| "comprehension variable out of scope".to_string()),
            Node::Select {
                target,
                field,
                optional,
            } => {
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
                let a = self.eval(l)?;
                let b = self.eval(r)?;
                self.charge(a.cost_size() + b.cost_size())?;
                standard::binary(*op, &a, &b)
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
            } => {
                let t = self.eval(text)?;
                let n = match limit {
                    Some(l) => match self.eval(l)? {
                        Value::Int(n) => n,
                        other => return Err(no_overload("findAll", &[&t, &other])),
                    },
                    None => -1,
                };
                let Value::String(s) = &t else {
                    return Err(no_overload("matches", &[&t]));
                };
                self.charge(s.len())?;
                let re = regex.as_ref().map_err(Clone::clone)?;
                let result = match op {
                    RegexOp::Matches => Value::Bool(re.is_match(s)),
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
            } => {
                let range = self.eval(range)?;
                self.comprehension(*kind, &range, *slot, body)
            }
        }
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
        match (left, right) {
            (_, Ok(Value::Bool(b))) if b == decisive => Ok(Value::Bool(b)),
            (Ok(Value::Bool(_)), Ok(Value::Bool(b))) => Ok(Value::Bool(b)),
            (Err(e), _) | (_, Err(e)) => Err(e),
            (Ok(a), Ok(b)) => Err(no_overload(if decisive { "_||_" } else { "_&&_" }, &[&a, &b])),
        }
    }

    /// Evaluates `body` with the variable in `slot` bound to `item`.
    fn with_local(&mut self, slot: usize, item: Value, body: &Node) -> EvalResult {
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
        let result = self.with_local(slot, inner, body)?;
        match (kind, result) {
            (Macro::OptMap, v) => Ok(some(v)),
            (_, v @ Value::Optional(_)) => Ok(v),
            (_, other) => Err(no_overload("optFlatMap", &[&other])),
        }
    }

    fn comprehension(&mut self, kind: Macro, range: &Value, slot: usize, body: &[Node]) -> EvalResult {
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
        let mut trues = 0usize;
        let mut first_error: Option<String> = None;
        let mut out = Vec::new();
        for item in items {
            let result = match (kind, body) {
                (Macro::Map, [filter, transform]) => match self.with_local(slot, item.clone(), filter) {
                    Ok(Value::Bool(true)) => self.with_local(slot, item.clone(), transform).map(Some),
                    Ok(Value::Bool(false)) => Ok(None),
                    Ok(other) => Err(no_overload("map", &[&other])),
                    Err(e) => Err(e),
                },
                (_, [single, ..]) => self.with_local(slot, item.clone(), single).map(Some),
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
                    Some(Value::Bool(true)) => out.push(item.clone()),
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
}
