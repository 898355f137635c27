//! The Kubernetes `lists` library (k8s.io/apiserver v0.34): `isSorted`, `sum`, `min`, `max`
//! over lists of comparable or summable elements, `indexOf` and `lastIndexOf`.

use super::super::syntax::BinaryOp;
use super::super::types::Type;
use super::super::value::time::Duration;
use super::super::value::{EvalResult, Value, compare, equals};
use super::standard::binary;
use super::{A, Library, args::mismatch};
use std::cmp::Ordering;

pub fn declare(lib: &mut Library) {
    use Type::*;
    let comparable = [Int, Uint, Double, Bool, Duration, Timestamp, String, Bytes];
    for t in comparable {
        lib.member("isSorted", vec![Type::list(t.clone())], Bool, is_sorted);
        lib.member("max", vec![Type::list(t.clone())], t.clone(), max);
        lib.member("min", vec![Type::list(t.clone())], t, min);
    }
    lib.member("sum", vec![Type::list(Int)], Int, sum_int);
    lib.member("sum", vec![Type::list(Uint)], Uint, sum_uint);
    lib.member("sum", vec![Type::list(Double)], Double, sum_double);
    lib.member("sum", vec![Type::list(Duration)], Duration, sum_duration);
    lib.member("indexOf", vec![Type::list(A), A], Int, index_of);
    lib.member("lastIndexOf", vec![Type::list(A), A], Int, last_index_of);
}

fn items<'v>(f: &str, a: &'v [Value]) -> Result<&'v [Value], String> {
    match a {
        [Value::List(l), ..] => Ok(l),
        _ => Err(mismatch(f, a)),
    }
}

fn is_sorted(a: &[Value]) -> EvalResult {
    let l = items("isSorted", a)?;
    // cel-go compares neighbours and only an answer of "greater" counts; an incomparable pair
    // (an error there) does not.
    for pair in l.windows(2) {
        if compare(&pair[0], &pair[1]) == Ok(Ordering::Greater) {
            return Ok(Value::Bool(false));
        }
    }
    Ok(Value::Bool(true))
}

fn extreme(f: &str, a: &[Value], keep: Ordering) -> EvalResult {
    let l = items(f, a)?;
    let Some(mut best) = l.first() else {
        return Err(format!("{f} called on empty list"));
    };
    // As in cel-go, an element that cannot be compared with the best so far is skipped.
    for v in &l[1..] {
        if compare(v, best) == Ok(keep) {
            best = v;
        }
    }
    Ok(best.clone())
}

fn max(a: &[Value]) -> EvalResult {
    extreme("max", a, Ordering::Greater)
}

fn min(a: &[Value]) -> EvalResult {
    extreme("min", a, Ordering::Less)
}

/// Adds the elements to `zero` with `+`, so mixed element types fail as in cel-go.
fn sum(a: &[Value], zero: Value) -> EvalResult {
    let l = items("sum", a)?;
    l.iter().try_fold(zero, |acc, v| binary(BinaryOp::Add, &acc, v))
}

/// A `list(dyn)` starts from the zero of its first element's type, as cel-go's dispatch picks
/// the overload by what the list holds.
fn zero_like(a: &[Value], default: Value) -> Value {
    match a.first() {
        Some(Value::List(l)) => match l.first() {
            Some(Value::Uint(_)) => Value::Uint(0),
            Some(Value::Double(_)) => Value::Double(0.0),
            Some(Value::Duration(_)) => Value::Duration(Duration::ZERO),
            Some(Value::Int(_)) => Value::Int(0),
            _ => default,
        },
        _ => default,
    }
}

fn sum_int(a: &[Value]) -> EvalResult {
    sum(a, zero_like(a, Value::Int(0)))
}

fn sum_uint(a: &[Value]) -> EvalResult {
    sum(a, zero_like(a, Value::Uint(0)))
}

fn sum_double(a: &[Value]) -> EvalResult {
    sum(a, zero_like(a, Value::Double(0.0)))
}

fn sum_duration(a: &[Value]) -> EvalResult {
    sum(a, zero_like(a, Value::Duration(Duration::ZERO)))
}

fn index_of(a: &[Value]) -> EvalResult {
    let l = items("indexOf", a)?;
    let needle = &a[1];
    Ok(Value::Int(
        l.iter().position(|v| equals(v, needle)).map_or(-1, |i| i as i64),
    ))
}

fn last_index_of(a: &[Value]) -> EvalResult {
    let l = items("lastIndexOf", a)?;
    let needle = &a[1];
    Ok(Value::Int(
        l.iter().rposition(|v| equals(v, needle)).map_or(-1, |i| i as i64),
    ))
}
