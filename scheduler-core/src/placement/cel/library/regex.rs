//! Regular expressions: CEL's standard `matches` and the Kubernetes `find`/`findAll`. Matching is
//! linear-time and memory-bounded (the `regex` crate, RE2 syntax like Go's `regexp`); the perl
//! classes `\d`, `\s`, `\w` and `\b` are ASCII-only as in RE2. A constant pattern is compiled
//! once when the expression is compiled; an invalid constant pattern fails the `find`/`findAll`
//! program at instantiation, as the Kubernetes library's regex optimisation does, but only fails
//! `matches` when it runs, as cel-go does.

use super::super::types::Type;
use super::super::value::{EvalResult, Value};
use super::{Library, args::mismatch};
use regex::{Regex, RegexBuilder};
use std::sync::Arc;

/// Bounds on a compiled pattern, so a hostile pattern cannot take much memory or time to build.
const SIZE_LIMIT: usize = 1 << 21;
const NEST_LIMIT: u32 = 100;

pub fn declare(lib: &mut Library) {
    use Type::*;
    lib.global("matches", vec![String, String], Bool, matches);
    lib.member("matches", vec![String, String], Bool, matches);
    lib.member("find", vec![String, String], String, find);
    lib.member("findAll", vec![String, String], Type::list(String), find_all);
    lib.member("findAll", vec![String, String, Int], Type::list(String), find_all);
}

/// RE2's ASCII perl classes, in the `regex` crate's syntax (which makes them Unicode otherwise).
fn ascii_perl_classes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut in_class = false;
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(next) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let replacement = match (next, in_class) {
                    ('d', true) => Some("0-9"),
                    ('w', true) => Some("0-9A-Za-z_"),
                    ('s', true) => Some("\\t\\n\\x0C\\r "),
                    ('d' | 'D' | 'w' | 'W' | 's' | 'S' | 'b' | 'B', false) => None,
                    _ => {
                        out.push('\\');
                        out.push(next);
                        continue;
                    }
                };
                match replacement {
                    Some(r) => out.push_str(r),
                    None => {
                        let class = match next {
                            'd' => "[0-9]",
                            'D' => "[^0-9]",
                            'w' => "[0-9A-Za-z_]",
                            'W' => "[^0-9A-Za-z_]",
                            's' => "[\\t\\n\\x0C\\r ]",
                            'S' => "[^\\t\\n\\x0C\\r ]",
                            'b' => "(?-u:\\b)",
                            _ => "(?-u:\\B)",
                        };
                        out.push_str(class);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push(c);
                // A `]` (after an optional `^`) right after the opening bracket is a literal.
                if chars.peek() == Some(&'^') {
                    out.push('^');
                    chars.next();
                }
                if chars.peek() == Some(&']') {
                    out.push_str("\\]");
                    chars.next();
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

/// Compiles `pattern`; the error reads like Go's (`error parsing regexp: ...`).
pub fn compile(pattern: &str) -> Result<Regex, String> {
    RegexBuilder::new(&ascii_perl_classes(pattern))
        .size_limit(SIZE_LIMIT)
        .dfa_size_limit(SIZE_LIMIT)
        .nest_limit(NEST_LIMIT)
        .build()
        .map_err(|e| {
            let text = e.to_string();
            let reason = text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("invalid pattern")
                .trim_start_matches("error: ")
                .to_string();
            format!("error parsing regexp: {reason}: `{pattern}`")
        })
}

/// For a pattern that only accepts whole strings from a fixed set, `^lit$`, `^(a|b)$` or
/// `^(?:a|b)$` with plain literals (ASCII letters, digits, `-`, `_`, `/`), that set: matching it
/// is comparing strings, with the same answer as the regular expression.
pub fn whole_match_literals(pattern: &str) -> Option<Vec<Arc<str>>> {
    let inner = pattern.strip_prefix('^')?.strip_suffix('$')?;
    let alternatives = match inner.strip_prefix("(?:").or_else(|| inner.strip_prefix('(')) {
        Some(group) => group.strip_suffix(')')?,
        None => inner,
    };
    let plain = |s: &str| {
        s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'/'))
    };
    let literals: Vec<&str> = alternatives.split('|').collect();
    // Without a group, `^a|b$` would mean `(^a)|(b$)`: only a single literal is whole.
    if literals.len() > 1 && alternatives.len() == inner.len() {
        return None;
    }
    literals
        .iter()
        .all(|l| plain(l))
        .then(|| literals.into_iter().map(Arc::from).collect())
}

fn text_and_pattern<'v>(f: &str, a: &'v [Value]) -> Result<(&'v str, Regex), String> {
    match a {
        [Value::String(s), Value::String(p), ..] => Ok((s, compile(p)?)),
        _ => Err(mismatch(f, a)),
    }
}

