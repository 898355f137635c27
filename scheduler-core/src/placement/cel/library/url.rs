//! The Kubernetes `url` library: `url`, `isURL` and the getters of a [`Url`].

use super::super::types::{Opaque as OpaqueType, Type};
use super::super::value::url::Url;
use super::super::value::{EvalResult, Key, Object, Value};
use super::{Library, args::mismatch, opaque};
use std::sync::Arc;

pub fn declare(lib: &mut Library) {
    use Type::*;
    let url = || opaque(OpaqueType::Url);
    lib.global("url", vec![String], url(), to_url);
    lib.global("isURL", vec![String], Bool, is_url);
    lib.member("getScheme", vec![url()], String, get_scheme);
    lib.member("getHost", vec![url()], String, get_host);
    lib.member("getHostname", vec![url()], String, get_hostname);
    lib.member("getPort", vec![url()], String, get_port);
    lib.member("getEscapedPath", vec![url()], String, get_escaped_path);
    lib.member(
        "getQuery",
        vec![url()],
        Type::map(String, Type::list(String)),
        get_query,
    );
}

fn url_of<'v>(f: &str, a: &'v [Value]) -> Result<&'v Url, String> {
    match a.first() {
        Some(Value::Object(o)) => match &**o {
            Object::Url(u) => Ok(u),
            _ => Err(mismatch(f, a)),
        },
        _ => Err(mismatch(f, a)),
    }
}

fn to_url(a: &[Value]) -> EvalResult {
    match a {
        [Value::String(s)] => Url::parse(s).map(|u| Value::object(Object::Url(u))),
        _ => Err(mismatch("url", a)),
    }
}

fn is_url(a: &[Value]) -> EvalResult {
    match a {
        [Value::String(s)] => Ok(Value::Bool(Url::parse(s).is_ok())),
        _ => Err(mismatch("isURL", a)),
    }
}

fn get_scheme(a: &[Value]) -> EvalResult {
    url_of("getScheme", a).map(|u| Value::str(u.scheme()))
}

fn get_host(a: &[Value]) -> EvalResult {
    url_of("getHost", a).map(|u| Value::str(u.host()))
}

fn get_hostname(a: &[Value]) -> EvalResult {
    url_of("getHostname", a).map(|u| Value::str(u.hostname()))
}

fn get_port(a: &[Value]) -> EvalResult {
    url_of("getPort", a).map(|u| Value::str(u.port()))
}

fn get_escaped_path(a: &[Value]) -> EvalResult {
    url_of("getEscapedPath", a).map(|u| Value::str(&u.escaped_path()))
}

/// Go's `URL.Query()`: each key with its values.
fn get_query(a: &[Value]) -> EvalResult {
    let query = url_of("getQuery", a)?.query();
    Ok(Value::Map(Arc::new(
        query
            .into_iter()
            .map(|(k, v)| {
                let values = v.iter().map(|s| Value::str(s)).collect();
                (Key::String(Arc::from(k)), Value::list(values))
            })
            .collect(),
    )))
}
