//! MIGRATE on a replicated shard: its leader moves keys to another server
//! and deletes them through the log, so every replica loses them; a
//! follower redirects; a key written while its copy was on the way is kept.

use slotraft_tests::support::group::Group;
use slotraft_tests::support::RedisServer;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::Duration;

fn query<T: redis::FromRedisValue>(connection: &mut redis::Connection, words: &[&str]) -> T {
    let mut command = redis::cmd(words[0]);
    command.arg(&words[1..]);
    command.query(connection).unwrap()
}

#[test]
fn the_leader_migrates_keys_and_every_replica_deletes_them() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let redis = RedisServer::start();
    let mut here = group.client(leader);
    let mut there = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let () = query(&mut here, &["SET", "plain", "v", "PX", "100000"]);
    let _: i64 = query(&mut here, &["RPUSH", "queue", "a", "b"]);
    let _: String = query(&mut here, &["XADD", "events", "1-1", "kind", "login"]);
    let port = redis.port.to_string();
    let moved: String = query(
        &mut here,
        &["MIGRATE", "127.0.0.1", &port, "plain", "0", "5000"],
    );
    assert_eq!(moved, "OK");
    let moved: String = query(
        &mut here,
        &[
            "MIGRATE",
            "127.0.0.1",
            &port,
            "",
            "0",
            "5000",
            "KEYS",
            "queue",
            "events",
            "absent",
        ],
    );
    assert_eq!(moved, "OK");
    let copied: String = query(&mut here, &["SET", "kept", "1"]);
    assert_eq!(copied, "OK");
    let copied: String = query(
        &mut here,
        &["MIGRATE", "127.0.0.1", &port, "kept", "0", "5000", "COPY"],
    );
    assert_eq!(copied, "OK");
    let nokey: String = query(
        &mut here,
        &["MIGRATE", "127.0.0.1", &port, "absent", "0", "5000"],
    );
    assert_eq!(nokey, "NOKEY");
    // The target has them, with the time to live.
    let value: String = query(&mut there, &["GET", "plain"]);
    assert_eq!(value, "v");
    let ttl: i64 = query(&mut there, &["PTTL", "plain"]);
    assert!((90_000..=100_000).contains(&ttl), "{ttl}");
    let queue: Vec<String> = query(&mut there, &["LRANGE", "queue", "0", "-1"]);
    assert_eq!(queue, ["a", "b"]);
    let events: i64 = query(&mut there, &["XLEN", "events"]);
    assert_eq!(events, 1);
    let kept: String = query(&mut there, &["GET", "kept"]);
    assert_eq!(kept, "1");
    // Gone from every replica (deleted through the log), but the copy.
    group.assert_replicas_agree(leader, Duration::from_secs(10));
    for index in 0..3 {
        let mut member = group.client(index);
        let _: String = query(&mut member, &["READONLY"]);
        let present: i64 = query(&mut member, &["EXISTS", "plain", "queue", "events", "kept"]);
        assert_eq!(present, 1, "member {index}");
    }
    // A follower sends MIGRATE to its leader.
    let follower = (leader + 1) % 3;
    let mut follower_client = group.client(follower);
    let error = redis::cmd("MIGRATE")
        .arg(&["127.0.0.1", &port, "kept", "0", "5000"])
        .query::<String>(&mut follower_client)
        .unwrap_err();
    assert_eq!(error.code(), Some("MOVED"), "{error:?}");
    // A refusal by the target is Redis's reply, and nothing is deleted.
    let error = redis::cmd("MIGRATE")
        .arg(&["127.0.0.1", &port, "kept", "0", "5000"])
        .query::<String>(&mut here)
        .unwrap_err();
    assert!(error.to_string().contains("BUSYKEY"), "{error}");
    let present: i64 = query(&mut here, &["EXISTS", "kept"]);
    assert_eq!(present, 1);
}

/// A target that answers RESTORE only when told to: meanwhile the key is
/// written on the shard, and the delete that follows must not lose that
/// write.
#[test]
fn a_key_written_while_its_copy_is_on_the_way_is_kept() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let (received_tx, received_rx) = std::sync::mpsc::channel();
    let (answer_tx, answer_rx) = std::sync::mpsc::channel::<()>();
    let target = std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut request = Vec::new();
        let mut buffer = [0u8; 4096];
        while !request
            .windows(7)
            .any(|window| window.eq_ignore_ascii_case(b"RESTORE"))
        {
            let read = stream.read(&mut buffer).unwrap();
            assert!(read > 0, "the target's client went away");
            request.extend_from_slice(&buffer[..read]);
        }
        received_tx.send(()).unwrap();
        answer_rx.recv().unwrap();
        // SELECT (the connection is new), then RESTORE.
        stream.write_all(b"+OK\r\n+OK\r\n").unwrap();
        std::thread::sleep(Duration::from_millis(500));
    });
    let mut here = group.client(leader);
    let () = query(&mut here, &["SET", "contended", "old"]);
    let migrating = std::thread::spawn({
        let mut client = group.client(leader);
        let port = port.clone();
        move || {
            redis::cmd("MIGRATE")
                .arg(&["127.0.0.1", &port, "contended", "0", "10000"])
                .query::<String>(&mut client)
        }
    });
    received_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    let () = query(&mut here, &["SET", "contended", "new"]);
    answer_tx.send(()).unwrap();
    let error = migrating.join().unwrap().unwrap_err();
    assert!(
        error
            .to_string()
            .contains("one was written here meanwhile, so none was deleted here"),
        "{error}"
    );
    let value: String = query(&mut here, &["GET", "contended"]);
    assert_eq!(value, "new");
    target.join().unwrap();
    group.assert_replicas_agree(leader, Duration::from_secs(10));
}
