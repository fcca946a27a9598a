//! Lua scripting on the standalone server, through the wire: scripts as
//! applications write them (a sliding-window rate limiter, a success-rate
//! window, a token bucket, a lock and its compare-and-delete release), the
//! script cache with EVALSHA and the `redis` crate's `Script`, errors and reply
//! conversions in both protocols, the instruction budget, BUSY with SCRIPT KILL
//! and FUNCTION KILL, and Functions (LOAD, FCALL, LIST, DUMP/RESTORE, DELETE).
//!
//! Scripts across a restart are not covered: a standalone server keeps its
//! keyspace, script cache and function libraries included, in memory only (it
//! has no SAVE and writes nothing to `--dir`).

use resp::Frame;
use slotraft_tests::support::{redis_cli, Raw, Server};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
const BUSY_FUNCTION: &str =
    "BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.";
const BUDGET: &str =
    "ERR Script exceeded its instruction budget (lua-instruction-limit) and was stopped";
const KILLED: &str = "ERR Script killed by user with SCRIPT KILL...";
const UNKILLABLE: &str = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command.";
const NOTBUSY: &str = "NOTBUSY No scripts in execution right now.";
const NOSCRIPT: &str = "NOSCRIPT No matching script. Please use EVAL.";

/// A sliding-window rate limiter: KEYS[1] holds the window's requests (a sorted
/// set scored by time); ARGV = now (ms), window (ms), limit, request id.
/// Answers {admitted, remaining}.
const SLIDING_WINDOW: &str = r#"
local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])

redis.call('ZREMRANGEBYSCORE', key, 0, now - window)
local count = redis.call('ZCARD', key)
if count >= limit then
  return {0, 0}
end
redis.call('ZADD', key, now, ARGV[4])
redis.call('PEXPIRE', key, window)
return {1, limit - count - 1}
"#;

/// The success rate of the calls in a window, in percent: KEYS = every call,
/// the successes, the failures; ARGV = now (ms), window (ms), outcome (1 for a
/// success), key TTL (s).
const SUCCESS_RATE: &str = r#"
local resultKey = KEYS[1]
local successKey = KEYS[2]
local failKey = KEYS[3]
local currentMs = tonumber(ARGV[1])
local windowMs = tonumber(ARGV[2])
local ttl = tonumber(ARGV[4])

local windowStart = currentMs - windowMs
redis.call('ZREMRANGEBYSCORE', resultKey, '-inf', windowStart)
redis.call('ZREMRANGEBYSCORE', successKey, '-inf', windowStart)
redis.call('ZREMRANGEBYSCORE', failKey, '-inf', windowStart)

local member = currentMs .. "-" .. math.random()
redis.call('ZADD', resultKey, currentMs, member)
if ARGV[3] == '1' then
  redis.call('ZADD', successKey, currentMs, member)
else
  redis.call('ZADD', failKey, currentMs, member)
end
redis.call('EXPIRE', resultKey, ttl)
redis.call('EXPIRE', successKey, ttl)
redis.call('EXPIRE', failKey, ttl)

local successCount = redis.call('ZCARD', successKey)
local failCount = redis.call('ZCARD', failKey)
local successRate = successCount / (successCount + failCount)
return successRate * 100
"#;

/// A token bucket kept in a hash (`tokens`, `ts`): ARGV = refill rate
/// (tokens/s), capacity, now (ms), tokens requested. Answers {allowed,
/// whole tokens left}.
const TOKEN_BUCKET: &str = r#"
local key = KEYS[1]
local rate = tonumber(ARGV[1])
local capacity = tonumber(ARGV[2])
local now = tonumber(ARGV[3])
local requested = tonumber(ARGV[4])

local state = redis.call('HMGET', key, 'tokens', 'ts')
local tokens = tonumber(state[1])
local ts = tonumber(state[2])
if tokens == nil then
  tokens = capacity
  ts = now
end

local elapsed = math.max(0, now - ts)
tokens = math.min(capacity, tokens + elapsed * rate / 1000)
local allowed = 0
if tokens >= requested then
  tokens = tokens - requested
  allowed = 1
end

redis.call('HMSET', key, 'tokens', tokens, 'ts', now)
redis.call('PEXPIRE', key, math.ceil(capacity / rate * 1000) * 2)
return {allowed, math.floor(tokens)}
"#;

const LOCK_ACQUIRE: &str = "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2])";
const LOCK_RELEASE: &str = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

/// A library with a write function and a `no-writes` one.
const LIBRARY: &str = "#!lua name=ratelib
local function hit(keys, args)
  return redis.call('INCRBY', keys[1], args[1])
end
local function peek(keys, args)
  return redis.call('GET', keys[1])
end
redis.register_function('hit', hit)
redis.register_function{function_name='peek', callback=peek, flags={'no-writes'}, description='reads the counter'}
";

/// FUNCTION DUMP of [`LIBRARY`] as Redis 7.0.15 writes it: the code
/// LZF-compressed, RDB version 10, Redis's CRC-64.
const REDIS_7_0_DUMP: &[&str] = &[
    "f5c340e241451f23216c7561206e616d653d726174656c69620a6c6f63616c20",
    "66756e6374696f196e20686974286b6579732c2061726773290a202072657475",
    "726e2006036469732e202b0b6c2827494e43524259272c204029025b315d802c",
    "200804290a656e64e00752037065656be0195302474554e00150804780720872",
    "656769737465725fc0a301282720a4202b20050029e00f23007bc02c005f60ec",
    "00274083203240be046261636b3d400f1d2c20666c6167733d7b276e6f2d7772",
    "69746573277d2c2064657363726970410d0f3d2772656164732074686520636f",
    "756e208502277d0a0a007853a6faa921adf1",
];

fn sha(script: &str) -> String {
    redis::Script::new(script).get_hash().to_string()
}

/// The reply line of an error raised in `script` at `line`.
fn raised(text: &str, script: &str, line: u32) -> String {
    format!(
        "-{text} script: {}, on @user_script:{line}.\r\n",
        sha(script)
    )
}

fn request(client: &mut Raw, arguments: &[&str]) -> Frame {
    let arguments: Vec<&[u8]> = arguments
        .iter()
        .map(|argument| argument.as_bytes())
        .collect();
    client.command(&arguments);
    client.read_frame()
}

fn integer(frame: Frame) -> i64 {
    match frame {
        Frame::Integer(value) => value,
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn hex(lines: &[&str]) -> Vec<u8> {
    let text: String = lines.concat();
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).expect("hex"))
        .collect()
}

