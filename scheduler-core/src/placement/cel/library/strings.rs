//! cel-go's `ext.Strings()` at its latest version (what OCM registers): indices count code
//! points, Go's `strings.Replace`/`SplitN` semantics, `strings.quote`, and `format` with the
//! clauses `%s %d %f %e %b %o %x %X %%` (precision only, no width), whose errors are compile
//! errors when the format string and its arguments are literals.

use super::super::types::Type;
use super::super::value::digits::{place_point, shortest_digits};
use super::super::value::{EvalResult, Key, Value, no_overload};
use super::standard::format_double;
use super::{Library, args::mismatch};
use std::fmt::Write;
use std::sync::Arc;

pub fn declare(lib: &mut Library) {
    use Type::*;
    let list_string = || Type::list(String);
    lib.member("charAt", vec![String, Int], String, char_at);
    lib.member("indexOf", vec![String, String], Int, index_of);
    lib.member("indexOf", vec![String, String, Int], Int, index_of);
    lib.member("lastIndexOf", vec![String, String], Int, last_index_of);
    lib.member("lastIndexOf", vec![String, String, Int], Int, last_index_of);
    lib.member("lowerAscii", vec![String], String, lower_ascii);
    lib.member("upperAscii", vec![String], String, upper_ascii);
    lib.member("replace", vec![String, String, String], String, replace);
    lib.member("replace", vec![String, String, String, Int], String, replace);
    lib.member("split", vec![String, String], list_string(), split);
    lib.member("split", vec![String, String, Int], list_string(), split);
    lib.member("substring", vec![String, Int], String, substring);
    lib.member("substring", vec![String, Int, Int], String, substring);
    lib.member("trim", vec![String], String, trim);
    lib.member("reverse", vec![String], String, reverse);
    lib.member("join", vec![list_string()], String, join);
    lib.member("join", vec![list_string(), String], String, join);
    lib.member("format", vec![String, Type::list(Dyn)], String, format);
    lib.global("strings.quote", vec![String], String, quote);
}

/// The largest string `replace` builds (the cost budget's size in units).
const MAX_RESULT_BYTES: usize = 10_000_000;

fn out_of_range(i: i64) -> String {
    format!("index out of range: {i}")
}

fn chars(s: &str) -> Vec<char> {
    s.chars().collect()
}

fn char_at(a: &[Value]) -> EvalResult {
    let [Value::String(s), Value::Int(i)] = a else {
        return Err(mismatch("charAt", a));
    };
    let cs = chars(s);
    match usize::try_from(*i) {
        Ok(u) if u < cs.len() => Ok(Value::str(&cs[u].to_string())),
        Ok(u) if u == cs.len() => Ok(Value::str("")),
        _ => Err(out_of_range(*i)),
    }
}

/// Whether `needle` occurs in `hay` at code point `at`.
fn occurs_at(hay: &[char], needle: &[char], at: usize) -> bool {
    hay.get(at..at + needle.len()) == Some(needle)
}

fn index_of(a: &[Value]) -> EvalResult {
    let (s, sub, offset) = match a {
        [Value::String(s), Value::String(sub)] => (s, sub, 0),
        [Value::String(s), Value::String(sub), Value::Int(o)] => (s, sub, *o),
        _ => return Err(mismatch("indexOf", a)),
    };
    let (hay, needle) = (chars(s), chars(sub));
    // cel-go answers an empty needle before it checks the offset.
    if needle.is_empty() {
        return Ok(Value::Int(offset));
    }
    let start = usize::try_from(offset)
        .ok()
        .filter(|o| *o <= hay.len())
        .ok_or_else(|| out_of_range(offset))?;
    let found = (start..=hay.len().saturating_sub(needle.len()))
        .find(|i| occurs_at(&hay, &needle, *i))
        .map_or(-1, |i| i as i64);
    Ok(Value::Int(found))
}

fn last_index_of(a: &[Value]) -> EvalResult {
    let (s, sub, offset) = match a {
        [Value::String(s), Value::String(sub)] => (s, sub, None),
        [Value::String(s), Value::String(sub), Value::Int(o)] => (s, sub, Some(*o)),
        _ => return Err(mismatch("lastIndexOf", a)),
    };
    let (hay, needle) = (chars(s), chars(sub));
    let last = match offset {
        None => {
            if needle.is_empty() {
                return Ok(Value::Int(hay.len() as i64));
            }
            hay.len()
        }
        Some(o) => {
            if needle.is_empty() {
                return Ok(Value::Int(o));
            }
            let at = usize::try_from(o).map_err(|_| out_of_range(o))?;
            if at >= hay.len() {
                return Ok(Value::Int(-1));
            }
            at
        }
    };
    if needle.len() > hay.len() {
        return Ok(Value::Int(-1));
    }
    let top = last.min(hay.len() - needle.len());
    let found = (0..=top)
        .rev()
        .find(|i| occurs_at(&hay, &needle, *i))
        .map_or(-1, |i| i as i64);
    Ok(Value::Int(found))
}

