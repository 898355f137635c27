//! `kubectl ocm-score scores`: the fleet's AddOnPlacementScores, one row per score object.

use jiff::Timestamp;
use ocm_score_api::{AddOnPlacementScore, ManagedCluster};
use ocm_score_scheduler::placement::selector::LabelMatcher;
use serde_json::{Value, json};
use std::collections::{BTreeMap, BTreeSet};

/// One AddOnPlacementScore object.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub cluster: String,
    pub resource: String,
    pub scores: BTreeMap<String, i32>,
    /// Since the object was last written.
    pub age: Option<jiff::SignedDuration>,
    pub valid_until: Option<Timestamp>,
    pub expired: bool,
}

impl Row {
    pub fn json(&self) -> Value {
        json!({
            "cluster": self.cluster,
            "resource": self.resource,
            "scores": self.scores,
            "ageSeconds": self.age.map(|a| a.as_secs()),
            "validUntil": self.valid_until.map(|t| t.to_string()),
            "expired": self.expired,
        })
    }
}

/// How to order the rows: by cluster (then resource), by age, by `validUntil`, or by a score's
/// value, highest first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SortBy {
    Cluster,
    Age,
    ValidUntil,
    Score(String),
}

impl std::str::FromStr for SortBy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "cluster" => SortBy::Cluster,
            "age" => SortBy::Age,
            "validUntil" => SortBy::ValidUntil,
            "" => return Err("--sort-by: expected cluster, age, validUntil or a score name".to_owned()),
            score => SortBy::Score(score.to_owned()),
        })
    }
}

fn last_written(s: &AddOnPlacementScore) -> Option<Timestamp> {
    let m = &s.metadata;
    m.managed_fields
        .iter()
        .flatten()
        .filter_map(|f| f.time.as_ref().map(|t| t.0))
        .max()
        .or(m.creation_timestamp.as_ref().map(|t| t.0))
}

/// The rows for `scores`, only of clusters whose labels match `labels` (when given), sorted.
pub fn rows(
    scores: &[AddOnPlacementScore],
    clusters: &[ManagedCluster],
    labels: Option<&LabelMatcher>,
    sort: &SortBy,
    now: Timestamp,
) -> Vec<Row> {
    let matching: Option<Vec<&str>> = labels.map(|selector| {
        clusters
            .iter()
            .filter(|c| {
                let labels = c.metadata.labels.as_ref();
                selector.matches(|k| labels.and_then(|l| l.get(k)).map(String::as_str))
            })
            .filter_map(|c| c.metadata.name.as_deref())
            .collect()
    });
    let mut out: Vec<Row> = scores
        .iter()
        .filter(|s| {
            matching
                .as_ref()
                .is_none_or(|m| m.contains(&s.metadata.namespace.as_deref().unwrap_or_default()))
        })
        .map(|s| {
            let status = s.status.as_ref();
            let valid_until = status.and_then(|st| st.valid_until.as_ref()).map(|t| t.0);
            Row {
                cluster: s.metadata.namespace.clone().unwrap_or_default(),
                resource: s.metadata.name.clone().unwrap_or_default(),
                scores: status
                    .iter()
                    .flat_map(|st| st.scores.iter())
                    .map(|sc| (sc.name.clone(), sc.value))
                    .collect(),
                age: last_written(s).map(|t| now.duration_since(t)),
                valid_until,
                expired: valid_until.is_some_and(|v| v <= now),
            }
        })
        .collect();
    out.sort_by(|a, b| {
        let by_name = (&a.cluster, &a.resource).cmp(&(&b.cluster, &b.resource));
        match sort {
            SortBy::Cluster => by_name,
            SortBy::Age => a.age.cmp(&b.age).then(by_name),
            SortBy::ValidUntil => a.valid_until.cmp(&b.valid_until).then(by_name),
            // Highest first; objects without the score last.
            SortBy::Score(name) => b.scores.get(name).cmp(&a.scores.get(name)).then(by_name),
        }
    });
    out
}

/// Only the score objects named `resource` (when given) and, in each, only the scores named in
/// `names` (when any): the agent publishes ten scores, which make a table wider than a terminal.
/// A name no row has (a typo, or a score nobody publishes) is an error naming the names there are;
/// without any row there is nothing to check a name against, and no error.
pub fn narrow(rows: Vec<Row>, resource: Option<&str>, names: &[String]) -> Result<Vec<Row>, String> {
    let rows: Vec<Row> = rows
        .into_iter()
        .filter(|r| resource.is_none_or(|name| r.resource == name))
        .collect();
    let known: BTreeSet<&str> = rows
        .iter()
        .flat_map(|r| r.scores.keys().map(String::as_str))
        .collect();
    let unknown: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| !known.contains(n))
        .collect();
    if !unknown.is_empty() && !rows.is_empty() {
        return Err(format!(
            "--score {}: no score object shown has a score of that name; they have {}",
            unknown.join(","),
            known.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    if names.is_empty() {
        return Ok(rows);
    }
    Ok(rows
        .into_iter()
        .map(|mut r| {
            r.scores.retain(|name, _| names.contains(name));
            r
        })
        .collect())
}

/// kubectl's short age: `45s`, `12m`, `3h`, `2d`.
fn age(d: Option<jiff::SignedDuration>) -> String {
    let Some(d) = d else { return "<unknown>".to_owned() };
    let s = d.as_secs().max(0);
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        7200..172_800 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86_400),
    }
}

