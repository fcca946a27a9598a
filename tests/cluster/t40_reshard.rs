//! Online resharding under load: slots move between shards while a client
//! writes unique keys, deletes some again and increments counters in exactly
//! those slots. Afterwards every acknowledged write is present, every
//! acknowledged delete stays done, no counter lost or doubled an increment,
//! and the slots belong to their new shard.

use slotraft_tests::support::binary;
use slotraft_tests::support::cluster::Cluster;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Slots moved by the test (the first ones of shard 1).
const MOVED_SLOTS: u16 = 24;
/// Concurrent writers.
const WRITERS: usize = 4;
/// SETs per round trip.
const BATCH: u64 = 25;

/// A hash tag whose slot is `slot`.
fn tag_for_slot(slot: u16) -> String {
    (0u64..)
        .map(|counter| format!("t{counter}"))
        .find(|tag| cluster::key_slot(tag.as_bytes()) == slot)
        .unwrap()
}

#[derive(Default, Debug)]
struct History {
    /// Unique keys whose SET was acknowledged, with their value.
    written: BTreeMap<String, u64>,
    /// Per counter: acknowledged increments, increments with an error.
    counters: BTreeMap<String, (u64, u64)>,
    /// Written keys whose DEL was acknowledged.
    deleted: Vec<String>,
    /// Written keys whose DEL failed: present or not.
    maybe_deleted: Vec<String>,
}

fn writer(
    id: usize,
    cluster_urls: Vec<String>,
    tags: Vec<String>,
    stop: Arc<AtomicBool>,
) -> History {
    let client = redis::cluster::ClusterClientBuilder::new(cluster_urls)
        .retries(30)
        .min_retry_wait(20)
        .max_retry_wait(200)
        .build()
        .unwrap();
    let mut connection = client.get_connection().unwrap();
    let mut history = History::default();
    let mut sequence = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let tag = &tags[(sequence as usize) % tags.len()];
        // A batch of SETs in one round trip, so that many writes land in a
        // slot while its keys are being copied (a copy that missed them would
        // lose them). SET is idempotent: the batch is retried until
        // acknowledged.
        let keys: Vec<(String, u64)> = (0..BATCH)
            .map(|offset| {
                let value = sequence * BATCH + offset;
                (format!("{{{tag}}}:w{id}:{value}"), value)
            })
            .collect();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let mut pipe = redis::cluster::cluster_pipe();
            for (key, value) in &keys {
                pipe.cmd("SET").arg(key).arg(value).ignore();
            }
            match pipe.query::<()>(&mut connection) {
                Ok(()) => {
                    history.written.extend(keys.iter().cloned());
                    // One key of each batch is deleted again, so that keys
                    // also disappear while their slot is copied (a copy that
                    // missed it would bring the key back).
                    let (key, _) = &keys[0];
                    history.written.remove(key);
                    match redis::cmd("DEL").arg(key).query::<i64>(&mut connection) {
                        Ok(1) => history.deleted.push(key.clone()),
                        _ => history.maybe_deleted.push(key.clone()),
                    }
                    break;
                }
                Err(error) => {
                    assert!(Instant::now() < deadline, "SETs kept failing: {error}");
                    std::thread::sleep(Duration::from_millis(20));
                    // The pipeline does not follow MOVED itself: start over
                    // with a fresh slot map.
                    if let Ok(fresh) = client.get_connection() {
                        connection = fresh;
                    }
                }
            }
        }
        let counter = format!("{{{tag}}}:counter{id}");
        let entry = history.counters.entry(counter.clone()).or_default();
        match redis::cmd("INCR")
            .arg(&counter)
            .query::<i64>(&mut connection)
        {
            Ok(_) => entry.0 += 1,
            Err(_) => entry.1 += 1,
        }
        sequence += 1;
    }
    history
}

