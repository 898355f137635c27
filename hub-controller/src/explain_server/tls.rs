//! The serving certificate: read from PEM files (a mounted Secret's `tls.crt` and `tls.key`) and
//! read again on the next handshake after either file changes, so a rotated certificate (by
//! cert-manager, or a `kubectl create secret tls` edit) is served without a restart. A change that
//! does not load keeps the last good certificate, with a warning.

use super::tls_profile::TlsProfile;
use ocm_score_shell::args::SettingError;
use ocm_score_shell::sync::lock;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

/// A certificate with its key, ready to serve, and the files it came from.
#[derive(Clone, Debug)]
pub struct ServingCert {
    key: Arc<CertifiedKey>,
    cert_file: PathBuf,
    key_file: PathBuf,
    /// The files' modification times when read.
    read: (Option<SystemTime>, Option<SystemTime>),
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl ServingCert {
    /// Reads both files; an error names the flag and file at fault.
    pub fn load(cert_file: &Path, key_file: &Path) -> Result<Self, SettingError> {
        let read = (modified(cert_file), modified(key_file));
        let bad = |field: &str, path: &Path, problem: String| SettingError {
            field: field.to_owned(),
            value: path.display().to_string(),
            problem,
        };
        let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert_file)
            .map_err(|e| {
                bad(
                    "--tls-cert-file",
                    cert_file,
                    format!("cannot read a PEM certificate: {e}"),
                )
            })?
            .collect::<Result<_, _>>()
            .map_err(|e| {
                bad(
                    "--tls-cert-file",
                    cert_file,
                    format!("not a PEM certificate: {e}"),
                )
            })?;
        if chain.is_empty() {
            return Err(bad(
                "--tls-cert-file",
                cert_file,
                "holds no CERTIFICATE block".to_owned(),
            ));
        }
        let key = PrivateKeyDer::from_pem_file(key_file).map_err(|e| {
            bad(
                "--tls-key-file",
                key_file,
                format!("cannot read a PEM private key: {e}"),
            )
        })?;
        let signing = provider()
            .key_provider
            .load_private_key(key)
            .map_err(|e| bad("--tls-key-file", key_file, format!("unusable private key: {e}")))?;
        let certified = CertifiedKey::new(chain, signing);
        certified.keys_match().map_err(|e| {
            bad(
                "--tls-key-file",
                key_file,
                format!(
                    "does not belong to the certificate in {}: {e}",
                    cert_file.display()
                ),
            )
        })?;
        Ok(ServingCert {
            key: Arc::new(certified),
            cert_file: cert_file.to_owned(),
            key_file: key_file.to_owned(),
            read,
        })
    }

    fn changed(&self) -> bool {
        (modified(&self.cert_file), modified(&self.key_file)) != self.read
    }
}

/// Hands rustls the current certificate, reloading it when its files changed.
pub struct ReloadingCert {
    current: Mutex<ServingCert>,
    on_reload: Box<dyn Fn(bool) + Send + Sync>,
}

impl std::fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingCert")
            .field("current", &self.current)
            .finish_non_exhaustive()
    }
}

impl ReloadingCert {
    /// `on_reload` hears of each reload after a change, and whether it loaded.
    pub fn new(first: ServingCert, on_reload: impl Fn(bool) + Send + Sync + 'static) -> Self {
        ReloadingCert {
            current: Mutex::new(first),
            on_reload: Box::new(on_reload),
        }
    }

    /// The certificate to serve now.
    pub fn current(&self) -> Arc<CertifiedKey> {
        let mut current = lock(&self.current);
        if current.changed() {
            match ServingCert::load(&current.cert_file, &current.key_file) {
                Ok(fresh) => {
                    tracing::info!(cert = %current.cert_file.display(), "serving certificate changed; now serving the new one");
                    *current = fresh;
                    (self.on_reload)(true);
                }
                Err(error) => {
                    tracing::warn!(%error, "serving certificate changed but does not load; still serving the previous one");
                    // Not again until the files change once more.
                    current.read = (modified(&current.cert_file), modified(&current.key_file));
                    (self.on_reload)(false);
                }
            }
        }
        current.key.clone()
    }

    /// A rustls server configuration (HTTP/1.1) serving this certificate under `profile`.
    pub fn server_config(
        self: Arc<Self>,
        profile: &TlsProfile,
    ) -> Result<rustls::ServerConfig, rustls::Error> {
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(profile.provider()))
            .with_protocol_versions(&profile.versions())?
            .with_no_client_auth()
            .with_cert_resolver(self);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(config)
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}
