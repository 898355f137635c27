//! The `ocm-score-hub explain-server` mode in the process shell: the hub caches, the probe server,
//! and the HTTPS server of `/debug/placements/`.

use super::access::HubAccess;
use super::args::ExplainServerArgs;
use super::handler::{self, HubError, HubView};
use super::metrics::Metrics;
use super::tls::ReloadingCert;
use crate::hub_cache::{PlacementStores, PlacementWatches};
use hyper::Request;
use hyper::body::Incoming;
use kube::runtime::reflector::ObjectRef;
use ocm_score_api::Placement;
use ocm_score_scheduler::placement::HubSnapshot;
use ocm_score_shell::CancellationToken;
use ocm_score_shell::probes::{ProbeServer, Probes};
use ocm_score_shell::task::AbortOnDrop;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

/// Exit code for a configuration the process cannot start with.
const EXIT_CONFIG: u8 = 2;
/// A client that never finishes its TLS handshake is cut off after this.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The hub as the caches hold it; nothing is answered before every cache has listed its kind.
struct CachedHub {
    stores: PlacementStores,
    synced: AtomicBool,
}

impl HubView for CachedHub {
    fn placement(&self, namespace: &str, name: &str) -> Result<Option<Placement>, HubError> {
        self.ensure_synced()?;
        Ok(self
            .stores
            .placements
            .get(&ObjectRef::new(name).within(namespace))
            .map(|p| (*p).clone()))
    }

    fn snapshot(&self, namespace: &str, now: jiff::Timestamp) -> Result<Arc<HubSnapshot>, HubError> {
        self.ensure_synced()?;
        self.stores
            .snapshot(namespace, now)
            .map_err(|e| HubError::Failed(e.to_string()))
    }
}

impl CachedHub {
    fn ensure_synced(&self) -> Result<(), HubError> {
        if self.synced.load(Ordering::Acquire) {
            Ok(())
        } else {
            Err(HubError::NotSynced("the placement engine's kinds"))
        }
    }
}

/// Ready once the caches have synced; always live.
struct ServerProbes {
    hub: Arc<CachedHub>,
    metrics: Arc<Metrics>,
}

impl Probes for ServerProbes {
    fn metrics(&self) -> String {
        self.metrics.render()
    }
    fn live(&self) -> Result<(), String> {
        Ok(())
    }
    fn ready(&self) -> Result<(), String> {
        self.hub
            .ensure_synced()
            .map_err(|_| "hub caches not synced yet".to_owned())
    }
}

