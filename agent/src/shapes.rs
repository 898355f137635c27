//! Where the agent's WorkloadShapes come from, and what it reports about them.
//!
//! Shapes are read from the hub (the cluster-scoped `WorkloadShape` objects, watched into a
//! reflector store) or, for standalone runs and `once`, from `--shapes FILE`. Each change is
//! compiled (`accounting::compile_shapes`: the first 32 by name, validated) and handed to the
//! cluster source's fits index; the agent then publishes one `fits.<shape>` score per scored shape.
//!
//! A shape that cannot be scored never stops the agent: it is left out, named with the field in a
//! warning log line, and reported by the condition [`CONDITION_TYPE`] on the score object.
//!
//! A hub without the WorkloadShape CRD (an older install) answers the watch's list with 404. The
//! agent then says so once (a warning and the condition), stops watching, and asks discovery again
//! every `--shapes-recheck-interval`: a fleet retrying a missing resource would send the hub a list
//! per agent every few seconds, all of them 404s.

use crate::accounting::fits::ShapeProblem;
use crate::accounting::{ShapeFits, ShapeSet, compile_shapes};
use crate::hub::HubConnection;
use crate::scores::ScoreValue;
use crate::sources::cluster::FitsHandle;
use futures::{StreamExt, TryStreamExt};
use kube::Resource;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::{self, Event};
use ocm_score_api::WorkloadShape;
use ocm_score_api::crd::workload_shape::{
    ShapeError, TOO_MANY_SHAPES_REASON, UNSUPPORTED_FIELD_REASON, fits_score_name,
};
use ocm_score_shell::jitter::spread;
use ocm_score_shell::sync::lock;
use ocm_score_shell::watch::WatchRetryExt;
use serde::Deserialize;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// The condition the agent sets on the score object about its shapes.
pub const CONDITION_TYPE: &str = "WorkloadShapesScored";
pub const REASON_SCORED: &str = "WorkloadShapesScored";
pub const REASON_INVALID: &str = "InvalidWorkloadShape";
pub const REASON_UNREADABLE: &str = "WorkloadShapesUnreadable";
pub const REASON_NOT_INSTALLED: &str = "WorkloadShapesNotInstalled";

/// How far each re-check for a missing WorkloadShape CRD is spread around the interval (the
/// default 3 minutes: 2 to 4), so a fleet started together does not ask in step.
const RECHECK_SPREAD: f64 = 1.0 / 3.0;

/// The longest condition message (the CRD allows 32768 characters; a few hundred problems must not
/// come near it).
const MAX_MESSAGE: usize = 4096;

/// A condition about the shapes, as the publisher writes it (`type` is [`CONDITION_TYPE`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapesCondition {
    /// `True`, `False` or `Unknown`.
    pub status: &'static str,
    pub reason: &'static str,
    pub message: String,
}

/// Where shapes come from.
#[derive(Clone, Debug, PartialEq)]
pub enum ShapeSource {
    /// No `fits` scores (no cluster source to count with).
    None,
    /// The hub's WorkloadShapes (`run` without `--shapes`).
    Hub,
    /// `--shapes FILE`, read once at start: the shapes it holds and the entries that are not shapes.
    File {
        path: PathBuf,
        shapes: Vec<WorkloadShape>,
        unreadable: Vec<ShapeProblem>,
    },
}

/// The `fits.<shape>` scores, in shape-name order.
pub fn fits_scores(fits: &[ShapeFits]) -> Vec<ScoreValue> {
    fits.iter()
        .map(|f| ScoreValue {
            name: fits_score_name(&f.shape),
            value: f.value,
            free: Some(f.replicas as f64),
            capacity: None,
        })
        .collect()
}

/// Reads `--shapes FILE`: YAML holding WorkloadShape objects, as a list (`- apiVersion: …`), a
/// `kind: List` / `WorkloadShapeList` with `items`, or one object per document. An entry that is
/// not a readable WorkloadShape is returned as a problem naming it and the field; the error is for
/// a file that cannot be read or is not YAML at all.
pub fn read_file(path: &Path) -> Result<(Vec<WorkloadShape>, Vec<ShapeProblem>), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    parse(&text)
}

