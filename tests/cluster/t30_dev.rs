//! `slotraft dev`: one command brings up a local cluster and a router, Ctrl-C
//! stops them cleanly, and a second run on the same directory keeps the data.

use slotraft_tests::support::{binary, ScratchDir};
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A base port with `count` free ports after it, for client and Raft ports:
/// between 20000 and 31999, below the kernel's ephemeral range (where an
/// outgoing connection could take a port between the check and the bind)
/// and above the ports other tests pick (`free_ports`, 10000-19999).
fn free_run(count: u16) -> u16 {
    for attempt in 0..200u32 {
        let span = 12_000 - u32::from(count);
        let mix = std::process::id()
            .wrapping_mul(7919)
            .wrapping_add(attempt.wrapping_mul(104_729));
        let base = 20_000 + (mix % span) as u16;
        let free = (0..count).all(|offset| TcpListener::bind(("127.0.0.1", base + offset)).is_ok());
        if free {
            return base;
        }
    }
    panic!("no free run of {count} ports");
}

/// Starts `slotraft dev` and waits for its ready message; returns it and the
/// router port it printed.
fn start_dev(dir: &ScratchDir, port: u16, raft_port: u16, router_port: u16) -> (Child, u16) {
    let mut child = Command::new(binary())
        .arg("dev")
        .arg("--dir")
        .arg(&dir.0)
        .args(["--port", &port.to_string()])
        .args(["--raft-port", &raft_port.to_string()])
        .args(["--router-port", &router_port.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start slotraft dev");
    let stdout = child.stdout.take().expect("stdout");
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut sender = Some(sender);
        let mut printed_router_port = None;
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some(port) = line.trim().strip_prefix("connect: redis-cli -p ") {
                printed_router_port = port.trim().parse::<u16>().ok();
            }
            if line.contains("connect: redis-cli -c -p") {
                if let Some(sender) = sender.take() {
                    let _ = sender.send(printed_router_port);
                }
            }
        }
    });
    let printed = receiver
        .recv_timeout(Duration::from_secs(60))
        .expect("slotraft dev did not become ready")
        .expect("slotraft dev printed the router's connect line");
    (child, printed)
}

/// A plain (non-cluster) connection through the router.
fn router_client(port: u16) -> redis::Connection {
    let connection = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
        .and_then(|client| client.get_connection())
        .expect("connect to the router");
    connection
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    connection
}

fn interrupt_and_wait(mut child: Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(status.success());
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            assert!(status.success(), "slotraft dev exited with {status}");
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "slotraft dev did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn cluster_client(port: u16) -> redis::cluster::ClusterConnection {
    redis::cluster::ClusterClientBuilder::new(vec![format!("redis://127.0.0.1:{port}/")])
        .retries(10)
        .build()
        .expect("cluster client")
        .get_connection()
        .expect("cluster connection")
}

#[test]
fn dev_starts_a_cluster_stops_on_ctrl_c_and_keeps_data() {
    let dir = ScratchDir::new("dev");
    let port = free_run(7);
    let router_port = port + 3;
    let raft_port = port + 4;
    let (dev, printed) = start_dev(&dir, port, raft_port, router_port);
    assert_eq!(printed, router_port);
    let mut client = cluster_client(port);
    for index in 0..100 {
        let _: () = redis::cmd("SET")
            .arg(format!("dev:{index}"))
            .arg(index)
            .query(&mut client)
            .unwrap();
    }
    drop(client);
    // The router serves plain clients: reads of the keys written above,
    // writes, and whole-cluster DBSIZE.
    let mut plain = router_client(router_port);
    for index in 0..100 {
        let value: i64 = redis::cmd("GET")
            .arg(format!("dev:{index}"))
            .query(&mut plain)
            .unwrap();
        assert_eq!(value, index);
    }
    let _: () = redis::cmd("SET")
        .arg("dev:router")
        .arg("through the router")
        .query(&mut plain)
        .unwrap();
    let size: i64 = redis::cmd("DBSIZE").query(&mut plain).unwrap();
    assert_eq!(size, 101);
    drop(plain);
    interrupt_and_wait(dev);
    // Every node process and the router are gone: nothing listens on their ports.
    for offset in 0..4 {
        assert!(
            std::net::TcpStream::connect(("127.0.0.1", port + offset)).is_err(),
            "a node still listens on {}",
            port + offset
        );
    }
    // A second run reuses the data.
    let (dev, _) = start_dev(&dir, port, raft_port, router_port);
    let mut client = cluster_client(port);
    for index in 0..100 {
        let value: i64 = redis::cmd("GET")
            .arg(format!("dev:{index}"))
            .query(&mut client)
            .unwrap();
        assert_eq!(value, index);
    }
    drop(client);
    let mut plain = router_client(router_port);
    let value: String = redis::cmd("GET")
        .arg("dev:router")
        .query(&mut plain)
        .unwrap();
    assert_eq!(value, "through the router");
    drop(plain);
    interrupt_and_wait(dev);
}
