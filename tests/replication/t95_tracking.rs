//! CLIENT TRACKING on a replicated shard: each member tells its own tracking
//! clients when it applies a write, the leader's and a READONLY follower's
//! alike, and a flush reaches both.

use slotraft_tests::support::group::Group;
use slotraft_tests::support::Peer;
use std::time::Duration;

const INVALIDATE_K: &str = ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n";

#[test]
fn leader_and_follower_clients_are_told_of_applied_writes() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let follower = (leader + 1) % 3;
    let mut writer = Peer::connect(group.members[leader].port);
    let mut on_leader = Peer::connect(group.members[leader].port);
    let mut on_follower = Peer::connect(group.members[follower].port);
    for tracker in [&mut on_leader, &mut on_follower] {
        tracker.call(&["HELLO", "3"]);
        assert_eq!(tracker.call(&["CLIENT", "TRACKING", "on"]), "+OK\r\n");
    }
    assert_eq!(on_follower.call(&["READONLY"]), "+OK\r\n");
    assert_eq!(on_leader.call(&["GET", "k"]), "_\r\n");
    assert_eq!(on_follower.call(&["GET", "k"]), "_\r\n");
    assert_eq!(writer.call(&["SET", "k", "1"]), "+OK\r\n");
    // The leader delivered before it answered the write.
    on_leader.settle();
    assert_eq!(on_leader.pushes, vec![INVALIDATE_K.to_string()]);
    // The follower delivers when it applies the entry.
    let (_, push) = on_follower.next_frame();
    assert_eq!(push, INVALIDATE_K);
    // A write that changes nothing tells no one; the next change does.
    on_leader.pushes.clear();
    assert_eq!(on_leader.call(&["GET", "k"]), "$1\r\n1\r\n");
    assert_eq!(writer.call(&["SET", "k", "2", "NX"]), "$-1\r\n");
    on_leader.settle();
    assert!(on_leader.pushes.is_empty(), "{:?}", on_leader.pushes);
    assert_eq!(writer.call(&["FLUSHALL"]), "+OK\r\n");
    on_leader.settle();
    assert_eq!(
        on_leader.pushes,
        vec![">2\r\n$10\r\ninvalidate\r\n_\r\n".to_string()]
    );
    let (_, push) = on_follower.next_frame();
    assert_eq!(push, ">2\r\n$10\r\ninvalidate\r\n_\r\n");
    // Expiry runs through the log too: the follower hears of it.
    assert_eq!(on_follower.call(&["GET", "e"]), "_\r\n");
    assert_eq!(writer.call(&["SET", "e", "v", "PX", "200"]), "+OK\r\n");
    let (_, push) = on_follower.next_frame();
    assert_eq!(push, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\ne\r\n");
    assert_eq!(on_follower.call(&["GET", "e"]), "$1\r\nv\r\n");
    let (_, push) = on_follower.next_frame();
    assert_eq!(push, ">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\ne\r\n");
}
