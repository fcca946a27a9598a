//! Blocking list commands against the standalone server: wake-ups in blocking
//! order, timeouts in both protocols, requests pipelined behind a blocked one,
//! chains of BLMOVE, disconnects, CLIENT UNBLOCK and INFO blocked_clients.

use slotraft_tests::support::Server;
use std::time::{Duration, Instant};

#[test]
fn clients_blocked_on_one_list_are_served_in_blocking_order() {
    let server = Server::start(&[]);
    let mut first = server.blocked(&["BLPOP", "queue", "0"], 1);
    let mut second = server.blocked(&["BLPOP", "other", "queue", "0"], 2);
    let mut pusher = server.connect();
    pusher.roundtrip(&["RPUSH", "queue", "a", "b", "c"], ":3\r\n");
    first.expect(b"*2\r\n$5\r\nqueue\r\n$1\r\na\r\n");
    second.expect(b"*2\r\n$5\r\nqueue\r\n$1\r\nb\r\n");
    pusher.roundtrip(&["LRANGE", "queue", "0", "-1"], "*1\r\n$1\r\nc\r\n");
    server.wait_blocked(0);
}

#[test]
fn timeouts_answer_nil_in_both_protocols() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    let started = Instant::now();
    client.roundtrip(&["BLPOP", "none", "0.1"], "*-1\r\n");
    assert!(started.elapsed() >= Duration::from_millis(100));
    // A wait that times out answers the null array, BLMOVE's too (a null
    // bulk string only where it may not block, as in MULTI).
    client.roundtrip(
        &["BLMOVE", "none", "dst", "LEFT", "RIGHT", "0.05"],
        "*-1\r\n",
    );
    client.roundtrip(&["BRPOPLPUSH", "none", "dst", "0.05"], "*-1\r\n");
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(
        &["BLMOVE", "none", "dst", "LEFT", "RIGHT", "0"],
        "+QUEUED\r\n",
    );
    client.roundtrip(&["EXEC"], "*1\r\n$-1\r\n");
    client.roundtrip(&["BLMPOP", "0.05", "1", "none", "LEFT"], "*-1\r\n");
    client.command(&[b"HELLO", b"3"]);
    let _ = client.read_frame();
    client.roundtrip(&["BRPOP", "none", "0.05"], "_\r\n");
    client.roundtrip(&["BRPOPLPUSH", "none", "dst", "0.05"], "_\r\n");
    client.roundtrip(&["BLPOP", "none", "-1"], "-ERR timeout is negative\r\n");
    client.roundtrip(
        &["BLPOP", "none", "x"],
        "-ERR timeout is not a float or out of range\r\n",
    );
    // Data present: served at once, whatever the timeout.
    client.roundtrip(&["RPUSH", "list", "v"], ":1\r\n");
    client.roundtrip(&["BLPOP", "list", "0"], "*2\r\n$4\r\nlist\r\n$1\r\nv\r\n");
}

#[test]
fn requests_pipelined_behind_a_blocked_one_wait_for_it() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.send(b"BLPOP jobs 0\r\nLLEN jobs\r\nPING\r\n");
    server.wait_blocked(1);
    let mut pusher = server.connect();
    pusher.roundtrip(&["LPUSH", "jobs", "x", "y"], ":2\r\n");
    // The pop came first, then the requests behind it saw its effect.
    client.expect(b"*2\r\n$4\r\njobs\r\n$1\r\ny\r\n:1\r\n+PONG\r\n");
}

#[test]
fn a_served_blmove_wakes_the_destination_waiter() {
    let server = Server::start(&[]);
    let mut end = server.blocked(&["BLPOP", "done", "0"], 1);
    let mut mover = server.blocked(&["BLMOVE", "todo", "done", "LEFT", "RIGHT", "0"], 2);
    let mut pusher = server.connect();
    pusher.roundtrip(&["RPUSH", "todo", "task"], ":1\r\n");
    mover.expect(b"$4\r\ntask\r\n");
    end.expect(b"*2\r\n$4\r\ndone\r\n$4\r\ntask\r\n");
    pusher.roundtrip(&["EXISTS", "todo", "done"], ":0\r\n");
}

#[test]
fn a_disconnected_waiter_takes_nothing() {
    let server = Server::start(&[]);
    let gone = server.blocked(&["BLPOP", "q", "0"], 1);
    drop(gone);
    server.wait_blocked(0);
    let mut pusher = server.connect();
    pusher.roundtrip(&["RPUSH", "q", "kept"], ":1\r\n");
    pusher.roundtrip(&["LLEN", "q"], ":1\r\n");
}

#[test]
fn client_unblock_ends_a_wait() {
    let server = Server::start(&[]);
    let mut waiting = server.connect();
    waiting.command(&[b"CLIENT", b"ID"]);
    let resp::Frame::Integer(id) = waiting.read_frame() else {
        panic!("CLIENT ID is an integer")
    };
    let id = id.to_string();
    let mut admin = server.connect();
    waiting.command(&[b"BLPOP", b"q", b"0"]);
    server.wait_blocked(1);
    admin.roundtrip(&["CLIENT", "UNBLOCK", &id], ":1\r\n");
    waiting.expect(b"*-1\r\n");
    waiting.command(&[b"BRPOP", b"q", b"0"]);
    server.wait_blocked(1);
    admin.roundtrip(&["CLIENT", "UNBLOCK", &id, "ERROR"], ":1\r\n");
    waiting.expect(b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
    admin.roundtrip(&["CLIENT", "UNBLOCK", &id], ":0\r\n");
    admin.roundtrip(
        &["CLIENT", "UNBLOCK", &id, "LATER"],
        "-ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR\r\n",
    );
    admin.roundtrip(
        &["CLIENT", "UNBLOCK", "x"],
        "-ERR value is not an integer or out of range\r\n",
    );
    // The connection still works after being unblocked.
    waiting.roundtrip(&["PING"], "+PONG\r\n");
}

#[test]
fn sorted_set_waiters_wake_and_other_types_do_not_serve_list_waiters() {
    let server = Server::start(&[]);
    let mut zwaiter = server.blocked(&["BZPOPMIN", "scores", "0"], 1);
    let mut lwaiter = server.blocked(&["BLPOP", "mixed", "0"], 2);
    let mut writer = server.connect();
    writer.roundtrip(&["ZADD", "scores", "2", "b", "1", "a"], ":2\r\n");
    zwaiter.expect(b"*3\r\n$6\r\nscores\r\n$1\r\na\r\n$1\r\n1\r\n");
    // A sorted set under the list waiter's key leaves it waiting, as in Redis.
    writer.roundtrip(&["ZADD", "mixed", "1", "m"], ":1\r\n");
    server.wait_blocked(1);
    writer.roundtrip(&["DEL", "mixed"], ":1\r\n");
    writer.roundtrip(&["RPUSH", "mixed", "item"], ":1\r\n");
    lwaiter.expect(b"*2\r\n$5\r\nmixed\r\n$4\r\nitem\r\n");
}
