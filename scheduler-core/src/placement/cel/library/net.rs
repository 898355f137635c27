//! The Kubernetes `ip` and `cidr` libraries, over the [`IpAddr`]s and [`Cidr`]s the value layer
//! parses.

use super::super::types::{Opaque as OpaqueType, Type};
use super::super::value::net::{Cidr, parse_cidr, parse_ip};
use super::super::value::{EvalResult, Object, Value};
use super::{Library, args::mismatch, opaque};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

pub fn declare(lib: &mut Library) {
    use Type::*;
    let ip = || opaque(OpaqueType::Ip);
    let cidr = || opaque(OpaqueType::Cidr);
    lib.global("ip", vec![String], ip(), to_ip);
    lib.member("family", vec![ip()], Int, family);
    lib.global("ip.isCanonical", vec![String], Bool, is_canonical);
    lib.member("isUnspecified", vec![ip()], Bool, is_unspecified);
    lib.member("isLoopback", vec![ip()], Bool, is_loopback);
    lib.member("isLinkLocalMulticast", vec![ip()], Bool, is_link_local_multicast);
    lib.member("isLinkLocalUnicast", vec![ip()], Bool, is_link_local_unicast);
    lib.member("isGlobalUnicast", vec![ip()], Bool, is_global_unicast);
    lib.global("isIP", vec![String], Bool, is_ip);
    lib.global("string", vec![ip()], String, to_string);
    lib.global("cidr", vec![String], cidr(), to_cidr);
    lib.member("containsIP", vec![cidr(), String], Bool, contains_ip);
    lib.member("containsIP", vec![cidr(), ip()], Bool, contains_ip);
    lib.member("containsCIDR", vec![cidr(), String], Bool, contains_cidr);
    lib.member("containsCIDR", vec![cidr(), cidr()], Bool, contains_cidr);
    lib.member("ip", vec![cidr()], ip(), cidr_ip);
    lib.member("prefixLength", vec![cidr()], Int, prefix_length);
    lib.member("masked", vec![cidr()], cidr(), masked);
    lib.global("isCIDR", vec![String], Bool, is_cidr);
    lib.global("string", vec![cidr()], String, to_string);
}

fn ip_arg(f: &str, a: &[Value], i: usize) -> Result<IpAddr, String> {
    match a.get(i) {
        Some(Value::String(s)) => parse_ip(s),
        Some(Value::Object(o)) => match &**o {
            Object::Ip(ip) => Ok(*ip),
            _ => Err(mismatch(f, a)),
        },
        _ => Err(mismatch(f, a)),
    }
}

fn cidr_arg(f: &str, a: &[Value], i: usize) -> Result<Cidr, String> {
    match a.get(i) {
        Some(Value::String(s)) => parse_cidr(s),
        Some(Value::Object(o)) => match &**o {
            Object::Cidr(c) => Ok(*c),
            _ => Err(mismatch(f, a)),
        },
        _ => Err(mismatch(f, a)),
    }
}

fn ip_value(ip: IpAddr) -> Value {
    Value::object(Object::Ip(ip))
}

fn to_ip(a: &[Value]) -> EvalResult {
    ip_arg("ip", a, 0).map(ip_value)
}

fn is_ip(a: &[Value]) -> EvalResult {
    match a {
        [Value::String(s)] => Ok(Value::Bool(parse_ip(s).is_ok())),
        _ => Err(mismatch("isIP", a)),
    }
}

fn is_canonical(a: &[Value]) -> EvalResult {
    match a {
        [Value::String(s)] => parse_ip(s).map(|ip| Value::Bool(ip.to_string() == **s)),
        _ => Err(mismatch("ip.isCanonical", a)),
    }
}

fn ip_predicate(f: &str, a: &[Value], v4: fn(Ipv4Addr) -> bool, v6: fn(Ipv6Addr) -> bool) -> EvalResult {
    Ok(Value::Bool(match ip_arg(f, a, 0)? {
        IpAddr::V4(ip) => v4(ip),
        IpAddr::V6(ip) => v6(ip),
    }))
}

