//! The engine against a real keyspace: replies, errors, conversions, the
//! sandbox, the budget and replicated-state rules.

use bytes::Bytes;
use keyspace::{commands, Context, Keyspace, ScriptActivity};
use resp::{Frame, Protocol};

struct Harness {
    keyspace: Keyspace,
    context: Context,
}

impl Harness {
    fn new() -> Harness {
        let mut keyspace = Keyspace::new(16, 7);
        keyspace.config.scripting = Some(crate::setup(ScriptActivity::new()));
        Harness {
            keyspace,
            context: Context::new(1_700_000_000_123, 42),
        }
    }

    fn run(&mut self, words: &[&str]) -> Frame {
        let arguments: Vec<Bytes> = words
            .iter()
            .map(|word| Bytes::copy_from_slice(word.as_bytes()))
            .collect();
        match commands::resolve(&arguments) {
            Ok(spec) => self.keyspace.execute(spec, &mut self.context, &arguments),
            Err(error) => error,
        }
    }

    fn eval(&mut self, script: &str, keys: &[&str], args: &[&str]) -> Frame {
        let count = keys.len().to_string();
        let mut words = vec!["EVAL", script, &count];
        words.extend_from_slice(keys);
        words.extend_from_slice(args);
        self.run(&words)
    }
}

fn bulk(text: &str) -> Frame {
    Frame::bulk(text.to_string())
}

fn error_text(frame: &Frame) -> String {
    match frame {
        Frame::Error(text) => String::from_utf8_lossy(text).into_owned(),
        other => panic!("expected an error, got {other:?}"),
    }
}

const SLIDING_WINDOW: &str = r#"
local key = KEYS[1]
local now = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit = tonumber(ARGV[3])
redis.call('ZREMRANGEBYSCORE', key, 0, now - window)
local count = redis.call('ZCARD', key)
if count < limit then
  redis.call('ZADD', key, now, ARGV[4])
  redis.call('PEXPIRE', key, window)
  return 1
end
return 0
"#;

#[test]
fn conversions_lua_to_reply() {
    let mut h = Harness::new();
    assert_eq!(h.eval("return 1", &[], &[]), Frame::Integer(1));
    assert_eq!(h.eval("return 3.99", &[], &[]), Frame::Integer(3));
    assert_eq!(h.eval("return -3.7", &[], &[]), Frame::Integer(-3));
    // Out of range, as Redis's cast gives it on x86-64.
    assert_eq!(h.eval("return 2^63", &[], &[]), Frame::Integer(i64::MIN));
    assert_eq!(h.eval("return -2^63", &[], &[]), Frame::Integer(i64::MIN));
    assert_eq!(h.eval("return 2^62", &[], &[]), Frame::Integer(1 << 62));
    assert_eq!(h.eval("return 1/0", &[], &[]), Frame::Integer(i64::MIN));
    assert_eq!(h.eval("return 0/0", &[], &[]), Frame::Integer(i64::MIN));
    assert_eq!(h.eval("return 'x'", &[], &[]), bulk("x"));
    assert_eq!(h.eval("return true", &[], &[]), Frame::Integer(1));
    assert_eq!(h.eval("return false", &[], &[]), Frame::Null);
    assert_eq!(h.eval("return nil", &[], &[]), Frame::Null);
    assert_eq!(
        h.eval("return {1, 'a', {2}, nil, 5}", &[], &[]),
        Frame::Array(vec![
            Frame::Integer(1),
            bulk("a"),
            Frame::Array(vec![Frame::Integer(2)])
        ])
    );
    assert_eq!(
        h.eval("return {ok='fine'}", &[], &[]),
        Frame::simple("fine")
    );
    assert_eq!(
        h.eval("return {err='boom'}", &[], &[]),
        Frame::error("boom")
    );
    assert_eq!(
        h.eval("return redis.status_reply('GOOD')", &[], &[]),
        Frame::simple("GOOD")
    );
    assert_eq!(
        h.eval("return redis.error_reply('MY_CODE custom')", &[], &[]),
        Frame::error("MY_CODE custom")
    );
    assert_eq!(
        h.eval("return redis.error_reply('oops')", &[], &[]),
        Frame::error("ERR oops")
    );
    assert_eq!(h.eval("return {double=1.5}", &[], &[]), Frame::Double(1.5));
    assert_eq!(
        h.eval("return {map={a=1}}", &[], &[]),
        Frame::Map(vec![(bulk("a"), Frame::Integer(1))])
    );
    assert_eq!(
        h.eval("redis.setresp(3) return {true, false}", &[], &[]),
        Frame::Array(vec![Frame::Boolean(true), Frame::Boolean(false)])
    );
    assert_eq!(
        h.eval("return {1, {err='inner'}}", &[], &[]),
        Frame::Array(vec![Frame::Integer(1), Frame::error("inner")])
    );
    assert_eq!(
        error_text(&h.eval("local t = {} t[1] = t return t", &[], &[])),
        "ERR reached lua stack limit"
    );
}

