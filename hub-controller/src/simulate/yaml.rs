//! YAML output that YAML 1.1 readers (PyYAML, go-yaml v2, Ruby) read back as the same strings.
//!
//! YAML 1.2 emitters leave `2026-11-22T10:00:00Z`, `yes` or `on` unquoted because 1.2 reads them
//! as strings; a 1.1 reader turns them into a timestamp or a boolean. kubectl (go-yaml) quotes
//! them, and so do we: every string that is not plainly a word is written double-quoted (JSON
//! string syntax, which is valid YAML). The rest of the document comes from the JSON value as is.

use serde_json::Value;

/// Words YAML 1.1 reads as booleans or null.
const YAML11_SPECIAL: [&str; 20] = [
    "y", "yes", "n", "no", "true", "false", "on", "off", "null", "~", "Y", "YES", "N", "NO", "TRUE", "FALSE",
    "ON", "OFF", "NULL", "Null",
];

/// Whether `s` can be written plain and still reads back as this string in YAML 1.1 and 1.2.
fn plain_ok(s: &str) -> bool {
    let mut chars = s.chars();
    let Some(first) = chars.next() else {
        return false;
    };
    (first.is_ascii_alphabetic() || first == '_' || first == '/')
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'))
        && !YAML11_SPECIAL.contains(&s)
        && !YAML11_SPECIAL.iter().any(|w| w.eq_ignore_ascii_case(s))
}

fn scalar(s: &str) -> String {
    if plain_ok(s) {
        s.to_string()
    } else {
        serde_json::to_string(s).unwrap_or_else(|_| format!("{s:?}"))
    }
}

fn inline(v: &Value) -> Option<String> {
    Some(match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => scalar(s),
        Value::Array(a) if a.is_empty() => "[]".into(),
        Value::Object(o) if o.is_empty() => "{}".into(),
        _ => return None,
    })
}

fn write(v: &Value, indent: usize, out: &mut String) {
    let pad = " ".repeat(indent);
    match v {
        Value::Object(map) => {
            for (k, child) in map {
                match inline(child) {
                    Some(text) => out.push_str(&format!("{pad}{}: {text}\n", scalar(k))),
                    None => {
                        out.push_str(&format!("{pad}{}:\n", scalar(k)));
                        let next = if child.is_array() { indent } else { indent + 2 };
                        write(child, next, out);
                    }
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                match inline(item) {
                    Some(text) => out.push_str(&format!("{pad}- {text}\n")),
                    None => {
                        // The first line of the item follows the dash.
                        let mut inner = String::new();
                        write(item, indent + 2, &mut inner);
                        let trimmed = inner.get(indent + 2..).unwrap_or("");
                        out.push_str(&format!("{pad}- {trimmed}"));
                    }
                }
            }
        }
        other => {
            if let Some(text) = inline(other) {
                out.push_str(&format!("{pad}{text}\n"));
            }
        }
    }
}

/// The YAML document for `value`.
pub fn to_string(value: &Value) -> String {
    let mut out = String::new();
    match inline(value) {
        Some(text) => {
            out.push_str(&text);
            out.push('\n');
        }
        None => write(value, 0, &mut out),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps_and_yaml_1_1_words_are_quoted_like_kubectl() {
        let v = json!({"time": "2026-11-22T10:00:00Z", "word": "on", "name": "east-1",
            "n": 3, "list": ["yes", "c-1"], "nested": [{"a": "1", "b": []}], "empty": ""});
        let text = to_string(&v);
        assert!(text.contains("time: \"2026-11-22T10:00:00Z\"\n"), "{text}");
        assert!(text.contains("word: \"on\"\n"), "{text}");
        assert!(text.contains("name: east-1\n"), "{text}");
        assert!(text.contains("- \"yes\"\n"), "{text}");
        // A YAML reader gets the same value back.
        let back: Value = serde_norway::from_str(&text).expect("valid YAML");
        assert_eq!(back, v);
    }
}