/// Sends TIME on `probe` until it answers `busy`: the script another
/// connection started has run past `busy-reply-threshold`. TIME does not need
/// the keyspace, so it answers at once while the script has not started yet,
/// and once it has, waits until the run is busy.
fn wait_busy(probe: &mut Raw, busy: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let sent = Instant::now();
        match request(probe, &["TIME"]) {
            Frame::Error(text) if text == busy.as_bytes() => return,
            Frame::Array(time) if time.len() == 2 => {
                // A TIME that waited for the script and then got its answer
                // saw the run end without ever being reported busy.
                let waited = sent.elapsed();
                assert!(
                    waited < Duration::from_millis(500),
                    "TIME waited {waited:?} for the script, then answered"
                );
            }
            other => panic!("TIME while a script runs answered {other:?}"),
        }
        assert!(Instant::now() < deadline, "the script never became busy");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn limiter_request(
    connection: &mut redis::Connection,
    limiter: &redis::Script,
    now: u64,
    id: &str,
) -> (i64, i64) {
    limiter
        .key("{user:1}:window")
        .arg(now)
        .arg(1000)
        .arg(3)
        .arg(id)
        .invoke(connection)
        .expect("rate limiter reply")
}

#[test]
fn sliding_window_rate_limiter_admits_limit_requests_per_window() {
    let server = Server::start(&[]);
    let mut connection = server.redis();
    let limiter = redis::Script::new(SLIDING_WINDOW);
    let mut hit = |now: u64, id: &str| limiter_request(&mut connection, &limiter, now, id);
    // A window of 1000 ms admits 3 requests.
    assert_eq!(hit(10_000, "r1"), (1, 2));
    assert_eq!(hit(10_100, "r2"), (1, 1));
    assert_eq!(hit(10_200, "r3"), (1, 0));
    assert_eq!(hit(10_300, "r4"), (0, 0));
    // r1 is still inside the window at 10_999...
    assert_eq!(hit(10_999, "r5"), (0, 0));
    // ...and out of it at 11_000: one slot frees, and only one.
    assert_eq!(hit(11_000, "r6"), (1, 0));
    assert_eq!(hit(11_001, "r7"), (0, 0));
    assert_eq!(hit(11_100, "r8"), (1, 0));
    let members: Vec<String> = redis::cmd("ZRANGE")
        .arg("{user:1}:window")
        .arg(0)
        .arg(-1)
        .query(&mut connection)
        .unwrap();
    assert_eq!(members, ["r3", "r6", "r8"]);
    let ttl: i64 = redis::cmd("PTTL")
        .arg("{user:1}:window")
        .query(&mut connection)
        .unwrap();
    assert!(ttl > 0 && ttl <= 1000, "PTTL {ttl}");
    // After a quiet period the window is empty again.
    let mut hit = |now: u64, id: &str| limiter_request(&mut connection, &limiter, now, id);
    assert_eq!(hit(20_000, "r9"), (1, 2));
    let count: i64 = redis::cmd("ZCARD")
        .arg("{user:1}:window")
        .query(&mut connection)
        .unwrap();
    assert_eq!(count, 1);
}

#[test]
fn success_rate_window_reports_truncated_percentages() {
    let server = Server::start(&[]);
    let mut connection = server.redis();
    let script = redis::Script::new(SUCCESS_RATE);
    let keys = ["{code}:result", "{code}:success", "{code}:fail"];
    let mut record = |now: u64, success: bool| -> i64 {
        script
            .key(&keys[..])
            .arg(now)
            .arg(10_000)
            .arg(if success { "1" } else { "0" })
            .arg(60)
            .invoke(&mut connection)
            .expect("success rate reply")
    };
    assert_eq!(record(100_000, true), 100);
    assert_eq!(record(100_001, true), 100);
    assert_eq!(record(100_002, false), 66); // 2 of 3
    assert_eq!(record(100_003, false), 50);
    assert_eq!(record(100_004, true), 60);
    assert_eq!(record(100_005, false), 50);
    // Two calls in the same millisecond are two members (math.random differs).
    assert_eq!(record(100_005, false), 42); // 3 of 7
    for (key, count) in [(keys[0], 7), (keys[1], 3), (keys[2], 4)] {
        let found: i64 = redis::cmd("ZCARD").arg(key).query(&mut connection).unwrap();
        assert_eq!(found, count, "{key}");
        let ttl: i64 = redis::cmd("TTL").arg(key).query(&mut connection).unwrap();
        assert!(ttl > 0 && ttl <= 60, "{key}: TTL {ttl}");
    }
    let mut record = |now: u64, success: bool| -> i64 {
        script
            .key(&keys[..])
            .arg(now)
            .arg(10_000)
            .arg(if success { "1" } else { "0" })
            .arg(60)
            .invoke(&mut connection)
            .expect("success rate reply")
    };
    // The window moves past the first four calls (scores up to 100_003).
    assert_eq!(record(110_003, true), 50); // 2 of 4
                                           // A long pause: only the new failure is left.
    assert_eq!(record(200_000, false), 0);
    let members: Vec<String> = redis::cmd("ZRANGE")
        .arg(keys[0])
        .arg(0)
        .arg(-1)
        .query(&mut connection)
        .unwrap();
    assert_eq!(members.len(), 1, "{members:?}");
    let fraction: f64 = members[0]
        .strip_prefix("200000-")
        .and_then(|rest| rest.parse().ok())
        .unwrap_or_else(|| panic!("member {:?}", members[0]));
    assert!((0.0..1.0).contains(&fraction), "{fraction}");
}

#[test]
fn token_bucket_refills_by_elapsed_time() {
    let server = Server::start(&[]);
    let mut connection = server.redis();
    let script = redis::Script::new(TOKEN_BUCKET);
    let start = 1_000_000u64;
    // 2 tokens a second, 5 at most.
    let mut take = |now: u64, count: u32| -> (i64, i64) {
        script
            .key("bucket:api")
            .arg(2)
            .arg(5)
            .arg(now)
            .arg(count)
            .invoke(&mut connection)
            .expect("token bucket reply")
    };
    for left in (0..5).rev() {
        assert_eq!(take(start, 1), (1, left));
    }
    assert_eq!(take(start, 1), (0, 0));
    // A quarter second refills half a token: not enough.
    assert_eq!(take(start + 250, 1), (0, 0));
    let tokens: String = redis::cmd("HGET")
        .arg("bucket:api")
        .arg("tokens")
        .query(&mut connection)
        .unwrap();
    assert_eq!(tokens, "0.5");
    let mut take = |now: u64, count: u32| -> (i64, i64) {
        script
            .key("bucket:api")
            .arg(2)
            .arg(5)
            .arg(now)
            .arg(count)
            .invoke(&mut connection)
            .expect("token bucket reply")
    };
    assert_eq!(take(start + 500, 1), (1, 0));
    // Ten seconds later the bucket is full, not fuller.
    assert_eq!(take(start + 10_000, 3), (1, 2));
    assert_eq!(take(start + 10_000, 3), (0, 2));
    let state: Vec<String> = redis::cmd("HMGET")
        .arg("bucket:api")
        .arg("tokens")
        .arg("ts")
        .query(&mut connection)
        .unwrap();
    assert_eq!(state, ["2", "1010000"]);
    let ttl: i64 = redis::cmd("PTTL")
        .arg("bucket:api")
        .query(&mut connection)
        .unwrap();
    assert!(ttl > 0 && ttl <= 5000, "PTTL {ttl}");
}

#[test]
fn lock_release_deletes_only_with_the_owners_token() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    let acquire = |client: &mut Raw, token: &str, expected: &str| {
        client.roundtrip(
            &["EVAL", LOCK_ACQUIRE, "1", "lock:orders", token, "30000"],
            expected,
        );
    };
    acquire(&mut client, "token-a", "+OK\r\n");
    acquire(&mut client, "token-b", "$-1\r\n");
    let ttl = integer(request(&mut client, &["PTTL", "lock:orders"]));
    assert!(ttl > 29_000 && ttl <= 30_000, "PTTL {ttl}");
    let release = |client: &mut Raw, token: &str, expected: &str| {
        client.roundtrip(&["EVAL", LOCK_RELEASE, "1", "lock:orders", token], expected);
    };
    release(&mut client, "token-b", ":0\r\n");
    client.roundtrip(&["GET", "lock:orders"], "$7\r\ntoken-a\r\n");
    release(&mut client, "token-a", ":1\r\n");
    client.roundtrip(&["EXISTS", "lock:orders"], ":0\r\n");
    release(&mut client, "token-a", ":0\r\n");

    // Taken directly with SET NX PX, released through the redis crate.
    let mut connection = server.redis();
    let taken: Option<String> = redis::cmd("SET")
        .arg("lock:invoice")
        .arg("owner-1")
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query(&mut connection)
        .unwrap();
    assert_eq!(taken.as_deref(), Some("OK"));
    let again: Option<String> = redis::cmd("SET")
        .arg("lock:invoice")
        .arg("owner-2")
        .arg("NX")
        .arg("PX")
        .arg(30_000)
        .query(&mut connection)
        .unwrap();
    assert_eq!(again, None);
    let release = redis::Script::new(LOCK_RELEASE);
    let released: i64 = release
        .key("lock:invoice")
        .arg("owner-2")
        .invoke(&mut connection)
        .unwrap();
    assert_eq!(released, 0);
    let holder: String = redis::cmd("GET")
        .arg("lock:invoice")
        .query(&mut connection)
        .unwrap();
    assert_eq!(holder, "owner-1");
    let released: i64 = release
        .key("lock:invoice")
        .arg("owner-1")
        .invoke(&mut connection)
        .unwrap();
    assert_eq!(released, 1);
    let exists: i64 = redis::cmd("EXISTS")
        .arg("lock:invoice")
        .query(&mut connection)
        .unwrap();
    assert_eq!(exists, 0);
}

