//! Nodes that run pods: one per cluster, each a kubelet, a containerd and a kube-proxy of its own
//! in a network namespace of its own, as a kind node is a container of its own.
//!
//! Why a namespace per node: every cluster's kube-proxy writes the same chains for the same
//! Service (`default/kubernetes` hashes alike in every cluster), so two clusters cannot share one
//! network stack. The layout, all on this machine:
//!
//! ```text
//!   host: bridge ocms0 10.88.0.1/24 ── API servers listen here (and kubeconfigs name it)
//!     └─ veth ── netns ocms-<cluster>: eth0 10.88.0.(10+i) ── kubelet :10250, kube-proxy, containerd
//!                  └─ bridge cni0 10.244.i.1/24 ── pods 10.244.i.x (masqueraded to the node address)
//! ```
//!
//! Pods reach their API server through the `kubernetes` Service's ClusterIP (kube-proxy's rules in
//! the node's namespace send it to 10.88.0.1) and the hub at 10.88.0.1 directly; the API server
//! reaches each kubelet at its node address. Nothing is routed off the machine: the host has no
//! route for the pod subnets, and no masquerading happens outside the node namespaces.
//!
//! Images are never pulled: [`crate::image`] assembles the sandbox image and ours as OCI archives
//! and each node's containerd imports them. Everything a node leaves behind (pod processes, shims,
//! mounts, cgroups, the namespace) is removed by [`Node::teardown`], and at the next start by
//! [`sweep_stale`] if a crash skipped that.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::Error;
use super::go_components::Components;
use super::kube::KubeCluster;
use super::pki;
use super::process::{Component, Tier};
use crate::image::{ImageArchive, PAUSE};

/// The host bridge the nodes hang on.
pub const BRIDGE: &str = "ocms0";
/// The host's address on [`BRIDGE`]: where pods and kubelets reach every API server.
pub const HOST_ADDRESS: Ipv4Addr = Ipv4Addr::new(10, 88, 0, 1);
/// Prefix of the nodes' network namespaces and cgroups (and of nothing else on a machine).
const PREFIX: &str = "ocms-";
/// Part of every node directory's path, so a sweep finds what a crashed run left.
const NODE_DIR: &str = "ocm-score-node";
/// Where Debian's containernetworking-plugins put the CNI plugins.
const CNI_BIN_DIR: &str = "/usr/lib/cni";

/// The node address of the cluster with index `i` (1 for cluster1, the hub).
pub fn node_address(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 88, 0, 10 + i)
}

/// The pod subnet of the cluster with index `i`.
pub fn pod_subnet(i: u8) -> String {
    format!("10.244.{i}.0/24")
}

/// The node name of a cluster (`cluster2-node`).
pub fn node_name(cluster: &str) -> String {
    format!("{cluster}-node")
}

/// What a machine needs to run pods; the first thing missing is named.
pub fn check_host() -> Result<(), Error> {
    let missing = |what: &str, how: &str| {
        Err(Error::Options(format!(
            "this machine cannot run the control plane's nodes: {what} ({how}); \
             `bash scripts/test.sh` installs the Debian packages, or start without nodes"
        )))
    };
    if !rustix::process::geteuid().is_root() {
        return missing("not root", "kubelet, containerd and network namespaces need root");
    }
    for (program, package) in [
        ("containerd", "Debian package containerd"),
        ("ctr", "Debian package containerd"),
        ("runc", "Debian package runc"),
        ("ip", "Debian package iproute2"),
        ("nsenter", "Debian package util-linux"),
        ("iptables", "Debian package iptables"),
        ("strip", "Debian package binutils"),
    ] {
        if which(program).is_none() {
            return missing(&format!("no `{program}` on PATH"), package);
        }
    }
    for plugin in ["bridge", "host-local", "loopback"] {
        if !Path::new(CNI_BIN_DIR).join(plugin).is_file() {
            return missing(
                &format!("no CNI plugin {CNI_BIN_DIR}/{plugin}"),
                "Debian package containernetworking-plugins",
            );
        }
    }
    if !Path::new("/sys/fs/cgroup").is_dir() {
        return missing("no /sys/fs/cgroup", "cgroups are not mounted");
    }
    // A namespace made and removed at once shows that this sandbox lets us make them.
    let probe = format!("{PREFIX}probe-{}", std::process::id());
    run("ip", &["netns", "add", &probe]).map_err(|e| {
        Error::Options(format!(
            "this machine cannot run the control plane's nodes: creating a network namespace failed: {e}"
        ))
    })?;
    let _ = run("ip", &["netns", "del", &probe]);
    Ok(())
}

