//! Servers started for the benchmark: slotraft, redis-server and slotraft replicas on
//! 127.0.0.1 ports, each owned by a guard that stops it (SIGTERM, then SIGKILL) when
//! dropped, including on errors.

use crate::wire;
use anyhow::{bail, Context as _, Result};
use std::fs::OpenOptions;
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

/// Which standalone server [`Server::start`] runs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// slotraft with persistence off.
    Slotraft,
    /// redis-server with persistence off.
    Redis,
    /// redis-server with an append-only file fsync'd before every reply.
    RedisAofAlways,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Slotraft => "slotraft",
            Kind::Redis => "redis",
            Kind::RedisAofAlways => "redis-aof-always",
        }
    }

    /// The command-line arguments of a server of this kind on `port` with data in `dir`.
    fn args(self, port: u16, dir: &str) -> Vec<String> {
        let port = port.to_string();
        let common = [
            "--port",
            &port,
            "--bind",
            "127.0.0.1",
            "--dir",
            dir,
            "--save",
            "",
        ];
        let extra: &[&str] = match self {
            Kind::Slotraft => &[],
            Kind::Redis => &["--appendonly", "no", "--daemonize", "no"],
            Kind::RedisAofAlways => &[
                "--appendonly",
                "yes",
                "--appendfsync",
                "always",
                "--daemonize",
                "no",
            ],
        };
        let node: &[&str] = if self == Kind::Slotraft {
            &["node"]
        } else {
            &[]
        };
        node.iter()
            .chain(common.iter())
            .chain(extra.iter())
            .map(|arg| (*arg).to_owned())
            .collect()
    }
}

/// Everything needed to (re)start one server process.
#[derive(Clone, Debug)]
pub struct Launch {
    /// Used in messages and report notes.
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The client port the server listens on (also named in `args`).
    pub port: u16,
    pub data_dir: PathBuf,
    /// Output is appended here, so a restarted server keeps its earlier log.
    pub log: PathBuf,
    /// Whether stopping the server deletes `data_dir` (not for a replica that will be
    /// restarted on its data).
    pub owns_data: bool,
    /// Whether start-up checks that INFO names this process (not for a proxy).
    pub check_process: bool,
}

/// A running server; stopped when dropped.
pub struct Server {
    pub name: String,
    pub port: u16,
    child: Child,
    log: PathBuf,
    data_dir: PathBuf,
    owns_data: bool,
    stopped: bool,
}

/// A port on 127.0.0.1 that was free a moment ago.
pub fn free_port() -> Result<u16> {
    Ok(free_ports(1)?[0])
}

/// `count` distinct ports on 127.0.0.1 that were free a moment ago (all bound at once, then
/// released).
pub fn free_ports(count: usize) -> Result<Vec<u16>> {
    let listeners = (0..count)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).context("binding 127.0.0.1:0"))
        .collect::<Result<Vec<_>>>()?;
    listeners
        .iter()
        .map(|listener| Ok(listener.local_addr()?.port()))
        .collect()
}

impl Server {
    /// Starts a standalone server of `kind` from `program` on a free port, with its data
    /// directory and log in `work_dir`, and waits until it answers PING.
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
        let launch = Launch {
            name: kind.name().to_owned(),
            program: program.to_path_buf(),
            args: kind.args(port, &data_dir.to_string_lossy()),
            port,
            log: work_dir.join(format!("{}-{port}.log", kind.name())),
            data_dir,
            owns_data: true,
            check_process: true,
        };
        Self::launch(&launch)
    }

    /// Starts the process `launch` describes and waits until it answers PING.
    pub fn launch(launch: &Launch) -> Result<Server> {
        std::fs::create_dir_all(&launch.data_dir)
            .with_context(|| format!("creating {}", launch.data_dir.display()))?;
        let log_file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&launch.log)
            .with_context(|| format!("opening {}", launch.log.display()))?;
        let mut command = Command::new(&launch.program);
        command
            .args(&launch.args)
            .stdin(Stdio::null())
            .stdout(log_file.try_clone()?)
            .stderr(log_file);
        eprintln!("   $ {}", crate::tools::describe(&command));
        let child = command
            .spawn()
            .with_context(|| format!("cannot start {}", launch.program.display()))?;
        let mut server = Server {
            name: launch.name.clone(),
            port: launch.port,
            child,
            log: launch.log.clone(),
            data_dir: launch.data_dir.clone(),
            owns_data: launch.owns_data,
            stopped: false,
        };
        server.wait_ready(launch.check_process)?;
        Ok(server)
    }

    /// Polls PING until the server answers, it exits, or [`STARTUP_TIMEOUT`] passes; then
    /// checks that the answering process is ours (`process_id` in `INFO server`).
    fn wait_ready(&mut self, check_process: bool) -> Result<()> {
        let deadline = Instant::now() + STARTUP_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait()? {
                bail!(
                    "{} exited during startup ({status}); log {}:\n{}",
                    self.name,
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
        if !check_process {
            return Ok(());
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

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
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
                    self.name,
                    pid,
                    STOP_TIMEOUT.as_secs()
                );
                let _ = self.child.kill();
            }
        }
        self.reap();
    }

    /// SIGKILL, no shutdown: returns the moment the signal was sent.
    pub fn kill(&mut self) -> Instant {
        let killed_at = Instant::now();
        if !self.stopped {
            let _ = self.child.kill();
        }
        self.reap();
        killed_at
    }

    /// Waits for the exited process and removes its data directory if it owns it.
    fn reap(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        let _ = self.child.wait();
        if self.owns_data {
            let _ = std::fs::remove_dir_all(&self.data_dir);
        }
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

    #[test]
    fn standalone_arguments() {
        let joined = |kind: Kind| kind.args(7000, "/d").join(" ");
        assert_eq!(
            joined(Kind::Slotraft),
            "node --port 7000 --bind 127.0.0.1 --dir /d --save "
        );
        assert!(joined(Kind::Redis).starts_with("--port 7000 "));
        assert!(joined(Kind::Redis).contains("--appendonly no"));
        let aof = joined(Kind::RedisAofAlways);
        assert!(
            aof.contains("--appendonly yes --appendfsync always"),
            "{aof}"
        );
    }

    #[test]
    fn free_ports_are_distinct() {
        let mut ports = free_ports(6).unwrap_or_default();
        ports.sort_unstable();
        ports.dedup();
        assert_eq!(ports.len(), 6);
    }
}
