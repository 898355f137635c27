//! OCM's `parseJSON` (open-cluster-management sdk-go `JsonLib`): `'{"a": 1}'.parseJSON()`. Numbers
//! become doubles, as Go's `encoding/json` decodes them into `interface{}`.

use super::super::types::Type;
use super::super::value::{EvalResult, Key, Value};
use super::{Library, args::mismatch};
use std::sync::Arc;

pub fn declare(lib: &mut Library) {
    lib.member("parseJSON", vec![Type::String], Type::Dyn, parse_json);
}

fn to_value(v: &serde_json::Value) -> Value {
    match v {
        serde_json::Value::Null => Value::Null,
        serde_json::Value::Bool(b) => Value::Bool(*b),
        serde_json::Value::Number(n) => Value::Double(n.as_f64().unwrap_or(f64::NAN)),
        serde_json::Value::String(s) => Value::str(s),
        serde_json::Value::Array(a) => Value::list(a.iter().map(to_value).collect()),
        serde_json::Value::Object(o) => Value::Map(Arc::new(
            o.iter()
                .map(|(k, v)| (Key::String(Arc::from(k.as_str())), to_value(v)))
                .collect(),
        )),
    }
}

fn parse_json(a: &[Value]) -> EvalResult {
    let [Value::String(s)] = a else {
        return Err(mismatch("parseJSON", a));
    };
    serde_json::from_str::<serde_json::Value>(s)
        .map(|v| to_value(&v))
        .map_err(|e| format!("failed to parse json: {e}"))
}
