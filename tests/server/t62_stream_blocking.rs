//! Blocking XREAD and XREADGROUP against the standalone server: a waiter
//! served by XADD, `$` pinned to the last ID when the client blocked (so
//! entries added by one transaction all reach it after EXEC), timeouts in
//! both protocols, no blocking inside MULTI, and XREADGROUP waiters answered
//! NOGROUP when their group or stream goes away (Redis 7.2).

use slotraft_tests::support::Server;
use std::time::{Duration, Instant};

/// Alice waits for new entries of stream `s` for group `g`.
const ALICE_WAITS: &[&[u8]] = &[
    b"XREADGROUP",
    b"GROUP",
    b"g",
    b"alice",
    b"BLOCK",
    b"0",
    b"STREAMS",
    b"s",
    b">",
];

#[test]
fn xadd_serves_a_blocked_xread() {
    let server = Server::start(&[]);
    let mut writer = server.connect();
    writer.roundtrip(&["XADD", "s", "1-1", "a", "1"], "$3\r\n1-1\r\n");
    let mut reader = server.blocked(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"], 1);
    writer.roundtrip(&["XADD", "s", "2-1", "b", "2"], "$3\r\n2-1\r\n");
    reader.expect(b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n");
    server.wait_blocked(0);
}

#[test]
fn dollar_is_pinned_and_a_transaction_wakes_the_waiter_after_exec() {
    let server = Server::start(&[]);
    let mut writer = server.connect();
    writer.roundtrip(&["XADD", "s", "1-1", "a", "1"], "$3\r\n1-1\r\n");
    let mut reader = server.blocked(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"], 1);
    writer.roundtrip(&["MULTI"], "+OK\r\n");
    writer.roundtrip(&["XADD", "s", "2-1", "b", "2"], "+QUEUED\r\n");
    writer.roundtrip(&["XADD", "s", "3-1", "c", "3"], "+QUEUED\r\n");
    writer.roundtrip(&["EXEC"], "*2\r\n$3\r\n2-1\r\n$3\r\n3-1\r\n");
    // Both entries: `$` still means 1-1, the last ID when it blocked.
    reader.expect(
        b"*1\r\n*2\r\n$1\r\ns\r\n*2\r\n*2\r\n$3\r\n2-1\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n*2\r\n$3\r\n3-1\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n",
    );
    // A missing stream's `$` is 0-0: its first entry serves the waiter.
    let mut reader = server.blocked(
        &["XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", "new", "$"],
        1,
    );
    writer.roundtrip(&["XADD", "new", "5-5", "f", "v"], "$3\r\n5-5\r\n");
    reader
        .expect(b"*1\r\n*2\r\n$3\r\nnew\r\n*1\r\n*2\r\n$3\r\n5-5\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n");
}

#[test]
fn timeouts_answer_nil_and_multi_never_blocks() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    let started = Instant::now();
    client.roundtrip(
        &["XREAD", "BLOCK", "100", "STREAMS", "none", "$"],
        "*-1\r\n",
    );
    assert!(started.elapsed() >= Duration::from_millis(100));
    client.roundtrip(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"], "+OK\r\n");
    client.roundtrip(
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "c",
            "BLOCK",
            "50",
            "STREAMS",
            "s",
            ">",
        ],
        "*-1\r\n",
    );
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"], "+QUEUED\r\n");
    client.roundtrip(&["EXEC"], "*1\r\n*-1\r\n");
    client.roundtrip(
        &[
            "EVAL",
            "return redis.call('XREAD', 'BLOCK', '0', 'STREAMS', 's', '$')",
            "0",
        ],
        "-ERR XREAD command is not allowed with BLOCK option from scripts script: bc40d550c9a70ad56c847e5de965771aa65fedc5, on @user_script:1.\r\n",
    );
    client.command(&[b"HELLO", b"3"]);
    let _ = client.read_frame();
    client.roundtrip(&["XREAD", "BLOCK", "50", "STREAMS", "s", "$"], "_\r\n");
    client.roundtrip(
        &["XREAD", "BLOCK", "-1", "STREAMS", "s", "$"],
        "-ERR timeout is negative\r\n",
    );
}

#[test]
fn xreadgroup_waiters_get_entries_and_learn_when_their_group_is_gone() {
    let server = Server::start(&[]);
    let mut admin = server.connect();
    admin.roundtrip(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"], "+OK\r\n");
    let mut reader = server.blocked(
        &[
            "XREADGROUP",
            "GROUP",
            "g",
            "alice",
            "BLOCK",
            "0",
            "STREAMS",
            "s",
            ">",
        ],
        1,
    );
    admin.roundtrip(&["XADD", "s", "1-1", "a", "1"], "$3\r\n1-1\r\n");
    reader.expect(b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n1-1\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n");
    // The entry is pending for alice.
    admin.roundtrip(
        &["XPENDING", "s", "g"],
        "*4\r\n:1\r\n$3\r\n1-1\r\n$3\r\n1-1\r\n*1\r\n*2\r\n$5\r\nalice\r\n$1\r\n1\r\n",
    );
    // Destroying the group ends the wait with NOGROUP.
    reader.command(ALICE_WAITS);
    server.wait_blocked(1);
    admin.roundtrip(&["XGROUP", "DESTROY", "s", "g"], ":1\r\n");
    reader.expect(
        b"-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option\r\n",
    );
    // So does deleting the stream.
    admin.roundtrip(&["XGROUP", "CREATE", "s", "g", "$"], "+OK\r\n");
    reader.command(ALICE_WAITS);
    server.wait_blocked(1);
    admin.roundtrip(&["DEL", "s"], ":1\r\n");
    reader.expect(
        b"-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option\r\n",
    );
    // And renaming it away.
    admin.roundtrip(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"], "+OK\r\n");
    reader.command(ALICE_WAITS);
    server.wait_blocked(1);
    admin.roundtrip(&["RENAME", "s", "elsewhere"], "+OK\r\n");
    reader.expect(
        b"-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option\r\n",
    );
    server.wait_blocked(0);
}

const NOGROUP_S: &[u8] =
    b"-NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option\r\n";

#[test]
fn xreadgroup_waiters_learn_when_their_stream_expires_is_flushed_or_swapped_away() {
    let server = Server::start(&[]);
    let mut admin = server.connect();
    let mut reader = server.connect();
    let mut wait_then =
        |admin: &mut slotraft_tests::support::Raw, command: &[&str], reply: &str| {
            admin.roundtrip(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"], "+OK\r\n");
            reader.command(ALICE_WAITS);
            server.wait_blocked(1);
            admin.roundtrip(command, reply);
            reader.expect(NOGROUP_S);
            server.wait_blocked(0);
        };
    // Expiry (by the active cycle: nobody reads the key).
    wait_then(&mut admin, &["PEXPIRE", "s", "50"], ":1\r\n");
    wait_then(&mut admin, &["FLUSHDB"], "+OK\r\n");
    wait_then(&mut admin, &["FLUSHALL"], "+OK\r\n");
    wait_then(&mut admin, &["SWAPDB", "0", "1"], "+OK\r\n");
    admin.roundtrip(&["FLUSHALL"], "+OK\r\n");
    // Eviction.
    admin.roundtrip(
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-random"],
        "+OK\r\n",
    );
    admin.roundtrip(&["XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"], "+OK\r\n");
    reader.command(ALICE_WAITS);
    server.wait_blocked(1);
    admin.roundtrip(&["CONFIG", "SET", "maxmemory", "1"], "+OK\r\n");
    admin.command(&[b"SET", b"other", b"v"]);
    let _ = admin.read_frame();
    reader.expect(NOGROUP_S);
    admin.roundtrip(&["CONFIG", "SET", "maxmemory", "0"], "+OK\r\n");
    // SWAPDB also wakes a list waiter whose key now holds elements.
    admin.roundtrip(&["SELECT", "1"], "+OK\r\n");
    admin.roundtrip(&["RPUSH", "list", "x"], ":1\r\n");
    let mut popper = server.blocked(&["BLPOP", "list", "0"], 1);
    admin.roundtrip(&["SWAPDB", "0", "1"], "+OK\r\n");
    popper.expect(b"*2\r\n$4\r\nlist\r\n$1\r\nx\r\n");
}
