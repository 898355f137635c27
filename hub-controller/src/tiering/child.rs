//! The child Placement: server-side apply of what the planner rendered, and the check that finds
//! a child edited by hand.
//!
//! The planner asks for a write when its plan hash differs from the live child's annotation. A hand
//! edit that keeps the annotation (`kubectl edit` of `numberOfClusters`, say) is found here instead:
//! everything we render must still be in the live child. The comparison is "rendered ⊆ live", so
//! fields the API server defaults and fields other managers own do not count as drift.

use kube::api::{Api, Patch, PatchParams};
use ocm_score_api::Placement;
use serde_json::Value;

/// The field manager of every write this controller makes.
pub const FIELD_MANAGER: &str = "ocm-score-tiering";

/// Applies `child` (force: we own these fields, whoever changed them last).
pub async fn apply(client: &kube::Client, child: &Placement) -> Result<Placement, kube::Error> {
    let namespace = child.metadata.namespace.as_deref().unwrap_or_default();
    let name = child.metadata.name.as_deref().unwrap_or_default();
    Api::<Placement>::namespaced(client.clone(), namespace)
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(child),
        )
        .await
}

/// Where the live child no longer holds what we rendered, as `field: want X, found Y`; `None`
/// when everything rendered is still there.
pub fn drift(rendered: &Placement, live: &Placement) -> Option<String> {
    let mut found = Vec::new();
    let (want, have) = (to_value(&rendered.spec), to_value(&live.spec));
    missing("spec", &want, &have, &mut found);
    for (key, value) in rendered.metadata.annotations.iter().flatten() {
        let live_value = live.metadata.annotations.as_ref().and_then(|a| a.get(key));
        if live_value != Some(value) {
            found.push(format!(
                "metadata.annotations[{key}]: want {value:?}, found {live_value:?}"
            ));
        }
    }
    for owner in rendered.metadata.owner_references.iter().flatten() {
        let kept = live
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == owner.uid && o.controller == owner.controller);
        if !kept {
            found.push(format!(
                "metadata.ownerReferences: the reference to {} {} is gone",
                owner.kind, owner.name
            ));
        }
    }
    (!found.is_empty()).then(|| found.join("; "))
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// An absent value in `want` matches anything: null, `[]` and `{}` are how an unset field renders.
fn is_unset(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        _ => false,
    }
}

/// Records every place under `path` where `want` is not contained in `have`. Lists must have the
/// same length (an added or removed predicate is drift), objects may have extra keys.
fn missing(path: &str, want: &Value, have: &Value, found: &mut Vec<String>) {
    match (want, have) {
        (w, Value::Null) if is_unset(w) => {}
        (Value::Object(w), Value::Object(h)) => {
            for (key, wv) in w {
                let child = format!("{path}.{key}");
                match h.get(key) {
                    Some(hv) => missing(&child, wv, hv, found),
                    None if is_unset(wv) => {}
                    None => found.push(format!("{child}: want {wv}, found nothing")),
                }
            }
        }
        (Value::Array(w), Value::Array(h)) if w.len() == h.len() => {
            for (i, (wv, hv)) in w.iter().zip(h).enumerate() {
                missing(&format!("{path}[{i}]"), wv, hv, found);
            }
        }
        (w, h) if w == h => {}
        (w, h) => found.push(format!("{path}: want {w}, found {h}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn placement(yaml: &str) -> Placement {
        serde_norway::from_str(yaml).expect("a Placement")
    }

    const RENDERED: &str = "
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: web
  namespace: apps
  annotations: {tiering.ocm-score.io/plan-hash: abc}
  ownerReferences:
  - {apiVersion: tiering.ocm-score.io/v1alpha1, kind: TieredPlacement, name: web, uid: u1, controller: true}
spec:
  clusterSets: [primary]
  numberOfClusters: 2
  tolerations: [{key: cluster.open-cluster-management.io/unreachable, operator: Exists, tolerationSeconds: 5}]
";

    #[test]
    fn defaults_and_foreign_fields_are_not_drift() {
        let live = placement(
            "
apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata:
  name: web
  namespace: apps
  annotations: {tiering.ocm-score.io/plan-hash: abc, team: x}
  ownerReferences:
  - {apiVersion: tiering.ocm-score.io/v1alpha1, kind: TieredPlacement, name: web, uid: u1, controller: true}
spec:
  clusterSets: [primary]
  numberOfClusters: 2
  prioritizerPolicy: {mode: Additive}
  spreadPolicy: {}
  tolerations: [{key: cluster.open-cluster-management.io/unreachable, operator: Exists, tolerationSeconds: 5}]
",
        );
        assert_eq!(drift(&placement(RENDERED), &live), None);
    }

    #[test]
    fn edits_of_our_fields_are_drift_and_named() {
        let rendered = placement(RENDERED);
        let mut live = rendered.clone();
        live.spec.number_of_clusters = Some(5);
        let found = drift(&rendered, &live).expect("drift");
        assert!(
            found.contains("spec.numberOfClusters: want 2, found 5"),
            "{found}"
        );

        let mut live = rendered.clone();
        live.spec.cluster_sets.push("other".into());
        assert!(drift(&rendered, &live).is_some_and(|d| d.contains("spec.clusterSets")));

        let mut live = rendered.clone();
        live.spec.tolerations.clear();
        assert!(drift(&rendered, &live).is_some_and(|d| d.contains("spec.tolerations")));

        let mut live = rendered.clone();
        live.metadata.owner_references = None;
        assert!(drift(&rendered, &live).is_some_and(|d| d.contains("ownerReferences")));
    }
}
