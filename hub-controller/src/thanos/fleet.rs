//! One round's fleet-wide query results → the scores each ManagedCluster should carry.
//!
//! Per score: every series is mapped to a ManagedCluster; series that cannot be trusted are skipped
//! and counted (no cluster label, unknown or ambiguous cluster, NaN/±Inf, a native histogram, a
//! cluster appearing twice because the query did not aggregate by the cluster label, a sample too old
//! to be valid); the rest are normalized across the fleet. A cluster keeps the scores it has a usable
//! sample for and lists the others as missing; a cluster with none is left out and so is not renewed.

use super::{
    config::ScoreSpec,
    mapping::{ClusterId, ClusterIndex, Resolved},
    normalize::normalize_fleet,
    response::{SampleValue, VectorSample},
};
use jiff::Timestamp;
use ocm_score_api::AddOnPlacementScoreItem;
use std::{collections::BTreeMap, time::Duration};

/// Why a series did not produce a score.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SkipReason {
    MissingClusterLabel,
    UnknownCluster,
    AmbiguousCluster,
    DuplicateSeries,
    NotANumber,
    Infinite,
    Histogram,
    Stale,
}

impl SkipReason {
    /// The metric label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::MissingClusterLabel => "missing_cluster_label",
            Self::UnknownCluster => "unknown_cluster",
            Self::AmbiguousCluster => "ambiguous_cluster",
            Self::DuplicateSeries => "duplicate_series",
            Self::NotANumber => "nan",
            Self::Infinite => "inf",
            Self::Histogram => "histogram",
            Self::Stale => "stale",
        }
    }
}

/// The scores one cluster should carry after this round.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredScores {
    /// In the configured order of scores.
    pub scores: Vec<AddOnPlacementScoreItem>,
    /// Configured scores without a usable sample for this cluster.
    pub missing: Vec<String>,
    /// The oldest sample behind these scores; validity counts from here.
    pub oldest_sample: Timestamp,
}

/// What a round computed: scores per ManagedCluster name, and what was skipped.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FleetScores {
    pub clusters: BTreeMap<String, DesiredScores>,
    /// (score name, reason) → number of series.
    pub skipped: BTreeMap<(String, SkipReason), u64>,
}

/// Scores the fleet from one successful vector per score (`results[i]` answers `specs[i]`).
///
/// A sample counts as stale when `sample time + validity <= now`: a score from it would be expired
/// the moment it is written.
pub fn score_fleet(
    specs: &[ScoreSpec],
    results: &[Vec<VectorSample>],
    cluster_label: &str,
    index: &ClusterIndex,
    now: Timestamp,
    validity: Duration,
) -> FleetScores {
    debug_assert_eq!(specs.len(), results.len());
    let mut out = FleetScores::default();
    let clusters = index.cluster_count();
    // Per cluster: its score for each spec (cluster-major), and its oldest sample so far.
    let mut scores: Vec<Option<i32>> = vec![None; clusters * specs.len()];
    let mut oldest: Vec<Option<Timestamp>> = vec![None; clusters];
    let validity = jiff::SignedDuration::try_from(validity).unwrap_or(jiff::SignedDuration::MAX);

    for (score_index, (spec, samples)) in specs.iter().zip(results).enumerate() {
        let mut skip = |reason: SkipReason, n: u64| {
            *out.skipped.entry((spec.name.clone(), reason)).or_default() += n;
        };
        // Per cluster: where its one usable series sits in `usable`, or why it has none.
        let mut seen: Vec<Seen> = vec![Seen::Not; clusters];
        let mut usable: Vec<(ClusterId, f64, Timestamp)> = Vec::with_capacity(samples.len());
        for sample in samples {
            let Some(value) = sample.labels.get(cluster_label) else {
                skip(SkipReason::MissingClusterLabel, 1);
                continue;
            };
            let id = match index.resolve(value) {
                Resolved::Cluster(id) => id,
                Resolved::Unknown => {
                    skip(SkipReason::UnknownCluster, 1);
                    continue;
                }
                Resolved::Ambiguous => {
                    skip(SkipReason::AmbiguousCluster, 1);
                    continue;
                }
            };
            let slot = &mut seen[id.index()];
            match *slot {
                // Two series for one cluster: neither can be the cluster's value.
                Seen::Usable(_) => {
                    *slot = Seen::Duplicate;
                    skip(SkipReason::DuplicateSeries, 2);
                }
                Seen::Unusable | Seen::Duplicate => {
                    *slot = Seen::Duplicate;
                    skip(SkipReason::DuplicateSeries, 1);
                }
                Seen::Not => match usable_value(sample, now, validity) {
                    Ok(v) => {
                        *slot = Seen::Usable(usable.len());
                        usable.push((id, v, sample.timestamp));
                    }
                    Err(reason) => {
                        *slot = Seen::Unusable;
                        skip(reason, 1);
                    }
                },
            }
        }
        // Keep only clusters with exactly one usable series.
        let kept: Vec<(ClusterId, f64, Timestamp)> = usable
            .into_iter()
            .enumerate()
            .filter(|(i, (id, _, _))| seen[id.index()] == Seen::Usable(*i))
            .map(|(_, entry)| entry)
            .collect();
        let values: Vec<f64> = kept.iter().map(|(_, v, _)| *v).collect();
        let normalized = normalize_fleet(&values, spec.direction, spec.normalization);
        for ((id, _, sampled), score) in kept.into_iter().zip(normalized) {
            scores[id.index() * specs.len() + score_index] = Some(score);
            let oldest = &mut oldest[id.index()];
            *oldest = Some(oldest.map_or(sampled, |t| t.min(sampled)));
        }
    }

    out.clusters = oldest
        .iter()
        .enumerate()
        .filter_map(|(i, oldest)| oldest.map(|t| (i, t)))
        .map(|(i, oldest_sample)| {
            let row = &scores[i * specs.len()..(i + 1) * specs.len()];
            let mut scores = Vec::with_capacity(specs.len());
            let mut missing = Vec::new();
            for (spec, value) in specs.iter().zip(row) {
                match value {
                    Some(value) => scores.push(AddOnPlacementScoreItem {
                        name: spec.name.clone(),
                        value: *value,
                    }),
                    None => missing.push(spec.name.clone()),
                }
            }
            let name = index.name(ClusterId::from_index(i)).to_owned();
            (
                name,
                DesiredScores {
                    scores,
                    missing,
                    oldest_sample,
                },
            )
        })
        .collect();
    out
}

