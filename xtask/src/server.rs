//! Servers started for the benchmark: slotraft and redis-server on free 127.0.0.1 ports,
//! each owned by a guard that stops it (SIGTERM, then SIGKILL) when dropped, including on
//! errors.

use crate::wire;
use anyhow::{bail, Context as _, Result};
use std::fs::File;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a server may take to answer its first PING.
pub const STARTUP_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a server may take to exit after SIGTERM before it is killed.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);
/// Attempts to start a server, each on a fresh port (another process may grab the port
/// between choosing it and the server binding it).
const START_ATTEMPTS: usize = 3;

/// Which server a guard runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Slotraft,
    Redis,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Slotraft => "slotraft",
            Kind::Redis => "redis",
        }
    }
}

/// A running server; stopped when dropped.
pub struct Server {
    pub kind: Kind,
    pub port: u16,
    child: Child,
    log: PathBuf,
    data_dir: PathBuf,
    stopped: bool,
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> Result<u16> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding 127.0.0.1:0")?;
    Ok(listener.local_addr()?.port())
}

impl Server {
    /// Starts a server of `kind` from `program` with persistence off, logging to a file in
    /// `work_dir`, and waits until it answers PING.
    pub fn start(kind: Kind, program: &Path, work_dir: &Path) -> Result<Server> {
        let mut last_error = None;
        for _ in 0..START_ATTEMPTS {
            match Self::start_once(kind, program, work_dir) {
                Ok(server) => return Ok(server),
                Err(error) => {
                    eprintln!("   {} did not start: {error:#}", kind.name());
                    last_error = Some(error);
                }
            }
        }
        Err(last_error.unwrap_or_else(|| anyhow::anyhow!("no attempt made")))
            .with_context(|| format!("starting {}", kind.name()))
    }

    fn start_once(kind: Kind, program: &Path, work_dir: &Path) -> Result<Server> {
        let port = free_port()?;
        let data_dir = work_dir.join(format!("{}-{port}", kind.name()));
        std::fs::create_dir_all(&data_dir)
            .with_context(|| format!("creating {}", data_dir.display()))?;
        let log = work_dir.join(format!("{}-{port}.log", kind.name()));
        let mut command = Command::new(program);
        let port_text = port.to_string();
        let dir_text = data_dir.to_string_lossy().into_owned();
        match kind {
            Kind::Slotraft => command.args([
                "node",
                "--port",
                &port_text,
                "--bind",
                "127.0.0.1",
                "--dir",
                &dir_text,
                "--save",
                "",
            ]),
            Kind::Redis => command.args([
                "--port",
                &port_text,
                "--bind",
                "127.0.0.1",
                "--dir",
                &dir_text,
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
            ]),
        };
        let log_file = File::create(&log).with_context(|| format!("creating {}", log.display()))?;
        command
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file);
        eprintln!("   $ {}", crate::tools::describe(&command));
        let child = command
            .spawn()
            .with_context(|| format!("cannot start {}", program.display()))?;
        let mut server = Server {
            kind,
            port,
            child,
            log,
            data_dir,
            stopped: false,
        };
        server.wait_ready()?;
        Ok(server)
    }

    /// Polls PING until the server answers, it exits, or [`STARTUP_TIMEOUT`] passes; then
    /// checks that the answering process is ours (`process_id` in `INFO server`).
    fn wait_ready(&mut self) -> Result<()> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "exited during startup ({status}); log {}:\n{}",
                    self.log.display(),
                    self.log_tail()
                );
            }
            if wire::ping(self.port, Duration::from_millis(500)).is_ok() {
                break;
            }
            if Instant::now() >= deadline {
                bail!(
                    "no PONG from 127.0.0.1:{} within {}s; log {}:\n{}",
                    self.port,
                    STARTUP_TIMEOUT.as_secs(),
                    self.log.display(),
                    self.log_tail()
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let mut conn = wire::Conn::connect(self.port, STARTUP_TIMEOUT)?;
        let info = wire::info(&mut conn, "server")?;
        match wire::info_field(&info, "process_id") {
            Some(pid) if pid != u64::from(self.child.id()) => bail!(
                "127.0.0.1:{} is answered by process {pid}, not ours ({})",
                self.port,
                self.child.id()
            ),
            _ => Ok(()),
        }
    }

    /// Whether the process is still running.
    pub fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// Stops the server: SIGTERM, up to [`STOP_TIMEOUT`] to exit, then SIGKILL.
    pub fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        if self.alive() {
            // std only sends SIGKILL; ask politely first through the shell's `kill`.
            let pid = self.child.id().to_string();
            let _ = Command::new("sh")
                .args(["-c", "kill -TERM \"$1\"", "sh", &pid])
                .stdin(Stdio::null())
                .status();
            let deadline = Instant::now() + STOP_TIMEOUT;
            while self.alive() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(50));
            }
            if self.alive() {
                eprintln!(
                    "   {} (pid {}) ignored SIGTERM for {}s; killing it",
                    self.kind.name(),
                    pid,
                    STOP_TIMEOUT.as_secs()
                );
                let _ = self.child.kill();
            }
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.data_dir);
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_that_exits_at_startup_is_reported() {
        let work_dir =
            std::env::temp_dir().join(format!("xtask-server-test-{}", std::process::id()));
        let error = Server::start(Kind::Redis, Path::new("/bin/false"), &work_dir)
            .err()
            .map(|error| format!("{error:#}"))
            .unwrap_or_default();
        let _ = std::fs::remove_dir_all(&work_dir);
        assert!(error.contains("exited during startup"), "{error}");
    }
}
