//! CEL values and evaluation. Errors are values in CEL: `&&`, `||` and the comprehension macros
//! absorb them when the other operands decide the result, everything else propagates them.

use super::syntax::{BinaryOp, Expr, Literal};
use std::cell::Cell;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::rc::Rc;

/// The error once the cost budget is spent (cel-go's text); it ends the evaluation.
pub const COST_LIMIT_EXCEEDED: &str = "operation cancelled: actual cost limit exceeded";

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    Bool(bool),
    Int(i64),
    Uint(u64),
    String(Rc<str>),
}

#[derive(Clone, Debug)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(Rc<str>),
    List(Rc<Vec<Value>>),
    Map(Rc<BTreeMap<Key, Value>>),
}

pub type EvalResult = Result<Value, String>;

impl Value {
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null_type",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Uint(_) => "uint",
            Value::Double(_) => "double",
            Value::String(_) => "string",
            Value::List(_) => "list",
            Value::Map(_) => "map",
        }
    }

    pub fn str(s: &str) -> Value {
        Value::String(Rc::from(s))
    }

    pub fn from_json(v: &serde_json::Value) -> Value {
        match v {
            serde_json::Value::Null => Value::Null,
            serde_json::Value::Bool(b) => Value::Bool(*b),
            serde_json::Value::Number(n) => {
                if let Some(i) = n.as_i64() {
                    Value::Int(i)
                } else if let Some(u) = n.as_u64() {
                    Value::Uint(u)
                } else {
                    Value::Double(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            serde_json::Value::String(s) => Value::str(s),
            serde_json::Value::Array(a) => Value::List(Rc::new(a.iter().map(Value::from_json).collect())),
            serde_json::Value::Object(o) => Value::Map(Rc::new(
                o.iter()
                    .map(|(k, v)| (Key::String(Rc::from(k.as_str())), Value::from_json(v)))
                    .collect(),
            )),
        }
    }

    fn as_key(&self) -> Result<Key, String> {
        match self {
            Value::Bool(b) => Ok(Key::Bool(*b)),
            Value::Int(i) => Ok(Key::Int(*i)),
            Value::Uint(u) => Ok(Key::Uint(*u)),
            Value::String(s) => Ok(Key::String(s.clone())),
            other => Err(format!("unsupported key type: {}", other.type_name())),
        }
    }
}

fn key_value(k: &Key) -> Value {
    match k {
        Key::Bool(b) => Value::Bool(*b),
        Key::Int(i) => Value::Int(*i),
        Key::Uint(u) => Value::Uint(*u),
        Key::String(s) => Value::String(s.clone()),
    }
}

fn no_overload(f: &str, args: &[&Value]) -> String {
    let types: Vec<&str> = args.iter().map(|a| a.type_name()).collect();
    format!("no such overload: {f}({})", types.join(", "))
}

/// Heterogeneous equality: numbers compare by value across int, uint and double; values of
/// different kinds are simply unequal.
pub fn equals(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::String(x), Value::String(y)) => x == y,
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| equals(p, q))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| lookup_key(y, &key_value(k)).is_some_and(|w| equals(v, w)))
        }
        _ => numeric_cmp(a, b) == Some(Ordering::Equal),
    }
}

fn numeric_cmp(a: &Value, b: &Value) -> Option<Ordering> {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::Uint(x), Value::Uint(y)) => Some(x.cmp(y)),
        (Value::Double(x), Value::Double(y)) => x.partial_cmp(y),
        (Value::Int(x), Value::Uint(y)) => Some(if *x < 0 {
            Ordering::Less
        } else {
            (*x as u64).cmp(y)
        }),
        (Value::Uint(_), Value::Int(_)) => numeric_cmp(b, a).map(Ordering::reverse),
        (Value::Int(x), Value::Double(y)) => (*x as f64).partial_cmp(y),
        (Value::Double(x), Value::Int(y)) => x.partial_cmp(&(*y as f64)),
        (Value::Uint(x), Value::Double(y)) => (*x as f64).partial_cmp(y),
        (Value::Double(x), Value::Uint(y)) => x.partial_cmp(&(*y as f64)),
        _ => None,
    }
}

