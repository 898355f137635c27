//! The monitoring the chart ships cannot drift from what the binaries export:
//! - `charts/ocm-score/files/alerts.yaml` passes `promtool check rules`, and its unit tests
//!   (`tests/monitoring/alerts_test.yaml`) pass `promtool test rules`;
//! - every metric an alert, a dashboard query or a promtool input series names is one our metrics
//!   registries export, under the name Prometheus stores (counters with `_total`, histograms as
//!   `_bucket`/`_sum`/`_count`), and every label it matches on is one of that metric's labels or a
//!   label the scrape adds;
//! - the dashboard parses, every query is valid PromQL once Grafana's variables are filled in, and
//!   every panel and query takes its data source from the `${datasource}` variable;
//! - `docs/metrics.md` lists every exported metric with its type and labels (and nothing else), and
//!   explains every alert.
//!
//! "What we export" is the exposition of each mode's real `Metrics`, each family exercised through
//! the crate's public API so its labels show; a family added without being exercised here fails.

use ocm_score_shell::supervise::ModeMetrics;
use ocm_score_tests::support::TempDir;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn repo_path(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(relative)
}

fn read(relative: &str) -> String {
    let path = repo_path(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

const ALERTS: &str = "charts/ocm-score/files/alerts.yaml";
const ALERT_TESTS: &str = "tests/monitoring/alerts_test.yaml";
const DASHBOARD: &str = "charts/ocm-score/files/dashboards/ocm-score.json";
const DOCS: &str = "docs/metrics.md";

/// Labels a scrape adds (a PodMonitor's target labels, and the `cluster` a fleet-wide store puts on
/// the agents' series): a query may match on them whatever the metric.
const TARGET_LABELS: [&str; 7] = [
    "job",
    "instance",
    "namespace",
    "pod",
    "container",
    "endpoint",
    "cluster",
];

// ------------------------------------------------------------------------------------------------
// What we export.

/// One metric as Prometheus stores it.
#[derive(Debug)]
struct Exported {
    /// The OpenMetrics family it belongs to.
    family: String,
    /// `counter`, `gauge` or `histogram`.
    kind: String,
    /// Label names seen on its samples (`le` not included).
    labels: BTreeSet<String>,
}

fn exercised_addon_store() -> kube::runtime::reflector::Store<ocm_score_api::ManagedClusterAddOn> {
    let addon = serde_json::from_value(serde_json::json!({
        "apiVersion": "addon.open-cluster-management.io/v1alpha1",
        "kind": "ManagedClusterAddOn",
        "metadata": {"name": "resource-usage-score", "namespace": "cluster1"},
        "spec": {},
    }))
    .expect("a ManagedClusterAddOn");
    let mut writer = kube::runtime::reflector::store::Writer::default();
    writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(addon));
    writer.as_reader()
}

/// The exposition of every mode, each family given a sample.
fn expositions() -> Vec<(&'static str, String)> {
    use ocm_score_agent::accounting::{Figures, ResourceSet, ResourceView, ShapeFits};
    use ocm_score_agent::metrics::{WatchKind, WriteResult};
    let now = jiff::Timestamp::from_second(1_700_000_000).expect("a timestamp");

    let agent = ocm_score_agent::metrics::Metrics::default();
    agent.watch_event(WatchKind::Pods);
    agent.watch_error(WatchKind::Nodes);
    agent.set_invalid_objects(1);
    agent.write(WriteResult::Failed);
    agent.lease_renewal(false);
    agent.kubelet_scrape(true);
    agent.source_failure("cluster");
    agent.set_valid_until(now.as_second());
    agent.set_hub_clock_offset(-0.4);
    let figures = Figures {
        cluster_free: 2000,
        cluster_capacity: 4000,
        node_free: 1000,
        node_capacity: 2000,
    };
    let view = ResourceView {
        figures: vec![Some(figures)],
        eligible_nodes: 2,
    };
    let score = ocm_score_agent::scores::ScoreValue {
        name: "cpuClusterAvailable".into(),
        value: 0,
        free: Some(2.0),
        capacity: Some(4.0),
    };
    agent.computed(
        &view,
        &ResourceSet::built_in(),
        &[score],
        Some(3),
        now.as_second(),
    );
    agent.set_fits(&[ShapeFits {
        shape: "small".into(),
        scale: 1,
        replicas: 4,
        value: 4,
    }]);
    agent.fits_unschedulable("small");

    let addon = ocm_score_hub::addon::metrics::Metrics::default();
    addon.reconcile.reconciled("addon", Duration::from_millis(5));
    addon.reconcile.failed("addon", "api");
    addon.wrote("ManifestWork", "create");
    addon.csr_decided("approved");
    addon.set_config_invalid(0);
    addon.set_leader(true);
    addon.watch_addons(exercised_addon_store());

    let thanos = ocm_score_hub::thanos::metrics::Metrics::new();
    thanos.observe_query("cpu", Duration::from_millis(30));
    thanos.query_error("cpu", "timeout");
    thanos.series_skipped("cpu", "nan", 1);
    thanos.write("scores_changed", "error");
    thanos.round("complete");
    thanos.set_clusters_scored(2);
    thanos.set_clusters_stale(0);
    thanos.set_leader(true);
    thanos.set_partial_response(false);
    thanos.set_last_complete_round(now);

    let tiering = ocm_score_hub::tiering::metrics::Metrics::default();
    tiering
        .reconcile
        .reconciled("tiered_placement", Duration::from_millis(5));
    tiering.completed(now);
    tiering.reconcile.failed("tiered_placement", "write_status");
    tiering.wrote("Placement");
    tiering.transition("Failover");
    tiering.diverged();
    tiering.event_failed();
    tiering.reservations(1);
    tiering.released_by_report(1);
    tiering.score_update(true);
    tiering.snapshot_builds.inc();
    tiering.set_leader(true);

    let explain = ocm_score_hub::explain_server::metrics::Metrics::default();
    explain.answered("GET", 200, Duration::from_millis(3));
    explain.tls_reloaded(true);
    explain.snapshot_builds.inc();

    vec![
        ("agent", agent.render()),
        ("explain-server", explain.render()),
        ("addon-manager", ModeMetrics::render(&addon)),
        ("thanos-scorer", thanos.render()),
        ("tiering", ModeMetrics::render(&tiering)),
    ]
}

/// The label names of one sample line (`name{a="x",b="y"} 1`).
fn sample_labels(line: &str) -> (String, BTreeSet<String>) {
    let name_end = line.find(['{', ' ']).unwrap_or(line.len());
    let name = line[..name_end].to_owned();
    let mut labels = BTreeSet::new();
    if line[name_end..].starts_with('{') {
        let mut rest = &line[name_end + 1..];
        while let Some(eq) = rest.find("=\"") {
            labels.insert(rest[..eq].trim_start_matches(',').to_owned());
            // Skip the quoted value, escapes included.
            let mut chars = rest[eq + 2..].char_indices();
            let mut end = None;
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        chars.next();
                    }
                    '"' => {
                        end = Some(eq + 2 + i + 1);
                        break;
                    }
                    _ => {}
                }
            }
            let Some(end) = end else { break };
            rest = &rest[end..];
            if rest.starts_with('}') {
                break;
            }
        }
    }
    (name, labels)
}

