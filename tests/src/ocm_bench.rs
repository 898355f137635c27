//! OCM's own code as a peer of ours, from the Go module in `tests/ocm-bench/`.
//!
//! The module pins the OCM release the control plane runs (`tests/control-plane/go.mod`) and holds
//! two commands: `placement-bench`, OCM's scheduling controller timed on a fleet file that
//! scheduler-core's placement benchmark writes (`scripts/bench-vs-ocm.sh`), and `cel-recorder`,
//! which records `scheduler-core/tests/cel_vectors.tsv` with OCM's CEL environment. [`module`]
//! builds both once and caches them (see [`crate::go_module`]); [`go_mod_versions`] reads the pins
//! so a test can hold the two modules to the same versions.

use std::collections::BTreeMap;

pub use ocm_score_go_build::ocm_bench::{module, module_dir};

/// The version go.mod `text` builds each required module at: its `require` version, or the
/// version its `replace` directive points to instead.
pub fn go_mod_versions(text: &str) -> BTreeMap<String, String> {
    let mut required = BTreeMap::new();
    let mut replaced = BTreeMap::new();
    // `require (` / `replace (` blocks, or one-line `require m v` / `replace m => n v`.
    let mut block = "";
    for line in text.lines() {
        let line = line.split("//").next().unwrap_or_default().trim();
        if line == ")" {
            block = "";
            continue;
        }
        if let Some(directive) = line.strip_suffix('(').map(str::trim) {
            block = match directive {
                "require" => "require",
                "replace" => "replace",
                _ => "other",
            };
            continue;
        }
        let (directive, rest) = match line.split_once(char::is_whitespace) {
            Some((d @ ("require" | "replace"), rest)) => (d, rest.trim()),
            _ => (block, line),
        };
        let words: Vec<&str> = rest.split_whitespace().collect();
        match (directive, words.as_slice()) {
            ("require", [module, version]) => {
                required.insert(module.to_string(), version.to_string());
            }
            ("replace", [module, "=>", _target, version]) => {
                replaced.insert(module.to_string(), version.to_string());
            }
            _ => {}
        }
    }
    required
        .into_iter()
        .map(|(module, version)| {
            let version = replaced.get(&module).cloned().unwrap_or(version);
            (module, version)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_come_from_require_lines_and_replacements() {
        let text = "module example.com/m\n\ngo 1.25.0\n\nrequire example.com/one v1.0.0\n\n\
                    require (\n\tk8s.io/api v0.0.0 // indirect\n\texample.com/two v2.1.0\n)\n\n\
                    tool (\n\texample.com/m/cmd\n)\n\n\
                    replace (\n\tk8s.io/api => k8s.io/api v0.34.3\n)\n\
                    replace example.com/one => example.com/fork v1.0.1\n";
        let versions = go_mod_versions(text);
        assert_eq!(
            versions,
            BTreeMap::from([
                ("example.com/one".to_string(), "v1.0.1".to_string()),
                ("example.com/two".to_string(), "v2.1.0".to_string()),
                ("k8s.io/api".to_string(), "v0.34.3".to_string()),
            ])
        );
    }
}
