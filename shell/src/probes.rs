//! The one HTTP endpoint of every mode: `/metrics` (the mode's registry, OpenMetrics text),
//! `/healthz` (alias `/livez`: restart me if failing) and `/readyz` (send me traffic). What the routes
//! say comes from the mode's [`Probes`]; the server is hyper's HTTP/1.1, one task per connection.

use crate::sync::lock;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode, header};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What a process reports on its endpoints.
pub trait Probes: Send + Sync + 'static {
    /// The metrics exposition (see [`crate::metrics::encode`]).
    fn metrics(&self) -> String;
    /// `Err(why)` when the process should be restarted.
    fn live(&self) -> Result<(), String>;
    /// `Err(why)` while the process should not receive traffic.
    fn ready(&self) -> Result<(), String>;
}

/// The probes of a leader-elected controller: always live; ready while it stands by (it can take
/// over at once), and while it leads only once its caches have synced.
pub struct ControllerProbes {
    render: Box<dyn Fn() -> String + Send + Sync>,
    leading: AtomicBool,
    synced: AtomicBool,
}

impl ControllerProbes {
    /// Standing by, caches not synced; `render` gives the mode's metrics exposition.
    pub fn new(render: impl Fn() -> String + Send + Sync + 'static) -> Self {
        Self {
            render: Box::new(render),
            leading: AtomicBool::new(false),
            synced: AtomicBool::new(false),
        }
    }

    /// Starts the probe server for a controller standing by: its probes (to mark leading and
    /// synced) and the running server.
    pub async fn serve(
        addr: SocketAddr,
        render: impl Fn() -> String + Send + Sync + 'static,
        shutdown: CancellationToken,
    ) -> Result<(Arc<Self>, ProbeServer), BindError> {
        let probes = Arc::new(Self::new(render));
        let server = ProbeServer::start(addr, probes.clone(), shutdown).await?;
        Ok((probes, server))
    }

    pub fn set_leading(&self, leading: bool) {
        self.leading.store(leading, Ordering::Relaxed);
    }

    pub fn set_synced(&self, synced: bool) {
        self.synced.store(synced, Ordering::Relaxed);
    }
}

impl Probes for ControllerProbes {
    fn metrics(&self) -> String {
        (self.render)()
    }
    fn live(&self) -> Result<(), String> {
        Ok(())
    }
    fn ready(&self) -> Result<(), String> {
        if !self.leading.load(Ordering::Relaxed) || self.synced.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err("hub caches not synced yet".into())
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("listening on {addr} for /metrics, /healthz and /readyz: {source}")]
pub struct BindError {
    pub addr: SocketAddr,
    #[source]
    pub source: std::io::Error,
}

/// A running endpoint; it stops when the shutdown token is cancelled (or this is dropped).
pub struct ProbeServer {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl ProbeServer {
    /// Binds `addr` (port 0 picks a free port; [`ProbeServer::addr`] tells which) and serves until
    /// `shutdown` is cancelled.
    pub async fn start(
        addr: SocketAddr,
        probes: Arc<dyn Probes>,
        shutdown: CancellationToken,
    ) -> Result<Self, BindError> {
        let bind_error = |source| BindError { addr, source };
        let listener = TcpListener::bind(addr).await.map_err(bind_error)?;
        let local = listener.local_addr().map_err(bind_error)?;
        tracing::info!(addr = %local, "serving /metrics, /healthz and /readyz");
        let task = tokio::spawn(serve(listener, probes, shutdown));
        Ok(ProbeServer { addr: local, task })
    }

    /// Serves on a listener the caller bound (it may have needed the address earlier).
    pub fn serve_on(
        listener: TcpListener,
        probes: Arc<dyn Probes>,
        shutdown: CancellationToken,
    ) -> std::io::Result<Self> {
        let addr = listener.local_addr()?;
        tracing::info!(%addr, "serving /metrics, /healthz and /readyz");
        let task = tokio::spawn(serve(listener, probes, shutdown));
        Ok(ProbeServer { addr, task })
    }

    /// The address actually bound.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits (at most a second) for the server to notice shutdown.
    pub async fn stopped(mut self) {
        if tokio::time::timeout(Duration::from_secs(1), &mut self.task)
            .await
            .is_err()
        {
            self.task.abort();
        }
    }
}

impl Drop for ProbeServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(listener: TcpListener, probes: Arc<dyn Probes>, shutdown: CancellationToken) {
    crate::http::accept_until(listener, shutdown, "metrics/probe", |stream| {
        let probes = probes.clone();
        async move {
            let service = hyper::service::service_fn(move |request: Request<Incoming>| {
                let response = respond(probes.as_ref(), &request);
                async move { Ok::<_, std::convert::Infallible>(response) }
            });
            crate::http::serve_http1(stream, service, "metrics/probe").await;
        }
    })
    .await;
}

fn respond(probes: &dyn Probes, request: &Request<Incoming>) -> Response<Full<Bytes>> {
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n".into());
    }
    let probe = |result: Result<(), String>| match result {
        Ok(()) => text(StatusCode::OK, "ok\n".into()),
        Err(why) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{why}\n")),
    };
    match request.uri().path() {
        "/metrics" => {
            let mut response = text(StatusCode::OK, probes.metrics());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static(crate::metrics::CONTENT_TYPE),
            );
            response
        }
        "/healthz" | "/livez" => probe(probes.live()),
        "/readyz" => probe(probes.ready()),
        _ => text(StatusCode::NOT_FOUND, "not found\n".into()),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

/// A loop's last sign of life, for `/healthz`: a loop that stops coming round (wedged on a lock or a
/// call without timeout) gets the process restarted. On Tokio's clock, so tests can advance it.
#[derive(Debug, Default)]
pub struct Heartbeat(Mutex<Option<Instant>>);

impl Heartbeat {
    pub fn beat(&self) {
        *lock(&self.0) = Some(Instant::now());
    }

