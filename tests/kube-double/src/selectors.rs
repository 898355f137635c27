//! Label and field selectors, with the syntax and the (narrow) field support of the real server.

use super::status::ApiError;
use ocm_score_scheduler::placement::selector::LabelMatcher;
use serde_json::Value;

/// A parsed `labelSelector`: every requirement must hold. Parsed and matched by the engine's own
/// selector code (`ocm_score_scheduler::placement::selector`), which keeps apimachinery's rules.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LabelSelector(LabelMatcher);

impl Default for LabelSelector {
    fn default() -> Self {
        LabelSelector(LabelMatcher::Everything)
    }
}

impl LabelSelector {
    pub(crate) fn parse(text: &str) -> Result<Self, ApiError> {
        LabelMatcher::parse(text)
            .map(Self)
            .map_err(|why| ApiError::bad_request(format!("unable to parse requirement: {why}")))
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0 == LabelMatcher::Everything
    }

    pub(crate) fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels").and_then(Value::as_object);
        self.0
            .matches(|k| labels.and_then(|l| l.get(k)).and_then(Value::as_str))
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
