//! The deployment files in `deploy/` run as written. Each one's slotraft
//! command lines (the single-line `command: [...]` / `args: [...]` lists,
//! arguments of the image's `slotraft` entrypoint) are read from the file,
//! given loopback addresses, free ports and scratch directories in place of
//! the container's, and run: the nodes start, the creation forms a cluster,
//! running the creation again (a restarted job) succeeds and changes
//! nothing, `slotraft cluster check` passes, and a plain client is served
//! through the router. Every other argument (flags, counts, options) is the
//! file's own, so a manifest naming an option the binary does not know, or
//! addresses that disagree with the nodes' ports, fails here.

use slotraft_tests::support::cluster::{admin, Cluster};
use slotraft_tests::support::group::free_ports;
use slotraft_tests::support::{binary, ScratchDir};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn deploy_file(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../deploy")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The lists written `KEY: ["a", "b", ...]` on one line for each of `keys`:
/// YAML flow sequences (and Dockerfile exec forms) of plain double-quoted
/// strings.
fn flow_lists(text: &str, keys: &[&str]) -> Vec<Vec<String>> {
    let mut lists = Vec::new();
    for line in text.lines() {
        let line = line.trim_start().trim_start_matches("- ");
        let Some(rest) = keys.iter().find_map(|key| {
            line.strip_prefix(key)
                .and_then(|rest| rest.strip_prefix(' '))
        }) else {
            continue;
        };
        let Some(inner) = rest
            .trim()
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        else {
            continue;
        };
        assert!(!inner.contains('\\'), "escapes are not expected: {line}");
        // Quoted strings separated by commas (which may also appear inside
        // a string, as in a list of seeds).
        let mut items = Vec::new();
        let mut rest = inner.trim();
        while !rest.is_empty() {
            let quoted = rest
                .strip_prefix('"')
                .unwrap_or_else(|| panic!("not a quoted string at `{rest}` in {line}"));
            let end = quoted
                .find('"')
                .unwrap_or_else(|| panic!("unterminated string in {line}"));
            items.push(quoted[..end].to_string());
            rest = quoted[end + 1..].trim_start();
            rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
        }
        lists.push(items);
    }
    lists
}

/// The one list whose first word is `first`.
fn the_list(lists: &[Vec<String>], first: &str, file: &str) -> Vec<String> {
    let found: Vec<&Vec<String>> = lists.iter().filter(|list| list[0] == first).collect();
    assert_eq!(
        found.len(),
        1,
        "{file}: expected one `{first}` command, found {found:?}"
    );
    found[0].clone()
}

/// The value after `--name` in `arguments`.
fn option<'a>(arguments: &'a [String], name: &str) -> &'a str {
    let flag = format!("--{name}");
    let at = arguments
        .iter()
        .position(|argument| *argument == flag)
        .unwrap_or_else(|| panic!("no {flag} in {arguments:?}"));
    arguments
        .get(at + 1)
        .unwrap_or_else(|| panic!("{flag} without a value in {arguments:?}"))
}

/// `arguments` with the value after `--name` replaced by `value`.
fn with_option(arguments: &[String], name: &str, value: &str) -> Vec<String> {
    let flag = format!("--{name}");
    let at = arguments
        .iter()
        .position(|argument| *argument == flag)
        .unwrap_or_else(|| panic!("no {flag} in {arguments:?}"));
    let mut changed = arguments.to_vec();
    changed[at + 1] = value.to_string();
    changed
}

/// The positional arguments of `slotraft cluster create` (the nodes'
/// addresses): every word after `cluster create` that is neither a flag nor
/// a flag's value.
fn create_addresses(arguments: &[String]) -> Vec<String> {
    let mut addresses = Vec::new();
    let mut words = arguments.iter().skip(2);
    while let Some(word) = words.next() {
        if word.starts_with("--") {
            words.next();
        } else {
            addresses.push(word.clone());
        }
    }
    addresses
}

/// A process killed when dropped.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(arguments: &[String]) -> Running {
    Running(
        Command::new(binary())
            .args(arguments)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|error| panic!("slotraft {arguments:?}: {error}")),
    )
}

fn run(arguments: &[String]) -> Output {
    Command::new(binary())
        .args(arguments)
        .output()
        .unwrap_or_else(|error| panic!("slotraft {arguments:?}: {error}"))
}

fn text(output: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    )
}

