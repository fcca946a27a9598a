//! Snapshots and log compaction: a replica that was down while the log was
//! compacted catches up by snapshot install; a full restart loads the snapshot
//! and replays the log to the same state.

use slotraft_tests::support::group::Group;
use std::time::Duration;

const SMALL_SNAPSHOTS: &[&str] = &["--raft-snapshot-entries", "50", "--raft-keep-entries", "5"];

fn field(group: &Group, index: usize, name: &str) -> u64 {
    group
        .info_field(index, name)
        .and_then(|value| value.parse().ok())
        .unwrap_or(0)
}

fn fill(group: &Group, leader: usize, prefix: &str, count: usize) {
    let mut connection = group.client(leader);
    for index in 0..count {
        let _: () = redis::cmd("SET")
            .arg(format!("{prefix}:{index}"))
            .arg(index)
            .query(&mut connection)
            .unwrap();
        let _: i64 = redis::cmd("INCR")
            .arg(format!("{prefix}:count"))
            .query(&mut connection)
            .unwrap();
    }
}

#[test]
fn a_replica_behind_a_compacted_log_installs_a_snapshot() {
    let mut group = Group::start(3, SMALL_SNAPSHOTS);
    let leader = group.wait_leader(Duration::from_secs(10));
    let lagging = (leader + 1) % 3;
    fill(&group, leader, "early", 20);
    let applied = field(&group, leader, "raft_last_applied");
    group.wait_applied(applied, Duration::from_secs(10));
    group.kill(lagging);

    fill(&group, leader, "late", 200);
    // The leader compacted its log past what the lagging replica has.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while field(&group, leader, "raft_purged_index") <= applied {
        assert!(
            std::time::Instant::now() < deadline,
            "the leader never purged its log"
        );
        std::thread::sleep(Duration::from_millis(50));
    }

    group.spawn(lagging);
    let applied = field(&group, leader, "raft_last_applied");
    group.wait_applied(applied, Duration::from_secs(30));
    assert!(
        field(&group, lagging, "raft_snapshot_index") > 0,
        "the lagging replica caught up without a snapshot"
    );
    let digests: Vec<String> = (0..3).map(|index| group.digest(index)).collect();
    assert_eq!(digests[0], digests[1]);
    assert_eq!(digests[1], digests[2]);
}

#[test]
fn a_full_restart_restores_the_same_state() {
    let mut group = Group::start(3, SMALL_SNAPSHOTS);
    let leader = group.wait_leader(Duration::from_secs(10));
    fill(&group, leader, "k", 120);
    let _: () = redis::cmd("SET")
        .arg("volatile")
        .arg("v")
        .arg("EX")
        .arg(3600)
        .query(&mut group.client(leader))
        .unwrap();
    let applied = field(&group, leader, "raft_last_applied");
    group.wait_applied(applied, Duration::from_secs(10));
    let before = group.digest(leader);
    for index in 0..3 {
        group.kill(index);
    }
    for index in 0..3 {
        group.spawn(index);
    }
    let leader = group.wait_leader(Duration::from_secs(20));
    group.wait_applied(applied, Duration::from_secs(20));
    for index in 0..3 {
        assert_eq!(group.digest(index), before, "replica {index} after restart");
    }
    let count: i64 = redis::cmd("GET")
        .arg("k:count")
        .query(&mut group.client(leader))
        .unwrap();
    assert_eq!(count, 120);
}

#[test]
fn large_writes_keep_the_log_in_memory_near_its_bound() {
    // Snapshots come every 50,000 entries by default: without the bound on
    // the log's memory, each replica would hold all of these writes.
    let group = Group::start(3, &["--raft-log-memory", "1mb"]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    let value = vec![b'v'; 64 * 1024];
    for index in 0..320 {
        let _: () = redis::cmd("SET")
            .arg(format!("big:{}", index % 16))
            .arg(&value[..])
            .query(&mut connection)
            .unwrap();
    }
    let applied = field(&group, leader, "raft_last_applied");
    group.wait_applied(applied, Duration::from_secs(10));
    // 20 MB went through each log; what stays is about the last snapshot's
    // size (16 values: 1 MB) since it plus a quarter of the bound behind it.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    for index in 0..3 {
        loop {
            let held = field(&group, index, "raft_log_memory_bytes");
            if held <= 2 << 20 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "replica {index} still holds {held} bytes of log"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(field(&group, index, "raft_snapshot_index") > 0);
    }
    let stored: Vec<u8> = redis::cmd("GET")
        .arg("big:15")
        .query(&mut connection)
        .unwrap();
    assert_eq!(stored, value);
    let digests: Vec<String> = (0..3).map(|index| group.digest(index)).collect();
    assert_eq!(digests[0], digests[1]);
    assert_eq!(digests[1], digests[2]);
}
