//! Pub/Sub in a cluster: PUBLISH reaches subscribers on every node; shard
//! channels live on the node that leads their slot's shard.

use slotraft_tests::support::cluster::Cluster;
use slotraft_tests::support::Raw;
use std::time::Duration;

fn message(pubsub: &mut redis::PubSub<'_>) -> (String, String) {
    let message = pubsub.get_message().expect("a message");
    (
        message.get_channel_name().to_string(),
        message.get_payload::<String>().unwrap(),
    )
}

/// One connection to each node.
fn connections(cluster: &Cluster) -> Vec<redis::Connection> {
    (0..cluster.members.len())
        .map(|index| cluster.client(index))
        .collect()
}

/// Subscribes each connection to `channel`.
fn subscribe_all<'a>(
    connections: &'a mut [redis::Connection],
    channel: &str,
) -> Vec<redis::PubSub<'a>> {
    connections
        .iter_mut()
        .map(|connection| {
            let mut pubsub = connection.as_pubsub();
            pubsub
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            pubsub.subscribe(channel).unwrap();
            pubsub
        })
        .collect()
}

#[test]
fn publish_reaches_subscribers_on_every_node() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let mut subscribers = connections(&cluster);
    let mut channels = subscribe_all(&mut subscribers, "events");
    let mut publisher = cluster.client(1);
    // Each node counts its own subscribers, as Redis Cluster does.
    let received: i64 = redis::cmd("PUBLISH")
        .arg("events")
        .arg("first")
        .query(&mut publisher)
        .unwrap();
    assert_eq!(received, 1);
    for pubsub in &mut channels {
        assert_eq!(message(pubsub), ("events".into(), "first".into()));
    }
    // Order is kept per publisher.
    for index in 0..20 {
        let _: i64 = redis::cmd("PUBLISH")
            .arg("events")
            .arg(format!("m{index}"))
            .query(&mut publisher)
            .unwrap();
    }
    for pubsub in &mut channels {
        for index in 0..20 {
            assert_eq!(message(pubsub), ("events".into(), format!("m{index}")));
        }
    }
}

#[test]
fn shard_channels_follow_their_slot() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    // Find a node that serves the channel's slot (nodes that do not
    // redirect there). The probe goes to another channel of the same slot:
    // forwarded to the shard's other replicas, it may arrive late.
    let mut home = None;
    for index in 0..3 {
        let mut connection = cluster.client(index);
        let reply: redis::RedisResult<i64> = redis::cmd("SPUBLISH")
            .arg("{orders}:probe")
            .arg("probe")
            .query(&mut connection);
        match reply {
            Ok(_) => home = Some(index),
            Err(error) => assert_eq!(error.code(), Some("MOVED"), "{error:?}"),
        }
    }
    let home = home.expect("one node serves the channel's slot");
    let mut subscriber = Raw::connect(cluster.members[home].port);
    subscriber.roundtrip(
        &["SSUBSCRIBE", "{orders}:eu"],
        "*3\r\n$10\r\nssubscribe\r\n$11\r\n{orders}:eu\r\n:1\r\n",
    );
    let mut publisher = cluster.client(home);
    let received: i64 = redis::cmd("SPUBLISH")
        .arg("{orders}:eu")
        .arg("order-1")
        .query(&mut publisher)
        .unwrap();
    assert_eq!(received, 1);
    subscriber.expect(b"*3\r\n$8\r\nsmessage\r\n$11\r\n{orders}:eu\r\n$7\r\norder-1\r\n");
    // Channels of different slots in one SSUBSCRIBE: CROSSSLOT.
    let crossed: redis::RedisResult<redis::Value> = redis::cmd("SSUBSCRIBE")
        .arg("{orders}:eu")
        .arg("{users}:eu")
        .query(&mut publisher);
    assert_eq!(crossed.unwrap_err().code(), Some("CROSSSLOT"));
}