#[test]
fn script_cache_evalsha_and_the_redis_crate_script() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    let hello = "232fd51614574cf0867b83d384a5e898cfd24e5a";
    assert_eq!(sha("return 'hello moto'"), hello);
    let nosuch = format!("-{NOSCRIPT}\r\n");
    client.roundtrip(&["EVALSHA", hello, "0"], &nosuch);
    client.roundtrip(&["SCRIPT", "EXISTS", hello], "*1\r\n:0\r\n");
    client.roundtrip(
        &["SCRIPT", "LOAD", "return 'hello moto'"],
        &format!("$40\r\n{hello}\r\n"),
    );
    client.roundtrip(&["EVALSHA", hello, "0"], "$10\r\nhello moto\r\n");
    client.roundtrip(
        &["EVALSHA", &hello.to_uppercase(), "0"],
        "$10\r\nhello moto\r\n",
    );
    client.roundtrip(&["EVALSHA_RO", hello, "0"], "$10\r\nhello moto\r\n");
    client.roundtrip(
        &[
            "SCRIPT",
            "EXISTS",
            hello,
            "ffffffffffffffffffffffffffffffffffffffff",
        ],
        "*2\r\n:1\r\n:0\r\n",
    );
    client.roundtrip(&["EVALSHA", "abc", "0"], &nosuch);
    // EVAL caches its script too.
    client.roundtrip(&["EVAL", "return 'by eval'", "0"], "$7\r\nby eval\r\n");
    client.roundtrip(
        &["EVALSHA", &sha("return 'by eval'"), "0"],
        "$7\r\nby eval\r\n",
    );
    // A script that does not compile is refused and not cached.
    client.roundtrip(
        &["SCRIPT", "LOAD", "return ("],
        "-ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'\r\n",
    );
    client.roundtrip(&["SCRIPT", "EXISTS", &sha("return (")], "*1\r\n:0\r\n");
    client.roundtrip(
        &["SCRIPT", "FLUSH", "NOW"],
        "-ERR SCRIPT FLUSH only support SYNC|ASYNC option\r\n",
    );
    client.roundtrip(&["SCRIPT", "FLUSH"], "+OK\r\n");
    client.roundtrip(&["SCRIPT", "EXISTS", hello], "*1\r\n:0\r\n");
    client.roundtrip(&["EVALSHA", hello, "0"], &nosuch);
    client.roundtrip(&["SCRIPT", "FLUSH", "ASYNC"], "+OK\r\n");
    client.roundtrip(
        &["SCRIPT", "BOGUS"],
        "-ERR unknown subcommand 'BOGUS'. Try SCRIPT HELP.\r\n",
    );
    let Frame::Array(help) = request(&mut client, &["SCRIPT", "HELP"]) else {
        panic!("SCRIPT HELP is an array")
    };
    assert_eq!(
        help[0],
        Frame::simple("SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
    );

    // redis-cli, as an operator would load and call a script.
    let printed = redis_cli(
        server.port,
        &format!("SCRIPT LOAD \"return 'hello moto'\"\nEVALSHA {hello} 0\n"),
    );
    assert_eq!(printed, format!("{hello}\nhello moto\n"));

    // The redis crate's Script: EVALSHA, and on NOSCRIPT SCRIPT LOAD then
    // EVALSHA again.
    let mut connection = server.redis();
    let script = redis::Script::new("return redis.call('INCRBY', KEYS[1], ARGV[1])");
    let exists = |connection: &mut redis::Connection| -> Vec<i64> {
        redis::cmd("SCRIPT")
            .arg("EXISTS")
            .arg(script.get_hash())
            .query(connection)
            .unwrap()
    };
    assert_eq!(exists(&mut connection), [0]);
    let value: i64 = script.key("visits").arg(5).invoke(&mut connection).unwrap();
    assert_eq!(value, 5);
    assert_eq!(exists(&mut connection), [1]);
    let _: () = redis::cmd("SCRIPT")
        .arg("FLUSH")
        .query(&mut connection)
        .unwrap();
    let value: i64 = script.key("visits").arg(2).invoke(&mut connection).unwrap();
    assert_eq!(value, 7);
    assert_eq!(exists(&mut connection), [1]);
    let loaded = script.load(&mut connection).unwrap();
    assert_eq!(loaded, script.get_hash());
}

