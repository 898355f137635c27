//! The ocm-score image: the Dockerfile and the daemonless builder (`control-plane image`) describe
//! the same image, the manifests name the tag the builder gives it, and an archive holds what a
//! container runtime needs to run our binaries as the non-root user.

use std::io::Read;
use std::path::{Path, PathBuf};

use ocm_score_control_plane::addon::{workspace_binary, workspace_dir};
use ocm_score_control_plane::image::{self, ImageConfig, OCM_SCORE, OCM_SCORE_BINARIES};
use ocm_score_tests::support::TempDir;
use serde_json::Value;

/// The Dockerfile's instructions, continuation lines joined, comments dropped.
fn instructions(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if current.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        match trimmed.strip_suffix('\\') {
            Some(part) => {
                current.push_str(part);
                current.push(' ');
            }
            None => {
                current.push_str(trimmed);
                let (keyword, rest) = current.split_once(' ').unwrap_or((&current, ""));
                out.push((keyword.to_uppercase(), rest.trim().to_owned()));
                current.clear();
            }
        }
    }
    out
}

/// The last stage's runtime configuration and where its root filesystem comes from, and the
/// build stage's call of the rootfs recipe.
struct LastStage {
    config: ImageConfig,
    from: String,
    copies: Vec<String>,
    recipe_call: Option<String>,
}

fn last_stage(dockerfile: &str) -> LastStage {
    let all = instructions(dockerfile);
    let start = all.iter().rposition(|(k, _)| k == "FROM").expect("a FROM");
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let exec_form = |s: &str| -> &'static [&'static str] {
        let list: Vec<String> = serde_json::from_str(s).unwrap_or_else(|e| panic!("{s}: not exec form: {e}"));
        Box::leak(list.into_iter().map(leak).collect::<Vec<_>>().into_boxed_slice())
    };
    let mut config = ImageConfig {
        reference: OCM_SCORE.reference,
        user: "",
        entrypoint: &[],
        cmd: &[],
        env: &[],
    };
    let mut env = Vec::new();
    let mut copies = Vec::new();
    for (keyword, rest) in &all[start + 1..] {
        match keyword.as_str() {
            "USER" => config.user = leak(rest.clone()),
            "CMD" => config.cmd = exec_form(rest),
            "ENTRYPOINT" => config.entrypoint = exec_form(rest),
            "ENV" => env.push(leak(rest.clone())),
            "COPY" => copies.push(rest.clone()),
            other => panic!("the last stage has {other} {rest}, which the image builder does not do"),
        }
    }
    config.env = Box::leak(env.into_boxed_slice());
    let recipe_call = all[..start]
        .iter()
        .filter(|(k, _)| k == "RUN")
        .find_map(|(_, rest)| rest.find("scripts/image-rootfs.sh").map(|i| rest[i..].to_owned()));
    LastStage {
        config,
        from: all[start].1.clone(),
        copies,
        recipe_call,
    }
}

#[test]
fn the_dockerfile_builds_what_the_image_builder_builds() {
    let text = std::fs::read_to_string(workspace_dir().join("Dockerfile")).expect("Dockerfile");
    let stage = last_stage(&text);
    assert_eq!(
        stage.from, "scratch",
        "the image holds nothing but the recipe's root filesystem"
    );
    assert_eq!(
        stage.config, OCM_SCORE,
        "USER, CMD, ENTRYPOINT and ENV of the last stage"
    );

    // The recipe, its output directory, and the binaries it is given.
    let call = stage
        .recipe_call
        .expect("the build stage runs scripts/image-rootfs.sh");
    let words: Vec<&str> = call.split_whitespace().collect();
    // The recipe is told the triple it lays out (it cross-compiles for another platform).
    assert_eq!(
        words.get(1..3),
        Some(&["--target", "\"$triple\""][..]),
        "the recipe is told the target: {call}"
    );
    let (out_dir, binaries) = (words[3], &words[4..]);
    let names: Vec<&str> = binaries
        .iter()
        .take_while(|w| !w.starts_with("&&"))
        .map(|b| Path::new(b).file_name().and_then(|n| n.to_str()).unwrap_or(b))
        .collect();
    assert_eq!(names, OCM_SCORE_BINARIES, "the binaries the recipe lays out");
    assert_eq!(
        stage.copies,
        [format!("--from=build {}/ /", out_dir.trim_end_matches('/'))],
        "the last stage copies the recipe's output, and only that"
    );
}