/// Removes what nodes of an earlier run left (the caller holds the machine-wide control-plane
/// lock, so no other run's nodes are alive): their pods' processes, containerd shims, mounts,
/// network namespaces, the bridge and cgroups.
pub fn sweep_stale() {
    for cgroup in cgroup_dirs_with_prefix() {
        kill_cgroup_processes(&cgroup);
    }
    kill_processes_mentioning(NODE_DIR);
    unmount_below(NODE_DIR);
    if let Ok(list) = run("ip", &["netns", "list"]) {
        for line in list.lines() {
            if let Some(name) = line.split_whitespace().next().filter(|n| n.starts_with(PREFIX)) {
                let _ = run("ip", &["netns", "del", name]);
            }
        }
    }
    let _ = run("ip", &["link", "del", BRIDGE]);
    for cgroup in cgroup_dirs_with_prefix() {
        remove_cgroup_tree(&cgroup);
    }
}

/// Creates the host bridge with [`HOST_ADDRESS`]; call it before the API servers bind to it.
pub fn create_host_bridge() -> Result<(), Error> {
    run("ip", &["link", "add", BRIDGE, "type", "bridge"])?;
    run(
        "ip",
        &["addr", "add", &format!("{HOST_ADDRESS}/24"), "dev", BRIDGE],
    )?;
    run("ip", &["link", "set", BRIDGE, "up"])?;
    Ok(())
}

/// Removes the host bridge (the nodes' veths go with their namespaces).
pub fn remove_host_bridge() {
    let _ = run("ip", &["link", "del", BRIDGE]);
}

/// One running node.
pub struct Node {
    pub name: String,
    pub cluster: String,
    pub address: Ipv4Addr,
    netns: String,
    dir: PathBuf,
    containerd_socket: PathBuf,
    cgroup_root: String,
}