#[test]
fn errors_raised_by_redis_call_and_returned_by_redis_pcall() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["SET", "text", "hello"], "+OK\r\n");
    client.roundtrip(&["RPUSH", "list", "x"], ":1\r\n");

    // redis.call raises: the command's error, then where the script was.
    let incr = "local before = redis.call('GET', KEYS[1])\nreturn redis.call('INCR', KEYS[1])";
    client.roundtrip(
        &["EVAL", incr, "1", "text"],
        &raised("ERR value is not an integer or out of range", incr, 2),
    );
    let get = "return redis.call('GET', KEYS[1])";
    client.roundtrip(
        &["EVAL", get, "1", "list"],
        &raised(
            "WRONGTYPE Operation against a key holding the wrong kind of value",
            get,
            1,
        ),
    );
    let unknown = "return redis.call('NOSUCH')";
    client.roundtrip(
        &["EVAL", unknown, "0"],
        &raised("ERR Unknown Redis command called from script", unknown, 1),
    );
    let arity = "\n\nreturn redis.call('GET')";
    client.roundtrip(
        &["EVAL", arity, "0"],
        &raised(
            "ERR Wrong number of args calling Redis command from script",
            arity,
            3,
        ),
    );
    let boom = "error('boom')";
    client.roundtrip(
        &["EVAL", boom, "0"],
        &raised("ERR user_script:1: boom", boom, 1),
    );
    let coded = "error({err='MYCODE custom failure'})";
    client.roundtrip(
        &["EVAL", coded, "0"],
        &raised("MYCODE custom failure", coded, 1),
    );
    let read_only = "return redis.call('SET', KEYS[1], 'v')";
    client.roundtrip(
        &["EVAL_RO", read_only, "1", "k"],
        &raised(
            "ERR Write commands are not allowed from read-only scripts.",
            read_only,
            1,
        ),
    );
    client.roundtrip(
        &["EVAL", "return redis.pcall('BLPOP', 'list', 0)", "0"],
        "-ERR This Redis command is not allowed from script\r\n",
    );

    // redis.pcall returns the error as a table the script can look at.
    client.roundtrip(
        &[
            "EVAL",
            "local reply = redis.pcall('INCR', KEYS[1]) return {type(reply), reply.err}",
            "1",
            "text",
        ],
        "*2\r\n$5\r\ntable\r\n$43\r\nERR value is not an integer or out of range\r\n",
    );
    client.roundtrip(
        &["EVAL", "return redis.pcall('INCR', KEYS[1])", "1", "text"],
        "-ERR value is not an integer or out of range\r\n",
    );
    // Lua's pcall catches what redis.call raised, as its err text.
    client.roundtrip(
        &[
            "EVAL",
            "local ok, err = pcall(redis.call, 'GET', KEYS[1]) return {tostring(ok), err}",
            "1",
            "list",
        ],
        "*2\r\n$5\r\nfalse\r\n$65\r\nWRONGTYPE Operation against a key holding the wrong kind of value\r\n",
    );
    // The script goes on after a failed pcall: its writes before and after stay.
    client.roundtrip(
        &[
            "EVAL",
            "redis.call('SET', 'before', 1) redis.pcall('INCR', 'text') redis.call('SET', 'after', 2) return 'done'",
            "0",
        ],
        "$4\r\ndone\r\n",
    );
    client.roundtrip(&["MGET", "before", "after"], "*2\r\n$1\r\n1\r\n$1\r\n2\r\n");

    // Replies built with the helpers.
    client.roundtrip(
        &["EVAL", "return redis.error_reply('MY_CODE custom')", "0"],
        "-MY_CODE custom\r\n",
    );
    // As in Redis, the first word is the code; a lone word gets ERR.
    client.roundtrip(
        &["EVAL", "return redis.error_reply('oops')", "0"],
        "-ERR oops\r\n",
    );
    client.roundtrip(
        &["EVAL", "return redis.status_reply('FINE')", "0"],
        "+FINE\r\n",
    );
    client.roundtrip(&["EVAL", "return {err='raw table'}", "0"], "-raw table\r\n");
    client.roundtrip(
        &["EVAL", "return {ok='raw status'}", "0"],
        "+raw status\r\n",
    );

    // Key count errors.
    client.roundtrip(
        &["EVAL", "return 1", "x"],
        "-ERR value is not an integer or out of range\r\n",
    );
    client.roundtrip(
        &["EVAL", "return 1", "-1"],
        "-ERR Number of keys can't be negative\r\n",
    );
    client.roundtrip(
        &["EVAL", "return 1", "2", "a"],
        "-ERR Number of keys can't be greater than number of args\r\n",
    );
}

#[test]
fn errors_of_the_redis_api_functions_are_error_tables() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    // As in Redis, these raise an error table (`ERR <message>`), not a Lua
    // error string with a position of its own.
    for (script, message) in [
        ("redis.setresp(4)", "ERR RESP version must be 2 or 3."),
        (
            "redis.setresp()",
            "ERR redis.setresp() requires one argument.",
        ),
        ("return redis.sha1hex()", "ERR wrong number of arguments"),
        (
            "redis.log()",
            "ERR redis.log() requires two arguments or more.",
        ),
        (
            "redis.log('x', 'y')",
            "ERR First argument must be a number (log level).",
        ),
        ("redis.log(9, 'y')", "ERR Invalid debug level."),
        (
            "redis.set_repl(9)",
            "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
        ),
        (
            "return redis.acl_check_cmd('nosuch')",
            "ERR Invalid command passed to redis.acl_check_cmd()",
        ),
    ] {
        client.roundtrip(&["EVAL", script, "0"], &raised(message, script, 1));
    }
    client.roundtrip(
        &[
            "EVAL",
            "local ok, err = pcall(redis.setresp, 4) return err",
            "0",
        ],
        "$32\r\nERR RESP version must be 2 or 3.\r\n",
    );
    // Errors of Lua's own C functions carry the position, as Lua gives it.
    let rep = "return string.rep()";
    client.roundtrip(
        &["EVAL", rep, "0"],
        &raised(
            "ERR user_script:1: bad argument #1 to 'rep' (string expected, got no value)",
            rep,
            1,
        ),
    );
}

