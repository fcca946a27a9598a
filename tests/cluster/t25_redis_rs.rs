//! The scenario suite through the `redis` crate's cluster client (redis-rs):
//! counters with expiry, a job queue, a shopping cart in a hash, tag search
//! with set algebra on `{tag}` keys, a sorted-set leaderboard, and CROSSSLOT
//! where Redis Cluster gives it.

use redis::Commands;
use slotraft_tests::support::cluster::Cluster;

#[test]
fn redis_rs_cluster_client_runs_the_scenarios() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let mut rc = cluster.cluster_client();

    // Counters: API calls per user per minute, expiring.
    let calls: i64 = rc.incr("api:calls:alice:202611231200", 1).unwrap();
    assert_eq!(calls, 1);
    let calls: i64 = rc.incr("api:calls:alice:202611231200", 4).unwrap();
    assert_eq!(calls, 5);
    let set: bool = rc.expire("api:calls:alice:202611231200", 60).unwrap();
    assert!(set);
    let ttl: i64 = rc.ttl("api:calls:alice:202611231200").unwrap();
    assert!((1..=60).contains(&ttl), "ttl {ttl}");
    let _: () = rc.pset_ex("short-lived", "x", 50).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(120));
    let gone: Option<String> = rc.get("short-lived").unwrap();
    assert_eq!(gone, None);

    // A job queue: producers RPUSH, workers LPOP / BLPOP.
    let queued: i64 = rc
        .rpush("jobs:email", &["welcome:1", "welcome:2", "reset:3"])
        .unwrap();
    assert_eq!(queued, 3);
    let next: Option<String> = rc.lpop("jobs:email", None).unwrap();
    assert_eq!(next.as_deref(), Some("welcome:1"));
    let waiting: Vec<String> = rc.lrange("jobs:email", 0, -1).unwrap();
    assert_eq!(waiting, vec!["welcome:2", "reset:3"]);
    let popped: Option<(String, String)> = rc.blpop("jobs:email", 0.5).unwrap();
    assert_eq!(popped, Some(("jobs:email".into(), "welcome:2".into())));
    let empty: Option<(String, String)> = rc.blpop("jobs:none", 0.1).unwrap();
    assert_eq!(empty, None);

    // A shopping cart in a hash.
    let _: () = rc
        .hset_multiple("cart:42", &[("sku:1", 2), ("sku:7", 1)])
        .unwrap();
    let quantity: i64 = rc.hincr("cart:42", "sku:7", 2).unwrap();
    assert_eq!(quantity, 3);
    let removed: i64 = rc.hdel("cart:42", "sku:1").unwrap();
    assert_eq!(removed, 1);
    let cart: std::collections::HashMap<String, i64> = rc.hgetall("cart:42").unwrap();
    assert_eq!(cart.len(), 1);
    assert_eq!(cart["sku:7"], 3);

    // Tag search with set algebra; the {books} tag keeps the sets in one slot.
    let _: () = rc.sadd("{books}:tag:rust", &["b1", "b2", "b3"]).unwrap();
    let _: () = rc.sadd("{books}:tag:async", &["b2", "b3", "b4"]).unwrap();
    let mut both: Vec<String> = rc
        .sinter(&["{books}:tag:rust", "{books}:tag:async"])
        .unwrap();
    both.sort();
    assert_eq!(both, vec!["b2", "b3"]);
    let either: usize = rc
        .sunionstore(
            "{books}:tag:any",
            &["{books}:tag:rust", "{books}:tag:async"],
        )
        .unwrap();
    assert_eq!(either, 4);
    let only: Vec<String> = rc
        .sdiff(&["{books}:tag:rust", "{books}:tag:async"])
        .unwrap();
    assert_eq!(only, vec!["b1"]);

    // A leaderboard in a sorted set.
    let _: () = rc
        .zadd_multiple("board:weekly", &[(120, "ana"), (95, "bo"), (130, "cy")])
        .unwrap();
    let score: f64 = rc.zincr("board:weekly", "bo", 40).unwrap();
    assert_eq!(score, 135.0);
    let top: Vec<(String, f64)> = rc.zrevrange_withscores("board:weekly", 0, 1).unwrap();
    assert_eq!(
        top,
        vec![("bo".to_string(), 135.0), ("cy".to_string(), 130.0)]
    );
    let rank: Option<i64> = rc.zrevrank("board:weekly", "ana").unwrap();
    assert_eq!(rank, Some(2));

    // Keys all over the slot space land on every shard and read back.
    for index in 0..200 {
        let _: () = rc.set(format!("spread:{index}"), index).unwrap();
    }
    for index in 0..200 {
        let value: i64 = rc.get(format!("spread:{index}")).unwrap();
        assert_eq!(value, index);
    }

    // CROSSSLOT: a multi-key command across slots sent to one node.
    let mut node = cluster.client(0);
    let error = redis::cmd("SINTER")
        .arg("{books}:tag:rust")
        .arg("other:set")
        .query::<Vec<String>>(&mut node)
        .unwrap_err();
    assert_eq!(error.code(), Some("CROSSSLOT"), "{error:?}");
}
