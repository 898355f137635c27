//! Reading and writing `metadata` of objects kept as JSON.

use super::store::ObjKey;
use serde_json::{Value, json};

fn text<'a>(object: &'a Value, field: &str) -> &'a str {
    object
        .get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

pub(crate) fn name(object: &Value) -> &str {
    text(object, "name")
}

pub(crate) fn namespace(object: &Value) -> &str {
    text(object, "namespace")
}

pub(crate) fn uid(object: &Value) -> &str {
    text(object, "uid")
}

pub(crate) fn resource_version(object: &Value) -> &str {
    text(object, "resourceVersion")
}

pub(crate) fn key(object: &Value) -> ObjKey {
    (namespace(object).to_string(), name(object).to_string())
}

pub(crate) fn deleting(object: &Value) -> bool {
    object
        .pointer("/metadata/deletionTimestamp")
        .is_some_and(|v| !v.is_null())
}

pub(crate) fn finalizers(object: &Value) -> Vec<String> {
    object
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect())
        .unwrap_or_default()
}

pub(crate) fn set_finalizers(object: &mut Value, finalizers: &[String]) {
    if let Some(m) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        if finalizers.is_empty() {
            m.remove("finalizers");
        } else {
            m.insert("finalizers".into(), json!(finalizers));
        }
    }
}

/// The current time as Kubernetes writes `metav1.Time`: RFC 3339 in UTC, whole seconds.
pub(crate) fn now() -> String {
    let seconds = jiff::Timestamp::now().as_second();
    jiff::Timestamp::from_second(seconds)
        .map(|t| t.to_string())
        .unwrap_or_default()
}

/// Whether `name` is a lowercase RFC 1123 subdomain (most object names).
pub(crate) fn is_dns_subdomain(name: &str) -> bool {
    name.len() <= 253 && !name.is_empty() && name.split('.').all(|label| is_label_shaped(label, 253))
}

/// Whether `name` is a valid path segment name (the rule for RBAC object names).
pub(crate) fn is_path_segment(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '%'])
}

/// Whether `name` is a lowercase RFC 1123 label (namespace names).
pub(crate) fn is_dns_label(name: &str) -> bool {
    is_label_shaped(name, 63)
}

fn is_label_shaped(label: &str, max: usize) -> bool {
    !label.is_empty()
        && label.len() <= max
        && label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

/// A small non-cryptographic generator for uids, generated names and tokens (SplitMix64).
pub(crate) struct Ids(u64);

impl Ids {
    pub(crate) fn new() -> Self {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0x9e37_79b9_7f4a_7c15);
        Self(seed ^ u64::from(std::process::id()).rotate_left(32))
    }

    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A version-4-shaped UUID.
    pub(crate) fn uid(&mut self) -> String {
        let (a, b) = (self.next(), self.next());
        let b = (b & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
        let a = (a & 0xffff_ffff_ffff_0fff) | 0x0000_0000_0000_4000;
        format!(
            "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
            a >> 32,
            (a >> 16) & 0xffff,
            a & 0xffff,
            b >> 48,
            b & 0xffff_ffff_ffff
        )
    }

    /// The 5-character suffix `generateName` gets, from the same alphabet as the server's.
    pub(crate) fn name_suffix(&mut self) -> String {
        const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        (0..5)
            .map(|_| ALPHABET[(self.next() % ALPHABET.len() as u64) as usize] as char)
            .collect()
    }

    pub(crate) fn token(&mut self) -> String {
        format!("{:016x}{:016x}", self.next(), self.next())
    }
}
