//! maxmemory on a standalone server: which keys each policy evicts, and
//! noeviction's OOM for writes while reads and deletes go on.

use slotraft_tests::support::Server;
use std::time::Duration;

const VALUE_BYTES: usize = 1000;

fn info_number(connection: &mut redis::Connection, section: &str, field: &str) -> u64 {
    let info: String = redis::cmd("INFO").arg(section).query(connection).unwrap();
    info.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
}

/// A server whose limit leaves room for about `room_keys` more values.
fn limited(policy: &str, room_keys: usize) -> (Server, redis::Connection) {
    let server = Server::start(&[]);
    let mut connection = server.redis();
    let used = info_number(&mut connection, "memory", "used_memory");
    let limit = used + (room_keys * (VALUE_BYTES + 100)) as u64;
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg(policy)
        .arg("maxmemory")
        .arg(limit)
        .query(&mut connection)
        .unwrap();
    (server, connection)
}

fn value() -> Vec<u8> {
    vec![b'v'; VALUE_BYTES]
}

/// SETs `prefix:0..count` (with a TTL in seconds when given); answers how
/// many writes were refused.
fn fill(connection: &mut redis::Connection, prefix: &str, count: usize, ttl: Option<u64>) -> usize {
    let mut refused = 0;
    for index in 0..count {
        let mut command = redis::cmd("SET");
        command.arg(format!("{prefix}:{index}")).arg(value());
        if let Some(ttl) = ttl {
            command.arg("EX").arg(ttl + index as u64);
        }
        let reply: redis::RedisResult<()> = command.query(connection);
        if let Err(error) = reply {
            assert_eq!(error.code(), Some("OOM"), "{error:?}");
            refused += 1;
        }
    }
    refused
}

fn surviving(connection: &mut redis::Connection, prefix: &str, count: usize) -> Vec<usize> {
    (0..count)
        .filter(|index| {
            redis::cmd("EXISTS")
                .arg(format!("{prefix}:{index}"))
                .query::<i64>(connection)
                .unwrap()
                == 1
        })
        .collect()
}

#[test]
fn noeviction_refuses_writes_but_serves_reads_and_deletes() {
    let (_server, mut connection) = limited("noeviction", 300);
    let refused = fill(&mut connection, "k", 1000, None);
    assert!(refused > 0, "nothing was refused");
    let error = redis::cmd("SET")
        .arg("one-more")
        .arg(value())
        .query::<()>(&mut connection)
        .unwrap_err();
    assert_eq!(error.code(), Some("OOM"));
    assert_eq!(
        error.detail(),
        Some("command not allowed when used memory > 'maxmemory'.")
    );
    let read: Vec<u8> = redis::cmd("GET").arg("k:0").query(&mut connection).unwrap();
    assert_eq!(read, value());
    let deleted: i64 = redis::cmd("DEL")
        .arg(
            (0..200)
                .map(|index| format!("k:{index}"))
                .collect::<Vec<_>>(),
        )
        .query(&mut connection)
        .unwrap();
    assert_eq!(deleted, 200);
    let _: () = redis::cmd("SET")
        .arg("after-delete")
        .arg(value())
        .query(&mut connection)
        .unwrap();
    assert_eq!(info_number(&mut connection, "stats", "evicted_keys"), 0);
}

#[test]
fn allkeys_policies_make_room_for_every_write() {
    for policy in ["allkeys-random", "allkeys-lru", "allkeys-lfu"] {
        let (_server, mut connection) = limited(policy, 300);
        assert_eq!(fill(&mut connection, "k", 1500, None), 0, "{policy}");
        let evicted = info_number(&mut connection, "stats", "evicted_keys");
        let keys: u64 = redis::cmd("DBSIZE").query(&mut connection).unwrap();
        assert!(evicted > 0, "{policy}: nothing evicted");
        assert_eq!(keys + evicted, 1500, "{policy}");
        // The newest key is there.
        assert!(
            surviving(&mut connection, "k", 1500).contains(&1499),
            "{policy}"
        );
    }
}

#[test]
fn volatile_policies_never_evict_persistent_keys() {
    for policy in [
        "volatile-random",
        "volatile-lru",
        "volatile-lfu",
        "volatile-ttl",
    ] {
        let (_server, mut connection) = limited(policy, 400);
        assert_eq!(
            fill(&mut connection, "persistent", 150, None),
            0,
            "{policy}"
        );
        assert_eq!(
            fill(&mut connection, "volatile", 800, Some(3600)),
            0,
            "{policy}"
        );
        assert_eq!(
            surviving(&mut connection, "persistent", 150).len(),
            150,
            "{policy} evicted a key without a TTL"
        );
        assert!(
            info_number(&mut connection, "stats", "evicted_keys") > 0,
            "{policy}"
        );
        // Once no volatile key is left to evict, writes are refused.
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(1)
            .query(&mut connection)
            .unwrap();
        let error = redis::cmd("SET")
            .arg("more")
            .arg(value())
            .query::<()>(&mut connection)
            .unwrap_err();
        assert_eq!(error.code(), Some("OOM"), "{policy}");
        assert_eq!(
            surviving(&mut connection, "persistent", 150).len(),
            150,
            "{policy}"
        );
    }
}

