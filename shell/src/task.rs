//! A spawned task that lives as long as its handle: every mode's background tasks (probe servers,
//! watches, renewers) end with the value that owns them, so shutdown leaves nothing running.

/// Aborts the task when dropped.
#[derive(Debug)]
pub struct AbortOnDrop<T>(pub tokio::task::JoinHandle<T>);

impl<T> AbortOnDrop<T> {
    /// Spawns `future` on the current runtime, aborted when the returned value is dropped.
    pub fn spawn<F>(future: F) -> Self
    where
        F: std::future::Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        AbortOnDrop(tokio::spawn(future))
    }
}

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn dropping_the_handle_ends_the_task() {
        let task = AbortOnDrop::spawn(std::future::pending::<()>());
        let aborted = task.0.abort_handle();
        drop(task);
        tokio::task::yield_now().await;
        assert!(aborted.is_finished());
    }
}