/// Every metric name Prometheus stores from our expositions.
fn exported() -> BTreeMap<String, Exported> {
    let mut out = BTreeMap::new();
    for (mode, text) in expositions() {
        let mut families: BTreeMap<String, String> = BTreeMap::new();
        let mut sampled: BTreeSet<String> = BTreeSet::new();
        for line in text.lines() {
            if let Some(declaration) = line.strip_prefix("# TYPE ") {
                let (family, kind) = declaration.split_once(' ').expect("# TYPE <name> <type>");
                families.insert(family.to_owned(), kind.to_owned());
                let names: Vec<String> = match kind {
                    "counter" => vec![format!("{family}_total")],
                    "histogram" => ["_bucket", "_sum", "_count"]
                        .iter()
                        .map(|s| format!("{family}{s}"))
                        .collect(),
                    "gauge" => vec![family.to_owned()],
                    other => {
                        panic!("{mode}: family {family} has type {other}, which this test does not know")
                    }
                };
                for name in names {
                    out.insert(
                        name,
                        Exported {
                            family: family.to_owned(),
                            kind: kind.to_owned(),
                            labels: BTreeSet::new(),
                        },
                    );
                }
            } else if !line.starts_with('#') && !line.is_empty() {
                let (name, mut labels) = sample_labels(line);
                labels.remove("le");
                let metric = out
                    .get_mut(&name)
                    .unwrap_or_else(|| panic!("{mode}: sample {name} of no declared family:\n{text}"));
                sampled.insert(metric.family.clone());
                metric.labels.extend(labels);
            }
        }
        let unexercised: Vec<&String> = families.keys().filter(|f| !sampled.contains(*f)).collect();
        assert!(
            unexercised.is_empty(),
            "{mode}: families without a sample, so their labels are unknown here: {unexercised:?}; \
             exercise them in expositions() (and list them in {DOCS})"
        );
    }
    out
}

