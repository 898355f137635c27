//! OCI image archives, assembled without a container daemon or a registry: the `ocm-score` image
//! (what the repository's Dockerfile builds) and the nodes' sandbox ("pause") image.
//!
//! Both ways of building `ocm-score` share one recipe for its root filesystem,
//! `scripts/image-rootfs.sh`: the Dockerfile runs it in its build stage, [`ocm_score_image`] runs
//! it here; the image's configuration (user, command, `PATH`) is [`OCM_SCORE`], which a test checks
//! against the Dockerfile's last stage. An archive holds one uncompressed layer and is both an OCI
//! image layout (`index.json`, `blobs/sha256/...`) and a `docker save` archive (`manifest.json`),
//! so `ctr images import`, `docker load`, `podman load` and `kind load image-archive` all take it.
//! Everything in it is deterministic (sorted entries, owner root, time 0): the same inputs give
//! the same bytes, and so the same image id.
//!
//! `ocm-score` can also be built for several [`Platform`]s into one archive ([`ocm_score_platforms_image`]):
//! the binaries of a platform other than this machine's are cross-compiled (rustup's target, Debian's
//! cross toolchain) and the recipe takes their C libraries from the cross toolchain's sysroot. Its
//! `index.json` then names one image index that lists a manifest per platform, as `docker buildx
//! --platform ...` writes it, and its `manifest.json` holds the first platform's image only (the
//! one a `docker load` without containerd's image store takes).

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::Error;
use ocm_score_go_build::user_cache_dir;

/// The configuration of an image: the parts of a Dockerfile's last stage that reach the runtime.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageConfig {
    /// `repository:tag`, as the archive names it (`io.containerd.image.name`, docker's `RepoTags`).
    pub reference: &'static str,
    /// `USER`.
    pub user: &'static str,
    /// `ENTRYPOINT` (exec form).
    pub entrypoint: &'static [&'static str],
    /// `CMD` (exec form).
    pub cmd: &'static [&'static str],
    /// `ENV`, as `NAME=value`.
    pub env: &'static [&'static str],
}

/// The `ocm-score` image: both binaries, run by the non-root user 65532 (the Dockerfile's last stage).
pub const OCM_SCORE: ImageConfig = ImageConfig {
    reference: ocm_score_agent_contract::IMAGE,
    user: "65532:65532",
    entrypoint: &[],
    cmd: &["ocm-score-hub", "--help"],
    env: &["PATH=/usr/local/bin:/usr/bin:/bin"],
};

/// The binaries in the `ocm-score` image, in `/usr/local/bin`.
pub const OCM_SCORE_BINARIES: [&str; 2] = ["ocm-score-agent", "ocm-score-hub"];

/// A platform the `ocm-score` image is built for, and the toolchains that build for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Platform {
    /// OCI's `os`.
    pub os: &'static str,
    /// OCI's `architecture` (Go's `GOARCH`, as `docker --platform` names it).
    pub architecture: &'static str,
    /// rustc's target.
    pub rust_target: &'static str,
    /// Debian's multiarch triple: the cross toolchain's prefix (`aarch64-linux-gnu-gcc`) and sysroot
    /// (`/usr/aarch64-linux-gnu`, from `libc6-dev-arm64-cross`).
    pub debian_triple: &'static str,
}

/// The platforms the `ocm-score` image is built for.
pub const PLATFORMS: [Platform; 2] = [
    Platform {
        os: "linux",
        architecture: "amd64",
        rust_target: "x86_64-unknown-linux-gnu",
        debian_triple: "x86_64-linux-gnu",
    },
    Platform {
        os: "linux",
        architecture: "arm64",
        rust_target: "aarch64-unknown-linux-gnu",
        debian_triple: "aarch64-linux-gnu",
    },
];

impl Platform {
    /// `os/architecture`, as `--platform` takes it (`linux/arm64`).
    pub fn parse(text: &str) -> Result<Self, Error> {
        PLATFORMS
            .into_iter()
            .find(|p| p.to_string() == text.trim())
            .ok_or_else(|| {
                let known: Vec<String> = PLATFORMS.iter().map(Platform::to_string).collect();
                Error::Options(format!(
                    "platform {text:?}: not one the image is built for ({})",
                    known.join(", ")
                ))
            })
    }

    /// This machine's platform, when it is one of [`PLATFORMS`].
    pub fn host() -> Option<Self> {
        PLATFORMS
            .into_iter()
            .find(|p| p.architecture == oci_architecture())
    }

    /// The Debian packages of the cross toolchain that builds for this platform.
    fn cross_packages(&self) -> String {
        let deb_arch = self.architecture;
        let gcc_arch = self.debian_triple.replace('_', "-");
        format!("gcc-{gcc_arch} libc6-dev-{deb_arch}-cross")
    }
}

