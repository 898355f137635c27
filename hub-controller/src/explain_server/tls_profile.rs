//! The hub's TLS profile, as OCM components follow it: the `ocm-tls-profile` ConfigMap
//! (`minTLSVersion`: `VersionTLS10`..`VersionTLS13`; `cipherSuites`: IANA names, comma separated),
//! or the `--tls-min-version` / `--tls-cipher-suites` flags OCM's operators pass the components they
//! deploy. Flags win; without them the ConfigMap in the server's namespace is watched and a change
//! applies to the next handshake, no restart.
//!
//! rustls speaks TLS 1.2 and 1.3 only, and only AEAD suites with forward secrecy: a profile that
//! allows less (TLS 1.0, a CBC suite) is served as strictly as rustls can, with a warning; one that
//! names nothing rustls can serve over TLS 1.2 leaves TLS 1.3 alone.

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::Api;
use kube::runtime::watcher;
use ocm_score_shell::args::SettingError;
use ocm_score_shell::watch::WatchRetryExt;
use rustls::crypto::CryptoProvider;
use rustls::{SupportedCipherSuite, SupportedProtocolVersion};

/// The ConfigMap's name, and its keys (OCM's sdk-go).
pub const CONFIG_MAP: &str = "ocm-tls-profile";
pub const MIN_VERSION_KEY: &str = "minTLSVersion";
pub const CIPHER_SUITES_KEY: &str = "cipherSuites";

/// What the profile allows, as rustls can serve it.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct TlsProfile {
    /// TLS 1.3 only (`VersionTLS13`); otherwise 1.2 and 1.3.
    pub tls13_only: bool,
    /// The TLS 1.2 suites allowed, by IANA name; `None`: rustls's defaults. TLS 1.3 suites are not
    /// configurable (as in Go).
    pub tls12_suites: Option<Vec<String>>,
}

impl TlsProfile {
    /// Reads a profile's two settings; `fields` name them in errors (flags or ConfigMap keys).
    pub fn parse(
        min_version: Option<&str>,
        cipher_suites: Option<&str>,
        fields: (&str, &str),
    ) -> Result<TlsProfile, SettingError> {
        let tls13_only = match min_version.map(str::trim).unwrap_or_default() {
            "" | "VersionTLS12" => false,
            "VersionTLS13" => true,
            "VersionTLS10" | "VersionTLS11" => {
                tracing::warn!(
                    field = fields.0,
                    value = min_version.unwrap_or_default(),
                    "TLS below 1.2 is allowed by the profile, but this server speaks TLS 1.2 and 1.3 only"
                );
                false
            }
            other => {
                return Err(SettingError {
                    field: fields.0.to_owned(),
                    value: other.to_owned(),
                    problem: "not a TLS version: VersionTLS10, VersionTLS11, VersionTLS12 or VersionTLS13"
                        .to_owned(),
                });
            }
        };
        let tls12_suites = match cipher_suites.map(str::trim) {
            None | Some("") => None,
            Some(list) => {
                let named: Vec<String> = list
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned)
                    .collect();
                let (mut tls12, mut unknown) = (Vec::new(), Vec::new());
                for name in named {
                    match suite(&name) {
                        Some(SupportedCipherSuite::Tls12(_)) => tls12.push(name),
                        // TLS 1.3's suites are fixed (Go ignores them in the list too): naming one
                        // is no mistake, and changes nothing.
                        Some(SupportedCipherSuite::Tls13(_)) => {}
                        None => unknown.push(name),
                    }
                }
                if !unknown.is_empty() {
                    tracing::warn!(
                        field = fields.1,
                        suites = unknown.join(","),
                        "cipher suites this server cannot serve are left out"
                    );
                }
                Some(tls12)
            }
        };
        Ok(TlsProfile {
            tls13_only,
            tls12_suites,
        })
    }

    /// The profile a ConfigMap holds; `None` (defaults) for no ConfigMap.
    pub fn from_config_map(config_map: Option<&ConfigMap>) -> Result<TlsProfile, SettingError> {
        let data = config_map.and_then(|c| c.data.as_ref());
        let get = |key: &str| data.and_then(|d| d.get(key)).map(String::as_str);
        TlsProfile::parse(
            get(MIN_VERSION_KEY),
            get(CIPHER_SUITES_KEY),
            (
                &format!("ConfigMap {CONFIG_MAP} {MIN_VERSION_KEY}"),
                &format!("ConfigMap {CONFIG_MAP} {CIPHER_SUITES_KEY}"),
            ),
        )
    }

    /// The protocol versions to offer.
    pub fn versions(&self) -> Vec<&'static SupportedProtocolVersion> {
        let tls12_usable = !self.tls13_only && self.tls12_suites.as_ref().is_none_or(|s| !s.is_empty());
        if tls12_usable {
            vec![&rustls::version::TLS13, &rustls::version::TLS12]
        } else {
            vec![&rustls::version::TLS13]
        }
    }

    /// rustls's provider with the suites this profile allows.
    pub fn provider(&self) -> CryptoProvider {
        let mut provider = rustls::crypto::ring::default_provider();
        if let Some(allowed) = &self.tls12_suites {
            provider.cipher_suites.retain(|s| match s {
                SupportedCipherSuite::Tls13(_) => true,
                SupportedCipherSuite::Tls12(_) => {
                    s.suite().as_str().is_some_and(|n| allowed.iter().any(|a| a == n))
                }
            });
        }
        provider
    }

    /// For logs: `TLS 1.3 only`, or `TLS 1.2 (N suites) and 1.3`.
    pub fn describe(&self) -> String {
        match (&self.versions()[..], &self.tls12_suites) {
            ([_], _) => "TLS 1.3 only".to_owned(),
            (_, None) => "TLS 1.2 and 1.3".to_owned(),
            (_, Some(suites)) => format!("TLS 1.2 ({}) and 1.3", suites.join(",")),
        }
    }
}

