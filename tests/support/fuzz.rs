//! Randomized differential testing: seeded random sequences of data-type commands
//! over a small space of keys, members and numbers (so commands meet each
//! other's data, wrong types and bad arguments), sent one at a time to
//! slotraft and to a real redis-server, every reply compared.
//!
//! Replies are compared byte for byte, except those whose order is a hash
//! table's layout (SMEMBERS, HGETALL, SUNION ...), compared as sorted
//! collections. Commands whose replies are random (SPOP, SRANDMEMBER,
//! HRANDFIELD, ZRANDMEMBER, RANDOMKEY) or depend on time beyond whole seconds
//! stay out. The installed redis-server may be older than the 7.2 slotraft
//! follows: commands whose replies changed since (ZRANK WITHSCORE, OBJECT
//! ENCODING of small lists and sets) stay out too.
//!
//! Streams use explicit IDs only (never `*`: the two servers' clocks
//! differ) and leave out what depends on time: XPENDING's idle column is
//! compared as zero, XCLAIM/XAUTOCLAIM ask for no idle time or an hour,
//! XINFO CONSUMERS and XINFO STREAM FULL stay out (they show times, and
//! 7.2's `inactive`/`active-time` fields 7.0 lacks), XINFO STREAM's
//! `radix-tree-nodes` (Redis's radix tree) is compared as zero, no BLOCK.
//! 7.0-vs-7.2: the unbalanced STREAMS error's text changed; XREADGROUP `>`
//! that finds nothing new, and XCLAIM/XAUTOCLAIM that claim nothing, create
//! their consumer in 7.2 only, so after each of them both servers get XGROUP
//! CREATECONSUMER (and they stay out of transactions and scripts, where that
//! cannot follow them).
//!
//! A score of negative zero is compared as zero: 7.0 writes it `0`, slotraft
//! `-0` (which of the two 7.2 writes was not checked).
//!
//! No argument overflows a double: Redis checks `errno` after `strtod`
//! without clearing it first, so after one such argument its next numeric
//! SORT fails whatever it sorts.
//!
//! A failure names the seed, the step and the commands before it, so it
//! replays with `SLOTRAFT_FUZZ_SEED=<seed>`; `SLOTRAFT_FUZZ_SEEDS=<count>`
//! sweeps more seeds than CI runs, from `SLOTRAFT_FUZZ_FROM` if set (see
//! [`seeds`]).

