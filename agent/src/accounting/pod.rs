//! A pod's effective resource request, by Kubernetes' rule.
//!
//! Per resource: `max(A + S, I) + O`, where `A` is the sum of the app containers' requests, `S` the sum
//! of the sidecars' (init containers with `restartPolicy: Always`), `I` the peak while init containers
//! run in order (each one's request plus every sidecar started before it; a sidecar's own request
//! counts towards its peak too), and `O` the pod overhead. Only requests count, never limits.

use super::objects::{ResourceList, SlimContainer, SlimPodSpec};
use super::quantity::{QuantityError, parse_quantity};
use super::resources::{MAX_RESOURCES, ResourceSet};

/// A request the accounting could not read, with where it was found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{location} requests {resource}: {source}")]
pub struct RequestError {
    /// e.g. `container "app"`, `init container "setup"`, `overhead`.
    pub location: String,
    pub resource: String,
    #[source]
    pub source: QuantityError,
}

/// The effective requests of a pod spec, one amount per resource of `resources`.
pub fn effective_requests(spec: &SlimPodSpec, resources: &ResourceSet) -> Result<Box<[i64]>, RequestError> {
    let n = resources.len();
    let mut apps = [0i64; MAX_RESOURCES];
    for container in &spec.containers {
        add_requests(&mut apps, &container.resources.requests, resources, || {
            location("container", container)
        })?;
    }

    // Sidecars started so far, and the peak seen while the init sequence runs.
    let mut sidecars = [0i64; MAX_RESOURCES];
    let mut init_peak = [0i64; MAX_RESOURCES];
    for container in &spec.init_containers {
        let mut own = [0i64; MAX_RESOURCES];
        add_requests(&mut own, &container.resources.requests, resources, || {
            location("init container", container)
        })?;
        for r in 0..n {
            if container.is_sidecar() {
                sidecars[r] = sidecars[r].saturating_add(own[r]);
                init_peak[r] = init_peak[r].max(sidecars[r]);
            } else {
                init_peak[r] = init_peak[r].max(sidecars[r].saturating_add(own[r]));
            }
        }
    }

    let mut overhead = [0i64; MAX_RESOURCES];
    add_requests(&mut overhead, &spec.overhead, resources, || "overhead".to_owned())?;

    Ok((0..n)
        .map(|r| {
            apps[r]
                .saturating_add(sidecars[r])
                .max(init_peak[r])
                .saturating_add(overhead[r])
        })
        .collect())
}

fn location(kind: &str, container: &SlimContainer) -> String {
    format!("{kind} {:?}", container.name)
}

