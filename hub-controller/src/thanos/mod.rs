//! `ocm-score-hub thanos-scorer`: scores every ManagedCluster from Thanos / Prometheus metrics in one
//! pass per interval, normalized across the whole fleet, and publishes the result as an
//! AddOnPlacementScore (default name `thanos-score`) in each cluster's namespace on the hub.
//!
//! Each round: one instant query per configured score for the whole fleet ([`client`], answers decoded
//! by [`response`]); series mapped to ManagedClusters ([`mapping`]) and normalized across the fleet
//! ([`normalize`], [`fleet`]); the result compared with the objects on the hub ([`diff`]) and only what
//! changed or needs renewing written ([`writer`]), by the replica holding the Lease (the process
//! shell's elector, `ocm_score_shell::leader`). [`scorer`] ties a round together without touching the
//! hub, [`mod@run`] is the mode around it (hub caches, round loop), and [`health`] and [`metrics`]
//! feed the shell's probe server.
//! `validUntil` counts from the time of the newest sample behind each score ([`freshness`]: not the
//! evaluation time, which Prometheus stamps on every answer for its whole lookback window), so when a
//! cluster's series stop the cluster is not renewed and its scores expire one validity after its last
//! sample; when a query fails, nothing is written that round. Nor is anything written from an answer
//! that carries warnings (a Thanos partial response: some stores did not answer, and fleet bounds from
//! the rest would shift every cluster's score) unless `query.allowPartialResponse` says so
//! ([`params`]).
//!
//! Example configuration (`--config`; flags and their `OCM_SCORE_*` variables override it):
//!
//! ```yaml
//! query:
//!   url: https://thanos-query.monitoring:9090
//!   bearerTokenFile: /var/run/secrets/thanos/token
//!   caFile: /etc/thanos-ca/ca.crt
//!   timeout: 30s
//!   partialResponse: true        # Thanos's partial_response; dedup and maxSourceResolution likewise
//!   allowPartialResponse: false  # true: score from the stores that answered
//!   dedup: true                  # merge HA replicas (the querier's --query.replica-label)
//!   maxSourceResolution: 5m      # or auto, 0s, 1h; unset: the querier's default
//! clusterLabel: cluster          # the label the queries aggregate by
//! clusterMapping: identity       # or label:<ManagedCluster label key>, claim:<cluster claim name>
//! placementScoreName: thanos-score
//! interval: 60s
//! validity: 120s                 # default: renewBefore + (renewEvery − ½) × interval, where
//!                                # renewBefore = interval + query timeout: 90s + 30s here
//! scores:
//!   - name: cpuAvailable
//!     query: sum by (cluster) (kube_node_status_allocatable{resource="cpu"}) - sum by (cluster) (kube_pod_container_resource_requests{resource="cpu"})
//!   - name: p99Latency
//!     query: histogram_quantile(0.99, sum by (cluster, le) (rate(apiserver_request_duration_seconds_bucket[5m])))
//!     direction: lowerIsBetter
//!     normalization: fixed       # default: fleet (best cluster 100, worst -100)
//!     min: 0.05
//!     max: 2
//! ```

pub mod client;
pub mod config;
pub mod diff;
pub mod fleet;
pub mod freshness;
pub mod health;
pub mod mapping;
pub mod metrics;
pub mod normalize;
pub mod params;
pub mod response;
pub mod run;
pub mod scorer;
pub mod writer;

pub use config::ThanosScorerArgs;
pub use run::run;
