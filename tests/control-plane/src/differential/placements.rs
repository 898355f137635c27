//! Random Placements over a fleet: selectors, predicates (CEL included), tolerations, prioritizer policies and decision strategies, some misconfigured on purpose.

use super::*;

/// A random Placement `namespace/name` over `fleet`.
pub fn placement(rng: &mut Rng, fleet: &Fleet, name: &str) -> Value {
    let namespace = match rng.below(20) {
        0..=12 => NAMESPACES[0].0,
        13..=15 => NAMESPACES[1].0,
        16..=18 => NAMESPACES[2].0,
        _ => NAMESPACES[3].0,
    };
    let mut spec = serde_json::Map::new();
    if rng.chance(30) {
        let all: Vec<&str> = EXCLUSIVE_SETS
            .iter()
            .copied()
            .chain([GOLD_SET, EMPTY_SET, MISSING_SET])
            .collect();
        let mut sets = rng.some(&all, 3);
        if sets.is_empty() {
            sets.push(EXCLUSIVE_SETS[0]);
        }
        spec.insert("clusterSets".into(), json!(sets));
    }
    match rng.below(20) {
        0..=5 => {}
        6 => {
            spec.insert("numberOfClusters".into(), json!(0));
        }
        _ => {
            spec.insert("numberOfClusters".into(), json!(rng.range(1, 8)));
        }
    }
    let predicates: Vec<Value> = (0..*rng.pick(&[0, 1, 1, 1, 2]))
        .map(|_| predicate(rng, fleet))
        .collect();
    if !predicates.is_empty() {
        spec.insert("predicates".into(), json!(predicates));
    }
    let tolerations: Vec<Value> = (0..*rng.pick(&[0, 0, 1, 1, 2, 3]))
        .map(|_| toleration(rng))
        .collect();
    if !tolerations.is_empty() {
        spec.insert("tolerations".into(), json!(tolerations));
    }
    if rng.chance(75) {
        spec.insert("prioritizerPolicy".into(), prioritizer_policy(rng));
    }
    if rng.chance(35) {
        spec.insert("decisionStrategy".into(), decision_strategy(rng));
    }
    json!({
        "apiVersion": format!("{GROUP}/v1beta1"), "kind": "Placement",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    })
}

/// Makes `placement` misconfigured on purpose, in one of the ways OCM's API server accepts and its
/// scheduler refuses whatever the clusters: a label selector OCM cannot convert, or a CEL
/// expression its environment cannot compile, put first among the predicates (OCM builds every
/// predicate's selector before it filters). The live check forces this on a fixed share of its
/// placements, so "some were misconfigured on both sides" never depends on the draw.
pub fn misconfigure(rng: &mut Rng, placement: &mut Value) {
    let bad = if rng.chance(50) {
        json!({"requiredClusterSelector": {"labelSelector": {"matchExpressions": [
            {"key": rng.pick(LABEL_KEYS), "operator": rng.pick(&["In", "NotIn"]), "values": []},
        ]}}})
    } else {
        json!({"requiredClusterSelector": {"celSelector": {"celExpressions": [
            *rng.pick(&["managedCluster.metadata.name.size()", "'prod' + 1 == 'x'", "1 < 1.5"]),
        ]}}})
    };
    let spec = &mut placement["spec"];
    let mut predicates = spec["predicates"].as_array().cloned().unwrap_or_default();
    predicates.insert(0, bad);
    spec["predicates"] = json!(predicates);
}

pub(super) fn label_values(key: &str) -> &'static [&'static str] {
    match key {
        "env" => ENVS,
        "region" => REGIONS,
        "tier" => TIERS,
        "team" => TEAMS,
        "gpu" => &["true", "false"],
        "rack" => &["1", "2", "3", "7", "11"],
        "platform.open-cluster-management.io" => PLATFORMS,
        "product.open-cluster-management.io" => PRODUCTS,
        "region.open-cluster-management.io" => REGIONS,
        _ => &["x"],
    }
}

/// A random label selector (`claims`: the claim keys, matchExpressions only, as OCM reads claims).
pub(super) fn selector(rng: &mut Rng, keys: &[&str], claims: bool) -> Value {
    let mut out = serde_json::Map::new();
    if !claims && rng.chance(50) {
        let mut labels = serde_json::Map::new();
        for key in rng.some(keys, 1) {
            labels.insert(key.into(), json!(rng.pick(label_values(key))));
        }
        out.insert("matchLabels".into(), Value::Object(labels));
    }
    let mut expressions = Vec::new();
    for key in rng.some(keys, 2) {
        let values = label_values(key);
        let draw = rng.below(40);
        let mut expression = match draw {
            // What a label selector refuses: OCM reports the placement misconfigured.
            0 => json!({"key": key, "operator": "In", "values": []}),
            1 => json!({"key": key, "operator": "Gt", "values": ["1"]}),
            2..=13 => json!({"key": key, "operator": "In", "values": rng.some(values, 3)}),
            14..=23 => json!({"key": key, "operator": "NotIn", "values": rng.some(values, 2)}),
            24..=31 => json!({"key": key, "operator": "Exists"}),
            _ => json!({"key": key, "operator": "DoesNotExist"}),
        };
        // In/NotIn that drew no values get one: refusals stay with the two cases above.
        if draw > 1 && expression["values"].as_array().is_some_and(Vec::is_empty) {
            expression["values"] = json!([values[0]]);
        }
        expressions.push(expression);
    }
    if !expressions.is_empty() || out.is_empty() {
        out.insert("matchExpressions".into(), json!(expressions));
    }
    Value::Object(out)
}

