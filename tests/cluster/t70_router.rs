//! `slotraft router`: plain (non-cluster) clients through the RESP proxy —
//! keys of every shard, split multi-key commands, CROSSSLOT, MULTI/EXEC,
//! whole-cluster DBSIZE and SCAN, redis-cli without -c, a shard leader killed
//! under a writing client, and a router whose seeds are all dead.

use slotraft_tests::support::cluster::Cluster;
use slotraft_tests::support::group::free_ports;
use slotraft_tests::support::router::Router;
use slotraft_tests::support::{redis_cli, Raw};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

pub(crate) fn seeds(cluster: &Cluster) -> Vec<String> {
    cluster
        .members
        .iter()
        .map(|member| format!("127.0.0.1:{}", member.port))
        .collect()
}

/// Keys `prefix:0..count`, which spread over many slots.
fn keys(prefix: &str, count: usize) -> Vec<String> {
    (0..count)
        .map(|index| format!("{prefix}:{index}"))
        .collect()
}

#[test]
fn plain_clients_use_the_whole_cluster_through_the_router() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let router = Router::start(&seeds(&cluster), &[]);
    router.wait_serving();
    let mut connection = router.redis();

    // SET/GET on keys of many slots (every shard).
    let plain = keys("plain", 300);
    let slots: BTreeSet<u16> = plain
        .iter()
        .map(|key| cluster::key_slot(key.as_bytes()))
        .collect();
    assert!(slots.len() > 250, "the keys must cover many slots");
    for (index, key) in plain.iter().enumerate() {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(index)
            .query(&mut connection)
            .unwrap();
    }
    for (index, key) in plain.iter().enumerate() {
        let value: usize = redis::cmd("GET").arg(key).query(&mut connection).unwrap();
        assert_eq!(value, index);
    }

    // MSET/MGET across slots, merged in the original order.
    let multi = keys("multi", 20);
    let mut mset = redis::cmd("MSET");
    for (index, key) in multi.iter().enumerate() {
        mset.arg(key).arg(format!("v{index}"));
    }
    let _: () = mset.query(&mut connection).unwrap();
    let mut mget = redis::cmd("MGET");
    mget.arg("multi:missing");
    for key in multi.iter().rev() {
        mget.arg(key);
    }
    let values: Vec<Option<String>> = mget.query(&mut connection).unwrap();
    let mut expected: Vec<Option<String>> = vec![None];
    expected.extend((0..20).rev().map(|index| Some(format!("v{index}"))));
    assert_eq!(values, expected);

    // EXISTS counts repeats; DEL sums over slots.
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&multi[0])
        .arg(&multi[1])
        .arg(&multi[0])
        .arg("multi:missing")
        .arg(&multi[7])
        .query(&mut connection)
        .unwrap();
    assert_eq!(exists, 4);
    let deleted: i64 = redis::cmd("DEL")
        .arg(&multi[..10])
        .arg("multi:missing")
        .query(&mut connection)
        .unwrap();
    assert_eq!(deleted, 10);
    let exists: i64 = redis::cmd("EXISTS")
        .arg(&multi)
        .query(&mut connection)
        .unwrap();
    assert_eq!(exists, 10);

    // Cross-slot commands without a split get Redis's CROSSSLOT error.
    let mut raw = router.raw();
    raw.roundtrip(
        &["SUNION", "plain:1", "plain:2"],
        "-CROSSSLOT Keys in request don't hash to the same slot\r\n",
    );
    raw.roundtrip(&["SELECT", "0"], "+OK\r\n");
    raw.roundtrip(
        &["SELECT", "1"],
        "-ERR SELECT is not allowed in cluster mode\r\n",
    );
    // Tracking would put invalidations on shared upstream links.
    raw.roundtrip(
        &["CLIENT", "TRACKING", "on"],
        "-ERR client-side caching is not available through the router; connect to the cluster's nodes\r\n",
    );
    raw.roundtrip(&["PING"], "+PONG\r\n");

    // MULTI/EXEC on one slot.
    let (count, value): (i64, String) = redis::pipe()
        .atomic()
        .cmd("INCRBY")
        .arg("{tx}:counter")
        .arg(5)
        .cmd("SET")
        .arg("{tx}:name")
        .arg("router")
        .ignore()
        .cmd("GET")
        .arg("{tx}:name")
        .query(&mut connection)
        .unwrap();
    assert_eq!((count, value.as_str()), (5, "router"));
    // A queued command of another slot aborts the transaction, as Redis.
    raw.roundtrip(&["MULTI"], "+OK\r\n");
    raw.roundtrip(&["SET", "{tx}:a", "1"], "+QUEUED\r\n");
    raw.roundtrip(
        &["SET", "{other}:b", "1"],
        "-CROSSSLOT Keys in request don't hash to the same slot\r\n",
    );
    raw.roundtrip(
        &["EXEC"],
        "-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    raw.roundtrip(&["EXISTS", "{tx}:a"], ":0\r\n");
    // Whole-cluster commands cannot be part of a one-slot transaction.
    raw.roundtrip(&["MULTI"], "+OK\r\n");
    raw.roundtrip(&["SET", "{tx}:c", "1"], "+QUEUED\r\n");
    raw.roundtrip(
        &["FLUSHALL"],
        "-ERR FLUSHALL inside MULTI is not supported through the router: it spans every shard\r\n",
    );
    raw.roundtrip(
        &["SCRIPT", "LOAD", "return 1"],
        "-ERR SCRIPT LOAD inside MULTI is not supported through the router: it spans every shard\r\n",
    );
    raw.roundtrip(
        &["EXEC"],
        "-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    raw.roundtrip(&["EXISTS", "{tx}:c"], ":0\r\n");

    // DBSIZE: every key written (300 plain + 10 multi left + 2 tx).
    let written: BTreeSet<String> = plain
        .iter()
        .chain(&multi[10..])
        .cloned()
        .chain(["{tx}:counter".to_string(), "{tx}:name".to_string()])
        .collect();
    let size: usize = redis::cmd("DBSIZE").query(&mut connection).unwrap();
    assert_eq!(size, written.len());

    // SCAN returns every key exactly once.
    let mut cursor: u64 = 0;
    let mut seen = Vec::new();
    loop {
        let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(7)
            .query(&mut connection)
            .unwrap();
        seen.extend(batch);
        if next == 0 {
            break;
        }
        cursor = next;
    }
    let unique: BTreeSet<String> = seen.iter().cloned().collect();
    assert_eq!(unique.len(), seen.len(), "SCAN returned a key twice");
    assert_eq!(unique, written);
    let matched: Vec<String> = redis::cmd("KEYS")
        .arg("multi:*")
        .query(&mut connection)
        .unwrap();
    assert_eq!(matched.len(), 10);

    // redis-cli without -c: no redirects reach it.
    let output = redis_cli(
        router.port,
        "SET cli:a 1\nSET cli:b 2\nSET cli:c 3\nGET cli:a\nMGET cli:a cli:b cli:c\nDEL cli:a cli:b cli:c\nGET plain:42\n",
    );
    assert_eq!(output, "OK\nOK\nOK\n1\n1\n2\n3\n3\n42\n");
}

/// Which member leads the shard serving `slot`, per CLUSTER SLOTS.
pub(crate) fn leader_of(cluster: &Cluster, slot: u16) -> usize {
    let mut raw = Raw::connect(cluster.members[0].port);
    raw.command(&[b"CLUSTER", b"SLOTS"]);
    let resp::Frame::Array(ranges) = raw.read_frame() else {
        panic!("CLUSTER SLOTS is an array");
    };
    for range in ranges {
        let resp::Frame::Array(parts) = range else {
            panic!("a range is an array");
        };
        let (resp::Frame::Integer(start), resp::Frame::Integer(end), resp::Frame::Array(master)) =
            (&parts[0], &parts[1], &parts[2])
        else {
            panic!("malformed range {parts:?}");
        };
        let resp::Frame::Integer(port) = master[1] else {
            panic!("malformed master {master:?}");
        };
        if (*start..=*end).contains(&i64::from(slot)) {
            return cluster
                .members
                .iter()
                .position(|member| i64::from(member.port) == port)
                .expect("a member's port");
        }
    }
    panic!("no range holds slot {slot}");
}

#[test]
fn writes_through_the_router_survive_a_killed_shard_leader_without_redirects() {
    let mut cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let router = Router::start(&seeds(&cluster), &[]);
    router.wait_serving();
    let mut connection = router.redis();
    let key = "failover:key";
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg(0)
        .query(&mut connection)
        .unwrap();
    let leader = leader_of(&cluster, cluster::key_slot(key.as_bytes()));
    cluster.kill(leader);
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut errors = Vec::new();
    let mut successes_after_kill = 0;
    let mut written = 0;
    for attempt in 1.. {
        match redis::cmd("SET")
            .arg(key)
            .arg(attempt)
            .query::<()>(&mut connection)
        {
            Ok(()) => {
                successes_after_kill += 1;
                written = attempt;
            }
            Err(error) => {
                let text = format!("{error:?}");
                assert!(
                    !text.contains("MOVED") && !text.contains("ASK"),
                    "the client saw a redirect: {text}"
                );
                errors.push(text);
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        if successes_after_kill >= 20 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "writes did not resume after the failover; errors: {errors:?}"
        );
    }
    let value: i64 = redis::cmd("GET").arg(key).query(&mut connection).unwrap();
    assert_eq!(value, written);
    // Keys of every shard are still served through the same client.
    for index in 0..50 {
        let _: () = redis::cmd("SET")
            .arg(format!("after:{index}"))
            .arg(index)
            .query(&mut connection)
            .unwrap();
    }
}

#[test]
fn a_router_with_only_dead_seeds_answers_errors_quickly() {
    // Ports that were just free: nothing listens there.
    let dead: Vec<String> = free_ports(2)
        .into_iter()
        .map(|port| format!("127.0.0.1:{port}"))
        .collect();
    let router = Router::start(&dead, &[]);
    let mut raw = router.raw();
    for command in [
        &["GET", "foo"][..],
        &["SET", "foo", "1"],
        &["DBSIZE"],
        &["INFO"],
    ] {
        let started = Instant::now();
        let arguments: Vec<&[u8]> = command.iter().map(|word| word.as_bytes()).collect();
        raw.command(&arguments);
        let reply = raw.read_frame();
        assert!(reply.is_error(), "{command:?} answered {reply:?}");
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{command:?} took {:?}",
            started.elapsed()
        );
    }
    raw.roundtrip(&["PING"], "+PONG\r\n");
}

/// A hash tag whose slot is `slot`.
pub(crate) fn tag_for_slot(slot: u16) -> String {
    (0u64..)
        .map(|counter| format!("t{counter}"))
        .find(|tag| cluster::key_slot(tag.as_bytes()) == slot)
        .expect("a tag for every slot")
}

#[test]
fn a_router_with_a_stale_map_follows_moved_during_a_reshard() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    // No periodic refresh: only redirects and failures update the map.
    let router = Router::start(&seeds(&cluster), &["--refresh-interval-ms", "600000"]);
    router.wait_serving();
    let tags: Vec<String> = (0..16).map(tag_for_slot).collect();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (stop, mut connection, tags) = (stop.clone(), router.redis(), tags.clone());
        std::thread::spawn(move || {
            let mut acknowledged = Vec::new();
            let mut errors = Vec::new();
            let mut sequence = 0u64;
            // Until told to stop and, on a slow machine, until enough writes
            // went through to cover every moved slot several times.
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while !stop.load(std::sync::atomic::Ordering::Relaxed)
                || (acknowledged.len() <= 60 && std::time::Instant::now() < deadline)
            {
                let key = format!("{{{}}}:{sequence}", tags[sequence as usize % tags.len()]);
                match redis::cmd("SET")
                    .arg(&key)
                    .arg(sequence)
                    .query::<()>(&mut connection)
                {
                    Ok(()) => acknowledged.push((key, sequence)),
                    Err(error) => errors.push(format!("{error:?}")),
                }
                sequence += 1;
            }
            (acknowledged, errors)
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    cluster.reshard(1, 2, 16);
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (acknowledged, errors) = writer.join().expect("writer");
    assert!(
        errors
            .iter()
            .all(|error| !error.contains("MOVED") && !error.contains("ASK")),
        "the client saw a redirect: {errors:?}"
    );
    assert!(
        acknowledged.len() > 50,
        "too few writes: {}",
        acknowledged.len()
    );
    // The slots moved, and every acknowledged write reads back through the
    // router (whose map was stale until MOVED replies refreshed it).
    let mut connection = router.redis();
    for (key, value) in &acknowledged {
        let read: u64 = redis::cmd("GET").arg(key).query(&mut connection).unwrap();
        assert_eq!(read, *value, "{key}");
    }
    let size: usize = redis::cmd("DBSIZE").query(&mut connection).unwrap();
    assert_eq!(size, acknowledged.len());
}

#[test]
fn pipelines_come_back_in_order_across_shards_and_through_a_stale_map() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    // No periodic refresh: after the reshard only MOVED replies update the map.
    let router = Router::start(&seeds(&cluster), &["--refresh-interval-ms", "600000"]);
    router.wait_serving();
    let mut connection = router.redis();
    // Keys in the 16 slots the reshard moves, and keys all over the ring.
    let mut keys: Vec<String> = (0..16)
        .map(|slot| format!("{{{}}}:p", tag_for_slot(slot)))
        .collect();
    keys.extend(self::keys("spread", 48));
    let mut pipe = redis::pipe();
    for (index, key) in keys.iter().enumerate() {
        pipe.cmd("SET").arg(key).arg(index).ignore();
        pipe.cmd("INCR").arg(key);
    }
    let counted: Vec<u64> = pipe.query(&mut connection).unwrap();
    assert_eq!(counted, (1..=keys.len() as u64).collect::<Vec<_>>());
    cluster.reshard(1, 2, 16);
    // The router still sends the moved slots to their old owner: those
    // commands come back MOVED and are run again, in the client's order.
    let mut pipe = redis::pipe();
    for key in &keys {
        pipe.cmd("INCR").arg(key);
        pipe.cmd("GET").arg(key);
    }
    let replies: Vec<u64> = pipe.query(&mut connection).unwrap();
    let expected: Vec<u64> = (2..=keys.len() as u64 + 1)
        .flat_map(|value| [value, value])
        .collect();
    assert_eq!(replies, expected);
}

#[test]
fn pub_sub_is_relayed_through_the_router() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let router = Router::start(&seeds(&cluster), &[]);
    router.wait_serving();
    let mut subscriber = router.redis();
    let mut pubsub = subscriber.as_pubsub();
    pubsub
        .set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .unwrap();
    pubsub.subscribe("news").unwrap();
    pubsub.psubscribe("alerts.*").unwrap();
    let mut publisher = router.redis();
    // PUBLISH goes to some node; subscribers on every node hear it.
    for index in 0..10 {
        let _: i64 = redis::cmd("PUBLISH")
            .arg("news")
            .arg(format!("n{index}"))
            .query(&mut publisher)
            .unwrap();
    }
    let _: i64 = redis::cmd("PUBLISH")
        .arg("alerts.disk")
        .arg("full")
        .query(&mut publisher)
        .unwrap();
    for index in 0..10 {
        let message = pubsub.get_message().unwrap();
        assert_eq!(message.get_channel_name(), "news");
        assert_eq!(
            message.get_payload::<String>().unwrap(),
            format!("n{index}")
        );
    }
    let message = pubsub.get_message().unwrap();
    assert_eq!(message.get_channel_name(), "alerts.disk");
    assert_eq!(message.get_pattern::<String>().unwrap(), "alerts.*");

    // A shard channel: SSUBSCRIBE is relayed to its slot's leader, SPUBLISH
    // is routed there by slot.
    let mut raw = router.raw();
    raw.roundtrip(
        &["SSUBSCRIBE", "orders{7}"],
        "*3\r\n$10\r\nssubscribe\r\n$9\r\norders{7}\r\n:1\r\n",
    );
    let delivered: i64 = redis::cmd("SPUBLISH")
        .arg("orders{7}")
        .arg("o1")
        .query(&mut publisher)
        .unwrap();
    assert_eq!(delivered, 1);
    let frame = raw.read_frame();
    assert_eq!(
        format!("{frame:?}"),
        format!(
            "{:?}",
            resp::Frame::Array(vec![
                resp::Frame::Bulk("smessage".into()),
                resp::Frame::Bulk("orders{7}".into()),
                resp::Frame::Bulk("o1".into()),
            ])
        )
    );
    // A RESP3 client's relay speaks RESP3: subscription replies are pushes.
    let mut resp3 = router.raw();
    resp3.command(&[b"HELLO", b"3"]);
    assert!(!resp3.read_frame().is_error());
    resp3.roundtrip(
        &["SUBSCRIBE", "x"],
        ">3\r\n$9\r\nsubscribe\r\n$1\r\nx\r\n:1\r\n",
    );
    let _: i64 = redis::cmd("PUBLISH")
        .arg("x")
        .arg("hi")
        .query(&mut publisher)
        .unwrap();
    assert!(matches!(resp3.read_frame(), resp::Frame::Push(_)));
    // RESET ends the relay: the client is the router's again (RESP2, no
    // subscriptions), keys of every shard are served without redirects, and
    // what was pipelined behind RESET is answered in order.
    resp3.send(b"*1\r\n$5\r\nRESET\r\n*3\r\n$3\r\nSET\r\n$4\r\nr{a}\r\n$1\r\n1\r\n");
    resp3.expect(b"+RESET\r\n+OK\r\n");
    for key in keys("after-reset", 30) {
        resp3.roundtrip(&["SET", &key, "v"], "+OK\r\n");
        resp3.roundtrip(&["GET", &key], "$1\r\nv\r\n");
    }
    let receivers: i64 = redis::cmd("PUBLISH")
        .arg("x")
        .arg("gone")
        .query(&mut publisher)
        .unwrap();
    assert_eq!(receivers, 0);
    resp3.roundtrip(&["PING"], "+PONG\r\n");
    // Without subscriptions, UNSUBSCRIBE answers as Redis does.
    let mut idle = router.raw();
    idle.roundtrip(
        &["UNSUBSCRIBE", "a", "b"],
        "*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n*3\r\n$11\r\nunsubscribe\r\n$1\r\nb\r\n:0\r\n",
    );
}

