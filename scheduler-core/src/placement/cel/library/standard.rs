//! CEL's standard library as cel-go declares it: the operators, `size`, the string predicates,
//! the type conversions, `type` and `dyn`. Cross-type numeric comparisons are not declared (OCM
//! does not enable them), so `1 < 1.5` does not compile while `dyn(1) < 1.5` runs; the checker
//! accepts them once a comprehension was entered, as OCM's does (`check.rs`).

use super::super::syntax::BinaryOp;
use super::super::types::Type;
use super::super::value::digits::{place_point, shortest_digits};
use super::super::value::{EvalResult, Value, compare, equals, lookup_key, no_overload};
use super::{A, B, Library, args::mismatch};
use std::cmp::Ordering;
use std::sync::Arc;

pub fn declare(lib: &mut Library) {
    use Type::*;
    let list_a = || Type::list(A);
    let map_ab = || Type::map(A, B);
    lib.global("_==_", vec![A, A], Bool, eq);
    lib.global("_!=_", vec![A, A], Bool, ne);
    for (name, imp) in [
        ("_<_", lt as super::Impl),
        ("_<=_", le),
        ("_>_", gt),
        ("_>=_", ge),
    ] {
        for t in [Bool, Int, Uint, Double, String, Bytes, Timestamp, Duration] {
            lib.global(name, vec![t.clone(), t], Bool, imp);
        }
    }
    for t in [Int, Uint, Double, String, Bytes] {
        lib.global("_+_", vec![t.clone(), t.clone()], t, add);
    }
    lib.global("_+_", vec![list_a(), list_a()], list_a(), add);
    lib.global("_+_", vec![Timestamp, Duration], Timestamp, add);
    lib.global("_+_", vec![Duration, Timestamp], Timestamp, add);
    lib.global("_+_", vec![Duration, Duration], Duration, add);
    for t in [Int, Uint, Double] {
        lib.global("_-_", vec![t.clone(), t.clone()], t.clone(), sub);
        lib.global("_*_", vec![t.clone(), t.clone()], t.clone(), mul);
        lib.global("_/_", vec![t.clone(), t.clone()], t, div);
    }
    lib.global("_-_", vec![Timestamp, Timestamp], Duration, sub);
    lib.global("_-_", vec![Timestamp, Duration], Timestamp, sub);
    lib.global("_-_", vec![Duration, Duration], Duration, sub);
    lib.global("_%_", vec![Int, Int], Int, rem);
    lib.global("_%_", vec![Uint, Uint], Uint, rem);
    lib.global("-_", vec![Int], Int, neg);
    lib.global("-_", vec![Double], Double, neg);
    lib.global("!_", vec![Bool], Bool, not);
    lib.global("_&&_", vec![Bool, Bool], Bool, not_called);
    lib.global("_||_", vec![Bool, Bool], Bool, not_called);
    lib.global("_?_:_", vec![Bool, A, A], A, not_called);
    lib.global("_[_]", vec![list_a(), Int], A, index);
    lib.global("_[_]", vec![map_ab(), A], B, index);
    lib.global("@in", vec![A, list_a()], Bool, contained);
    lib.global("@in", vec![A, map_ab()], Bool, contained);

    for t in [String, Bytes, list_a(), map_ab()] {
        lib.global("size", vec![t.clone()], Int, size);
        lib.member("size", vec![t], Int, size);
    }
    lib.member("contains", vec![String, String], Bool, contains);
    lib.member("startsWith", vec![String, String], Bool, starts_with);
    lib.member("endsWith", vec![String, String], Bool, ends_with);

    for t in [Int, Uint, Double, String, Timestamp, Duration] {
        lib.global("int", vec![t], Int, to_int);
    }
    for t in [Uint, Int, Double, String] {
        lib.global("uint", vec![t], Uint, to_uint);
    }
    for t in [Double, Int, Uint, String] {
        lib.global("double", vec![t], Double, to_double);
    }
    for t in [String, Int, Uint, Double, Bool, Bytes, Timestamp, Duration] {
        lib.global("string", vec![t], String, to_string);
    }
    for t in [Bytes, String] {
        lib.global("bytes", vec![t], Bytes, to_bytes);
    }
    for t in [Bool, String] {
        lib.global("bool", vec![t], Bool, to_bool);
    }
    lib.global("dyn", vec![A], Dyn, identity);
    lib.global("type", vec![A], Type::Kind(Box::new(A)), type_of);
}

