//! Certificates for one test cluster: its own CA, the API server's serving certificate, client
//! certificates for any user and groups, and the service-account signing key.
//!
//! Every cluster gets its own CA (as real clusters do), so a credential issued by one cluster's
//! signer never authenticates on another: a test that mixes them up fails here as it would in
//! production. The CA doubles as the controller-manager's CSR signer, so certificates that OCM
//! requests through `CertificateSigningRequest`s chain to the same root the API server trusts.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use base64::Engine;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    IsCa, KeyPair, KeyUsagePurpose, SanType,
};

use super::Error;

/// The first address of the service range the API servers use (`--service-cluster-ip-range`).
pub const KUBERNETES_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 1);

/// A certificate and its private key, both PEM.
#[derive(Clone, Debug)]
pub struct KeyedCert {
    pub cert_pem: String,
    pub key_pem: String,
}

impl KeyedCert {
    /// Writes `<stem>.crt` and `<stem>.key` into `dir` and returns their paths.
    pub fn write(&self, dir: &Path, stem: &str) -> Result<(PathBuf, PathBuf), Error> {
        let cert = dir.join(format!("{stem}.crt"));
        let key = dir.join(format!("{stem}.key"));
        write(&cert, &self.cert_pem)?;
        write(&key, &self.key_pem)?;
        Ok((cert, key))
    }
}

/// One cluster's certificate authority.
pub struct ClusterCa {
    name: String,
    issuer: CertifiedIssuer<'static, KeyPair>,
    key_pem: String,
}

impl ClusterCa {
    /// A new CA named after the cluster (`<cluster>-ca`).
    pub fn new(cluster: &str) -> Result<Self, Error> {
        let key = KeyPair::generate().map_err(|e| pki_error(cluster, "CA key", e))?;
        let key_pem = key.serialize_pem();
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(&format!("{cluster}-ca"), None);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let issuer = CertifiedIssuer::self_signed(params, key).map_err(|e| pki_error(cluster, "CA", e))?;
        Ok(ClusterCa {
            name: cluster.to_owned(),
            issuer,
            key_pem,
        })
    }

    pub fn cert_pem(&self) -> String {
        self.issuer.pem()
    }

    pub fn key_pem(&self) -> &str {
        &self.key_pem
    }

    /// The CA certificate as a kubeconfig / `caBundle` expects it: base64 of the PEM.
    pub fn bundle_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.cert_pem())
    }

    /// A serving certificate for a process on 127.0.0.1 (and the names an API server answers to).
    pub fn serving_cert(&self, common_name: &str) -> Result<KeyedCert, Error> {
        self.serving_cert_also_at(common_name, &[])
    }

    /// [`serving_cert`](Self::serving_cert), also valid at `addresses` (an API server that pods
    /// reach on the nodes' bridge).
    pub fn serving_cert_also_at(
        &self,
        common_name: &str,
        addresses: &[Ipv4Addr],
    ) -> Result<KeyedCert, Error> {
        let mut names = vec![
            SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
            SanType::IpAddress(IpAddr::V4(KUBERNETES_SERVICE_IP)),
        ];
        names.extend(addresses.iter().map(|a| SanType::IpAddress(IpAddr::V4(*a))));
        for name in [
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ] {
            names.push(dns(name)?);
        }
        self.serving(common_name, names)
    }

    /// A serving certificate for a process reached at `address` and by the DNS name `name` (a
    /// kubelet at its node address).
    pub fn serving_cert_for_address(&self, name: &str, address: Ipv4Addr) -> Result<KeyedCert, Error> {
        self.serving(name, vec![SanType::IpAddress(IpAddr::V4(address)), dns(name)?])
    }

    /// A serving certificate valid for exactly `dns_names` (no IP address), for tests of a client's
    /// server-name checks.
    pub fn serving_cert_for(&self, common_name: &str, dns_names: &[&str]) -> Result<KeyedCert, Error> {
        let names = dns_names.iter().map(|n| dns(n)).collect::<Result<Vec<_>, _>>()?;
        self.serving(common_name, names)
    }

    fn serving(&self, common_name: &str, names: Vec<SanType>) -> Result<KeyedCert, Error> {
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(common_name, None);
        params.subject_alt_names = names;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        self.sign(params, common_name)
    }

    /// A client certificate: the API server reads the user from the CN and the group from the O.
    /// rcgen keeps one value per attribute type, so at most one group.
    pub fn client_cert(&self, user: &str, group: Option<&str>) -> Result<KeyedCert, Error> {
        let mut params = CertificateParams::default();
        params.distinguished_name = dn(user, group);
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        self.sign(params, user)
    }

    fn sign(&self, params: CertificateParams, what: &str) -> Result<KeyedCert, Error> {
        let key = KeyPair::generate().map_err(|e| pki_error(&self.name, what, e))?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| pki_error(&self.name, what, e))?;
        Ok(KeyedCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// A fresh ECDSA P-256 key for signing service-account tokens: (private PKCS#8 PEM, public PEM).
pub fn service_account_key(cluster: &str) -> Result<(String, String), Error> {
    KeyPair::generate()
        .map(|k| (k.serialize_pem(), k.public_key_pem()))
        .map_err(|e| pki_error(cluster, "service-account key", e))
}

/// A kubeconfig that reaches `server` as the holder of `client`, with everything inline so the
/// file can be copied anywhere.
pub fn kubeconfig(cluster: &str, server: &str, ca: &ClusterCa, user: &str, client: &KeyedCert) -> String {
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {
            "server": server,
            "certificate-authority-data": ca.bundle_base64(),
        }}],
        "users": [{"name": user, "user": {
            "client-certificate-data": b64(&client.cert_pem),
            "client-key-data": b64(&client.key_pem),
        }}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user}}],
        "current-context": cluster,
    });
    // A JSON document is valid YAML; kubectl and client-go read either.
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

/// A kubeconfig that reaches `server` with a bearer token (a ServiceAccount's, for example).
pub fn token_kubeconfig(cluster: &str, server: &str, ca: &ClusterCa, user: &str, token: &str) -> String {
    let doc = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": cluster, "cluster": {"server": server, "certificate-authority-data": ca.bundle_base64()}}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": cluster, "context": {"cluster": cluster, "user": user}}],
        "current-context": cluster,
    });
    serde_json::to_string_pretty(&doc).unwrap_or_default()
}

pub(crate) fn write(path: &Path, contents: &str) -> Result<(), Error> {
    std::fs::write(path, contents).map_err(|source| Error::Io {
        what: format!("writing {}", path.display()),
        source,
    })
}

fn dn(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    if let Some(org) = organization {
        dn.push(DnType::OrganizationName, org);
    }
    dn
}

fn dns(name: &str) -> Result<SanType, Error> {
    name.try_into().map(SanType::DnsName).map_err(|e| Error::Pki {
        what: format!("DNS name {name:?}"),
        message: e.to_string(),
    })
}

fn pki_error(cluster: &str, what: &str, e: rcgen::Error) -> Error {
    Error::Pki {
        what: format!("{what} of cluster {cluster}"),
        message: e.to_string(),
    }
}
