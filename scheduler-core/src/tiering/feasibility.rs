//! Step 1: which clusters each tier holds and which of them OCM would find feasible.
//!
//! Nothing is re-derived: each tier is scheduled as an OCM Placement of its own (the child's
//! namespace and name, so "in decision" is judged against the child's PlacementDecisions; the
//! tier's cluster sets and predicates; the template's tolerations and prioritizers) with
//! scheduler-core's OCM-exact candidates, filters and prioritizers. A cluster belongs to the
//! first tier whose cluster sets and predicates select it.
//!
//! Tolerations are judged `LEAD` ahead of `now`, and the requeue comes `LEAD` before each
//! toleration deadline, so a forced failover reaches OCM before OCM's own deadline requeue drops
//! the cluster (one sync moves the workload; no empty decision list in between).

use crate::placement::filters::{predicate, taints};
use crate::placement::snapshot::{ClusterId, HubSnapshot};
use crate::placement::weights;
use crate::placement::{candidates, schedule};
use ocm_score_api::{Placement, PlacementSpec, TieredPlacementSpec};

/// How far ahead tolerations are judged.
pub const LEAD_NS: i128 = 1_000_000_000;

/// One tier, evaluated.
#[derive(Clone, Debug, Default)]
pub struct TierClusters {
    /// Members: clusters of the tier's bound cluster sets that its predicates select and no
    /// earlier tier holds, in name order.
    pub members: Vec<ClusterId>,
    /// Members OCM would keep at `now + LEAD` (best first by the template's prioritizers when
    /// ranked, else in name order).
    pub feasible: Vec<ClusterId>,
    /// Members the filters drop, with why.
    pub rejected: Vec<(ClusterId, String)>,
    /// A misconfiguration OCM reports for this tier (bad selector, CEL that does not compile).
    pub misconfigured: Option<String>,
    /// Earliest `deadline - LEAD` of a toleration still running for a member.
    pub requeue_at: Option<i128>,
}

/// The Placement OCM would schedule for one tier.
pub(crate) fn tier_placement(
    spec: &TieredPlacementSpec,
    namespace: &str,
    child: &str,
    tier: usize,
) -> Placement {
    let t = &spec.tiers[tier];
    Placement {
        metadata: ocm_score_api::ObjectMeta {
            namespace: Some(namespace.to_string()),
            name: Some(child.to_string()),
            ..Default::default()
        },
        spec: PlacementSpec {
            cluster_sets: t.cluster_sets.clone(),
            predicates: t.predicates.clone(),
            tolerations: spec.template.tolerations.clone(),
            prioritizer_policy: spec.template.prioritizer_policy.clone(),
            ..PlacementSpec::default()
        },
        status: None,
    }
}

/// Evaluates every tier at `now_ns`. `in_decision` says which clusters are in the child's
/// PlacementDecisions (by id). With `rank`, each tier's feasible members are ordered by the
/// template's prioritizers (one OCM `Schedule` over all tiers' feasible members, so Balance's
/// fleet-wide count is taken once); otherwise they stay in name order.
pub fn evaluate(
    spec: &TieredPlacementSpec,
    namespace: &str,
    child: &str,
    snapshot: &HubSnapshot,
    in_decision: &[bool],
    now_ns: i128,
    rank: bool,
) -> Vec<TierClusters> {
    let mut claimed = vec![false; snapshot.cluster_count()];
    let bindings = candidates::valid_bindings(snapshot, namespace);
    let ahead = now_ns + LEAD_NS;
    let tolerations = &spec.template.tolerations;
    let mut out: Vec<TierClusters> = (0..spec.tiers.len())
        .map(|i| {
            let placement = tier_placement(spec, namespace, child, i);
            let mut out = TierClusters::default();
            let sets = candidates::eligible_sets(&placement, &bindings);
            let cands = match candidates::available_clusters(snapshot, &sets) {
                Ok(c) => c,
                Err(e) => {
                    out.misconfigured = Some(e.to_string());
                    return out;
                }
            };
            let cands: Vec<ClusterId> = cands.into_iter().filter(|id| !claimed[id.index()]).collect();
            let (passed, status) = predicate::filter(snapshot, &placement, &cands);
            if status.is_error() {
                out.misconfigured = Some(format!("{}: {}", status.plugin, status.message));
                return out;
            }
            if let Err(status) = taints::validate(tolerations) {
                out.misconfigured = Some(format!("spec.template.tolerations: {}", status.message));
                return out;
            }
            out.members = passed.passed;
            for id in &out.members {
                claimed[id.index()] = true;
            }
            // Feasible at now + LEAD: OCM keeps them at least until then.
            for &id in &out.members {
                if !snapshot.is_tainted(id) {
                    out.feasible.push(id);
                    continue;
                }
                match taints::check(
                    snapshot.cluster_taints(id),
                    tolerations,
                    in_decision[id.index()],
                    ahead,
                ) {
                    taints::Tolerance::Tolerated { until } => {
                        if let Some(deadline) = until {
                            let at = deadline - LEAD_NS;
                            out.requeue_at = Some(out.requeue_at.map_or(at, |r: i128| r.min(at)));
                        }
                        out.feasible.push(id);
                    }
                    taints::Tolerance::Rejected { taint, expired } => {
                        let key = &snapshot.cluster_taints(id)[taint].key;
                        let why = match expired {
                            Some((_, at)) if at > now_ns => {
                                format!("taint {key}: toleration runs out within 1s")
                            }
                            Some((_, at)) => format!(
                                "taint {key} no longer tolerated since {}",
                                crate::instant::timestamp(at)
                            ),
                            None => format!("taint {key} not tolerated"),
                        };
                        out.rejected.push((id, why));
                    }
                }
            }
            out
        })
        .collect();
    if let Err(status) = weights::resolve(&tier_placement(spec, namespace, child, 0)) {
        if let Some(first) = out.first_mut() {
            first.misconfigured = Some(format!("spec.template.prioritizerPolicy: {}", status.message));
        }
        return out;
    }
    if rank {
        let all: Vec<ClusterId> = {
            let mut v: Vec<ClusterId> = out.iter().flat_map(|t| t.feasible.iter().copied()).collect();
            v.sort();
            v
        };
        let mut placement = tier_placement(spec, namespace, child, 0);
        placement.spec.predicates.clear();
        let now = crate::instant::timestamp(now_ns);
        if let Ok(result) = schedule(snapshot, &placement, &all, now)
            && result.ranking.len() == result.feasible.len()
        {
            let mut position = vec![usize::MAX; snapshot.cluster_count()];
            for (r, (id, _)) in result.ranked().enumerate() {
                position[id.index()] = r;
            }
            for t in &mut out {
                t.feasible.sort_by_key(|id| position[id.index()]);
            }
        }
    }
    out
}
