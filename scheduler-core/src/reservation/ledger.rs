//! The ledger: every in-flight reservation, keyed by (cluster, placement), and what each
//! placement's reservations were last assumed against.

use super::shapes::{ShapeCatalog, deduction};
use crate::instant::{ceil_second, dur, of, time};
use ocm_score_api::crd::tiered_placement::{
    Reservation, ReservationState, TieredPlacementStatus, WorkloadFootprint,
};
use ocm_score_api::names::is_dns_label;
use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

/// How long a reservation lives at most (Karmada's `DefaultAssumptionTTL`).
pub const DEFAULT_TTL: Duration = Duration::from_secs(5 * 60);
/// How long after a reservation a report may still predate the workload's pods (ManifestWork
/// delivery and pod creation).
pub const DEFAULT_SETTLE: Duration = Duration::from_secs(90);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    pub ttl: Duration,
    pub settle: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            ttl: DEFAULT_TTL,
            settle: DEFAULT_SETTLE,
        }
    }
}

/// One reservation: `replicas` of `shape`, made at `created_at` (whole seconds, as stored).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    pub shape: String,
    pub replicas: u32,
    pub created_at: i128,
    pub expires_at: i128,
    /// When the placement's workload was seen Healthy on the cluster after the reservation was
    /// made (its pods run): the next report counts them, so it releases the reservation before
    /// `settle`. Not kept in the status: after a restart the settle rule applies, which only
    /// keeps the reservation longer.
    pub landed_at: Option<i128>,
}

impl Entry {
    /// Deducted until the TTL: at `expires_at` exactly it no longer is.
    pub fn in_flight(&self, now: i128) -> bool {
        now < self.expires_at
    }
}

/// What a placement's reservations were assumed against: its footprint and selection.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Basis {
    footprint: Option<(String, u32)>,
    clusters: BTreeSet<String>,
}

/// A reservation in a status that cannot be loaded, naming the field and the value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("TieredPlacement {placement}: field {field}: {message}; ignored")]
pub struct LoadError {
    pub placement: String,
    pub field: String,
    pub message: String,
}

/// Every in-flight reservation of one hub. Placements are named `namespace/name`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ledger {
    timing: Timing,
    enabled: bool,
    /// cluster → placement → reservation.
    entries: BTreeMap<String, BTreeMap<String, Entry>>,
    basis: BTreeMap<String, Basis>,
}

fn footprint_of(w: &WorkloadFootprint) -> Option<(String, u32)> {
    u32::try_from(w.replicas_per_cluster)
        .ok()
        .filter(|r| *r >= 1)
        .map(|r| (w.shape.clone(), r))
}

impl Ledger {
    pub fn new(timing: Timing) -> Ledger {
        Ledger {
            timing,
            enabled: true,
            entries: BTreeMap::new(),
            basis: BTreeMap::new(),
        }
    }

    /// A ledger that never reserves (reservations turned off): plans see the reported scores,
    /// and statuses lose their reservations.
    pub fn disabled() -> Ledger {
        Ledger {
            enabled: false,
            ..Ledger::new(Timing::default())
        }
    }

    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// The ledger of a hub whose placements have these statuses (after a restart or a leader
    /// change). Reports that arrived while no controller watched are unknown, so each
    /// reservation waits for the next report observed after its settle time, or its TTL.
    pub fn rebuild<'a>(
        timing: Timing,
        enabled: bool,
        placements: impl IntoIterator<Item = (String, Option<&'a TieredPlacementStatus>)>,
    ) -> (Ledger, Vec<LoadError>) {
        let mut ledger = Ledger {
            enabled,
            ..Ledger::new(timing)
        };
        let mut errors = Vec::new();
        for (placement, status) in placements {
            errors.extend(ledger.load(&placement, status));
        }
        (ledger, errors)
    }

    /// Whether the ledger holds `placement`'s basis (it was loaded or assumed).
    pub fn knows(&self, placement: &str) -> bool {
        self.basis.contains_key(placement)
    }