impl std::fmt::Display for Platform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)
    }
}

/// The test workload: `load` (tests/control-plane/src/bin/load.rs), which burns CPU and holds memory on demand,
/// laid out by the same recipe as ours.
pub const LOAD: ImageConfig = ImageConfig {
    reference: concat!("localhost/ocm-score-load:", env!("CARGO_PKG_VERSION")),
    user: "65532:65532",
    entrypoint: &["load"],
    cmd: &[],
    env: &["PATH=/usr/local/bin:/usr/bin:/bin"],
};

/// The sandbox image each pod's namespaces hang on (containerd's `sandbox_image`).
pub const PAUSE: ImageConfig = ImageConfig {
    reference: concat!("localhost/ocm-score-pause:", env!("CARGO_PKG_VERSION")),
    user: "65535:65535",
    entrypoint: &["/pause"],
    cmd: &[],
    env: &[],
};

/// An archive on disk and the image it holds.
#[derive(Clone, Debug)]
pub struct ImageArchive {
    pub path: PathBuf,
    pub reference: String,
    /// `sha256:...` of the image's config: the image id `crictl images` and `docker images` show; of a
    /// multi-platform archive, of its image index.
    pub id: String,
    /// Size of the archive in bytes.
    pub size: u64,
}

/// The recipe's script, from the workspace.
pub fn rootfs_script() -> PathBuf {
    crate::addon::workspace_dir().join("scripts/image-rootfs.sh")
}

/// Builds the `ocm-score` image from `binaries` (paths of `ocm-score-agent` and `ocm-score-hub`)
/// into `out`, unless an archive of the same inputs is cached (`~/.cache/ocm-score/images/`), in
/// which case that one is copied.
pub fn ocm_score_image(binaries: &[PathBuf], out: &Path) -> Result<ImageArchive, Error> {
    recipe_image(&OCM_SCORE, binaries, out)
}

/// Builds the `ocm-score` image for each of `platforms` into one archive at `out` (cached like
/// [`ocm_score_image`]). This machine's platform takes this build's binaries; any other, binaries
/// cross-compiled by [`cross_binaries`]. One platform gives an archive of that image alone; this
/// machine's alone, the same archive as [`ocm_score_image`].
pub fn ocm_score_platforms_image(platforms: &[Platform], out: &Path) -> Result<ImageArchive, Error> {
    let host = Platform::host();
    if platforms.is_empty() {
        return Err(Error::Options("no platform to build the image for".into()));
    }
    // Before any cross build: a repeated platform would fail only once the binaries are built.
    distinct(platforms.iter())?;
    if platforms == host.as_slice() {
        return ocm_score_image(&host_binaries()?, out);
    }
    let script = rootfs_script();
    let mut binaries = Vec::new();
    for platform in platforms {
        binaries.push(if Some(*platform) == host {
            host_binaries()?
        } else {
            cross_binaries(platform, &OCM_SCORE_BINARIES)?
        });
    }
    let mut inputs: Vec<&Path> = binaries.iter().flatten().map(PathBuf::as_path).collect();
    inputs.push(&script);
    let names: Vec<String> = platforms.iter().map(Platform::to_string).collect();
    let variant = names.join(",");
    cached_archive(&OCM_SCORE, &variant, &inputs, out, |scratch, archive| {
        let mut images = Vec::new();
        for (i, (platform, binaries)) in platforms.iter().zip(&binaries).enumerate() {
            let rootfs = scratch.join(format!("rootfs-{i}"));
            create_dir(&rootfs)?;
            let cross = (Some(*platform) != host).then_some(platform.debian_triple);
            run_recipe(&script, cross, &rootfs, binaries)?;
            images.push((*platform, rootfs));
        }
        let images: Vec<(Platform, &Path)> = images.iter().map(|(p, r)| (*p, r.as_path())).collect();
        write_platforms_archive(&OCM_SCORE, &images, archive, scratch)
    })
}

/// This build's `ocm-score-agent` and `ocm-score-hub`.
fn host_binaries() -> Result<Vec<PathBuf>, Error> {
    OCM_SCORE_BINARIES
        .iter()
        .map(|name| crate::addon::workspace_binary(name))
        .collect()
}