#[test]
fn conversions_reply_to_lua() {
    let mut h = Harness::new();
    h.run(&["SET", "s", "v"]);
    h.run(&["RPUSH", "l", "a", "b"]);
    assert_eq!(
        h.eval("return redis.call('GET', 'missing') == false", &[], &[]),
        Frame::Integer(1)
    );
    assert_eq!(
        h.eval("return redis.call('SET', 'k', 'v').ok", &[], &[]),
        bulk("OK")
    );
    assert_eq!(
        h.eval("return type(redis.call('INCR', 'n'))", &[], &[]),
        bulk("number")
    );
    assert_eq!(
        h.eval("return redis.call('LRANGE', 'l', 0, -1)", &[], &[]),
        Frame::Array(vec![bulk("a"), bulk("b")])
    );
    assert_eq!(
        h.eval("return redis.pcall('INCR', 's').err", &[], &[]),
        bulk("ERR value is not an integer or out of range")
    );
    assert_eq!(
        h.eval(
            "redis.setresp(3) return redis.call('GET', 'missing') == nil",
            &[],
            &[]
        ),
        Frame::Boolean(true)
    );
    h.run(&["HSET", "h", "f", "1"]);
    assert_eq!(
        h.eval(
            "redis.setresp(3) return redis.call('HGETALL', 'h').map.f",
            &[],
            &[]
        ),
        bulk("1")
    );
    assert_eq!(
        h.eval("return redis.call('HGETALL', 'h')", &[], &[]),
        Frame::Array(vec![bulk("f"), bulk("1")])
    );
    // Numbers reach commands as %.17g text, integers exactly.
    assert_eq!(
        h.eval(
            "redis.call('SET', 'f', 0.1) return redis.call('GET', 'f')",
            &[],
            &[]
        ),
        bulk("0.10000000000000001")
    );
    assert_eq!(
        h.eval(
            "redis.call('SET', 'f', 5) return redis.call('GET', 'f')",
            &[],
            &[]
        ),
        bulk("5")
    );
    assert_eq!(
        h.eval(
            "redis.call('SET', 'f', 1e20) return redis.call('GET', 'f')",
            &[],
            &[]
        ),
        bulk("1e+20")
    );
    // Negative zero keeps its sign; 2^63 is past i64, so not an integer;
    // many arguments of mixed kinds keep their order.
    assert_eq!(
        h.eval(
            "redis.call('SET', 'f', -0.0) return redis.call('GET', 'f')",
            &[],
            &[]
        ),
        bulk("-0")
    );
    assert_eq!(
        h.eval(
            "redis.call('SET', 'f', 2^63) return redis.call('GET', 'f')",
            &[],
            &[]
        ),
        bulk("9.2233720368547758e+18")
    );
    assert_eq!(
        h.eval(
            "redis.call('RPUSH', 'mixed', 'a', 1, 2.5, '', -7) return redis.call('LRANGE', 'mixed', 0, -1)",
            &[],
            &[]
        ),
        Frame::Array(vec![bulk("a"), bulk("1"), bulk("2.5"), bulk(""), bulk("-7")])
    );
}

#[test]
fn keys_argv_and_the_rate_limiter() {
    let mut h = Harness::new();
    assert_eq!(
        h.eval("return {KEYS[1], KEYS[2], ARGV[1]}", &["a", "b"], &["c"]),
        Frame::Array(vec![bulk("a"), bulk("b"), bulk("c")])
    );
    let mut admitted = 0;
    for request in 0..8 {
        let now = (1000 + request).to_string();
        let member = format!("req-{request}");
        if h.eval(
            SLIDING_WINDOW,
            &["{user}:rl"],
            &[&now, "1000", "5", &member],
        ) == Frame::Integer(1)
        {
            admitted += 1;
        }
    }
    assert_eq!(admitted, 5);
    assert_eq!(h.run(&["ZCARD", "{user}:rl"]), Frame::Integer(5));
    assert!(matches!(h.run(&["PTTL", "{user}:rl"]), Frame::Integer(ttl) if ttl > 0 && ttl <= 1000));
}

