//! What the server records about the commands it runs: SLOWLOG, LATENCY, INFO
//! commandstats/errorstats/latencystats, and the error texts and reply shapes
//! of those commands as Redis gives them.

use resp::Frame;
use slotraft_tests::support::{Raw, Server};

fn info_section(client: &mut Raw, section: &str) -> String {
    client.command(&[b"INFO", section.as_bytes()]);
    let reply = client.read_frame();
    String::from_utf8_lossy(reply.as_bytes().expect("INFO is a bulk string")).into_owned()
}

fn field<'a>(info: &'a str, name: &str) -> Option<&'a str> {
    info.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
}

fn array(frame: Frame) -> Vec<Frame> {
    match frame {
        Frame::Array(items) => items,
        other => panic!("expected an array, got {other:?}"),
    }
}

fn integer(frame: &Frame) -> i64 {
    match frame {
        Frame::Integer(value) => *value,
        other => panic!("expected an integer, got {other:?}"),
    }
}

#[test]
fn slowlog_records_commands_over_the_threshold_newest_first() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["SLOWLOG", "LEN"], ":0\r\n");
    client.roundtrip(&["CLIENT", "SETNAME", "writer"], "+OK\r\n");
    client.roundtrip(
        &["CONFIG", "SET", "slowlog-log-slower-than", "0"],
        "+OK\r\n",
    );
    client.roundtrip(&["SET", "k", "v"], "+OK\r\n");
    let long = "x".repeat(200);
    let mut many: Vec<&str> = vec!["RPUSH", "list"];
    many.extend(std::iter::repeat_n("e", 40));
    client.roundtrip(&many, ":40\r\n");
    client.roundtrip(&["SET", "long", &long], "+OK\r\n");
    client.roundtrip(
        &["AUTH", "user", "secret"],
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    client.command(&[b"SLOWLOG", b"GET", b"4"]);
    let entries = array(client.read_frame());
    assert_eq!(entries.len(), 4);
    let fields: Vec<Vec<Frame>> = entries.into_iter().map(array).collect();
    // Newest first, ids counting down.
    let ids: Vec<i64> = fields.iter().map(|entry| integer(&entry[0])).collect();
    assert!(ids.windows(2).all(|pair| pair[0] == pair[1] + 1), "{ids:?}");
    for entry in &fields {
        assert_eq!(entry.len(), 6, "{entry:?}");
        assert!(integer(&entry[1]) > 1_600_000_000);
        assert!(integer(&entry[2]) >= 0);
        let peer = String::from_utf8_lossy(entry[4].as_bytes().unwrap()).into_owned();
        assert!(peer.starts_with("127.0.0.1:"), "{peer}");
        assert_eq!(entry[5], Frame::bulk("writer"));
    }
    // Passwords are redacted.
    assert_eq!(
        fields[0][3],
        Frame::Array(vec![
            Frame::bulk("AUTH"),
            Frame::bulk("(redacted)"),
            Frame::bulk("(redacted)")
        ])
    );
    // A long argument keeps 128 bytes and says how many more there were.
    let truncated = format!("{}... (72 more bytes)", "x".repeat(128));
    assert_eq!(
        fields[1][3],
        Frame::Array(vec![
            Frame::bulk("SET"),
            Frame::bulk("long"),
            Frame::Bulk(truncated.into())
        ])
    );
    // At most 32 arguments: 31 kept and a note of the rest.
    let arguments = array(fields[2][3].clone());
    assert_eq!(arguments.len(), 32);
    assert_eq!(arguments[0], Frame::bulk("RPUSH"));
    assert_eq!(arguments[31], Frame::bulk("... (11 more arguments)"));
    client.command(&[b"SLOWLOG", b"GET", b"-1"]);
    let all = array(client.read_frame()).len();
    client.command(&[b"SLOWLOG", b"LEN"]);
    let length = integer(&client.read_frame());
    assert!(all as i64 >= 6 && length >= all as i64, "{all} {length}");
    client.roundtrip(&["SLOWLOG", "GET", "0"], "*0\r\n");
    client.roundtrip(
        &["SLOWLOG", "GET", "-2"],
        "-ERR count should be greater than or equal to -1\r\n",
    );
    client.roundtrip(
        &["SLOWLOG", "GET", "x"],
        "-ERR count should be greater than or equal to -1\r\n",
    );
    client.roundtrip(
        &["SLOWLOG", "LEN", "x"],
        "-ERR wrong number of arguments for 'slowlog|len' command\r\n",
    );
    // A shorter log drops the oldest entries.
    client.roundtrip(&["CONFIG", "SET", "slowlog-max-len", "2"], "+OK\r\n");
    client.roundtrip(&["SLOWLOG", "LEN"], ":2\r\n");
    // A negative threshold logs nothing.
    client.roundtrip(
        &["CONFIG", "SET", "slowlog-log-slower-than", "-1"],
        "+OK\r\n",
    );
    client.roundtrip(&["SLOWLOG", "RESET"], "+OK\r\n");
    client.roundtrip(&["DEBUG", "SLEEP", "0.02"], "+OK\r\n");
    client.roundtrip(&["SLOWLOG", "LEN"], ":0\r\n");
    client.command(&[b"SLOWLOG", b"HELP"]);
    let help = array(client.read_frame());
    assert_eq!(
        help[0],
        Frame::simple("SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
    );
}

#[test]
fn the_default_threshold_logs_only_slow_commands() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["SET", "fast", "1"], "+OK\r\n");
    client.roundtrip(&["DEBUG", "SLEEP", "0.015"], "+OK\r\n");
    client.command(&[b"SLOWLOG", b"GET"]);
    let entries: Vec<Vec<Frame>> = array(client.read_frame()).into_iter().map(array).collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    assert!(integer(&entries[0][2]) >= 15_000);
    assert_eq!(
        entries[0][3],
        Frame::Array(vec![
            Frame::bulk("DEBUG"),
            Frame::bulk("SLEEP"),
            Frame::bulk("0.015")
        ])
    );
}