#[test]
fn library_errors_in_tail_position_keep_the_script_position() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    // `return lib.f(...)` is a tail call; Redis's libraries are C functions,
    // so the error still names the script's line, as it does without the
    // tail call.
    let cases = [
        (
            "local value = cjson.decode('{bad') return value",
            "ERR user_script:1: Expected object key string but found invalid token at character 2",
        ),
        (
            "return cjson.decode('{bad')",
            "ERR user_script:1: Expected object key string but found invalid token at character 2",
        ),
        (
            "return struct.pack('>q')",
            "ERR user_script:1: bad argument #1 to 'pack' (invalid format option 'q')",
        ),
        (
            "return bit.band({})",
            "ERR user_script:1: bad argument #1 to 'band' (number expected, got table)",
        ),
    ];
    for (script, message) in cases {
        let expected = raised(message, script, 1);
        let expected = Frame::error_owned(expected[1..expected.len() - 2].to_string());
        assert_eq!(
            request(&mut client, &["EVAL", script, "0"]),
            expected,
            "{script}"
        );
    }
}

#[test]
fn lua_values_become_replies_and_replies_become_lua_values() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    // Lua to reply (RESP2 client).
    for (script, expected) in [
        ("return 42", ":42\r\n"),
        ("return 3.99", ":3\r\n"),
        ("return -3.99", ":-3\r\n"),
        ("return {10 / 4, -7 / 2, 1e3}", "*3\r\n:2\r\n:-3\r\n:1000\r\n"),
        ("return 'text'", "$4\r\ntext\r\n"),
        ("return true", ":1\r\n"),
        ("return false", "$-1\r\n"),
        ("return nil", "$-1\r\n"),
        ("return {1, 2, 3, nil, 4}", "*3\r\n:1\r\n:2\r\n:3\r\n"),
        (
            "return {1, 'two', {3, 'four', {}}, 5.5, true, false, 'kept'}",
            "*7\r\n:1\r\n$3\r\ntwo\r\n*3\r\n:3\r\n$4\r\nfour\r\n*0\r\n:5\r\n:1\r\n$-1\r\n$4\r\nkept\r\n",
        ),
        ("return {ok='status'}", "+status\r\n"),
        ("return {1, {err='inner'}}", "*2\r\n:1\r\n-inner\r\n"),
        ("return {double=1.5}", "$3\r\n1.5\r\n"),
        ("return {map={only=1}}", "*2\r\n$4\r\nonly\r\n:1\r\n"),
        ("return KEYS", "*2\r\n$1\r\na\r\n$1\r\nb\r\n"),
        ("return #ARGV", ":3\r\n"),
    ] {
        client.roundtrip(&["EVAL", script, "2", "a", "b", "x", "y", "z"], expected);
    }
    // Replies to Lua (RESP2 inside the script).
    client.roundtrip(&["HSET", "h", "f", "v"], ":1\r\n");
    client.roundtrip(&["ZADD", "z", "1.5", "m"], ":1\r\n");
    let types = r#"
        redis.call('SET', 'k', 'v')
        return {
          type(redis.call('INCR', 'n')),
          type(redis.call('GET', 'k')),
          tostring(redis.call('GET', 'missing')),
          redis.call('SET', 'k', 'w').ok,
          redis.call('PING').ok,
          type(redis.call('LRANGE', 'nolist', 0, -1)),
          #redis.call('HGETALL', 'h'),
          redis.call('ZSCORE', 'z', 'm'),
          redis.pcall('INCR', 'k').err
        }"#;
    client.roundtrip(
        &["EVAL", types, "0"],
        concat!(
            "*9\r\n$6\r\nnumber\r\n$6\r\nstring\r\n$5\r\nfalse\r\n$2\r\nOK\r\n$4\r\nPONG\r\n",
            "$5\r\ntable\r\n:2\r\n$3\r\n1.5\r\n",
            "$43\r\nERR value is not an integer or out of range\r\n"
        ),
    );
    // Numbers reach commands as Redis formats them (%.17g), integers exactly.
    client.roundtrip(
        &[
            "EVAL",
            "redis.call('SET', 'a', 0.1) redis.call('SET', 'b', 5) redis.call('SET', 'c', 1e20) return redis.call('MGET', 'a', 'b', 'c')",
            "0",
        ],
        "*3\r\n$19\r\n0.10000000000000001\r\n$1\r\n5\r\n$5\r\n1e+20\r\n",
    );
    // A script choosing RESP3 on a RESP2 connection: the reply is still RESP2.
    client.roundtrip(
        &[
            "EVAL",
            "redis.setresp(3) return redis.call('HGETALL', 'h')",
            "0",
        ],
        "*2\r\n$1\r\nf\r\n$1\r\nv\r\n",
    );
    client.roundtrip(
        &["EVAL", "redis.setresp(3) return {true, false, nil, 1}", "0"],
        "*2\r\n:1\r\n:0\r\n",
    );
}

