//! Workload health as a failover input (issue 33, design `docs/design/workload-failover.md`):
//! the ManifestWorks of a TieredPlacement ([`index`]), what each says ([`observe`]), the
//! per-cluster verdicts with their clocks ([`verdicts`]) and the clusters kept beside their
//! replacements ([`retain`]).

pub mod index;
pub mod observe;
pub mod retain;
pub mod verdicts;

pub use index::WorkIndex;
pub use verdicts::{ClusterVerdict, WorkloadVerdicts};