// ------------------------------------------------------------------------------------------------
// What PromQL names.

/// A metric selector in a query: the metric and the label names it matches on.
#[derive(Debug, PartialEq)]
struct Selector {
    metric: String,
    labels: Vec<String>,
}

/// Every metric selector of a PromQL expression, found by the Thanos scorer's own scanner
/// (`freshness::selectors`, which already tells selectors from functions, keywords, label lists,
/// ranges, strings and numbers), with the label names each one matches on.
fn selectors(expr: &str) -> Vec<Selector> {
    ocm_score_hub::thanos::freshness::selectors(expr)
        .into_iter()
        .map(|selector| {
            let (metric, matchers) = selector.split_once('{').unwrap_or((selector.as_str(), ""));
            Selector {
                metric: metric.trim().to_owned(),
                labels: matcher_labels(matchers),
            }
        })
        .collect()
}

/// The label names of a matcher list's inside (`a="x", b=~"y"}`): the words outside quotes.
fn matcher_labels(matchers: &str) -> Vec<String> {
    let mut labels = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for c in matchers.chars() {
        if let Some(q) = quote {
            if escaped {
                escaped = false;
            } else if c == '\\' && q != '`' {
                escaped = true;
            } else if c == q {
                quote = None;
            }
            continue;
        }
        match c {
            '"' | '\'' | '`' => quote = Some(c),
            c if c.is_ascii_alphanumeric() || c == '_' || c == ':' => word.push(c),
            _ if !word.is_empty() => labels.push(std::mem::take(&mut word)),
            _ => {}
        }
    }
    labels
}

/// What is wrong with the selectors of `expr` (from `origin`) against what we export.
fn check_selectors(
    origin: &str,
    expr: &str,
    exported: &BTreeMap<String, Exported>,
    problems: &mut Vec<String>,
) {
    let found = selectors(expr);
    if found.is_empty() {
        problems.push(format!("{origin}: names no metric in {expr:?}"));
    }
    for selector in found {
        if selector.metric.is_empty() {
            problems.push(format!("{origin}: a selector without a metric name in {expr:?}"));
            continue;
        }
        let Some(metric) = exported.get(&selector.metric) else {
            problems.push(format!(
                "{origin}: {} is not a metric we export (counters end in _total, histograms in _bucket/_sum/_count)",
                selector.metric
            ));
            continue;
        };
        for label in selector.labels {
            if !metric.labels.contains(&label) && !TARGET_LABELS.contains(&label.as_str()) {
                problems.push(format!(
                    "{origin}: {} has no label {label} (it has {:?})",
                    selector.metric, metric.labels
                ));
            }
        }
    }
}

// ------------------------------------------------------------------------------------------------
// promtool.

fn promtool(args: &[&str]) -> (bool, String) {
    let output = Command::new("promtool")
        .args(args)
        .current_dir(repo_path(""))
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "running promtool: {e}. promtool is needed for the alert tests: install Debian's `prometheus` \
                 package (scripts/test.sh does), or put promtool on PATH"
            )
        });
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    (output.status.success(), text)
}

