//! Real cluster clients against a real cluster: redis-py's `RedisCluster` and ioredis's
//! `Cluster` run the everyday scenarios of `tests/clients/scenario.{py,js}`, and keep
//! working when a shard's leader is killed under them. A plain redis-py client (no
//! cluster support) does the same through `slotraft router`.
//!
//! `cargo xtask ci` installs the pinned client libraries under `target/clients/` and
//! passes their locations in `SLOTRAFT_PYTHON`, `SLOTRAFT_PYTHONPATH`, `SLOTRAFT_NODE`
//! and `SLOTRAFT_NODE_PATH`; `cargo xtask tools` prints them for a plain
//! `cargo nextest run`. A missing variable fails the test, never skips it.
//!

use slotraft_tests::support::cluster::Cluster;
use slotraft_tests::support::router::Router;
use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The longest a whole scenario run may take.
const SCENARIO_TIMEOUT: Duration = Duration::from_secs(120);

/// How long the failover loop runs after the kill.
const FAILOVER_RUN_SECONDS: u32 = 7;

/// After the kill, every operation must succeed from this point on.
const FAILOVER_OUTAGE_MAX: Duration = Duration::from_secs(3);

#[derive(Clone, Copy)]
enum Client {
    RedisPy,
    Ioredis,
    /// redis-py's plain `redis.Redis`, through the router.
    RedisPyPlain,
}

impl Client {
    fn name(self) -> &'static str {
        match self {
            Client::RedisPy => "redis-py",
            Client::Ioredis => "ioredis",
            Client::RedisPyPlain => "redis-py plain through the router",
        }
    }

    /// The interpreter ready to run this client's scenario script with `arguments`.
    fn command(self, arguments: &[String]) -> Command {
        let (interpreter, library_path, library_variable, script) = match self {
            Client::RedisPy | Client::RedisPyPlain => (
                "SLOTRAFT_PYTHON",
                "SLOTRAFT_PYTHONPATH",
                "PYTHONPATH",
                "scenario.py",
            ),
            Client::Ioredis => (
                "SLOTRAFT_NODE",
                "SLOTRAFT_NODE_PATH",
                "NODE_PATH",
                "scenario.js",
            ),
        };
        let mut command = Command::new(required_variable(interpreter));
        command
            .arg(
                PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                    .join("clients")
                    .join(script),
            )
            .args(matches!(self, Client::RedisPyPlain).then_some("--plain"))
            .args(arguments)
            .env(library_variable, required_variable(library_path))
            .env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONUNBUFFERED", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        command
    }
}

fn required_variable(name: &str) -> PathBuf {
    match std::env::var_os(name) {
        Some(value) if !value.is_empty() => PathBuf::from(value),
        _ => panic!(
            "{name} is not set. The client suites need the pinned redis-py and ioredis: run \
             `cargo xtask ci`, or run `cargo xtask tools` and export the variables it prints"
        ),
    }
}