    /// Takes `placement`'s reservations and basis from its status, replacing what the ledger
    /// held for it. Entries that cannot be right are left out, each with an error.
    pub fn load(&mut self, placement: &str, status: Option<&TieredPlacementStatus>) -> Vec<LoadError> {
        self.remove_placement(placement);
        let mut errors = Vec::new();
        let mut basis = Basis::default();
        if let (true, Some(status)) = (self.enabled, status) {
            basis.footprint = status.workload.as_ref().and_then(footprint_of);
            basis.clusters = status
                .placement
                .iter()
                .flat_map(|p| p.predicted.iter().cloned())
                .collect();
            for (i, r) in status.reservations.iter().enumerate() {
                let mut fail = |field: &str, message: String| {
                    errors.push(LoadError {
                        placement: placement.to_owned(),
                        field: format!("status.reservations[{i}].{field}"),
                        message,
                    })
                };
                let replicas = u32::try_from(r.replicas).ok().filter(|n| *n >= 1);
                let (created_at, expires_at) = (of(&r.created_at), of(&r.expires_at));
                if r.cluster.is_empty() {
                    fail("cluster", "empty".into());
                } else if !is_dns_label(&r.shape) {
                    fail("shape", format!("{:?} is not a DNS label", r.shape));
                } else if replicas.is_none() {
                    fail("replicas", format!("{}; it must be at least 1", r.replicas));
                } else if expires_at <= created_at {
                    fail(
                        "expiresAt",
                        format!("{} is not after createdAt {}", r.expires_at.0, r.created_at.0),
                    );
                } else if self
                    .entries
                    .get(&r.cluster)
                    .is_some_and(|m| m.contains_key(placement))
                {
                    fail("cluster", format!("{:?} is reserved twice", r.cluster));
                } else {
                    self.entries.entry(r.cluster.clone()).or_default().insert(
                        placement.to_owned(),
                        Entry {
                            landed_at: None,
                            shape: r.shape.clone(),
                            replicas: replicas.unwrap_or(1),
                            created_at,
                            expires_at,
                        },
                    );
                }
            }
        }
        self.basis.insert(placement.to_owned(), basis);
        errors
    }

    /// Forgets a placement that is gone; whether it held reservations.
    pub fn forget(&mut self, placement: &str) -> bool {
        self.basis.remove(placement);
        self.remove_placement(placement)
    }

    fn remove_placement(&mut self, placement: &str) -> bool {
        let mut removed = false;
        self.entries.retain(|_, by_placement| {
            removed |= by_placement.remove(placement).is_some();
            !by_placement.is_empty()
        });
        removed
    }

    /// Records that `placement` selects `selected` with `workload` at `now`:
    /// * a cluster new in the selection is reserved the whole footprint (assume);
    /// * a cluster that left the selection is released (release a), and every cluster when the
    ///   footprint is gone;
    /// * on a cluster kept, an increase of `replicasPerCluster` adds only the difference to what
    ///   is still in flight there (delta only), a decrease caps what is in flight at the new size,
    ///   and a new shape reserves the whole new footprint;
    /// * one entry per (placement, cluster): a new assumption replaces the old one and starts a
    ///   new settle time and TTL (replace semantics).
    ///
    /// Declaring a footprint for a selection that already runs it reserves nothing: nothing new
    /// is deployed. Calling it again with the same arguments changes nothing.
    pub fn assume(
        &mut self,
        placement: &str,
        workload: Option<&WorkloadFootprint>,
        selected: &[String],
        now: i128,
    ) {
        if !self.enabled {
            return;
        }
        let footprint = workload.and_then(footprint_of);
        let selected: BTreeSet<String> = selected.iter().cloned().collect();
        let before = self.basis.remove(placement).unwrap_or_default();
        self.entries.retain(|cluster, by_placement| {
            if footprint.is_none() || !selected.contains(cluster) {
                by_placement.remove(placement);
            }
            !by_placement.is_empty()
        });
        if let Some((shape, replicas)) = &footprint {
            let created_at = ceil_second(now);
            let expires_at = ceil_second(created_at + dur(self.timing.ttl)).max(created_at + 1);
            for cluster in &selected {
                let by_placement = self.entries.entry(cluster.clone()).or_default();
                let held = by_placement
                    .get(placement)
                    .filter(|e| &e.shape == shape)
                    .map(|e| e.replicas);
                let total = match (&before.footprint, before.clusters.contains(cluster)) {
                    (_, false) => Some(*replicas),
                    (None, true) => None,
                    (Some((old_shape, _)), true) if old_shape != shape => Some(*replicas),
                    (Some((_, old)), true) if replicas > old => Some(held.unwrap_or(0) + (replicas - old)),
                    (Some(_), true) => {
                        if let Some(e) = by_placement.get_mut(placement) {
                            e.replicas = e.replicas.min(*replicas);
                        }
                        None
                    }
                };
                if let Some(total) = total {
                    by_placement.insert(
                        placement.to_owned(),
                        Entry {
                            landed_at: None,
                            shape: shape.clone(),
                            replicas: total,
                            created_at,
                            expires_at,
                        },
                    );
                }
                if by_placement.is_empty() {
                    self.entries.remove(cluster);
                }
            }
        }
        self.basis.insert(
            placement.to_owned(),
            Basis {
                footprint,
                clusters: selected,
            },
        );
    }