fn lower_ascii(a: &[Value]) -> EvalResult {
    match a {
        [Value::String(s)] => Ok(Value::str(&s.to_ascii_lowercase())),
        _ => Err(mismatch("lowerAscii", a)),
    }
}

fn upper_ascii(a: &[Value]) -> EvalResult {
    match a {
        [Value::String(s)] => Ok(Value::str(&s.to_ascii_uppercase())),
        _ => Err(mismatch("upperAscii", a)),
    }
}

/// Go's `strings.Replace(s, old, new, n)`: `n < 0` replaces all; an empty `old` matches at
/// the start and after every code point.
fn replace(a: &[Value]) -> EvalResult {
    let (s, old, new, n) = match a {
        [Value::String(s), Value::String(o), Value::String(n)] => (s, o, n, -1),
        [
            Value::String(s),
            Value::String(o),
            Value::String(n),
            Value::Int(c),
        ] => (s, o, n, *c),
        _ => return Err(mismatch("replace", a)),
    };
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    // The result can be the product of the inputs' sizes; refuse it before building it, so a
    // hostile expression cannot exhaust memory before the cost budget sees the result.
    let matches = if old.is_empty() {
        s.chars().count() + 1
    } else {
        s.matches(&**old).count()
    };
    let growth = new
        .len()
        .saturating_sub(old.len())
        .saturating_mul(matches.min(limit));
    if s.len().saturating_add(growth) > MAX_RESULT_BYTES {
        return Err(format!("replace: result larger than {MAX_RESULT_BYTES} bytes"));
    }
    if old.is_empty() {
        let mut out = String::new();
        let mut done = 0usize;
        for c in s.chars() {
            if done < limit {
                out.push_str(new);
                done += 1;
            }
            out.push(c);
        }
        if done < limit {
            out.push_str(new);
        }
        return Ok(Value::str(&out));
    }
    Ok(Value::str(&s.replacen(&**old, new, limit)))
}

/// Go's `strings.SplitN`: `n == 0` gives no parts, `n < 0` all; an empty separator splits
/// into code points.
fn split(a: &[Value]) -> EvalResult {
    let (s, sep, n) = match a {
        [Value::String(s), Value::String(sep)] => (s, sep, -1),
        [Value::String(s), Value::String(sep), Value::Int(n)] => (s, sep, *n),
        _ => return Err(mismatch("split", a)),
    };
    if n == 0 {
        return Ok(Value::list(Vec::new()));
    }
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    let parts: Vec<Value> = if sep.is_empty() {
        let cs = chars(s);
        let mut parts: Vec<Value> = Vec::new();
        for (i, c) in cs.iter().enumerate() {
            if parts.len() + 1 == limit {
                parts.push(Value::str(&cs[i..].iter().collect::<String>()));
                break;
            }
            parts.push(Value::str(&c.to_string()));
        }
        parts
    } else {
        s.splitn(limit, &**sep).map(Value::str).collect()
    };
    Ok(Value::list(parts))
}

fn substring(a: &[Value]) -> EvalResult {
    let (s, start, end) = match a {
        [Value::String(s), Value::Int(b)] => (s, *b, None),
        [Value::String(s), Value::Int(b), Value::Int(e)] => (s, *b, Some(*e)),
        _ => return Err(mismatch("substring", a)),
    };
    let cs = chars(s);
    let len = cs.len() as i64;
    if start < 0 || start > len {
        return Err(out_of_range(start));
    }
    let end = end.unwrap_or(len);
    if end < 0 || end > len {
        return Err(out_of_range(end));
    }
    if start > end {
        return Err(format!("invalid substring range. start: {start}, end: {end}"));
    }
    Ok(Value::str(
        &cs[start as usize..end as usize].iter().collect::<String>(),
    ))
}

fn trim(a: &[Value]) -> EvalResult {
    match a {
        [Value::String(s)] => Ok(Value::str(s.trim())),
        _ => Err(mismatch("trim", a)),
    }
}

fn reverse(a: &[Value]) -> EvalResult {
    match a {
        [Value::String(s)] => Ok(Value::str(&s.chars().rev().collect::<String>())),
        _ => Err(mismatch("reverse", a)),
    }
}

