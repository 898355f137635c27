//! The agent's ManifestWork, built the way addon-framework builds it, and the test for "already
//! applied" that keeps resyncs and restarts free of writes.

use crate::addon::agent::spec_hash::{go_json, go_json_sha256};
use crate::addon::names;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use ocm_score_api::{
    ConditionRule, DeleteOption, FeedbackRule, ManifestConfigOption, ManifestWork, ManifestWorkSpec,
    ManifestsTemplate, ResourceIdentifier,
};
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// What the work's `Available` says of the agent's Deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentAvailable {
    /// The work agent's own rule: the Deployment exists.
    Exists,
    /// Its pods run this configuration and are available (see [`rolled_out_rule`]).
    RolledOut,
}

/// Builds `addon-<addon>-deploy-0` in the cluster namespace.
///
/// `config_hashes` maps config keys (see [`names::config_hash_key`]) to the spec hashes the manifests
/// were rendered from; it becomes the `config-spec-hash` annotation OCM compares with the add-on.
pub fn deploy_work(
    addon: &str,
    cluster: &str,
    owner: &OwnerReference,
    manifests: Vec<Value>,
    config_hashes: &BTreeMap<String, String>,
    available: AgentAvailable,
) -> ManifestWork {
    let annotations = (!config_hashes.is_empty()).then(|| {
        let map: serde_json::Map<String, Value> = config_hashes
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        BTreeMap::from([(
            names::CONFIG_SPEC_HASH_ANNOTATION.to_string(),
            go_json(&Value::Object(map)),
        )])
    });
    let mut manifests = manifests;
    let manifest_configs: Vec<ManifestConfigOption> = manifests
        .iter_mut()
        .filter(|m| m["kind"] == "Deployment" && m["apiVersion"] == "apps/v1")
        .map(|m| {
            let condition_rules = match available {
                AgentAvailable::Exists => vec![],
                AgentAvailable::RolledOut => vec![rolled_out_rule(&stamp_rendered_digest(m))],
            };
            ManifestConfigOption {
                resource_identifier: ResourceIdentifier {
                    group: "apps".into(),
                    resource: "deployments".into(),
                    name: str_at(m, "name"),
                    namespace: str_at(m, "namespace"),
                },
                feedback_rules: vec![FeedbackRule {
                    type_: "WellKnownStatus".into(),
                    json_paths: vec![],
                }],
                condition_rules,
                extra: Default::default(),
            }
        })
        .collect();
    let delete_option = delete_option(&manifests);
    ManifestWork {
        metadata: ObjectMeta {
            name: Some(names::deploy_work_name(addon)),
            namespace: Some(cluster.to_string()),
            labels: Some(BTreeMap::from([(
                names::ADDON_NAME_LABEL.to_string(),
                addon.to_string(),
            )])),
            annotations,
            owner_references: Some(vec![owner.clone()]),
            ..Default::default()
        },
        spec: ManifestWorkSpec {
            manifest_configs,
            workload: ManifestsTemplate { manifests },
            delete_option,
            extra: Default::default(),
        },
        status: None,
    }
}

/// The Deployment's `Available`, as `kubectl rollout status` judges a rollout finished: the
/// controller saw this generation, every replica runs it, no old one is left, all are available.
const ROLLED_OUT: [&str; 4] = [
    "object.?status.?observedGeneration.orValue(0) >= object.metadata.generation",
    "object.?status.?updatedReplicas.orValue(0) == object.spec.replicas",
    "object.?status.?replicas.orValue(0) == object.spec.replicas",
    "object.?status.?availableReplicas.orValue(0) == object.spec.replicas",
];

/// Annotates a Deployment manifest with the digest of the manifest as rendered (without the
/// annotation) and returns the digest.
fn stamp_rendered_digest(deployment: &mut Value) -> String {
    let digest = go_json_sha256(deployment);
    if let Some(metadata) = deployment
        .as_object_mut()
        .map(|d| d.entry("metadata").or_insert_with(|| json!({})))
        && let Some(metadata) = metadata.as_object_mut()
        && let Some(annotations) = metadata
            .entry("annotations")
            .or_insert_with(|| json!({}))
            .as_object_mut()
    {
        annotations.insert(
            names::RENDERED_DIGEST_ANNOTATION.into(),
            Value::String(digest.clone()),
        );
    }
    digest
}

/// CEL: the Deployment read is the one this work renders (its digest annotation is `digest`).
fn is_rendered(digest: &str) -> String {
    format!(
        "object.metadata.?annotations[?'{}'].orValue('') == '{digest}'",
        names::RENDERED_DIGEST_ANNOTATION
    )
}

