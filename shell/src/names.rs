//! Kubernetes object-name rules for names the modes are given (namespaces, Lease names, add-on and
//! cluster names, object names): one implementation, in the pure core so its API validation uses it
//! too (`scheduler_core::names`), and used by every mode's validators through here.
//!
//! Object names only; where we emulate or match the API server exactly (the kube double, OCM's label
//! selectors) the server's own rules stand.

pub use scheduler_core::names::{is_dns_label, is_dns_subdomain};
