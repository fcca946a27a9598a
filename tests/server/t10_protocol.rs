//! RESP framing: pipelining, inline commands, protocol errors, limits, HELLO.

use slotraft_tests::support::Server;

#[test]
fn pipelined_requests_reply_in_order() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n*1\r\n$4\r\nPING\r\n");
    client.expect(b"+OK\r\n$1\r\nv\r\n+PONG\r\n+PONG\r\n");
}

#[test]
fn inline_commands_with_quotes() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.send(b"set greeting \"hello world\"\r\nget greeting\r\n\r\necho 'it\\'s'\n");
    client.expect(b"+OK\r\n$11\r\nhello world\r\n$4\r\nit's\r\n");
}

#[test]
fn protocol_errors_reply_and_close() {
    let server = Server::start(&[]);
    let cases: &[(&[u8], &str)] = &[
        (
            b"*1\r\n+PING\r\n",
            "-ERR Protocol error: expected '$', got '+'\r\n",
        ),
        (
            b"*abc\r\n",
            "-ERR Protocol error: invalid multibulk length\r\n",
        ),
        (
            b"*1\r\n$-1\r\n",
            "-ERR Protocol error: invalid bulk length\r\n",
        ),
        (
            b"SET k \"unterminated\r\n",
            "-ERR Protocol error: unbalanced quotes in request\r\n",
        ),
    ];
    for (input, reply) in cases {
        let mut client = server.connect();
        client.send(input);
        client.expect(reply.as_bytes());
        assert!(client.is_closed(), "connection stays open after {reply}");
    }
    // The server itself is fine.
    let mut client = server.connect();
    client.roundtrip(&["PING"], "+PONG\r\n");
}

#[test]
fn bulk_length_limit_is_configurable() {
    let server = Server::start(&["--proto-max-bulk-len", "1mb"]);
    let mut client = server.connect();
    client.send(b"*2\r\n$4\r\nECHO\r\n$1048577\r\n");
    client.expect(b"-ERR Protocol error: invalid bulk length\r\n");
    assert!(client.is_closed());
}

#[test]
fn oversized_inline_request_is_refused() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    let mut line = vec![b'a'; 70 * 1024];
    line.extend_from_slice(b"\r\n");
    client.send(&line);
    client.expect(b"-ERR Protocol error: too big inline request\r\n");
    assert!(client.is_closed());
}

#[test]
fn query_buffer_limit_closes_the_connection() {
    let server = Server::start(&["--client-query-buffer-limit", "1mb"]);
    let mut client = server.connect();
    // A 2 MB argument announced within proto-max-bulk-len but past the query limit.
    client.send(b"*2\r\n$4\r\nECHO\r\n$2097152\r\n");
    let chunk = vec![b'x'; 64 * 1024];
    for _ in 0..20 {
        if std::io::Write::write_all(&mut client.stream, &chunk).is_err() {
            break;
        }
    }
    assert!(client.is_closed());
}

#[test]
fn hello_switches_protocol() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["HELLO", "4"], "-NOPROTO unsupported protocol version\r\n");
    client.command(&[b"HELLO", b"3"]);
    let reply = client.read_frame();
    let resp::Frame::Map(fields) = reply else {
        panic!("HELLO 3 must reply with a map, got {reply:?}");
    };
    assert!(fields.contains(&(resp::Frame::bulk("proto"), resp::Frame::Integer(3))));
    assert!(fields.contains(&(resp::Frame::bulk("server"), resp::Frame::bulk("redis"))));
    client.roundtrip(&["GET", "missing"], "_\r\n");
    client.command(&[b"HELLO", b"2"]);
    let _ = client.read_frame();
    client.roundtrip(&["GET", "missing"], "$-1\r\n");
}

#[test]
fn unknown_commands_and_arity() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(
        &["NOSUCH", "a", "b"],
        "-ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' \r\n",
    );
    client.roundtrip(
        &["GET"],
        "-ERR wrong number of arguments for 'get' command\r\n",
    );
    client.roundtrip(
        &["CONFIG", "NOPE"],
        "-ERR unknown subcommand 'NOPE'. Try CONFIG HELP.\r\n",
    );
}

#[test]
fn auth_gates_commands() {
    let server = Server::start(&["--requirepass", "s3cret"]);
    let mut client = server.connect();
    client.roundtrip(&["GET", "k"], "-NOAUTH Authentication required.\r\n");
    client.roundtrip(
        &["AUTH", "wrong"],
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n",
    );
    client.roundtrip(&["AUTH", "s3cret"], "+OK\r\n");
    client.roundtrip(&["GET", "k"], "$-1\r\n");
}

#[test]
fn shutdown_stops_the_process() {
    let mut server = Server::start(&[]);
    let mut client = server.connect();
    client.command(&[b"SHUTDOWN"]);
    assert!(client.is_closed());
    let status = server.wait_exit(std::time::Duration::from_secs(10));
    assert!(
        status.is_some_and(|status| status.success()),
        "exit status {status:?}"
    );
}

#[test]
fn sigterm_stops_the_process_gracefully() {
    let mut server = Server::start(&[]);
    let status = std::process::Command::new("kill")
        .args(["-TERM", &server.pid().to_string()])
        .status()
        .expect("run kill");
    assert!(status.success());
    let status = server.wait_exit(std::time::Duration::from_secs(10));
    assert!(
        status.is_some_and(|status| status.success()),
        "exit status {status:?}"
    );
}