fn join(a: &[Value]) -> EvalResult {
    let (items, sep) = match a {
        [Value::List(items)] => (items, ""),
        [Value::List(items), Value::String(sep)] => (items, &**sep),
        _ => return Err(mismatch("join", a)),
    };
    let mut out = String::new();
    for (i, v) in items.iter().enumerate() {
        let Value::String(s) = v else {
            return Err(no_overload("join", &[v]));
        };
        if i > 0 {
            out.push_str(sep);
        }
        out.push_str(s);
    }
    Ok(Value::str(&out))
}

/// `strings.quote`: double quotes, with `\a \b \f \n \r \t \v \\ \"` escaped.
fn quote(a: &[Value]) -> EvalResult {
    let [Value::String(s)] = a else {
        return Err(mismatch("strings.quote", a));
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            other => out.push(other),
        }
    }
    out.push('"');
    Ok(Value::String(Arc::from(out)))
}

fn format(a: &[Value]) -> EvalResult {
    let [Value::String(f), Value::List(args)] = a else {
        return Err(mismatch("format", a));
    };
    format_string(f, args)
        .map(|s| Value::String(Arc::from(s)))
        .map_err(|e| {
            if e.contains("can only be used") || e.contains("can be formatted") {
                format!("error during formatting: {e}")
            } else {
                e
            }
        })
}

/// Whether a value of static type `t` may be formatted by `verb` (cel-go checks literal
/// argument lists when it compiles); the error is cel-go's text.
pub fn check_verb_type(verb: char, t: &Type) -> Result<(), String> {
    use Type::*;
    let ok = match (verb, t) {
        (_, Dyn) => true,
        ('s', List(e)) => return check_verb_type('s', e),
        ('s', Map(k, v)) => return check_verb_type('s', k).and_then(|()| check_verb_type('s', v)),
        ('s', Null | Bool | Int | Uint | Double | String | Bytes | Kind(_) | Duration | Timestamp) => true,
        ('d' | 'f' | 'e', Int | Uint | Double) => true,
        ('b', Int | Uint | Bool) => true,
        ('o', Int | Uint) => true,
        ('x' | 'X', Int | Uint | Bytes | String) => true,
        _ => false,
    };
    if ok {
        return Ok(());
    }
    let value_name = match t {
        List(_) => "list".to_string(),
        Map(..) => "map".to_string(),
        Optional(_) => "optional_type".to_string(),
        other => other.to_string(),
    };
    Err(verb_error(verb, &value_name))
}

fn verb_error(verb: char, given: &str) -> String {
    match verb {
        's' => format!(
            "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given {given}"
        ),
        'd' => format!("decimal clause can only be used on ints, uints, and doubles, was given {given}"),
        'f' => format!("fixed-point clause can only be used on ints, uints, and doubles, was given {given}"),
        'e' => format!("scientific clause can only be used on ints, uints, and doubles, was given {given}"),
        'b' => format!("only ints, uints, and bools can be formatted as binary, was given {given}"),
        'o' => format!("octal clause can only be used on ints and uints, was given {given}"),
        _ => format!("only ints, uints, bytes, and strings can be formatted as hex, was given {given}"),
    }
}

/// The verbs of a parsed format string, in order.
pub fn verbs(clauses: &[Clause]) -> Vec<char> {
    clauses
        .iter()
        .filter_map(|c| match c {
            Clause::Verb { verb, .. } => Some(*verb),
            Clause::Literal(_) => None,
        })
        .collect()
}

/// A clause of a format string.
pub enum Clause {
    Literal(char),
    Verb { verb: char, precision: Option<usize> },
}

/// Parses the clauses of a format string; the error is cel-go's text.
pub fn parse_format(f: &str) -> Result<Vec<Clause>, String> {
    let mut out = Vec::new();
    let mut it = f.chars().peekable();
    while let Some(c) = it.next() {
        if c != '%' {
            out.push(Clause::Literal(c));
            continue;
        }
        let Some(&next) = it.peek() else {
            return Err("unexpected end of string".into());
        };
        if next == '%' {
            it.next();
            out.push(Clause::Literal('%'));
            continue;
        }
        let mut precision = None;
        if next == '.' {
            it.next();
            let mut digits = String::new();
            while let Some(d) = it.peek().filter(|d| d.is_ascii_digit()) {
                digits.push(*d);
                it.next();
            }
            precision = Some(digits.parse::<usize>().map_err(|_| {
                format!(
                    "could not parse formatting clause: unable to convert precision '{digits}' to an integer"
                )
            })?);
            if precision.is_some_and(|p| p > 1000) {
                return Err("could not parse formatting clause: precision too large".into());
            }
        }
        let Some(verb) = it.next() else {
            return Err("unexpected end of string".into());
        };
        if !matches!(verb, 's' | 'd' | 'f' | 'e' | 'b' | 'o' | 'x' | 'X') {
            return Err(format!(
                "could not parse formatting clause: unrecognized formatting clause \"{verb}\""
            ));
        }
        out.push(Clause::Verb { verb, precision });
    }
    Ok(out)
}

