//! `kubectl ocm-score`: `simulate`'s answer, live. The executable `kubectl-ocm_score` on `PATH`
//! is what kubectl runs for `kubectl ocm-score ...`. It reads the hub through the user's
//! kubeconfig with the user's own permissions ([`live`]), runs the same engine and report as
//! `ocm-score-hub simulate`, and sets OCM's standing decisions beside the answer ([`compare`]).
//! Nothing is written to the hub.

pub mod compare;
pub mod live;
pub mod scores;

use crate::simulate::{self, OutputFormat, Scenario, SimulateArgs, SimulateError};
use clap::{Args, Parser, Subcommand, ValueEnum};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use live::{LiveHub, Unreadable, resource_name};
use ocm_score_api::{AddOnPlacementScore, ManagedCluster, Placement, PlacementDecision};
use ocm_score_scheduler::placement::selector::LabelMatcher;
use ocm_score_scheduler::placement::{self, HubSnapshot, SyncOutcome};
use serde_json::{Value, json};
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Parser)]
#[command(
    name = "kubectl ocm-score",
    bin_name = "kubectl ocm-score",
    version,
    about = "Why OCM picks the clusters it does: Placements explained from the live hub, and the fleet's scores"
)]
pub struct Cli {
    /// The kubeconfig to use (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context to use (default: its current context).
    #[arg(long, global = true, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace of the placement, and the one read where the user may not read every
    /// namespace (default: the context's namespace, then `default`).
    #[arg(short = 'n', long, global = true)]
    pub namespace: Option<String>,
    /// The output format.
    #[arg(short = 'o', long, global = true, value_enum, default_value_t = Format::Table)]
    pub output: Format,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Yaml,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Why a Placement (or TieredPlacement) selects the clusters it does, from the hub as it is
    /// now, beside OCM's own decisions; with -f, a dry run of a Placement not yet applied.
    Explain(ExplainArgs),
    /// The fleet's AddOnPlacementScores: one row per score object, expired ones marked.
    Scores(ScoresArgs),
}

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// `placement` (`placements`, `pl`) or `tieredplacement` (`tieredplacements`, `tp`).
    #[arg(value_name = "KIND", required_unless_present = "file")]
    pub kind: Option<String>,
    /// The object's name.
    #[arg(value_name = "NAME", required_unless_present = "file")]
    pub name: Option<String>,
    /// A Placement file not yet applied: what OCM would decide if it were applied now.
    #[arg(short = 'f', long, value_name = "FILE", conflicts_with_all = ["kind", "name"])]
    pub file: Option<PathBuf>,
    /// Print at most this many cluster rows.
    #[arg(long, value_name = "ROWS")]
    pub limit: Option<usize>,
}

#[derive(Debug, Args)]
pub struct ScoresArgs {
    /// Only clusters whose ManagedCluster labels match (kubectl's syntax: `env=prod,tier!=gold`).
    #[arg(short = 'l', long, value_name = "SELECTOR")]
    pub selector: Option<String>,
    /// `cluster`, `age`, `validUntil`, or a score name (highest first).
    #[arg(long, value_name = "FIELD", default_value = "cluster")]
    pub sort_by: scores::SortBy,
    /// Only these scores (a column each): `--score cpuAvailable,memAvailable`, or the flag repeated.
    #[arg(long = "score", value_name = "NAME", value_delimiter = ',')]
    pub scores: Vec<String>,
    /// Only the score objects of this name (`resource-usage-score`, `thanos-score`, ...).
    #[arg(long, value_name = "NAME")]
    pub resource: Option<String>,
}

