//! The agent as the hub ships it: its command line ([`cli`]), the objects the managed cluster
//! receives ([`manifests`]), the ManifestWork carrying them ([`work`]) and the config spec hash OCM
//! compares between the add-on and that work ([`spec_hash`]).

pub mod cli;
pub mod manifests;
pub mod spec_hash;
pub mod work;