/// PUBLISH from a script reaches the subscribers of every node exactly once
/// (only the leader that proposed the script's entry delivers, and forwards);
/// the script sees 0 receivers; SPUBLISH from a script reaches the shard
/// channel's subscribers on a replica of its shard; a read-only script may
/// not publish.
#[test]
fn scripts_publish_once_to_every_node() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let mut subscribers = connections(&cluster);
    let mut channels = subscribe_all(&mut subscribers, "jobs");
    let mut client = cluster.cluster_client();
    let script = redis::Script::new(
        "redis.call('RPUSH', KEYS[1], ARGV[1]); return redis.call('PUBLISH', 'jobs', ARGV[1])",
    );
    for index in 0..10 {
        let received: i64 = script
            .key(format!("queue:{index}"))
            .arg(format!("job-{index}"))
            .invoke(&mut client)
            .unwrap();
        assert_eq!(received, 0);
    }
    for pubsub in &mut channels {
        // The scripts ran on their keys' leaders, on several nodes: a
        // message forwarded from one node may come after the next one
        // published on another (as between Redis Cluster nodes), so only
        // the set of messages is fixed.
        let mut got: Vec<(String, String)> = (0..10).map(|_| message(pubsub)).collect();
        got.sort();
        let mut expected: Vec<(String, String)> = (0..10)
            .map(|index| ("jobs".to_string(), format!("job-{index}")))
            .collect();
        expected.sort();
        assert_eq!(got, expected);
        // Nothing more: each message came once.
        pubsub
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        assert!(pubsub.get_message().is_err(), "a message came twice");
    }
    let error = redis::cmd("EVAL_RO")
        .arg("return redis.call('PUBLISH', 'jobs', 'x')")
        .arg(1)
        .arg("queue:0")
        .query::<i64>(&mut client)
        .unwrap_err();
    assert!(
        format!("{error:?}").contains("Write commands are not allowed from read-only scripts"),
        "{error:?}"
    );
    // SPUBLISH from a script whose key shares the channel's slot reaches the
    // channel's subscribers on every replica of its shard (here every node
    // holds one), whichever node leads it.
    let mut subscriber = Raw::connect(cluster.members[0].port);
    subscriber.roundtrip(
        &["SSUBSCRIBE", "{orders}:eu"],
        "*3\r\n$10\r\nssubscribe\r\n$11\r\n{orders}:eu\r\n:1\r\n",
    );
    let received: i64 = redis::cmd("EVAL")
        .arg("return redis.call('SPUBLISH', KEYS[1], 'shipped')")
        .arg(1)
        .arg("{orders}:eu")
        .query(&mut client)
        .unwrap();
    assert_eq!(received, 0);
    subscriber.expect(b"*3\r\n$8\r\nsmessage\r\n$11\r\n{orders}:eu\r\n$7\r\nshipped\r\n");
    let error = redis::cmd("EVAL")
        .arg("return redis.call('SPUBLISH', '{other}:channel', 'x')")
        .arg(1)
        .arg("{orders}:eu")
        .query::<i64>(&mut client)
        .unwrap_err();
    assert!(
        format!("{error:?}").contains("do not hash to the same slot"),
        "{error:?}"
    );
}

/// A shard channel's subscribers on every replica of its shard get each
/// SPUBLISH once, whichever replica it was published on (a client may
/// SSUBSCRIBE on a replica, or stay on a former leader).
#[test]
fn spublish_reaches_shard_subscribers_on_every_replica() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let mut subscribers: Vec<Raw> = (0..3)
        .map(|index| Raw::connect(cluster.members[index].port))
        .collect();
    for subscriber in &mut subscribers {
        subscriber.roundtrip(
            &["SSUBSCRIBE", "{orders}:eu"],
            "*3\r\n$10\r\nssubscribe\r\n$11\r\n{orders}:eu\r\n:1\r\n",
        );
    }
    for publisher in 0..3 {
        let mut connection = cluster.client(publisher);
        let received: i64 = redis::cmd("SPUBLISH")
            .arg("{orders}:eu")
            .arg(format!("from-{publisher}"))
            .query(&mut connection)
            .unwrap();
        assert_eq!(received, 1, "this node's own subscriber");
        for subscriber in &mut subscribers {
            subscriber.expect(
                format!(
                    "*3\r\n$8\r\nsmessage\r\n$11\r\n{{orders}}:eu\r\n$6\r\nfrom-{publisher}\r\n"
                )
                .as_bytes(),
            );
        }
    }
}