/// `&&`, `||` and `?:` are evaluated lazily by the evaluator; their entries only type them.
fn not_called(a: &[Value]) -> EvalResult {
    Err(mismatch("operator", a))
}

fn identity(a: &[Value]) -> EvalResult {
    Ok(a[0].clone())
}

fn eq(a: &[Value]) -> EvalResult {
    Ok(Value::Bool(equals(&a[0], &a[1])))
}

fn ne(a: &[Value]) -> EvalResult {
    Ok(Value::Bool(!equals(&a[0], &a[1])))
}

fn lt(a: &[Value]) -> EvalResult {
    binary(BinaryOp::Lt, &a[0], &a[1])
}
fn le(a: &[Value]) -> EvalResult {
    binary(BinaryOp::Le, &a[0], &a[1])
}
fn gt(a: &[Value]) -> EvalResult {
    binary(BinaryOp::Gt, &a[0], &a[1])
}
fn ge(a: &[Value]) -> EvalResult {
    binary(BinaryOp::Ge, &a[0], &a[1])
}
fn add(a: &[Value]) -> EvalResult {
    binary(BinaryOp::Add, &a[0], &a[1])
}
fn sub(a: &[Value]) -> EvalResult {
    binary(BinaryOp::Sub, &a[0], &a[1])
}
fn mul(a: &[Value]) -> EvalResult {
    binary(BinaryOp::Mul, &a[0], &a[1])
}
fn div(a: &[Value]) -> EvalResult {
    binary(BinaryOp::Div, &a[0], &a[1])
}
fn rem(a: &[Value]) -> EvalResult {
    binary(BinaryOp::Rem, &a[0], &a[1])
}
fn contained(a: &[Value]) -> EvalResult {
    binary(BinaryOp::In, &a[0], &a[1])
}
fn index(a: &[Value]) -> EvalResult {
    index_value(&a[0], &a[1])
}

pub fn neg(a: &[Value]) -> EvalResult {
    match &a[0] {
        Value::Int(i) => i
            .checked_neg()
            .map(Value::Int)
            .ok_or_else(|| "integer overflow".to_string()),
        Value::Double(d) => Ok(Value::Double(-d)),
        other => Err(no_overload("-_", &[other])),
    }
}

pub fn not(a: &[Value]) -> EvalResult {
    match &a[0] {
        Value::Bool(b) => Ok(Value::Bool(!b)),
        other => Err(no_overload("!_", &[other])),
    }
}

/// Every strict binary operator on two evaluated operands.
pub fn binary(op: BinaryOp, a: &Value, b: &Value) -> EvalResult {
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
        (Value::String(x), Value::String(y)) if op == Add => {
            let mut s = String::with_capacity(x.len() + y.len());
            s.push_str(x);
            s.push_str(y);
            Ok(Value::String(Arc::from(s)))
        }
        (Value::Bytes(x), Value::Bytes(y)) if op == Add => {
            Ok(Value::Bytes(x.iter().chain(y.iter()).copied().collect()))
        }
        (Value::List(x), Value::List(y)) if op == Add => {
            Ok(Value::list(x.iter().chain(y.iter()).cloned().collect()))
        }
        (Value::Timestamp(t), Value::Duration(d)) | (Value::Duration(d), Value::Timestamp(t))
            if op == Add =>
        {
            t.plus(*d).map(Value::Timestamp)
        }
        (Value::Duration(x), Value::Duration(y)) if op == Add => x.plus(*y).map(Value::Duration),
        (Value::Duration(x), Value::Duration(y)) if op == Sub => x.minus(*y).map(Value::Duration),
        (Value::Timestamp(t), Value::Duration(d)) if op == Sub => t.minus(*d).map(Value::Timestamp),
        (Value::Timestamp(x), Value::Timestamp(y)) if op == Sub => x.since(*y).map(Value::Duration),
        _ => Err(no_overload(&format!("_{op}_"), &[a, b])),
    }
}

pub fn index_value(target: &Value, index: &Value) -> EvalResult {
    match (target, index) {
        (Value::List(l), Value::Int(_) | Value::Uint(_) | Value::Double(_)) => {
            let i = match index {
                Value::Int(i) => Some(*i),
                Value::Uint(u) => i64::try_from(*u).ok(),
                Value::Double(d) if d.fract() == 0.0 => Some(*d as i64),
                _ => None,
            };
            let Some(i) = i else {
                return Err(format!("unsupported index value {index:?} in list"));
            };
            usize::try_from(i)
                .ok()
                .and_then(|u| l.get(u))
                .cloned()
                .ok_or_else(|| format!("index out of bounds: {i}"))
        }
        (Value::Map(m), key) => lookup_key(m, key).cloned().ok_or_else(|| match key {
            Value::String(s) => format!("no such key: {s}"),
            other => format!("no such key: {}", display_key(other)),
        }),
        _ => Err(no_overload("_[_]", &[target, index])),
    }
}