/// Cross-compiles the workspace's binaries `names` for `platform`, in this build's profile and target
/// directory (`target/<rust target>/<profile>/`), with Debian's cross toolchain as linker and C
/// compiler (set here for this one build, unless the environment already names them).
pub fn cross_binaries(platform: &Platform, names: &[&str]) -> Result<Vec<PathBuf>, Error> {
    let gcc = format!("{}-gcc", platform.debian_triple);
    let on_path = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(&gcc).is_file()));
    if !on_path {
        return Err(Error::Options(format!(
            "{gcc} is not on PATH: building for {platform} needs Debian's {} (and `rustup target add {}`)",
            platform.cross_packages(),
            platform.rust_target
        )));
    }
    let build = crate::addon::NestedBuild::of_this_executable()?;
    let mut cargo = build.cargo("build");
    cargo.args(["--quiet", "--workspace", "--target", platform.rust_target]);
    for name in names {
        cargo.args(["--bin", name]);
    }
    let upper = platform.rust_target.replace('-', "_").to_uppercase();
    let lower = platform.rust_target.replace('-', "_");
    for (var, value) in [
        (format!("CARGO_TARGET_{upper}_LINKER"), gcc.clone()),
        (format!("CC_{lower}"), gcc.clone()),
        (format!("AR_{lower}"), format!("{}-ar", platform.debian_triple)),
    ] {
        if std::env::var_os(&var).is_none() {
            cargo.env(var, value);
        }
    }
    let what = format!(
        "cargo build --target {} --profile {}",
        platform.rust_target, build.profile
    );
    let status = cargo
        .status()
        .map_err(|source| io(format!("running {what}"), source))?;
    if !status.success() {
        return Err(Error::Options(format!(
            "{what} failed ({status}); is the target installed (`rustup target add {}`)?",
            platform.rust_target
        )));
    }
    let profile_dir = build
        .profile_dir
        .file_name()
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("debug"));
    let dir = build.target_dir.join(platform.rust_target).join(profile_dir);
    names
        .iter()
        .map(|name| {
            let path = dir.join(name);
            if path.is_file() {
                Ok(path)
            } else {
                Err(Error::Options(format!(
                    "{what} did not produce {}",
                    path.display()
                )))
            }
        })
        .collect()
}

/// Runs the rootfs recipe into `rootfs`; `cross` is the Debian triple of cross-compiled binaries.
fn run_recipe(script: &Path, cross: Option<&str>, rootfs: &Path, binaries: &[PathBuf]) -> Result<(), Error> {
    let mut command = Command::new("bash");
    command.arg(script);
    if let Some(triple) = cross {
        command.args(["--target", triple]);
    }
    let status = command
        .arg(rootfs)
        .args(binaries)
        .status()
        .map_err(|source| io(format!("running {}", script.display()), source))?;
    if status.success() {
        Ok(())
    } else {
        Err(Error::Options(format!("{} failed ({status})", script.display())))
    }
}

/// An image of `binaries` laid out by `scripts/image-rootfs.sh`.
fn recipe_image(config: &ImageConfig, binaries: &[PathBuf], out: &Path) -> Result<ImageArchive, Error> {
    let script = rootfs_script();
    let mut inputs: Vec<&Path> = binaries.iter().map(PathBuf::as_path).collect();
    inputs.push(&script);
    cached(config, &inputs, out, |rootfs| {
        run_recipe(&script, None, rootfs, binaries)
    })
}

/// Builds the test workload image from the `load` binary.
pub fn load_image(load: &Path, out: &Path) -> Result<ImageArchive, Error> {
    recipe_image(&LOAD, &[load.to_path_buf()], out)
}

/// Builds the sandbox image around the control plane's `pause` binary.
pub fn pause_image(pause: &Path, out: &Path) -> Result<ImageArchive, Error> {
    cached(&PAUSE, &[pause], out, |rootfs| {
        let to = rootfs.join("pause");
        std::fs::copy(pause, &to).map_err(|source| io(format!("copying {}", pause.display()), source))?;
        set_mode(&to, 0o755)
    })
}

/// Builds `config`'s image with `fill` laying out its root filesystem, keyed by the bytes of
/// `inputs` and the configuration; a cached archive of the same key is reused.
fn cached(
    config: &ImageConfig,
    inputs: &[&Path],
    out: &Path,
    fill: impl FnOnce(&Path) -> Result<(), Error>,
) -> Result<ImageArchive, Error> {
    cached_archive(config, "", inputs, out, |scratch, archive| {
        let rootfs = scratch.join("rootfs");
        create_dir(&rootfs)?;
        fill(&rootfs)?;
        write_archive(config, &rootfs, archive, scratch)
    })
}

