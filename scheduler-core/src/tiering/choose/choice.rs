//! Step 4, what both modes ([`super::failover`], [`super::overflow`]) choose from and return.
//! It decides what may gate a voluntary move right now: the end of `minDwell` after the last
//! transition, `Frozen` (the transition budget ran out), the `Manual` trigger and the override,
//! all read from the prior status so a new leader continues where the last one stopped.

use super::health::Health;
use crate::instant::{dur, of};
use ocm_score_api::crd::tiered_placement::{
    FailbackMode, TieredPlacementSpec, TieredPlacementStatus, Timings, TransitionKind,
};

/// A change of the active tiers, recorded as a transition.
pub(super) struct Move {
    pub kind: TransitionKind,
    pub reason: String,
    pub message: String,
}

/// A voluntary move that is due but waits (`FailbackPending`).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Pending {
    /// The tier it would leave and the tier it would move to (indices into `spec.tiers`).
    pub from: usize,
    pub to: usize,
    /// When it may happen (`None`: on a new manual trigger).
    pub eligible_at: Option<i128>,
    pub reason: &'static str,
}

/// The active tiers a mode chose, and what the status says about it.
#[derive(Default)]
pub(super) struct Choice {
    /// Indices into `spec.tiers`, sorted.
    pub active: Vec<usize>,
    /// Overflow: chosen clusters per tier (sorted names).
    pub chosen: Vec<Vec<String>>,
    pub movement: Option<Move>,
    pub pending: Option<Pending>,
    pub no_tier_satisfied: bool,
    pub insufficient: bool,
    /// Keep the child as it is (nothing qualifies anywhere).
    pub keep_child: bool,
    /// The tier this plan's forced failover relapsed from (its penalty grows).
    pub relapse_of: Option<usize>,
}

/// Kinds the transition budget (`maxTransitionsPerHour`) counts.
pub(super) fn counted(kind: TransitionKind) -> bool {
    matches!(
        kind,
        TransitionKind::Failover
            | TransitionKind::Overflow
            | TransitionKind::Contract
            | TransitionKind::Failback
    )
}

/// Kinds that are voluntary: gated by minDwell and `Frozen`, and made before they break.
pub(super) fn voluntary(kind: TransitionKind) -> bool {
    matches!(kind, TransitionKind::Contract | TransitionKind::Failback)
}

/// What the prior status and the spec say about moves right now.
pub(super) struct Gates {
    /// `minDwell` after the last transition ends then: no voluntary move before.
    pub dwell_end: Option<i128>,
    /// `Frozen` until then; `None` when not frozen now.
    pub frozen_until: Option<i128>,
    /// `Manual`: the trigger changed since the last plan saw it.
    pub manual_fired: bool,
    /// The trigger value the status records after this plan.
    pub observed_trigger: String,
    /// The tier `spec.override` pins.
    pub override_tier: Option<usize>,
    /// The last transition's kind and target tiers.
    pub last_transition: Option<(TransitionKind, Vec<String>)>,
    /// The spec changed since the last plan.
    pub generation_changed: bool,
}

impl Gates {
    pub(super) fn read(
        spec: &TieredPlacementSpec,
        generation: Option<i64>,
        prior: Option<&TieredPlacementStatus>,
        timings: &Timings,
        first_plan: bool,
        now: i128,
    ) -> Self {
        let last = prior.and_then(|p| p.transitions.first());
        let observed_trigger = prior
            .and_then(|p| p.failback.as_ref())
            .map(|f| f.observed_trigger.clone())
            .unwrap_or_default();
        let trigger = &spec.failback.trigger;
        let manual = spec.failback.policy == FailbackMode::Manual;
        Gates {
            dwell_end: last.map(|t| of(&t.time) + dur(timings.min_dwell)),
            frozen_until: prior
                .and_then(|p| p.frozen_until.as_ref())
                .map(of)
                .filter(|f| now < *f),
            manual_fired: manual && !first_plan && !trigger.is_empty() && *trigger != observed_trigger,
            observed_trigger: if manual { trigger.clone() } else { observed_trigger },
            override_tier: spec
                .override_
                .as_ref()
                .and_then(|o| spec.tiers.iter().position(|t| t.name == o.tier)),
            last_transition: last.map(|t| (t.kind, t.to.clone())),
            generation_changed: prior.is_some_and(|p| p.observed_generation != generation),
        }
    }