impl Node {
    /// Sets up the node's namespace, cgroups and configuration, starts containerd, imports
    /// `images` into it, then starts kube-proxy and the kubelet (not waiting for Ready).
    pub fn start(
        cluster_name: &str,
        cluster: &KubeCluster,
        index: u8,
        components: &Components,
        images: &[ImageArchive],
        log_dir: &Path,
        started: &mut Vec<Component>,
    ) -> Result<Node, Error> {
        let name = node_name(cluster_name);
        let address = node_address(index);
        let dir = cluster.dir().join(NODE_DIR);
        let node = Node {
            name: name.clone(),
            cluster: cluster_name.to_owned(),
            address,
            netns: format!("{PREFIX}{cluster_name}"),
            containerd_socket: dir.join("containerd/containerd.sock"),
            cgroup_root: format!("{PREFIX}{cluster_name}"),
            dir,
        };
        for sub in ["containerd", "cni", "cni-ipam", "kubelet", "pki"] {
            let path = node.dir.join(sub);
            std::fs::create_dir_all(&path).map_err(|source| Error::Io {
                what: format!("creating {}", path.display()),
                source,
            })?;
        }
        node.create_network(index)?;
        node.create_cgroup_root()?;
        node.write_cni_config(index)?;
        let containerd_config = node.write_containerd_config()?;

        // `nsenter --net` joins the node's network namespace and nothing else: `ip netns exec`
        // would also remount /sys, and the kubelet would find no cgroup mounts there.
        let in_netns = |program: &Path, args: Vec<String>| {
            let mut all = vec![format!("--net=/run/netns/{}", node.netns), "--".into()];
            all.push(program.display().to_string());
            all.extend(args);
            all
        };
        let ip = which("nsenter").unwrap_or_else(|| PathBuf::from("nsenter"));
        let containerd = which("containerd").unwrap_or_else(|| PathBuf::from("containerd"));
        started.push(Component::spawn(
            &format!("{cluster_name}-containerd"),
            Tier::Client,
            &ip,
            &in_netns(
                &containerd,
                vec![format!("--config={}", containerd_config.display())],
            ),
            &[],
            log_dir,
        )?);
        node.wait_for_containerd(started)?;
        for image in images {
            node.import(image)?;
        }

        let p = |path: &Path| path.display().to_string();
        let pki_dir = node.dir.join("pki");
        let kubelet_kubeconfig = pki_dir.join("kubelet.kubeconfig");
        let kubelet_identity = cluster
            .ca
            .client_cert(&format!("system:node:{name}"), Some("system:nodes"))?;
        pki::write(
            &kubelet_kubeconfig,
            &pki::kubeconfig(
                &cluster.name,
                &cluster.server,
                &cluster.ca,
                &format!("system:node:{name}"),
                &kubelet_identity,
            ),
        )?;
        let (serving_cert, serving_key) = cluster
            .ca
            .serving_cert_for_address(&name, address)?
            .write(&pki_dir, "kubelet-serving")?;
        let ca_file = pki_dir.join("ca.crt");
        pki::write(&ca_file, &cluster.ca.cert_pem())?;
        let kubelet_config = node.dir.join("kubelet-config.yaml");
        pki::write(
            &kubelet_config,
            &kubelet_configuration(&KubeletPaths {
                ca: &ca_file,
                serving_cert: &serving_cert,
                serving_key: &serving_key,
                socket: &node.containerd_socket,
                cgroup_root: &node.cgroup_root,
                address,
            }),
        )?;

        let proxy_kubeconfig = pki_dir.join("kube-proxy.kubeconfig");
        // The user the default `system:node-proxier` binding names.
        let proxy_identity = cluster.ca.client_cert("system:kube-proxy", None)?;
        pki::write(
            &proxy_kubeconfig,
            &pki::kubeconfig(
                &cluster.name,
                &cluster.server,
                &cluster.ca,
                "system:kube-proxy",
                &proxy_identity,
            ),
        )?;
        let proxy_config = node.dir.join("kube-proxy-config.yaml");
        pki::write(
            &proxy_config,
            &format!(
                "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n\
                 clientConnection:\n  kubeconfig: {kubeconfig}\nmode: iptables\nclusterCIDR: {cidr}\n\
                 hostnameOverride: {name}\nbindAddress: {address}\n\
                 healthzBindAddress: 127.0.0.1:10256\nmetricsBindAddress: 127.0.0.1:10249\n\
                 # Leave the machine's conntrack table sizes alone (a sandbox may refuse them).\n\
                 conntrack:\n  maxPerCore: 0\n  min: 0\n  tcpEstablishedTimeout: 0s\n  tcpCloseWaitTimeout: 0s\n",
                kubeconfig = p(&proxy_kubeconfig),
                cidr = pod_subnet(index),
            ),
        )?;
        started.push(Component::spawn(
            &format!("{cluster_name}-kube-proxy"),
            Tier::Client,
            &ip,
            &in_netns(
                &components.bin("kube-proxy"),
                vec![format!("--config={}", p(&proxy_config))],
            ),
            &[],
            log_dir,
        )?);
        started.push(Component::spawn(
            &format!("{cluster_name}-kubelet"),
            Tier::Client,
            &ip,
            &in_netns(
                &components.bin("kubelet"),
                vec![
                    format!("--config={}", p(&kubelet_config)),
                    format!("--kubeconfig={}", p(&kubelet_kubeconfig)),
                    format!("--root-dir={}", p(&node.dir.join("kubelet"))),
                    format!("--cert-dir={}", p(&node.dir.join("kubelet/pki"))),
                    format!("--node-ip={address}"),
                    format!("--hostname-override={name}"),
                    "--v=1".into(),
                ],
            ),
            &[],
            log_dir,
        )?);
        Ok(node)
    }

