//! OCM Placement selection, rule for rule, as a pure library.
//!
//! Give it a [`HubSnapshot`] (ManagedClusters, ManagedClusterSets, bindings, Placements,
//! PlacementDecisions, AddOnPlacementScores) and a clock, and [`sync`] returns what OCM's
//! placement controller would do for one Placement: the candidate clusters, the filter and
//! prioritizer results, the selected clusters, decision groups and PlacementDecision pages, the
//! Placement status conditions, the writes and events, and the requeue time. On top of that it
//! explains every decision ([`explain`]).
//!
//! Upstream's integer arithmetic, float truncations and tie-breaks are reproduced exactly; the
//! places where upstream is random (Go map order) are made deterministic, and the places where
//! it crashes or cannot succeed (a negative `numberOfClusters`) return a [`PlacementError`].
//! Nothing here reads a clock or does I/O.

pub mod candidates;
pub mod cel;
pub mod conditions;
pub mod error;
pub mod events;
pub mod explain;
pub mod filters;
pub mod groups;
mod nanos;
pub mod prioritizers;
pub mod rank;
pub mod renewal;
pub mod schedule;
pub mod selector;
pub mod snapshot;
pub mod status;
pub mod sync;
pub mod triggers;
pub mod weights;
pub mod writes;

pub use error::PlacementError;
pub use schedule::{ScheduleResult, schedule};
pub use snapshot::{ClusterId, HubObjects, HubSnapshot, HubSnapshotBuilder};
pub use status::{Status, StatusCode};
pub use sync::{PlacementResult, SkipReason, SyncOutcome, sync, sync_placement};