/// See [`read_file`].
pub fn parse(text: &str) -> Result<(Vec<WorkloadShape>, Vec<ShapeProblem>), String> {
    let mut entries = Vec::new();
    for (i, document) in serde_norway::Deserializer::from_str(text).enumerate() {
        let value = Value::deserialize(document).map_err(|e| format!("document {}: {e}", i + 1))?;
        match value {
            Value::Null => {}
            Value::Array(items) => entries.extend(items),
            Value::Object(ref object) if object.get("items").is_some_and(Value::is_array) => {
                if let Some(Value::Array(items)) = object.get("items") {
                    entries.extend(items.iter().cloned());
                }
            }
            other => entries.push(other),
        }
    }
    let mut shapes = Vec::new();
    let mut problems = Vec::new();
    for (i, entry) in entries.into_iter().enumerate() {
        match shape_of(&entry) {
            Ok(shape) => shapes.push(shape),
            Err(error) => problems.push(ShapeProblem::Invalid(ShapeError {
                shape: entry
                    .pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("entry #{}", i + 1), str::to_owned),
                field: error.0,
                message: error.1,
            })),
        }
    }
    Ok((shapes, problems))
}

/// One entry as a WorkloadShape, or `(field, message)`.
fn shape_of(entry: &Value) -> Result<WorkloadShape, (String, String)> {
    let Some(object) = entry.as_object() else {
        return Err((String::new(), format!("{entry} is not an object")));
    };
    if let Some(kind) = object.get("kind")
        && kind != "WorkloadShape"
    {
        return Err(("kind".into(), format!("{kind} is not WorkloadShape")));
    }
    if !object
        .get("metadata")
        .and_then(|m| m.get("name"))
        .is_some_and(Value::is_string)
    {
        return Err(("metadata.name".into(), "missing".into()));
    }
    serde_json::from_value(entry.clone()).map_err(|error| {
        // serde names no path: find the spec field that fails on its own.
        let field = object
            .get("spec")
            .and_then(Value::as_object)
            .and_then(|spec| {
                spec.iter().find_map(|(key, value)| {
                    let alone = serde_json::json!({ key.as_str(): value });
                    serde_json::from_value::<ocm_score_api::WorkloadShapeSpec>(alone)
                        .is_err()
                        .then(|| format!("spec.{key}"))
                })
            })
            .unwrap_or_else(|| "spec".into());
        (field, error.to_string())
    })
}

/// The condition for the shapes now scored and the problems found; `None` when there is nothing
/// to say (no shapes at all).
pub fn condition(scored: &ShapeSet, problems: &[ShapeProblem]) -> Option<ShapesCondition> {
    let names: Vec<&str> = scored.names().collect();
    if problems.is_empty() {
        return (!names.is_empty()).then(|| ShapesCondition {
            status: "True",
            reason: REASON_SCORED,
            message: format!(
                "{} WorkloadShape(s) scored as fits.<name>: {}",
                names.len(),
                names.join(", ")
            ),
        });
    }
    let reason = if problems.iter().any(|p| p.reason() == TOO_MANY_SHAPES_REASON) {
        TOO_MANY_SHAPES_REASON
    } else if problems.iter().all(|p| p.reason() == UNSUPPORTED_FIELD_REASON) {
        UNSUPPORTED_FIELD_REASON
    } else {
        REASON_INVALID
    };
    let listed: Vec<String> = problems.iter().map(ToString::to_string).collect();
    Some(ShapesCondition {
        status: "False",
        reason,
        message: capped(format!(
            "{} WorkloadShape(s) scored, {} not: {}",
            names.len(),
            problems.len(),
            listed.join("; ")
        )),
    })
}

/// The condition while the hub's shapes cannot be read (and never could be since the start).
pub fn unreadable(error: &str) -> ShapesCondition {
    ShapesCondition {
        status: "Unknown",
        reason: REASON_UNREADABLE,
        message: capped(format!(
            "cannot read WorkloadShapes from the hub, so no fits scores are published: {error}"
        )),
    }
}

/// The condition while the hub has no WorkloadShape CRD.
pub fn not_installed(recheck: Duration) -> ShapesCondition {
    ShapesCondition {
        status: "False",
        reason: REASON_NOT_INSTALLED,
        message: format!(
            "the WorkloadShape CRD ({}) is not installed on the hub, so no fits scores are published; \
             checking again about every {}",
            crd_name(),
            ocm_score_api::duration::format(recheck)
        ),
    }
}

/// `workloadshapes.tiering.ocm-score.io`.
fn crd_name() -> String {
    format!("{}.{}", WorkloadShape::plural(&()), WorkloadShape::group(&()))
}

fn capped(mut message: String) -> String {
    if message.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !message.is_char_boundary(end) {
            end -= 1;
        }
        message.truncate(end);
        message.push('…');
    }
    message
}

/// What the agent knows about its shapes, shared between the task that reads them and the loop
/// that publishes.
#[derive(Debug, Default)]
pub struct ShapesStatus {
    state: Mutex<State>,
    settled: Notify,
}

