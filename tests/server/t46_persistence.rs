//! A standalone node's data across restarts: snapshots written by SAVE,
//! BGSAVE and a shutdown (as Redis's RDB), and `--appendonly yes`, a group of
//! one whose every acknowledged write is in its fsynced log.

use slotraft_tests::support::{Raw, Server};
use std::time::Duration;

fn digest(client: &mut Raw) -> resp::Frame {
    client.command(&[b"DEBUG", b"DIGEST"]);
    client.read_frame()
}

fn fill(client: &mut Raw) {
    client.roundtrip(&["SET", "string", "value"], "+OK\r\n");
    client.roundtrip(&["SET", "counter", "41"], "+OK\r\n");
    client.roundtrip(&["INCR", "counter"], ":42\r\n");
    client.roundtrip(&["RPUSH", "list", "a", "b", "c"], ":3\r\n");
    client.roundtrip(&["HSET", "hash", "f", "v"], ":1\r\n");
    client.roundtrip(&["SADD", "set", "x", "y"], ":2\r\n");
    client.roundtrip(&["ZADD", "zset", "1", "one", "2", "two"], ":2\r\n");
    client.roundtrip(&["SELECT", "3"], "+OK\r\n");
    client.roundtrip(&["SET", "elsewhere", "db3"], "+OK\r\n");
    client.roundtrip(&["PEXPIRE", "elsewhere", "3600000"], ":1\r\n");
    client.roundtrip(&["SELECT", "0"], "+OK\r\n");
}

#[test]
fn a_shutdown_saves_and_the_next_start_loads_everything() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    fill(&mut client);
    let before = digest(&mut client);
    client.command(&[b"SHUTDOWN"]);
    let mut server = server;
    assert!(server.wait_exit(Duration::from_secs(20)).is_some());
    let dir = server.into_dir();
    assert!(dir.0.join("standalone.snapshot").exists());
    let server = Server::start_in(dir, &[]);
    let mut client = server.connect();
    assert_eq!(digest(&mut client), before);
    client.roundtrip(&["GET", "counter"], "$2\r\n42\r\n");
    client.roundtrip(&["SELECT", "3"], "+OK\r\n");
    client.command(&[b"PTTL", b"elsewhere"]);
    let resp::Frame::Integer(ttl) = client.read_frame() else {
        panic!("PTTL is an integer")
    };
    assert!(ttl > 3_000_000 && ttl <= 3_600_000, "{ttl}");
}

