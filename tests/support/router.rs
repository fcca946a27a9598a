//! A running `slotraft router` on an ephemeral loopback port, killed on drop.

use super::{binary, Raw};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

pub struct Router {
    child: Child,
    pub port: u16,
}

impl Router {
    /// Starts a router with these seed addresses (`HOST:PORT`) and extra
    /// options, and waits until it accepts connections.
    pub fn start(seeds: &[String], options: &[&str]) -> Router {
        let mut child = Command::new(binary())
            .args(["router", "--port", "0", "--bind", "127.0.0.1", "--seeds"])
            .arg(seeds.join(","))
            .args(options)
            .env("SLOTRAFT_LOG", "info,openraft::core::raft_core=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start slotraft router");
        let stderr = child.stderr.take().expect("stderr piped");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut sender = Some(sender);
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if std::env::var_os("SLOTRAFT_TEST_LOG").is_some() {
                    eprintln!("[router] {line}");
                }
                if let Some(rest) = line.split("bound=").nth(1) {
                    if let Some(sender) = sender.take() {
                        let address = rest.split_whitespace().next().unwrap_or("").to_string();
                        let _ = sender.send(address);
                    }
                }
            }
        });
        let address = receiver
            .recv_timeout(Duration::from_secs(30))
            .expect("router did not report its address");
        let port = address
            .rsplit(':')
            .next()
            .and_then(|port| port.parse().ok())
            .expect("port in address");
        Router { child, port }
    }

    /// Waits (up to 30 s) until a write to each of the three default shards
    /// succeeds through the router: a freshly created cluster may still be
    /// electing its shard leaders, longer than the router's own retries last.
    /// The probe deletes keys that never exist, so it leaves no data behind.
    pub fn wait_serving(&self) {
        // Slots 2515, 8363 and 12182: one in each third of the slot space.
        let probes = ["foo{hash_tag}", "foo{}{bar}", "foo"];
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut connection = self.redis();
        for probe in probes {
            loop {
                let reply: redis::RedisResult<i64> =
                    redis::cmd("DEL").arg(probe).query(&mut connection);
                match reply {
                    Ok(_) => break,
                    Err(_) if std::time::Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    Err(error) => panic!("the router never served {probe}: {error}"),
                }
            }
        }
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// A plain (non-cluster) `redis` crate connection to the router.
    pub fn redis(&self) -> redis::Connection {
        let connection = redis::Client::open(self.url())
            .and_then(|client| client.get_connection())
            .expect("redis connection to the router");
        connection
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        connection
    }

    pub fn raw(&self) -> Raw {
        Raw::connect(self.port)
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
