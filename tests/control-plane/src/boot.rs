//! Starting the control plane: the machine lock, the processes in dependency order (etcd, the
//! hub's and each cluster's kube-apiserver and controllers, OCM's hub and klusterlets, the nodes),
//! and the waits between them, each bounded by the builder's timeout.

use super::*;
use crate::image::ImageArchive;

impl ControlPlane {
    /// The start-up, step by step: each step waits for what the next one needs.
    pub(super) async fn boot(
        &mut self,
        components: &Components,
        opts: &Builder,
        progress: &dyn Fn(&str),
    ) -> Result<(), Error> {
        self.take_the_machine(progress).await?;
        let locked = Instant::now();
        let images = self.prepare_the_host(components, opts, progress)?;
        // The start-up timeout counts from here: assembling the images may first build the
        // workspace's binaries (minutes on a cold target directory), which is not start-up.
        let deadline = Instant::now() + opts.timeout;
        self.start_api_servers(components, opts, deadline, progress)
            .await?;
        progress("API servers ready; starting kube-controller-manager");
        for cluster in self.hub.iter().chain(self.spokes.iter()) {
            cluster.start_controller_manager(components, &self.log_dir, &mut self.components)?;
            cluster.start_scheduler(components, &self.log_dir, &mut self.components)?;
        }
        if opts.nodes {
            progress("starting a node per cluster (containerd, kube-proxy, kubelet)");
            self.start_nodes(components, &images)?;
        }
        let hub_client = self.hub_client().await?;
        self.start_ocm_hub(components, opts, &hub_client, deadline)
            .await?;
        progress("OCM CRDs installed");
        for name in self.cluster_names.clone() {
            self.start_klusterlet(components, &name, deadline).await?;
        }
        progress("OCM hub controllers and klusterlets started; accepting the clusters");
        // What `clusteradm accept` does: approve each cluster's registration CSR and accept it.
        let names = self.cluster_names.clone();
        self.wait_for(
            "every ManagedCluster to be Joined and Available",
            "hub-registration-controller",
            deadline,
            || {
                let c = hub_client.clone();
                let names = names.clone();
                async move { accept_clusters(&c, &names).await }
            },
        )
        .await?;
        if opts.nodes {
            self.wait_for_nodes(deadline).await?;
            progress("every node is Ready");
        }
        self.start_seconds = locked.elapsed().as_secs_f64();
        Ok(())
    }

    /// OCM's addon webhook binds two fixed ports on every interface, so one control plane runs on a
    /// machine at a time: later ones (parallel tests) wait their turn, up to 20 minutes, and only
    /// then does the start-up timeout begin.
    async fn take_the_machine(&mut self, progress: &dyn Fn(&str)) -> Result<(), Error> {
        self._machine_lock = Some(machine_lock(Instant::now() + Duration::from_secs(1200), progress).await?);
        for (port, what) in ocm::WEBHOOK_FIXED_PORTS {
            if std::net::TcpListener::bind(("0.0.0.0", port)).is_err() {
                return Err(Error::PortInUse {
                    component: "hub-addon-webhook".into(),
                    what: what.into(),
                    port,
                    hint: " (OCM's addon webhook binds it on every interface: is another control plane running?)".into(),
                });
            }
        }
        Ok(())
    }

    /// With nodes: the host checked and swept of a crashed run's leftovers, the images the nodes
    /// import, and the host bridge. Without, nothing.
    fn prepare_the_host(
        &mut self,
        components: &Components,
        opts: &Builder,
        progress: &dyn Fn(&str),
    ) -> Result<Vec<ImageArchive>, Error> {
        if !opts.nodes {
            return Ok(Vec::new());
        }
        node::check_host()?;
        node::sweep_stale();
        progress("assembling the images the nodes run (pause, ocm-score)");
        let images = self.build_images(components)?;
        node::create_host_bridge()?;
        self.host_bridge = true;
        Ok(images)
    }

