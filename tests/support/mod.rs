//! Test servers and raw RESP conversations.

pub mod cluster;
pub mod fuzz;
pub mod group;
pub mod router;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The `slotraft` binary built next to the running test.
pub fn binary() -> PathBuf {
    if let Some(path) = std::env::var_os("SLOTRAFT_BIN") {
        return PathBuf::from(path);
    }
    let mut directory = std::env::current_exe().expect("test executable path");
    directory.pop();
    if directory.ends_with("deps") {
        directory.pop();
    }
    let path = directory.join("slotraft");
    assert!(
        path.exists(),
        "{} is missing: build it first (cargo build -p node)",
        path.display()
    );
    path
}

/// A private scratch directory, removed on drop.
pub struct ScratchDir(pub PathBuf);

impl ScratchDir {
    pub fn new(label: &str) -> ScratchDir {
        static COUNTER: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "slotraft-test-{label}-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create scratch dir");
        ScratchDir(path)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A running `slotraft node`, killed on drop.
pub struct Server {
    child: Child,
    pub port: u16,
    pub dir: ScratchDir,
}

impl Server {
    /// Starts a standalone node on an ephemeral loopback port with extra
    /// `--name value` options, and waits until it accepts connections.
    pub fn start(options: &[&str]) -> Server {
        Server::start_in(ScratchDir::new("node"), options)
    }

    /// Starts a standalone node on `dir` (a restart when an earlier node used
    /// it).
    pub fn start_in(dir: ScratchDir, options: &[&str]) -> Server {
        let mut child = Command::new(binary())
            .args(["node", "--port", "0", "--bind", "127.0.0.1", "--dir"])
            .arg(&dir.0)
            .args(options)
            .env("SLOTRAFT_LOG", "info,openraft::core::raft_core=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start slotraft");
        let stderr = child.stderr.take().expect("stderr piped");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sender = Some(sender);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(address) = line.split("bound=").nth(1) {
                    if let Some(sender) = sender.take() {
                        let _ = sender.send(address.trim().to_string());
                    }
                }
            }
        });
        let address = receiver
            .recv_timeout(Duration::from_secs(20))
            .expect("server did not report its address");
        let port = address
            .rsplit(':')
            .next()
            .and_then(|port| port.parse().ok())
            .expect("port in address");
        Server { child, port, dir }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    pub fn connect(&self) -> Raw {
        Raw::connect(self.port)
    }

    pub fn redis(&self) -> redis::Connection {
        redis::Client::open(self.url())
            .and_then(|client| client.get_connection())
            .expect("redis connection")
    }

    /// Waits for the process to exit on its own; returns whether it did in time.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits until INFO reports `count` blocked clients.
    pub fn wait_blocked(&self, count: usize) {
        let mut client = self.connect();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            client.command(&[b"INFO", b"clients"]);
            let info = client.read_frame();
            let text =
                String::from_utf8_lossy(info.as_bytes().expect("INFO is a bulk")).into_owned();
            if text.contains(&format!("blocked_clients:{count}\r\n")) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "blocked_clients never reached {count}: {text}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `arguments` on a new connection and waits until the server
    /// counts `count` blocked clients; the connection waits for its reply.
    pub fn blocked(&self, arguments: &[&str], count: usize) -> Raw {
        let mut client = self.connect();
        let arguments: Vec<&[u8]> = arguments
            .iter()
            .map(|argument| argument.as_bytes())
            .collect();
        client.command(&arguments);
        self.wait_blocked(count);
        client
    }

    /// Ends the process (SIGKILL if it still runs) and keeps its directory,
    /// for a restart with [`Server::start_in`].
    pub fn into_dir(mut self) -> ScratchDir {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::mem::replace(&mut self.dir, ScratchDir(PathBuf::new()))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A raw RESP conversation: send bytes, read exact replies.
pub struct Raw {
    pub stream: TcpStream,
}

impl Raw {
    pub fn connect(port: u16) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        Raw { stream }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write");
    }

    /// Encodes a command as a multibulk request and sends it.
    pub fn command(&mut self, arguments: &[&[u8]]) {
        let mut wire = format!("*{}\r\n", arguments.len()).into_bytes();
        for argument in arguments {
            wire.extend(format!("${}\r\n", argument.len()).into_bytes());
            wire.extend_from_slice(argument);
            wire.extend_from_slice(b"\r\n");
        }
        self.send(&wire);
    }

    /// Reads exactly `expected.len()` bytes and asserts they equal `expected`.
    pub fn expect(&mut self, expected: &[u8]) {
        let mut got = vec![0u8; expected.len()];
        self.stream.read_exact(&mut got).unwrap_or_else(|error| {
            panic!("reading {:?}: {error}", String::from_utf8_lossy(expected))
        });
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(expected)
        );
    }

    /// Sends a command and checks the exact reply bytes.
    pub fn roundtrip(&mut self, arguments: &[&str], expected: &str) {
        let arguments: Vec<&[u8]> = arguments
            .iter()
            .map(|argument| argument.as_bytes())
            .collect();
        self.command(&arguments);
        self.expect(expected.as_bytes());
    }

    /// Reads one whole reply frame.
    pub fn read_frame(&mut self) -> resp::Frame {
        let mut buffer = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            if let Ok(Some((frame, _))) = resp::parse_reply(&buffer) {
                return frame;
            }
            let count = self.stream.read(&mut chunk).expect("read reply");
            assert!(count > 0, "connection closed before a whole reply");
            buffer.extend_from_slice(&chunk[..count]);
        }
    }

    /// Reads `count` lines (without their CRLF), a byte at a time so that
    /// nothing after them is consumed.
    pub fn read_lines(&mut self, count: usize) -> Vec<String> {
        let mut lines = Vec::with_capacity(count);
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while lines.len() < count {
            self.stream.read_exact(&mut byte).expect("read a line");
            line.push(byte[0]);
            if line.ends_with(b"\r\n") {
                line.truncate(line.len() - 2);
                lines.push(String::from_utf8_lossy(&line).into_owned());
                line.clear();
            }
        }
        lines
    }

    /// True when the server closed the connection (reads end of stream).
    pub fn is_closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.stream.read(&mut byte), Ok(0) | Err(_))
    }
}

