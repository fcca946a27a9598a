//! MULTI/EXEC on a replicated shard: the transaction is one log entry, applied
//! together on every replica; a follower answers EXEC with the redirect.

use resp::Frame;
use slotraft_tests::support::group::Group;
use slotraft_tests::support::Raw;
use std::time::Duration;

#[test]
fn a_transaction_applies_on_every_replica_and_followers_redirect_it() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    let (set, counter): (String, i64) = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg("account:a")
        .arg(100)
        .cmd("DECRBY")
        .arg("account:a")
        .arg(30)
        .query(&mut connection)
        .unwrap();
    assert_eq!((set.as_str(), counter), ("OK", 70));
    group.assert_replicas_agree(leader, Duration::from_secs(10));

    let follower = (0..3).find(|index| *index != leader).unwrap();
    let mut connection = group.client(follower);
    let error = redis::pipe()
        .atomic()
        .cmd("INCR")
        .arg("account:a")
        .query::<(i64,)>(&mut connection)
        .unwrap_err();
    // The queued command is redirected (and EXEC then aborts), as from a
    // Redis Cluster replica.
    assert!(
        matches!(error.code(), Some("MOVED" | "EXECABORT")),
        "{error:?}"
    );
}

#[test]
fn watch_is_checked_where_the_transaction_applies() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    let mut other = group.client(leader);
    let _: () = redis::cmd("SET")
        .arg("stock")
        .arg(10)
        .query(&mut connection)
        .unwrap();
    let _: () = redis::cmd("WATCH")
        .arg("stock")
        .query(&mut connection)
        .unwrap();
    let _: i64 = redis::cmd("DECR").arg("stock").query(&mut other).unwrap();
    let result: Option<(i64,)> = redis::pipe()
        .atomic()
        .cmd("DECRBY")
        .arg("stock")
        .arg(5)
        .query(&mut connection)
        .unwrap();
    assert_eq!(result, None, "EXEC must abort after a watched key changed");
    let stock: i64 = redis::cmd("GET")
        .arg("stock")
        .query(&mut connection)
        .unwrap();
    assert_eq!(stock, 9);
    let _: () = redis::cmd("WATCH")
        .arg("stock")
        .query(&mut connection)
        .unwrap();
    let result: Option<(i64,)> = redis::pipe()
        .atomic()
        .cmd("DECRBY")
        .arg("stock")
        .arg(5)
        .query(&mut connection)
        .unwrap();
    assert_eq!(result, Some((4,)));
}

/// A transaction whose entry the leader cannot commit (its followers are
/// gone) did not run as far as the client can tell: EXEC answers one error
/// (the refusal, or UNKNOWN once proposed), not an array of per-command
/// errors, which would read as a transaction that ran with every command
/// failing. Found by the simulation running the real node.
#[test]
fn exec_that_cannot_commit_answers_one_error() {
    let mut group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = Raw::connect(group.members[leader].port);
    connection.roundtrip(&["SET", "balance", "1"], "+OK\r\n");
    for index in 0..3 {
        if index != leader {
            group.kill(index);
        }
    }
    connection.roundtrip(&["MULTI"], "+OK\r\n");
    connection.roundtrip(&["INCR", "balance"], "+QUEUED\r\n");
    connection.command(&[b"EXEC"]);
    match connection.read_frame() {
        Frame::Error(text) => {
            let text = String::from_utf8_lossy(&text).into_owned();
            assert!(
                ["CLUSTERDOWN ", "UNKNOWN ", "MOVED "]
                    .iter()
                    .any(|code| text.starts_with(code)),
                "{text}"
            );
        }
        other => panic!("EXEC without a majority answered {other:?}"),
    }
}