    /// etcd and kube-apiserver of the hub (also `cluster1`) and of each other cluster, their admin
    /// kubeconfigs written, then each API server's `/readyz`.
    async fn start_api_servers(
        &mut self,
        components: &Components,
        opts: &Builder,
        deadline: Instant,
        progress: &dyn Fn(&str),
    ) -> Result<(), Error> {
        progress("starting etcd and kube-apiserver");
        let hub = KubeCluster::start(
            "hub",
            components,
            &self.dir,
            &self.log_dir,
            opts.audit_namespace.as_deref(),
            opts.nodes,
            false,
            &mut self.components,
        )?;
        copy(&hub.admin_kubeconfig, &self.hub_kubeconfig())?;
        copy(&hub.admin_kubeconfig, &self.kubeconfig("cluster1"))?;
        self.hub = Some(hub);
        for name in self.cluster_names.clone().iter().skip(1) {
            let spoke = KubeCluster::start(
                name,
                components,
                &self.dir,
                &self.log_dir,
                None,
                opts.nodes,
                opts.spoke_schedulers,
                &mut self.components,
            )?;
            copy(&spoke.admin_kubeconfig, &self.kubeconfig(name))?;
            self.spokes.push(spoke);
        }

        let kubeconfigs: Vec<(String, PathBuf)> = std::iter::once(("hub".to_owned(), self.hub_kubeconfig()))
            .chain(
                self.cluster_names
                    .iter()
                    .skip(1)
                    .map(|n| (n.clone(), self.kubeconfig(n))),
            )
            .collect();
        for (name, kubeconfig) in &kubeconfigs {
            let c = client(kubeconfig).await?;
            let log = format!("{name}-kube-apiserver");
            self.wait_for(
                &format!("{name}'s kube-apiserver /readyz"),
                &log,
                deadline,
                || {
                    let c = c.clone();
                    async move { Ok(readyz(&c).await) }
                },
            )
            .await?;
        }
        Ok(())
    }

    /// A node per cluster (containerd, kube-proxy, kubelet), importing `images`.
    fn start_nodes(&mut self, components: &Components, images: &[ImageArchive]) -> Result<(), Error> {
        let clusters: Vec<&KubeCluster> = self.hub.iter().chain(self.spokes.iter()).collect();
        for (i, cluster) in clusters.into_iter().enumerate() {
            let index = u8::try_from(i + 1).unwrap_or(u8::MAX);
            // The hub's node is cluster1's (the hub manages itself); a hub alone keeps "hub".
            let name = self
                .cluster_names
                .get(i)
                .cloned()
                .unwrap_or_else(|| cluster.name.clone());
            let node = node::Node::start(
                &name,
                cluster,
                index,
                components,
                images,
                &self.log_dir,
                &mut self.components,
            )?;
            self.nodes.push(node);
        }
        Ok(())
    }

    /// OCM's hub CRDs (conversion through the add-on webhook) and objects, Established, then OCM's
    /// hub controllers and webhook.
    async fn start_ocm_hub(
        &mut self,
        components: &Components,
        opts: &Builder,
        hub_client: &Client,
        deadline: Instant,
    ) -> Result<(), Error> {
        let ca_bundle = self.hub()?.ca.bundle_base64();
        let webhook_port = free_port()?;
        let crds = ocm::hub_crds(
            components,
            &ca_bundle,
            &format!("https://127.0.0.1:{webhook_port}/convert"),
        )?;
        apply_all(hub_client, &crds).await?;
        apply_all(hub_client, &ocm::hub_objects()).await?;
        let crd_names = names(&crds);
        self.wait_for(
            "the hub's CRDs to be Established",
            "hub-kube-apiserver",
            deadline,
            || {
                let c = hub_client.clone();
                let names = crd_names.clone();
                async move { crds_established(&c, &names).await }
            },
        )
        .await?;
        let hub = self
            .hub
            .as_ref()
            .ok_or_else(|| Error::Options("the hub is not running".into()))?;
        ocm::start_hub(
            components,
            hub,
            webhook_port,
            opts.ocm_addon_manager,
            &self.dir,
            &self.log_dir,
            &mut self.components,
        )
    }

    /// The klusterlet's CRDs on cluster `name` (cluster1 is the hub's own API server), its
    /// controller manager seen working, then its klusterlet agent.
    async fn start_klusterlet(
        &mut self,
        components: &Components,
        name: &str,
        deadline: Instant,
    ) -> Result<(), Error> {
        let managed_crds = ocm::managed_crds(components)?;
        let c = self.cluster_client(name).await?;
        apply_all(&c, &managed_crds).await?;
        apply_all(&c, &ocm::managed_objects()).await?;
        let names = names(&managed_crds);
        let log = if name == "cluster1" {
            "hub-kube-apiserver".to_owned()
        } else {
            format!("{name}-kube-apiserver")
        };
        self.wait_for(
            &format!("{name}'s klusterlet CRDs to be Established"),
            &log,
            deadline,
            || {
                let c = c.clone();
                let names = names.clone();
                async move { crds_established(&c, &names).await }
            },
        )
        .await?;
        // The controller manager's service-account controller creates `default` in every
        // namespace: a sign that it runs (pods cannot be created before it does its job).
        let kcm_log = if name == "cluster1" {
            "hub-kube-controller-manager".to_owned()
        } else {
            format!("{name}-kube-controller-manager")
        };
        self.wait_for(
            &format!("{name}'s kube-controller-manager (default ServiceAccount)"),
            &kcm_log,
            deadline,
            || {
                let c = c.clone();
                async move {
                    let sa: Api<ServiceAccount> = Api::namespaced(c, "default");
                    Ok(sa.get_opt("default").await.ok().flatten().is_some())
                }
            },
        )
        .await?;
        let hub = self
            .hub
            .as_ref()
            .ok_or_else(|| Error::Options("the hub is not running".into()))?;
        let managed = if name == "cluster1" {
            hub
        } else {
            self.spokes
                .iter()
                .find(|s| s.name == name)
                .ok_or_else(|| Error::Options(format!("no cluster named {name}")))?
        };
        ocm::start_klusterlet(
            components,
            hub,
            name,
            managed,
            &self.dir,
            &self.log_dir,
            &mut self.components,
        )
    }