#[derive(Debug, Default)]
struct State {
    condition: Option<ShapesCondition>,
    /// The shapes were listed (or found unreadable) at least once.
    settled: bool,
    /// The problems last logged, so an unchanged list is not logged at every event.
    logged: Vec<ShapeProblem>,
}

impl ShapesStatus {
    /// The condition to publish now.
    pub fn condition(&self) -> Option<ShapesCondition> {
        lock(&self.state).condition.clone()
    }

    /// Waits until the shapes were read once (or found unreadable).
    pub async fn wait_settled(&self) {
        loop {
            let notified = self.settled.notified();
            if lock(&self.state).settled {
                return;
            }
            notified.await;
        }
    }

    /// Compiles `shapes` into the set to count, logs problems not logged before and records the
    /// condition. `extra` are the entries of a file that were no shapes at all.
    pub fn compile(&self, shapes: &[WorkloadShape], extra: &[ShapeProblem]) -> ShapeSet {
        let (set, mut problems) = compile_shapes(shapes);
        problems.extend(extra.iter().cloned());
        let condition = condition(&set, &problems);
        {
            let mut state = lock(&self.state);
            if state.logged != problems || !state.settled {
                let names: Vec<&str> = set.names().collect();
                tracing::info!(shapes = %names.join(","), "WorkloadShapes scored");
                for problem in &problems {
                    tracing::warn!(shape = problem.shape(), reason = problem.reason(), "{problem}");
                }
                state.logged = problems;
            }
            state.condition = condition;
            state.settled = true;
        }
        self.settled.notify_waiters();
        set
    }

    /// The hub's shapes cannot be read. Before they ever were, that is the condition; after, the
    /// last shapes stay in use (they are configuration, not data that goes stale).
    pub fn failed(&self, error: &str) {
        let mut state = lock(&self.state);
        if !state.settled
            || state
                .condition
                .as_ref()
                .is_some_and(|c| c.reason == REASON_UNREADABLE || c.reason == REASON_NOT_INSTALLED)
        {
            state.condition = Some(unreadable(error));
            state.settled = true;
            drop(state);
            self.settled.notify_waiters();
        }
    }

    /// The hub has no WorkloadShape CRD: no shapes, and the condition says why. `true` the first
    /// time (since the CRD was last seen), so that is said once.
    pub fn not_installed(&self, recheck: Duration) -> bool {
        let mut state = lock(&self.state);
        let newly = state
            .condition
            .as_ref()
            .is_none_or(|c| c.reason != REASON_NOT_INSTALLED);
        state.condition = Some(not_installed(recheck));
        state.settled = true;
        state.logged.clear();
        drop(state);
        self.settled.notify_waiters();
        newly
    }
}

/// How the hub's WorkloadShapes are watched and re-checked.
#[derive(Clone, Copy, Debug)]
pub struct HubWatch {
    /// How often a hub without the CRD is asked again (spread by [`RECHECK_SPREAD`]).
    pub recheck: Duration,
    /// Timeout of one such check.
    pub timeout: Duration,
}

/// Watches the hub's WorkloadShapes until aborted, applying every change. A watch error names the
/// problem in the condition until the first list succeeds; when the hub credentials rotate the
/// watch is restarted with the new ones. While the hub has no WorkloadShape CRD there are no shapes
/// and no watch: discovery is asked every `recheck` whether the CRD has come.
pub async fn watch_hub(
    kubeconfig: PathBuf,
    status: Arc<ShapesStatus>,
    fits: FitsHandle,
    changed: Arc<Notify>,
    settings: HubWatch,
) {
    let mut hub = HubConnection::new(kubeconfig);
    loop {
        let client = match hub.client().await {
            Ok(client) => client,
            Err(error) => {
                tracing::warn!(%error, "cannot read WorkloadShapes from the hub; retrying");
                status.failed(&error.to_string());
                changed.notify_one();
                tokio::time::sleep(RETRY).await;
                continue;
            }
        };
        let fingerprint = crate::hub::fingerprint(hub.kubeconfig()).ok();
        let (store, writer) = reflector::store::<WorkloadShape>();
        let events = reflector::reflector(
            writer,
            watcher::watcher(Api::<WorkloadShape>::all(client), watcher::Config::default()).watch_backoff(),
        )
        .boxed();
        let end = run_watch(events, &store, &status, &fits, &changed, || {
            crate::hub::fingerprint(hub.kubeconfig()).ok() != fingerprint
        })
        .await;
        if end == WatchEnd::NotInstalled {
            let newly = status.not_installed(settings.recheck);
            if newly {
                tracing::warn!(
                    crd = %crd_name(),
                    recheck = %ocm_score_api::duration::format(settings.recheck),
                    "the WorkloadShape CRD is not installed on the hub; fits scores are off until it is"
                );
            }
            // Its shapes went with the CRD (if it ever was there).
            if fits.set_shapes(compile_shapes(&[]).0) || newly {
                changed.notify_one();
            }
            wait_until_installed(&mut hub, settings).await;
        }
        hub.reset();
    }
}