#[test]
fn the_dockerfile_check_catches_a_different_user() {
    let text = std::fs::read_to_string(workspace_dir().join("Dockerfile")).expect("Dockerfile");
    let changed = text.replace("USER 65532:65532", "USER 0:0");
    assert_ne!(changed, text);
    assert_ne!(last_stage(&changed).config, OCM_SCORE);
}

/// Every image reference of the shipped hub install is the one the builder tags.
#[test]
fn the_manifests_name_the_image_the_builder_tags() {
    let mut found = Vec::new();
    let dir = workspace_dir().join("manifests/hub");
    for entry in std::fs::read_dir(&dir).expect("manifests/hub").flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for line in text.lines() {
            let line = line.trim().trim_start_matches("- ");
            for prefix in ["image: ", "--agent-image="] {
                if let Some(reference) = line.strip_prefix(prefix) {
                    found.push((
                        entry.file_name().to_string_lossy().into_owned(),
                        reference.to_owned(),
                    ));
                }
            }
        }
    }
    assert!(
        found.len() >= 3,
        "the manager's and tiering's images and the agent image: {found:?}"
    );
    for (file, reference) in &found {
        assert_eq!(reference, ocm_score_agent_contract::IMAGE, "{file}");
    }
    let kustomization = std::fs::read_to_string(dir.join("kustomization.yaml")).expect("kustomization");
    let (name, tag) = ocm_score_agent_contract::IMAGE.rsplit_once(':').expect("a tag");
    assert!(
        kustomization.contains(&format!("newName: {name}")),
        "kustomization names {name}"
    );
    assert!(
        kustomization.contains(&format!("newTag: {tag}")),
        "kustomization tags {tag}"
    );
}

/// The members of a tar stream, by path.
fn members(bytes: &[u8]) -> Vec<(String, u32, Vec<u8>)> {
    let mut archive = tar::Archive::new(bytes);
    let mut out = Vec::new();
    for entry in archive.entries().expect("tar") {
        let mut entry = entry.expect("entry");
        let path = entry.path().expect("path").to_string_lossy().into_owned();
        let mode = entry.header().mode().expect("mode");
        let mut data = Vec::new();
        entry.read_to_end(&mut data).expect("read");
        out.push((path, mode, data));
    }
    out
}

fn member<'a>(all: &'a [(String, u32, Vec<u8>)], path: &str) -> &'a (String, u32, Vec<u8>) {
    all.iter()
        .find(|(p, _, _)| p == path)
        .unwrap_or_else(|| panic!("no {path} in {:?}", all.iter().map(|m| &m.0).collect::<Vec<_>>()))
}