#[test]
fn readonly_clients_read_from_replicas_through_the_router() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let router = Router::start(&seeds(&cluster), &[]);
    router.wait_serving();
    let mut connection = router.redis();
    let key = "replicated:key";
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("v1")
        .query(&mut connection)
        .unwrap();
    let _: () = redis::cmd("READONLY").query(&mut connection).unwrap();
    // A replica may lag a moment behind the leader.
    let mut value: Option<String> = None;
    for _ in 0..100 {
        value = redis::cmd("GET").arg(key).query(&mut connection).unwrap();
        if value.as_deref() == Some("v1") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(value.as_deref(), Some("v1"));
    // Writes still go to the leader.
    let _: () = redis::cmd("SET")
        .arg(key)
        .arg("v2")
        .query(&mut connection)
        .unwrap();
    // The reads reached a replica, never the leader: the router's connection
    // to the leader last ran SET, a replica's last ran GET.
    let leader = leader_of(&cluster, cluster::key_slot(key.as_bytes()));
    let last_commands = |index: usize| -> String {
        let mut raw = Raw::connect(cluster.members[index].port);
        raw.command(&[b"CLIENT", b"LIST"]);
        match raw.read_frame() {
            resp::Frame::Bulk(text) => String::from_utf8_lossy(&text).into_owned(),
            other => panic!("CLIENT LIST answered {other:?}"),
        }
    };
    assert!(
        !last_commands(leader).contains("cmd=get"),
        "the leader served a READONLY read"
    );
    let served: Vec<usize> = (0..cluster.members.len())
        .filter(|index| *index != leader && last_commands(*index).contains("cmd=get"))
        .collect();
    assert_eq!(served.len(), 1, "one replica serves this client's reads");
    // READWRITE sends reads to the leader again.
    let _: () = redis::cmd("READWRITE").query(&mut connection).unwrap();
    let value: String = redis::cmd("GET").arg(key).query(&mut connection).unwrap();
    assert_eq!(value, "v2");
}

