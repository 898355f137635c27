//! `ocm-score-hub simulate`: which clusters would a Placement select right now, and why.
//! TieredPlacements in the snapshot are planned too ([`tiering`]): active tiers, per-tier counts,
//! the predicted decisions and why.
//!
//! Reads hub objects from files (kubectl Lists, multi-document YAML, conformance case files),
//! runs scheduler-core's placement engine on them and prints a ranked table or the conformance
//! `expect` keys as JSON. Nothing is written to any cluster.

mod decode;
pub mod input;
mod report;
mod tiering;

pub use input::{InputError, Scenario};
pub use report::skip_reason;

use clap::{Args, ValueEnum};
use ocm_score_scheduler::placement::{self, HubSnapshot, PlacementError, SyncOutcome};
use serde_json::{Value, json};
use std::io::Write;
use std::path::PathBuf;
use thiserror::Error;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// A ranked table per placement.
    Table,
    /// A JSON array, one object per case or placement: `name` and the conformance `expect`
    /// keys; a placement OCM would leave alone (deleting, or scheduling disabled) is
    /// `{name, skipped: <why>}`. A TieredPlacement is `{name, kind: TieredPlacement,
    /// activeTiers, decisions, tiers, ...}`.
    Json,
    /// The JSON output as YAML, timestamps quoted as kubectl quotes them (`ocm_score_api::yaml`).
    Yaml,
}

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// A conformance case file: schedule every case at its own `now` and print one result per case.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "file",
        required_unless_present = "file"
    )]
    pub cases: Option<PathBuf>,

    /// Hub objects: `kubectl get ... -A -o yaml` output, multi-document YAML or a case file
    /// (`-` reads stdin). Repeat to merge several object files into one snapshot; case files
    /// are scheduled case by case.
    #[arg(short = 'f', long, value_name = "FILE")]
    pub file: Vec<PathBuf>,

    /// The placement to schedule, as NAMESPACE/NAME (default: the case's, or every Placement).
    #[arg(short, long, value_name = "NAMESPACE/NAME")]
    pub placement: Option<String>,

    /// The scheduler's clock, RFC 3339 (default: the case's `now`, otherwise the current time).
    #[arg(long, value_name = "TIME")]
    pub now: Option<jiff::Timestamp>,

    #[arg(short, long, value_enum, default_value_t = OutputFormat::Table)]
    pub output: OutputFormat,

    /// Add per-cluster explanations, warnings and conditions to the JSON output.
    #[arg(long)]
    pub explain: bool,

    /// Print at most this many cluster rows per placement in the table.
    #[arg(long, value_name = "ROWS")]
    pub limit: Option<usize>,
}

#[derive(Debug, Error)]
pub enum SimulateError {
    #[error(transparent)]
    Input(#[from] InputError),
    #[error("{}", located(file, scenario, error))]
    Engine {
        file: String,
        scenario: String,
        error: Box<PlacementError>,
    },
    #[error("--placement {value:?}: expected NAMESPACE/NAME")]
    PlacementFlag { value: String },
    #[error("{scenario}: no Placement or TieredPlacement to schedule (the input has none)")]
    NoPlacement { scenario: String },
    /// The cause follows in the error chain (`{:#}`).
    #[error("cannot write the output")]
    Output(#[from] std::io::Error),
}

/// `file: case: error`, without repeating the file when the scenario is the file itself.
fn located(file: &str, scenario: &str, error: &PlacementError) -> String {
    if scenario == file || scenario.is_empty() {
        format!("{file}: {error}")
    } else {
        format!("{file}: {scenario}: {error}")
    }
}

impl SimulateError {
    /// Whether the user's input (files, flags, objects) is at fault.
    pub fn is_bad_input(&self) -> bool {
        !matches!(self, SimulateError::Output(_))
    }
}

fn parse_placement_flag(value: &str) -> Result<(String, String), SimulateError> {
    match value.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok((ns.to_string(), name.to_string()))
        }
        _ => Err(SimulateError::PlacementFlag {
            value: value.to_string(),
        }),
    }
}

pub fn run(args: SimulateArgs) -> Result<(), SimulateError> {
    let (source, scenarios) = match &args.cases {
        Some(path) => (path.display().to_string(), input::load(path)?),
        None => {
            let mut all = Vec::new();
            for path in &args.file {
                all.extend(input::load(path)?);
            }
            let source = args
                .file
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ");
            (source, all)
        }
    };
    let output = render(&args, &source, scenarios)?;
    std::io::stdout().lock().write_all(output.as_bytes())?;
    Ok(())
}

