//! Deciding which AddOnPlacementScores to write: every write makes OCM re-run placement, so a cluster
//! is written only when its object is missing, a score moved, the set of missing scores changed, or its
//! `validUntil` is about to run out (or claims more than the data supports).

use super::fleet::DesiredScores;
use jiff::{SignedDuration, Timestamp};
use ocm_score_api::{
    AddOnPlacementScore, AddOnPlacementScoreItem, AddOnPlacementScoreStatus, Condition, Time,
};
use std::{
    collections::{BTreeMap, HashMap},
    sync::Arc,
    time::Duration,
};

/// The condition this scorer maintains on the objects it writes (the same type the agent uses).
pub const CONDITION_TYPE: &str = "AddOnPlacementScoreUpdated";
pub const REASON_ALL_PRESENT: &str = "FleetQuerySucceeded";
pub const REASON_SOME_MISSING: &str = "SomeScoresMissing";

/// Why a cluster's object is written this round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WriteReason {
    /// No object yet (create, then write its status).
    Create,
    /// The object has no status from us yet.
    NoStatus,
    ScoresChanged,
    ConditionChanged,
    /// `validUntil` is missing, about to run out, or later than the data supports.
    Renew,
}

impl WriteReason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::NoStatus => "no_status",
            Self::ScoresChanged => "scores_changed",
            Self::ConditionChanged => "condition_changed",
            Self::Renew => "renew",
        }
    }
}

/// One object to write.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedWrite {
    /// The ManagedCluster, which is also the namespace of its AddOnPlacementScore.
    pub cluster: String,
    pub reason: WriteReason,
    /// The full status to write through `/status` (conditions of other writers kept).
    pub status: AddOnPlacementScoreStatus,
}

/// How long scores stay valid and when to renew them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validity {
    /// Counted from the oldest sample behind the scores.
    pub validity: Duration,
    /// Renew unchanged scores once less than this is left.
    pub renew_before: Duration,
}

/// The current objects, by namespace (= cluster name).
pub type CurrentScores = HashMap<String, Arc<AddOnPlacementScore>>;