/// Without it the work agent calls a Deployment available as soon as it exists, so OCM's rollout
/// would move on from a cluster whose new agent never starts. With it the work (and so OCM's
/// `Progressing`) completes only once the agent's pods run the new configuration.
///
/// The rule first checks that the Deployment it reads is the one rendered (`digest`): OCM v1.2's
/// work agent evaluates rules whenever the work changes, possibly against the Deployment read
/// before it applied the new spec, and stamps the result with the work's new generation. Without
/// the check the old, rolled-out Deployment reads Available for the new configuration for a
/// moment, and OCM counts the cluster done for good (its `lastAppliedConfig` never goes back).
///
/// Only for OCM's rollouts: while the rule says False of an existing Deployment, OCM v1.2's work
/// agent flips the manifest's condition through True and back at every status sync (10 s) and
/// writes the work's status each time; nobody else reads the rule.
fn rolled_out_rule(digest: &str) -> ConditionRule {
    let rendered = is_rendered(digest);
    let message = format!(
        "result ? 'the agent runs this configuration and is available' : \
         !({rendered}) ? 'the agent Deployment is not yet updated to this configuration' : \
         'the agent is not rolled out: ' + string(object.?status.?updatedReplicas.orValue(0)) + \
         ' of ' + string(object.spec.replicas) + ' replicas updated, ' + \
         string(object.?status.?availableReplicas.orValue(0)) + ' available'"
    );
    ConditionRule {
        condition: "Available".into(),
        type_: "CEL".into(),
        cel_expressions: std::iter::once(rendered)
            .chain(ROLLED_OUT.iter().map(|e| e.to_string()))
            .collect(),
        message: String::new(),
        message_expression: message,
    }
}

fn str_at(manifest: &Value, field: &str) -> String {
    manifest["metadata"][field]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Manifests annotated `deletion-orphan` stay on the managed cluster when the work goes away.
fn delete_option(manifests: &[Value]) -> Option<DeleteOption> {
    let rules: Vec<Value> = manifests
        .iter()
        .filter(|m| {
            m["metadata"]["annotations"]
                .get(names::DELETION_ORPHAN_ANNOTATION)
                .is_some()
        })
        .map(|m| {
            let api_version = m["apiVersion"].as_str().unwrap_or_default();
            let group = api_version.rsplit_once('/').map(|(g, _)| g).unwrap_or_default();
            json!({
                "group": group,
                "resource": guess_resource(m["kind"].as_str().unwrap_or_default()),
                "name": str_at(m, "name"),
                "namespace": str_at(m, "namespace"),
            })
        })
        .collect();
    if rules.is_empty() {
        return None;
    }
    let mut extra = ocm_score_api::Extra::new();
    extra.insert("selectivelyOrphans".into(), json!({ "orphaningRules": rules }));
    Some(DeleteOption {
        propagation_policy: Some("SelectivelyOrphan".into()),
        extra,
    })
}

/// Lowercase plural of a kind, the same naive guess OCM makes (`Namespace` → `namespaces`).
fn guess_resource(kind: &str) -> String {
    let lower = kind.to_lowercase();
    if lower.ends_with('s') {
        format!("{lower}es")
    } else if let Some(stem) = lower.strip_suffix('y') {
        format!("{stem}ies")
    } else {
        format!("{lower}s")
    }
}

/// Whether the server kept none of the condition rules `desired` asked for.
pub fn rules_pruned(desired: &ManifestWork, written: &ManifestWork) -> bool {
    let asked = desired
        .spec
        .manifest_configs
        .iter()
        .any(|c| !c.condition_rules.is_empty());
    asked
        && written
            .spec
            .manifest_configs
            .iter()
            .all(|c| c.condition_rules.is_empty())
}

/// Where a cached work keeps the digest of its manifests (see [`compact_for_cache`]).
const MANIFESTS_DIGEST_KEY: &str = "ocm-score.io/manifests-sha256";

/// SHA-256 of a work's manifests (their Go-style JSON encoding), or the digest a cached work holds.
pub fn manifests_digest(work: &ManifestWork) -> String {
    let manifests = &work.spec.workload.manifests;
    if let [marker] = manifests.as_slice()
        && let Some(digest) = marker.get(MANIFESTS_DIGEST_KEY).and_then(Value::as_str)
    {
        return digest.to_string();
    }
    go_json_sha256(&Value::Array(manifests.clone()))
}

/// Replaces a work's manifests by their digest: the watch cache then holds a few bytes per work
/// instead of every rendered object, and [`up_to_date`] compares digests.
pub fn compact_for_cache(work: &mut ManifestWork) {
    let digest = manifests_digest(work);
    work.spec.workload.manifests = vec![json!({ MANIFESTS_DIGEST_KEY: digest })];
}

/// Whether `existing` already carries everything `desired` says, so no write is needed.
///
/// The manifests must be equal (nothing defaults inside them; compared by digest, so `existing` may
/// come from the compacted cache). Elsewhere in the spec the server may
/// have filled in defaults, so `desired` only has to be contained in `existing`. Our label and owner
/// reference must be present; the config-spec-hash annotation must be exactly ours (or absent when
/// we have none), other labels and annotations are someone else's.
pub fn up_to_date(existing: &ManifestWork, desired: &ManifestWork) -> bool {
    let meta_ok = desired
        .metadata
        .labels
        .iter()
        .flatten()
        .all(|(k, v)| existing.metadata.labels.as_ref().and_then(|l| l.get(k)) == Some(v))
        && desired.metadata.owner_references.iter().flatten().all(|want| {
            existing
                .metadata
                .owner_references
                .iter()
                .flatten()
                .any(|have| have == want)
        });
    let hash = |w: &ManifestWork| {
        w.metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(names::CONFIG_SPEC_HASH_ANNOTATION))
            .cloned()
    };
    if !meta_ok || hash(existing) != hash(desired) {
        return false;
    }
    if manifests_digest(existing) != manifests_digest(desired) {
        return false;
    }
    // Nothing defaults inside condition rules, and a rule we no longer want must go.
    let rules = |w: &ManifestWork| {
        w.spec
            .manifest_configs
            .iter()
            .map(|c| c.condition_rules.clone())
            .collect::<Vec<_>>()
    };
    if rules(existing) != rules(desired) {
        return false;
    }
    let (Ok(mut have), Ok(mut want)) = (
        serde_json::to_value(&existing.spec),
        serde_json::to_value(&desired.spec),
    ) else {
        return false;
    };
    for spec in [&mut have, &mut want] {
        if let Some(map) = spec.as_object_mut() {
            map.remove("workload");
        }
    }
    // No delete option means the CRD default, Foreground.
    if want.get("deleteOption").is_none() {
        let policy = have
            .pointer("/deleteOption/propagationPolicy")
            .and_then(Value::as_str);
        if !matches!(policy, None | Some("Foreground")) {
            return false;
        }
    }
    contains(&have, &want)
}

