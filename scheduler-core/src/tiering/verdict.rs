//! Step 2: the capacity verdict of each tier member, with hysteresis, debounce and staleness.
//!
//! A rule reads one AddOnPlacementScore value. A missing object, a missing score name, or
//! `now > validUntil` (strictly, as OCM) is **Unknown**: Unknown keeps the last verdict
//! (`KeepLastVerdict`) or loses it after `staleGrace` (`Disqualify`), and it is never a reason to
//! *enter*. A qualified cluster stays qualified while the value is at least the exit threshold; a
//! non-qualified one qualifies at the enter threshold. A change of the verdict takes effect once
//! it has been seen continuously for `debounce`.
//!
//! With `spec.workload`, every member must also hold the workload: `fits.<shape>`, less the other
//! placements' reservations, at least `replicasPerCluster` (a cluster already running it is
//! credited its own replicas). This implicit rule has no hysteresis band, so no move (failover,
//! overflow, failback) lands on a cluster too small for the workload, whatever the explicit rules
//! say; it is left out only when an explicit `fits` rule on the same shape already asks as much.
//!
//! The memory this needs (effective verdicts, pending changes, stale clocks) lives in
//! `status.capacity`, so a restarted controller continues exactly (the design kept debounce
//! timers in memory only; keeping them in status is what makes restart equivalence hold).

use crate::instant::{ceil_second, dur, of, time, timestamp};
use crate::placement::snapshot::{ClusterId, HubSnapshot};
use crate::reservation::View;
use ocm_score_api::TieredPlacementSpec;
use ocm_score_api::crd::tiered_placement::{
    CapacityRule, CapacityState, PendingVerdict, StaleSince, Timings, WhenStale,
};

/// What one cluster's rules say right now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Raw {
    Qualifies,
    Fails,
    Unknown,
}

/// The verdict of one tier member.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Effective verdict (hysteresis, debounce, staleness applied).
    pub qualified: bool,
    /// Qualifies under the enter thresholds on fresh data (may enter a tier).
    pub entry: bool,
    /// Some rule is Unknown.
    pub unknown: bool,
    /// Lost its verdict because its scores stayed Unknown past `staleGrace`.
    pub stale_disqualified: bool,
    /// A pending change takes effect then.
    pub debouncing_until: Option<i128>,
    /// Why, for people (`fits.a100-x1 = 2 replicas < enter 4`); only for clusters that do not
    /// qualify or wait out a debounce.
    pub why: String,
}

pub struct Verdicts {
    /// Indexed by cluster id; `None` for clusters in no tier.
    pub by_cluster: Vec<Option<Verdict>>,
    pub state: Option<CapacityState>,
    /// The verdicts' own timers: debounce and stale grace ends, a deducted reservation's TTL.
    pub requeue_at: Option<i128>,
    /// The earliest instant a score read here expires (`validUntil` + 1 ns) unless renewed
    /// first; apart from `requeue_at`, since a controller told of expiries need not wait for it.
    pub scores_expire_at: Option<i128>,
}

fn min_time(slot: &mut Option<i128>, t: i128) {
    *slot = Some(slot.map_or(t, |s| s.min(t)));
}

/// The value of score `name` in cluster `id`'s AddOnPlacementScore `resource` (the last item
/// so named, as OCM reads it), and its `validUntil`.
fn read(
    snapshot: &HubSnapshot,
    id: ClusterId,
    resource: &str,
    name: &str,
    now: i128,
) -> Result<(i32, Option<i128>), String> {
    let Some(entry) = snapshot.score_entry_named(id, resource) else {
        return Err("no AddOnPlacementScore".into());
    };
    if !entry.has_status {
        return Err("no status".into());
    }
    let until = entry.valid_until_ns;
    if let Some(u) = until
        && snapshot.score_expired(entry, now)
    {
        return Err(format!("expired at {}", timestamp(u)));
    }
    match snapshot.last_score(entry, snapshot.score_name_id(name)) {
        Some(value) => Ok((value, until)),
        None => Err(format!("no score {name:?}")),
    }
}

/// One rule, resolved once per plan.
struct Rule<'a> {
    /// How explanations name the rule's origin (`spec.workload: ` for the implicit one).
    origin: &'static str,
    resource: &'a str,
    name: String,
    enter: i64,
    exit: i64,
    /// `fits`: the shape, replicas per score point, and the self-credit for clusters running
    /// the workload.
    fits: Option<Fits<'a>>,
}