pub fn format_string(f: &str, args: &[Value]) -> Result<String, String> {
    let clauses = parse_format(f)?;
    let mut out = String::new();
    let mut next = 0usize;
    for clause in clauses {
        match clause {
            Clause::Literal(c) => out.push(c),
            Clause::Verb { verb, precision } => {
                let arg = args
                    .get(next)
                    .ok_or_else(|| format!("index {next} out of range"))?;
                next += 1;
                let text = match verb {
                    's' => as_string(arg)?,
                    'd' => decimal(arg)?,
                    'f' => fixed(arg, precision.unwrap_or(6))?,
                    'e' => scientific(arg, precision.unwrap_or(6))?,
                    'b' | 'o' | 'x' | 'X' => radix(arg, verb)?,
                    _ => unreachable_verb(verb)?,
                };
                out.push_str(&text);
            }
        }
    }
    Ok(out)
}

fn unreachable_verb(verb: char) -> Result<String, String> {
    Err(format!("unrecognized formatting clause \"{verb}\""))
}

/// `%s`: the value as text; strings inside lists and maps are not quoted.
fn as_string(v: &Value) -> Result<String, String> {
    Ok(match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Uint(u) => u.to_string(),
        Value::Double(d) => plain_double(*d),
        Value::String(s) => s.to_string(),
        Value::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        Value::List(items) => {
            let parts = items.iter().map(as_string).collect::<Result<Vec<_>, _>>()?;
            format!("[{}]", parts.join(", "))
        }
        Value::Map(m) => {
            let mut parts = Vec::with_capacity(m.len());
            for (k, v) in m.iter() {
                let key = match k {
                    Key::String(s) => s.to_string(),
                    Key::Int(i) => i.to_string(),
                    Key::Uint(u) => u.to_string(),
                    Key::Bool(b) => b.to_string(),
                };
                parts.push(format!("{key}: {}", as_string(v)?));
            }
            format!("{{{}}}", parts.join(", "))
        }
        Value::Timestamp(t) => t.utc().to_string(),
        Value::Duration(d) => d.to_string(),
        Value::Type(t) => t.to_string(),
        other => {
            return Err(format!(
                "string clause can only be used on strings, bools, bytes, ints, doubles, maps, lists, types, durations, and timestamps, was given {}",
                other.type_name()
            ));
        }
    })
}

/// A double in plain notation with the shortest digits (`1e20` is `100000000000000000000`).
fn plain_double(d: f64) -> String {
    if d.is_nan() {
        return "NaN".into();
    }
    if d.is_infinite() {
        return if d > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        };
    }
    if d == 0.0 {
        return format_double(d);
    }
    let (negative, digits, exp) = shortest_digits(d);
    format!("{}{}", if negative { "-" } else { "" }, place_point(&digits, exp))
}

fn decimal(v: &Value) -> Result<String, String> {
    match v {
        Value::Int(i) => Ok(i.to_string()),
        Value::Uint(u) => Ok(u.to_string()),
        Value::Double(d) => Ok(plain_double(*d)),
        other => Err(format!(
            "decimal clause can only be used on ints, uints, and doubles, was given {}",
            other.type_name()
        )),
    }
}

fn number(v: &Value, clause: &str) -> Result<f64, String> {
    match v {
        Value::Int(i) => Ok(*i as f64),
        Value::Uint(u) => Ok(*u as f64),
        Value::Double(d) => Ok(*d),
        other => Err(format!(
            "{clause} clause can only be used on ints, uints, and doubles, was given {}",
            other.type_name()
        )),
    }
}

fn special(d: f64) -> Option<String> {
    if d.is_nan() {
        Some("NaN".into())
    } else if d.is_infinite() {
        Some(if d > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        })
    } else {
        None
    }
}

/// cel-go hands integers to Go's `%f`/`%e`, which prints its bad-verb form with the digits
/// zero-padded to the precision: `%!f(int64=000001)`.
fn integer_bad_verb(v: &Value, verb: char, precision: usize) -> Option<String> {
    let (kind, negative, magnitude) = match v {
        Value::Int(i) => ("int64", *i < 0, i.unsigned_abs()),
        Value::Uint(u) => ("uint64", false, *u),
        _ => return None,
    };
    let sign = if negative { "-" } else { "" };
    Some(format!("%!{verb}({kind}={sign}{magnitude:0precision$})"))
}

