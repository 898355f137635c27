//! The hub side of ocm-score: the add-on manager, the Thanos scorer and the placement simulator.

pub mod addon;
pub mod thanos;