use resp::Frame;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// splitmix64: a small, seedable generator (the sequence is the test), and
/// the milliseconds of the last stream ID it made up for XADD (so that most
/// XADDs succeed: IDs are always explicit, never `*`).
struct Rng(u64, u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a>(&mut self, choices: &[&'a str]) -> &'a str {
        choices[self.below(choices.len())]
    }
}

/// How a reply is compared.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Order {
    /// Byte for byte.
    Exact,
    /// An array whose elements may come in any order.
    Unordered,
    /// An array (or map) of field-value pairs in any order.
    Pairs,
    /// A SCAN-family reply: the cursor, then elements in any order.
    Scan,
    /// A SCAN-family reply whose elements are field-value pairs.
    ScanPairs,
    /// A random pick (SRANDMEMBER, HRANDFIELD, ZRANDMEMBER, RANDOMKEY): the
    /// same kind of reply, as many elements, errors word for word.
    Shape,
    /// Exact, except what depends on the clock or on Redis's internals:
    /// XPENDING's idle times (the third element of each entry) and XINFO
    /// STREAM's `radix-tree-nodes` (the nodes of Redis's radix tree).
    Timeless,
}

/// A reply's shape: its kind and, for an aggregate, its length and its
/// elements' shapes (their text for errors, nothing for strings).
fn shape(frame: &Frame) -> String {
    match frame {
        Frame::Array(items) | Frame::Set(items) | Frame::Push(items) => format!(
            "array {} [{}]",
            items.len(),
            items.iter().map(shape).collect::<Vec<_>>().join(" ")
        ),
        Frame::Map(pairs) => format!("map {}", pairs.len()),
        Frame::Error(text) => format!("error {}", String::from_utf8_lossy(text)),
        Frame::Bulk(_) | Frame::Double(_) | Frame::DoubleText(_) => "string".into(),
        other => format!("{other:?}"),
    }
}

struct Connection {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl Connection {
    fn open(port: u16) -> Connection {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let _ = stream.set_nodelay(true);
        Connection {
            stream,
            buffer: Vec::new(),
        }
    }

    /// Sends one command and returns its reply's bytes.
    fn call(&mut self, arguments: &[String]) -> Vec<u8> {
        let mut wire = format!("*{}\r\n", arguments.len()).into_bytes();
        for argument in arguments {
            wire.extend(format!("${}\r\n", argument.len()).into_bytes());
            wire.extend_from_slice(argument.as_bytes());
            wire.extend_from_slice(b"\r\n");
        }
        self.stream.write_all(&wire).expect("write");
        let mut chunk = [0u8; 16 * 1024];
        loop {
            if let Ok(Some(length)) = resp::reply_length(&self.buffer) {
                return self.buffer.drain(..length).collect();
            }
            let count = self.stream.read(&mut chunk).expect("read a reply");
            assert!(count > 0, "connection closed before a whole reply");
            self.buffer.extend_from_slice(&chunk[..count]);
        }
    }
}

/// A reply in a form that compares equal whatever a hash table's order.
fn normalized(reply: &[u8], order: Order) -> String {
    let frame = match resp::parse_reply(reply) {
        Ok(Some((frame, _))) => frame,
        _ => return format!("unparsed {:?}", String::from_utf8_lossy(reply)),
    };
    normalized_frame(&frame, order)
}

/// The frame with XPENDING's idle times and XINFO STREAM's radix tree node
/// count zeroed (see [`Order::Timeless`]).
fn timeless(frame: &Frame) -> Frame {
    let radix_tree_nodes = &Frame::bulk_from_slice(b"radix-tree-nodes");
    match frame {
        Frame::Array(items) => {
            let mut items: Vec<Frame> = items.iter().map(timeless).collect();
            if let [Frame::Bulk(_), Frame::Bulk(_), Frame::Integer(idle), Frame::Integer(_)] =
                items.as_mut_slice()
            {
                *idle = 0;
            }
            for index in 1..items.len() {
                if items[index - 1] == *radix_tree_nodes {
                    items[index] = Frame::Integer(0);
                }
            }
            Frame::Array(items)
        }
        Frame::Map(pairs) => Frame::Map(
            pairs
                .iter()
                .map(|(name, value)| {
                    if name == radix_tree_nodes {
                        (name.clone(), Frame::Integer(0))
                    } else {
                        (timeless(name), timeless(value))
                    }
                })
                .collect(),
        ),
        other => other.clone(),
    }
}

fn normalized_frame(frame: &Frame, order: Order) -> String {
    if order == Order::Timeless {
        return format!("{:?}", timeless(frame));
    }
    if let (Frame::Array(parts), Order::Scan | Order::ScanPairs) = (frame, order) {
        if let [cursor, Frame::Array(items)] = parts.as_slice() {
            let inner = if order == Order::Scan {
                Order::Unordered
            } else {
                Order::Pairs
            };
            return format!(
                "{cursor:?} {}",
                normalized_frame(&Frame::Array(items.clone()), inner)
            );
        }
    }
    // A double in exponent form reads the same in 7.0's 17 digits and 7.2's
    // shortest form (see `same_numbers`).
    let text = |item: &Frame| match item {
        Frame::Bulk(data) => match std::str::from_utf8(data).map(str::parse::<f64>) {
            // (and a negative zero, which 7.0 writes as 0).
            Ok(Ok(number)) if data.contains(&b'e') || matches!(&data[..], b"-0" | b"0") => {
                format!("number {:e}", number + 0.0)
            }
            _ => format!("{item:?}"),
        },
        _ => format!("{item:?}"),
    };
    let mut parts: Vec<String> = match (frame, order) {
        (Frame::Array(items) | Frame::Set(items), Order::Unordered) => {
            items.iter().map(text).collect()
        }
        (Frame::Array(items), Order::Pairs) => items
            .chunks(2)
            .map(|pair| pair.iter().map(text).collect::<Vec<_>>().join(" "))
            .collect(),
        (Frame::Map(pairs), Order::Pairs) => pairs
            .iter()
            .map(|(field, value)| format!("{} {}", text(field), text(value)))
            .collect(),
        _ => return format!("{frame:?}"),
    };
    parts.sort();
    parts.join("\n")
}

/// Whether two replies differ only in how they write the same doubles: the
/// installed redis-server may be older than 7.2, which writes a score in the
/// fewest digits that read back the same (`5e+307` where 7.0 wrote
/// `5.0000000000000001e+307`).
fn same_numbers(expected: &[u8], actual: &[u8]) -> bool {
    fn parsed(reply: &[u8]) -> Option<Frame> {
        match resp::parse_reply(reply) {
            Ok(Some((frame, _))) => Some(frame),
            _ => None,
        }
    }
    fn double(data: &[u8]) -> Option<f64> {
        std::str::from_utf8(data).ok()?.parse::<f64>().ok()
    }
    fn same(a: &Frame, b: &Frame) -> bool {
        match (a, b) {
            (Frame::Bulk(x), Frame::Bulk(y)) => {
                x == y || matches!((double(x), double(y)), (Some(x), Some(y)) if x == y)
            }
            (Frame::Array(x), Frame::Array(y))
            | (Frame::Set(x), Frame::Set(y))
            | (Frame::Push(x), Frame::Push(y)) => {
                x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
            }
            (Frame::Map(x), Frame::Map(y)) => {
                x.len() == y.len()
                    && x.iter()
                        .zip(y)
                        .all(|((xk, xv), (yk, yv))| same(xk, yk) && same(xv, yv))
            }
            (Frame::Double(x), Frame::Double(y)) => x == y || (x.is_nan() && y.is_nan()),
            _ => format!("{a:?}") == format!("{b:?}"),
        }
    }
    match (parsed(expected), parsed(actual)) {
        (Some(a), Some(b)) => same(&a, &b),
        _ => false,
    }
}

const LIST_KEYS: &[&str] = &["l1", "l2", "l3"];
const HASH_KEYS: &[&str] = &["h1", "h2"];
const SET_KEYS: &[&str] = &["s1", "s2", "s3"];
const ZSET_KEYS: &[&str] = &["z1", "z2", "z3"];
const STRING_KEYS: &[&str] = &["k1", "k2", "n1"];
/// Sorted sets whose members all have score 0: lexicographic ranges are
/// only defined on those (on mixed scores Redis's answer depends on its
/// skip list's random levels).
const LEX_KEYS: &[&str] = &["x1", "x2"];
const HLL_KEYS: &[&str] = &["p1", "p2"];
const GEO_KEYS: &[&str] = &["g1", "g2"];
const STREAM_KEYS: &[&str] = &["t1", "t2"];
const STREAM_GROUPS: &[&str] = &["sg1", "sg2", "sg3"];
const STREAM_CONSUMERS: &[&str] = &["c1", "c2", "c3"];
/// GEOSEARCHSTORE's destinations, never searched: STOREDIST scores are
/// distances, not points.
const GEO_STORE_KEYS: &[&str] = &["gd1", "gd2"];
const LONGITUDES: &[&str] = &[
    "13.361389",
    "15.087269",
    "2.3522",
    "-0.1276",
    "0",
    "13.4",
    "15",
    "180",
    "-180",
    "179.9999",
    "200",
    "x",
];
const LATITUDES: &[&str] = &[
    "38.115556",
    "37.502669",
    "48.8566",
    "51.5072",
    "0",
    "38",
    "37.9",
    "85.05112878",
    "-85.05112878",
    "85.06",
    "-33.8",
    "x",
];
const RADII: &[&str] = &["0", "1", "50", "100", "200", "1000", "5000", "-1", "x"];
const UNITS: &[&str] = &["m", "km", "km", "mi", "ft", "yd"];
const ANY_KEYS: &[&str] = &[
    "l1", "h1", "s1", "z1", "k1", "n1", "p1", "missing", "l2", "s2", "z2", "t1",
];
const MEMBERS: &[&str] = &[
    "a", "b", "c", "d", "e", "1", "2", "10", "-3", "3.5", "", "x y", "aa", "b\r\n",
];
const INTEGERS: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "5",
    "-2",
    "100",
    "abc",
    "1.5",
    "9223372036854775807",
    "-9223372036854775808",
    "",
];
const FLOATS: &[&str] = &[
    "0", "1", "-1", "2.5", "-0.5", "1e3", "inf", "-inf", "+inf", "nan", "x", "1e308", "-1e308", "3",
];
const SCORE_BOUNDS: &[&str] = &[
    "-inf", "+inf", "0", "1", "(1", "2.5", "(2.5", "-1", "(-inf", "nan", "x", "10", "(",
];
const LEX_BOUNDS: &[&str] = &[
    "-", "+", "[a", "(a", "[b", "(c", "[d", "a", "[", "(", "[x y",
];
const COUNTS: &[&str] = &["0", "1", "2", "3", "5", "-1", "-2", "10", "x"];

/// A key of the family most of the time, any key (another type, or none)
/// otherwise.
fn key(rng: &mut Rng, family: &[&'static str]) -> String {
    if rng.chance(88) {
        rng.pick(family).to_string()
    } else {
        rng.pick(ANY_KEYS).to_string()
    }
}

/// A member, sometimes a long one (past the compact encodings' 64-byte limit).
fn member(rng: &mut Rng) -> String {
    if rng.chance(4) {
        format!("{}{}", "m".repeat(65), rng.below(3))
    } else {
        rng.pick(MEMBERS).to_string()
    }
}

fn members(rng: &mut Rng, at_least: usize) -> Vec<String> {
    let count = at_least + rng.below(4);
    (0..count).map(|_| member(rng)).collect()
}

fn keys(rng: &mut Rng, family: &[&'static str], at_least: usize) -> Vec<String> {
    let count = at_least + rng.below(3);
    (0..count).map(|_| key(rng, family)).collect()
}

fn words(words: &[&str]) -> Vec<String> {
    words.iter().map(|word| word.to_string()).collect()
}

fn list_command(rng: &mut Rng) -> (Vec<String>, Order) {
    let k = key(rng, LIST_KEYS);
    let mut c = match rng.below(22) {
        0 | 1 => [words(&[rng.pick(&["LPUSH", "RPUSH"]), &k]), members(rng, 1)].concat(),
        2 => [
            words(&[rng.pick(&["LPUSHX", "RPUSHX"]), &k]),
            members(rng, 1),
        ]
        .concat(),
        3 => {
            let mut c = words(&[rng.pick(&["LPOP", "RPOP"]), &k]);
            if rng.chance(50) {
                c.push(rng.pick(COUNTS).into());
            }
            c
        }
        4 => words(&["LLEN", &k]),
        5 | 6 => words(&["LRANGE", &k, rng.pick(INTEGERS), rng.pick(INTEGERS)]),
        7 => words(&["LINDEX", &k, rng.pick(INTEGERS)]),
        8 => [words(&["LSET", &k, rng.pick(INTEGERS)]), vec![member(rng)]].concat(),
        9 => [
            words(&["LINSERT", &k, rng.pick(&["BEFORE", "AFTER", "ASIDE"])]),
            vec![member(rng), member(rng)],
        ]
        .concat(),
        10 => [words(&["LREM", &k, rng.pick(INTEGERS)]), vec![member(rng)]].concat(),
        11 => words(&["LTRIM", &k, rng.pick(INTEGERS), rng.pick(INTEGERS)]),
        12 => {
            let mut c = vec!["LPOS".into(), k.clone(), member(rng)];
            for _ in 0..rng.below(3) {
                let option = rng.pick(&["RANK", "COUNT", "MAXLEN"]);
                c.push(option.into());
                c.push(rng.pick(COUNTS).into());
            }
            c
        }
        13 | 14 => {
            let from = rng.pick(&["LEFT", "RIGHT", "UP"]);
            let to = rng.pick(&["LEFT", "RIGHT"]);
            words(&["LMOVE", &k, &key(rng, LIST_KEYS), from, to])
        }
        15 => words(&["RPOPLPUSH", &k, &key(rng, LIST_KEYS)]),
        16 => {
            let chosen = keys(rng, LIST_KEYS, 1);
            let mut c = vec!["LMPOP".into(), chosen.len().to_string()];
            c.extend(chosen);
            c.push(rng.pick(&["LEFT", "RIGHT"]).into());
            if rng.chance(50) {
                c.push("COUNT".into());
                c.push(rng.pick(COUNTS).into());
            }
            c
        }
        17 => {
            // Blocking pops with a short timeout: served at once when there
            // is data, nil after 10 ms when not.
            let timeout = rng.pick(&["0.01", "0.01", "-1", "x"]);
            match rng.below(4) {
                0 => [
                    words(&[rng.pick(&["BLPOP", "BRPOP"])]),
                    keys(rng, LIST_KEYS, 1),
                    words(&[timeout]),
                ]
                .concat(),
                1 => words(&[
                    "BLMOVE",
                    &k,
                    &key(rng, LIST_KEYS),
                    rng.pick(&["LEFT", "RIGHT"]),
                    rng.pick(&["LEFT", "RIGHT"]),
                    timeout,
                ]),
                2 => words(&["BRPOPLPUSH", &k, &key(rng, LIST_KEYS), timeout]),
                _ => {
                    let chosen = keys(rng, LIST_KEYS, 1);
                    let mut c = vec!["BLMPOP".into(), timeout.into(), chosen.len().to_string()];
                    c.extend(chosen);
                    c.push(rng.pick(&["LEFT", "RIGHT"]).into());
                    c
                }
            }
        }
        18 => sort_command(rng, &k),
        19 | 20 => words(&["TYPE", &k]),
        _ => [words(&["RPUSH", &k]), members(rng, 3)].concat(),
    };
    if c.is_empty() {
        c = words(&["PING"]);
    }
    (c, Order::Exact)
}

fn sort_command(rng: &mut Rng, k: &str) -> Vec<String> {
    let mut c = words(&[rng.pick(&["SORT", "SORT_RO"]), k]);
    if rng.chance(30) {
        c.extend(words(&["LIMIT", rng.pick(COUNTS), rng.pick(COUNTS)]));
    }
    if rng.chance(50) {
        c.push("ALPHA".into());
    }
    if rng.chance(40) {
        c.push(rng.pick(&["ASC", "DESC"]).into());
    }
    if rng.chance(20) {
        c.extend(words(&["GET", "#"]));
    }
    if c[0] == "SORT" && rng.chance(20) {
        c.extend(words(&["STORE", rng.pick(LIST_KEYS)]));
    }
    c
}

fn hash_command(rng: &mut Rng) -> (Vec<String>, Order) {
    let k = key(rng, HASH_KEYS);
    let pairs = |rng: &mut Rng| -> Vec<String> {
        let mut c = Vec::new();
        for _ in 0..1 + rng.below(3) {
            c.push(member(rng));
            c.push(if rng.chance(30) {
                rng.pick(INTEGERS).to_string()
            } else {
                member(rng)
            });
        }
        c
    };
    match rng.below(17) {
        0..=2 => ([words(&["HSET", &k]), pairs(rng)].concat(), Order::Exact),
        3 => ([words(&["HMSET", &k]), pairs(rng)].concat(), Order::Exact),
        4 => (
            vec!["HSETNX".into(), k, member(rng), member(rng)],
            Order::Exact,
        ),
        5 => (vec!["HGET".into(), k, member(rng)], Order::Exact),
        6 => (
            [words(&["HMGET", &k]), members(rng, 1)].concat(),
            Order::Exact,
        ),
        7 => (
            [words(&["HDEL", &k]), members(rng, 1)].concat(),
            Order::Exact,
        ),
        8 => (vec!["HEXISTS".into(), k, member(rng)], Order::Exact),
        9 => (words(&["HLEN", &k]), Order::Exact),
        10 => (vec!["HSTRLEN".into(), k, member(rng)], Order::Exact),
        11 => (
            vec!["HINCRBY".into(), k, member(rng), rng.pick(INTEGERS).into()],
            Order::Exact,
        ),
        12 => (
            vec![
                "HINCRBYFLOAT".into(),
                k,
                member(rng),
                rng.pick(FLOATS).into(),
            ],
            Order::Exact,
        ),
        13 => (words(&["HGETALL", &k]), Order::Pairs),
        14 => (
            words(&[rng.pick(&["HKEYS", "HVALS"]), &k]),
            Order::Unordered,
        ),
        15 => (words(&["OBJECT", "ENCODING", &k]), Order::Exact),
        _ => (words(&["TYPE", &k]), Order::Exact),
    }
}

fn set_command(rng: &mut Rng) -> (Vec<String>, Order) {
    let k = key(rng, SET_KEYS);
    match rng.below(16) {
        0..=2 => (
            [words(&["SADD", &k]), members(rng, 1)].concat(),
            Order::Exact,
        ),
        3 => (
            [words(&["SREM", &k]), members(rng, 1)].concat(),
            Order::Exact,
        ),
        4 => (words(&["SMEMBERS", &k]), Order::Unordered),
        5 => (vec!["SISMEMBER".into(), k, member(rng)], Order::Exact),
        6 => (
            [words(&["SMISMEMBER", &k]), members(rng, 1)].concat(),
            Order::Exact,
        ),
        7 => (words(&["SCARD", &k]), Order::Exact),
        8 => (
            vec!["SMOVE".into(), k, key(rng, SET_KEYS), member(rng)],
            Order::Exact,
        ),
        9 | 10 => (
            [
                words(&[rng.pick(&["SINTER", "SUNION", "SDIFF"])]),
                keys(rng, SET_KEYS, 1),
            ]
            .concat(),
            Order::Unordered,
        ),
        11 | 12 => (
            [
                words(&[rng.pick(&["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"])]),
                keys(rng, SET_KEYS, 2),
            ]
            .concat(),
            Order::Exact,
        ),
        13 => {
            let chosen = keys(rng, SET_KEYS, 1);
            let mut c = vec!["SINTERCARD".into(), chosen.len().to_string()];
            c.extend(chosen);
            if rng.chance(50) {
                c.push("LIMIT".into());
                c.push(rng.pick(COUNTS).into());
            }
            (c, Order::Exact)
        }
        14 => (sort_command(rng, &k), Order::Exact),
        _ => (words(&["TYPE", &k]), Order::Exact),
    }
}

fn score_members(rng: &mut Rng) -> Vec<String> {
    let mut c = Vec::new();
    for _ in 0..1 + rng.below(3) {
        c.push(rng.pick(FLOATS).to_string());
        c.push(member(rng));
    }
    c
}

fn zset_command(rng: &mut Rng) -> (Vec<String>, Order) {
    let k = key(rng, ZSET_KEYS);
    let withscores = |rng: &mut Rng, c: &mut Vec<String>| {
        if rng.chance(50) {
            c.push("WITHSCORES".into());
        }
    };
    let limit = |rng: &mut Rng, c: &mut Vec<String>| {
        if rng.chance(30) {
            c.extend(words(&["LIMIT", rng.pick(COUNTS), rng.pick(COUNTS)]));
        }
    };
    let c = match rng.below(30) {
        0..=3 => {
            let mut c = words(&["ZADD", &k]);
            for flag in ["NX", "XX", "GT", "LT", "CH", "INCR"] {
                if rng.chance(12) {
                    c.push(flag.into());
                }
            }
            c.extend(score_members(rng));
            c
        }
        4 => vec!["ZINCRBY".into(), k, rng.pick(FLOATS).into(), member(rng)],
        5 => [words(&["ZREM", &k]), members(rng, 1)].concat(),
        6 => words(&["ZCARD", &k]),
        7 => vec!["ZSCORE".into(), k, member(rng)],
        8 => [words(&["ZMSCORE", &k]), members(rng, 1)].concat(),
        9 => vec![rng.pick(&["ZRANK", "ZREVRANK"]).into(), k, member(rng)],
        10 | 11 => {
            let mut c = words(&["ZRANGE", &k]);
            match rng.below(3) {
                0 => c.extend(words(&[rng.pick(INTEGERS), rng.pick(INTEGERS)])),
                1 => {
                    c.extend(words(&[rng.pick(SCORE_BOUNDS), rng.pick(SCORE_BOUNDS)]));
                    c.push("BYSCORE".into());
                }
                _ => {
                    c[1] = rng.pick(LEX_KEYS).into();
                    c.extend(words(&[rng.pick(LEX_BOUNDS), rng.pick(LEX_BOUNDS)]));
                    c.push("BYLEX".into());
                }
            }
            if rng.chance(40) {
                c.push("REV".into());
            }
            limit(rng, &mut c);
            withscores(rng, &mut c);
            c
        }
        12 => {
            let mut c = words(&["ZRANGESTORE", rng.pick(ZSET_KEYS), &k]);
            if rng.chance(50) {
                c.extend(words(&[rng.pick(INTEGERS), rng.pick(INTEGERS)]));
            } else {
                c.extend(words(&[
                    rng.pick(SCORE_BOUNDS),
                    rng.pick(SCORE_BOUNDS),
                    "BYSCORE",
                ]));
                limit(rng, &mut c);
            }
            c
        }
        13 | 14 => {
            let name = rng.pick(&["ZRANGEBYSCORE", "ZREVRANGEBYSCORE"]);
            let mut c = words(&[name, &k, rng.pick(SCORE_BOUNDS), rng.pick(SCORE_BOUNDS)]);
            withscores(rng, &mut c);
            limit(rng, &mut c);
            c
        }
        15 => {
            let name = rng.pick(&["ZRANGEBYLEX", "ZREVRANGEBYLEX"]);
            let lex_key = rng.pick(LEX_KEYS);
            let mut c = words(&[name, lex_key, rng.pick(LEX_BOUNDS), rng.pick(LEX_BOUNDS)]);
            limit(rng, &mut c);
            c
        }
        16 => {
            let mut c = words(&["ZREVRANGE", &k, rng.pick(INTEGERS), rng.pick(INTEGERS)]);
            withscores(rng, &mut c);
            c
        }
        17 => words(&["ZCOUNT", &k, rng.pick(SCORE_BOUNDS), rng.pick(SCORE_BOUNDS)]),
        18 => {
            let lex_key = rng.pick(LEX_KEYS);
            words(&[
                "ZLEXCOUNT",
                lex_key,
                rng.pick(LEX_BOUNDS),
                rng.pick(LEX_BOUNDS),
            ])
        }
        19 => words(&[
            "ZREMRANGEBYSCORE",
            &k,
            rng.pick(SCORE_BOUNDS),
            rng.pick(SCORE_BOUNDS),
        ]),
        20 => words(&[
            "ZREMRANGEBYRANK",
            &k,
            rng.pick(INTEGERS),
            rng.pick(INTEGERS),
        ]),
        21 => {
            let lex_key = rng.pick(LEX_KEYS);
            words(&[
                "ZREMRANGEBYLEX",
                lex_key,
                rng.pick(LEX_BOUNDS),
                rng.pick(LEX_BOUNDS),
            ])
        }
        22 => {
            let mut c = words(&[rng.pick(&["ZPOPMIN", "ZPOPMAX"]), &k]);
            if rng.chance(50) {
                c.push(rng.pick(COUNTS).into());
            }
            c
        }
        23 => {
            let chosen = keys(rng, ZSET_KEYS, 1);
            let mut c = vec!["ZMPOP".into(), chosen.len().to_string()];
            c.extend(chosen);
            c.push(rng.pick(&["MIN", "MAX", "MID"]).into());
            if rng.chance(50) {
                c.extend(words(&["COUNT", rng.pick(COUNTS)]));
            }
            c
        }
        24..=26 => {
            let chosen = keys(rng, ZSET_KEYS, 1);
            let store = rng.chance(50);
            let name = rng.pick(&["ZUNION", "ZINTER", "ZDIFF"]);
            let mut c = if store {
                vec![format!("{name}STORE"), key(rng, ZSET_KEYS)]
            } else {
                vec![name.to_string()]
            };
            c.push(chosen.len().to_string());
            c.extend(chosen.iter().cloned());
            if name != "ZDIFF" && rng.chance(30) {
                c.push("WEIGHTS".into());
                for _ in 0..chosen.len() {
                    c.push(rng.pick(FLOATS).into());
                }
            }
            if name != "ZDIFF" && rng.chance(30) {
                c.extend(words(&[
                    "AGGREGATE",
                    rng.pick(&["SUM", "MIN", "MAX", "AVG"]),
                ]));
            }
            if !store {
                withscores(rng, &mut c);
            }
            c
        }
        27 => {
            let chosen = keys(rng, ZSET_KEYS, 1);
            let mut c = vec!["ZINTERCARD".into(), chosen.len().to_string()];
            c.extend(chosen);
            if rng.chance(40) {
                c.extend(words(&["LIMIT", rng.pick(COUNTS)]));
            }
            c
        }
        28 => words(&["OBJECT", "ENCODING", &k]),
        // Score-0 members for the lexicographic ranges.
        _ => {
            let mut c = words(&["ZADD", rng.pick(LEX_KEYS)]);
            for _ in 0..1 + rng.below(3) {
                c.push("0".into());
                c.push(member(rng));
            }
            c
        }
    };
    (c, Order::Exact)
}

fn string_command(rng: &mut Rng) -> (Vec<String>, Order) {
    let k = key(rng, STRING_KEYS);
    let value = |rng: &mut Rng| {
        if rng.chance(50) {
            rng.pick(INTEGERS).to_string()
        } else {
            member(rng)
        }
    };
    let c = match rng.below(20) {
        0..=2 => {
            let mut c = vec!["SET".into(), k, value(rng)];
            for option in ["NX", "XX", "GET", "KEEPTTL"] {
                if rng.chance(10) {
                    c.push(option.into());
                }
            }
            if rng.chance(10) {
                c.extend(words(&["EX", rng.pick(&["100", "0", "-1", "x"])]));
            }
            c
        }
        3 => words(&["GET", &k]),
        4 => vec!["APPEND".into(), k, member(rng)],
        5 => words(&[rng.pick(&["INCR", "DECR"]), &k]),
        6 => words(&[rng.pick(&["INCRBY", "DECRBY"]), &k, rng.pick(INTEGERS)]),
        7 => words(&["INCRBYFLOAT", &k, rng.pick(FLOATS)]),
        8 => words(&["GETRANGE", &k, rng.pick(INTEGERS), rng.pick(INTEGERS)]),
        9 => vec![
            "SETRANGE".into(),
            k,
            rng.pick(&["0", "1", "3", "-1", "x"]).into(),
            member(rng),
        ],
        10 => words(&["STRLEN", &k]),
        11 => [words(&["MGET"]), keys(rng, STRING_KEYS, 1)].concat(),
        12 => {
            let mut c = words(&[rng.pick(&["MSET", "MSETNX"])]);
            for _ in 0..1 + rng.below(2) {
                c.push(key(rng, STRING_KEYS));
                c.push(value(rng));
            }
            c
        }
        13 => words(&["GETDEL", &k]),
        14 => vec!["GETSET".into(), k, value(rng)],
        15 => vec!["SETNX".into(), k, value(rng)],
        16 => words(&["OBJECT", "ENCODING", &k]),
        17 => {
            let mut c = words(&["LCS", &k, &key(rng, STRING_KEYS)]);
            if rng.chance(30) {
                c.push("LEN".into());
            }
            c
        }
        18 => bit_command(rng, &k),
        _ => words(&["EXISTS", &k]),
    };
    (c, Order::Exact)
}

const BIT_OFFSETS: &[&str] = &["0", "1", "7", "8", "13", "100", "-1", "x", "4294967296"];

fn bit_command(rng: &mut Rng, k: &str) -> Vec<String> {
    let unit = |rng: &mut Rng, c: &mut Vec<String>| {
        if rng.chance(40) {
            c.push(rng.pick(&["BYTE", "BIT", "WORD"]).into());
        }
    };
    match rng.below(7) {
        0 | 1 => words(&[
            "SETBIT",
            k,
            rng.pick(BIT_OFFSETS),
            rng.pick(&["0", "1", "2"]),
        ]),
        2 => words(&["GETBIT", k, rng.pick(BIT_OFFSETS)]),
        3 => {
            let mut c = words(&["BITCOUNT", k]);
            if rng.chance(60) {
                c.extend(words(&[rng.pick(INTEGERS), rng.pick(INTEGERS)]));
                unit(rng, &mut c);
            }
            c
        }
        4 => {
            let mut c = words(&["BITPOS", k, rng.pick(&["0", "1", "2"])]);
            for _ in 0..rng.below(3) {
                c.push(rng.pick(INTEGERS).into());
            }
            if c.len() == 5 {
                unit(rng, &mut c);
            }
            c
        }
        5 => {
            let operation = rng.pick(&["AND", "OR", "XOR", "NOT", "NOR"]);
            [
                words(&["BITOP", operation, rng.pick(STRING_KEYS)]),
                keys(rng, STRING_KEYS, 1),
            ]
            .concat()
        }
        6 => match rng.below(3) {
            // No expiry inside the run's time: key counts would race it.
            0 => words(&["GETEX", k, "PERSIST"]),
            1 => words(&["GETEX", k, "EX", rng.pick(&["100", "0", "x"])]),
            _ => words(&["GETEX", k, "PX", "100000"]),
        },
        _ => {
            let mut c = words(&[rng.pick(&["BITFIELD", "BITFIELD", "BITFIELD_RO"]), k]);
            for _ in 0..rng.below(4) {
                let kind = rng.pick(&[
                    "i8", "u8", "i1", "u1", "i5", "u63", "i64", "i16", "u0", "x8",
                ]);
                let offset = rng.pick(&["0", "3", "#1", "#2", "12", "-1", "x"]);
                match rng.below(5) {
                    0 | 1 => c.extend(words(&["GET", kind, offset])),
                    2 => c.extend(words(&["SET", kind, offset, rng.pick(INTEGERS)])),
                    3 => c.extend(words(&["INCRBY", kind, offset, rng.pick(INTEGERS)])),
                    _ => c.extend(words(&[
                        "OVERFLOW",
                        rng.pick(&["WRAP", "SAT", "FAIL", "NO"]),
                    ])),
                }
            }
            c
        }
    }
}

fn key_command(rng: &mut Rng) -> (Vec<String>, Order) {
    let k = rng.pick(ANY_KEYS).to_string();
    let other = rng.pick(ANY_KEYS).to_string();
    let c = match rng.below(17) {
        0 => [words(&["DEL"]), keys(rng, ANY_KEYS, 1)].concat(),
        1 => [words(&["EXISTS"]), keys(rng, ANY_KEYS, 1)].concat(),
        2 => words(&["TYPE", &k]),
        3 => words(&["RENAME", &k, &other]),
        4 => words(&["RENAMENX", &k, &other]),
        5 => {
            let mut c = words(&["COPY", &k, &other]);
            if rng.chance(50) {
                c.push("REPLACE".into());
            }
            c
        }
        6 => {
            let mut c = words(&["EXPIRE", &k, rng.pick(&["100", "200", "x", "-1"])]);
            if rng.chance(40) {
                c.push(rng.pick(&["NX", "XX", "GT", "LT", "XY"]).into());
            }
            c
        }
        7 => words(&["TTL", &k]),
        8 => words(&["PERSIST", &k]),
        9 => words(&["DBSIZE"]),
        10 => words(&["UNLINK", &k]),
        11 => words(&["TOUCH", &k, &other]),
        12 => {
            let mut c = words(&["SCAN", "0", "COUNT", "1000"]);
            if rng.chance(50) {
                c.extend(words(&[
                    "MATCH",
                    rng.pick(&["*", "*1", "[hl]?", "k*", "z\\2"]),
                ]));
            }
            if rng.chance(40) {
                let kind = rng.pick(&["string", "list", "set", "zset", "hash", "nothing"]);
                c.extend(words(&["TYPE", kind]));
            }
            return (c, Order::Scan);
        }
        13 => {
            let (name, order) = match rng.below(3) {
                0 => ("HSCAN", Order::ScanPairs),
                1 => ("SSCAN", Order::Scan),
                _ => ("ZSCAN", Order::ScanPairs),
            };
            let mut c = words(&[name, &k, "0", "COUNT", "1000"]);
            if rng.chance(50) {
                c.extend(words(&["MATCH", rng.pick(&["*", "a*", "?", "*[0-9]*"])]));
            }
            return (c, order);
        }
        14 => {
            let mut c = words(&["SORT", rng.pick(&["l1", "s1", "z1", "l2"])]);
            c.extend(words(&["BY", rng.pick(&["w_*", "h*->a", "missing_*"])]));
            for _ in 0..rng.below(3) {
                c.extend(words(&["GET", rng.pick(&["#", "d_*", "h*->a"])]));
            }
            // Not ALPHA: Redis leaves ties among equal (or missing) BY
            // values in its sort's order; numeric ties compare the elements.
            c
        }
        15 => {
            let weight = format!("{}_{}", rng.pick(&["w", "d"]), rng.pick(MEMBERS));
            vec!["SET".into(), weight, rng.pick(FLOATS).into()]
        }
        _ => {
            // A command through a script: its reply converted to Lua and
            // back (errors caught by pcall come back as they were).
            let (inner, order) = command(rng);
            // (Not those the run checks against Redis's TYPE first, nor
            // XREADGROUP, which the run follows with XGROUP CREATECONSUMER.)
            let checked = matches!(
                inner[0].as_str(),
                "OBJECT"
                    | "BITCOUNT"
                    | "BITPOS"
                    | "PFCOUNT"
                    | "SORT"
                    | "SORT_RO"
                    | "XREADGROUP"
                    | "XCLAIM"
                    | "XAUTOCLAIM"
            );
            if order != Order::Exact || checked {
                return (inner, order);
            }
            let mut c = words(&["EVAL", "return redis.pcall(unpack(ARGV))", "0"]);
            c.extend(inner);
            c
        }
    };
    (c, Order::Exact)
}

/// Geo commands. Points stored are distinct (a fine grid near Sicily), so
/// no two members lie at one distance from a centre: Redis orders such ties
/// by its sort's internals.
fn geo_command(rng: &mut Rng) -> (Vec<String>, Order) {
    let k = key(rng, GEO_KEYS);
    // Searches only over geo keys (other sorted sets' scores are points too,
    // but many members at one point would tie).
    let searched = rng.pick(GEO_KEYS).to_string();
    let grid = |rng: &mut Rng| {
        vec![
            format!("{:.6}", 13.0 + rng.below(3000) as f64 / 1000.0),
            format!("{:.6}", 37.0 + rng.below(1500) as f64 / 1000.0),
        ]
    };
    let point = |rng: &mut Rng| {
        if rng.chance(80) {
            grid(rng)
        } else {
            vec![
                rng.pick(LONGITUDES).to_string(),
                rng.pick(LATITUDES).to_string(),
            ]
        }
    };
    // What GEOADD takes: a grid point, or a pair with an invalid half.
    let stored_point = |rng: &mut Rng| {
        if rng.chance(90) {
            grid(rng)
        } else {
            vec![
                rng.pick(&["200", "-180.5", "x", "13"]).to_string(),
                rng.pick(&["85.06", "-90", "y", "100"]).to_string(),
            ]
        }
    };
    let options = |rng: &mut Rng, c: &mut Vec<String>, store: bool| {
        for option in ["WITHDIST", "WITHHASH", "WITHCOORD"] {
            if !store && rng.chance(30) {
                c.push(option.into());
            }
        }
        if rng.chance(40) {
            c.push(rng.pick(&["ASC", "DESC"]).into());
        }
        if rng.chance(30) {
            c.extend(words(&["COUNT", rng.pick(&["1", "2", "5", "0", "x"])]));
            if rng.chance(30) {
                c.push("ANY".into());
            }
        }
    };
    let c = match rng.below(10) {
        0..=2 => {
            let mut c = words(&["GEOADD", &k]);
            for option in ["NX", "XX", "CH"] {
                if rng.chance(8) {
                    c.push(option.into());
                }
            }
            for _ in 0..1 + rng.below(3) {
                c.extend(stored_point(rng));
                c.push(member(rng));
            }
            c
        }
        3 => [words(&["GEOPOS", &k]), members(rng, 1)].concat(),
        4 => {
            let mut c = vec!["GEODIST".into(), k, member(rng), member(rng)];
            if rng.chance(50) {
                c.push(rng.pick(UNITS).into());
            }
            c
        }
        5 => [words(&["GEOHASH", &k]), members(rng, 1)].concat(),
        6 => {
            let name = rng.pick(&["GEORADIUS", "GEORADIUS_RO"]);
            let mut c = words(&[name, &searched]);
            c.extend(point(rng));
            c.extend(words(&[rng.pick(RADII), rng.pick(UNITS)]));
            let store = rng.chance(25);
            options(rng, &mut c, store);
            if store {
                c.extend(words(&[
                    rng.pick(&["STORE", "STOREDIST"]),
                    rng.pick(GEO_STORE_KEYS),
                ]));
            }
            c
        }
        7 => {
            let name = rng.pick(&["GEORADIUSBYMEMBER", "GEORADIUSBYMEMBER_RO"]);
            let mut c = vec![name.to_string(), searched, member(rng)];
            c.extend(words(&[rng.pick(RADII), rng.pick(UNITS)]));
            options(rng, &mut c, false);
            c
        }
        _ => {
            let store = rng.chance(40);
            let mut c = if store {
                vec![
                    "GEOSEARCHSTORE".into(),
                    rng.pick(GEO_STORE_KEYS).into(),
                    searched,
                ]
            } else {
                vec!["GEOSEARCH".into(), searched]
            };
            if rng.chance(50) {
                c.extend(vec!["FROMMEMBER".into(), member(rng)]);
            } else {
                c.push("FROMLONLAT".into());
                c.extend(point(rng));
            }
            if rng.chance(50) {
                c.extend(words(&["BYRADIUS", rng.pick(RADII), rng.pick(UNITS)]));
            } else {
                c.extend(words(&[
                    "BYBOX",
                    rng.pick(RADII),
                    rng.pick(RADII),
                    rng.pick(UNITS),
                ]));
            }
            options(rng, &mut c, store);
            if store && rng.chance(40) {
                c.push("STOREDIST".into());
            }
            c
        }
    };
    (c, Order::Exact)
}

/// Random picks, compared by shape: they read only, so the two servers'
/// data stay the same.
fn random_pick_command(rng: &mut Rng) -> (Vec<String>, Order) {
    let count = |rng: &mut Rng, c: &mut Vec<String>| {
        if rng.chance(70) {
            c.push(
                rng.pick(&[
                    "0",
                    "1",
                    "3",
                    "-3",
                    "100",
                    "-100",
                    "x",
                    "-9223372036854775808",
                ])
                .into(),
            );
        }
    };
    let c = match rng.below(4) {
        0 => {
            let mut c = words(&["SRANDMEMBER", &key(rng, SET_KEYS)]);
            count(rng, &mut c);
            c
        }
        1 => {
            let mut c = words(&["HRANDFIELD", &key(rng, HASH_KEYS)]);
            count(rng, &mut c);
            if c.len() == 3 && rng.chance(50) {
                c.push("WITHVALUES".into());
            }
            c
        }
        2 => {
            let mut c = words(&["ZRANDMEMBER", &key(rng, ZSET_KEYS)]);
            count(rng, &mut c);
            if c.len() == 3 && rng.chance(50) {
                c.push("WITHSCORES".into());
            }
            c
        }
        _ => words(&["RANDOMKEY"]),
    };
    (c, Order::Shape)
}

fn hll_command(rng: &mut Rng) -> (Vec<String>, Order) {
    let k = key(rng, HLL_KEYS);
    let c = match rng.below(4) {
        0 | 1 => [words(&["PFADD", &k]), members(rng, 0)].concat(),
        2 => [words(&["PFCOUNT"]), keys(rng, HLL_KEYS, 1)].concat(),
        _ => [words(&["PFMERGE", &k]), keys(rng, HLL_KEYS, 0)].concat(),
    };
    (c, Order::Exact)
}

/// One write of 100 to 160 new elements, past the compact encodings' entry
/// limits (128), so conversions and the large forms get their turn.
fn grow_command(rng: &mut Rng) -> (Vec<String>, Order) {
    let count = 100 + rng.below(61);
    let base = rng.below(1000);
    let element = |index: usize| format!("g{}", base + index);
    let c = match rng.below(4) {
        0 => {
            let mut c = words(&["RPUSH", rng.pick(LIST_KEYS)]);
            c.extend((0..count).map(element));
            c
        }
        1 => {
            let mut c = words(&["SADD", rng.pick(SET_KEYS)]);
            // Integers only, sometimes: the intset encoding.
            if rng.chance(50) {
                c.extend((0..count).map(|index| (base + index).to_string()));
            } else {
                c.extend((0..count).map(element));
            }
            c
        }
        2 => {
            let mut c = words(&["ZADD", rng.pick(ZSET_KEYS)]);
            for index in 0..count {
                c.push((index % 7).to_string());
                c.push(element(index));
            }
            c
        }
        _ => {
            let mut c = words(&["HSET", rng.pick(HASH_KEYS)]);
            for index in 0..count {
                c.push(element(index));
                c.push(index.to_string());
            }
            c
        }
    };
    (c, Order::Exact)
}

/// An ID XADD is given: mostly after the last one made up (so the stream
/// grows), sometimes `<ms>-*`, sometimes one that is too small or invalid.
fn new_stream_id(rng: &mut Rng) -> String {
    match rng.below(100) {
        0..=64 => {
            rng.1 += rng.below(3) as u64;
            let seq = rng.below(3);
            format!("{}-{seq}", rng.1)
        }
        65..=79 => {
            rng.1 += rng.below(2) as u64;
            format!("{}-*", rng.1)
        }
        80..=89 => {
            let ms = rng.below(rng.1 as usize + 1);
            format!("{ms}-{}", rng.below(3))
        }
        90..=91 => rng.1.to_string(),
        _ => rng
            .pick(&[
                "0-0",
                "0-*",
                "x",
                "-",
                "+",
                "1-1-1",
                "18446744073709551615-18446744073709551614",
            ])
            .to_string(),
    }
}

/// An ID naming (or missing) an entry, or a special form.
fn stream_id(rng: &mut Rng) -> String {
    match rng.below(100) {
        0..=69 => {
            let ms = rng.below(rng.1 as usize + 2);
            format!("{ms}-{}", rng.below(3))
        }
        70..=79 => rng.below(rng.1 as usize + 2).to_string(),
        _ => rng
            .pick(&[
                "0",
                "0-0",
                "-",
                "+",
                "x",
                "(1-1",
                "(0",
                "18446744073709551615-18446744073709551615",
            ])
            .to_string(),
    }
}

/// A range bound for XRANGE, XPENDING and XAUTOCLAIM.
fn stream_bound(rng: &mut Rng) -> String {
    if rng.chance(25) {
        rng.pick(&["-", "+", "(-", "(+"]).to_string()
    } else if rng.chance(20) {
        format!("({}", stream_id(rng))
    } else {
        stream_id(rng)
    }
}

/// Field values, now and then long enough (700 bytes) that Redis closes a
/// stream node by its 4 KB listpack limit before its 100 entries.
fn stream_fields(rng: &mut Rng) -> Vec<String> {
    let pairs = 1 + rng.below(2);
    (0..pairs * 2)
        .map(|_| {
            if rng.chance(5) {
                "w".repeat(700)
            } else {
                rng.pick(&["f", "g", "v", "1", "", "x y", "-3"]).to_string()
            }
        })
        .collect()
}

fn trim_options(rng: &mut Rng) -> Vec<String> {
    let mut c = Vec::new();
    if rng.chance(70) {
        c.push("MAXLEN".to_string());
    } else {
        c.push("MINID".to_string());
    }
    match rng.below(3) {
        0 => c.push("~".into()),
        1 => c.push("=".into()),
        _ => {}
    }
    if c[0] == "MAXLEN" {
        c.push(rng.pick(&["0", "1", "2", "3", "5", "10", "-1", "x"]).into());
    } else {
        c.push(stream_id(rng));
    }
    if rng.chance(15) {
        c.push("LIMIT".into());
        c.push(rng.pick(&["0", "1", "5", "100", "-1"]).into());
    }
    c
}

/// Stream commands over explicit IDs only (two servers' clocks differ), and
/// nothing whose reply depends on time: XPENDING's idle times are compared
/// as zero, XCLAIM and XAUTOCLAIM ask for no idle time or for an hour (which
/// no entry reaches unless IDLE or TIME set its delivery time back), XINFO
/// CONSUMERS and XINFO STREAM FULL (times, and 7.2-only fields) stay out.
/// No BLOCK: the differential run waits for every reply.
fn stream_command(rng: &mut Rng) -> (Vec<String>, Order) {
    let k = key(rng, STREAM_KEYS);
    let g = rng.pick(STREAM_GROUPS).to_string();
    let consumer = rng.pick(STREAM_CONSUMERS).to_string();
    let min_idle = rng.pick(&["0", "0", "3600000", "-5", "x"]).to_string();
    let c = match rng.below(100) {
        0..=29 => {
            let mut c = words(&["XADD", &k]);
            if rng.chance(10) {
                c.push("NOMKSTREAM".into());
            }
            if rng.chance(20) {
                c.extend(trim_options(rng));
            }
            c.push(new_stream_id(rng));
            c.extend(stream_fields(rng));
            c
        }
        30..=32 => words(&["XLEN", &k]),
        33..=40 => {
            let name = if rng.chance(60) {
                "XRANGE"
            } else {
                "XREVRANGE"
            };
            let mut c = words(&[name, &k]);
            c.push(stream_bound(rng));
            c.push(stream_bound(rng));
            if rng.chance(40) {
                c.push("COUNT".into());
                c.push(rng.pick(COUNTS).into());
            }
            c
        }
        41..=44 => {
            let mut c = words(&["XDEL", &k]);
            c.extend((0..1 + rng.below(3)).map(|_| stream_id(rng)));
            c
        }
        45..=48 => [words(&["XTRIM", &k]), trim_options(rng)].concat(),
        49..=50 => {
            let mut c = words(&["XSETID", &k]);
            c.push(if rng.chance(70) {
                let ms = rng.1 + rng.below(3) as u64;
                format!("{ms}-{}", rng.below(3))
            } else {
                stream_id(rng)
            });
            if rng.chance(30) {
                c.push("ENTRIESADDED".into());
                c.push(rng.pick(&["0", "3", "10", "100", "-1"]).into());
            }
            if rng.chance(30) {
                c.push("MAXDELETEDID".into());
                c.push(stream_id(rng));
            }
            c
        }
        51..=59 => match rng.below(6) {
            0 | 1 => {
                let id = if rng.chance(40) {
                    "$".to_string()
                } else {
                    stream_id(rng)
                };
                let mut c = words(&["XGROUP", "CREATE", &k, &g, &id]);
                if rng.chance(40) {
                    c.push("MKSTREAM".into());
                }
                if rng.chance(20) {
                    c.push("ENTRIESREAD".into());
                    c.push(rng.pick(&["0", "1", "3", "-1", "-2", "x"]).into());
                }
                c
            }
            2 => {
                let id = if rng.chance(30) {
                    "$".to_string()
                } else {
                    stream_id(rng)
                };
                let mut c = words(&["XGROUP", "SETID", &k, &g, &id]);
                if rng.chance(30) {
                    c.push("ENTRIESREAD".into());
                    c.push(rng.pick(&["0", "2", "-1", "x"]).into());
                }
                c
            }
            3 => words(&["XGROUP", "DESTROY", &k, &g]),
            4 => words(&["XGROUP", "CREATECONSUMER", &k, &g, &consumer]),
            _ => words(&["XGROUP", "DELCONSUMER", &k, &g, &consumer]),
        },
        60..=71 => {
            let mut c = words(&["XREADGROUP", "GROUP", &g, &consumer]);
            if rng.chance(40) {
                c.push("COUNT".into());
                c.push(rng.pick(&["0", "1", "2", "5", "-1"]).into());
            }
            if rng.chance(15) {
                c.push("NOACK".into());
            }
            c.push("STREAMS".into());
            let streams = keys(rng, STREAM_KEYS, 1)
                .into_iter()
                .take(2)
                .collect::<Vec<_>>();
            let ids: Vec<String> = streams
                .iter()
                .map(|_| {
                    if rng.chance(65) {
                        ">".to_string()
                    } else {
                        stream_id(rng)
                    }
                })
                .collect();
            c.extend(streams);
            c.extend(ids);
            c
        }
        72..=76 => {
            let mut c = words(&["XREAD"]);
            if rng.chance(40) {
                c.push("COUNT".into());
                c.push(rng.pick(&["0", "1", "2", "-1"]).into());
            }
            c.push("STREAMS".into());
            let streams = keys(rng, STREAM_KEYS, 1)
                .into_iter()
                .take(2)
                .collect::<Vec<_>>();
            let ids: Vec<String> = streams
                .iter()
                .map(|_| {
                    if rng.chance(20) {
                        "$".to_string()
                    } else {
                        stream_id(rng)
                    }
                })
                .collect();
            c.extend(streams);
            c.extend(ids);
            c
        }
        77..=80 => {
            let mut c = words(&["XACK", &k, &g]);
            c.extend((0..1 + rng.below(3)).map(|_| stream_id(rng)));
            c
        }
        81..=85 => {
            if rng.chance(40) {
                return (words(&["XPENDING", &k, &g]), Order::Exact);
            }
            let mut c = words(&["XPENDING", &k, &g]);
            if rng.chance(25) {
                c.push("IDLE".into());
                c.push(rng.pick(&["0", "3600000", "x"]).into());
            }
            c.push(stream_bound(rng));
            c.push(stream_bound(rng));
            c.push(rng.pick(COUNTS).into());
            if rng.chance(30) {
                c.push(consumer.clone());
            }
            return (c, Order::Timeless);
        }
        86..=90 => {
            let mut c = words(&["XCLAIM", &k, &g, &consumer, &min_idle]);
            c.extend((0..1 + rng.below(3)).map(|_| stream_id(rng)));
            for _ in 0..rng.below(3) {
                match rng.below(7) {
                    0 => c.push("FORCE".into()),
                    1 => c.push("JUSTID".into()),
                    2 => c.extend(words(&["IDLE", rng.pick(&["0", "7200000", "x"])])),
                    3 => c.extend(words(&[
                        "TIME",
                        rng.pick(&["0", "1", "99999999999999", "x"]),
                    ])),
                    4 => c.extend(words(&["RETRYCOUNT", rng.pick(&["0", "3", "-1", "x"])])),
                    5 => {
                        c.push("LASTID".into());
                        c.push(stream_id(rng));
                    }
                    _ => c.push("BOGUS".into()),
                }
            }
            c
        }
        91..=94 => {
            let mut c = words(&["XAUTOCLAIM", &k, &g, &consumer, &min_idle]);
            c.push(stream_bound(rng));
            if rng.chance(50) {
                c.push("COUNT".into());
                c.push(rng.pick(&["1", "2", "3", "100", "0", "-1", "x"]).into());
            }
            if rng.chance(30) {
                c.push("JUSTID".into());
            }
            c
        }
        95..=97 => words(&["XINFO", "GROUPS", &k]),
        _ => return (words(&["XINFO", "STREAM", &k]), Order::Timeless),
    };
    (c, Order::Exact)
}

fn command(rng: &mut Rng) -> (Vec<String>, Order) {
    if rng.chance(1) {
        return grow_command(rng);
    }
    match rng.below(100) {
        0..=19 => list_command(rng),
        20..=34 => hash_command(rng),
        35..=49 => set_command(rng),
        50..=74 => zset_command(rng),
        75..=86 => string_command(rng),
        87..=91 => key_command(rng),
        92..=94 => geo_command(rng),
        95 => random_pick_command(rng),
        96 => hll_command(rng),
        _ => stream_command(rng),
    }
}

/// Sometimes a command loses its last arguments or gains one: arity and
/// syntax errors. (Not ZRANK and ZREVRANK, whose arity 7.2 changed.)
fn mutated(rng: &mut Rng, mut arguments: Vec<String>, target: Target) -> Vec<String> {
    if matches!(arguments[0].as_str(), "ZRANK" | "ZREVRANK") {
        return arguments;
    }
    match rng.below(100) {
        0..=2 if arguments.len() > 1 => {
            let keep = 1 + rng.below(arguments.len() - 1);
            arguments.truncate(keep);
        }
        3 => {
            let extra = rng.pick(&["junk", "WITHSCORES", "LIMIT", "1"]);
            // In a cluster an extra word may be taken for a key of another
            // slot (CROSSSLOT, as from Redis Cluster).
            if target != Target::Cluster {
                arguments.push(extra.into());
            }
        }
        _ => {}
    }
    arguments
}

/// What a replicated shard may answer differently from redis-server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Standalone,
    /// A replicated shard serves PFCOUNT as a read, outside the log, so it
    /// never stores the count in the key as Redis does (bytes 8 to 15 of a
    /// HyperLogLog's value): PFCOUNT stays out, so the values stay equal.
    Replicated,
    /// Through a cluster's router: as Replicated, with every key given one
    /// hash tag (so multi-key commands stay in one slot), and without what a
    /// cluster answers differently by design: SCAN (its cursor names a shard),
    /// scripts touching undeclared keys, SORT's BY and GET patterns.
    Cluster,
}

/// Whether `word` is one of the run's key names.
fn is_key_name(word: &str) -> bool {
    [
        LIST_KEYS,
        HASH_KEYS,
        SET_KEYS,
        ZSET_KEYS,
        STRING_KEYS,
        LEX_KEYS,
        HLL_KEYS,
        GEO_KEYS,
        GEO_STORE_KEYS,
        STREAM_KEYS,
        ANY_KEYS,
    ]
    .iter()
    .any(|names| names.contains(&word))
        || word.starts_with("w_")
        || word.starts_with("d_")
}

/// The command with every key name given the hash tag `{t}`.
fn tagged(arguments: Vec<String>) -> Vec<String> {
    arguments
        .into_iter()
        .map(|word| {
            if is_key_name(&word) {
                format!("{word}{{t}}")
            } else {
                word
            }
        })
        .collect()
}

/// Whether a command stays out of a run against `target`.
fn left_out(target: Target, arguments: &[String], in_transaction: bool) -> bool {
    let name = arguments[0].as_str();
    match target {
        Target::Standalone => false,
        Target::Replicated => name == "PFCOUNT",
        Target::Cluster => {
            matches!(name, "PFCOUNT" | "SCAN" | "EVAL")
                // The router answers whole-cluster commands itself, which a
                // transaction (pinned to one shard) cannot hold.
                || (in_transaction && name == "DBSIZE")
                || (name.starts_with("SORT")
                    && arguments.iter().any(|word| {
                        word.eq_ignore_ascii_case("BY") || word.eq_ignore_ascii_case("GET")
                    }))
        }
    }
}

fn run_seed(
    seed: u64,
    steps: usize,
    target: Target,
    ours: &mut Connection,
    theirs: &mut Connection,
) {
    let mut rng = Rng(seed, 0);
    let flush = words(&["FLUSHALL"]);
    assert_eq!(ours.call(&flush), theirs.call(&flush));
    let mut history: Vec<String> = Vec::new();
    // Commands left to queue in an open MULTI.
    let mut queued: Option<usize> = None;
    for step in 0..steps {
        let (arguments, order) = match queued {
            Some(0) => {
                queued = None;
                (
                    words(&[rng.pick(&["EXEC", "EXEC", "EXEC", "DISCARD"])]),
                    Order::Exact,
                )
            }
            None if rng.chance(3) => {
                queued = Some(1 + rng.below(4));
                (words(&["MULTI"]), Order::Exact)
            }
            _ => {
                let (arguments, order) = command(&mut rng);
                if order == Order::Exact {
                    (mutated(&mut rng, arguments, target), order)
                } else {
                    (arguments, order)
                }
            }
        };
        if left_out(target, &arguments, queued.is_some()) {
            continue;
        }
        if let Some(left) = queued.as_mut() {
            if arguments[0] != "MULTI" {
                // An EXEC reply holds every queued reply: only those
                // compared byte for byte, and nothing that asks TYPE first.
                if order != Order::Exact
                    || matches!(
                        arguments[0].as_str(),
                        "OBJECT" | "BITCOUNT" | "BITPOS" | "XREADGROUP" | "XCLAIM" | "XAUTOCLAIM"
                    )
                    || arguments[0].starts_with("SORT")
                {
                    continue;
                }
                *left -= 1;
            }
        }
        let arguments = if target == Target::Cluster {
            tagged(arguments)
        } else {
            arguments
        };
        if arguments[0] == "OBJECT" && arguments.len() > 2 {
            // Lists and sets changed encodings in 7.2 (see above).
            let kind = theirs.call(&words(&["TYPE", &arguments[2]]));
            if kind.starts_with(b"+list") || kind.starts_with(b"+set") {
                continue;
            }
        }
        if matches!(arguments[0].as_str(), "BITCOUNT" | "BITPOS") && arguments.len() > 1 {
            // 7.2 checks the arguments before the key; 7.0 looked the key up
            // first (a missing one answered 0 whatever the arguments).
            let kind = theirs.call(&words(&["TYPE", &arguments[1]]));
            if !kind.starts_with(b"+string") {
                continue;
            }
            // Nor the unit: 7.0 took a range of two negatives, start past
            // end, as empty before reading it.
            let unit = if arguments[0] == "BITCOUNT" { 4 } else { 5 };
            if arguments
                .get(unit)
                .is_some_and(|unit| !matches!(unit.to_ascii_uppercase().as_str(), "BIT" | "BYTE"))
            {
                continue;
            }
        }
        if arguments[0].starts_with("SORT") && arguments.len() > 1 {
            // Redis converts a sorted set it sorts to a skip list for good,
            // which only OBJECT ENCODING shows; slotraft leaves it as it is.
            let kind = theirs.call(&words(&["TYPE", &arguments[1]]));
            if kind.starts_with(b"+zset") {
                continue;
            }
        }
        let expected = unbalanced_evened_out(theirs.call(&arguments));
        let actual = unbalanced_evened_out(ours.call(&arguments));
        history.push(format!("{arguments:?}"));
        let same = match order {
            Order::Exact => expected == actual || same_numbers(&expected, &actual),
            Order::Shape => {
                let parsed = |reply: &[u8]| match resp::parse_reply(reply) {
                    Ok(Some((frame, _))) => shape(&frame),
                    _ => format!("unparsed {:?}", String::from_utf8_lossy(reply)),
                };
                parsed(&expected) == parsed(&actual)
            }
            _ => normalized(&expected, order) == normalized(&actual, order),
        };
        if !expected.starts_with(b"-") {
            // 7.2 creates the consumer even when XREADGROUP `>` finds
            // nothing new or XCLAIM/XAUTOCLAIM claim nothing; 7.0 only when
            // they serve or claim something: both get it now.
            create_consumers(&arguments, ours, theirs);
        }
        if !same {
            let from = history.len().saturating_sub(30);
            panic!(
                "seed {seed} step {step}: {arguments:?}\nredis:    {:?}\nslotraft: {:?}\nthe commands before it:\n{}",
                String::from_utf8_lossy(&expected),
                String::from_utf8_lossy(&actual),
                history[from..].join("\n")
            );
        }
    }
}

/// The reply with every XREAD/XREADGROUP unbalanced STREAMS error cut to
/// `-ERR Unbalanced`: 7.2 names the command in quotes (and `>` for
/// XREADGROUP), 7.0 always wrote `XREAD` and `$`.
fn unbalanced_evened_out(reply: Vec<u8>) -> Vec<u8> {
    const START: &[u8] = b"-ERR Unbalanced ";
    let mut out = Vec::with_capacity(reply.len());
    let mut rest = &reply[..];
    while let Some(at) = rest.windows(START.len()).position(|window| window == START) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(b"-ERR Unbalanced");
        let line = &rest[at..];
        let end = line
            .windows(2)
            .position(|window| window == b"\r\n")
            .unwrap_or(line.len());
        rest = &line[end..];
    }
    out.extend_from_slice(rest);
    out
}

/// Creates the consumer of XCLAIM, XAUTOCLAIM or XREADGROUP (in each of its
/// streams), on both servers
/// (see `run_seed`).
fn create_consumers(arguments: &[String], ours: &mut Connection, theirs: &mut Connection) {
    if matches!(arguments[0].as_str(), "XCLAIM" | "XAUTOCLAIM") {
        let create = words(&[
            "XGROUP",
            "CREATECONSUMER",
            &arguments[1],
            &arguments[2],
            &arguments[3],
        ]);
        ours.call(&create);
        theirs.call(&create);
        return;
    }
    if arguments[0] != "XREADGROUP" {
        return;
    }
    let Some(streams) = arguments.iter().position(|word| word == "STREAMS") else {
        return;
    };
    let keys = &arguments[streams + 1..];
    let (group, consumer) = (&arguments[2], &arguments[3]);
    for key in &keys[..keys.len() / 2] {
        let create = words(&["XGROUP", "CREATECONSUMER", key, group, consumer]);
        ours.call(&create);
        theirs.call(&create);
    }
}

/// Ends a transaction a seed left open, so the next seed starts clean.
fn close_transaction(ours: &mut Connection, theirs: &mut Connection) {
    let discard = words(&["DISCARD"]);
    assert_eq!(ours.call(&discard), theirs.call(&discard));
}

/// The seeds to run: `default`, or the one `SLOTRAFT_FUZZ_SEED` names, or
/// `SLOTRAFT_FUZZ_SEEDS` of them from `SLOTRAFT_FUZZ_FROM` (default: the
/// range's start), so a sweep can cover seeds CI never ran.
pub fn seeds(default: std::ops::Range<u64>) -> Vec<u64> {
    if let Ok(seed) = std::env::var("SLOTRAFT_FUZZ_SEED") {
        vec![seed.parse().expect("SLOTRAFT_FUZZ_SEED is a number")]
    } else if let Ok(count) = std::env::var("SLOTRAFT_FUZZ_SEEDS") {
        let count: u64 = count.parse().expect("SLOTRAFT_FUZZ_SEEDS is a number");
        let from = std::env::var("SLOTRAFT_FUZZ_FROM").map_or(default.start, |from| {
            from.parse().expect("SLOTRAFT_FUZZ_FROM is a number")
        });
        (from..from + count).collect()
    } else {
        default.collect()
    }
}

/// Runs `seeds` of `steps` commands each against slotraft at `ours` (a
/// `target`) and redis-server at `theirs`, in RESP `protocol` ("2" or "3").
pub fn run_seeds(
    target: Target,
    ours: u16,
    theirs: u16,
    protocol: &str,
    seeds: &[u64],
    steps: usize,
) {
    let mut ours = Connection::open(ours);
    let mut theirs = Connection::open(theirs);
    if protocol == "3" {
        let hello = words(&["HELLO", "3"]);
        ours.call(&hello);
        theirs.call(&hello);
    }
    for &seed in seeds {
        run_seed(seed, steps, target, &mut ours, &mut theirs);
        close_transaction(&mut ours, &mut theirs);
    }
}
