//! DUMP/RESTORE payloads in Redis's format, and MIGRATE: keys of every
//! type (an HLL among the strings; streams with deleted entries, consumer
//! groups and pending entries) move from a real redis-server to slotraft and
//! back unchanged, by RESTORE and by MIGRATE in both
//! directions; MIGRATE's options and errors answer as Redis's do.

use redis::Connection;
use slotraft_tests::support::{RedisServer, Server};

/// Fills the current database with one key of each kind.
fn fill(connection: &mut Connection) {
    let mut pipe = redis::pipe();
    pipe.cmd("SET").arg("s").arg("hello").ignore();
    pipe.cmd("SET").arg("int").arg("12345").ignore();
    pipe.cmd("SET").arg("long").arg("ab".repeat(200)).ignore();
    pipe.cmd("SET")
        .arg("ttl")
        .arg("v")
        .arg("PX")
        .arg(100_000)
        .ignore();
    pipe.cmd("RPUSH")
        .arg("l")
        .arg(&["a", "bb", "12", "-3", "99999999999"])
        .ignore();
    pipe.cmd("SADD")
        .arg("si")
        .arg(&["1", "2", "-300", "70000"])
        .ignore();
    pipe.cmd("SADD").arg("ss").arg(&["x", "y", "z"]).ignore();
    pipe.cmd("HSET")
        .arg("h")
        .arg(&["f", "v", "n", "42"])
        .ignore();
    pipe.cmd("ZADD")
        .arg("z")
        .arg(&["1.5", "m", "-2", "n", "3", "o"])
        .ignore();
    pipe.cmd("PFADD")
        .arg("hll")
        .arg(&["a", "b", "c", "d"])
        .ignore();
    for index in 0..300 {
        pipe.cmd("RPUSH")
            .arg("biglist")
            .arg(format!("element-{index}"))
            .ignore();
        pipe.cmd("SADD")
            .arg("bigset")
            .arg(format!("member-{index}"))
            .ignore();
        pipe.cmd("HSET")
            .arg("bighash")
            .arg(format!("field-{index}"))
            .arg(index)
            .ignore();
        pipe.cmd("ZADD")
            .arg("bigzset")
            .arg(index)
            .arg(format!("member-{index}"))
            .ignore();
        pipe.cmd("PFADD")
            .arg("bighll")
            .arg(format!("e{index}"))
            .ignore();
    }
    let () = pipe.query(connection).unwrap();
    fill_streams(connection);
}

/// Streams: one with a deleted entry inside its node and two groups (one
/// with pending entries of two consumers, one with an idle consumer), one
/// over several nodes with holes and a node emptied, one with no entry left.
fn fill_streams(connection: &mut Connection) {
    let commands: &[&[&str]] = &[
        &["XADD", "st", "1-1", "a", "1", "b", "x"],
        &["XADD", "st", "1-2", "a", "2", "b", "y"],
        &["XADD", "st", "2-0", "c", "300"],
        &["XADD", "st", "3-5", "a", "-7", "b", ""],
        &["XDEL", "st", "1-2"],
        &["XGROUP", "CREATE", "st", "g", "0"],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "COUNT",
            "2",
            "STREAMS",
            "st",
            ">",
        ],
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "bob",
            "COUNT",
            "1",
            "STREAMS",
            "st",
            ">",
        ],
        &["XACK", "st", "g", "1-1"],
        &["XGROUP", "CREATE", "st", "h", "$"],
        &["XGROUP", "CREATECONSUMER", "st", "h", "carol"],
        &["XADD", "emptyst", "5-0", "a", "1"],
        &["XDEL", "emptyst", "5-0"],
        &["XGROUP", "CREATE", "emptyst", "g", "$"],
    ];
    let mut pipe = redis::pipe();
    for command in commands {
        pipe.cmd(command[0]).arg(&command[1..]).ignore();
    }
    for index in 1..=260u64 {
        let id = format!("{index}-{}", index % 3);
        let value = match index % 4 {
            0 => index.to_string(),
            1 => "w".repeat(index as usize % 80),
            2 => format!("-{}", index * 1_000_003),
            _ => String::new(),
        };
        let mut command = redis::cmd("XADD");
        command.arg("bigst").arg(&id);
        if index % 9 == 0 {
            command.arg("other").arg(&value);
        } else {
            command.arg("f").arg(&value).arg("n").arg(index);
        }
        pipe.add_command(command).ignore();
        if index % 10 == 0 || (101..=200).contains(&index) {
            pipe.cmd("XDEL").arg("bigst").arg(&id).ignore();
        }
    }
    pipe.cmd("XGROUP")
        .arg(&["CREATE", "bigst", "grp", "0"])
        .ignore();
    pipe.cmd("XREADGROUP")
        .arg(&["GROUP", "grp", "c", "COUNT", "30", "STREAMS", "bigst", ">"])
        .ignore();
    let () = pipe.query(connection).unwrap();
}

