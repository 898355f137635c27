//! The Kubernetes events upstream records while writing decisions (events.k8s.io style:
//! regarding the Placement, related to the PlacementDecision).

use super::status::{Status, StatusCode};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventType {
    Normal,
    Warning,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    pub type_: EventType,
    pub reason: &'static str,
    pub action: &'static str,
    /// The PlacementDecision the event is about.
    pub related: String,
    pub note: String,
}

/// Longest score list kept in a ScoreUpdate note before it is cut with `......`.
pub const MAX_SCORE_NOTE_BYTES: usize = 1000;

/// The ScoreUpdate note: `"<cluster>:<sum> "` for every feasible cluster by name (note the
/// trailing space after each item), cut with `......` once it would pass 1000 bytes.
pub fn score_note(mut scores: Vec<(&str, i64)>) -> String {
    scores.sort_unstable_by(|a, b| a.0.cmp(b.0));
    score_note_in_order(scores)
}

/// [`score_note`] for scores already sorted by cluster name; stops reading once the note is full.
/// Items are appended in place and taken back when they would not fit: one allocation per note
/// instead of one `format!` per cluster.
pub fn score_note_in_order<'a>(scores: impl IntoIterator<Item = (&'a str, i64)>) -> String {
    let mut note = String::with_capacity(MAX_SCORE_NOTE_BYTES + TRUNCATED.len());
    for (name, score) in scores {
        let item_start = note.len();
        note.push_str(name);
        note.push(':');
        push_decimal(&mut note, score);
        note.push(' ');
        if note.len() > MAX_SCORE_NOTE_BYTES {
            note.truncate(item_start);
            note.push_str(TRUNCATED);
            break;
        }
    }
    note
}

/// What ends a note that was cut.
const TRUNCATED: &str = "......";

/// `value` in decimal, as `{value}` formats it, without going through `fmt`.
fn push_decimal(out: &mut String, value: i64) {
    // i64::MIN has 19 digits and a sign.
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut rest = value.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if value < 0 {
        out.push('-');
    }
    for &d in &digits[at..] {
        out.push(char::from(d));
    }
}

pub fn decision_created(pd: &str, placement: &str, namespace: &str) -> Event {
    Event {
        type_: EventType::Normal,
        reason: "DecisionCreate",
        action: "DecisionCreated",
        related: pd.to_string(),
        note: format!("Decision {pd} is created with placement {placement} in namespace {namespace}"),
    }
}

pub fn decision_updated(pd: &str, placement: &str, namespace: &str, status: &Status) -> Event {
    let base = format!("Decision {pd} is updated with placement {placement} in namespace {namespace}");
    if status.code == StatusCode::Warning {
        Event {
            type_: EventType::Warning,
            reason: "DecisionUpdate",
            action: "DecisionUpdated",
            related: pd.to_string(),
            note: format!("{base}: {} in plugin {}", status.message, status.plugin),
        }
    } else {
        Event {
            type_: EventType::Normal,
            reason: "DecisionUpdate",
            action: "DecisionUpdated",
            related: pd.to_string(),
            note: base,
        }
    }
}

pub fn score_updated(pd: &str, note: &str) -> Event {
    Event {
        type_: EventType::Normal,
        reason: "ScoreUpdate",
        action: "ScoreUpdated",
        related: pd.to_string(),
        note: note.to_string(),
    }
}

pub fn decision_deleted(pd: &str, placement: &str, namespace: &str) -> Event {
    Event {
        type_: EventType::Normal,
        reason: "DecisionDelete",
        action: "DecisionDeleted",
        related: pd.to_string(),
        note: format!("Decision {pd} is deleted with placement {placement} in namespace {namespace}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn score_note_keeps_trailing_space_and_truncates() {
        assert_eq!(
            score_note(vec![("cluster2", 92), ("cluster1", 85)]),
            "cluster1:85 cluster2:92 "
        );
        // Each item is "clusterNNN:100 " (15 bytes): 66 fit in 990 bytes, the 67th would pass
        // 1000, so the note stops there with the marker.
        let names: Vec<String> = (0..200).map(|i| format!("cluster{i:03}")).collect();
        let note = score_note(names.iter().map(|n| (n.as_str(), 100)).collect());
        assert_eq!(note.len(), 66 * 15 + 6);
        assert!(note.ends_with("cluster065:100 ......"), "{note}");
        assert_eq!(score_note(Vec::new()), "");
    }

    #[test]
    fn decimals_match_display() {
        for v in [0, 7, -7, 10, -100, 99_999, i64::MAX, i64::MIN, i64::MIN + 1] {
            let mut s = String::new();
            push_decimal(&mut s, v);
            assert_eq!(s, v.to_string());
        }
    }
}
