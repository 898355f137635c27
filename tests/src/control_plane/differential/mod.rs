//! The live differential check's generator and judge: a seeded random fleet of bare
//! ManagedClusters (labels, claims, Available conditions OCM's taint controller turns into taints,
//! user taints, allocatable/capacity), cluster sets, bindings and AddOnPlacementScores, random
//! Placements over them, and the comparison of OCM's PlacementDecisions with `simulate`'s answer.
//!
//! Everything here is pure: the same seed gives the same objects, so a failure is replayed with
//! the seed the check prints. [`live`] writes the objects to a real hub, lets OCM's placement
//! controller decide and compares; [`tally`] counts the outcomes by feature.
//!
//! What the generator avoids, because the answer would then depend on timing rather than on the
//! objects:
//! - toleration seconds that expire while the test runs: only none, 0 (already expired) and 10 h;
//! - a negative `numberOfClusters`, which crashes OCM's controller;
//! - a negative Steady weight, with which OCM flips a placement's decisions on every sync;
//! - Balance on a placement whose AddOn prioritizer reads an expired score: the expiry makes the
//!   sync return a Warning, which OCM retries with backoff for minutes, and each retry would re-read
//!   the other placements' decisions at a moment of its own choosing.

pub mod live;
pub mod tally;

use std::collections::BTreeMap;

use serde_json::{Value, json};

/// The score object our agent publishes (always valid here, or never expiring).
pub const SCORE: &str = "resource-usage-score";
/// A second score object, expired in some clusters (OCM then reports a Warning and counts 0).
pub const STALE_SCORE: &str = "stale-usage-score";
/// A score object no cluster has.
pub const MISSING_SCORE: &str = "missing-score";
/// Score names of [`SCORE`] (the agent's built-in names).
pub const SCORE_NAMES: &[&str] = &[
    "cpuNodeAvailable",
    "cpuClusterAvailable",
    "memNodeAvailable",
    "memClusterAvailable",
    "gpuClusterAvailable",
    "cpuAvailable",
    "memAvailable",
];

const GROUP: &str = "cluster.open-cluster-management.io";
const CLUSTERSET_LABEL: &str = "cluster.open-cluster-management.io/clusterset";
const UNREACHABLE: &str = "cluster.open-cluster-management.io/unreachable";
const UNAVAILABLE: &str = "cluster.open-cluster-management.io/unavailable";

/// The exclusive cluster sets the fleet is spread over, one more selecting by label, one empty.
pub const EXCLUSIVE_SETS: &[&str] = &["set-a", "set-b", "set-c"];
const GOLD_SET: &str = "set-gold";
const EMPTY_SET: &str = "set-empty";
/// A set name that bindings and placements mention but that does not exist.
const MISSING_SET: &str = "set-missing";

/// Namespaces for placements and what each binds.
const NAMESPACES: &[(&str, &[&str])] = &[
    ("diff-main", &["set-a", "set-b", "set-c", GOLD_SET]),
    ("diff-partial", &["set-a", GOLD_SET, EMPTY_SET]),
    ("diff-dangling", &["set-b", MISSING_SET]),
    ("diff-unbound", &[]),
];

const ENVS: &[&str] = &["prod", "staging", "dev"];
const REGIONS: &[&str] = &["us-east-1", "us-west-2", "eu-central-1", "ap-south-1"];
const TIERS: &[&str] = &["gold", "silver", "bronze"];
const TEAMS: &[&str] = &["team-a", "team-b", "team-c"];
const PLATFORMS: &[&str] = &["AWS", "GCP", "Azure", "BareMetal"];
const PRODUCTS: &[&str] = &["OpenShift", "EKS", "GKE", "AKS"];
const VERSIONS: &[&str] = &["v1.28.9", "v1.29.4", "v1.30.2", "v1.31.0", "v1.32.1"];
const NAME_WORDS: &[&str] = &["alpha", "bravo", "delta", "edge", "core", "spoke"];
const CPUS: &[&str] = &["4", "8", "16", "3800m", "7500m", "12", "32", "2"];
const MEMORIES: &[&str] = &[
    "16Gi",
    "32Gi",
    "64Gi",
    "31Gi",
    "128Gi",
    "65536Mi",
    "17179869184",
    "8G",
];
const USER_TAINTS: &[(&str, &[&str])] = &[
    ("dedicated", &["ml", "batch"]),
    ("maintenance", &[""]),
    ("example.com/gpu-only", &["true"]),
];

