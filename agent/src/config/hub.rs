//! Where scores are written on the hub: a kubeconfig file, or the directory OCM mounts the
//! `<addon>-hub-kubeconfig` Secret into (its `cluster-name` file names the cluster).

use super::{ConfigError, check_dns_label};
use ocm_score_agent_contract::flag;
use std::path::{Path, PathBuf};

/// Where scores are written on the hub.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HubTarget {
    /// The kubeconfig file (inside the mounted Secret directory when a directory was given).
    pub kubeconfig: PathBuf,
    pub cluster_name: String,
}

pub(super) struct HubKubeconfigLocation {
    pub(super) kubeconfig: PathBuf,
    pub(super) cluster_name_file: Option<String>,
}

/// A hub kubeconfig file, or OCM's mounted Secret directory with `kubeconfig` (and `cluster-name`).
pub(super) fn locate_hub_kubeconfig(path: &Path) -> Result<HubKubeconfigLocation, ConfigError> {
    let shown = path.display().to_string();
    if path.is_dir() {
        let kubeconfig = path.join("kubeconfig");
        if !kubeconfig.is_file() {
            return Err(ConfigError::new(
                flag::HUB_KUBECONFIG,
                shown,
                "the directory holds no `kubeconfig` file",
            ));
        }
        let cluster_name_file = match std::fs::read_to_string(path.join("cluster-name")) {
            Ok(text) => {
                let name = text.trim().to_owned();
                check_dns_label(flag::HUB_KUBECONFIG, &name).map_err(|e| {
                    ConfigError::new(
                        flag::HUB_KUBECONFIG,
                        shown.clone(),
                        format!("its cluster-name file: {}", e.reason),
                    )
                })?;
                Some(name)
            }
            Err(_) => None,
        };
        Ok(HubKubeconfigLocation {
            kubeconfig,
            cluster_name_file,
        })
    } else if path.is_file() {
        Ok(HubKubeconfigLocation {
            kubeconfig: path.to_owned(),
            cluster_name_file: None,
        })
    } else {
        Err(ConfigError::new(
            flag::HUB_KUBECONFIG,
            shown,
            "no such file or directory",
        ))
    }
}
