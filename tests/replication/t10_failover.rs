//! Three replicas on loopback: redirects, failover after kill -9, catch-up.

use slotraft_tests::support::group::Group;
use std::time::{Duration, Instant};

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

#[test]
fn followers_redirect_writes_and_serve_readonly_reads() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let follower = (leader + 1) % 3;
    let mut on_leader = group.client(leader);
    let _: () = query(&mut on_leader, &["SET", "foo", "bar"]).unwrap();
    let leader_port = group.members[leader].port;

    let mut on_follower = group.client(follower);
    let error = query::<String>(&mut on_follower, &["SET", "foo", "baz"]).unwrap_err();
    assert_eq!(
        error_text(&error),
        format!("MOVED 12182 127.0.0.1:{leader_port}")
    );
    let error = query::<String>(&mut on_follower, &["GET", "foo"]).unwrap_err();
    assert_eq!(
        error_text(&error),
        format!("MOVED 12182 127.0.0.1:{leader_port}")
    );
    let error = query::<String>(&mut on_follower, &["FLUSHALL"]).unwrap_err();
    assert_eq!(
        error_text(&error),
        "READONLY You can't write against a read only replica."
    );

    // READONLY: the follower answers from its own (possibly stale) state.
    let _: () = query(&mut on_follower, &["READONLY"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let value: Option<String> = query(&mut on_follower, &["GET", "foo"]).unwrap();
        if value.as_deref() == Some("bar") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "follower never applied the write"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // Writes still go to the leader; READWRITE restores redirects for reads.
    let error = query::<String>(&mut on_follower, &["SET", "foo", "baz"]).unwrap_err();
    assert!(error_text(&error).starts_with("MOVED 12182 "), "{error}");
    let _: () = query(&mut on_follower, &["READWRITE"]).unwrap();
    let error = query::<String>(&mut on_follower, &["GET", "foo"]).unwrap_err();
    assert!(error_text(&error).starts_with("MOVED 12182 "), "{error}");
}

/// Writes `SET key value` on whichever replica leads, following redirects,
/// until one is acknowledged; returns when it was.
fn write_until_acknowledged(group: &Group, key: &str, value: &str, limit: Duration) -> Instant {
    let deadline = Instant::now() + limit;
    loop {
        for index in 0..group.members.len() {
            if !group.is_running(index) {
                continue;
            }
            let url = format!("redis://127.0.0.1:{}/", group.members[index].port);
            let Ok(mut connection) = redis::Client::open(url).and_then(|c| c.get_connection())
            else {
                continue;
            };
            if query::<()>(&mut connection, &["SET", key, value]).is_ok() {
                return Instant::now();
            }
        }
        assert!(
            Instant::now() < deadline,
            "no write acknowledged in {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn leader_kill_fails_over_and_the_restarted_replica_catches_up() {
    let mut group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    for index in 0..200 {
        let _: () = query(
            &mut connection,
            &["SET", &format!("key:{index}"), &index.to_string()],
        )
        .unwrap();
    }
    for _ in 0..50 {
        let _: i64 = query(&mut connection, &["INCR", "counter"]).unwrap();
    }
    let _: () = query(&mut connection, &["SET", "volatile", "x", "PX", "600000"]).unwrap();

    group.kill(leader);
    let killed = Instant::now();
    let acknowledged = write_until_acknowledged(&group, "after", "kill", Duration::from_secs(20));
    let failover = acknowledged - killed;
    eprintln!("failover: first write acknowledged {failover:?} after kill -9 of the leader");

    let new_leader = group.wait_leader(Duration::from_secs(10));
    assert_ne!(new_leader, leader);
    let mut connection = group.client(new_leader);
    let counter: i64 = query(&mut connection, &["INCR", "counter"]).unwrap();
    assert_eq!(counter, 51, "every acknowledged INCR survives the failover");
    let value: String = query(&mut connection, &["GET", "key:199"]).unwrap();
    assert_eq!(value, "199");
    let ttl: i64 = query(&mut connection, &["PTTL", "volatile"]).unwrap();
    assert!(ttl > 500_000, "TTL kept across failover: {ttl}");

    group.spawn(leader);
    let applied: u64 = group
        .info_field(new_leader, "raft_last_applied")
        .unwrap()
        .parse()
        .unwrap();
    group.wait_applied(applied, Duration::from_secs(20));
    let digests: Vec<String> = (0..3).map(|index| group.digest(index)).collect();
    assert_eq!(digests[0], digests[1]);
    assert_eq!(digests[1], digests[2]);
    assert_ne!(digests[0], "0".repeat(40));
}

#[test]
fn without_a_majority_the_shard_is_down_but_readonly_reads_work() {
    let mut group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let _: () = query(&mut group.client(leader), &["SET", "k", "v"]).unwrap();
    let survivor = (leader + 1) % 3;
    let other = (leader + 2) % 3;
    // Let the survivor apply the write before its peers go away.
    let applied: u64 = group
        .info_field(leader, "raft_last_applied")
        .unwrap()
        .parse()
        .unwrap();
    group.wait_applied(applied, Duration::from_secs(10));
    group.kill(leader);
    group.kill(other);
    let mut connection = group.client(survivor);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match query::<()>(&mut connection, &["SET", "k", "w"]) {
            Err(error) if error_text(&error) == "CLUSTERDOWN The cluster is down" => break,
            Err(error) => assert!(
                error_text(&error).starts_with("MOVED "),
                "unexpected error {error}"
            ),
            Ok(()) => panic!("a lone replica acknowledged a write"),
        }
        assert!(Instant::now() < deadline, "never reported the cluster down");
        std::thread::sleep(Duration::from_millis(50));
    }
    let error = query::<String>(&mut connection, &["GET", "k"]).unwrap_err();
    assert_eq!(error_text(&error), "CLUSTERDOWN The cluster is down");
    let _: () = query(&mut connection, &["READONLY"]).unwrap();
    let value: String = query(&mut connection, &["GET", "k"]).unwrap();
    assert_eq!(value, "v");
}
