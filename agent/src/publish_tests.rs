//! Tests of `publish.rs`, kept beside it so the code reads without them.

use super::*;

fn policy() -> WritePolicy {
    WritePolicy {
        validity: Duration::from_secs(180),
        step: 5,
        min_write_interval: Duration::from_secs(15),
    }
}

fn t(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + seconds).expect("valid")
}

fn scores(values: &[(&str, i32)]) -> Vec<ScoreValue> {
    values
        .iter()
        .map(|(n, v)| ScoreValue {
            name: (*n).into(),
            value: *v,
            free: None,
            capacity: None,
        })
        .collect()
}

fn published(values: &[(&str, i32)], valid_until: i64, healthy: bool, written_at: Option<i64>) -> Published {
    Published {
        scores: values.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect(),
        valid_until: Some(t(valid_until)),
        healthy,
        shapes: None,
        written_at: written_at.map(t),
    }
}

#[test]
fn write_decisions() {
    let p = policy();
    let now = t(0);
    let base = [("a", 10), ("b", -20)];
    let cases: Vec<(&str, Option<Published>, Vec<ScoreValue>, Decision)> = vec![
        (
            "nothing published yet",
            None,
            scores(&base),
            Decision::Write(WriteReason::First),
        ),
        (
            "unchanged and fresh",
            Some(published(&base, 170, true, Some(-10))),
            scores(&base),
            Decision::Skip,
        ),
        (
            "moved less than the step",
            Some(published(&base, 170, true, Some(-10))),
            scores(&[("a", 14), ("b", -16)]),
            Decision::Skip,
        ),
        (
            "moved by the step",
            Some(published(&base, 170, true, Some(-20))),
            scores(&[("a", 15), ("b", -20)]),
            Decision::Write(WriteReason::ScoresMoved),
        ),
        (
            "moved down by the step",
            Some(published(&base, 170, true, None)),
            scores(&[("a", 10), ("b", -25)]),
            Decision::Write(WriteReason::ScoresMoved),
        ),
        (
            "moved but written moments ago",
            Some(published(&base, 170, true, Some(-5))),
            scores(&[("a", 50), ("b", -20)]),
            Decision::Defer(t(10)),
        ),
        (
            "validUntil about to run out",
            Some(published(&base, 75, true, Some(-105))),
            scores(&base),
            Decision::Write(WriteReason::Renewal),
        ),
        (
            "already expired",
            Some(published(&base, -1, true, None)),
            scores(&base),
            Decision::Write(WriteReason::Renewal),
        ),
        (
            "renewal is never deferred",
            Some(published(&base, 20, true, Some(-1))),
            scores(&[("a", 90), ("b", -20)]),
            Decision::Write(WriteReason::Renewal),
        ),
        (
            "no validUntil on the hub",
            Some(Published {
                valid_until: None,
                ..published(&base, 0, true, None)
            }),
            scores(&base),
            Decision::Write(WriteReason::Renewal),
        ),
        (
            "recovering from a reported failure",
            Some(published(&base, 170, false, None)),
            scores(&base),
            Decision::Write(WriteReason::Recovered),
        ),
        (
            "a score was added",
            Some(published(&base, 170, true, None)),
            scores(&[("a", 10), ("b", -20), ("c", 0)]),
            Decision::Write(WriteReason::NamesChanged),
        ),
        (
            "a score was renamed",
            Some(published(&base, 170, true, None)),
            scores(&[("a", 10), ("c", -20)]),
            Decision::Write(WriteReason::NamesChanged),
        ),
    ];
    for (name, last, new, want) in cases {
        assert_eq!(decide(last.as_ref(), &new, None, now, t(76), &p), want, "{name}");
    }
}

#[test]
fn the_shapes_condition_is_written_when_it_changes_and_removed_when_there_is_nothing_to_say() {
    let invalid = ShapesCondition {
        status: "False",
        reason: shapes::REASON_INVALID,
        message: "WorkloadShape \"B\": field metadata.name: …".into(),
    };
    let status = status_with_scores(
        Default::default(),
        &scores(&[("a", 1)]),
        Some(&invalid),
        t(180),
        "x",
        t(0),
    );
    let last = published_from(Some(&status)).expect("published");
    let p = policy();
    assert_eq!(
        decide(Some(&last), &scores(&[("a", 1)]), Some(&invalid), t(1), t(76), &p),
        Decision::Skip
    );
    assert_eq!(
        decide(Some(&last), &scores(&[("a", 1)]), None, t(1), t(76), &p),
        Decision::Write(WriteReason::ShapesChanged)
    );
    let fixed = ShapesCondition {
        status: "True",
        reason: shapes::REASON_SCORED,
        message: "1 WorkloadShape(s) scored as fits.<name>: a".into(),
    };
    assert_eq!(
        decide(Some(&last), &scores(&[("a", 1)]), Some(&fixed), t(1), t(76), &p),
        Decision::Write(WriteReason::ShapesChanged)
    );
    let ours = status
        .conditions
        .iter()
        .find(|c| c.type_ == shapes::CONDITION_TYPE)
        .expect("the shapes condition");
    assert_eq!(
        (ours.status.as_str(), ours.reason.as_str()),
        ("False", "InvalidWorkloadShape")
    );
    let cleared = status_with_scores(status, &scores(&[("a", 1)]), None, t(240), "x", t(60));
    assert!(
        cleared
            .conditions
            .iter()
            .all(|c| c.type_ != shapes::CONDITION_TYPE)
    );
    assert_eq!(cleared.conditions.len(), 1, "ours stays");
}