/// What one score's answer held for a cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Seen {
    Not,
    /// One usable series, at this position.
    Usable(usize),
    /// One series that cannot be scored (already counted).
    Unusable,
    Duplicate,
}

/// The sample's value if it can be scored.
fn usable_value(
    sample: &VectorSample,
    now: Timestamp,
    validity: jiff::SignedDuration,
) -> Result<f64, SkipReason> {
    match sample.value {
        SampleValue::Histogram => Err(SkipReason::Histogram),
        SampleValue::Float(v) if v.is_nan() => Err(SkipReason::NotANumber),
        SampleValue::Float(v) if v.is_infinite() => Err(SkipReason::Infinite),
        SampleValue::Float(_) if sample.timestamp.saturating_add(validity).is_ok_and(|t| t <= now) => {
            Err(SkipReason::Stale)
        }
        SampleValue::Float(v) => Ok(v),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::thanos::{
        config::{Direction, Normalization},
        mapping::ClusterMapping,
    };
    use ocm_score_api::{ManagedCluster, ObjectMeta};

    fn ts(s: i64) -> Timestamp {
        Timestamp::from_second(s).expect("valid")
    }

    fn sample(cluster: Option<&str>, value: f64, at: i64) -> VectorSample {
        VectorSample {
            labels: cluster
                .map(|c| ("cluster".to_owned(), c.to_owned()))
                .into_iter()
                .collect(),
            timestamp: ts(at),
            value: SampleValue::Float(value),
        }
    }

    fn index(names: &[&str]) -> ClusterIndex {
        let clusters: Vec<ManagedCluster> = names
            .iter()
            .map(|n| ManagedCluster {
                metadata: ObjectMeta {
                    name: Some(n.to_string()),
                    ..Default::default()
                },
                ..Default::default()
            })
            .collect();
        ClusterIndex::build(&ClusterMapping::Identity, &clusters)
    }

    fn spec(name: &str, direction: Direction) -> ScoreSpec {
        ScoreSpec {
            name: name.into(),
            query: "q".into(),
            direction,
            normalization: Normalization::Fleet,
        }
    }

    #[test]
    fn scores_every_known_cluster_and_counts_the_rest() {
        let specs = [
            spec("cpu", Direction::HigherIsBetter),
            spec("lat", Direction::LowerIsBetter),
        ];
        let mut hist = sample(Some("d"), 0.0, 1000);
        hist.value = SampleValue::Histogram;
        let results = vec![
            vec![
                sample(Some("a"), 4.0, 1000),
                sample(Some("b"), 8.0, 1000),
                sample(Some("c"), f64::NAN, 1000),
                sample(Some("ghost"), 100.0, 1000),
                sample(None, 1.0, 1000),
                sample(Some("d"), f64::INFINITY, 1000),
            ],
            vec![
                sample(Some("a"), 0.2, 990),
                sample(Some("b"), 0.1, 1000),
                sample(Some("c"), 0.4, 1000),
                hist,
            ],
        ];
        let fleet = score_fleet(
            &specs,
            &results,
            "cluster",
            &index(&["a", "b", "c", "d"]),
            ts(1010),
            Duration::from_secs(60),
        );

        let a = &fleet.clusters["a"];
        // Latency, lower is better over 0.1..0.4: 200·(0.4 − 0.2)/0.3 − 100 = 33.3 → 33.
        assert_eq!(a.scores, vec![item("cpu", -100), item("lat", 33)]);
        assert_eq!(a.oldest_sample, ts(990));
        assert!(a.missing.is_empty());
        assert_eq!(
            fleet.clusters["b"].scores,
            vec![item("cpu", 100), item("lat", 100)]
        );
        // c's cpu value was NaN: only its latency score, cpu listed as missing.
        assert_eq!(fleet.clusters["c"].scores, vec![item("lat", -100)]);
        assert_eq!(fleet.clusters["c"].missing, vec!["cpu".to_owned()]);
        assert!(!fleet.clusters.contains_key("d"));
        assert!(!fleet.clusters.contains_key("ghost"));

        let skipped = |score: &str, reason| fleet.skipped.get(&(score.to_owned(), reason)).copied();
        assert_eq!(skipped("cpu", SkipReason::NotANumber), Some(1));
        assert_eq!(skipped("cpu", SkipReason::UnknownCluster), Some(1));
        assert_eq!(skipped("cpu", SkipReason::MissingClusterLabel), Some(1));
        assert_eq!(skipped("cpu", SkipReason::Infinite), Some(1));
        assert_eq!(skipped("lat", SkipReason::Histogram), Some(1));
        assert_eq!(fleet.skipped.len(), 5);
    }

    fn item(name: &str, value: i32) -> AddOnPlacementScoreItem {
        AddOnPlacementScoreItem {
            name: name.into(),
            value,
        }
    }

    #[test]
    fn skipped_values_do_not_shift_the_fleet_bounds() {
        let specs = [spec("cpu", Direction::HigherIsBetter)];
        let results = vec![vec![
            sample(Some("a"), 1.0, 1000),
            sample(Some("b"), 3.0, 1000),
            sample(Some("c"), f64::NAN, 1000),
            sample(Some("ghost"), 1000.0, 1000),
            sample(Some("old"), -1000.0, 100),
        ]];
        let fleet = score_fleet(
            &specs,
            &results,
            "cluster",
            &index(&["a", "b", "c", "old"]),
            ts(1000),
            Duration::from_secs(60),
        );
        assert_eq!(fleet.clusters["a"].scores, vec![item("cpu", -100)]);
        assert_eq!(fleet.clusters["b"].scores, vec![item("cpu", 100)]);
        assert_eq!(
            fleet.skipped.get(&("cpu".to_owned(), SkipReason::Stale)),
            Some(&1)
        );
        assert_eq!(fleet.clusters.len(), 2);
    }

    #[test]
    fn duplicate_series_leave_the_cluster_without_that_score() {
        let specs = [spec("cpu", Direction::HigherIsBetter)];
        let results = vec![vec![
            sample(Some("a"), 1.0, 1000),
            sample(Some("a"), 2.0, 1000),
            sample(Some("a"), 3.0, 1000),
            sample(Some("b"), 5.0, 1000),
            sample(Some("c"), 7.0, 1000),
        ]];
        let fleet = score_fleet(
            &specs,
            &results,
            "cluster",
            &index(&["a", "b", "c"]),
            ts(1000),
            Duration::from_secs(60),
        );
        assert!(!fleet.clusters.contains_key("a"));
        assert_eq!(fleet.clusters["b"].scores, vec![item("cpu", -100)]);
        assert_eq!(
            fleet
                .skipped
                .get(&("cpu".to_owned(), SkipReason::DuplicateSeries)),
            Some(&3)
        );
    }

    #[test]
    fn single_cluster_fleet_is_neutral() {
        let specs = [spec("cpu", Direction::HigherIsBetter)];
        let results = vec![vec![sample(Some("a"), 12.0, 1000)]];
        let fleet = score_fleet(
            &specs,
            &results,
            "cluster",
            &index(&["a"]),
            ts(1000),
            Duration::from_secs(60),
        );
        assert_eq!(fleet.clusters["a"].scores, vec![item("cpu", 0)]);
    }

    #[test]
    fn custom_cluster_label() {
        let specs = [spec("cpu", Direction::HigherIsBetter)];
        let mut s = sample(None, 1.0, 1000);
        s.labels.insert("k8s_cluster".into(), "a".into());
        let fleet = score_fleet(
            &specs,
            &[vec![s]],
            "k8s_cluster",
            &index(&["a"]),
            ts(1000),
            Duration::from_secs(60),
        );
        assert!(fleet.clusters.contains_key("a"));
    }
}
