//! The scores the agent publishes, and how each is computed from the accounting figures.
//!
//! Names are the upstream resource-usage-collect addon's, so Placements written for it keep working:
//!
//! | score | measures | default normalization |
//! |---|---|---|
//! | `cpuNodeAvailable` | largest free cpu of any one eligible node, in cores | absolute 0..100 cores |
//! | `cpuClusterAvailable` | free cpu summed over eligible nodes, in cores | absolute 0..100 cores |
//! | `memNodeAvailable` | largest free memory of any one eligible node, in GiB | absolute 0..1024 GiB |
//! | `memClusterAvailable` | free memory summed over eligible nodes, in GiB | absolute 0..1024 GiB |
//! | `gpuNodeAvailable` / `gpuClusterAvailable` | the same for `nvidia.com/gpu`, in devices | absolute 0..20 |
//! | `tpuNodeAvailable` / `tpuClusterAvailable` | the same for `google.com/tpu`, in devices | absolute 0..20 |
//! | `cpuAvailable` / `memAvailable` | legacy names of the two cluster scores | as those |
//! | `<prefix>{Node,Cluster}Available` | an extended resource from the configuration | percent 0..100 |
//!
//! "Eligible" means Ready and not cordoned; "free" is allocatable minus the effective requests of the
//! pods bound to the node (or, with the kubelet source, minus the larger of requests and real usage).
//!
//! Normalizations, both linear onto -100..100 and clamped (see `ocm_score_api::normalize`):
//! * `absolute:MIN:MAX` — the free amount in natural units (cores, GiB, devices); MIN → -100, MAX → 100.
//! * `percent:MIN:MAX` — the free amount as a percentage of capacity (cluster scope: allocatable summed
//!   over eligible nodes; node scope: the largest allocatable of any eligible node).
//!
//! Whatever the normalization, a cluster with nothing free (free ≤ 0, including no such resource at all)
//! scores -100, the bottom, so a cluster that cannot host a resource never outranks one that can; a
//! resource no enabled source can measure scores -100 too (it is never left out: a missing score reads
//! as 0 to the Placement scheduler, which would rank such a cluster above clusters that can host).

use crate::accounting::{Figures, ResourceSet, ResourceView};
use ocm_score_agent_contract::ScoreSpec;
use ocm_score_api::normalize::{MIN_SCORE, ScoreNormalizer};

/// Scope and normalization are part of the agent's contract (the hub checks `--normalize` too).
pub use ocm_score_agent_contract::{Normalization, Scope};

/// One published score: its name, what it measures and how it is normalized.
#[derive(Clone, Debug, PartialEq)]
pub struct ScoreDef {
    pub name: String,
    /// Index into the agent's `ResourceSet`.
    pub resource: usize,
    pub scope: Scope,
    pub normalization: Normalization,
}

impl ScoreDef {
    /// The natural unit of the score's resource (what absolute bounds are written in).
    pub fn unit(&self, resources: &ResourceSet) -> &'static str {
        natural_unit_name(resources, self.resource)
    }

    /// A one-line statement of the formula, in the units the bounds are written in.
    pub fn formula(&self, resources: &ResourceSet) -> String {
        let resource = resources.name(self.resource);
        let unit = self.unit(resources);
        let what = match self.scope {
            Scope::Cluster => format!("free {resource} summed over Ready, schedulable nodes"),
            Scope::Node => format!("largest free {resource} on one Ready, schedulable node"),
        };
        match self.normalization {
            Normalization::Absolute { min, max } => {
                format!("{what}, in {unit}: {min} → -100, {max} → 100, linear, clamped; nothing free → -100")
            }
            Normalization::Percent { min, max } => format!(
                "{what}, in percent of {}: {min}% → -100, {max}% → 100, linear, clamped; nothing free → -100",
                match self.scope {
                    Scope::Cluster => "the cluster's allocatable",
                    Scope::Node => "the largest node's allocatable",
                }
            ),
        }
    }
}

fn natural_unit_name(resources: &ResourceSet, index: usize) -> &'static str {
    match resources.name(index) {
        crate::accounting::resources::CPU => "cores",
        crate::accounting::resources::MEMORY => "GiB",
        _ => "units",
    }
}

impl ScoreDef {
    /// The contract's score with its resource's index in `resources`; `None` when `resources` does not
    /// account for that resource.
    pub fn from_spec(spec: ScoreSpec, resources: &ResourceSet) -> Option<ScoreDef> {
        Some(ScoreDef {
            resource: resources.index_of(&spec.resource)?,
            name: spec.name,
            scope: spec.scope,
            normalization: spec.normalization,
        })
    }
}