#[test]
fn valid_until_is_whole_seconds_ahead() {
    let now = Timestamp::from_millisecond(1_700_000_000_700).expect("valid");
    assert_eq!(
        valid_until(now, Duration::from_secs(180)),
        Timestamp::from_second(1_700_000_180).expect("valid")
    );
}

#[test]
fn publishing_keeps_other_conditions_and_fields() {
    let other = Condition {
        type_: "SomethingElse".into(),
        status: "True".into(),
        reason: "Other".into(),
        message: "kept".into(),
        last_transition_time: Time(t(-1000)),
        observed_generation: None,
    };
    let mut existing = AddOnPlacementScoreStatus {
        conditions: vec![other.clone()],
        scores: vec![AddOnPlacementScoreItem {
            name: "stale".into(),
            value: 3,
        }],
        ..Default::default()
    };
    existing
        .extra
        .insert("futureField".into(), serde_json::json!({"x": 1}));

    let s = status_with_scores(
        existing,
        &scores(&[("a", 10)]),
        None,
        t(180),
        "cluster: 3 of 3 nodes",
        t(0),
    );
    assert_eq!(
        s.scores,
        vec![AddOnPlacementScoreItem {
            name: "a".into(),
            value: 10
        }]
    );
    assert_eq!(s.valid_until, Some(Time(t(180))));
    assert_eq!(s.conditions[0], other);
    assert_eq!(s.extra["futureField"], serde_json::json!({"x": 1}));
    let ours = &s.conditions[1];
    assert_eq!(
        (ours.type_.as_str(), ours.status.as_str(), ours.reason.as_str()),
        (CONDITION_TYPE, "True", REASON_PUBLISHED)
    );
    assert!(
        ours.message.starts_with("cluster: 3 of 3 nodes; computed at"),
        "{}",
        ours.message
    );

    // Still True later: the transition time stays.
    let later = status_with_scores(s.clone(), &scores(&[("a", 12)]), None, t(240), "again", t(60));
    assert_eq!(later.conditions[1].last_transition_time, Time(t(0)));

    // A failure: scores and validUntil untouched, condition False with the error and the expiry.
    let failed = status_with_failure(later, "the managed cluster's API server did not answer", t(100));
    assert_eq!(
        failed.scores,
        vec![AddOnPlacementScoreItem {
            name: "a".into(),
            value: 12
        }]
    );
    assert_eq!(failed.valid_until, Some(Time(t(240))));
    let ours = &failed.conditions[1];
    assert_eq!(
        (ours.status.as_str(), ours.reason.as_str()),
        ("False", REASON_SOURCE_FAILED)
    );
    assert_eq!(ours.last_transition_time, Time(t(100)));
    assert!(
        ours.message
            .contains("did not answer; scores not renewed, the last scores expire at"),
        "{}",
        ours.message
    );
    assert_eq!(failed.conditions.len(), 2);
}

#[test]
fn a_failure_expires_scores_that_never_expire() {
    // Scores left by an agent that never set validUntil (the upstream addon) are not kept alive.
    let foreign = AddOnPlacementScoreStatus {
        scores: vec![AddOnPlacementScoreItem {
            name: "cpuNodeAvailable".into(),
            value: 100,
        }],
        ..Default::default()
    };
    let failed = status_with_failure(foreign, "source cluster: boom", t(7));
    assert_eq!(failed.valid_until, Some(Time(t(7))));
    assert!(
        failed.conditions[0]
            .message
            .contains("the last scores expired at"),
        "{}",
        failed.conditions[0].message
    );
    // Nothing published at all: nothing to expire.
    let empty = status_with_failure(AddOnPlacementScoreStatus::default(), "x", t(7));
    assert_eq!(empty.valid_until, None);
    assert!(empty.conditions[0].message.contains("no scores are published"));
}

#[test]
fn what_the_hub_holds_is_read_back() {
    let status = status_with_scores(
        Default::default(),
        &scores(&[("a", 1), ("b", 2)]),
        None,
        t(180),
        "x",
        t(0),
    );
    let p = published_from(Some(&status)).expect("published");
    assert!(p.healthy);
    assert_eq!(p.valid_until, Some(t(180)));
    assert_eq!(p.scores.len(), 2);
    // Scores written by another agent (no condition of ours) are not trusted as ours.
    let foreign = AddOnPlacementScoreStatus {
        scores: vec![AddOnPlacementScoreItem {
            name: "a".into(),
            value: 1,
        }],
        ..Default::default()
    };
    assert!(!published_from(Some(&foreign)).expect("published").healthy);
    assert_eq!(published_from(None), None);
}