const KEYS: &[&str] = &[
    "s", "int", "long", "ttl", "l", "si", "ss", "h", "z", "hll", "biglist", "bigset", "bighash",
    "bigzset", "bighll", "st", "bigst", "emptyst",
];

/// A stream's entries, counters, groups and pending entries, as XRANGE,
/// XINFO and XPENDING show them (not the radix tree's inner node count,
/// which is Redis's own layout, nor idle times, which follow the clock).
fn stream_contents(connection: &mut Connection, key: &str) -> Vec<String> {
    let mut shown = Vec::new();
    let entries: redis::Value = redis::cmd("XRANGE")
        .arg(key)
        .arg("-")
        .arg("+")
        .query(connection)
        .unwrap();
    shown.push(format!("{entries:?}"));
    let info: Vec<redis::Value> = redis::cmd("XINFO")
        .arg("STREAM")
        .arg(key)
        .query(connection)
        .unwrap();
    for pair in info.chunks(2) {
        if !matches!(&pair[0], redis::Value::BulkString(name) if name == b"radix-tree-nodes") {
            shown.push(format!("{pair:?}"));
        }
    }
    let groups: Vec<Vec<redis::Value>> = redis::cmd("XINFO")
        .arg("GROUPS")
        .arg(key)
        .query(connection)
        .unwrap();
    for group in groups {
        shown.push(format!("{group:?}"));
        let name: String = redis::from_redis_value(&group[1]).unwrap();
        let pending: Vec<(String, String, i64, i64)> = redis::cmd("XPENDING")
            .arg(key)
            .arg(&name)
            .arg("-")
            .arg("+")
            .arg(1000)
            .query(connection)
            .unwrap();
        for (id, consumer, _idle, count) in pending {
            shown.push(format!("{name} {id} {consumer} {count}"));
        }
        let consumers: Vec<Vec<redis::Value>> = redis::cmd("XINFO")
            .arg("CONSUMERS")
            .arg(key)
            .arg(&name)
            .query(connection)
            .unwrap();
        for consumer in consumers {
            shown.push(format!("{name} {:?} {:?}", consumer[1], consumer[3]));
        }
    }
    shown
}