/// splitmix64: a tiny, well-mixed, seedable generator (no dependency needed for test data).
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng { state: seed }
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u32) -> bool {
        self.below(100) < percent as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as usize) as i64
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Up to `max` distinct items, in a random order.
    pub fn some<T: Clone>(&mut self, items: &[T], max: usize) -> Vec<T> {
        let mut pool: Vec<T> = items.to_vec();
        let n = self.below(max.min(pool.len()) + 1);
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            out.push(pool.remove(self.below(pool.len())));
        }
        out
    }
}

/// One bare ManagedCluster: created from `object`, then `status` written through the status
/// subresource.
#[derive(Clone, Debug)]
pub struct FleetCluster {
    pub name: String,
    pub object: Value,
    pub status: Value,
    /// The taint OCM's taint controller adds for the Available condition written (`None` when
    /// Available is True).
    pub ocm_taint: Option<&'static str>,
}

/// An AddOnPlacementScore: created from `object`, then `status` written through the subresource.
#[derive(Clone, Debug)]
pub struct FleetScore {
    pub object: Value,
    pub status: Value,
}

/// Everything the placements schedule over.
#[derive(Clone, Debug)]
pub struct Fleet {
    pub clusters: Vec<FleetCluster>,
    pub cluster_sets: Vec<Value>,
    pub namespaces: Vec<String>,
    pub bindings: Vec<Value>,
    pub scores: Vec<FleetScore>,
}

fn time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

fn hours(h: i64) -> jiff::SignedDuration {
    jiff::SignedDuration::from_hours(h)
}

impl Fleet {
    /// `count` clusters named `<word>-<nn>`, spread over the exclusive sets; `now` dates the
    /// scores' `validUntil` and the user taints' `timeAdded` (2 h before `now`).
    pub fn generate(rng: &mut Rng, count: usize, now: jiff::Timestamp) -> Fleet {
        let clusters: Vec<FleetCluster> = (0..count).map(|i| cluster(rng, i, now)).collect();
        let mut cluster_sets: Vec<Value> = EXCLUSIVE_SETS
            .iter()
            .chain([&EMPTY_SET])
            .map(|name| {
                json!({
                    "apiVersion": format!("{GROUP}/v1beta2"), "kind": "ManagedClusterSet",
                    "metadata": {"name": name},
                    "spec": {"clusterSelector": {"selectorType": "ExclusiveClusterSetLabel"}},
                })
            })
            .collect();
        cluster_sets.push(json!({
            "apiVersion": format!("{GROUP}/v1beta2"), "kind": "ManagedClusterSet",
            "metadata": {"name": GOLD_SET},
            "spec": {"clusterSelector": {"selectorType": "LabelSelector",
                     "labelSelector": {"matchLabels": {"tier": "gold"}}}},
        }));
        let namespaces = NAMESPACES.iter().map(|(ns, _)| (*ns).to_owned()).collect();
        let bindings = NAMESPACES
            .iter()
            .flat_map(|(ns, sets)| {
                sets.iter().map(move |set| {
                    json!({
                        "apiVersion": format!("{GROUP}/v1beta2"), "kind": "ManagedClusterSetBinding",
                        "metadata": {"name": set, "namespace": ns},
                        "spec": {"clusterSet": set},
                    })
                })
            })
            .collect();
        let mut scores = Vec::new();
        for c in &clusters {
            // Most clusters publish our score; a few never did (the AddOn prioritizer reads 0).
            if rng.chance(85) {
                let valid_until = if rng.chance(85) {
                    json!(time(now + hours(4)))
                } else {
                    Value::Null
                };
                scores.push(score(rng, &c.name, SCORE, valid_until));
            }
            if rng.chance(70) {
                let valid_until = match rng.below(3) {
                    0 => json!(time(now - hours(1))),
                    1 => json!(time(now + hours(4))),
                    _ => Value::Null,
                };
                scores.push(score(rng, &c.name, STALE_SCORE, valid_until));
            }
        }
        Fleet {
            clusters,
            cluster_sets,
            namespaces,
            bindings,
            scores,
        }
    }

