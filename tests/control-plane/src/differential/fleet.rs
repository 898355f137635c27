//! The random fleet: clusters with labels, claims, taints, resources and scores, from a seeded generator.

use super::*;

/// splitmix64: a tiny, well-mixed, seedable generator (no dependency needed for test data).
#[derive(Clone, Debug)]
pub struct Rng {
    pub(super) state: u64,
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

pub(super) fn time(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string()
}

pub(super) fn hours(h: i64) -> jiff::SignedDuration {
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

pub(super) fn cluster(rng: &mut Rng, index: usize, now: jiff::Timestamp) -> FleetCluster {
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

pub(super) fn score(rng: &mut Rng, cluster: &str, name: &str, valid_until: Value) -> FleetScore {
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
