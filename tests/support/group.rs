//! A replicated shard of real `slotraft node` processes on loopback.

use super::{binary, ScratchDir};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Ports that were free a moment ago, taken below the kernel's ephemeral
/// range (32768 and up on Linux). A port the kernel hands out as ephemeral
/// and that is then released can be taken again at once as the local port of
/// any outgoing connection, and under a full test run there are thousands:
/// a node then failed to bind its port. Below the range only another test
/// choosing the same port can collide; the start is random and each port is
/// checked by binding it, and the ports of one call stay bound until all are
/// found.
pub fn free_ports(count: usize) -> Vec<u16> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static CALLS: AtomicU64 = AtomicU64::new(0);
    // 10000-19999: `slotraft dev`'s test takes its runs of ports from
    // 20000-31999, so the two never pick the same port.
    const LOW: u64 = 10_000;
    const SPAN: u64 = 10_000;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|elapsed| elapsed.subsec_nanos() as u64)
        .unwrap_or(0);
    let mut state = nanos
        ^ (u64::from(std::process::id()) << 20)
        ^ CALLS
            .fetch_add(1, Ordering::Relaxed)
            .wrapping_mul(0x9e37_79b9_7f4a_7c15);
    let mut listeners = Vec::with_capacity(count);
    for _ in 0..SPAN {
        if listeners.len() == count {
            break;
        }
        // xorshift: spreads concurrent callers over the whole span.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let port = (LOW + state % SPAN) as u16;
        if let Ok(listener) = TcpListener::bind(("127.0.0.1", port)) {
            listeners.push(listener);
        }
    }
    assert_eq!(
        listeners.len(),
        count,
        "no free ports below the ephemeral range"
    );
    listeners
        .iter()
        .map(|listener| listener.local_addr().expect("address").port())
        .collect()
}

/// One replica's fixed identity: id, ports, data directory.
pub struct Member {
    pub id: u64,
    pub port: u16,
    pub raft_port: u16,
    pub dir: ScratchDir,
    child: Option<Child>,
}

/// A replicated shard whose members can be killed and restarted.
pub struct Group {
    pub members: Vec<Member>,
    options: Vec<String>,
}

impl Group {
    /// Starts `size` replicas with extra `--name value` options and waits for a
    /// leader.
    pub fn start(size: usize, options: &[&str]) -> Group {
        let ports = free_ports(size * 2);
        let members: Vec<Member> = (0..size)
            .map(|index| Member {
                id: index as u64 + 1,
                port: ports[index * 2],
                raft_port: ports[index * 2 + 1],
                dir: ScratchDir::new("replica"),
                child: None,
            })
            .collect();
        let mut group = Group {
            members,
            options: options.iter().map(|option| option.to_string()).collect(),
        };
        for index in 0..size {
            group.spawn(index);
        }
        group.wait_leader(Duration::from_secs(20));
        group
    }