/// The archive `write` writes (given a scratch directory and the file to write), keyed by the
/// bytes of `inputs`, the configuration and `variant` (the platforms of a multi-platform archive,
/// empty for this machine's alone); a cached archive of the same key is reused.
fn cached_archive(
    config: &ImageConfig,
    variant: &str,
    inputs: &[&Path],
    out: &Path,
    write: impl FnOnce(&Path, &Path) -> Result<(), Error>,
) -> Result<ImageArchive, Error> {
    let mut key = ring::digest::Context::new(&ring::digest::SHA256);
    key.update(format!("{config:?}").as_bytes());
    key.update(variant.as_bytes());
    for input in inputs {
        hash_file(&mut key, input)?;
    }
    let key = hex(key.finish().as_ref());
    let cache = user_cache_dir().join("images");
    let mut name = config.reference.replace(['/', ':'], "_");
    if !variant.is_empty() {
        // `+`, not `-`: the cache keeps one archive per name, found by the prefix `<name>-`.
        name = format!("{name}+{}", variant.replace(['/', ','], "_"));
    }
    let cached = cache.join(format!("{name}-{}.tar", &key[..16]));
    if !cached.is_file() {
        create_dir(&cache)?;
        let scratch = crate::support::TempDir::new("image-rootfs");
        let partial = cache.join(format!("{name}-{}.partial-{}", &key[..16], std::process::id()));
        write(scratch.path(), &partial)?;
        std::fs::rename(&partial, &cached)
            .map_err(|source| io(format!("storing {}", cached.display()), source))?;
        remove_older(&cache, &name, &cached);
    }
    if cached != out {
        if let Some(parent) = out.parent() {
            create_dir(parent)?;
        }
        std::fs::copy(&cached, out).map_err(|source| io(format!("writing {}", out.display()), source))?;
    }
    let (id, size) = describe(out)?;
    Ok(ImageArchive {
        path: out.to_path_buf(),
        reference: config.reference.to_owned(),
        id,
        size,
    })
}

fn create_dir(dir: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dir).map_err(|source| io(format!("creating {}", dir.display()), source))
}

/// Keeps one archive per image in the cache: the one just made.
fn remove_older(cache: &Path, name: &str, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(cache) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let file = entry.file_name().to_string_lossy().into_owned();
        if path != keep && file.starts_with(&format!("{name}-")) {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Writes the archive of `config` with `rootfs` as its one layer, for this machine's architecture;
/// `scratch` holds the layer file.
pub fn write_archive(config: &ImageConfig, rootfs: &Path, out: &Path, scratch: &Path) -> Result<(), Error> {
    write_images(config, &[("linux", oci_architecture(), rootfs)], out, scratch)
}

/// Writes one archive of `config` for each platform of `images`, each with its root filesystem as
/// its one layer. Two or more make an image index of one manifest per platform, in the order given;
/// one makes the same layout as [`write_archive`], for that platform.
pub fn write_platforms_archive(
    config: &ImageConfig,
    images: &[(Platform, &Path)],
    out: &Path,
    scratch: &Path,
) -> Result<(), Error> {
    distinct(images.iter().map(|(platform, _)| platform))?;
    let images: Vec<(&str, &str, &Path)> = images
        .iter()
        .map(|(p, rootfs)| (p.os, p.architecture, *rootfs))
        .collect();
    write_images(config, &images, out, scratch)
}

/// An archive holds one image per platform: a platform named twice is an error naming it.
fn distinct<'a>(platforms: impl Iterator<Item = &'a Platform>) -> Result<(), Error> {
    let mut seen = Vec::new();
    for platform in platforms {
        if seen.contains(platform) {
            return Err(Error::Options(format!("platform {platform} is named twice")));
        }
        seen.push(*platform);
    }
    Ok(())
}

/// One platform's image: its layer (a file in the scratch directory), config and manifest.
struct Blobs {
    os: String,
    architecture: String,
    layer_path: PathBuf,
    layer_digest: String,
    layer_size: u64,
    config: Vec<u8>,
    config_digest: String,
    manifest: Vec<u8>,
    manifest_digest: String,
}

fn image_blobs(
    config: &ImageConfig,
    (os, architecture, rootfs): (&str, &str, &Path),
    layer_path: PathBuf,
) -> Result<Blobs, Error> {
    write_layer(rootfs, &layer_path)?;
    let layer_digest = file_digest(&layer_path)?;
    let layer_size = std::fs::metadata(&layer_path)
        .map_err(|source| io(format!("reading {}", layer_path.display()), source))?
        .len();
    let config_bytes = to_bytes(&config_json(config, os, architecture, &layer_digest));
    let config_digest = digest(&config_bytes);
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": format!("sha256:{config_digest}"),
            "size": config_bytes.len(),
        },
        "layers": [{
            "mediaType": "application/vnd.oci.image.layer.v1.tar",
            "digest": format!("sha256:{layer_digest}"),
            "size": layer_size,
        }],
    });
    let manifest_bytes = to_bytes(&manifest);
    Ok(Blobs {
        os: os.to_owned(),
        architecture: architecture.to_owned(),
        layer_path,
        layer_digest,
        layer_size,
        manifest_digest: digest(&manifest_bytes),
        manifest: manifest_bytes,
        config: config_bytes,
        config_digest,
    })
}

const MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
const INDEX: &str = "application/vnd.oci.image.index.v1+json";

