//! ACL for the one `default` user, MODULE, REPLICAOF, FAILOVER and LOLWUT on
//! a standalone node: the replies Redis gives for the same requests (checked
//! against redis-server).

use resp::Frame;
use slotraft_tests::support::Server;

#[test]
fn acl_describes_the_default_user() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["ACL", "WHOAMI"], "$7\r\ndefault\r\n");
    client.roundtrip(&["ACL", "USERS"], "*1\r\n$7\r\ndefault\r\n");
    client.roundtrip(
        &["ACL", "LIST"],
        "*1\r\n$34\r\nuser default on nopass ~* &* +@all\r\n",
    );
    client.roundtrip(
        &["ACL", "GETUSER", "default"],
        "*12\r\n$5\r\nflags\r\n*2\r\n$2\r\non\r\n$6\r\nnopass\r\n$9\r\npasswords\r\n*0\r\n\
         $8\r\ncommands\r\n$5\r\n+@all\r\n$4\r\nkeys\r\n$2\r\n~*\r\n$8\r\nchannels\r\n$2\r\n&*\r\n\
         $9\r\nselectors\r\n*0\r\n",
    );
    client.roundtrip(&["ACL", "GETUSER", "nobody"], "$-1\r\n");
    client.roundtrip(
        &["ACL", "CAT", "nosuch"],
        "-ERR Unknown category 'nosuch'\r\n",
    );
    client.command(&[b"ACL", b"CAT"]);
    let Frame::Array(categories) = client.read_frame() else {
        panic!("ACL CAT is an array")
    };
    assert_eq!(categories.len(), 21);
    assert_eq!(categories[0], Frame::bulk("keyspace"));
    client.command(&[b"ACL", b"CAT", b"string"]);
    let Frame::Array(strings) = client.read_frame() else {
        panic!("ACL CAT string is an array")
    };
    for name in ["get", "set", "incr", "append"] {
        assert!(strings.contains(&Frame::bulk(name)), "{name}");
    }
    assert!(!strings.contains(&Frame::bulk("lpush")));
    client.roundtrip(&["ACL", "LOG"], "*0\r\n");
    client.roundtrip(&["ACL", "LOG", "RESET"], "+OK\r\n");
    client.roundtrip(
        &["ACL", "LOG", "x"],
        "-ERR value is not an integer or out of range\r\n",
    );
    client.roundtrip(
        &["ACL", "GENPASS", "0"],
        "-ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to 4096\r\n",
    );
    client.command(&[b"ACL", b"GENPASS"]);
    let password = client.read_frame();
    let password = password.as_bytes().unwrap();
    assert_eq!(password.len(), 64);
    assert!(password.iter().all(u8::is_ascii_hexdigit));
    client.command(&[b"ACL", b"GENPASS", b"5"]);
    assert_eq!(client.read_frame().as_bytes().unwrap().len(), 2);
    client.roundtrip(&["ACL", "DRYRUN", "default", "get", "k"], "+OK\r\n");
    client.roundtrip(
        &["ACL", "DRYRUN", "default", "nosuch"],
        "-ERR Command 'nosuch' not found\r\n",
    );
    client.roundtrip(
        &["ACL", "DRYRUN", "nobody", "get", "k"],
        "-ERR User 'nobody' not found\r\n",
    );
    client.roundtrip(
        &["ACL", "DELUSER", "default"],
        "-ERR The 'default' user cannot be removed\r\n",
    );
    client.roundtrip(&["ACL", "DELUSER", "nobody"], ":0\r\n");
    let no_file = "-ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.\r\n";
    client.roundtrip(&["ACL", "LOAD"], no_file);
    client.roundtrip(&["ACL", "SAVE"], no_file);
}

#[test]
fn acl_setuser_sets_the_default_users_password() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(
        &["ACL", "SETUSER", "default", "on", ">secret", "~*", "+@all"],
        "+OK\r\n",
    );
    // The hash Redis shows for "secret".
    client.roundtrip(
        &["ACL", "LIST"],
        "*1\r\n$93\r\nuser default on #2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b ~* &* +@all\r\n",
    );
    let mut other = server.connect();
    other.roundtrip(&["GET", "k"], "-NOAUTH Authentication required.\r\n");
    other.roundtrip(&["AUTH", "default", "secret"], "+OK\r\n");
    other.roundtrip(&["GET", "k"], "$-1\r\n");
    client.roundtrip(&["ACL", "SETUSER", "default", "nopass"], "+OK\r\n");
    let mut third = server.connect();
    third.roundtrip(&["GET", "k"], "$-1\r\n");
    client.roundtrip(
        &["ACL", "SETUSER", "default", "-get"],
        "-ERR Error in ACL SETUSER modifier '-get': Syntax error (slotraft keeps one user with every permission; only its password can change)\r\n",
    );
    client.command(&[b"ACL", b"SETUSER", b"bob", b"on"]);
    assert!(client.read_frame().is_error());
}

