//! The rules of a TieredPlacement spec that relate several fields, which its CRD's structural
//! schema cannot express. The planner runs them first; an invalid spec becomes
//! `Ready=False, reason=InvalidSpec` naming the field.

use crate::placement::selector::LabelMatcher;
use ocm_score_api::crd::tiered_placement::*;
use ocm_score_api::duration;
use ocm_score_api::names::{is_dns_label, is_dns_subdomain};
/// Checks the rules that relate several fields, which the schema cannot express. Returns every
/// error found, each naming its field; an empty list means the spec is valid.
pub fn validate(spec: &TieredPlacementSpec) -> Vec<SpecError> {
    let mut errors = Vec::new();
    if let Some(name) = &spec.placement_name
        && !name.is_empty()
        && !is_dns_label(name)
    {
        errors.push(SpecError::new(
            "spec.placementName",
            format!("{name:?} is not a DNS label (lowercase letters, digits and '-', at most 63)"),
        ));
    }
    if spec.tiers.is_empty() || spec.tiers.len() > MAX_TIERS {
        errors.push(SpecError::new(
            "spec.tiers",
            format!(
                "{} tiers; between 1 and {MAX_TIERS} are allowed",
                spec.tiers.len()
            ),
        ));
    }
    for (i, tier) in spec.tiers.iter().enumerate() {
        if !is_dns_label(&tier.name) {
            errors.push(SpecError::new(
                format!("spec.tiers[{i}].name"),
                format!(
                    "{:?} is not a DNS label (lowercase letters, digits and '-', at most 63)",
                    tier.name
                ),
            ));
        }
        if let Some(j) = spec.tiers[..i].iter().position(|t| t.name == tier.name) {
            errors.push(SpecError::new(
                format!("spec.tiers[{i}].name"),
                format!("{:?} is already the name of spec.tiers[{j}]", tier.name),
            ));
        }
        if let Some(m) = tier.min_clusters
            && m < 1
        {
            errors.push(SpecError::new(
                format!("spec.tiers[{i}].minClusters"),
                format!("{m}; it must be at least 1"),
            ));
        }
    }
    match (spec.mode, spec.number_of_clusters) {
        (_, Some(n)) if n < 0 => errors.push(SpecError::new(
            "spec.numberOfClusters",
            format!("{n} is negative; it must be 0 or more"),
        )),
        (TieringMode::Overflow, None) => errors.push(SpecError::new(
            "spec.numberOfClusters",
            "required in mode Overflow (at least 1)",
        )),
        (TieringMode::Overflow, Some(0)) => errors.push(SpecError::new(
            "spec.numberOfClusters",
            "0; mode Overflow needs at least 1",
        )),
        _ => {}
    }
    let t = &spec.template;
    for (set, field) in [
        (!t.cluster_sets.is_empty(), "spec.template.clusterSets"),
        (!t.predicates.is_empty(), "spec.template.predicates"),
        (t.number_of_clusters.is_some(), "spec.template.numberOfClusters"),
    ] {
        if set {
            errors.push(SpecError::new(
                field,
                "must not be set: the controller derives it from the tiers",
            ));
        }
    }
    // Copied into the child as they are: a value api v1.3.0's Placement CRD refuses would make
    // every apply of the child fail, so it is refused here, naming the field and the value.
    errors.extend(t.v1_3_field_errors("spec.template"));
    if let Some(cap) = &spec.capacity {
        for (i, rule) in cap.rules.iter().enumerate() {
            let base = format!("spec.capacity.rules[{i}]");
            match (&rule.fits, &rule.score) {
                (Some(fits), None) => {
                    if fits.at_least_replicas < 0 {
                        errors.push(SpecError::new(
                            format!("{base}.fits.atLeastReplicas"),
                            format!("{} is negative", fits.at_least_replicas),
                        ));
                    }
                    if let Some(exit) = fits.exit_below_replicas
                        && (exit < 0 || exit > fits.at_least_replicas)
                    {
                        errors.push(SpecError::new(
                            format!("{base}.fits.exitBelowReplicas"),
                            format!(
                                "{exit}; it must lie in 0..=atLeastReplicas ({})",
                                fits.at_least_replicas
                            ),
                        ));
                    }
                    if let Some(scale) = fits.scale
                        && scale < 1
                    {
                        errors.push(SpecError::new(
                            format!("{base}.fits.scale"),
                            format!("{scale}; it must be at least 1"),
                        ));
                    }
                    if !is_dns_label(&fits.shape) {
                        errors.push(SpecError::new(
                            format!("{base}.fits.shape"),
                            format!("{:?} is not a DNS label", fits.shape),
                        ));
                    }
                }
                (None, Some(score)) => {
                    if !(-100..=100).contains(&score.at_least) {
                        errors.push(SpecError::new(
                            format!("{base}.score.atLeast"),
                            format!("{} is outside -100..100", score.at_least),
                        ));
                    }
                    if let Some(exit) = score.exit_below
                        && (!(-100..=100).contains(&exit) || exit > score.at_least)
                    {
                        errors.push(SpecError::new(
                            format!("{base}.score.exitBelow"),
                            format!(
                                "{exit}; it must lie in -100..100 and not above atLeast ({})",
                                score.at_least
                            ),
                        ));
                    }
                    if score.resource_name.is_empty() {
                        errors.push(SpecError::new(
                            format!("{base}.score.resourceName"),
                            "must not be empty",
                        ));
                    }
                    if score.score_name.is_empty() {
                        errors.push(SpecError::new(
                            format!("{base}.score.scoreName"),
                            "must not be empty",
                        ));
                    }
                }
                _ => errors.push(SpecError::new(base, "set exactly one of fits and score")),
            }
        }
    }
    if let Some(w) = &spec.workload {
        if !is_dns_label(&w.shape) {
            errors.push(SpecError::new(
                "spec.workload.shape",
                format!("{:?} is not a DNS label (a WorkloadShape's name)", w.shape),
            ));
        }
        if w.replicas_per_cluster < 1 {
            errors.push(SpecError::new(
                "spec.workload.replicasPerCluster",
                format!("{}; it must be at least 1", w.replicas_per_cluster),
            ));
        }
    }
    match spec.timings() {
        Err(e) => errors.push(e),
        Ok(t) => {
            if t.hold_down > t.max_hold_down {
                errors.push(SpecError::new(
                    "spec.failback.holdDown",
                    format!(
                        "{:?} is longer than maxHoldDown ({:?})",
                        spec.failback.hold_down.as_deref().unwrap_or("15m"),
                        spec.failback.max_hold_down.as_deref().unwrap_or("4h")
                    ),
                ));
            }
            if t.max_hold_down > MAX_HOLD_DOWN {
                errors.push(SpecError::new("spec.failback.maxHoldDown", "is longer than 24h"));
            }
            if t.debounce > MAX_DEBOUNCE {
                errors.push(SpecError::new("spec.capacity.debounce", "is longer than 1h"));
            }
            if !(1..=9).contains(&t.max_transitions_per_hour) {
                errors.push(SpecError::new(
                    "spec.stabilization.maxTransitionsPerHour",
                    format!("{}; it must lie in 1..9", t.max_transitions_per_hour),
                ));
            }
            if let Some(per_step) = spec.failback.max_clusters_per_step
                && per_step < 1
            {
                errors.push(SpecError::new(
                    "spec.failback.maxClustersPerStep",
                    format!("{per_step}; it must be at least 1"),
                ));
            }
        }
    }
    if let Some(overlap) = &spec.failback.overlap
        && let Ok(d) = duration::parse(overlap)
        && d > MAX_OVERLAP
    {
        errors.push(SpecError::new(
            "spec.failback.overlap",
            format!("{overlap:?} is longer than 24h"),
        ));
    }
    if let Some(w) = &spec.workload_health {
        validate_workload_health(w, &mut errors);
    }
    if let Some(o) = &spec.override_
        && !o.tier.is_empty()
        && !spec.tiers.iter().any(|t| t.name == o.tier)
    {
        errors.push(SpecError::new(
            "spec.override.tier",
            format!("{:?} names no tier", o.tier),
        ));
    }
    errors
}

