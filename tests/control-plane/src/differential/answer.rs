//! What OCM decided and what `simulate` answered for one Placement, read from each side, and their differences.

use super::*;

/// One placement's answer, from OCM's objects or from `simulate`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// Selected clusters, sorted.
    pub decisions: Vec<String>,
    /// Decision groups: (index, name, clusters sorted).
    pub groups: Vec<(i64, String, Vec<String>)>,
    pub misconfigured: bool,
    /// PlacementSatisfied: (status, reason, message).
    pub satisfied: (String, String, String),
}

/// The items of a `kubectl get -o yaml` List.
pub fn parse_snapshot(yaml: &str) -> Result<Vec<Value>, String> {
    let list: Value = serde_norway::from_str(yaml).map_err(|e| format!("snapshot is not YAML: {e}"))?;
    Ok(list["items"].as_array().cloned().unwrap_or_default())
}

pub(super) fn is(o: &Value, kind: &str, namespace: &str) -> bool {
    o["kind"] == kind && o["metadata"]["namespace"] == namespace
}

/// The placement `namespace/name` among snapshot items.
pub fn find_placement<'a>(items: &'a [Value], namespace: &str, name: &str) -> Option<&'a Value> {
    items
        .iter()
        .find(|o| is(o, "Placement", namespace) && o["metadata"]["name"] == name)
}

/// The PlacementDecisions of placement `namespace/name` among snapshot items.
pub fn decisions_of<'a>(items: &'a [Value], namespace: &str, name: &str) -> Vec<&'a Value> {
    items
        .iter()
        .filter(|o| {
            is(o, "PlacementDecision", namespace)
                && o["metadata"]["labels"]["cluster.open-cluster-management.io/placement"] == name
        })
        .collect()
}

pub(super) fn condition(placement: &Value, kind: &str) -> Option<(String, String, String)> {
    placement["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .map(|c| {
            let s = |f: &str| c[f].as_str().unwrap_or_default().to_owned();
            (s("status"), s("reason"), s("message"))
        })
}

/// Whether OCM has written its answer for the placement: both conditions, and PlacementDecisions
/// holding as many clusters as the status counts (none when it is misconfigured: a bad
/// `clustersPerDecisionGroup` leaves no PlacementDecision at all).
pub fn ocm_decided(placement: &Value, decisions: &[&Value]) -> bool {
    let (Some(misconfigured), Some(_)) = (
        condition(placement, "PlacementMisconfigured"),
        condition(placement, "PlacementSatisfied"),
    ) else {
        return false;
    };
    if misconfigured.0 == "True" {
        return true;
    }
    let selected = placement["status"]["numberOfSelectedClusters"]
        .as_i64()
        .unwrap_or(0);
    let written: usize = decisions
        .iter()
        .map(|d| d["status"]["decisions"].as_array().map_or(0, Vec::len))
        .sum();
    !decisions.is_empty() && written as i64 == selected
}

/// OCM's answer from its Placement status and PlacementDecisions.
pub fn ocm_answer(placement: &Value, decisions: &[&Value]) -> Answer {
    let mut groups: BTreeMap<i64, (String, Vec<String>)> = BTreeMap::new();
    for d in decisions {
        let labels = &d["metadata"]["labels"];
        let index = labels["cluster.open-cluster-management.io/decision-group-index"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or(-1);
        let group_name = labels["cluster.open-cluster-management.io/decision-group-name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let entry = groups.entry(index).or_insert((group_name, Vec::new()));
        entry.1.extend(
            d["status"]["decisions"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c["clusterName"].as_str().map(str::to_owned)),
        );
    }
    let groups: Vec<(i64, String, Vec<String>)> = groups
        .into_iter()
        .map(|(i, (n, mut c))| {
            c.sort();
            (i, n, c)
        })
        .collect();
    let mut all: Vec<String> = groups.iter().flat_map(|g| g.2.clone()).collect();
    all.sort();
    Answer {
        decisions: all,
        groups,
        misconfigured: condition(placement, "PlacementMisconfigured").is_some_and(|c| c.0 == "True"),
        satisfied: condition(placement, "PlacementSatisfied").unwrap_or_default(),
    }
}

/// `simulate -o json --explain`'s answer for one placement.
pub fn simulate_answer(entry: &Value) -> Result<Answer, String> {
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .into_iter()
            .flatten()
            .filter_map(|s| s.as_str().map(str::to_owned))
            .collect()
    };
    if let Some(skipped) = entry.get("skipped") {
        return Err(format!("simulate skipped the placement: {skipped}"));
    }
    let mut decisions = strings(&entry["decisions"]);
    decisions.sort();
    let groups = match entry.get("groups") {
        Some(groups) => groups
            .as_array()
            .into_iter()
            .flatten()
            .map(|g| {
                let mut clusters = strings(&g["clusters"]);
                clusters.sort();
                (
                    g["index"].as_i64().unwrap_or(-1),
                    g["name"].as_str().unwrap_or_default().to_owned(),
                    clusters,
                )
            })
            .collect(),
        // Without a decision strategy OCM writes one group of everything (the CRD default 100%).
        None => vec![(0, String::new(), decisions.clone())],
    };
    let satisfied = entry["explain"]["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "PlacementSatisfied")
        .map(|c| {
            let s = |f: &str| c[f].as_str().unwrap_or_default().to_owned();
            (s("status"), s("reason"), s("message"))
        })
        .ok_or_else(|| "simulate's --explain output has no PlacementSatisfied condition".to_owned())?;
    Ok(Answer {
        decisions,
        groups,
        misconfigured: entry["misconfigured"].as_bool().unwrap_or(false),
        satisfied,
    })
}

/// What differs between OCM's answer and simulate's, one line each (empty: they agree).
pub fn differences(ocm: &Answer, simulate: &Answer) -> Vec<String> {
    let mut out = Vec::new();
    if ocm.decisions != simulate.decisions {
        out.push(format!(
            "decisions: OCM {:?}, simulate {:?}",
            ocm.decisions, simulate.decisions
        ));
    }
    if ocm.groups != simulate.groups {
        out.push(format!(
            "decision groups (index, name, clusters): OCM {:?}, simulate {:?}",
            ocm.groups, simulate.groups
        ));
    }
    if ocm.misconfigured != simulate.misconfigured {
        out.push(format!(
            "PlacementMisconfigured: OCM {}, simulate {}",
            ocm.misconfigured, simulate.misconfigured
        ));
    }
    // The message of an error status is the error's own text; status and reason must agree.
    let (a, b) = (&ocm.satisfied, &simulate.satisfied);
    let compare_message = a.1 != "NotAllDecisionsScheduled" || a.2.ends_with("cluster decisions unscheduled");
    if a.0 != b.0 || a.1 != b.1 || (compare_message && a.2 != b.2) {
        out.push(format!("PlacementSatisfied: OCM {a:?}, simulate {b:?}"));
    }
    out
}
