//! One Kubernetes cluster as processes: etcd, kube-apiserver and kube-controller-manager, with its
//! own CA, on free loopback ports.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use super::go_components::Components;
use super::node;
use super::pki::{self, ClusterCa};
use super::process::{Component, Tier};
use super::{Error, free_port};

/// What a started cluster offers: where it listens, who may talk to it, and its CA.
pub struct KubeCluster {
    pub name: String,
    pub server: String,
    pub ca: ClusterCa,
    /// `system:masters` kubeconfig.
    pub admin_kubeconfig: PathBuf,
    /// The API server's audit log, when it writes one.
    pub audit_log: Option<PathBuf>,
    dir: PathBuf,
    /// Started by [`KubeCluster::start_controller_manager`] once the API server is ready.
    controller_manager_args: Vec<String>,
    /// kube-scheduler's flags, when the cluster has a node to schedule onto or was asked for one.
    scheduler_args: Option<Vec<String>>,
}

impl KubeCluster {
    /// Writes the cluster's certificates and starts etcd and kube-apiserver (not waiting for them).
    /// The controller manager follows through [`KubeCluster::start_controller_manager`]. With
    /// `audit_namespace`, the API server audits the requests of that namespace's ServiceAccounts.
    /// With `nodes`, the cluster gets real nodes (see [`super::node`]): the API server listens on
    /// the nodes' bridge, where pods and kubelets reach it, and talks to kubelets; without, it
    /// listens on 127.0.0.1 alone and nodes are API objects a test creates. With `scheduler` (implied
    /// by `nodes`), [`KubeCluster::start_scheduler`] starts a kube-scheduler.
    #[allow(clippy::too_many_arguments)]
    pub fn start(
        name: &str,
        components: &Components,
        dir: &Path,
        log_dir: &Path,
        audit_namespace: Option<&str>,
        nodes: bool,
        scheduler: bool,
        started: &mut Vec<Component>,
    ) -> Result<Self, Error> {
        let dir = dir.join(name);
        let pki_dir = dir.join("pki");
        std::fs::create_dir_all(&pki_dir).map_err(|source| Error::Io {
            what: format!("creating {}", pki_dir.display()),
            source,
        })?;

        let ca = ClusterCa::new(name)?;
        let ca_file = pki_dir.join("ca.crt");
        let ca_key_file = pki_dir.join("ca.key");
        pki::write(&ca_file, &ca.cert_pem())?;
        pki::write(&ca_key_file, ca.key_pem())?;
        let sa_key = pki_dir.join("service-account.key");
        let sa_pub = pki_dir.join("service-account.pub");
        let (private, public) = pki::service_account_key(name)?;
        pki::write(&sa_key, &private)?;
        pki::write(&sa_pub, &public)?;
        let address = if nodes {
            node::HOST_ADDRESS
        } else {
            Ipv4Addr::LOCALHOST
        };
        let (serving_cert, serving_key) = ca
            .serving_cert_also_at("kube-apiserver", &[address])?
            .write(&pki_dir, "apiserver")?;
        // The front-proxy CA of API aggregation, as kubeadm sets it up: controllers that serve
        // their own endpoints (OCM's do) read it from kube-system/extension-apiserver-authentication.
        let front_proxy = ClusterCa::new(&format!("{name}-front-proxy"))?;
        let front_proxy_ca = pki_dir.join("front-proxy-ca.crt");
        pki::write(&front_proxy_ca, &front_proxy.cert_pem())?;
        let (proxy_cert, proxy_key) = front_proxy
            .client_cert("front-proxy-client", None)?
            .write(&pki_dir, "front-proxy-client")?;

        let etcd_port = free_port()?;
        let etcd_peer_port = free_port()?;
        let api_port = free_port()?;
        let server = format!("https://{address}:{api_port}");

        let admin_kubeconfig = dir.join("admin.kubeconfig");
        let admin = ca.client_cert("kubernetes-admin", Some("system:masters"))?;
        pki::write(
            &admin_kubeconfig,
            &pki::kubeconfig(name, &server, &ca, "kubernetes-admin", &admin),
        )?;
        // The controller manager runs every controller under its own name; membership of
        // system:masters spares us the per-controller service accounts kubeadm sets up.
        let kcm_kubeconfig = dir.join("kube-controller-manager.kubeconfig");
        let kcm = ca.client_cert("system:kube-controller-manager", Some("system:masters"))?;
        pki::write(
            &kcm_kubeconfig,
            &pki::kubeconfig(name, &server, &ca, "system:kube-controller-manager", &kcm),
        )?;

        let etcd_data = dir.join("etcd");
        started.push(Component::spawn(
            &format!("{name}-etcd"),
            Tier::Storage,
            &components.bin("etcd"),
            &[
                format!("--data-dir={}", etcd_data.display()),
                format!("--listen-client-url=http://127.0.0.1:{etcd_port}"),
                format!("--listen-peer-url=http://127.0.0.1:{etcd_peer_port}"),
            ],
            &[],
            log_dir,
        )?);

        let p = |path: &Path| path.display().to_string();
        // How the API server reaches kubelets (logs, exec, the node proxy): at the address the
        // node reports, with a certificate of system:masters, checking the kubelet's against the CA.
        let kubelet_client_args = if nodes {
            let (cert, key) = ca
                .client_cert("kube-apiserver-kubelet-client", Some("system:masters"))?
                .write(&pki_dir, "apiserver-kubelet-client")?;
            vec![
                format!("--kubelet-client-certificate={}", p(&cert)),
                format!("--kubelet-client-key={}", p(&key)),
                format!("--kubelet-certificate-authority={}", p(&ca_file)),
                "--kubelet-preferred-address-types=InternalIP".into(),
            ]
        } else {
            Vec::new()
        };
        let (audit_log, audit_args) = match audit_namespace {
            Some(namespace) => {
                let (log, args) = audit(&dir, namespace)?;
                (Some(log), args)
            }
            None => (None, Vec::new()),
        };
        started.push(Component::spawn(
            &format!("{name}-kube-apiserver"),
            Tier::ApiServer,
            &components.bin("kube-apiserver"),
            &[
                format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
                format!("--bind-address={address}"),
                format!("--advertise-address={address}"),
                format!("--secure-port={api_port}"),
                format!("--cert-dir={}", p(&dir.join("apiserver-certs"))),
                format!("--tls-cert-file={}", p(&serving_cert)),
                format!("--tls-private-key-file={}", p(&serving_key)),
                format!("--client-ca-file={}", p(&ca_file)),
                "--authorization-mode=Node,RBAC".into(),
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local".into(),
                format!("--service-account-key-file={}", p(&sa_pub)),
                format!("--service-account-signing-key-file={}", p(&sa_key)),
                "--service-cluster-ip-range=10.96.0.0/16".into(),
                format!("--requestheader-client-ca-file={}", p(&front_proxy_ca)),
                "--requestheader-allowed-names=front-proxy-client".into(),
                "--requestheader-username-headers=X-Remote-User".into(),
                "--requestheader-group-headers=X-Remote-Group".into(),
                "--requestheader-extra-headers-prefix=X-Remote-Extra-".into(),
                format!("--proxy-client-cert-file={}", p(&proxy_cert)),
                format!("--proxy-client-key-file={}", p(&proxy_key)),
                "--allow-privileged=true".into(),
                "--profiling=false".into(),
                // Keeps the apiserver's watch cache small: test clusters hold few objects.
                "--default-watch-cache-size=50".into(),
            ]
            .into_iter()
            .chain(audit_args)
            .chain(kubelet_client_args)
            .collect::<Vec<_>>(),
            &[],
            log_dir,
        )?);

        // kube-controller-manager gives the API server only 10 s to report healthy and then exits;
        // on a loaded machine RBAC's bootstrap hook can take longer, so it starts after /readyz.
        let controller_manager_args = vec![
            format!("--kubeconfig={}", p(&kcm_kubeconfig)),
            if nodes {
                "--controllers=*".into()
            } else {
                // No kubelets run here: nodes created through the API must not turn NotReady
                // and have their pods evicted.
                "--controllers=*,-node-lifecycle-controller,-cloud-node-lifecycle-controller".into()
            },
            format!("--cluster-signing-cert-file={}", p(&ca_file)),
            format!("--cluster-signing-key-file={}", p(&ca_key_file)),
            format!("--root-ca-file={}", p(&ca_file)),
            format!("--service-account-private-key-file={}", p(&sa_key)),
            "--use-service-account-credentials=false".into(),
            "--leader-elect=false".into(),
            "--secure-port=0".into(),
            "--profiling=false".into(),
        ];

        let scheduler_args = if nodes || scheduler {
            let kubeconfig = dir.join("kube-scheduler.kubeconfig");
            // The user the default `system:kube-scheduler` bindings name.
            let identity = ca.client_cert("system:kube-scheduler", None)?;
            pki::write(
                &kubeconfig,
                &pki::kubeconfig(name, &server, &ca, "system:kube-scheduler", &identity),
            )?;
            Some(vec![
                format!("--kubeconfig={}", p(&kubeconfig)),
                format!("--authentication-kubeconfig={}", p(&kubeconfig)),
                format!("--authorization-kubeconfig={}", p(&kubeconfig)),
                "--leader-elect=false".into(),
                "--bind-address=127.0.0.1".into(),
                format!("--secure-port={}", free_port()?),
            ])
        } else {
            None
        };

        Ok(KubeCluster {
            name: name.to_owned(),
            server,
            ca,
            admin_kubeconfig,
            audit_log,
            dir,
            controller_manager_args,
            scheduler_args,
        })
    }