/// The writes that bring `current` to `desired`. Clusters not in `desired` get nothing: their scores
/// are left to expire.
pub fn plan_writes(
    desired: &BTreeMap<String, DesiredScores>,
    current: &CurrentScores,
    now: Timestamp,
    validity: Validity,
) -> Vec<PlannedWrite> {
    let now = whole_seconds(now);
    let valid_for = SignedDuration::try_from(validity.validity).unwrap_or(SignedDuration::MAX);
    let renew_before = SignedDuration::try_from(validity.renew_before).unwrap_or(SignedDuration::MAX);
    // Never claim validity beyond now + validity, even if a sample carries a time in our future.
    let latest_valid_until = now.saturating_add(valid_for).unwrap_or(Timestamp::MAX);

    let mut writes = Vec::new();
    for (cluster, want) in desired {
        let valid_until = whole_seconds(
            want.oldest_sample
                .saturating_add(valid_for)
                .unwrap_or(Timestamp::MAX),
        )
        .min(latest_valid_until);
        if valid_until <= now {
            continue;
        }
        let object = current.get(cluster);
        let status = object.and_then(|o| o.status.as_ref());
        let existing_condition = status.and_then(|s| s.conditions.iter().find(|c| c.type_ == CONDITION_TYPE));
        let condition = condition(want, existing_condition, now);

        let reason = match (object, status) {
            (None, _) => Some(WriteReason::Create),
            (Some(_), None) => Some(WriteReason::NoStatus),
            (Some(_), Some(status)) => {
                if !same_scores(&status.scores, &want.scores) {
                    Some(WriteReason::ScoresChanged)
                } else if !same_condition(existing_condition, &condition) {
                    Some(WriteReason::ConditionChanged)
                } else {
                    match &status.valid_until {
                        Some(Time(current_until))
                            if *current_until <= valid_until
                                && current_until.duration_since(now) >= renew_before =>
                        {
                            None
                        }
                        _ => Some(WriteReason::Renew),
                    }
                }
            }
        };
        let Some(reason) = reason else { continue };

        let mut conditions: Vec<Condition> = status
            .map(|s| {
                s.conditions
                    .iter()
                    .filter(|c| c.type_ != CONDITION_TYPE)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        conditions.push(condition);
        writes.push(PlannedWrite {
            cluster: cluster.clone(),
            reason,
            status: AddOnPlacementScoreStatus {
                conditions,
                scores: want.scores.clone(),
                valid_until: Some(Time(valid_until)),
                extra: Default::default(),
            },
        });
    }
    writes
}

/// The API stores times to the second; comparing at that precision avoids rewrites over nanoseconds.
fn whole_seconds(t: Timestamp) -> Timestamp {
    Timestamp::from_second(t.as_second()).unwrap_or(t)
}

fn condition(want: &DesiredScores, existing: Option<&Condition>, now: Timestamp) -> Condition {
    let (reason, message) = if want.missing.is_empty() {
        (
            REASON_ALL_PRESENT,
            format!(
                "{} scores computed from fleet-wide PromQL results",
                want.scores.len()
            ),
        )
    } else {
        (
            REASON_SOME_MISSING,
            format!(
                "no usable sample for this cluster this round: {}",
                want.missing.join(", ")
            ),
        )
    };
    let status = "True";
    let last_transition_time = match existing {
        Some(c) if c.status == status => c.last_transition_time.clone(),
        _ => Time(now),
    };
    Condition {
        type_: CONDITION_TYPE.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message,
        last_transition_time,
        observed_generation: None,
    }
}

fn same_condition(existing: Option<&Condition>, want: &Condition) -> bool {
    existing.is_some_and(|c| c.status == want.status && c.reason == want.reason && c.message == want.message)
}

/// Same names with the same values, in any order.
fn same_scores(current: &[AddOnPlacementScoreItem], want: &[AddOnPlacementScoreItem]) -> bool {
    current.len() == want.len() && want.iter().all(|w| current.iter().any(|c| c == w))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocm_score_api::ObjectMeta;

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(s).expect("valid")
    }

    fn item(name: &str, value: i32) -> AddOnPlacementScoreItem {
        AddOnPlacementScoreItem {
            name: name.into(),
            value,
        }
    }

    fn desired(items: &[(&str, i32)], missing: &[&str], sampled: i64) -> DesiredScores {
        DesiredScores {
            scores: items.iter().map(|(n, v)| item(n, *v)).collect(),
            missing: missing.iter().map(|m| m.to_string()).collect(),
            oldest_sample: ts(sampled),
        }
    }

    const VALIDITY: Validity = Validity {
        validity: Duration::from_secs(180),
        renew_before: Duration::from_secs(90),
    };

    fn apply(current: &mut CurrentScores, writes: &[PlannedWrite]) {
        for w in writes {
            current.insert(
                w.cluster.clone(),
                Arc::new(AddOnPlacementScore {
                    metadata: ObjectMeta {
                        name: Some("thanos-score".into()),
                        namespace: Some(w.cluster.clone()),
                        ..Default::default()
                    },
                    status: Some(w.status.clone()),
                }),
            );
        }
    }

    #[test]
    fn creates_then_stays_quiet_until_renewal_is_due() {
        let want: BTreeMap<_, _> = [("a".to_owned(), desired(&[("cpu", 10)], &[], 1000))].into();
        let mut current = CurrentScores::new();
        let writes = plan_writes(&want, &current, ts(1000), VALIDITY);
        assert_eq!(writes.len(), 1);
        assert_eq!(writes[0].reason, WriteReason::Create);
        assert_eq!(writes[0].status.valid_until, Some(Time(ts(1180))));
        assert_eq!(writes[0].status.conditions[0].reason, REASON_ALL_PRESENT);
        apply(&mut current, &writes);

        // Same scores a round later: 120 s left ≥ 90 s, nothing to do.
        let want: BTreeMap<_, _> = [("a".to_owned(), desired(&[("cpu", 10)], &[], 1060))].into();
        assert!(plan_writes(&want, &current, ts(1060), VALIDITY).is_empty());
        // Two rounds later: 60 s left < 90 s → renew, with validity from the new sample.
        let want: BTreeMap<_, _> = [("a".to_owned(), desired(&[("cpu", 10)], &[], 1120))].into();
        let writes = plan_writes(&want, &current, ts(1120), VALIDITY);
        assert_eq!(writes[0].reason, WriteReason::Renew);
        assert_eq!(writes[0].status.valid_until, Some(Time(ts(1300))));
        // The condition's transition time is kept when only the renewal changes.
        assert_eq!(
            writes[0].status.conditions[0].last_transition_time,
            Time(ts(1000))
        );
    }

    #[test]
    fn moved_scores_and_changed_missing_sets_are_written() {
        let mut current = CurrentScores::new();
        let first: BTreeMap<_, _> = [
            ("a".to_owned(), desired(&[("cpu", 10), ("mem", 5)], &[], 1000)),
            ("b".to_owned(), desired(&[("cpu", 20), ("mem", 5)], &[], 1000)),
        ]
        .into();
        let writes = plan_writes(&first, &current, ts(1000), VALIDITY);
        apply(&mut current, &writes);
        let next: BTreeMap<_, _> = [
            ("a".to_owned(), desired(&[("mem", 5), ("cpu", 11)], &[], 1010)),
            ("b".to_owned(), desired(&[("cpu", 20)], &["mem"], 1010)),
        ]
        .into();
        let writes = plan_writes(&next, &current, ts(1010), VALIDITY);
        let reasons: Vec<_> = writes.iter().map(|w| (w.cluster.as_str(), w.reason)).collect();
        assert_eq!(
            reasons,
            vec![
                ("a", WriteReason::ScoresChanged),
                ("b", WriteReason::ScoresChanged)
            ]
        );
        assert_eq!(writes[1].status.conditions[0].reason, REASON_SOME_MISSING);
        assert!(writes[1].status.conditions[0].message.contains("mem"));
    }

    #[test]
    fn score_order_alone_is_not_a_change() {
        let mut current = CurrentScores::new();
        let first: BTreeMap<_, _> = [("a".to_owned(), desired(&[("cpu", 1), ("mem", 2)], &[], 1000))].into();
        let writes = plan_writes(&first, &current, ts(1000), VALIDITY);
        apply(&mut current, &writes);
        let next: BTreeMap<_, _> = [("a".to_owned(), desired(&[("mem", 2), ("cpu", 1)], &[], 1001))].into();
        assert!(plan_writes(&next, &current, ts(1001), VALIDITY).is_empty());
    }

    #[test]
    fn absent_clusters_are_not_renewed() {
        let mut current = CurrentScores::new();
        let first: BTreeMap<_, _> = [
            ("a".to_owned(), desired(&[("cpu", 1)], &[], 1000)),
            ("b".to_owned(), desired(&[("cpu", 2)], &[], 1000)),
        ]
        .into();
        let writes = plan_writes(&first, &current, ts(1000), VALIDITY);
        apply(&mut current, &writes);
        let only_a: BTreeMap<_, _> = [("a".to_owned(), desired(&[("cpu", 1)], &[], 1150))].into();
        let writes = plan_writes(&only_a, &current, ts(1150), VALIDITY);
        assert_eq!(writes.len(), 1);
        assert_eq!(writes[0].cluster, "a");
    }

    #[test]
    fn validity_is_capped_and_expired_data_is_not_written() {
        let current = CurrentScores::new();
        // A sample from the future (clock skew) cannot push validUntil past now + validity.
        let skewed: BTreeMap<_, _> = [("a".to_owned(), desired(&[("cpu", 1)], &[], 5000))].into();
        let writes = plan_writes(&skewed, &current, ts(1000), VALIDITY);
        assert_eq!(writes[0].status.valid_until, Some(Time(ts(1180))));
        // A sample old enough that its scores would be born expired is not written.
        let old: BTreeMap<_, _> = [("a".to_owned(), desired(&[("cpu", 1)], &[], 800))].into();
        assert!(plan_writes(&old, &current, ts(1000), VALIDITY).is_empty());
    }

    #[test]
    fn a_valid_until_beyond_the_data_is_corrected() {
        let mut current = CurrentScores::new();
        let first: BTreeMap<_, _> = [("a".to_owned(), desired(&[("cpu", 1)], &[], 1000))].into();
        let long = Validity {
            validity: Duration::from_secs(3600),
            renew_before: Duration::from_secs(90),
        };
        let writes = plan_writes(&first, &current, ts(1000), long);
        apply(&mut current, &writes);
        let writes = plan_writes(&first, &current, ts(1000), VALIDITY);
        assert_eq!(writes[0].reason, WriteReason::Renew);
        assert_eq!(writes[0].status.valid_until, Some(Time(ts(1180))));
    }

    #[test]
    fn other_writers_conditions_are_kept_and_status_less_objects_written() {
        let mut current = CurrentScores::new();
        let foreign = Condition {
            type_: "Other".into(),
            status: "False".into(),
            reason: "X".into(),
            message: "y".into(),
            last_transition_time: Time(ts(1)),
            observed_generation: None,
        };
        current.insert(
            "a".into(),
            Arc::new(AddOnPlacementScore {
                metadata: ObjectMeta::default(),
                status: Some(AddOnPlacementScoreStatus {
                    conditions: vec![foreign.clone()],
                    ..Default::default()
                }),
            }),
        );
        current.insert("b".into(), Arc::new(AddOnPlacementScore::default()));
        let want: BTreeMap<_, _> = [
            ("a".to_owned(), desired(&[("cpu", 1)], &[], 1000)),
            ("b".to_owned(), desired(&[("cpu", 1)], &[], 1000)),
        ]
        .into();
        let writes = plan_writes(&want, &current, ts(1000), VALIDITY);
        assert_eq!(writes[0].reason, WriteReason::ScoresChanged);
        assert_eq!(writes[0].status.conditions[0], foreign);
        assert_eq!(writes[0].status.conditions[1].type_, CONDITION_TYPE);
        assert_eq!(writes[1].reason, WriteReason::NoStatus);
    }

    /// The validity the scorer derives with `extra_yaml` on top of a minimal configuration.
    fn configured(extra_yaml: &str) -> Validity {
        use crate::thanos::config::{Config, ThanosScorerArgs};
        let yaml = format!(
            "query: {{url: 'http://127.0.0.1:9090'}}\nleaderElection: {{enabled: false}}\n\
             scores: [{{name: cpu, query: x}}]\n{extra_yaml}"
        );
        let file = serde_norway::from_str(&yaml).expect("valid YAML");
        let config = Config::from_parts(&ThanosScorerArgs::default(), file).expect("valid");
        Validity {
            validity: config.validity,
            renew_before: config.renew_before,
        }
    }

    /// Rounds every 60 s from 0 s to 300 s, each answered by samples taken 15 s before it; the score
    /// is 10, or 40 from `change_at` on; the write planned at `refused_at` fails. Returns the
    /// (round, validUntil, value) of every write that landed, times in seconds from the start.
    fn five_minutes(
        validity: Validity,
        change_at: Option<i64>,
        refused_at: Option<i64>,
    ) -> Vec<(i64, i64, i32)> {
        const START: i64 = 1_700_000_000;
        let mut current = CurrentScores::new();
        let mut landed = Vec::new();
        for round in (0..=300).step_by(60) {
            let value = if change_at.is_some_and(|at| round >= at) {
                40
            } else {
                10
            };
            let want: BTreeMap<_, _> = [(
                "a".to_owned(),
                desired(&[("cpu", value)], &[], START + round - 15),
            )]
            .into();
            let writes = plan_writes(&want, &current, ts(START + round), validity);
            if refused_at == Some(round) {
                assert_eq!(writes.len(), 1, "a write was planned at {round}s");
                continue;
            }
            for w in &writes {
                let until = w.status.valid_until.as_ref().map(|t| t.0.as_second() - START);
                landed.push((round, until.unwrap_or_default(), w.status.scores[0].value));
            }
            apply(&mut current, &writes);
        }
        landed
    }

    /// Issue 16: by default every round renews validUntil (valid 120 s from the sample); with
    /// `renewEvery: 2` every other round does (180 s), halving the writes. A changed score is written
    /// at once in both modes. A refused write is not retried within its round: the next round renews,
    /// and meanwhile the last validUntil may pass (at 165 s in both cases below).
    #[test]
    fn five_minutes_of_rounds_in_both_renewal_modes() {
        let every_round = configured("");
        assert_eq!(
            (every_round.validity, every_round.renew_before),
            (Duration::from_secs(120), Duration::from_secs(90))
        );
        assert_eq!(
            five_minutes(every_round, None, None),
            vec![
                (0, 105, 10),
                (60, 165, 10),
                (120, 225, 10),
                (180, 285, 10),
                (240, 345, 10),
                (300, 405, 10)
            ]
        );
        assert_eq!(
            five_minutes(every_round, Some(150), None),
            vec![
                (0, 105, 10),
                (60, 165, 10),
                (120, 225, 10),
                (180, 285, 40),
                (240, 345, 40),
                (300, 405, 40)
            ]
        );
        assert_eq!(
            five_minutes(every_round, None, Some(120)),
            vec![
                (0, 105, 10),
                (60, 165, 10),
                (180, 285, 10),
                (240, 345, 10),
                (300, 405, 10)
            ]
        );

        let every_other = configured("renewEvery: 2\n");
        assert_eq!(
            (every_other.validity, every_other.renew_before),
            (Duration::from_secs(180), Duration::from_secs(90))
        );
        assert_eq!(
            five_minutes(every_other, None, None),
            vec![(0, 165, 10), (120, 285, 10), (240, 405, 10)]
        );
        assert_eq!(
            five_minutes(every_other, Some(150), None),
            vec![(0, 165, 10), (120, 285, 10), (180, 345, 40), (300, 465, 40)]
        );
        assert_eq!(
            five_minutes(every_other, None, Some(120)),
            vec![(0, 165, 10), (180, 345, 10), (300, 465, 10)]
        );
    }
}