/// Adds the tracked entries of `list` to `into`; entries for resources not in the set are not parsed.
fn add_requests(
    into: &mut [i64],
    list: &ResourceList,
    resources: &ResourceSet,
    location: impl Fn() -> String,
) -> Result<(), RequestError> {
    for (name, quantity) in &list.0 {
        let Some(index) = resources.index_of(name) else {
            continue;
        };
        let amount = parse_quantity(&quantity.0, resources.unit(index)).map_err(|source| RequestError {
            location: location(),
            resource: name.clone(),
            source,
        })?;
        into[index] = into[index].saturating_add(amount);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accounting::objects::SlimResources;
    use crate::accounting::quantity::QuantityText;

    fn list(entries: &[(&str, &str)]) -> ResourceList {
        ResourceList(
            entries
                .iter()
                .map(|(k, v)| ((*k).to_owned(), QuantityText((*v).to_owned())))
                .collect(),
        )
    }

    fn container(name: &str, sidecar: bool, requests: &[(&str, &str)]) -> SlimContainer {
        SlimContainer {
            name: name.to_owned(),
            restart_policy: sidecar.then(|| "Always".to_owned()),
            resources: SlimResources {
                requests: list(requests),
            },
            ports: Vec::new(),
        }
    }

    /// (cpu millicores, memory bytes) of a spec.
    fn effective(spec: &SlimPodSpec) -> (i64, i64) {
        let r = effective_requests(spec, &ResourceSet::built_in()).expect("valid");
        (r[0], r[1])
    }

    #[test]
    fn table() {
        struct Case {
            name: &'static str,
            apps: Vec<SlimContainer>,
            inits: Vec<SlimContainer>,
            overhead: &'static [(&'static str, &'static str)],
            want: (i64, i64),
        }
        let cases = [
            Case {
                name: "apps only sum",
                apps: vec![
                    container("a", false, &[("cpu", "100m")]),
                    container("b", false, &[("cpu", "0.2")]),
                ],
                inits: vec![],
                overhead: &[],
                want: (300, 0),
            },
            Case {
                name: "bigger init container wins per resource",
                apps: vec![container("app", false, &[("cpu", "250m"), ("memory", "2Gi")])],
                inits: vec![container("warm", false, &[("cpu", "1500m"), ("memory", "512Mi")])],
                overhead: &[],
                want: (1500, 2 << 30),
            },
            Case {
                name: "init containers do not add up, the largest counts",
                apps: vec![],
                inits: vec![
                    container("a", false, &[("cpu", "1")]),
                    container("b", false, &[("cpu", "2")]),
                ],
                overhead: &[],
                want: (2000, 0),
            },
            Case {
                name: "sidecar adds to apps",
                apps: vec![container("app", false, &[("cpu", "1")])],
                inits: vec![container("proxy", true, &[("cpu", "200m")])],
                overhead: &[],
                want: (1200, 0),
            },
            Case {
                name: "sidecar before a big init container adds to its peak",
                apps: vec![container("app", false, &[("cpu", "500m")])],
                inits: vec![
                    container("proxy", true, &[("cpu", "200m")]),
                    container("setup", false, &[("cpu", "1")]),
                ],
                overhead: &[],
                want: (1200, 0),
            },
            Case {
                name: "sidecar after a big init container does not",
                apps: vec![container("app", false, &[("cpu", "500m")])],
                inits: vec![
                    container("setup", false, &[("cpu", "1")]),
                    container("proxy", true, &[("cpu", "200m")]),
                ],
                overhead: &[],
                want: (1000, 0),
            },
            Case {
                name: "sidecars accumulate into later peaks",
                apps: vec![],
                inits: vec![
                    container("s1", true, &[("memory", "100Mi")]),
                    container("s2", true, &[("memory", "100Mi")]),
                    container("job", false, &[("memory", "1Gi")]),
                ],
                overhead: &[],
                want: (0, (1 << 30) + (200 << 20)),
            },
            Case {
                name: "overhead is added once after the max",
                apps: vec![container("app", false, &[("cpu", "1")])],
                inits: vec![container("init", false, &[("cpu", "2")])],
                overhead: &[("cpu", "250m"), ("memory", "120Mi")],
                want: (2250, 120 << 20),
            },
            Case {
                name: "no requests, limits-only and explicit zeros count nothing",
                apps: vec![
                    container("a", false, &[]),
                    container("b", false, &[("cpu", "0"), ("memory", "0")]),
                ],
                inits: vec![],
                overhead: &[],
                want: (0, 0),
            },
            Case {
                name: "untracked resources are ignored even when unparsable",
                apps: vec![container(
                    "a",
                    false,
                    &[("example.com/widget", "lots"), ("cpu", "1")],
                )],
                inits: vec![],
                overhead: &[],
                want: (1000, 0),
            },
        ];
        for case in cases {
            let spec = SlimPodSpec {
                containers: case.apps,
                init_containers: case.inits,
                overhead: list(case.overhead),
                ..Default::default()
            };
            assert_eq!(effective(&spec), case.want, "{}", case.name);
        }
    }

    #[test]
    fn extended_resources_are_accounted_when_configured() {
        let resources = ResourceSet::with_extended(["amd.com/gpu"]).expect("fits");
        let spec = SlimPodSpec {
            containers: vec![container(
                "a",
                false,
                &[("amd.com/gpu", "2"), ("nvidia.com/gpu", "1")],
            )],
            ..Default::default()
        };
        let r = effective_requests(&spec, &resources).expect("valid");
        assert_eq!(&r[..], &[0, 0, 1, 0, 2]);
    }

    #[test]
    fn an_unreadable_request_names_where_it_is() {
        let spec = SlimPodSpec {
            init_containers: vec![container("setup", false, &[("memory", "1Gb")])],
            ..Default::default()
        };
        let err = effective_requests(&spec, &ResourceSet::built_in()).expect_err("invalid");
        assert_eq!(
            err.to_string(),
            "init container \"setup\" requests memory: invalid quantity \"1Gb\": unknown suffix"
        );
    }
}