pub(super) const LABEL_KEYS: &[&str] = &["env", "region", "tier", "team", "gpu", "rack"];
pub(super) const CLAIM_KEYS: &[&str] = &[
    "platform.open-cluster-management.io",
    "product.open-cluster-management.io",
    "region.open-cluster-management.io",
];

pub(super) fn predicate(rng: &mut Rng, fleet: &Fleet) -> Value {
    let mut selector_parts = serde_json::Map::new();
    loop {
        if rng.chance(40) {
            selector_parts.insert("labelSelector".into(), selector(rng, LABEL_KEYS, false));
        }
        if rng.chance(20) {
            selector_parts.insert("claimSelector".into(), selector(rng, CLAIM_KEYS, true));
        }
        if rng.chance(55) {
            let n = *rng.pick(&[1, 1, 2]);
            let expressions: Vec<String> = (0..n).map(|_| cel_expression(rng, fleet)).collect();
            selector_parts.insert("celSelector".into(), json!({"celExpressions": expressions}));
        }
        if !selector_parts.is_empty() {
            break;
        }
    }
    json!({"requiredClusterSelector": selector_parts})
}

/// A random CEL expression: one or two atoms, sometimes negated, joined by `&&` or `||`.
pub fn cel_expression(rng: &mut Rng, fleet: &Fleet) -> String {
    let first = cel_atom(rng, fleet);
    let first = if rng.chance(15) {
        format!("!({first})")
    } else {
        first
    };
    if rng.chance(35) {
        let second = cel_atom(rng, fleet);
        let op = if rng.chance(50) { "&&" } else { "||" };
        format!("{first} {op} {second}")
    } else {
        first
    }
}