/// Returns once discovery says the hub serves WorkloadShapes, or cannot say (the watch that follows
/// then reports what is wrong, or finds the CRD still missing and comes back here).
async fn wait_until_installed(hub: &mut HubConnection, settings: HubWatch) {
    loop {
        tokio::time::sleep(spread(settings.recheck, RECHECK_SPREAD)).await;
        let served = match hub.client().await {
            Ok(client) => tokio::time::timeout(settings.timeout, crd_served(&client))
                .await
                .unwrap_or_else(|_| Err("timed out".to_owned())),
            Err(error) => Err(error.to_string()),
        };
        match served {
            Ok(true) => {
                tracing::info!(crd = %crd_name(), "the WorkloadShape CRD is installed on the hub now; watching WorkloadShapes");
                return;
            }
            Ok(false) => {
                tracing::debug!(crd = %crd_name(), "the WorkloadShape CRD is still not installed on the hub")
            }
            Err(error) => {
                tracing::info!(%error, "cannot tell whether the hub has the WorkloadShape CRD; watching WorkloadShapes");
                return;
            }
        }
    }
}

/// Whether the hub serves WorkloadShapes, from one discovery request for their group and version
/// (open to every authenticated user; a 404 means nothing of that group version is served).
async fn crd_served(client: &kube::Client) -> Result<bool, String> {
    match client
        .list_api_group_resources(&WorkloadShape::api_version(&()))
        .await
    {
        Ok(list) => Ok(list
            .resources
            .iter()
            .any(|r| r.name == WorkloadShape::plural(&()))),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(false),
        Err(error) => Err(error.to_string()),
    }
}

/// Whether a watch failed because the hub does not serve WorkloadShapes at all.
fn is_not_installed(error: &watcher::Error) -> bool {
    matches!(
        error,
        watcher::Error::InitialListFailed(kube::Error::Api(status))
            | watcher::Error::WatchStartFailed(kube::Error::Api(status))
            if status.code == 404
    )
}

/// Why [`run_watch`] returned.
#[derive(Debug, PartialEq, Eq)]
enum WatchEnd {
    /// The stream ended, or failed with credentials that have changed since it started.
    Restart,
    /// The hub has no WorkloadShape CRD.
    NotInstalled,
}

/// One list of the hub's WorkloadShapes, so the first count already has them (the watch that follows
/// then changes nothing, and the nodes and pods are listed once). `None` when the hub does not
/// answer in time; the watch reports why.
pub async fn list_hub(kubeconfig: &Path, timeout: Duration) -> Option<Vec<WorkloadShape>> {
    let client = HubConnection::new(kubeconfig.to_owned()).client().await.ok()?;
    let api = Api::<WorkloadShape>::all(client);
    match tokio::time::timeout(timeout, api.list(&Default::default())).await {
        Ok(Ok(list)) => Some(list.items),
        _ => None,
    }
}

/// How long to wait before building the hub client again after it failed.
const RETRY: Duration = Duration::from_secs(5);

/// Follows one watch until its stream ends, it fails with credentials that have changed since, or
/// the hub turns out not to serve WorkloadShapes.
async fn run_watch(
    mut events: futures::stream::BoxStream<'_, Result<Event<WorkloadShape>, watcher::Error>>,
    store: &Store<WorkloadShape>,
    status: &ShapesStatus,
    fits: &FitsHandle,
    changed: &Notify,
    credentials_changed: impl Fn() -> bool,
) -> WatchEnd {
    let mut listed = false;
    loop {
        match events.try_next().await {
            Ok(Some(Event::InitDone)) => {
                listed = true;
                apply_store(store, status, fits, changed);
            }
            Ok(Some(Event::Apply(_) | Event::Delete(_))) if listed => {
                apply_store(store, status, fits, changed);
            }
            Ok(Some(_)) => {}
            Ok(None) => return WatchEnd::Restart,
            Err(error) if is_not_installed(&error) => return WatchEnd::NotInstalled,
            Err(error) => {
                tracing::warn!(%error, "watching WorkloadShapes on the hub failed; retrying with backoff");
                status.failed(&error.to_string());
                changed.notify_one();
                if credentials_changed() {
                    tracing::info!("hub credentials changed; watching WorkloadShapes with the new ones");
                    return WatchEnd::Restart;
                }
            }
        }
    }
}

