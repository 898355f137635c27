//! Which AddOnDeploymentConfig applies to an add-on, and the `status.configReferences` recording it.
//!
//! When we run the lifecycle ourselves, the precedence is OCM's: the ClusterManagementAddOn's default
//! config, overridden by the config of a Placement that selected the cluster (a later Placement in the
//! strategy wins), overridden by the add-on's own `spec.configs`. Under OCM's addon-manager, OCM writes
//! `configReferences` as its rollout moves each cluster; we take the desired config from there and
//! fill in what addon-framework fills in (generations, and hashes of the add-on's own configs).

use crate::addon::lifecycle::install::Lifecycle;
use crate::addon::names::{ADDON_DEPLOYMENT_CONFIG_RESOURCE, ADDON_GROUP, names_a_config};
use kube::ResourceExt;
use ocm_score_api::{
    AddOnConfig, ClusterManagementAddOn, ConfigGroupResource, ConfigReference, ConfigSpecHash,
    ManagedClusterAddOn,
};
use std::collections::{BTreeMap, BTreeSet};

/// A namespaced config object by name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ConfigKey {
    pub namespace: String,
    pub name: String,
}

impl std::fmt::Display for ConfigKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// The config group/resources this add-on understands (`status.supportedConfigs`).
pub fn supported_configs() -> Vec<ConfigGroupResource> {
    vec![ConfigGroupResource {
        group: ADDON_GROUP.into(),
        resource: ADDON_DEPLOYMENT_CONFIG_RESOURCE.into(),
    }]
}

fn is_deployment_config(group: &str, resource: &str) -> bool {
    group == ADDON_GROUP && resource == ADDON_DEPLOYMENT_CONFIG_RESOURCE
}

/// The AddOnDeploymentConfig the add-on should use, if any. `placements_with_cluster` are the
/// strategy's placements (namespace, name) whose decisions include this add-on's cluster.
pub fn desired_config(
    lifecycle: Lifecycle,
    cma: &ClusterManagementAddOn,
    addon: &ManagedClusterAddOn,
    placements_with_cluster: &BTreeSet<(String, String)>,
) -> Option<ConfigKey> {
    if lifecycle == Lifecycle::AddonManager {
        return addon
            .status
            .iter()
            .flat_map(|s| &s.config_references)
            .filter(|r| is_deployment_config(&r.group, &r.resource))
            .find_map(|r| r.desired_config.as_ref())
            .filter(|d| names_a_config(&d.name))
            .map(|d| ConfigKey {
                namespace: d.namespace.clone(),
                name: d.name.clone(),
            });
    }
    let cluster_namespace = addon.namespace().unwrap_or_default();
    let from_addon = addon
        .spec
        .configs
        .iter()
        .find(|c| is_deployment_config(&c.group, &c.resource) && names_a_config(&c.name))
        .map(|c| ConfigKey {
            // A config named without namespace in the add-on itself lives beside it.
            namespace: if c.namespace.is_empty() {
                cluster_namespace.clone()
            } else {
                c.namespace.clone()
            },
            name: c.name.clone(),
        });
    let key = |c: &AddOnConfig| ConfigKey {
        namespace: c.namespace.clone(),
        name: c.name.clone(),
    };
    let from_placement = cma
        .spec
        .install_strategy
        .iter()
        .filter(|s| s.type_ == "Placements")
        .flat_map(|s| &s.placements)
        .filter(|p| placements_with_cluster.contains(&(p.namespace.clone(), p.name.clone())))
        .rev()
        .find_map(|p| {
            p.configs
                .iter()
                .find(|c| is_deployment_config(&c.group, &c.resource) && names_a_config(&c.name))
        })
        .map(key);
    let from_default = cma
        .spec
        .supported_configs
        .iter()
        .filter(|c| is_deployment_config(&c.group, &c.resource))
        .find_map(|c| c.default_config.as_ref())
        .filter(|d| names_a_config(&d.name))
        .map(|d| ConfigKey {
            namespace: d.namespace.clone(),
            name: d.name.clone(),
        });
    from_addon.or(from_placement).or(from_default)
}

/// What we know about the desired config object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObservedConfig {
    pub key: ConfigKey,
    /// Spec hash and generation when the object exists.
    pub found: Option<(String, i64)>,
}