    /// How long since the last beat; `None` before the first.
    pub fn silence(&self) -> Option<Duration> {
        lock(&self.0).map(|at| at.elapsed())
    }

    /// Whether the last beat is at most `max_silence` old (never beaten counts as dead).
    pub fn alive(&self, max_silence: Duration) -> bool {
        self.silence().is_some_and(|quiet| quiet <= max_silence)
    }

    /// [`Heartbeat::alive`] as a liveness answer naming what went quiet.
    pub fn live(&self, what: &str, max_silence: Duration) -> Result<(), String> {
        match self.silence() {
            Some(quiet) if quiet <= max_silence => Ok(()),
            Some(quiet) => Err(format!("{what} has been silent for {}s", quiet.as_secs())),
            None => Err(format!("{what} has not started")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    struct Fake {
        ready: AtomicBool,
    }

    impl Probes for Fake {
        fn metrics(&self) -> String {
            "# TYPE x counter\nx_total 3\n# EOF\n".into()
        }
        fn live(&self) -> Result<(), String> {
            Ok(())
        }
        fn ready(&self) -> Result<(), String> {
            if self.ready.load(Ordering::Relaxed) {
                Ok(())
            } else {
                Err("caches not synced".into())
            }
        }
    }

    #[test]
    fn a_controller_is_ready_standing_by_and_leading_only_once_synced() {
        let probes = ControllerProbes::new(|| "# EOF\n".into());
        assert_eq!(probes.ready(), Ok(()), "a standby can take over at once");
        probes.set_leading(true);
        assert_eq!(probes.ready(), Err("hub caches not synced yet".into()));
        probes.set_synced(true);
        assert_eq!(probes.ready(), Ok(()));
        probes.set_leading(false);
        probes.set_synced(false);
        assert_eq!(probes.ready(), Ok(()), "stepped down");
        assert_eq!(probes.live(), Ok(()));
        assert_eq!(probes.metrics(), "# EOF\n");
    }

    async fn send(addr: SocketAddr, request: &str) -> String {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut out = String::new();
        stream.read_to_string(&mut out).await.expect("read");
        out
    }

    fn get(path: &str) -> String {
        format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    }

    #[tokio::test]
    async fn routes_answer_from_the_probes_and_the_server_stops_on_shutdown() {
        let fake = Arc::new(Fake {
            ready: AtomicBool::new(false),
        });
        let shutdown = CancellationToken::new();
        let server = ProbeServer::start(
            "127.0.0.1:0".parse().expect("addr"),
            fake.clone(),
            shutdown.clone(),
        )
        .await
        .expect("binds");
        let addr = server.addr();
        let not_ready = send(addr, &get("/readyz")).await;
        assert!(
            not_ready.starts_with("HTTP/1.1 503") && not_ready.ends_with("caches not synced\n"),
            "{not_ready}"
        );
        fake.ready.store(true, Ordering::Relaxed);
        assert!(send(addr, &get("/readyz")).await.starts_with("HTTP/1.1 200"));
        assert!(send(addr, &get("/healthz")).await.starts_with("HTTP/1.1 200"));
        assert!(send(addr, &get("/livez")).await.starts_with("HTTP/1.1 200"));
        let metrics = send(addr, &get("/metrics?a=b")).await;
        assert!(metrics.ends_with("x_total 3\n# EOF\n"), "{metrics}");
        assert!(metrics.contains(crate::metrics::CONTENT_TYPE), "{metrics}");
        assert!(send(addr, &get("/other")).await.starts_with("HTTP/1.1 404"));
        let post = "POST /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";
        assert!(send(addr, post).await.starts_with("HTTP/1.1 405"));

        shutdown.cancel();
        server.stopped().await;
        assert!(
            tokio::net::TcpStream::connect(addr).await.is_err(),
            "the listener is closed after shutdown"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeat_goes_stale_after_the_allowed_silence() {
        let heartbeat = Heartbeat::default();
        let max = Duration::from_secs(60);
        assert!(!heartbeat.alive(max), "never beat");
        assert!(
            heartbeat
                .live("the loop", max)
                .expect_err("not started")
                .contains("not started")
        );
        heartbeat.beat();
        tokio::time::advance(max).await;
        assert!(heartbeat.alive(max));
        tokio::time::advance(Duration::from_secs(1)).await;
        assert!(!heartbeat.alive(max));
        assert_eq!(
            heartbeat.live("the loop", max),
            Err("the loop has been silent for 61s".into())
        );
        heartbeat.beat();
        assert_eq!(heartbeat.live("the loop", max), Ok(()));
    }
}