/// Writes the archive of `images` (os, architecture, root filesystem).
fn write_images(
    config: &ImageConfig,
    images: &[(&str, &str, &Path)],
    out: &Path,
    scratch: &Path,
) -> Result<(), Error> {
    let mut blobs = Vec::new();
    for (i, image) in images.iter().enumerate() {
        blobs.push(image_blobs(
            config,
            *image,
            scratch.join(format!("layer-{i}.tar")),
        )?);
    }
    let Some(first) = blobs.first() else {
        return Err(Error::Options(format!(
            "{}: an image archive needs at least one platform",
            out.display()
        )));
    };
    let tag = config
        .reference
        .rsplit_once(':')
        .map(|(_, t)| t)
        .unwrap_or("latest");
    let annotations = json!({
        "io.containerd.image.name": config.reference,
        "org.opencontainers.image.ref.name": tag,
    });
    // One platform: `index.json` names its manifest (what the nodes import). More: it names an
    // image index (a blob) that lists each platform's manifest, which is what runtimes pick from.
    let (top, platform_index) = if let [only] = blobs.as_slice() {
        let top = json!({
            "mediaType": MANIFEST,
            "digest": format!("sha256:{}", only.manifest_digest),
            "size": only.manifest.len(),
            "annotations": annotations,
        });
        (top, None)
    } else {
        let manifests: Vec<Value> = blobs
            .iter()
            .map(|b| {
                json!({
                    "mediaType": MANIFEST,
                    "digest": format!("sha256:{}", b.manifest_digest),
                    "size": b.manifest.len(),
                    "platform": {"architecture": b.architecture, "os": b.os},
                })
            })
            .collect();
        let bytes = to_bytes(&json!({"schemaVersion": 2, "mediaType": INDEX, "manifests": manifests}));
        let top = json!({
            "mediaType": INDEX,
            "digest": format!("sha256:{}", digest(&bytes)),
            "size": bytes.len(),
            "annotations": annotations,
        });
        (top, Some(bytes))
    };
    let index = json!({"schemaVersion": 2, "mediaType": INDEX, "manifests": [top]});
    // `docker save`'s layout has no platforms: it holds the first one's image.
    let docker_manifest = json!([{
        "Config": format!("blobs/sha256/{}", first.config_digest),
        "RepoTags": [config.reference],
        "Layers": [format!("blobs/sha256/{}", first.layer_digest)],
    }]);

    let file =
        std::fs::File::create(out).map_err(|source| io(format!("creating {}", out.display()), source))?;
    let mut archive = tar::Builder::new(std::io::BufWriter::new(file));
    let what = || format!("writing {}", out.display());
    for dir in ["blobs/", "blobs/sha256/"] {
        append_dir(&mut archive, dir, 0o755).map_err(|source| io(what(), source))?;
    }
    // Platforms may share a blob (the same layer): a tar member is written once.
    let mut written = std::collections::BTreeSet::new();
    for image in &blobs {
        for (blob_digest, bytes) in [
            (&image.config_digest, &image.config),
            (&image.manifest_digest, &image.manifest),
        ] {
            if written.insert(blob_digest.clone()) {
                append_bytes(&mut archive, &format!("blobs/sha256/{blob_digest}"), bytes)
                    .map_err(|source| io(what(), source))?;
            }
        }
        if written.insert(image.layer_digest.clone()) {
            let mut layer = std::fs::File::open(&image.layer_path)
                .map_err(|source| io(format!("reading {}", image.layer_path.display()), source))?;
            let mut header = file_header(image.layer_size, 0o644);
            archive
                .append_data(
                    &mut header,
                    format!("blobs/sha256/{}", image.layer_digest),
                    &mut layer,
                )
                .map_err(|source| io(what(), source))?;
        }
    }
    if let Some(bytes) = &platform_index {
        append_bytes(&mut archive, &format!("blobs/sha256/{}", digest(bytes)), bytes)
            .map_err(|source| io(what(), source))?;
    }
    append_bytes(&mut archive, "index.json", &to_bytes(&index)).map_err(|source| io(what(), source))?;
    append_bytes(&mut archive, "manifest.json", &to_bytes(&docker_manifest))
        .map_err(|source| io(what(), source))?;
    append_bytes(&mut archive, "oci-layout", br#"{"imageLayoutVersion":"1.0.0"}"#)
        .map_err(|source| io(what(), source))?;
    let mut inner = archive.into_inner().map_err(|source| io(what(), source))?;
    inner.flush().map_err(|source| io(what(), source))?;
    Ok(())
}

/// The image configuration (OCI image spec), with the layer's uncompressed digest as its diff id.
fn config_json(config: &ImageConfig, os: &str, architecture: &str, layer_digest: &str) -> Value {
    let list = |items: &[&str]| (!items.is_empty()).then(|| json!(items));
    let mut runtime = json!({"User": config.user, "WorkingDir": "/"});
    for (key, value) in [
        ("Entrypoint", list(config.entrypoint)),
        ("Cmd", list(config.cmd)),
        ("Env", list(config.env)),
    ] {
        if let Some(value) = value {
            runtime[key] = value;
        }
    }
    json!({
        // A fixed time: the same inputs give the same image id.
        "created": "1970-01-01T00:00:00Z",
        "architecture": architecture,
        "os": os,
        "config": runtime,
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{layer_digest}")]},
        "history": [{"created_by": "ocm-score-tests image builder (scripts/image-rootfs.sh)"}],
    })
}

/// This machine's architecture as OCI names it (the binaries of a single-platform image are built for it).
fn oci_architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// A tar of `rootfs`: entries sorted, owned by root, time 0, modes kept (the sticky `/tmp` too).
fn write_layer(rootfs: &Path, out: &Path) -> Result<(), Error> {
    let file =
        std::fs::File::create(out).map_err(|source| io(format!("creating {}", out.display()), source))?;
    let mut layer = tar::Builder::new(std::io::BufWriter::new(file));
    let mut entries = Vec::new();
    walk(rootfs, rootfs, &mut entries)?;
    entries.sort();
    let what = || format!("writing {}", out.display());
    for rel in entries {
        let path = rootfs.join(&rel);
        let meta = std::fs::symlink_metadata(&path)
            .map_err(|source| io(format!("reading {}", path.display()), source))?;
        let mode = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o7777;
        if meta.is_dir() {
            append_dir(&mut layer, &format!("{rel}/"), mode).map_err(|source| io(what(), source))?;
        } else if meta.is_file() {
            let mut file = std::fs::File::open(&path)
                .map_err(|source| io(format!("reading {}", path.display()), source))?;
            let mut header = file_header(meta.len(), mode);
            layer
                .append_data(&mut header, &rel, &mut file)
                .map_err(|source| io(what(), source))?;
        } else {
            return Err(Error::Options(format!(
                "{}: only files and directories go into an image layer",
                path.display()
            )));
        }
    }
    let mut inner = layer.into_inner().map_err(|source| io(what(), source))?;
    inner.flush().map_err(|source| io(what(), source))?;
    Ok(())
}

fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) -> Result<(), Error> {
    let entries =
        std::fs::read_dir(dir).map_err(|source| io(format!("reading {}", dir.display()), source))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if let Ok(rel) = path.strip_prefix(base) {
            out.push(rel.to_string_lossy().into_owned());
        }
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            walk(base, &path, out)?;
        }
    }
    Ok(())
}