#[test]
fn latency_monitor_records_events_over_its_threshold() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["LATENCY", "LATEST"], "*0\r\n");
    client.roundtrip(
        &["LATENCY", "GRAPH", "command"],
        "-ERR No samples available for event 'command'\r\n",
    );
    client.roundtrip(&["LATENCY", "HISTORY", "command"], "*0\r\n");
    client.roundtrip(&["LATENCY", "RESET"], ":0\r\n");
    // Off by default: nothing is recorded.
    client.roundtrip(&["DEBUG", "SLEEP", "0.02"], "+OK\r\n");
    client.roundtrip(&["LATENCY", "LATEST"], "*0\r\n");
    client.roundtrip(
        &["CONFIG", "SET", "latency-monitor-threshold", "10"],
        "+OK\r\n",
    );
    client.roundtrip(&["DEBUG", "SLEEP", "0.02"], "+OK\r\n");
    client.roundtrip(&["SET", "fast", "1"], "+OK\r\n");
    client.command(&[b"LATENCY", b"LATEST"]);
    let latest = array(client.read_frame());
    assert_eq!(latest.len(), 1, "{latest:?}");
    let event = array(latest[0].clone());
    assert_eq!(event[0], Frame::bulk("command"));
    let (latest_ms, max_ms) = (integer(&event[2]), integer(&event[3]));
    assert!(latest_ms >= 20 && max_ms >= latest_ms, "{event:?}");
    client.command(&[b"LATENCY", b"HISTORY", b"command"]);
    let history = array(client.read_frame());
    assert_eq!(history.len(), 1);
    assert_eq!(array(history[0].clone())[1], Frame::Integer(latest_ms));
    client.command(&[b"LATENCY", b"GRAPH", b"command"]);
    let graph = String::from_utf8_lossy(client.read_frame().as_bytes().unwrap()).into_owned();
    assert!(graph.starts_with("command - high "), "{graph}");
    client.command(&[b"LATENCY", b"DOCTOR"]);
    let doctor = String::from_utf8_lossy(client.read_frame().as_bytes().unwrap()).into_owned();
    assert!(doctor.contains("command"), "{doctor}");
    client.roundtrip(&["LATENCY", "RESET", "nothing", "COMMAND"], ":1\r\n");
    client.roundtrip(&["LATENCY", "LATEST"], "*0\r\n");
    client.roundtrip(
        &["LATENCY", "nope"],
        "-ERR unknown subcommand 'nope'. Try LATENCY HELP.\r\n",
    );
}

