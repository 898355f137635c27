//! One scoring round: query every score for the whole fleet (in parallel, bounded), map and normalize
//! the answers, compare with the objects on the hub, and write what changed.
//!
//! A round is all or nothing on the query side: if any score's query fails (after retries), or
//! answers only in part (a Thanos partial response) while partial answers are refused, nothing is
//! written, so the published scores simply age towards their `validUntil` instead of being replaced by
//! scores normalized over an incomplete picture.

use super::{
    client::{Answer, ClientBuildError, PromClient, QueryError},
    config::Config,
    diff::{CurrentScores, PlannedWrite, Validity, plan_writes},
    fleet::{FleetScores, score_fleet},
    freshness::{FreshnessQueries, date_samples},
    mapping::ClusterIndex,
    metrics::Metrics,
    response::VectorSample,
};
use futures::{StreamExt, stream};
use jiff::Timestamp;
use ocm_score_api::{AddOnPlacementScore, ManagedCluster};
use std::{collections::HashMap, sync::Arc, time::Instant};

/// The warnings of one score's partial answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartialAnswer {
    pub score: String,
    pub warnings: Vec<String>,
}

/// What a round decided, before anything is written.
#[derive(Debug, Clone, PartialEq)]
pub enum RoundPlan {
    /// Some queries failed: write nothing this round.
    QueryFailed { failed: Vec<(String, String)> },
    /// Every query answered, but some only in part, and partial answers are refused: write nothing
    /// this round.
    PartialResponse { partial: Vec<PartialAnswer> },
    Ready {
        fleet: FleetScores,
        writes: Vec<PlannedWrite>,
        /// Partial answers that were accepted (`PartialPolicy::Accept`); empty for a complete round.
        partial: Vec<PartialAnswer>,
    },
}

/// How a round's answers stand, before any scoring.
#[derive(Debug, Clone, PartialEq)]
enum Triage {
    Failed(Vec<(String, String)>),
    Partial(Vec<PartialAnswer>),
    Usable {
        vectors: Vec<Vec<VectorSample>>,
        partial: Vec<PartialAnswer>,
    },
}

/// Sorts the answers of `names` (the scores, in order): any failure but a refused partial answer
/// fails the round; otherwise refused partial answers make it a partial round; otherwise every
/// answer is used, with the warnings of accepted partial answers kept for the report.
fn triage(names: &[&str], answers: Vec<Result<Answer, QueryError>>) -> Triage {
    let mut vectors = Vec::with_capacity(answers.len());
    let mut failed = Vec::new();
    let mut refused = Vec::new();
    let mut accepted = Vec::new();
    for (name, answer) in names.iter().zip(answers) {
        let score = (*name).to_owned();
        match answer {
            Ok(Answer { samples, warnings }) => {
                if !warnings.is_empty() {
                    accepted.push(PartialAnswer { score, warnings });
                }
                vectors.push(samples);
            }
            Err(QueryError::Partial(warnings)) => refused.push(PartialAnswer { score, warnings }),
            Err(e) => failed.push((score, e.to_string())),
        }
    }
    if !failed.is_empty() {
        // The refused partial answers failed too, and are named with the rest.
        failed.extend(refused.into_iter().map(|p| {
            let error = QueryError::Partial(p.warnings).to_string();
            (p.score, error)
        }));
        Triage::Failed(failed)
    } else if !refused.is_empty() {
        Triage::Partial(refused)
    } else {
        Triage::Usable {
            vectors,
            partial: accepted,
        }
    }
}

/// Queries, scores and plans; holds no hub connection, so it can be driven from tests and benchmarks.
pub struct Scorer {
    config: Config,
    prom: PromClient,
    metrics: Arc<Metrics>,
    freshness: FreshnessQueries,
}

impl Scorer {
    pub fn new(config: Config, metrics: Arc<Metrics>) -> Result<Self, ClientBuildError> {
        let prom = PromClient::new(&config.query)?;
        let freshness = FreshnessQueries::new(&config.scores, &config.cluster_label);
        Ok(Self {
            config,
            prom,
            metrics,
            freshness,
        })
    }

