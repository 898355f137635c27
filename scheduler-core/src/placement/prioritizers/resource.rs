//! `ResourceAllocatableCPU` / `ResourceAllocatableMemory`: min-max normalisation of the
//! allocatable amount over the feasible clusters that report both allocatable and capacity.
//!
//! `score = trunc(((a - min) / (max - min) - 0.5) * 2 * 100)` in float64 (ratio 0.6 gives 19),
//! 100 for everyone when all values are equal, and no entry at all for clusters that lack either
//! field.

use super::ScoreContext;
use crate::placement::snapshot::ClusterResources;
use crate::placement::weights::PrioritizerKind;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resource {
    Cpu,
    Memory,
}

impl Resource {
    /// The resource a prioritizer normalises, when it is one of the two resource prioritizers.
    pub fn of(kind: &PrioritizerKind) -> Option<Resource> {
        match kind {
            PrioritizerKind::ResourceAllocatableCpu => Some(Resource::Cpu),
            PrioritizerKind::ResourceAllocatableMemory => Some(Resource::Memory),
            _ => None,
        }
    }

    /// The allocatable amount, when both allocatable and capacity are reported.
    pub fn allocatable(self, r: &ClusterResources) -> Option<f64> {
        match self {
            Resource::Cpu => r.cpu_allocatable.filter(|_| r.cpu_capacity.is_some()),
            Resource::Memory => r.memory_allocatable.filter(|_| r.memory_capacity.is_some()),
        }
    }

    pub fn key(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
        }
    }
}

pub fn score(ctx: &ScoreContext<'_>, resource: Resource) -> Vec<Option<i64>> {
    let values: Vec<Option<f64>> = ctx
        .feasible
        .iter()
        .map(|id| resource.allocatable(ctx.snapshot.resources(*id)))
        .collect();
    let (min, max) = values
        .iter()
        .flatten()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &v| {
            (if v < lo { v } else { lo }, if v > hi { v } else { hi })
        });
    values
        .into_iter()
        .map(|v| v.map(|a| normalise(a, min, max)))
        .collect()
}

pub fn normalise(value: f64, min: f64, max: f64) -> i64 {
    if max - min != 0.0 {
        let ratio = (value - min) / (max - min);
        ((ratio - 0.5) * 2.0 * 100.0) as i64
    } else {
        100
    }
}

#[cfg(test)]
mod tests {
    use super::normalise;

    #[test]
    fn keeps_upstream_truncation() {
        assert_eq!(normalise(30.0, 0.0, 50.0), 19);
        assert_eq!(normalise(20.0, 0.0, 50.0), -19);
        assert_eq!(normalise(35.0, 0.0, 50.0), 39);
        assert_eq!(normalise(1.0, 0.0, 3.0), -33);
        assert_eq!(normalise(2.0, 0.0, 3.0), 33);
        assert_eq!(normalise(5.0, 5.0, 5.0), 100);
    }
}
