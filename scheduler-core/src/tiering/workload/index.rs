//! The ManifestWorks the planner judges workloads by, indexed once per reconcile round.
//!
//! The controller builds one [`WorkIndex`] from its ManifestWork reflector store (sharing the
//! objects) and passes it to every plan until the store changes; each TieredPlacement then finds its works by the
//! ManifestWorkReplicaSet label value or by cluster namespace without a scan of all works.

use crate::placement::selector::LabelMatcher;
use ocm_score_api::ManifestWork;
use ocm_score_api::crd::tiered_placement::{MANIFEST_WORK_REPLICA_SET_LABEL, WorkloadHealthPolicy};
use std::collections::HashMap;
use std::ops::Deref;
use std::sync::Arc;

/// A work the index holds: borrowed for one round, owned, or shared with a reflector's store
/// (an index kept across rounds).
#[derive(Clone, Debug)]
enum Held<'a> {
    Borrowed(&'a ManifestWork),
    Owned(Box<ManifestWork>),
    Shared(Arc<ManifestWork>),
}

impl Deref for Held<'_> {
    type Target = ManifestWork;

    fn deref(&self) -> &ManifestWork {
        match self {
            Held::Borrowed(w) => w,
            Held::Owned(w) => w,
            Held::Shared(w) => w,
        }
    }
}

/// ManifestWorks by cluster namespace and by ManifestWorkReplicaSet label value.
#[derive(Clone, Debug, Default)]
pub struct WorkIndex<'a> {
    works: Vec<Held<'a>>,
    by_namespace: HashMap<String, Vec<usize>>,
    by_replica_set: HashMap<String, Vec<usize>>,
}

impl<'a> WorkIndex<'a> {
    /// Indexes borrowed works (from a reflector store: `store.iter().map(|w| &**w)`).
    pub fn new(works: impl IntoIterator<Item = &'a ManifestWork>) -> Self {
        Self::build(works.into_iter().map(Held::Borrowed).collect())
    }

