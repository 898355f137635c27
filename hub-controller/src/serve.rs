//! `/metrics`, `/healthz` and `/readyz` over plain HTTP/1.1, for any hub subcommand.
//!
//! Three GET routes with small bodies need no HTTP framework: each connection sends one request,
//! gets one answer and is closed. What the routes say comes from a [`Probes`] implementation.

use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

const MAX_REQUEST_HEAD: usize = 8 * 1024;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// What a process reports on its endpoints.
pub trait Probes: Send + Sync + 'static {
    /// The Prometheus text exposition.
    fn metrics(&self) -> String;
    /// `Err(why)` when the process should be restarted.
    fn live(&self) -> Result<(), String>;
    /// `Err(why)` while the process should not receive traffic.
    fn ready(&self) -> Result<(), String>;
}

/// Serves until `shutdown` turns true.
pub async fn serve(listener: TcpListener, probes: Arc<dyn Probes>, mut shutdown: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = stop_requested(&mut shutdown) => return,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    let probes = probes.clone();
                    tokio::spawn(async move {
                        if tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, probes.as_ref())).await.is_err() {
                            tracing::debug!("probe connection timed out");
                        }
                    });
                }
                Err(error) => {
                    tracing::warn!(%error, "accepting a metrics/probe connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
}

/// Resolves once `shutdown` is true (or its sender is gone).
async fn stop_requested(shutdown: &mut watch::Receiver<bool>) {
    let _ = shutdown.wait_for(|stop| *stop).await;
}

async fn answer(mut stream: TcpStream, probes: &dyn Probes) {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.len() > MAX_REQUEST_HEAD {
            let _ = respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                "request too large\n",
            )
            .await;
            return;
        }
    }
    let line = String::from_utf8_lossy(head.split(|b| *b == b'\r').next().unwrap_or_default()).into_owned();
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let path = target.split('?').next().unwrap_or_default();
    let probe = |result: Result<(), String>| match result {
        Ok(()) => ("200 OK", "ok\n".to_string()),
        Err(why) => ("503 Service Unavailable", format!("{why}\n")),
    };
    let (status, content_type, body) = match (method, path) {
        ("GET", "/metrics") => (
            "200 OK",
            "text/plain; version=0.0.4; charset=utf-8",
            probes.metrics(),
        ),
        ("GET", "/healthz" | "/livez") => {
            let (status, body) = probe(probes.live());
            (status, "text/plain", body)
        }
        ("GET", "/readyz") => {
            let (status, body) = probe(probes.ready());
            (status, "text/plain", body)
        }
        ("GET", _) => ("404 Not Found", "text/plain", "not found\n".to_string()),
        _ => ("405 Method Not Allowed", "text/plain", "only GET\n".to_string()),
    };
    if let Err(error) = respond(&mut stream, status, content_type, &body).await {
        tracing::debug!(%error, "writing a probe answer failed");
    }
}

async fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    struct Fake {
        ready: AtomicBool,
    }

    impl Probes for Fake {
        fn metrics(&self) -> String {
            "x_total 3\n".into()
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

    async fn get(addr: std::net::SocketAddr, request: &str) -> String {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut out = String::new();
        stream.read_to_string(&mut out).await.expect("read");
        out
    }

    #[tokio::test]
    async fn routes() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let fake = Arc::new(Fake {
            ready: AtomicBool::new(false),
        });
        let (stop, stopped) = watch::channel(false);
        let server = tokio::spawn(serve(listener, fake.clone(), stopped));
        let req = |p: &str| format!("GET {p} HTTP/1.1\r\nHost: x\r\n\r\n");
        let not_ready = get(addr, &req("/readyz")).await;
        assert!(
            not_ready.starts_with("HTTP/1.1 503") && not_ready.ends_with("caches not synced\n"),
            "{not_ready}"
        );
        fake.ready.store(true, Ordering::Relaxed);
        assert!(get(addr, &req("/readyz")).await.starts_with("HTTP/1.1 200"));
        assert!(get(addr, &req("/healthz")).await.starts_with("HTTP/1.1 200"));
        assert!(get(addr, &req("/metrics?a=b")).await.ends_with("x_total 3\n"));
        assert!(get(addr, &req("/other")).await.starts_with("HTTP/1.1 404"));
        assert!(
            get(addr, "POST /metrics HTTP/1.1\r\n\r\n")
                .await
                .starts_with("HTTP/1.1 405")
        );
        stop.send(true).expect("listening");
        server.await.expect("stops");
    }
}