pub(super) fn cel_atom(rng: &mut Rng, fleet: &Fleet) -> String {
    let label = |rng: &mut Rng| {
        let key = *rng.pick(LABEL_KEYS);
        (key, *rng.pick(label_values(key)))
    };
    let score_object = |rng: &mut Rng| *rng.pick(&[SCORE, SCORE, STALE_SCORE, MISSING_SCORE]);
    let mc = "managedCluster";
    match rng.below(34) {
        0 => {
            let (k, v) = label(rng);
            format!("{mc}.metadata.labels['{k}'] == '{v}'")
        }
        1 => {
            let prefix = rng.pick(&["us-", "eu-", "ap-", "us-west"]);
            format!("{mc}.metadata.labels['region'].startsWith('{prefix}')")
        }
        2 => format!(
            "{mc}.metadata.labels['region'].matches('{}')",
            rng.pick(&["^(us|eu)-", "-[0-9]$", "central", "^ap-.*-1$"])
        ),
        3 => {
            let (k, _) = label(rng);
            format!("'{k}' in {mc}.metadata.labels")
        }
        4 => format!(
            "{mc}.metadata.labels[?'team'].orValue('none') == '{}'",
            rng.pick(&["none", "team-a", "team-b"])
        ),
        5 => format!("{mc}.metadata.name.split('-')[0] == '{}'", rng.pick(NAME_WORDS)),
        6 => format!("{mc}.metadata.name.endsWith('{}')", rng.range(0, 9)),
        7 => {
            let name = rng.pick(SCORE_NAMES);
            let op = rng.pick(&[">", "<", ">=", "=="]);
            format!(
                "{mc}.scores('{}').exists(s, s.name == '{name}' && s.value {op} {})",
                score_object(rng),
                rng.range(-60, 60)
            )
        }
        8 => format!(
            "{mc}.scores('{}').filter(s, s.name == '{}').all(s, s.value < {})",
            score_object(rng),
            rng.pick(SCORE_NAMES),
            rng.range(-50, 80)
        ),
        9 => format!(
            "{mc}.scores('{}').map(s, s.value).sum() > {}",
            score_object(rng),
            rng.range(-100, 150)
        ),
        10 => format!(
            "size({mc}.scores('{}')) >= {}",
            score_object(rng),
            rng.range(0, 5)
        ),
        11 => format!(
            "semver({mc}.status.version.kubernetes.substring(1)).isGreaterThan(semver('{}'))",
            rng.pick(&["1.28.9", "1.29.0", "1.30.2", "1.31.5"])
        ),
        12 => format!(
            "isSemver({mc}.status.version.kubernetes) || semver({mc}.status.version.kubernetes.replace('v', '')).minor() >= {}",
            rng.range(28, 32)
        ),
        13 => format!(
            "quantity({mc}.status.allocatable.cpu).isGreaterThan(quantity('{}'))",
            rng.pick(&["4", "7", "7600m", "12"])
        ),
        14 => format!(
            "quantity({mc}.status.allocatable['memory']).compareTo(quantity('{}')) <= 0",
            rng.pick(&["32Gi", "16Gi", "64G", "31Gi"])
        ),
        15 => format!(
            "{mc}.status.clusterClaims.exists(c, c.name == 'platform.open-cluster-management.io' && c.value in {})",
            json!(rng.some(PLATFORMS, 2)).to_string().replace('"', "'")
        ),
        16 => format!(
            "{mc}.status.clusterClaims.map(c, c.name).filter(n, n.endsWith('.open-cluster-management.io')).size() >= {}",
            rng.range(0, 3)
        ),
        17 => format!(
            "has({mc}.spec.taints) && {mc}.spec.taints.exists(t, t.key == '{}')",
            rng.pick(&["dedicated", UNREACHABLE, UNAVAILABLE, "maintenance"])
        ),
        18 => format!(
            "{mc}.status.conditions.exists(c, c.type == 'ManagedClusterConditionAvailable' && c.status == '{}')",
            rng.pick(&["True", "False", "Unknown"])
        ),
        19 => format!(
            "{mc}.metadata.labels['region'].lowerAscii().replace('-', '') == '{}'",
            rng.pick(&["useast1", "euCentral1", "apsouth1"])
        ),
        20 => format!(
            "[{mc}.metadata.labels['env'], {mc}.metadata.labels['tier']].join('/') == '{}/{}'",
            rng.pick(ENVS),
            rng.pick(TIERS)
        ),
        21 => format!(
            "{mc}.metadata.labels['region'].find('[0-9]+') == '{}'",
            rng.range(1, 2)
        ),
        22 => format!("int({mc}.metadata.labels['rack']) % {} == 0", rng.range(2, 3)),
        23 => format!(
            "cidr('{}').containsIP({mc}.metadata.labels['addr'])",
            rng.pick(&["10.0.0.0/8", "192.168.0.0/16", "10.128.0.0/9"])
        ),
        24 => format!(
            "{mc}.metadata.labels.?tier.orValue('none') != '{}'",
            rng.pick(TIERS)
        ),
        25 => format!(
            "{mc}.metadata.labels.filter(k, k.startsWith('{}')).size() >= 1",
            rng.pick(&["t", "g", "r", "cluster."])
        ),
        26 => format!(
            "{mc}.metadata.name.indexOf('{}') {} 0",
            rng.pick(&["a", "e", "-0", "-1"]),
            rng.pick(&[">=", "=="])
        ),
        27 => format!(
            "{mc}.metadata.labels['env'].upperAscii() in ['PROD', '{}']",
            rng.pick(&["STAGING", "DEV"])
        ),
        28 => format!("{mc}.metadata.labels.all(k, k != '{}')", rng.pick(LABEL_KEYS)),
        29 => {
            let names: Vec<String> = rng
                .some(&fleet.cluster_names(), 4)
                .into_iter()
                .map(|n| format!("'{n}'"))
                .collect();
            format!("{mc}.metadata.name in [{}]", names.join(", "))
        }
        30 => format!(
            "{mc}.metadata.labels['region'].split('-').size() == {}",
            rng.range(2, 3)
        ),
        31 => format!(
            "{mc}.scores('{}').exists(s, s.name.matches('^{}'))",
            score_object(rng),
            rng.pick(&["cpu", "mem", "gpu"])
        ),
        32 => format!(
            "double({mc}.scores('{SCORE}').filter(s, s.name == '{}')[0].value) / 2.0 > {}.5",
            rng.pick(SCORE_NAMES),
            rng.range(-20, 20)
        ),
        // What OCM's CEL environment refuses to compile: the placement is misconfigured.
        _ => (*rng.pick(&[
            "math.greatest(1, 2) == 2",
            "'prod' + 1 == 'x'",
            "strings.quote('a') == '\"a\"'",
            "managedCluster.metadata.labels['env'] = 'prod'",
            "1 < 1.5",
            "managedCluster.metadata.name.size()",
        ]))
        .to_owned(),
    }
}

