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

#[test]
fn watch_aborts_exec_when_a_key_changed_or_expired() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    let mut other = server.connect();
    client.roundtrip(&["SET", "balance", "100"], "+OK\r\n");
    // Untouched: EXEC runs.
    client.roundtrip(&["WATCH", "balance"], "+OK\r\n");
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["DECRBY", "balance", "10"], "+QUEUED\r\n");
    client.roundtrip(&["EXEC"], "*1\r\n:90\r\n");
    // Changed by another client: EXEC answers nil and runs nothing.
    client.roundtrip(&["WATCH", "balance"], "+OK\r\n");
    other.roundtrip(&["INCRBY", "balance", "5"], ":95\r\n");
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["DECRBY", "balance", "10"], "+QUEUED\r\n");
    client.roundtrip(&["EXEC"], "*-1\r\n");
    client.roundtrip(&["GET", "balance"], "$2\r\n95\r\n");
    // EXEC forgets the watch: the next transaction runs.
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["DECRBY", "balance", "10"], "+QUEUED\r\n");
    client.roundtrip(&["EXEC"], "*1\r\n:85\r\n");
    // UNWATCH forgets too.
    client.roundtrip(&["WATCH", "balance"], "+OK\r\n");
    other.roundtrip(&["SET", "balance", "1"], "+OK\r\n");
    client.roundtrip(&["UNWATCH"], "+OK\r\n");
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(
        &["WATCH", "x"],
        "-ERR WATCH inside MULTI is not allowed\r\n",
    );
    client.roundtrip(&["INCR", "balance"], "+QUEUED\r\n");
    client.roundtrip(&["EXEC"], "*1\r\n:2\r\n");
    // A watched key that expires counts as changed.
    client.roundtrip(&["SET", "lock", "me", "PX", "50"], "+OK\r\n");
    client.roundtrip(&["WATCH", "lock"], "+OK\r\n");
    std::thread::sleep(Duration::from_millis(120));
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["SET", "lock", "again"], "+QUEUED\r\n");
    client.roundtrip(&["EXEC"], "*-1\r\n");
    // FLUSHALL by another client changes every watched key.
    client.roundtrip(&["SET", "kept", "v"], "+OK\r\n");
    client.roundtrip(&["WATCH", "kept"], "+OK\r\n");
    other.roundtrip(&["FLUSHALL"], "+OK\r\n");
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["SET", "kept", "again"], "+QUEUED\r\n");
    client.roundtrip(&["EXEC"], "*-1\r\n");
    client.roundtrip(&["SET", "balance", "1"], "+OK\r\n");
    // RESP3 answers a null.
    client.command(&[b"HELLO", b"3"]);
    let _ = client.read_frame();
    client.roundtrip(&["WATCH", "balance"], "+OK\r\n");
    other.roundtrip(&["SET", "balance", "7"], "+OK\r\n");
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["GET", "balance"], "+QUEUED\r\n");
    client.roundtrip(&["EXEC"], "_\r\n");
}