#[test]
fn alert_rules_pass_promtool_check_and_their_unit_tests() {
    let (ok, out) = promtool(&["check", "rules", ALERTS]);
    assert!(ok, "promtool check rules {ALERTS}:\n{out}");
    let (ok, out) = promtool(&["test", "rules", ALERT_TESTS]);
    assert!(ok, "promtool test rules {ALERT_TESTS}:\n{out}");
}

// ------------------------------------------------------------------------------------------------
// The files.

fn alert_rules() -> Vec<(String, String)> {
    let rules: serde_json::Value = serde_norway::from_str(&read(ALERTS)).expect("alerts.yaml parses");
    let mut out = Vec::new();
    for group in rules["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            let name = rule["alert"].as_str().expect("only alerting rules").to_owned();
            let expr = rule["expr"].as_str().expect("expr").to_owned();
            out.push((name, expr));
        }
    }
    assert!(!out.is_empty(), "{ALERTS} has no rules");
    out
}

fn dashboard() -> Value {
    serde_json::from_str(&read(DASHBOARD)).expect("the dashboard is JSON")
}

/// Every panel, row panels' children included.
fn panels(dashboard: &Value) -> Vec<&Value> {
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        out.push(panel);
        out.extend(panel["panels"].as_array().into_iter().flatten());
    }
    out
}

/// (where, PromQL) of every query of the dashboard: panel targets and query variables
/// (`label_values(metric, label)` counts as a selector of `metric`).
fn dashboard_queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for panel in panels(dashboard) {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("every target has an expr");
            let title = panel["title"].as_str().unwrap_or_default();
            out.push((format!("panel {title:?}"), expr.to_owned()));
        }
    }
    for variable in dashboard["templating"]["list"].as_array().expect("templating") {
        if variable["type"] == "query" {
            let query = variable["query"]["query"]
                .as_str()
                .or_else(|| variable["query"].as_str())
                .expect("a query variable's query");
            let inner = query
                .strip_prefix("label_values(")
                .and_then(|q| q.strip_suffix(')'))
                .and_then(|q| q.rsplit_once(','))
                .map(|(selector, _label)| selector.trim().to_owned())
                .unwrap_or_else(|| query.to_owned());
            out.push((format!("variable {}", variable["name"]), inner));
        }
    }
    out
}

/// The dashboard's variables, and Grafana's own.
fn dashboard_variables(dashboard: &Value) -> BTreeSet<String> {
    let mut names: BTreeSet<String> = dashboard["templating"]["list"]
        .as_array()
        .expect("templating")
        .iter()
        .filter_map(|v| v["name"].as_str().map(str::to_owned))
        .collect();
    names.extend(["__rate_interval", "__interval", "__range"].map(String::from));
    names
}

/// `expr` with Grafana's variables replaced by what Prometheus sees (durations, `.*`).
fn grafana_to_promql(expr: &str, variables: &BTreeSet<String>) -> Result<String, String> {
    let mut out = String::new();
    let mut rest = expr;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, len) = match after.strip_prefix('{') {
            Some(braced) => {
                let end = braced
                    .find('}')
                    .ok_or_else(|| format!("unclosed ${{ in {expr:?}"))?;
                (&braced[..end], end + 2)
            }
            None => {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], end)
            }
        };
        if !variables.contains(name) {
            return Err(format!("${name} is no variable of the dashboard in {expr:?}"));
        }
        out.push_str(if name.starts_with("__") { "5m" } else { ".*" });
        rest = &after[len..];
    }
    out.push_str(rest);
    Ok(out)
}

/// The documented metrics: name → (type, labels).
fn documented_metrics() -> BTreeMap<String, (String, BTreeSet<String>)> {
    let mut out = BTreeMap::new();
    for line in read(DOCS).lines() {
        let Some(row) = line.strip_prefix("| `ocm_score_") else {
            continue;
        };
        let cells: Vec<&str> = row.split(" | ").map(str::trim).collect();
        assert!(
            cells.len() >= 4,
            "{DOCS}: a metric row needs name, type, labels and meaning: {line}"
        );
        let name = format!("ocm_score_{}", cells[0].trim_end_matches('`'));
        let labels = cells[2]
            .split(',')
            .map(|l| l.trim().trim_matches('`').to_owned())
            .filter(|l| !l.is_empty() && l != "—")
            .collect();
        let previous = out.insert(name.clone(), (cells[1].to_owned(), labels));
        assert!(previous.is_none(), "{DOCS}: {name} is listed twice");
    }
    out
}