fn compare(a: &Value, b: &Value) -> Result<Ordering, String> {
    match (a, b) {
        (Value::String(x), Value::String(y)) => Ok(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Ok(x.cmp(y)),
        _ => match numeric_cmp(a, b) {
            Some(o) => Ok(o),
            None if matches!(a, Value::Double(_)) || matches!(b, Value::Double(_)) => {
                Err("NaN values cannot be ordered".into())
            }
            None => Err(no_overload("_<_", &[a, b])),
        },
    }
}

/// Map lookup, with numeric keys matching across int and uint like cel-go.
fn lookup_key<'m>(map: &'m BTreeMap<Key, Value>, key: &Value) -> Option<&'m Value> {
    match key {
        Value::Int(i) => map
            .get(&Key::Int(*i))
            .or_else(|| u64::try_from(*i).ok().and_then(|u| map.get(&Key::Uint(u)))),
        Value::Uint(u) => map
            .get(&Key::Uint(*u))
            .or_else(|| i64::try_from(*u).ok().and_then(|i| map.get(&Key::Int(i)))),
        Value::Double(d) if d.fract() == 0.0 => {
            let as_int = (*d >= i64::MIN as f64 && *d < i64::MAX as f64).then_some(Value::Int(*d as i64));
            as_int.and_then(|k| lookup_key(map, &k))
        }
        other => other.as_key().ok().and_then(|k| map.get(&k)),
    }
}

/// What the evaluator needs from its environment.
pub trait Environment {
    /// A declared variable (only `managedCluster` here).
    fn variable(&self, name: &str) -> Option<Value>;
    /// OCM's `managedCluster.scores(name)`.
    fn scores(&self, target: &Value, resource: &str) -> EvalResult;
}

pub struct Evaluator<'e> {
    env: &'e dyn Environment,
    /// Comprehension variables, innermost last.
    locals: Vec<(String, Value)>,
    /// Cost units left, shared by every expression evaluated for one cluster. Each evaluation
    /// step costs one unit, and building or scanning a string, list or map costs its size.
    budget: &'e Cell<u64>,
}

