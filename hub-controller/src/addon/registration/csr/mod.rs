//! Which add-on certificate signing requests the hub approves, denies or leaves alone.
//!
//! The klusterlet on a managed cluster asks for the agent's hub client certificate with a CSR labelled
//! with the cluster and add-on names. We approve it only when every identity in it points at the same
//! cluster: the labels, the requester (the klusterlet's own hub identity) and the certificate subject.
//! A request that claims one cluster while coming from another is forged and is denied, so it cannot
//! linger and be approved by mistake later. A klusterlet that registers through OCM's gRPC server
//! does not create its CSR itself: the server's account does, and names the klusterlet in an
//! annotation, which counts only on CSRs that account created.

pub mod request;

use super::names;
use request::{RequestSubject, parse_pem_subject};

/// The facts about one CSR that the decision needs, read from the object and the hub caches.
#[derive(Clone, Debug)]
pub struct CsrFacts<'a> {
    pub name: &'a str,
    pub signer_name: &'a str,
    /// `spec.username`: who created the CSR, as authenticated by the API server.
    pub requester: &'a str,
    /// The `open-cluster-management.io/csr-user` annotation: who asked the OCM gRPC server for the
    /// CSR. Trusted only when the requester is that server's own account.
    pub grpc_user: Option<&'a str>,
    /// `spec.request`: the PEM-encoded PKCS#10 request.
    pub request: &'a [u8],
    pub addon_label: Option<&'a str>,
    pub cluster_label: Option<&'a str>,
    /// The CSR already carries an Approved, Denied or Failed condition.
    pub decided: bool,
    /// The labelled cluster has a ManagedCluster and our ManagedClusterAddOn.
    pub cluster_has_addon: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    Approve,
    /// Refuse it for good; the message says which identity did not match.
    Deny(String),
    /// Not ours to decide now (not an add-on CSR, already decided, or the add-on is not enabled
    /// on that cluster yet); the message says why, for logs.
    Skip(String),
}

/// Decides one CSR for add-on `addon`.
pub fn decide(addon: &str, csr: &CsrFacts<'_>) -> Decision {
    if csr.decided {
        return Decision::Skip("already approved or denied".into());
    }
    if csr.addon_label != Some(addon) || !csr.name.starts_with("addon") {
        return Decision::Skip("not a CSR of this add-on".into());
    }
    if csr.signer_name != names::KUBE_APISERVER_CLIENT_SIGNER {
        return Decision::Skip(format!(
            "signer {} is not handled by this add-on",
            csr.signer_name
        ));
    }
    let Some(cluster) = csr.cluster_label.filter(|c| !c.is_empty()) else {
        return Decision::Skip(format!("no {} label", names::CLUSTER_NAME_LABEL));
    };
    // The OCM gRPC server creates CSRs for the klusterlets it serves and names, in an annotation, the
    // klusterlet it authenticated. Only that server's account can make the API server record it as
    // the requester, so only then does the annotation speak for the requester; anyone else's
    // annotation is ignored.
    let (requester, via) = if csr.requester == names::GRPC_SERVER_REQUESTER {
        match csr.grpc_user.filter(|u| !u.is_empty()) {
            Some(user) => (user, " (through the OCM gRPC server)"),
            None => {
                return Decision::Skip(format!(
                    "created through the OCM gRPC server without the {} annotation",
                    names::CSR_USER_ANNOTATION
                ));
            }
        }
    } else {
        (csr.requester, "")
    };
    if !requester.starts_with(&names::cluster_requester_prefix(cluster)) {
        return Decision::Deny(format!(
            "requester {requester:?}{via} is not a klusterlet of cluster {cluster:?}"
        ));
    }
    if !csr.cluster_has_addon {
        return Decision::Skip(format!("add-on {addon} is not enabled on cluster {cluster}"));
    }
    let subject = match parse_pem_subject(csr.request) {
        Ok(subject) => subject,
        Err(e) => return Decision::Deny(format!("spec.request: {e}")),
    };
    match subject_mismatch(addon, cluster, &subject) {
        Some(why) => Decision::Deny(why),
        None => Decision::Approve,
    }
}