#[test]
fn save_and_bgsave_write_what_a_crash_keeps_and_nosave_skips_the_rest() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.command(&[b"LASTSAVE"]);
    let resp::Frame::Integer(started) = client.read_frame() else {
        panic!("LASTSAVE is an integer")
    };
    fill(&mut client);
    client.roundtrip(&["SAVE"], "+OK\r\n");
    let saved = digest(&mut client);
    client.roundtrip(&["SET", "after-save", "1"], "+OK\r\n");
    client.roundtrip(&["BGSAVE"], "+Background saving started\r\n");
    // Done when INFO says so.
    let mut done = false;
    for _ in 0..200 {
        client.command(&[b"INFO", b"persistence"]);
        let info = String::from_utf8_lossy(client.read_frame().as_bytes().unwrap()).into_owned();
        if info.contains("rdb_bgsave_in_progress:0") && info.contains("rdb_saves:2") {
            assert!(info.contains("rdb_changes_since_last_save:0"), "{info}");
            assert!(info.contains("rdb_last_bgsave_status:ok"), "{info}");
            done = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(done, "the background save ended");
    let with_after = digest(&mut client);
    assert_ne!(with_after, saved);
    client.command(&[b"LASTSAVE"]);
    let resp::Frame::Integer(last) = client.read_frame() else {
        panic!("LASTSAVE is an integer")
    };
    assert!(last >= started);
    client.roundtrip(&["BGSAVE", "SCHEDULE"], "+Background saving started\r\n");
    client.roundtrip(&["BGSAVE", "NOW"], "-ERR syntax error\r\n");
    std::thread::sleep(Duration::from_millis(300));
    client.roundtrip(&["SET", "lost", "1"], "+OK\r\n");
    // A crash loses what came after the last save.
    let dir = server.into_dir();
    let server = Server::start_in(dir, &[]);
    let mut client = server.connect();
    assert_eq!(digest(&mut client), with_after);
    client.roundtrip(&["SET", "also-lost", "1"], "+OK\r\n");
    client.command(&[b"SHUTDOWN", b"NOSAVE"]);
    let mut server = server;
    assert!(server.wait_exit(Duration::from_secs(20)).is_some());
    let server = Server::start_in(server.into_dir(), &[]);
    let mut client = server.connect();
    assert_eq!(digest(&mut client), with_after);
    client.roundtrip(&["EXISTS", "also-lost"], ":0\r\n");
}

#[test]
fn without_save_points_a_shutdown_keeps_nothing_unless_asked() {
    let server = Server::start(&["--save", ""]);
    let mut client = server.connect();
    client.roundtrip(&["SET", "k", "v"], "+OK\r\n");
    client.command(&[b"SHUTDOWN"]);
    let mut server = server;
    assert!(server.wait_exit(Duration::from_secs(20)).is_some());
    let server = Server::start_in(server.into_dir(), &["--save", ""]);
    let mut client = server.connect();
    client.roundtrip(&["DBSIZE"], ":0\r\n");
    client.roundtrip(&["SET", "k", "v"], "+OK\r\n");
    client.command(&[b"SHUTDOWN", b"SAVE"]);
    let mut server = server;
    assert!(server.wait_exit(Duration::from_secs(20)).is_some());
    let server = Server::start_in(server.into_dir(), &["--save", ""]);
    let mut client = server.connect();
    client.roundtrip(&["GET", "k"], "$1\r\nv\r\n");
}

#[test]
fn a_save_point_saves_in_the_background() {
    let server = Server::start(&["--save", "0 3"]);
    let mut client = server.connect();
    for index in 0..3 {
        client.roundtrip(&["SET", &format!("k{index}"), "v"], "+OK\r\n");
    }
    let mut saved = false;
    for _ in 0..100 {
        client.command(&[b"INFO", b"persistence"]);
        let info = String::from_utf8_lossy(client.read_frame().as_bytes().unwrap()).into_owned();
        if info.contains("rdb_saves:1") {
            saved = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(saved, "3 changes reached the save point");
    let server = Server::start_in(server.into_dir(), &["--save", ""]);
    let mut client = server.connect();
    client.roundtrip(&["DBSIZE"], ":3\r\n");
}

#[test]
fn a_damaged_snapshot_stops_the_start() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["SET", "k", "v"], "+OK\r\n");
    client.roundtrip(&["SAVE"], "+OK\r\n");
    let dir = server.into_dir();
    let path = dir.0.join("standalone.snapshot");
    let mut bytes = std::fs::read(&path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let output = std::process::Command::new(slotraft_tests::support::binary())
        .args(["node", "--port", "0", "--bind", "127.0.0.1", "--dir"])
        .arg(&dir.0)
        .output()
        .expect("run slotraft");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("standalone.snapshot"), "{stderr}");
}

#[test]
fn appendonly_keeps_every_acknowledged_write_through_a_crash() {
    let server = Server::start(&["--appendonly", "yes"]);
    let mut client = server.connect();
    fill(&mut client);
    for value in 1..=50 {
        client.roundtrip(&["INCR", "acknowledged"], &format!(":{value}\r\n"));
    }
    let before = digest(&mut client);
    client.command(&[b"INFO", b"persistence"]);
    let info = String::from_utf8_lossy(client.read_frame().as_bytes().unwrap()).into_owned();
    assert!(info.contains("aof_enabled:1"), "{info}");
    client.roundtrip(
        &["CONFIG", "SET", "appendonly", "no"],
        "-ERR CONFIG SET failed (possibly related to argument 'appendonly') - can't set immutable config\r\n",
    );
    // SIGKILL: nothing is saved on the way out.
    let server = Server::start_in(server.into_dir(), &["--appendonly", "yes"]);
    let mut client = server.connect();
    let mut after = digest(&mut client);
    for _ in 0..100 {
        if after == before {
            break;
        }
        // The log replays while the node elects itself.
        std::thread::sleep(Duration::from_millis(50));
        after = digest(&mut client);
    }
    assert_eq!(after, before);
    client.roundtrip(&["GET", "acknowledged"], "$2\r\n50\r\n");
    client.roundtrip(&["SAVE"], "+OK\r\n");
}