#[derive(Clone, Copy)]
struct Fits<'a> {
    shape: &'a str,
    scale: i64,
    credit: i64,
}

impl<'a> Rule<'a> {
    fn new(spec: &TieredPlacementSpec, rule: &'a CapacityRule) -> Option<Self> {
        if let Some(f) = &rule.fits {
            let credit = match &spec.workload {
                Some(w) if w.shape == f.shape => i64::from(w.replicas_per_cluster),
                _ => 0,
            };
            Some(Rule {
                origin: "",
                resource: ocm_score_api::crd::tiered_placement::FITS_RESOURCE_NAME,
                name: format!("fits.{}", f.shape),
                enter: i64::from(f.at_least_replicas),
                exit: i64::from(f.exit_below_replicas.unwrap_or(f.at_least_replicas)),
                fits: Some(Fits {
                    shape: &f.shape,
                    scale: i64::from(f.scale.unwrap_or(1).max(1)),
                    credit,
                }),
            })
        } else {
            rule.score.as_ref().map(|s| Rule {
                origin: "",
                resource: s.resource_name.as_str(),
                name: s.score_name.clone(),
                enter: i64::from(s.at_least),
                exit: i64::from(s.exit_below.unwrap_or((s.at_least - 20).max(-100))),
                fits: None,
            })
        }
    }

    /// The implicit rule of `spec.workload`: each member holds `replicasPerCluster` replicas of
    /// its shape, with no band; `None` without a workload, or when an explicit `fits` rule on the
    /// shape asks at least as much on entry and exit. The scale is the explicit rule's, else the
    /// shape's (`WorkloadShape.spec.scale`).
    fn workload(
        spec: &'a TieredPlacementSpec,
        explicit: &[CapacityRule],
        reserved: &View<'_>,
    ) -> Option<Self> {
        let w = spec.workload.as_ref()?;
        let needed = i64::from(w.replicas_per_cluster);
        let same_shape = explicit
            .iter()
            .filter_map(|r| r.fits.as_ref())
            .filter(|f| f.shape == w.shape);
        let mut scale = None;
        for f in same_shape {
            let exit = f.exit_below_replicas.unwrap_or(f.at_least_replicas);
            if i64::from(f.at_least_replicas) >= needed && i64::from(exit) >= needed {
                return None;
            }
            scale = scale.or(f.scale);
        }
        Some(Rule {
            origin: "spec.workload: ",
            resource: ocm_score_api::crd::tiered_placement::FITS_RESOURCE_NAME,
            name: format!("fits.{}", w.shape),
            enter: needed,
            exit: needed,
            fits: Some(Fits {
                shape: &w.shape,
                scale: i64::from(scale.unwrap_or_else(|| reserved.scale(&w.shape)).max(1)),
                credit: needed,
            }),
        })
    }

    /// Replicas of the rule's shape the cluster holds for this placement: reported less the
    /// other placements' reservations (floored at 0), plus its own footprint where it runs;
    /// `None` when the score is Unknown. Only for `fits` rules.
    fn replicas(
        &self,
        snapshot: &HubSnapshot,
        reserved: &View<'_>,
        id: ClusterId,
        in_decision: bool,
        now: i128,
    ) -> Option<i64> {
        let f = self.fits?;
        let (value, _) = read(snapshot, id, self.resource, &self.name, now).ok()?;
        let reported = (i64::from(value) + 100) * f.scale;
        let taken = i64::try_from(reserved.reserved(snapshot.cluster_name(id), f.shape))
            .unwrap_or(i64::MAX)
            .min(reported.max(0));
        Some(reported - taken + if in_decision { f.credit } else { 0 })
    }