#[test]
fn resp3_clients_get_maps_booleans_and_doubles() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.command(&[b"HELLO", b"3"]);
    let _ = client.read_frame();
    client.roundtrip(&["HSET", "h", "f", "v"], ":1\r\n");
    client.roundtrip(&["ZADD", "z", "1.5", "m"], ":1\r\n");
    for (script, expected) in [
        // Without redis.setresp(3), Lua booleans are RESP2's 1 and nil.
        ("return {true, false}", "*2\r\n:1\r\n_\r\n"),
        ("return nil", "_\r\n"),
        ("redis.setresp(3) return {true, false}", "*2\r\n#t\r\n#f\r\n"),
        ("redis.setresp(3) return true", "#t\r\n"),
        ("return {double=1.5}", ",1.5\r\n"),
        ("return {map={only=1}}", "%1\r\n$4\r\nonly\r\n:1\r\n"),
        ("return {set={member=true}}", "~1\r\n$6\r\nmember\r\n"),
        (
            "return {big_number='123456789012345678901234567890'}",
            "(123456789012345678901234567890\r\n",
        ),
        (
            "return {verbatim_string={format='txt', string='hi'}}",
            "=6\r\ntxt:hi\r\n",
        ),
        // Replies of commands called with RESP3 chosen.
        (
            "redis.setresp(3) return redis.call('HGETALL', 'h')",
            "%1\r\n$1\r\nf\r\n$1\r\nv\r\n",
        ),
        (
            "redis.setresp(3) return redis.call('HGETALL', 'h').map.f",
            "$1\r\nv\r\n",
        ),
        ("redis.setresp(3) return redis.call('ZSCORE', 'z', 'm')", ",1.5\r\n"),
        (
            "redis.setresp(3) local score = redis.call('ZSCORE', 'z', 'm') return {type(score), score.double * 2}",
            "*2\r\n$5\r\ntable\r\n:3\r\n",
        ),
        (
            "redis.setresp(3) return redis.call('GET', 'missing') == nil",
            "#t\r\n",
        ),
        // RESP2 inside the script (the default): a missing value is false.
        ("return redis.call('GET', 'missing') == false", ":1\r\n"),
        ("return redis.call('ZSCORE', 'z', 'm')", "$3\r\n1.5\r\n"),
        ("return redis.call('HGETALL', 'h')", "*2\r\n$1\r\nf\r\n$1\r\nv\r\n"),
    ] {
        client.roundtrip(&["EVAL", script, "0"], expected);
    }
    // The connection is still RESP3 after scripts chose either protocol.
    client.roundtrip(&["HGETALL", "h"], "%1\r\n$1\r\nf\r\n$1\r\nv\r\n");
    client.roundtrip(&["GET", "missing"], "_\r\n");
}

#[test]
fn the_instruction_budget_stops_runaway_scripts() {
    let server = Server::start(&["--lua-instruction-limit", "20000000"]);
    let mut client = server.connect();
    client.roundtrip(
        &["CONFIG", "GET", "lua-instruction-limit"],
        "*2\r\n$21\r\nlua-instruction-limit\r\n$8\r\n20000000\r\n",
    );
    client.roundtrip(
        &["CONFIG", "SET", "lua-instruction-limit", "5000"],
        "-ERR CONFIG SET failed (possibly related to argument 'lua-instruction-limit') - can't set immutable config\r\n",
    );
    let spin = "while true do end";
    client.roundtrip(&["EVAL", spin, "0"], &raised(BUDGET, spin, 1));
    // The script's own pcall does not swallow the stop.
    let caught = "local ok = pcall(function() while true do end end)\nreturn 'escaped'";
    client.roundtrip(&["EVAL", caught, "0"], &raised(BUDGET, caught, 1));
    // Writes made before the stop stay.
    let wrote = "redis.call('SET', KEYS[1], 'written')\nwhile true do end";
    client.roundtrip(&["EVAL", wrote, "1", "w"], &raised(BUDGET, wrote, 2));
    client.roundtrip(&["GET", "w"], "$7\r\nwritten\r\n");
    // Functions have the same budget, and so has a library's loading.
    client.roundtrip(
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=loop\nlocal function spin(keys, args)\n  while true do end\nend\nredis.register_function{function_name='spin', callback=spin, flags={'no-writes'}}",
        ],
        "$4\r\nloop\r\n",
    );
    client.roundtrip(
        &["FCALL_RO", "spin", "0"],
        &format!("-{BUDGET} script: spin, on @user_function:3.\r\n"),
    );
    client.roundtrip(
        &["FUNCTION", "LOAD", "#!lua name=stuck\nwhile true do end"],
        &format!("-ERR Error registering functions: {}\r\n", &BUDGET[4..]),
    );
    // The next script runs normally.
    client.roundtrip(
        &[
            "EVAL",
            "local n = 0 for i = 1, 100000 do n = n + i end return n",
            "0",
        ],
        ":5000050000\r\n",
    );
}

#[test]
fn a_busy_script_answers_busy_until_script_kill() {
    let server = Server::start(&[]);
    let mut admin = server.connect();
    let nothing = format!("-{NOTBUSY}\r\n");
    admin.roundtrip(&["SCRIPT", "KILL"], &nothing);
    admin.roundtrip(&["FUNCTION", "KILL"], &nothing);
    admin.roundtrip(&["CONFIG", "SET", "busy-reply-threshold", "100"], "+OK\r\n");
    admin.roundtrip(&["SET", "x", "before"], "+OK\r\n");

    // A client sending requests all along, some of them as the script starts:
    // one that finds the keyspace taken waits for it off the runtime's
    // workers, so the node goes on serving everyone else.
    let stop = Arc::new(AtomicBool::new(false));
    let racer = {
        let stop = stop.clone();
        let port = server.port;
        std::thread::spawn(move || {
            let mut racer = Raw::connect(port);
            while !stop.load(Ordering::Relaxed) {
                match request(&mut racer, &["GET", "x"]) {
                    Frame::Bulk(value) if value == "before".as_bytes() => {}
                    Frame::Error(text) if text == BUSY.as_bytes() => {}
                    other => panic!("GET around a script answered {other:?}"),
                }
            }
        })
    };
    let spin = "while true do end";
    let mut runner = server.connect();
    runner.command(&[b"EVAL_RO", spin.as_bytes(), b"0"]);
    // Pipelined behind the script on its own connection.
    runner.command(&[b"GET", b"x"]);
    let mut other = server.connect();
    wait_busy(&mut other, BUSY);
    let busy = format!("-{BUSY}\r\n");
    other.roundtrip(&["PING"], &busy);
    other.roundtrip(&["GET", "x"], &busy);
    other.roundtrip(&["SET", "x", "during"], &busy);
    // FUNCTION KILL does not kill a script run by EVAL.
    admin.roundtrip(&["FUNCTION", "KILL"], &busy);
    admin.roundtrip(&["SCRIPT", "KILL"], "+OK\r\n");
    runner.expect(raised(KILLED, spin, 1).as_bytes());
    runner.expect(b"$6\r\nbefore\r\n");
    stop.store(true, Ordering::Relaxed);
    racer.join().expect("racer");
    other.roundtrip(&["PING"], "+PONG\r\n");
    other.roundtrip(&["GET", "x"], "$6\r\nbefore\r\n");
    admin.roundtrip(&["SCRIPT", "KILL"], &nothing);
    // The engine is usable after the kill.
    runner.roundtrip(&["EVAL", "return 'next'", "0"], "$4\r\nnext\r\n");
}

