//! What the agent reports on `/metrics`, `/healthz` (the main loop is alive) and `/readyz` (the
//! sources have synced and the hub has accepted, or already held, current scores), served by the
//! process shell's probe server.

use crate::metrics::Metrics;
use ocm_score_shell::CancellationToken;
use ocm_score_shell::probes::{Heartbeat, ProbeServer};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::net::TcpListener;

pub struct Probes {
    pub metrics: Arc<Metrics>,
    pub heartbeat: Arc<Heartbeat>,
    /// Longest the main loop may stay silent and still count as alive.
    pub max_silence: Duration,
    pub ready: AtomicBool,
    /// Why the agent is not ready, once it was: said by `/readyz`.
    pub not_ready_because: std::sync::Mutex<Option<String>>,
}

impl Probes {
    pub fn set_ready(&self) {
        if !self.ready.swap(true, Ordering::Relaxed) {
            tracing::info!("ready");
        }
    }

    /// Not ready, for `why`: a kubelet takes the pod out of its Services' endpoints and the
    /// Deployment's availability, so an agent that cannot reach its hub shows as unavailable.
    pub fn set_not_ready(&self, why: String) {
        if self.ready.swap(false, Ordering::Relaxed) {
            tracing::warn!(reason = %why, "not ready");
        }
        if let Ok(mut slot) = self.not_ready_because.lock() {
            *slot = Some(why);
        }
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}

impl ocm_score_shell::probes::Probes for Probes {
    fn metrics(&self) -> String {
        self.metrics.render()
    }

    fn live(&self) -> Result<(), String> {
        self.heartbeat.live("the main loop", self.max_silence)
    }

    fn ready(&self) -> Result<(), String> {
        if self.is_ready() {
            return Ok(());
        }
        let why = self.not_ready_because.lock().ok().and_then(|w| w.clone());
        Err(why.unwrap_or_else(|| "sources not synced or no hub write yet".into()))
    }
}

/// Serves until the task is dropped.
pub async fn serve(listener: TcpListener, probes: Arc<Probes>) {
    let stop = CancellationToken::new();
    // Dropping this future (the task being aborted) drops the server, which aborts its task too.
    let _server = match ProbeServer::serve_on(listener, probes, stop.clone()) {
        Ok(server) => server,
        Err(error) => {
            tracing::warn!(%error, "the metrics listener has no address; not serving");
            return;
        }
    };
    std::future::pending::<()>().await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn get(addr: std::net::SocketAddr, path: &str) -> (u16, String) {
        let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("write");
        let mut response = String::new();
        stream.read_to_string(&mut response).await.expect("read");
        let status = response
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("status");
        let body = response.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned();
        (status, body)
    }

    #[tokio::test]
    async fn probes_follow_state() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let probes = Arc::new(Probes {
            metrics: Arc::new(Metrics::default()),
            heartbeat: Arc::new(Heartbeat::default()),
            max_silence: Duration::from_secs(60),
            ready: AtomicBool::new(false),
            not_ready_because: std::sync::Mutex::new(None),
        });
        let server = tokio::spawn(serve(listener, probes.clone()));

        assert_eq!(get(addr, "/readyz").await.0, 503);
        assert_eq!(get(addr, "/healthz").await.0, 503, "no heartbeat yet");
        probes.heartbeat.beat();
        probes.set_ready();
        assert_eq!(get(addr, "/readyz").await.0, 200);
        assert_eq!(get(addr, "/healthz").await.0, 200);
        let (status, body) = get(addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(
            body.contains("ocm_score_agent_hub_writes_total{result=\"written\"} 0"),
            "{body}"
        );
        assert_eq!(get(addr, "/nope").await.0, 404);
        server.abort();
    }
}
