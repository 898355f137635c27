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
    /// `sha256:...` of the image's config: the image id `crictl images` and `docker images` show.
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

/// An image of `binaries` laid out by `scripts/image-rootfs.sh`.
fn recipe_image(config: &ImageConfig, binaries: &[PathBuf], out: &Path) -> Result<ImageArchive, Error> {
    let script = rootfs_script();
    let mut inputs: Vec<&Path> = binaries.iter().map(PathBuf::as_path).collect();
    inputs.push(&script);
    cached(config, &inputs, out, |rootfs| {
        let status = Command::new("bash")
            .arg(&script)
            .arg(rootfs)
            .args(binaries)
            .status()
            .map_err(|source| io(format!("running {}", script.display()), source))?;
        if status.success() {
            Ok(())
        } else {
            Err(Error::Options(format!("{} failed ({status})", script.display())))
        }
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
    let mut key = ring::digest::Context::new(&ring::digest::SHA256);
    key.update(format!("{config:?}").as_bytes());
    for input in inputs {
        hash_file(&mut key, input)?;
    }
    let key = hex(key.finish().as_ref());
    let cache = user_cache_dir().join("images");
    let name = config.reference.replace(['/', ':'], "_");
    let cached = cache.join(format!("{name}-{}.tar", &key[..16]));
    if !cached.is_file() {
        std::fs::create_dir_all(&cache)
            .map_err(|source| io(format!("creating {}", cache.display()), source))?;
        let scratch = crate::support::TempDir::new("image-rootfs");
        let rootfs = scratch.path().join("rootfs");
        std::fs::create_dir_all(&rootfs)
            .map_err(|source| io(format!("creating {}", rootfs.display()), source))?;
        fill(&rootfs)?;
        let partial = cache.join(format!("{name}-{}.partial-{}", &key[..16], std::process::id()));
        write_archive(config, &rootfs, &partial, scratch.path())?;
        std::fs::rename(&partial, &cached)
            .map_err(|source| io(format!("storing {}", cached.display()), source))?;
        remove_older(&cache, &name, &cached);
    }
    if cached != out {
        if let Some(parent) = out.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|source| io(format!("creating {}", parent.display()), source))?;
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

/// Writes the archive of `config` with `rootfs` as its one layer; `scratch` holds the layer file.
pub fn write_archive(config: &ImageConfig, rootfs: &Path, out: &Path, scratch: &Path) -> Result<(), Error> {
    let layer_path = scratch.join("layer.tar");
    write_layer(rootfs, &layer_path)?;
    let layer_digest = file_digest(&layer_path)?;
    let layer_size = std::fs::metadata(&layer_path)
        .map_err(|source| io(format!("reading {}", layer_path.display()), source))?
        .len();

    let image_config = config_json(config, &layer_digest);
    let config_bytes = to_bytes(&image_config);
    let config_digest = digest(&config_bytes);
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
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
    let manifest_digest = digest(&manifest_bytes);
    let tag = config
        .reference
        .rsplit_once(':')
        .map(|(_, t)| t)
        .unwrap_or("latest");
    let index = json!({
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [{
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "digest": format!("sha256:{manifest_digest}"),
            "size": manifest_bytes.len(),
            "annotations": {
                "io.containerd.image.name": config.reference,
                "org.opencontainers.image.ref.name": tag,
            },
        }],
    });
    let docker_manifest = json!([{
        "Config": format!("blobs/sha256/{config_digest}"),
        "RepoTags": [config.reference],
        "Layers": [format!("blobs/sha256/{layer_digest}")],
    }]);

    let file =
        std::fs::File::create(out).map_err(|source| io(format!("creating {}", out.display()), source))?;
    let mut archive = tar::Builder::new(std::io::BufWriter::new(file));
    let what = || format!("writing {}", out.display());
    for dir in ["blobs/", "blobs/sha256/"] {
        append_dir(&mut archive, dir, 0o755).map_err(|source| io(what(), source))?;
    }
    append_bytes(
        &mut archive,
        &format!("blobs/sha256/{config_digest}"),
        &config_bytes,
    )
    .map_err(|source| io(what(), source))?;
    append_bytes(
        &mut archive,
        &format!("blobs/sha256/{manifest_digest}"),
        &manifest_bytes,
    )
    .map_err(|source| io(what(), source))?;
    let mut layer = std::fs::File::open(&layer_path)
        .map_err(|source| io(format!("reading {}", layer_path.display()), source))?;
    let mut header = file_header(layer_size, 0o644);
    archive
        .append_data(&mut header, format!("blobs/sha256/{layer_digest}"), &mut layer)
        .map_err(|source| io(what(), source))?;
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
fn config_json(config: &ImageConfig, layer_digest: &str) -> Value {
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
        "architecture": oci_architecture(),
        "os": "linux",
        "config": runtime,
        "rootfs": {"type": "layers", "diff_ids": [format!("sha256:{layer_digest}")]},
        "history": [{"created_by": "ocm-score-tests image builder (scripts/image-rootfs.sh)"}],
    })
}

/// This machine's architecture as OCI names it (the binaries are built for it).
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
/// manifest, so a cached archive describes itself).
fn describe(archive: &Path) -> Result<(String, u64), Error> {
    let size = std::fs::metadata(archive)
        .map_err(|source| io(format!("reading {}", archive.display()), source))?
        .len();
    let files = read_members(archive, &["manifest.json"])?;
    let docker: Value = files
        .first()
        .and_then(|bytes| serde_json::from_slice(bytes).ok())
        .unwrap_or(Value::Null);
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
