//! The scheduling engine of ocm-score: OCM's Placement selection (CEL included), the tiering
//! planner and the reservation ledger, over the models of `ocm-score-api`.
//!
//! Nothing in this crate does I/O; binaries fetch objects and hand them in as plain data, with the
//! clock passed in.

mod instant;
pub mod placement;
pub mod reservation;
pub mod tiering;
