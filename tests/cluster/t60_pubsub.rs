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

#[test]
fn publish_reaches_subscribers_on_every_node() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let mut subscribers: Vec<redis::Connection> =
        (0..3).map(|index| cluster.client(index)).collect();
    let mut channels = Vec::new();
    for connection in &mut subscribers {
        let mut pubsub = connection.as_pubsub();
        pubsub
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        pubsub.subscribe("events").unwrap();
        channels.push(pubsub);
    }
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
    // Find the node that answers SSUBSCRIBE for the channel (the others
    // redirect there).
    let mut home = None;
    for index in 0..3 {
        let mut connection = cluster.client(index);
        let reply: redis::RedisResult<i64> = redis::cmd("SPUBLISH")
            .arg("{orders}:eu")
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
