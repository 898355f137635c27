//! YAML for people and for YAML 1.1 readers alike, from a JSON value, quoted the way kubectl quotes.
//!
//! A YAML 1.2 emitter writes `2026-11-23T10:00:00Z`, `yes` or `0755` bare, since 1.2 reads them back as
//! strings; PyYAML, go-yaml v2 and Ruby (YAML 1.1) read a timestamp, a boolean, an octal number.
//! kubectl (go-yaml) quotes such strings, and so does [`to_string`]: a string is written bare only
//! when it is a plain identifier-like word no YAML version reads as anything else; every other string
//! is written as a JSON string, which is valid YAML with the same meaning everywhere.

use serde_json::Value;

/// Words YAML 1.1 reads as booleans or null (compared without regard to case).
const YAML_1_1_WORDS: [&str; 11] = [
    "y", "yes", "n", "no", "true", "false", "on", "off", "null", "nan", "inf",
];

/// Whether `text` may be written bare: it starts with a letter and holds only letters, digits, `-`,
/// `_`, `.` and `/` (so no number, date, time or indicator can be read into it), and is not a word YAML
/// 1.1 gives a meaning.
fn bare(text: &str) -> bool {
    text.starts_with(|c: char| c.is_ascii_alphabetic())
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && !YAML_1_1_WORDS.iter().any(|w| w.eq_ignore_ascii_case(text))
}

fn string(text: &str) -> String {
    if bare(text) {
        text.to_owned()
    } else {
        // JSON string syntax is YAML's double-quoted style.
        Value::String(text.to_owned()).to_string()
    }
}

/// The value on one line, when it fits there (scalars and empty collections).
fn one_line(value: &Value) -> Option<String> {
    match value {
        Value::Null => Some("null".to_owned()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        Value::String(s) => Some(string(s)),
        Value::Array(items) if items.is_empty() => Some("[]".to_owned()),
        Value::Object(map) if map.is_empty() => Some("{}".to_owned()),
        Value::Array(_) | Value::Object(_) => None,
    }
}

/// Block lines for a non-empty collection, each indented by `indent` spaces.
fn block(value: &Value, indent: usize, lines: &mut Vec<String>) {
    let pad = " ".repeat(indent);
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let key = string(key);
                match one_line(child) {
                    Some(text) => lines.push(format!("{pad}{key}: {text}")),
                    None => {
                        lines.push(format!("{pad}{key}:"));
                        // Sequences under a key sit at the key's indentation, as kubectl writes them.
                        block(child, if child.is_array() { indent } else { indent + 2 }, lines);
                    }
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                match one_line(item) {
                    Some(text) => lines.push(format!("{pad}- {text}")),
                    None => {
                        // The item's first line follows the dash; the rest line up under it.
                        let first = lines.len();
                        block(item, indent + 2, lines);
                        if let Some(line) = lines.get_mut(first) {
                            line.replace_range(indent..indent + 1, "-");
                        }
                    }
                }
            }
        }
        scalar => lines.extend(one_line(scalar).map(|text| format!("{pad}{text}"))),
    }
}

/// The YAML document for `value`, ending in a newline.
pub fn to_string(value: &Value) -> String {
    let mut lines = Vec::new();
    match one_line(value) {
        Some(text) => lines.push(text),
        None => block(value, 0, &mut lines),
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn timestamps_and_yaml_1_1_words_are_quoted_the_rest_is_bare() {
        let value = json!({
            "metadata": {"name": "resource-usage-score", "namespace": "c1", "labels": {}},
            "status": {
                "conditions": [{"lastTransitionTime": "2026-11-23T10:00:00Z", "status": "True",
                                "message": "a: b; c", "reason": "ScoresPublished"}],
                "scores": [{"name": "cpuAvailable", "value": -20}],
                "validUntil": "2026-11-23T10:01:37Z",
                "words": ["yes", "On", "0755", "", "1.5", "ok", "null", "~"],
                "empty": []
            }
        });
        assert_eq!(
            to_string(&value),
            "\
metadata:
  labels: {}
  name: resource-usage-score
  namespace: c1
status:
  conditions:
  - lastTransitionTime: \"2026-11-23T10:00:00Z\"
    message: \"a: b; c\"
    reason: ScoresPublished
    status: \"True\"
  empty: []
  scores:
  - name: cpuAvailable
    value: -20
  validUntil: \"2026-11-23T10:01:37Z\"
  words:
  - \"yes\"
  - \"On\"
  - \"0755\"
  - \"\"
  - \"1.5\"
  - ok
  - \"null\"
  - \"~\"
"
        );
    }

    #[test]
    fn reads_back_as_the_same_value() {
        let value = json!({"a": [{"b": [1, {"c": "2026-01-01T00:00:00Z"}], "d": "x y"}, "on"], "e": null});
        let text = to_string(&value);
        let read: Value = serde_norway::from_str(&text).expect("valid YAML");
        assert_eq!(read, value, "{text}");
    }
}