/// Polls `attempt` until it returns `Some`, for up to `limit`.
fn eventually<T>(limit: Duration, what: &str, mut attempt: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(value) = attempt() {
            return value;
        }
        assert!(Instant::now() < deadline, "{what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn connect(port: u16) -> Option<redis::Connection> {
    let connection = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .ok()?
        .get_connection_with_timeout(Duration::from_secs(2))
        .ok()?;
    connection
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    Some(connection)
}

fn pong(port: u16) -> Option<()> {
    let mut connection = connect(port)?;
    let reply: String = redis::cmd("PING").query(&mut connection).ok()?;
    (reply == "PONG").then_some(())
}

/// Runs one deployment file's node, creation and router command lines on
/// loopback, as described at the top of this file.
fn deploys_and_serves(file: &str, keys: &[&str]) {
    let lists = flow_lists(&deploy_file(file), keys);
    let node = the_list(&lists, "node", file);
    let create = the_list(&lists, "cluster", file);
    let router = the_list(&lists, "router", file);
    assert_eq!(create[1], "create", "{file}: {create:?}");
    assert_eq!(option(&node, "cluster-enabled"), "yes", "{file}: {node:?}");
    let node_port = option(&node, "port").to_string();

    // Each address the file names is one node, on the port the nodes use.
    let named = create_addresses(&create);
    assert!(named.len() >= 3, "{file}: the creation names {named:?}");
    let ports = free_ports(named.len() * 3);
    let mut loopback = BTreeMap::new();
    let mut nodes = Vec::new();
    let mut dirs = Vec::new();
    for (index, address) in named.iter().enumerate() {
        let (_, port) = address
            .rsplit_once(':')
            .unwrap_or_else(|| panic!("{file}: {address} is not HOST:PORT"));
        assert_eq!(
            port, node_port,
            "{file}: {address} is not on the nodes' port"
        );
        let (port, raft_port) = (ports[index * 2], ports[index * 2 + 1]);
        loopback.insert(address.clone(), format!("127.0.0.1:{port}"));
        let dir = ScratchDir::new("deploy-node");
        let mut arguments = with_option(&node, "bind", "127.0.0.1");
        arguments = with_option(&arguments, "port", &port.to_string());
        arguments = with_option(&arguments, "raft-port", &raft_port.to_string());
        arguments = with_option(&arguments, "dir", &dir.0.to_string_lossy());
        nodes.push(spawn(&arguments));
        dirs.push(dir);
    }
    for (index, node) in nodes.iter_mut().enumerate() {
        let port = ports[index * 2];
        eventually(Duration::from_secs(30), "a node answering PING", || {
            if let Ok(Some(status)) = node.0.try_wait() {
                panic!("{file}: the node exited ({status}); its arguments are wrong?");
            }
            pong(port)
        });
    }

    let create: Vec<String> = create
        .iter()
        .map(|word| loopback.get(word).cloned().unwrap_or_else(|| word.clone()))
        .collect();
    let first = run(&create);
    assert!(
        first.status.success(),
        "{file}: creation failed:\n{}",
        text(&first)
    );
    let again = run(&create);
    assert!(
        again.status.success(),
        "{file}: creation run again failed:\n{}",
        text(&again)
    );
    assert!(
        text(&again).contains("already form one cluster"),
        "{file}: the second creation should find the cluster formed:\n{}",
        text(&again)
    );
    let check = run(&[
        "cluster".to_string(),
        "check".to_string(),
        loopback.values().next().cloned().unwrap(),
    ]);
    assert!(
        check.status.success(),
        "{file}: check failed:\n{}",
        text(&check)
    );

    let seeds: Vec<String> = option(&router, "seeds")
        .split(',')
        .map(|seed| {
            loopback
                .get(seed)
                .cloned()
                .unwrap_or_else(|| panic!("{file}: router seed {seed} is none of the nodes"))
        })
        .collect();
    let router_port = ports[named.len() * 2];
    let mut arguments = with_option(&router, "bind", "127.0.0.1");
    arguments = with_option(&arguments, "port", &router_port.to_string());
    arguments = with_option(&arguments, "seeds", &seeds.join(","));
    let _router = spawn(&arguments);

    // A plain client: keys of many slots, so every shard serves some.
    let mut client = eventually(Duration::from_secs(30), "the router serving writes", || {
        let mut client = connect(router_port)?;
        let reply: redis::RedisResult<String> = redis::cmd("SET")
            .arg("deploy:probe")
            .arg("1")
            .query(&mut client);
        reply.ok().map(|_| client)
    });
    let keys: Vec<String> = (0..30).map(|index| format!("deploy:{index}")).collect();
    let mut mset = redis::cmd("MSET");
    for key in &keys {
        mset.arg(key).arg(format!("value of {key}"));
    }
    let _: () = mset.query(&mut client).expect("MSET across slots");
    let values: Vec<String> = redis::cmd("MGET")
        .arg(&keys)
        .query(&mut client)
        .expect("MGET");
    let expected: Vec<String> = keys.iter().map(|key| format!("value of {key}")).collect();
    assert_eq!(values, expected, "{file}");
    let counted: i64 = redis::cmd("INCRBY")
        .arg("deploy:counter")
        .arg(5)
        .query(&mut client)
        .expect("INCRBY");
    assert_eq!(counted, 5, "{file}");
    drop(nodes);
}

#[test]
fn the_compose_file_forms_a_cluster_served_through_its_router() {
    deploys_and_serves("compose.yaml", &["command:"]);
}

#[test]
fn the_kubernetes_manifests_form_a_cluster_served_through_their_router() {
    deploys_and_serves("kubernetes/slotraft.yaml", &["args:"]);
}

/// The image runs `slotraft` with the container's command as arguments, and
/// its default command is a standalone node that serves clients.
#[test]
fn the_image_runs_a_standalone_node_by_default() {
    let dockerfile = deploy_file("Dockerfile");
    let entrypoint = flow_lists(&dockerfile, &["ENTRYPOINT"]);
    assert_eq!(entrypoint, vec![vec!["slotraft".to_string()]]);
    let commands = flow_lists(&dockerfile, &["CMD"]);
    let node = the_list(&commands, "node", "Dockerfile");
    let port = free_ports(1)[0];
    let dir = ScratchDir::new("deploy-image");
    let mut arguments = with_option(&node, "bind", "127.0.0.1");
    arguments = with_option(&arguments, "port", &port.to_string());
    arguments = with_option(&arguments, "dir", &dir.0.to_string_lossy());
    let _node = spawn(&arguments);
    eventually(Duration::from_secs(30), "the node answering PING", || {
        pong(port)
    });
    let mut client = connect(port).expect("connect");
    let _: () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut client)
        .expect("SET");
    let value: String = redis::cmd("GET").arg("k").query(&mut client).expect("GET");
    assert_eq!(value, "v");
}