    fn members_option(&self) -> String {
        self.members
            .iter()
            .map(|member| {
                format!(
                    "{}=127.0.0.1:{}@{}",
                    member.id, member.port, member.raft_port
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Starts member `index` (again) with its own directory and ports, and waits
    /// until it accepts clients.
    pub fn spawn(&mut self, index: usize) {
        let members = self.members_option();
        let member = &self.members[index];
        let mut child = Command::new(binary())
            .args(["node", "--bind", "127.0.0.1"])
            .args(["--port", &member.port.to_string()])
            .args(["--raft-port", &member.raft_port.to_string()])
            .args(["--node-id", &member.id.to_string()])
            .args(["--group-members", &members])
            .arg("--dir")
            .arg(&member.dir.0)
            .args(&self.options)
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
                if std::env::var_os("SLOTRAFT_TEST_LOG").is_some() {
                    eprintln!("[node] {line}");
                }
                if line.contains("bound=") {
                    if let Some(sender) = sender.take() {
                        let _ = sender.send(());
                    }
                }
            }
        });
        receiver
            .recv_timeout(Duration::from_secs(30))
            .expect("replica did not start");
        self.members[index].child = Some(child);
    }

    /// SIGKILL: no shutdown, no flush.
    pub fn kill(&mut self, index: usize) {
        if let Some(mut child) = self.members[index].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends `signal` (`STOP`, `CONT` ...) to a running member's process.
    pub fn signal(&self, index: usize, signal: &str) {
        let child = self.members[index]
            .child
            .as_ref()
            .expect("member is running");
        super::send_signal(child.id(), signal);
    }

    pub fn is_running(&self, index: usize) -> bool {
        self.members[index].child.is_some()
    }

    pub fn client(&self, index: usize) -> redis::Connection {
        let url = format!("redis://127.0.0.1:{}/", self.members[index].port);
        let connection = redis::Client::open(url)
            .and_then(|client| client.get_connection())
            .expect("redis connection");
        connection
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        connection
    }

    /// One field of INFO replication of member `index`, if it answers.
    pub fn info_field(&self, index: usize, field: &str) -> Option<String> {
        if !self.is_running(index) {
            return None;
        }
        let url = format!("redis://127.0.0.1:{}/", self.members[index].port);
        let mut connection = redis::Client::open(url).ok()?.get_connection().ok()?;
        let info: String = redis::cmd("INFO")
            .arg("replication")
            .query(&mut connection)
            .ok()?;
        info.lines()
            .find_map(|line| line.strip_prefix(&format!("{field}:")))
            .map(|value| value.trim().to_string())
    }

    /// The index of the member that says it leads, waiting up to `limit`.
    pub fn wait_leader(&self, limit: Duration) -> usize {
        let deadline = Instant::now() + limit;
        loop {
            for index in 0..self.members.len() {
                if self.info_field(index, "role").as_deref() == Some("master") {
                    return index;
                }
            }
            assert!(Instant::now() < deadline, "no leader elected in {limit:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Waits until every running member has applied at least `index`.
    pub fn wait_applied(&self, index: u64, limit: Duration) {
        let deadline = Instant::now() + limit;
        for member in 0..self.members.len() {
            if !self.is_running(member) {
                continue;
            }
            loop {
                let applied = self
                    .info_field(member, "raft_last_applied")
                    .and_then(|value| value.parse::<u64>().ok())
                    .unwrap_or(0);
                if applied >= index {
                    break;
                }
                assert!(
                    Instant::now() < deadline,
                    "member {member} applied only {applied} of {index}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// Waits until every running member has applied what member `leader`
    /// has, then asserts that all of them hold the same state (DEBUG DIGEST).
    /// The digests are taken one member after another while the group may
    /// still apply entries (the leader's own, such as an expiry round), so
    /// a difference is looked at again until `limit`: members that hold
    /// different states at one applied index never agree.
    pub fn assert_replicas_agree(&self, leader: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let applied: u64 = self
                .info_field(leader, "raft_last_applied")
                .and_then(|value| value.parse().ok())
                .expect("raft_last_applied");
            self.wait_applied(applied, limit);
            let running: Vec<usize> = (0..self.members.len())
                .filter(|index| self.is_running(*index))
                .collect();
            let digests: Vec<String> = running.iter().map(|index| self.digest(*index)).collect();
            if digests.iter().all(|digest| digest == &digests[0]) {
                return;
            }
            if Instant::now() >= deadline {
                let states: Vec<String> = running
                    .iter()
                    .zip(&digests)
                    .map(|(index, digest)| {
                        let applied = self.info_field(*index, "raft_last_applied");
                        let keys: Vec<String> = redis::cmd("KEYS")
                            .arg("*")
                            .query(&mut self.client(*index))
                            .unwrap_or_default();
                        format!(
                            "member {index}: digest {digest}, applied {applied:?}, keys {keys:?}"
                        )
                    })
                    .collect();
                panic!("replicas disagree:\n{}", states.join("\n"));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// DEBUG DIGEST of member `index`.
    pub fn digest(&self, index: usize) -> String {
        redis::cmd("DEBUG")
            .arg("DIGEST")
            .query(&mut self.client(index))
            .expect("DEBUG DIGEST")
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        for index in 0..self.members.len() {
            self.kill(index);
        }
    }
}
