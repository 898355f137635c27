//! Under OCM's addon-manager, whether OCM's configuration rollout lets us render a cluster's agent
//! now.
//!
//! OCM's addon-manager runs the ClusterManagementAddOn's `rolloutStrategy`: it moves clusters to a
//! new config batch by batch by writing each ManagedClusterAddOn's `status.configReferences[].
//! desiredConfig` (with the spec hash it wants) and its `Configured` condition. A cluster outside
//! the current batch keeps the old desired hash. The config object itself holds only the newest
//! content, so the only way to keep a cluster on its old config is not to re-render its work: the
//! work may be rendered only when the content we would render from is exactly what OCM wants there.
//! (addon-framework's `ConfigCheckEnabled` checks `Configured` only; we also check the hash, since
//! we re-render on every config change, where Go add-ons rarely re-render at all.)
//!
//! Under `lifecycle: self` nobody plans a rollout (OCM's rollout controllers skip self-managed
//! add-ons): every cluster is rendered from the newest config at once, as `rolloutStrategy: All`.

use crate::addon::configuration::references::ConfigKey;
use crate::addon::names::{ADDON_DEPLOYMENT_CONFIG_RESOURCE, ADDON_GROUP};
use crate::addon::status::conditions::{CONFIGURED, find};
use ocm_score_api::{ConfigReference, ManagedClusterAddOn};

/// Why a cluster's work is left as it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hold {
    /// OCM has not put the cluster in a rollout batch (`Configured` is not True): a new cluster
    /// waiting for its turn, or OCM has not seen the add-on yet.
    NotConfigured,
    /// The desired config does not exist.
    Missing(ConfigKey),
    /// OCM named the config without a spec hash yet.
    NoSpecHash(ConfigKey),
    /// The config changed since OCM chose it for this cluster; OCM moves the cluster in its turn.
    NotYetCurrent {
        key: ConfigKey,
        desired: String,
        current: String,
    },
}

impl Hold {
    /// Whether the hold needs someone to act (a config to create), rather than OCM's next step.
    pub fn is_error(&self) -> bool {
        matches!(self, Hold::Missing(_))
    }
}

impl std::fmt::Display for Hold {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Hold::NotConfigured => write!(f, "waiting for OCM's rollout to configure this cluster"),
            Hold::Missing(key) => write!(f, "AddOnDeploymentConfig {key} not found"),
            Hold::NoSpecHash(key) => {
                write!(
                    f,
                    "waiting for OCM to name the spec hash of AddOnDeploymentConfig {key}"
                )
            }
            Hold::NotYetCurrent {
                key,
                desired,
                current,
            } => write!(
                f,
                "AddOnDeploymentConfig {key} is at spec hash {current}, OCM's rollout wants {desired} \
                 on this cluster; waiting for OCM to move it"
            ),
        }
    }
}