fn file_header(size: u64, mode: u32) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_size(size);
    header.set_mode(mode);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    header
}

fn append_dir<W: Write>(archive: &mut tar::Builder<W>, path: &str, mode: u32) -> std::io::Result<()> {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(tar::EntryType::Directory);
    header.set_size(0);
    header.set_mode(mode);
    header.set_uid(0);
    header.set_gid(0);
    header.set_mtime(0);
    archive.append_data(&mut header, path, std::io::empty())
}

fn append_bytes<W: Write>(archive: &mut tar::Builder<W>, path: &str, bytes: &[u8]) -> std::io::Result<()> {
    let mut header = file_header(bytes.len() as u64, 0o644);
    archive.append_data(&mut header, path, bytes)
}

fn set_mode(path: &Path, mode: u32) -> Result<(), Error> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|source| io(format!("setting the mode of {}", path.display()), source))
}

/// The image id and size of an archive this module wrote (read back from its `index.json` and
/// manifest, so a cached archive describes itself). A multi-platform image's id is the digest of its
/// image index, as a registry and containerd's image store name it.
fn describe(archive: &Path) -> Result<(String, u64), Error> {
    let size = std::fs::metadata(archive)
        .map_err(|source| io(format!("reading {}", archive.display()), source))?
        .len();
    let files = read_members(archive, &["index.json", "manifest.json"])?;
    let parse = |bytes: &Vec<u8>| serde_json::from_slice::<Value>(bytes).unwrap_or(Value::Null);
    let index = files.first().map(parse).unwrap_or(Value::Null);
    if index.pointer("/manifests/0/mediaType").and_then(Value::as_str) == Some(INDEX) {
        let id = index
            .pointer("/manifests/0/digest")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::Options(format!("{}: index.json names no digest", archive.display())))?;
        return Ok((id.to_owned(), size));
    }
    let docker = files.get(1).map(parse).unwrap_or(Value::Null);
    let id = docker
        .pointer("/0/Config")
        .and_then(Value::as_str)
        .and_then(|c| c.strip_prefix("blobs/sha256/"))
        .map(|d| format!("sha256:{d}"))
        .ok_or_else(|| Error::Options(format!("{}: no image config in manifest.json", archive.display())))?;
    Ok((id, size))
}

