//! cel-go's `cel.OptionalTypes()` at its latest version: `optional.of`, `optional.ofNonZeroValue`,
//! `optional.none`, `value`, `hasValue`, `or`, `orValue`, `optional.unwrap`/`unwrapOpt` and the
//! list accessors `first`/`last`. The syntax (`x.?f`, `x[?k]`, `[?e]`, `{?k: v}`) and the macros
//! `optMap`/`optFlatMap` are handled by the parser, checker and evaluator; `or` and `orValue`
//! evaluate their argument only when the receiver is empty.

use super::super::types::Type;
use super::super::value::{EvalResult, Value};
use super::{A, Library, args::mismatch};
use std::sync::Arc;

pub fn declare(lib: &mut Library) {
    let opt_a = || Type::optional(A);
    lib.global("optional.of", vec![A], opt_a(), of);
    lib.global("optional.ofNonZeroValue", vec![A], opt_a(), of_non_zero_value);
    lib.global("optional.none", vec![], opt_a(), none);
    lib.member("value", vec![opt_a()], A, value);
    lib.member("hasValue", vec![opt_a()], Type::Bool, has_value);
    lib.member("or", vec![opt_a(), opt_a()], opt_a(), or);
    lib.member("orValue", vec![opt_a(), A], A, or_value);
    lib.member("first", vec![Type::list(A)], opt_a(), first);
    lib.member("last", vec![Type::list(A)], opt_a(), last);
    lib.global(
        "optional.unwrap",
        vec![Type::list(opt_a())],
        Type::list(A),
        unwrap,
    );
    lib.member("unwrapOpt", vec![Type::list(opt_a())], Type::list(A), unwrap);
}

pub fn some(v: Value) -> Value {
    Value::Optional(Some(Arc::new(v)))
}

fn of(a: &[Value]) -> EvalResult {
    Ok(some(a[0].clone()))
}

/// Whether `v` is its type's zero value (what `ofNonZeroValue` leaves out).
fn is_zero(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Int(i) => *i == 0,
        Value::Uint(u) => *u == 0,
        Value::Double(d) => *d == 0.0,
        Value::String(s) => s.is_empty(),
        Value::Bytes(b) => b.is_empty(),
        Value::List(l) => l.is_empty(),
        Value::Map(m) => m.is_empty(),
        Value::Duration(d) => d.nanos() == 0,
        Value::Timestamp(t) => *t == super::super::value::time::Timestamp::GO_ZERO,
        Value::Optional(o) => o.is_none(),
        Value::Type(_) | Value::Object(_) => false,
    }
}

fn of_non_zero_value(a: &[Value]) -> EvalResult {
    Ok(if is_zero(&a[0]) {
        Value::Optional(None)
    } else {
        some(a[0].clone())
    })
}

fn none(_: &[Value]) -> EvalResult {
    Ok(Value::Optional(None))
}

fn value(a: &[Value]) -> EvalResult {
    match a {
        [Value::Optional(Some(v))] => Ok((**v).clone()),
        [Value::Optional(None)] => Err("optional.none() dereference".into()),
        _ => Err(mismatch("value", a)),
    }
}

fn has_value(a: &[Value]) -> EvalResult {
    match a {
        [Value::Optional(o)] => Ok(Value::Bool(o.is_some())),
        _ => Err(mismatch("hasValue", a)),
    }
}

fn or(a: &[Value]) -> EvalResult {
    match a {
        [Value::Optional(Some(_)), _] => Ok(a[0].clone()),
        [Value::Optional(None), Value::Optional(_)] => Ok(a[1].clone()),
        _ => Err(mismatch("or", a)),
    }
}

fn or_value(a: &[Value]) -> EvalResult {
    match a {
        [Value::Optional(Some(v)), _] => Ok((**v).clone()),
        [Value::Optional(None), other] => Ok(other.clone()),
        _ => Err(mismatch("orValue", a)),
    }
}

fn first(a: &[Value]) -> EvalResult {
    match a {
        [Value::List(l)] => Ok(Value::Optional(l.first().cloned().map(Arc::new))),
        _ => Err(mismatch("first", a)),
    }
}

fn last(a: &[Value]) -> EvalResult {
    match a {
        [Value::List(l)] => Ok(Value::Optional(l.last().cloned().map(Arc::new))),
        _ => Err(mismatch("last", a)),
    }
}

fn unwrap(a: &[Value]) -> EvalResult {
    let [Value::List(l)] = a else {
        return Err(mismatch("optional.unwrap", a));
    };
    let mut out = Vec::with_capacity(l.len());
    for v in l.iter() {
        match v {
            Value::Optional(Some(inner)) => out.push((**inner).clone()),
            Value::Optional(None) => {}
            other => return Err(mismatch("optional.unwrap", std::slice::from_ref(other))),
        }
    }
    Ok(Value::list(out))
}
