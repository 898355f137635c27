//! Step 2: the capacity verdict of each tier member, with hysteresis, debounce and staleness.
//!
//! A rule reads one AddOnPlacementScore value. A missing object, a missing score name, or
//! `now > validUntil` (strictly, as OCM) is **Unknown**: Unknown keeps the last verdict
//! (`KeepLastVerdict`) or loses it after `staleGrace` (`Disqualify`), and it is never a reason to
//! *enter*. A qualified cluster stays qualified while the value is at least the exit threshold; a
//! non-qualified one qualifies at the enter threshold. A change of the verdict takes effect once
//! it has been seen continuously for `debounce`.
//!
//! The memory this needs (effective verdicts, pending changes, stale clocks) lives in
//! `status.capacity`, so a restarted controller continues exactly (the design kept debounce
//! timers in memory only; keeping them in status is what makes restart equivalence hold).

use super::time::{ceil_second, dur, of, time};
use crate::api::tiering::{CapacityRule, CapacityState, PendingVerdict, StaleSince, Timings, WhenStale};
use crate::api::{AddOnPlacementScore, TieredPlacementSpec};
use crate::placement::snapshot::{ClusterId, HubSnapshot};
use std::collections::HashMap;

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
    /// Why, for people (`fits.a100-x1 = 2 replicas < 4`).
    pub why: String,
}

pub struct Verdicts {
    /// Indexed by cluster id; `None` for clusters in no tier.
    pub by_cluster: Vec<Option<Verdict>>,
    pub state: Option<CapacityState>,
    pub requeue_at: Option<i128>,
}

fn min_time(slot: &mut Option<i128>, t: i128) {
    *slot = Some(slot.map_or(t, |s| s.min(t)));
}

/// The last item named `name` (OCM reads the last one), with the object's validity.
fn read(score: Option<&AddOnPlacementScore>, name: &str, now: i128) -> Result<(i32, Option<i128>), String> {
    let Some(obj) = score else {
        return Err("no AddOnPlacementScore".into());
    };
    let Some(status) = &obj.status else {
        return Err("no status".into());
    };
    let until = status.valid_until.as_ref().map(of);
    if let Some(u) = until
        && now > u
    {
        return Err(format!(
            "expired at {}",
            status
                .valid_until
                .as_ref()
                .map(|t| t.0.to_string())
                .unwrap_or_default()
        ));
    }
    match status.scores.iter().rev().find(|s| s.name == name) {
        Some(s) => Ok((s.value, until)),
        None => Err(format!("no score {name:?}")),
    }
}