/// `status.configReferences` after this sync, self-managed: exactly one reference for the desired
/// config (or none). `applied_hash` is the hash the current ManifestWork was rendered from and is
/// applied, which moves `lastAppliedConfig`.
pub fn self_managed_references(
    existing: &[ConfigReference],
    observed: Option<&ObservedConfig>,
    applied_hash: Option<&str>,
) -> Vec<ConfigReference> {
    let Some(o) = observed else { return vec![] };
    let (hash, generation) = match &o.found {
        Some((h, g)) => (h.clone(), Some(*g)),
        None => (String::new(), None),
    };
    let desired = ConfigSpecHash {
        namespace: o.key.namespace.clone(),
        name: o.key.name.clone(),
        spec_hash: hash,
    };
    let previous = existing
        .iter()
        .find(|r| is_deployment_config(&r.group, &r.resource));
    let last_applied = match applied_hash {
        Some(h) if !h.is_empty() && h == desired.spec_hash => Some(desired.clone()),
        _ => previous.and_then(|p| p.last_applied_config.clone()),
    };
    vec![ConfigReference {
        group: ADDON_GROUP.into(),
        resource: ADDON_DEPLOYMENT_CONFIG_RESOURCE.into(),
        name: o.key.name.clone(),
        namespace: o.key.namespace.clone(),
        desired_config: Some(desired),
        last_applied_config: last_applied,
        last_observed_generation: generation,
    }]
}

/// `status.configReferences` after this sync, under OCM's addon-manager: OCM's list with
/// `lastObservedGeneration` filled in for every deployment config that exists, and the spec hash
/// only for configs the add-on names itself (`spec.configs`). The other hashes are OCM's: it
/// copies them from the ClusterManagementAddOn's status when the rollout reaches this cluster, and
/// writing the current hash over them would move the cluster out of its turn.
/// `current` gives a config object's spec hash and generation, `None` when it does not exist.
pub fn addon_manager_references(
    existing: &[ConfigReference],
    spec_configs: &[AddOnConfig],
    current: impl Fn(&ConfigKey) -> Option<(String, i64)>,
) -> Vec<ConfigReference> {
    existing
        .iter()
        .map(|r| {
            let mut r = r.clone();
            if !is_deployment_config(&r.group, &r.resource) {
                return r;
            }
            let Some(desired) = r.desired_config.as_mut() else {
                return r;
            };
            let key = ConfigKey {
                namespace: desired.namespace.clone(),
                name: desired.name.clone(),
            };
            let found = current(&key);
            // OCM matches a spec.configs entry to a reference by group, resource, namespace and name.
            let named_by_addon = spec_configs.iter().any(|c| {
                c.group == r.group
                    && c.resource == r.resource
                    && c.namespace == key.namespace
                    && c.name == key.name
            });
            if named_by_addon {
                desired.spec_hash = found.as_ref().map(|(h, _)| h.clone()).unwrap_or_default();
            }
            if let Some((_, generation)) = found {
                r.last_observed_generation = Some(generation);
            }
            r
        })
        .collect()
}

/// The config-spec-hash map of a ManifestWork rendered under OCM's addon-manager: every reference
/// with a desired config, keyed by that config, valued by its desired spec hash. OCM's progressing
/// controller counts the work as this add-on's current one only when this equals the same map of the
/// add-on's status.
pub fn configs_to_map(references: &[ConfigReference]) -> BTreeMap<String, String> {
    references
        .iter()
        .filter_map(|r| {
            let desired = r.desired_config.as_ref()?;
            let key = crate::addon::names::config_hash_key(
                &r.group,
                &r.resource,
                &desired.namespace,
                &desired.name,
            );
            Some((key, desired.spec_hash.clone()))
        })
        .collect()
}