/// `want` is contained in `have`: objects may carry extra keys, arrays must match element by element.
pub fn contains(have: &Value, want: &Value) -> bool {
    match (have, want) {
        (Value::Object(h), Value::Object(w)) => w
            .iter()
            .all(|(k, wv)| h.get(k).is_some_and(|hv| contains(hv, wv))),
        (Value::Array(h), Value::Array(w)) => {
            h.len() == w.len() && h.iter().zip(w).all(|(hv, wv)| contains(hv, wv))
        }
        _ => have == want,
    }
}

/// The work to send for an update: the existing object (keeping its resourceVersion and anything
/// others set) with our labels, annotation, owner reference and spec.
pub fn updated(existing: &ManifestWork, desired: &ManifestWork) -> ManifestWork {
    let mut work = existing.clone();
    work.status = None;
    let meta = &mut work.metadata;
    meta.labels
        .get_or_insert_default()
        .extend(desired.metadata.labels.clone().unwrap_or_default());
    let annotations = meta.annotations.get_or_insert_default();
    annotations.remove(names::CONFIG_SPEC_HASH_ANNOTATION);
    annotations.extend(desired.metadata.annotations.clone().unwrap_or_default());
    let owners = meta.owner_references.get_or_insert_default();
    for owner in desired.metadata.owner_references.iter().flatten() {
        owners.retain(|o| o.uid != owner.uid);
        owners.push(owner.clone());
    }
    work.spec = desired.spec.clone();
    work
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner() -> OwnerReference {
        OwnerReference {
            api_version: "addon.open-cluster-management.io/v1alpha1".into(),
            kind: "ManagedClusterAddOn".into(),
            name: "a".into(),
            uid: "u1".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        }
    }

    /// Add-on `a`'s work on cluster `c1`, owned as the manager owns it.
    fn work_of(
        manifests: Vec<Value>,
        config_hashes: &BTreeMap<String, String>,
        available: AgentAvailable,
    ) -> ManifestWork {
        deploy_work("a", "c1", &owner(), manifests, config_hashes, available)
    }

    fn manifests() -> Vec<Value> {
        vec![
            json!({"apiVersion": "v1", "kind": "Namespace",
                   "metadata": {"name": "ns", "annotations": {names::DELETION_ORPHAN_ANNOTATION: "true"}}}),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a-agent", "namespace": "ns"}}),
        ]
    }

    #[test]
    fn builds_the_work_like_addon_framework() {
        let hashes = BTreeMap::from([(
            "addondeploymentconfigs.addon.open-cluster-management.io/ns/cfg".to_string(),
            "abc".to_string(),
        )]);
        let w = work_of(manifests(), &hashes, AgentAvailable::RolledOut);
        let v = serde_json::to_value(&w).expect("serializes");
        assert_eq!(v["metadata"]["name"], "addon-a-deploy-0");
        assert_eq!(v["metadata"]["namespace"], "c1");
        assert_eq!(v["metadata"]["labels"][names::ADDON_NAME_LABEL], "a");
        assert_eq!(
            v["metadata"]["annotations"][names::CONFIG_SPEC_HASH_ANNOTATION],
            r#"{"addondeploymentconfigs.addon.open-cluster-management.io/ns/cfg":"abc"}"#
        );
        assert_eq!(v["metadata"]["ownerReferences"][0]["controller"], true);
        assert_eq!(
            v["spec"]["deleteOption"]["propagationPolicy"],
            "SelectivelyOrphan"
        );
        assert_eq!(
            v["spec"]["deleteOption"]["selectivelyOrphans"]["orphaningRules"],
            json!([{"group": "", "resource": "namespaces", "name": "ns", "namespace": ""}])
        );
        // The Deployment carries the digest of itself as rendered, and the rule checks it first.
        let digest = go_json_sha256(&manifests()[1]);
        assert_eq!(
            v["spec"]["workload"]["manifests"][1]["metadata"]["annotations"],
            json!({names::RENDERED_DIGEST_ANNOTATION: digest})
        );
        let rule = &v["spec"]["manifestConfigs"][0]["conditionRules"][0];
        let expressions = rule["celExpressions"].as_array().expect("expressions");
        assert_eq!(
            expressions[0],
            format!(
                "object.metadata.?annotations[?'ocm-score.io/rendered-sha256'].orValue('') == '{digest}'"
            )
        );
        assert_eq!(expressions[1..], ROLLED_OUT.map(Value::from));
        assert_eq!(
            v["spec"]["manifestConfigs"],
            json!([{"resourceIdentifier": {"group": "apps", "resource": "deployments", "name": "a-agent", "namespace": "ns"},
                    "feedbackRules": [{"type": "WellKnownStatus"}],
                    "conditionRules": [{"condition": "Available", "type": "CEL",
                                        "celExpressions": expressions,
                                        "messageExpression": rule["messageExpression"]}]}])
        );
        let plain = work_of(
            vec![manifests().remove(1)],
            &BTreeMap::new(),
            AgentAvailable::Exists,
        );
        assert!(plain.metadata.annotations.is_none() && plain.spec.delete_option.is_none());
        assert!(plain.spec.manifest_configs[0].condition_rules.is_empty());
        assert_eq!(plain.spec.workload.manifests, vec![manifests().remove(1)]);
        // Handing the add-on to OCM's rollout (or back) rewrites the work.
        let judged = work_of(
            vec![manifests().remove(1)],
            &BTreeMap::new(),
            AgentAvailable::RolledOut,
        );
        assert!(!up_to_date(&plain, &judged) && !up_to_date(&judged, &plain));
        // A hub that drops the rule is noticed; one that keeps it, or a work without it, is not.
        assert!(rules_pruned(&judged, &plain));
        assert!(!rules_pruned(&judged, &judged) && !rules_pruned(&plain, &plain));
    }

    #[test]
    fn the_rollout_rule_accepts_only_the_deployment_as_rendered() {
        let work_for = |image: &str| {
            let mut ms = manifests();
            ms[1]["spec"] =
                json!({"template": {"spec": {"containers": [{"name": "agent", "image": image}]}}});
            work_of(ms, &BTreeMap::new(), AgentAvailable::RolledOut)
        };
        let digest = |w: &ManifestWork| {
            w.spec.workload.manifests[1]["metadata"]["annotations"][names::RENDERED_DIGEST_ANNOTATION]
                .as_str()
                .expect("the Deployment carries its digest")
                .to_string()
        };
        let checked =
            |w: &ManifestWork| w.spec.manifest_configs[0].condition_rules[0].cel_expressions[0].clone();
        let (old, new) = (work_for("agent:1"), work_for("agent:2"));
        assert_ne!(digest(&old), digest(&new));
        // The new work's rule holds only for a Deployment carrying the new digest: the old,
        // rolled-out Deployment, read before the work agent applied the new one, does not pass.
        assert!(
            checked(&new).ends_with(&format!("== '{}'", digest(&new))),
            "{}",
            checked(&new)
        );
        assert!(!checked(&new).contains(&digest(&old)));
        // Rendering the same again is the same work: no write on resync.
        assert!(up_to_date(&work_for("agent:2"), &new));
    }

    #[test]
    fn guesses_resources_like_ocm() {
        assert_eq!(guess_resource("Namespace"), "namespaces");
        assert_eq!(guess_resource("NetworkPolicy"), "networkpolicies");
        assert_eq!(guess_resource("Ingress"), "ingresses");
    }

    #[test]
    fn up_to_date_tolerates_server_defaults_and_foreign_metadata_only() {
        let desired = work_of(manifests(), &BTreeMap::new(), AgentAvailable::Exists);
        let mut existing = desired.clone();
        existing.metadata.resource_version = Some("7".into());
        existing
            .metadata
            .labels
            .get_or_insert_default()
            .insert("team".into(), "x".into());
        existing.spec.manifest_configs[0]
            .extra
            .insert("updateStrategy".into(), json!({"type": "Update"}));
        assert!(up_to_date(&existing, &desired));

        let mut changed = existing.clone();
        changed.spec.workload.manifests[1]["spec"] = json!({"replicas": 2});
        assert!(!up_to_date(&changed, &desired));
        let mut unowned = existing.clone();
        unowned.metadata.owner_references = None;
        assert!(!up_to_date(&unowned, &desired));
        let mut stale_hash = existing.clone();
        stale_hash.metadata.annotations = Some(BTreeMap::from([(
            names::CONFIG_SPEC_HASH_ANNOTATION.to_string(),
            "{}".to_string(),
        )]));
        assert!(!up_to_date(&stale_hash, &desired));

        // Without orphans we send no delete option: the default Foreground matches, Orphan does not.
        let bare = work_of(
            vec![manifests().remove(1)],
            &BTreeMap::new(),
            AgentAvailable::Exists,
        );
        let mut defaulted = bare.clone();
        defaulted.spec.delete_option = Some(DeleteOption {
            propagation_policy: Some("Foreground".into()),
            ..Default::default()
        });
        assert!(up_to_date(&defaulted, &bare));
        defaulted.spec.delete_option = Some(DeleteOption {
            propagation_policy: Some("Orphan".into()),
            ..Default::default()
        });
        assert!(!up_to_date(&defaulted, &bare));
    }

    #[test]
    fn a_compacted_cache_entry_compares_by_digest() {
        let desired = work_of(manifests(), &BTreeMap::new(), AgentAvailable::Exists);
        let mut cached = desired.clone();
        compact_for_cache(&mut cached);
        assert_eq!(cached.spec.workload.manifests.len(), 1);
        assert_eq!(manifests_digest(&cached), manifests_digest(&desired));
        assert!(up_to_date(&cached, &desired));
        let mut changed = manifests();
        changed[1]["spec"] = json!({"replicas": 2});
        assert!(!up_to_date(
            &cached,
            &work_of(changed, &BTreeMap::new(), AgentAvailable::Exists)
        ));
        // Compacting twice changes nothing.
        let once = cached.clone();
        compact_for_cache(&mut cached);
        assert_eq!(cached, once);
    }

    #[test]
    fn update_keeps_foreign_metadata_and_replaces_ours() {
        let desired = work_of(manifests(), &BTreeMap::new(), AgentAvailable::Exists);
        let mut existing = work_of(
            vec![],
            &BTreeMap::from([("k".to_string(), "old".to_string())]),
            AgentAvailable::Exists,
        );
        existing.metadata.resource_version = Some("3".into());
        existing
            .metadata
            .annotations
            .get_or_insert_default()
            .insert("note".into(), "keep".into());
        let sent = updated(&existing, &desired);
        assert_eq!(sent.metadata.resource_version.as_deref(), Some("3"));
        let annotations = sent.metadata.annotations.clone().unwrap_or_default();
        assert_eq!(annotations.get("note").map(String::as_str), Some("keep"));
        assert!(!annotations.contains_key(names::CONFIG_SPEC_HASH_ANNOTATION));
        assert_eq!(sent.metadata.owner_references.as_ref().map(Vec::len), Some(1));
        assert!(up_to_date(&sent, &desired));
    }
}