/// Runs until `shutdown`. Exit code 2 for a bad configuration, 1 when the process cannot run, 0
/// after a clean shutdown.
pub async fn run(args: ExplainServerArgs, shutdown: CancellationToken) -> ExitCode {
    let (first_cert, flag_profile) = match args.validate() {
        Ok(validated) => validated,
        Err(error) => {
            eprintln!("error: invalid configuration: {error}");
            return ExitCode::from(EXIT_CONFIG);
        }
    };
    let client = match ocm_score_shell::client::client(args.kubeconfig.as_deref(), "--kubeconfig").await {
        Ok(client) => client,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    let metrics = Arc::new(Metrics::default());
    let cert = Arc::new(ReloadingCert::new(first_cert, {
        let metrics = metrics.clone();
        move |ok| metrics.tls_reloaded(ok)
    }));
    let first_profile = flag_profile.clone().unwrap_or_default();
    let tls = match cert.clone().server_config(&first_profile) {
        Ok(config) => TlsAcceptor::from(Arc::new(config)),
        Err(error) => {
            eprintln!("error: TLS configuration: {error}");
            return ExitCode::FAILURE;
        }
    };
    // Each connection takes the acceptor current at its accept: a new profile applies to the next
    // handshake.
    let (tls_updates, tls) = tokio::sync::watch::channel(tls);
    let _profile_watch = match (&flag_profile, &args.tls_profile_namespace) {
        (Some(profile), _) => {
            tracing::info!(profile = %profile.describe(), "TLS profile from flags");
            None
        }
        (None, None) => None,
        (None, Some(namespace)) => {
            let api = kube::Api::namespaced(client.clone(), namespace);
            let cert = cert.clone();
            let namespace = namespace.clone();
            Some(AbortOnDrop::spawn(async move {
                super::tls_profile::watch(api, move |profile| match cert.clone().server_config(&profile) {
                    Ok(config) => {
                        tracing::info!(%namespace, profile = %profile.describe(), "serving the TLS profile of ConfigMap ocm-tls-profile");
                        tls_updates.send_replace(TlsAcceptor::from(Arc::new(config)));
                    }
                    Err(error) => tracing::error!(%error, "the TLS profile cannot be served; keeping the one served"),
                })
                .await
            }))
        }
    };
    let listener = match TcpListener::bind(args.bind_address).await {
        Ok(listener) => listener,
        Err(error) => {
            eprintln!(
                "error: listening on {} (--bind-address): {error}",
                args.bind_address
            );
            return ExitCode::FAILURE;
        }
    };

    // The snapshot answers are made from is kept by the watches: built again after a change,
    // shared by the requests in between.
    let watches = PlacementWatches::new(metrics.snapshot_builds.clone());
    let hub = Arc::new(CachedHub {
        stores: watches.stores(),
        synced: AtomicBool::new(false),
    });
    let _watches = watches.spawn(&client);
    let probes = Arc::new(ServerProbes {
        hub: hub.clone(),
        metrics: metrics.clone(),
    });
    let probe_server = match ProbeServer::start(args.probes.address(), probes, shutdown.clone()).await {
        Ok(server) => server,
        Err(error) => {
            eprintln!("error: {error}");
            return ExitCode::FAILURE;
        }
    };
    tokio::spawn({
        let hub = hub.clone();
        let shutdown = shutdown.clone();
        async move {
            tokio::select! {
                synced = hub.stores.synced() => match synced {
                    Ok(()) => {
                        hub.synced.store(true, Ordering::Release);
                        tracing::info!("hub caches synced");
                    }
                    Err(error) => {
                        tracing::error!(%error, "hub caches did not sync");
                        shutdown.cancel();
                    }
                },
                () = shutdown.cancelled() => {}
            }
        }
    });
    match listener.local_addr() {
        Ok(addr) => tracing::info!(%addr, "serving https://{addr}/debug/placements/"),
        Err(error) => tracing::warn!(%error, "the bound address is unknown"),
    }
    let access = Arc::new(HubAccess::new(client));
    serve(listener, tls, access, hub, metrics, shutdown).await;
    probe_server.stopped().await;
    ExitCode::SUCCESS
}

async fn serve(
    listener: TcpListener,
    tls: tokio::sync::watch::Receiver<TlsAcceptor>,
    access: Arc<HubAccess>,
    hub: Arc<CachedHub>,
    metrics: Arc<Metrics>,
    shutdown: CancellationToken,
) {
    ocm_score_shell::http::accept_until(listener, shutdown, "explain", |stream| {
        let tls = tls.borrow().clone();
        let (access, hub, metrics) = (access.clone(), hub.clone(), metrics.clone());
        async move {
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, tls.accept(stream)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(error)) => {
                    tracing::debug!(%error, "TLS handshake failed");
                    return;
                }
                Err(_) => {
                    tracing::debug!("TLS handshake timed out");
                    return;
                }
            };
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let (access, hub, metrics) = (access.clone(), hub.clone(), metrics.clone());
                async move {
                    Ok::<_, std::convert::Infallible>(
                        handler::respond(&*access, &*hub, &metrics, request, jiff::Timestamp::now()).await,
                    )
                }
            });
            ocm_score_shell::http::serve_http1(stream, service, "explain").await;
        }
    })
    .await;
}