    /// `placement`'s workload on `cluster` is Healthy since `healthy_since` (release c). Counts
    /// only when that is at or after the reservation was made: a workload healthy before has not
    /// started the replicas reserved (an increase of `replicasPerCluster`) yet.
    pub fn landed(&mut self, placement: &str, cluster: &str, healthy_since: i128) {
        if let Some(e) = self
            .entries
            .get_mut(cluster)
            .and_then(|by_placement| by_placement.get_mut(placement))
            && e.landed_at.is_none()
            && healthy_since >= e.created_at
        {
            e.landed_at = Some(healthy_since);
        }
    }

    /// A score report of `cluster` observed at `at` (hub time): releases the reservations on it
    /// made at least `settle` before (release b), or whose workload landed before `at` (release
    /// c). Returns the placements whose reservations changed.
    pub fn observe_report(&mut self, cluster: &str, at: i128) -> BTreeSet<String> {
        let settle = dur(self.timing.settle);
        let mut released = BTreeSet::new();
        if let Some(by_placement) = self.entries.get_mut(cluster) {
            by_placement.retain(|placement, e| {
                let release = at >= e.created_at + settle || e.landed_at.is_some_and(|l| at > l);
                if release {
                    released.insert(placement.clone());
                }
                !release
            });
            if by_placement.is_empty() {
                self.entries.remove(cluster);
            }
        }
        released
    }

    /// Drops the reservations whose TTL has passed at `now` (release d). Returns the placements
    /// whose reservations changed.
    pub fn expire(&mut self, now: i128) -> BTreeSet<String> {
        let mut released = BTreeSet::new();
        self.entries.retain(|_, by_placement| {
            by_placement.retain(|placement, e| {
                if !e.in_flight(now) {
                    released.insert(placement.clone());
                }
                e.in_flight(now)
            });
            !by_placement.is_empty()
        });
        released
    }

    /// Every reservation: (cluster, placement, entry), by cluster then placement.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &str, &Entry)> {
        self.entries
            .iter()
            .flat_map(|(c, m)| m.iter().map(move |(p, e)| (c.as_str(), p.as_str(), e)))
    }

    /// `placement`'s reservations as its status lists them (by cluster).
    pub fn reservations_of(&self, placement: &str) -> Vec<Reservation> {
        self.entries()
            .filter(|(_, p, _)| *p == placement)
            .map(|(cluster, _, e)| Reservation {
                cluster: cluster.to_owned(),
                shape: e.shape.clone(),
                replicas: i32::try_from(e.replicas).unwrap_or(i32::MAX),
                created_at: time(e.created_at),
                expires_at: time(e.expires_at),
                state: ReservationState::InFlight,
            })
            .collect()
    }

    /// The footprint `placement`'s selection was assumed with (its status' `workload`).
    pub fn workload_of(&self, placement: &str) -> Option<WorkloadFootprint> {
        self.basis
            .get(placement)
            .and_then(|b| b.footprint.as_ref())
            .map(|(shape, replicas)| WorkloadFootprint {
                shape: shape.clone(),
                replicas_per_cluster: i32::try_from(*replicas).unwrap_or(i32::MAX),
            })
    }

    /// When `placement`'s first reservation expires.
    pub fn next_expiry_of(&self, placement: &str) -> Option<i128> {
        self.entries()
            .filter(|(_, p, _)| *p == placement)
            .map(|(_, _, e)| e.expires_at)
            .min()
    }

    /// What `placement` sees at `now`: the other placements' in-flight reservations.
    pub fn view<'a>(&'a self, placement: &'a str, shapes: &'a ShapeCatalog, now: i128) -> View<'a> {
        View {
            ledger: (!self.entries.is_empty()).then_some(self),
            own: placement,
            shapes,
            now,
            next_change: Cell::new(None),
        }
    }
}

