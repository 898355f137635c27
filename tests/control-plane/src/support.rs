//! Helpers for running real processes that the control plane and the tests share: scratch
//! directories, polling until a condition holds, a plain HTTP GET of a probe endpoint, and parsing
//! a Prometheus exposition. `ocm_score_tests::support` re-exports them beside the tests' own.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A fresh directory under the system temp dir, removed on drop (no extra crate for it).
///
/// The name holds the process id and a counter, so parallel tests never share one.
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates `ocm-score-<what>-<pid>-<n>`; panics if it cannot, as befits a test fixture.
    pub fn new(what: &str) -> Self {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "ocm-score-{what}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).expect("creating a temp dir");
        TempDir(path)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    /// Keeps the directory on disk (for a failure's logs) and returns its path.
    pub fn keep(self) -> PathBuf {
        let this = std::mem::ManuallyDrop::new(self);
        this.0.clone()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Polls `check` every 300 ms until it gives a value; after `timeout` panics naming `what`, with
/// `context()` (a log tail, say) to show why. For tests of real processes, whose timing is not ours.
pub async fn eventually<T, F, Fut>(
    what: &str,
    timeout: std::time::Duration,
    context: impl Fn() -> String,
    mut check: F,
) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = std::time::Instant::now();
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(
            started.elapsed() < timeout,
            "{what}: not within {timeout:?}\n{}",
            context()
        );
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    }
}

/// `GET path` over plain HTTP/1.1 from a probe server on `addr` (`127.0.0.1:8080`): the status code and
/// body. For /metrics, /healthz and /readyz of the processes under test.
pub async fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let code = response
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, "no HTTP status line"))?;
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok((code, body.to_owned()))
}

/// A parsed Prometheus text exposition, queried by metric name and a subset of labels.
pub struct Exposition(prometheus_parse::Scrape);

impl Exposition {
    pub fn parse(text: &str) -> std::io::Result<Self> {
        prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned()))).map(Exposition)
    }

    /// The value of the first sample named `name` whose labels include all of `labels`;
    /// NaN for histogram and summary samples, which have no single value.
    pub fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.matching(name, labels).next()
    }

    /// The sum over every sample named `name` whose labels include all of `labels` (a counter
    /// family over all its label values); 0 when there is none.
    pub fn sum(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.matching(name, labels).sum()
    }

    fn matching<'a>(&'a self, name: &'a str, labels: &'a [(&str, &str)]) -> impl Iterator<Item = f64> + 'a {
        self.0
            .samples
            .iter()
            .filter(move |s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => v,
                _ => f64::NAN,
            })
    }
}