#[test]
fn script_cache_and_evalsha() {
    let mut h = Harness::new();
    let sha = "232fd51614574cf0867b83d384a5e898cfd24e5a";
    assert_eq!(h.run(&["SCRIPT", "LOAD", "return 'hello moto'"]), bulk(sha));
    assert_eq!(h.run(&["EVALSHA", sha, "0"]), bulk("hello moto"));
    assert_eq!(
        h.run(&["EVALSHA", &sha.to_uppercase(), "0"]),
        bulk("hello moto")
    );
    assert_eq!(
        h.run(&[
            "SCRIPT",
            "EXISTS",
            sha,
            "ffffffffffffffffffffffffffffffffffffffff"
        ]),
        Frame::Array(vec![Frame::Integer(1), Frame::Integer(0)])
    );
    assert_eq!(
        error_text(&h.run(&["EVALSHA", "abc", "0"])),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    // EVAL caches too.
    h.eval("return 7", &[], &[]);
    let seven = crate::sha1::sha1_hex(b"return 7");
    assert_eq!(h.run(&["EVALSHA", &seven, "0"]), Frame::Integer(7));
    assert_eq!(
        h.run(&["SCRIPT", "FLUSH", "NOW"]),
        Frame::error("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
    );
    assert_eq!(h.run(&["SCRIPT", "FLUSH"]), Frame::OK);
    assert_eq!(
        error_text(&h.run(&["EVALSHA", sha, "0"])),
        "NOSCRIPT No matching script. Please use EVAL."
    );
    // A compile error is reported and not cached.
    let bad = h.run(&["SCRIPT", "LOAD", "return ("]);
    assert!(
        error_text(&bad).starts_with("ERR Error compiling script (new function): user_script:1:"),
        "{bad:?}"
    );
    assert!(h.keyspace.scripts.scripts.is_empty());
}

#[test]
fn key_count_errors() {
    let mut h = Harness::new();
    assert_eq!(
        error_text(&h.run(&["EVAL", "return 1", "x"])),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        error_text(&h.run(&["EVAL", "return 1", "-1"])),
        "ERR Number of keys can't be negative"
    );
    assert_eq!(
        error_text(&h.run(&["EVAL", "return 1", "2", "a"])),
        "ERR Number of keys can't be greater than number of args"
    );
}

#[test]
fn runtime_errors_carry_the_script_position() {
    let mut h = Harness::new();
    let sha = crate::sha1::sha1_hex(b"error('boom')");
    assert_eq!(
        error_text(&h.eval("error('boom')", &[], &[])),
        format!("ERR user_script:1: boom script: {sha}, on @user_script:1.")
    );
    h.run(&["SET", "s", "text"]);
    let script = "\nreturn redis.call('INCR', 's')";
    let sha = crate::sha1::sha1_hex(script.as_bytes());
    assert_eq!(
        error_text(&h.eval(script, &[], &[])),
        format!("ERR value is not an integer or out of range script: {sha}, on @user_script:2.")
    );
    h.run(&["LPUSH", "list", "x"]);
    let wrongtype = h.eval("return redis.call('GET', 'list')", &[], &[]);
    assert!(error_text(&wrongtype)
        .starts_with("WRONGTYPE Operation against a key holding the wrong kind of value script: "));
    assert_eq!(
        h.eval("return redis.pcall('GET', 'list')", &[], &[]),
        Frame::error("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
    let unknown = h.eval("return redis.call('nosuch')", &[], &[]);
    assert!(
        error_text(&unknown).starts_with("ERR Unknown Redis command called from script script: "),
        "{unknown:?}"
    );
    let arity = h.eval("return redis.call('get')", &[], &[]);
    assert!(error_text(&arity)
        .starts_with("ERR Wrong number of args calling Redis command from script script: "));
    // A known subcommand with too few arguments is an arity error (checked
    // against redis-server 7.0); an unknown one an unknown command.
    assert_eq!(
        h.eval("return redis.pcall('XGROUP', 'SETID')", &[], &[]),
        Frame::error("ERR Wrong number of args calling Redis command from script")
    );
    assert_eq!(
        h.eval("return redis.pcall('XGROUP', 'FOO')", &[], &[]),
        Frame::error("ERR Unknown Redis command called from script")
    );
    let empty = h.eval("return redis.call()", &[], &[]);
    assert!(error_text(&empty)
        .starts_with("ERR Please specify at least one argument for this redis lib call script: "));
    let table_arg = h.eval("return redis.call('get', {})", &[], &[]);
    assert!(error_text(&table_arg)
        .starts_with("ERR Lua redis lib command arguments must be strings or integers script: "));
    let raised_table = h.eval("error({err='MYCODE boom'})", &[], &[]);
    assert!(error_text(&raised_table).starts_with("MYCODE boom script: "));
    // Lua's pcall gives the script the err text of a raised error table.
    assert_eq!(
        h.eval(
            "local ok, e = pcall(redis.call, 'GET', 'list') return {tostring(ok), e}",
            &[],
            &[]
        ),
        Frame::Array(vec![
            bulk("false"),
            bulk("WRONGTYPE Operation against a key holding the wrong kind of value")
        ])
    );
}

/// Library functions are C functions in Redis: called in tail position
/// (`return lib.f(...)`) they keep the script's frame, so their errors
/// still name the script's line, as `luaL_error` makes them, and the reply
/// ends with where the script stopped. Texts as Redis 7.2 gives them.
#[test]
fn library_errors_keep_the_script_position_in_every_call_position() {
    let mut h = Harness::new();
    let cases = [
        (
            "return cjson.decode('{bad')",
            "Expected object key string but found invalid token at character 2",
        ),
        (
            "local v = cjson.decode('{bad') return v",
            "Expected object key string but found invalid token at character 2",
        ),
        (
            "return cjson.encode(function() end)",
            "Cannot serialise function: type not supported",
        ),
        (
            "return cjson.encode_max_depth(0)",
            "bad argument #1 to 'encode_max_depth' (expected integer between 1 and 2147483647)",
        ),
        (
            "return cjson.encode_sparse_array('maybe')",
            "bad argument #1 to 'encode_sparse_array' (invalid option 'maybe')",
        ),
        (
            "return struct.pack('>i33', 1)",
            "integral size 33 is larger than limit of 32",
        ),
        (
            "return struct.pack('>q')",
            "bad argument #1 to 'pack' (invalid format option 'q')",
        ),
        (
            "return struct.unpack('s', 'x')",
            "unfinished string in data",
        ),
        (
            "return struct.size('s')",
            "bad argument #1 to 'size' (option 's' has no fixed size)",
        ),
        (
            "return bit.tohex()",
            "bad argument #1 to 'tohex' (number expected, got no value)",
        ),
        (
            "return bit.band(1, {})",
            "bad argument #2 to 'band' (number expected, got table)",
        ),
        (
            "return cmsgpack.unpack('\\193')",
            "Bad data format in input.",
        ),
        (
            "return cmsgpack.unpack_one('\\146\\1')",
            "Missing bytes in input.",
        ),
        (
            "return cmsgpack.pack()",
            "bad argument #0 to 'pack' (MessagePack pack needs input.)",
        ),
        (
            "return cmsgpack.unpack_one('ab', -1)",
            "Invalid request to unpack with offset of -1 and limit of 2.",
        ),
    ];
    for (script, message) in cases {
        let sha = crate::sha1::sha1_hex(script.as_bytes());
        assert_eq!(
            error_text(&h.eval(script, &[], &[])),
            format!("ERR user_script:1: {message} script: {sha}, on @user_script:1."),
            "{script}"
        );
    }
    // The line is the calling one, in tail position too.
    let script = "local a = 1\nlocal b = 2\nreturn cjson.decode('[1,')";
    let sha = crate::sha1::sha1_hex(script.as_bytes());
    assert_eq!(
        error_text(&h.eval(script, &[], &[])),
        format!(
            "ERR user_script:3: Expected value but found T_END at character 4 \
             script: {sha}, on @user_script:3."
        )
    );
    // Errors Lua's core raises inside a C library have no position.
    let script = "return cmsgpack.unpack('\\129\\192\\1')";
    let sha = crate::sha1::sha1_hex(script.as_bytes());
    assert_eq!(
        error_text(&h.eval(script, &[], &[])),
        format!("ERR table index is nil script: {sha}, on @user_script:1.")
    );
    // Functions name their own chunk.
    let library = "#!lua name=libs\nredis.register_function('bad', function()\n  return cjson.decode('{bad')\nend)";
    assert_eq!(h.run(&["FUNCTION", "LOAD", library]), bulk("libs"));
    assert_eq!(
        error_text(&h.run(&["FCALL", "bad", "0"])),
        "ERR user_function:3: Expected object key string but found invalid token at character 2 \
         script: bad, on @user_function:3."
    );
}

/// What `pcall` gives a script for a library error: the string Redis's
/// `luaL_error` raises, with the position of the Lua function that called
/// the library (none when `pcall` called it directly).
#[test]
fn pcall_sees_library_errors_as_redis_does() {
    let mut h = Harness::new();
    let cases = [
        (
            "local ok, e = pcall(function() return cjson.decode('{bad') end) return e",
            "user_script:1: Expected object key string but found invalid token at character 2",
        ),
        (
            "local ok, e = pcall(function() local v = cjson.decode('{bad') return v end) return e",
            "user_script:1: Expected object key string but found invalid token at character 2",
        ),
        (
            "local ok, e = pcall(cjson.decode, '{bad') return e",
            "Expected object key string but found invalid token at character 2",
        ),
        (
            "local ok, e = pcall(function()\n return struct.pack('>i33', 1)\n end) return e",
            "user_script:2: integral size 33 is larger than limit of 32",
        ),
        (
            "local ok, e = pcall(function() return bit.tohex() end) return e",
            "user_script:1: bad argument #1 to 'tohex' (number expected, got no value)",
        ),
        (
            "local ok, e = pcall(function() return cmsgpack.unpack('\\193') end) return e",
            "user_script:1: Bad data format in input.",
        ),
        (
            "local ok, e = pcall(function() return cmsgpack.unpack('\\129\\192\\1') end) return e",
            "table index is nil",
        ),
        (
            "local ok, e = pcall(function() return cjson.decode('{bad') end) return type(e)",
            "string",
        ),
    ];
    for (script, expected) in cases {
        assert_eq!(h.eval(script, &[], &[]), bulk(expected), "{script}");
    }
}

/// Many results reach the script whatever the call position.
#[test]
fn library_functions_return_many_results_in_every_call_position() {
    let mut h = Harness::new();
    let cases = [
        (
            "local function f() return struct.unpack(('b'):rep(7900), ('\\1'):rep(7900)) end \
             return select('#', f())",
            7901,
        ),
        (
            "return select('#', struct.unpack(('c1'):rep(7000), ('x'):rep(7000)))",
            7001,
        ),
        (
            "local t = {} for i = 1, 5000 do t[i] = 'v' .. i end \
             local packed = '' for i = 1, 5000 do packed = packed .. cmsgpack.pack(t[i]) end \
             local function f() return cmsgpack.unpack(packed) end \
             local r = {f()} return #r == 5000 and r[1] == 'v1' and r[5000] == 'v5000' and 1 or 0",
            1,
        ),
        ("return select('#', cjson.encode_sparse_array())", 3),
    ];
    for (script, expected) in cases {
        assert_eq!(
            h.eval(script, &[], &[]),
            Frame::Integer(expected),
            "{script}"
        );
    }
}

/// Redis lets scripts call BLMPOP and BZMPOP (not BLPOP or BZPOPMIN); from
/// a script they never block.
#[test]
fn the_mpop_forms_run_in_scripts_without_blocking() {
    let mut h = Harness::new();
    let blmpop = "return redis.pcall('BLMPOP', '0', '1', KEYS[1], 'LEFT')";
    assert_eq!(h.eval(blmpop, &["list"], &[]), Frame::Null);
    h.run(&["RPUSH", "list", "a"]);
    assert_eq!(
        h.eval(blmpop, &["list"], &[]),
        Frame::Array(vec![bulk("list"), Frame::Array(vec![bulk("a")])])
    );
    let bzmpop = "return redis.pcall('BZMPOP', '0', '1', KEYS[1], 'MIN')";
    assert_eq!(h.eval(bzmpop, &["zset"], &[]), Frame::Null);
}

#[test]
fn commands_refused_in_scripts() {
    let mut h = Harness::new();
    for command in [
        "'EVAL', 'return 1', 0",
        "'BLPOP', 'l', 0",
        "'MULTI'",
        "'SCRIPT', 'FLUSH'",
    ] {
        let reply = h.eval(&format!("return redis.pcall({command})"), &[], &[]);
        assert_eq!(
            reply,
            Frame::error("ERR This Redis command is not allowed from script"),
            "{command}"
        );
    }
    let read_only = h.run(&["EVAL_RO", "return redis.call('SET', 'k', 'v')", "1", "k"]);
    assert!(
        error_text(&read_only)
            .starts_with("ERR Write commands are not allowed from read-only scripts. script: "),
        "{read_only:?}"
    );
    let no_writes = h.eval(
        "#!lua flags=no-writes\nreturn redis.call('SET', 'k', 'v')",
        &["k"],
        &[],
    );
    assert!(error_text(&no_writes)
        .starts_with("ERR Write commands are not allowed from read-only scripts. script: "));
    assert_eq!(h.run(&["EXISTS", "k"]), Frame::Integer(0));
    assert_eq!(
        h.run(&["EVAL_RO", "return redis.call('GET', 'k')", "1", "k"]),
        Frame::Null
    );
}

#[test]
fn shebang_errors() {
    let mut h = Harness::new();
    assert_eq!(
        error_text(&h.eval("#!lua flags=bogus\nreturn 1", &[], &[])),
        "ERR Unexpected flag in script shebang: bogus"
    );
    assert_eq!(
        error_text(&h.eval("#!python\nreturn 1", &[], &[])),
        "ERR Unexpected engine in script shebang: #!python"
    );
    assert_eq!(
        error_text(&h.eval("#!lua other\nreturn 1", &[], &[])),
        "ERR Unknown lua shebang option: other"
    );
    assert_eq!(
        error_text(&h.eval("#!lua", &[], &[])),
        "ERR Invalid script shebang"
    );
    assert_eq!(
        h.eval("#!lua flags=no-writes,allow-oom\nreturn 2", &[], &[]),
        Frame::Integer(2)
    );
    // Line numbers count the shebang line.
    let reply = h.eval("#!lua\nerror('x')", &[], &[]);
    assert!(
        error_text(&reply).ends_with("on @user_script:2."),
        "{reply:?}"
    );
}

#[test]
fn the_sandbox_protects_globals() {
    let mut h = Harness::new();
    let reply = h.eval("return undefined_name", &[], &[]);
    assert!(error_text(&reply).starts_with("ERR user_script:1: Script attempted to access nonexistent global variable 'undefined_name' script: "), "{reply:?}");
    for script in [
        "x = 1",
        "function f() end",
        "redis = nil",
        "redis.call = nil",
        "string.upper = nil",
        "cjson.encode = nil",
        "rawset(_G, 'x', 1)",
        "_G.y = 2",
    ] {
        let reply = h.eval(script, &[], &[]);
        assert!(
            error_text(&reply).contains("Attempt to modify a readonly table"),
            "{script}: {reply:?}"
        );
    }
    let reply = h.eval("setmetatable(_G, nil)", &[], &[]);
    assert!(
        error_text(&reply).contains("cannot change a protected metatable"),
        "{reply:?}"
    );
    for name in [
        "loadstring",
        "dofile",
        "loadfile",
        "load",
        "os",
        "io",
        "print",
        "getfenv",
        "setfenv",
        "require",
        "debug",
    ] {
        let reply = h.eval(&format!("return {name}"), &[], &[]);
        assert!(
            error_text(&reply).contains("nonexistent global variable"),
            "{name}: {reply:?}"
        );
    }
    // Nothing a script does survives into the next run.
    assert_eq!(
        h.eval("KEYS[5] = 'x' return #KEYS", &["a"], &[]),
        Frame::Integer(1)
    );
    assert_eq!(h.eval("return #KEYS", &["a"], &[]), Frame::Integer(1));
    assert_eq!(
        h.eval("return getmetatable('') == false", &[], &[]),
        Frame::Integer(1)
    );
    assert_eq!(
        h.eval("return redis.REDIS_VERSION", &[], &[]),
        bulk("7.2.4")
    );
    assert_eq!(
        h.eval("return redis.sha1hex('')", &[], &[]),
        bulk("da39a3ee5e6b4b0d3255bfef95601890afd80709")
    );
    assert_eq!(
        h.eval("return cjson.encode({1,2})", &[], &[]),
        bulk("[1,2]")
    );
    assert_eq!(
        h.eval("return bit.band(12, 10)", &[], &[]),
        Frame::Integer(8)
    );
}

#[test]
fn the_instruction_budget_stops_runaway_scripts_alike() {
    let mut h = Harness::new();
    h.keyspace.config.script_instruction_limit = 200_000;
    for script in [
        "while true do end",
        "while true do pcall(function() while true do end end) end",
        "local co = coroutine.create(function() while true do end end) while true do coroutine.resume(co) end",
    ] {
        let reply = h.eval(script, &[], &[]);
        assert!(error_text(&reply).starts_with(crate::BUDGET_EXCEEDED), "{script}: {reply:?}");
    }
    // A script that wrote before the budget ran out keeps its writes, on
    // every replica alike.
    let reply = h.eval("redis.call('SET', 'k', 'v') while true do end", &["k"], &[]);
    assert!(error_text(&reply).starts_with(crate::BUDGET_EXCEEDED));
    assert_eq!(h.run(&["GET", "k"]), bulk("v"));
    // The next script runs normally.
    assert_eq!(
        h.eval(
            "local n = 0 for i = 1, 1000 do n = n + i end return n",
            &[],
            &[]
        ),
        Frame::Integer(500500)
    );
}

#[test]
fn runs_are_deterministic() {
    let script = "return {math.random(1000000), math.random(), redis.call('TIME')[1]}";
    let mut first = Harness::new();
    let mut second = Harness::new();
    let a = first.eval(script, &[], &[]);
    let b = second.eval(script, &[], &[]);
    assert_eq!(a, b);
    assert!(matches!(&a, Frame::Array(items) if items[2] == bulk("1700000000")));
    // Another entry seed, another sequence.
    second.context.rng = keyspace::Rng::new(43);
    assert_ne!(second.eval(script, &[], &[]), a);
}

#[test]
fn select_in_a_script_does_not_leak() {
    let mut h = Harness::new();
    h.eval(
        "redis.call('SELECT', 3) redis.call('SET', 'k', 'in3')",
        &[],
        &[],
    );
    assert_eq!(h.context.db, 0);
    assert_eq!(h.run(&["GET", "k"]), Frame::Null);
    h.run(&["SELECT", "3"]);
    h.context.db = 3;
    assert_eq!(h.run(&["GET", "k"]), bulk("in3"));
}

#[test]
fn cluster_mode_confines_scripts_to_their_slot() {
    let mut h = Harness::new();
    h.context.cluster_mode = true;
    assert_eq!(
        h.eval("return redis.call('SET', '{a}2', 'x')", &["{a}1"], &[]),
        Frame::simple("OK")
    );
    let other = h.eval("return redis.call('SET', 'b', 'x')", &["{a}1"], &[]);
    assert!(
        error_text(&other).starts_with(
            "ERR Script attempted to access keys that do not hash to the same slot script: "
        ),
        "{other:?}"
    );
    let undeclared = h.eval("return redis.call('SET', 'b', 'x')", &[], &[]);
    assert!(error_text(&undeclared)
        .starts_with("ERR Script attempted to access a non local key in a cluster node script: "));
    assert_eq!(
        error_text(&h.eval("#!lua flags=no-cluster\nreturn 1", &[], &[])),
        "ERR Can not run script on cluster, 'no-cluster' flag is set."
    );
}

#[test]
fn runs_outside_the_log_do_not_change_the_store() {
    let mut h = Harness::new();
    h.context.lazy_expire = false;
    assert_eq!(h.run(&["EVAL_RO", "return 1", "0"]), Frame::Integer(1));
    assert!(h.keyspace.scripts.scripts.is_empty());
}

#[test]
fn scripts_survive_a_snapshot_round_trip() {
    let mut h = Harness::new();
    h.run(&["SCRIPT", "LOAD", "return 'kept'"]);
    h.run(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=lib\nredis.register_function('f', function() return 'fn' end)",
    ]);
    let digest = keyspace::digest::digest(&h.keyspace, 0);
    let mut bytes = Vec::new();
    keyspace::snapshot::write_snapshot(&h.keyspace, &mut bytes).unwrap();
    let mut loaded =
        keyspace::snapshot::read_snapshot(&mut &bytes[..], h.keyspace.config.clone()).unwrap();
    assert_eq!(keyspace::digest::digest(&loaded, 0), digest);
    let mut context = Context::new(1, 2);
    let sha = crate::sha1::sha1_hex(b"return 'kept'");
    let evalsha: Vec<Bytes> = ["EVALSHA", &sha, "0"]
        .iter()
        .map(|w| Bytes::from(w.to_string()))
        .collect();
    let spec = commands::resolve(&evalsha).unwrap();
    assert_eq!(loaded.execute(spec, &mut context, &evalsha), bulk("kept"));
    let fcall: Vec<Bytes> = ["FCALL", "f", "0"]
        .iter()
        .map(|w| Bytes::from(w.to_string()))
        .collect();
    let spec = commands::resolve(&fcall).unwrap();
    assert_eq!(loaded.execute(spec, &mut context, &fcall), bulk("fn"));
    // The digest sees scripts.
    h.run(&["SCRIPT", "FLUSH"]);
    assert_ne!(keyspace::digest::digest(&h.keyspace, 0), digest);
}

const LIBRARY: &str = "#!lua name=mylib
local function incr_by(keys, args)
  return redis.call('INCRBY', keys[1], args[1])
end
redis.register_function('incr_by', incr_by)
redis.register_function{function_name='peek', callback=function(keys) return redis.call('GET', keys[1]) end, flags={'no-writes'}, description='reads'}
";

#[test]
fn functions_load_call_list_delete() {
    let mut h = Harness::new();
    assert_eq!(h.run(&["FUNCTION", "LOAD", LIBRARY]), bulk("mylib"));
    assert_eq!(
        h.run(&["FCALL", "incr_by", "1", "counter", "5"]),
        Frame::Integer(5)
    );
    assert_eq!(
        h.run(&["FCALL", "INCR_BY", "1", "counter", "2"]),
        Frame::Integer(7)
    );
    assert_eq!(h.run(&["FCALL_RO", "peek", "1", "counter"]), bulk("7"));
    assert_eq!(
        error_text(&h.run(&["FCALL_RO", "incr_by", "1", "counter", "1"])),
        "ERR Can not execute a script with write flag using *_ro command."
    );
    assert_eq!(
        error_text(&h.run(&["FCALL", "nosuch", "0"])),
        "ERR Function not found"
    );
    assert_eq!(
        error_text(&h.run(&["FCALL", "peek", "x"])),
        "ERR Bad number of keys provided"
    );
    assert_eq!(
        error_text(&h.run(&["FUNCTION", "LOAD", LIBRARY])),
        "ERR Library 'mylib' already exists"
    );
    assert_eq!(
        h.run(&["FUNCTION", "LOAD", "REPLACE", LIBRARY]),
        bulk("mylib")
    );
    let clash = "#!lua name=other\nredis.register_function('peek', function() return 1 end)";
    assert_eq!(
        error_text(&h.run(&["FUNCTION", "LOAD", clash])),
        "ERR Function peek already exists"
    );
    let list = h.run(&["FUNCTION", "LIST"]);
    assert_eq!(
        list,
        Frame::Array(vec![Frame::Map(vec![
            (bulk("library_name"), bulk("mylib")),
            (bulk("engine"), bulk("LUA")),
            (
                bulk("functions"),
                Frame::Array(vec![
                    Frame::Map(vec![
                        (bulk("name"), bulk("incr_by")),
                        (bulk("description"), Frame::Null),
                        (bulk("flags"), Frame::Set(vec![])),
                    ]),
                    Frame::Map(vec![
                        (bulk("name"), bulk("peek")),
                        (bulk("description"), bulk("reads")),
                        (bulk("flags"), Frame::Set(vec![Frame::simple("no-writes")])),
                    ]),
                ])
            ),
        ])])
    );
    let with_code = h.run(&["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "my*"]);
    assert!(matches!(&with_code, Frame::Array(items) if items.len() == 1));
    assert_eq!(
        h.run(&["FUNCTION", "LIST", "LIBRARYNAME", "zz*"]),
        Frame::Array(vec![])
    );
    let stats = h.run(&["FUNCTION", "STATS"]);
    assert!(format!("{stats:?}").contains("Integer(2)"), "{stats:?}");
    let error = h.run(&["FCALL", "incr_by", "1", "counter", "notanumber"]);
    assert!(
        error_text(&error).starts_with(
            "ERR value is not an integer or out of range script: incr_by, on @user_function:3."
        ),
        "{error:?}"
    );
    assert_eq!(
        error_text(&h.run(&["FUNCTION", "DELETE", "nope"])),
        "ERR Library not found"
    );
    assert_eq!(h.run(&["FUNCTION", "DELETE", "mylib"]), Frame::OK);
    assert_eq!(
        error_text(&h.run(&["FCALL", "peek", "0"])),
        "ERR Function not found"
    );
}

#[test]
fn function_load_errors() {
    let mut h = Harness::new();
    let cases = [
        ("return 1", "ERR Missing library metadata"),
        ("#!lua name=x", "ERR Invalid library metadata"),
        ("#!lua\nreturn 1", "ERR Library name was not given"),
        ("#!lua name=a name=b\nreturn 1", "ERR Invalid metadata value, name argument was given multiple times"),
        ("#!lua foo=bar\nreturn 1", "ERR Invalid metadata value given: foo=bar"),
        ("#!js name=x\nreturn 1", "ERR Engine 'js' not found"),
        ("#!lua name=bad-name\nreturn 1", "ERR Library names can only contain letters, numbers, or underscores(_) and must be at least one character long"),
        ("#!lua name=x\nlocal a = 1", "ERR No functions registered"),
    ];
    for (code, expected) in cases {
        assert_eq!(
            error_text(&h.run(&["FUNCTION", "LOAD", code])),
            expected,
            "{code}"
        );
    }
    let compile = h.run(&["FUNCTION", "LOAD", "#!lua name=x\nreturn ("]);
    assert!(
        error_text(&compile).starts_with("ERR Error compiling function: user_function:2:"),
        "{compile:?}"
    );
    let math = h.run(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=x\nlocal m = math.floor(1)\nredis.register_function('f', function() end)",
    ]);
    assert!(
        error_text(&math).contains("Script attempted to access nonexistent global variable 'math'"),
        "{math:?}"
    );
    let call = h.run(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=x\nredis.call('set', 'a', 'b')",
    ]);
    assert!(
        error_text(&call).starts_with("ERR Error registering functions:"),
        "{call:?}"
    );
    let dup = h.run(&["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('f', function() end)\nredis.register_function('F', function() end)"]);
    assert!(
        error_text(&dup).contains("Function already exists in the library"),
        "{dup:?}"
    );
    assert_eq!(
        error_text(&h.run(&["FUNCTION", "LOAD", "BOGUS", LIBRARY])),
        "ERR Unknown option given: BOGUS"
    );
    assert!(h.keyspace.scripts.libraries.is_empty());
}

#[test]
fn function_dump_and_restore() {
    let mut h = Harness::new();
    h.run(&["FUNCTION", "LOAD", LIBRARY]);
    let Frame::Bulk(payload) = h.run(&["FUNCTION", "DUMP"]) else {
        panic!("dump")
    };
    assert_eq!(payload[0], 0xF5);
    let payload = String::from_utf8_lossy(&payload).into_owned();
    let restore = |h: &mut Harness, words: &[&str]| -> Frame {
        let mut arguments: Vec<Bytes> = vec![Bytes::from("FUNCTION"), Bytes::from("RESTORE")];
        let Frame::Bulk(raw) = h.run(&["FUNCTION", "DUMP"]) else {
            unreachable!()
        };
        let _ = raw;
        arguments.extend(words.iter().map(|w| Bytes::from(w.to_string())));
        let spec = commands::resolve(&arguments).unwrap();
        h.keyspace.execute(spec, &mut h.context, &arguments)
    };
    let _ = payload;
    let Frame::Bulk(raw) = h.run(&["FUNCTION", "DUMP"]) else {
        unreachable!()
    };
    let mut target = Harness::new();
    let arguments = vec![Bytes::from("FUNCTION"), Bytes::from("RESTORE"), raw.clone()];
    let spec = commands::resolve(&arguments).unwrap();
    assert_eq!(
        target
            .keyspace
            .execute(spec, &mut target.context, &arguments),
        Frame::OK
    );
    assert_eq!(
        target.run(&["FCALL", "incr_by", "1", "c", "3"]),
        Frame::Integer(3)
    );
    // APPEND refuses an existing library; REPLACE and FLUSH do not.
    assert_eq!(
        target
            .keyspace
            .execute(spec, &mut target.context, &arguments),
        Frame::error("ERR Library mylib already exists")
    );
    for policy in ["REPLACE", "FLUSH"] {
        let mut with_policy = arguments.clone();
        with_policy.push(Bytes::from(policy));
        assert_eq!(
            target
                .keyspace
                .execute(spec, &mut target.context, &with_policy),
            Frame::OK,
            "{policy}"
        );
    }
    let mut corrupt = raw.to_vec();
    corrupt[3] ^= 1;
    let arguments = vec![
        Bytes::from("FUNCTION"),
        Bytes::from("RESTORE"),
        Bytes::from(corrupt),
    ];
    assert_eq!(
        target
            .keyspace
            .execute(spec, &mut target.context, &arguments),
        Frame::error("ERR DUMP payload version or checksum are wrong")
    );
    assert_eq!(
        restore(&mut h, &["x", "BAD"]),
        Frame::error(
            "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."
        )
    );
}

#[test]
fn resp3_client_protocol_shapes() {
    let mut h = Harness::new();
    h.context.protocol = Protocol::Resp3;
    // Booleans are RESP3 booleans only once the script chose RESP3.
    assert_eq!(h.eval("return true", &[], &[]), Frame::Integer(1));
    assert_eq!(
        h.eval("redis.setresp(3) return false", &[], &[]),
        Frame::Boolean(false)
    );
    assert_eq!(h.context.protocol, Protocol::Resp3);
    assert!(
        error_text(&h.eval("redis.setresp(4)", &[], &[])).contains("RESP version must be 2 or 3.")
    );
}

#[test]
fn nothing_that_differs_between_replicas_is_visible() {
    let mut h = Harness::new();
    assert_eq!(
        h.eval(
            "return {tostring({}), tostring(type), collectgarbage('count'), gcinfo()}",
            &[],
            &[]
        ),
        Frame::Array(vec![
            bulk("table"),
            bulk("function"),
            Frame::Integer(0),
            Frame::Integer(0)
        ])
    );
    assert_eq!(
        h.eval(
            "return tostring(setmetatable({}, {__tostring = function() return 'mine' end}))",
            &[],
            &[]
        ),
        bulk("mine")
    );
    assert_eq!(
        h.eval("return tostring(1.5) .. tostring(nil)", &[], &[]),
        bulk("1.5nil")
    );
}

#[test]
fn string_rep_is_bounded() {
    let mut h = Harness::new();
    let reply = h.eval("return string.rep('x', 1e10)", &[], &[]);
    assert!(
        error_text(&reply).starts_with("ERR user_script:1: resulting string too large script: "),
        "{reply:?}"
    );
    assert_eq!(
        h.eval("return #string.rep('ab', 3)", &[], &[]),
        Frame::Integer(6)
    );
    assert_eq!(h.eval("return ('x'):rep(2)", &[], &[]), bulk("xx"));
}