/// The contents of the named members of a tar archive, in the order asked (missing ones are empty).
pub fn read_members(archive: &Path, names: &[&str]) -> Result<Vec<Vec<u8>>, Error> {
    let file = std::fs::File::open(archive)
        .map_err(|source| io(format!("reading {}", archive.display()), source))?;
    let mut out = vec![Vec::new(); names.len()];
    let mut tar = tar::Archive::new(std::io::BufReader::new(file));
    let what = || format!("reading {}", archive.display());
    for entry in tar.entries().map_err(|source| io(what(), source))? {
        let mut entry = entry.map_err(|source| io(what(), source))?;
        let path = entry
            .path()
            .map_err(|source| io(what(), source))?
            .to_string_lossy()
            .into_owned();
        if let Some(i) = names.iter().position(|n| *n == path) {
            entry
                .read_to_end(&mut out[i])
                .map_err(|source| io(what(), source))?;
        }
    }
    Ok(out)
}

fn file_digest(path: &Path) -> Result<String, Error> {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    hash_file(&mut ctx, path)?;
    Ok(hex(ctx.finish().as_ref()))
}

/// Feeds a file's bytes to `ctx`, a megabyte at a time (binaries run to a hundred).
fn hash_file(ctx: &mut ring::digest::Context, path: &Path) -> Result<(), Error> {
    let mut file =
        std::fs::File::open(path).map_err(|source| io(format!("reading {}", path.display()), source))?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .map_err(|source| io(format!("reading {}", path.display()), source))?;
        if n == 0 {
            return Ok(());
        }
        ctx.update(&buf[..n]);
    }
}

