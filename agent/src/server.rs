//! The agent's HTTP endpoint: `/metrics` (Prometheus text), `/healthz` (the main loop is alive) and
//! `/readyz` (the sources have synced and the hub has accepted, or already held, current scores).

use crate::lease::Heartbeat;
use crate::metrics::Metrics;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
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
}

impl Probes {
    pub fn set_ready(&self) {
        if !self.ready.swap(true, Ordering::Relaxed) {
            tracing::info!("ready");
        }
    }

    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    fn respond(&self, request: &Request<Incoming>) -> Response<Full<Bytes>> {
        let text = |status: StatusCode, body: String| {
            let mut response = Response::new(Full::new(Bytes::from(body)));
            *response.status_mut() = status;
            response
        };
        if request.method() != Method::GET && request.method() != Method::HEAD {
            return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n".into());
        }
        match request.uri().path() {
            "/metrics" => {
                let mut response = text(StatusCode::OK, self.metrics.render());
                response.headers_mut().insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
                );
                response
            }
            "/healthz" | "/livez" => {
                if self.heartbeat.alive(jiff::Timestamp::now(), self.max_silence) {
                    text(StatusCode::OK, "ok\n".into())
                } else {
                    text(StatusCode::SERVICE_UNAVAILABLE, "main loop silent\n".into())
                }
            }
            "/readyz" => {
                if self.is_ready() {
                    text(StatusCode::OK, "ready\n".into())
                } else {
                    text(
                        StatusCode::SERVICE_UNAVAILABLE,
                        "sources not synced or no hub write yet\n".into(),
                    )
                }
            }
            _ => text(StatusCode::NOT_FOUND, "not found\n".into()),
        }
    }
}

/// Serves until the task is dropped.
pub async fn serve(listener: TcpListener, probes: Arc<Probes>) {
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let probes = probes.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let response = probes.respond(&request);
                async move { Ok::<_, std::convert::Infallible>(response) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(Duration::from_secs(10))
                .serve_connection(TokioIo::new(stream), service);
            if let Err(error) = connection.await {
                tracing::debug!(%error, "metrics connection ended with an error");
            }
        });
    }
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
        });
        let server = tokio::spawn(serve(listener, probes.clone()));

        assert_eq!(get(addr, "/readyz").await.0, 503);
        assert_eq!(get(addr, "/healthz").await.0, 503, "no heartbeat yet");
        probes.heartbeat.beat(jiff::Timestamp::now());
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