/// `Ok` when the work may be rendered from the current deployment configs: the add-on is
/// `Configured`, and every deployment config it references exists with the spec hash OCM desires.
/// `references` are the add-on's config references as we are about to write them; `current_hash`
/// gives a config's spec hash, `None` when it does not exist.
pub fn render_gate(
    addon: &ManagedClusterAddOn,
    references: &[ConfigReference],
    current_hash: impl Fn(&ConfigKey) -> Option<String>,
) -> Result<(), Hold> {
    let configured = addon
        .status
        .as_ref()
        .and_then(|s| find(&s.conditions, CONFIGURED))
        .is_some_and(|c| c.status == "True");
    if !configured {
        return Err(Hold::NotConfigured);
    }
    let deployment_configs = references
        .iter()
        .filter(|r| r.group == ADDON_GROUP && r.resource == ADDON_DEPLOYMENT_CONFIG_RESOURCE);
    for reference in deployment_configs {
        // OCM writes the desired config with the reference; one without it is not OCM's yet.
        let Some(desired) = &reference.desired_config else {
            return Err(Hold::NoSpecHash(ConfigKey {
                namespace: reference.namespace.clone(),
                name: reference.name.clone(),
            }));
        };
        let key = ConfigKey {
            namespace: desired.namespace.clone(),
            name: desired.name.clone(),
        };
        let Some(current) = current_hash(&key) else {
            return Err(Hold::Missing(key));
        };
        if desired.spec_hash.is_empty() {
            return Err(Hold::NoSpecHash(key));
        }
        if desired.spec_hash != current {
            return Err(Hold::NotYetCurrent {
                key,
                desired: desired.spec_hash.clone(),
                current,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use ocm_score_api::{ConfigSpecHash, ManagedClusterAddOnStatus};
    use std::collections::BTreeMap;

    fn reference(name: &str, hash: &str) -> ConfigReference {
        ConfigReference {
            group: ADDON_GROUP.into(),
            resource: ADDON_DEPLOYMENT_CONFIG_RESOURCE.into(),
            name: name.into(),
            namespace: "hub".into(),
            desired_config: Some(ConfigSpecHash {
                namespace: "hub".into(),
                name: name.into(),
                spec_hash: hash.into(),
            }),
            ..Default::default()
        }
    }

    fn key(name: &str) -> ConfigKey {
        ConfigKey {
            namespace: "hub".into(),
            name: name.into(),
        }
    }

    fn addon(configured: Option<&str>) -> ManagedClusterAddOn {
        ManagedClusterAddOn {
            status: Some(ManagedClusterAddOnStatus {
                conditions: configured
                    .map(|status| Condition {
                        type_: CONFIGURED.into(),
                        status: status.into(),
                        reason: "ConfigurationsConfigured".into(),
                        message: String::new(),
                        observed_generation: None,
                        last_transition_time: Time(jiff::Timestamp::UNIX_EPOCH),
                    })
                    .into_iter()
                    .collect(),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn store(entries: &[(&str, &str)]) -> impl Fn(&ConfigKey) -> Option<String> {
        let map: BTreeMap<ConfigKey, String> = entries.iter().map(|(n, h)| (key(n), h.to_string())).collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn renders_only_what_ocm_configured_at_the_current_hash() {
        let refs = [reference("a", "h1")];
        assert_eq!(
            render_gate(&addon(Some("True")), &refs, store(&[("a", "h1")])),
            Ok(())
        );
        // A cluster outside the batch: Configured=False, or not written yet.
        for configured in [Some("False"), None] {
            assert_eq!(
                render_gate(&addon(configured), &refs, store(&[("a", "h1")])),
                Err(Hold::NotConfigured)
            );
        }
        // The config was edited in place; OCM has not moved this cluster to h2.
        assert_eq!(
            render_gate(&addon(Some("True")), &refs, store(&[("a", "h2")])),
            Err(Hold::NotYetCurrent {
                key: key("a"),
                desired: "h1".into(),
                current: "h2".into()
            })
        );
    }

    #[test]
    fn a_missing_config_or_hash_holds_and_only_missing_is_an_error() {
        let configured = addon(Some("True"));
        let missing = render_gate(&configured, &[reference("a", "")], store(&[]));
        assert_eq!(missing, Err(Hold::Missing(key("a"))));
        assert!(missing.is_err_and(|h| h.is_error()));
        let unhashed = render_gate(&configured, &[reference("a", "")], store(&[("a", "h1")]));
        assert_eq!(unhashed, Err(Hold::NoSpecHash(key("a"))));
        assert!(unhashed.is_err_and(|h| !h.is_error()));
        let mut bare = reference("a", "h1");
        bare.desired_config = None;
        assert_eq!(
            render_gate(&configured, &[bare], store(&[("a", "h1")])),
            Err(Hold::NoSpecHash(key("a")))
        );
    }

    #[test]
    fn every_deployment_config_must_be_current_not_only_the_rendered_one() {
        let configured = addon(Some("True"));
        let refs = [reference("a", "h1"), reference("b", "h2")];
        assert_eq!(
            render_gate(&configured, &refs, store(&[("a", "h1"), ("b", "h2")])),
            Ok(())
        );
        assert_eq!(
            render_gate(&configured, &refs, store(&[("a", "h1"), ("b", "h3")])),
            Err(Hold::NotYetCurrent {
                key: key("b"),
                desired: "h2".into(),
                current: "h3".into()
            })
        );
        // Configs of kinds we do not read are not ours to wait for.
        let mut other = reference("c", "");
        other.group = String::new();
        other.resource = "configmaps".into();
        assert_eq!(
            render_gate(&configured, &[reference("a", "h1"), other], store(&[("a", "h1")])),
            Ok(())
        );
    }

    #[test]
    fn no_references_render_with_defaults_once_configured() {
        assert_eq!(render_gate(&addon(Some("True")), &[], store(&[])), Ok(()));
        assert_eq!(
            render_gate(&addon(None), &[], store(&[])),
            Err(Hold::NotConfigured)
        );
    }

    #[test]
    fn holds_explain_themselves() {
        let text = Hold::NotYetCurrent {
            key: key("a"),
            desired: "h1".into(),
            current: "h2".into(),
        }
        .to_string();
        assert!(
            text.contains("hub/a") && text.contains("h1") && text.contains("h2"),
            "{text}"
        );
        assert_eq!(
            Hold::Missing(key("a")).to_string(),
            "AddOnDeploymentConfig hub/a not found"
        );
    }
}