fn apply_store(store: &Store<WorkloadShape>, status: &ShapesStatus, fits: &FitsHandle, changed: &Notify) {
    let shapes: Vec<WorkloadShape> = store.state().iter().map(|s| (**s).clone()).collect();
    let condition_before = status.condition();
    let counted_changed = fits.set_shapes(status.compile(&shapes, &[]));
    // The watch's first list repeats what the start-up list already counted: waking the publisher
    // for it would open a debounce window that later changes ride along on, published early.
    if counted_changed || status.condition() != condition_before {
        changed.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_holds_a_list_a_kube_list_or_documents_and_bad_entries_name_their_field() {
        let list = "- apiVersion: tiering.ocm-score.io/v1alpha1\n  kind: WorkloadShape\n  metadata: {name: a}\n  spec: {requests: {cpu: '1'}}\n";
        let (shapes, problems) = parse(list).expect("YAML");
        assert_eq!((shapes.len(), problems.len()), (1, 0));
        let kube_list = "apiVersion: v1\nkind: List\nitems:\n- kind: WorkloadShape\n  metadata: {name: a}\n  spec: {}\n- kind: WorkloadShape\n  metadata: {name: b}\n  spec: {scale: many}\n";
        let (shapes, problems) = parse(kube_list).expect("YAML");
        assert_eq!(shapes.len(), 1);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].shape(), "b");
        let text = problems[0].to_string();
        assert!(
            text.contains("field spec.scale") && text.contains("many"),
            "{text}"
        );
        let documents = "kind: WorkloadShape\nmetadata: {name: a}\nspec: {}\n---\nkind: ConfigMap\nmetadata: {name: c}\n---\nmetadata: {}\n";
        let (shapes, problems) = parse(documents).expect("YAML");
        assert_eq!(shapes.len(), 1);
        let fields: Vec<String> = problems.iter().map(ToString::to_string).collect();
        assert!(
            fields[0].contains("\"c\"") && fields[0].contains("field kind"),
            "{fields:?}"
        );
        assert!(
            fields[1].contains("entry #3") && fields[1].contains("metadata.name"),
            "{fields:?}"
        );
        assert!(parse("a: [").is_err());
    }

    #[test]
    fn the_condition_says_what_is_scored_and_what_is_not() {
        let (shapes, problems) = parse(
            "- {kind: WorkloadShape, metadata: {name: a}, spec: {}}\n- {kind: WorkloadShape, metadata: {name: B}, spec: {}}\n",
        )
        .expect("YAML");
        assert_eq!(problems, vec![]);
        let (set, problems) = compile_shapes(&shapes);
        let c = condition(&set, &problems).expect("a condition");
        assert_eq!((c.status, c.reason), ("False", REASON_INVALID));
        assert!(
            c.message
                .starts_with("1 WorkloadShape(s) scored, 1 not: WorkloadShape \"B\": field metadata.name"),
            "{}",
            c.message
        );
        let (set, problems) = compile_shapes(&shapes[..1]);
        let c = condition(&set, &problems).expect("a condition");
        assert_eq!(
            (c.status, c.message.as_str()),
            ("True", "1 WorkloadShape(s) scored as fits.<name>: a")
        );
        let (set, problems) = compile_shapes(&[]);
        assert_eq!(condition(&set, &problems), None);
        let long = unreadable(&"x".repeat(10_000));
        assert!(long.message.chars().count() <= MAX_MESSAGE + 1);
    }

    #[test]
    fn a_shape_asking_for_what_the_count_leaves_out_is_reported_not_counted() {
        let (shapes, problems) = parse(
            "- {kind: WorkloadShape, metadata: {name: a}, spec: {}}\n- {kind: WorkloadShape, \
             metadata: {name: cross}, spec: {namespace: shop, podAntiAffinity: [{topologyKey: zone, \
             labelSelector: {}, namespaceSelector: {}}]}}\n",
        )
        .expect("YAML");
        assert_eq!(problems, vec![]);
        let (set, problems) = compile_shapes(&shapes);
        assert_eq!(
            set.names().collect::<Vec<_>>(),
            ["a"],
            "the unsupported shape is not counted"
        );
        let c = condition(&set, &problems).expect("a condition");
        assert_eq!((c.status, c.reason), ("False", UNSUPPORTED_FIELD_REASON));
        assert!(
            c.message.contains(
                "WorkloadShape \"cross\": field spec.podAntiAffinity[0].namespaceSelector: not supported"
            ),
            "{}",
            c.message
        );
    }
}