    /// Starts kube-controller-manager; call it once the API server answers `/readyz`.
    pub fn start_controller_manager(
        &self,
        components: &Components,
        log_dir: &Path,
        started: &mut Vec<Component>,
    ) -> Result<(), Error> {
        started.push(Component::spawn(
            &format!("{}-kube-controller-manager", self.name),
            Tier::Client,
            &components.bin("kube-controller-manager"),
            &self.controller_manager_args,
            &[],
            log_dir,
        )?);
        Ok(())
    }

    /// Starts kube-scheduler when the cluster has nodes or was asked for one; call it once the API server answers `/readyz`.
    pub fn start_scheduler(
        &self,
        components: &Components,
        log_dir: &Path,
        started: &mut Vec<Component>,
    ) -> Result<(), Error> {
        if let Some(args) = &self.scheduler_args {
            started.push(Component::spawn(
                &format!("{}-kube-scheduler", self.name),
                Tier::Client,
                &components.bin("kube-scheduler"),
                args,
                &[],
                log_dir,
            )?);
        }
        Ok(())
    }

    /// Writes a kubeconfig for `user` (optionally in `group`) signed by this cluster's CA.
    pub fn write_kubeconfig(&self, user: &str, group: Option<&str>, path: &Path) -> Result<(), Error> {
        let cert = self.ca.client_cert(user, group)?;
        pki::write(
            path,
            &pki::kubeconfig(&self.name, &self.server, &self.ca, user, &cert),
        )
    }

    /// The cluster's own scratch directory (certificates, etcd data).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

/// The audit policy and flags that log, at metadata level, each request of the ServiceAccounts of
/// `namespace` once its response has started (watches) or completed (everything else), and nothing
/// of anyone else. Returns the log's path and the API server flags.
fn audit(dir: &Path, namespace: &str) -> Result<(PathBuf, Vec<String>), Error> {
    let policy = dir.join("audit-policy.yaml");
    let log = dir.join("audit.log");
    pki::write(
        &policy,
        &format!(
            "apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n\
             - level: Metadata\n  userGroups: [\"system:serviceaccounts:{namespace}\"]\n\
             - level: None\n"
        ),
    )?;
    let args = vec![
        format!("--audit-policy-file={}", policy.display()),
        format!("--audit-log-path={}", log.display()),
        "--audit-log-format=json".into(),
        // Written as requests complete, never rotated: a benchmark reads it from an offset.
        "--audit-log-mode=blocking".into(),
        "--audit-log-maxsize=0".into(),
    ];
    Ok((log, args))
}
