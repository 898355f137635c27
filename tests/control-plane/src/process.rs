//! The processes of a control plane: started with their output in a log file, checked for an
//! early exit, and stopped (SIGTERM, then SIGKILL) so that nothing outlives the launcher.
//!
//! Each child runs in its own process group, so a terminal's Ctrl-C reaches only the launcher,
//! which then stops the children in order. Where `setpriv` exists (util-linux, on every Debian),
//! the child also gets `PDEATHSIG=KILL`: if the launcher itself is killed, the kernel ends the
//! children too. That signal follows the thread that spawned the child, so components are
//! spawned from the thread that owns the [`ControlPlane`](super::ControlPlane).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};

use super::Error;

/// How much of a log an error message quotes.
const TAIL_LINES: usize = 25;

/// When a component stops relative to the others: clients first, then API servers, then etcd,
/// so that no API server spends its shutdown retrying a storage that is already gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tier {
    Storage,
    ApiServer,
    Client,
}

/// One running component.
pub struct Component {
    name: String,
    tier: Tier,
    child: Child,
    log: PathBuf,
    exited: Option<ExitStatus>,
    /// What it was started with, to start it again the same way.
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

impl Component {
    /// Starts `program args` with stdout and stderr appended to `<log_dir>/<name>.log`.
    pub fn spawn(
        name: &str,
        tier: Tier,
        program: &Path,
        args: &[String],
        env: &[(&str, String)],
        log_dir: &Path,
    ) -> Result<Self, Error> {
        let log = log_dir.join(format!("{name}.log"));
        let env: Vec<(String, String)> = env.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
        let child = start(name, program, args, &env, &log)?;
        Ok(Component {
            name: name.to_owned(),
            tier,
            child,
            log,
            exited: None,
            program: program.to_path_buf(),
            args: args.to_vec(),
            env,
        })
    }

    /// The program, arguments and environment it was started with (a port or data directory a
    /// test needs to know, or a one-off run with the same identity).
    pub fn program(&self) -> &Path {
        &self.program
    }

    pub fn args(&self) -> &[String] {
        &self.args
    }

    pub fn env(&self) -> &[(String, String)] {
        &self.env
    }

    /// Its exit status once it has exited; `None` while it runs.
    pub fn exit_status(&mut self) -> Option<ExitStatus> {
        if self.exited.is_none() {
            self.exited = self.child.try_wait().ok().flatten();
        }
        self.exited
    }

    /// `kill -9` of the component's process group, as a crash or an OOM kill would end it: no
    /// shutdown of any kind. Returns once it has exited; fails naming it if it was not running.
    pub fn kill(&mut self) -> Result<(), Error> {
        if let Some(status) = self.exit_status() {
            return Err(Error::Component {
                component: self.name.clone(),
                problem: format!("cannot be killed: it is not running ({status})"),
            });
        }
        self.signal(Signal::KILL);
        self.exited = Some(self.child.wait().map_err(|source| Error::Io {
            what: format!("waiting for {} to exit", self.name),
            source,
        })?);
        tracing::debug!(component = %self.name, "killed");
        Ok(())
    }

    /// Starts the component again after it exited: same program, arguments and environment (so the
    /// same ports and data directory), its output appended to the same log. Fails naming it if it
    /// still runs.
    pub fn restart(&mut self) -> Result<(), Error> {
        if self.exit_status().is_none() {
            return Err(Error::Component {
                component: self.name.clone(),
                problem: "cannot be restarted: it is still running".into(),
            });
        }
        self.child = start(&self.name, &self.program, &self.args, &self.env, &self.log)?;
        self.exited = None;
        Ok(())
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn tier(&self) -> Tier {
        self.tier
    }

    pub fn log_path(&self) -> &Path {
        &self.log
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Fails with the component's name, exit status and log tail if it has exited.
    pub fn check_running(&mut self) -> Result<(), Error> {
        match self.exit_status() {
            None => Ok(()),
            Some(status) => Err(Error::Exited {
                component: self.name.clone(),
                status: status.to_string(),
                log: self.log.clone(),
                tail: self.tail(),
            }),
        }
    }

    /// The last lines of the component's log.
    pub fn tail(&self) -> String {
        tail(&self.log, TAIL_LINES)
    }

    /// Sends SIGTERM to the component's process group.
    pub fn terminate(&mut self) {
        self.signal(Signal::TERM);
    }

    /// Waits up to `grace` for the component to exit after [`terminate`](Self::terminate),
    /// then kills its process group.
    pub fn wait_or_kill(&mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        while self.exited.is_none() && Instant::now() < deadline {
            match self.child.try_wait() {
                Ok(Some(status)) => self.exited = Some(status),
                Ok(None) => std::thread::sleep(Duration::from_millis(50)),
                Err(_) => break,
            }
        }
        if self.exited.is_none() {
            tracing::warn!(component = %self.name, "did not stop within {grace:?}; killing it");
            self.signal(Signal::KILL);
            self.exited = self.child.wait().ok();
        }
        // The group may hold helpers the component started; none may outlive it.
        self.signal(Signal::KILL);
    }

    fn signal(&self, signal: Signal) {
        let Some(pgid) = i32::try_from(self.child.id()).ok().and_then(Pid::from_raw) else {
            return;
        };
        // ESRCH once the group is gone is the expected outcome, not an error.
        let _ = rustix::process::kill_process_group(pgid, signal);
    }
}

impl Drop for Component {
    fn drop(&mut self) {
        if self.exited.is_none() {
            self.terminate();
            self.wait_or_kill(Duration::from_secs(10));
        }
    }
}

/// The last `lines` lines of a file (one home: the Go builds' logs use it too).
pub use ocm_score_go_build::tail;

/// Spawns `program args` in its own process group, output appended to `log`.
fn start(
    name: &str,
    program: &Path,
    args: &[String],
    env: &[(String, String)],
    log: &Path,
) -> Result<Child, Error> {
    let out = File::options()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|source| Error::Io {
            what: format!("opening {}", log.display()),
            source,
        })?;
    let err = out.try_clone().map_err(|source| Error::Io {
        what: format!("opening {}", log.display()),
        source,
    })?;

    let mut command = match setpriv() {
        Some(setpriv) => {
            let mut c = Command::new(setpriv);
            c.arg("--pdeathsig").arg("KILL").arg("--").arg(program);
            c
        }
        None => Command::new(program),
    };
    command.args(args).stdin(Stdio::null()).stdout(out).stderr(err);
    for (key, value) in env {
        command.env(key, value);
    }
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let child = command.spawn().map_err(|source| Error::Spawn {
        component: name.to_owned(),
        program: program.to_path_buf(),
        source,
    })?;
    tracing::debug!(component = name, pid = child.id(), log = %log.display(), "started");
    Ok(child)
}

fn setpriv() -> Option<PathBuf> {
    ["/usr/bin/setpriv", "/bin/setpriv"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}
