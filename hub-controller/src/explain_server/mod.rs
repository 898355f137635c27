//! `ocm-score-hub explain-server`: "why did OCM pick these clusters?" over HTTPS, from the live hub.
//!
//! It serves OCM's placement debug endpoint (`GET /debug/placements/NS/NAME`, `POST
//! /debug/placements/` with a Placement to dry-run) in the same JSON shape ([`answer`]), answered
//! by our engine, which decides as OCM's placement controller does, from reflector caches of every
//! kind it reads ([`crate::hub_cache`]). OCM's own endpoint is alpha, off by default and inside
//! the placement controller; this one is a Deployment of its own, opt-in in the chart.
//!
//! Callers are the hub's users: a bearer token is authenticated by a TokenReview and each request
//! authorized by a SubjectAccessReview ([`access`], OCM's rule). TLS comes from a certificate and
//! key file (a mounted Secret), re-read when they change ([`tls`]), under the hub's TLS profile
//! ([`tls_profile`]: OCM's `ocm-tls-profile`). Nothing is written to the hub,
//! so every replica serves and none is elected. `/metrics`, `/healthz` and `/readyz` come from the
//! process shell; a replica is ready once its caches have synced.

pub mod access;
pub mod answer;
pub mod args;
pub mod handler;
pub mod metrics;
pub mod run;
pub mod tls;
pub mod tls_profile;

pub use args::ExplainServerArgs;
pub use run::run;
