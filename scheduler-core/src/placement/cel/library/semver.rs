//! The Kubernetes `semver` library at the version OCM's environment has (no normalising
//! variants: `isSemver(s, true)` does not compile). Versions parse strictly as Semantic
//! Versioning 2.0.0 (`MAJOR.MINOR.PATCH[-pre][+build]`, no leading zeros, no `v` prefix) and
//! order by its precedence rules, build metadata ignored.

use super::super::types::{Opaque as OpaqueType, Type};
use super::super::value::{EvalResult, Object, Value};
use super::{Library, args::mismatch, opaque};
use std::cmp::Ordering;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Identifier {
    Numeric(u64),
    Text(String),
}

#[derive(Clone, Debug)]
pub struct Semver {
    major: u64,
    minor: u64,
    patch: u64,
    pre: Vec<Identifier>,
}

fn numeric(part: &str, what: &str) -> Result<u64, String> {
    if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("Invalid character(s) found in {what} number {part:?}"));
    }
    if part.len() > 1 && part.starts_with('0') {
        return Err(format!("{what} number must not contain leading zeroes {part:?}"));
    }
    part.parse()
        .map_err(|_| format!("{what} number {part:?} is too large"))
}

fn identifiers_ok(s: &str) -> bool {
    s.split('.')
        .all(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'))
}

impl Semver {
    pub fn parse(s: &str) -> Result<Semver, String> {
        let (version, build) = match s.split_once('+') {
            Some((v, b)) => (v, Some(b)),
            None => (s, None),
        };
        if build.is_some_and(|b| !identifiers_ok(b)) {
            return Err(format!("Invalid build metadata in {s:?}"));
        }
        let (core, pre) = match version.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (version, None),
        };
        let parts: Vec<&str> = core.split('.').collect();
        let [major, minor, patch] = parts.as_slice() else {
            return Err("No Major.Minor.Patch elements found".into());
        };
        let mut semver = Semver {
            major: numeric(major, "Major")?,
            minor: numeric(minor, "Minor")?,
            patch: numeric(patch, "Patch")?,
            pre: Vec::new(),
        };
        if let Some(pre) = pre {
            if !identifiers_ok(pre) {
                return Err(format!("Invalid prerelease version in {s:?}"));
            }
            for id in pre.split('.') {
                semver.pre.push(if id.bytes().all(|b| b.is_ascii_digit()) {
                    Identifier::Numeric(numeric(id, "Prerelease")?)
                } else {
                    Identifier::Text(id.to_string())
                });
            }
        }
        Ok(semver)
    }

    /// Semantic Versioning precedence.
    pub fn cmp(&self, other: &Semver) -> Ordering {
        let core = (self.major, self.minor, self.patch).cmp(&(other.major, other.minor, other.patch));
        if core != Ordering::Equal {
            return core;
        }
        match (self.pre.is_empty(), other.pre.is_empty()) {
            (true, true) => return Ordering::Equal,
            (true, false) => return Ordering::Greater,
            (false, true) => return Ordering::Less,
            _ => {}
        }
        for (a, b) in self.pre.iter().zip(&other.pre) {
            let o = match (a, b) {
                (Identifier::Numeric(x), Identifier::Numeric(y)) => x.cmp(y),
                (Identifier::Numeric(_), Identifier::Text(_)) => Ordering::Less,
                (Identifier::Text(_), Identifier::Numeric(_)) => Ordering::Greater,
                (Identifier::Text(x), Identifier::Text(y)) => x.cmp(y),
            };
            if o != Ordering::Equal {
                return o;
            }
        }
        self.pre.len().cmp(&other.pre.len())
    }
}

pub fn declare(lib: &mut Library) {
    use Type::*;
    let v = || opaque(OpaqueType::Semver);
    lib.global("semver", vec![String], v(), to_semver);
    lib.global("isSemver", vec![String], Bool, is_semver);
    lib.member("isGreaterThan", vec![v(), v()], Bool, is_greater_than);
    lib.member("isLessThan", vec![v(), v()], Bool, is_less_than);
    lib.member("compareTo", vec![v(), v()], Int, compare_to);
    lib.member("major", vec![v()], Int, major);
    lib.member("minor", vec![v()], Int, minor);
    lib.member("patch", vec![v()], Int, patch);
}

fn version<'v>(f: &str, a: &'v [Value], i: usize) -> Result<&'v Semver, String> {
    match a.get(i) {
        Some(Value::Object(o)) => match &**o {
            Object::Semver(v) => Ok(v),
            _ => Err(mismatch(f, a)),
        },
        _ => Err(mismatch(f, a)),
    }
}

fn to_semver(a: &[Value]) -> EvalResult {
    match a {
        [Value::String(s)] => Semver::parse(s).map(|v| Value::object(Object::Semver(v))),
        _ => Err(mismatch("semver", a)),
    }
}

fn is_semver(a: &[Value]) -> EvalResult {
    match a {
        [Value::String(s)] => Ok(Value::Bool(Semver::parse(s).is_ok())),
        _ => Err(mismatch("isSemver", a)),
    }
}

fn ordering(f: &str, a: &[Value]) -> Result<Ordering, String> {
    Ok(version(f, a, 0)?.cmp(version(f, a, 1)?))
}

fn is_greater_than(a: &[Value]) -> EvalResult {
    ordering("isGreaterThan", a).map(|o| Value::Bool(o.is_gt()))
}

fn is_less_than(a: &[Value]) -> EvalResult {
    ordering("isLessThan", a).map(|o| Value::Bool(o.is_lt()))
}

fn compare_to(a: &[Value]) -> EvalResult {
    ordering("compareTo", a).map(|o| Value::Int(o as i64))
}

fn component(f: &str, a: &[Value], pick: fn(&Semver) -> u64) -> EvalResult {
    let v = version(f, a, 0)?;
    i64::try_from(pick(v))
        .map(Value::Int)
        .map_err(|_| format!("{f}: version component out of int range"))
}

fn major(a: &[Value]) -> EvalResult {
    component("major", a, |v| v.major)
}

fn minor(a: &[Value]) -> EvalResult {
    component("minor", a, |v| v.minor)
}

fn patch(a: &[Value]) -> EvalResult {
    component("patch", a, |v| v.patch)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Semver {
        Semver::parse(s).expect("valid version")
    }

    #[test]
    fn parses_strictly_and_orders_by_precedence() {
        for bad in [
            "v1.2.3", "1.2", "01.2.3", "1.2.3-", "1.2.3-01", "1.2.3+", "n/a", "1.2.3.4",
        ] {
            assert!(Semver::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(v("1.2.3-rc.1+b").cmp(&v("1.2.3")), Ordering::Less);
        assert_eq!(v("1.2.3-alpha").cmp(&v("1.2.3-alpha.1")), Ordering::Less);
        assert_eq!(v("1.2.3-2").cmp(&v("1.2.3-10")), Ordering::Less);
        assert_eq!(v("1.2.3-alpha").cmp(&v("1.2.3-2")), Ordering::Greater);
        assert_eq!(v("1.2.3+x").cmp(&v("1.2.3+y")), Ordering::Equal);
        assert_eq!(v("1.29.4").cmp(&v("1.30.0")), Ordering::Less);
    }
}