/// Reads `count` pipelined replies.
fn read_frames(raw: &mut Raw, count: usize) -> Vec<resp::Frame> {
    use std::io::Read;
    let mut frames = Vec::with_capacity(count);
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    while frames.len() < count {
        match resp::parse_reply(&buffer) {
            Ok(Some((frame, used))) => {
                frames.push(frame);
                buffer.drain(..used);
                continue;
            }
            Ok(None) => {}
            Err(error) => panic!("malformed reply: {error}"),
        }
        let read = raw.stream.read(&mut chunk).expect("read replies");
        assert!(read > 0, "the router closed the connection");
        buffer.extend_from_slice(&chunk[..read]);
    }
    assert!(buffer.is_empty(), "more replies than requests");
    frames
}

/// What one client saw of its own counter keys.
#[derive(Default)]
struct Tally {
    /// Per key: the last value an INCR answered (never decreasing).
    last: Vec<i64>,
    /// Per key: INCRs answered with a value.
    acknowledged: Vec<i64>,
    /// Per key: INCRs answered with an error (applied or not).
    unknown: Vec<i64>,
    errors: Vec<String>,
}

/// Many clients pipeline INCRs of their own keys (spread over every shard)
/// through the router's shared node links while a shard leader is killed
/// mid-pipeline. Every reply must belong to the client and key it answers
/// (values only grow by what that client sent), the in-flight commands of
/// the dead node get errors, never redirects, later pipelines succeed, and
/// each counter ends within [acknowledged, acknowledged + failed].
#[test]
fn shared_links_keep_replies_apart_and_fail_only_in_flight_commands_when_a_node_dies() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const CLIENTS: usize = 8;
    const KEYS: usize = 24;
    let mut cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let router = Router::start(&seeds(&cluster), &[]);
    router.wait_serving();
    let stop = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let mut raw = router.raw();
            let (stop, killed) = (stop.clone(), killed.clone());
            std::thread::spawn(move || {
                let keys = keys(&format!("link:{client}"), KEYS);
                let mut tally = Tally {
                    last: vec![0; KEYS],
                    acknowledged: vec![0; KEYS],
                    unknown: vec![0; KEYS],
                    errors: Vec::new(),
                };
                let mut clean_after_kill = 0;
                while !stop.load(Ordering::Relaxed) || clean_after_kill < 5 {
                    for key in &keys {
                        raw.command(&[b"INCR", key.as_bytes()]);
                    }
                    let replies = read_frames(&mut raw, KEYS);
                    assert_eq!(replies.len(), KEYS);
                    let mut clean = true;
                    for (index, reply) in replies.into_iter().enumerate() {
                        match reply {
                            resp::Frame::Integer(value) => {
                                assert!(
                                    value > tally.last[index],
                                    "client {client} key {index}: {value} after {}",
                                    tally.last[index]
                                );
                                assert!(
                                    value <= tally.acknowledged[index] + tally.unknown[index] + 1,
                                    "client {client} key {index}: {value} is more than it sent"
                                );
                                tally.last[index] = value;
                                tally.acknowledged[index] += 1;
                            }
                            other => {
                                let text = format!("{other:?}");
                                assert!(
                                    !text.contains("MOVED") && !text.contains("ASK"),
                                    "client {client} saw a redirect: {text}"
                                );
                                tally.unknown[index] += 1;
                                tally.errors.push(text);
                                clean = false;
                            }
                        }
                    }
                    if killed.load(Ordering::Relaxed) && clean {
                        clean_after_kill += 1;
                    }
                }
                tally
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let victim = leader_of(&cluster, cluster::key_slot(b"link:0:0"));
    // Frozen first, so commands for it pile up in flight whatever the
    // machine's load, then killed under them.
    cluster.signal(victim, "STOP");
    std::thread::sleep(Duration::from_millis(300));
    cluster.kill(victim);
    killed.store(true, Ordering::Relaxed);
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let tallies: Vec<Tally> = workers
        .into_iter()
        .map(|worker| worker.join().expect("a client thread"))
        .collect();
    let mut connection = router.redis();
    let mut failed = 0;
    for (client, tally) in tallies.iter().enumerate() {
        failed += tally.errors.len();
        for (index, key) in keys(&format!("link:{client}"), KEYS).iter().enumerate() {
            let value: i64 = redis::cmd("GET").arg(key).query(&mut connection).unwrap();
            let (acknowledged, unknown) = (tally.acknowledged[index], tally.unknown[index]);
            assert!(
                (acknowledged..=acknowledged + unknown).contains(&value),
                "{key} is {value}; acknowledged {acknowledged}, failed {unknown}"
            );
        }
    }
    // The killed node led a third of the slots: some in-flight INCRs failed.
    assert!(failed > 0, "no command met the killed node");
}

/// `--pipeline-depth` bounds what the router takes from one client at a
/// time; a deeper pipeline is served in slices, still in order, and
/// `--links-per-node` changes only how writes are spread.
#[test]
fn a_small_pipeline_depth_serves_deep_pipelines_in_order() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let router = Router::start(
        &seeds(&cluster),
        &["--pipeline-depth", "3", "--links-per-node", "5"],
    );
    router.wait_serving();
    let mut connection = router.redis();
    let keys = keys("depth", 40);
    let mut pipe = redis::pipe();
    for (index, key) in keys.iter().enumerate() {
        pipe.cmd("SET").arg(key).arg(index * 10).ignore();
        pipe.cmd("INCR").arg(key);
        pipe.cmd("GET").arg(key);
    }
    let replies: Vec<u64> = pipe.query(&mut connection).unwrap();
    let expected: Vec<u64> = (0..keys.len() as u64)
        .flat_map(|index| [index * 10 + 1, index * 10 + 1])
        .collect();
    assert_eq!(replies, expected);
}