#[derive(Debug, Error)]
pub enum PluginError {
    #[error("{0}")]
    Usage(String),
    /// The cause follows in the error chain.
    #[error("cannot load the kubeconfig")]
    Kubeconfig(#[source] kube::Error),
    #[error("cannot load the kubeconfig {path}")]
    KubeconfigFile {
        path: PathBuf,
        #[source]
        source: kube::config::KubeconfigError,
    },
    #[error(transparent)]
    Read(#[from] live::ReadError),
    #[error(transparent)]
    Simulate(#[from] SimulateError),
    #[error("{kind} {namespace}/{name} not found")]
    NotFound {
        kind: &'static str,
        namespace: String,
        name: String,
    },
    #[error(
        "cannot explain {what}: it reads what your user may not read:\n  {}\n(`kubectl auth can-i list <resource>` shows what you may; {ocm})",
        unreadable.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n  ")
    )]
    Unreadable {
        what: String,
        unreadable: Vec<Unreadable>,
        /// What OCM decided, when the user may read that much.
        ocm: String,
    },
    #[error("cannot encode the output: {0}")]
    Encode(#[from] serde_json::Error),
}

impl PluginError {
    /// Whether the user must fix the command or its files (exit 2, like kubectl's usage errors).
    pub fn is_bad_input(&self) -> bool {
        match self {
            PluginError::Usage(_) => true,
            PluginError::Simulate(e) => e.is_bad_input(),
            _ => false,
        }
    }
}

/// What to print: the answer on stdout, warnings on stderr.
#[derive(Debug, Default)]
pub struct Output {
    pub stdout: String,
    pub warnings: Vec<String>,
}

async fn connect(cli: &Cli) -> Result<(Client, String), PluginError> {
    let options = KubeConfigOptions {
        context: cli.context.clone(),
        ..Default::default()
    };
    let config = match &cli.kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path).map_err(|source| PluginError::KubeconfigFile {
                path: path.clone(),
                source,
            })?;
            Config::from_custom_kubeconfig(file, &options)
                .await
                .map_err(|source| PluginError::KubeconfigFile {
                    path: path.clone(),
                    source,
                })?
        }
        None => Config::from_kubeconfig(&options)
            .await
            .map_err(|e| PluginError::Kubeconfig(kube::Error::InferKubeconfig(e)))?,
    };
    let namespace = cli
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let client = Client::try_from(config).map_err(PluginError::Kubeconfig)?;
    Ok((client, namespace))
}

pub async fn run(cli: Cli) -> Result<Output, PluginError> {
    let (client, namespace) = connect(&cli).await?;
    match &cli.command {
        Command::Scores(args) => scores_command(&client, &namespace, cli.output, args).await,
        Command::Explain(args) => {
            let hub = live::read(&client, &namespace).await?;
            explain(hub, &namespace, cli.output, args)
        }
    }
}

async fn scores_command(
    client: &Client,
    namespace: &str,
    format: Format,
    args: &ScoresArgs,
) -> Result<Output, PluginError> {
    let selector = args
        .selector
        .as_deref()
        .map(|text| LabelMatcher::parse(text).map_err(|e| PluginError::Usage(format!("-l {text:?}: {e}"))))
        .transpose()?;
    let mut hub = LiveHub::default();
    let found: Vec<AddOnPlacementScore> = live::list_namespaced(client, namespace, &mut hub).await?;
    let clusters: Vec<ManagedCluster> = if selector.is_some() {
        live::list_cluster_scoped(client, &mut hub).await?
    } else {
        Vec::new()
    };
    if selector.is_some()
        && let Some(u) = hub.unreadable(&resource_name::<ManagedCluster>())
    {
        return Err(PluginError::Unreadable {
            what: "-l (it selects by ManagedCluster labels)".to_owned(),
            unreadable: vec![u.clone()],
            ocm: "drop -l to list the scores you may read".to_owned(),
        });
    }
    let rows = scores::rows(
        &found,
        &clusters,
        selector.as_ref(),
        &args.sort_by,
        jiff::Timestamp::now(),
    );
    let rows = scores::narrow(rows, args.resource.as_deref(), &args.scores).map_err(PluginError::Usage)?;
    let stdout = match format {
        Format::Table if rows.is_empty() => String::new(),
        Format::Table => scores::table(&rows),
        Format::Json | Format::Yaml => encode(
            format,
            &json!(rows.iter().map(scores::Row::json).collect::<Vec<_>>()),
        )?,
    };
    let mut warnings: Vec<String> = hub
        .unreadable
        .iter()
        .map(|u| format!("not shown, your user may not read it: {u}"))
        .collect();
    if rows.is_empty() {
        warnings.push("no AddOnPlacementScores found".to_owned());
    }
    Ok(Output { stdout, warnings })
}

fn encode(format: Format, value: &Value) -> Result<String, PluginError> {
    Ok(match format {
        Format::Yaml => ocm_score_api::yaml::to_string(value),
        _ => {
            let mut text = serde_json::to_string_pretty(value)?;
            text.push('\n');
            text
        }
    })
}

