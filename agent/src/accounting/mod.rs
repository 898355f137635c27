//! Resource accounting: quantities, a pod's effective requests, and the incremental per-node and
//! cluster-wide totals the scores are computed from. Pure code over plain data; no I/O.

pub mod fits;
mod invalid;
mod keys;
pub mod ledger;
pub mod objects;
pub mod pod;
pub mod quantity;
mod relist;
mod requests;
pub mod resources;
mod slots;
pub mod view;

#[cfg(test)]
mod conformance_tests;
#[cfg(test)]
mod constraints_tests;
#[cfg(test)]
mod fits_tests;

pub use fits::{FitsIndex, FitsOptions, ShapeFits, ShapeSet, compile_shapes};
pub use invalid::ObjectError;
pub use ledger::{Ledger, NodeUsage};
pub use objects::{SlimNode, SlimPod};
pub use resources::ResourceSet;
pub use view::{Figures, ResourceView};