fn fixed(v: &Value, precision: usize) -> Result<String, String> {
    if let Some(s) = integer_bad_verb(v, 'f', precision) {
        return Ok(s);
    }
    let d = number(v, "fixed-point")?;
    Ok(special(d).unwrap_or_else(|| format!("{d:.precision$}")))
}

fn scientific(v: &Value, precision: usize) -> Result<String, String> {
    if let Some(s) = integer_bad_verb(v, 'e', precision) {
        return Ok(s);
    }
    let d = number(v, "scientific")?;
    if let Some(s) = special(d) {
        return Ok(s);
    }
    let text = format!("{d:.precision$e}");
    let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let sign = if exp < 0 { '-' } else { '+' };
    Ok(format!("{mantissa}e{sign}{:02}", exp.abs()))
}

fn radix(v: &Value, verb: char) -> Result<String, String> {
    let signed = |negative: bool, magnitude: u128| -> String {
        let digits = match verb {
            'b' => format!("{magnitude:b}"),
            'o' => format!("{magnitude:o}"),
            'x' => format!("{magnitude:x}"),
            _ => format!("{magnitude:X}"),
        };
        if negative { format!("-{digits}") } else { digits }
    };
    match v {
        Value::Int(i) => Ok(signed(*i < 0, u128::from(i.unsigned_abs()))),
        Value::Uint(u) => Ok(signed(false, u128::from(*u))),
        Value::Bool(b) if verb == 'b' => Ok(if *b { "1" } else { "0" }.into()),
        Value::String(_) | Value::Bytes(_) if matches!(verb, 'x' | 'X') => {
            let bytes: &[u8] = match v {
                Value::String(s) => s.as_bytes(),
                Value::Bytes(b) => b,
                _ => &[],
            };
            let mut out = String::with_capacity(bytes.len() * 2);
            for b in bytes {
                if verb == 'x' {
                    let _ = write!(out, "{b:02x}");
                } else {
                    let _ = write!(out, "{b:02X}");
                }
            }
            Ok(out)
        }
        other => Err(verb_error(verb, other.type_name())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &str) -> Value {
        Value::str(v)
    }

    #[test]
    fn formats_like_cel_go() {
        let args = [
            Value::Int(1),
            s("a"),
            Value::Double(1.5),
            Value::Int(255),
            Value::Int(8),
            Value::Int(5),
            Value::Double(1234.5),
            s("hi"),
        ];
        assert_eq!(
            format_string("%d-%s-%.2f-%x-%o-%b-%e-%X", &args).as_deref(),
            Ok("1-a-1.50-ff-10-101-1.234500e+03-6869")
        );
        assert_eq!(
            format_string("%s", &[Value::Double(1e20)]).as_deref(),
            Ok("100000000000000000000")
        );
        assert_eq!(format_string("%x", &[Value::Int(-255)]).as_deref(), Ok("-ff"));
        assert!(format_string("%5d", &[Value::Int(1)]).is_err_and(|e| e.contains("unrecognized")));
        assert!(format_string("%s %s", &[s("a")]).is_err_and(|e| e == "index 1 out of range"));
        assert!(format_string("%", &[]).is_err_and(|e| e == "unexpected end of string"));
    }

    #[test]
    fn indices_count_code_points() {
        let run = |f: fn(&[Value]) -> EvalResult, a: &[Value]| f(a).map(|v| format!("{v:?}"));
        assert_eq!(run(index_of, &[s("héllo"), s("l")]), Ok("Int(2)".into()));
        assert_eq!(
            run(last_index_of, &[s("abcabc"), s("b"), Value::Int(3)]),
            Ok("Int(1)".into())
        );
        assert_eq!(run(last_index_of, &[s("abc"), s("")]), Ok("Int(3)".into()));
        assert!(char_at(&[s("abc"), Value::Int(4)]).is_err());
        assert!(substring(&[s("abc"), Value::Int(2), Value::Int(1)]).is_err());
        let replaced = replace(&[s("aaa"), s(""), s("b")]).map(|v| format!("{v:?}"));
        assert_eq!(replaced, Ok(format!("{:?}", s("bababab"))));
        let big = "x".repeat(5_000);
        assert!(replace(&[s(&big), s(""), s(&big)]).is_err_and(|e| e.contains("larger than")));
    }
}
