//! How old the data behind each score's answer is, so `validUntil` counts from the newest sample a
//! cluster actually sent rather than from when the query ran.
//!
//! Why a second query: an instant query answers every series with the evaluation time, not the time
//! of the sample it used, and PromQL keeps returning a series' last sample for its lookback delta
//! (5 minutes by default) after the series stops. A series stops without a staleness marker whenever
//! its sender disappears as a whole (a managed cluster's Prometheus or remote-write agent going down,
//! a network cut), which is exactly when its scores must expire. `timestamp(<score query>)` does not
//! help: for an aggregation or any other computed value it is the evaluation time too.
//!
//! So for each vector selector of a score's query ([`selectors`]) one more query asks for the time of
//! the newest raw sample per cluster label value, `max by (<cluster label>) (timestamp(<selector>))`,
//! run with the score's own query. A score's sample for a cluster is then dated by the oldest of
//! those times (a score is as old as its stalest input), and the rest of the round
//! (`fleet::score_fleet`: stale samples skipped, validity counted from the sample) is unchanged.
//! A range selector is asked as an instant one, and `offset` and `@` are dropped: the question is
//! whether the series still arrives. A cluster missing from a freshness answer (its raw series lack
//! the cluster label, which the query derives another way) keeps the evaluation time, as before.

use super::{
    config::ScoreSpec,
    response::{SampleValue, VectorSample},
};
use jiff::Timestamp;
use std::collections::HashMap;

/// The freshness queries of every configured score.
#[derive(Debug, Clone, PartialEq)]
pub struct FreshnessQueries {
    /// `by_score[i]`: the freshness queries of score `i`, one per distinct selector.
    by_score: Vec<Vec<String>>,
}

impl FreshnessQueries {
    pub fn new(scores: &[ScoreSpec], cluster_label: &str) -> Self {
        let by_score = scores
            .iter()
            .map(|spec| {
                selectors(&spec.query)
                    .into_iter()
                    .map(|selector| format!("max by ({cluster_label}) (timestamp({selector}))"))
                    .collect()
            })
            .collect();
        Self { by_score }
    }

    /// The freshness queries of score `score`.
    pub fn of(&self, score: usize) -> &[String] {
        self.by_score.get(score).map_or(&[], Vec::as_slice)
    }

    /// How many queries all scores' freshness takes per round.
    pub fn count(&self) -> usize {
        self.by_score.iter().map(Vec::len).sum()
    }
}

/// Dates each of `samples` by the oldest of its inputs' newest samples, from `answers` (one per
/// freshness query of the score); a sample is never dated later than it already is.
pub fn date_samples(samples: &mut [VectorSample], answers: &[Vec<VectorSample>], cluster_label: &str) {
    let newest: Vec<HashMap<&str, Timestamp>> = answers
        .iter()
        .map(|answer| {
            answer
                .iter()
                .filter_map(|s| Some((s.labels.get(cluster_label)?.as_str(), seconds(s)?)))
                .collect()
        })
        .collect();
    for sample in samples {
        let Some(cluster) = sample.labels.get(cluster_label) else {
            continue;
        };
        for times in &newest {
            if let Some(&t) = times.get(cluster.as_str()) {
                sample.timestamp = sample.timestamp.min(t);
            }
        }
    }
}

/// A `timestamp()` value (Unix seconds, millisecond precision) as a time.
fn seconds(sample: &VectorSample) -> Option<Timestamp> {
    let SampleValue::Float(seconds) = sample.value else {
        return None;
    };
    if !seconds.is_finite() {
        return None;
    }
    let millis = (seconds * 1000.0).round();
    // In range of i64 milliseconds (and of Timestamp, checked below) before the cast.
    if millis.abs() > 1e17 {
        return None;
    }
    Timestamp::from_millisecond(millis as i64).ok()
}

/// The instant vector selectors in a PromQL expression, as text (`name{matchers}` or `{matchers}`),
/// each once, in order of appearance: ranges (`[5m]`, subqueries) and `offset`/`@` modifiers are
/// left out, as are function and aggregation names, keywords, label lists (`by (…)`, `on (…)`),
/// strings and numbers. An expression without selectors (a literal) yields none.
pub fn selectors(query: &str) -> Vec<String> {
    let chars: Vec<char> = query.chars().collect();
    let mut found: Vec<String> = Vec::new();
    let mut push = |selector: String| {
        if !found.contains(&selector) {
            found.push(selector);
        }
    };
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '#' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '"' | '\'' | '`' => i = skip_string(&chars, i),
            '[' => i = skip_balanced(&chars, i, '[', ']'),
            '{' => {
                let end = skip_balanced(&chars, i, '{', '}');
                push(chars[i..end].iter().collect());
                i = end;
            }
            c if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) => {
                // Numbers and durations (`1e3`, `0x1f`, `5m`, `1h30m`): none is a selector.
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '.' | '_')) {
                    i += 1;
                }
            }
            c if c.is_ascii_alphabetic() || matches!(c, '_' | ':') => {
                let start = i;
                while i < chars.len() && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '_' | ':')) {
                    i += 1;
                }
                let word: String = chars[start..i].iter().collect();
                let next = next_non_space(&chars, i);
                let lower = word.to_ascii_lowercase();
                if LABEL_LIST_KEYWORDS.contains(&lower.as_str()) {
                    if let Some(j) = next.filter(|&j| chars[j] == '(') {
                        i = skip_balanced(&chars, j, '(', ')');
                    }
                } else if KEYWORDS.contains(&lower.as_str()) || next.is_some_and(|j| chars[j] == '(') {
                    // An operator, an aggregation or a function call: its arguments are read on.
                } else {
                    let mut selector = word;
                    if let Some(j) = next.filter(|&j| chars[j] == '{') {
                        let end = skip_balanced(&chars, j, '{', '}');
                        selector.extend(&chars[j..end]);
                        i = end;
                    }
                    push(selector);
                }
            }
            _ => i += 1,
        }
    }
    found
}

