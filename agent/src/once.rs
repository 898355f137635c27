//! `ocm-score-agent once`: compute the scores one time, print the AddOnPlacementScore as YAML, and
//! optionally write it to the hub. The YAML quotes timestamps the way kubectl does, so YAML 1.1
//! readers (PyYAML, go-yaml v2) keep them as strings.

use crate::accounting::{ResourceView, ShapeFits, compile_shapes};
use crate::config::{OnceConfig, ScoringConfig};
use crate::hub::HubConnection;
use crate::publish::{PublishError, Publisher, WritePolicy, status_with_scores, valid_until};
use crate::scores::{self, Normalization, Scope, ScoreDef, ScoreValue};
use crate::shapes::{self, ShapeSource, ShapesCondition, ShapesStatus};
use crate::sources::cluster::{self, Accounts};
use crate::sources::host::{HostSource, MIN_SAMPLE_INTERVAL};
use crate::sources::kubelet::{KubeletSource, NodeRequests};
use crate::sources::{Reading, SourceError};
use jiff::Timestamp;
use ocm_score_api::{AddOnPlacementScore, ObjectMeta};
use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum OnceError {
    #[error("connecting to the managed cluster: {0} (use --managed-kubeconfig, or --source host)")]
    ManagedCluster(String),
    #[error("source {name}: {error}")]
    Source { name: &'static str, error: SourceError },
    #[error(transparent)]
    Publish(#[from] PublishError),
    #[error("rendering the object: {0}")]
    Render(#[from] serde_json::Error),
}

/// Host CPU usage is averaged over this long (at least sysinfo's minimum).
const HOST_SAMPLE: Duration = Duration::from_millis(500);

/// Computes, optionally publishes, and returns the YAML to print.
pub async fn once(cfg: OnceConfig) -> Result<String, OnceError> {
    let scoring = &cfg.scoring;
    let now = Timestamp::now();
    let shapes_status = ShapesStatus::default();
    let shape_set = match &scoring.shapes {
        ShapeSource::None => None,
        ShapeSource::File {
            shapes, unreadable, ..
        } => Some(shapes_status.compile(shapes, unreadable)),
        ShapeSource::Hub => Some(match &scoring.hub {
            Some(hub) => match shapes::list_hub(&hub.kubeconfig, scoring.hub_timeout).await {
                Some(listed) => shapes_status.compile(&listed, &[]),
                None => {
                    shapes_status.failed("the hub did not list them");
                    compile_shapes(&[]).0
                }
            },
            None => compile_shapes(&[]).0,
        }),
    };
    let shapes_condition = shapes_status.condition();
    let (view, detail, fits) = read(scoring, shape_set).await?;
    let mut scores = scores::compute(&scoring.scores, &view, &scoring.resources);
    let defined = scores.len();
    scores.extend(shapes::fits_scores(&fits));
    let valid_until = valid_until(now, scoring.validity);
    let object = AddOnPlacementScore {
        metadata: ObjectMeta {
            name: Some(scoring.score_object_name.clone()),
            namespace: scoring.cluster_name.clone(),
            ..Default::default()
        },
        status: Some(status_with_scores(
            Default::default(),
            &scores,
            shapes_condition.as_ref(),
            valid_until,
            &detail,
            now,
        )),
    };

    if let Some(hub) = &cfg.publish {
        let mut publisher = Publisher::new(
            HubConnection::new(hub.kubeconfig.clone()),
            hub.cluster_name.clone(),
            scoring.score_object_name.clone(),
            WritePolicy {
                validity: scoring.validity,
                step: 1,
                min_write_interval: Duration::ZERO,
            },
            scoring.hub_timeout,
        );
        publisher
            .write_scores(&scores, shapes_condition.as_ref(), &detail, now)
            .await?;
        tracing::info!(cluster = %hub.cluster_name, object = %scoring.score_object_name, "published");
    }

    Ok(explain(scoring, &scores[..defined], &detail)
        + &explain_fits(&fits, shapes_condition.as_ref())
        + &yaml(&object)?)
}

/// The object as YAML, strings a YAML 1.1 reader would take for something else quoted.
fn yaml(object: &AddOnPlacementScore) -> Result<String, serde_json::Error> {
    Ok(ocm_score_api::yaml::to_string(&serde_json::to_value(object)?))
}

async fn read(
    scoring: &ScoringConfig,
    shapes: Option<crate::accounting::ShapeSet>,
) -> Result<(ResourceView, String, Vec<ShapeFits>), OnceError> {
    let sources = scoring.sources;
    let resources = &scoring.resources;
    let fail = |name| move |error| OnceError::Source { name, error };
    // Start the host's CPU measurement first so it overlaps with listing the cluster.
    let mut host = if sources.host {
        Some(HostSource::new().map_err(fail("host"))?)
    } else {
        None
    };
    let host_started = tokio::time::Instant::now();
    let mut readings: Vec<Reading> = Vec::new();
    let mut fits = Vec::new();
    if sources.needs_managed_cluster() {
        let client = cluster::connect(scoring.managed_kubeconfig.as_deref())
            .await
            .map_err(OnceError::ManagedCluster)?;
        let accounts = Accounts::new(
            resources.clone(),
            shapes.unwrap_or_else(|| compile_shapes(&[]).0),
            scoring.fits,
        );
        let (reading, mut accounts) = cluster::read_once(client.clone(), accounts, scoring.api_timeout)
            .await
            .map_err(fail("cluster"))?;
        readings.push(reading);
        fits = accounts.fits.fits();
        if sources.kubelet {
            let nodes: Vec<NodeRequests> = crate::run::node_requests(&accounts.ledger);
            // One scrape gives memory; cpu needs a rate over two, so it falls back to requests here.
            let kubelet = KubeletSource::new(
                client,
                scoring.kubelet_concurrency,
                scoring.api_timeout,
                Arc::default(),
            );
            readings.push(kubelet.read(nodes, resources).await.map_err(fail("kubelet"))?);
        }
    }
    if let Some(host) = &mut host {
        tokio::time::sleep_until(host_started + HOST_SAMPLE.max(MIN_SAMPLE_INTERVAL)).await;
        readings.push(host.read(resources).map_err(fail("host"))?);
    }
    let (view, detail) = Reading::combine(&readings);
    Ok((view, detail, fits))
}

/// YAML comments stating the replica count behind each `fits` score, and the shapes left out.
fn explain_fits(fits: &[ShapeFits], condition: Option<&ShapesCondition>) -> String {
    let mut out = String::new();
    for f in fits {
        let _ = writeln!(
            out,
            "# fits.{} {:>4}  {} replica(s) fit; scale {}",
            f.shape, f.value, f.replicas, f.scale
        );
    }
    if let Some(c) = condition.filter(|c| c.status != "True") {
        let _ = writeln!(out, "# {}: {}", c.reason, c.message);
    }
    out
}

/// YAML comments stating the raw figure behind each score, the bounds it is normalized against, and
/// how to change them: a small machine scores low against the default bounds (100 cores, 1024 GiB),
/// and the output says so rather than leaving `-96` unexplained.
fn explain(scoring: &ScoringConfig, scores: &[ScoreValue], detail: &str) -> String {
    let mut out = format!("# {detail}\n");
    let width = scores.iter().map(|s| s.name.len()).max().unwrap_or(0);
    let mut example = None;
    for (def, score) in scoring.scores.iter().zip(scores) {
        let unit = def.unit(&scoring.resources);
        let raw = match (score.free, score.capacity) {
            (Some(free), Some(capacity)) => {
                if example.is_none() {
                    example = rescale_example(def, unit, capacity);
                }
                format!(
                    "{} of {} {unit} free {}; {}",
                    round(free),
                    round(capacity),
                    match def.scope {
                        Scope::Cluster => "in the cluster",
                        Scope::Node => "on the best node",
                    },
                    bounds(def.normalization, unit)
                )
            }
            _ => "not measured by the enabled sources".to_owned(),
        };
        let _ = writeln!(out, "# {:<width$} {:>4}  {raw}", score.name, score.value);
    }
    out.push_str(
        "# Each score maps the free amount linearly from MIN..MAX onto -100..100, clamped; nothing free\n\
         # scores -100. Other bounds: --normalize SCORE=absolute:MIN:MAX or SCORE=percent:MIN:MAX\n\
         # (percent of capacity), comma separated.\n",
    );
    if let Some(example) = example {
        let _ = writeln!(out, "# For example, {example}");
    }
    out
}

/// `absolute:0:100 (0 cores → -100, 100 cores → 100)`: the normalization and what its bounds mean.
fn bounds(normalization: Normalization, unit: &str) -> String {
    match normalization {
        Normalization::Absolute { min, max } => {
            format!("{normalization} ({min} {unit} → -100, {max} {unit} → 100)")
        }
        Normalization::Percent { min, max } => {
            format!("{normalization} ({min}% free → -100, {max}% free → 100)")
        }
    }
}

/// A `--normalize` that scores against the capacity seen here, when that is within the bounds:
/// `--normalize cpuNodeAvailable=absolute:0:2 puts 100 at 2 cores (...) instead of 100 cores.`
fn rescale_example(def: &ScoreDef, unit: &str, capacity: f64) -> Option<String> {
    let Normalization::Absolute { min, max } = def.normalization else {
        return None;
    };
    let top = capacity.ceil();
    (top > min && top < max).then(|| {
        format!(
            "--normalize {}=absolute:{min}:{top} puts 100 at {top} {unit} (the capacity seen here) \
             instead of {max} {unit}.",
            def.name
        )
    })
}

fn round(value: f64) -> String {
    let rounded = (value * 100.0).round() / 100.0;
    format!("{rounded}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::publish::status_with_scores;

    fn once_config(args: &[&str]) -> OnceConfig {
        use clap::Parser;
        let mut argv = vec!["ocm-score-agent", "once", "--source", "host"];
        argv.extend_from_slice(args);
        match crate::cli::Cli::try_parse_from(argv).expect("parses").command {
            crate::cli::Command::Once(args) => OnceConfig::from_args(args).expect("valid"),
            crate::cli::Command::Run(_) => unreachable!("once was given"),
        }
    }

    fn measured(name: &str, value: i32, free: f64, capacity: f64) -> ScoreValue {
        ScoreValue {
            name: name.into(),
            value,
            free: Some(free),
            capacity: Some(capacity),
        }
    }

    /// A 2-core host 92 % idle scores -96 against the default 100 cores: the output names the bounds,
    /// what they mean, the flag that changes them, and bounds that fit this host.
    #[test]
    fn the_explanation_names_the_bounds_and_how_to_change_them() {
        let cfg = once_config(&[]);
        let scores = [measured("cpuNodeAvailable", -96, 1.84, 2.0)];
        let text = explain(&cfg.scoring, &scores, "host: 2 CPUs 8% busy");
        assert!(
            text.contains(
                "# cpuNodeAvailable  -96  1.84 of 2 cores free on the best node; \
                 absolute:0:100 (0 cores → -100, 100 cores → 100)\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("--normalize SCORE=absolute:MIN:MAX or SCORE=percent:MIN:MAX"),
            "{text}"
        );
        assert!(
            text.contains("--normalize cpuNodeAvailable=absolute:0:2 puts 100 at 2 cores"),
            "{text}"
        );
        assert!(text.lines().all(|l| l.starts_with("# ")), "only comments: {text}");

        // Renormalized: the line shows the bounds in force, and no example is needed.
        let cfg = once_config(&["--normalize", "cpuNodeAvailable=percent:10:90"]);
        let text = explain(&cfg.scoring, &scores, "host");
        assert!(
            text.contains("percent:10:90 (10% free → -100, 90% free → 100)"),
            "{text}"
        );
        assert!(!text.contains("For example"), "{text}");
    }

    #[test]
    fn printed_timestamps_are_quoted_like_kubectl_and_read_back_as_strings() {
        let now = Timestamp::from_second(1_700_000_000).expect("valid");
        let scores = [ScoreValue {
            name: "cpuAvailable".into(),
            value: -20,
            free: None,
            capacity: None,
        }];
        let object = AddOnPlacementScore {
            metadata: ObjectMeta {
                name: Some("resource-usage-score".into()),
                namespace: Some("c1".into()),
                ..Default::default()
            },
            status: Some(status_with_scores(
                Default::default(),
                &scores,
                None,
                valid_until(now, Duration::from_secs(180)),
                "host",
                now,
            )),
        };
        let text = yaml(&object).expect("renders");
        assert!(text.contains("validUntil: \"2023-11-14T22:16:20Z\"\n"), "{text}");
        assert!(
            text.contains("lastTransitionTime: \"2023-11-14T22:13:20Z\"\n"),
            "{text}"
        );
        assert!(text.contains("status: \"True\"\n"), "{text}");
        // What a reader gets back is the object, every timestamp a string.
        let read: serde_json::Value = serde_norway::from_str(&text).expect("valid YAML");
        assert_eq!(read, serde_json::to_value(&object).expect("serializes"));
    }
}
