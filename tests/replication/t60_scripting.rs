//! Lua scripts and functions on a replicated shard: a script that writes is one
//! log entry, applied with the entry's time and random seed on every replica;
//! script bodies and libraries are replicated state that survives failover and
//! restarts; a runaway script stops at the same instruction budget everywhere;
//! read-only scripts are reads, served by followers to READONLY connections.

use redis::ConnectionLike;
use slotraft_tests::support::group::Group;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Writes a value made of `math.random()` and the entry's TIME.
const RANDOM_WRITE: &str = "redis.call('SET', KEYS[1], tostring(math.random()) .. ':' .. redis.call('TIME')[1]) return redis.call('GET', KEYS[1])";
const RANDOM_WRITE_SHA: &str = "b238d9580284f6ce30617e18b9c2b62c953cf359";

/// SPOP and SRANDMEMBER inside a script, plus `math.random(m, n)`.
const SET_DRAW: &str = "local popped = redis.call('SPOP', KEYS[1]) \
     local picked = redis.call('SRANDMEMBER', KEYS[1], 3) \
     redis.call('RPUSH', KEYS[2], popped, unpack(picked)) \
     redis.call('HSET', KEYS[3], 'dice', math.random(1, 1000000), 'time', redis.call('TIME')[2]) \
     return {popped, #picked}";

const INCR_SCRIPT: &str = "return redis.call('INCRBY', KEYS[1], ARGV[1])";
const INCR_SCRIPT_SHA: &str = "8cd00688c05c46bde4a2e60658ef20a2e5c0b248";

const READ_SCRIPT: &str = "return redis.call('GET', KEYS[1])";
const READ_SCRIPT_SHA: &str = "d3c21d0c2b9ca22f82737626a27bcaf5d288f99f";

const WRITE_SCRIPT: &str = "return redis.call('SET', KEYS[1], 'x')";
const WRITE_SCRIPT_SHA: &str = "bd6f3018b28bbdb36260f19d3c44afed740db987";

const RUNAWAY: &str =
    "redis.call('SET', KEYS[1], 'before') local i = 0 while true do i = i + 1 end";
const RUNAWAY_SHA: &str = "7b57bc4057134e15fed4d6ea1f2719ebf139e8cc";

const SPIN: &str = "local i = 0 while true do i = i + 1 end";
const SPIN_SHA: &str = "3fcf51a9b854b8f66cb8685600b0d7df968f4398";

/// A library with a writing function and a `no-writes` one.
const LIBRARY: &str = "#!lua name=counters\n\
     redis.register_function('bump', function(keys, args) return redis.call('INCRBY', keys[1], args[1]) end)\n\
     redis.register_function{function_name='peek', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}}";

const BUDGET_EXCEEDED: &str =
    "ERR Script exceeded its instruction budget (lua-instruction-limit) and was stopped";

const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

/// A sha that no script has.
const UNKNOWN_SHA: &str = "0000000000000000000000000000000000000001";

type HashFields = std::collections::BTreeMap<String, String>;

fn query<T: redis::FromRedisValue>(
    connection: &mut redis::Connection,
    arguments: &[&str],
) -> redis::RedisResult<T> {
    let mut command = redis::cmd(arguments[0]);
    for argument in &arguments[1..] {
        command.arg(*argument);
    }
    command.query(connection)
}

/// The full error text the server sent, as `CODE detail`.
fn error_text(error: &redis::RedisError) -> String {
    match (error.code(), error.detail()) {
        (Some(code), Some(detail)) => format!("{code} {detail}"),
        (Some(code), None) => code.to_string(),
        _ => error.to_string(),
    }
}

fn field(group: &Group, index: usize, name: &str) -> u64 {
    group
        .info_field(index, name)
        .and_then(|value| value.parse().ok())
        .unwrap_or(0)
}

/// A connection to member `index` that reads this replica's own state.
fn readonly_client(group: &Group, index: usize) -> redis::Connection {
    let mut connection = group.client(index);
    let _: () = query(&mut connection, &["READONLY"]).unwrap();
    connection
}