pub(super) fn toleration(rng: &mut Rng) -> Value {
    let mut t = serde_json::Map::new();
    let key = rng.pick(&[
        Some(UNREACHABLE),
        Some(UNAVAILABLE),
        Some("dedicated"),
        Some("maintenance"),
        Some("example.com/gpu-only"),
        None,
    ]);
    if let Some(key) = key {
        t.insert("key".into(), json!(key));
    }
    // Without a key only Exists is valid (anything else is misconfigured): mostly that.
    let exists_below = if key.is_none() { 9 } else { 5 };
    match rng.below(10) {
        d if d < exists_below => {
            t.insert("operator".into(), json!("Exists"));
        }
        0..=8 => {
            t.insert("operator".into(), json!("Equal"));
            t.insert("value".into(), json!(rng.pick(&["ml", "batch", "", "true"])));
        }
        // Left to the CRD default (Equal), with no value.
        _ => {}
    }
    if rng.chance(40) {
        t.insert(
            "effect".into(),
            json!(rng.pick(&["NoSelect", "PreferNoSelect", "NoSelectIfNew"])),
        );
    }
    match rng.below(10) {
        0..=5 => {}
        6 | 7 => {
            t.insert("tolerationSeconds".into(), json!(0));
        }
        _ => {
            t.insert("tolerationSeconds".into(), json!(36_000));
        }
    }
    Value::Object(t)
}

pub(super) fn prioritizer_policy(rng: &mut Rng) -> Value {
    let mut policy = serde_json::Map::new();
    match rng.below(3) {
        0 => {}
        1 => {
            policy.insert("mode".into(), json!("Additive"));
        }
        _ => {
            policy.insert("mode".into(), json!("Exact"));
        }
    }
    let mut configurations = Vec::new();
    let mut reads_stale = false;
    for _ in 0..rng.range(0, 3) {
        let weight: i32 = *rng.pick(&[-2, -1, 0, 1, 1, 2, 3, 5, 10]);
        let coordinate = match rng.below(10) {
            0..=4 => {
                let (resource, n) = match rng.below(10) {
                    0..=6 => (SCORE, *rng.pick(SCORE_NAMES)),
                    7 | 8 => {
                        reads_stale = true;
                        (STALE_SCORE, *rng.pick(SCORE_NAMES))
                    }
                    _ => (MISSING_SCORE, "cpuAvailable"),
                };
                json!({"type": "AddOn", "addOn": {"resourceName": resource, "scoreName": n}})
            }
            _ => json!({"type": "BuiltIn", "builtIn": rng.pick(&[
                "Balance", "Steady", "ResourceAllocatableCPU", "ResourceAllocatableMemory",
            ])}),
        };
        // Upstream quirk: a negative Steady weight never settles once numberOfClusters leaves a
        // choice. The clusters chosen score lower in the very next sync (their own decisions),
        // so OCM swaps them out, then back, forever; each answer is "wrong" for the next sync.
        let weight = if coordinate["builtIn"] == "Steady" {
            weight.abs()
        } else {
            weight
        };
        let mut config = json!({"scoreCoordinate": coordinate});
        // Omitted: the CRD default (1).
        if rng.chance(80) {
            config["weight"] = json!(weight);
        }
        configurations.push(config);
    }
    if reads_stale {
        // Balance off (see the module doc): both in Exact mode and over Additive's default.
        for c in &mut configurations {
            if c["scoreCoordinate"]["builtIn"] == "Balance" {
                c["weight"] = json!(0);
            }
        }
        configurations
            .push(json!({"scoreCoordinate": {"type": "BuiltIn", "builtIn": "Balance"}, "weight": 0}));
    }
    if !configurations.is_empty() || rng.chance(50) {
        policy.insert("configurations".into(), json!(configurations));
    }
    Value::Object(policy)
}

pub(super) fn decision_strategy(rng: &mut Rng) -> Value {
    let per_group = match rng.below(10) {
        0 => json!("3"),
        1..=3 => json!(rng.range(1, 4)),
        4 => Value::Null,
        _ => json!(rng.pick(&["25%", "50%", "7%", "100%", "34%"])),
    };
    let mut groups = Vec::new();
    for i in 0..rng.range(0, 2) {
        let selector = if rng.chance(75) {
            json!({"labelSelector": selector(rng, LABEL_KEYS, false)})
        } else {
            json!({"claimSelector": selector(rng, CLAIM_KEYS, true)})
        };
        groups.push(json!({
            "groupName": format!("{}-{i}", rng.pick(&["canary", "wave", "prod"])),
            "groupClusterSelector": selector,
        }));
    }
    let mut strategy = serde_json::Map::new();
    if !per_group.is_null() {
        strategy.insert("clustersPerDecisionGroup".into(), per_group);
    }
    if !groups.is_empty() {
        strategy.insert("decisionGroups".into(), json!(groups));
    }
    json!({"groupStrategy": strategy})
}