    pub fn cluster_names(&self) -> Vec<String> {
        self.clusters.iter().map(|c| c.name.clone()).collect()
    }
}

fn cluster(rng: &mut Rng, index: usize, now: jiff::Timestamp) -> FleetCluster {
    let name = format!("{}-{:02}", rng.pick(NAME_WORDS), index + 1);
    let mut labels = serde_json::Map::new();
    labels.insert(
        CLUSTERSET_LABEL.into(),
        json!(EXCLUSIVE_SETS[index % EXCLUSIVE_SETS.len()]),
    );
    let mut maybe = |rng: &mut Rng, key: &str, values: &[&str], percent: u32| {
        if rng.chance(percent) {
            labels.insert(key.into(), json!(rng.pick(values)));
        }
    };
    maybe(rng, "env", ENVS, 90);
    maybe(rng, "region", REGIONS, 85);
    maybe(rng, "tier", TIERS, 80);
    maybe(rng, "team", TEAMS, 60);
    maybe(rng, "gpu", &["true", "false"], 50);
    let rack = rng.range(1, 12).to_string();
    maybe(rng, "rack", &[rack.as_str()], 70);
    let addr = if rng.chance(50) {
        format!("10.{}.{}.{}", rng.below(256), rng.below(256), rng.range(1, 254))
    } else {
        format!("192.168.{}.{}", rng.below(256), rng.range(1, 254))
    };
    maybe(rng, "addr", &[addr.as_str()], 60);

    let mut taints = Vec::new();
    for (key, values) in USER_TAINTS {
        if rng.chance(12) {
            taints.push(json!({
                "key": key, "value": rng.pick(values),
                "effect": rng.pick(&["NoSelect", "PreferNoSelect", "NoSelectIfNew"]),
                "timeAdded": time(now - hours(2)),
            }));
        }
    }
    let object = json!({
        "apiVersion": format!("{GROUP}/v1"), "kind": "ManagedCluster",
        "metadata": {"name": name, "labels": labels},
        "spec": {"hubAcceptsClient": false, "taints": taints},
    });

    let condition = |status: &str, reason: &str| {
        json!({"type": "ManagedClusterConditionAvailable", "status": status, "reason": reason,
               "message": "written by the differential test", "lastTransitionTime": time(now - hours(3))})
    };
    let (conditions, ocm_taint) = match rng.below(20) {
        0..=13 => (vec![condition("True", "ManagedClusterAvailable")], None),
        14..=16 => (
            vec![condition("False", "ManagedClusterKubeAPIServerUnavailable")],
            Some(UNAVAILABLE),
        ),
        17 | 18 => (
            vec![condition("Unknown", "ManagedClusterLeaseUpdateStopped")],
            Some(UNREACHABLE),
        ),
        _ => (Vec::new(), Some(UNREACHABLE)),
    };
    let mut claims = vec![json!({"name": "id.k8s.io", "value": name})];
    if rng.chance(80) {
        claims.push(json!({"name": "platform.open-cluster-management.io", "value": rng.pick(PLATFORMS)}));
    }
    if rng.chance(70) {
        claims.push(json!({"name": "product.open-cluster-management.io", "value": rng.pick(PRODUCTS)}));
    }
    if rng.chance(60) {
        claims.push(json!({"name": "region.open-cluster-management.io", "value": rng.pick(REGIONS)}));
    }
    let mut status = json!({
        "conditions": conditions,
        "clusterClaims": claims,
        "version": {"kubernetes": rng.pick(VERSIONS)},
    });
    let resources = |rng: &mut Rng| {
        let mut r = serde_json::Map::new();
        if rng.chance(90) {
            r.insert("cpu".into(), json!(rng.pick(CPUS)));
        }
        if rng.chance(90) {
            r.insert("memory".into(), json!(rng.pick(MEMORIES)));
        }
        Value::Object(r)
    };
    if rng.chance(90) {
        status["allocatable"] = resources(rng);
    }
    if rng.chance(90) {
        status["capacity"] = resources(rng);
    }
    FleetCluster {
        name,
        object,
        status,
        ocm_taint,
    }
}