/// Keywords followed by a parenthesised list of label names.
const LABEL_LIST_KEYWORDS: &[&str] = &["by", "without", "on", "ignoring", "group_left", "group_right"];

/// Words that are never a metric name where they stand (operators, aggregations, literals).
const KEYWORDS: &[&str] = &[
    "and",
    "or",
    "unless",
    "atan2",
    "bool",
    "offset",
    "inf",
    "nan",
    "sum",
    "avg",
    "count",
    "min",
    "max",
    "group",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "count_values",
    "quantile",
    "limitk",
    "limit_ratio",
];

fn next_non_space(chars: &[char], from: usize) -> Option<usize> {
    (from..chars.len()).find(|&j| !chars[j].is_whitespace())
}

/// The index after the string starting at `start` (or the end of the text if it is not closed).
fn skip_string(chars: &[char], start: usize) -> usize {
    let quote = chars[start];
    let mut i = start + 1;
    while i < chars.len() {
        match chars[i] {
            '\\' if quote != '`' => i += 2,
            c if c == quote => return i + 1,
            _ => i += 1,
        }
    }
    chars.len()
}

/// The index after the bracket closing the one at `start`, skipping strings inside.
fn skip_balanced(chars: &[char], start: usize, open: char, close: char) -> usize {
    let mut depth = 0usize;
    let mut i = start;
    while i < chars.len() {
        match chars[i] {
            '"' | '\'' | '`' => {
                i = skip_string(chars, i);
                continue;
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    chars.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thanos::config::{Direction, Normalization};

    #[test]
    fn selectors_of_typical_score_queries() {
        let cases: &[(&str, &[&str])] = &[
            (
                "sum by (cluster) (node_cpu_allocatable) - sum by (cluster) (pod_cpu_requests)",
                &["node_cpu_allocatable", "pod_cpu_requests"],
            ),
            ("sum by (cluster) (rate(http_requests[1m]))", &["http_requests"]),
            ("max by (cluster) (mem_free_ratio)", &["mem_free_ratio"]),
            (
                "histogram_quantile(0.99, sum by (cluster, le) (rate(apiserver_request_duration_seconds_bucket{verb!=\"WATCH\"}[5m])))",
                &["apiserver_request_duration_seconds_bucket{verb!=\"WATCH\"}"],
            ),
            (
                "sum(kube_node_status_allocatable{resource=\"cpu\", unit='core'}) by (cluster) / on (cluster) group_left(region) cluster_info",
                &[
                    "kube_node_status_allocatable{resource=\"cpu\", unit='core'}",
                    "cluster_info",
                ],
            ),
            (
                "avg_over_time(cluster:load:avg5m[10m:1m] offset 5m) * 2 + {__name__=~\"x_.*\", cluster!=\"\"} @ 1700000000",
                &["cluster:load:avg5m", "{__name__=~\"x_.*\", cluster!=\"\"}"],
            ),
            (
                "label_replace(up{job=\"a}b\"}, \"cluster\", \"$1\", \"instance\", \"(.*):.*\") and up # up again\n",
                &["up{job=\"a}b\"}", "up"],
            ),
            ("topk(3, sum without (node) (x)) > bool 0.5e1", &["x"]),
            ("SUM BY (cluster) (Load)", &["Load"]),
            ("vector(1)", &[]),
            ("42", &[]),
        ];
        for (query, want) in cases {
            assert_eq!(selectors(query), *want, "{query}");
        }
    }

    #[test]
    fn each_score_gets_one_freshness_query_per_distinct_selector() {
        let spec = |query: &str| ScoreSpec {
            name: "s".into(),
            query: query.into(),
            direction: Direction::HigherIsBetter,
            normalization: Normalization::Fleet,
        };
        let queries =
            FreshnessQueries::new(&[spec("sum by (c) (a) / sum by (c) (a)"), spec("vector(1)")], "c");
        assert_eq!(queries.of(0), ["max by (c) (timestamp(a))"]);
        assert!(queries.of(1).is_empty());
        assert!(queries.of(2).is_empty());
        assert_eq!(queries.count(), 1);
    }

    fn sample(cluster: &str, at: Timestamp, value: f64) -> VectorSample {
        VectorSample {
            labels: [("cluster".to_owned(), cluster.to_owned())].into_iter().collect(),
            timestamp: at,
            value: SampleValue::Float(value),
        }
    }

    #[test]
    fn samples_are_dated_by_their_stalest_input() {
        let t = |s: i64| Timestamp::from_second(s).expect("valid");
        let now = t(1_700_000_100);
        let mut samples = vec![
            sample("a", now, 1.0),
            sample("b", now, 2.0),
            sample("c", now, 3.0),
        ];
        let answers = vec![
            vec![
                sample("a", now, 1_700_000_095.5),
                sample("b", now, 1_700_000_040.0),
            ],
            vec![
                sample("a", now, 1_700_000_090.0),
                sample("b", now, 1_700_000_099.0),
                sample("c", now, f64::NAN),
            ],
        ];
        date_samples(&mut samples, &answers, "cluster");
        assert_eq!(samples[0].timestamp, t(1_700_000_090));
        assert_eq!(samples[1].timestamp, t(1_700_000_040));
        assert_eq!(
            samples[2].timestamp, now,
            "no usable time: the evaluation time stands"
        );
        assert_eq!(samples[0].value, SampleValue::Float(1.0), "values are left alone");
    }
}
