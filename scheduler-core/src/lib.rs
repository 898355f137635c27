//! The pure core of ocm-score: OCM API models, score normalization and placement selection.
//!
//! Nothing in this crate does I/O; binaries fetch objects and hand them in as plain data.

pub mod api;
pub mod duration;
mod instant;
pub mod names;
pub mod normalize;
pub mod placement;
pub mod quantity_suffix;
pub mod reservation;
pub mod tiering;
pub mod yaml;
