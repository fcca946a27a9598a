//! The `redis` crate as a real client: strings, keys, expiry, SCAN, DUMP/RESTORE,
//! databases, and the server commands clients rely on.

use redis::{Commands, Value};
use slotraft_tests::support::Server;
use std::collections::BTreeSet;
use std::time::Duration;

/// The error line as the server sent it: code and message.
fn server_error(error: &redis::RedisError) -> String {
    let code = match error.kind() {
        redis::ErrorKind::ResponseError => "ERR",
        _ => error.code().unwrap_or("?"),
    };
    format!("{code} {}", error.detail().unwrap_or_default())
}

#[test]
fn strings_and_counters() {
    let server = Server::start(&[]);
    let mut connection = server.redis();
    let _: () = connection.set("name", "slotraft").unwrap();
    let name: String = connection.get("name").unwrap();
    assert_eq!(name, "slotraft");
    let counter: i64 = connection.incr("hits", 5).unwrap();
    assert_eq!(counter, 5);
    let counter: f64 = redis::cmd("INCRBYFLOAT")
        .arg("hits")
        .arg("0.5")
        .query(&mut connection)
        .unwrap();
    assert_eq!(counter, 5.5);
    let _: () = connection.mset(&[("a", "1"), ("b", "2")]).unwrap();
    let values: Vec<Option<String>> = connection.mget(&["a", "missing", "b"]).unwrap();
    assert_eq!(values, vec![Some("1".into()), None, Some("2".into())]);
    let length: i64 = connection.append("name", "!").unwrap();
    assert_eq!(length, 9);
    let range: String = connection.getrange("name", 0, 3).unwrap();
    assert_eq!(range, "slot");
    let error = connection.incr::<_, _, i64>("name", 1).unwrap_err();
    assert_eq!(
        server_error(&error),
        "ERR value is not an integer or out of range"
    );
}

#[test]
fn keys_expire_lazily_and_actively() {
    let server = Server::start(&["--hz", "50"]);
    let mut connection = server.redis();
    let _: () = redis::cmd("SET")
        .arg("short")
        .arg("v")
        .arg("PX")
        .arg(100)
        .query(&mut connection)
        .unwrap();
    let _: () = redis::cmd("SET")
        .arg("long")
        .arg("v")
        .arg("EX")
        .arg(100)
        .query(&mut connection)
        .unwrap();
    let ttl: i64 = connection.ttl("long").unwrap();
    assert!((99..=100).contains(&ttl), "ttl {ttl}");
    for index in 0..200 {
        let _: () = redis::cmd("SET")
            .arg(format!("volatile:{index}"))
            .arg("v")
            .arg("PX")
            .arg(50)
            .query(&mut connection)
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(600));
    // Active expiry reclaimed the untouched keys: DBSIZE counts only live ones now.
    let size: i64 = redis::cmd("DBSIZE").query(&mut connection).unwrap();
    assert_eq!(size, 1, "expired keys still held");
    let gone: Option<String> = connection.get("short").unwrap();
    assert_eq!(gone, None);
    let expired = info_field(&mut connection, "stats", "expired_keys");
    assert_eq!(expired, "201");
}

fn info_field(connection: &mut redis::Connection, section: &str, field: &str) -> String {
    let text: String = redis::cmd("INFO").arg(section).query(connection).unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in INFO {section}"))
        .trim()
        .to_string()
}

#[test]
fn scan_returns_every_key_while_the_table_grows() {
    let server = Server::start(&[]);
    let mut connection = server.redis();
    let originals: BTreeSet<String> = (0..300).map(|index| format!("original:{index}")).collect();
    for key in &originals {
        let _: () = connection.set(key, "x").unwrap();
    }
    let mut seen = BTreeSet::new();
    let mut cursor = 0u64;
    let mut round = 0;
    loop {
        let (next, keys): (u64, Vec<String>) = redis::cmd("SCAN")
            .arg(cursor)
            .arg("COUNT")
            .arg(20)
            .query(&mut connection)
            .unwrap();
        seen.extend(keys);
        round += 1;
        if round == 3 {
            for index in 0..3000 {
                let _: () = connection.set(format!("added:{index}"), "y").unwrap();
            }
        }
        cursor = next;
        if cursor == 0 {
            break;
        }
    }
    assert!(
        originals.is_subset(&seen),
        "SCAN missed keys present for the whole scan"
    );
    let matched: (u64, Vec<String>) = redis::cmd("SCAN")
        .arg(0)
        .arg("MATCH")
        .arg("original:1?")
        .arg("COUNT")
        .arg(100000)
        .query(&mut connection)
        .unwrap();
    assert_eq!(matched.1.len(), 10);
}

#[test]
fn dump_restore_round_trip_and_bad_payload() {
    let server = Server::start(&[]);
    let mut connection = server.redis();
    let _: () = connection.set("source", "payload").unwrap();
    let dump: Vec<u8> = redis::cmd("DUMP")
        .arg("source")
        .query(&mut connection)
        .unwrap();
    let _: () = redis::cmd("RESTORE")
        .arg("copy")
        .arg(0)
        .arg(&dump)
        .query(&mut connection)
        .unwrap();
    let copied: String = connection.get("copy").unwrap();
    assert_eq!(copied, "payload");
    let busy = redis::cmd("RESTORE")
        .arg("copy")
        .arg(0)
        .arg(&dump)
        .query::<()>(&mut connection)
        .unwrap_err();
    assert_eq!(busy.code(), Some("BUSYKEY"));
    let mut corrupt = dump.clone();
    corrupt[0] ^= 0xff;
    let bad = redis::cmd("RESTORE")
        .arg("other")
        .arg(0)
        .arg(&corrupt)
        .query::<()>(&mut connection)
        .unwrap_err();
    assert_eq!(
        server_error(&bad),
        "ERR DUMP payload version or checksum are wrong"
    );
}