/// Schedules `scenarios` (read from `source`, which errors name) and writes what `run` prints.
/// Case scenarios are scheduled one by one; the plain ones are merged into one snapshot.
pub fn render(args: &SimulateArgs, source: &str, scenarios: Vec<Scenario>) -> Result<String, SimulateError> {
    let flag_placement = args.placement.as_deref().map(parse_placement_flag).transpose()?;
    let (mut scenarios, plain): (Vec<_>, Vec<_>) = scenarios.into_iter().partition(|s| s.is_case);
    if !plain.is_empty() {
        scenarios.push(input::merge(plain));
    }
    let mut json_out: Vec<Value> = Vec::new();
    let mut text = String::new();
    for scenario in scenarios {
        let label = scenario.label.clone();
        let engine_err = |error: PlacementError| SimulateError::Engine {
            file: source.to_string(),
            scenario: label.clone(),
            error: Box::new(error),
        };
        let now = args.now.or(scenario.now).unwrap_or_else(jiff::Timestamp::now);
        let wanted = flag_placement.clone().or(scenario.placement.clone());
        let snapshot = HubSnapshot::new(scenario.objects).map_err(engine_err)?;
        let mut tiered: Vec<&ocm_score_api::TieredPlacement> = scenario
            .tiered
            .iter()
            .filter(|tp| {
                wanted
                    .as_ref()
                    .is_none_or(|(ns, name)| tiering::key(tp) == format!("{ns}/{name}"))
            })
            .collect();
        tiered.sort_by_key(|tp| tiering::key(tp));
        let wanted_is_tiered = wanted.is_some() && !tiered.is_empty();
        let keys: Vec<(String, String)> = match wanted {
            Some(_) if wanted_is_tiered => Vec::new(),
            Some(key) => vec![key],
            None => snapshot
                .placements()
                .iter()
                .map(|p| {
                    (
                        p.metadata.namespace.clone().unwrap_or_default(),
                        p.metadata.name.clone().unwrap_or_default(),
                    )
                })
                .collect(),
        };
        if keys.is_empty() && tiered.is_empty() {
            return Err(SimulateError::NoPlacement { scenario: label });
        }
        for tp in tiered {
            let plan = tiering::plan(tp, &snapshot, now);
            tracing::debug!(scenario = %label, tiered_placement = %tiering::key(tp), %now, "planned");
            match args.output {
                OutputFormat::Json | OutputFormat::Yaml => json_out.push(tiering::json(tp, &plan)),
                OutputFormat::Table => {
                    text.push_str(&tiering::table(tp, &plan));
                    text.push('\n');
                }
            }
        }
        for (ns, name) in keys {
            let Some(p) = snapshot.placement(&ns, &name) else {
                return Err(engine_err(PlacementError::PlacementNotFound {
                    namespace: ns,
                    name,
                }));
            };
            let outcome = placement::sync_placement(&snapshot, p, now).map_err(engine_err)?;
            tracing::debug!(scenario = %label, placement = %format!("{ns}/{name}"), %now, "scheduled");
            let entry_name = if scenario.is_case {
                label.clone()
            } else {
                format!("{ns}/{name}")
            };
            match args.output {
                OutputFormat::Json | OutputFormat::Yaml => {
                    let mut obj = serde_json::Map::new();
                    obj.insert("name".into(), json!(entry_name));
                    match &outcome {
                        SyncOutcome::Skipped(reason) => {
                            obj.insert("skipped".into(), json!(report::skip_reason(*reason)));
                        }
                        SyncOutcome::Scheduled(result) => {
                            obj.extend(report::expect_keys(&snapshot, p, result));
                            if args.explain {
                                obj.insert("explain".into(), report::explanation_json(&snapshot, p, result));
                            }
                        }
                    }
                    json_out.push(Value::Object(obj));
                }
                OutputFormat::Table => {
                    if scenario.is_case {
                        text.push_str(&format!("== {label} (now {now})\n"));
                    }
                    text.push_str(&report::table(&snapshot, p, &outcome, args.limit));
                    text.push('\n');
                }
            }
        }
    }
    Ok(match args.output {
        OutputFormat::Json => {
            let mut json = serde_json::to_string_pretty(&json_out).map_err(std::io::Error::from)?;
            json.push('\n');
            json
        }
        OutputFormat::Yaml => ocm_score_api::yaml::to_string(&Value::Array(json_out)),
        OutputFormat::Table => text,
    })
}