    /// `(raw verdict with the threshold for `was_qualified`, raw with the enter threshold,
    /// validUntil, description when asked for)`.
    #[allow(clippy::too_many_arguments)]
    fn verdict(
        &self,
        snapshot: &HubSnapshot,
        reserved: &View<'_>,
        id: ClusterId,
        in_decision: bool,
        was_qualified: bool,
        now: i128,
        describe: bool,
    ) -> (Raw, Raw, Option<i128>, String) {
        let (resource, name, origin) = (self.resource, &self.name, self.origin);
        match read(snapshot, id, resource, name, now) {
            Err(why) => (
                Raw::Unknown,
                Raw::Unknown,
                None,
                format!("{origin}{resource}/{name}: {why}"),
            ),
            Ok((value, until)) => {
                // `fits` values encode replicas as `floor(fits / scale) - 100`
                // (docs/fits-and-reservations.md); other
                // placements' reservations are deducted from what was reported, floored at 0.
                let mut taken = 0;
                let v = match self.fits {
                    Some(f) => {
                        let reported = (i64::from(value) + 100) * f.scale;
                        if !reserved.is_empty() {
                            let r = reserved.reserved(snapshot.cluster_name(id), f.shape);
                            taken = i64::try_from(r).unwrap_or(i64::MAX).min(reported.max(0));
                        }
                        reported - taken + if in_decision { f.credit } else { 0 }
                    }
                    None => i64::from(value),
                };
                let threshold = if was_qualified { self.exit } else { self.enter };
                let pass = |t: i64| if v >= t { Raw::Qualifies } else { Raw::Fails };
                let text = if describe {
                    let unit = if self.fits.is_some() { " replicas" } else { "" };
                    let cmp = if v >= threshold { ">=" } else { "<" };
                    let which = if was_qualified { "exit" } else { "enter" };
                    let less = if taken > 0 {
                        format!(" ({taken} reserved by other placements)")
                    } else {
                        String::new()
                    };
                    format!("{origin}{name} = {v}{unit}{less} {cmp} {which} {threshold}")
                } else {
                    String::new()
                };
                (pass(threshold), pass(self.enter), until, text)
            }
        }
    }
}

fn combine(a: Raw, b: Raw) -> Raw {
    match (a, b) {
        (Raw::Fails, _) | (_, Raw::Fails) => Raw::Fails,
        (Raw::Unknown, _) | (_, Raw::Unknown) => Raw::Unknown,
        _ => Raw::Qualifies,
    }
}

