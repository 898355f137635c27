//! `PlanDiverged`: whether OCM's PlacementDecisions for the child match the clusters the planner
//! predicted.
//!
//! OCM needs one sync after every change of the child or its inputs, and it does not record which
//! generation it synced (its conditions carry no observedGeneration). So a difference only counts
//! once it has lasted `grace` for the same child generation and the same prediction; until then
//! the condition stays as it was. Agreement clears it at once. The first sightings are kept in
//! memory: losing them on a restart only delays the condition, and delay is the safe direction.

use jiff::{SignedDuration, Timestamp};
use ocm_score_api::{Condition, Placement, Time};
use ocm_score_scheduler::tiering::condition::PLAN_DIVERGED;
use ocm_score_shell::sync::lock;
use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

/// A difference seen, and since when.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Sighting {
    child_uid: String,
    child_generation: i64,
    predicted: Vec<String>,
    actual: Vec<String>,
    since: Timestamp,
}

/// The verdict for one reconcile.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Nothing to judge (no child yet, or we just changed it): keep the condition.
    Keep,
    Agrees,
    /// Different, but not for long enough yet: keep the condition, look again at this time.
    Watching(Timestamp),
    Diverged(String),
}

/// First sightings per TieredPlacement (`namespace/name`).
#[derive(Default)]
pub struct Divergence {
    seen: Mutex<HashMap<String, Sighting>>,
}

impl Divergence {
    /// Compares `actual` (the clusters in the child's decisions) with `predicted`.
    pub fn judge(
        &self,
        key: &str,
        child: Option<&Placement>,
        predicted: &[String],
        actual: &BTreeSet<String>,
        now: Timestamp,
        grace: Duration,
    ) -> Verdict {
        let mut seen = lock(&self.seen);
        let Some(child) = child else {
            seen.remove(key);
            return Verdict::Keep;
        };
        let predicted_set: BTreeSet<&String> = predicted.iter().collect();
        if predicted_set.len() == actual.len() && actual.iter().all(|c| predicted_set.contains(c)) {
            seen.remove(key);
            return Verdict::Agrees;
        }
        let sighting = Sighting {
            child_uid: child.metadata.uid.clone().unwrap_or_default(),
            child_generation: child.metadata.generation.unwrap_or_default(),
            predicted: predicted.to_vec(),
            actual: actual.iter().cloned().collect(),
            since: now,
        };
        let grace = SignedDuration::try_from(grace).unwrap_or(SignedDuration::MAX);
        let first = match seen.get(key) {
            // OCM may still be on its way to the prediction (the decisions changed): keep watching
            // from the first sighting, as long as the child and the prediction are the same.
            Some(s)
                if s.child_uid == sighting.child_uid
                    && s.child_generation == sighting.child_generation
                    && s.predicted == sighting.predicted =>
            {
                s.since
            }
            _ => {
                seen.insert(key.to_owned(), sighting.clone());
                now
            }
        };
        let due = first.checked_add(grace).unwrap_or(Timestamp::MAX);
        if now < due {
            return Verdict::Watching(due);
        }
        let missing: Vec<&str> = predicted
            .iter()
            .filter(|c| !actual.contains(*c))
            .map(String::as_str)
            .collect();
        let extra: Vec<&str> = actual
            .iter()
            .filter(|c| !predicted_set.contains(c))
            .map(String::as_str)
            .collect();
        Verdict::Diverged(format!(
            "OCM selected [{}], the plan predicted [{}] (missing [{}], unexpected [{}]) for {} at generation {}",
            sighting.actual.join(", "),
            predicted.join(", "),
            missing.join(", "),
            extra.join(", "),
            grace_text(grace),
            sighting.child_generation,
        ))
    }

    /// Forgets a TieredPlacement that is gone.
    pub fn forget(&self, key: &str) {
        lock(&self.seen).remove(key);
    }
}

fn grace_text(grace: SignedDuration) -> String {
    format!("more than {}s", grace.as_secs())
}