fn display_key(v: &Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Double(d) => format_double(*d),
        other => other.type_name().to_string(),
    }
}

pub fn size(a: &[Value]) -> EvalResult {
    match &a[0] {
        Value::String(s) => Ok(Value::Int(s.chars().count() as i64)),
        Value::Bytes(b) => Ok(Value::Int(b.len() as i64)),
        Value::List(l) => Ok(Value::Int(l.len() as i64)),
        Value::Map(m) => Ok(Value::Int(m.len() as i64)),
        other => Err(no_overload("size", &[other])),
    }
}

fn strings2<'v>(f: &str, a: &'v [Value]) -> Result<(&'v str, &'v str), String> {
    match a {
        [Value::String(s), Value::String(x)] => Ok((s, x)),
        _ => Err(mismatch(f, a)),
    }
}

fn contains(a: &[Value]) -> EvalResult {
    strings2("contains", a).map(|(s, x)| Value::Bool(s.contains(x)))
}

fn starts_with(a: &[Value]) -> EvalResult {
    strings2("startsWith", a).map(|(s, x)| Value::Bool(s.starts_with(x)))
}

fn ends_with(a: &[Value]) -> EvalResult {
    strings2("endsWith", a).map(|(s, x)| Value::Bool(s.ends_with(x)))
}

fn conversion_error(from: &Value, to: &str) -> String {
    format!("type conversion error from '{}' to '{to}'", from.type_name())
}

pub fn to_int(a: &[Value]) -> EvalResult {
    let v = &a[0];
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
        Value::String(s) => s.parse().map(Value::Int).map_err(|_| conversion_error(v, "int")),
        Value::Timestamp(t) => Ok(Value::Int(t.unix_seconds())),
        Value::Duration(d) => Ok(Value::Int(d.nanos())),
        other => Err(no_overload("int", &[other])),
    }
}

pub fn to_uint(a: &[Value]) -> EvalResult {
    let v = &a[0];
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
        // Go's ParseUint takes no sign.
        Value::String(s) if !s.starts_with('+') => s
            .parse()
            .map(Value::Uint)
            .map_err(|_| conversion_error(v, "uint")),
        other => Err(no_overload("uint", &[other])),
    }
}

pub fn to_double(a: &[Value]) -> EvalResult {
    let v = &a[0];
    match v {
        Value::Double(d) => Ok(Value::Double(*d)),
        Value::Int(i) => Ok(Value::Double(*i as f64)),
        Value::Uint(u) => Ok(Value::Double(*u as f64)),
        Value::String(s) => parse_go_float(s)
            .map(Value::Double)
            .ok_or_else(|| conversion_error(v, "double")),
        other => Err(no_overload("double", &[other])),
    }
}

