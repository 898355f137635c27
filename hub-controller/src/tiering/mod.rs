//! `ocm-score-hub tiering`: the TieredPlacement controller (docs/tiering.md).
//!
//! A thin actuator over the pure planner `ocm_score_scheduler::tiering`: for each TieredPlacement it
//! builds a [`snapshot`] of the hub from reflectors (ManagedClusters, ManagedClusterSets, the
//! namespace's bindings, AddOnPlacementScores, Placements, PlacementDecisions), plans with the
//! clock, applies the child Placement with server-side apply ([`child`], field manager
//! `ocm-score-tiering`, owner reference to the TieredPlacement), compares OCM's decisions with the
//! prediction ([`divergence`], `PlanDiverged`), writes the [`status`] through the status
//! subresource (a merge patch: [`status`] says why not server-side apply), publishes the plan's
//! events and requeues at the plan's time ([`reconcile`]).
//! Nothing is written when nothing changed: the planner gives identical plans for identical input.
//!
//! Reservations (`ocm_score_scheduler::reservation`, docs/fits-and-reservations.md): plans run through
//! `ocm_score_scheduler::tiering::plan_and_assume` against one ledger ([`reservations`]), one
//! TieredPlacement at a time, so `fits` rules see what placements planned just before took on each
//! cluster; [`reports`] turns AddOnPlacementScore updates into the reports that release them; a new
//! leader rebuilds the ledger from every `status.reservations`. The controller also watches
//! WorkloadShapes, for deducting one shape's reservations from another's `fits` (their CRD is in
//! `manifests/hub/crds`). OCM's placement controller stays the only writer of PlacementDecisions.
//!
//! Score updates ([`score_updates`]): a renewal that changes no score re-plans nothing, and a
//! change re-plans only the TieredPlacements whose last plan read that cluster's scores. So does a
//! score that expires without a renewal, found by the score watch's expiry wheel
//! ([`crate::hub_cache::expiries`]): the requeue covers only the planner's own timers
//! (`Plan::requeue_at`), not the `validUntil` a plan read (`Plan::scores_expire_at`).
//!
//! [`run`] is the mode in the process shell: probe server, metrics ([`metrics`]), and the shell's
//! Lease elector; a replica that loses the Lease stops its controller and stands by again.
//!
//! Where this differs from the design: the child is also re-applied when a field we render no
//! longer holds our value while the plan hash annotation was kept (a hand edit), found by
//! comparing "rendered ⊆ live" rather than `managedFields`, so defaults and other managers' fields
//! are not drift. The design's read-back check of `celSelector` (`PinningUnsupported`) is not
//! implemented: the hub install ships the Placement CRD of OCM releases that have it.

pub mod args;
pub mod child;
pub mod divergence;
pub mod metrics;
pub mod reconcile;
pub mod reports;
pub mod reservations;
pub mod reserved_scores;
pub mod run;
pub mod score_updates;
pub mod snapshot;
pub mod status;

pub use args::TieringArgs;
pub use run::run;
