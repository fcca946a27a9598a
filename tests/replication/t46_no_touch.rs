//! CLIENT NO-TOUCH on a replicated shard: reads are served from the local
//! applied state with the client's flag; writes apply through the log and
//! touch as they would (see ARCHITECTURE.md, Blocking commands).

use slotraft_tests::support::group::Group;
use slotraft_tests::support::Raw;
use std::time::Duration;

#[test]
fn no_touch_reads_on_the_leader_leave_the_lfu_counter() {
    let group = Group::start(3, &["--maxmemory-policy", "allkeys-lfu"]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut client = Raw::connect(group.members[leader].port);
    client.roundtrip(&["SET", "f", "v"], "+OK\r\n");
    client.roundtrip(&["OBJECT", "FREQ", "f"], ":5\r\n");
    client.roundtrip(&["CLIENT", "NO-TOUCH", "ON"], "+OK\r\n");
    client.roundtrip(&["GET", "f"], "$1\r\nv\r\n");
    client.roundtrip(&["OBJECT", "FREQ", "f"], ":5\r\n");
    client.roundtrip(&["TOUCH", "f"], ":1\r\n");
    client.roundtrip(&["OBJECT", "FREQ", "f"], ":6\r\n");
    client.roundtrip(&["CLIENT", "NO-TOUCH", "OFF"], "+OK\r\n");
    client.roundtrip(&["GET", "f"], "$1\r\nv\r\n");
    client.command(&[b"OBJECT", b"FREQ", b"f"]);
    assert!(matches!(client.read_frame(), resp::Frame::Integer(frequency) if frequency >= 6));
}