/// Sends `signal` (`STOP`, `CONT` ...) to process `pid`.
/// A connection that keeps apart the out-of-band messages it receives (pushes, or `message` arrays on a RESP2 subscriber),
/// each as the exact bytes the server sent.
pub struct Peer {
    pub raw: Raw,
    buffer: Vec<u8>,
    pub pushes: Vec<String>,
}

impl Peer {
    pub fn connect(port: u16) -> Peer {
        Peer {
            raw: Raw::connect(port),
            buffer: Vec::new(),
            pushes: Vec::new(),
        }
    }

    /// The next whole frame, and its exact bytes.
    pub fn next_frame(&mut self) -> (resp::Frame, String) {
        let mut chunk = [0u8; 4096];
        loop {
            if let Ok(Some((frame, used))) = resp::parse_reply(&self.buffer) {
                let wire = String::from_utf8_lossy(&self.buffer[..used]).into_owned();
                self.buffer.drain(..used);
                return (frame, wire);
            }
            let count = self.raw.stream.read(&mut chunk).expect("read");
            assert!(count > 0, "connection closed");
            self.buffer.extend_from_slice(&chunk[..count]);
        }
    }

    /// Sends a command and returns its reply, setting messages aside.
    pub fn call(&mut self, arguments: &[&str]) -> String {
        let arguments: Vec<&[u8]> = arguments.iter().map(|a| a.as_bytes()).collect();
        self.raw.command(&arguments);
        loop {
            let (frame, wire) = self.next_frame();
            let message = match &frame {
                resp::Frame::Push(_) => true,
                resp::Frame::Array(items) => {
                    matches!(items.first(), Some(resp::Frame::Bulk(kind)) if &kind[..] == b"message")
                }
                _ => false,
            };
            if message {
                self.pushes.push(wire);
            } else {
                return wire;
            }
        }
    }

    /// Everything sent to this connection so far: two PINGs, since a
    /// message queued before the first one comes no later than its reply.
    pub fn settle(&mut self) {
        self.call(&["PING"]);
        self.call(&["PING"]);
    }
}

pub fn send_signal(pid: u32, signal: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(status.success(), "kill -{signal} failed");
}

/// Runs `script` through redis-cli (Debian's redis-tools, installed by `cargo xtask
/// ci`) against `port` and returns what it printed. Without a terminal redis-cli
/// prints raw values, an empty line for nil, and an empty line after each error.
pub fn redis_cli(port: u16, script: &str) -> String {
    let mut child = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("redis-cli is installed (cargo xtask ci installs redis-tools)");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(script.as_bytes())
        .expect("write script");
    let output = child.wait_with_output().expect("redis-cli output");
    assert!(output.status.success(), "redis-cli failed: {output:?}");
    String::from_utf8(output.stdout).expect("utf-8 output")
}

/// Runs the redis-cli `script` against a real redis-server and against
/// `port`, and asserts both printed the same lines.
pub fn assert_cli_output_matches_redis(port: u16, script: &str) {
    let redis = RedisServer::start();
    let expected = redis_cli(redis.port, script);
    let actual = redis_cli(port, script);
    assert!(
        expected.lines().count() > script.lines().count(),
        "redis output too short: {expected}"
    );
    for (line, (theirs, ours)) in expected.lines().zip(actual.lines()).enumerate() {
        assert_eq!(
            ours, theirs,
            "output line {line} differs\nredis:\n{expected}\nours:\n{actual}"
        );
    }
    assert_eq!(actual.lines().count(), expected.lines().count(), "{actual}");
}

/// A real redis-server on a free loopback port (no persistence), stopped on drop;
/// installed by `cargo xtask ci`.
pub struct RedisServer {
    child: Child,
    pub port: u16,
    _dir: ScratchDir,
}

impl RedisServer {
    pub fn start() -> RedisServer {
        let dir = ScratchDir::new("redis");
        let port = group::free_ports(1)[0];
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(&dir.0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed (cargo xtask ci installs it)");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        RedisServer {
            child,
            port,
            _dir: dir,
        }
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