/// One rule: `(raw verdict with the threshold for `was_qualified`, raw with the enter threshold,
/// validUntil, description)`.
fn rule_verdict(
    spec: &TieredPlacementSpec,
    rule: &CapacityRule,
    snapshot: &HubSnapshot,
    id: ClusterId,
    in_decision: bool,
    was_qualified: bool,
    now: i128,
) -> (Raw, Raw, Option<i128>, String) {
    // (resource, score name, enter, exit, replicas per point and self-credit for `fits`)
    let (resource, name, enter, exit, fits) = if let Some(f) = &rule.fits {
        let scale = i64::from(f.scale.unwrap_or(1).max(1));
        let credit = match &spec.workload {
            Some(w) if in_decision && w.shape == f.shape => i64::from(w.replicas_per_cluster),
            _ => 0,
        };
        (
            crate::api::tiering::FITS_RESOURCE_NAME,
            format!("fits.{}", f.shape),
            i64::from(f.at_least_replicas),
            i64::from(f.exit_below_replicas.unwrap_or(f.at_least_replicas)),
            Some((scale, credit)),
        )
    } else if let Some(s) = &rule.score {
        (
            s.resource_name.as_str(),
            s.score_name.clone(),
            i64::from(s.at_least),
            i64::from(s.exit_below.unwrap_or((s.at_least - 20).max(-100))),
            None,
        )
    } else {
        return (Raw::Unknown, Raw::Unknown, None, "empty rule".into());
    };
    // `fits` values encode replicas as `floor(fits / scale) - 100` (design §11).
    let decode = |v: i32| match fits {
        Some((scale, credit)) => (i64::from(v) + 100) * scale + credit,
        None => i64::from(v),
    };
    match read(snapshot.score_of(id, resource), &name, now) {
        Err(why) => (
            Raw::Unknown,
            Raw::Unknown,
            None,
            format!("{resource}/{name}: {why}"),
        ),
        Ok((value, until)) => {
            let v = decode(value);
            let threshold = if was_qualified { exit } else { enter };
            let pass = |t: i64| if v >= t { Raw::Qualifies } else { Raw::Fails };
            let unit = if rule.fits.is_some() { " replicas" } else { "" };
            let cmp = if v >= threshold { ">=" } else { "<" };
            let which = if was_qualified { "exit" } else { "enter" };
            (
                pass(threshold),
                pass(enter),
                until,
                format!("{name} = {v}{unit} {cmp} {which} {threshold}"),
            )
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
    now: i128,
) -> Verdicts {
    let mut by_cluster: Vec<Option<Verdict>> = vec![None; snapshot.clusters().len()];
    let rules = spec.capacity.as_ref().map_or(&[][..], |c| c.rules.as_slice());
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
        };
    }
    let when_stale = spec.capacity.as_ref().map(|c| c.when_stale).unwrap_or_default();
    let qualified_before: HashMap<&str, ()> = prior
        .map(|p| p.qualified.iter().map(|n| (n.as_str(), ())).collect())
        .unwrap_or_default();
    let pending_before: HashMap<&str, &PendingVerdict> = prior
        .map(|p| p.pending.iter().map(|v| (v.cluster.as_str(), v)).collect())
        .unwrap_or_default();
    let stale_before: HashMap<&str, &StaleSince> = prior
        .map(|p| p.stale.iter().map(|v| (v.cluster.as_str(), v)).collect())
        .unwrap_or_default();
    let debounce = dur(timings.debounce);
    let grace = dur(timings.stale_grace);
    let mut state = CapacityState::default();
    let mut requeue_at = None;
    let mut sorted: Vec<ClusterId> = members.to_vec();
    sorted.sort();
    for id in sorted {
        let name = snapshot.cluster_name(id);
        let was = qualified_before.contains_key(name);
        let decided = in_decision[id.index()];
        let mut raw = Raw::Qualifies;
        let mut enter = Raw::Qualifies;
        let mut why = Vec::with_capacity(rules.len());
        for rule in rules {
            let (r, e, until, text) = rule_verdict(spec, rule, snapshot, id, decided, was, now);
            raw = combine(raw, r);
            enter = combine(enter, e);
            if let Some(u) = until {
                // The score expires (becomes Unknown) 1 ns after validUntil.
                min_time(&mut requeue_at, u + 1);
            }
            why.push(text);
        }
        let mut v = Verdict {
            why: why.join("; "),
            unknown: raw == Raw::Unknown,
            ..Verdict::default()
        };
        match raw {
            Raw::Qualifies | Raw::Fails => {
                let now_says = raw == Raw::Qualifies;
                v.qualified = if first_plan || now_says == was || debounce == 0 {
                    now_says
                } else {
                    let since = match pending_before.get(name) {
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
                        v.why.push_str(&format!(
                            " (debouncing until {})",
                            super::time::timestamp(since + debounce)
                        ));
                        was
                    }
                };
            }
            Raw::Unknown => {
                let since = stale_before.get(name).map_or(ceil_second(now), |s| of(&s.since));
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
        if v.qualified {
            state.qualified.push(name.to_string());
        }
        by_cluster[id.index()] = Some(v);
    }
    Verdicts {
        by_cluster,
        state: Some(state),
        requeue_at,
    }
}