    /// The node's directory (containerd's and the kubelet's state, configuration, certificates).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `program` to run in the node's network namespace and nothing else of the node (`nsenter
    /// --net`), as a process on the node would: it reaches Services at their ClusterIPs through the
    /// node's kube-proxy, and pods at their IPs.
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new(which("nsenter").unwrap_or_else(|| PathBuf::from("nsenter")));
        command
            .arg(format!("--net=/run/netns/{}", self.netns))
            .arg("--")
            .arg(program);
        command
    }

    /// containerd's socket, for `ctr --address`.
    pub fn containerd_socket(&self) -> &Path {
        &self.containerd_socket
    }

    /// Removes what the node left once its processes stopped: pod processes, shims, mounts, the
    /// network namespace and the cgroups.
    pub fn teardown(&self) {
        for cgroup in cgroup_dirs_named(&self.cgroup_root) {
            kill_cgroup_processes(&cgroup);
        }
        kill_processes_mentioning(&self.dir.display().to_string());
        unmount_below(&self.dir.display().to_string());
        let _ = run("ip", &["netns", "del", &self.netns]);
        for cgroup in cgroup_dirs_named(&self.cgroup_root) {
            remove_cgroup_tree(&cgroup);
        }
    }

    fn create_network(&self, index: u8) -> Result<(), Error> {
        let host_end = format!("{PREFIX}h{index}");
        let node_end = format!("{PREFIX}n{index}");
        let _ = run("ip", &["netns", "del", &self.netns]);
        let _ = run("ip", &["link", "del", &host_end]);
        run("ip", &["netns", "add", &self.netns])?;
        run(
            "ip",
            &[
                "link", "add", &host_end, "type", "veth", "peer", "name", &node_end,
            ],
        )?;
        run("ip", &["link", "set", &host_end, "master", BRIDGE, "up"])?;
        run("ip", &["link", "set", &node_end, "netns", &self.netns])?;
        let ns = |args: &[&str]| {
            let mut all = vec!["-n", self.netns.as_str()];
            all.extend_from_slice(args);
            run("ip", &all)
        };
        ns(&["link", "set", &node_end, "name", "eth0"])?;
        ns(&["addr", "add", &format!("{}/24", self.address), "dev", "eth0"])?;
        ns(&["link", "set", "eth0", "up"])?;
        ns(&["link", "set", "lo", "up"])?;
        ns(&["route", "add", "default", "via", &HOST_ADDRESS.to_string()])?;
        // The host reaches the node's pods through it (the API server's pod proxy, a test reading
        // a pod's /metrics); the route goes with the bridge.
        run(
            "ip",
            &[
                "route",
                "replace",
                &pod_subnet(index),
                "via",
                &self.address.to_string(),
                "dev",
                BRIDGE,
            ],
        )?;
        // Pods' packets are forwarded from cni0 to eth0 inside the node's namespace only.
        run(
            "ip",
            &[
                "netns",
                "exec",
                &self.netns,
                "sh",
                "-c",
                "echo 1 > /proc/sys/net/ipv4/ip_forward",
            ],
        )?;
        Ok(())
    }

    /// The kubelet's `cgroupRoot` must exist in every hierarchy; cgroup v1's cpuset also needs its
    /// cpus and mems before a task may join (copied from the parent).
    fn create_cgroup_root(&self) -> Result<(), Error> {
        let base = Path::new("/sys/fs/cgroup");
        if base.join("cgroup.controllers").is_file() {
            let dir = base.join(&self.cgroup_root);
            return std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
                what: format!("creating {}", dir.display()),
                source,
            });
        }
        for hierarchy in cgroup_hierarchies() {
            let dir = hierarchy.join(&self.cgroup_root);
            std::fs::create_dir_all(&dir).map_err(|source| Error::Io {
                what: format!("creating {}", dir.display()),
                source,
            })?;
            if hierarchy.ends_with("cpuset") {
                for file in ["cpuset.cpus", "cpuset.mems"] {
                    let value = std::fs::read_to_string(hierarchy.join(file)).unwrap_or_default();
                    std::fs::write(dir.join(file), value.trim()).map_err(|source| Error::Io {
                        what: format!("writing {}", dir.join(file).display()),
                        source,
                    })?;
                }
            }
        }
        Ok(())
    }

    fn write_cni_config(&self, index: u8) -> Result<(), Error> {
        let config = serde_json::json!({
            "cniVersion": "0.4.0",
            "name": "ocm-score",
            "plugins": [{
                "type": "bridge",
                "bridge": "cni0",
                "isGateway": true,
                // Pods leave the node with its address: the host needs no route to them.
                "ipMasq": true,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": pod_subnet(index)}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": self.dir.join("cni-ipam"),
                },
            }],
        });
        let path = self.dir.join("cni/10-ocm-score.conflist");
        pki::write(&path, &serde_json::to_string_pretty(&config).unwrap_or_default())
    }

    fn write_containerd_config(&self) -> Result<PathBuf, Error> {
        let d = |sub: &str| self.dir.join(sub).display().to_string();
        let cri = "plugins.\"io.containerd.grpc.v1.cri\"";
        let text = format!(
            r#"version = 2
root = "{root}"
state = "{state}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = "{socket}"

[ttrpc]
  address = "{socket}.ttrpc"

[{cri}]
  sandbox_image = "{pause}"
  # This machine refuses to lower oom_score_adj; without this every sandbox fails in runc.
  restrict_oom_score_adj = true
  enable_selinux = false
  # Pods' network namespaces under the node's state, not the machine's /run/netns.
  netns_mounts_under_state_dir = true
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        SystemdCgroup = false
  [{cri}.cni]
    bin_dir = "{cni_bin}"
    conf_dir = "{cni_conf}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{opt}"
"#,
            root = d("containerd/root"),
            state = d("containerd/state"),
            socket = self.containerd_socket.display(),
            pause = PAUSE.reference,
            cni_bin = CNI_BIN_DIR,
            cni_conf = d("cni"),
            opt = d("containerd/opt"),
        );
        let path = self.dir.join("containerd/config.toml");
        pki::write(&path, &text)?;
        Ok(path)
    }

    fn wait_for_containerd(&self, started: &mut [Component]) -> Result<(), Error> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            if let Some(c) = started.last_mut() {
                c.check_running()?;
            }
            if self.ctr(&["version"]).is_ok() {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(Error::Options(format!(
                    "{}'s containerd did not answer on {} within 60 s",
                    self.name,
                    self.containerd_socket.display()
                )));
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// Imports an image archive into the node's containerd, where the kubelet's CRI finds it.
    pub fn import(&self, image: &ImageArchive) -> Result<(), Error> {
        self.ctr(&["images", "import", &image.path.display().to_string()])
            .map(|_| ())
    }

    /// `ctr` against this node's containerd, in the kubelet's namespace `k8s.io`.
    pub fn ctr(&self, args: &[&str]) -> Result<String, Error> {
        let socket = self.containerd_socket.display().to_string();
        let mut all = vec!["--address", socket.as_str(), "--namespace", "k8s.io"];
        all.extend_from_slice(args);
        run("ctr", &all)
    }
}