    /// How many queries a round runs: each score's, and its freshness queries.
    pub fn query_count(&self) -> usize {
        self.config.scores.len() + self.freshness.count()
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn client(&self) -> &PromClient {
        &self.prom
    }

    /// Runs every score's query, evaluated at `at`, at most `query.concurrency` scores at a time. The
    /// answers come back in the order of the configured scores, each sample dated by the newest data
    /// behind it ([`super::freshness`]).
    pub async fn query_all(&self, at: Timestamp) -> Vec<Result<Answer, QueryError>> {
        let mut answers: Vec<(usize, Result<Answer, QueryError>)> = stream::iter(self.config.scores.iter().enumerate())
            .map(|(i, spec)| async move {
                let started = Instant::now();
                let result = self.query_score(i, &spec.query, at).await;
                self.metrics.observe_query(&spec.name, started.elapsed());
                if let Err(e) = &result {
                    self.metrics.query_error(&spec.name, e.kind());
                    tracing::warn!(score = %spec.name, endpoint = self.prom.endpoint(), error = %e, "score query failed");
                }
                (i, result)
            })
            .buffer_unordered(self.config.query.concurrency)
            .collect()
            .await;
        answers.sort_by_key(|(i, _)| *i);
        answers.into_iter().map(|(_, r)| r).collect()
    }

    /// Score `score`'s answer, its samples dated by its freshness queries (run after it, so a failing
    /// endpoint costs one query per score, not more).
    async fn query_score(&self, score: usize, query: &str, at: Timestamp) -> Result<Answer, QueryError> {
        let mut answer = self.prom.instant_vector(query, at).await?;
        let mut dated_by = Vec::with_capacity(self.freshness.of(score).len());
        for freshness in self.freshness.of(score) {
            // A freshness query is held to the same partial-response rule as the score's own
            // query: a refused partial answer fails the score, an accepted one adds its warnings.
            let fresh = self.prom.instant_vector(freshness, at).await?;
            answer.warnings.extend(fresh.warnings);
            dated_by.push(fresh.samples);
        }
        date_samples(&mut answer.samples, &dated_by, &self.config.cluster_label);
        Ok(answer)
    }

    /// Turns the answers into planned writes against the hub's current objects.
    pub fn plan(
        &self,
        answers: Vec<Result<Answer, QueryError>>,
        clusters: &[Arc<ManagedCluster>],
        current: &CurrentScores,
        now: Timestamp,
    ) -> RoundPlan {
        let names: Vec<&str> = self.config.scores.iter().map(|s| s.name.as_str()).collect();
        let (vectors, partial) = match triage(&names, answers) {
            Triage::Failed(failed) => return RoundPlan::QueryFailed { failed },
            Triage::Partial(partial) => return RoundPlan::PartialResponse { partial },
            Triage::Usable { vectors, partial } => (vectors, partial),
        };
        let index = ClusterIndex::build(&self.config.cluster_mapping, clusters.iter().map(|c| c.as_ref()));
        let fleet = score_fleet(
            &self.config.scores,
            &vectors,
            &self.config.cluster_label,
            &index,
            now,
            self.config.validity,
        );
        for ((score, reason), count) in &fleet.skipped {
            self.metrics.series_skipped(score, reason.as_str(), *count);
        }
        let validity = Validity {
            validity: self.config.validity,
            renew_before: self.config.renew_before,
        };
        let writes = plan_writes(&fleet.clusters, current, now, validity);
        RoundPlan::Ready {
            fleet,
            writes,
            partial,
        }
    }
}

/// The hub's objects named `name`, by namespace, as the diff wants them.
pub fn current_scores(objects: &[Arc<AddOnPlacementScore>], name: &str) -> CurrentScores {
    objects
        .iter()
        .filter(|o| o.metadata.name.as_deref() == Some(name))
        .filter_map(|o| o.metadata.namespace.clone().map(|ns| (ns, o.clone())))
        .collect()
}

/// The objects this replica wrote, until the watch-fed cache shows them. Without it, a cache that
/// lags (a slow or reconnecting watch) would make the next round rewrite what was just written.
#[derive(Debug, Default)]
pub struct RecentWrites {
    /// Namespace → (the resourceVersion the cache had before our write, what we wrote).
    entries: HashMap<String, (Option<String>, Arc<AddOnPlacementScore>)>,
}

impl RecentWrites {
    /// Records `written`, returned by the API server, over what the cache held in `before`.
    pub fn record(&mut self, before: &CurrentScores, written: Vec<AddOnPlacementScore>) {
        for object in written {
            let Some(namespace) = object.metadata.namespace.clone() else {
                continue;
            };
            let cached = before
                .get(&namespace)
                .and_then(|o| o.metadata.resource_version.clone());
            self.entries.insert(namespace, (cached, Arc::new(object)));
        }
    }