/// The config-spec-hash map a ManifestWork rendered from `observed` carries.
pub fn work_config_hashes(observed: Option<&ObservedConfig>) -> BTreeMap<String, String> {
    observed
        .and_then(|o| {
            let (hash, _) = o.found.as_ref()?;
            let key = crate::addon::names::config_hash_key(
                ADDON_GROUP,
                ADDON_DEPLOYMENT_CONFIG_RESOURCE,
                &o.key.namespace,
                &o.key.name,
            );
            Some(BTreeMap::from([(key, hash.clone())]))
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocm_score_api::{
        ConfigMeta, ConfigReferent, InstallStrategy, ManagedClusterAddOnStatus, PlacementStrategy,
    };

    fn adc(ns: &str, name: &str) -> AddOnConfig {
        AddOnConfig {
            group: ADDON_GROUP.into(),
            resource: ADDON_DEPLOYMENT_CONFIG_RESOURCE.into(),
            namespace: ns.into(),
            name: name.into(),
        }
    }

    fn cma() -> ClusterManagementAddOn {
        let mut c = ClusterManagementAddOn::default();
        c.spec.supported_configs = vec![ConfigMeta {
            group: ADDON_GROUP.into(),
            resource: ADDON_DEPLOYMENT_CONFIG_RESOURCE.into(),
            default_config: Some(ConfigReferent {
                namespace: "hub".into(),
                name: "default".into(),
            }),
        }];
        c.spec.install_strategy = Some(InstallStrategy {
            type_: "Placements".into(),
            placements: vec![
                PlacementStrategy {
                    namespace: "p".into(),
                    name: "gpu".into(),
                    configs: vec![adc("hub", "gpu")],
                    ..Default::default()
                },
                PlacementStrategy {
                    namespace: "p".into(),
                    name: "edge".into(),
                    configs: vec![adc("hub", "edge")],
                    ..Default::default()
                },
                PlacementStrategy {
                    namespace: "p".into(),
                    name: "all".into(),
                    configs: vec![],
                    ..Default::default()
                },
            ],
        });
        c
    }

    fn addon() -> ManagedClusterAddOn {
        let mut m = ManagedClusterAddOn::default();
        m.metadata.namespace = Some("c1".into());
        m
    }

    fn key(ns: &str, name: &str) -> Option<ConfigKey> {
        Some(ConfigKey {
            namespace: ns.into(),
            name: name.into(),
        })
    }

    fn placements(names: &[&str]) -> BTreeSet<(String, String)> {
        names.iter().map(|n| ("p".to_string(), n.to_string())).collect()
    }

    #[test]
    fn precedence_default_then_placement_then_addon() {
        let c = cma();
        let mut m = addon();
        assert_eq!(
            desired_config(Lifecycle::SelfManaged, &c, &m, &placements(&["all"])),
            key("hub", "default")
        );
        assert_eq!(
            desired_config(Lifecycle::SelfManaged, &c, &m, &placements(&["gpu"])),
            key("hub", "gpu")
        );
        // Later placement in the strategy wins.
        assert_eq!(
            desired_config(
                Lifecycle::SelfManaged,
                &c,
                &m,
                &placements(&["gpu", "edge", "all"])
            ),
            key("hub", "edge")
        );
        m.spec.configs = vec![adc("", "mine")];
        assert_eq!(
            desired_config(Lifecycle::SelfManaged, &c, &m, &placements(&["gpu"])),
            key("c1", "mine")
        );
        assert_eq!(
            desired_config(
                Lifecycle::SelfManaged,
                &ClusterManagementAddOn::default(),
                &addon(),
                &placements(&[])
            ),
            None
        );
    }

    #[test]
    fn ocms_no_default_sentinel_names_no_config_wherever_it_turns_up() {
        use crate::addon::names::RESERVED_NO_DEFAULT_CONFIG as SENTINEL;
        let mut c = cma();
        if let Some(meta) = c.spec.supported_configs.first_mut() {
            meta.default_config = Some(ConfigReferent {
                namespace: String::new(),
                name: SENTINEL.into(),
            });
        }
        let mut m = addon();
        m.spec.configs = vec![adc("", SENTINEL)];
        // Neither the add-on's nor the default's sentinel counts: no config, not one named `__...`.
        assert_eq!(
            desired_config(Lifecycle::SelfManaged, &c, &m, &placements(&["all"])),
            None
        );
        // The placement's real config still wins over them.
        assert_eq!(
            desired_config(Lifecycle::SelfManaged, &c, &m, &placements(&["gpu"])),
            key("hub", "gpu")
        );
        // Under OCM's addon-manager, a leaked sentinel in status is no desired config either.
        m.status = Some(ManagedClusterAddOnStatus {
            config_references: vec![ConfigReference {
                group: ADDON_GROUP.into(),
                resource: ADDON_DEPLOYMENT_CONFIG_RESOURCE.into(),
                desired_config: Some(ConfigSpecHash {
                    namespace: String::new(),
                    name: SENTINEL.into(),
                    spec_hash: String::new(),
                }),
                ..Default::default()
            }],
            ..Default::default()
        });
        assert_eq!(
            desired_config(Lifecycle::AddonManager, &c, &m, &placements(&[])),
            None
        );
    }

    #[test]
    fn under_addon_manager_the_desired_config_comes_from_status() {
        let mut m = addon();
        m.status = Some(ManagedClusterAddOnStatus {
            config_references: vec![ConfigReference {
                group: ADDON_GROUP.into(),
                resource: ADDON_DEPLOYMENT_CONFIG_RESOURCE.into(),
                desired_config: Some(ConfigSpecHash {
                    namespace: "x".into(),
                    name: "y".into(),
                    spec_hash: String::new(),
                }),
                ..Default::default()
            }],
            ..Default::default()
        });
        assert_eq!(
            desired_config(Lifecycle::AddonManager, &cma(), &m, &placements(&["gpu"])),
            key("x", "y")
        );
    }

    fn ocm_reference(ns: &str, name: &str, hash: &str) -> ConfigReference {
        ConfigReference {
            group: ADDON_GROUP.into(),
            resource: ADDON_DEPLOYMENT_CONFIG_RESOURCE.into(),
            namespace: ns.into(),
            name: name.into(),
            desired_config: Some(ConfigSpecHash {
                namespace: ns.into(),
                name: name.into(),
                spec_hash: hash.into(),
            }),
            last_applied_config: Some(ConfigSpecHash {
                namespace: ns.into(),
                name: name.into(),
                spec_hash: "h0".into(),
            }),
            last_observed_generation: Some(1),
        }
    }

    fn desired_hashes(refs: &[ConfigReference]) -> Vec<&str> {
        refs.iter()
            .map(|r| r.desired_config.as_ref().map_or("-", |d| d.spec_hash.as_str()))
            .collect()
    }

    #[test]
    fn under_addon_manager_only_the_addons_own_configs_get_our_hash() {
        // OCM's rollout left this cluster on h1 for the placement's config while the object is at
        // h2: overwriting that hash would move the cluster out of its turn.
        let existing = [
            ocm_reference("hub", "placement-config", "h1"),
            ocm_reference("c1", "own-config", ""),
        ];
        let current = |k: &ConfigKey| match k.name.as_str() {
            "placement-config" => Some(("h2".to_string(), 2)),
            "own-config" => Some(("h9".to_string(), 5)),
            _ => None,
        };
        let refs = addon_manager_references(&existing, &[adc("c1", "own-config")], current);
        assert_eq!(desired_hashes(&refs), ["h1", "h9"]);
        assert_eq!(
            refs.iter()
                .map(|r| r.last_observed_generation)
                .collect::<Vec<_>>(),
            [Some(2), Some(5)],
            "every config's generation is observed"
        );
        assert_eq!(
            refs.iter()
                .map(|r| r.last_applied_config.as_ref().map(|c| c.spec_hash.as_str()))
                .collect::<Vec<_>>(),
            [Some("h0"), Some("h0")],
            "lastAppliedConfig is OCM's"
        );
        // The add-on's own config is matched by namespace too, as OCM matches it.
        let refs = addon_manager_references(&existing, &[adc("other", "own-config")], current);
        assert_eq!(desired_hashes(&refs), ["h1", ""]);
        // Deleted: the add-on's own config gets an empty hash, the generation stays as observed.
        let refs = addon_manager_references(&existing, &[adc("c1", "own-config")], |_| None);
        assert_eq!(desired_hashes(&refs), ["h1", ""]);
        assert_eq!(refs[1].last_observed_generation, Some(1));
        // Configs of kinds we do not read are left as OCM wrote them.
        let mut other = ocm_reference("", "cm", "");
        other.group = String::new();
        other.resource = "configmaps".into();
        let refs = addon_manager_references(&[other.clone()], &[], current);
        assert_eq!(refs, [other]);
    }

    #[test]
    fn the_work_annotation_names_every_reference_by_its_desired_config() {
        let mut other = ocm_reference("", "cm", "hc");
        other.group = String::new();
        other.resource = "configmaps".into();
        let mut undecided = ocm_reference("hub", "later", "");
        undecided.desired_config = None;
        let map = configs_to_map(&[ocm_reference("hub", "a", "h1"), other, undecided]);
        assert_eq!(
            map,
            BTreeMap::from([
                (
                    "addondeploymentconfigs.addon.open-cluster-management.io/hub/a".to_string(),
                    "h1".to_string()
                ),
                ("configmaps//cm".to_string(), "hc".to_string()),
            ])
        );
        assert!(configs_to_map(&[]).is_empty());
    }

    #[test]
    fn self_managed_references_track_desired_and_applied() {
        let observed = ObservedConfig {
            key: ConfigKey {
                namespace: "hub".into(),
                name: "default".into(),
            },
            found: Some(("h2".into(), 2)),
        };
        let refs = self_managed_references(&[], Some(&observed), Some("h1"));
        assert_eq!(refs.len(), 1);
        assert_eq!(
            (refs[0].name.as_str(), refs[0].namespace.as_str()),
            ("default", "hub")
        );
        assert_eq!(
            refs[0].desired_config.as_ref().map(|d| d.spec_hash.as_str()),
            Some("h2")
        );
        assert_eq!(
            refs[0].last_applied_config, None,
            "the applied work is still on h1"
        );
        let refs = self_managed_references(&refs, Some(&observed), Some("h2"));
        assert_eq!(
            refs[0].last_applied_config.as_ref().map(|d| d.spec_hash.as_str()),
            Some("h2")
        );
        assert!(self_managed_references(&refs, None, None).is_empty());
        let missing = ObservedConfig {
            found: None,
            ..observed
        };
        let refs = self_managed_references(&[], Some(&missing), None);
        assert_eq!(
            refs[0].desired_config.as_ref().map(|d| d.spec_hash.as_str()),
            Some("")
        );
        assert!(work_config_hashes(Some(&missing)).is_empty());
    }
}