/// A running scenario script, its output lines arriving on a channel.
struct Script {
    client: Client,
    child: Child,
    lines: Receiver<String>,
    /// Everything the script printed so far, for failure messages.
    transcript: Vec<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Script {
    fn start(client: Client, arguments: &[String]) -> Script {
        let mut child = client
            .command(arguments)
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start the {} script: {error}", client.name()));
        let stdout = child.stdout.take().expect("stdout piped");
        let mut stderr_pipe = child.stderr.take().expect("stderr piped");
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr_pipe.read_to_string(&mut text);
            text
        });
        Script {
            client,
            child,
            lines,
            transcript: Vec::new(),
            stderr: Some(stderr),
        }
    }

    /// The next output line, `None` at the end of the output. Panics past `deadline`.
    fn next_line(&mut self, deadline: Instant) -> Option<String> {
        let left = deadline.saturating_duration_since(Instant::now());
        match self.lines.recv_timeout(left) {
            Ok(line) => {
                self.transcript.push(line.clone());
                Some(line)
            }
            Err(RecvTimeoutError::Disconnected) => None,
            Err(RecvTimeoutError::Timeout) => {
                let _ = self.child.kill();
                let report = self.report();
                panic!(
                    "the {} script ran out of time\n{report}",
                    self.client.name()
                );
            }
        }
    }

    /// Waits for the script to end (its output is already consumed) and returns whether
    /// it exited with success.
    fn finish(&mut self, deadline: Instant) -> bool {
        while self.next_line(deadline).is_some() {}
        loop {
            if let Some(status) = self.child.try_wait().expect("wait for the script") {
                return status.success();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let report = self.report();
                panic!("the {} script did not exit\n{report}", self.client.name());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The script's output so far, and its standard error once it has ended.
    fn report(&mut self) -> String {
        let _ = self.child.wait();
        let stderr = self
            .stderr
            .take()
            .and_then(|handle| handle.join().ok())
            .unwrap_or_default();
        format!(
            "--- {} stdout ---\n{}\n--- stderr ---\n{stderr}",
            self.client.name(),
            self.transcript.join("\n")
        )
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn startup_address(cluster: &Cluster) -> String {
    format!("127.0.0.1:{}", cluster.members[0].port)
}

/// Where `client` connects: a node for cluster clients; for a plain client, a
/// router started over the cluster (returned too, so it lives as long as the test).
fn entry_point(client: Client, cluster: &Cluster) -> (String, Option<Router>) {
    match client {
        Client::RedisPyPlain => {
            let seeds: Vec<String> = cluster
                .members
                .iter()
                .map(|member| format!("127.0.0.1:{}", member.port))
                .collect();
            let router = Router::start(&seeds, &[]);
            router.wait_serving();
            (format!("127.0.0.1:{}", router.port), Some(router))
        }
        _ => (startup_address(cluster), None),
    }
}

fn run_scenarios(client: Client) {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let (address, _router) = entry_point(client, &cluster);
    let mut script = Script::start(client, &[address]);
    let succeeded = script.finish(Instant::now() + SCENARIO_TIMEOUT);
    let report = script.report();
    assert!(
        succeeded,
        "the {} scenarios failed\n{report}",
        client.name()
    );
    // Every scenario reported, none was left out.
    for scenario in [
        "strings",
        "counters",
        "queue",
        "cart",
        "tags",
        "leaderboard",
        "spread",
        "crossslot",
        "transaction",
        "ratelimit",
    ] {
        assert!(
            script
                .transcript
                .iter()
                .any(|line| line.starts_with(&format!("ok {scenario} "))),
            "no `ok {scenario}` line\n{report}"
        );
    }
}

#[test]
fn redis_py_cluster_client_runs_the_scenarios() {
    run_scenarios(Client::RedisPy);
}

#[test]
fn redis_py_plain_client_runs_the_scenarios_through_the_router() {
    run_scenarios(Client::RedisPyPlain);
}

#[test]
fn ioredis_cluster_client_runs_the_scenarios() {
    run_scenarios(Client::Ioredis);
}

/// A shard as CLUSTER SLOTS shows it: its first range and its leader's port.
struct ShardView {
    first_slot: i64,
    last_slot: i64,
    leader_port: u16,
}

fn shard_views(connection: &mut redis::Connection) -> Vec<ShardView> {
    let ranges: Vec<redis::Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(connection)
        .expect("CLUSTER SLOTS");
    ranges
        .into_iter()
        .map(|range| {
            let redis::Value::Array(parts) = range else {
                panic!("a CLUSTER SLOTS range is an array: {range:?}")
            };
            let number = |value: &redis::Value| match value {
                redis::Value::Int(number) => *number,
                other => panic!("expected an integer, got {other:?}"),
            };
            let redis::Value::Array(leader) = &parts[2] else {
                panic!("a CLUSTER SLOTS node is an array: {parts:?}")
            };
            ShardView {
                first_slot: number(&parts[0]),
                last_slot: number(&parts[1]),
                leader_port: u16::try_from(number(&leader[1])).expect("a port"),
            }
        })
        .collect()
}

/// The numbers the failover loop prints on its `summary` line.
#[derive(Debug)]
struct Summary {
    ops: u64,
    errors: u64,
    last_error_seconds: Option<f64>,
    ok_after_last_error: u64,
    slowest_ok_seconds: f64,
}

fn parse_summary(line: &str) -> Summary {
    let field = |name: &str| {
        line.split_whitespace()
            .find_map(|word| word.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name}= in `{line}`"))
            .to_owned()
    };
    let number = |name: &str| {
        field(name)
            .parse::<u64>()
            .unwrap_or_else(|_| panic!("{name} is not a number in `{line}`"))
    };
    let last_error = field("last_error_s");
    Summary {
        ops: number("ops"),
        errors: number("errors"),
        last_error_seconds: (last_error != "none").then(|| {
            last_error
                .parse()
                .unwrap_or_else(|_| panic!("last_error_s is not a number in `{line}`"))
        }),
        ok_after_last_error: number("ok_after_last_error"),
        slowest_ok_seconds: field("slowest_ok_s")
            .parse()
            .unwrap_or_else(|_| panic!("slowest_ok_s is not a number in `{line}`")),
    }
}

/// Runs `client`'s SET/GET loop on one shard's keys, kills that shard's leader once the
/// loop is going, and checks that the client's own retries carry it through: errors stop
/// within [`FAILOVER_OUTAGE_MAX`] of the kill and every operation after that succeeds.
fn survive_a_killed_leader(client: Client) {
    let mut cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let startup_port = cluster.members[0].port;
    // A shard led by a node other than the startup node, so that the client keeps the
    // node it bootstrapped from and the test is about the failover alone.
    let views = shard_views(&mut cluster.client(0));
    let shard = views
        .iter()
        .find(|view| view.leader_port != startup_port)
        .expect("a shard led by another node");
    let (first_slot, last_slot, leader_port) =
        (shard.first_slot, shard.last_slot, shard.leader_port);
    let leader = cluster
        .members
        .iter()
        .position(|member| member.port == leader_port)
        .expect("the leader is a member");

    let (address, _router) = entry_point(client, &cluster);
    let mut script = Script::start(
        client,
        &[
            address,
            "failover".to_owned(),
            first_slot.to_string(),
            last_slot.to_string(),
            FAILOVER_RUN_SECONDS.to_string(),
        ],
    );
    let deadline = Instant::now() + SCENARIO_TIMEOUT;
    loop {
        match script.next_line(deadline) {
            Some(line) if line == "ready" => break,
            Some(_) => {}
            None => {
                let report = script.report();
                panic!(
                    "the {} script ended before `ready`\n{report}",
                    client.name()
                );
            }
        }
    }
    let ready = Instant::now();
    // Let the loop run against the healthy shard for a moment first.
    std::thread::sleep(Duration::from_millis(300));
    cluster.kill(leader);
    let killed_after = ready.elapsed().as_secs_f64();
    let succeeded = script.finish(deadline);
    let report = script.report();
    assert!(
        succeeded,
        "the {} failover loop failed\n{report}",
        client.name()
    );
    let summary = script
        .transcript
        .iter()
        .find(|line| line.starts_with("summary "))
        .map(|line| parse_summary(line))
        .unwrap_or_else(|| panic!("no summary line\n{report}"));
    eprintln!(
        "{}: leader of slots {first_slot}-{last_slot} killed {killed_after:.3}s after ready; \
         {summary:?}",
        client.name()
    );
    for line in script
        .transcript
        .iter()
        .filter(|line| line.starts_with("error "))
        .take(5)
    {
        eprintln!("  {line}");
    }
    assert!(summary.ops > 0, "{report}");
    if let Some(last_error) = summary.last_error_seconds {
        let outage = last_error - killed_after;
        assert!(
            outage <= FAILOVER_OUTAGE_MAX.as_secs_f64(),
            "{}: operations still failed {outage:.3}s after the kill ({} errors in {} \
             operations)\n{report}",
            client.name(),
            summary.errors,
            summary.ops
        );
    }
    // Retries may stretch an operation over the outage, but none hangs.
    assert!(
        summary.slowest_ok_seconds <= FAILOVER_OUTAGE_MAX.as_secs_f64() + 2.0,
        "an operation took {:.3}s: {summary:?}\n{report}",
        summary.slowest_ok_seconds
    );
    // The loop kept going after the outage: at least the last couple of seconds of it.
    assert!(
        summary.ok_after_last_error >= 20,
        "too few operations after the last error: {summary:?}\n{report}"
    );
    // The shard has a new leader.
    let survivor = (0..cluster.members.len())
        .find(|index| *index != leader)
        .expect("a survivor");
    let views = shard_views(&mut cluster.client(survivor));
    let now = views
        .iter()
        .find(|view| view.first_slot == first_slot)
        .expect("the shard is still served");
    assert_ne!(
        now.leader_port, leader_port,
        "CLUSTER SLOTS still shows the dead leader"
    );
}

#[test]
fn redis_py_cluster_client_survives_a_killed_shard_leader() {
    survive_a_killed_leader(Client::RedisPy);
}

#[test]
fn ioredis_cluster_client_survives_a_killed_shard_leader() {
    survive_a_killed_leader(Client::Ioredis);
}

#[test]
fn redis_py_plain_client_survives_a_killed_shard_leader_through_the_router() {
    survive_a_killed_leader(Client::RedisPyPlain);
}

/// The plain client's SET/GET loop runs on the slots a reshard moves: through the
/// router, the migration is invisible (no error at all, every read consistent).
#[test]
fn redis_py_plain_client_sees_no_error_during_a_reshard_through_the_router() {
    let client = Client::RedisPyPlain;
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let (address, _router) = entry_point(client, &cluster);
    // `reshard --from 1 --to 2 --slots 16` moves shard 1's first 16 slots.
    let mut script = Script::start(
        client,
        &[
            address,
            "failover".to_owned(),
            "0".to_owned(),
            "15".to_owned(),
            "4".to_owned(),
        ],
    );
    let deadline = Instant::now() + SCENARIO_TIMEOUT;
    loop {
        match script.next_line(deadline) {
            Some(line) if line == "ready" => break,
            Some(_) => {}
            None => panic!("the script ended before `ready`\n{}", script.report()),
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    let output = Command::new(slotraft_tests::support::binary())
        .args(["cluster", "reshard", &startup_address(&cluster)])
        .args(["--from", "1", "--to", "2", "--slots", "16"])
        .output()
        .expect("run slotraft cluster reshard");
    assert!(output.status.success(), "reshard failed: {output:?}");
    let succeeded = script.finish(deadline);
    let report = script.report();
    assert!(succeeded, "the loop failed\n{report}");
    let summary = script
        .transcript
        .iter()
        .find(|line| line.starts_with("summary "))
        .map(|line| parse_summary(line))
        .unwrap_or_else(|| panic!("no summary line\n{report}"));
    assert!(summary.ops > 100, "{summary:?}\n{report}");
    assert_eq!(summary.errors, 0, "errors during the reshard\n{report}");
}