/// Files the kubelet's configuration names.
struct KubeletPaths<'a> {
    ca: &'a Path,
    serving_cert: &'a Path,
    serving_key: &'a Path,
    socket: &'a Path,
    cgroup_root: &'a str,
    address: Ipv4Addr,
}

fn kubelet_configuration(paths: &KubeletPaths<'_>) -> String {
    format!(
        "apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: true}}
  x509: {{clientCAFile: {ca}}}
authorization: {{mode: Webhook}}
address: {address}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
tlsCertFile: {cert}
tlsPrivateKeyFile: {key}
containerRuntimeEndpoint: unix://{socket}
cgroupDriver: cgroupfs
cgroupRoot: /{cgroup_root}
failSwapOn: false
# No cluster DNS here, and the machine's resolver is no business of the pods.
resolvConf: \"\"
# Several nodes share one disk: keep them from evicting pods or removing our imported images.
evictionHard: {{memory.available: 50Mi, nodefs.available: 1%, imagefs.available: 1%, nodefs.inodesFree: 1%}}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
",
        ca = paths.ca.display(),
        address = paths.address,
        cert = paths.serving_cert.display(),
        key = paths.serving_key.display(),
        socket = paths.socket.display(),
        cgroup_root = paths.cgroup_root,
    )
}

