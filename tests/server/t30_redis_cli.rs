//! redis-cli (Debian's redis-tools, installed by `cargo xtask ci`) runs a scripted
//! session and its exact output is checked. Without a terminal, redis-cli prints
//! raw values, an empty line for nil, and an empty line after each error.

use slotraft_tests::support::{redis_cli, Server};
use std::process::Command;

#[test]
fn scripted_session() {
    let server = Server::start(&[]);
    let script = "\
SET greeting hello
GET greeting
APPEND greeting \" world\"
STRLEN greeting
INCRBY counter 41
INCR counter
EXPIRE counter 100
TTL counter
PERSIST counter
TTL counter
MSET k1 a k2 b
MGET k1 nothing k2
EXISTS k1 k2 nothing
DEL k1 k2
TYPE greeting
TYPE nothing
OBJECT ENCODING counter
RENAME nothing other
GET
DBSIZE
";
    let expected = "\
OK
hello
11
11
41
42
1
100
1
-1
OK
a

b
2
2
string
none
int
ERR no such key

ERR wrong number of arguments for 'get' command

2
";
    assert_eq!(redis_cli(server.port, script), expected);
}

#[test]
fn cli_sees_resp3_after_hello() {
    let server = Server::start(&[]);
    let output = Command::new("redis-cli")
        .args([
            "-3",
            "-h",
            "127.0.0.1",
            "-p",
            &server.port.to_string(),
            "GET",
            "missing",
        ])
        .output()
        .expect("redis-cli is installed");
    assert_eq!(String::from_utf8_lossy(&output.stdout), "\n");
}
