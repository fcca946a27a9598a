//! MULTI / EXEC / DISCARD on the standalone server: queued replies, atomic
//! execution, EXECABORT for commands refused while queuing, no rollback of
//! runtime errors, blocking commands that do not block, and a push inside a
//! transaction waking a blocked client after EXEC.

use slotraft_tests::support::Server;
use std::time::{Duration, Instant};

#[test]
fn queued_commands_run_together_at_exec() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["SET", "a", "1"], "+QUEUED\r\n");
    client.roundtrip(&["INCR", "a"], "+QUEUED\r\n");
    client.roundtrip(&["GET", "a"], "+QUEUED\r\n");
    client.roundtrip(&["PING"], "+QUEUED\r\n");
    client.roundtrip(&["EXEC"], "*4\r\n+OK\r\n:2\r\n$1\r\n2\r\n+PONG\r\n");
    // Runtime errors do not roll back the others.
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["SET", "s", "text"], "+QUEUED\r\n");
    client.roundtrip(&["INCR", "s"], "+QUEUED\r\n");
    client.roundtrip(&["SET", "b", "1"], "+QUEUED\r\n");
    client.roundtrip(
        &["EXEC"],
        "*3\r\n+OK\r\n-ERR value is not an integer or out of range\r\n+OK\r\n",
    );
    client.roundtrip(&["GET", "b"], "$1\r\n1\r\n");
}

#[test]
fn errors_while_queuing_abort_the_transaction() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["EXEC"], "-ERR EXEC without MULTI\r\n");
    client.roundtrip(&["DISCARD"], "-ERR DISCARD without MULTI\r\n");
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["MULTI"], "-ERR MULTI calls can not be nested\r\n");
    client.roundtrip(&["SET", "x", "1"], "+QUEUED\r\n");
    client.roundtrip(
        &["NOSUCHCOMMAND"],
        "-ERR unknown command 'NOSUCHCOMMAND', with args beginning with: \r\n",
    );
    client.roundtrip(
        &["GET"],
        "-ERR wrong number of arguments for 'get' command\r\n",
    );
    client.roundtrip(
        &["EXEC"],
        "-EXECABORT Transaction discarded because of previous errors.\r\n",
    );
    client.roundtrip(&["EXISTS", "x"], ":0\r\n");
    // DISCARD forgets the queue.
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["SET", "x", "1"], "+QUEUED\r\n");
    client.roundtrip(&["DISCARD"], "+OK\r\n");
    client.roundtrip(&["EXISTS", "x"], ":0\r\n");
    client.roundtrip(&["EXEC"], "-ERR EXEC without MULTI\r\n");
}

#[test]
fn blocking_commands_inside_do_not_block_and_pushes_wake_waiters_after_exec() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["BLPOP", "empty", "0"], "+QUEUED\r\n");
    let started = Instant::now();
    client.roundtrip(&["EXEC"], "*1\r\n*-1\r\n");
    assert!(started.elapsed() < Duration::from_secs(2));

    let mut waiter = server.connect();
    waiter.command(&[b"BLPOP", b"jobs", b"0"]);
    let mut probe = server.connect();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        probe.command(&[b"INFO", b"clients"]);
        let info = probe.read_frame();
        let text = String::from_utf8_lossy(info.as_bytes().unwrap()).into_owned();
        if text.contains("blocked_clients:1\r\n") {
            break;
        }
        assert!(Instant::now() < deadline, "the waiter never blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["RPUSH", "jobs", "j1"], "+QUEUED\r\n");
    client.roundtrip(&["RPUSH", "jobs", "j2"], "+QUEUED\r\n");
    client.roundtrip(&["EXEC"], "*2\r\n:1\r\n:2\r\n");
    waiter.expect(b"*2\r\n$4\r\njobs\r\n$2\r\nj1\r\n");
    client.roundtrip(&["LRANGE", "jobs", "0", "-1"], "*1\r\n$2\r\nj2\r\n");
}