/// The kinds the engine reads to explain `placement` that `hub` names as unreadable: the cluster
/// inventory always, the placement's namespace, every namespace's PlacementDecisions when Balance
/// counts, and the clusters' scores when the placement reads any.
fn unreadable_for(hub: &LiveHub, placement: &Placement) -> Vec<Unreadable> {
    let reads_scores = placement
        .spec
        .prioritizer_policy
        .iter()
        .flat_map(|p| &p.configurations)
        .any(|c| c.score_coordinate.as_ref().is_some_and(|s| s.add_on.is_some()))
        || serde_json::to_string(&placement.spec.predicates).is_ok_and(|s| s.contains("scores("));
    let policy = placement.spec.prioritizer_policy.as_ref();
    let exact = policy.and_then(|p| p.mode.as_deref()) == Some("Exact");
    let balance = policy
        .iter()
        .flat_map(|p| &p.configurations)
        .find(|c| c.score_coordinate.as_ref().and_then(|s| s.built_in.as_deref()) == Some("Balance"))
        .map_or(if exact { 0 } else { 1 }, |c| c.weight.unwrap_or(1));
    hub.unreadable
        .iter()
        .filter(|u| {
            let everywhere = u.scope == "cluster-wide";
            if u.resource == resource_name::<PlacementDecision>() {
                everywhere || balance != 0
            } else if u.resource == resource_name::<AddOnPlacementScore>() {
                reads_scores
            } else if u.resource.starts_with("tieredplacements.") {
                false
            } else {
                everywhere
            }
        })
        .cloned()
        .collect()
}

fn parse_kind(kind: &str) -> Result<bool, PluginError> {
    match kind.to_ascii_lowercase().as_str() {
        "placement" | "placements" | "pl" => Ok(false),
        "tieredplacement" | "tieredplacements" | "tp" => Ok(true),
        other => Err(PluginError::Usage(format!(
            "explain {other:?}: expected placement or tieredplacement"
        ))),
    }
}

fn simulate_args(format: Format, key: &str, limit: Option<usize>) -> SimulateArgs {
    SimulateArgs {
        cases: None,
        file: Vec::new(),
        placement: Some(key.to_owned()),
        now: None,
        output: match format {
            Format::Table => OutputFormat::Table,
            // YAML is encoded here, after the comparison is added.
            Format::Json | Format::Yaml => OutputFormat::Json,
        },
        explain: format != Format::Table,
        limit,
    }
}

