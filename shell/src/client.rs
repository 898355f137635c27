//! The Kubernetes client of a mode: from an explicit kubeconfig file, else inferred ($KUBECONFIG,
//! ~/.kube/config, or the in-cluster service account).

use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("{flag}={path}: {source}")]
    Kubeconfig {
        flag: &'static str,
        path: String,
        #[source]
        source: Box<kube::config::KubeconfigError>,
    },
    #[error("no Kubernetes configuration found (give {flag}, $KUBECONFIG or run in a pod): {0}", flag = .1)]
    Infer(#[source] Box<kube::config::InferConfigError>, &'static str),
    #[error("building the Kubernetes client: {0}")]
    Client(#[source] Box<kube::Error>),
}

/// A client for `kubeconfig` (named `flag` in errors), or the inferred configuration.
pub async fn client(kubeconfig: Option<&Path>, flag: &'static str) -> Result<kube::Client, ClientError> {
    let config = match kubeconfig {
        Some(path) => {
            let error = |source| ClientError::Kubeconfig {
                flag,
                path: path.display().to_string(),
                source: Box::new(source),
            };
            let file = kube::config::Kubeconfig::read_from(path).map_err(error)?;
            kube::Config::from_custom_kubeconfig(file, &Default::default())
                .await
                .map_err(error)?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| ClientError::Infer(Box::new(e), flag))?,
    };
    kube::Client::try_from(config).map_err(|e| ClientError::Client(Box::new(e)))
}