#[test]
fn function_kill_stops_a_busy_read_only_function() {
    let server = Server::start(&[]);
    let mut admin = server.connect();
    admin.roundtrip(&["CONFIG", "SET", "busy-reply-threshold", "100"], "+OK\r\n");
    admin.roundtrip(
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=spinlib\nredis.register_function{function_name='spin', callback=function() while true do end end, flags={'no-writes'}}",
        ],
        "$7\r\nspinlib\r\n",
    );
    let mut runner = server.connect();
    runner.command(&[b"FCALL_RO", b"spin", b"0"]);
    let mut other = server.connect();
    wait_busy(&mut other, BUSY_FUNCTION);
    let busy = format!("-{BUSY_FUNCTION}\r\n");
    other.roundtrip(&["GET", "x"], &busy);
    // FUNCTION STATS shows the running function while it is busy.
    other.command(&[b"FUNCTION", b"STATS"]);
    let Frame::Array(stats) = other.read_frame() else {
        panic!("FUNCTION STATS is a map (a flat array in RESP2)");
    };
    assert_eq!(stats[0], Frame::bulk("running_script"));
    let Frame::Array(running) = &stats[1] else {
        panic!("a running function: {:?}", stats[1]);
    };
    assert_eq!(running[0..2], [Frame::bulk("name"), Frame::bulk("spin")]);
    assert_eq!(
        running[2..4],
        [
            Frame::bulk("command"),
            Frame::Array(vec![
                Frame::bulk("FCALL_RO"),
                Frame::bulk("spin"),
                Frame::bulk("0")
            ])
        ]
    );
    assert_eq!(running[4], Frame::bulk("duration_ms"));
    let Frame::Integer(duration) = running[5] else {
        panic!("a duration: {:?}", running[5]);
    };
    assert!(duration >= 100, "busy after 100 ms, yet ran {duration} ms");
    assert_eq!(
        stats[2..4],
        [
            Frame::bulk("engines"),
            Frame::Array(vec![
                Frame::bulk("LUA"),
                Frame::Array(vec![
                    Frame::bulk("libraries_count"),
                    Frame::Integer(1),
                    Frame::bulk("functions_count"),
                    Frame::Integer(1)
                ])
            ])
        ]
    );
    // SCRIPT KILL does not kill a function.
    admin.roundtrip(&["SCRIPT", "KILL"], &busy);
    admin.roundtrip(&["FUNCTION", "KILL"], "+OK\r\n");
    runner.expect(format!("-{KILLED} script: spin, on @user_function:2.\r\n").as_bytes());
    other.roundtrip(&["PING"], "+PONG\r\n");
    admin.roundtrip(&["FUNCTION", "KILL"], &format!("-{NOTBUSY}\r\n"));
}

#[test]
fn a_script_that_wrote_is_unkillable_and_ends_at_its_budget() {
    // About a second of `while true do end` in a debug build.
    let server = Server::start(&["--lua-instruction-limit", "500000000"]);
    let mut admin = server.connect();
    let wrote = "redis.call('SET', 'x', '1') while true do end";

    // Under busy-reply-threshold other clients just wait for the script: once
    // a GET sees its write, that GET has waited for the whole run.
    let mut runner = server.connect();
    runner.command(&[b"EVAL", wrote.as_bytes(), b"0"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match request(&mut admin, &["GET", "x"]) {
            Frame::Null => {} // the script has not started yet
            Frame::Bulk(value) if value == "1".as_bytes() => break,
            other => panic!("GET while a script runs answered {other:?}"),
        }
        assert!(Instant::now() < deadline, "the script never ran");
        std::thread::sleep(Duration::from_millis(5));
    }
    runner.expect(raised(BUDGET, wrote, 1).as_bytes());

    admin.roundtrip(&["CONFIG", "SET", "busy-reply-threshold", "100"], "+OK\r\n");
    runner.command(&[b"EVAL", wrote.as_bytes(), b"0"]);
    let mut other = server.connect();
    wait_busy(&mut other, BUSY);
    admin.roundtrip(&["SCRIPT", "KILL"], &format!("-{UNKILLABLE}\r\n"));
    other.roundtrip(&["GET", "x"], &format!("-{BUSY}\r\n"));
    // The budget ends it; its write stays.
    runner.expect(raised(BUDGET, wrote, 1).as_bytes());
    other.roundtrip(&["GET", "x"], "$1\r\n1\r\n");
    admin.roundtrip(&["SCRIPT", "KILL"], &format!("-{NOTBUSY}\r\n"));
}

#[test]
fn functions_load_call_list_dump_restore_delete() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["FUNCTION", "LOAD", LIBRARY], "$7\r\nratelib\r\n");
    client.roundtrip(&["FCALL", "hit", "1", "counter", "5"], ":5\r\n");
    client.roundtrip(&["FCALL", "HIT", "1", "counter", "2"], ":7\r\n");
    client.roundtrip(&["FCALL_RO", "peek", "1", "counter"], "$1\r\n7\r\n");
    client.roundtrip(&["FCALL", "peek", "1", "counter"], "$1\r\n7\r\n");
    client.roundtrip(
        &["FCALL_RO", "hit", "1", "counter", "1"],
        "-ERR Can not execute a script with write flag using *_ro command.\r\n",
    );
    client.roundtrip(&["FCALL", "nosuch", "0"], "-ERR Function not found\r\n");
    client.roundtrip(
        &["FCALL", "hit", "1", "counter", "many"],
        "-ERR value is not an integer or out of range script: hit, on @user_function:3.\r\n",
    );
    client.roundtrip(
        &["FUNCTION", "LOAD", LIBRARY],
        "-ERR Library 'ratelib' already exists\r\n",
    );
    client.roundtrip(
        &["FUNCTION", "LOAD", "REPLACE", LIBRARY],
        "$7\r\nratelib\r\n",
    );
    client.roundtrip(
        &[
            "FUNCTION",
            "LOAD",
            "#!lua name=other\nredis.register_function('peek', function() return 1 end)",
        ],
        "-ERR Function peek already exists\r\n",
    );
    client.roundtrip(
        &["FUNCTION", "LOAD", "return 1"],
        "-ERR Missing library metadata\r\n",
    );

    let functions = concat!(
        "$9\r\nfunctions\r\n*2\r\n",
        "*6\r\n$4\r\nname\r\n$3\r\nhit\r\n$11\r\ndescription\r\n$-1\r\n$5\r\nflags\r\n*0\r\n",
        "*6\r\n$4\r\nname\r\n$4\r\npeek\r\n$11\r\ndescription\r\n$17\r\nreads the counter\r\n",
        "$5\r\nflags\r\n*1\r\n+no-writes\r\n",
    );
    let header = "$12\r\nlibrary_name\r\n$7\r\nratelib\r\n$6\r\nengine\r\n$3\r\nLUA\r\n";
    let list = format!("*1\r\n*6\r\n{header}{functions}");
    client.roundtrip(&["FUNCTION", "LIST"], &list);
    let with_code = format!(
        "*1\r\n*8\r\n{header}{functions}$12\r\nlibrary_code\r\n${}\r\n{LIBRARY}\r\n",
        LIBRARY.len()
    );
    client.roundtrip(
        &["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "rate*"],
        &with_code,
    );
    client.roundtrip(&["FUNCTION", "LIST", "LIBRARYNAME", "zz*"], "*0\r\n");
    client.roundtrip(
        &["FUNCTION", "STATS"],
        concat!(
            "*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n",
            "*4\r\n$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:2\r\n"
        ),
    );

    // DUMP, FLUSH, RESTORE.
    client.command(&[b"FUNCTION", b"DUMP"]);
    let Frame::Bulk(payload) = client.read_frame() else {
        panic!("FUNCTION DUMP is a bulk string")
    };
    client.roundtrip(&["FUNCTION", "FLUSH"], "+OK\r\n");
    client.roundtrip(&["FUNCTION", "LIST"], "*0\r\n");
    client.roundtrip(
        &["FCALL", "hit", "1", "counter", "1"],
        "-ERR Function not found\r\n",
    );
    client.command(&[b"FUNCTION", b"RESTORE", &payload]);
    client.expect(b"+OK\r\n");
    client.roundtrip(&["FUNCTION", "LIST", "WITHCODE"], &with_code);
    client.roundtrip(&["FCALL", "hit", "1", "counter", "1"], ":8\r\n");
    client.command(&[b"FUNCTION", b"RESTORE", &payload]);
    client.expect(b"-ERR Library ratelib already exists\r\n");
    client.command(&[b"FUNCTION", b"RESTORE", &payload, b"REPLACE"]);
    client.expect(b"+OK\r\n");
    let mut corrupt = payload.to_vec();
    corrupt[5] ^= 1;
    client.command(&[b"FUNCTION", b"RESTORE", &corrupt]);
    client.expect(b"-ERR DUMP payload version or checksum are wrong\r\n");

    // DELETE.
    client.roundtrip(&["FUNCTION", "DELETE", "ratelib"], "+OK\r\n");
    client.roundtrip(
        &["FUNCTION", "DELETE", "ratelib"],
        "-ERR Library not found\r\n",
    );
    client.roundtrip(
        &["FCALL_RO", "peek", "1", "counter"],
        "-ERR Function not found\r\n",
    );
    client.roundtrip(&["FUNCTION", "LIST"], "*0\r\n");

    // A payload Redis 7.0 dumped (compressed, an older RDB version) restores.
    client.command(&[b"FUNCTION", b"RESTORE", &hex(REDIS_7_0_DUMP)]);
    client.expect(b"+OK\r\n");
    client.roundtrip(&["FUNCTION", "LIST", "WITHCODE"], &with_code);
    client.roundtrip(&["FCALL_RO", "peek", "1", "counter"], "$1\r\n8\r\n");
    client.roundtrip(&["FUNCTION", "FLUSH", "ASYNC"], "+OK\r\n");
    client.roundtrip(
        &["FUNCTION", "FLUSH", "NOW"],
        "-ERR FUNCTION FLUSH only supports SYNC|ASYNC option\r\n",
    );
}