    pub(super) fn frozen(&self) -> bool {
        self.frozen_until.is_some()
    }
}

/// Everything a mode chooses from.
pub(super) struct Situation<'a> {
    pub spec: &'a TieredPlacementSpec,
    pub timings: &'a Timings,
    /// Per tier, in spec order.
    pub health: &'a [Health],
    pub gates: &'a Gates,
    pub first_plan: bool,
    pub tiers_vanished: bool,
    /// Per cluster id: excluded because its workload Failed (until then, `i128::MAX`: until
    /// evidence).
    pub excluded: &'a [Option<i128>],
    pub now: i128,
}

impl Situation<'_> {
    pub(super) fn name(&self, i: usize) -> &str {
        &self.spec.tiers[i].name
    }

    /// A tier's counts, for transition messages.
    pub(super) fn describe(&self, i: usize) -> String {
        let h = &self.health[i];
        let failed = if h.workload_failed.is_empty() {
            String::new()
        } else {
            format!(" ({} more with a Failed workload)", h.workload_failed.len())
        };
        format!(
            "{}: {} feasible, {} qualifying{failed}, needs {}",
            self.name(i),
            h.feasible.len(),
            h.qualifying.len(),
            h.min
        )
    }

    /// Whether the last transition failed back to tier `i` (so leaving it now is a relapse).
    pub(super) fn entered_by_failback(&self, i: usize) -> bool {
        self.gates.last_transition.as_ref().is_some_and(|(kind, to)| {
            *kind == TransitionKind::Failback && to.first().map(String::as_str) == Some(self.name(i))
        })
    }

    /// When a voluntary move may happen at the earliest, by dwell.
    pub(super) fn voluntary_gate(&self) -> Option<i128> {
        self.gates.dwell_end
    }

    pub(super) fn frozen(&self) -> bool {
        self.gates.frozen()
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_support::tier;
    use super::*;
    use ocm_score_api::crd::tiered_placement::FailbackStatus;

    #[test]
    fn a_manual_trigger_fires_once_per_new_value_and_never_on_the_first_plan() {
        let mut spec = TieredPlacementSpec {
            tiers: vec![tier("east")],
            ..TieredPlacementSpec::default()
        };
        spec.failback.policy = FailbackMode::Manual;
        spec.failback.trigger = "go-1".into();
        let timings = spec.timings().unwrap();
        let seen = |value: &str| TieredPlacementStatus {
            failback: Some(FailbackStatus {
                observed_trigger: value.into(),
                pending: None,
            }),
            ..TieredPlacementStatus::default()
        };
        let gates = |prior: &TieredPlacementStatus, first_plan| {
            Gates::read(&spec, None, Some(prior), &timings, first_plan, 0)
        };
        assert!(gates(&seen(""), false).manual_fired);
        assert!(!gates(&seen("go-1"), false).manual_fired);
        assert!(!gates(&seen(""), true).manual_fired);
        assert_eq!(gates(&seen(""), false).observed_trigger, "go-1");
    }

    #[test]
    fn frozen_holds_only_until_its_end() {
        let spec = TieredPlacementSpec {
            tiers: vec![tier("east")],
            ..TieredPlacementSpec::default()
        };
        let timings = spec.timings().unwrap();
        let prior = TieredPlacementStatus {
            frozen_until: Some(crate::instant::time(100)),
            ..TieredPlacementStatus::default()
        };
        let at = |now| Gates::read(&spec, None, Some(&prior), &timings, false, now);
        assert!(at(99).frozen());
        assert!(!at(100).frozen());
    }
}
