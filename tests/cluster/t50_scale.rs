//! Growing a cluster online: new nodes join (`add-node`), a shard is placed on
//! them (`add-shard`), `rebalance` gives it an even share of the slots while
//! the data stays readable; a node without replicas leaves (`del-node`).

use slotraft_tests::support::cluster::{admin, Cluster};
use std::time::Duration;

/// Slots owned per shard, from CLUSTER SHARDS.
fn slots_per_shard(cluster: &Cluster, index: usize) -> Vec<i64> {
    let mut connection = cluster.client(index);
    let shards: Vec<redis::Value> = redis::cmd("CLUSTER")
        .arg("SHARDS")
        .query(&mut connection)
        .unwrap();
    shards
        .into_iter()
        .map(|shard| {
            let fields = match shard {
                redis::Value::Array(fields) => fields,
                redis::Value::Map(pairs) => pairs.into_iter().flat_map(|(k, v)| [k, v]).collect(),
                other => panic!("a shard is a map: {other:?}"),
            };
            let position = fields
                .iter()
                .position(
                    |field| matches!(field, redis::Value::BulkString(name) if name == b"slots"),
                )
                .expect("slots field");
            let redis::Value::Array(bounds) = &fields[position + 1] else {
                panic!("slots is an array")
            };
            bounds
                .chunks(2)
                .map(|pair| match pair {
                    [redis::Value::Int(start), redis::Value::Int(end)] => end - start + 1,
                    other => panic!("a slot range: {other:?}"),
                })
                .sum()
        })
        .collect()
}

#[test]
fn nodes_join_a_shard_is_added_and_rebalance_spreads_the_slots() {
    let mut cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let mut client = cluster.cluster_client();
    for index in 0..300 {
        let _: () = redis::cmd("SET")
            .arg(format!("grow:{index}"))
            .arg(index)
            .query(&mut client)
            .unwrap();
    }
    drop(client);
    let mut new_ids = Vec::new();
    for _ in 0..3 {
        let index = cluster.spawn_extra();
        admin(&["add-node", &cluster.address(index), &cluster.address(0)]);
        new_ids.push(cluster.node_id(index));
    }
    let nodes: String = {
        let mut connection = cluster.client(0);
        redis::cmd("CLUSTER")
            .arg("NODES")
            .query(&mut connection)
            .unwrap()
    };
    assert_eq!(nodes.lines().count(), 6, "{nodes}");
    admin(&[
        "add-shard",
        &cluster.address(0),
        "--nodes",
        &new_ids.join(","),
    ]);
    let output = admin(&["rebalance", &cluster.address(1)]);
    assert!(output.contains("[OK] Moved 4096 slots"), "{output}");
    let mut counts = slots_per_shard(&cluster, 4);
    counts.sort();
    assert_eq!(counts, vec![4096, 4096, 4096, 4096]);
    admin(&["check", &cluster.address(5)]);
    // Every key is still there, whichever shard now holds it.
    let mut client = cluster.cluster_client();
    for index in 0..300 {
        let value: i64 = redis::cmd("GET")
            .arg(format!("grow:{index}"))
            .query(&mut client)
            .unwrap();
        assert_eq!(value, index);
    }
    // A node without replicas can leave; it is shut down and forgotten.
    let extra = cluster.spawn_extra();
    admin(&["add-node", &cluster.address(extra), &cluster.address(0)]);
    let leaving = cluster.node_id(extra);
    admin(&["del-node", &cluster.address(0), &leaving]);
    assert!(
        cluster.wait_exit(extra, Duration::from_secs(10)),
        "the removed node kept running"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let nodes: String = {
            let mut connection = cluster.client(2);
            redis::cmd("CLUSTER")
                .arg("NODES")
                .query(&mut connection)
                .unwrap()
        };
        if nodes.lines().count() == 6 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{nodes}");
        std::thread::sleep(Duration::from_millis(50));
    }
}