    /// Every node Ready, as its cluster's API server reports it.
    async fn wait_for_nodes(&mut self, deadline: Instant) -> Result<(), Error> {
        let nodes: Vec<(String, String)> = self
            .nodes
            .iter()
            .map(|n| (n.cluster.clone(), n.name.clone()))
            .collect();
        for (cluster, node) in nodes {
            let c = self.cluster_client(&cluster).await?;
            self.wait_for(
                &format!("node {node} to be Ready"),
                &format!("{cluster}-kubelet"),
                deadline,
                || {
                    let c = c.clone();
                    let node = node.clone();
                    async move { Ok(node_ready(&c, &node).await) }
                },
            )
            .await?;
        }
        Ok(())
    }

    /// The sandbox image, ours and the test workload's, as archives in the control plane's directory.
    pub(super) fn build_images(&mut self, components: &Components) -> Result<Vec<ImageArchive>, Error> {
        let images = self.dir.join("images");
        let pause = crate::image::pause_image(&components.bin("pause"), &images.join("pause.tar"))?;
        let binaries = crate::image::OCM_SCORE_BINARIES
            .iter()
            .map(|name| addon::workspace_binary(name))
            .collect::<Result<Vec<_>, _>>()?;
        let ours = crate::image::ocm_score_image(&binaries, &images.join("ocm-score.tar"))?;
        self.image = Some(ours.clone());
        let load = crate::image::load_image(&addon::workspace_binary("load")?, &images.join("load.tar"))?;
        Ok(vec![pause, ours, load])
    }

    pub(super) fn hub(&self) -> Result<&KubeCluster, Error> {
        self.hub
            .as_ref()
            .ok_or_else(|| Error::Options("the hub is not running".into()))
    }