#[test]
fn modules_replication_commands_and_lolwut_answer_as_on_a_lone_redis() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["MODULE", "LIST"], "*0\r\n");
    client.roundtrip(
        &["MODULE", "LOAD", "/nonexistent.so"],
        "-ERR MODULE command not allowed. If the enable-module-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.\r\n",
    );
    client.roundtrip(&["REPLICAOF", "NO", "ONE"], "+OK\r\n");
    client.roundtrip(
        &["REPLICAOF", "localhost", "x"],
        "-ERR Invalid master port\r\n",
    );
    client.command(&[b"SLAVEOF", b"127.0.0.1", b"6379"]);
    assert!(client.read_frame().is_error());
    client.roundtrip(
        &["FAILOVER"],
        "-ERR FAILOVER requires connected replicas.\r\n",
    );
    client.roundtrip(&["FAILOVER", "ABORT"], "-ERR No failover in progress.\r\n");
    client.roundtrip(&["FAILOVER", "NOW"], "-ERR syntax error\r\n");
    client.roundtrip(&["LOLWUT"], "$17\r\nRedis ver. 7.2.4\n\r\n");
    client.command(&[b"SYNC"]);
    assert!(client.read_frame().is_error());
}

/// A blocked command served later runs in its client's NO-TOUCH mode, as it
/// would have had it found data at once: BLMOVE's destination keeps its LFU
/// counter for a NO-TOUCH client and counts the access for another.
#[test]
fn a_served_waiter_keeps_its_no_touch_mode() {
    let server = Server::start(&["--maxmemory-policy", "allkeys-lfu"]);
    let mut control = server.connect();
    for (mode, expected) in [("ON", ":5\r\n"), ("OFF", ":6\r\n")] {
        // (The first round's move emptied `src`, so only `dst` is left.)
        let deleted = if mode == "ON" { ":0\r\n" } else { ":1\r\n" };
        control.roundtrip(&["DEL", "src", "dst"], deleted);
        control.roundtrip(&["RPUSH", "dst", "a"], ":1\r\n");
        control.roundtrip(&["OBJECT", "FREQ", "dst"], ":5\r\n");
        let mut waiter = server.connect();
        waiter.roundtrip(&["CLIENT", "NO-TOUCH", mode], "+OK\r\n");
        waiter.command(&[b"BLMOVE", b"src", b"dst", b"LEFT", b"LEFT", b"0"]);
        server.wait_blocked(1);
        control.roundtrip(&["LPUSH", "src", "x"], ":1\r\n");
        waiter.expect(b"$1\r\nx\r\n");
        control.roundtrip(&["OBJECT", "FREQ", "dst"], expected);
    }
}

#[test]
fn client_no_touch_leaves_access_times_alone_except_for_touch() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["CLIENT", "NO-TOUCH", "maybe"], "-ERR syntax error\r\n");
    client.roundtrip(&["SET", "k", "v"], "+OK\r\n");
    client.roundtrip(&["CLIENT", "NO-TOUCH", "ON"], "+OK\r\n");
    client.command(&[b"CLIENT", b"INFO"]);
    let info = client.read_frame();
    let info = String::from_utf8_lossy(info.as_bytes().expect("a bulk")).into_owned();
    assert!(info.contains(" flags=T "), "{info}");
    std::thread::sleep(std::time::Duration::from_millis(2100));
    client.roundtrip(&["GET", "k"], "$1\r\nv\r\n");
    client.roundtrip(&["APPEND", "k", "w"], ":2\r\n");
    client.command(&[b"OBJECT", b"IDLETIME", b"k"]);
    let idle = client.read_frame();
    assert!(
        matches!(idle, resp::Frame::Integer(seconds) if seconds >= 2),
        "{idle:?}"
    );
    // TOUCH itself still touches.
    client.roundtrip(&["TOUCH", "k"], ":1\r\n");
    client.roundtrip(&["OBJECT", "IDLETIME", "k"], ":0\r\n");
    // LFU: a read in NO-TOUCH mode leaves the counter; one without counts
    // (the first increment from the initial 5 is certain).
    client.roundtrip(
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lfu"],
        "+OK\r\n",
    );
    client.roundtrip(&["SET", "f", "v"], "+OK\r\n");
    client.roundtrip(&["OBJECT", "FREQ", "f"], ":5\r\n");
    client.roundtrip(&["GET", "f"], "$1\r\nv\r\n");
    client.roundtrip(&["OBJECT", "FREQ", "f"], ":5\r\n");
    client.roundtrip(&["CLIENT", "NO-TOUCH", "OFF"], "+OK\r\n");
    client.roundtrip(&["GET", "f"], "$1\r\nv\r\n");
    client.roundtrip(&["OBJECT", "FREQ", "f"], ":6\r\n");
    client.command(&[b"CLIENT", b"INFO"]);
    let info = client.read_frame();
    let info = String::from_utf8_lossy(info.as_bytes().expect("a bulk")).into_owned();
    assert!(info.contains(" flags=N "), "{info}");
}