    /// Lays our writes over the cache's view. Once the cache shows any version other than the one it
    /// had before our write, it has caught up (watch events arrive in order) and the entry is dropped.
    pub fn overlay(&mut self, current: &mut CurrentScores) {
        self.entries.retain(|namespace, (before, written)| {
            let cached = current
                .get(namespace)
                .and_then(|o| o.metadata.resource_version.clone());
            if cached != *before {
                return false;
            }
            current.insert(namespace.clone(), written.clone());
            true
        });
    }
}

/// How many of the objects have a `validUntil` in the past.
pub fn count_expired(current: &CurrentScores, now: Timestamp) -> usize {
    current
        .values()
        .filter(|o| {
            o.status
                .as_ref()
                .and_then(|s| s.valid_until.as_ref())
                .is_some_and(|t| t.0 < now)
        })
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use ocm_score_api::ObjectMeta;

    fn object(namespace: &str, rv: &str) -> AddOnPlacementScore {
        AddOnPlacementScore {
            metadata: ObjectMeta {
                name: Some("thanos-score".into()),
                namespace: Some(namespace.into()),
                resource_version: Some(rv.into()),
                ..Default::default()
            },
            status: None,
        }
    }

    fn answer(cluster: &str, warnings: &[&str]) -> Result<Answer, QueryError> {
        Ok(Answer {
            samples: vec![VectorSample {
                labels: [("cluster".to_owned(), cluster.to_owned())].into_iter().collect(),
                timestamp: Timestamp::UNIX_EPOCH,
                value: crate::thanos::response::SampleValue::Float(1.0),
            }],
            warnings: warnings.iter().map(|w| (*w).to_owned()).collect(),
        })
    }

    fn refused(warning: &str) -> Result<Answer, QueryError> {
        Err(QueryError::Partial(vec![warning.to_owned()]))
    }

    #[test]
    fn complete_answers_are_used() {
        let triage = triage(&["cpu", "mem"], vec![answer("a", &[]), answer("b", &[])]);
        let Triage::Usable { vectors, partial } = triage else {
            panic!("usable expected: {triage:?}")
        };
        assert_eq!(vectors.len(), 2);
        assert_eq!(vectors[1][0].labels.get("cluster").map(String::as_str), Some("b"));
        assert!(partial.is_empty());
    }

    #[test]
    fn a_refused_partial_answer_makes_a_partial_round() {
        let triage = triage(
            &["cpu", "mem", "net"],
            vec![
                answer("a", &[]),
                refused("store p3 down"),
                refused("store p3 down"),
            ],
        );
        assert_eq!(
            triage,
            Triage::Partial(vec![
                PartialAnswer {
                    score: "mem".into(),
                    warnings: vec!["store p3 down".into()]
                },
                PartialAnswer {
                    score: "net".into(),
                    warnings: vec!["store p3 down".into()]
                },
            ])
        );
    }

    #[test]
    fn any_other_failure_fails_the_round_and_names_every_failed_score() {
        let timeout = Err(QueryError::Timeout {
            url: "http://thanos".into(),
            timeout: std::time::Duration::from_secs(1),
        });
        let Triage::Failed(failed) = triage(
            &["cpu", "mem", "net"],
            vec![refused("store p3 down"), timeout, answer("a", &[])],
        ) else {
            panic!("failed expected")
        };
        let names: Vec<&str> = failed.iter().map(|(s, _)| s.as_str()).collect();
        assert_eq!(names, ["mem", "cpu"]);
        assert!(failed[1].1.contains("partial response"), "{failed:?}");
    }

    #[test]
    fn accepted_partial_answers_are_used_and_reported() {
        let triage = triage(
            &["cpu", "mem"],
            vec![answer("a", &["store p3 down"]), answer("a", &[])],
        );
        let Triage::Usable { vectors, partial } = triage else {
            panic!("usable expected: {triage:?}")
        };
        assert_eq!(vectors.len(), 2);
        assert_eq!(
            partial,
            vec![PartialAnswer {
                score: "cpu".into(),
                warnings: vec!["store p3 down".into()]
            }]
        );
    }

    #[test]
    fn recent_writes_cover_a_lagging_cache_until_it_catches_up() {
        let mut recent = RecentWrites::default();
        let mut cache: CurrentScores = [("a".to_owned(), Arc::new(object("a", "5")))].into();
        recent.record(&cache, vec![object("a", "9"), object("b", "10")]);

        // The cache has not seen either write yet: ours win, including the created object.
        let mut view = cache.clone();
        recent.overlay(&mut view);
        assert_eq!(view["a"].metadata.resource_version.as_deref(), Some("9"));
        assert_eq!(view["b"].metadata.resource_version.as_deref(), Some("10"));

        // The watch delivers both: the cache is used again and the entries are gone.
        cache.insert("a".into(), Arc::new(object("a", "9")));
        cache.insert("b".into(), Arc::new(object("b", "10")));
        let mut view = cache.clone();
        recent.overlay(&mut view);
        assert!(recent.entries.is_empty());
    }
}
