//! MULTI/EXEC on a replicated shard: the transaction is one log entry, applied
//! together on every replica; a follower answers EXEC with the redirect.

use slotraft_tests::support::group::Group;
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
    let applied: u64 = group
        .info_field(leader, "raft_last_applied")
        .and_then(|value| value.parse().ok())
        .unwrap();
    group.wait_applied(applied, Duration::from_secs(10));
    let digests: Vec<String> = (0..3).map(|index| group.digest(index)).collect();
    assert!(
        digests.iter().all(|digest| digest == &digests[0]),
        "{digests:?}"
    );

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