fn matches(a: &[Value]) -> EvalResult {
    let (s, re) = text_and_pattern("matches", a)?;
    Ok(Value::Bool(re.is_match(s)))
}

fn find(a: &[Value]) -> EvalResult {
    let (s, re) = text_and_pattern("find", a)?;
    Ok(find_with(&re, s))
}

fn find_all(a: &[Value]) -> EvalResult {
    let (s, re) = text_and_pattern("findAll", a)?;
    match a.get(2) {
        None => Ok(find_all_with(&re, s, -1)),
        Some(Value::Int(n)) => Ok(find_all_with(&re, s, *n)),
        Some(_) => Err(mismatch("findAll", a)),
    }
}

pub fn find_with(re: &Regex, s: &str) -> Value {
    Value::str(re.find(s).map_or("", |m| m.as_str()))
}

/// At most `n` matches (`n < 0`: all), as Go's `FindAllString`.
pub fn find_all_with(re: &Regex, s: &str, n: i64) -> Value {
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    Value::list(
        re.find_iter(s)
            .take(limit)
            .map(|m| Value::str(m.as_str()))
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perl_classes_are_ascii_like_re2() {
        let re = compile(r"^\d+$").expect("valid");
        assert!(re.is_match("123"));
        assert!(!re.is_match("١٢٣"), "Arabic-Indic digits are not \\d in RE2");
        let re = compile(r"^[\d_]+$").expect("valid");
        assert!(re.is_match("1_2"));
        assert!(compile("[]a]").expect("valid").is_match("]"));
        assert!(compile("(?i)prod").expect("valid").is_match("PROD"));
        let err = compile("[").expect_err("invalid");
        assert!(err.starts_with("error parsing regexp: "), "{err}");
    }

    #[test]
    fn literal_sets_match_as_the_pattern_does() {
        let inputs = [
            "", "prod", "staging", "prod\n", "xprod", "prodx", "PROD", "a", "b", "a/b-c_d",
        ];
        for pattern in [
            "^prod$",
            "^(prod|staging)$",
            "^(?:prod|staging|)$",
            "^(a|b)$",
            "^a/b-c_d$",
            "^()$",
        ] {
            let literals =
                whole_match_literals(pattern).unwrap_or_else(|| panic!("{pattern} is a literal set"));
            let re = compile(pattern).expect("valid");
            for input in inputs {
                let by_literals = literals.iter().any(|l| **l == *input);
                assert_eq!(by_literals, re.is_match(input), "{pattern} on {input:?}");
            }
        }
        for pattern in [
            "^a|b$",
            "^(a|b)",
            "(a|b)$",
            "^(a.b)$",
            "^(a|b)+$",
            "^((a|b))$",
            "^(?i)a$",
            "^a\\$",
            "^[ab]$",
        ] {
            assert_eq!(whole_match_literals(pattern), None, "{pattern}");
        }
    }

    #[test]
    fn hostile_patterns_are_refused_not_built() {
        assert!(compile("(((a{100}){100}){100})").is_err());
        let deep = format!("{}a{}", "(".repeat(500), ")".repeat(500));
        assert!(compile(&deep).is_err());
    }
}