fn digest(bytes: &[u8]) -> String {
    hex(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn to_bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap_or_default()
}

fn io(what: String, source: std::io::Error) -> Error {
    Error::Io { what, source }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::TempDir;

    /// The members of a tar file, by path, in order.
    fn members(bytes: &[u8]) -> Vec<(String, Vec<u8>)> {
        let mut archive = tar::Archive::new(bytes);
        archive
            .entries()
            .expect("tar")
            .map(|entry| {
                let mut entry = entry.expect("entry");
                let path = entry.path().expect("path").to_string_lossy().into_owned();
                let mut data = Vec::new();
                entry.read_to_end(&mut data).expect("read");
                (path, data)
            })
            .collect()
    }

    /// The blob a descriptor names, after checking that its bytes have the digest and size it says.
    fn blob<'a>(all: &'a [(String, Vec<u8>)], descriptor: &Value) -> &'a [u8] {
        let named = descriptor["digest"].as_str().expect("a digest");
        let path = format!("blobs/sha256/{}", named.trim_start_matches("sha256:"));
        let (_, bytes) = all
            .iter()
            .find(|(p, _)| *p == path)
            .unwrap_or_else(|| panic!("no {path} in the archive"));
        assert_eq!(format!("sha256:{}", digest(bytes)), named, "{path}'s digest");
        assert_eq!(descriptor["size"], json!(bytes.len()), "{path}'s size");
        bytes
    }

    fn json_of(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).expect("json")
    }

    /// Two root filesystems told apart by one file each, for amd64 and arm64.
    fn two_rootfs(dir: &Path) -> [(Platform, PathBuf); 2] {
        PLATFORMS.map(|platform| {
            let rootfs = dir.join(format!("rootfs-{}", platform.architecture));
            std::fs::create_dir_all(rootfs.join("usr/local/bin")).expect("dir");
            let script = format!("#!/bin/sh\necho {}\n", platform.architecture);
            std::fs::write(rootfs.join("usr/local/bin/ocm-score-agent"), script).expect("file");
            (platform, rootfs)
        })
    }

    fn write_two(dir: &Path, images: &[(Platform, PathBuf)], name: &str) -> Vec<u8> {
        let scratch = dir.join(format!("scratch-{name}"));
        std::fs::create_dir_all(&scratch).expect("scratch");
        let out = dir.join(format!("{name}.tar"));
        let images: Vec<(Platform, &Path)> = images.iter().map(|(p, r)| (*p, r.as_path())).collect();
        write_platforms_archive(&OCM_SCORE, &images, &out, &scratch).expect("archive");
        std::fs::read(&out).expect("read")
    }

    /// `index.json` names one image index; it lists a manifest per platform, in order, with its
    /// platform; each manifest's config says that architecture and its layer is that platform's
    /// root filesystem; every digest and size is the blob's; `manifest.json` is the first
    /// platform's image; and the same trees give the same bytes.
    #[test]
    fn a_two_platform_archive_is_an_index_of_both_images() {
        let dir = TempDir::new("image-platforms");
        let images = two_rootfs(dir.path());
        let bytes = write_two(dir.path(), &images, "first");
        let all = members(&bytes);

        let index = json_of(&all.iter().find(|(p, _)| p == "index.json").expect("index.json").1);
        let tops = index["manifests"].as_array().expect("manifests");
        assert_eq!(tops.len(), 1, "index.json names one image: {index}");
        assert_eq!(tops[0]["mediaType"], INDEX);
        assert_eq!(
            tops[0]["annotations"]["io.containerd.image.name"],
            OCM_SCORE.reference
        );
        let platform_index = json_of(blob(&all, &tops[0]));
        assert_eq!(platform_index["mediaType"], INDEX);
        let manifests = platform_index["manifests"].as_array().expect("manifests");
        assert_eq!(manifests.len(), 2, "{platform_index}");
        let mut configs = Vec::new();
        for ((platform, _), descriptor) in images.iter().zip(manifests) {
            assert_eq!(descriptor["mediaType"], MANIFEST);
            assert_eq!(
                descriptor["platform"],
                json!({"architecture": platform.architecture, "os": "linux"})
            );
            let manifest = json_of(blob(&all, descriptor));
            let config = json_of(blob(&all, &manifest["config"]));
            assert_eq!(config["architecture"], platform.architecture);
            assert_eq!(config["os"], "linux");
            assert_eq!(config["config"]["User"], OCM_SCORE.user);
            assert_eq!(config["rootfs"]["diff_ids"][0], manifest["layers"][0]["digest"]);
            let layer = members(blob(&all, &manifest["layers"][0]));
            let (_, agent) = layer
                .iter()
                .find(|(p, _)| p == "usr/local/bin/ocm-score-agent")
                .expect("the agent in the layer");
            let expected = format!("#!/bin/sh\necho {}\n", platform.architecture);
            assert_eq!(
                agent,
                expected.as_bytes(),
                "{platform}'s layer holds its own files"
            );
            configs.push(manifest["config"]["digest"].clone());
        }
        let docker = json_of(
            &all.iter()
                .find(|(p, _)| p == "manifest.json")
                .expect("manifest.json")
                .1,
        );
        assert_eq!(
            docker[0]["Config"]
                .as_str()
                .map(|c| c.replace("blobs/sha256/", "sha256:")),
            configs[0].as_str().map(str::to_owned),
            "manifest.json holds the first platform's image"
        );
        assert_eq!(docker.as_array().map(Vec::len), Some(1));

        // The image id is the image index's digest.
        let out = dir.path().join("first.tar");
        assert_eq!(describe(&out).expect("describe").0, tops[0]["digest"]);

        // Deterministic: the same trees, touched again, give the same bytes.
        for (_, rootfs) in &images {
            let agent = rootfs.join("usr/local/bin/ocm-score-agent");
            let text = std::fs::read(&agent).expect("read");
            std::fs::write(&agent, text).expect("touch");
        }
        assert!(
            write_two(dir.path(), &images, "second") == bytes,
            "two archives of the same trees differ"
        );
    }

    /// One platform is a plain image of that platform, a platform twice is refused, and a name
    /// parses only to a platform the image is built for.
    #[test]
    fn one_platform_is_a_plain_image_and_platforms_are_checked() {
        let dir = TempDir::new("image-one-platform");
        let [_, arm64] = two_rootfs(dir.path());
        let all = members(&write_two(dir.path(), std::slice::from_ref(&arm64), "arm64"));
        let index = json_of(&all.iter().find(|(p, _)| p == "index.json").expect("index.json").1);
        assert_eq!(index["manifests"][0]["mediaType"], MANIFEST);
        let manifest = json_of(blob(&all, &index["manifests"][0]));
        assert_eq!(json_of(blob(&all, &manifest["config"]))["architecture"], "arm64");

        let scratch = dir.path().join("scratch-twice");
        std::fs::create_dir_all(&scratch).expect("scratch");
        let twice = [(arm64.0, arm64.1.as_path()), (arm64.0, arm64.1.as_path())];
        let err = write_platforms_archive(&OCM_SCORE, &twice, &dir.path().join("twice.tar"), &scratch)
            .expect_err("the same platform twice");
        assert!(err.to_string().contains("linux/arm64 is named twice"), "{err}");

        assert_eq!(Platform::parse("linux/arm64").expect("arm64"), PLATFORMS[1]);
        assert_eq!(Platform::parse(" linux/amd64").expect("amd64"), PLATFORMS[0]);
        let err = Platform::parse("linux/s390x").expect_err("not built for s390x");
        assert!(err.to_string().contains("linux/amd64, linux/arm64"), "{err}");
    }
}