#[test]
fn latency_histogram_counts_calls_in_power_of_two_buckets() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    for value in 1..=5 {
        client.roundtrip(&["INCR", "counter"], &format!(":{value}\r\n"));
    }
    client.roundtrip(&["GET", "counter"], "$1\r\n5\r\n");
    client.command(&[b"HELLO", b"3"]);
    let _ = client.read_frame();
    client.command(&[b"LATENCY", b"HISTOGRAM", b"incr", b"nosuch"]);
    let Frame::Map(commands) = client.read_frame() else {
        panic!("LATENCY HISTOGRAM is a map in RESP3")
    };
    assert_eq!(commands.len(), 1, "{commands:?}");
    assert_eq!(commands[0].0, Frame::bulk("incr"));
    let Frame::Map(fields) = &commands[0].1 else {
        panic!("a command's histogram is a map")
    };
    assert_eq!(fields[0], (Frame::bulk("calls"), Frame::Integer(5)));
    assert_eq!(fields[1].0, Frame::bulk("histogram_usec"));
    let Frame::Map(buckets) = &fields[1].1 else {
        panic!("histogram_usec is a map")
    };
    let pairs: Vec<(i64, i64)> = buckets
        .iter()
        .map(|(bound, count)| (integer(bound), integer(count)))
        .collect();
    assert!(!pairs.is_empty());
    assert!(
        pairs
            .windows(2)
            .all(|pair| pair[0].0 < pair[1].0 && pair[0].1 < pair[1].1),
        "{pairs:?}"
    );
    assert_eq!(
        pairs.last().unwrap().1,
        5,
        "cumulative: the last bucket counts every call"
    );
    // Without names: every command that ran.
    client.command(&[b"LATENCY", b"HISTOGRAM"]);
    let Frame::Map(all) = client.read_frame() else {
        panic!("map")
    };
    let names: Vec<Frame> = all.into_iter().map(|(name, _)| name).collect();
    for name in ["incr", "get", "hello"] {
        assert!(names.contains(&Frame::bulk(name)), "{name} in {names:?}");
    }
}

#[test]
fn info_reports_commands_errors_and_latency_percentiles() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["SET", "s", "v"], "+OK\r\n");
    client.roundtrip(&["SET", "s", "v"], "+OK\r\n");
    client.roundtrip(
        &["LPUSH", "s", "x"],
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    client.roundtrip(
        &["NOSUCHCOMMAND"],
        "-ERR unknown command 'NOSUCHCOMMAND', with args beginning with: \r\n",
    );
    // Refused before running: a subscribed RESP2 connection may not GET.
    let mut subscriber = server.connect();
    subscriber.command(&[b"SUBSCRIBE", b"channel"]);
    let _ = subscriber.read_frame();
    subscriber.command(&[b"GET", b"s"]);
    assert!(subscriber.read_frame().is_error());
    let commands = info_section(&mut client, "commandstats");
    assert!(commands.starts_with("# Commandstats\r\n"), "{commands}");
    let set = field(&commands, "cmdstat_set").expect("cmdstat_set");
    assert!(set.starts_with("calls=2,usec="), "{set}");
    assert!(set.ends_with(",rejected_calls=0,failed_calls=0"), "{set}");
    let lpush = field(&commands, "cmdstat_lpush").expect("cmdstat_lpush");
    assert!(
        lpush.starts_with("calls=1,") && lpush.ends_with("failed_calls=1"),
        "{lpush}"
    );
    let get = field(&commands, "cmdstat_get").expect("cmdstat_get");
    assert!(
        get.starts_with("calls=0,") && get.contains("rejected_calls=1"),
        "{get}"
    );
    let errors = info_section(&mut client, "errorstats");
    assert_eq!(
        field(&errors, "errorstat_WRONGTYPE"),
        Some("count=1"),
        "{errors}"
    );
    assert_eq!(field(&errors, "errorstat_ERR"), Some("count=2"), "{errors}");
    let stats = info_section(&mut client, "stats");
    assert_eq!(field(&stats, "total_error_replies"), Some("3"), "{stats}");
    let latency = info_section(&mut client, "latencystats");
    let percentiles = field(&latency, "latency_percentiles_usec_set").expect("set percentiles");
    assert!(
        percentiles.starts_with("p50=")
            && percentiles.contains(",p99=")
            && percentiles.contains(",p99.9="),
        "{percentiles}"
    );
    // Not in the default sections; in "all".
    let default = info_section(&mut client, "default");
    assert!(!default.contains("# Commandstats"));
    let all = info_section(&mut client, "all");
    assert!(all.contains("# Commandstats") && all.contains("# Latencystats"));
    client.roundtrip(&["CONFIG", "RESETSTAT"], "+OK\r\n");
    let commands = info_section(&mut client, "commandstats");
    assert!(field(&commands, "cmdstat_set").is_none(), "{commands}");
    let errors = info_section(&mut client, "errorstats");
    assert_eq!(errors.trim_end(), "# Errorstats");
}