/// The capacity one placement's plan sees: reported `fits` minus the other placements'
/// in-flight reservations (its own are not deducted: self-credit), floored at zero. A
/// reservation never adds capacity.
pub struct View<'a> {
    ledger: Option<&'a Ledger>,
    own: &'a str,
    shapes: &'a ShapeCatalog,
    now: i128,
    /// The earliest expiry among the reservations that were deducted.
    next_change: Cell<Option<i128>>,
}

impl View<'static> {
    /// No reservations.
    pub fn none() -> View<'static> {
        View {
            ledger: None,
            own: "",
            shapes: ShapeCatalog::empty(),
            now: 0,
            next_change: Cell::new(None),
        }
    }
}

impl View<'_> {
    /// Replicas of `shape` the other placements' in-flight reservations take on `cluster`.
    pub fn reserved(&self, cluster: &str, shape: &str) -> u64 {
        let Some(by_placement) = self.ledger.and_then(|l| l.entries.get(cluster)) else {
            return 0;
        };
        let mut total = 0u64;
        for (placement, e) in by_placement {
            if placement == self.own || !e.in_flight(self.now) {
                continue;
            }
            let taken = deduction(e.replicas, self.shapes.ratio(&e.shape, shape));
            if taken > 0 {
                total = total.saturating_add(taken);
                let next = self
                    .next_change
                    .get()
                    .map_or(e.expires_at, |n| n.min(e.expires_at));
                self.next_change.set(Some(next));
            }
        }
        total
    }

    /// Replicas per `fits` score point of `shape` (the catalog's; 1 when unknown).
    pub fn scale(&self, shape: &str) -> i32 {
        self.shapes.scale(shape)
    }

    /// `reported − reserved`, floored at zero.
    pub fn effective(&self, cluster: &str, shape: &str, reported: u64) -> u64 {
        reported.saturating_sub(self.reserved(cluster, shape))
    }

    /// Whether any reservation could be deducted (a fast path for plans without any).
    pub fn is_empty(&self) -> bool {
        self.ledger.is_none()
    }

    /// The earliest TTL among the reservations this view deducted so far: the plan changes then.
    pub fn next_change(&self) -> Option<i128> {
        self.next_change.get()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::instant::SECOND;
    use ocm_score_api::crd::tiered_placement::ChildPlacementStatus;

    const P: &str = "apps/p";
    const Q: &str = "apps/q";

    fn s(secs: i128) -> i128 {
        secs * SECOND
    }

    fn ledger() -> Ledger {
        Ledger::new(Timing {
            ttl: Duration::from_secs(300),
            settle: Duration::from_secs(90),
        })
    }

    fn w(shape: &str, replicas: i32) -> WorkloadFootprint {
        WorkloadFootprint {
            shape: shape.into(),
            replicas_per_cluster: replicas,
        }
    }

    fn sel(clusters: &[&str]) -> Vec<String> {
        clusters.iter().map(|c| c.to_string()).collect()
    }

    /// (cluster, placement, shape, replicas, created s, expires s), in ledger order.
    fn rows(l: &Ledger) -> Vec<(String, String, String, u32, i128, i128)> {
        l.entries()
            .map(|(c, p, e)| {
                (
                    c.into(),
                    p.into(),
                    e.shape.clone(),
                    e.replicas,
                    e.created_at / SECOND,
                    e.expires_at / SECOND,
                )
            })
            .collect()
    }

    fn row(
        c: &str,
        p: &str,
        shape: &str,
        n: u32,
        created: i128,
        expires: i128,
    ) -> (String, String, String, u32, i128, i128) {
        (c.into(), p.into(), shape.into(), n, created, expires)
    }

    #[test]
    fn assume_reserves_the_footprint_on_every_added_cluster_until_the_ttl() {
        let mut l = ledger();
        // Mid-second: stored times are rounded up to the second, as the status keeps them.
        l.assume(P, Some(&w("gpu", 4)), &sel(&["x", "y"]), s(10) + 1);
        assert_eq!(
            rows(&l),
            [row("x", P, "gpu", 4, 11, 311), row("y", P, "gpu", 4, 11, 311)]
        );
        // Planned again with the same selection: nothing changes (a retried reconcile).
        let before = l.clone();
        l.assume(P, Some(&w("gpu", 4)), &sel(&["x", "y"]), s(20));
        assert_eq!(l, before);
        // A cluster added later is reserved from then on, the others keep their times.
        l.assume(P, Some(&w("gpu", 4)), &sel(&["x", "y", "z"]), s(30));
        assert_eq!(rows(&l)[2], row("z", P, "gpu", 4, 30, 330));
        assert_eq!(rows(&l)[0], row("x", P, "gpu", 4, 11, 311));
        assert_eq!(l.next_expiry_of(P), Some(s(311)));
    }

    #[test]
    fn no_footprint_reserves_nothing_and_releases_everything() {
        let mut l = ledger();
        l.assume(P, None, &sel(&["x"]), s(0));
        assert_eq!(rows(&l), []);
        l.assume(P, Some(&w("gpu", 2)), &sel(&["y"]), s(0));
        assert_eq!(rows(&l).len(), 1);
        l.assume(P, None, &sel(&["y"]), s(5));
        assert_eq!(rows(&l), [], "the workload left the spec: released");
        // Declared for a selection that already runs it: nothing new is deployed.
        l.assume(P, Some(&w("gpu", 2)), &sel(&["y"]), s(6));
        assert_eq!(rows(&l), []);
        assert_eq!(l.workload_of(P), Some(w("gpu", 2)));
    }

    #[test]
    fn an_increase_reserves_only_the_difference_and_replaces_the_entry() {
        let mut l = ledger();
        l.assume(P, Some(&w("gpu", 4)), &sel(&["x", "y"]), s(0));
        // x reported since (released); y's 4 are still in flight.
        l.observe_report("x", s(100));
        assert_eq!(rows(&l), [row("y", P, "gpu", 4, 0, 300)]);
        l.assume(P, Some(&w("gpu", 6)), &sel(&["x", "y"]), s(120));
        assert_eq!(
            rows(&l),
            [row("x", P, "gpu", 2, 120, 420), row("y", P, "gpu", 6, 120, 420)],
            "x: the 2 more; y: one entry with the 4 unreported plus the 2 more"
        );
    }

    #[test]
    fn a_decrease_caps_what_is_in_flight_and_a_new_shape_reserves_it_whole() {
        let mut l = ledger();
        l.assume(P, Some(&w("gpu", 6)), &sel(&["x"]), s(0));
        l.assume(P, Some(&w("gpu", 4)), &sel(&["x"]), s(10));
        assert_eq!(rows(&l), [row("x", P, "gpu", 4, 0, 300)]);
        l.assume(P, Some(&w("gpu", 8)), &sel(&["x"]), s(20));
        assert_eq!(rows(&l), [row("x", P, "gpu", 8, 20, 320)]);
        l.assume(P, Some(&w("cpu", 3)), &sel(&["x"]), s(30));
        assert_eq!(rows(&l), [row("x", P, "cpu", 3, 30, 330)]);
    }

    #[test]
    fn a_cluster_leaving_the_selection_is_released_at_once() {
        let mut l = ledger();
        l.assume(P, Some(&w("gpu", 4)), &sel(&["x", "y"]), s(0));
        l.assume(P, Some(&w("gpu", 4)), &sel(&["y"]), s(1));
        assert_eq!(rows(&l), [row("y", P, "gpu", 4, 0, 300)]);
        // Back again: a new reservation.
        l.assume(P, Some(&w("gpu", 4)), &sel(&["x", "y"]), s(2));
        assert_eq!(rows(&l)[0], row("x", P, "gpu", 4, 2, 302));
        assert!(l.forget(P));
        assert_eq!(rows(&l), []);
        assert!(!l.knows(P));
    }

    #[test]
    fn a_report_releases_only_at_or_after_the_settle_time() {
        let mut l = ledger();
        l.assume(P, Some(&w("gpu", 4)), &sel(&["x"]), s(10));
        l.assume(Q, Some(&w("gpu", 1)), &sel(&["x"]), s(50));
        assert!(
            l.observe_report("y", s(500)).is_empty(),
            "another cluster's report"
        );
        assert!(
            l.observe_report("x", s(100) - 1).is_empty(),
            "1 ns before createdAt + settle"
        );
        let released = l.observe_report("x", s(100));
        assert_eq!(released.into_iter().collect::<Vec<_>>(), [P]);
        assert_eq!(rows(&l), [row("x", Q, "gpu", 1, 50, 350)]);
        // The selection stays: no new reservation on the next plan.
        l.assume(P, Some(&w("gpu", 4)), &sel(&["x"]), s(101));
        assert_eq!(rows(&l).len(), 1);
    }

    #[test]
    fn a_report_after_the_workload_landed_releases_before_the_settle_time() {
        let mut l = ledger();
        l.assume(P, Some(&w("gpu", 4)), &sel(&["x"]), s(10));
        l.assume(Q, Some(&w("gpu", 1)), &sel(&["x"]), s(10));
        // Healthy since before the reservation: an older workload, not the reserved replicas.
        l.landed(Q, "x", s(5));
        // P's workload is Healthy at 30 s; a report observed then or before counts without it.
        l.landed(P, "x", s(30));
        l.landed(P, "x", s(40));
        assert!(l.observe_report("x", s(30)).is_empty());
        let released = l.observe_report("x", s(30) + 1);
        assert_eq!(released.into_iter().collect::<Vec<_>>(), [P]);
        assert_eq!(rows(&l), [row("x", Q, "gpu", 1, 10, 310)]);
        // An increase is a new reservation: landing starts over.
        l.assume(P, Some(&w("gpu", 4)), &sel(&["x"]), s(31));
        l.assume(P, Some(&w("gpu", 6)), &sel(&["x"]), s(50));
        assert!(l.observe_report("x", s(60)).is_empty(), "{:?}", rows(&l));
        l.landed(P, "x", s(70));
        assert_eq!(l.observe_report("x", s(71)).into_iter().collect::<Vec<_>>(), [P]);
    }

    #[test]
    fn the_ttl_ends_a_reservation_at_expires_at_exactly() {
        let mut l = ledger();
        l.assume(P, Some(&w("gpu", 4)), &sel(&["x"]), s(0));
        let shapes = ShapeCatalog::empty();
        assert_eq!(l.view(Q, shapes, s(300) - 1).reserved("x", "gpu"), 4);
        assert_eq!(l.view(Q, shapes, s(300)).reserved("x", "gpu"), 0);
        assert!(l.expire(s(300) - 1).is_empty());
        assert_eq!(l.expire(s(300)).into_iter().collect::<Vec<_>>(), [P]);
        assert_eq!(rows(&l), []);
    }

    #[test]
    fn a_placement_does_not_see_its_own_reservations() {
        let mut l = ledger();
        l.assume(P, Some(&w("gpu", 4)), &sel(&["x"]), s(0));
        l.assume(Q, Some(&w("gpu", 3)), &sel(&["x"]), s(0));
        let shapes = ShapeCatalog::empty();
        assert_eq!(l.view(P, shapes, s(1)).reserved("x", "gpu"), 3);
        assert_eq!(l.view(Q, shapes, s(1)).reserved("x", "gpu"), 4);
        assert_eq!(l.view("apps/r", shapes, s(1)).reserved("x", "gpu"), 7);
        let view = l.view("apps/r", shapes, s(1));
        assert_eq!(view.effective("x", "gpu", 10), 3);
        assert_eq!(view.effective("x", "gpu", 5), 0, "floored at zero");
        assert_eq!(view.effective("y", "gpu", 5), 5);
        assert_eq!(view.next_change(), Some(s(300)));
        assert!(View::none().is_empty());
        assert_eq!(View::none().effective("x", "gpu", 5), 5);
    }

    #[test]
    fn rebuilt_from_statuses_the_ledger_is_the_same_and_bad_entries_are_named() {
        let mut l = ledger();
        l.assume(P, Some(&w("gpu", 4)), &sel(&["x", "y"]), s(0));
        l.assume(Q, Some(&w("cpu", 1)), &sel(&["y"]), s(7));
        l.observe_report("x", s(95));
        let status = |p: &str| TieredPlacementStatus {
            placement: Some(ChildPlacementStatus {
                name: "child".into(),
                predicted: if p == P { sel(&["x", "y"]) } else { sel(&["y"]) },
                ..ChildPlacementStatus::default()
            }),
            workload: l.workload_of(p),
            reservations: l.reservations_of(p),
            ..TieredPlacementStatus::default()
        };
        let (sp, sq) = (status(P), status(Q));
        let json = |s: &TieredPlacementStatus| -> TieredPlacementStatus {
            serde_json::from_value(serde_json::to_value(s).unwrap()).unwrap()
        };
        let (jp, jq) = (json(&sp), json(&sq));
        let (rebuilt, errors) = Ledger::rebuild(
            l.timing(),
            true,
            [(P.to_owned(), Some(&jp)), (Q.to_owned(), Some(&jq))],
        );
        assert_eq!(errors, []);
        assert_eq!(rebuilt, l);

        let mut bad = sp.clone();
        bad.reservations[0].replicas = 0;
        bad.reservations.push(bad.reservations[0].clone());
        bad.reservations[1].replicas = 2;
        bad.reservations.push(Reservation {
            expires_at: bad.reservations[0].created_at.clone(),
            cluster: "z".into(),
            ..bad.reservations[1].clone()
        });
        bad.reservations.push(bad.reservations[1].clone());
        let mut fresh = ledger();
        let errors = fresh.load(P, Some(&bad));
        let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
        assert_eq!(
            errors.iter().map(|e| e.field.as_str()).collect::<Vec<_>>(),
            [
                "status.reservations[0].replicas",
                "status.reservations[2].expiresAt",
                "status.reservations[3].cluster"
            ],
            "{text:#?}"
        );
        assert!(
            text[0].starts_with("TieredPlacement apps/p: field status.reservations[0].replicas: 0;"),
            "{}",
            text[0]
        );
        assert_eq!(rows(&fresh), [row("y", P, "gpu", 2, 0, 300)]);
        // A disabled ledger loads nothing and reserves nothing.
        let mut off = Ledger::disabled();
        assert_eq!(off.load(P, Some(&sp)), []);
        off.assume(P, Some(&w("gpu", 4)), &sel(&["a"]), s(0));
        assert_eq!(rows(&off), []);
        assert_eq!(off.workload_of(P), None);
    }

    #[test]
    fn other_shapes_are_deducted_conservatively() {
        use crate::reservation::shapes::tests::shape;
        let shapes = ShapeCatalog::new(&[
            shape("gpu-x1", r#"requests: {nvidia.com/gpu: "1"}"#),
            shape("gpu-x2", r#"requests: {nvidia.com/gpu: "2"}"#),
        ]);
        let mut l = ledger();
        l.assume(P, Some(&w("gpu-x1", 3)), &sel(&["x"]), s(0));
        let view = l.view(Q, &shapes, s(1));
        assert_eq!(view.reserved("x", "gpu-x1"), 3);
        assert_eq!(view.reserved("x", "gpu-x2"), 2, "ceil(3 × 1/2)");
        assert_eq!(view.reserved("x", "unknown"), 3, "one for one");
    }
}
