//! Kubernetes object-name rules (RFC 1123) for names given to us: namespaces, add-on, cluster and
//! tier names, and object names: the one implementation every mode's validators and the
//! TieredPlacement validation use.
//!
//! Object names only; where we emulate or match the API server exactly (the kube double, OCM's
//! label selectors) the server's own rules stand.

/// RFC 1123 label: namespace names, add-on names.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// RFC 1123 subdomain of RFC 1123 labels: most object names.
pub fn is_dns_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns_label)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_and_subdomains() {
        for ok in ["a", "ocm-score", "a1", &"a".repeat(63)] {
            assert!(is_dns_label(ok), "{ok}");
        }
        for bad in ["", "-a", "a-", "A", "a_b", "a.b", &"a".repeat(64)] {
            assert!(!is_dns_label(bad), "{bad}");
        }
        assert!(is_dns_subdomain("ocm-score.thanos-scorer"));
        assert!(!is_dns_subdomain("a..b"));
        assert!(!is_dns_subdomain(&format!("{}.b", "a".repeat(253))));
    }
}