#[test]
fn pushes_from_a_script_wake_blocked_clients_after_it() {
    let server = Server::start(&[]);
    let mut waiter = server.connect();
    waiter.command(&[b"BLPOP", b"jobs", b"0"]);
    let mut probe = server.connect();
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let Frame::Bulk(info) = request(&mut probe, &["INFO", "clients"]) else {
            panic!("INFO is a bulk string")
        };
        if String::from_utf8_lossy(&info).contains("blocked_clients:1\r\n") {
            break;
        }
        assert!(Instant::now() < deadline, "the waiter never blocked");
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut client = server.connect();
    // Pushed and popped in one script: nothing is left for the waiter.
    client.roundtrip(
        &[
            "EVAL",
            "redis.call('RPUSH', KEYS[1], 'gone') return redis.call('LPOP', KEYS[1])",
            "1",
            "jobs",
        ],
        "$4\r\ngone\r\n",
    );
    client.roundtrip(
        &[
            "EVAL",
            "return redis.call('RPUSH', KEYS[1], 'a', 'b')",
            "1",
            "jobs",
        ],
        ":2\r\n",
    );
    waiter.expect(b"*2\r\n$4\r\njobs\r\n$1\r\na\r\n");
    client.roundtrip(&["LRANGE", "jobs", "0", "-1"], "*1\r\n$1\r\nb\r\n");
}

/// SCRIPT DEBUG: NO answers as Redis does, anything but YES/SYNC/NO gets
/// Redis's usage error, inside EXEC Redis's refusal; YES and SYNC, the Lua
/// debugger, are refused with a text that says so.
#[test]
fn script_debug_no_is_accepted_and_the_debugger_refused() {
    let server = Server::start(&[]);
    let mut client = server.connect();
    client.roundtrip(&["SCRIPT", "DEBUG", "no"], "+OK\r\n");
    client.roundtrip(
        &["SCRIPT", "DEBUG", "maybe"],
        "-ERR Use SCRIPT DEBUG YES/SYNC/NO\r\n",
    );
    for mode in ["YES", "sync"] {
        client.roundtrip(
            &["SCRIPT", "DEBUG", mode],
            "-ERR SCRIPT DEBUG YES and SYNC are not supported: slotraft has no Lua debugger\r\n",
        );
    }
    client.roundtrip(
        &["SCRIPT", "DEBUG"],
        "-ERR wrong number of arguments for 'script|debug' command\r\n",
    );
    client.roundtrip(&["MULTI"], "+OK\r\n");
    client.roundtrip(&["SCRIPT", "DEBUG", "NO"], "+QUEUED\r\n");
    client.roundtrip(
        &["EXEC"],
        "*1\r\n-ERR SCRIPT DEBUG must be called outside a pipeline\r\n",
    );
    // Scripts may not call it.
    client.roundtrip(
        &[
            "EVAL",
            "return redis.pcall('script', 'debug', 'no')['err']",
            "0",
        ],
        "$49\r\nERR This Redis command is not allowed from script\r\n",
    );
}
