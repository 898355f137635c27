//! Reservations between score reports ("assume and deduct"; docs/fits-and-reservations.md).
//!
//! Agents report every minute or so; decisions taken in between all see the same headroom, so two
//! TieredPlacements created in the same minute would both take the cluster with the most room.
//! The [`Ledger`] remembers what each placement just put where until the cluster's agent reports
//! again, and plans see `fits` minus that.
//!
//! * **Assume.** When a plan selects a cluster that its placement's previous plan did not (the
//!   clusters OCM is predicted to select, `status.placement.predicted`, not the pins: in Failover
//!   the pins list every qualifying cluster while the workload lands on `numberOfClusters`), the
//!   ledger reserves `spec.workload.replicasPerCluster` replicas of `spec.workload.shape` there,
//!   expiring after the TTL (default 5 minutes). One entry per (placement, cluster): a new
//!   assumption replaces the old one. On a cluster kept, an increase of `replicasPerCluster`
//!   adds only the increase.
//! * **Deduct.** A `fits.<S>` capacity rule sees `reported − Σ reservations` on the cluster,
//!   floored at 0. Reservations of another shape `T` count `ceil(replicas × max_r(req_T[r] /
//!   req_S[r]))` ([`ShapeCatalog`]); the next report corrects the over-deduction. A placement's
//!   own reservations are not deducted from its own view (self-credit; the planner adds its
//!   footprint back on clusters in its decisions). Reservations never add headroom:
//!   removing a workload frees capacity only when the agent says so.
//! * **Release** (a) when the cluster leaves the placement's selection, or the placement its
//!   `spec.workload`, or the placement is deleted; (b) on the first score report of the cluster
//!   the controller observes at or after `createdAt + settle` (default 90 s: ManifestWork delivery
//!   and pod creation; the agent deducts pending pods, so a report after pod creation already
//!   counts the workload); (c) at the first report after its workload landed (below); (d) at
//!   `expiresAt` exactly (the TTL).
//! * **Persist.** Each placement's reservations are in its `status.reservations`, and the
//!   footprint its selection was reserved with in `status.workload`, so a new leader rebuilds
//!   the same ledger ([`Ledger::rebuild`]). It cannot know which reports arrived while no one
//!   watched, so the rebuilt reservations wait for the next report or their TTL.
//!
//! The planner runs each TieredPlacement through the ledger (`tiering::plan_and_assume`, one layer
//! up), serially across all of them against one ledger (Karmada's single scheduling worker): a
//! placement planned right after another sees the other's reservations.
//!
//! # Where this differs from the design (and why)
//!
//! * The footprint a selection was reserved with is kept in `status.workload` (the design has no
//!   such field): without it a restarted controller could not tell an increase of
//!   `replicasPerCluster` from an unchanged spec, and delta-only would not survive a restart.
//! * Delta-only adds the increase to what is still in flight on the cluster (Karmada replaces it
//!   with the increase alone): a report has not counted any of those replicas yet.
//! * A decrease caps what is in flight at the new size (those replicas will not be created), and
//!   a footprint declared for clusters already running the workload reserves nothing.
//! * Release (c), on landing, needs `spec.workloadHealth`: only then does the controller see the
//!   placement's ManifestWorks, and a workload judged Healthy after the reservation was made
//!   ([`Ledger::landed`]) releases it at the cluster's next report (docs/design/workload-failover.md
//!   §6). Without it the TieredPlacement names no ManifestWork, and (b) bounds the window.
//! * A shape the hub has no valid WorkloadShape for is counted one for one against other shapes.

pub mod deduction;
mod ledger;
mod shapes;

pub use ledger::{DEFAULT_SETTLE, DEFAULT_TTL, Entry, Ledger, LoadError, Timing, View};
pub use shapes::ShapeCatalog;

use ocm_score_api::crd::tiered_placement::TieredPlacement;

/// The ledger's name of a TieredPlacement: `namespace/name`.
pub fn placement_key(object: &TieredPlacement) -> String {
    format!(
        "{}/{}",
        object.metadata.namespace.as_deref().unwrap_or_default(),
        object.metadata.name.as_deref().unwrap_or_default()
    )
}