/// A suite rustls serves (TLS 1.2 or 1.3), by IANA name.
fn suite(name: &str) -> Option<SupportedCipherSuite> {
    rustls::crypto::ring::default_provider()
        .cipher_suites
        .into_iter()
        .find(|s| s.suite().as_str() == Some(name))
}

/// Watches the profile ConfigMap in `namespace` and calls `apply` with each new profile (defaults
/// when it is absent or deleted). A ConfigMap that does not parse keeps the last good profile and
/// logs why. Runs until dropped.
pub async fn watch(api: Api<ConfigMap>, mut apply: impl FnMut(TlsProfile)) {
    let config = watcher::Config::default().fields(&format!("metadata.name={CONFIG_MAP}"));
    let mut events = watcher(api, config).watch_backoff().boxed();
    let mut listed: Option<Option<ConfigMap>> = None;
    let mut current: Option<TlsProfile> = None;
    while let Some(event) = events.next().await {
        let found = match event {
            Ok(watcher::Event::Init) => {
                listed = Some(None);
                continue;
            }
            Ok(watcher::Event::InitApply(cm)) => {
                listed = Some(Some(cm));
                continue;
            }
            Ok(watcher::Event::InitDone) => listed.take().flatten(),
            Ok(watcher::Event::Apply(cm)) => Some(cm),
            Ok(watcher::Event::Delete(_)) => None,
            Err(error) => {
                tracing::warn!(%error, "watching the TLS profile ConfigMap; retrying");
                continue;
            }
        };
        match TlsProfile::from_config_map(found.as_ref()) {
            Ok(profile) if current.as_ref() != Some(&profile) => {
                current = Some(profile.clone());
                apply(profile);
            }
            Ok(_) => {}
            Err(error) => tracing::error!(%error, "the TLS profile does not parse; keeping the one served"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIELDS: (&str, &str) = ("--tls-min-version", "--tls-cipher-suites");

    #[test]
    fn versions_follow_the_minimum() {
        let profile = |v: &str| TlsProfile::parse(Some(v), None, FIELDS).unwrap();
        assert_eq!(profile("VersionTLS13").versions(), vec![&rustls::version::TLS13]);
        assert_eq!(profile("VersionTLS12").versions().len(), 2);
        // Below 1.2 is served as 1.2: rustls has nothing older.
        assert_eq!(profile("VersionTLS10").versions().len(), 2);
        assert_eq!(
            TlsProfile::parse(None, None, FIELDS).unwrap(),
            TlsProfile::default()
        );
    }

    #[test]
    fn a_bad_version_names_the_field_and_value() {
        let error = TlsProfile::parse(Some("TLS1.3"), None, FIELDS).unwrap_err();
        assert_eq!(error.field, "--tls-min-version");
        assert_eq!(error.value, "TLS1.3");
    }

    #[test]
    fn suites_keep_what_rustls_serves_over_tls12() {
        let profile = TlsProfile::parse(
            Some("VersionTLS12"),
            Some(
                "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_RSA_WITH_AES_128_CBC_SHA,TLS_AES_128_GCM_SHA256",
            ),
            FIELDS,
        )
        .unwrap();
        assert_eq!(
            profile.tls12_suites.as_deref(),
            Some(&["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256".to_owned()][..])
        );
        let provider = profile.provider();
        let tls12: Vec<_> = provider
            .cipher_suites
            .iter()
            .filter(|s| matches!(s, SupportedCipherSuite::Tls12(_)))
            .collect();
        assert_eq!(tls12.len(), 1);
        assert!(
            provider
                .cipher_suites
                .iter()
                .any(|s| matches!(s, SupportedCipherSuite::Tls13(_)))
        );
        assert_eq!(
            profile.describe(),
            "TLS 1.2 (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256) and 1.3"
        );
    }

    #[test]
    fn no_usable_tls12_suite_leaves_tls13_alone() {
        let profile = TlsProfile::parse(None, Some("TLS_RSA_WITH_AES_128_CBC_SHA"), FIELDS).unwrap();
        assert_eq!(profile.versions(), vec![&rustls::version::TLS13]);
    }

    #[test]
    fn a_config_map_is_read_by_its_keys() {
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": CONFIG_MAP},
            "data": {"minTLSVersion": "VersionTLS13"},
        }))
        .unwrap();
        assert!(TlsProfile::from_config_map(Some(&cm)).unwrap().tls13_only);
        assert_eq!(TlsProfile::from_config_map(None).unwrap(), TlsProfile::default());
        let bad: ConfigMap =
            serde_json::from_value(serde_json::json!({"data": {"minTLSVersion": "1.3"}})).unwrap();
        let error = TlsProfile::from_config_map(Some(&bad)).unwrap_err();
        assert_eq!(error.field, "ConfigMap ocm-tls-profile minTLSVersion");
    }
}