// ------------------------------------------------------------------------------------------------
// The checks.

#[test]
fn alerts_name_only_metrics_and_labels_we_export() {
    let exported = exported();
    let mut problems = Vec::new();
    for (alert, expr) in alert_rules() {
        check_selectors(&format!("{ALERTS}: {alert}"), &expr, &exported, &mut problems);
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn promtool_input_series_are_shaped_like_our_metrics() {
    let exported = exported();
    let tests: Value = serde_norway::from_str(&read(ALERT_TESTS)).expect("the promtool tests parse");
    let mut problems = Vec::new();
    let mut count = 0;
    for case in tests["tests"].as_array().expect("tests") {
        for input in case["input_series"].as_array().expect("input_series") {
            let series = input["series"].as_str().expect("series");
            check_selectors(
                &format!("{ALERT_TESTS}: {series}"),
                series,
                &exported,
                &mut problems,
            );
            // A counter's samples never go down (promtool's `a+bxn` with b >= 0, or constants).
            let name = &selectors(series)[0].metric;
            if exported.get(name).is_some_and(|m| m.kind == "counter") {
                let values = input["values"].as_str().expect("values");
                if values.contains('-') {
                    problems.push(format!("{ALERT_TESTS}: counter {series} decreases: {values}"));
                }
            }
            count += 1;
        }
    }
    assert!(count > 0, "no input series in {ALERT_TESTS}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_alert_has_a_firing_and_a_quiet_case() {
    let tests: Value = serde_norway::from_str(&read(ALERT_TESTS)).expect("the promtool tests parse");
    let mut firing = BTreeSet::new();
    let mut quiet = BTreeSet::new();
    for case in tests["tests"].as_array().expect("tests") {
        for check in case["alert_rule_test"].as_array().into_iter().flatten() {
            let name = check["alertname"].as_str().expect("alertname").to_owned();
            let expected = check["exp_alerts"].as_array().map_or(0, Vec::len);
            if expected == 0 { &mut quiet } else { &mut firing }.insert(name);
        }
    }
    for (alert, _) in alert_rules() {
        assert!(
            firing.contains(&alert),
            "{ALERT_TESTS} has no case where {alert} fires"
        );
        assert!(
            quiet.contains(&alert),
            "{ALERT_TESTS} has no case where {alert} stays quiet"
        );
    }
}

#[test]
fn dashboard_queries_name_only_metrics_we_export_and_are_valid_promql() {
    let exported = exported();
    let dashboard = dashboard();
    let variables = dashboard_variables(&dashboard);
    let queries = dashboard_queries(&dashboard);
    assert!(
        queries.len() > 10,
        "the dashboard has only {} queries",
        queries.len()
    );
    let mut problems = Vec::new();
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, (origin, expr)) in queries.iter().enumerate() {
        match grafana_to_promql(expr, &variables) {
            Ok(promql) => {
                check_selectors(
                    &format!("{DASHBOARD}: {origin}"),
                    &promql,
                    &exported,
                    &mut problems,
                );
                let quoted = serde_json::to_string(&promql).expect("a JSON string");
                rules.push_str(&format!(
                    "      - record: ocm_score_dashboard:query_{i}\n        expr: {quoted}\n"
                ));
            }
            Err(e) => problems.push(format!("{DASHBOARD}: {origin}: {e}")),
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // promtool parses every query as a recording rule's expression.
    let dir = TempDir::new("dashboard-promql");
    let file = dir.path().join("dashboard-queries.yaml");
    std::fs::write(&file, &rules).expect("writing the queries");
    let (ok, out) = promtool(&["check", "rules", &file.to_string_lossy()]);
    assert!(
        ok,
        "the dashboard's queries are not valid PromQL:\n{out}\n{rules}"
    );
}

#[test]
fn dashboard_takes_its_data_source_from_the_variable() {
    let dashboard = dashboard();
    let variable = dashboard["templating"]["list"]
        .as_array()
        .expect("templating")
        .iter()
        .find(|v| v["name"] == "datasource")
        .expect("a `datasource` variable");
    assert_eq!(variable["type"], "datasource");
    assert_eq!(variable["query"], "prometheus");
    let wants_variable = |what: &str, datasource: &Value| {
        assert_eq!(
            datasource["uid"], "${datasource}",
            "{what} must use the ${{datasource}} variable, not {datasource}"
        );
    };
    let mut count = 0;
    for panel in panels(&dashboard) {
        if panel["type"] == "row" {
            continue;
        }
        let title = panel["title"].as_str().unwrap_or_default();
        wants_variable(&format!("panel {title:?}"), &panel["datasource"]);
        let targets = panel["targets"].as_array().expect("a panel without queries");
        assert!(!targets.is_empty(), "panel {title:?} has no queries");
        for target in targets {
            wants_variable(&format!("a query of panel {title:?}"), &target["datasource"]);
        }
        count += 1;
    }
    assert!(count > 0, "no panels");
    for variable in dashboard["templating"]["list"].as_array().expect("templating") {
        if variable["type"] == "query" {
            wants_variable(&format!("variable {}", variable["name"]), &variable["datasource"]);
        }
    }
}

#[test]
fn docs_list_every_exported_metric_and_explain_every_alert() {
    let exported = exported();
    // Documented as queried: counters with `_total`, histograms under their family name.
    let mut expected: BTreeMap<String, (String, BTreeSet<String>)> = BTreeMap::new();
    for (name, metric) in &exported {
        let documented = if metric.kind == "histogram" {
            metric.family.clone()
        } else {
            name.clone()
        };
        expected.insert(documented, (metric.kind.clone(), metric.labels.clone()));
    }
    let documented = documented_metrics();
    let missing: Vec<&String> = expected.keys().filter(|n| !documented.contains_key(*n)).collect();
    let stale: Vec<&String> = documented.keys().filter(|n| !expected.contains_key(*n)).collect();
    assert!(missing.is_empty(), "{DOCS} does not list {missing:?}");
    assert!(
        stale.is_empty(),
        "{DOCS} lists metrics we do not export: {stale:?}"
    );
    for (name, (kind, labels)) in &expected {
        let (doc_kind, doc_labels) = &documented[name];
        assert_eq!(doc_kind, kind, "{DOCS}: the type of {name}");
        assert_eq!(doc_labels, labels, "{DOCS}: the labels of {name}");
    }
    let docs = read(DOCS);
    for (alert, _) in alert_rules() {
        assert!(
            docs.contains(&format!("### {alert}\n")),
            "{DOCS} does not explain {alert}"
        );
    }
}

#[test]
fn the_selector_parser_finds_metrics_and_skips_everything_else() {
    let found = selectors(
        r#"histogram_quantile(0.95, sum by (le, score) (rate(a_bucket{score=~"$score", x!="}"}[$__rate_interval])))
           and ignoring(result) b_total offset 5m > 1e3 - time() or sum(c) without (d) / on(e) group_left(f) g"#,
    );
    let names: Vec<&str> = found.iter().map(|s| s.metric.as_str()).collect();
    assert_eq!(names, ["a_bucket", "b_total", "c", "g"]);
    assert_eq!(found[0].labels, ["score", "x"]);
    assert_eq!(
        sample_labels(r#"m_total{a="x\"}",b="y"} 1"#),
        ("m_total".to_owned(), ["a", "b"].map(String::from).into())
    );
    let variables = ["cluster".to_owned(), "__range".to_owned()].into();
    assert_eq!(
        grafana_to_promql("increase(m{c=~\"$cluster\"}[$__range])", &variables).as_deref(),
        Ok("increase(m{c=~\".*\"}[5m])")
    );
    assert!(grafana_to_promql("m{c=\"${nope}\"}", &variables).is_err());
}
