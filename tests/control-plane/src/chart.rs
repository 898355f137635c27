//! The Helm chart `charts/ocm-score` and the manifests rendered from it.
//!
//! The chart is the one source of the hub install. `manifests/hub` (the kustomize install),
//! `manifests/addon-template` and `manifests/thanos-scorer` are `helm template` of it with fixed
//! values ([`RENDERINGS`]), one file per template as the chart names them; `tests/tests/chart.rs`
//! checks they are equal and rewrites them with `UPDATE_MANIFESTS=1`. `helm` is the one built with
//! the control plane from its Go module (`go_components`), so rendering needs nothing downloaded
//! from elsewhere.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::addon::workspace_dir;
use crate::go_components;

/// The chart's directory, relative to the workspace.
pub const CHART: &str = "charts/ocm-score";
/// The release name the renderings and the tests use (the README's `helm upgrade --install`).
pub const RELEASE: &str = "ocm-score";
/// The Kubernetes version the renderings assume (the control plane's).
pub const KUBE_VERSION: &str = "1.34.3";

/// One rendering of the chart into a directory of `manifests/`.
pub struct Rendering {
    /// The directory, relative to the workspace.
    pub dir: &'static str,
    /// `--set` values.
    pub values: &'static [&'static str],
    /// Whether the chart's CRDs (`crds/`) are part of it (into `<dir>/crds/`).
    pub crds: bool,
}

/// Every rendering kept in the repository.
pub const RENDERINGS: [Rendering; 3] = [
    // The kustomize install: the chart's defaults, and the namespace itself (kubectl has no
    // `--create-namespace`).
    Rendering {
        dir: "manifests/hub",
        values: &["createNamespace=true"],
        crds: true,
    },
    // The agent as an AddOnTemplate that OCM's addon-manager deploys: no pod of ours on the hub.
    // Instead of `manifests/hub`, never beside it (both are the add-on `resource-usage-collect`).
    Rendering {
        dir: "manifests/addon-template",
        values: &[
            "createNamespace=true",
            "install.mode=template",
            "tiering.enabled=false",
        ],
        // Its kustomization lists manifests/hub/crds.
        crds: false,
    },
    // The Thanos scorer alone, beside `manifests/hub` or without it.
    Rendering {
        dir: "manifests/thanos-scorer",
        values: &[
            "createNamespace=true",
            "addonManager.enabled=false",
            "tiering.enabled=false",
            "thanosScorer.enabled=true",
        ],
        crds: false,
    },
];

/// What failed, with the command's output.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("building helm: {0}")]
    Build(String),
    #[error("running {what}: {source}")]
    Io { what: String, source: std::io::Error },
    #[error("`helm {args}` failed: {output}")]
    Helm { args: String, output: String },
    #[error("`helm template` output has a document without a `# Source:` line: {0}")]
    Unattributed(String),
}

/// The helm binary built with the control plane's Go components (a cache hit after the first build).
pub fn helm_binary() -> Result<PathBuf, Error> {
    go_components::ensure_built(&|_| {})
        .map(|c| c.bin("helm"))
        .map_err(|e| Error::Build(e.to_string()))
}

