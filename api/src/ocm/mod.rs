//! OCM's own kinds, written by hand (see the crate docs for why), one file per API group area.

mod addon;
mod cluster;
mod placement;
mod score;
mod work;

pub use addon::*;
pub use cluster::*;
pub use placement::*;
pub use score::*;
pub use work::*;