/// The archive of our real binaries: both layouts name the image, the config runs as the image's
/// user, and the one layer holds the binaries, every library they load, the user and `/tmp`.
#[test]
fn an_archive_holds_what_runs_the_binaries_as_the_image_user() {
    let binaries: Vec<PathBuf> = OCM_SCORE_BINARIES
        .iter()
        .map(|b| workspace_binary(b).expect("binary"))
        .collect();
    let dir = TempDir::new("image-test");
    let built = image::ocm_score_image(&binaries, &dir.path().join("ocm-score.tar")).expect("image");
    let outer = members(&std::fs::read(&built.path).expect("archive"));
    let blob = |digest: &str| {
        member(
            &outer,
            &format!("blobs/sha256/{}", digest.trim_start_matches("sha256:")),
        )
        .2
        .clone()
    };
    let json = |bytes: &[u8]| serde_json::from_slice::<Value>(bytes).expect("json");

    let index = json(&member(&outer, "index.json").2);
    assert_eq!(
        index["manifests"][0]["annotations"]["io.containerd.image.name"],
        ocm_score_agent_contract::IMAGE
    );
    let docker = json(&member(&outer, "manifest.json").2);
    assert_eq!(docker[0]["RepoTags"][0], ocm_score_agent_contract::IMAGE);
    let manifest = json(&blob(index["manifests"][0]["digest"].as_str().expect("digest")));
    let config = json(&blob(manifest["config"]["digest"].as_str().expect("config")));
    assert_eq!(
        format!(
            "sha256:{}",
            &manifest["config"]["digest"].as_str().expect("d")[7..]
        ),
        built.id
    );
    assert_eq!(config["config"]["User"], OCM_SCORE.user);
    assert_eq!(config["config"]["Cmd"], serde_json::json!(OCM_SCORE.cmd));
    assert_eq!(config["config"]["Env"], serde_json::json!(OCM_SCORE.env));

    let layer_digest = manifest["layers"][0]["digest"].as_str().expect("layer");
    let layer_bytes = blob(layer_digest);
    assert_eq!(
        config["rootfs"]["diff_ids"][0], layer_digest,
        "an uncompressed layer's diff id is its digest"
    );
    let layer = members(&layer_bytes);
    for binary in OCM_SCORE_BINARIES {
        let (_, mode, data) = member(&layer, &format!("usr/local/bin/{binary}"));
        assert_eq!(mode & 0o111, 0o111, "{binary} is executable");
        assert!(data.starts_with(b"\x7fELF"), "{binary} is the binary");
    }
    // Every library the binaries load is there (the loader included), at the path it is loaded from.
    let ldd = std::process::Command::new("ldd")
        .arg(&binaries[0])
        .output()
        .expect("ldd");
    let libraries: Vec<String> = String::from_utf8_lossy(&ldd.stdout)
        .lines()
        .filter_map(|l| {
            l.split_whitespace()
                .find(|w| w.starts_with('/'))
                .map(str::to_owned)
        })
        .collect();
    assert!(!libraries.is_empty(), "the debug binaries are dynamically linked");
    for library in libraries {
        member(&layer, library.trim_start_matches('/'));
    }
    let passwd = String::from_utf8_lossy(&member(&layer, "etc/passwd").2).into_owned();
    assert!(
        passwd.contains(":65532:65532:"),
        "the image user exists: {passwd}"
    );
    assert_eq!(
        member(&layer, "tmp/").1,
        0o1777,
        "/tmp is world-writable and sticky"
    );
}

/// The same root filesystem gives the same bytes: the image id follows the inputs, not the clock.
#[test]
fn archives_are_deterministic() {
    let dir = TempDir::new("image-determinism");
    let rootfs = dir.path().join("rootfs");
    std::fs::create_dir_all(rootfs.join("usr/local/bin")).expect("dir");
    std::fs::write(rootfs.join("usr/local/bin/hello"), b"#!/bin/sh\necho hello\n").expect("file");
    let mut ids = Vec::new();
    for i in 0..2 {
        let out = dir.path().join(format!("{i}.tar"));
        let scratch = dir.path().join(format!("scratch-{i}"));
        std::fs::create_dir_all(&scratch).expect("scratch");
        image::write_archive(&OCM_SCORE, &rootfs, &out, &scratch).expect("archive");
        ids.push(std::fs::read(&out).expect("read"));
        // A later modification time must not change anything.
        std::fs::write(rootfs.join("usr/local/bin/hello"), b"#!/bin/sh\necho hello\n").expect("touch");
    }
    assert!(
        ids[0] == ids[1],
        "two archives of the same root filesystem differ"
    );
}