fn explain(
    mut hub: LiveHub,
    namespace: &str,
    format: Format,
    args: &ExplainArgs,
) -> Result<Output, PluginError> {
    let mut warnings = Vec::new();
    let (key_ns, key_name, tiered, dry_run) = match (&args.file, &args.kind, &args.name) {
        (Some(path), _, _) => {
            let placement = dry_run_placement(path, namespace)?;
            let ns = placement.metadata.namespace.clone().unwrap_or_default();
            let name = placement.metadata.name.clone().unwrap_or_default();
            let objects = &mut hub.objects;
            if let Some(i) = objects.placements.iter().position(|p| {
                p.metadata.namespace.as_deref() == Some(&ns) && p.metadata.name.as_deref() == Some(&name)
            }) {
                // What applying the file would do: the new spec, with the standing decisions.
                let live = objects.placements.remove(i);
                let mut replaced = placement;
                replaced.metadata.uid = live.metadata.uid;
                replaced.status = live.status;
                objects.placements.push(replaced);
            } else {
                objects.placements.push(placement);
            }
            (ns, name, false, true)
        }
        (None, Some(kind), Some(name)) => (namespace.to_owned(), name.clone(), parse_kind(kind)?, false),
        _ => {
            return Err(PluginError::Usage(
                "explain: give KIND NAME, or -f FILE".to_owned(),
            ));
        }
    };
    let key = format!("{key_ns}/{key_name}");
    let scheduled_placement = if tiered {
        None
    } else {
        let found = hub.objects.placements.iter().find(|p| {
            p.metadata.namespace.as_deref() == Some(key_ns.as_str())
                && p.metadata.name.as_deref() == Some(key_name.as_str())
        });
        match found {
            Some(p) => Some(p.clone()),
            None => {
                if let Some(u) = hub.unreadable(&resource_name::<Placement>())
                    && u.scope == "cluster-wide"
                {
                    return Err(PluginError::Unreadable {
                        what: format!("placement {key}"),
                        unreadable: vec![u.clone()],
                        ocm: "OCM's decisions are unknown too".to_owned(),
                    });
                }
                return Err(PluginError::NotFound {
                    kind: "placement",
                    namespace: key_ns,
                    name: key_name,
                });
            }
        }
    };
    if tiered
        && !hub.tiered.iter().any(|tp| {
            tp.metadata.namespace.as_deref() == Some(key_ns.as_str())
                && tp.metadata.name.as_deref() == Some(key_name.as_str())
        })
    {
        let what = resource_name::<ocm_score_api::TieredPlacement>();
        if let Some(u) = hub.unreadable(&what) {
            return Err(PluginError::Unreadable {
                what: format!("tieredplacement {key}"),
                unreadable: vec![u.clone()],
                ocm: "nothing else to show".to_owned(),
            });
        }
        return Err(PluginError::NotFound {
            kind: "tieredplacement",
            namespace: key_ns,
            name: key_name,
        });
    }

    // Decide now, with exactly what the user could read.
    let comparison = match &scheduled_placement {
        Some(p) => {
            let needed = unreadable_for(&hub, p);
            let snapshot = HubSnapshot::new(hub.objects.clone()).map_err(|e| SimulateError::Engine {
                file: "the live hub".to_owned(),
                scenario: key.clone(),
                error: Box::new(e),
            })?;
            let now = hub.read_at.unwrap_or_else(jiff::Timestamp::now);
            let selected = match placement::sync_placement(&snapshot, p, now) {
                Ok(SyncOutcome::Scheduled(result)) => Ok(result
                    .decisions
                    .iter()
                    .flat_map(|pd| pd.status.iter().flat_map(|s| s.decisions.iter()))
                    .map(|d| d.cluster_name.clone())
                    .collect()),
                Ok(SyncOutcome::Skipped(reason)) => Err(simulate::skip_reason(reason)),
                // The same error stops the report below, naming it.
                Err(_) => Ok(Vec::new()),
            };
            let comparison = compare::compare(&hub.objects, p, selected);
            if !needed.is_empty() {
                return Err(PluginError::Unreadable {
                    what: format!("placement {key}"),
                    unreadable: needed,
                    ocm: format!("OCM's decisions: {}", comparison.ocm.join(", ")),
                });
            }
            Some(comparison)
        }
        None => None,
    };
    warnings.extend(
        hub.unreadable
            .iter()
            .map(|u| format!("not read (not needed for this answer; your user may not read it): {u}")),
    );

    let scenario = Scenario {
        label: "the live hub".to_owned(),
        is_case: false,
        now: hub.read_at,
        placement: Some((key_ns.clone(), key_name.clone())),
        objects: hub.objects,
        tiered: hub.tiered,
    };
    let rendered = simulate::render(
        &simulate_args(format, &key, args.limit),
        "the live hub",
        vec![scenario],
    )?;
    let stdout = match format {
        Format::Table => {
            let mut text = rendered;
            if let Some(c) = &comparison {
                if dry_run {
                    text.push_str(&format!(
                        "Dry run: nothing was applied. OCM's decisions for {key} now: {}\n",
                        if c.ocm.is_empty() {
                            "(none)".to_owned()
                        } else {
                            c.ocm.join(", ")
                        }
                    ));
                } else {
                    text.push_str(&c.text());
                }
            }
            text
        }
        Format::Json | Format::Yaml => {
            let entries: Vec<Value> = serde_json::from_str(&rendered)?;
            let mut entry = entries.into_iter().next().unwrap_or(Value::Null);
            if let (Some(c), Some(obj)) = (&comparison, entry.as_object_mut()) {
                obj.insert("ocm".into(), c.json());
                obj.insert("dryRun".into(), json!(dry_run));
            }
            encode(format, &entry)?
        }
    };
    Ok(Output { stdout, warnings })
}

/// The one Placement in `path`, its namespace defaulted to `namespace`.
fn dry_run_placement(path: &std::path::Path, namespace: &str) -> Result<Placement, PluginError> {
    let scenarios = simulate::input::load(path).map_err(SimulateError::from)?;
    let mut placements: Vec<Placement> = scenarios.into_iter().flat_map(|s| s.objects.placements).collect();
    if placements.len() != 1 {
        return Err(PluginError::Usage(format!(
            "{}: expected exactly one Placement, found {}",
            path.display(),
            placements.len()
        )));
    }
    let mut placement = placements.remove(0);
    if placement.metadata.name.as_deref().is_none_or(str::is_empty) {
        return Err(PluginError::Usage(format!(
            "{}: the Placement has no metadata.name",
            path.display()
        )));
    }
    if placement.metadata.namespace.is_none() {
        placement.metadata.namespace = Some(namespace.to_owned());
    }
    Ok(placement)
}