#[test]
fn slots_move_online_without_losing_or_doubling_writes() {
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let tags: Vec<String> = (0..MOVED_SLOTS).map(tag_for_slot).collect();
    let urls: Vec<String> = (0..3).map(|index| cluster.url(index)).collect();
    let stop = Arc::new(AtomicBool::new(false));
    // Several writers, so that writes keep landing in a slot while its keys
    // are being copied (a copy that missed them would lose them).
    let writers: Vec<_> = (0..WRITERS)
        .map(|id| {
            let (urls, tags, stop) = (urls.clone(), tags.clone(), stop.clone());
            std::thread::spawn(move || writer(id, urls, tags, stop))
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    cluster.reshard(1, 2, MOVED_SLOTS as usize);
    let check = std::process::Command::new(binary())
        .args(["cluster", "check"])
        .arg(format!("127.0.0.1:{}", cluster.members[1].port))
        .output()
        .expect("run slotraft cluster check");
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stdout)
    );
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let mut history = History::default();
    for writer in writers {
        let part = writer.join().unwrap();
        history.written.extend(part.written);
        history.counters.extend(part.counters);
        history.deleted.extend(part.deleted);
        history.maybe_deleted.extend(part.maybe_deleted);
    }
    assert!(
        history.written.len() > 50,
        "too few writes: {}",
        history.written.len()
    );

    let mut client = cluster.cluster_client();
    for (key, value) in &history.written {
        let stored: Option<u64> = redis::cmd("GET").arg(key).query(&mut client).unwrap();
        assert_eq!(stored, Some(*value), "acknowledged write of {key} lost");
    }
    assert!(!history.deleted.is_empty(), "no DEL was acknowledged");
    for key in &history.deleted {
        let stored: Option<u64> = redis::cmd("GET").arg(key).query(&mut client).unwrap();
        assert_eq!(stored, None, "acknowledged DEL of {key} undone");
    }
    for (counter, (acknowledged, unknown)) in &history.counters {
        let value: u64 = redis::cmd("GET")
            .arg(counter)
            .query::<Option<u64>>(&mut client)
            .unwrap()
            .unwrap_or(0);
        assert!(
            value >= *acknowledged && value <= acknowledged + unknown,
            "{counter}: value {value}, acknowledged {acknowledged}, unknown {unknown}"
        );
    }
    // The moved slots belong to shard 2 now; shard 1 kept none of their keys.
    let mut direct = cluster.client(0);
    let slots: Vec<redis::Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(&mut direct)
        .unwrap();
    let owner_of = |slot: i64| -> i64 {
        slots
            .iter()
            .find_map(|range| match range {
                redis::Value::Array(parts) => match (&parts[0], &parts[1], &parts[2]) {
                    (
                        redis::Value::Int(start),
                        redis::Value::Int(end),
                        redis::Value::Array(node),
                    ) if (*start..=*end).contains(&slot) => match &node[1] {
                        redis::Value::Int(port) => Some(*port),
                        _ => None,
                    },
                    _ => None,
                },
                _ => None,
            })
            .unwrap()
    };
    assert_eq!(
        owner_of(0),
        owner_of(5461),
        "slot 0 now belongs with shard 2's slots"
    );
    assert_ne!(owner_of(i64::from(MOVED_SLOTS)), owner_of(0));
    for index in 0..3 {
        let mut connection = cluster.client(index);
        for slot in [0, MOVED_SLOTS - 1] {
            let keys: Vec<String> = redis::cmd("CLUSTER")
                .arg("GETKEYSINSLOT")
                .arg(slot)
                .arg(1000)
                .query(&mut connection)
                .unwrap();
            let in_slot = |key: &String| cluster::key_slot(key.as_bytes()) == slot;
            let written = history.written.keys().filter(|key| in_slot(key)).count();
            // A writer's counter in this slot exists if an increment of it was
            // acknowledged, may exist if one failed, and does not if the
            // writer never reached this slot's tag (a slow run).
            let counters = history
                .counters
                .iter()
                .filter(|(counter, _)| in_slot(counter));
            let certain = counters
                .clone()
                .filter(|(_, (acked, _))| *acked > 0)
                .count();
            let possible = counters
                .filter(|(_, (acked, unknown))| *acked > 0 || *unknown > 0)
                .count()
                + history
                    .maybe_deleted
                    .iter()
                    .filter(|key| in_slot(key))
                    .count();
            // Either this node answers for the new owner (all keys) or for
            // nothing at all; never a leftover copy in the old shard.
            assert!(
                keys.is_empty() || (written + certain..=written + possible).contains(&keys.len()),
                "slot {slot}: {} keys, {written} written, {certain} to {possible} counters",
                keys.len()
            );
        }
    }
}