/// The table: one column per score name found, `-` where an object lacks it.
pub fn table(rows: &[Row]) -> String {
    let mut names: Vec<&String> = rows.iter().flat_map(|r| r.scores.keys()).collect();
    names.sort();
    names.dedup();
    let mut header: Vec<String> = vec!["CLUSTER".into(), "RESOURCE".into()];
    header.extend(names.iter().map(|n| n.to_string()));
    header.extend(["AGE".into(), "VALID UNTIL".into()]);
    let mut lines: Vec<Vec<String>> = vec![header];
    for r in rows {
        let mut line = vec![r.cluster.clone(), r.resource.clone()];
        line.extend(
            names
                .iter()
                .map(|n| r.scores.get(*n).map_or_else(|| "-".to_owned(), i32::to_string)),
        );
        line.push(age(r.age));
        line.push(match (r.valid_until, r.expired) {
            (Some(v), true) => format!("{v} (EXPIRED)"),
            (Some(v), false) => v.to_string(),
            (None, _) => "<never>".to_owned(),
        });
        lines.push(line);
    }
    let widths: Vec<usize> = (0..lines[0].len())
        .map(|i| lines.iter().map(|l| l[i].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for l in &lines {
        let cells: Vec<String> = l.iter().zip(&widths).map(|(c, w)| format!("{c:<w$}")).collect();
        out.push_str(cells.join("   ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use ocm_score_api::{AddOnPlacementScoreItem, AddOnPlacementScoreStatus, ObjectMeta};

    fn t(s: &str) -> Timestamp {
        s.parse().expect("time")
    }

    fn score(cluster: &str, values: &[(&str, i32)], valid_until: Option<&str>) -> AddOnPlacementScore {
        AddOnPlacementScore {
            metadata: ObjectMeta {
                namespace: Some(cluster.into()),
                name: Some("resource-usage-score".into()),
                creation_timestamp: Some(Time(t("2026-11-26T10:00:00Z"))),
                ..Default::default()
            },
            status: Some(AddOnPlacementScoreStatus {
                scores: values
                    .iter()
                    .map(|(n, v)| AddOnPlacementScoreItem {
                        name: (*n).into(),
                        value: *v,
                    })
                    .collect(),
                valid_until: valid_until.map(|v| Time(t(v))),
                ..Default::default()
            }),
        }
    }

    fn cluster(name: &str, env: &str) -> ManagedCluster {
        ManagedCluster {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some([("env".to_owned(), env.to_owned())].into()),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn rows_filter_by_cluster_labels_sort_and_mark_expired() {
        let now = t("2026-11-26T10:30:00Z");
        let scores = vec![
            score("a", &[("cpu", 10)], Some("2026-11-26T10:20:00Z")),
            score("b", &[("cpu", 50), ("mem", -3)], Some("2026-11-26T11:00:00Z")),
            score("c", &[("mem", 7)], None),
        ];
        let clusters = vec![cluster("a", "prod"), cluster("b", "prod"), cluster("c", "dev")];
        let by_cpu = rows(&scores, &clusters, None, &SortBy::Score("cpu".into()), now);
        let order: Vec<&str> = by_cpu.iter().map(|r| r.cluster.as_str()).collect();
        assert_eq!(order, ["b", "a", "c"]);
        assert!(by_cpu[1].expired && !by_cpu[0].expired && !by_cpu[2].expired);
        assert_eq!(by_cpu[0].age, Some(jiff::SignedDuration::from_mins(30)));

        let prod = LabelMatcher::parse("env=prod").expect("selector");
        let only = rows(&scores, &clusters, Some(&prod), &SortBy::Cluster, now);
        assert_eq!(only.len(), 2);
        let text = table(&only);
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].starts_with("CLUSTER") && lines[0].contains("cpu") && lines[0].contains("mem"),
            "{text}"
        );
        assert!(
            lines[1].contains("(EXPIRED)") && lines[1].contains(" - "),
            "{text}"
        );
    }

    #[test]
    fn narrow_keeps_the_named_resource_and_scores_and_refuses_unknown_ones() {
        let now = t("2026-11-26T10:30:00Z");
        let mut thanos = score("a", &[("cpuBusiest", 40)], None);
        thanos.metadata.name = Some("thanos-score".into());
        let scores = vec![
            score("a", &[("cpu", 10), ("mem", 3)], None),
            score("b", &[("cpu", 50), ("mem", -3)], None),
            thanos,
        ];
        let all = rows(&scores, &[], None, &SortBy::Cluster, now);
        assert_eq!(all.len(), 3);
        let typo = narrow(all.clone(), None, &["cpu".to_owned(), "gpu".to_owned()])
            .expect_err("gpu is no score here");
        assert_eq!(
            typo,
            "--score gpu: no score object shown has a score of that name; they have cpu, cpuBusiest, mem"
        );
        let only_cpu = narrow(all.clone(), None, &["cpu".to_owned()]).expect("cpu is a score");
        assert_eq!(only_cpu.len(), 3, "rows stay; their other scores go");
        assert!(only_cpu.iter().all(|r| r.scores.keys().all(|k| k == "cpu")));
        let text = table(&only_cpu);
        assert!(!text.contains("mem") && !text.contains("cpuBusiest"), "{text}");
        let thanos_only = narrow(all.clone(), Some("thanos-score"), &[]).expect("no names");
        assert_eq!(thanos_only.len(), 1);
        assert_eq!(thanos_only[0].scores.get("cpuBusiest"), Some(&40));
        // The names a resource's objects have, not the fleet's.
        assert!(narrow(all.clone(), Some("thanos-score"), &["cpu".to_owned()]).is_err());
        // Nothing to check against.
        assert_eq!(narrow(all, Some("absent"), &["cpu".to_owned()]), Ok(Vec::new()));
    }
}
