//! ROLE, WAIT and WAITAOF on a replicated shard, and what its members record
//! about the commands they run (SLOWLOG, INFO commandstats).

use redis::ConnectionLike;
use slotraft_tests::support::group::Group;
use std::time::{Duration, Instant};

/// A Raft index member `index` reports in INFO (`raft_last_applied` ...).
fn raft_index(group: &Group, index: usize, field: &str) -> u64 {
    group
        .info_field(index, field)
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("{field} of member {index}"))
}

#[test]
fn role_names_the_leader_as_master_and_followers_as_its_replicas() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    for value in 0..20 {
        let () = redis::cmd("SET")
            .arg("k")
            .arg(value)
            .query(&mut connection)
            .unwrap();
    }
    // Every follower holds every write once WAIT 2 returns.
    let holding: i64 = redis::cmd("WAIT")
        .arg(2)
        .arg(5000)
        .query(&mut connection)
        .unwrap();
    assert_eq!(holding, 2);
    let role: redis::Value = redis::cmd("ROLE").query(&mut connection).unwrap();
    let redis::Value::Array(parts) = role else {
        panic!("ROLE is an array: {role:?}")
    };
    assert_eq!(parts[0], redis::Value::BulkString(b"master".to_vec()));
    let redis::Value::Int(offset) = parts[1] else {
        panic!("offset: {parts:?}")
    };
    let redis::Value::Array(replicas) = &parts[2] else {
        panic!("replicas: {parts:?}")
    };
    assert_eq!(replicas.len(), 2, "{replicas:?}");
    let mut ports = Vec::new();
    for replica in replicas {
        let redis::Value::Array(fields) = replica else {
            panic!("{replica:?}")
        };
        let text = |value: &redis::Value| match value {
            redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            other => panic!("a bulk string: {other:?}"),
        };
        assert_eq!(text(&fields[0]), "127.0.0.1");
        ports.push(text(&fields[1]).parse::<u16>().unwrap());
        let held: i64 = text(&fields[2]).parse().unwrap();
        assert!(
            held >= offset,
            "a follower past WAIT holds the leader's applied index"
        );
    }
    ports.sort();
    let mut expected: Vec<u16> = (0..3)
        .filter(|index| *index != leader)
        .map(|index| group.members[index].port)
        .collect();
    expected.sort();
    assert_eq!(ports, expected);
    // A follower is a replica of the leader.
    let follower = (0..3).find(|index| *index != leader).unwrap();
    let mut on_follower = group.client(follower);
    let role: Vec<redis::Value> = redis::cmd("ROLE").query(&mut on_follower).unwrap();
    assert_eq!(role[0], redis::Value::BulkString(b"slave".to_vec()));
    assert_eq!(role[1], redis::Value::BulkString(b"127.0.0.1".to_vec()));
    assert_eq!(
        role[2],
        redis::Value::Int(i64::from(group.members[leader].port))
    );
    assert_eq!(role[3], redis::Value::BulkString(b"connected".to_vec()));
    let error = redis::cmd("WAIT")
        .arg(1)
        .arg(10)
        .query::<i64>(&mut on_follower)
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("WAIT cannot be used with replica instances"),
        "{error}"
    );
}

#[test]
fn wait_for_more_replicas_than_exist_times_out_with_the_count() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    let () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut connection)
        .unwrap();
    let started = Instant::now();
    let holding: i64 = redis::cmd("WAIT")
        .arg(5)
        .arg(200)
        .query(&mut connection)
        .unwrap();
    assert_eq!(holding, 2);
    assert!(started.elapsed() >= Duration::from_millis(190));
    let both: Vec<i64> = redis::cmd("WAITAOF")
        .arg(1)
        .arg(2)
        .arg(5000)
        .query(&mut connection)
        .unwrap();
    assert_eq!(both, [1, 2]);
    // Zero wanted: at once.
    let now: i64 = redis::cmd("WAIT")
        .arg(0)
        .arg(0)
        .query(&mut connection)
        .unwrap();
    assert!(now >= 1, "a majority holds every acknowledged write: {now}");
}

/// The slow log, newest first: (id, time, microseconds, arguments, peer, name).
type SlowEntry = (i64, i64, i64, Vec<String>, String, String);

fn slowlog(connection: &mut redis::Connection) -> Vec<SlowEntry> {
    redis::cmd("SLOWLOG")
        .arg("GET")
        .arg(-1)
        .query(connection)
        .unwrap()
}

fn set_slower_than(connection: &mut redis::Connection, micros: i64) {
    let () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(micros)
        .query(connection)
        .unwrap();
}