fn score(rng: &mut Rng, cluster: &str, name: &str, valid_until: Value) -> FleetScore {
    let names = rng.some(SCORE_NAMES, SCORE_NAMES.len());
    let items: Vec<Value> = names
        .iter()
        .map(|n| json!({"name": n, "value": rng.range(-100, 100)}))
        .collect();
    let mut status = json!({"scores": items});
    if !valid_until.is_null() {
        status["validUntil"] = valid_until;
    }
    FleetScore {
        object: json!({
            "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "AddOnPlacementScore",
            "metadata": {"name": name, "namespace": cluster},
        }),
        status,
    }
}

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

fn label_values(key: &str) -> &'static [&'static str] {
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
fn selector(rng: &mut Rng, keys: &[&str], claims: bool) -> Value {
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

const LABEL_KEYS: &[&str] = &["env", "region", "tier", "team", "gpu", "rack"];
const CLAIM_KEYS: &[&str] = &[
    "platform.open-cluster-management.io",
    "product.open-cluster-management.io",
    "region.open-cluster-management.io",
];

fn predicate(rng: &mut Rng, fleet: &Fleet) -> Value {
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

fn cel_atom(rng: &mut Rng, fleet: &Fleet) -> String {
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

fn toleration(rng: &mut Rng) -> Value {
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

fn prioritizer_policy(rng: &mut Rng) -> Value {
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

fn decision_strategy(rng: &mut Rng) -> Value {
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

fn is(o: &Value, kind: &str, namespace: &str) -> bool {
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

fn condition(placement: &Value, kind: &str) -> Option<(String, String, String)> {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> jiff::Timestamp {
        "2026-11-23T12:00:00Z".parse().expect("time")
    }

    #[test]
    fn the_same_seed_gives_the_same_fleet_and_placements() {
        let make = |seed| {
            let mut rng = Rng::new(seed);
            let fleet = Fleet::generate(&mut rng, 16, now());
            let placements: Vec<Value> = (0..20)
                .map(|i| placement(&mut rng, &fleet, &format!("p-{i:03}")))
                .collect();
            (
                fleet
                    .clusters
                    .iter()
                    .map(|c| c.object.clone())
                    .collect::<Vec<_>>(),
                placements,
            )
        };
        assert_eq!(make(7), make(7));
        assert_ne!(make(7), make(8));
    }

    #[test]
    fn placements_cover_what_the_check_is_for() {
        let mut rng = Rng::new(42);
        let fleet = Fleet::generate(&mut rng, 16, now());
        let text: String = (0..200)
            .map(|i| placement(&mut rng, &fleet, &format!("p-{i:03}")).to_string())
            .collect();
        for needle in [
            "celExpressions",
            "scores(",
            "matchExpressions",
            "DoesNotExist",
            "NotIn",
            "claimSelector",
            "tolerationSeconds",
            "NoSelectIfNew",
            "\"Exact\"",
            "ResourceAllocatableCPU",
            "ResourceAllocatableMemory",
            "Steady",
            "Balance",
            STALE_SCORE,
            "decisionGroups",
            "clustersPerDecisionGroup",
            "numberOfClusters",
            "clusterSets",
            "math.greatest",
        ] {
            assert!(text.contains(needle), "200 placements never use {needle}");
        }
        // Every taint the taint controller can add, and clusters it leaves alone.
        assert!(fleet.clusters.iter().any(|c| c.ocm_taint == Some(UNREACHABLE)));
        assert!(fleet.clusters.iter().any(|c| c.ocm_taint == Some(UNAVAILABLE)));
        assert!(fleet.clusters.iter().any(|c| c.ocm_taint.is_none()));
    }

    /// What the real API server would refuse is a generator bug: check every object against
    /// OCM's CRD schemas (objects with their status merged in) before a control plane runs them.
    #[test]
    fn generated_objects_pass_ocms_crd_schemas() {
        use ocm_score_kube_double::crd::{SchemaValidator, upstream_crds};
        let crds = upstream_crds().expect("upstream CRDs");
        let validator = |kind: &str| {
            let crd = crds.iter().find(|c| c.kind == kind).expect("CRD of kind");
            let version = crd.versions.iter().find(|v| v.served).expect("served version");
            SchemaValidator::new(crd, version).expect("schema")
        };
        let check = |kind: &str, objects: Vec<Value>| {
            let v = validator(kind);
            for o in objects {
                assert_eq!(v.errors(&o), Vec::new(), "{kind} refused:\n{o:#}");
            }
        };
        for seed in 0..5 {
            let mut rng = Rng::new(seed);
            let fleet = Fleet::generate(&mut rng, 20, now());
            check(
                "ManagedCluster",
                fleet
                    .clusters
                    .iter()
                    .map(|c| {
                        let mut o = c.object.clone();
                        o["status"] = c.status.clone();
                        o
                    })
                    .collect(),
            );
            check(
                "AddOnPlacementScore",
                fleet
                    .scores
                    .iter()
                    .map(|s| {
                        let mut o = s.object.clone();
                        o["status"] = s.status.clone();
                        o
                    })
                    .collect(),
            );
            check("ManagedClusterSet", fleet.cluster_sets.clone());
            check("ManagedClusterSetBinding", fleet.bindings.clone());
            check(
                "Placement",
                (0..200)
                    .map(|i| {
                        let mut p = placement(&mut rng, &fleet, &format!("p-{i:03}"));
                        // The live check's forced misconfigurations must reach OCM's scheduler too.
                        if i % 10 == 9 {
                            misconfigure(&mut rng, &mut p);
                        }
                        p
                    })
                    .collect(),
            );
        }
    }

    #[test]
    fn stale_scores_never_meet_balance() {
        let mut rng = Rng::new(3);
        let fleet = Fleet::generate(&mut rng, 16, now());
        for i in 0..500 {
            let p = placement(&mut rng, &fleet, &format!("p-{i}"));
            let configs = p["spec"]["prioritizerPolicy"]["configurations"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            assert!(
                !configs.iter().any(|c| c["scoreCoordinate"]["builtIn"] == "Steady"
                    && c["weight"].as_i64().is_some_and(|w| w < 0)),
                "a negative Steady weight never settles: {p}"
            );
            if configs
                .iter()
                .any(|c| c["scoreCoordinate"]["addOn"]["resourceName"] == STALE_SCORE)
            {
                let balance: Vec<&Value> = configs
                    .iter()
                    .filter(|c| c["scoreCoordinate"]["builtIn"] == "Balance")
                    .collect();
                assert!(
                    !balance.is_empty() && balance.iter().all(|c| c["weight"] == 0),
                    "{p}"
                );
            }
        }
    }

    #[test]
    fn answers_compare_sets_groups_and_conditions() {
        let placement = json!({"status": {"numberOfSelectedClusters": 2, "conditions": [
            {"type": "PlacementMisconfigured", "status": "False", "reason": "Succeedconfigured", "message": "Placement configurations check pass"},
            {"type": "PlacementSatisfied", "status": "True", "reason": "AllDecisionsScheduled", "message": "All cluster decisions scheduled"},
        ]}});
        let pd = json!({"metadata": {"labels": {
            "cluster.open-cluster-management.io/decision-group-index": "0",
            "cluster.open-cluster-management.io/decision-group-name": ""}},
            "status": {"decisions": [{"clusterName": "b"}, {"clusterName": "a"}]}});
        assert!(ocm_decided(&placement, &[&pd]));
        let ocm = ocm_answer(&placement, &[&pd]);
        let sim = simulate_answer(&json!({"decisions": ["a", "b"], "misconfigured": false, "explain": {"conditions": [
            {"type": "PlacementSatisfied", "status": "True", "reason": "AllDecisionsScheduled", "message": "All cluster decisions scheduled"}]}}))
        .expect("answer");
        assert_eq!(differences(&ocm, &sim), Vec::<String>::new());
        let other = simulate_answer(&json!({"decisions": ["a"], "misconfigured": false, "explain": {"conditions": [
            {"type": "PlacementSatisfied", "status": "True", "reason": "AllDecisionsScheduled", "message": "All cluster decisions scheduled"}]}}))
        .expect("answer");
        let diff = differences(&ocm, &other);
        assert_eq!(diff.len(), 2, "{diff:?}");
        assert!(diff[0].starts_with("decisions:"), "{diff:?}");
    }
}
