//! The config spec hash OCM compares between a ManagedClusterAddOn and its ManifestWork.
//!
//! Upstream (`GetSpecHash` in addon-framework) hashes the config object with `apiVersion`, `kind`,
//! `metadata` and `status` removed, encoded the way Go's `encoding/json` does: object keys sorted,
//! compact, `<`, `>`, `&`, U+2028 and U+2029 escaped. The hash is the lowercase hex SHA-256 of those
//! bytes. We reproduce the encoding exactly so our hashes equal the ones OCM components compute.

use serde_json::Value;
use std::fmt::Write;

/// SHA-256 (hex) of a config object as the API server returned it, ignoring its metadata and status.
pub fn spec_hash(object: &Value) -> String {
    let mut trimmed = object.clone();
    if let Value::Object(map) = &mut trimmed {
        for key in ["apiVersion", "kind", "metadata", "status"] {
            map.remove(key);
        }
    }
    go_json_sha256(&trimmed)
}

/// SHA-256 (hex) of a value's Go-style JSON encoding: the digests OCM and we compare.
pub fn go_json_sha256(value: &Value) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, go_json(value).as_bytes());
    digest
        .as_ref()
        .iter()
        .fold(String::with_capacity(64), |mut hex, byte| {
            let _ = write!(hex, "{byte:02x}");
            hex
        })
}

/// [`spec_hash`] of a config object read through the dynamic API (exactly what the server holds).
pub fn spec_hash_of_object(object: &kube::api::DynamicObject) -> String {
    serde_json::to_value(object)
        .map(|v| spec_hash(&v))
        .unwrap_or_default()
}

/// Encodes a JSON value byte-for-byte as Go's `json.Marshal` encodes the same unstructured object.
pub fn go_json(value: &Value) -> String {
    let mut out = String::new();
    encode(value, &mut out);
    out
}

fn encode(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => encode_number(n, out),
        Value::String(s) => encode_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                encode(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            // Go sorts map keys by their bytes; do it explicitly, whatever order the map keeps.
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort_unstable();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                encode_string(key, out);
                out.push(':');
                encode(&map[key], out);
            }
            out.push('}');
        }
    }
}

/// Integers print as decimal (unstructured keeps them as int64); other numbers follow Go's float64
/// format: shortest round-trip digits, exponent form below 1e-6 and from 1e21 on.
fn encode_number(n: &serde_json::Number, out: &mut String) {
    if n.is_i64() || n.is_u64() {
        out.push_str(&n.to_string());
        return;
    }
    let Some(f) = n.as_f64() else {
        out.push_str(&n.to_string());
        return;
    };
    let abs = f.abs();
    if abs != 0.0 && !(1e-6..1e21).contains(&abs) {
        // Rust prints `1e21` / `1e-7`; Go prints `1e+21` / `1e-07` then trims to `1e-7`.
        let text = format!("{f:e}");
        match text.split_once('e') {
            Some((mantissa, exp)) if !exp.starts_with('-') => {
                let _ = write!(out, "{mantissa}e+{exp}");
            }
            _ => out.push_str(&text),
        }
    } else {
        let _ = write!(out, "{f}");
    }
}

fn encode_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_encoding_sorts_keys_and_escapes_html() {
        let v = json!({"z": 1, "a": {"y": "<b>&</b>", "b": [true, null]}, "A": "line\nbreak\u{1}"});
        assert_eq!(
            go_json(&v),
            r#"{"A":"line\nbreak\u0001","a":{"b":[true,null],"y":"\u003cb\u003e\u0026\u003c/b\u003e"},"z":1}"#
        );
    }

    #[test]
    fn go_encoding_of_floats() {
        assert_eq!(go_json(&json!(1.5)), "1.5");
        assert_eq!(go_json(&json!(1e21)), "1e+21");
        assert_eq!(go_json(&json!(1.25e-7)), "1.25e-7");
        assert_eq!(go_json(&json!(-3)), "-3");
        assert_eq!(go_json(&json!("\u{2028}")), r#""\u2028""#);
    }

    #[test]
    fn hash_ignores_metadata_and_status_only() {
        let a = json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "a", "resourceVersion": "1"},
                       "spec": {"customizedVariables": [{"name": "X", "value": "1"}]}});
        let b = json!({"metadata": {"name": "b", "generation": 7}, "status": {"x": 1},
                       "spec": {"customizedVariables": [{"value": "1", "name": "X"}]}});
        assert_eq!(spec_hash(&a), spec_hash(&b));
        let c = json!({"spec": {"customizedVariables": [{"name": "X", "value": "2"}]}});
        assert_ne!(spec_hash(&a), spec_hash(&c));
    }

    #[test]
    fn hash_is_sha256_of_the_go_encoding() {
        // SHA-256 of the bytes `{"spec":{}}`, checked with `printf '{"spec":{}}' | sha256sum`.
        assert_eq!(
            spec_hash(&json!({"kind": "AddOnDeploymentConfig", "spec": {}})),
            "53aa778a9b137a0ca7ab79937d069870b14440dae5922f51d940ffa4b178d5cb"
        );
    }
}
