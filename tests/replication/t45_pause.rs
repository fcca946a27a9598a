//! CLIENT PAUSE on a replicated shard: a per-node state. The paused leader
//! proposes no held write (and no expiry) until the pause ends; a paused
//! follower keeps applying the log.

use slotraft_tests::support::group::Group;
use slotraft_tests::support::Raw;
use std::time::{Duration, Instant};

fn blocked_clients(port: u16) -> String {
    let mut client = Raw::connect(port);
    client.command(&[b"INFO", b"clients"]);
    let info = client.read_frame();
    let text = String::from_utf8_lossy(info.as_bytes().expect("a bulk")).into_owned();
    text.lines()
        .find_map(|line| line.strip_prefix("blocked_clients:"))
        .expect("blocked_clients")
        .to_string()
}

fn wait_blocked(port: u16, count: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while blocked_clients(port) != count.to_string() {
        assert!(Instant::now() < deadline, "blocked_clients never {count}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_paused_leader_holds_writes_and_expiry_while_a_paused_follower_applies() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let follower = (leader + 1) % 3;
    let leader_port = group.members[leader].port;
    let follower_port = group.members[follower].port;
    let mut admin = Raw::connect(leader_port);
    admin.roundtrip(&["SET", "short", "v", "PX", "100"], "+OK\r\n");
    admin.roundtrip(&["CLIENT", "PAUSE", "60000", "WRITE"], "+OK\r\n");
    let mut writer = Raw::connect(leader_port);
    writer.command(&[b"SET", b"k", b"v"]);
    wait_blocked(leader_port, 1);
    admin.roundtrip(&["GET", "k"], "$-1\r\n");
    // No expiry entry while paused: the key stays on every replica.
    std::thread::sleep(Duration::from_millis(400));
    admin.roundtrip(&["GET", "short"], "$-1\r\n");
    admin.roundtrip(&["DBSIZE"], ":1\r\n");
    admin.roundtrip(&["CLIENT", "UNPAUSE"], "+OK\r\n");
    writer.expect(b"+OK\r\n");
    admin.roundtrip(&["GET", "k"], "$1\r\nv\r\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        admin.command(&[b"DBSIZE"]);
        if admin.read_frame() == resp::Frame::Integer(1) {
            break;
        }
        assert!(Instant::now() < deadline, "the expired key stays");
        std::thread::sleep(Duration::from_millis(20));
    }

    // A paused follower keeps applying its leader's log.
    let mut on_follower = Raw::connect(follower_port);
    on_follower.roundtrip(&["CLIENT", "PAUSE", "60000", "WRITE"], "+OK\r\n");
    admin.roundtrip(&["SET", "b", "2"], "+OK\r\n");
    admin.roundtrip(&["WAIT", "2", "5000"], ":2\r\n");
    on_follower.roundtrip(&["READONLY"], "+OK\r\n");
    // WAIT counts replicas holding the entry in their log; applying it may
    // come a moment later.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        on_follower.command(&[b"GET", b"b"]);
        if matches!(on_follower.read_frame(), resp::Frame::Bulk(value) if &value[..] == b"2") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the paused follower never applied SET b"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    on_follower.roundtrip(&["CLIENT", "UNPAUSE"], "+OK\r\n");
}
