//! The accept loop and the HTTP/1.1 connection of every server a mode runs (the probe server,
//! the explain server's HTTPS endpoint): one place for how connections are taken, handed to a
//! task each, cut off when slow, and stopped at shutdown.

use hyper::body::Incoming;
use hyper::service::Service;
use hyper::{Request, Response};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::future::Future;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A client that never finishes its request head is cut off after this.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Accepts connections until `shutdown`, each handed to `connection` on a task of its own. A
/// failed accept (out of file descriptors, say) is logged and retried after a pause. `what` names
/// the server in logs.
pub async fn accept_until<F, Fut>(
    listener: TcpListener,
    shutdown: CancellationToken,
    what: &'static str,
    connection: F,
) where
    F: Fn(TcpStream) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        let accepted = tokio::select! {
            () = shutdown.cancelled() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, _)) => {
                tokio::spawn(connection(stream));
            }
            Err(error) => {
                tracing::warn!(%error, "accepting a {what} connection failed");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Serves HTTP/1.1 requests on one connection with `service` until the client closes it.
pub async fn serve_http1<IO, S, B>(io: IO, service: S, what: &'static str)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    S: Service<Request<Incoming>, Response = Response<B>> + Send,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let connection = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(io), service);
    if let Err(error) = connection.await {
        tracing::debug!(%error, "{what} connection ended with an error");
    }
}