/// A slot whose keys take many export batches, some cut short by the batch
/// byte limit (values of several megabytes), moves whole: every key, value
/// and expiry arrives on the new owner.
#[test]
fn a_slot_of_many_keys_and_large_values_moves_whole() {
    const SMALL: usize = 2_500;
    const LARGE: usize = 3;
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let tag = tag_for_slot(0);
    let mut client = cluster.cluster_client();
    for chunk in (0..SMALL).collect::<Vec<_>>().chunks(250) {
        let mut mset = redis::cmd("MSET");
        for index in chunk {
            mset.arg(format!("{{{tag}}}:small:{index}"))
                .arg(format!("value-{index}"));
        }
        mset.query::<()>(&mut client).unwrap();
    }
    let large = |index: usize| vec![b'a' + index as u8; 3 << 20];
    for index in 0..LARGE {
        redis::cmd("SET")
            .arg(format!("{{{tag}}}:large:{index}"))
            .arg(large(index))
            .query::<()>(&mut client)
            .unwrap();
    }
    redis::cmd("SET")
        .arg(format!("{{{tag}}}:expiring"))
        .arg("soon")
        .arg("EX")
        .arg(1000)
        .query::<()>(&mut client)
        .unwrap();
    // A stream whose every detail must survive the move, down to an idle
    // consumer's never-set active-time, which Redis's stream form drops.
    let stream = format!("{{{tag}}}:stream");
    for index in 1..=150 {
        redis::cmd("XADD")
            .arg(&stream)
            .arg(format!("{index}-1"))
            .arg("f")
            .arg(index)
            .query::<String>(&mut client)
            .unwrap();
    }
    let stream_setup: &[&[&str]] = &[
        &["XDEL", &stream, "7-1"],
        &["XGROUP", "CREATE", &stream, "g", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "3",
            "STREAMS",
            &stream,
            ">",
        ],
        &["XGROUP", "CREATECONSUMER", &stream, "g", "idle-one"],
    ];
    for command in stream_setup {
        redis::cmd(command[0])
            .arg(&command[1..])
            .query::<redis::Value>(&mut client)
            .unwrap();
    }
    let full = |client: &mut redis::cluster::ClusterConnection| -> redis::Value {
        redis::cmd("XINFO")
            .arg("STREAM")
            .arg(&stream)
            .arg("FULL")
            .query(client)
            .unwrap()
    };
    let stream_before = full(&mut client);
    cluster.reshard(1, 2, 1);
    let mut client = cluster.cluster_client();
    assert_eq!(full(&mut client), stream_before);
    for index in 0..SMALL {
        let stored: Option<String> = redis::cmd("GET")
            .arg(format!("{{{tag}}}:small:{index}"))
            .query(&mut client)
            .unwrap();
        assert_eq!(stored.as_deref(), Some(format!("value-{index}").as_str()));
    }
    for index in 0..LARGE {
        let stored: Option<Vec<u8>> = redis::cmd("GET")
            .arg(format!("{{{tag}}}:large:{index}"))
            .query(&mut client)
            .unwrap();
        assert!(stored == Some(large(index)), "large value {index} differs");
    }
    let ttl: i64 = redis::cmd("TTL")
        .arg(format!("{{{tag}}}:expiring"))
        .query(&mut client)
        .unwrap();
    assert!((900..=1000).contains(&ttl), "TTL after the move: {ttl}");
    // Every key is on the new owner, counted once.
    let counted: i64 = redis::cmd("CLUSTER")
        .arg("COUNTKEYSINSLOT")
        .arg(0)
        .query(&mut client)
        .unwrap();
    assert_eq!(counted, (SMALL + LARGE + 2) as i64);
    let mut direct = cluster.client(0);
    let slots: Vec<redis::Value> = redis::cmd("CLUSTER")
        .arg("SLOTS")
        .query(&mut direct)
        .unwrap();
    let first = match &slots[0] {
        redis::Value::Array(parts) => parts[0].clone(),
        other => panic!("unexpected CLUSTER SLOTS entry {other:?}"),
    };
    assert!(
        slots.iter().any(|range| matches!(range,
            redis::Value::Array(parts) if parts[0] == redis::Value::Int(0) && parts[1] == redis::Value::Int(0))),
        "slot 0 is a range of its own after the move (first range starts at {first:?})"
    );
}