/// Sets `PlanDiverged` in `conditions` from `verdict`; whether it became True just now.
pub fn apply(
    conditions: &mut Vec<Condition>,
    verdict: &Verdict,
    generation: Option<i64>,
    now: Timestamp,
) -> bool {
    let (status, reason, message) = match verdict {
        Verdict::Keep | Verdict::Watching(_) => return false,
        Verdict::Agrees => ("False", "OCMAgrees", String::new()),
        Verdict::Diverged(message) => ("True", "OCMDisagrees", message.clone()),
    };
    let prior = conditions.iter().position(|c| c.type_ == PLAN_DIVERGED);
    let last_transition_time = match prior.map(|i| &conditions[i]) {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Time(whole_second_up(now)),
    };
    let became_true = status == "True" && prior.is_none_or(|i| conditions[i].status != "True");
    let condition = Condition {
        type_: PLAN_DIVERGED.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        observed_generation: generation,
        last_transition_time,
    };
    match prior {
        Some(i) => conditions[i] = condition,
        None => conditions.push(condition),
    }
    became_true
}

/// `metav1.Time` keeps whole seconds; rounding up makes what we write equal what we read back.
fn whole_second_up(t: Timestamp) -> Timestamp {
    let up = if t.subsec_nanosecond() > 0 { 1 } else { 0 };
    Timestamp::from_second(t.as_second() + up).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn child(generation: i64) -> Placement {
        let mut p = Placement::default();
        p.metadata.uid = Some("u".into());
        p.metadata.generation = Some(generation);
        p
    }

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn at(s: i64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + s).expect("ts")
    }

    const GRACE: Duration = Duration::from_secs(10);

    #[test]
    fn a_difference_counts_only_after_the_grace_for_the_same_generation() {
        let d = Divergence::default();
        let predicted = vec!["a".to_string(), "b".to_string()];
        let c = child(3);
        assert_eq!(
            d.judge("ns/x", Some(&c), &predicted, &set(&["a"]), at(0), GRACE),
            Verdict::Watching(at(10))
        );
        assert_eq!(
            d.judge("ns/x", Some(&c), &predicted, &set(&["a", "c"]), at(9), GRACE),
            Verdict::Watching(at(10))
        );
        let Verdict::Diverged(message) =
            d.judge("ns/x", Some(&c), &predicted, &set(&["a", "c"]), at(10), GRACE)
        else {
            panic!("diverged after the grace");
        };
        assert!(message.contains("missing [b], unexpected [c]"), "{message}");
        // A new generation starts over; agreement clears at once.
        assert_eq!(
            d.judge("ns/x", Some(&child(4)), &predicted, &set(&["a"]), at(11), GRACE),
            Verdict::Watching(at(21))
        );
        assert_eq!(
            d.judge(
                "ns/x",
                Some(&child(4)),
                &predicted,
                &set(&["b", "a"]),
                at(12),
                GRACE
            ),
            Verdict::Agrees
        );
        assert_eq!(
            d.judge("ns/x", None, &predicted, &set(&[]), at(13), GRACE),
            Verdict::Keep
        );
    }

    #[test]
    fn the_condition_keeps_its_transition_time_while_its_status_holds() {
        let mut conditions = Vec::new();
        assert!(!apply(&mut conditions, &Verdict::Watching(at(5)), Some(1), at(0)));
        assert!(conditions.is_empty());
        assert!(!apply(&mut conditions, &Verdict::Agrees, Some(1), at(0)));
        assert_eq!(conditions[0].status, "False");
        assert!(apply(
            &mut conditions,
            &Verdict::Diverged("x".into()),
            Some(1),
            at(3)
        ));
        assert_eq!(conditions[0].last_transition_time, Time(at(3)));
        assert!(!apply(
            &mut conditions,
            &Verdict::Diverged("y".into()),
            Some(1),
            at(9)
        ));
        assert_eq!(conditions[0].last_transition_time, Time(at(3)));
        assert_eq!(conditions.len(), 1);
    }
}