/// The built-in scores in the order upstream publishes them, then the legacy names.
pub fn built_in_defs() -> Vec<ScoreDef> {
    let resources = ResourceSet::built_in();
    ocm_score_agent_contract::built_in_scores()
        .into_iter()
        .filter_map(|spec| ScoreDef::from_spec(spec, &resources))
        .collect()
}

/// A computed score with the raw figures behind it (natural units), for logs and /metrics.
#[derive(Clone, Debug, PartialEq)]
pub struct ScoreValue {
    pub name: String,
    pub value: i32,
    /// The free amount in natural units; `None` when no source measures the resource.
    pub free: Option<f64>,
    /// The capacity the free amount is measured against, in natural units.
    pub capacity: Option<f64>,
}

/// Scores for every definition from a view of the cluster.
pub fn compute(defs: &[ScoreDef], view: &ResourceView, resources: &ResourceSet) -> Vec<ScoreValue> {
    defs.iter()
        .map(|def| score(def, view.figures.get(def.resource).copied().flatten(), resources))
        .collect()
}

fn score(def: &ScoreDef, figures: Option<Figures>, resources: &ResourceSet) -> ScoreValue {
    let Some(figures) = figures else {
        return ScoreValue {
            name: def.name.clone(),
            value: MIN_SCORE,
            free: None,
            capacity: None,
        };
    };
    let (free, capacity) = match def.scope {
        Scope::Cluster => (figures.cluster_free, figures.cluster_capacity),
        Scope::Node => (figures.node_free, figures.node_capacity),
    };
    let per_unit = resources.units_per_natural_unit(def.resource);
    let free_natural = free as f64 / per_unit;
    let capacity_natural = capacity as f64 / per_unit;
    let value = if free <= 0 {
        MIN_SCORE
    } else {
        match def.normalization {
            Normalization::Absolute { min, max } => ScoreNormalizer::new(min, max).normalize(free_natural),
            Normalization::Percent { min, max } => {
                // capacity 0 with free > 0 cannot happen from the ledger; NaN/inf are guarded anyway.
                let percent = 100.0 * free as f64 / capacity as f64;
                ScoreNormalizer::new(min, max).normalize(percent)
            }
        }
    };
    ScoreValue {
        name: def.name.clone(),
        value,
        free: Some(free_natural),
        capacity: Some(capacity_natural),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GIB: i128 = 1 << 30;

    fn view(cpu: Figures, memory: Figures, gpu: Option<Figures>) -> ResourceView {
        ResourceView {
            figures: vec![Some(cpu), Some(memory), gpu, None],
            eligible_nodes: 1,
        }
    }

    fn named<'a>(scores: &'a [ScoreValue], name: &str) -> &'a ScoreValue {
        scores.iter().find(|s| s.name == name).expect(name)
    }

    #[test]
    fn default_bounds_match_the_upstream_intent_with_the_memory_unit_fixed() {
        let cpu = Figures {
            cluster_free: 40_000,
            cluster_capacity: 64_000,
            node_free: 8_000,
            node_capacity: 16_000,
        };
        let memory = Figures {
            cluster_free: 512 * GIB,
            cluster_capacity: 1024 * GIB,
            node_free: 3 * GIB,
            node_capacity: 64 * GIB,
        };
        let gpu = Figures {
            cluster_free: 2,
            cluster_capacity: 8,
            node_free: 1,
            node_capacity: 4,
        };
        let scores = compute(
            &built_in_defs(),
            &view(cpu, memory, Some(gpu)),
            &ResourceSet::built_in(),
        );
        // Upstream's own test vectors: 40 cores → -20, 2 GPUs → -80.
        assert_eq!(named(&scores, "cpuClusterAvailable").value, -20);
        assert_eq!(named(&scores, "cpuAvailable").value, -20);
        assert_eq!(named(&scores, "gpuClusterAvailable").value, -80);
        assert_eq!(named(&scores, "gpuNodeAvailable").value, -90);
        // 512 GiB of 0..1024 GiB is the middle, not upstream's +100.
        assert_eq!(named(&scores, "memClusterAvailable").value, 0);
        assert_eq!(named(&scores, "memNodeAvailable").value, -99);
        assert_eq!(named(&scores, "cpuNodeAvailable").value, -84);
        assert_eq!(named(&scores, "memClusterAvailable").free, Some(512.0));
        assert_eq!(
            named(&scores, "tpuNodeAvailable").value,
            -100,
            "no source measures TPUs"
        );
        assert_eq!(named(&scores, "tpuNodeAvailable").free, None);
        assert_eq!(scores.len(), 10);
    }

    #[test]
    fn percent_of_capacity() {
        let def = ScoreDef {
            name: "x".into(),
            resource: 0,
            scope: Scope::Cluster,
            normalization: Normalization::Percent { min: 0.0, max: 100.0 },
        };
        let cpu = |free, capacity| Figures {
            cluster_free: free,
            cluster_capacity: capacity,
            ..Default::default()
        };
        let v = |f| {
            compute(
                std::slice::from_ref(&def),
                &view(f, Figures::default(), None),
                &ResourceSet::built_in(),
            )[0]
            .value
        };
        assert_eq!(v(cpu(500, 1000)), 0);
        assert_eq!(v(cpu(1000, 1000)), 100);
        assert_eq!(v(cpu(750, 1000)), 50);
        assert_eq!(v(cpu(0, 1000)), -100);
        assert_eq!(v(cpu(0, 0)), -100, "no capacity at all");
    }

    #[test]
    fn formulas_name_units_and_bounds() {
        let defs = built_in_defs();
        let resources = ResourceSet::built_in();
        assert_eq!(
            defs[3].formula(&resources),
            "free memory summed over Ready, schedulable nodes, in GiB: 0 → -100, 1024 → 100, linear, clamped; \
             nothing free → -100"
        );
        assert!(
            defs[4]
                .formula(&resources)
                .starts_with("largest free nvidia.com/gpu on one Ready")
        );
        let resources = ResourceSet::with_extended(["amd.com/gpu"]).expect("fits");
        let amd = ocm_score_agent_contract::parse_extended_resource("amd.com/gpu").expect("valid");
        let [node, cluster] = ocm_score_agent_contract::extended_scores(&amd)
            .map(|spec| ScoreDef::from_spec(spec, &resources).expect("accounted"));
        assert_eq!(
            (node.name.as_str(), cluster.name.as_str(), node.resource),
            ("amdGpuNodeAvailable", "amdGpuClusterAvailable", 4)
        );
    }

    fn any_normalization() -> impl Strategy<Value = Normalization> {
        prop_oneof![
            (-1e4..1e4f64, 1e-3..1e5f64).prop_map(|(min, w)| Normalization::Absolute { min, max: min + w }),
            (-200.0..200.0f64, 1e-3..300.0f64)
                .prop_map(|(min, w)| Normalization::Percent { min, max: min + w }),
        ]
    }

    proptest! {
        /// A cluster that cannot host the resource (nothing free, or none at all) never outranks one
        /// that has some free, whatever the normalization and capacities.
        #[test]
        fn cannot_host_never_outranks_can_host(
            normalization in any_normalization(),
            node_scope in any::<bool>(),
            empty_free in -1_000_000i128..=0,
            empty_capacity in 0i128..1_000_000,
            free in 1i128..10_000_000,
            extra_capacity in 0i128..10_000_000,
        ) {
            let def = ScoreDef {
                name: "s".into(),
                resource: 2,
                scope: if node_scope { Scope::Node } else { Scope::Cluster },
                normalization,
            };
            let fig = |free, capacity| Figures { cluster_free: free, cluster_capacity: capacity, node_free: free, node_capacity: capacity };
            let resources = ResourceSet::built_in();
            let score = |g: Option<Figures>| compute(std::slice::from_ref(&def), &view(Figures::default(), Figures::default(), g), &resources)[0].value;
            let cannot = score(Some(fig(empty_free, empty_capacity)));
            let unknown = score(None);
            let can = score(Some(fig(free, free + extra_capacity)));
            prop_assert_eq!(cannot, MIN_SCORE);
            prop_assert_eq!(unknown, MIN_SCORE);
            prop_assert!(can >= cannot);
            prop_assert!((-100..=100).contains(&can));
        }

        /// More free never scores lower (same capacity).
        #[test]
        fn monotonic_in_free(normalization in any_normalization(), a in -1_000_000i128..10_000_000, b in -1_000_000i128..10_000_000) {
            let def = ScoreDef { name: "s".into(), resource: 0, scope: Scope::Cluster, normalization };
            let resources = ResourceSet::built_in();
            let score = |free| compute(std::slice::from_ref(&def), &view(Figures { cluster_free: free, cluster_capacity: 10_000_000, ..Default::default() }, Figures::default(), None), &resources)[0].value;
            let (lo, hi) = if a <= b { (a, b) } else { (b, a) };
            prop_assert!(score(lo) <= score(hi));
        }
    }
}
