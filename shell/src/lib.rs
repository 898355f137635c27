//! The process shell every `ocm-score` binary mode runs in (agent `run`, hub `addon-manager`,
//! `thanos-scorer`, `tiering`), so that each mode's `main` is wiring only:
//!
//! - [`cli`]: parsing with one naming scheme for flags and environment variables (`--some-thing` /
//!   `OCM_SCORE_SOME_THING`), old spellings accepted for one release with a warning;
//! - [`args`]: the flags every mode shares (probe address, leader election), flattened into each
//!   mode's own; [`logging`]: `--log-format` and the one `tracing` setup;
//! - [`shutdown`]: one cancellation token per process, cancelled by SIGTERM or Ctrl-C;
//! - [`http`]: the accept loop and HTTP/1.1 connection every server shares;
//! - [`probes`]: one HTTP server (hyper) for `/metrics`, `/healthz` and `/readyz`, and the
//!   [`probes::Heartbeat`] liveness is judged by; [`metrics`]: registries from `prometheus-client`;
//! - [`leader`]: one Lease leader elector (a pure [`leader::Election`] plus its I/O) that steps down on
//!   loss; a mode that must not continue after a loss stops itself;
//! - [`supervise`]: the life of a leader-elected controller mode (run the controllers while leading,
//!   stop them on loss, then stand by or exit), written once; [`watch`]: one watch per kind shared by
//!   a mode's controllers (a store and a trigger channel per controller);
//! - [`controller`]: what every controller shares (per-object backoff, one reconcile metrics shape,
//!   the wait for synced caches); [`sync`]: the poison-tolerant lock every shared state uses;
//! - [`task`]: background tasks aborted with the value that owns them;
//! - [`client`]: the Kubernetes client from a kubeconfig flag or the environment (object-name
//!   rules are `ocm_score_api::names`).

pub mod args;
pub mod cli;
pub mod client;
pub mod controller;
pub mod http;
pub mod jitter;
pub mod leader;
pub mod logging;
pub mod metrics;
pub mod probes;
pub mod shutdown;
pub mod supervise;
pub mod sync;
pub mod task;
pub mod watch;

pub use tokio_util::sync::CancellationToken;
