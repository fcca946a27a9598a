//! Blocking commands on a replicated shard: a client blocked on the leader is
//! served through the log when data arrives, and released with a redirect when
//! leadership moves away.

use slotraft_tests::support::group::Group;
use std::time::Duration;

fn error_text(error: &redis::RedisError) -> String {
    match (error.code(), error.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => error.to_string(),
    }
}

#[test]
fn a_blocked_pop_on_the_leader_is_served_through_the_log() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut waiting = group.client(leader);
    let waiter = std::thread::spawn(move || {
        redis::cmd("BLPOP")
            .arg("jobs")
            .arg(0)
            .query::<(String, String)>(&mut waiting)
    });
    std::thread::sleep(Duration::from_millis(300));
    let mut pusher = group.client(leader);
    let pushed: i64 = redis::cmd("RPUSH")
        .arg("jobs")
        .arg("j1")
        .arg("j2")
        .query(&mut pusher)
        .unwrap();
    assert_eq!(pushed, 2);
    let popped = waiter.join().unwrap().unwrap();
    assert_eq!(popped, ("jobs".to_string(), "j1".to_string()));
    // The pop went through the log: every replica holds the same list.
    group.assert_replicas_agree(leader, Duration::from_secs(10));
    let left: Vec<String> = redis::cmd("LRANGE")
        .arg("jobs")
        .arg(0)
        .arg(-1)
        .query(&mut pusher)
        .unwrap();
    assert_eq!(left, vec!["j2".to_string()]);
    // Timeouts still answer nil.
    let nothing: Option<(String, String)> = redis::cmd("BRPOP")
        .arg("empty")
        .arg(0.2)
        .query(&mut pusher)
        .unwrap();
    assert_eq!(nothing, None);
}

/// XREAD BLOCK (a read that may wait) and XREADGROUP BLOCK (a write) wait on
/// the leader and are served through the log; `$` keeps meaning the last ID
/// when the client blocked.
#[test]
fn blocked_stream_reads_on_the_leader_are_served_through_the_log() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut admin = group.client(leader);
    let _: String = redis::cmd("XADD")
        .arg("s")
        .arg("1-1")
        .arg("a")
        .arg("1")
        .query(&mut admin)
        .unwrap();
    let _: String = redis::cmd("XGROUP")
        .arg("CREATE")
        .arg("s")
        .arg("g")
        .arg("$")
        .query(&mut admin)
        .unwrap();
    type Reply = Vec<(String, Vec<(String, Vec<String>)>)>;
    let mut reading = group.client(leader);
    let reader = std::thread::spawn(move || {
        redis::cmd("XREAD")
            .arg("BLOCK")
            .arg(0)
            .arg("STREAMS")
            .arg("s")
            .arg("$")
            .query::<Reply>(&mut reading)
    });
    let mut consuming = group.client(leader);
    let consumer = std::thread::spawn(move || {
        redis::cmd("XREADGROUP")
            .arg("GROUP")
            .arg("g")
            .arg("alice")
            .arg("BLOCK")
            .arg(0)
            .arg("STREAMS")
            .arg("s")
            .arg(">")
            .query::<Reply>(&mut consuming)
    });
    std::thread::sleep(Duration::from_millis(300));
    let _: String = redis::cmd("XADD")
        .arg("s")
        .arg("2-1")
        .arg("b")
        .arg("2")
        .query(&mut admin)
        .unwrap();
    let expected: Reply = vec![(
        "s".to_string(),
        vec![("2-1".to_string(), vec!["b".to_string(), "2".to_string()])],
    )];
    assert_eq!(reader.join().unwrap().unwrap(), expected);
    assert_eq!(consumer.join().unwrap().unwrap(), expected);
    // The delivery went through the log: every replica has the same PEL.
    group.assert_replicas_agree(leader, Duration::from_secs(10));
    let pending: i64 = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg("s")
        .query::<Vec<std::collections::HashMap<String, redis::Value>>>(&mut admin)
        .unwrap()[0]
        .get("pending")
        .and_then(|value| match value {
            redis::Value::Int(count) => Some(*count),
            _ => None,
        })
        .unwrap();
    assert_eq!(pending, 1);
    // A timeout answers nil.
    let nothing: Option<Reply> = redis::cmd("XREAD")
        .arg("BLOCK")
        .arg(200)
        .arg("STREAMS")
        .arg("s")
        .arg("$")
        .query(&mut admin)
        .unwrap();
    assert_eq!(nothing, None);
}

#[test]
fn blocked_clients_are_redirected_when_leadership_moves() {
    let group = Group::start(3, &["--raft-election-timeout", "150"]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut waiting = group.client(leader);
    let waiter = std::thread::spawn(move || {
        redis::cmd("BLPOP")
            .arg("jobs")
            .arg(0)
            .query::<(String, String)>(&mut waiting)
    });
    std::thread::sleep(Duration::from_millis(300));
    // Freeze the leader until the others have elected a new one, then let it
    // find out.
    group.signal(leader, "STOP");
    let others: Vec<usize> = (0..3).filter(|index| *index != leader).collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let new_leader = loop {
        if let Some(index) = others
            .iter()
            .copied()
            .find(|index| group.info_field(*index, "role").as_deref() == Some("master"))
        {
            break index;
        }
        assert!(std::time::Instant::now() < deadline, "no new leader");
        std::thread::sleep(Duration::from_millis(20));
    };
    group.signal(leader, "CONT");
    let error = waiter.join().unwrap().unwrap_err();
    assert_eq!(
        error_text(&error),
        format!("MOVED 9631 127.0.0.1:{}", group.members[new_leader].port),
    );
}

#[test]
fn xreadgroup_waiters_learn_when_their_stream_expires_or_is_flushed() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let port = group.members[leader].port;
    let mut admin = slotraft_tests::support::Raw::connect(port);
    let mut reader = slotraft_tests::support::Raw::connect(port);
    for (command, reply) in [
        (&["PEXPIRE", "s", "50"][..], ":1\r\n"),
        (&["FLUSHALL"][..], "+OK\r\n"),
        (&["FLUSHDB"][..], "+OK\r\n"),
    ] {
        admin.roundtrip(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"], "+OK\r\n");
        reader.command(&[
            b"XREADGROUP",
            b"GROUP",
            b"g",
            b"c",
            b"BLOCK",
            b"0",
            b"STREAMS",
            b"s",
            b">",
        ]);
        // Registered once its own entry applied: a write after it.
        std::thread::sleep(Duration::from_millis(200));
        admin.roundtrip(command, reply);
        reader.expect(
            b"-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option\r\n",
        );
    }
}
