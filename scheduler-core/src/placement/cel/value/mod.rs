//! CEL runtime values, cel-go's heterogeneous equality and its ordering rules.
//!
//! The submodules hold what timestamps, durations and the Kubernetes libraries' opaque values are
//! (parsing, order, printing); the function table one layer up gives them their CEL functions.

pub mod digits;
pub mod format;
pub mod net;
pub mod quantity;
pub mod semver;
pub mod time;
pub mod url;

use super::types::Opaque;
use format::NamedFormat;
use net::{Cidr, Ip};
use quantity::Quantity;
use semver::Semver;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::Arc;
use time::{Duration, Timestamp};
use url::Url;

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Key {
    Bool(bool),
    Int(i64),
    Uint(u64),
    String(Arc<str>),
}

/// A value of one of the Kubernetes libraries' opaque types.
#[derive(Clone, Debug)]
pub enum Object {
    Semver(Semver),
    Quantity(Quantity),
    Ip(Ip),
    Cidr(Cidr),
    Url(Url),
    Format(&'static NamedFormat),
}

impl Object {
    pub fn opaque(&self) -> Opaque {
        match self {
            Object::Semver(_) => Opaque::Semver,
            Object::Quantity(_) => Opaque::Quantity,
            Object::Ip(_) => Opaque::Ip,
            Object::Cidr(_) => Opaque::Cidr,
            Object::Url(_) => Opaque::Url,
            Object::Format(_) => Opaque::Format,
        }
    }
}

#[derive(Clone, Debug)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Uint(u64),
    Double(f64),
    String(Arc<str>),
    Bytes(Arc<[u8]>),
    List(Arc<Vec<Value>>),
    Map(Arc<BTreeMap<Key, Value>>),
    Timestamp(Timestamp),
    Duration(Duration),
    /// `optional_type`: `None` is `optional.none()`.
    Optional(Option<Arc<Value>>),
    /// A type value, by its CEL name (`int`, `map`, `kubernetes.Semver`, ...).
    Type(Arc<str>),
    Object(Arc<Object>),
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
            Value::Bytes(_) => "bytes",
            Value::List(_) => "list",
            Value::Map(_) => "map",
            Value::Timestamp(_) => "google.protobuf.Timestamp",
            Value::Duration(_) => "google.protobuf.Duration",
            Value::Optional(_) => "optional_type",
            Value::Type(_) => "type",
            Value::Object(o) => o.opaque().name(),
        }
    }

    pub fn str(s: &str) -> Value {
        Value::String(Arc::from(s))
    }

    pub fn list(items: Vec<Value>) -> Value {
        Value::List(Arc::new(items))
    }

    pub fn object(o: Object) -> Value {
        Value::Object(Arc::new(o))
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
            serde_json::Value::Array(a) => Value::list(a.iter().map(Value::from_json).collect()),
            serde_json::Value::Object(o) => Value::Map(Arc::new(
                o.iter()
                    .map(|(k, v)| (Key::String(Arc::from(k.as_str())), Value::from_json(v)))
                    .collect(),
            )),
        }
    }

    pub fn as_key(&self) -> Result<Key, String> {
        match self {
            Value::Bool(b) => Ok(Key::Bool(*b)),
            Value::Int(i) => Ok(Key::Int(*i)),
            Value::Uint(u) => Ok(Key::Uint(*u)),
            Value::String(s) => Ok(Key::String(s.clone())),
            other => Err(format!("unsupported key type: {}", other.type_name())),
        }
    }

    /// The size a cost is charged for when the value is scanned or copied.
    pub fn cost_size(&self) -> usize {
        match self {
            Value::String(s) => s.len(),
            Value::Bytes(b) => b.len(),
            Value::List(l) => l.len(),
            Value::Map(m) => m.len(),
            _ => 1,
        }
    }
}

pub fn key_value(k: &Key) -> Value {
    match k {
        Key::Bool(b) => Value::Bool(*b),
        Key::Int(i) => Value::Int(*i),
        Key::Uint(u) => Value::Uint(*u),
        Key::String(s) => Value::String(s.clone()),
    }
}

/// cel-go's message for a call no overload accepts at run time.
pub fn no_overload(f: &str, args: &[&Value]) -> String {
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
        (Value::Bytes(x), Value::Bytes(y)) => x == y,
        (Value::Timestamp(x), Value::Timestamp(y)) => x == y,
        (Value::Duration(x), Value::Duration(y)) => x == y,
        (Value::Type(x), Value::Type(y)) => x == y,
        (Value::List(x), Value::List(y)) => {
            x.len() == y.len() && x.iter().zip(y.iter()).all(|(p, q)| equals(p, q))
        }
        (Value::Map(x), Value::Map(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| lookup_key(y, &key_value(k)).is_some_and(|w| equals(v, w)))
        }
        (Value::Optional(x), Value::Optional(y)) => match (x, y) {
            (None, None) => true,
            (Some(p), Some(q)) => equals(p, q),
            _ => false,
        },
        (Value::Object(x), Value::Object(y)) => match (&**x, &**y) {
            (Object::Semver(p), Object::Semver(q)) => p.cmp(q) == Ordering::Equal,
            (Object::Quantity(p), Object::Quantity(q)) => p == q,
            (Object::Ip(p), Object::Ip(q)) => p == q,
            (Object::Cidr(p), Object::Cidr(q)) => p == q,
            (Object::Url(p), Object::Url(q)) => p == q,
            (Object::Format(p), Object::Format(q)) => p.name == q.name,
            _ => false,
        },
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

/// The ordering of `<`, `<=`, `>`, `>=` (numbers across types, as cel-go does at run time).
pub fn compare(a: &Value, b: &Value) -> Result<Ordering, String> {
    match (a, b) {
        (Value::String(x), Value::String(y)) => Ok(x.cmp(y)),
        (Value::Bytes(x), Value::Bytes(y)) => Ok(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Ok(x.cmp(y)),
        (Value::Timestamp(x), Value::Timestamp(y)) => Ok(x.cmp(y)),
        (Value::Duration(x), Value::Duration(y)) => Ok(x.cmp(y)),
        _ => match numeric_cmp(a, b) {
            Some(o) => Ok(o),
            None if is_number(a) && is_number(b) => Err("NaN values cannot be ordered".into()),
            None => Err(no_overload("_<_", &[a, b])),
        },
    }
}

fn is_number(v: &Value) -> bool {
    matches!(v, Value::Int(_) | Value::Uint(_) | Value::Double(_))
}

/// Map lookup, with numeric keys matching across int, uint and whole doubles like cel-go.
pub fn lookup_key<'m>(map: &'m BTreeMap<Key, Value>, key: &Value) -> Option<&'m Value> {
    match key {
        Value::Int(i) => map
            .get(&Key::Int(*i))
            .or_else(|| u64::try_from(*i).ok().and_then(|u| map.get(&Key::Uint(u)))),
        Value::Uint(u) => map
            .get(&Key::Uint(*u))
            .or_else(|| i64::try_from(*u).ok().and_then(|i| map.get(&Key::Int(i)))),
        Value::Double(d) if d.fract() == 0.0 => {
            if *d >= i64::MIN as f64 && *d < i64::MAX as f64 {
                lookup_key(map, &Value::Int(*d as i64))
            } else if *d >= 0.0 && *d < u64::MAX as f64 {
                lookup_key(map, &Value::Uint(*d as u64))
            } else {
                None
            }
        }
        other => other.as_key().ok().and_then(|k| map.get(&k)),
    }
}