/// The size of a value, for the cost of scanning or copying it.
fn size_of_value(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len(),
        Value::List(l) => l.len(),
        Value::Map(m) => m.len(),
        _ => 1,
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

    pub fn eval(&mut self, e: &Expr) -> EvalResult {
        self.charge(1)?;
        match e {
            Expr::Literal(l) => Ok(match l {
                Literal::Null => Value::Null,
                Literal::Bool(b) => Value::Bool(*b),
                Literal::Int(i) => Value::Int(*i),
                Literal::Uint(u) => Value::Uint(*u),
                Literal::Double(d) => Value::Double(*d),
                Literal::String(s) => Value::str(s),
            }),
            Expr::Ident(name) => {
                if let Some((_, v)) = self.locals.iter().rev().find(|(n, _)| n == name) {
                    return Ok(v.clone());
                }
                self.env
                    .variable(name)
                    .ok_or_else(|| format!("undeclared reference to '{name}'"))
            }
            Expr::Select(target, field) => {
                let t = self.eval(target)?;
                select(&t, field)
            }
            Expr::Index(target, index) => {
                let t = self.eval(target)?;
                let i = self.eval(index)?;
                index_value(&t, &i)
            }
            Expr::List(items) => {
                let values = items
                    .iter()
                    .map(|i| self.eval(i))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Value::List(Rc::new(values)))
            }
            Expr::Map(entries) => {
                let mut map = BTreeMap::new();
                for (k, v) in entries {
                    let key = self.eval(k)?.as_key()?;
                    let value = self.eval(v)?;
                    if map.insert(key.clone(), value).is_some() {
                        return Err(format!("Failed with repeated key: {key:?}"));
                    }
                }
                Ok(Value::Map(Rc::new(map)))
            }
            Expr::Not(inner) => match self.eval(inner)? {
                Value::Bool(b) => Ok(Value::Bool(!b)),
                other => Err(no_overload("!_", &[&other])),
            },
            Expr::Neg(inner) => match self.eval(inner)? {
                Value::Int(i) => i
                    .checked_neg()
                    .map(Value::Int)
                    .ok_or_else(|| "integer overflow".to_string()),
                Value::Double(d) => Ok(Value::Double(-d)),
                other => Err(no_overload("-_", &[&other])),
            },
            Expr::Conditional(c, t, f) => match self.eval(c)? {
                Value::Bool(true) => self.eval(t),
                Value::Bool(false) => self.eval(f),
                other => Err(no_overload("_?_:_", &[&other])),
            },
            Expr::Binary(BinaryOp::And, l, r) => self.logical(l, r, false),
            Expr::Binary(BinaryOp::Or, l, r) => self.logical(l, r, true),
            Expr::Binary(op, l, r) => {
                let a = self.eval(l)?;
                let b = self.eval(r)?;
                self.charge(size_of_value(&a) + size_of_value(&b))?;
                binary(*op, &a, &b)
            }
            Expr::Call(name, args) => self.call(name, args),
            Expr::Method(target, name, args) => self.method(target, name, args),
        }
    }

    /// `&&` (decisive = false) and `||` (decisive = true), commutative over errors.
    fn logical(&mut self, l: &Expr, r: &Expr, decisive: bool) -> EvalResult {
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

    fn call(&mut self, name: &str, args: &[Expr]) -> EvalResult {
        if name == "has" {
            let [Expr::Select(target, field)] = args else {
                return Err("invalid argument to has() macro".into());
            };
            return match self.eval(target)? {
                Value::Map(m) => Ok(Value::Bool(
                    m.contains_key(&Key::String(Rc::from(field.as_str()))),
                )),
                other => Err(no_overload("has", &[&other])),
            };
        }
        let values = args.iter().map(|a| self.eval(a)).collect::<Result<Vec<_>, _>>()?;
        match (name, values.as_slice()) {
            ("size", [v]) => size(v),
            ("int", [v]) => to_int(v),
            ("uint", [v]) => to_uint(v),
            ("double", [v]) => to_double(v),
            ("string", [v]) => to_string(v),
            ("bool", [v]) => to_bool(v),
            ("dyn", [v]) => Ok(v.clone()),
            _ => {
                let refs: Vec<&Value> = values.iter().collect();
                Err(no_overload(name, &refs))
            }
        }
    }

    fn method(&mut self, target: &Expr, name: &str, args: &[Expr]) -> EvalResult {
        if let Some(kind) = Macro::of(name, args.len()) {
            let Expr::Ident(var) = &args[0] else {
                return Err(format!("{name}() variable name must be a simple identifier"));
            };
            let range = self.eval(target)?;
            return self.comprehension(kind, &range, var, &args[1..]);
        }
        let receiver = self.eval(target)?;
        let values = args.iter().map(|a| self.eval(a)).collect::<Result<Vec<_>, _>>()?;
        self.charge(size_of_value(&receiver) + values.iter().map(size_of_value).sum::<usize>())?;
        match (name, &receiver, values.as_slice()) {
            ("scores", _, [Value::String(resource)]) => {
                let scores = self.env.scores(&receiver, resource)?;
                self.charge(size_of_value(&scores))?;
                Ok(scores)
            }
            ("size", v, []) => size(v),
            ("contains", Value::String(s), [Value::String(x)]) => Ok(Value::Bool(s.contains(&**x))),
            ("startsWith", Value::String(s), [Value::String(x)]) => Ok(Value::Bool(s.starts_with(&**x))),
            ("endsWith", Value::String(s), [Value::String(x)]) => Ok(Value::Bool(s.ends_with(&**x))),
            ("lowerAscii", Value::String(s), []) => Ok(Value::str(&s.to_ascii_lowercase())),
            ("upperAscii", Value::String(s), []) => Ok(Value::str(&s.to_ascii_uppercase())),
            ("trim", Value::String(s), []) => Ok(Value::str(s.trim())),
            ("split", Value::String(s), [Value::String(sep)]) => {
                Ok(Value::List(Rc::new(s.split(&**sep).map(Value::str).collect())))
            }
            ("indexOf", Value::String(s), [Value::String(x)]) => Ok(Value::Int(
                s.find(&**x).map_or(-1, |b| s[..b].chars().count() as i64),
            )),
            ("join", Value::List(items), rest) => {
                let sep = match rest {
                    [] => "",
                    [Value::String(sep)] => sep,
                    _ => return Err(no_overload("join", &[&receiver])),
                };
                let parts = items
                    .iter()
                    .map(|v| match v {
                        Value::String(s) => Ok(s.to_string()),
                        other => Err(no_overload("join", &[other])),
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(Value::str(&parts.join(sep)))
            }
            _ => {
                let mut refs: Vec<&Value> = vec![&receiver];
                refs.extend(values.iter());
                Err(no_overload(name, &refs))
            }
        }
    }

    fn comprehension(&mut self, kind: Macro, range: &Value, var: &str, rest: &[Expr]) -> EvalResult {
        let items: Vec<Value> = match range {
            Value::List(l) => l.iter().cloned().collect(),
            Value::Map(m) => m.keys().map(key_value).collect(),
            other => return Err(no_overload("comprehension", &[other])),
        };
        self.charge(items.len())?;
        let mut trues = 0usize;
        let mut first_error: Option<String> = None;
        let mut out = Vec::new();
        for item in items {
            self.locals.push((var.to_string(), item.clone()));
            let result = match kind {
                Macro::Map if rest.len() == 2 => match self.eval(&rest[0]) {
                    Ok(Value::Bool(true)) => self.eval(&rest[1]).map(Some),
                    Ok(Value::Bool(false)) => Ok(None),
                    Ok(other) => Err(no_overload("map", &[&other])),
                    Err(e) => Err(e),
                },
                Macro::Map => self.eval(&rest[0]).map(Some),
                _ => self.eval(&rest[0]).map(Some),
            };
            self.locals.pop();
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
                        if kind == Macro::ExistsOne {
                            return Err(e);
                        }
                        first_error.get_or_insert(e);
                    }
                },
                Macro::Filter => match result? {
                    Some(Value::Bool(true)) => out.push(item),
                    Some(Value::Bool(false)) | None => {}
                    Some(other) => return Err(no_overload("filter", &[&other])),
                },
                Macro::Map => {
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
            Macro::Filter | Macro::Map => Ok(Value::List(Rc::new(out))),
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Macro {
    All,
    Exists,
    ExistsOne,
    Filter,
    Map,
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
        }
    }
}

fn select(target: &Value, field: &str) -> EvalResult {
    match target {
        Value::Map(m) => m
            .get(&Key::String(Rc::from(field)))
            .cloned()
            .ok_or_else(|| format!("no such key: {field}")),
        other => Err(format!(
            "type '{}' does not support field selection",
            other.type_name()
        )),
    }
}

fn index_value(target: &Value, index: &Value) -> EvalResult {
    match (target, index) {
        (Value::List(l), Value::Int(_) | Value::Uint(_) | Value::Double(_)) => {
            let i = match index {
                Value::Int(i) => Some(*i),
                Value::Uint(u) => i64::try_from(*u).ok(),
                Value::Double(d) if d.fract() == 0.0 => Some(*d as i64),
                _ => None,
            };
            i.and_then(|i| usize::try_from(i).ok())
                .and_then(|i| l.get(i))
                .cloned()
                .ok_or_else(|| "index out of bounds".to_string())
        }
        (Value::Map(m), key) => lookup_key(m, key).cloned().ok_or_else(|| match key {
            Value::String(s) => format!("no such key: {s}"),
            other => format!("no such key: {other:?}"),
        }),
        _ => Err(no_overload("_[_]", &[target, index])),
    }
}

fn binary(op: BinaryOp, a: &Value, b: &Value) -> EvalResult {
    use BinaryOp::*;
    match op {
        Eq => Ok(Value::Bool(equals(a, b))),
        Ne => Ok(Value::Bool(!equals(a, b))),
        Lt => compare(a, b).map(|o| Value::Bool(o == Ordering::Less)),
        Le => compare(a, b).map(|o| Value::Bool(o != Ordering::Greater)),
        Gt => compare(a, b).map(|o| Value::Bool(o == Ordering::Greater)),
        Ge => compare(a, b).map(|o| Value::Bool(o != Ordering::Less)),
        In => match b {
            Value::List(l) => Ok(Value::Bool(l.iter().any(|x| equals(a, x)))),
            Value::Map(m) => Ok(Value::Bool(lookup_key(m, a).is_some())),
            _ => Err(no_overload("@in", &[a, b])),
        },
        Add | Sub | Mul | Div | Rem => arithmetic(op, a, b),
        And | Or => Err(no_overload(&op.to_string(), &[a, b])),
    }
}

/// `+ - * / %` on two integers of one type, with CEL's overflow and division errors.
macro_rules! integer_arithmetic {
    ($op:expr, $x:expr, $y:expr, $variant:path) => {{
        let (op, x, y) = ($op, $x, $y);
        let result = match op {
            BinaryOp::Add => x.checked_add(y),
            BinaryOp::Sub => x.checked_sub(y),
            BinaryOp::Mul => x.checked_mul(y),
            BinaryOp::Div if y == 0 => return Err("division by zero".into()),
            BinaryOp::Rem if y == 0 => return Err("modulus by zero".into()),
            BinaryOp::Div => x.checked_div(y),
            _ => x.checked_rem(y),
        };
        result.map($variant).ok_or_else(|| "integer overflow".to_string())
    }};
}

fn arithmetic(op: BinaryOp, a: &Value, b: &Value) -> EvalResult {
    use BinaryOp::*;
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => integer_arithmetic!(op, *x, *y, Value::Int),
        (Value::Uint(x), Value::Uint(y)) => integer_arithmetic!(op, *x, *y, Value::Uint),
        (Value::Double(x), Value::Double(y)) => match op {
            Add => Ok(Value::Double(x + y)),
            Sub => Ok(Value::Double(x - y)),
            Mul => Ok(Value::Double(x * y)),
            Div => Ok(Value::Double(x / y)),
            _ => Err(no_overload("_%_", &[a, b])),
        },
        (Value::String(x), Value::String(y)) if op == Add => Ok(Value::String(Rc::from(format!("{x}{y}")))),
        (Value::List(x), Value::List(y)) if op == Add => {
            Ok(Value::List(Rc::new(x.iter().chain(y.iter()).cloned().collect())))
        }
        _ => Err(no_overload(&format!("_{op}_"), &[a, b])),
    }
}

fn size(v: &Value) -> EvalResult {
    match v {
        Value::String(s) => Ok(Value::Int(s.chars().count() as i64)),
        Value::List(l) => Ok(Value::Int(l.len() as i64)),
        Value::Map(m) => Ok(Value::Int(m.len() as i64)),
        other => Err(no_overload("size", &[other])),
    }
}

fn to_int(v: &Value) -> EvalResult {
    match v {
        Value::Int(i) => Ok(Value::Int(*i)),
        Value::Uint(u) => i64::try_from(*u)
            .map(Value::Int)
            .map_err(|_| "range error".into()),
        Value::Double(d) => {
            if d.is_finite() && *d > -9.223_372_036_854_776e18 && *d < 9.223_372_036_854_776e18 {
                Ok(Value::Int(d.trunc() as i64))
            } else {
                Err("range error".into())
            }
        }
        Value::String(s) => s.parse().map(Value::Int).map_err(|e| format!("{e}")),
        other => Err(no_overload("int", &[other])),
    }
}

fn to_uint(v: &Value) -> EvalResult {
    match v {
        Value::Uint(u) => Ok(Value::Uint(*u)),
        Value::Int(i) => u64::try_from(*i)
            .map(Value::Uint)
            .map_err(|_| "range error".into()),
        Value::Double(d) => {
            if d.is_finite() && *d >= 0.0 && *d < 1.844_674_407_370_955_2e19 {
                Ok(Value::Uint(d.trunc() as u64))
            } else {
                Err("range error".into())
            }
        }
        Value::String(s) => s.parse().map(Value::Uint).map_err(|e| format!("{e}")),
        other => Err(no_overload("uint", &[other])),
    }
}

fn to_double(v: &Value) -> EvalResult {
    match v {
        Value::Double(d) => Ok(Value::Double(*d)),
        Value::Int(i) => Ok(Value::Double(*i as f64)),
        Value::Uint(u) => Ok(Value::Double(*u as f64)),
        Value::String(s) => s.parse().map(Value::Double).map_err(|e| format!("{e}")),
        other => Err(no_overload("double", &[other])),
    }
}

fn to_string(v: &Value) -> EvalResult {
    match v {
        Value::String(s) => Ok(Value::String(s.clone())),
        Value::Int(i) => Ok(Value::str(&i.to_string())),
        Value::Uint(u) => Ok(Value::str(&u.to_string())),
        Value::Double(d) => Ok(Value::str(&d.to_string())),
        Value::Bool(b) => Ok(Value::str(if *b { "true" } else { "false" })),
        other => Err(no_overload("string", &[other])),
    }
}

fn to_bool(v: &Value) -> EvalResult {
    match v {
        Value::Bool(b) => Ok(Value::Bool(*b)),
        Value::String(s) => match &**s {
            "true" | "TRUE" | "True" | "t" | "1" => Ok(Value::Bool(true)),
            "false" | "FALSE" | "False" | "f" | "0" => Ok(Value::Bool(false)),
            _ => Err(format!("type conversion error from 'string' to 'bool': {s}")),
        },
        other => Err(no_overload("bool", &[other])),
    }
}
