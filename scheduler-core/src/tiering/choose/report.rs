//! Step 7, the explanation of each tier ([`TierReport`], what `simulate` prints). It decides why
//! a member does not qualify, the first reason that applies: OCM's filters rejected it, its
//! workload Failed (until when), or its capacity verdict.

use super::super::TierReport;
use super::super::feasibility::TierClusters;
use super::super::verdict::Verdict;
use super::super::workload::verdicts::WorkloadVerdicts;
use super::exclusion::{self, Exclusion};
use super::health::Health;
use crate::placement::snapshot::{ClusterId, HubSnapshot};
use ocm_score_api::crd::tiered_placement::TieredPlacementSpec;
use std::collections::HashSet;

/// What the reports are made from.
pub(super) struct Input<'a> {
    pub spec: &'a TieredPlacementSpec,
    pub tiers: &'a [TierClusters],
    /// Per tier, in spec order.
    pub health: &'a [Health],
    /// Per cluster id: the capacity verdict.
    pub verdicts: &'a [Option<Verdict>],
    pub exclusion: &'a Exclusion,
    pub workload: &'a WorkloadVerdicts,
    /// The clusters OCM is expected to select.
    pub predicted: &'a [String],
    pub snapshot: &'a HubSnapshot,
}

/// One report per tier, in spec order.
pub(super) fn tiers(input: &Input<'_>) -> Vec<TierReport> {
    let Input {
        spec,
        tiers,
        health,
        verdicts,
        exclusion,
        workload,
        predicted,
        snapshot,
    } = *input;
    let name_of = |id: &ClusterId| snapshot.cluster_name(*id).to_string();
    let predicted: HashSet<&str> = predicted.iter().map(String::as_str).collect();
    spec.tiers
        .iter()
        .zip(tiers)
        .zip(health)
        .map(|((tier, t), h)| {
            let excluded = t
                .members
                .iter()
                .filter_map(|id| why_not(*id, t, verdicts, exclusion, workload, snapshot))
                .collect();
            let mut selected: Vec<String> = t
                .members
                .iter()
                .map(name_of)
                .filter(|n| predicted.contains(n.as_str()))
                .collect();
            selected.sort();
            TierReport {
                name: tier.name.clone(),
                qualifying: h.qualifying.iter().map(name_of).collect(),
                selected,
                excluded,
                misconfigured: t.misconfigured.clone(),
            }
        })
        .collect()
}

/// Why member `id` of tier `t` does not qualify (`None`: it does).
fn why_not(
    id: ClusterId,
    t: &TierClusters,
    verdicts: &[Option<Verdict>],
    exclusion: &Exclusion,
    workload: &WorkloadVerdicts,
    snapshot: &HubSnapshot,
) -> Option<(String, String)> {
    let name = snapshot.cluster_name(id).to_string();
    if let Some((_, why)) = t.rejected.iter().find(|(r, _)| *r == id) {
        return Some((name, why.clone()));
    }
    if let Some(Some(until)) = exclusion.excluded.get(id.index()) {
        let why = exclusion::reason(workload, &name, *until);
        return Some((name, why));
    }
    let v = verdicts[id.index()].as_ref()?;
    (!v.qualified).then(|| (name, v.why.clone()))
}

#[cfg(test)]
mod tests {
    use super::super::test_support::{ids, snapshot};
    use super::*;

    #[test]
    fn a_member_is_explained_by_its_rejection_then_its_workload_then_its_capacity() {
        let hub = snapshot(&["a-1", "a-2", "a-3", "a-4"]);
        let t = TierClusters {
            members: ids(0..4),
            rejected: vec![(ClusterId(0), "tainted".into())],
            ..TierClusters::default()
        };
        let failing = Some(Verdict {
            why: "cpu low".into(),
            ..Verdict::default()
        });
        let qualified = Some(Verdict {
            qualified: true,
            ..Verdict::default()
        });
        let verdicts = [failing.clone(), failing.clone(), failing, qualified];
        let exclusion = Exclusion {
            excluded: vec![Some(i128::MAX), Some(i128::MAX), None, None],
            ..Exclusion::default()
        };
        let none = WorkloadVerdicts::default();
        let why = |i: u32| why_not(ClusterId(i), &t, &verdicts, &exclusion, &none, &hub).map(|(_, w)| w);
        assert_eq!(why(0).as_deref(), Some("tainted"));
        assert_eq!(why(1).as_deref(), Some("workload Failed"));
        assert_eq!(why(2).as_deref(), Some("cpu low"));
        assert_eq!(why(3), None);
    }
}
