//! Typed decoding of one object that, on failure, finds the field at fault.
//!
//! serde's errors say what was wrong ("invalid type: string, expected i64") but not where. The
//! locator removes one child at a time from the object and re-decodes: the child whose removal
//! makes the error go away (or turns it into "missing field `<that child>`") is on the path.

use serde::de::DeserializeOwned;
use serde_json::Value;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// Decodes `value` as `T`; on failure returns the dotted field path and serde's message.
pub fn decode<T: DeserializeOwned>(value: &Value) -> Result<T, (String, String)> {
    match T::deserialize(value) {
        Ok(t) => Ok(t),
        Err(e) => {
            let message = e.to_string();
            Err((locate::<T>(value, &message), message))
        }
    }
}

fn node<'a>(root: &'a Value, path: &[Segment]) -> Option<&'a Value> {
    path.iter().try_fold(root, |v, seg| match seg {
        Segment::Key(k) => v.get(k),
        Segment::Index(i) => v.get(*i),
    })
}

fn node_mut<'a>(root: &'a mut Value, path: &[Segment]) -> Option<&'a mut Value> {
    path.iter().try_fold(root, |v, seg| match seg {
        Segment::Key(k) => v.get_mut(k),
        Segment::Index(i) => v.get_mut(*i),
    })
}

fn without(root: &Value, path: &[Segment], child: &Segment) -> Value {
    let mut trial = root.clone();
    if let Some(parent) = node_mut(&mut trial, path) {
        match (parent, child) {
            (Value::Object(m), Segment::Key(k)) => {
                m.remove(k);
            }
            (Value::Array(a), Segment::Index(i)) if *i < a.len() => {
                a.remove(*i);
            }
            _ => {}
        }
    }
    trial
}

fn missing_field(message: &str) -> Option<&str> {
    message.strip_prefix("missing field `")?.split('`').next()
}

fn locate<T: DeserializeOwned>(root: &Value, original: &str) -> String {
    let mut path: Vec<Segment> = Vec::new();
    let original_missing = missing_field(original);
    loop {
        let children: Vec<Segment> = match node(root, &path) {
            Some(Value::Object(m)) => m.keys().cloned().map(Segment::Key).collect(),
            Some(Value::Array(a)) => (0..a.len()).map(Segment::Index).collect(),
            _ => break,
        };
        let culprit = children
            .into_iter()
            .find(|child| match T::deserialize(&without(root, &path, child)) {
                Ok(_) => true,
                Err(e) => {
                    let msg = e.to_string();
                    original_missing.is_none()
                        && matches!((missing_field(&msg), child), (Some(f), Segment::Key(k)) if f == k)
                }
            });
        match culprit {
            Some(c) => path.push(c),
            None => break,
        }
    }
    if let Some(field) = original_missing {
        path.push(Segment::Key(field.to_string()));
    }
    render(&path)
}

fn render(path: &[Segment]) -> String {
    let mut out = String::new();
    for seg in path {
        match seg {
            Segment::Key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    if out.is_empty() {
        "<object>".to_string()
    } else {
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocm_score_api::{AddOnPlacementScore, ManagedCluster, Placement};
    use serde_json::json;

    #[test]
    fn names_the_field_with_a_wrong_type() {
        let v = json!({"metadata": {"name": "p"}, "spec": {"tolerations": [{"key": "a"}, {"key": "b", "tolerationSeconds": "x"}]}});
        let (path, message) = decode::<Placement>(&v).expect_err("the object must be rejected");
        assert_eq!(path, "spec.tolerations[1].tolerationSeconds");
        assert!(message.contains("invalid type"), "{message}");
    }

    #[test]
    fn names_a_missing_required_field() {
        let v = json!({"metadata": {"name": "c"}, "spec": {"taints": [{"key": "k"}]}});
        let (path, message) = decode::<ManagedCluster>(&v).expect_err("the object must be rejected");
        assert_eq!(path, "spec.taints[0].effect");
        assert!(message.contains("missing field"), "{message}");
    }

    #[test]
    fn names_a_bad_required_value() {
        let v = json!({"metadata": {"name": "s", "namespace": "c"}, "status": {"scores": [{"name": "a", "value": "high"}]}});
        let (path, _) = decode::<AddOnPlacementScore>(&v).expect_err("the object must be rejected");
        assert_eq!(path, "status.scores[0].value");
    }
}
