//! Pub/Sub on a standalone server: reply shapes in RESP2 and RESP3, the
//! subscribed-mode rules, pattern matching, introspection, and a slow
//! subscriber cut off by its output-buffer limit.

use slotraft_tests::support::{Raw, Server};
use std::io::Read;
use std::time::{Duration, Instant};

#[test]
fn subscribe_publish_and_unsubscribe_in_resp2() {
    let server = Server::start(&[]);
    let mut subscriber = Raw::connect(server.port);
    subscriber.roundtrip(
        &["SUBSCRIBE", "news", "sports"],
        "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n*3\r\n$9\r\nsubscribe\r\n$6\r\nsports\r\n:2\r\n",
    );
    let mut patterns = Raw::connect(server.port);
    patterns.roundtrip(
        &["PSUBSCRIBE", "n*"],
        "*3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:1\r\n",
    );
    let mut publisher = Raw::connect(server.port);
    // One direct subscriber and one pattern subscriber.
    publisher.roundtrip(&["PUBLISH", "news", "hello"], ":2\r\n");
    publisher.roundtrip(&["PUBLISH", "nothing-here-either", "x"], ":1\r\n");
    publisher.roundtrip(&["PUBLISH", "weather", "x"], ":0\r\n");
    subscriber.expect(b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$5\r\nhello\r\n");
    patterns.expect(b"*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$5\r\nhello\r\n");
    patterns
        .expect(b"*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$19\r\nnothing-here-either\r\n$1\r\nx\r\n");
    // Introspection.
    publisher.roundtrip(
        &["PUBSUB", "CHANNELS"],
        "*2\r\n$4\r\nnews\r\n$6\r\nsports\r\n",
    );
    publisher.roundtrip(&["PUBSUB", "CHANNELS", "s*"], "*1\r\n$6\r\nsports\r\n");
    publisher.roundtrip(
        &["PUBSUB", "NUMSUB", "news", "none"],
        "*4\r\n$4\r\nnews\r\n:1\r\n$4\r\nnone\r\n:0\r\n",
    );
    publisher.roundtrip(&["PUBSUB", "NUMPAT"], ":1\r\n");
    publisher.roundtrip(&["PUBSUB", "SHARDCHANNELS"], "*0\r\n");
    // UNSUBSCRIBE without arguments leaves every channel, one reply each.
    subscriber.roundtrip(
        &["UNSUBSCRIBE"],
        "*3\r\n$11\r\nunsubscribe\r\n$4\r\nnews\r\n:1\r\n*3\r\n$11\r\nunsubscribe\r\n$6\r\nsports\r\n:0\r\n",
    );
    // Out of subscribed mode, ordinary commands run again.
    subscriber.roundtrip(&["PING"], "+PONG\r\n");
    // With nothing subscribed, the reply names no channel.
    subscriber.roundtrip(
        &["UNSUBSCRIBE"],
        "*3\r\n$11\r\nunsubscribe\r\n$-1\r\n:0\r\n",
    );
    subscriber.roundtrip(
        &["PUNSUBSCRIBE"],
        "*3\r\n$12\r\npunsubscribe\r\n$-1\r\n:0\r\n",
    );
    publisher.roundtrip(&["PUBLISH", "news", "again"], ":1\r\n");
    publisher.roundtrip(&["PUBSUB", "CHANNELS"], "*0\r\n");
}

#[test]
fn subscribed_mode_allows_only_subscription_commands_in_resp2() {
    let server = Server::start(&[]);
    let mut client = Raw::connect(server.port);
    client.roundtrip(
        &["SUBSCRIBE", "a"],
        "*3\r\n$9\r\nsubscribe\r\n$1\r\na\r\n:1\r\n",
    );
    client.roundtrip(
        &["GET", "x"],
        "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n",
    );
    client.roundtrip(&["PING"], "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    client.roundtrip(&["PING", "hi"], "*2\r\n$4\r\npong\r\n$2\r\nhi\r\n");
    client.roundtrip(&["RESET"], "+RESET\r\n");
    client.roundtrip(&["GET", "x"], "$-1\r\n");
    // RESET left the channel.
    client.roundtrip(&["PUBLISH", "a", "m"], ":0\r\n");
}

#[test]
fn resp3_subscribers_get_push_messages_and_may_run_anything() {
    let server = Server::start(&[]);
    let mut client = Raw::connect(server.port);
    client.command(&[b"HELLO", b"3"]);
    let _hello = client.read_frame();
    client.roundtrip(
        &["SUBSCRIBE", "ch"],
        ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
    );
    client.roundtrip(&["SET", "k", "v"], "+OK\r\n");
    client.roundtrip(&["PING"], "+PONG\r\n");
    let mut publisher = Raw::connect(server.port);
    publisher.roundtrip(&["PUBLISH", "ch", "payload"], ":1\r\n");
    client.expect(b">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$7\r\npayload\r\n");
    // A connection that publishes to itself gets its reply, then the push.
    client.roundtrip(
        &["PUBLISH", "ch", "self"],
        ":1\r\n>3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$4\r\nself\r\n",
    );
}

#[test]
fn shard_channels_are_separate_from_channels() {
    let server = Server::start(&[]);
    let mut subscriber = Raw::connect(server.port);
    subscriber.roundtrip(
        &["SSUBSCRIBE", "orders"],
        "*3\r\n$10\r\nssubscribe\r\n$6\r\norders\r\n:1\r\n",
    );
    let mut publisher = Raw::connect(server.port);
    publisher.roundtrip(&["PUBLISH", "orders", "plain"], ":0\r\n");
    publisher.roundtrip(&["SPUBLISH", "orders", "sharded"], ":1\r\n");
    subscriber.expect(b"*3\r\n$8\r\nsmessage\r\n$6\r\norders\r\n$7\r\nsharded\r\n");
    publisher.roundtrip(
        &["PUBSUB", "SHARDNUMSUB", "orders"],
        "*2\r\n$6\r\norders\r\n:1\r\n",
    );
    subscriber.roundtrip(
        &["SUNSUBSCRIBE", "orders"],
        "*3\r\n$12\r\nsunsubscribe\r\n$6\r\norders\r\n:0\r\n",
    );
}

#[test]
fn a_slow_subscriber_is_disconnected_by_its_output_limit() {
    let server = Server::start(&[]);
    let mut admin = Raw::connect(server.port);
    admin.roundtrip(
        &[
            "CONFIG",
            "SET",
            "client-output-buffer-limit",
            "pubsub 256kb 128kb 1",
        ],
        "+OK\r\n",
    );
    let mut slow = Raw::connect(server.port);
    slow.roundtrip(
        &["SUBSCRIBE", "firehose"],
        "*3\r\n$9\r\nsubscribe\r\n$8\r\nfirehose\r\n:1\r\n",
    );
    // The subscriber reads nothing while far more than the socket buffers
    // and the limit can hold is published.
    let payload = vec![b'x'; 64 * 1024];
    let started = Instant::now();
    let mut publisher = Raw::connect(server.port);
    let mut disconnected = false;
    while started.elapsed() < Duration::from_secs(20) {
        publisher.command(&[b"PUBLISH", b"firehose", &payload]);
        let receivers = publisher.read_frame();
        if receivers == resp::Frame::Integer(0) {
            disconnected = true;
            break;
        }
    }
    assert!(disconnected, "the subscriber was never cut off");
    // The server closed the subscriber's connection: after whatever was
    // already in flight, reading ends.
    slow.stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut sink = vec![0u8; 1 << 20];
    loop {
        match slow.stream.read(&mut sink) {
            Ok(0) | Err(_) => break,
            Ok(_) => continue,
        }
    }
    publisher.roundtrip(
        &["PUBSUB", "NUMSUB", "firehose"],
        "*2\r\n$8\r\nfirehose\r\n:0\r\n",
    );
    // The server itself is fine.
    publisher.roundtrip(&["PING"], "+PONG\r\n");
}

/// The bytes of a RESP2 `pmessage` push.
fn pmessage(pattern: &str, channel: &str, message: &str) -> Vec<u8> {
    let mut wire = b"*4\r\n$8\r\npmessage\r\n".to_vec();
    for part in [pattern, channel, message] {
        wire.extend(format!("${}\r\n{part}\r\n", part.len()).into_bytes());
    }
    wire
}

#[test]
fn keyspace_notifications_follow_the_configured_classes() {
    let server = Server::start(&[]);
    let mut admin = Raw::connect(server.port);
    admin.roundtrip(
        &["CONFIG", "SET", "notify-keyspace-events", "KEq"],
        "-ERR CONFIG SET failed (possibly related to argument 'notify-keyspace-events') - Invalid event class character. Use 'Ag$lshzxeKEtmdn'.\r\n",
    );
    admin.roundtrip(
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
        "+OK\r\n",
    );
    admin.roundtrip(
        &["CONFIG", "GET", "notify-keyspace-events"],
        "*2\r\n$22\r\nnotify-keyspace-events\r\n$3\r\nAKE\r\n",
    );
    let mut events = Raw::connect(server.port);
    events.roundtrip(
        &["PSUBSCRIBE", "__key*__:*"],
        "*3\r\n$10\r\npsubscribe\r\n$10\r\n__key*__:*\r\n:1\r\n",
    );
    let both = |key: &str, event: &str| -> Vec<u8> {
        let mut wire = pmessage("__key*__:*", &format!("__keyspace@0__:{key}"), event);
        wire.extend(pmessage(
            "__key*__:*",
            &format!("__keyevent@0__:{event}"),
            key,
        ));
        wire
    };
    admin.roundtrip(&["SET", "k", "v"], "+OK\r\n");
    events.expect(&both("k", "set"));
    admin.roundtrip(&["INCR", "n"], ":1\r\n");
    events.expect(&both("n", "incrby"));
    // A pop that empties the list also deletes the key.
    admin.roundtrip(&["RPUSH", "l", "a"], ":1\r\n");
    admin.roundtrip(&["LPOP", "l"], "$1\r\na\r\n");
    events.expect(&both("l", "rpush"));
    events.expect(&both("l", "lpop"));
    events.expect(&both("l", "del"));
    // Writes that change nothing raise nothing; the next event comes first.
    admin.roundtrip(&["DEL", "missing"], ":0\r\n");
    admin.roundtrip(&["SADD", "s", "m"], ":1\r\n");
    admin.roundtrip(&["SADD", "s", "m"], ":0\r\n");
    admin.roundtrip(&["HSET", "h", "f", "1"], ":1\r\n");
    events.expect(&both("s", "sadd"));
    events.expect(&both("h", "hset"));
    admin.roundtrip(&["RENAME", "k", "k2"], "+OK\r\n");
    events.expect(&both("k", "rename_from"));
    events.expect(&both("k2", "rename_to"));
    // Expiry raises `expired` (here found by the next read of the key).
    admin.roundtrip(&["PEXPIRE", "k2", "1"], ":1\r\n");
    events.expect(&both("k2", "expire"));
    std::thread::sleep(Duration::from_millis(20));
    admin.roundtrip(&["GET", "k2"], "$-1\r\n");
    events.expect(&both("k2", "expired"));
    // Only the classes asked for: generic events only, keyevent channels only.
    admin.roundtrip(
        &["CONFIG", "SET", "notify-keyspace-events", "Eg"],
        "+OK\r\n",
    );
    admin.roundtrip(&["SET", "a", "1"], "+OK\r\n");
    admin.roundtrip(&["DEL", "a"], ":1\r\n");
    events.expect(&pmessage("__key*__:*", "__keyevent@0__:del", "a"));
    admin.roundtrip(&["CONFIG", "SET", "notify-keyspace-events", ""], "+OK\r\n");
    admin.roundtrip(&["SET", "b", "1"], "+OK\r\n");
    admin.roundtrip(&["PUBLISH", "__keyevent@0__:marker", "m"], ":1\r\n");
    events.expect(&pmessage("__key*__:*", "__keyevent@0__:marker", "m"));
}

#[test]
fn key_misses_are_notified_only_when_asked_for() {
    let server = Server::start(&[]);
    let mut admin = Raw::connect(server.port);
    admin.roundtrip(
        &["CONFIG", "SET", "notify-keyspace-events", "Em"],
        "+OK\r\n",
    );
    admin.roundtrip(
        &["CONFIG", "GET", "notify-keyspace-events"],
        "*2\r\n$22\r\nnotify-keyspace-events\r\n$2\r\nEm\r\n",
    );
    let mut events = Raw::connect(server.port);
    events.roundtrip(
        &["SUBSCRIBE", "__keyevent@0__:keymiss"],
        "*3\r\n$9\r\nsubscribe\r\n$22\r\n__keyevent@0__:keymiss\r\n:1\r\n",
    );
    admin.roundtrip(&["SET", "here", "1"], "+OK\r\n");
    admin.roundtrip(&["GET", "here"], "$1\r\n1\r\n");
    admin.roundtrip(&["GET", "gone"], "$-1\r\n");
    admin.roundtrip(&["MGET", "here", "absent"], "*2\r\n$1\r\n1\r\n$-1\r\n");
    let message = |key: &str| -> Vec<u8> {
        format!(
            "*3\r\n$7\r\nmessage\r\n$22\r\n__keyevent@0__:keymiss\r\n${}\r\n{key}\r\n",
            key.len()
        )
        .into_bytes()
    };
    events.expect(&message("gone"));
    events.expect(&message("absent"));
}

/// A script's PUBLISH reaches subscribers once the script is done; the
/// script sees 0 receivers (as on a shard, where counts would differ between
/// replicas).
#[test]
fn scripts_publish_to_subscribers() {
    let server = Server::start(&[]);
    let mut subscriber = server.connect();
    subscriber.roundtrip(
        &["SUBSCRIBE", "news"],
        "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n",
    );
    let mut client = server.connect();
    client.roundtrip(
        &[
            "EVAL",
            "redis.call('PUBLISH', 'news', 'a'); return redis.call('PUBLISH', 'news', 'b')",
            "0",
        ],
        ":0\r\n",
    );
    subscriber.expect(b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$1\r\na\r\n");
    subscriber.expect(b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$1\r\nb\r\n");
}

/// A pipeline of PUBLISH commands with a write in the middle: every
/// subscriber gets the messages and the write's keyspace event in the order
/// the publisher sent them, and each PUBLISH counts its receivers.
#[test]
fn pipelined_publishes_arrive_in_order_around_keyspace_events() {
    let server = Server::start(&[]);
    let mut admin = Raw::connect(server.port);
    admin.roundtrip(
        &["CONFIG", "SET", "notify-keyspace-events", "E$"],
        "+OK\r\n",
    );
    let mut listeners: Vec<Raw> = (0..3).map(|_| Raw::connect(server.port)).collect();
    for listener in &mut listeners {
        listener.roundtrip(
            &["PSUBSCRIBE", "*"],
            "*3\r\n$10\r\npsubscribe\r\n$1\r\n*\r\n:1\r\n",
        );
    }
    let mut direct = Raw::connect(server.port);
    direct.roundtrip(
        &["SUBSCRIBE", "ch"],
        "*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n",
    );
    let mut publisher = Raw::connect(server.port);
    let mut pipeline = Vec::new();
    let mut sent = Vec::new();
    for index in 0..40 {
        let command = if index == 20 {
            format!(
                "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n{index}\r\n",
                index.to_string().len()
            )
        } else {
            let message = format!("m{index}");
            sent.push(message.clone());
            format!(
                "*3\r\n$7\r\nPUBLISH\r\n$2\r\nch\r\n${}\r\n{message}\r\n",
                message.len()
            )
        };
        pipeline.extend(command.into_bytes());
    }
    publisher.send(&pipeline);
    let mut replies = String::new();
    for index in 0..40 {
        replies.push_str(if index == 20 { "+OK\r\n" } else { ":4\r\n" });
    }
    publisher.expect(replies.as_bytes());
    let mut expected_pattern = Vec::new();
    let mut expected_direct = Vec::new();
    for (index, message) in sent.iter().enumerate() {
        if index == 20 {
            expected_pattern.extend(pmessage("*", "__keyevent@0__:set", "k"));
        }
        expected_pattern.extend(pmessage("*", "ch", message));
        expected_direct.extend(
            format!(
                "*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n${}\r\n{message}\r\n",
                message.len()
            )
            .into_bytes(),
        );
    }
    for listener in &mut listeners {
        listener.expect(&expected_pattern);
    }
    direct.expect(&expected_direct);
}

/// MONITOR: every command another client runs arrives as one line with the
/// time, database and client address, arguments quoted as Redis quotes them
/// and passwords redacted; RESET ends it.
#[test]
fn monitor_shows_commands_quoted_with_passwords_redacted() {
    let server = Server::start(&[]);
    let mut monitor = Raw::connect(server.port);
    monitor.roundtrip(&["MONITOR"], "+OK\r\n");
    let mut client = Raw::connect(server.port);
    client.roundtrip(&["SELECT", "2"], "+OK\r\n");
    client.roundtrip(&["SET", "k", "a \"b\"\n\u{1}"], "+OK\r\n");
    client.roundtrip(
        &["AUTH", "secret"],
        "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n",
    );
    let lines = monitor.read_lines(3);
    for line in &lines {
        assert!(line.starts_with('+'), "a simple string: {line}");
    }
    let (stamp, rest) = lines[1][1..].split_once(' ').unwrap();
    let (seconds, micros) = stamp.split_once('.').unwrap();
    assert!(seconds.parse::<u64>().unwrap() > 1_600_000_000, "{stamp}");
    assert_eq!(micros.len(), 6, "{stamp}");
    assert!(lines[0].ends_with("\"SELECT\" \"2\""), "{}", lines[0]);
    let address = rest.split(']').next().unwrap();
    assert!(address.starts_with("[2 127.0.0.1:"), "{address}");
    assert!(
        rest.ends_with("] \"SET\" \"k\" \"a \\\"b\\\"\\n\\x01\""),
        "{rest}"
    );
    assert!(
        lines[2].ends_with("] \"AUTH\" \"(redacted)\""),
        "{}",
        lines[2]
    );
    monitor.roundtrip(&["RESET"], "+RESET\r\n");
    client.roundtrip(&["PING"], "+PONG\r\n");
    monitor.roundtrip(&["PING"], "+PONG\r\n");
}

/// As Redis 7: the script command comes first, then each command the script
/// ran as the Lua client (`[<db> lua]`, in the database selected after it
/// ran, as Redis feeds a command once it has run); a command the script was
/// refused is not shown.
#[test]
fn monitor_shows_the_commands_a_script_runs_as_the_lua_client() {
    let server = Server::start(&[]);
    let mut monitor = Raw::connect(server.port);
    monitor.roundtrip(&["MONITOR"], "+OK\r\n");
    let mut client = Raw::connect(server.port);
    client.roundtrip(
        &[
            "EVAL",
            "redis.call('SET', KEYS[1], 'v') redis.pcall('SUBSCRIBE', 'c') \
             redis.call('SELECT', '3') return redis.call('INCR', KEYS[1])",
            "1",
            "k",
        ],
        ":1\r\n",
    );
    client.roundtrip(&["GET", "k"], "$1\r\nv\r\n");
    let lines = monitor.read_lines(5);
    let tails: Vec<&str> = lines
        .iter()
        .map(|line| line.split_once(' ').unwrap().1)
        .collect();
    assert!(tails[0].starts_with("[0 127.0.0.1:"), "{}", tails[0]);
    assert!(tails[0].contains("] \"EVAL\" "), "{}", tails[0]);
    assert_eq!(tails[1], "[0 lua] \"SET\" \"k\" \"v\"");
    assert_eq!(tails[2], "[3 lua] \"SELECT\" \"3\"");
    assert_eq!(tails[3], "[3 lua] \"INCR\" \"k\"");
    assert!(tails[4].ends_with("] \"GET\" \"k\""), "{}", tails[4]);
}

/// As Redis 7, which shows a command once it has run: commands queued in
/// MULTI show when EXEC runs them, then EXEC; a discarded transaction shows
/// only MULTI and DISCARD; SELECT inside a transaction moves its own and the
/// later lines to its database.
#[test]
fn monitor_shows_a_transaction_as_it_runs() {
    let server = Server::start(&[]);
    let mut monitor = Raw::connect(server.port);
    monitor.roundtrip(&["MONITOR"], "+OK\r\n");
    let mut client = Raw::connect(server.port);
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["SET", "k", "1"], "+QUEUED\r\n");
    client.roundtrip(&["DISCARD"], "+OK\r\n");
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["SET", "k", "1"], "+QUEUED\r\n");
    client.roundtrip(&["SELECT", "2"], "+QUEUED\r\n");
    client.roundtrip(&["INCR", "k"], "+QUEUED\r\n");
    client.roundtrip(&["EXEC"], "*3\r\n+OK\r\n+OK\r\n:1\r\n");
    let lines = monitor.read_lines(7);
    let tails: Vec<&str> = lines
        .iter()
        .map(|line| line.split_once(' ').unwrap().1)
        .map(|tail| tail.split_once("] ").unwrap().1)
        .collect();
    assert_eq!(
        tails,
        [
            "\"MULTI\"",
            "\"DISCARD\"",
            "\"MULTI\"",
            "\"SET\" \"k\" \"1\"",
            "\"SELECT\" \"2\"",
            "\"INCR\" \"k\"",
            "\"EXEC\"",
        ]
    );
    assert!(lines[3].contains(" [0 127.0.0.1:"), "{}", lines[3]);
    assert!(lines[4].contains(" [2 127.0.0.1:"), "{}", lines[4]);
    assert!(lines[5].contains(" [2 127.0.0.1:"), "{}", lines[5]);
}

/// Every keyspace notification a server publishes while `script` runs, as
/// `channel message` lines, read until a marker published after it.
fn notifications(port: u16, script: &[&[&str]]) -> Vec<String> {
    let mut admin = Raw::connect(port);
    admin.roundtrip(&["FLUSHALL"], "+OK\r\n");
    admin.roundtrip(
        &["CONFIG", "SET", "notify-keyspace-events", "KEA"],
        "+OK\r\n",
    );
    let mut events = Raw::connect(port);
    events.roundtrip(
        &["PSUBSCRIBE", "__key*__:*"],
        "*3\r\n$10\r\npsubscribe\r\n$10\r\n__key*__:*\r\n:1\r\n",
    );
    for command in script {
        let arguments: Vec<&[u8]> = command.iter().map(|word| word.as_bytes()).collect();
        admin.command(&arguments);
        let _ = admin.read_frame();
    }
    admin.roundtrip(&["PUBLISH", "__keyevent@0__:marker", "end"], ":1\r\n");
    let mut buffer: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    let mut lines = Vec::new();
    loop {
        while let Ok(Some(length)) = resp::reply_length(&buffer) {
            let reply: Vec<u8> = buffer.drain(..length).collect();
            let Ok(Some((resp::Frame::Array(parts), _))) = resp::parse_reply(&reply) else {
                panic!("not a push: {:?}", String::from_utf8_lossy(&reply));
            };
            let text = |frame: &resp::Frame| {
                String::from_utf8_lossy(frame.as_bytes().unwrap_or_default()).into_owned()
            };
            let line = format!("{} {}", text(&parts[2]), text(&parts[3]));
            if line == "__keyevent@0__:marker end" {
                return lines;
            }
            lines.push(line);
        }
        let count = events.stream.read(&mut chunk).expect("read notifications");
        assert!(count > 0, "the subscriber's connection closed");
        buffer.extend_from_slice(&chunk[..count]);
    }
}

/// The events of commands that read some keys and write others, compared
/// with a real redis-server's: only the keys written are notified.
#[test]
fn notifications_name_the_written_keys_as_redis_does() {
    let script: &[&[&str]] = &[
        &["SADD", "s1", "a", "b"],
        &["SADD", "s2", "b", "c"],
        &["SINTERSTORE", "d", "s1", "s2"],
        &["SUNIONSTORE", "d", "s1", "s2"],
        &["SDIFFSTORE", "d", "s1", "s1"],
        &["COPY", "s1", "c1"],
        &["SMOVE", "s1", "s2", "a"],
        &["ZADD", "z1", "1", "a", "2", "b"],
        &["ZUNIONSTORE", "zd", "2", "z1", "s2"],
        &["ZRANGESTORE", "zr", "z1", "0", "0"],
        &["ZINCRBY", "z1", "1", "a"],
        &["SET", "b1", "ab"],
        &["BITOP", "NOT", "b2", "b1"],
        &["SETBIT", "b1", "3", "1"],
        &["SETBIT", "b1", "3", "1"],
        &["BITFIELD", "b1", "SET", "u8", "0", "7"],
        &["BITFIELD", "b1", "GET", "u8", "0"],
        &["PFADD", "h1", "x"],
        &["PFMERGE", "h2", "h1"],
        &["RPUSH", "l1", "3", "1", "2"],
        &["SORT", "l1", "STORE", "l2"],
        &["LMOVE", "l1", "l3", "LEFT", "RIGHT"],
        &["SETRANGE", "b1", "1", "x"],
        &["APPEND", "b1", "y"],
        &["GETDEL", "b2"],
        &["HINCRBY", "h", "f", "2"],
        &["HDEL", "h", "f"],
        &["RPOPLPUSH", "l2", "l4"],
        &["LMOVE", "l4", "l4", "RIGHT", "LEFT"],
        &["BLMOVE", "l3", "l5", "RIGHT", "LEFT", "0"],
        &["BRPOPLPUSH", "l5", "l6", "0"],
        &["ZUNIONSTORE", "zd", "1", "missing"],
        &["BITOP", "OR", "b1", "missing"],
        &["SORT", "missing", "STORE", "l2"],
        &["ZADD", "zr", "1", "a"],
        &["ZRANGESTORE", "zr", "z1", "5", "9"],
    ];
    let server = Server::start(&[]);
    let redis = slotraft_tests::support::RedisServer::start();
    let expected = notifications(redis.port, script);
    assert!(expected.len() > 40, "{expected:?}");
    assert_eq!(notifications(server.port, script), expected);
}
