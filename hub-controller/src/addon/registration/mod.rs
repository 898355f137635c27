//! What the hub tells the klusterlet about registering the agent: `status.registrations` (the
//! identity the agent's certificate will carry) and `status.namespace` (where the agent runs and
//! the hub kubeconfig Secret is written), the approval of the agent's certificate requests
//! ([`csr`]) and its permissions on the hub ([`hub_rbac`]).

pub mod csr;
pub mod hub_rbac;

use super::names;
use ocm_score_api::{ManagedClusterAddOn, RegistrationConfig, Subject};

/// The registration the agent needs: one kube-apiserver client certificate.
///
/// With the klusterlet's `token` driver the klusterlet itself writes the subject (a service account
/// on the hub); we keep it. With the `csr` driver (the default) the subject is the stable agent user
/// and both add-on groups: OCM's CSR approval requires both groups in the request.
pub fn registrations(addon: &str, mca: &ManagedClusterAddOn) -> Vec<RegistrationConfig> {
    let cluster = mca.metadata.namespace.as_deref().unwrap_or_default();
    let status = mca.status.as_ref();
    let token_driver = status
        .and_then(|s| s.extra.get("kubeClientDriver"))
        .and_then(|d| d.as_str())
        .is_some_and(|d| d == "token");
    let existing = status
        .into_iter()
        .flat_map(|s| &s.registrations)
        .find(|r| r.signer_name == names::KUBE_APISERVER_CLIENT_SIGNER)
        .and_then(|r| r.subject.clone())
        .filter(|s| !s.user.is_empty());
    let subject = match existing {
        Some(subject) if token_driver => subject,
        _ => Subject {
            user: names::agent_user(cluster, addon),
            groups: vec![
                names::cluster_addon_group(cluster, addon),
                names::addon_group(addon),
            ],
            organization_unit: vec![],
        },
    };
    vec![RegistrationConfig {
        signer_name: names::KUBE_APISERVER_CLIENT_SIGNER.to_string(),
        subject: Some(subject),
    }]
}

/// The install namespace: the AddOnDeploymentConfig's `agentInstallNamespace` when set, else the
/// add-on's own request (v1alpha1 `spec.installNamespace`, or its v1beta1 annotation), else OCM's default.
pub fn install_namespace(mca: &ManagedClusterAddOn, from_config: Option<&str>) -> String {
    let annotation = mca
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(names::INSTALL_NAMESPACE_ANNOTATION));
    [
        from_config,
        annotation.map(String::as_str),
        mca.spec.install_namespace.as_deref(),
    ]
    .into_iter()
    .flatten()
    .find(|ns| !ns.is_empty())
    .unwrap_or(names::DEFAULT_INSTALL_NAMESPACE)
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocm_score_api::{ManagedClusterAddOnStatus, ObjectMeta};

    fn mca(cluster: &str) -> ManagedClusterAddOn {
        ManagedClusterAddOn {
            metadata: ObjectMeta {
                name: Some("a".into()),
                namespace: Some(cluster.into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn csr_driver_gets_the_default_subject_with_both_groups() {
        let regs = registrations("a", &mca("c1"));
        assert_eq!(regs.len(), 1);
        assert_eq!(regs[0].signer_name, "kubernetes.io/kube-apiserver-client");
        let subject = regs[0].subject.as_ref().expect("subject");
        assert_eq!(
            subject.user,
            "system:open-cluster-management:cluster:c1:addon:a:agent:a"
        );
        assert_eq!(
            subject.groups,
            vec![
                "system:open-cluster-management:cluster:c1:addon:a",
                "system:open-cluster-management:addon:a"
            ]
        );
    }

    #[test]
    fn token_driver_keeps_the_klusterlet_subject_and_csr_driver_does_not() {
        let theirs = Subject {
            user: "system:serviceaccount:c1:a-agent".into(),
            ..Default::default()
        };
        let mut m = mca("c1");
        let mut status = ManagedClusterAddOnStatus {
            registrations: vec![RegistrationConfig {
                signer_name: names::KUBE_APISERVER_CLIENT_SIGNER.into(),
                subject: Some(theirs.clone()),
            }],
            ..Default::default()
        };
        status.extra.insert("kubeClientDriver".into(), "token".into());
        m.status = Some(status.clone());
        assert_eq!(registrations("a", &m)[0].subject.as_ref(), Some(&theirs));
        status.extra.insert("kubeClientDriver".into(), "csr".into());
        m.status = Some(status);
        assert_ne!(registrations("a", &m)[0].subject.as_ref(), Some(&theirs));
    }

    #[test]
    fn install_namespace_precedence() {
        let mut m = mca("c1");
        assert_eq!(install_namespace(&m, None), "open-cluster-management-agent-addon");
        m.spec.install_namespace = Some("from-spec".into());
        assert_eq!(install_namespace(&m, None), "from-spec");
        m.metadata.annotations = Some(
            [(
                names::INSTALL_NAMESPACE_ANNOTATION.to_string(),
                "from-annotation".to_string(),
            )]
            .into(),
        );
        assert_eq!(install_namespace(&m, None), "from-annotation");
        assert_eq!(install_namespace(&m, Some("")), "from-annotation");
        assert_eq!(install_namespace(&m, Some("from-config")), "from-config");
    }
}
