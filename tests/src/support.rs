//! Small helpers the agent's and the hub's tests share: scratch directories, reading `/metrics`,
//! and one of our binaries' modes run as a process. The first four live with the control plane,
//! which needs them too (`ocm_score_control_plane::support`).

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::process::{Child, Command};

pub use ocm_score_control_plane::support::{Exposition, TempDir, eventually, http_get};

/// A free port on 127.0.0.1 (for a process's `/metrics`).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// One mode of our binaries (`ocm-score-hub tiering`, `thanos-scorer`, ...) as a process in the
/// process shell: its stderr kept in memory, its `/metrics`, `/healthz` and `/readyz` on
/// `metrics_port`, SIGTERM for a graceful stop. Killed when dropped.
pub struct ModeProcess {
    what: String,
    child: Child,
    pub metrics_port: u16,
    log: Arc<Mutex<String>>,
}

impl ModeProcess {
    /// Spawns `command` with `--metrics-bind-address=127.0.0.1:<a free port>` added; stderr lines
    /// for which `skip` says true are not kept.
    pub fn spawn(what: &str, mut command: Command, skip: fn(&str) -> bool) -> ModeProcess {
        let metrics_port = free_port();
        let mut child = command
            .arg(format!("--metrics-bind-address=127.0.0.1:{metrics_port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {what}: {e}"));
        let log = Arc::new(Mutex::new(String::new()));
        if let Some(stderr) = child.stderr.take() {
            let log = log.clone();
            tokio::spawn(async move {
                use tokio::io::AsyncBufReadExt;
                let mut lines = tokio::io::BufReader::new(stderr).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if skip(&line) {
                        continue;
                    }
                    let mut log = log.lock().expect("log lock");
                    log.push_str(&line);
                    log.push('\n');
                }
            });
        }
        ModeProcess {
            what: what.to_owned(),
            child,
            metrics_port,
            log,
        }
    }

    /// The log's tail (at most 300 kB): what explains a failure.
    pub fn log(&self) -> String {
        let log = self.log.lock().expect("log lock");
        let start = log.len().saturating_sub(300_000);
        let start = (start..log.len()).find(|i| log.is_char_boundary(*i)).unwrap_or(0);
        log[start..].to_owned()
    }

    /// GETs a path of the metrics/probe server; `None` while it is not reachable.
    pub async fn get(&self, path: &str) -> Option<(u16, String)> {
        let response = reqwest::get(format!("http://127.0.0.1:{}{path}", self.metrics_port))
            .await
            .ok()?;
        let status = response.status().as_u16();
        Some((status, response.text().await.ok()?))
    }

    /// The value of a sample of `/metrics` whose labels include `labels`.
    pub async fn metric(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let (_, text) = self.get("/metrics").await?;
        Exposition::parse(&text).ok()?.value(name, labels)
    }

    /// Waits for `/readyz` to answer 200; panics if the process exits first or after `timeout`.
    pub async fn wait_ready(&mut self, timeout: Duration, context: impl Fn() -> String) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some((200, _)) = self.get("/readyz").await {
                return;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                panic!("{} exited early ({status}):\n{}", self.what, self.log());
            }
            assert!(
                Instant::now() < deadline,
                "{} did not become ready:\n{}\n{}",
                self.what,
                self.log(),
                context()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The process id while it runs (for /proc readings of its CPU time and memory).
    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    /// True while the process runs.
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Sends SIGTERM and waits (30 s, a pod's default grace) for the exit code.
    pub async fn terminate(mut self) -> Option<i32> {
        if let Some(pid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .arg("-TERM")
                .arg(pid.to_string())
                .status();
        }
        match tokio::time::timeout(Duration::from_secs(30), self.child.wait()).await {
            Ok(Ok(status)) => status.code(),
            _ => panic!(
                "{} did not stop within 30s of SIGTERM:\n{}",
                self.what,
                self.log()
            ),
        }
    }
}

/// A `/proc/<pid>/status` field in KiB (`VmRSS:`, `VmHWM:`), for benchmarks of our processes; 0
/// when the process or the field is gone.
pub fn proc_status_kib(pid: u32, field: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(field)).map(str::to_string))
        .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// A process's CPU time so far (user + system, seconds) from `/proc/<pid>/stat`; NaN when the
/// process is gone.
pub fn proc_cpu_seconds(pid: u32) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    // The fields after the command name (which may hold spaces) start after the last ')'; utime
    // and stime are the 12th and 13th of those, in clock ticks (100 a second on Linux).
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// A count from the environment (a benchmark's size), `default` when unset; a value that is not a
/// count is an error naming the variable and the value.
pub fn env_usize(name: &str, default: usize) -> Result<usize, String> {
    match std::env::var(name) {
        Ok(v) => v.parse().map_err(|e| format!("{name}={v:?} is not a count: {e}")),
        Err(_) => Ok(default),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_dirs_are_distinct_and_removed_on_drop() {
        let a = TempDir::new("support");
        let b = TempDir::new("support");
        assert_ne!(a.path(), b.path());
        assert!(a.path().is_dir());
        std::fs::write(a.path().join("file"), "x").expect("write");
        let kept = a.path().to_owned();
        drop(a);
        assert!(!kept.exists());
    }

    #[test]
    fn values_are_found_by_name_and_label_subset() {
        let text = "# TYPE hits_total counter\n\
                    hits_total{code=\"200\",path=\"/\"} 3\n\
                    hits_total{code=\"500\",path=\"/\"} 1\n\
                    # TYPE up gauge\n\
                    up 1\n";
        let exposition = Exposition::parse(text).expect("valid exposition");
        assert_eq!(exposition.value("hits_total", &[("code", "500")]), Some(1.0));
        assert_eq!(exposition.value("hits_total", &[]), Some(3.0));
        assert_eq!(exposition.value("up", &[]), Some(1.0));
        assert_eq!(exposition.value("up", &[("job", "x")]), None);
        assert_eq!(exposition.value("down", &[]), None);
    }
}