#[test]
fn a_write_is_timed_from_proposal_to_reply() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    set_slower_than(&mut connection, 0);
    let () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut connection)
        .unwrap();
    let value: String = redis::cmd("GET").arg("k").query(&mut connection).unwrap();
    assert_eq!(value, "v");
    let entries = slowlog(&mut connection);
    let set = entries
        .iter()
        .find(|entry| entry.3 == ["SET", "k", "v"])
        .expect("the write is in the slow log");
    assert!(
        set.2 > 0,
        "a replicated write takes its commit round: {set:?}"
    );
    assert!(entries.iter().any(|entry| entry.3 == ["GET", "k"]));
    // A threshold lowered in the same pipeline applies to the read behind
    // it, arguments included (a read copies them only once it is slow).
    set_slower_than(&mut connection, 1_000_000);
    let () = redis::cmd("SLOWLOG")
        .arg("RESET")
        .query(&mut connection)
        .unwrap();
    let _: ((), Option<String>, Vec<Option<String>>) = redis::pipe()
        .cmd("CONFIG")
        .arg("SET")
        .arg("slowlog-log-slower-than")
        .arg(0)
        .cmd("GET")
        .arg("pipelined")
        .cmd("MGET")
        .arg("k")
        .query(&mut connection)
        .unwrap();
    let entries = slowlog(&mut connection);
    assert!(
        entries.iter().any(|entry| entry.3 == ["GET", "pipelined"]),
        "{entries:?}"
    );
    assert!(
        entries.iter().any(|entry| entry.3 == ["MGET", "k"]),
        "{entries:?}"
    );
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut connection)
        .unwrap();
    let line = info
        .lines()
        .find(|line| line.starts_with("cmdstat_set:"))
        .expect("cmdstat_set");
    assert!(line.starts_with("cmdstat_set:calls=1,"), "{line}");
    // Commands faster than every threshold are counted at their replies,
    // not queued for the logs: the counts and failures are the same.
    set_slower_than(&mut connection, 10_000_000);
    let () = redis::cmd("CONFIG")
        .arg("RESETSTAT")
        .query(&mut connection)
        .unwrap();
    let mut pipe = redis::pipe();
    for _ in 0..7 {
        pipe.cmd("GET").arg("k");
    }
    pipe.cmd("SET").arg("k").arg("v").ignore();
    pipe.cmd("INCR").arg("k");
    // INCR of "v" answers an error, which the pipeline's result carries.
    let failed: redis::RedisResult<Vec<redis::Value>> = pipe.query(&mut connection);
    assert!(failed.is_err(), "{failed:?}");
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut connection)
        .unwrap();
    let stat = |name: &str| {
        info.lines()
            .find(|line| line.starts_with(&format!("cmdstat_{name}:")))
            .unwrap_or_else(|| panic!("cmdstat_{name} in {info}"))
            .to_string()
    };
    assert!(stat("get").starts_with("cmdstat_get:calls=7,"), "{info}");
    assert!(stat("set").starts_with("cmdstat_set:calls=1,"), "{info}");
    assert!(stat("incr").starts_with("cmdstat_incr:calls=1,"), "{info}");
    assert!(
        stat("incr").ends_with("rejected_calls=0,failed_calls=1"),
        "{info}"
    );
    let logged = slowlog(&mut connection);
    assert!(
        logged
            .iter()
            .all(|entry| entry.3.first().map(String::as_str) != Some("INCR")),
        "nothing faster than the threshold is logged: {logged:?}"
    );
}

#[test]
fn save_takes_a_snapshot_of_the_group_and_moves_lastsave() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    for value in 0..30 {
        let () = redis::cmd("SET")
            .arg(format!("k{value}"))
            .arg(value)
            .query(&mut connection)
            .unwrap();
    }
    let applied: u64 = raft_index(&group, leader, "raft_last_applied");
    let () = redis::cmd("SAVE").query(&mut connection).unwrap();
    let snapshot: u64 = raft_index(&group, leader, "raft_snapshot_index");
    assert!(
        snapshot >= applied,
        "snapshot {snapshot}, applied {applied}"
    );
    let lastsave: i64 = redis::cmd("LASTSAVE").query(&mut connection).unwrap();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    assert!((now - lastsave).abs() <= 2, "{lastsave} vs {now}");
    // A follower snapshots its own copy.
    let follower = (0..3).find(|index| *index != leader).unwrap();
    let mut on_follower = group.client(follower);
    let started: String = redis::cmd("BGSAVE").query(&mut on_follower).unwrap();
    assert_eq!(started, "Background saving started");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let taken: u64 = raft_index(&group, follower, "raft_snapshot_index");
        if taken >= applied {
            break;
        }
        assert!(Instant::now() < deadline, "the follower's snapshot");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn failover_hands_leadership_to_a_follower() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    let () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut connection)
        .unwrap();
    let follower = (0..3).find(|index| *index != leader).unwrap();
    let mut on_follower = group.client(follower);
    let refused = redis::cmd("FAILOVER")
        .query::<()>(&mut on_follower)
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .contains("FAILOVER is not valid when server is a replica"),
        "{refused}"
    );
    let () = redis::cmd("FAILOVER")
        .arg("TO")
        .arg("127.0.0.1")
        .arg(group.members[follower].port)
        .query(&mut connection)
        .unwrap();
    assert_eq!(group.wait_leader(Duration::from_secs(10)), follower);
    let value: String = redis::cmd("GET").arg("k").query(&mut on_follower).unwrap();
    assert_eq!(value, "v");
}

#[test]
fn migrate_inside_multi_is_refused_on_a_replicated_shard() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    let () = redis::cmd("SET")
        .arg("k")
        .arg("v")
        .query(&mut connection)
        .unwrap();
    let () = redis::cmd("MULTI").query(&mut connection).unwrap();
    let queued: String = redis::cmd("MIGRATE")
        .arg(&["127.0.0.1", "1", "k", "0", "100"])
        .query(&mut connection)
        .unwrap();
    assert_eq!(queued, "QUEUED");
    let replies = match connection.req_command(&redis::cmd("EXEC")).unwrap() {
        redis::Value::Array(replies) => replies,
        other => panic!("EXEC answered {other:?}"),
    };
    assert_eq!(replies.len(), 1, "{replies:?}");
    match &replies[0] {
        redis::Value::ServerError(error) => assert_eq!(
            format!("{} {}", error.code(), error.details().unwrap_or_default()),
            "ERR MIGRATE inside MULTI is not available on a replicated shard"
        ),
        other => panic!("MIGRATE inside EXEC answered {other:?}"),
    }
    let kept: String = redis::cmd("GET").arg("k").query(&mut connection).unwrap();
    assert_eq!(kept, "v");
}