/// Go's `strconv.ParseFloat`: decimal or hexadecimal (`0x1p-2`) floats, `_` between digits,
/// `inf`/`infinity`/`nan` in any case.
fn parse_go_float(s: &str) -> Option<f64> {
    let (negative, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let magnitude = match lower.as_str() {
        "inf" | "infinity" => f64::INFINITY,
        "nan" => f64::NAN,
        _ => {
            let digits = strip_underscores(body)?;
            match digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X")) {
                Some(hex) => parse_hex_float(hex)?,
                None if digits
                    .bytes()
                    .all(|b| b.is_ascii_digit() || b".eE+-".contains(&b)) =>
                {
                    digits.parse().ok()?
                }
                None => return None,
            }
        }
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// Removes `_` digit separators, which Go allows only between digits (or after a base prefix).
fn strip_underscores(s: &str) -> Option<String> {
    if !s.contains('_') {
        return Some(s.to_string());
    }
    let b = s.as_bytes();
    for (i, c) in b.iter().enumerate() {
        if *c == b'_' {
            let before = i.checked_sub(1).and_then(|j| b.get(j));
            let after = b.get(i + 1);
            let ok_before = before.is_some_and(|p| p.is_ascii_hexdigit() || *p == b'x' || *p == b'X');
            let ok_after = after.is_some_and(u8::is_ascii_hexdigit);
            if !(ok_before && ok_after) {
                return None;
            }
        }
    }
    Some(s.replace('_', ""))
}

/// The part of a hexadecimal float after `0x`: hex digits with an optional point, then the
/// binary exponent `p±N`, which Go requires.
fn parse_hex_float(s: &str) -> Option<f64> {
    let (mantissa, exp) = s.split_once(['p', 'P'])?;
    let exp: i32 = exp.parse().ok()?;
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let mut value = 0f64;
    for c in int_part.chars().chain(frac_part.chars()) {
        value = value * 16.0 + f64::from(c.to_digit(16)?);
    }
    let shift = exp.checked_sub(4 * i32::try_from(frac_part.len()).ok()?)?;
    Some(value * 2f64.powi(shift))
}

pub fn to_string(a: &[Value]) -> EvalResult {
    match &a[0] {
        Value::String(s) => Ok(Value::String(s.clone())),
        Value::Int(i) => Ok(Value::str(&i.to_string())),
        Value::Uint(u) => Ok(Value::str(&u.to_string())),
        Value::Double(d) => Ok(Value::str(&format_double(*d))),
        Value::Bool(b) => Ok(Value::str(if *b { "true" } else { "false" })),
        Value::Bytes(b) => std::str::from_utf8(b)
            .map(Value::str)
            .map_err(|_| "invalid UTF-8 in bytes, cannot convert to string".to_string()),
        Value::Timestamp(t) => Ok(Value::str(&t.to_string())),
        Value::Duration(d) => Ok(Value::str(&d.to_string())),
        other => Err(no_overload("string", &[other])),
    }
}

fn to_bytes(a: &[Value]) -> EvalResult {
    match &a[0] {
        Value::Bytes(b) => Ok(Value::Bytes(b.clone())),
        Value::String(s) => Ok(Value::Bytes(Arc::from(s.as_bytes()))),
        other => Err(no_overload("bytes", &[other])),
    }
}

pub fn to_bool(a: &[Value]) -> EvalResult {
    let v = &a[0];
    match v {
        Value::Bool(b) => Ok(Value::Bool(*b)),
        // Go's strconv.ParseBool.
        Value::String(s) => match &**s {
            "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(Value::Bool(true)),
            "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(Value::Bool(false)),
            _ => Err(conversion_error(v, "bool")),
        },
        other => Err(no_overload("bool", &[other])),
    }
}

fn type_of(a: &[Value]) -> EvalResult {
    Ok(Value::Type(Arc::from(a[0].type_name())))
}

/// A double as cel-go's `string(double)` writes it (Go's `strconv.FormatFloat(d, 'g', -1, 64)`):
/// the shortest digits that read back to `d`, in exponent form when the decimal exponent is
/// below -4 or at least 6.
pub fn format_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 { "+Inf".into() } else { "-Inf".into() };
    }
    if d == 0.0 {
        return if d.is_sign_negative() {
            "-0".into()
        } else {
            "0".into()
        };
    }
    let (negative, digits, exp) = shortest_digits(d);
    let sign = if negative { "-" } else { "" };
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(1);
        let mantissa = if rest.is_empty() {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{mantissa}e{esign}{:02}", exp.abs());
    }
    format!("{sign}{}", place_point(&digits, exp))
}

/// Type values by their identifier (`int`, `list`, ...), as the checker resolves them.
pub fn type_identifier(name: &str) -> Option<Type> {
    Some(match name {
        "int" => Type::Int,
        "uint" => Type::Uint,
        "double" => Type::Double,
        "bool" => Type::Bool,
        "string" => Type::String,
        "bytes" => Type::Bytes,
        "list" => Type::list(Type::Dyn),
        "map" => Type::map(Type::Dyn, Type::Dyn),
        "null_type" => Type::Null,
        "type" => Type::Kind(Box::new(Type::Dyn)),
        "optional_type" => Type::optional(Type::Dyn),
        "google.protobuf.Timestamp" => Type::Timestamp,
        "google.protobuf.Duration" => Type::Duration,
        _ => return None,
    })
}

/// The run-time name of a type value (`list(int)` is just `list`).
pub fn type_value_name(t: &Type) -> String {
    match t {
        Type::List(_) => "list".into(),
        Type::Map(..) => "map".into(),
        Type::Optional(_) => "optional_type".into(),
        Type::Kind(_) => "type".into(),
        other => other.to_string(),
    }
}
