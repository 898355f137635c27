//! Graceful shutdown: one [`CancellationToken`] per process, cancelled by SIGTERM or Ctrl-C (or by
//! the mode itself, e.g. after losing leadership). Every task of a mode waits on a clone or a child
//! of it, so one signal stops everything in order.

pub use tokio_util::sync::CancellationToken;

/// A token cancelled on the first SIGTERM or Ctrl-C. Must be called inside a Tokio runtime.
pub fn on_signals() -> CancellationToken {
    let token = CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        tokio::select! {
            () = termination_signal() => {
                tracing::info!("termination signal received; shutting down");
                cancel.cancel();
            }
            // Cancelled by the mode itself: stop listening.
            () = cancel.cancelled() => {}
        }
    });
    token
}

/// Resolves on SIGTERM (how Kubernetes stops a pod) or Ctrl-C.
async fn termination_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
                return;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM; only Ctrl-C stops the process");
            }
        }
    }
    if let Err(error) = tokio::signal::ctrl_c().await {
        tracing::warn!(%error, "cannot listen for Ctrl-C either; the process stops only when killed");
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn cancelling_the_token_stops_the_signal_listener() {
        let token = on_signals();
        assert!(!token.is_cancelled());
        token.cancel();
        token.cancelled().await;
        // The listener task ends with the token; nothing is left waiting on signals.
        tokio::task::yield_now().await;
        assert!(token.is_cancelled());
    }
}
