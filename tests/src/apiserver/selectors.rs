//! Label and field selectors, with the syntax and the (narrow) field support of the real server.

use super::status::ApiError;
use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq)]
enum LabelOp {
    Equals(String),
    NotEquals(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
}

/// A parsed `labelSelector`: every requirement must hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct LabelSelector(Vec<(String, LabelOp)>);

/// Splits on commas that are not inside parentheses.
fn split_top_level(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

fn valid_label_key(key: &str) -> bool {
    let (prefix, name) = key.rsplit_once('/').unwrap_or(("", key));
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    let prefix_ok = key.rsplit_once('/').is_none()
        || (!prefix.is_empty()
            && prefix.len() <= 253
            && prefix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.".contains(c)));
    name_ok && prefix_ok
}

fn valid_label_value(value: &str) -> bool {
    value.is_empty()
        || (value.len() <= 63
            && value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && value.starts_with(|c: char| c.is_ascii_alphanumeric())
            && value.ends_with(|c: char| c.is_ascii_alphanumeric()))
}

impl LabelSelector {
    pub(crate) fn parse(text: &str) -> Result<Self, ApiError> {
        let bad = |why: String| ApiError::bad_request(format!("unable to parse requirement: {why}"));
        let mut reqs = Vec::new();
        if text.trim().is_empty() {
            return Ok(Self(reqs));
        }
        for part in split_top_level(text) {
            let part = part.trim();
            let check_key = |k: &str| {
                if valid_label_key(k) {
                    Ok(k.to_string())
                } else {
                    Err(bad(format!("invalid label key \"{k}\"")))
                }
            };
            let check_values = |list: &str| -> Result<Vec<String>, ApiError> {
                let inner = list
                    .trim()
                    .strip_prefix('(')
                    .and_then(|l| l.strip_suffix(')'))
                    .ok_or_else(|| bad(format!("found '{list}', expected: '(' and ')'")))?;
                inner
                    .split(',')
                    .map(|v| {
                        let v = v.trim();
                        if valid_label_value(v) {
                            Ok(v.to_string())
                        } else {
                            Err(bad(format!("invalid label value: \"{v}\"")))
                        }
                    })
                    .collect()
            };
            let req = if let Some(key) = part.strip_prefix('!') {
                (check_key(key.trim())?, LabelOp::DoesNotExist)
            } else if let Some((k, v)) = part.split_once("!=") {
                (check_key(k.trim())?, LabelOp::NotEquals(v.trim().to_string()))
            } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                let v = v.trim();
                if !valid_label_value(v) {
                    return Err(bad(format!("invalid label value: \"{v}\"")));
                }
                (check_key(k.trim())?, LabelOp::Equals(v.to_string()))
            } else if let Some((k, rest)) = part.split_once(" notin ") {
                (check_key(k.trim())?, LabelOp::NotIn(check_values(rest)?))
            } else if let Some((k, rest)) = part.split_once(" in ") {
                (check_key(k.trim())?, LabelOp::In(check_values(rest)?))
            } else {
                (check_key(part)?, LabelOp::Exists)
            };
            reqs.push(req);
        }
        Ok(Self(reqs))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels").and_then(Value::as_object);
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|(key, op)| match op {
            LabelOp::Equals(v) => get(key) == Some(v.as_str()),
            LabelOp::NotEquals(v) => get(key) != Some(v.as_str()),
            LabelOp::In(vs) => get(key).is_some_and(|x| vs.iter().any(|v| v == x)),
            LabelOp::NotIn(vs) => get(key).is_none_or(|x| vs.iter().all(|v| v != x)),
            LabelOp::Exists => get(key).is_some(),
            LabelOp::DoesNotExist => get(key).is_none(),
        })
    }
}

/// A parsed `fieldSelector`: `path=value`, `path==value` or `path!=value`, comma separated.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses and checks every path against what the kind supports (400 `field label not supported`).
    pub(crate) fn parse(text: &str, supported: &[String]) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        if text.trim().is_empty() {
            return Ok(Self(reqs));
        }
        for part in text.split(',') {
            let part = part.trim();
            let (path, equal, value) = if let Some((p, v)) = part.split_once("!=") {
                (p, false, v)
            } else if let Some((p, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (p, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{text}'; can't understand '{part}'"
                )));
            };
            let path = path.trim();
            let known = path == "metadata.name"
                || path == "metadata.namespace"
                || supported.iter().any(|s| s == path);
            if !known {
                return Err(ApiError::bad_request(format!(
                    "field label not supported: {path}"
                )));
            }
            reqs.push((path.to_string(), equal, value.trim().to_string()));
        }
        Ok(Self(reqs))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The name a selector pins with `metadata.name=x`: RBAC then checks `resourceNames` against it.
    pub(crate) fn pinned_name(&self) -> Option<&str> {
        self.0
            .iter()
            .find(|(p, eq, _)| p == "metadata.name" && *eq)
            .map(|(_, _, v)| v.as_str())
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        self.0.iter().all(|(path, equal, value)| {
            let mut node = Some(object);
            for segment in path.split('.') {
                node = node.and_then(|n| n.get(segment));
            }
            let actual = match node {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Bool(b)) => b.to_string(),
                Some(Value::Number(n)) => n.to_string(),
                // Unset booleans the server knows about read as false, everything else as "".
                None if path == "spec.unschedulable" || path == "spec.hostNetwork" => "false".to_string(),
                _ => String::new(),
            };
            (actual == *value) == *equal
        })
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)] // tests fail loudly by design
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_selector_syntax() {
        let obj = json!({"metadata": {"labels": {"app": "a", "tier": "web"}}});
        let ok = |s: &str| LabelSelector::parse(s).unwrap().matches(&obj);
        assert!(ok("app=a"));
        assert!(ok("app==a,tier"));
        assert!(ok("app in (a, b),!missing"));
        assert!(ok("tier notin (db)"));
        assert!(!ok("app!=a"));
        assert!(!ok("missing"));
        assert!(LabelSelector::parse("a b c").is_err());
    }

    #[test]
    fn field_selector_support_is_checked() {
        let obj = json!({"metadata": {"name": "x"}, "spec": {"nodeName": "n1"}});
        let supported = vec!["spec.nodeName".to_string()];
        assert!(
            FieldSelector::parse("spec.nodeName=n1,metadata.name!=y", &supported)
                .unwrap()
                .matches(&obj)
        );
        assert_eq!(
            FieldSelector::parse("spec.other=1", &supported).unwrap_err().code,
            400
        );
    }
}
