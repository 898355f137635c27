//! An add-on's life: which clusters get it ([`install`], the install strategy when the
//! ClusterManagementAddOn's lifecycle is `self`), what makes its hub objects go with it
//! ([`ownership`]) and whether it is applied and available ([`availability`]).

pub mod availability;
pub mod install;
pub mod ownership;