/// Whether a node holds a cluster topology (`SLOTRAFT TOPOLOGY` is nil on a
/// node that belongs to no cluster).
fn holds_topology(cluster: &Cluster, index: usize) -> bool {
    let mut connection = cluster.client(index);
    let topology: Option<Vec<u8>> = redis::cmd("SLOTRAFT")
        .arg("TOPOLOGY")
        .query(&mut connection)
        .expect("SLOTRAFT TOPOLOGY");
    topology.is_some()
}

/// A creation that names nodes of a formed cluster together with one that
/// belongs to none, or with only some of the cluster's nodes, is refused
/// before any node is handed a topology.
#[test]
fn a_creation_mixing_formed_and_fresh_nodes_is_refused_and_changes_nothing() {
    let mut cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let fresh = cluster.spawn_extra();
    let mixed: Vec<String> = [0, 1, 2, fresh]
        .iter()
        .map(|index| cluster.address(*index))
        .collect();
    let mut arguments = vec!["cluster".to_string(), "create".to_string()];
    arguments.extend(mixed);
    let refused = run(&arguments);
    assert!(!refused.status.success(), "{}", text(&refused));
    assert!(
        text(&refused).contains("already belongs to a cluster that does not include"),
        "{}",
        text(&refused)
    );
    assert!(
        !holds_topology(&cluster, fresh),
        "the fresh node was handed a topology"
    );

    // The formed nodes in another order, and the fresh one first: refused too.
    let reordered = run(&[
        "cluster".to_string(),
        "create".to_string(),
        cluster.address(fresh),
        cluster.address(2),
        cluster.address(0),
        cluster.address(1),
    ]);
    assert!(!reordered.status.success(), "{}", text(&reordered));
    assert!(
        !holds_topology(&cluster, fresh),
        "the fresh node was handed a topology"
    );

    // Two of the three formed nodes: already formed, nothing to do.
    let subset = admin(&["create", &cluster.address(1), &cluster.address(0)]);
    assert!(subset.contains("already form one cluster"), "{subset}");
}