#[test]
fn volatile_ttl_evicts_the_soonest_to_expire_first() {
    let (_server, mut connection) = limited("volatile-ttl", 400);
    // TTLs grow with the index: 3600 s for expiring:0, 3600 + i for the others.
    assert_eq!(fill(&mut connection, "expiring", 800, Some(3600)), 0);
    let survivors = surviving(&mut connection, "expiring", 800);
    assert!(survivors.len() < 800, "nothing was evicted");
    let mean = survivors.iter().sum::<usize>() as f64 / survivors.len() as f64;
    // Survivors lean strongly to the late-expiring end (uniform would be ~400
    // over everything ever written; sampling five keys per pick keeps the
    // choice approximate, as in Redis).
    assert!(mean > 500.0, "mean surviving index {mean}");
}

#[test]
fn lfu_keeps_the_hot_keys() {
    let (_server, mut connection) = limited("allkeys-lfu", 400);
    assert_eq!(fill(&mut connection, "hot", 100, None), 0);
    for _ in 0..30 {
        for index in 0..100 {
            let _: Vec<u8> = redis::cmd("GET")
                .arg(format!("hot:{index}"))
                .query(&mut connection)
                .unwrap();
        }
    }
    assert_eq!(fill(&mut connection, "cold", 1200, None), 0);
    let hot = surviving(&mut connection, "hot", 100).len();
    assert!(hot >= 90, "only {hot} of 100 hot keys survived");
}

#[test]
fn lru_keeps_the_recently_used_keys() {
    let (_server, mut connection) = limited("allkeys-lru", 400);
    assert_eq!(fill(&mut connection, "old", 250, None), 0);
    // The LRU clock counts seconds.
    std::thread::sleep(Duration::from_millis(2100));
    assert_eq!(fill(&mut connection, "recent", 100, None), 0);
    std::thread::sleep(Duration::from_millis(1100));
    for index in 0..100 {
        let _: Vec<u8> = redis::cmd("GET")
            .arg(format!("recent:{index}"))
            .query(&mut connection)
            .unwrap();
    }
    assert_eq!(fill(&mut connection, "filler", 300, None), 0);
    let recent = surviving(&mut connection, "recent", 100).len();
    let old = surviving(&mut connection, "old", 250).len();
    // Sampled LRU with a one-second clock is approximate (as Redis's):
    // recently used keys survive far more often than idle ones, where random
    // eviction would treat them alike.
    let recent_rate = recent as f64 / 100.0;
    let old_rate = old as f64 / 250.0;
    assert!(
        recent >= 70 && recent_rate > 2.0 * old_rate,
        "recent keys kept {recent}/100, old keys {old}/250"
    );
}

