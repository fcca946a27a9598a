//! CLIENT PAUSE and CLIENT UNPAUSE against the standalone server: what WRITE
//! and ALL hold, release by UNPAUSE and by timeout in arrival order, MULTI,
//! scripts, expiry kept still, the argument errors (texts checked against
//! redis-server), CLIENT LIST's `b` flag and CLIENT UNBLOCK.

use slotraft_tests::support::{Raw, Server};
use std::time::{Duration, Instant};

fn info_field(client: &mut Raw, section: &str, field: &str) -> String {
    client.command(&[b"INFO", section.as_bytes()]);
    let info = client.read_frame();
    let text = String::from_utf8_lossy(info.as_bytes().expect("INFO is a bulk")).into_owned();
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{field}:")))
        .unwrap_or_else(|| panic!("no {field} in {text}"))
        .to_string()
}

#[test]
fn a_write_pause_holds_writes_until_unpause_while_reads_run() {
    let server = Server::start(&[]);
    let mut admin = server.connect();
    admin.roundtrip(&["CLIENT", "PAUSE", "60000", "WRITE"], "+OK\r\n");
    let mut writer = server.blocked(&["SET", "k", "v"], 1);
    let mut reader = server.connect();
    reader.roundtrip(&["GET", "k"], "$-1\r\n");
    reader.roundtrip(&["PING"], "+PONG\r\n");
    // The held client shows as blocked, on its command.
    reader.command(&[b"CLIENT", b"LIST"]);
    let list = reader.read_frame();
    let list = String::from_utf8_lossy(list.as_bytes().expect("a bulk")).into_owned();
    let held = list
        .lines()
        .find(|line| line.contains("cmd=set"))
        .expect("the held client");
    assert!(held.contains(" flags=b "), "{held}");
    // CLIENT UNBLOCK does not end a pause's hold (Redis 7.2).
    let id = held
        .strip_prefix("id=")
        .and_then(|rest| rest.split(' ').next())
        .expect("an id");
    admin.roundtrip(&["CLIENT", "UNBLOCK", id, "ERROR"], ":0\r\n");
    admin.roundtrip(&["CLIENT", "UNPAUSE"], "+OK\r\n");
    writer.expect(b"+OK\r\n");
    reader.roundtrip(&["GET", "k"], "$1\r\nv\r\n");
    server.wait_blocked(0);
}

#[test]
fn held_commands_run_in_arrival_order_when_the_pause_times_out() {
    let server = Server::start(&[]);
    let mut admin = server.connect();
    let started = Instant::now();
    admin.roundtrip(&["CLIENT", "PAUSE", "500", "ALL"], "+OK\r\n");
    // INFO is held too in ALL mode: a pause between sends orders them.
    let gap = Duration::from_millis(40);
    let mut first = server.connect();
    first.command(&[b"SET", b"k", b"1"]);
    std::thread::sleep(gap);
    let mut second = server.connect();
    second.command(&[b"APPEND", b"k", b"2"]);
    std::thread::sleep(gap);
    let mut third = server.connect();
    third.send(b"APPEND k 3\r\nGET k\r\n");
    std::thread::sleep(gap);
    let mut reader = server.connect();
    reader.command(&[b"GET", b"k"]);
    first.expect(b"+OK\r\n");
    second.expect(b":2\r\n");
    third.expect(b":3\r\n$3\r\n123\r\n");
    reader.expect(b"$3\r\n123\r\n");
    assert!(started.elapsed() >= Duration::from_millis(500));
    server.wait_blocked(0);
}

#[test]
fn the_pausing_client_is_held_too_and_a_pause_keeps_the_stricter_mode() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    let started = Instant::now();
    client.send(b"CLIENT PAUSE 300 ALL\r\nPING\r\n");
    client.expect(b"+OK\r\n+PONG\r\n");
    assert!(started.elapsed() >= Duration::from_millis(300));
    // WRITE for longer, then ALL for a moment: reads stay held until the
    // first one's end (the later end and the stricter mode win).
    let started = Instant::now();
    client.roundtrip(&["CLIENT", "PAUSE", "800", "WRITE"], "+OK\r\n");
    client.roundtrip(&["CLIENT", "PAUSE", "1", "ALL"], "+OK\r\n");
    std::thread::sleep(Duration::from_millis(50));
    let mut reader = server.blocked(&["GET", "x"], 1);
    reader.expect(b"$-1\r\n");
    assert!(started.elapsed() >= Duration::from_millis(800));
}