fn family(a: &[Value]) -> EvalResult {
    Ok(Value::Int(if ip_arg("family", a, 0)?.is_ipv4() { 4 } else { 6 }))
}

fn is_unspecified(a: &[Value]) -> EvalResult {
    ip_predicate(
        "isUnspecified",
        a,
        |ip| ip.is_unspecified(),
        |ip| ip.is_unspecified(),
    )
}

fn is_loopback(a: &[Value]) -> EvalResult {
    ip_predicate("isLoopback", a, |ip| ip.is_loopback(), |ip| ip.is_loopback())
}

fn is_link_local_multicast(a: &[Value]) -> EvalResult {
    ip_predicate(
        "isLinkLocalMulticast",
        a,
        |ip| ip.octets()[..3] == [224, 0, 0],
        |ip| ip.segments()[0] & 0xff0f == 0xff02,
    )
}

fn is_link_local_unicast(a: &[Value]) -> EvalResult {
    ip_predicate(
        "isLinkLocalUnicast",
        a,
        |ip| ip.octets()[..2] == [169, 254],
        |ip| ip.segments()[0] & 0xffc0 == 0xfe80,
    )
}

/// Go's `IsGlobalUnicast`: anything but unspecified, loopback, multicast, link-local unicast
/// and (IPv4) the broadcast address; private ranges count as global.
fn is_global_unicast(a: &[Value]) -> EvalResult {
    ip_predicate(
        "isGlobalUnicast",
        a,
        |ip| {
            !(ip.is_unspecified()
                || ip.is_loopback()
                || ip.is_multicast()
                || ip.is_broadcast()
                || ip.octets()[..2] == [169, 254])
        },
        |ip| {
            !(ip.is_unspecified()
                || ip.is_loopback()
                || ip.is_multicast()
                || ip.segments()[0] & 0xffc0 == 0xfe80)
        },
    )
}

fn to_string(a: &[Value]) -> EvalResult {
    match a.first() {
        Some(Value::Object(o)) => match &**o {
            Object::Ip(ip) => Ok(Value::str(&ip.to_string())),
            Object::Cidr(c) => Ok(Value::str(&c.to_string())),
            _ => Err(mismatch("string", a)),
        },
        _ => Err(mismatch("string", a)),
    }
}

fn to_cidr(a: &[Value]) -> EvalResult {
    cidr_arg("cidr", a, 0).map(|c| Value::object(Object::Cidr(c)))
}

fn is_cidr(a: &[Value]) -> EvalResult {
    match a {
        [Value::String(s)] => Ok(Value::Bool(parse_cidr(s).is_ok())),
        _ => Err(mismatch("isCIDR", a)),
    }
}

fn contains_ip(a: &[Value]) -> EvalResult {
    let cidr = cidr_arg("containsIP", a, 0)?;
    Ok(Value::Bool(cidr.contains(ip_arg("containsIP", a, 1)?)))
}

/// Go's `Overlaps` and a prefix no longer than the other's.
fn contains_cidr(a: &[Value]) -> EvalResult {
    let outer = cidr_arg("containsCIDR", a, 0)?;
    let inner = cidr_arg("containsCIDR", a, 1)?;
    let same_family = outer.addr().is_ipv4() == inner.addr().is_ipv4();
    Ok(Value::Bool(
        same_family && outer.bits() <= inner.bits() && outer.contains(inner.masked().addr()),
    ))
}

fn cidr_ip(a: &[Value]) -> EvalResult {
    cidr_arg("ip", a, 0).map(|c| ip_value(c.addr()))
}

fn prefix_length(a: &[Value]) -> EvalResult {
    cidr_arg("prefixLength", a, 0).map(|c| Value::Int(i64::from(c.bits())))
}

fn masked(a: &[Value]) -> EvalResult {
    cidr_arg("masked", a, 0).map(|c| Value::object(Object::Cidr(c.masked())))
}
