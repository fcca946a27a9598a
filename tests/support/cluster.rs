//! A cluster of real `slotraft node` processes on loopback, formed with
//! `slotraft cluster create`.

use super::group::free_ports;
use super::{binary, ScratchDir};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct ClusterMember {
    pub port: u16,
    pub raft_port: u16,
    pub dir: ScratchDir,
    child: Option<Child>,
}

pub struct Cluster {
    pub members: Vec<ClusterMember>,
    options: Vec<String>,
}

impl Cluster {
    /// Starts `nodes` cluster-enabled nodes and forms a cluster of them with
    /// `create_options` (e.g. `--replicas 3`). `{index}` in a node option
    /// becomes the node's index (`--zone z{index}`).
    pub fn start(nodes: usize, create_options: &[&str], node_options: &[&str]) -> Cluster {
        let ports = free_ports(nodes * 2);
        let members = (0..nodes)
            .map(|index| ClusterMember {
                port: ports[index * 2],
                raft_port: ports[index * 2 + 1],
                dir: ScratchDir::new("cluster-node"),
                child: None,
            })
            .collect();
        let mut cluster = Cluster {
            members,
            options: node_options
                .iter()
                .map(|option| option.to_string())
                .collect(),
        };
        for index in 0..nodes {
            cluster.spawn(index);
        }
        let addresses: Vec<String> = cluster
            .members
            .iter()
            .map(|member| format!("127.0.0.1:{}", member.port))
            .collect();
        let output = Command::new(binary())
            .args(["cluster", "create"])
            .args(&addresses)
            .args(create_options)
            .output()
            .expect("run slotraft cluster create");
        assert!(
            output.status.success(),
            "cluster create failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        cluster
    }

    /// Starts member `index` (again) and waits until it accepts clients.
    pub fn spawn(&mut self, index: usize) {
        let member = &self.members[index];
        let mut child = Command::new(binary())
            .args(["node", "--bind", "127.0.0.1", "--cluster-enabled", "yes"])
            .args(["--port", &member.port.to_string()])
            .args(["--raft-port", &member.raft_port.to_string()])
            .arg("--dir")
            .arg(&member.dir.0)
            .args(
                self.options
                    .iter()
                    .map(|option| option.replace("{index}", &index.to_string())),
            )
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
            .expect("node did not start");
        self.members[index].child = Some(child);
    }

    /// Starts one more cluster-enabled node that belongs to no cluster yet
    /// (for `slotraft cluster add-node`); returns its index.
    pub fn spawn_extra(&mut self) -> usize {
        let ports = free_ports(2);
        self.members.push(ClusterMember {
            port: ports[0],
            raft_port: ports[1],
            dir: ScratchDir::new("cluster-node"),
            child: None,
        });
        let index = self.members.len() - 1;
        self.spawn(index);
        index
    }

    /// Waits for member `index` to exit by itself; true if it did in time.
    pub fn wait_exit(&mut self, index: usize, limit: Duration) -> bool {
        let deadline = std::time::Instant::now() + limit;
        while std::time::Instant::now() < deadline {
            if let Some(child) = self.members[index].child.as_mut() {
                if let Ok(Some(_)) = child.try_wait() {
                    self.members[index].child = None;
                    return true;
                }
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }

    /// Sends `signal` (`STOP`, `CONT` ...) to a running member's process.
    pub fn signal(&self, index: usize, signal: &str) {
        let child = self.members[index]
            .child
            .as_ref()
            .expect("member is running");
        super::send_signal(child.id(), signal);
    }

    /// SIGKILL: no shutdown, no flush.
    pub fn kill(&mut self, index: usize) {
        if let Some(mut child) = self.members[index].child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Runs `slotraft cluster reshard` through node 0, moving the first
    /// `slots` slots of shard `from` to shard `to`, and checks it succeeded.
    pub fn reshard(&self, from: u64, to: u64, slots: usize) {
        let output = Command::new(super::binary())
            .args(["cluster", "reshard"])
            .arg(format!("127.0.0.1:{}", self.members[0].port))
            .args(["--from", &from.to_string(), "--to", &to.to_string()])
            .args(["--slots", &slots.to_string()])
            .output()
            .expect("run slotraft cluster reshard");
        assert!(
            output.status.success(),
            "reshard failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    /// Member `index`'s client address, as the admin CLI takes it.
    pub fn address(&self, index: usize) -> String {
        format!("127.0.0.1:{}", self.members[index].port)
    }

    /// Member `index`'s node id (`SLOTRAFT NODE-INFO`), as the admin CLI
    /// names nodes.
    pub fn node_id(&self, index: usize) -> String {
        let mut connection = self.client(index);
        let (id, _name, _raft_port, _zone): (i64, String, i64, String) = redis::cmd("SLOTRAFT")
            .arg("NODE-INFO")
            .query(&mut connection)
            .expect("SLOTRAFT NODE-INFO");
        id.to_string()
    }

    pub fn url(&self, index: usize) -> String {
        format!("redis://127.0.0.1:{}/", self.members[index].port)
    }

    /// A plain connection to one node.
    pub fn client(&self, index: usize) -> redis::Connection {
        let client = redis::Client::open(self.url(index)).expect("client");
        let connection = client.get_connection().expect("connect");
        connection
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        connection
    }

    /// A cluster-aware connection (the `redis` crate's cluster client).
    pub fn cluster_client(&self) -> redis::cluster::ClusterConnection {
        let nodes: Vec<String> = (0..self.members.len())
            .filter(|index| self.members[*index].child.is_some())
            .map(|index| self.url(index))
            .collect();
        redis::cluster::ClusterClientBuilder::new(nodes)
            .retries(10)
            .build()
            .expect("cluster client")
            .get_connection()
            .expect("cluster connection")
    }
}

/// Runs `slotraft cluster <arguments>`, asserts it succeeded and returns
/// what it printed.
pub fn admin(arguments: &[&str]) -> String {
    let output = Command::new(binary())
        .arg("cluster")
        .args(arguments)
        .output()
        .expect("run slotraft cluster");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "slotraft cluster {arguments:?}:\n{text}"
    );
    text
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for index in 0..self.members.len() {
            self.kill(index);
        }
    }
}
