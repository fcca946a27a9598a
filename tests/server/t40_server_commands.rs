//! Connection and server commands: CLIENT REPLY, RESET, TIME, DEBUG, CONFIG
//! RESETSTAT, COMMAND DOCS/LIST, INFO fields, OBJECT under an LFU policy.

use resp::Frame;
use slotraft_tests::support::Server;

#[test]
fn client_reply_modes() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.send(b"CLIENT REPLY OFF\r\nSET a 1\r\nCLIENT REPLY ON\r\n");
    client.expect(b"+OK\r\n");
    client.send(b"CLIENT REPLY SKIP\r\nGET a\r\nGET a\r\n");
    client.expect(b"$1\r\n1\r\n");
}

#[test]
fn reset_restores_connection_defaults() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["SELECT", "3"], "+OK\r\n");
    client.roundtrip(&["SET", "k", "in-3"], "+OK\r\n");
    client.command(&[b"HELLO", b"3"]);
    let _ = client.read_frame();
    client.roundtrip(&["RESET"], "+RESET\r\n");
    // Back to RESP2 and database 0.
    client.roundtrip(&["GET", "k"], "$-1\r\n");
}

#[test]
fn time_and_echo_shapes() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.command(&[b"TIME"]);
    let Frame::Array(parts) = client.read_frame() else {
        panic!("TIME is an array")
    };
    assert_eq!(parts.len(), 2);
    let seconds: u64 = std::str::from_utf8(parts[0].as_bytes().unwrap())
        .unwrap()
        .parse()
        .unwrap();
    assert!(seconds > 1_600_000_000);
    client.roundtrip(&["ECHO", "hi"], "$2\r\nhi\r\n");
    client.roundtrip(&["PING", "x"], "$1\r\nx\r\n");
}

#[test]
fn debug_digest_tracks_content_not_history() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(
        &["DEBUG", "DIGEST"],
        "$40\r\n0000000000000000000000000000000000000000\r\n",
    );
    client.roundtrip(&["SET", "a", "1"], "+OK\r\n");
    client.command(&[b"DEBUG", b"DIGEST"]);
    let with_a = client.read_frame();
    client.roundtrip(&["SET", "b", "2"], "+OK\r\n");
    client.roundtrip(&["DEL", "b"], ":1\r\n");
    client.command(&[b"DEBUG", b"DIGEST"]);
    assert_eq!(client.read_frame(), with_a);
    client.command(&[b"DEBUG", b"OBJECT", b"a"]);
    let object = client.read_frame();
    let text = String::from_utf8_lossy(object.as_bytes().unwrap()).to_string();
    assert!(
        text.starts_with("Value at:") && text.contains("encoding:int"),
        "{text}"
    );
    client.roundtrip(&["SET", "same", "1"], "+OK\r\n");
    client.command(&[b"DEBUG", b"DIGEST-VALUE", b"a", b"same", b"missing"]);
    let Frame::Array(values) = client.read_frame() else {
        panic!("array")
    };
    assert_eq!(values[0], values[1], "equal values, equal digests");
    assert_eq!(
        values[2],
        Frame::bulk("0000000000000000000000000000000000000000")
    );
    client.roundtrip(&["DEBUG", "SLEEP", "0"], "+OK\r\n");
}

#[test]
fn active_expiry_can_be_switched_off() {
    let server = Server::start(&["--hz", "100"]);
    let mut client = server.connect();
    client.roundtrip(&["DEBUG", "SET-ACTIVE-EXPIRE", "0"], "+OK\r\n");
    client.roundtrip(&["SET", "k", "v", "PX", "20"], "+OK\r\n");
    std::thread::sleep(std::time::Duration::from_millis(200));
    // Not reclaimed in the background, yet never observed.
    client.roundtrip(&["DBSIZE"], ":1\r\n");
    client.roundtrip(&["GET", "k"], "$-1\r\n");
    client.roundtrip(&["DBSIZE"], ":0\r\n");
}

#[test]
fn resetstat_and_info_fields() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["GET", "missing"], "$-1\r\n");
    client.command(&[b"INFO"]);
    let info = client.read_frame();
    let text = String::from_utf8_lossy(info.as_bytes().unwrap()).to_string();
    for field in [
        "redis_version:7.2.4",
        "redis_mode:standalone",
        "connected_clients:1",
        "used_memory:",
        "loading:0",
        "keyspace_misses:1",
        "cluster_enabled:0",
        "# Keyspace",
    ] {
        assert!(text.contains(field), "INFO lacks {field}");
    }
    client.roundtrip(&["CONFIG", "RESETSTAT"], "+OK\r\n");
    client.command(&[b"INFO", b"stats"]);
    let stats = client.read_frame();
    let text = String::from_utf8_lossy(stats.as_bytes().unwrap()).to_string();
    assert!(text.contains("keyspace_misses:0"), "{text}");
    assert!(!text.contains("# Server"));
}

#[test]
fn command_docs_and_list() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.command(&[b"COMMAND", b"DOCS", b"get"]);
    let Frame::Array(docs) = client.read_frame() else {
        panic!("RESP2 map is a flat array")
    };
    assert_eq!(docs[0], Frame::bulk("get"));
    let Frame::Array(fields) = &docs[1] else {
        panic!("doc fields")
    };
    assert!(fields.contains(&Frame::bulk("summary")));
    assert!(fields.contains(&Frame::bulk("Returns the string value of a key.")));
    client.command(&[b"COMMAND", b"LIST", b"FILTERBY", b"PATTERN", b"get*"]);
    let Frame::Array(names) = client.read_frame() else {
        panic!("list")
    };
    let mut names: Vec<String> = names
        .iter()
        .map(|name| String::from_utf8_lossy(name.as_bytes().unwrap()).to_string())
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec!["get", "getbit", "getdel", "getex", "getrange", "getset"]
    );
}

#[test]
fn object_freq_needs_an_lfu_policy() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["SET", "k", "v"], "+OK\r\n");
    client.roundtrip(&["OBJECT", "IDLETIME", "k"], ":0\r\n");
    client.roundtrip(
        &["OBJECT", "FREQ", "k"],
        "-ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust.\r\n",
    );
    client.roundtrip(
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
        "+OK\r\n",
    );
    // Overwriting a key keeps its access data under LFU, and this key's
    // was written under LRU: it reads as some counter, as in Redis (which
    // answered 1 here when checked), so only its kind is asserted.
    client.roundtrip(&["SET", "k", "v"], "+OK\r\n");
    client.command(&[b"OBJECT", b"FREQ", b"k"]);
    assert!(matches!(client.read_frame(), Frame::Integer(_)));
    client.roundtrip(&["SET", "fresh", "v"], "+OK\r\n");
    client.roundtrip(&["OBJECT", "FREQ", "fresh"], ":5\r\n");
}

#[test]
fn idle_clients_are_closed_after_timeout() {
    let server = Server::start(&["--timeout", "1"]);
    let mut idle = server.connect();
    idle.roundtrip(&["PING"], "+PONG\r\n");
    let started = std::time::Instant::now();
    assert!(idle.is_closed(), "idle client kept open");
    assert!(started.elapsed() >= std::time::Duration::from_millis(900));
}
