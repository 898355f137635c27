//! Small inputs for the step modules' unit tests.

use super::choice::Gates;
use super::health::Health;
use crate::placement::snapshot::{ClusterId, HubObjects, HubSnapshot};
use crate::tiering::workload::ClusterVerdict;
use ocm_score_api::crd::tiered_placement::{ClusterWorkloadHealth, Tier, WorkloadState};
use ocm_score_api::{ManagedCluster, ObjectMeta};

/// A hub holding clusters named `names` (their ids follow name order).
pub(super) fn snapshot(names: &[&str]) -> HubSnapshot {
    let clusters = names
        .iter()
        .map(|n| ManagedCluster {
            metadata: ObjectMeta {
                name: Some(n.to_string()),
                ..ObjectMeta::default()
            },
            ..ManagedCluster::default()
        })
        .collect();
    HubSnapshot::new(HubObjects {
        clusters,
        ..HubObjects::default()
    })
    .expect("a hub of plain clusters")
}

pub(super) fn tier(name: &str) -> Tier {
    Tier {
        name: name.into(),
        cluster_sets: vec![name.into()],
        ..Tier::default()
    }
}

pub(super) fn ids(range: std::ops::Range<u32>) -> Vec<ClusterId> {
    range.map(ClusterId).collect()
}

/// A tier whose clusters `feasible` all qualify and may enter, healthy since `healthy_since`.
pub(super) fn healthy(feasible: Vec<ClusterId>, min: usize, healthy_since: Option<i128>) -> Health {
    Health {
        min,
        satisfied: feasible.len() >= min,
        entry_ok: feasible.len() >= min,
        qualifying: feasible.clone(),
        entry: feasible.clone(),
        capacity_entry: feasible.clone(),
        capacity_qualifying: feasible.clone(),
        fresh_qualifying: feasible.clone(),
        feasible,
        workload_failed: Vec::new(),
        unknown_only: 0,
        healthy_since,
        penalty: 0,
        penalty_since: None,
        effective_hold_down: 0,
        quarantined_until: None,
    }
}

/// A tier whose clusters `feasible` none qualifies (capacity lost, fresh data).
pub(super) fn unhealthy(feasible: Vec<ClusterId>, min: usize) -> Health {
    Health {
        satisfied: false,
        entry_ok: false,
        qualifying: Vec::new(),
        entry: Vec::new(),
        capacity_entry: Vec::new(),
        capacity_qualifying: Vec::new(),
        fresh_qualifying: Vec::new(),
        healthy_since: None,
        ..healthy(feasible, min, None)
    }
}

/// Gates that let every move through: no dwell, freeze, trigger or override.
pub(super) fn gates() -> Gates {
    Gates {
        dwell_end: None,
        frozen_until: None,
        manual_fired: false,
        observed_trigger: String::new(),
        override_tier: None,
        last_transition: None,
        generation_changed: false,
    }
}

/// A cluster whose work was judged `state` (since `since`, in ns), with nothing newly observed.
pub(super) fn verdict(cluster: &str, state: WorkloadState, since: Option<i128>) -> ClusterVerdict {
    ClusterVerdict {
        entry: ClusterWorkloadHealth {
            cluster: cluster.into(),
            state,
            since: since.map(crate::instant::time),
            ..ClusterWorkloadHealth::default()
        },
        has_work: true,
        observed_unhealthy: false,
        observed_healthy: false,
        newly_failed: false,
        forgotten: None,
    }
}
