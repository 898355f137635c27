//! The TieredPlacement's status, written through the status subresource.
//!
//! The whole status is ours, and a plan may drop parts of it (a pending failback that happened).
//! Server-side apply removes the fields we no longer apply but leaves their emptied parent behind
//! (`pending: {}`), which the CRD schema then rejects for its required fields. So the write is a
//! JSON merge patch from the status we read to the planned one, with `null` for every key that
//! is gone: exact, and only what changed travels. The field manager is still `ocm-score-tiering`.

use super::child::FIELD_MANAGER;
use kube::api::{Api, Patch, PatchParams};
use ocm_score_api::crd::tiered_placement::{TieredPlacement, TieredPlacementStatus};
use serde_json::{Map, Value, json};

pub async fn write(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    prior: Option<&TieredPlacementStatus>,
    status: &TieredPlacementStatus,
) -> Result<TieredPlacement, kube::Error> {
    let old = prior.map_or(Value::Null, to_value);
    let patch = json!({"status": merge_diff(&old, &to_value(status))});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    Api::<TieredPlacement>::namespaced(client.clone(), namespace)
        .patch_status(name, &params, &Patch::Merge(&patch))
        .await
}

fn to_value(status: &TieredPlacementStatus) -> Value {
    serde_json::to_value(status).unwrap_or(Value::Null)
}

/// The JSON merge patch (RFC 7386) that turns `old` into `new`: changed keys with their new
/// value, removed keys as `null`; lists and scalars are replaced whole.
pub fn merge_diff(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut out = Map::new();
            for (key, value) in n {
                match o.get(key) {
                    Some(before) if before == value => {}
                    Some(before) => {
                        out.insert(key.clone(), merge_diff(before, value));
                    }
                    None => {
                        out.insert(key.clone(), value.clone());
                    }
                }
            }
            for key in o.keys().filter(|k| !n.contains_key(*k)) {
                out.insert(key.clone(), Value::Null);
            }
            Value::Object(out)
        }
        _ => new.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7386's own algorithm, to check the diff against.
    fn apply(target: &Value, patch: &Value) -> Value {
        let Value::Object(p) = patch else {
            return patch.clone();
        };
        let mut out = match target {
            Value::Object(t) => t.clone(),
            _ => Map::new(),
        };
        for (k, v) in p {
            if v.is_null() {
                out.remove(k);
            } else {
                let merged = apply(out.get(k).unwrap_or(&Value::Null), v);
                out.insert(k.clone(), merged);
            }
        }
        Value::Object(out)
    }

    #[test]
    fn the_diff_removes_what_is_gone_and_keeps_what_is_equal() {
        let old = json!({"activeTiers": ["a"], "failback": {"pending": {"from": "b", "to": "a"}, "observedTrigger": "x"},
                         "conditions": [{"type": "Ready"}]});
        let new = json!({"activeTiers": ["a", "b"], "failback": {"observedTrigger": "x"}, "conditions": [{"type": "Ready"}]});
        let patch = merge_diff(&old, &new);
        assert_eq!(
            patch,
            json!({"activeTiers": ["a", "b"], "failback": {"pending": null}})
        );
        assert_eq!(apply(&old, &patch), new);
        assert_eq!(merge_diff(&Value::Null, &new), new);
        assert_eq!(merge_diff(&new, &new), json!({}));
    }
}