    /// Polls `check` until it says true, failing at `deadline` with `log_component`'s tail, or
    /// as soon as any component exits.
    pub(super) async fn wait_for<F, Fut>(
        &mut self,
        what: &str,
        log_component: &str,
        deadline: Instant,
        mut check: F,
    ) -> Result<(), Error>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<bool, Error>>,
    {
        let started = Instant::now();
        loop {
            self.check_running()?;
            if check().await? {
                tracing::debug!(what, elapsed = ?started.elapsed(), "done");
                return Ok(());
            }
            if Instant::now() >= deadline {
                let log = self.log_dir.join(format!("{log_component}.log"));
                return Err(Error::NotReady {
                    what: what.to_owned(),
                    waited: started.elapsed(),
                    tail: process::tail(&log, 25),
                    log,
                });
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

pub(super) fn names(objects: &[Value]) -> Vec<String> {
    objects
        .iter()
        .filter_map(|o| o.pointer("/metadata/name").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

pub(super) async fn crds_established(client: &Client, names: &[String]) -> Result<bool, Error> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for name in names {
        let Ok(Some(crd)) = api.get_opt(name).await else {
            return Ok(false);
        };
        let established = crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        if !established {
            return Ok(false);
        }
    }
    Ok(true)
}

/// One pass of `clusteradm accept`: approves pending registration CSRs of the named clusters and
/// sets `hubAcceptsClient`; true once every cluster is Joined and Available.
///
/// A cluster's CSR is approved only once its ManagedCluster exists, as `clusteradm accept` waits
/// for both: the klusterlet ends its bootstrap phase as soon as its certificate is signed, and a
/// ManagedCluster create still in flight then is cancelled and never retried, leaving the
/// cluster unregistered for good (seen on a loaded 2-core CI machine).
pub(super) async fn accept_clusters(client: &Client, clusters: &[String]) -> Result<bool, Error> {
    let gvk = GroupVersionKind::gvk("cluster.open-cluster-management.io", "v1", "ManagedCluster");
    let (resource, _) = ::kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|source| Error::Kube {
            what: "discovering ManagedCluster".into(),
            source,
        })?;
    let mcs: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut registered = Vec::new();
    for cluster in clusters {
        // A read that fails (a loaded API server) is retried on the next pass.
        if let Some(mc) = mcs.get_opt(cluster).await.ok().flatten() {
            registered.push((cluster.clone(), mc));
        }
    }

    let csrs: Api<CertificateSigningRequest> = Api::all(client.clone());
    let list = csrs
        .list(&Default::default())
        .await
        .map_err(|source| Error::Kube {
            what: "listing CSRs".into(),
            source,
        })?;
    for csr in list.items {
        let labels = csr.metadata.labels.clone().unwrap_or_default();
        let Some(cluster) = labels.get("open-cluster-management.io/cluster-name") else {
            continue;
        };
        // Add-on CSRs are the add-on manager's to approve, never the launcher's.
        if labels.contains_key("open-cluster-management.io/addon-name")
            || !registered.iter().any(|(name, _)| name == cluster)
        {
            continue;
        }
        let decided = csr
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|c| !c.is_empty());
        if decided {
            continue;
        }
        let name = csr.metadata.name.clone().unwrap_or_default();
        let approval = json!({"status": {"conditions": [{
            "type": "Approved", "status": "True", "reason": "ControlPlaneAccept",
            "message": "approved by the ocm-score test control plane, as `clusteradm accept` does",
        }]}});
        csrs.patch_approval(&name, &PatchParams::default(), &Patch::Merge(&approval))
            .await
            .map_err(|source| Error::Kube {
                what: format!("approving CSR {name}"),
                source,
            })?;
    }

    let mut all_ready = registered.len() == clusters.len();
    for (cluster, mc) in &registered {
        if mc.data.pointer("/spec/hubAcceptsClient") != Some(&Value::Bool(true)) {
            let accept = json!({"spec": {"hubAcceptsClient": true}});
            mcs.patch(cluster, &PatchParams::default(), &Patch::Merge(&accept))
                .await
                .map_err(|source| Error::Kube {
                    what: format!("accepting ManagedCluster {cluster}"),
                    source,
                })?;
        }
        let condition = |t: &str| {
            mc.data
                .pointer("/status/conditions")
                .and_then(Value::as_array)
                .is_some_and(|cs| cs.iter().any(|c| c["type"] == t && c["status"] == "True"))
        };
        all_ready &= condition("ManagedClusterJoined") && condition("ManagedClusterConditionAvailable");
    }
    Ok(all_ready)
}

/// Takes the machine-wide control-plane lock, waiting (and saying so) while another holds it.
pub(super) async fn machine_lock(deadline: Instant, progress: &dyn Fn(&str)) -> Result<std::fs::File, Error> {
    let path = std::env::temp_dir().join("ocm-score-control-plane.lock");
    let file = std::fs::File::create(&path).map_err(|source| Error::Io {
        what: format!("creating {}", path.display()),
        source,
    })?;
    let mut said = false;
    loop {
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(std::fs::TryLockError::WouldBlock) => {
                if !said {
                    progress(
                        "waiting for another control plane on this machine to stop (OCM's addon webhook binds fixed ports)",
                    );
                    said = true;
                }
                if Instant::now() >= deadline {
                    return Err(Error::PortInUse {
                        component: "hub-addon-webhook".into(),
                        what: "machine-wide lock".into(),
                        port: ocm::WEBHOOK_FIXED_PORTS[0].0,
                        hint: format!(" (another control plane holds {})", path.display()),
                    });
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(Error::Io {
                    what: format!("locking {}", path.display()),
                    source,
                });
            }
        }
    }
}

/// A free TCP port on 127.0.0.1 for a component to listen on, chosen *below* the kernel's
/// ephemeral range: ports the kernel hands out (to `bind(0)` in parallel tests, and as source ports
/// of outgoing connections) can then never take it between this check and the component's bind.
/// Within this process no port is handed out twice.
pub fn free_port() -> Result<u16, Error> {
    use std::collections::BTreeSet;
    use std::hash::{BuildHasher, RandomState};
    use std::sync::Mutex;
    static GIVEN: Mutex<BTreeSet<u16>> = Mutex::new(BTreeSet::new());

    let ephemeral_start = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|t| t.split_whitespace().next().and_then(|p| p.parse::<u16>().ok()))
        .unwrap_or(32768);
    let (low, high) = (10_000u16, ephemeral_start.max(10_001));
    let seed = RandomState::new();
    for attempt in 0u64..2_000 {
        let port = low + (seed.hash_one((std::process::id(), attempt)) % u64::from(high - low)) as u16;
        let Ok(mut given) = GIVEN.lock() else { break };
        if given.contains(&port) {
            continue;
        }
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return Ok(port);
        }
    }
    Err(Error::Io {
        what: format!("finding a free port on 127.0.0.1 in {low}..{high}"),
        source: std::io::Error::new(std::io::ErrorKind::AddrInUse, "every port tried is in use"),
    })
}

pub(super) fn copy(from: &Path, to: &Path) -> Result<(), Error> {
    std::fs::copy(from, to).map(|_| ()).map_err(|source| Error::Io {
        what: format!("copying {} to {}", from.display(), to.display()),
        source,
    })
}