/// Evaluates the members of all tiers. `prior` is the last status' capacity memory (`None` on
/// the first plan: verdicts then take effect at once, with the enter thresholds).
#[allow(clippy::too_many_arguments)]
pub fn evaluate(
    spec: &TieredPlacementSpec,
    timings: &Timings,
    snapshot: &HubSnapshot,
    members: &[ClusterId],
    in_decision: &[bool],
    prior: Option<&CapacityState>,
    first_plan: bool,
    reserved: &View<'_>,
    now: i128,
) -> Verdicts {
    let mut by_cluster: Vec<Option<Verdict>> = vec![None; snapshot.cluster_count()];
    let explicit = spec.capacity.as_ref().map_or(&[][..], |c| c.rules.as_slice());
    let mut rules: Vec<Rule<'_>> = explicit.iter().filter_map(|r| Rule::new(spec, r)).collect();
    rules.extend(Rule::workload(spec, explicit, reserved));
    if rules.is_empty() {
        for id in members {
            by_cluster[id.index()] = Some(Verdict {
                qualified: true,
                entry: true,
                ..Verdict::default()
            });
        }
        return Verdicts {
            by_cluster,
            state: None,
            requeue_at: None,
            scores_expire_at: None,
        };
    }
    let when_stale = spec.capacity.as_ref().map(|c| c.when_stale).unwrap_or_default();
    // The status lists are kept sorted by cluster name, so lookups are binary searches.
    let empty = CapacityState::default();
    let before = prior.unwrap_or(&empty);
    let was_qualified = |name: &str| {
        before
            .qualified
            .binary_search_by(|n| n.as_str().cmp(name))
            .is_ok()
    };
    let pending_before = |name: &str| {
        before
            .pending
            .binary_search_by(|p| p.cluster.as_str().cmp(name))
            .ok()
            .map(|i| &before.pending[i])
    };
    let stale_before = |name: &str| {
        before
            .stale
            .binary_search_by(|p| p.cluster.as_str().cmp(name))
            .ok()
            .map(|i| &before.stale[i])
    };
    let debounce = dur(timings.debounce);
    let grace = dur(timings.stale_grace);
    let mut state = CapacityState::default();
    let mut requeue_at = None;
    let mut scores_expire_at = None;
    let mut sorted: Vec<ClusterId> = members.to_vec();
    sorted.sort();
    for id in sorted {
        let name = snapshot.cluster_name(id);
        let was = was_qualified(name);
        let decided = in_decision[id.index()];
        let mut raw = Raw::Qualifies;
        let mut enter = Raw::Qualifies;
        for rule in &rules {
            let (r, e, until, _) = rule.verdict(snapshot, reserved, id, decided, was, now, false);
            raw = combine(raw, r);
            enter = combine(enter, e);
            if let Some(u) = until {
                // The score expires (becomes Unknown) 1 ns after validUntil.
                min_time(&mut scores_expire_at, u + 1);
            }
        }
        let mut v = Verdict {
            unknown: raw == Raw::Unknown,
            ..Verdict::default()
        };
        match raw {
            Raw::Qualifies | Raw::Fails => {
                let now_says = raw == Raw::Qualifies;
                v.qualified = if first_plan || now_says == was || debounce == 0 {
                    now_says
                } else {
                    let since = match pending_before(name) {
                        Some(p) if p.qualified == now_says => of(&p.since),
                        _ => ceil_second(now),
                    };
                    if now >= since + debounce {
                        now_says
                    } else {
                        state.pending.push(PendingVerdict {
                            cluster: name.to_string(),
                            qualified: now_says,
                            since: time(since),
                        });
                        min_time(&mut requeue_at, since + debounce);
                        v.debouncing_until = Some(since + debounce);
                        was
                    }
                };
            }
            Raw::Unknown => {
                let since = stale_before(name).map_or(ceil_second(now), |s| of(&s.since));
                state.stale.push(StaleSince {
                    cluster: name.to_string(),
                    since: time(since),
                });
                v.qualified = was;
                if when_stale == WhenStale::Disqualify {
                    if now >= since + grace {
                        v.qualified = false;
                        v.stale_disqualified = true;
                    } else if was {
                        min_time(&mut requeue_at, since + grace);
                    }
                }
            }
        }
        v.entry = v.qualified && enter == Raw::Qualifies;
        // Explanations only for the clusters that need one (they cost an allocation each).
        if !v.qualified || v.debouncing_until.is_some() {
            let texts: Vec<String> = rules
                .iter()
                .map(|r| r.verdict(snapshot, reserved, id, decided, was, now, true).3)
                .collect();
            v.why = texts.join("; ");
            if let Some(until) = v.debouncing_until {
                v.why
                    .push_str(&format!(" (debouncing until {})", timestamp(until)));
            }
        }
        if v.qualified {
            state.qualified.push(name.to_string());
        }
        by_cluster[id.index()] = Some(v);
    }
    // A reservation that was deducted expires then, and the verdict may change with it.
    if let Some(t) = reserved.next_change() {
        min_time(&mut requeue_at, t);
    }
    Verdicts {
        by_cluster,
        state: Some(state),
        requeue_at,
        scores_expire_at,
    }
}

/// Replicas of `spec.workload`'s shape cluster `id` holds for this placement (its `fits` score
/// decoded, less the other placements' reservations, plus its own footprint where it runs, in
/// decision); `None` without a workload or when the score is Unknown.
pub fn workload_replicas(
    spec: &TieredPlacementSpec,
    snapshot: &HubSnapshot,
    reserved: &View<'_>,
    id: ClusterId,
    in_decision: bool,
    now: i128,
) -> Option<i64> {
    let explicit = spec.capacity.as_ref().map_or(&[][..], |c| c.rules.as_slice());
    let w = spec.workload.as_ref()?;
    // The explicit rule's scale, when one reads the shape; else the shape's.
    let scale = explicit
        .iter()
        .filter_map(|r| r.fits.as_ref())
        .find(|f| f.shape == w.shape)
        .and_then(|f| f.scale)
        .unwrap_or_else(|| reserved.scale(&w.shape))
        .max(1);
    let rule = Rule {
        origin: "",
        resource: ocm_score_api::crd::tiered_placement::FITS_RESOURCE_NAME,
        name: format!("fits.{}", w.shape),
        enter: 0,
        exit: 0,
        fits: Some(Fits {
            shape: &w.shape,
            scale: i64::from(scale),
            credit: i64::from(w.replicas_per_cluster),
        }),
    };
    rule.replicas(snapshot, reserved, id, in_decision, now)
}