    /// Indexes owned works (tests, `simulate`).
    pub fn from_owned(works: Vec<ManifestWork>) -> WorkIndex<'static> {
        WorkIndex::build(works.into_iter().map(|w| Held::Owned(Box::new(w))).collect())
    }

    /// Indexes the works of a reflector store (`store.state()`), without copying them: an index
    /// the controller keeps until the store changes.
    pub fn from_shared(works: Vec<Arc<ManifestWork>>) -> WorkIndex<'static> {
        WorkIndex::build(works.into_iter().map(Held::Shared).collect())
    }

    fn build(works: Vec<Held<'a>>) -> Self {
        let mut by_namespace: HashMap<String, Vec<usize>> = HashMap::new();
        let mut by_replica_set: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, w) in works.iter().enumerate() {
            // A work without a namespace is not one a work agent applies.
            let Some(namespace) = w.metadata.namespace.as_deref() else {
                continue;
            };
            by_namespace.entry(namespace.to_string()).or_default().push(i);
            if let Some(owner) = w
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(MANIFEST_WORK_REPLICA_SET_LABEL))
            {
                by_replica_set.entry(owner.clone()).or_default().push(i);
            }
        }
        WorkIndex {
            works,
            by_namespace,
            by_replica_set,
        }
    }

    pub fn len(&self) -> usize {
        self.works.len()
    }

    pub fn is_empty(&self) -> bool {
        self.works.is_empty()
    }

    /// The works of `policy` for a TieredPlacement in `namespace`, as `(cluster, work)`, sorted
    /// by cluster then work name. With a selector only the namespaces of `clusters` are
    /// searched (works live in their cluster's namespace). An invalid selector selects nothing
    /// (validation reports it).
    pub fn works_of<'s>(
        &'s self,
        policy: &WorkloadHealthPolicy,
        namespace: &str,
        clusters: impl Iterator<Item = &'s str>,
    ) -> Vec<(&'s str, &'s ManifestWork)> {
        let mut out: Vec<(&str, &ManifestWork)> = Vec::new();
        let mut push = |i: usize| {
            let w: &ManifestWork = &self.works[i];
            if let Some(ns) = w.metadata.namespace.as_deref() {
                out.push((ns, w));
            }
        };
        if let Some(value) = policy.replica_set_label_value(namespace) {
            // Only the tiers' clusters are judged: a ManifestWorkReplicaSet that also follows
            // another Placement has works this TieredPlacement never chooses.
            let members: std::collections::HashSet<&str> = clusters.collect();
            for &i in self.by_replica_set.get(&value).into_iter().flatten() {
                if self.works[i]
                    .metadata
                    .namespace
                    .as_deref()
                    .is_some_and(|ns| members.contains(ns))
                {
                    push(i);
                }
            }
        } else if let Some(selector) = &policy.manifest_work_selector {
            let Ok(matcher) = LabelMatcher::from_selector(Some(selector)) else {
                return Vec::new();
            };
            for cluster in clusters {
                for &i in self.by_namespace.get(cluster).into_iter().flatten() {
                    let labels = self.works[i].metadata.labels.as_ref();
                    if matcher.matches(|k| labels.and_then(|l| l.get(k)).map(String::as_str)) {
                        push(i);
                    }
                }
            }
        }
        out.sort_by(|a, b| (a.0, a.1.metadata.name.as_deref()).cmp(&(b.0, b.1.metadata.name.as_deref())));
        out.dedup_by(|a, b| std::ptr::eq(a.1, b.1));
        out
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use ocm_score_api::ObjectMeta;
    use std::collections::BTreeMap;

    fn work(cluster: &str, name: &str, labels: &[(&str, &str)]) -> ManifestWork {
        ManifestWork {
            metadata: ObjectMeta {
                namespace: Some(cluster.into()),
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect::<BTreeMap<_, _>>(),
                ),
                ..ObjectMeta::default()
            },
            ..ManifestWork::default()
        }
    }

    fn policy(yaml: &str) -> WorkloadHealthPolicy {
        serde_norway::from_str(yaml).unwrap()
    }

    #[test]
    fn works_are_found_by_replica_set_label_or_by_selector_in_the_clusters_namespaces() {
        let works = vec![
            work("b-1", "web", &[(MANIFEST_WORK_REPLICA_SET_LABEL, "apps.web")]),
            work("a-1", "web", &[(MANIFEST_WORK_REPLICA_SET_LABEL, "apps.web")]),
            work("a-1", "other", &[(MANIFEST_WORK_REPLICA_SET_LABEL, "team.web")]),
            work("a-1", "by-hand", &[("app", "web")]),
            work("c-1", "by-hand", &[("app", "web")]),
        ];
        let index = WorkIndex::new(&works);
        let found = |p: &WorkloadHealthPolicy, clusters: &[&str]| -> Vec<String> {
            index
                .works_of(p, "apps", clusters.iter().copied())
                .into_iter()
                .map(|(c, w)| format!("{c}/{}", w.metadata.name.as_deref().unwrap()))
                .collect()
        };
        let mwrs = policy("manifestWorkReplicaSet: web");
        assert_eq!(found(&mwrs, &["a-1", "b-1"]), ["a-1/web", "b-1/web"]);
        // Only the tiers' clusters: b-1's work is another Placement's business.
        assert_eq!(found(&mwrs, &["a-1", "c-1"]), ["a-1/web"]);
        let selector = policy("manifestWorkSelector: {matchLabels: {app: web}}");
        assert_eq!(found(&selector, &["a-1", "b-1"]), ["a-1/by-hand"]);
        assert_eq!(
            WorkIndex::default().works_of(&mwrs, "apps", std::iter::empty()),
            []
        );
        assert_eq!(WorkIndex::from_owned(works.clone()).len(), 5);
    }
}