/// A transaction whose slot is frozen for a migration when EXEC applies is
/// not run: EXEC answers the one TRYAGAIN, as Redis Cluster does, and changes
/// nothing; a plain pipeline's writes each get their own TRYAGAIN.
#[test]
fn exec_in_a_frozen_slot_answers_one_tryagain() {
    use crate::t70_router::{leader_of, read_replies, tag_for_slot};
    use slotraft_tests::support::Raw;
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let key = format!("{{{}}}k", tag_for_slot(0));
    // Slot 0 is shard 1's; its leader takes the freeze (retried while
    // leadership settles).
    let mut frozen = None;
    for _ in 0..50 {
        let leader = leader_of(&cluster, 0);
        let mut raw = Raw::connect(cluster.members[leader].port);
        raw.command(&[b"SET", key.as_bytes(), b"1"]);
        let set = read_replies(&mut raw, 1);
        raw.command(&[b"SLOTRAFT", b"SLOT-STATE", b"1", b"0", b"1"]);
        let freeze = read_replies(&mut raw, 1);
        if set == [resp::Frame::Simple("OK".into())] && !matches!(freeze[0], resp::Frame::Error(_))
        {
            frozen = Some(raw);
            break;
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let mut raw = frozen.expect("slot 0 frozen on its leader");
    let tryagain =
        resp::Frame::Error("TRYAGAIN Multiple keys request during rehashing of slot".into());
    for command in [
        &[&b"MULTI"[..]][..],
        &[b"GET", key.as_bytes()],
        &[b"SET", key.as_bytes(), b"2"],
        &[b"EXEC"],
        &[b"SET", key.as_bytes(), b"3"],
        &[b"GET", key.as_bytes()],
    ] {
        raw.command(command);
    }
    let replies = read_replies(&mut raw, 6);
    assert_eq!(
        replies,
        vec![
            resp::Frame::Simple("OK".into()),
            resp::Frame::Simple("QUEUED".into()),
            resp::Frame::Simple("QUEUED".into()),
            tryagain.clone(),
            tryagain,
            resp::Frame::Bulk("1".into()),
        ]
    );
    // Serving again, the same transaction runs.
    raw.command(&[b"SLOTRAFT", b"SLOT-STATE", b"1", b"0", b"0"]);
    read_replies(&mut raw, 1);
    for command in [
        &[&b"MULTI"[..]][..],
        &[b"GET", key.as_bytes()],
        &[b"SET", key.as_bytes(), b"2"],
        &[b"EXEC"],
    ] {
        raw.command(command);
    }
    let replies = read_replies(&mut raw, 4);
    assert_eq!(
        replies[3],
        resp::Frame::Array(vec![
            resp::Frame::Bulk("1".into()),
            resp::Frame::Simple("OK".into())
        ])
    );
}

/// A migration rolled forward freezes its source again after the source
/// already dropped the slot: the slot stays dropped, and a read of one of its
/// keys there answers TRYAGAIN, not nil from a keyspace that no longer holds
/// it (found by the cluster simulation, seed 123).
#[test]
fn freezing_a_dropped_slot_again_keeps_it_dropped() {
    use crate::t70_router::{leader_of, read_replies, tag_for_slot};
    use slotraft_tests::support::Raw;
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let key = format!("{{{}}}k", tag_for_slot(0));
    let tryagain =
        resp::Frame::Error("TRYAGAIN Multiple keys request during rehashing of slot".into());
    for _ in 0..50 {
        let leader = leader_of(&cluster, 0);
        let mut raw = Raw::connect(cluster.members[leader].port);
        let commands: [&[&[u8]]; 5] = [
            &[b"SET", key.as_bytes(), b"1"],
            &[b"SLOTRAFT", b"SLOT-STATE", b"1", b"0", b"1"],
            &[b"SLOTRAFT", b"DROP-SLOT", b"1", b"0"],
            &[b"SLOTRAFT", b"SLOT-STATE", b"1", b"0", b"1"],
            &[b"GET", key.as_bytes()],
        ];
        for command in commands {
            raw.command(command);
        }
        let replies = read_replies(&mut raw, 5);
        if replies[..4]
            .iter()
            .any(|reply| matches!(reply, resp::Frame::Error(_)))
        {
            // Leadership moved under the test: the slot may be in any state
            // on the old leader; start over there.
            raw.command(&[b"SLOTRAFT", b"SLOT-STATE", b"1", b"0", b"0"]);
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        assert_eq!(replies[4], tryagain, "{replies:?}");
        return;
    }
    panic!("slot 0's leader never held still");
}

/// Sends `commands` as one pipeline to slot 0's leader and reads their
/// replies. None when any failed (leadership moved under the test): slot 0
/// (of shard 1) is then served again, so the caller starts over.
fn on_slot_0_leader(
    cluster: &Cluster,
    commands: &[&[&[u8]]],
) -> Option<(slotraft_tests::support::Raw, Vec<resp::Frame>)> {
    use crate::t70_router::{leader_of, read_replies};
    let leader = leader_of(cluster, 0);
    let mut raw = slotraft_tests::support::Raw::connect(cluster.members[leader].port);
    for command in commands {
        raw.command(command);
    }
    let replies = read_replies(&mut raw, commands.len());
    if replies
        .iter()
        .any(|reply| matches!(reply, resp::Frame::Error(_)))
    {
        raw.command(&[b"SLOTRAFT", b"SLOT-STATE", b"1", b"0", b"0"]);
        std::thread::sleep(Duration::from_millis(200));
        return None;
    }
    Some((raw, replies))
}

/// A slot being copied while it takes writes (SLOT-STATE 3) records the keys
/// that change: EXPORT-CHANGES returns exactly those, the present ones with
/// their payload and the deleted ones as gone, and names the slot untracked
/// once the record is forgotten (served again) or was never started (frozen
/// first), so that the admin copies it whole then.
#[test]
fn a_slot_copied_under_writes_records_what_changed() {
    use crate::t70_router::{read_replies, tag_for_slot};
    use resp::Frame;
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let tag = tag_for_slot(0);
    let [a, b, c, d] = ["a", "b", "c", "d"].map(|name| format!("{{{tag}}}{name}"));
    let ok = || Frame::Simple("OK".into());
    let slot_list =
        |slots: &[i64]| Frame::Array(slots.iter().map(|s| Frame::Integer(*s)).collect());
    for _ in 0..50 {
        let commands: [&[&[u8]]; 10] = [
            &[b"SET", a.as_bytes(), b"1"],
            &[b"SET", b.as_bytes(), b"2"],
            &[b"SET", c.as_bytes(), b"3"],
            &[b"SLOTRAFT", b"SLOT-STATE", b"1", b"0", b"3"],
            &[b"SLOTRAFT", b"SLOT-STATE", b"1", b"0", b"3"],
            // The bulk copy's export reads every key without recording it.
            &[b"SLOTRAFT", b"EXPORT", b"1", b"0", b"", b"100"],
            // Served as usual meanwhile.
            &[b"SET", a.as_bytes(), b"10"],
            &[b"DEL", b.as_bytes()],
            &[b"SET", d.as_bytes(), b"4", b"PX", b"100000"],
            &[b"SLOTRAFT", b"EXPORT-CHANGES", b"1", b"0", b"", b"100"],
        ];
        let Some((mut raw, replies)) = on_slot_0_leader(&cluster, &commands) else {
            continue;
        };
        let Frame::Array(export) = &replies[5] else {
            panic!("EXPORT answered {:?}", replies[5]);
        };
        assert!(matches!(&export[1], Frame::Array(items) if items.len() == 3));
        let replies: Vec<Frame> = replies[2..5].iter().chain(&replies[6..]).cloned().collect();
        assert_eq!(replies[0], ok());
        assert_eq!(replies[1], slot_list(&[0]), "the record starts afresh");
        assert_eq!(replies[2], slot_list(&[]), "and then goes on");
        assert_eq!(replies[3..6], [ok(), Frame::Integer(1), ok()]);
        let Frame::Array(export) = &replies[6] else {
            panic!("EXPORT-CHANGES answered {:?}", replies[6]);
        };
        assert!(matches!(export[0], Frame::Integer(time) if time > 0));
        assert_eq!(export[1], slot_list(&[]), "slot 0 is tracked");
        let Frame::Array(items) = &export[2] else {
            panic!("items {:?}", export[2]);
        };
        let summary: Vec<(String, bool, bool)> = items
            .iter()
            .map(|item| match item {
                Frame::Array(parts) => (
                    match &parts[0] {
                        Frame::Bulk(key) => String::from_utf8_lossy(key).into_owned(),
                        other => panic!("key {other:?}"),
                    },
                    matches!(parts[1], Frame::Integer(at) if at > 0),
                    matches!(parts[2], Frame::Bulk(_)),
                ),
                other => panic!("item {other:?}"),
            })
            .collect();
        // In byte order; c did not change; b is gone; d has its expiry.
        assert_eq!(
            summary,
            vec![
                (a.clone(), false, true),
                (b.clone(), false, false),
                (d.clone(), true, true)
            ]
        );
        let Frame::Array(parts) = &items[1] else {
            unreachable!()
        };
        assert_eq!(parts[1..], [Frame::Integer(-2), Frame::Null]);
        // Served again: the record is forgotten, the slot untracked.
        let commands: [&[&[u8]]; 4] = [
            &[b"SLOTRAFT", b"SLOT-STATE", b"1", b"0", b"0"],
            &[b"SLOTRAFT", b"EXPORT-CHANGES", b"1", b"0", b"", b"100"],
            // Frozen without a record: still untracked.
            &[b"SLOTRAFT", b"SLOT-STATE", b"1", b"0", b"1"],
            &[b"SLOTRAFT", b"SLOT-STATE", b"1", b"0", b"3"],
        ];
        for command in commands {
            raw.command(command);
        }
        let replies = read_replies(&mut raw, 4);
        raw.command(&[b"SLOTRAFT", b"SLOT-STATE", b"1", b"0", b"0"]);
        read_replies(&mut raw, 1);
        if replies.iter().any(|reply| matches!(reply, Frame::Error(_))) {
            std::thread::sleep(Duration::from_millis(200));
            continue;
        }
        let Frame::Array(export) = &replies[1] else {
            panic!("EXPORT-CHANGES answered {:?}", replies[1]);
        };
        assert_eq!(export[1..], [slot_list(&[0]), Frame::Array(Vec::new())]);
        assert_eq!(replies[3], slot_list(&[]), "a frozen slot starts no record");
        return;
    }
    panic!("slot 0's leader never held still");
}

/// Keys left in a slot its shard closed (an admin stopped between a
/// migration's change of owner and its deletion) are deleted by the shard's
/// leader on its own; a bounded deletion of a slot that is served again
/// deletes nothing.
#[test]
fn keys_left_in_a_closed_slot_are_reclaimed() {
    use crate::t70_router::{read_replies, tag_for_slot};
    use resp::Frame;
    let cluster = Cluster::start(3, &["--replicas", "3"], &[]);
    let key = format!("{{{}}}k", tag_for_slot(0));
    for _ in 0..50 {
        let commands: [&[&[u8]]; 4] = [
            &[b"SET", key.as_bytes(), b"1"],
            &[b"SLOTRAFT", b"DROP-SLOT", b"1", b"0", b"5000"],
            &[b"GET", key.as_bytes()],
            &[b"SLOTRAFT", b"SLOT-STATE", b"1", b"0", b"2"],
        ];
        let Some((mut raw, replies)) = on_slot_0_leader(&cluster, &commands) else {
            continue;
        };
        assert_eq!(
            replies[..3],
            [
                Frame::Simple("OK".into()),
                Frame::Integer(0),
                Frame::Bulk("1".into())
            ],
            "a served slot keeps its keys"
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            raw.command(&[b"CLUSTER", b"COUNTKEYSINSLOT", b"0"]);
            let count = read_replies(&mut raw, 1);
            if count == [Frame::Integer(0)] {
                break;
            }
            assert!(Instant::now() < deadline, "still {count:?} keys");
            std::thread::sleep(Duration::from_millis(50));
        }
        raw.command(&[b"SLOTRAFT", b"SLOT-STATE", b"1", b"0", b"0"]);
        raw.command(&[b"GET", key.as_bytes()]);
        assert_eq!(
            read_replies(&mut raw, 2),
            [Frame::Simple("OK".into()), Frame::Null]
        );
        return;
    }
    panic!("slot 0's leader never held still");
}