/// `--prefer-zone`: a READONLY client's reads go to the node of the
/// router's zone (here every node holds a replica of every shard, so one
/// node serves them all, leader or not); other clients' reads still go to
/// each slot's leader.
#[test]
fn prefer_zone_sends_readonly_reads_to_the_routers_zone() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &["--zone", "zone-{index}"]);
    let router = Router::start(&seeds(&cluster), &["--prefer-zone", "zone-1"]);
    router.wait_serving();
    let keys = keys("zoned", 30);
    let mut connection = router.redis();
    for key in &keys {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg(key)
            .query(&mut connection)
            .unwrap();
    }
    let mut reader = router.redis();
    let _: () = redis::cmd("READONLY").query(&mut reader).unwrap();
    for key in &keys {
        // A replica may lag a moment behind the leader.
        let mut value: Option<String> = None;
        for _ in 0..100 {
            value = redis::cmd("GET").arg(key).query(&mut reader).unwrap();
            if value.as_deref() == Some(key.as_str()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(value.as_deref(), Some(key.as_str()));
    }
    // Only the reader ran GET through the router: the node connections whose
    // last command was GET are the reader's.
    let served = |index: usize| -> bool {
        let mut raw = Raw::connect(cluster.members[index].port);
        raw.command(&[b"CLIENT", b"LIST"]);
        match raw.read_frame() {
            resp::Frame::Bulk(text) => String::from_utf8_lossy(&text).contains("cmd=get"),
            other => panic!("CLIENT LIST answered {other:?}"),
        }
    };
    let served: Vec<bool> = (0..3).map(served).collect();
    assert_eq!(served, [false, true, false], "which zones served the reads");
    // The keys' leaders are spread over the nodes, so without the zone
    // preference the reads would have reached other nodes too.
    let leaders: BTreeSet<usize> = keys
        .iter()
        .map(|key| leader_of(&cluster, cluster::key_slot(key.as_bytes())))
        .collect();
    assert!(leaders.len() > 1, "the keys' leaders: {leaders:?}");
}

/// Nodes that lead two shards each: FLUSHALL through the router empties
/// every shard, INFO keyspace through the router counts the whole cluster,
/// and each node's own INFO keyspace counts the shards it leads.
#[test]
fn flushall_and_info_keyspace_cover_nodes_that_lead_several_shards() {
    let cluster = Cluster::start(3, &["--replicas", "3", "--shards", "6"], &[]);
    let router = Router::start(&seeds(&cluster), &[]);
    router.wait_serving();
    let mut connection = router.redis();
    let keys = keys("many", 300);
    let mut pipe = redis::pipe();
    for (index, key) in keys.iter().enumerate() {
        if index % 3 == 0 {
            pipe.cmd("SET")
                .arg(key)
                .arg(index)
                .arg("EX")
                .arg(1000)
                .ignore();
        } else {
            pipe.cmd("SET").arg(key).arg(index).ignore();
        }
    }
    let () = pipe.query(&mut connection).unwrap();
    let keyspace_line = |text: &str| -> Option<String> {
        text.lines()
            .find(|line| line.starts_with("db0:"))
            .map(str::to_string)
    };
    let info: String = redis::cmd("INFO").query(&mut connection).unwrap();
    let line = keyspace_line(&info).expect("a db0 line");
    assert!(
        line.starts_with("db0:keys=300,expires=100,avg_ttl="),
        "{line}"
    );
    let ttl: u64 = line.rsplit('=').next().unwrap().parse().unwrap();
    assert!((990_000..=1_000_000).contains(&ttl), "{line}");
    // The same section alone, and the nodes' own reports add up to it.
    let alone: String = redis::cmd("INFO")
        .arg("keyspace")
        .query(&mut connection)
        .unwrap();
    assert!(alone.starts_with("# Keyspace\r\ndb0:keys=300,"), "{alone}");
    let mut per_node = 0;
    for member in &cluster.members {
        let mut node = redis::Client::open(format!("redis://127.0.0.1:{}", member.port))
            .unwrap()
            .get_connection()
            .unwrap();
        let report: String = redis::cmd("INFO").arg("keyspace").query(&mut node).unwrap();
        if let Some(line) = keyspace_line(&report) {
            let keys: u64 = line["db0:keys=".len()..]
                .split(',')
                .next()
                .unwrap()
                .parse()
                .unwrap();
            per_node += keys;
        }
    }
    assert_eq!(per_node, 300);
    let () = redis::cmd("FLUSHALL").query(&mut connection).unwrap();
    let size: u64 = redis::cmd("DBSIZE").query(&mut connection).unwrap();
    assert_eq!(size, 0);
    let info: String = redis::cmd("INFO")
        .arg("keyspace")
        .query(&mut connection)
        .unwrap();
    assert_eq!(keyspace_line(&info), None, "{info}");
}

/// A FLUSHALL pipelined behind a write on a node that leads several shards
/// empties all of them, not just the write's shard.
#[test]
fn a_pipelined_flushall_empties_every_shard_a_node_leads() {
    let cluster = Cluster::start(3, &["--replicas", "3", "--shards", "6"], &[]);
    let router = Router::start(&seeds(&cluster), &[]);
    router.wait_serving();
    let mut connection = router.redis();
    let mut pipe = redis::pipe();
    for key in keys("full", 300) {
        pipe.cmd("SET").arg(key).arg(1).ignore();
    }
    let () = pipe.query(&mut connection).unwrap();
    for index in 0..cluster.members.len() {
        // A slot this node leads, if any.
        let Some(slot) = (0..16384u16)
            .step_by(97)
            .find(|slot| leader_of(&cluster, *slot) == index)
        else {
            continue;
        };
        let mut node = cluster.client(index);
        let () = redis::pipe()
            .cmd("SET")
            .arg(format!("{{{}}}:x", tag_for_slot(slot)))
            .arg(1)
            .ignore()
            .cmd("FLUSHALL")
            .ignore()
            .query(&mut node)
            .unwrap();
    }
    let size: u64 = redis::cmd("DBSIZE").query(&mut connection).unwrap();
    assert_eq!(size, 0);
}

/// Nodes with `requirepass`: the nodes' own calls to each other (leader
/// reports, PUBLISH forwarding) and the admin CLI (`--password`)
/// authenticate; a cluster client with the password works; the router
/// reaches the nodes with `--upstream-password` and asks its own clients for
/// `--requirepass`.
#[test]
fn a_password_protected_cluster_serves_clients_the_cli_and_the_router() {
    let cluster = Cluster::start(
        3,
        &["--replicas", "3", "--password", "secret"],
        &["--requirepass", "secret"],
    );
    let url = |index: usize| format!("redis://:secret@127.0.0.1:{}/", cluster.members[index].port);
    // The CLI needs the password.
    let check = |password: Option<&str>| {
        let mut command = std::process::Command::new(slotraft_tests::support::binary());
        command
            .args(["cluster", "check"])
            .arg(format!("127.0.0.1:{}", cluster.members[0].port));
        if let Some(password) = password {
            command.args(["--password", password]);
        }
        command.output().expect("run slotraft cluster check")
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check(Some("secret")).status.success() {
        assert!(
            Instant::now() < deadline,
            "the cluster never became healthy"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(!check(None).status.success());
    // A cluster client with the password: keys of every shard.
    let client = redis::cluster::ClusterClient::new((0..3).map(url).collect::<Vec<_>>()).unwrap();
    let mut connection = client.get_connection().unwrap();
    for key in keys("locked", 30) {
        let () = redis::cmd("SET")
            .arg(&key)
            .arg(&key)
            .query(&mut connection)
            .unwrap();
    }
    // PUBLISH on one node reaches a subscriber on another (the forwarder
    // authenticates).
    let mut subscriber_connection = redis::Client::open(url(1))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut subscriber = subscriber_connection.as_pubsub();
    subscriber
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    subscriber.subscribe("locked-news").unwrap();
    let mut publisher = redis::Client::open(url(0))
        .unwrap()
        .get_connection()
        .unwrap();
    let _: i64 = redis::cmd("PUBLISH")
        .arg("locked-news")
        .arg("hello")
        .query(&mut publisher)
        .unwrap();
    let message = subscriber.get_message().expect("the forwarded message");
    assert_eq!(message.get_payload::<String>().unwrap(), "hello");
    drop(subscriber);
    // The router: its own password for clients, the nodes' for upstream.
    let router = Router::start(
        &seeds(&cluster),
        &["--upstream-password", "secret", "--requirepass", "gate"],
    );
    let mut raw = router.raw();
    raw.roundtrip(&["GET", "locked:0"], "-NOAUTH Authentication required.\r\n");
    raw.roundtrip(
        &["AUTH", "wrong"],
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    raw.roundtrip(&["AUTH", "gate"], "+OK\r\n");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        raw.command(&[b"GET", b"locked:0"]);
        match raw.read_frame() {
            resp::Frame::Bulk(value) if value == "locked:0".as_bytes() => break,
            other => assert!(
                Instant::now() < deadline,
                "GET through the router: {other:?}"
            ),
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut through = redis::Client::open(format!("redis://:gate@127.0.0.1:{}/", router.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let values: Vec<String> = redis::cmd("MGET")
        .arg(keys("locked", 30))
        .query(&mut through)
        .unwrap();
    assert_eq!(values, keys("locked", 30));
    let size: u64 = redis::cmd("DBSIZE").query(&mut through).unwrap();
    assert_eq!(size, 30);
}

/// Before AUTH, an unknown command or a wrong arity gets its own error (as
/// from Redis), AUTH inside MULTI is answered by the router, and a router
/// given a password for nodes that have none still reaches them.
#[test]
fn router_authentication_follows_redis_order_of_checks() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let router = Router::start(
        &seeds(&cluster),
        &["--upstream-password", "unused", "--requirepass", "gate"],
    );
    let mut raw = router.raw();
    raw.roundtrip(
        &["NOSUCHCOMMAND"],
        "-ERR unknown command 'NOSUCHCOMMAND', with args beginning with: \r\n",
    );
    raw.roundtrip(
        &["AUTH"],
        "-ERR wrong number of arguments for 'auth' command\r\n",
    );
    raw.roundtrip(&["PING"], "-NOAUTH Authentication required.\r\n");
    raw.roundtrip(&["AUTH", "gate"], "+OK\r\n");
    raw.roundtrip(&["MULTI"], "+OK\r\n");
    raw.roundtrip(&["AUTH", "gate"], "+OK\r\n");
    raw.roundtrip(&["SET", "auth:k", "v"], "+QUEUED\r\n");
    let deadline = Instant::now() + Duration::from_secs(30);
    raw.command(&[b"EXEC"]);
    let mut reply = raw.read_frame();
    while reply != resp::Frame::Array(vec![resp::Frame::OK]) {
        assert!(
            Instant::now() < deadline,
            "EXEC through the router: {reply:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
        raw.roundtrip(&["MULTI"], "+OK\r\n");
        raw.roundtrip(&["SET", "auth:k", "v"], "+QUEUED\r\n");
        raw.command(&[b"EXEC"]);
        reply = raw.read_frame();
    }
    raw.roundtrip(&["GET", "auth:k"], "$1\r\nv\r\n");
    raw.roundtrip(&["RESET"], "+RESET\r\n");
    raw.roundtrip(&["GET", "auth:k"], "-NOAUTH Authentication required.\r\n");
}

/// MONITOR through the router merges every node's stream: writes to keys of
/// every shard show up; only QUIT and RESET are taken meanwhile, and RESET
/// gives the connection back to the router.
#[test]
fn monitor_through_the_router_shows_every_shards_commands() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let router = Router::start(&seeds(&cluster), &[]);
    router.wait_serving();
    let mut monitor = router.raw();
    monitor.roundtrip(&["MONITOR"], "+OK\r\n");
    let written = keys("watched", 30);
    let mut writer = router.redis();
    for key in &written {
        let _: () = redis::cmd("SET")
            .arg(key)
            .arg("v")
            .query(&mut writer)
            .unwrap();
    }
    let mut unseen: BTreeSet<String> = written.iter().cloned().collect();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !unseen.is_empty() {
        assert!(Instant::now() < deadline, "never seen: {unseen:?}");
        let line = monitor.read_lines(1).remove(0);
        assert!(line.starts_with('+'), "a simple string: {line}");
        unseen.retain(|key| !line.contains(&format!("\"SET\" \"{key}\" \"v\"")));
    }
    // Other lines (the router's own slot-map refreshes) may come first.
    monitor.command(&[b"GET", b"watched:0"]);
    let refusal = loop {
        let line = monitor.read_lines(1).remove(0);
        if !line.starts_with('+') {
            break line;
        }
    };
    assert_eq!(
        refusal,
        "-ERR only QUIT and RESET are accepted while MONITOR runs through the router"
    );
    monitor.command(&[b"RESET"]);
    loop {
        let line = monitor.read_lines(1).remove(0);
        if line == "+RESET" {
            break;
        }
        assert!(line.starts_with('+'), "unexpected {line}");
    }
    for key in &written {
        monitor.roundtrip(&["GET", key], "$1\r\nv\r\n");
    }
}

/// Reads `count` pipelined replies from `raw`.
pub(crate) fn read_replies(raw: &mut Raw, count: usize) -> Vec<resp::Frame> {
    use std::io::Read;
    let (mut buffer, mut replies) = (Vec::new(), Vec::new());
    let mut chunk = [0u8; 4096];
    while replies.len() < count {
        match resp::parse_reply(&buffer) {
            Ok(Some((frame, used))) => {
                replies.push(frame);
                buffer.drain(..used);
            }
            Ok(None) => {
                let read = raw.stream.read(&mut chunk).expect("read replies");
                assert!(
                    read > 0,
                    "connection closed after {} replies",
                    replies.len()
                );
                buffer.extend_from_slice(&chunk[..read]);
            }
            Err(error) => panic!("bad reply: {error:?}"),
        }
    }
    replies
}

/// A node that leads several shards takes a pipeline of writes spread over
/// them, with a write for a shard it does not lead and reads in between: each
/// shard's writes are proposed together, and every reply comes back in the
/// order of the requests.
#[test]
fn a_node_answers_a_pipeline_over_its_shards_in_order() {
    let cluster = Cluster::start(3, &["--replicas", "3", "--shards", "6"], &[]);
    // Leadership can still move right after the cluster forms: a pipeline
    // that met a moving leader is tried again with fresh keys.
    for attempt in 0..10 {
        // One slot of each range, by the node that leads it.
        let slots: Vec<(u16, usize)> = (0..6u16)
            .map(|shard| shard * (16384 / 6) + 7)
            .map(|slot| (slot, leader_of(&cluster, slot)))
            .collect();
        let Some(node) =
            (0..3).find(|node| slots.iter().filter(|(_, leader)| leader == node).count() >= 2)
        else {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        };
        let mine: Vec<String> = slots
            .iter()
            .filter(|(_, leader)| *leader == node)
            .map(|(slot, _)| format!("{{{}}}{attempt}", tag_for_slot(*slot)))
            .collect();
        let (foreign_slot, _) = slots
            .iter()
            .find(|(_, leader)| *leader != node)
            .copied()
            .expect("some shard led elsewhere");
        let foreign = format!("{{{}}}{attempt}", tag_for_slot(foreign_slot));
        let (a, b) = (&mine[0], &mine[1]);
        let commands: Vec<Vec<String>> = [
            vec!["SET", &format!("{a}x"), "1"],
            vec!["INCR", &format!("{b}n")],
            vec!["SET", &format!("{a}y"), "2"],
            vec!["SET", &format!("{foreign}z"), "3"],
            vec!["INCR", &format!("{b}n")],
            vec!["RPUSH", &format!("{a}l"), "p", "q"],
            vec!["GET", &format!("{a}x")],
            vec!["INCR", &format!("{b}n")],
            vec!["GET", &format!("{b}n")],
        ]
        .into_iter()
        .map(|words| words.into_iter().map(str::to_string).collect())
        .collect();
        let mut raw = Raw::connect(cluster.members[node].port);
        for command in &commands {
            let arguments: Vec<&[u8]> = command.iter().map(|word| word.as_bytes()).collect();
            raw.command(&arguments);
        }
        let replies = read_replies(&mut raw, commands.len());
        let moved_elsewhere = |frame: &resp::Frame| matches!(frame, resp::Frame::Error(text) if text.starts_with(b"MOVED "));
        if replies
            .iter()
            .enumerate()
            .any(|(index, frame)| index != 3 && moved_elsewhere(frame))
        {
            continue;
        }
        let foreign_port = cluster.members[leader_of(&cluster, foreign_slot)].port;
        let expected = vec![
            resp::Frame::Simple("OK".into()),
            resp::Frame::Integer(1),
            resp::Frame::Simple("OK".into()),
            resp::Frame::error_owned(format!("MOVED {foreign_slot} 127.0.0.1:{foreign_port}")),
            resp::Frame::Integer(2),
            resp::Frame::Integer(2),
            resp::Frame::Bulk("1".into()),
            resp::Frame::Integer(3),
            resp::Frame::Bulk("3".into()),
        ];
        assert_eq!(replies, expected, "attempt {attempt}");
        return;
    }
    panic!("leadership never held still for one pipeline");
}
