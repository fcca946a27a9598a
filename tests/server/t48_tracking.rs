//! Client-side caching (CLIENT TRACKING) on a standalone node: one scenario of
//! several connections (default, OPTIN, OPTOUT with NOLOOP, BCAST, a RESP2
//! tracker redirecting to a subscriber) runs against slotraft and a real
//! redis-server, and every connection's replies and invalidation messages
//! must be the same bytes. Then what only slotraft can be asked exactly
//! (client ids): GETREDIR, TRACKINGINFO, CLIENT LIST, a broken redirection,
//! INFO's counts and the table's bound.

use resp::Frame;
use slotraft_tests::support::{Peer, Raw, RedisServer, Server};
use std::time::Duration;

/// A step: connection, command (`{id5}` stands for connection 5's client id);
/// a `SLEEP ms` command pauses instead.
const SCENARIO: &[(usize, &[&str])] = &[
    (0, &["HELLO", "3"]),
    (2, &["HELLO", "3"]),
    (3, &["HELLO", "3"]),
    (4, &["HELLO", "3"]),
    // Argument errors, in Redis's order of checks.
    (0, &["CLIENT", "TRACKING", "on", "PREFIX", "x"]),
    (0, &["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"]),
    (0, &["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"]),
    (0, &["CLIENT", "TRACKING", "on", "REDIRECT", "999999"]),
    (0, &["CLIENT", "TRACKING", "on", "REDIRECT", "abc"]),
    (0, &["CLIENT", "TRACKING", "on", "REDIRECT"]),
    (0, &["CLIENT", "TRACKING", "maybe"]),
    (0, &["CLIENT", "TRACKING", "on", "BOGUS"]),
    (0, &["CLIENT", "TRACKING"]),
    (0, &["CLIENT", "CACHING", "yes"]),
    (0, &["CLIENT", "CACHING"]),
    (0, &["CLIENT", "GETREDIR"]),
    (0, &["CLIENT", "TRACKINGINFO"]),
    (0, &["CLIENT", "TRACKINGINFO", "x"]),
    (
        4,
        &[
            "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "ab",
        ],
    ),
    // Default mode.
    (0, &["CLIENT", "TRACKING", "on"]),
    (0, &["CLIENT", "CACHING", "yes"]),
    (0, &["CLIENT", "TRACKING", "on", "BCAST"]),
    (0, &["CLIENT", "TRACKINGINFO"]),
    (0, &["GET", "a"]),
    (0, &["MGET", "b", "c"]),
    (0, &["EXISTS", "d"]),
    (0, &["STRLEN", "e"]),
    (0, &["HGET", "h", "f"]),
    (1, &["SET", "a", "1"]),
    (1, &["MSET", "b", "1", "c", "2"]),
    (1, &["DEL", "d"]),
    (1, &["HSET", "h", "f", "v"]),
    (1, &["SET", "e", "x", "NX"]),
    (0, &["GET", "a"]),
    (1, &["SET", "a", "1", "NX"]),
    (1, &["INCR", "a"]),
    (0, &["GET", "n"]),
    (1, &["EXPIRE", "n", "100"]),
    // Expiry.
    (0, &["GET", "x"]),
    (1, &["SET", "x", "v", "PX", "100"]),
    (0, &["GET", "x"]),
    (1, &["SLEEP", "300"]),
    (1, &["GET", "x"]),
    // A transaction changing a key twice: one message.
    (0, &["GET", "m"]),
    (1, &["MULTI"]),
    (1, &["SET", "m", "a"]),
    (1, &["SET", "m", "b"]),
    (1, &["EXEC"]),
    // Scripts: their writes, and what a tracking client's script read.
    (0, &["GET", "s"]),
    (
        1,
        &["EVAL", "return redis.call('set', KEYS[1], 'v')", "1", "s"],
    ),
    (0, &["EVAL", "return redis.call('get', KEYS[1])", "1", "ev"]),
    (1, &["SET", "ev", "1"]),
    // Another database: tracking goes by name.
    (0, &["GET", "dbk"]),
    (1, &["SELECT", "1"]),
    (1, &["SET", "dbk", "v"]),
    (1, &["SELECT", "0"]),
    // The tracking client's own write comes back after its reply.
    (0, &["GET", "own"]),
    (0, &["SET", "own", "1"]),
    // OPTIN: only after CACHING yes, a whole transaction after it.
    (2, &["CLIENT", "TRACKING", "on", "OPTIN"]),
    (2, &["CLIENT", "CACHING", "no"]),
    (2, &["GET", "o1"]),
    (2, &["CLIENT", "CACHING", "yes"]),
    (2, &["CLIENT", "TRACKINGINFO"]),
    (2, &["GET", "o2"]),
    (2, &["GET", "o3"]),
    (2, &["CLIENT", "CACHING", "yes"]),
    (2, &["MULTI"]),
    (2, &["GET", "o4"]),
    (2, &["GET", "o5"]),
    (2, &["EXEC"]),
    (2, &["CLIENT", "TRACKING", "on", "OPTOUT"]),
    (
        1,
        &[
            "MSET", "o1", "x", "o2", "x", "o3", "x", "o4", "x", "o5", "x",
        ],
    ),
    // OPTOUT with NOLOOP.
    (3, &["CLIENT", "TRACKING", "on", "OPTOUT", "NOLOOP"]),
    (3, &["CLIENT", "CACHING", "yes"]),
    (3, &["CLIENT", "CACHING", "no"]),
    (3, &["CLIENT", "TRACKINGINFO"]),
    (3, &["GET", "q1"]),
    (3, &["GET", "q2"]),
    (3, &["SET", "q2", "own"]),
    (1, &["MSET", "q1", "x", "q2", "x"]),
    (3, &["GET", "q2"]),
    (1, &["SET", "q2", "y"]),
    // BCAST with prefixes.
    (
        4,
        &[
            "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p:", "PREFIX", "z",
        ],
    ),
    (4, &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p:x"]),
    (4, &["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "w"]),
    (4, &["CLIENT", "TRACKING", "on"]),
    (4, &["CLIENT", "TRACKINGINFO"]),
    (
        1,
        &["MSET", "p:2", "x", "p:1", "y", "zz", "1", "nothing", "2"],
    ),
    (1, &["SET", "w1", "x"]),
    (1, &["DEL", "p:1", "p:3"]),
    // RESP2 tracking redirected to a RESP2 subscriber.
    (5, &["SUBSCRIBE", "__redis__:invalidate"]),
    (6, &["CLIENT", "TRACKING", "on", "REDIRECT", "{id5}"]),
    (6, &["GET", "r1"]),
    (6, &["GET", "r2"]),
    (1, &["SET", "r1", "x"]),
    // Everyone is told of a flush.
    (1, &["FLUSHALL"]),
    (0, &["CLIENT", "TRACKING", "off"]),
    (0, &["CLIENT", "TRACKINGINFO"]),
    (0, &["CLIENT", "GETREDIR"]),
    (1, &["SET", "a", "after-off"]),
];

/// Runs the scenario on the server at `port`: every connection's replies and
/// messages, labelled.
fn run_scenario(port: u16) -> Vec<String> {
    let mut peers: Vec<Peer> = (0..7).map(|_| Peer::connect(port)).collect();
    let id5 = peers[5].call(&["CLIENT", "ID"]);
    let id5 = id5.trim_start_matches(':').trim_end().to_string();
    let mut transcript = Vec::new();
    for (step, (peer, command)) in SCENARIO.iter().enumerate() {
        if command[0] == "SLEEP" {
            std::thread::sleep(Duration::from_millis(command[1].parse().unwrap()));
            continue;
        }
        let words: Vec<String> = command
            .iter()
            .map(|word| word.replace("{id5}", &id5))
            .collect();
        let words: Vec<&str> = words.iter().map(String::as_str).collect();
        let reply = peers[*peer].call(&words);
        // HELLO's reply names the server.
        if command[0] != "HELLO" {
            transcript.push(format!("step {step} conn {peer} {command:?} -> {reply:?}"));
        }
    }
    for (index, peer) in peers.iter_mut().enumerate() {
        peer.settle();
        for push in &peer.pushes {
            transcript.push(format!("conn {index} received {push:?}"));
        }
    }
    transcript
}

#[test]
fn tracking_matches_redis_byte_for_byte() {
    let redis = RedisServer::start();
    let expected = run_scenario(redis.port);
    let server = Server::start(&[]);
    let got = run_scenario(server.port);
    for (index, (got, expected)) in got.iter().zip(&expected).enumerate() {
        assert_eq!(got, expected, "line {index}");
    }
    assert_eq!(got.len(), expected.len());
    // The scenario did exercise invalidations on every kind of connection.
    for conn in [0, 2, 3, 4, 5] {
        let label = format!("conn {conn} received");
        assert!(
            got.iter().any(|line| line.starts_with(&label)),
            "no message reached connection {conn}"
        );
    }
}

fn info_field(raw: &mut Raw, section: &str, field: &str) -> String {
    raw.command(&[b"INFO", section.as_bytes()]);
    let Frame::Bulk(text) = raw.read_frame() else {
        panic!("INFO answers a bulk string");
    };
    let text = String::from_utf8_lossy(&text).into_owned();
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")).map(str::to_string))
        .unwrap_or_else(|| panic!("INFO {section} has no {field}"))
}

fn client_id(raw: &mut Raw) -> i64 {
    raw.command(&[b"CLIENT", b"ID"]);
    match raw.read_frame() {
        Frame::Integer(id) => id,
        other => panic!("CLIENT ID answered {other:?}"),
    }
}

#[test]
fn redirection_introspection_and_a_broken_redirection() {
    let server = Server::start(&[]);
    let mut tracker = Raw::connect(server.port);
    let mut target = Raw::connect(server.port);
    let mut writer = Raw::connect(server.port);
    let target_id = client_id(&mut target);
    let tracker_id = client_id(&mut tracker);
    tracker.command(&[b"HELLO", b"3"]);
    tracker.read_frame();
    tracker.roundtrip(
        &[
            "CLIENT",
            "TRACKING",
            "on",
            "REDIRECT",
            &target_id.to_string(),
        ],
        "+OK\r\n",
    );
    tracker.roundtrip(&["CLIENT", "GETREDIR"], &format!(":{target_id}\r\n"));
    tracker.roundtrip(
        &["CLIENT", "TRACKINGINFO"],
        &format!(
            "%3\r\n$5\r\nflags\r\n~1\r\n$2\r\non\r\n$8\r\nredirect\r\n:{target_id}\r\n$8\r\nprefixes\r\n*0\r\n"
        ),
    );
    tracker.roundtrip(&["GET", "k"], "_\r\n");
    writer.command(&[b"CLIENT", b"LIST", b"ID", tracker_id.to_string().as_bytes()]);
    let Frame::Bulk(line) = writer.read_frame() else {
        panic!("CLIENT LIST answers a bulk string");
    };
    let line = String::from_utf8_lossy(&line).into_owned();
    assert!(line.contains(" flags=t "), "{line}");
    assert!(line.contains(&format!(" redir={target_id} ")), "{line}");
    assert_eq!(info_field(&mut writer, "clients", "tracking_clients"), "1");
    assert_eq!(info_field(&mut writer, "stats", "tracking_total_keys"), "1");
    assert_eq!(
        info_field(&mut writer, "stats", "tracking_total_items"),
        "1"
    );
    // The target goes away: the tracker hears that instead.
    drop(target);
    std::thread::sleep(Duration::from_millis(200));
    writer.roundtrip(&["SET", "k", "1"], "+OK\r\n");
    tracker.expect(format!(">2\r\n$21\r\ntracking-redir-broken\r\n:{target_id}\r\n").as_bytes());
    tracker.roundtrip(
        &["CLIENT", "TRACKINGINFO"],
        &format!(
            "%3\r\n$5\r\nflags\r\n~2\r\n$2\r\non\r\n$15\r\nbroken_redirect\r\n$8\r\nredirect\r\n:{target_id}\r\n$8\r\nprefixes\r\n*0\r\n"
        ),
    );
    writer.command(&[b"CLIENT", b"LIST", b"ID", tracker_id.to_string().as_bytes()]);
    let Frame::Bulk(line) = writer.read_frame() else {
        panic!("CLIENT LIST answers a bulk string");
    };
    assert!(String::from_utf8_lossy(&line).contains(" flags=tR "));
    // RESET turns tracking off; so does closing the connection.
    tracker.roundtrip(&["RESET"], "+RESET\r\n");
    tracker.roundtrip(&["CLIENT", "GETREDIR"], ":-1\r\n");
    assert_eq!(info_field(&mut writer, "clients", "tracking_clients"), "0");
}

#[test]
fn the_table_is_bounded_by_tracking_table_max_keys() {
    let server = Server::start(&[]);
    let mut admin = Raw::connect(server.port);
    admin.roundtrip(
        &["CONFIG", "SET", "tracking-table-max-keys", "10"],
        "+OK\r\n",
    );
    admin.roundtrip(
        &["CONFIG", "GET", "tracking-table-max-keys"],
        "*2\r\n$23\r\ntracking-table-max-keys\r\n$2\r\n10\r\n",
    );
    let mut tracker = Peer::connect(server.port);
    tracker.call(&["HELLO", "3"]);
    assert_eq!(tracker.call(&["CLIENT", "TRACKING", "on"]), "+OK\r\n");
    for index in 0..25 {
        assert_eq!(tracker.call(&["GET", &format!("key{index}")]), "_\r\n");
    }
    assert_eq!(info_field(&mut admin, "stats", "tracking_total_keys"), "10");
    tracker.settle();
    // Each key pushed out of the table was announced once.
    assert_eq!(tracker.pushes.len(), 15);
    assert!(tracker
        .pushes
        .iter()
        .all(|push| push.starts_with(">2\r\n$10\r\ninvalidate\r\n*1\r\n$")));
}
