//! The Kubernetes `semver` library at the version OCM's environment has (no normalising
//! variants: `isSemver(s, true)` does not compile), over a [`Semver`].

use super::super::types::{Opaque as OpaqueType, Type};
use super::super::value::semver::Semver;
use super::super::value::{EvalResult, Object, Value};
use super::{Library, Ordered, args::mismatch, opaque};
use std::cmp::Ordering;

pub fn declare(lib: &mut Library) {
    use Type::*;
    let v = || opaque(OpaqueType::Semver);
    lib.global("semver", vec![String], v(), to_semver);
    lib.global("isSemver", vec![String], Bool, is_semver);
    lib.comparisons::<Semver>(v());
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

impl Ordered for Semver {
    fn at<'v>(f: &str, a: &'v [Value], i: usize) -> Result<&'v Self, String> {
        version(f, a, i)
    }

    fn order(&self, other: &Self) -> Ordering {
        self.cmp(other)
    }
}

fn component(f: &str, a: &[Value], pick: fn(&Semver) -> u64) -> EvalResult {
    let v = version(f, a, 0)?;
    i64::try_from(pick(v))
        .map(Value::Int)
        .map_err(|_| format!("{f}: version component out of int range"))
}

fn major(a: &[Value]) -> EvalResult {
    component("major", a, Semver::major)
}

fn minor(a: &[Value]) -> EvalResult {
    component("minor", a, Semver::minor)
}

fn patch(a: &[Value]) -> EvalResult {
    component("patch", a, Semver::patch)
}