/// Waits until every running replica applied what the leader has, and checks
/// that they all hold the same state; returns the common digest.
fn assert_replicas_agree(group: &Group, leader: usize) -> String {
    let applied = field(group, leader, "raft_last_applied");
    assert!(applied > 0, "the leader reports no applied index");
    group.wait_applied(applied, Duration::from_secs(10));
    // The applied index comes from Raft's metrics, which can run a moment
    // ahead of a snapshot being installed: give the states a moment to meet.
    let deadline = Instant::now() + Duration::from_secs(5);
    let digests = loop {
        let digests: Vec<String> = (0..group.members.len())
            .filter(|index| group.is_running(*index))
            .map(|index| group.digest(index))
            .collect();
        if digests.iter().all(|digest| digest == &digests[0]) || Instant::now() > deadline {
            break digests;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    if digests.iter().any(|digest| digest != &digests[0]) {
        // What each replica holds, to tell a lagging replica from a diverged one.
        let states: Vec<String> = (0..group.members.len())
            .filter(|index| group.is_running(*index))
            .map(|index| {
                let mut connection = readonly_client(group, index);
                let size: i64 = query(&mut connection, &["DBSIZE"]).unwrap_or(-1);
                format!(
                    "replica {index}: applied {} snapshot {} keys {size} digest {}",
                    field(group, index, "raft_last_applied"),
                    field(group, index, "raft_snapshot_index"),
                    group.digest(index)
                )
            })
            .collect();
        panic!("replicas diverged (leader {leader} applied {applied}): {states:#?}");
    }
    assert_ne!(digests[0], "0".repeat(40));
    digests[0].clone()
}

/// Runs `arguments` on the current leader, going to whichever replica leads
/// while the answer is a refusal that applied nothing (MOVED, CLUSTERDOWN,
/// READONLY); returns the first other answer.
fn on_leader<T: redis::FromRedisValue>(
    group: &Group,
    arguments: &[&str],
    limit: Duration,
) -> redis::RedisResult<T> {
    let deadline = Instant::now() + limit;
    loop {
        let leader = group.wait_leader(limit);
        let mut connection = group.client(leader);
        match query::<T>(&mut connection, arguments) {
            Err(error)
                if matches!(error.code(), Some("MOVED" | "CLUSTERDOWN" | "READONLY"))
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
}

#[test]
fn scripts_using_random_time_and_spop_leave_every_replica_identical() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    let members = ["a", "b", "c", "d", "e", "f", "g", "h", "i", "j"];
    let mut sadd = vec!["SADD", "pool"];
    sadd.extend(members);
    let added: i64 = query(&mut connection, &sadd).unwrap();
    assert_eq!(added, 10);

    let before = unix_seconds();
    let mut written = Vec::new();
    for index in 0..5 {
        let key = format!("random:{index}");
        let value: String = query(&mut connection, &["EVAL", RANDOM_WRITE, "1", &key]).unwrap();
        let (random, seconds) = value
            .split_once(':')
            .unwrap_or_else(|| panic!("unexpected value {value:?}"));
        let random: f64 = random.parse().unwrap();
        assert!((0.0..1.0).contains(&random), "{value}");
        let seconds: u64 = seconds.parse().unwrap();
        assert!(
            seconds + 1 >= before && seconds <= unix_seconds() + 1,
            "TIME inside the script is the entry's time: {value}, now {before}"
        );
        let stored: String = query(&mut connection, &["GET", &key]).unwrap();
        assert_eq!(stored, value);
        written.push((key, value));
    }
    // EVALSHA of the body EVAL cached runs the same script.
    let value: String = query(
        &mut connection,
        &["EVALSHA", RANDOM_WRITE_SHA, "1", "random:sha"],
    )
    .unwrap();
    written.push(("random:sha".to_string(), value));

    let mut popped = Vec::new();
    for _ in 0..3 {
        let (member, picked): (String, i64) = query(
            &mut connection,
            &["EVAL", SET_DRAW, "3", "pool", "drawn", "dice"],
        )
        .unwrap();
        assert!(members.contains(&member.as_str()), "{member}");
        assert!(!popped.contains(&member), "{member} popped twice");
        assert_eq!(picked, 3);
        popped.push(member);
    }
    let left: i64 = query(&mut connection, &["SCARD", "pool"]).unwrap();
    assert_eq!(left, 7);
    let drawn: Vec<String> = query(&mut connection, &["LRANGE", "drawn", "0", "-1"]).unwrap();
    assert_eq!(drawn.len(), 12);
    assert_eq!(
        [drawn[0].clone(), drawn[4].clone(), drawn[8].clone()],
        [popped[0].clone(), popped[1].clone(), popped[2].clone()]
    );
    let dice: HashFields = query(&mut connection, &["HGETALL", "dice"]).unwrap();

    let digest = assert_replicas_agree(&group, leader);
    for index in (0..3).filter(|index| *index != leader) {
        let mut follower = readonly_client(&group, index);
        for (key, value) in &written {
            let stored: String = query(&mut follower, &["GET", key]).unwrap();
            assert_eq!(&stored, value, "replica {index}, key {key}");
        }
        let on_follower: Vec<String> =
            query(&mut follower, &["LRANGE", "drawn", "0", "-1"]).unwrap();
        assert_eq!(on_follower, drawn, "replica {index}");
        let on_follower: HashFields = query(&mut follower, &["HGETALL", "dice"]).unwrap();
        assert_eq!(on_follower, dice, "replica {index}");
        // The cached body reached the replica's script store.
        let exists: Vec<i64> = query(
            &mut follower,
            &["SCRIPT", "EXISTS", RANDOM_WRITE_SHA, UNKNOWN_SHA],
        )
        .unwrap();
        assert_eq!(exists, vec![1, 0], "replica {index}");
    }

    // The script store is part of the digest: loading a script changes it,
    // on every replica alike.
    let sha: String = query(&mut connection, &["SCRIPT", "LOAD", INCR_SCRIPT]).unwrap();
    assert_eq!(sha, INCR_SCRIPT_SHA);
    let after_load = assert_replicas_agree(&group, leader);
    assert_ne!(after_load, digest, "SCRIPT LOAD did not change the digest");
    let flushed: String = query(&mut connection, &["SCRIPT", "FLUSH"]).unwrap();
    assert_eq!(flushed, "OK");
    let after_flush = assert_replicas_agree(&group, leader);
    assert_ne!(
        after_flush, after_load,
        "SCRIPT FLUSH did not change the digest"
    );
    for index in 0..3 {
        let exists: Vec<i64> = query(
            &mut readonly_client(&group, index),
            &["SCRIPT", "EXISTS", RANDOM_WRITE_SHA, INCR_SCRIPT_SHA],
        )
        .unwrap();
        assert_eq!(exists, vec![0, 0], "replica {index} after SCRIPT FLUSH");
    }
}

#[test]
fn loaded_scripts_and_functions_survive_a_leader_failover() {
    let mut group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    let sha: String = query(&mut connection, &["SCRIPT", "LOAD", INCR_SCRIPT]).unwrap();
    assert_eq!(sha, INCR_SCRIPT_SHA);
    let library: String = query(&mut connection, &["FUNCTION", "LOAD", LIBRARY]).unwrap();
    assert_eq!(library, "counters");
    let counter: i64 = query(
        &mut connection,
        &["EVALSHA", INCR_SCRIPT_SHA, "1", "counter", "5"],
    )
    .unwrap();
    assert_eq!(counter, 5);
    let bumped: i64 = query(&mut connection, &["FCALL", "bump", "1", "bumped", "7"]).unwrap();
    assert_eq!(bumped, 7);

    // No waiting for the followers: what was acknowledged is committed, and
    // the next leader has it.
    group.kill(leader);
    let limit = Duration::from_secs(20);
    let counter: i64 = on_leader(
        &group,
        &["EVALSHA", INCR_SCRIPT_SHA, "1", "counter", "10"],
        limit,
    )
    .unwrap();
    assert_eq!(counter, 15);
    let new_leader = group.wait_leader(limit);
    assert_ne!(new_leader, leader);
    let mut connection = group.client(new_leader);
    let bumped: i64 = query(&mut connection, &["FCALL", "bump", "1", "bumped", "3"]).unwrap();
    assert_eq!(bumped, 10);
    let peeked: String = query(&mut connection, &["FCALL_RO", "peek", "1", "bumped"]).unwrap();
    assert_eq!(peeked, "10");
    let exists: Vec<i64> = query(
        &mut connection,
        &["SCRIPT", "EXISTS", INCR_SCRIPT_SHA, UNKNOWN_SHA],
    )
    .unwrap();
    assert_eq!(exists, vec![1, 0]);
    let error = query::<i64>(
        &mut connection,
        &["EVALSHA", UNKNOWN_SHA, "1", "counter", "1"],
    )
    .unwrap_err();
    assert_eq!(
        error_text(&error),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    let error = query::<i64>(&mut connection, &["FCALL", "missing", "0"]).unwrap_err();
    assert_eq!(error_text(&error), "ERR Function not found");

    // The old leader comes back and catches up, store included.
    group.spawn(leader);
    assert_replicas_agree(&group, new_leader);
    let mut old = readonly_client(&group, leader);
    let exists: Vec<i64> = query(&mut old, &["SCRIPT", "EXISTS", INCR_SCRIPT_SHA]).unwrap();
    assert_eq!(exists, vec![1]);
    let peeked: String = query(&mut old, &["FCALL_RO", "peek", "1", "bumped"]).unwrap();
    assert_eq!(peeked, "10");
}

#[test]
fn scripts_and_functions_survive_a_full_restart() {
    // Small snapshots: the first script and the library are restored from a
    // snapshot, the second script from the log after it.
    let mut group = Group::start(
        3,
        &["--raft-snapshot-entries", "20", "--raft-keep-entries", "2"],
    );
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    let sha: String = query(&mut connection, &["SCRIPT", "LOAD", INCR_SCRIPT]).unwrap();
    assert_eq!(sha, INCR_SCRIPT_SHA);
    let library: String = query(&mut connection, &["FUNCTION", "LOAD", LIBRARY]).unwrap();
    assert_eq!(library, "counters");
    let loaded_at = field(&group, leader, "raft_last_applied");
    for index in 0..40 {
        let _: () = query(&mut connection, &["SET", &format!("fill:{index}"), "x"]).unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    while field(&group, leader, "raft_snapshot_index") <= loaded_at {
        assert!(
            Instant::now() < deadline,
            "no snapshot taken past the loads"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let sha: String = query(&mut connection, &["SCRIPT", "LOAD", READ_SCRIPT]).unwrap();
    assert_eq!(sha, READ_SCRIPT_SHA);
    let counter: i64 = query(
        &mut connection,
        &["EVALSHA", INCR_SCRIPT_SHA, "1", "counter", "2"],
    )
    .unwrap();
    assert_eq!(counter, 2);
    let before = assert_replicas_agree(&group, leader);
    let applied = field(&group, leader, "raft_last_applied");

    for index in 0..3 {
        group.kill(index);
    }
    for index in 0..3 {
        group.spawn(index);
    }
    group.wait_leader(Duration::from_secs(20));
    group.wait_applied(applied, Duration::from_secs(20));
    for index in 0..3 {
        assert_eq!(group.digest(index), before, "replica {index} after restart");
    }
    let limit = Duration::from_secs(20);
    let exists: Vec<i64> = on_leader(
        &group,
        &[
            "SCRIPT",
            "EXISTS",
            INCR_SCRIPT_SHA,
            READ_SCRIPT_SHA,
            UNKNOWN_SHA,
        ],
        limit,
    )
    .unwrap();
    assert_eq!(exists, vec![1, 1, 0]);
    let counter: i64 = on_leader(
        &group,
        &["EVALSHA", INCR_SCRIPT_SHA, "1", "counter", "3"],
        limit,
    )
    .unwrap();
    assert_eq!(counter, 5);
    let value: String =
        on_leader(&group, &["EVALSHA", READ_SCRIPT_SHA, "1", "counter"], limit).unwrap();
    assert_eq!(value, "5");
    let bumped: i64 = on_leader(&group, &["FCALL", "bump", "1", "counter", "4"], limit).unwrap();
    assert_eq!(bumped, 9);
    let peeked: String = on_leader(&group, &["FCALL_RO", "peek", "1", "counter"], limit).unwrap();
    assert_eq!(peeked, "9");
    let leader = group.wait_leader(limit);
    assert_replicas_agree(&group, leader);
}

#[test]
fn a_runaway_script_stops_at_the_same_budget_on_every_replica() {
    let group = Group::start(3, &["--lua-instruction-limit", "5000000"]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    let error = query::<()>(&mut connection, &["EVAL", RUNAWAY, "1", "k"]).unwrap_err();
    assert_eq!(
        error_text(&error),
        format!("{BUDGET_EXCEEDED} script: {RUNAWAY_SHA}, on @user_script:1.")
    );
    // Effects are not rolled back: the write before the loop stays.
    let value: String = query(&mut connection, &["GET", "k"]).unwrap();
    assert_eq!(value, "before");
    // The same again by sha, and inside a transaction, between two writes
    // that apply regardless.
    let _: () = query(&mut connection, &["DEL", "k"]).unwrap();
    let error = query::<()>(&mut connection, &["EVALSHA", RUNAWAY_SHA, "1", "k"]).unwrap_err();
    assert!(error_text(&error).starts_with(BUDGET_EXCEEDED), "{error}");
    // The client library turns an error inside EXEC into an error of the
    // whole reply: read EXEC's reply raw.
    let _: () = query(&mut connection, &["MULTI"]).unwrap();
    for command in [
        vec!["SET", "k2", "first"],
        vec!["EVAL", RUNAWAY, "1", "k3"],
        vec!["SET", "k4", "last"],
    ] {
        let queued: String = query(&mut connection, &command).unwrap();
        assert_eq!(queued, "QUEUED");
    }
    let replies = match connection.req_command(&redis::cmd("EXEC")).unwrap() {
        redis::Value::Array(replies) => replies,
        other => panic!("EXEC answered {other:?}"),
    };
    assert_eq!(replies.len(), 3, "{replies:?}");
    assert_eq!(replies[0], redis::Value::Okay);
    match &replies[1] {
        redis::Value::ServerError(error) => assert_eq!(
            format!("{} {}", error.code(), error.details().unwrap_or_default()),
            format!("{BUDGET_EXCEEDED} script: {RUNAWAY_SHA}, on @user_script:1.")
        ),
        other => panic!("EVAL inside EXEC answered {other:?}"),
    }
    assert_eq!(replies[2], redis::Value::Okay);
    for (key, expected) in [
        ("k", "before"),
        ("k2", "first"),
        ("k3", "before"),
        ("k4", "last"),
    ] {
        let value: String = query(&mut connection, &["GET", key]).unwrap();
        assert_eq!(value, expected, "{key}");
    }
    assert_replicas_agree(&group, leader);
    for index in 0..3 {
        let value: String = query(&mut readonly_client(&group, index), &["GET", "k3"]).unwrap();
        assert_eq!(value, "before", "replica {index}");
    }
    // A read-only run on a follower has the same budget.
    let follower = (leader + 1) % 3;
    let error = query::<()>(
        &mut readonly_client(&group, follower),
        &["EVAL_RO", SPIN, "0"],
    )
    .unwrap_err();
    assert_eq!(
        error_text(&error),
        format!("{BUDGET_EXCEEDED} script: {SPIN_SHA}, on @user_script:1.")
    );
    assert_replicas_agree(&group, leader);
}

/// The script that `run` waits for, once `probe`'s node reports it busy
/// (CONFIG GET answers BUSY). The node must keep answering while the script
/// runs: a node that stops serving until the script ends fails here. (CONFIG
/// is served by the node itself, so the probe never waits for the keyspace.)
fn wait_busy(
    what: &str,
    probe: &mut redis::Connection,
    run: std::thread::JoinHandle<redis::RedisResult<()>>,
) -> std::thread::JoinHandle<redis::RedisResult<()>> {
    let started = Instant::now();
    let mut answers = Vec::new();
    loop {
        let sent = started.elapsed();
        match query::<Vec<String>>(probe, &["CONFIG", "GET", "busy-reply-threshold"]) {
            Ok(config) => assert_eq!(config, ["busy-reply-threshold", "50"]),
            Err(error) => {
                assert_eq!(error_text(&error), BUSY);
                return run;
            }
        }
        answers.push((sent, started.elapsed()));
        if run.is_finished() {
            panic!(
                "{what}: the script ended before the node reported it busy: {:?} after {:?}; probes (sent, answered): {answers:?}",
                run.join(),
                started.elapsed()
            );
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{what}: the script never became busy"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_script_running_longer_than_the_write_limit_still_gets_its_reply() {
    // Several seconds of loop on each replica: longer than the leader waits
    // for an ordinary write to commit.
    let group = Group::start(3, &["--lua-instruction-limit", "2000000000"]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let term = field(&group, leader, "raft_term");
    let mut connection = group.client(leader);
    connection
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let started = Instant::now();
    let error = query::<()>(&mut connection, &["EVAL", RUNAWAY, "1", "k"]).unwrap_err();
    eprintln!(
        "a 2e9-instruction script answered after {:?}",
        started.elapsed()
    );
    assert_eq!(
        error_text(&error),
        format!("{BUDGET_EXCEEDED} script: {RUNAWAY_SHA}, on @user_script:1.")
    );
    let value: String = query(&mut connection, &["GET", "k"]).unwrap();
    assert_eq!(value, "before");
    assert_eq!(
        field(&group, leader, "raft_term"),
        term,
        "an election happened"
    );
    assert_replicas_agree(&group, leader);
}

#[test]
fn a_script_from_the_log_is_unkillable_but_a_follower_read_can_be_killed() {
    // A budget of a second or more, and BUSY after 50 ms.
    let group = Group::start(
        3,
        &[
            "--lua-instruction-limit",
            "300000000",
            "--busy-reply-threshold",
            "50",
        ],
    );
    let leader = group.wait_leader(Duration::from_secs(10));
    let term = field(&group, leader, "raft_term");
    // Connections made before the script runs (connecting sends commands).
    let mut killer = group.client(leader);
    let mut bystander = group.client(leader);
    let mut runner = group.client(leader);
    runner
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let run = std::thread::spawn(move || query::<()>(&mut runner, &["EVAL", RUNAWAY, "1", "k"]));
    let run = wait_busy("EVAL on the leader", &mut bystander, run);
    let error = query::<()>(&mut killer, &["SCRIPT", "KILL"]).unwrap_err();
    assert_eq!(
        error_text(&error),
        "UNKILLABLE The busy script runs through the replicated log: it is applied on every replica alike and stops only at its instruction budget (lua-instruction-limit)."
    );
    let error = query::<()>(&mut killer, &["FUNCTION", "KILL"]).unwrap_err();
    assert!(error_text(&error).starts_with("UNKILLABLE "), "{error}");
    let error = query::<()>(&mut bystander, &["GET", "k"]).unwrap_err();
    assert_eq!(error_text(&error), BUSY);
    assert!(!run.is_finished(), "the budget ran out too early to test");
    let error = run.join().unwrap().unwrap_err();
    assert_eq!(
        error_text(&error),
        format!("{BUDGET_EXCEEDED} script: {RUNAWAY_SHA}, on @user_script:1.")
    );
    let value: String = query(&mut bystander, &["GET", "k"]).unwrap();
    assert_eq!(value, "before");
    // The leader kept leading through the run: its heartbeats went on.
    assert_eq!(group.wait_leader(Duration::from_secs(10)), leader);
    assert_eq!(
        field(&group, leader, "raft_term"),
        term,
        "an election happened"
    );
    assert_replicas_agree(&group, leader);

    // A read-only run served by a follower changes nothing replicated: it can
    // be killed. Entries committed meanwhile wait for it, without stopping the
    // follower.
    let follower = (leader + 1) % 3;
    let mut killer = group.client(follower);
    let mut probe = group.client(follower);
    let mut runner = readonly_client(&group, follower);
    runner
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let run = std::thread::spawn(move || query::<()>(&mut runner, &["EVAL_RO", SPIN, "0"]));
    let run = wait_busy("EVAL_RO on a follower", &mut probe, run);
    let _: () = query(&mut bystander, &["SET", "during", "read"]).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let killed: String = query(&mut killer, &["SCRIPT", "KILL"]).unwrap();
    assert_eq!(killed, "OK");
    let error = run.join().unwrap().unwrap_err();
    assert_eq!(
        error_text(&error),
        format!(
            "ERR Script killed by user with SCRIPT KILL... script: {SPIN_SHA}, on @user_script:1."
        )
    );
    let error = query::<()>(&mut killer, &["SCRIPT", "KILL"]).unwrap_err();
    assert_eq!(
        error_text(&error),
        "NOTBUSY No scripts in execution right now."
    );
    assert_replicas_agree(&group, leader);
    let value: String = query(&mut readonly_client(&group, follower), &["GET", "during"]).unwrap();
    assert_eq!(value, "read");
    assert_eq!(
        field(&group, leader, "raft_term"),
        term,
        "an election happened"
    );
}

#[test]
fn reads_arriving_as_a_long_script_starts_do_not_stall_the_leader() {
    let group = Group::start(
        3,
        &[
            "--lua-instruction-limit",
            "200000000",
            "--busy-reply-threshold",
            "50",
        ],
    );
    let leader = group.wait_leader(Duration::from_secs(10));
    let term = field(&group, leader, "raft_term");
    // A body that takes a while to compile: the leader applies the entry (and
    // holds the shard's state) while it compiles, before the script runs.
    let mut body = String::from("redis.call('SET', KEYS[1], 'before')\n");
    for _ in 0..50_000 {
        body.push_str("if false then x = 1 end\n");
    }
    body.push_str("local i = 0 while true do i = i + 1 end");
    let mut probe = group.client(leader);
    let mut reader = group.client(leader);
    let mut runner = group.client(leader);
    runner
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let run = std::thread::spawn(move || query::<()>(&mut runner, &["EVAL", &body, "1", "k"]));
    // Plain (linearizable) reads keep coming while the entry applies.
    let reads = std::thread::spawn(move || {
        let started = Instant::now();
        let mut answers = Vec::new();
        while started.elapsed() < Duration::from_secs(1) {
            let sent = started.elapsed();
            let answer = query::<Option<String>>(&mut reader, &["GET", "k"])
                .map_err(|error| error_text(&error));
            let busy = answer.as_ref().is_err_and(|error| error == BUSY);
            answers.push((sent, started.elapsed(), answer));
            if busy {
                break;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        answers
    });
    let run = wait_busy("EVAL on the leader", &mut probe, run);
    let answers = reads.join().unwrap();
    // Each read saw the key before the entry, after it, or was told BUSY.
    for (_, _, answer) in &answers {
        let fine = match answer {
            Ok(value) => value.is_none() || value.as_deref() == Some("before"),
            Err(error) => error == BUSY,
        };
        assert!(fine, "{answers:?}");
    }
    let error = run.join().unwrap().unwrap_err();
    let text = error_text(&error);
    assert!(
        text.starts_with(&format!("{BUDGET_EXCEEDED} script: "))
            && text.ends_with(", on @user_script:50002."),
        "{text}"
    );
    assert_eq!(group.wait_leader(Duration::from_secs(10)), leader);
    assert_eq!(
        field(&group, leader, "raft_term"),
        term,
        "an election happened"
    );
    assert_replicas_agree(&group, leader);
}

#[test]
fn read_only_scripts_run_on_followers_and_writing_scripts_are_redirected() {
    let mut group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let leader_port = group.members[leader].port;
    let mut connection = group.client(leader);
    let _: () = query(&mut connection, &["SET", "foo", "v1"]).unwrap();
    let sha: String = query(&mut connection, &["SCRIPT", "LOAD", READ_SCRIPT]).unwrap();
    assert_eq!(sha, READ_SCRIPT_SHA);
    let library: String = query(&mut connection, &["FUNCTION", "LOAD", LIBRARY]).unwrap();
    assert_eq!(library, "counters");
    let before = assert_replicas_agree(&group, leader);

    let follower = (leader + 1) % 3;
    let mut plain = group.client(follower);
    // Without READONLY, reads and writes go to the leader.
    for command in [
        vec!["EVAL_RO", READ_SCRIPT, "1", "foo"],
        vec!["EVAL", WRITE_SCRIPT, "1", "foo"],
        vec!["EVALSHA", READ_SCRIPT_SHA, "1", "foo"],
        vec!["FCALL", "bump", "1", "foo", "1"],
        vec!["FCALL_RO", "peek", "1", "foo"],
    ] {
        let error = query::<String>(&mut plain, &command).unwrap_err();
        assert_eq!(
            error_text(&error),
            format!("MOVED 12182 127.0.0.1:{leader_port}"),
            "{}",
            command[0]
        );
    }
    // A keyless writing script has no slot to redirect by.
    let error = query::<String>(&mut plain, &["EVAL", "return 1", "0"]).unwrap_err();
    assert_eq!(
        error_text(&error),
        "READONLY You can't write against a read only replica."
    );

    let mut replica = readonly_client(&group, follower);
    let value: String = query(&mut replica, &["EVAL_RO", READ_SCRIPT, "1", "foo"]).unwrap();
    assert_eq!(value, "v1");
    let value: String = query(&mut replica, &["EVALSHA_RO", READ_SCRIPT_SHA, "1", "foo"]).unwrap();
    assert_eq!(value, "v1");
    let value: String = query(&mut replica, &["FCALL_RO", "peek", "1", "foo"]).unwrap();
    assert_eq!(value, "v1");
    let error = query::<String>(&mut replica, &["EVAL_RO", WRITE_SCRIPT, "1", "foo"]).unwrap_err();
    assert_eq!(
        error_text(&error),
        format!(
            "ERR Write commands are not allowed from read-only scripts. script: {WRITE_SCRIPT_SHA}, on @user_script:1."
        )
    );
    let error = query::<String>(&mut replica, &["FCALL_RO", "bump", "1", "foo", "1"]).unwrap_err();
    assert_eq!(
        error_text(&error),
        "ERR Can not execute a script with write flag using *_ro command."
    );
    // READONLY serves reads locally; writes still go to the leader.
    let error = query::<String>(&mut replica, &["EVAL", WRITE_SCRIPT, "1", "foo"]).unwrap_err();
    assert_eq!(
        error_text(&error),
        format!("MOVED 12182 127.0.0.1:{leader_port}")
    );
    // Runs outside the log leave the replica's state alone: EVAL_RO of a new
    // body caches nothing, and nothing was written.
    let exists: Vec<i64> = query(
        &mut replica,
        &["SCRIPT", "EXISTS", WRITE_SCRIPT_SHA, READ_SCRIPT_SHA],
    )
    .unwrap();
    assert_eq!(exists, vec![0, 1]);
    assert_eq!(assert_replicas_agree(&group, leader), before);

    // A change on the leader reaches the follower's answer.
    let _: () = query(&mut connection, &["SET", "foo", "v2"]).unwrap();
    assert_replicas_agree(&group, leader);
    let value: String = query(&mut replica, &["EVAL_RO", READ_SCRIPT, "1", "foo"]).unwrap();
    assert_eq!(value, "v2");

    // With the rest of the group gone, the follower still answers read-only
    // scripts from its own state.
    group.kill(leader);
    group.kill((leader + 2) % 3);
    let value: String = query(&mut replica, &["EVALSHA_RO", READ_SCRIPT_SHA, "1", "foo"]).unwrap();
    assert_eq!(value, "v2");
    let value: String = query(&mut replica, &["FCALL_RO", "peek", "1", "foo"]).unwrap();
    assert_eq!(value, "v2");
}

#[test]
fn a_transaction_with_scripts_applies_atomically_on_every_replica() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    let library: String = query(&mut connection, &["FUNCTION", "LOAD", LIBRARY]).unwrap();
    assert_eq!(library, "counters");
    let (set, incremented, random, bumped, counter): (String, i64, String, i64, i64) =
        redis::pipe()
            .atomic()
            .cmd("SET")
            .arg("tx:a")
            .arg(1)
            .cmd("EVAL")
            .arg(INCR_SCRIPT)
            .arg(1)
            .arg("tx:a")
            .arg(41)
            .cmd("EVAL")
            .arg(RANDOM_WRITE)
            .arg(1)
            .arg("tx:random")
            .cmd("FCALL")
            .arg("bump")
            .arg(1)
            .arg("tx:a")
            .arg(100)
            .cmd("INCR")
            .arg("tx:a")
            .query(&mut connection)
            .unwrap();
    assert_eq!(set, "OK");
    assert_eq!(incremented, 42);
    assert_eq!(bumped, 142);
    assert_eq!(counter, 143);
    assert!(random.contains(':'), "{random}");
    // The EVAL inside the transaction cached its body, as outside.
    let exists: Vec<i64> = query(
        &mut connection,
        &["SCRIPT", "EXISTS", INCR_SCRIPT_SHA, RANDOM_WRITE_SHA],
    )
    .unwrap();
    assert_eq!(exists, vec![1, 1]);
    assert_replicas_agree(&group, leader);
    for index in 0..3 {
        let mut replica = readonly_client(&group, index);
        let value: String = query(&mut replica, &["GET", "tx:random"]).unwrap();
        assert_eq!(value, random, "replica {index}");
        let value: i64 = query(&mut replica, &["GET", "tx:a"]).unwrap();
        assert_eq!(value, 143, "replica {index}");
    }

    // A script the transaction's WATCH guards: a change in between aborts the
    // whole transaction, script included, on every replica.
    let mut other = group.client(leader);
    let _: () = query(&mut connection, &["WATCH", "tx:a"]).unwrap();
    let _: i64 = query(&mut other, &["INCR", "tx:a"]).unwrap();
    let aborted: Option<(i64,)> = redis::pipe()
        .atomic()
        .cmd("EVAL")
        .arg(INCR_SCRIPT)
        .arg(1)
        .arg("tx:a")
        .arg(1000)
        .query(&mut connection)
        .unwrap();
    assert_eq!(aborted, None);
    let value: i64 = query(&mut connection, &["GET", "tx:a"]).unwrap();
    assert_eq!(value, 144);
    assert_replicas_agree(&group, leader);

    // On a follower, the queued script is redirected and EXEC aborts.
    let follower = (leader + 1) % 3;
    let mut on_follower = group.client(follower);
    let _: () = query(&mut on_follower, &["MULTI"]).unwrap();
    let error =
        query::<String>(&mut on_follower, &["EVAL", INCR_SCRIPT, "1", "foo", "1"]).unwrap_err();
    assert_eq!(
        error_text(&error),
        format!("MOVED 12182 127.0.0.1:{}", group.members[leader].port)
    );
    let error = query::<Vec<String>>(&mut on_follower, &["EXEC"]).unwrap_err();
    assert_eq!(
        error_text(&error),
        "EXECABORT Transaction discarded because of previous errors."
    );
}

/// MONITOR on the leader shows a replicated script, then the commands it ran
/// as the Lua client (recorded when the leader applies the entry); a
/// follower's monitor shows nothing of entries it only applies from the log.
#[test]
fn monitor_on_the_leader_shows_what_a_replicated_script_ran() {
    use slotraft_tests::support::Raw;
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let follower = (leader + 1) % 3;
    let mut monitor = Raw::connect(group.members[leader].port);
    monitor.roundtrip(&["MONITOR"], "+OK\r\n");
    let mut watcher = Raw::connect(group.members[follower].port);
    watcher.roundtrip(&["MONITOR"], "+OK\r\n");
    let mut client = Raw::connect(group.members[leader].port);
    client.roundtrip(
        &[
            "EVAL",
            "redis.call('SET', KEYS[1], 'v') return redis.call('INCR', KEYS[2])",
            "2",
            "{t}a",
            "{t}n",
        ],
        ":1\r\n",
    );
    client.roundtrip(&["SET", "after", "1"], "+OK\r\n");
    let lines = monitor.read_lines(4);
    let tails: Vec<&str> = lines
        .iter()
        .map(|line| line.split_once(' ').unwrap().1)
        .collect();
    assert!(tails[0].contains("] \"EVAL\" "), "{}", tails[0]);
    assert_eq!(tails[1], "[0 lua] \"SET\" \"{t}a\" \"v\"");
    assert_eq!(tails[2], "[0 lua] \"INCR\" \"{t}n\"");
    assert!(
        tails[3].ends_with("] \"SET\" \"after\" \"1\""),
        "{}",
        tails[3]
    );
    // A transaction shows as it runs: its commands when EXEC ran them, then
    // EXEC; a discarded one only MULTI and DISCARD.
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["SET", "gone", "1"], "+QUEUED\r\n");
    client.roundtrip(&["DISCARD"], "+OK\r\n");
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["INCR", "{t}n"], "+QUEUED\r\n");
    client.roundtrip(&["EXEC"], "*1\r\n:2\r\n");
    let lines = monitor.read_lines(5);
    let tails: Vec<&str> = lines
        .iter()
        .map(|line| line.split_once("] ").unwrap().1)
        .collect();
    assert_eq!(
        tails,
        [
            "\"MULTI\"",
            "\"DISCARD\"",
            "\"MULTI\"",
            "\"INCR\" \"{t}n\"",
            "\"EXEC\""
        ]
    );
    // The follower applied both entries but was sent neither command.
    group.wait_applied(
        field(&group, leader, "raft_last_applied"),
        Duration::from_secs(10),
    );
    // Before the reply to RESET it saw only the test's own clients (the
    // applied-index checks connect to every replica), nothing of the script.
    watcher.send(b"*1\r\n$5\r\nRESET\r\n");
    loop {
        let line = watcher.read_lines(1).remove(0);
        if line == "+RESET" {
            break;
        }
        assert!(
            !line.contains(" lua]") && !line.contains("EVAL"),
            "a follower's monitor saw {line}"
        );
    }
}