fn validate_workload_health(w: &WorkloadHealthPolicy, errors: &mut Vec<SpecError>) {
    const BASE: &str = "spec.workloadHealth";
    match (&w.manifest_work_replica_set, &w.manifest_work_selector) {
        (Some(name), None) => {
            if !is_dns_subdomain(name) {
                errors.push(SpecError::new(
                    format!("{BASE}.manifestWorkReplicaSet"),
                    format!("{name:?} is not a valid object name (a DNS subdomain)"),
                ));
            }
        }
        (None, Some(selector))
            if selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
                && selector.match_expressions.as_ref().is_none_or(|e| e.is_empty()) =>
        {
            errors.push(SpecError::new(
                format!("{BASE}.manifestWorkSelector"),
                "is empty (no matchLabels, no matchExpressions) and would match every ManifestWork; name the workload's labels",
            ));
        }
        (None, Some(selector)) => {
            if let Err(e) = LabelMatcher::from_selector(Some(selector)) {
                errors.push(SpecError::new(format!("{BASE}.manifestWorkSelector"), e));
            }
        }
        _ => errors.push(SpecError::new(
            BASE,
            "set exactly one of manifestWorkReplicaSet and manifestWorkSelector",
        )),
    }
    if let Some(r) = &w.resource {
        if r.resource.is_empty() {
            errors.push(SpecError::new(
                format!("{BASE}.resource.resource"),
                "must not be empty",
            ));
        }
        if r.name.is_empty() {
            errors.push(SpecError::new(
                format!("{BASE}.resource.name"),
                "must not be empty",
            ));
        }
    }
    if let Some(h) = &w.healthy {
        match (&h.well_known, &h.json_path) {
            (Some(_), Some(_)) => errors.push(SpecError::new(
                format!("{BASE}.healthy"),
                "set at most one of wellKnown and jsonPath",
            )),
            (None, Some(j)) => {
                if j.name.is_empty() {
                    errors.push(SpecError::new(
                        format!("{BASE}.healthy.jsonPath.name"),
                        "must not be empty",
                    ));
                }
                if j.at_least < 1 {
                    errors.push(SpecError::new(
                        format!("{BASE}.healthy.jsonPath.atLeast"),
                        format!("{}; it must be at least 1", j.at_least),
                    ));
                }
            }
            _ => {}
        }
    }
    let range = 0..=MAX_WORKLOAD_SECONDS;
    if let Some(t) = w.toleration_seconds
        && !range.contains(&t)
    {
        errors.push(SpecError::new(
            format!("{BASE}.tolerationSeconds"),
            format!("{t}; it must lie in 0..{MAX_WORKLOAD_SECONDS}"),
        ));
    }
    if let Some(g) = w.grace_period_seconds {
        if w.purge != PurgeMode::Graciously {
            errors.push(SpecError::new(
                format!("{BASE}.gracePeriodSeconds"),
                format!(
                    "{g}; only purge Graciously has a grace period (purge is {:?})",
                    w.purge
                ),
            ));
        } else if !range.contains(&g) {
            errors.push(SpecError::new(
                format!("{BASE}.gracePeriodSeconds"),
                format!("{g}; it must lie in 0..{MAX_WORKLOAD_SECONDS}"),
            ));
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use ocm_score_api::{ClusterPredicate, SortBy};
    use std::time::Duration;

    fn tier(name: &str) -> Tier {
        Tier {
            name: name.into(),
            cluster_sets: vec![name.into()],
            ..Tier::default()
        }
    }

    fn valid() -> TieredPlacementSpec {
        TieredPlacementSpec {
            tiers: vec![tier("east"), tier("west")],
            ..TieredPlacementSpec::default()
        }
    }

    fn fields(spec: &TieredPlacementSpec) -> Vec<String> {
        validate(spec).into_iter().map(|e| e.field).collect()
    }

    #[test]
    fn a_minimal_spec_is_valid() {
        assert_eq!(validate(&valid()), vec![]);
    }

    #[test]
    fn tier_names_are_unique_dns_labels_and_1_to_16() {
        let mut s = valid();
        s.tiers[1].name = "east".into();
        assert_eq!(fields(&s), ["spec.tiers[1].name"]);
        s.tiers[1].name = "West_1".into();
        assert_eq!(fields(&s), ["spec.tiers[1].name"]);
        s.tiers.clear();
        assert_eq!(fields(&s), ["spec.tiers"]);
        s.tiers = (0..17).map(|i| tier(&format!("t{i}"))).collect();
        assert_eq!(fields(&s), ["spec.tiers"]);
    }

    #[test]
    fn score_bands_must_be_ordered_and_in_range() {
        let mut s = valid();
        s.capacity = Some(CapacityPolicy {
            rules: vec![
                CapacityRule {
                    score: Some(ScoreRule {
                        resource_name: "r".into(),
                        score_name: "s".into(),
                        at_least: 10,
                        exit_below: Some(20),
                    }),
                    ..CapacityRule::default()
                },
                CapacityRule {
                    fits: Some(FitsRule {
                        shape: "a100".into(),
                        at_least_replicas: 2,
                        exit_below_replicas: Some(4),
                        scale: None,
                    }),
                    ..CapacityRule::default()
                },
                CapacityRule::default(),
            ],
            ..CapacityPolicy::default()
        });
        assert_eq!(
            fields(&s),
            [
                "spec.capacity.rules[0].score.exitBelow",
                "spec.capacity.rules[1].fits.exitBelowReplicas",
                "spec.capacity.rules[2]"
            ]
        );
    }

    #[test]
    fn overflow_needs_a_positive_number_and_negatives_are_refused() {
        let mut s = valid();
        s.mode = TieringMode::Overflow;
        assert_eq!(fields(&s), ["spec.numberOfClusters"]);
        s.number_of_clusters = Some(0);
        assert_eq!(fields(&s), ["spec.numberOfClusters"]);
        s.number_of_clusters = Some(2);
        assert!(fields(&s).is_empty());
        s.mode = TieringMode::Failover;
        s.number_of_clusters = Some(-1);
        let e = validate(&s);
        assert_eq!(e[0].field, "spec.numberOfClusters");
        assert!(e[0].to_string().contains("-1"), "{}", e[0]);
    }

    #[test]
    fn template_may_not_choose_clusters() {
        let mut s = valid();
        s.template.cluster_sets = vec!["x".into()];
        s.template.number_of_clusters = Some(1);
        s.template.predicates = vec![ClusterPredicate::default()];
        assert_eq!(
            fields(&s),
            [
                "spec.template.clusterSets",
                "spec.template.predicates",
                "spec.template.numberOfClusters"
            ]
        );
    }

    #[test]
    fn template_sort_and_rate_limit_must_be_what_api_v1_3_accepts() {
        let mut s = valid();
        s.template.sort_by = Some(SortBy::Score);
        s.template.score_rate_limit = Some("30s".into());
        assert!(fields(&s).is_empty(), "{:?}", validate(&s));
        s.template.sort_by = Some(SortBy::from("Random"));
        s.template.score_rate_limit = Some("1m30s".into());
        let e = validate(&s);
        assert_eq!(
            e.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
            ["spec.template.sortBy", "spec.template.scoreRateLimit"]
        );
        assert!(e[0].to_string().contains("\"Random\""), "{}", e[0]);
        assert!(e[1].to_string().contains("\"1m30s\""), "{}", e[1]);
    }

    #[test]
    fn durations_are_bounded_and_parsed() {
        let mut s = valid();
        s.failback.hold_down = Some("5h".into());
        s.failback.max_hold_down = Some("4h".into());
        assert_eq!(fields(&s), ["spec.failback.holdDown"]);
        s.failback.max_hold_down = Some("25h".into());
        assert_eq!(fields(&s), ["spec.failback.maxHoldDown"]);
        s.failback.max_hold_down = Some("six hours".into());
        let e = validate(&s);
        assert_eq!(e[0].field, "spec.failback.maxHoldDown");
        assert!(e[0].message.contains("six hours"), "{}", e[0]);
        s.failback = FailbackPolicy::default();
        s.capacity = Some(CapacityPolicy {
            debounce: Some("61m".into()),
            ..CapacityPolicy::default()
        });
        assert_eq!(fields(&s), ["spec.capacity.debounce"]);
    }

    #[test]
    fn the_workload_names_a_shape_and_at_least_one_replica() {
        let mut s = valid();
        s.workload = Some(WorkloadFootprint {
            shape: "A100 x1".into(),
            replicas_per_cluster: 0,
        });
        let e = validate(&s);
        assert_eq!(
            fields(&s),
            ["spec.workload.shape", "spec.workload.replicasPerCluster"]
        );
        assert!(e[0].to_string().contains("\"A100 x1\""), "{}", e[0]);
        assert!(e[1].to_string().contains("0; it must be at least 1"), "{}", e[1]);
        s.workload = Some(WorkloadFootprint {
            shape: "a100-x1".into(),
            replicas_per_cluster: 4,
        });
        assert!(fields(&s).is_empty());
    }

    fn health(yaml: &str) -> TieredPlacementSpec {
        let mut s = valid();
        s.workload_health = Some(serde_norway::from_str(yaml).unwrap());
        s
    }

    #[test]
    fn workload_health_needs_exactly_one_work_source() {
        assert!(fields(&health("manifestWorkReplicaSet: web")).is_empty());
        assert!(fields(&health("manifestWorkSelector: {matchLabels: {app: web}}")).is_empty());
        assert_eq!(fields(&health("{}")), ["spec.workloadHealth"]);
        assert_eq!(
            fields(&health(
                "{manifestWorkReplicaSet: web, manifestWorkSelector: {matchLabels: {app: web}}}"
            )),
            ["spec.workloadHealth"]
        );
        let e = validate(&health("manifestWorkReplicaSet: Web_1"));
        assert_eq!(e[0].field, "spec.workloadHealth.manifestWorkReplicaSet");
        assert!(e[0].message.contains("\"Web_1\""), "{}", e[0]);
        for empty in [
            "manifestWorkSelector: {}",
            "manifestWorkSelector: {matchLabels: {}, matchExpressions: []}",
        ] {
            let e = validate(&health(empty));
            assert_eq!(e.len(), 1, "{empty}: {e:?}");
            assert_eq!(e[0].field, "spec.workloadHealth.manifestWorkSelector");
            assert!(e[0].message.contains("every ManifestWork"), "{}", e[0]);
        }
        let e = validate(&health(
            "manifestWorkSelector: {matchExpressions: [{key: app, operator: Near}]}",
        ));
        assert_eq!(e[0].field, "spec.workloadHealth.manifestWorkSelector");
        assert!(e[0].message.contains("Near"), "{}", e[0]);
    }

    #[test]
    fn workload_health_bounds_its_times_and_names_its_rule() {
        let e = validate(&health("{manifestWorkReplicaSet: web, tolerationSeconds: 86401}"));
        assert_eq!(e[0].field, "spec.workloadHealth.tolerationSeconds");
        assert!(e[0].message.contains("86401"), "{}", e[0]);
        assert!(fields(&health("{manifestWorkReplicaSet: web, tolerationSeconds: 0}")).is_empty());
        let e = validate(&health(
            "{manifestWorkReplicaSet: web, purge: Never, gracePeriodSeconds: 60}",
        ));
        assert_eq!(e[0].field, "spec.workloadHealth.gracePeriodSeconds");
        assert!(e[0].message.contains("Never"), "{}", e[0]);
        assert_eq!(
            fields(&health("{manifestWorkReplicaSet: web, gracePeriodSeconds: -1}")),
            ["spec.workloadHealth.gracePeriodSeconds"]
        );
        assert_eq!(
            fields(&health(
                "{manifestWorkReplicaSet: web, healthy: {wellKnown: {}, jsonPath: {name: r, atLeast: 1}}}"
            )),
            ["spec.workloadHealth.healthy"]
        );
        assert_eq!(
            fields(&health(
                "{manifestWorkReplicaSet: web, healthy: {jsonPath: {name: '', atLeast: 1}}}"
            )),
            ["spec.workloadHealth.healthy.jsonPath.name"]
        );
        for bad in ["0", "-3"] {
            let e = validate(&health(&format!(
                "{{manifestWorkReplicaSet: web, healthy: {{jsonPath: {{name: r, atLeast: {bad}}}}}}}"
            )));
            assert_eq!(e.len(), 1, "{e:?}");
            assert_eq!(e[0].field, "spec.workloadHealth.healthy.jsonPath.atLeast");
            assert!(e[0].message.contains(bad), "{}", e[0]);
        }
        assert_eq!(
            fields(&health(
                "{manifestWorkReplicaSet: web, resource: {resource: '', name: web}}"
            )),
            ["spec.workloadHealth.resource.resource"]
        );
        let w = health("manifestWorkReplicaSet: web").workload_health.unwrap();
        assert_eq!(w.toleration(), Duration::from_secs(300));
        assert_eq!(w.grace(), Some(Duration::from_secs(600)));
        assert_eq!(w.replica_set_label_value("apps").as_deref(), Some("apps.web"));
    }

    #[test]
    fn overlap_is_parsed_and_at_most_a_day() {
        let mut s = valid();
        s.failback.overlap = Some("10m".into());
        assert!(fields(&s).is_empty());
        assert_eq!(s.timings().unwrap().overlap, Duration::from_secs(600));
        s.failback.overlap = Some("25h".into());
        assert_eq!(fields(&s), ["spec.failback.overlap"]);
        s.failback.overlap = Some("soon".into());
        let e = validate(&s);
        assert_eq!(e[0].field, "spec.failback.overlap");
        assert!(e[0].message.contains("soon"), "{}", e[0]);
    }

    #[test]
    fn override_must_name_a_tier() {
        let mut s = valid();
        s.override_ = Some(TierOverride { tier: "north".into() });
        assert_eq!(fields(&s), ["spec.override.tier"]);
        s.override_ = Some(TierOverride { tier: "west".into() });
        assert!(fields(&s).is_empty());
    }

    #[test]
    fn the_spec_reads_the_design_example() {
        let yaml = r#"
placementName: llm-inference
mode: Overflow
numberOfClusters: 3
tiers:
- {name: on-prem, clusterSets: [dc-gpu], minClusters: 1}
- name: cloud-eu
  clusterSets: [aws-eu-gpu]
  predicates:
  - requiredClusterSelector:
      labelSelector: {matchLabels: {gpu: a100}}
- {name: cloud-any, clusterSets: [aws-gpu, gcp-gpu]}
capacity:
  rules:
  - fits: {shape: a100-x1, atLeastReplicas: 4, exitBelowReplicas: 2}
  - score: {resourceName: resource-usage-score, scoreName: memClusterAvailable, atLeast: 10, exitBelow: -10}
  debounce: 2m
  whenStale: KeepLastVerdict
  staleGrace: 5m
workload: {shape: a100-x1, replicasPerCluster: 4}
template:
  tolerations:
  - {key: cluster.open-cluster-management.io/unreachable, operator: Exists, tolerationSeconds: 120}
failback: {policy: Automatic, holdDown: 15m, maxHoldDown: 4h, maxClustersPerStep: 1, overlap: 0s}
stabilization: {minDwell: 5m, maxTransitionsPerHour: 4}
override: {tier: ""}
"#;
        let spec: TieredPlacementSpec = serde_norway::from_str(yaml).unwrap();
        assert_eq!(validate(&spec), vec![]);
        assert_eq!(spec.tiers[1].predicates.len(), 1);
        assert_eq!(spec.template.tolerations[0].toleration_seconds, Some(120));
        assert_eq!(spec.timings().unwrap().debounce, Duration::from_secs(120));
    }
}
