//! The connection to the hub, from the kubeconfig OCM mounts for the add-on.
//!
//! OCM's registration agent rotates the client certificate in place (same Secret, same mounted files).
//! client-go reloads such files by itself; kube-rs reads them once when a client is built. So before
//! each use the agent fingerprints the kubeconfig and every file it references (certificate, key, CA,
//! token) and builds a new client when any of them changed.
//!
//! Every client it builds reads the hub's clock off the responses ([`HubClock`]).

use crate::hub_clock::{HubClock, ObserveDate};
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use std::hash::{DefaultHasher, Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[derive(Debug, thiserror::Error)]
pub enum HubError {
    #[error("reading hub kubeconfig {path}: {message}")]
    Kubeconfig { path: PathBuf, message: String },
    #[error("building the hub client from {path}: {message}")]
    Client { path: PathBuf, message: String },
}

pub struct HubConnection {
    kubeconfig: PathBuf,
    current: Option<(u64, Client)>,
    /// The client was given, not built from files (tests with an in-process hub).
    pinned: bool,
    /// Fed by every client built here; kept across rebuilds.
    clock: Arc<HubClock>,
}

impl HubConnection {
    pub fn new(kubeconfig: PathBuf) -> Self {
        HubConnection {
            kubeconfig,
            current: None,
            pinned: false,
            clock: Arc::default(),
        }
    }

    /// Always this client, never rebuilt: an in-process hub in tests, or one client shared by the
    /// simulated agents of a fleet ([`crate::run::run_simulated`]).
    pub fn pinned(client: Client) -> Self {
        HubConnection {
            kubeconfig: PathBuf::new(),
            current: Some((0, client)),
            pinned: true,
            clock: Arc::default(),
        }
    }

    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The hub's clock as the responses so far tell it.
    pub fn clock(&self) -> &HubClock {
        &self.clock
    }

    /// The hub client, rebuilt if the kubeconfig or a file it references changed since the last call.
    pub async fn client(&mut self) -> Result<Client, HubError> {
        if self.pinned
            && let Some((_, client)) = &self.current
        {
            return Ok(client.clone());
        }
        let fingerprint = fingerprint(&self.kubeconfig)?;
        if let Some((known, client)) = &self.current
            && *known == fingerprint
        {
            return Ok(client.clone());
        }
        let client = self.build().await?;
        if self.current.is_some() {
            tracing::info!(kubeconfig = %self.kubeconfig.display(), "hub credentials changed; reconnected");
        }
        self.current = Some((fingerprint, client.clone()));
        Ok(client)
    }

    /// Forgets the client so the next call builds a fresh one (after an authentication failure).
    pub fn reset(&mut self) {
        if self.pinned {
            return;
        }
        self.current = None;
    }

    async fn build(&self) -> Result<Client, HubError> {
        let fail = |message: String| HubError::Client {
            path: self.kubeconfig.clone(),
            message,
        };
        let kubeconfig = read_kubeconfig(&self.kubeconfig)?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| fail(e.to_string()))?;
        let builder = ClientBuilder::try_from(config).map_err(|e| fail(e.to_string()))?;
        Ok(builder
            .with_layer(&ObserveDate::layer(self.clock.clone()))
            .build())
    }
}

fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, HubError> {
    Kubeconfig::read_from(path).map_err(|e| HubError::Kubeconfig {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// A hash of the kubeconfig and the contents of every file it references (relative paths resolved
/// against the kubeconfig's directory, as kube does).
pub fn fingerprint(path: &Path) -> Result<u64, HubError> {
    let read = |file: &Path| {
        std::fs::read(file).map_err(|e| HubError::Kubeconfig {
            path: path.to_owned(),
            message: format!("{}: {e}", file.display()),
        })
    };
    let mut hasher = DefaultHasher::new();
    read(path)?.hash(&mut hasher);
    let kubeconfig = read_kubeconfig(path)?;
    let mut files: Vec<&String> = Vec::new();
    for cluster in kubeconfig.clusters.iter().filter_map(|c| c.cluster.as_ref()) {
        files.extend(cluster.certificate_authority.as_ref());
    }
    for auth in kubeconfig.auth_infos.iter().filter_map(|a| a.auth_info.as_ref()) {
        files.extend(auth.client_certificate.as_ref());
        files.extend(auth.client_key.as_ref());
        files.extend(auth.token_file.as_ref());
    }
    for file in files {
        file.hash(&mut hasher);
        read(Path::new(file))?.hash(&mut hasher);
    }
    Ok(hasher.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocm_score_tests::support::TempDir;

    const KUBECONFIG: &str = "\
apiVersion: v1
kind: Config
clusters:
- name: hub
  cluster:
    server: https://127.0.0.1:6443
    insecure-skip-tls-verify: true
contexts:
- name: default-context
  context: {cluster: hub, user: default-auth, namespace: configuration}
current-context: default-context
users:
- name: default-auth
  user:
    tokenFile: token
";

    #[test]
    fn fingerprint_follows_referenced_files() {
        let dir = TempDir::new("hub");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, KUBECONFIG).expect("write");
        std::fs::write(dir.path().join("token"), "first").expect("write");
        let before = fingerprint(&kubeconfig).expect("fingerprint");
        assert_eq!(fingerprint(&kubeconfig).expect("fingerprint"), before, "stable");
        std::fs::write(dir.path().join("token"), "rotated").expect("write");
        assert_ne!(
            fingerprint(&kubeconfig).expect("fingerprint"),
            before,
            "a rotated credential is noticed"
        );
        std::fs::remove_file(dir.path().join("token")).expect("remove");
        let err = fingerprint(&kubeconfig).expect_err("missing token file");
        assert!(err.to_string().contains("token"), "{err}");
    }

    #[tokio::test]
    async fn client_is_rebuilt_only_when_credentials_change() {
        let dir = TempDir::new("hub");
        let kubeconfig = dir.path().join("kubeconfig");
        std::fs::write(&kubeconfig, KUBECONFIG).expect("write");
        std::fs::write(dir.path().join("token"), "first").expect("write");
        let mut hub = HubConnection::new(kubeconfig);
        hub.client().await.expect("client");
        let first = hub.current.as_ref().map(|(f, _)| *f);
        hub.client().await.expect("client");
        assert_eq!(hub.current.as_ref().map(|(f, _)| *f), first);
        std::fs::write(dir.path().join("token"), "second").expect("write");
        hub.client().await.expect("client");
        assert_ne!(hub.current.as_ref().map(|(f, _)| *f), first);
    }
}
