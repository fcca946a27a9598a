//! maxmemory on a replicated shard: the leader chooses the victims and the
//! log carries them, so every replica deletes the same keys.

use slotraft_tests::support::group::Group;
use std::time::Duration;

fn info_number(connection: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg(section).query(connection).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
}

/// On every replica (read with READONLY): `absent` is not there, `present` is.
fn assert_absent_and_present(group: &Group, absent: &str, present: &str) {
    for index in 0..3 {
        let mut replica = group.client(index);
        let _: () = redis::cmd("READONLY").query(&mut replica).unwrap();
        let exists: (i64, i64) = redis::pipe()
            .cmd("EXISTS")
            .arg(absent)
            .cmd("EXISTS")
            .arg(present)
            .query(&mut replica)
            .unwrap();
        assert_eq!(exists, (0, 1), "replica {index}");
    }
}

#[test]
fn evictions_go_through_the_log() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    let used = info_number(&mut connection, "memory", "used_memory");
    // Room for a few hundred 1 KB values beyond what the leader uses now.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("allkeys-random")
        .arg("maxmemory")
        .arg(used + 4_000_000)
        .query(&mut connection)
        .unwrap();
    let value = vec![b'v'; 1000];
    // Pipelined: a run of writes becomes one entry, evictions go before it.
    for batch in 0..160 {
        let mut pipe = redis::pipe();
        for index in batch * 50..(batch + 1) * 50 {
            pipe.cmd("SET")
                .arg(format!("k:{index}"))
                .arg(&value)
                .ignore();
        }
        let _: () = pipe.query(&mut connection).unwrap();
    }
    let evicted = info_number(&mut connection, "stats", "evicted_keys");
    assert!(evicted > 0, "nothing was evicted");
    let keys: u64 = redis::cmd("DBSIZE").query(&mut connection).unwrap();
    assert_eq!(keys + evicted, 8000);
    // Every replica deleted exactly the same keys.
    group.assert_replicas_agree(leader, Duration::from_secs(20));
    for index in 0..3 {
        let mut replica = group.client(index);
        assert_eq!(info_number(&mut replica, "stats", "evicted_keys"), evicted);
    }
}

/// The leader's out-of-memory state travels in the entry: a script without a
/// shebang fails its first write with OOM on every replica alike, one that
/// wrote first keeps writing, MULTI queues nothing, and the replicas end
/// with equal digests.
#[test]
fn scripts_and_transactions_meet_the_leaders_oom_on_every_replica() {
    let group = Group::start(3, &[]);
    let leader = group.wait_leader(Duration::from_secs(10));
    let mut connection = group.client(leader);
    let () = redis::cmd("MSET")
        .arg("k:0")
        .arg("a")
        .arg("k:1")
        .arg("b")
        .query(&mut connection)
        .unwrap();
    // A limit far below what the process uses: always out of memory.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("noeviction")
        .arg("maxmemory")
        .arg(1)
        .query(&mut connection)
        .unwrap();
    let error = redis::cmd("SET")
        .arg("k:2")
        .arg("c")
        .query::<()>(&mut connection)
        .unwrap_err();
    assert_eq!(error.code(), Some("OOM"), "{error:?}");
    let error = redis::cmd("EVAL")
        .arg("return redis.call('SET', KEYS[1], 'x')")
        .arg(1)
        .arg("scripted")
        .query::<String>(&mut connection)
        .unwrap_err();
    assert_eq!(error.code(), Some("OOM"), "{error:?}");
    let written: String = redis::cmd("EVAL")
        .arg("redis.call('DEL', KEYS[1]); return redis.call('SET', KEYS[2], 'x')")
        .arg(2)
        .arg("k:0")
        .arg("written")
        .query(&mut connection)
        .unwrap();
    assert_eq!(written, "OK");
    let () = redis::cmd("MULTI").query(&mut connection).unwrap();
    let error = redis::cmd("GET")
        .arg("k:1")
        .query::<String>(&mut connection)
        .unwrap_err();
    assert_eq!(error.code(), Some("OOM"), "{error:?}");
    let error = redis::cmd("EXEC")
        .query::<Vec<String>>(&mut connection)
        .unwrap_err();
    assert_eq!(error.code(), Some("EXECABORT"), "{error:?}");
    group.assert_replicas_agree(leader, Duration::from_secs(20));
    assert_absent_and_present(&group, "scripted", "written");
    // Queued while there was room, run once there is none: a shebang script
    // that may write aborts the EXEC; one that allows OOM runs.
    let mut admin = group.client(leader);
    let limit = |bytes: u64, admin: &mut redis::Connection| {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(bytes)
            .query(admin)
            .unwrap();
    };
    for (script, key, aborted) in [
        (
            "#!lua\nreturn redis.call('SET', KEYS[1], 'x')",
            "denied",
            true,
        ),
        (
            "#!lua flags=allow-oom\nreturn redis.call('SET', KEYS[1], 'y')",
            "allowed",
            false,
        ),
    ] {
        limit(0, &mut admin);
        let () = redis::cmd("MULTI").query(&mut connection).unwrap();
        let queued: String = redis::cmd("EVAL")
            .arg(script)
            .arg(1)
            .arg(key)
            .query(&mut connection)
            .unwrap();
        assert_eq!(queued, "QUEUED");
        limit(1, &mut admin);
        let outcome = redis::cmd("EXEC").query::<Vec<String>>(&mut connection);
        if aborted {
            let error = outcome.unwrap_err();
            assert_eq!(error.code(), Some("EXECABORT"), "{error:?}");
        } else {
            assert_eq!(outcome.unwrap(), vec!["OK".to_string()]);
        }
    }
    group.assert_replicas_agree(leader, Duration::from_secs(20));
    assert_absent_and_present(&group, "denied", "allowed");
}