#[test]
fn databases_select_move_swap() {
    let server = Server::start(&[]);
    let mut connection = server.redis();
    let _: () = connection.set("k", "in-db0").unwrap();
    let moved: i64 = redis::cmd("MOVE")
        .arg("k")
        .arg(1)
        .query(&mut connection)
        .unwrap();
    assert_eq!(moved, 1);
    let _: () = redis::cmd("SELECT").arg(1).query(&mut connection).unwrap();
    let value: String = connection.get("k").unwrap();
    assert_eq!(value, "in-db0");
    let _: () = redis::cmd("SWAPDB")
        .arg(0)
        .arg(1)
        .query(&mut connection)
        .unwrap();
    let empty: Option<String> = connection.get("k").unwrap();
    assert_eq!(empty, None);
    let error = redis::cmd("SELECT")
        .arg(16)
        .query::<()>(&mut connection)
        .unwrap_err();
    assert_eq!(server_error(&error), "ERR DB index is out of range");
    let keyspace: String = redis::cmd("INFO")
        .arg("keyspace")
        .query(&mut connection)
        .unwrap();
    assert!(
        keyspace.contains("db0:keys=1,expires=0,avg_ttl=0"),
        "{keyspace}"
    );
}

#[test]
fn command_table_serves_client_introspection() {
    let server = Server::start(&[]);
    let mut connection = server.redis();
    let count: i64 = redis::cmd("COMMAND")
        .arg("COUNT")
        .query(&mut connection)
        .unwrap();
    assert!(count > 60, "only {count} commands");
    let keys: Vec<String> = redis::cmd("COMMAND")
        .arg("GETKEYS")
        .arg("MSET")
        .arg("a")
        .arg("1")
        .arg("b")
        .arg("2")
        .query(&mut connection)
        .unwrap();
    assert_eq!(keys, vec!["a", "b"]);
    let info: Value = redis::cmd("COMMAND")
        .arg("INFO")
        .arg("set")
        .query(&mut connection)
        .unwrap();
    let Value::Array(entries) = info else {
        panic!("COMMAND INFO shape: {info:?}")
    };
    let Value::Array(set) = &entries[0] else {
        panic!("entry shape")
    };
    assert_eq!(set[1], Value::Int(-3));
    assert_eq!(set[3], Value::Int(1));
    assert_eq!(set[4], Value::Int(1));
    assert_eq!(set[5], Value::Int(1));
}

#[test]
fn config_and_client_commands() {
    let server = Server::start(&[]);
    let mut connection = server.redis();
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("maxmemory")
        .arg("100mb")
        .query(&mut connection)
        .unwrap();
    let pairs: Vec<String> = redis::cmd("CONFIG")
        .arg("GET")
        .arg("maxmem*")
        .query(&mut connection)
        .unwrap();
    assert!(
        pairs
            .windows(2)
            .any(|pair| pair == ["maxmemory", "104857600"]),
        "{pairs:?}"
    );
    let _: () = redis::cmd("CLIENT")
        .arg("SETNAME")
        .arg("tester")
        .query(&mut connection)
        .unwrap();
    let name: String = redis::cmd("CLIENT")
        .arg("GETNAME")
        .query(&mut connection)
        .unwrap();
    assert_eq!(name, "tester");
    let list: String = redis::cmd("CLIENT")
        .arg("LIST")
        .query(&mut connection)
        .unwrap();
    assert!(list.contains("name=tester"), "{list}");
    let mut other = server.redis();
    let other_id: i64 = redis::cmd("CLIENT").arg("ID").query(&mut other).unwrap();
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(other_id)
        .query(&mut connection)
        .unwrap();
    assert_eq!(killed, 1);
    // The kill is asynchronous: wait (bounded) until the server has dropped it.
    for _ in 0..100 {
        let list: String = redis::cmd("CLIENT")
            .arg("LIST")
            .query(&mut connection)
            .unwrap();
        if !list.contains(&format!("id={other_id} ")) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        redis::cmd("PING").query::<String>(&mut other).is_err(),
        "killed client still served"
    );
}

#[test]
fn resp3_client_sees_resp3_shapes() {
    let server = Server::start(&[]);
    let client =
        redis::Client::open(format!("redis://127.0.0.1:{}/?protocol=resp3", server.port)).unwrap();
    let mut connection = client.get_connection().unwrap();
    let _: () = connection.set("k", "v").unwrap();
    let missing: Value = redis::cmd("GET")
        .arg("nothing")
        .query(&mut connection)
        .unwrap();
    assert_eq!(missing, Value::Nil);
    let config: Value = redis::cmd("CONFIG")
        .arg("GET")
        .arg("hz")
        .query(&mut connection)
        .unwrap();
    assert!(
        matches!(config, Value::Map(_)),
        "CONFIG GET in RESP3 is a map: {config:?}"
    );
}