#[test]
fn argument_errors_are_redis_texts() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["CLIENT", "PAUSE", "-1"], "-ERR timeout is negative\r\n");
    client.roundtrip(
        &["CLIENT", "PAUSE", "abc"],
        "-ERR timeout is not an integer or out of range\r\n",
    );
    client.roundtrip(
        &["CLIENT", "PAUSE", "1.5"],
        "-ERR timeout is not an integer or out of range\r\n",
    );
    client.roundtrip(
        &["CLIENT", "PAUSE", "10", "BOGUS"],
        "-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n",
    );
    client.roundtrip(
        &["CLIENT", "PAUSE", "abc", "BOGUS"],
        "-ERR CLIENT PAUSE mode must be WRITE or ALL\r\n",
    );
    client.roundtrip(
        &["CLIENT", "PAUSE", "10", "ALL", "extra"],
        "-ERR unknown subcommand or wrong number of arguments for 'PAUSE'. Try CLIENT HELP.\r\n",
    );
    client.roundtrip(
        &["CLIENT", "PAUSE"],
        "-ERR wrong number of arguments for 'client|pause' command\r\n",
    );
    client.roundtrip(
        &["CLIENT", "UNPAUSE", "x"],
        "-ERR wrong number of arguments for 'client|unpause' command\r\n",
    );
    client.roundtrip(&["CLIENT", "UNPAUSE"], "+OK\r\n");
    client.roundtrip(&["CLIENT", "PAUSE", "0", "write"], "+OK\r\n");
    client.roundtrip(&["SET", "a", "1"], "+OK\r\n");
    // A syntax error is answered at once, as in Redis.
    client.roundtrip(&["CLIENT", "PAUSE", "60000", "WRITE"], "+OK\r\n");
    client.roundtrip(
        &["SET", "a"],
        "-ERR wrong number of arguments for 'set' command\r\n",
    );
    client.roundtrip(&["CLIENT", "UNPAUSE"], "+OK\r\n");
}

#[test]
fn transactions_and_scripts_are_held_when_they_may_write() {
    let server = Server::start(&[]);
    let mut admin = server.connect();
    admin.roundtrip(&["SET", "FOO", "BAR"], "+OK\r\n");
    admin.roundtrip(&["PFADD", "hll", "a"], ":1\r\n");
    let mut transaction = server.connect();
    transaction.roundtrip(&["MULTI"], "+OK\r\n");
    transaction.roundtrip(&["SET", "FOO", "BAZ"], "+QUEUED\r\n");
    admin.roundtrip(&["CLIENT", "PAUSE", "60000", "WRITE"], "+OK\r\n");
    let mut exec = transaction;
    exec.command(&[b"EXEC"]);
    server.wait_blocked(1);
    // A read-only transaction runs.
    let mut reads = server.connect();
    reads.roundtrip(&["MULTI"], "+OK\r\n");
    reads.roundtrip(&["PING"], "+QUEUED\r\n");
    reads.roundtrip(&["GET", "FOO"], "+QUEUED\r\n");
    reads.roundtrip(&["EXEC"], "*2\r\n+PONG\r\n$3\r\nBAR\r\n");
    // Scripts that declare no-writes, and the _RO forms, run.
    reads.roundtrip(&["EVAL", "#!lua flags=no-writes\nreturn 2", "0"], ":2\r\n");
    reads.roundtrip(&["EVAL_RO", "return 3", "0"], ":3\r\n");
    // A script without flags, PUBLISH and PFCOUNT are held.
    let mut script = server.blocked(&["EVAL", "return 1", "0"], 2);
    let mut publish = server.blocked(&["PUBLISH", "channel", "message"], 3);
    let mut count = server.blocked(&["PFCOUNT", "hll"], 4);
    // A write queued in MULTI is held too.
    let mut queued = server.connect();
    queued.roundtrip(&["MULTI"], "+OK\r\n");
    queued.command(&[b"SET", b"other", b"1"]);
    server.wait_blocked(5);
    admin.roundtrip(&["CLIENT", "UNPAUSE"], "+OK\r\n");
    exec.expect(b"*1\r\n+OK\r\n");
    script.expect(b":1\r\n");
    publish.expect(b":0\r\n");
    count.expect(b":1\r\n");
    queued.expect(b"+QUEUED\r\n");
    queued.roundtrip(&["EXEC"], "*1\r\n+OK\r\n");
    admin.roundtrip(&["GET", "FOO"], "$3\r\nBAZ\r\n");
}

#[test]
fn keys_do_not_expire_while_paused() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["SET", "k", "v", "PX", "50"], "+OK\r\n");
    client.roundtrip(&["CLIENT", "PAUSE", "60000", "WRITE"], "+OK\r\n");
    std::thread::sleep(Duration::from_millis(300));
    // Logically expired, but not deleted: by neither the read nor the
    // active cycle.
    client.roundtrip(&["GET", "k"], "$-1\r\n");
    client.roundtrip(&["DBSIZE"], ":1\r\n");
    assert_eq!(info_field(&mut client, "stats", "expired_keys"), "0");
    client.roundtrip(&["CLIENT", "UNPAUSE"], "+OK\r\n");
    client.roundtrip(&["GET", "k"], "$-1\r\n");
    assert_eq!(info_field(&mut client, "stats", "expired_keys"), "1");
    client.roundtrip(&["DBSIZE"], ":0\r\n");
}
