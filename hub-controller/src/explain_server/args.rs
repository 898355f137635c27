//! `ocm-score-hub explain-server` flags; each is also an environment variable of the shell's
//! scheme (`--some-thing` / `OCM_SCORE_SOME_THING`). Bad values exit 2 naming the flag and value.

use super::tls_profile::TlsProfile;
use clap::Args;
use ocm_score_shell::args::{ProbeArgs, SettingError};
use std::net::SocketAddr;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct ExplainServerArgs {
    /// `/metrics`, `/healthz` and `/readyz` (the process shell's flags).
    #[command(flatten)]
    pub probes: ProbeArgs,

    /// Address of the HTTPS endpoint `/debug/placements/`.
    #[arg(
        long,
        env = "OCM_SCORE_BIND_ADDRESS",
        value_name = "ADDR",
        default_value = "0.0.0.0:8443"
    )]
    pub bind_address: SocketAddr,

    /// The serving certificate (PEM, the chain leaf first), e.g. `tls.crt` of a mounted Secret.
    /// Re-read when it changes.
    #[arg(long, env = "OCM_SCORE_TLS_CERT_FILE", value_name = "FILE")]
    pub tls_cert_file: PathBuf,

    /// The serving certificate's private key (PEM), e.g. `tls.key` of a mounted Secret.
    #[arg(long, env = "OCM_SCORE_TLS_KEY_FILE", value_name = "FILE")]
    pub tls_key_file: PathBuf,

    /// Least TLS version served (OCM's flag): `VersionTLS12` or `VersionTLS13` (10 and 11 are
    /// served as 12). With this or --tls-cipher-suites, the `ocm-tls-profile` ConfigMap is not read.
    #[arg(long, env = "OCM_SCORE_TLS_MIN_VERSION", value_name = "VERSION")]
    pub tls_min_version: Option<String>,

    /// TLS 1.2 cipher suites served, IANA names comma separated (OCM's flag); TLS 1.3's are fixed.
    #[arg(long, env = "OCM_SCORE_TLS_CIPHER_SUITES", value_name = "SUITES")]
    pub tls_cipher_suites: Option<String>,

    /// Namespace whose `ocm-tls-profile` ConfigMap (`minTLSVersion`, `cipherSuites`) sets the TLS
    /// profile, watched and applied without a restart; the chart sets the server's own. Unset, and
    /// without the two flags above: TLS 1.2 and 1.3 with rustls's suites.
    #[arg(long, env = "OCM_SCORE_TLS_PROFILE_NAMESPACE", value_name = "NAMESPACE")]
    pub tls_profile_namespace: Option<String>,

    /// Kubeconfig of the hub; default: $KUBECONFIG, ~/.kube/config, or the in-cluster account.
    #[arg(long, env = "OCM_SCORE_KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

impl ExplainServerArgs {
    /// Checks clap cannot express: the certificate and key load and belong together, and the TLS
    /// flags parse (`None`: no flag given, the ConfigMap decides).
    pub fn validate(&self) -> Result<(super::tls::ServingCert, Option<TlsProfile>), SettingError> {
        let cert = super::tls::ServingCert::load(&self.tls_cert_file, &self.tls_key_file)?;
        let flags = (self.tls_min_version.is_some() || self.tls_cipher_suites.is_some())
            .then(|| {
                TlsProfile::parse(
                    self.tls_min_version.as_deref(),
                    self.tls_cipher_suites.as_deref(),
                    ("--tls-min-version", "--tls-cipher-suites"),
                )
            })
            .transpose()?;
        Ok((cert, flags))
    }
}
