//! What is scored and how, shared by `run` and `once`: sources, published scores, validity,
//! timeouts, and the hub target when one is configured.

use super::hub::locate_hub_kubeconfig;
use super::{ConfigError, HubTarget, Sources, check_dns_label, check_dns_subdomain};
use crate::accounting::{FitsOptions, ResourceSet};
use crate::cli::{LogFormat, ScoringArgs};
use crate::scores::ScoreDef;
use crate::shapes::ShapeSource;
use ocm_score_agent_contract::flag;
use std::path::PathBuf;
use std::time::Duration;

/// What is scored and how, shared by `run` and `once`.
#[derive(Clone, Debug)]
pub struct ScoringConfig {
    pub sources: Sources,
    pub resources: ResourceSet,
    pub scores: Vec<ScoreDef>,
    pub score_object_name: String,
    pub validity: Duration,
    pub managed_kubeconfig: Option<PathBuf>,
    pub hub: Option<HubTarget>,
    /// Known even without a hub (then only used as the printed object's namespace).
    pub cluster_name: Option<String>,
    pub api_timeout: Duration,
    pub hub_timeout: Duration,
    pub kubelet_concurrency: usize,
    /// Where the WorkloadShapes of the `fits.<shape>` scores come from.
    pub shapes: ShapeSource,
    pub fits: FitsOptions,
    pub log_format: LogFormat,
}

impl ScoringConfig {
    /// `default_validity` applies when --validity is not given.
    pub fn from_args(args: ScoringArgs, default_validity: Duration) -> Result<Self, ConfigError> {
        let ScoringArgs {
            sources,
            extended_resources,
            normalize,
            scores,
            score_object_name,
            validity,
            managed_kubeconfig,
            hub_kubeconfig,
            cluster_name,
            api_timeout,
            hub_timeout,
            kubelet_concurrency,
            shapes,
            deduct_pending,
            log_format,
        } = args;

        let sources = Sources::from_list(&sources)?;
        let specs = ocm_score_agent_contract::published_scores(&extended_resources, &normalize, &scores)?;
        let resources = ResourceSet::with_extended(extended_resources.iter().map(|e| e.resource.clone()))
            .map_err(|e| {
                let listed: Vec<&str> = extended_resources.iter().map(|e| e.resource.as_str()).collect();
                ConfigError::new(flag::EXTENDED_RESOURCE, listed.join(","), e.to_string())
            })?;
        // Every published score is about a built-in or configured resource, which `resources` holds.
        let defs: Vec<ScoreDef> = specs
            .into_iter()
            .filter_map(|spec| ScoreDef::from_spec(spec, &resources))
            .collect();

        check_dns_subdomain(flag::SCORE_OBJECT_NAME, &score_object_name)?;
        let validity = validity.map_or(default_validity, |v| v.0);
        ocm_score_agent_contract::check_validity(validity)?;
        ocm_score_agent_contract::check_timeouts(api_timeout.0, hub_timeout.0)?;

        let hub_kubeconfig = hub_kubeconfig.map(|p| locate_hub_kubeconfig(&p)).transpose()?;
        let cluster_name = match cluster_name {
            Some(name) => {
                check_dns_label(flag::CLUSTER_NAME, &name)?;
                Some(name)
            }
            None => hub_kubeconfig.as_ref().and_then(|h| h.cluster_name_file.clone()),
        };
        let hub = match (&hub_kubeconfig, &cluster_name) {
            (Some(h), Some(name)) => Some(HubTarget {
                kubeconfig: h.kubeconfig.clone(),
                cluster_name: name.clone(),
            }),
            _ => None,
        };
        if let Some(path) = &managed_kubeconfig
            && !path.is_file()
        {
            return Err(ConfigError::new(
                flag::MANAGED_KUBECONFIG,
                path.display().to_string(),
                "no such file",
            ));
        }

        let shapes = match shapes {
            Some(path) => {
                let shown = path.display().to_string();
                if !sources.cluster {
                    return Err(ConfigError::new(
                        flag::SHAPES,
                        shown,
                        "fits scores count the managed cluster's nodes and pods: needs --source cluster",
                    ));
                }
                let (shapes, unreadable) =
                    crate::shapes::read_file(&path).map_err(|e| ConfigError::new(flag::SHAPES, shown, e))?;
                ShapeSource::File {
                    path,
                    shapes,
                    unreadable,
                }
            }
            None if sources.cluster && hub.is_some() => ShapeSource::Hub,
            None => ShapeSource::None,
        };

        Ok(ScoringConfig {
            sources,
            resources,
            scores: defs,
            score_object_name,
            validity,
            managed_kubeconfig,
            hub,
            cluster_name,
            api_timeout: api_timeout.0,
            hub_timeout: hub_timeout.0,
            kubelet_concurrency: usize::from(kubelet_concurrency),
            shapes,
            fits: FitsOptions { deduct_pending },
            log_format,
        })
    }

    pub(super) fn require_hub(&self) -> Result<HubTarget, ConfigError> {
        match (&self.hub, &self.cluster_name) {
            (Some(hub), _) => Ok(hub.clone()),
            (None, None) => Err(ConfigError::new(
                flag::CLUSTER_NAME,
                "",
                "needed to publish: set it, or point --hub-kubeconfig at OCM's secret directory holding cluster-name",
            )),
            (None, Some(_)) => Err(ConfigError::new(
                flag::HUB_KUBECONFIG,
                "",
                "needed to publish: the hub kubeconfig file or OCM's <addon>-hub-kubeconfig secret directory",
            )),
        }
    }
}
