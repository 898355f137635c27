//! The hub side of ocm-score: the add-on manager, the Thanos scorer, the TieredPlacement controller
//! and the placement simulator.

pub mod addon;
pub mod explain_server;
pub mod hub_cache;
pub mod kubectl_plugin;
pub mod simulate;
pub mod thanos;
pub mod tiering;
