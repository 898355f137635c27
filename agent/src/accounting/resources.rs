//! The set of resources the agent accounts for, and the amounts it keeps per resource.

use super::quantity::AccountingUnit;

// The names come from the agent's contract, which the hub checks extended resources against.
pub const CPU: &str = ocm_score_agent_contract::BUILT_IN_RESOURCES[0];
pub const MEMORY: &str = ocm_score_agent_contract::BUILT_IN_RESOURCES[1];
pub const NVIDIA_GPU: &str = ocm_score_agent_contract::BUILT_IN_RESOURCES[2];
pub const GOOGLE_TPU: &str = ocm_score_agent_contract::BUILT_IN_RESOURCES[3];

/// The resources the built-in scores are about, in index order: `cpu`, `memory`, `nvidia.com/gpu`,
/// `google.com/tpu`. Extended resources from the configuration follow them.
pub const BUILT_IN: [&str; 4] = [CPU, MEMORY, NVIDIA_GPU, GOOGLE_TPU];

/// The most resources one agent accounts for (built-in plus extended); bounds scratch space so the
/// per-pod arithmetic needs no allocation. The contract's, so the hub refuses what the agent would.
pub const MAX_RESOURCES: usize = ocm_score_agent_contract::MAX_ACCOUNTED_RESOURCES;

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("at most {max} resources can be accounted ({} built in), got {got}", BUILT_IN.len(), max = MAX_RESOURCES)]
pub struct TooManyResources {
    pub got: usize,
}

/// An ordered list of resource names; a resource's position is its index in every amount vector.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResourceSet {
    names: Vec<String>,
}

impl ResourceSet {
    /// The built-in resources followed by `extended` (duplicates of earlier names are skipped).
    pub fn with_extended<I, S>(extended: I) -> Result<Self, TooManyResources>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut names: Vec<String> = BUILT_IN.iter().map(|n| (*n).to_owned()).collect();
        for name in extended {
            let name = name.into();
            if !names.contains(&name) {
                names.push(name);
            }
        }
        if names.len() > MAX_RESOURCES {
            return Err(TooManyResources { got: names.len() });
        }
        Ok(Self { names })
    }

    pub fn built_in() -> Self {
        Self {
            names: BUILT_IN.iter().map(|n| (*n).to_owned()).collect(),
        }
    }

    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn name(&self, index: usize) -> &str {
        &self.names[index]
    }

    /// The index of `name`, if accounted. A linear scan: the set is a handful of names, and this is
    /// faster than hashing for that size.
    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n == name)
    }

    /// cpu is accounted in millicores; every other resource in whole units (memory in bytes).
    pub fn unit(&self, index: usize) -> AccountingUnit {
        if self.names[index] == CPU {
            AccountingUnit::Milli
        } else {
            AccountingUnit::Whole
        }
    }

    /// How many accounting units make one natural unit (the unit normalization bounds are written
    /// in): cores for cpu, GiB for memory, the plain count for anything else.
    pub fn units_per_natural_unit(&self, index: usize) -> f64 {
        match self.names[index].as_str() {
            CPU => 1000.0,
            MEMORY => (1u64 << 30) as f64,
            _ => 1.0,
        }
    }

    /// How many accounting units make one base unit as exported on /metrics (Prometheus base units:
    /// cores, bytes, devices).
    pub fn units_per_base_unit(&self, index: usize) -> f64 {
        match self.unit(index) {
            AccountingUnit::Milli => 1000.0,
            AccountingUnit::Whole => 1.0,
        }
    }

    /// A zeroed amount vector for this set.
    pub fn zeros(&self) -> Box<[i64]> {
        vec![0; self.names.len()].into_boxed_slice()
    }
}