/// Runs `helm <args>` in the workspace with a private configuration (no repositories, no
/// registries, nothing of the user's); stdout, or the error with both outputs.
pub fn helm(args: &[&str]) -> Result<String, Error> {
    let home = std::env::temp_dir().join("ocm-score-helm");
    let out = Command::new(helm_binary()?)
        .args(args)
        .current_dir(workspace_dir())
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_DATA_HOME", home.join("data"))
        .output()
        .map_err(|source| Error::Io {
            what: format!("helm {}", args.join(" ")),
            source,
        })?;
    if !out.status.success() {
        return Err(Error::Helm {
            args: args.join(" "),
            output: format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// `helm --kubeconfig <kubeconfig> <args>`: helm against a cluster.
pub fn helm_on(kubeconfig: &Path, args: &[&str]) -> Result<String, Error> {
    let kubeconfig = kubeconfig.display().to_string();
    let mut all = vec!["--kubeconfig", kubeconfig.as_str()];
    all.extend_from_slice(args);
    helm(&all)
}

/// `helm upgrade --install` of the chart as the release [`RELEASE`] into `namespace` (created if
/// missing), with `extra` arguments (`--set ...`, `--wait`, ...): the install the docs show.
pub fn install(kubeconfig: &Path, namespace: &str, extra: &[&str]) -> Result<String, Error> {
    let mut args = vec![
        "upgrade",
        "--install",
        RELEASE,
        CHART,
        "--namespace",
        namespace,
        "--create-namespace",
    ];
    args.extend_from_slice(extra);
    helm_on(kubeconfig, &args)
}

/// `helm template` of the chart with `--set` values (and the CRDs when asked).
pub fn template(values: &[&str], crds: bool) -> Result<String, Error> {
    let mut args = vec![
        "template",
        RELEASE,
        CHART,
        "--namespace",
        "ocm-score",
        "--kube-version",
        KUBE_VERSION,
    ];
    if crds {
        args.push("--include-crds");
    }
    for value in values {
        args.extend(["--set", value]);
    }
    helm(&args)
}

/// The files of a rendering: path relative to the workspace → contents.
pub fn render(rendering: &Rendering) -> Result<BTreeMap<PathBuf, String>, Error> {
    let output = template(rendering.values, rendering.crds)?;
    let mut files: BTreeMap<PathBuf, Vec<String>> = BTreeMap::new();
    for document in output.split("\n---\n") {
        let document = document.trim_start_matches("---\n").trim();
        if document.is_empty() {
            continue;
        }
        let Some((source, body)) = document
            .strip_prefix("# Source: ")
            .and_then(|rest| rest.split_once('\n'))
        else {
            return Err(Error::Unattributed(document.chars().take(200).collect()));
        };
        // `ocm-score/templates/x.yaml` → `<dir>/x.yaml`; `ocm-score/crds/x.yaml` → `<dir>/crds/x.yaml`.
        let relative = source
            .strip_prefix(&format!("{RELEASE}/templates/"))
            .map(PathBuf::from)
            .or_else(|| {
                source
                    .strip_prefix(&format!("{RELEASE}/crds/"))
                    .map(|f| Path::new("crds").join(f))
            })
            .ok_or_else(|| Error::Unattributed(source.to_owned()))?;
        let file = Path::new(rendering.dir).join(relative);
        files
            .entry(file)
            .or_default()
            .push(format!("{}\n", body.trim_end()));
    }
    Ok(files
        .into_iter()
        .map(|(file, documents)| {
            let relative = file.strip_prefix(rendering.dir).unwrap_or(&file);
            let source = if relative.starts_with("crds") {
                Path::new(CHART).join(relative)
            } else {
                Path::new(CHART).join("templates").join(relative)
            };
            let header = format!(
                "# Rendered from {} (values: {}); edit the chart, not this file.\n\
                 # Regenerate: UPDATE_MANIFESTS=1 cargo test -p ocm-score-tests --test chart\n",
                source.display(),
                rendering.values.join(", ")
            );
            (file, format!("{header}{}", documents.join("---\n")))
        })
        .collect())
}

/// The YAML files in a rendering's directory today (kustomizations excluded), relative to the
/// workspace.
pub fn rendered_files_on_disk(rendering: &Rendering) -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "yaml")
                && path.file_name().is_some_and(|n| n != "kustomization.yaml")
            {
                out.push(path);
            }
        }
    }
    let root = workspace_dir();
    let mut out = Vec::new();
    walk(&root.join(rendering.dir), &mut out);
    let mut relative: Vec<PathBuf> = out
        .into_iter()
        .filter_map(|p| p.strip_prefix(&root).ok().map(Path::to_path_buf))
        .collect();
    relative.sort();
    relative
}

/// The Prometheus Operator's Go module, pinned in `tests/prometheus-operator/go.mod` for its CRDs.
pub const PROMETHEUS_OPERATOR: &str = "github.com/prometheus-operator/prometheus-operator";

/// The CRDs of the kinds the chart's monitoring objects are (PodMonitor, PrometheusRule), from the
/// pinned Prometheus Operator module: what a hub running the operator serves.
pub fn monitoring_crds() -> Result<Vec<PathBuf>, String> {
    let pin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../prometheus-operator");
    let module = ocm_score_kube_double::ocm_api::locate_module(&pin, PROMETHEUS_OPERATOR)?;
    ["podmonitors", "prometheusrules"]
        .iter()
        .map(|plural| {
            let path = module.dir.join(format!(
                "example/prometheus-operator-crd/monitoring.coreos.com_{plural}.yaml"
            ));
            if path.is_file() {
                Ok(path)
            } else {
                Err(format!(
                    "{PROMETHEUS_OPERATOR} {} has no {}: the pin changed",
                    module.version,
                    path.display()
                ))
            }
        })
        .collect()
}
