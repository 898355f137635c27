//! Argo CD's ApplicationSet controller: the Go module in `tests/argocd/`.
//!
//! `tests/argocd/go.mod` pins `github.com/argoproj/argo-cd/v2` and repeats the `replace` directives
//! of Argo CD's own `go.mod`; `go.sum` pins every byte. Upstream ships one multi-call binary, so the
//! module holds a main package of ours (`./argocd-applicationset-controller`) that runs only the
//! ApplicationSet controller's command. The build stamps the release version, as Argo CD's Makefile
//! does, and copies the Application, ApplicationSet and AppProject CRDs of the same module into
//! `crds/` beside the binary, and the ApplicationSet controller's ServiceAccount, Role and
//! RoleBinding (what Argo CD's install gives it) into `rbac/`.

use std::path::{Path, PathBuf};

use crate::{self as go_module, GoModule, go_command, version_of};

/// The pinned module.
pub const MODULE: &str = "github.com/argoproj/argo-cd/v2";

/// The CRDs the controller reads and writes, from the module's `manifests/crds/`: ApplicationSets,
/// the Applications it generates, and the AppProjects it checks them against.
pub const CRDS: &[&str] = &[
    "application-crd.yaml",
    "applicationset-crd.yaml",
    "appproject-crd.yaml",
];

/// The ApplicationSet controller's identity and namespaced RBAC as Argo CD installs them, from the
/// module's `manifests/base/applicationset-controller/`. They name no namespace: Argo CD's install
/// sets it with kustomize, so whoever applies them sets `metadata.namespace` and the RoleBinding's
/// subject namespace.
pub const RBAC: &[&str] = &[
    "argocd-applicationset-controller-sa.yaml",
    "argocd-applicationset-controller-role.yaml",
    "argocd-applicationset-controller-rolebinding.yaml",
];

/// Where the Go module lives in the source tree.
pub fn module_dir() -> PathBuf {
    crate::module_in_tests("argocd")
}

/// The module and how it is built.
pub fn module() -> GoModule {
    GoModule {
        what: "Argo CD's ApplicationSet controller",
        first_build_note: "a first build compiles Argo CD's controller packages and takes minutes",
        dir: module_dir(),
        cache: "argocd",
        packages: &["./argocd-applicationset-controller"],
        tags: &[],
        commands: &["argocd-applicationset-controller"],
        recipe: "2: -trimpath, stripped, release version stamped, CRDs from manifests/crds, the \
                 ApplicationSet controller's RBAC from manifests/base",
        version_modules: &[MODULE],
        ldflags: version_ldflags,
        finish: copy_manifests,
    }
}

/// The controller logs the release at startup (`common.version`, which Argo CD's Makefile sets from
/// its `VERSION` file, without the `v`).
fn version_ldflags(versions: &str) -> String {
    let version = version_of(versions, MODULE);
    format!(
        "-X github.com/argoproj/argo-cd/v2/common.version={}",
        version.trim_start_matches('v')
    )
}

/// Copies [`CRDS`] from the pinned Argo CD module into `crds/` of the build, and [`RBAC`] into
/// `rbac/`.
fn copy_manifests(go: &Path, module: &Path, staging: &Path) -> Result<(), go_module::Error> {
    let out = go_command(go, module)
        .args(["list", "-m", "-f", "{{.Dir}}", MODULE])
        .output()
        .map_err(|source| crate::io(format!("running go list -m {MODULE}"), source))?;
    let argocd = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    if !out.status.success() || !argocd.is_dir() {
        return Err(go_module::Error::GoBuild {
            what: "Argo CD's CRDs".into(),
            status: format!("go list -m {MODULE}: {}", out.status),
            log: PathBuf::new(),
            tail: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    for (from, to, names) in [
        ("manifests/crds", "crds", CRDS),
        ("manifests/base/applicationset-controller", "rbac", RBAC),
    ] {
        let (from, to) = (argocd.join(from), staging.join(to));
        std::fs::create_dir_all(&to)
            .map_err(|source| crate::io(format!("creating {}", to.display()), source))?;
        for name in names {
            std::fs::copy(from.join(name), to.join(name))
                .map_err(|source| crate::io(format!("copying {}", from.join(name).display()), source))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_release_version_is_stamped_without_its_v() {
        assert_eq!(
            version_ldflags("github.com/argoproj/argo-cd/v2 v2.14.21\n"),
            "-X github.com/argoproj/argo-cd/v2/common.version=2.14.21"
        );
    }
}