/// Runs a command to completion; its stdout, or an error with both outputs.
fn run(program: &str, args: &[&str]) -> Result<String, Error> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|source| Error::Io {
            what: format!("running {program} {}", args.join(" ")),
            source,
        })?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(Error::Options(format!(
            "{program} {} failed ({}): {}{}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stdout).trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .chain(["/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// The cgroup v1 hierarchies mounted under /sys/fs/cgroup (`cpu`, `memory`, `systemd`, ...).
fn cgroup_hierarchies() -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir("/sys/fs/cgroup") else {
        return Vec::new();
    };
    entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.join("cgroup.procs").is_file() && !p.ends_with("unified"))
        .collect()
}

/// Our cgroup named `name` in every hierarchy (or the unified one).
fn cgroup_dirs_named(name: &str) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = cgroup_hierarchies().into_iter().map(|h| h.join(name)).collect();
    dirs.push(Path::new("/sys/fs/cgroup").join(name));
    dirs.into_iter().filter(|d| d.is_dir()).collect()
}

/// Every cgroup of ours a run may have left, in every hierarchy.
fn cgroup_dirs_with_prefix() -> Vec<PathBuf> {
    let mut roots = cgroup_hierarchies();
    roots.push(PathBuf::from("/sys/fs/cgroup"));
    let mut out = Vec::new();
    for root in roots {
        if let Ok(entries) = std::fs::read_dir(&root) {
            out.extend(
                entries
                    .flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with(PREFIX))
                    .map(|e| e.path())
                    .filter(|p| p.is_dir()),
            );
        }
    }
    out
}

/// Every process in a cgroup and the cgroups below it (a node's pods, under its cgroup root).
pub fn cgroup_pids(dir: &Path) -> Vec<u32> {
    let mut pids = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(procs) = std::fs::read_to_string(d.join("cgroup.procs")) {
            pids.extend(procs.lines().filter_map(|l| l.trim().parse::<u32>().ok()));
        }
        if let Ok(entries) = std::fs::read_dir(&d) {
            stack.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
    }
    pids
}

/// SIGKILL to every process in a cgroup and the cgroups below it.
fn kill_cgroup_processes(dir: &Path) {
    cgroup_pids(dir).into_iter().for_each(kill);
}

fn kill(pid: u32) {
    if let Some(pid) = i32::try_from(pid).ok().and_then(rustix::process::Pid::from_raw) {
        let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
    }
}

/// Removes a cgroup and those below it, deepest first (a cgroup goes once it has no tasks).
fn remove_cgroup_tree(dir: &Path) {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        if let Ok(entries) = std::fs::read_dir(&d) {
            stack.extend(entries.flatten().map(|e| e.path()).filter(|p| p.is_dir()));
        }
        all.push(d);
    }
    all.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    for d in all {
        // Killed tasks take a moment to leave.
        for _ in 0..20 {
            if std::fs::remove_dir(&d).is_ok() || !d.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
    }
}

/// Every process but this one whose command line mentions `needle` (containerd's shims name their
/// containerd's socket).
pub fn pids_mentioning(needle: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let own = std::process::id();
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != own)
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
        })
        .collect()
}

/// SIGKILL to every process whose command line mentions `needle` (nothing else of ours outlives
/// its process group).
fn kill_processes_mentioning(needle: &str) {
    pids_mentioning(needle).into_iter().for_each(kill);
}

/// Detaches every mount whose path contains `needle`, deepest first (the kubelet's volumes,
/// containerd's rootfs and shm mounts).
fn unmount_below(needle: &str) {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
    let mut points: Vec<&str> = mounts
        .lines()
        .filter_map(|l| l.split_whitespace().nth(4))
        .filter(|p| p.contains(needle))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.len()));
    points.dedup();
    for point in points {
        let _ = Command::new("umount").args(["--lazy", point]).output();
    }
}