/// Why a subject does not belong to `addon` on `cluster`, if it does not.
fn subject_mismatch(addon: &str, cluster: &str, subject: &RequestSubject) -> Option<String> {
    let user = names::agent_user(cluster, addon);
    if subject.common_name != user {
        return Some(format!("common name {:?} is not {user:?}", subject.common_name));
    }
    let mut orgs = subject.organizations.clone();
    orgs.sort();
    orgs.dedup();
    let required = [
        names::cluster_addon_group(cluster, addon),
        names::addon_group(addon),
    ];
    if let Some(missing) = required.iter().find(|g| !orgs.contains(g)) {
        return Some(format!(
            "organizations {:?} lack {missing:?}",
            subject.organizations
        ));
    }
    // The two groups plus at most `system:authenticated`, as OCM's default approver allows.
    if orgs.len() > 3
        || orgs
            .iter()
            .any(|o| !required.contains(o) && o != "system:authenticated")
    {
        return Some(format!(
            "organizations {:?} ask for more than the add-on groups",
            subject.organizations
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::request::encode::csr_pem;
    use super::*;

    const ADDON: &str = "resource-usage-collect";

    fn subject(cluster: &str) -> RequestSubject {
        RequestSubject {
            common_name: names::agent_user(cluster, ADDON),
            organizations: vec![
                names::cluster_addon_group(cluster, ADDON),
                names::addon_group(ADDON),
            ],
            organizational_units: vec![],
        }
    }

    fn facts<'a>(cluster: &'a str, requester: &'a str, pem: &'a [u8]) -> CsrFacts<'a> {
        CsrFacts {
            name: "addon-prod-resource-usage-collect-abcde",
            signer_name: names::KUBE_APISERVER_CLIENT_SIGNER,
            requester,
            grpc_user: None,
            request: pem,
            addon_label: Some(ADDON),
            cluster_label: Some(cluster),
            decided: false,
            cluster_has_addon: true,
        }
    }

    #[test]
    fn approves_a_klusterlet_asking_for_its_own_cluster() {
        let pem = csr_pem(&subject("prod"));
        assert_eq!(
            decide(
                ADDON,
                &facts("prod", "system:open-cluster-management:prod:x7k2p", &pem)
            ),
            Decision::Approve
        );
        let mut with_authenticated = subject("prod");
        with_authenticated
            .organizations
            .push("system:authenticated".into());
        let pem = csr_pem(&with_authenticated);
        assert_eq!(
            decide(
                ADDON,
                &facts("prod", "system:open-cluster-management:prod:x7k2p", &pem)
            ),
            Decision::Approve
        );
    }

    #[test]
    fn through_the_grpc_server_the_annotated_klusterlet_is_the_requester() {
        let pem = csr_pem(&subject("prod"));
        let through = |user: &'static str| CsrFacts {
            grpc_user: Some(user),
            ..facts("prod", names::GRPC_SERVER_REQUESTER, &pem)
        };
        assert_eq!(
            decide(ADDON, &through("system:open-cluster-management:prod:x7k2p")),
            Decision::Approve
        );
        let d = decide(ADDON, &through("system:open-cluster-management:prod-2:x7k2p"));
        assert!(
            matches!(&d, Decision::Deny(m) if m.contains("prod-2") && m.contains("gRPC")),
            "{d:?}"
        );
        // The annotation of anyone but the gRPC server's account counts for nothing.
        let claimed = CsrFacts {
            grpc_user: Some("system:open-cluster-management:prod:x7k2p"),
            ..facts("prod", "system:serviceaccount:default:mallory", &pem)
        };
        let d = decide(ADDON, &claimed);
        assert!(matches!(&d, Decision::Deny(m) if m.contains("mallory")), "{d:?}");
    }

    #[test]
    fn denies_prod_2_asking_as_prod() {
        let pem = csr_pem(&subject("prod"));
        let d = decide(
            ADDON,
            &facts("prod", "system:open-cluster-management:prod-2:x7k2p", &pem),
        );
        assert!(matches!(&d, Decision::Deny(m) if m.contains("prod-2")), "{d:?}");
    }

    #[test]
    fn denies_subjects_for_another_cluster_or_extra_groups() {
        let requester = "system:open-cluster-management:prod:x7k2p";
        let cases: Vec<(RequestSubject, &str)> = vec![
            (subject("prod-2"), "common name"),
            (
                RequestSubject {
                    organizations: vec![names::addon_group(ADDON)],
                    ..subject("prod")
                },
                "lack",
            ),
            (
                RequestSubject {
                    organizations: vec![
                        names::cluster_addon_group("prod", ADDON),
                        names::addon_group(ADDON),
                        "system:masters".into(),
                    ],
                    ..subject("prod")
                },
                "more than",
            ),
        ];
        for (subject, needle) in cases {
            let pem = csr_pem(&subject);
            let d = decide(ADDON, &facts("prod", requester, &pem));
            assert!(
                matches!(&d, Decision::Deny(m) if m.contains(needle)),
                "{subject:?}: {d:?}"
            );
        }
        let d = decide(ADDON, &facts("prod", requester, b"not a pem"));
        assert!(
            matches!(&d, Decision::Deny(m) if m.contains("spec.request")),
            "{d:?}"
        );
    }

    #[test]
    fn skips_what_is_not_ours_to_decide() {
        let pem = csr_pem(&subject("prod"));
        let requester = "system:open-cluster-management:prod:x7k2p";
        let base = facts("prod", requester, &pem);
        let cases = [
            CsrFacts {
                decided: true,
                ..base.clone()
            },
            CsrFacts {
                addon_label: Some("other"),
                ..base.clone()
            },
            CsrFacts {
                name: "node-csr-1",
                ..base.clone()
            },
            CsrFacts {
                signer_name: "example.com/custom",
                ..base.clone()
            },
            CsrFacts {
                cluster_label: None,
                ..base.clone()
            },
            CsrFacts {
                cluster_has_addon: false,
                ..base.clone()
            },
            CsrFacts {
                requester: names::GRPC_SERVER_REQUESTER,
                ..base.clone()
            },
            CsrFacts {
                requester: names::GRPC_SERVER_REQUESTER,
                grpc_user: Some(""),
                ..base.clone()
            },
        ];
        for case in cases {
            assert!(matches!(decide(ADDON, &case), Decision::Skip(_)), "{case:?}");
        }
    }
}
