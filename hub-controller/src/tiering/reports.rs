//! Score reports as the hub observes them, for releasing reservations (release (b) in
//! `ocm_score_scheduler::reservation`).
//!
//! A report is an update of a cluster's `resource-usage-score` (the object `fits` scores live in)
//! whose status changed, seen on the watch. The hub time of that observation is its arrival time,
//! so no field is needed on the object. Objects seen in a (re-)list are recorded without counting:
//! when they were written is unknown, and a reservation then waits for the next report or its TTL.

use kube::runtime::watcher;
use ocm_score_api::crd::tiered_placement::FITS_RESOURCE_NAME;
use ocm_score_api::{AddOnPlacementScore, AddOnPlacementScoreStatus};
use std::collections::HashMap;

/// The last status seen per cluster.
#[derive(Debug, Default)]
pub struct Reports {
    last: HashMap<String, Option<AddOnPlacementScoreStatus>>,
}

impl Reports {
    /// The cluster that reported, if `event` is a report.
    pub fn observe(&mut self, event: &watcher::Event<AddOnPlacementScore>) -> Option<String> {
        let (object, counts) = match event {
            watcher::Event::Apply(object) => (object, true),
            watcher::Event::InitApply(object) => (object, false),
            watcher::Event::Delete(object) => {
                if is_report(object) {
                    self.last.remove(object.metadata.namespace.as_deref()?);
                }
                return None;
            }
            watcher::Event::Init | watcher::Event::InitDone => return None,
        };
        if !is_report(object) {
            return None;
        }
        let cluster = object.metadata.namespace.clone()?;
        let changed = self.last.get(&cluster) != Some(&object.status);
        self.last.insert(cluster.clone(), object.status.clone());
        (counts && changed).then_some(cluster)
    }
}

fn is_report(object: &AddOnPlacementScore) -> bool {
    object.metadata.name.as_deref() == Some(FITS_RESOURCE_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocm_score_api::{AddOnPlacementScoreItem, ObjectMeta};

    fn aps(cluster: &str, name: &str, value: i32, labels: bool) -> AddOnPlacementScore {
        AddOnPlacementScore {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some(cluster.into()),
                labels: labels.then(|| [("a".to_string(), "b".to_string())].into()),
                ..ObjectMeta::default()
            },
            status: Some(AddOnPlacementScoreStatus {
                scores: vec![AddOnPlacementScoreItem {
                    name: "fits.gpu".into(),
                    value,
                }],
                ..AddOnPlacementScoreStatus::default()
            }),
        }
    }

    #[test]
    fn a_report_is_a_status_change_seen_on_the_watch() {
        let mut r = Reports::default();
        let score = "resource-usage-score";
        // Listed objects are recorded, not counted.
        assert_eq!(r.observe(&watcher::Event::Init), None);
        assert_eq!(
            r.observe(&watcher::Event::InitApply(aps("x", score, -94, false))),
            None
        );
        assert_eq!(r.observe(&watcher::Event::InitDone), None);
        assert_eq!(
            r.observe(&watcher::Event::Apply(aps("x", score, -96, false))),
            Some("x".into())
        );
        // A metadata-only change is no report; another object of the cluster neither.
        assert_eq!(
            r.observe(&watcher::Event::Apply(aps("x", score, -96, true))),
            None
        );
        assert_eq!(
            r.observe(&watcher::Event::Apply(aps("x", "other", -50, false))),
            None
        );
        // A cluster's first report after the list counts (the agent's first write).
        assert_eq!(
            r.observe(&watcher::Event::Apply(aps("y", score, -90, false))),
            Some("y".into())
        );
        // A re-list records what changed in the gap without counting it.
        assert_eq!(
            r.observe(&watcher::Event::InitApply(aps("x", score, -99, false))),
            None
        );
        assert_eq!(
            r.observe(&watcher::Event::Apply(aps("x", score, -99, false))),
            None
        );
        assert_eq!(
            r.observe(&watcher::Event::Delete(aps("x", score, -99, false))),
            None
        );
        assert_eq!(
            r.observe(&watcher::Event::Apply(aps("x", score, -99, false))),
            Some("x".into())
        );
    }
}