/// What a key holds, in a form both servers answer alike.
fn contents(connection: &mut Connection, key: &str) -> String {
    let kind: String = redis::cmd("TYPE").arg(key).query(connection).unwrap();
    let mut items: Vec<String> = match kind.as_str() {
        "string" => {
            let bytes: Vec<u8> = redis::cmd("GET").arg(key).query(connection).unwrap();
            vec![bytes.iter().map(|byte| format!("{byte:02x}")).collect()]
        }
        "list" => redis::cmd("LRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .query(connection)
            .unwrap(),
        "set" => redis::cmd("SMEMBERS").arg(key).query(connection).unwrap(),
        "hash" => redis::cmd("HGETALL").arg(key).query(connection).unwrap(),
        "stream" => stream_contents(connection, key),
        "zset" => redis::cmd("ZRANGE")
            .arg(key)
            .arg(0)
            .arg(-1)
            .arg("WITHSCORES")
            .query(connection)
            .unwrap(),
        other => vec![other.to_string()],
    };
    if matches!(kind.as_str(), "set") {
        items.sort();
    }
    if kind == "hash" {
        let mut pairs: Vec<String> = items.chunks(2).map(|pair| pair.join("=")).collect();
        pairs.sort();
        items = pairs;
    }
    let ttl: i64 = redis::cmd("TTL").arg(key).query(connection).unwrap();
    format!("{kind} ttl>0:{} {items:?}", ttl > 0)
}

fn dump(connection: &mut Connection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(connection).unwrap()
}

#[test]
fn dump_payloads_restore_across_redis_and_slotraft() {
    let redis = RedisServer::start();
    let server = Server::start(&[]);
    let mut from_redis = redis::Client::open(format!("redis://127.0.0.1:{}/", redis.port))
        .unwrap()
        .get_connection()
        .unwrap();
    let mut here = server.redis();
    fill(&mut from_redis);
    for key in KEYS {
        let payload = dump(&mut from_redis, key);
        let ttl: i64 = redis::cmd("PTTL").arg(*key).query(&mut from_redis).unwrap();
        let () = redis::cmd("RESTORE")
            .arg(*key)
            .arg(ttl.max(0))
            .arg(&payload)
            .query(&mut here)
            .unwrap_or_else(|error| panic!("RESTORE {key} from Redis's payload: {error}"));
        assert_eq!(
            contents(&mut here, key),
            contents(&mut from_redis, key),
            "{key}"
        );
    }
    let count = |connection: &mut Connection, key: &str| -> i64 {
        redis::cmd("PFCOUNT").arg(key).query(connection).unwrap()
    };
    assert_eq!(count(&mut here, "bighll"), count(&mut from_redis, "bighll"));
    // And back: slotraft's payloads restore in Redis.
    let () = redis::cmd("FLUSHALL").query(&mut from_redis).unwrap();
    for key in KEYS {
        let payload = dump(&mut here, key);
        let () = redis::cmd("RESTORE")
            .arg(*key)
            .arg(0)
            .arg(&payload)
            .query(&mut from_redis)
            .unwrap_or_else(|error| panic!("Redis RESTORE {key} from slotraft's payload: {error}"));
        let () = redis::cmd("PERSIST")
            .arg(*key)
            .query(&mut here)
            .map(|_: i64| ())
            .unwrap();
        assert_eq!(
            contents(&mut from_redis, key),
            contents(&mut here, key),
            "{key}"
        );
    }
    assert_eq!(count(&mut from_redis, "bighll"), count(&mut here, "bighll"));
    // A damaged payload is refused with Redis's text.
    let mut payload = dump(&mut here, "s");
    payload[1] ^= 0x40;
    let refused: redis::RedisResult<()> = redis::cmd("RESTORE")
        .arg("bad")
        .arg(0)
        .arg(&payload)
        .query(&mut here);
    assert_eq!(
        refused.unwrap_err().to_string(),
        "An error was signalled by the server - ResponseError: DUMP payload version or checksum are wrong"
    );
}

/// The replies of MIGRATE calls (simple strings and errors as text).
fn migrate(connection: &mut Connection, arguments: &[String]) -> String {
    let result: redis::RedisResult<redis::Value> =
        redis::cmd("MIGRATE").arg(arguments).query(connection);
    match result {
        Ok(redis::Value::Okay) => "OK".to_string(),
        Ok(redis::Value::SimpleString(text)) => text,
        Ok(other) => format!("{other:?}"),
        Err(error) => format!(
            "{} {}",
            error.code().unwrap_or("?"),
            error.detail().unwrap_or_default()
        ),
    }
}

/// The same MIGRATE calls from a source to a target: their replies, and what
/// each key holds on both sides afterwards.
fn migrations(source: &mut Connection, target_port: u16, target: &mut Connection) -> Vec<String> {
    fill(source);
    let port = target_port.to_string();
    let call = |arguments: &[&str]| -> Vec<String> {
        arguments
            .iter()
            .map(|argument| argument.to_string())
            .collect()
    };
    let calls = [
        call(&["127.0.0.1", &port, "s", "0", "1000"]),
        call(&["127.0.0.1", &port, "nokey", "0", "1000"]),
        call(&[
            "127.0.0.1",
            &port,
            "",
            "0",
            "1000",
            "COPY",
            "KEYS",
            "l",
            "ttl",
            "nokey",
        ]),
        call(&["127.0.0.1", &port, "", "0", "1000", "KEYS", "l"]),
        call(&[
            "127.0.0.1",
            &port,
            "",
            "0",
            "1000",
            "REPLACE",
            "KEYS",
            "l",
            "z",
            "h",
        ]),
        call(&[
            "127.0.0.1",
            &port,
            "",
            "3",
            "1000",
            "KEYS",
            "si",
            "bigzset",
            "hll",
        ]),
        call(&["127.0.0.1", &port, "ss", "99", "1000"]),
        call(&["127.0.0.1", &port, "ss", "0", "1000", "AUTH", "secret"]),
        call(&[
            "127.0.0.1",
            &port,
            "ss",
            "0",
            "1000",
            "AUTH2",
            "user",
            "secret",
        ]),
        call(&["127.0.0.1", &port, "ss", "0", "1000", "KEYS", "l"]),
        call(&["127.0.0.1", &port, "ss", "0", "abc"]),
        call(&["127.0.0.1", &port, "ss", "x", "1000"]),
        call(&["127.0.0.1", &port, "ss", "0", "1000", "BOGUS"]),
        call(&["127.0.0.1", &port, "ss", "0", "1000", "AUTH"]),
        call(&["127.0.0.1", "1", "ss", "0", "1000"]),
    ];
    let mut seen = Vec::new();
    for arguments in calls {
        let reply = migrate(source, &arguments);
        let label = format!("{arguments:?}").replace(&port, "PORT");
        seen.push(format!("{label} -> {reply}"));
    }
    for db in [0, 3] {
        for connection in [&mut *source, &mut *target] {
            let () = redis::cmd("SELECT").arg(db).query(connection).unwrap();
            for key in KEYS {
                seen.push(format!("db {db} {key}: {}", contents(connection, key)));
            }
        }
    }
    for connection in [source, target] {
        let () = redis::cmd("SELECT").arg(0).query(connection).unwrap();
    }
    seen
}

#[test]
fn migrate_answers_and_moves_keys_as_redis_does() {
    // Redis to Redis: what slotraft must do.
    let (redis_a, redis_b) = (RedisServer::start(), RedisServer::start());
    let connect = |port: u16| {
        redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
            .unwrap()
    };
    let expected = migrations(
        &mut connect(redis_a.port),
        redis_b.port,
        &mut connect(redis_b.port),
    );
    // slotraft to a Redis.
    let server = Server::start(&[]);
    let redis_c = RedisServer::start();
    let got = migrations(
        &mut server.redis(),
        redis_c.port,
        &mut connect(redis_c.port),
    );
    for (got, expected) in got.iter().zip(&expected) {
        assert_eq!(got, expected);
    }
    assert_eq!(got.len(), expected.len());
    // Inside a transaction too.
    let mut source = server.redis();
    let () = redis::cmd("SET")
        .arg("in-multi")
        .arg("v")
        .query(&mut source)
        .unwrap();
    let port = redis_c.port.to_string();
    let (reply,): (String,) = redis::pipe()
        .atomic()
        .cmd("MIGRATE")
        .arg(&["127.0.0.1", &port, "in-multi", "0", "1000"])
        .query(&mut source)
        .unwrap();
    assert_eq!(reply, "OK");
    let moved: String = redis::cmd("GET")
        .arg("in-multi")
        .query(&mut connect(redis_c.port))
        .unwrap();
    assert_eq!(moved, "v");
    // A Redis to slotraft (how `redis-cli --cluster import` moves data).
    let target = Server::start(&[]);
    let redis_d = RedisServer::start();
    let got = migrations(&mut connect(redis_d.port), target.port, &mut target.redis());
    for (got, expected) in got.iter().zip(&expected) {
        assert_eq!(got, expected);
    }
}