/// Under noeviction with memory over the limit (a limit of 1 byte): nothing is queued in MULTI
/// (OOM, then EXEC answers EXECABORT); an EXEC whose queued writes may grow
/// memory is refused as a whole; a script without a shebang fails its first
/// write with OOM but may read, delete, and keep writing once it wrote; a
/// shebang script that may write is refused unless it allows OOM.
#[test]
fn transactions_and_scripts_meet_oom_as_in_redis() {
    let server = Server::start(&[]);
    let mut connection = server.redis();
    let () = redis::cmd("MSET")
        .arg("k:210")
        .arg("a")
        .arg("k:211")
        .arg("b")
        .query(&mut connection)
        .unwrap();
    let oom = "OOM command not allowed when used memory > 'maxmemory'.";
    let mut raw = server.connect();
    // Queued while there was room, executed once there is none.
    raw.roundtrip(&["MULTI"], "+OK\r\n");
    raw.roundtrip(&["SET", "queued", "x"], "+QUEUED\r\n");
    // A limit far below what the process uses: out of memory from now on.
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory-policy")
        .arg("noeviction")
        .arg("maxmemory")
        .arg(1)
        .query(&mut connection)
        .unwrap();
    raw.roundtrip(
        &["EXEC"],
        &format!("-EXECABORT Transaction discarded because of: {oom}\r\n"),
    );
    raw.roundtrip(&["EXISTS", "queued"], ":0\r\n");
    raw.roundtrip(&["MULTI"], "+OK\r\n");
    raw.roundtrip(&["GET", "k:210"], &format!("-{oom}\r\n"));
    raw.roundtrip(
        &["EXEC"],
        "-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    // A script's first write that may grow memory fails; reads and DEL run.
    let script = "local v = redis.call('GET', KEYS[1]); return redis.call('SET', KEYS[2], 'x')";
    raw.roundtrip(
        &["EVAL", script, "2", "k:210", "new-key"],
        &format!("-{oom} script: dd9d44e3f92899df1a3017dd722ec798f4995bfe, on @user_script:1.\r\n"),
    );
    let deleted: i64 = redis::cmd("EVAL")
        .arg("return redis.call('DEL', KEYS[1])")
        .arg(1)
        .arg("k:210")
        .query(&mut connection)
        .unwrap();
    assert_eq!(deleted, 1);
    // Once a script wrote (DEL), later writes are not stopped half way.
    let written: String = redis::cmd("EVAL")
        .arg("redis.call('DEL', KEYS[1]); return redis.call('SET', KEYS[2], 'x')")
        .arg(2)
        .arg("k:211")
        .arg("written")
        .query(&mut connection)
        .unwrap();
    assert_eq!(written, "OK");
    let error = redis::cmd("EVAL")
        .arg("#!lua\nreturn 1")
        .arg(0)
        .query::<i64>(&mut connection)
        .unwrap_err();
    assert_eq!(error.code(), Some("OOM"), "{error:?}");
    let allowed: i64 = redis::cmd("EVAL")
        .arg("#!lua flags=allow-oom\nreturn 1")
        .arg(0)
        .query(&mut connection)
        .unwrap();
    assert_eq!(allowed, 1);
    let read_only: i64 = redis::cmd("EVAL")
        .arg("#!lua flags=no-writes\nreturn 2")
        .arg(0)
        .query(&mut connection)
        .unwrap();
    assert_eq!(read_only, 2);
    // Queued while there was room: at EXEC, a shebang script (or its SHA)
    // that may write and does not allow OOM counts as a write that may grow
    // memory; one that allows OOM does not.
    let limit = |bytes: u64, connection: &mut redis::Connection| {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg("maxmemory")
            .arg(bytes)
            .query(connection)
            .unwrap();
    };
    let writer = "#!lua\nreturn redis.call('SET', KEYS[1], 'x')";
    let allowing = "#!lua flags=allow-oom\nreturn redis.call('SET', KEYS[1], 'y')";
    limit(0, &mut connection);
    let sha: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(writer)
        .query(&mut connection)
        .unwrap();
    for queued in [
        vec!["EVAL", writer, "1", "tx:a"],
        vec!["EVALSHA", &sha, "1", "tx:a"],
    ] {
        limit(0, &mut connection);
        raw.roundtrip(&["MULTI"], "+OK\r\n");
        raw.roundtrip(&queued, "+QUEUED\r\n");
        limit(1, &mut connection);
        raw.roundtrip(
            &["EXEC"],
            &format!("-EXECABORT Transaction discarded because of: {oom}\r\n"),
        );
    }
    limit(0, &mut connection);
    raw.roundtrip(&["MULTI"], "+OK\r\n");
    raw.roundtrip(&["EVAL", allowing, "1", "tx:b"], "+QUEUED\r\n");
    limit(1, &mut connection);
    raw.roundtrip(&["EXEC"], "*1\r\n+OK\r\n");
    raw.roundtrip(&["EXISTS", "tx:a", "tx:b"], ":1\r\n");
}

/// `used_memory` follows the real heap: while a few hundred thousand values
/// of every type go in, its growth is within 10% of the process's resident
/// growth (both from INFO memory).
#[test]
fn used_memory_tracks_the_real_heap_growth() {
    let server = Server::start(&[]);
    let mut connection = server.redis();
    let before = (
        info_number(&mut connection, "memory", "used_memory"),
        info_number(&mut connection, "memory", "used_memory_rss"),
    );
    for batch in 0..300u64 {
        let mut pipe = redis::pipe();
        for index in batch * 1000..(batch + 1) * 1000 {
            pipe.cmd("SET")
                .arg(format!("key:{index}"))
                .arg("v".repeat(24))
                .ignore();
            if index % 2 == 0 {
                pipe.cmd("HSET")
                    .arg(format!("hash:{}", index % 997))
                    .arg(format!("field:{index}"))
                    .arg("x".repeat(40))
                    .ignore();
                pipe.cmd("ZADD")
                    .arg(format!("zset:{}", index % 499))
                    .arg(index)
                    .arg(format!("member:{index}"))
                    .ignore();
                pipe.cmd("RPUSH")
                    .arg(format!("list:{}", index % 293))
                    .arg("y".repeat(30))
                    .ignore();
            }
        }
        let () = pipe.query(&mut connection).unwrap();
    }
    let after = (
        info_number(&mut connection, "memory", "used_memory"),
        info_number(&mut connection, "memory", "used_memory_rss"),
    );
    let used = after.0 as f64 - before.0 as f64;
    let resident = after.1 as f64 - before.1 as f64;
    assert!(resident > 40e6, "the heap grew only {resident} bytes");
    let ratio = used / resident;
    eprintln!("used_memory grew {used} bytes, the resident set {resident} ({ratio:.3})");
    assert!(
        (0.9..=1.1).contains(&ratio),
        "used_memory grew {used} bytes, the resident set {resident} ({ratio:.3})"
    );
}
