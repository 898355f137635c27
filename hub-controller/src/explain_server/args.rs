//! `ocm-score-hub explain-server` flags; each is also an environment variable of the shell's
//! scheme (`--some-thing` / `OCM_SCORE_SOME_THING`). Bad values exit 2 naming the flag and value.

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

    /// Kubeconfig of the hub; default: $KUBECONFIG, ~/.kube/config, or the in-cluster account.
    #[arg(long, env = "OCM_SCORE_KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

impl ExplainServerArgs {
    /// Checks clap cannot express: the certificate and key load and belong together.
    pub fn validate(&self) -> Result<super::tls::ServingCert, SettingError> {
        super::tls::ServingCert::load(&self.tls_cert_file, &self.tls_key_file)
    }
}