#[test]
fn a_node_without_replicas_is_a_master_and_waits_for_none() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["ROLE"], "*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n");
    client.roundtrip(&["WAIT", "0", "0"], ":0\r\n");
    // Asking for a replica waits out the timeout, as Redis without replicas.
    let started = std::time::Instant::now();
    client.roundtrip(&["WAIT", "1", "150"], ":0\r\n");
    assert!(started.elapsed() >= std::time::Duration::from_millis(140));
    client.roundtrip(&["WAIT", "1", "-1"], "-ERR timeout is negative\r\n");
    client.roundtrip(
        &["WAIT", "1", "x"],
        "-ERR timeout is not an integer or out of range\r\n",
    );
    client.roundtrip(
        &["WAIT", "x", "1"],
        "-ERR value is not an integer or out of range\r\n",
    );
    client.roundtrip(
        &["WAITAOF", "1", "0", "0"],
        "-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n",
    );
    client.roundtrip(&["WAITAOF", "0", "0", "0"], "*2\r\n:0\r\n:0\r\n");
    // Inside a transaction it answers at once.
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["WAIT", "1", "0"], "+QUEUED\r\n");
    client.roundtrip(&["EXEC"], "*1\r\n:0\r\n");
    // CLIENT UNBLOCK ends a WAIT that would never end.
    let mut waiting = server.connect();
    waiting.roundtrip(&["CLIENT", "ID"], "");
    let Frame::Integer(id) = waiting.read_frame() else {
        panic!("CLIENT ID is an integer")
    };
    waiting.command(&[b"WAIT", b"1", b"0"]);
    std::thread::sleep(std::time::Duration::from_millis(50));
    client.roundtrip(&["CLIENT", "UNBLOCK", &id.to_string()], ":1\r\n");
    assert_eq!(waiting.read_frame(), Frame::Integer(0));
}

#[test]
fn memory_commands_answer_in_redis_shapes() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["MEMORY", "USAGE", "missing"], "$-1\r\n");
    client.roundtrip(&["SET", "short", "v"], "+OK\r\n");
    client.roundtrip(&["SET", "long", &"x".repeat(5000)], "+OK\r\n");
    client.command(&[b"MEMORY", b"USAGE", b"short"]);
    let short = integer(&client.read_frame());
    client.command(&[b"MEMORY", b"USAGE", b"long", b"SAMPLES", b"0"]);
    let long = integer(&client.read_frame());
    assert!(short > 0 && long > short + 4900, "{short} {long}");
    client.roundtrip(
        &["MEMORY", "USAGE", "short", "SAMPLES", "-1"],
        "-ERR syntax error\r\n",
    );
    client.roundtrip(
        &["MEMORY", "USAGE"],
        "-ERR wrong number of arguments for 'memory|usage' command\r\n",
    );
    client.command(&[b"MEMORY", b"STATS"]);
    let stats = array(client.read_frame());
    let names: Vec<Frame> = stats.iter().step_by(2).cloned().collect();
    for name in [
        "peak.allocated",
        "total.allocated",
        "keys.count",
        "dataset.bytes",
    ] {
        assert!(names.contains(&Frame::bulk(name)), "{name} in {names:?}");
    }
    let keys = stats
        .iter()
        .position(|field| *field == Frame::bulk("keys.count"))
        .unwrap();
    assert_eq!(stats[keys + 1], Frame::Integer(2));
    client.roundtrip(&["MEMORY", "PURGE"], "+OK\r\n");
    client.command(&[b"MEMORY", b"DOCTOR"]);
    assert!(!client.read_frame().as_bytes().unwrap().is_empty());
    client.roundtrip(
        &["MEMORY", "MALLOC-STATS"],
        "$45\r\nStats not supported for the current allocator\r\n",
    );
}
