//! Sorted set commands: the Redis 7.2 sorted set family, blocking forms included.
//!
//! Arguments are checked, keys looked up and types checked in the order Redis
//! does, so the same bad request gets the same error. A sorted set whose last
//! member goes is deleted; the *STORE commands overwrite their destination (and
//! delete it when the result is empty). Encodings change as Redis's do (see
//! `zset.rs`).
//!
//! Scores are replied as doubles: RESP3 doubles, RESP2 bulk strings, both in
//! Redis 7.2's shortest round-trip form. Where Redis 7.2 nests member/score
//! pairs in RESP3 (ZRANGE and friends WITHSCORES, ZUNION/ZINTER/ZDIFF,
//! ZRANDMEMBER, ZPOPMIN/ZPOPMAX with a count) they are nested here; ZMPOP and
//! BZMPOP nest in both protocols; BZPOPMIN/BZPOPMAX and ZSCAN stay flat.
//!
//! **Blocking.** BZPOPMIN, BZPOPMAX and BZMPOP follow the list family's
//! contract (see `lists.rs`): they serve at once when they can, else answer
//! the timeout reply (a nil array) and record a [`crate::BlockOn`]. Every
//! command that adds members to a sorted set records the key as ready.
//!
//! Randomness (ZRANDMEMBER) comes only from `context.rng`.

use super::keys::parse_cursor;
use super::lists::{block_on, parse_timeout};
use crate::args;
use crate::command::{flags::*, key_flags::*, CommandSpec, Handler, KeySpec};
use crate::glob::glob_match;
use crate::value::{Value, ZSetValue};
use crate::zset::{Change, Entry};
use crate::{errors, Context, Keyspace};
use bytes::Bytes;
use resp::{Frame, Protocol};
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

const READ_FAST: &[&str] = &["read", "sortedset", "fast"];
const READ_SLOW: &[&str] = &["read", "sortedset", "slow"];
const WRITE_FAST: &[&str] = &["write", "sortedset", "fast"];
const WRITE_SLOW: &[&str] = &["write", "sortedset", "slow"];
const NONDETERMINISTIC: &[&str] = &["nondeterministic_output"];

const READ_KEY: &[KeySpec] = &[KeySpec::single(1, RO | ACCESS)];
const COUNT_KEY: &[KeySpec] = &[KeySpec::single(1, RO)];
const POPPED_KEY: &[KeySpec] = &[KeySpec::single(1, RW | ACCESS | DELETE)];
const DELETED_KEY: &[KeySpec] = &[KeySpec::single(1, RW | DELETE)];
const UPDATED_KEY: &[KeySpec] = &[KeySpec::single(1, RW | UPDATE)];
const READ_KEYS: &[KeySpec] = &[KeySpec::counted(1, RO | ACCESS)];
const STORE_KEYS: &[KeySpec] = &[
    KeySpec::single(1, OW | UPDATE),
    KeySpec::counted(2, RO | ACCESS),
];

const LOG_N: &str = "O(log(N)) where N is the number of elements in the sorted set.";
const RANGE_COMPLEXITY: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.";
const REMOVE_RANGE_COMPLEXITY: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.";
const POP_COMPLEXITY: &str = "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.";
const MPOP_COMPLEXITY: &str = "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.";
const UNION_COMPLEXITY: &str = "O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.";
const INTER_COMPLEXITY: &str = "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.";
const DIFF_COMPLEXITY: &str = "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.";

#[allow(clippy::too_many_arguments)]
const fn row(
    name: &'static str,
    arity: i32,
    flags: u64,
    key_specs: &'static [KeySpec],
    categories: &'static [&'static str],
    summary: &'static str,
    since: &'static str,
    complexity: &'static str,
    handler: fn(&mut Keyspace, &mut Context, &[Bytes]) -> Frame,
) -> CommandSpec {
    CommandSpec {
        name,
        arity,
        flags,
        key_specs,
        categories,
        group: "sorted_set",
        summary,
        since,
        complexity,
        handler: Handler::Keyspace(handler),
        ..CommandSpec::DEFAULT
    }
}

pub const COMMANDS: &[CommandSpec] = &[
    row(
        "bzmpop",
        -5,
        WRITE | BLOCKING,
        &[KeySpec::counted(2, RW | ACCESS | DELETE)],
        &["write", "sortedset", "slow", "blocking"],
        "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.",
        "7.0.0",
        MPOP_COMPLEXITY,
        bzmpop,
    ),
    row(
        "bzpopmax",
        -3,
        WRITE | FAST | BLOCKING,
        &[KeySpec::range(1, -2, 1, RW | ACCESS | DELETE)],
        &["write", "sortedset", "fast", "blocking"],
        "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.  Deletes the sorted set if the last element was popped.",
        "5.0.0",
        LOG_N,
        bzpopmax,
    ),
    row(
        "bzpopmin",
        -3,
        WRITE | FAST | BLOCKING,
        &[KeySpec::range(1, -2, 1, RW | ACCESS | DELETE)],
        &["write", "sortedset", "fast", "blocking"],
        "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.",
        "5.0.0",
        LOG_N,
        bzpopmin,
    ),
    row(
        "zadd",
        -4,
        WRITE | DENYOOM | FAST,
        UPDATED_KEY,
        WRITE_FAST,
        "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.",
        "1.2.0",
        "O(log(N)) for each item added, where N is the number of elements in the sorted set.",
        zadd,
    ),
    row(
        "zcard",
        2,
        READONLY | FAST,
        COUNT_KEY,
        READ_FAST,
        "Returns the number of members in a sorted set.",
        "1.2.0",
        "O(1)",
        zcard,
    ),
    row(
        "zcount",
        4,
        READONLY | FAST,
        COUNT_KEY,
        READ_FAST,
        "Returns the count of members in a sorted set that have scores within a range.",
        "2.0.0",
        LOG_N,
        zcount,
    ),
    row(
        "zdiff",
        -3,
        READONLY,
        READ_KEYS,
        READ_SLOW,
        "Returns the difference between multiple sorted sets.",
        "6.2.0",
        DIFF_COMPLEXITY,
        zdiff,
    ),
    row(
        "zdiffstore",
        -4,
        WRITE | DENYOOM,
        STORE_KEYS,
        WRITE_SLOW,
        "Stores the difference of multiple sorted sets in a key.",
        "6.2.0",
        DIFF_COMPLEXITY,
        zdiffstore,
    ),
    row(
        "zincrby",
        4,
        WRITE | DENYOOM | FAST,
        UPDATED_KEY,
        WRITE_FAST,
        "Increments the score of a member in a sorted set.",
        "1.2.0",
        LOG_N,
        zincrby,
    ),
    row(
        "zinter",
        -3,
        READONLY,
        READ_KEYS,
        READ_SLOW,
        "Returns the intersect of multiple sorted sets.",
        "6.2.0",
        INTER_COMPLEXITY,
        zinter,
    ),
    row(
        "zintercard",
        -3,
        READONLY,
        READ_KEYS,
        READ_SLOW,
        "Returns the number of members of the intersect of multiple sorted sets.",
        "7.0.0",
        "O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.",
        zintercard,
    ),
    row(
        "zinterstore",
        -4,
        WRITE | DENYOOM,
        STORE_KEYS,
        WRITE_SLOW,
        "Stores the intersect of multiple sorted sets in a key.",
        "2.0.0",
        INTER_COMPLEXITY,
        zinterstore,
    ),
    row(
        "zlexcount",
        4,
        READONLY | FAST,
        COUNT_KEY,
        READ_FAST,
        "Returns the number of members in a sorted set within a lexicographical range.",
        "2.8.9",
        LOG_N,
        zlexcount,
    ),
    row(
        "zmpop",
        -4,
        WRITE,
        &[KeySpec::counted(1, RW | ACCESS | DELETE)],
        WRITE_SLOW,
        "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.",
        "7.0.0",
        MPOP_COMPLEXITY,
        zmpop,
    ),
    row(
        "zmscore",
        -3,
        READONLY | FAST,
        READ_KEY,
        READ_FAST,
        "Returns the score of one or more members in a sorted set.",
        "6.2.0",
        "O(N) where N is the number of members being requested.",
        zmscore,
    ),
    row(
        "zpopmax",
        -2,
        WRITE | FAST,
        POPPED_KEY,
        WRITE_FAST,
        "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.",
        "5.0.0",
        POP_COMPLEXITY,
        zpopmax,
    ),
    row(
        "zpopmin",
        -2,
        WRITE | FAST,
        POPPED_KEY,
        WRITE_FAST,
        "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.",
        "5.0.0",
        POP_COMPLEXITY,
        zpopmin,
    ),
    CommandSpec {
        tips: NONDETERMINISTIC,
        ..row(
            "zrandmember",
            -2,
            READONLY,
            READ_KEY,
            READ_SLOW,
            "Returns one or more random members from a sorted set.",
            "6.2.0",
            "O(N) where N is the number of members returned",
            zrandmember,
        )
    },
    row(
        "zrange",
        -4,
        READONLY,
        READ_KEY,
        READ_SLOW,
        "Returns members in a sorted set within a range of indexes.",
        "1.2.0",
        RANGE_COMPLEXITY,
        zrange,
    ),
    row(
        "zrangebylex",
        -4,
        READONLY,
        READ_KEY,
        READ_SLOW,
        "Returns members in a sorted set within a lexicographical range.",
        "2.8.9",
        RANGE_COMPLEXITY,
        zrangebylex,
    ),
    row(
        "zrangebyscore",
        -4,
        READONLY,
        READ_KEY,
        READ_SLOW,
        "Returns members in a sorted set within a range of scores.",
        "1.0.5",
        RANGE_COMPLEXITY,
        zrangebyscore,
    ),
    row(
        "zrangestore",
        -5,
        WRITE | DENYOOM,
        &[
            KeySpec::single(1, OW | UPDATE),
            KeySpec::single(2, RO | ACCESS),
        ],
        WRITE_SLOW,
        "Stores a range of members from sorted set in a key.",
        "6.2.0",
        "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.",
        zrangestore,
    ),
    row(
        "zrank",
        -3,
        READONLY | FAST,
        READ_KEY,
        READ_FAST,
        "Returns the index of a member in a sorted set ordered by ascending scores.",
        "2.0.0",
        "O(log(N))",
        zrank,
    ),
    row(
        "zrem",
        -3,
        WRITE | FAST,
        DELETED_KEY,
        WRITE_FAST,
        "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.",
        "1.2.0",
        "O(M*log(N)) with N being the number of elements in the sorted set and M the number of elements to be removed.",
        zrem,
    ),
    row(
        "zremrangebylex",
        4,
        WRITE,
        DELETED_KEY,
        WRITE_SLOW,
        "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.",
        "2.8.9",
        REMOVE_RANGE_COMPLEXITY,
        zremrangebylex,
    ),
    row(
        "zremrangebyrank",
        4,
        WRITE,
        DELETED_KEY,
        WRITE_SLOW,
        "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.",
        "2.0.0",
        REMOVE_RANGE_COMPLEXITY,
        zremrangebyrank,
    ),
    row(
        "zremrangebyscore",
        4,
        WRITE,
        DELETED_KEY,
        WRITE_SLOW,
        "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.",
        "1.2.0",
        REMOVE_RANGE_COMPLEXITY,
        zremrangebyscore,
    ),
    row(
        "zrevrange",
        -4,
        READONLY,
        READ_KEY,
        READ_SLOW,
        "Returns members in a sorted set within a range of indexes in reverse order.",
        "1.2.0",
        RANGE_COMPLEXITY,
        zrevrange,
    ),
    row(
        "zrevrangebylex",
        -4,
        READONLY,
        READ_KEY,
        READ_SLOW,
        "Returns members in a sorted set within a lexicographical range in reverse order.",
        "2.8.9",
        RANGE_COMPLEXITY,
        zrevrangebylex,
    ),
    row(
        "zrevrangebyscore",
        -4,
        READONLY,
        READ_KEY,
        READ_SLOW,
        "Returns members in a sorted set within a range of scores in reverse order.",
        "2.2.0",
        RANGE_COMPLEXITY,
        zrevrangebyscore,
    ),
    row(
        "zrevrank",
        -3,
        READONLY | FAST,
        READ_KEY,
        READ_FAST,
        "Returns the index of a member in a sorted set ordered by descending scores.",
        "2.0.0",
        "O(log(N))",
        zrevrank,
    ),
    CommandSpec {
        tips: NONDETERMINISTIC,
        ..row(
            "zscan",
            -3,
            READONLY,
            READ_KEY,
            READ_SLOW,
            "Iterates over members and scores of a sorted set.",
            "2.8.0",
            "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.",
            zscan,
        )
    },
    row(
        "zscore",
        3,
        READONLY | FAST,
        READ_KEY,
        READ_FAST,
        "Returns the score of a member in a sorted set.",
        "1.2.0",
        "O(1)",
        zscore,
    ),
    row(
        "zunion",
        -3,
        READONLY,
        READ_KEYS,
        READ_SLOW,
        "Returns the union of multiple sorted sets.",
        "6.2.0",
        UNION_COMPLEXITY,
        zunion,
    ),
    row(
        "zunionstore",
        -4,
        WRITE | DENYOOM,
        STORE_KEYS,
        WRITE_SLOW,
        "Stores the union of multiple sorted sets in a key.",
        "2.0.0",
        UNION_COMPLEXITY,
        zunionstore,
    ),
];

// ---- Error texts only this family uses ------------------------------------------

const NOT_FLOAT_RANGE: &str = "ERR min or max is not a float";
const NOT_LEX_RANGE: &str = "ERR min or max not valid string range item";
const NX_AND_XX: &str = "ERR XX and NX options at the same time are not compatible";
const GT_LT_NX: &str = "ERR GT, LT, and/or NX options at the same time are not compatible";
const INCR_SINGLE_PAIR: &str = "ERR INCR option supports a single increment-element pair";
const NAN_RESULT: &str = "ERR resulting score is not a number (NaN)";
const LIMIT_NEEDS_BY: &str =
    "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX";
const WITHSCORES_AND_BYLEX: &str =
    "ERR syntax error, WITHSCORES not supported in combination with BYLEX";
const WEIGHT_NOT_FLOAT: &str = "ERR weight value is not a float";
const LIMIT_NEGATIVE: &str = "ERR LIMIT can't be negative";
const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";
const NUMKEYS_NOT_POSITIVE: &str = "ERR numkeys should be greater than 0";
const COUNT_NOT_POSITIVE: &str = "ERR count should be greater than 0";
const OUT_OF_RANGE: &str = "ERR value is out of range";
const COUNT_RANGE: &str =
    "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807";

/// Most members one ZRANDMEMBER with a negative count may answer. Redis streams
/// such replies until the client's output limit closes the connection; here a
/// larger count is refused instead of building an unbounded reply.
pub const MAX_RANDOM_MEMBERS: u64 = 1 << 20;

// ---- Shared helpers ---------------------------------------------------------------

fn zset_mut(value: &mut Value) -> Result<&mut ZSetValue, Frame> {
    match value {
        Value::ZSet(zset) => Ok(zset),
        _ => Err(Frame::error(errors::WRONGTYPE)),
    }
}

/// The sorted set at `key` for a read command (counts a hit or miss);
/// `Ok(None)` when absent, WRONGTYPE for other types.
fn read_zset<'a>(
    keyspace: &'a mut Keyspace,
    context: &mut Context,
    key: &[u8],
) -> Result<Option<&'a mut ZSetValue>, Frame> {
    match keyspace.read(context, key) {
        None => Ok(None),
        Some(entry) => zset_mut(&mut entry.value).map(Some),
    }
}

/// The sorted set at `key` for a write command.
fn write_zset<'a>(
    keyspace: &'a mut Keyspace,
    context: &mut Context,
    key: &[u8],
) -> Result<Option<&'a mut ZSetValue>, Frame> {
    match keyspace.lookup_write(context, key) {
        None => Ok(None),
        Some(entry) => zset_mut(&mut entry.value).map(Some),
    }
}

/// Accounts for `removed` members taken from the set at `key`, deleting the
/// key when `emptied`.
fn finish_removal(
    keyspace: &mut Keyspace,
    context: &Context,
    key: &[u8],
    removed: usize,
    emptied: bool,
) {
    if emptied {
        keyspace.db(context.db).remove(key);
    }
    keyspace.stats.dirty += removed as u64;
}

/// Stores a *STORE result at `destination` (replacing whatever was there, TTL
/// included) and answers its size; an empty result deletes the destination.
fn store_result(
    keyspace: &mut Keyspace,
    context: &mut Context,
    destination: &[u8],
    entries: Vec<Entry>,
) -> Frame {
    if entries.is_empty() {
        keyspace.delete(context, destination);
        return Frame::Integer(0);
    }
    let Some(zset) = ZSetValue::from_entries(entries) else {
        return Frame::Integer(0);
    };
    let length = zset.len();
    keyspace.set(context, destination, Value::ZSet(zset), None);
    keyspace.signal_ready(context.db, destination);
    Frame::Integer(length as i64)
}

/// A score as a reply.
fn score_frame(score: f64) -> Frame {
    Frame::Double(score)
}

/// Members, optionally with scores: flat in RESP2, `[member, score]` pairs in
/// RESP3.
fn entries_reply<'a>(
    entries: impl Iterator<Item = (&'a [u8], f64)>,
    with_scores: bool,
    protocol: Protocol,
) -> Frame {
    let mut items = Vec::new();
    for (member, score) in entries {
        let member = Frame::bulk_from_slice(member);
        if !with_scores {
            items.push(member);
        } else if protocol == Protocol::Resp2 {
            items.push(member);
            items.push(score_frame(score));
        } else {
            items.push(Frame::Array(vec![member, score_frame(score)]));
        }
    }
    Frame::Array(items)
}

/// Popped entries as `[member, score]` pairs (nested) or flat.
fn popped_reply(popped: &[(Bytes, f64)], nested: bool) -> Vec<Frame> {
    let mut items = Vec::with_capacity(popped.len() * 2);
    for (member, score) in popped {
        if nested {
            items.push(Frame::Array(vec![
                Frame::Bulk(member.clone()),
                score_frame(*score),
            ]));
        } else {
            items.push(Frame::Bulk(member.clone()));
            items.push(score_frame(*score));
        }
    }
    items
}

/// A score, increment or weight argument as Redis's `string2d` reads it: the
/// whole text a float (decimal or exponent form, `inf`/`infinity` in any case),
/// no spaces, no NaN, no overflow to infinity or underflow to zero.
fn parse_strict_float(text: &[u8]) -> Option<f64> {
    let text = std::str::from_utf8(text).ok()?;
    if text.is_empty() || text.starts_with(|c: char| c.is_ascii_whitespace()) {
        return None;
    }
    let value = parse_float_body(text)?;
    if value.is_infinite() && !is_infinity_literal(text) {
        return None;
    }
    if value == 0.0 && has_nonzero_digit(text) {
        return None;
    }
    Some(value)
}

/// A range bound's number as `strtod` reads it when the whole text must be
/// consumed: leading whitespace is skipped, an empty text is 0, overflow gives
/// an infinity, NaN is refused.
fn parse_lenient_float(text: &[u8]) -> Option<f64> {
    if text.is_empty() {
        return Some(0.0);
    }
    let text = std::str::from_utf8(text).ok()?;
    let trimmed = text.trim_start_matches([' ', '\t', '\n', '\x0b', '\x0c', '\r']);
    if trimmed.is_empty() {
        return None;
    }
    parse_float_body(trimmed)
}

/// The float spelled by all of `text` (no NaN).
fn parse_float_body(text: &str) -> Option<f64> {
    let lower = text.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if lower.len() - unsigned.len() > 1 {
        return None;
    }
    let value = match unsigned {
        "inf" | "infinity" => f64::INFINITY,
        _ if unsigned.contains("inf") || unsigned.contains("nan") => return None,
        _ => unsigned.parse::<f64>().ok()?,
    };
    let value = if lower.starts_with('-') {
        -value
    } else {
        value
    };
    (!value.is_nan()).then_some(value)
}

fn is_infinity_literal(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    matches!(lower.trim_start_matches(['+', '-']), "inf" | "infinity")
}

/// Whether the mantissa of a decimal text has a nonzero digit.
fn has_nonzero_digit(text: &str) -> bool {
    text.bytes()
        .take_while(|byte| !matches!(byte, b'e' | b'E'))
        .any(|byte| matches!(byte, b'1'..=b'9'))
}

fn parse_score(argument: &[u8]) -> Result<f64, Frame> {
    parse_strict_float(argument).ok_or_else(|| Frame::error(errors::NOT_FLOAT))
}

/// An integer of at least 1 (`getRangeLongFromObjectOrReply` with a message:
/// the same error for anything else).
fn parse_positive(argument: &[u8], error: &'static str) -> Result<usize, Frame> {
    match crate::value::canonical_i64(argument) {
        Some(value) if value >= 1 => Ok(usize::try_from(value).unwrap_or(usize::MAX)),
        _ => Err(Frame::error(error)),
    }
}

/// A non-negative count (`getPositiveLongFromObjectOrReply`): not an integer
/// is Redis's integer error unless a message is given.
fn parse_non_negative(argument: &[u8], negative: &'static str) -> Result<usize, Frame> {
    let value = args::parse_i64(argument)?;
    if value < 0 {
        return Err(Frame::error(negative));
    }
    Ok(usize::try_from(value).unwrap_or(usize::MAX))
}

// ---- Ranges -------------------------------------------------------------------------

/// A score interval (`zrangespec`).
#[derive(Debug, Clone, Copy)]
struct ScoreRange {
    min: f64,
    min_exclusive: bool,
    max: f64,
    max_exclusive: bool,
}

impl ScoreRange {
    fn parse(min: &[u8], max: &[u8]) -> Result<ScoreRange, Frame> {
        let bound = |text: &[u8]| match text.split_first() {
            Some((b'(', rest)) => parse_lenient_float(rest).map(|value| (value, true)),
            _ => parse_lenient_float(text).map(|value| (value, false)),
        };
        match (bound(min), bound(max)) {
            (Some((min, min_exclusive)), Some((max, max_exclusive))) => Ok(ScoreRange {
                min,
                min_exclusive,
                max,
                max_exclusive,
            }),
            _ => Err(Frame::error(NOT_FLOAT_RANGE)),
        }
    }

    fn above_min(&self, score: f64) -> bool {
        if self.min_exclusive {
            score > self.min
        } else {
            score >= self.min
        }
    }

    fn below_max(&self, score: f64) -> bool {
        if self.max_exclusive {
            score < self.max
        } else {
            score <= self.max
        }
    }
}

/// One end of a lexicographic interval.
#[derive(Debug, Clone)]
enum LexBound {
    /// `-`: below every member.
    Lowest,
    /// `+`: above every member.
    Highest,
    /// `[` (inclusive) or `(` (exclusive) and the bytes.
    Member { bytes: Bytes, exclusive: bool },
}

impl LexBound {
    fn parse(text: &Bytes) -> Option<LexBound> {
        match text.first()? {
            b'+' if text.len() == 1 => Some(LexBound::Highest),
            b'-' if text.len() == 1 => Some(LexBound::Lowest),
            b'(' => Some(LexBound::Member {
                bytes: text.slice(1..),
                exclusive: true,
            }),
            b'[' => Some(LexBound::Member {
                bytes: text.slice(1..),
                exclusive: false,
            }),
            _ => None,
        }
    }
}

/// A lexicographic interval (`zlexrangespec`).
#[derive(Debug, Clone)]
struct LexRange {
    min: LexBound,
    max: LexBound,
}

impl LexRange {
    fn parse(min: &Bytes, max: &Bytes) -> Result<LexRange, Frame> {
        match (LexBound::parse(min), LexBound::parse(max)) {
            (Some(min), Some(max)) => Ok(LexRange { min, max }),
            _ => Err(Frame::error(NOT_LEX_RANGE)),
        }
    }

    fn above_min(&self, member: &[u8]) -> bool {
        match &self.min {
            LexBound::Lowest => true,
            LexBound::Highest => false,
            LexBound::Member { bytes, exclusive } => match member.cmp(bytes) {
                Ordering::Greater => true,
                Ordering::Equal => !exclusive,
                Ordering::Less => false,
            },
        }
    }

    fn below_max(&self, member: &[u8]) -> bool {
        match &self.max {
            LexBound::Lowest => false,
            LexBound::Highest => true,
            LexBound::Member { bytes, exclusive } => match member.cmp(bytes) {
                Ordering::Less => true,
                Ordering::Equal => !exclusive,
                Ordering::Greater => false,
            },
        }
    }
}

/// What a range selects by.
#[derive(Debug, Clone)]
enum Selector {
    /// Start and stop indexes (negative from the end).
    Rank(i64, i64),
    Score(ScoreRange),
    Lex(LexRange),
}

impl Selector {
    /// Whether an entry lies before the start (ascending order) of the range.
    fn before_start(&self, entry: &Entry) -> bool {
        match self {
            Selector::Rank(..) => false,
            Selector::Score(range) => !range.above_min(entry.score),
            Selector::Lex(range) => !range.above_min(entry.member()),
        }
    }

    /// Whether an entry lies at or before the end (ascending order).
    fn before_end(&self, entry: &Entry) -> bool {
        match self {
            Selector::Rank(..) => true,
            Selector::Score(range) => range.below_max(entry.score),
            Selector::Lex(range) => range.below_max(entry.member()),
        }
    }
}

/// Resolves Redis's start/stop indexes over `length` entries to an inclusive
/// range, or None when it selects nothing.
fn resolve_ranks(start: i64, stop: i64, length: usize) -> Option<(usize, usize)> {
    let length = i64::try_from(length).ok()?;
    let start = if start < 0 { length + start } else { start }.max(0);
    let stop = if stop < 0 { length + stop } else { stop };
    if start > stop || start >= length {
        return None;
    }
    Some((start as usize, stop.min(length - 1) as usize))
}

/// The ascending ranks `first..end` a score or lex selector covers.
fn covered_ranks(zset: &ZSetValue, selector: &Selector) -> (usize, usize) {
    let first = zset.partition_point(|entry| selector.before_start(entry));
    let end = zset.partition_point(|entry| selector.before_end(entry));
    (first, end.max(first))
}

/// The entries a range selects, in reply order: by rank, or by score or lex
/// with an offset and a count (negative: all).
fn select<'a>(
    zset: &'a ZSetValue,
    selector: &Selector,
    reverse: bool,
    offset: i64,
    limit: i64,
) -> Vec<&'a Entry> {
    let length = zset.len();
    if let Selector::Rank(start, stop) = selector {
        let Some((first, last)) = resolve_ranks(*start, *stop, length) else {
            return Vec::new();
        };
        let count = last - first + 1;
        return if reverse {
            zset.iter_from(length - 1 - first, true)
                .take(count)
                .collect()
        } else {
            zset.iter_from(first, false).take(count).collect()
        };
    }
    // As Redis: a negative offset, or one at or past the size, selects nothing.
    let Ok(offset) = usize::try_from(offset) else {
        return Vec::new();
    };
    if offset > 0 && offset >= length {
        return Vec::new();
    }
    let limit = usize::try_from(limit).unwrap_or(usize::MAX);
    if reverse {
        let end = zset.partition_point(|entry| selector.before_end(entry));
        let Some(start) = end.checked_sub(1 + offset) else {
            return Vec::new();
        };
        zset.iter_from(start, true)
            .take_while(|entry| !selector.before_start(entry))
            .take(limit)
            .collect()
    } else {
        let first = zset.partition_point(|entry| selector.before_start(entry));
        zset.iter_from(first.saturating_add(offset), false)
            .take_while(|entry| selector.before_end(entry))
            .take(limit)
            .collect()
    }
}

// ---- ZADD, ZINCRBY ------------------------------------------------------------------

fn zadd_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    mut incr: bool,
) -> Frame {
    let (mut nx, mut xx, mut gt, mut lt, mut ch) = (false, false, false, false, false);
    let mut score_index = 2;
    while let Some(option) = arguments.get(score_index) {
        let flag = if args::is_keyword(option, "NX") {
            &mut nx
        } else if args::is_keyword(option, "XX") {
            &mut xx
        } else if args::is_keyword(option, "CH") {
            &mut ch
        } else if args::is_keyword(option, "INCR") {
            &mut incr
        } else if args::is_keyword(option, "GT") {
            &mut gt
        } else if args::is_keyword(option, "LT") {
            &mut lt
        } else {
            break;
        };
        *flag = true;
        score_index += 1;
    }
    let pairs = &arguments[score_index..];
    if pairs.is_empty() || !pairs.len().is_multiple_of(2) {
        return Frame::error(errors::SYNTAX);
    }
    if nx && xx {
        return Frame::error(NX_AND_XX);
    }
    if (nx && (gt || lt)) || (gt && lt) {
        return Frame::error(GT_LT_NX);
    }
    let pair_count = pairs.len() / 2;
    if incr && pair_count > 1 {
        return Frame::error(INCR_SINGLE_PAIR);
    }
    // Every score is parsed before anything changes: all or nothing.
    let mut scores = Vec::with_capacity(pair_count);
    for pair in pairs.chunks_exact(2) {
        match parse_score(&pair[0]) {
            Ok(score) => scores.push(score),
            Err(error) => return error,
        }
    }
    let key = &arguments[1];
    let created = match write_zset(keyspace, context, key) {
        Err(error) => return error,
        Ok(Some(zset)) => {
            zset.maybe_convert(pair_count);
            false
        }
        Ok(None) if xx => {
            return if incr { Frame::Null } else { Frame::Integer(0) };
        }
        Ok(None) => {
            let zset = ZSetValue::with_hint(pair_count, pairs[1].len());
            let access = keyspace.initial_access(context);
            keyspace
                .db(context.db)
                .set(key, Value::ZSet(zset), None, access);
            true
        }
    };
    let Ok(Some(zset)) = write_zset(keyspace, context, key) else {
        return Frame::error(errors::WRONGTYPE);
    };
    let (mut added, mut updated, mut processed) = (0usize, 0usize, 0usize);
    let mut last_score = 0.0;
    for (pair, &score) in pairs.chunks_exact(2).zip(&scores) {
        let member = &pair[1];
        match zset.score(member) {
            Some(_) if nx => {}
            Some(current) => {
                let new_score = if incr { current + score } else { score };
                if new_score.is_nan() {
                    return Frame::error(NAN_RESULT);
                }
                if (lt && new_score >= current) || (gt && new_score <= current) {
                    continue;
                }
                processed += 1;
                last_score = new_score;
                if zset.set(member, new_score) == Change::Updated {
                    updated += 1;
                }
            }
            None if xx => {}
            None => {
                zset.set(member, score);
                added += 1;
                processed += 1;
                last_score = score;
            }
        }
    }
    keyspace.stats.dirty += (added + updated) as u64;
    if added > 0 || created {
        keyspace.signal_ready(context.db, key);
    }
    if incr {
        if processed > 0 {
            score_frame(last_score)
        } else {
            Frame::Null
        }
    } else {
        Frame::Integer((if ch { added + updated } else { added }) as i64)
    }
}

fn zadd(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    zadd_generic(keyspace, context, arguments, false)
}

fn zincrby(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    zadd_generic(keyspace, context, arguments, true)
}

// ---- ZREM, ZCARD, ZSCORE, ZMSCORE, ZRANK --------------------------------------------

fn zrem(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let key = &arguments[1];
    let (removed, emptied) = match write_zset(keyspace, context, key) {
        Err(error) => return error,
        Ok(None) => return Frame::Integer(0),
        Ok(Some(zset)) => {
            let mut removed = 0;
            for member in &arguments[2..] {
                if zset.remove(member).is_some() {
                    removed += 1;
                }
                if zset.is_empty() {
                    break;
                }
            }
            (removed, zset.is_empty())
        }
    };
    finish_removal(keyspace, context, key, removed, emptied);
    Frame::Integer(removed as i64)
}

fn zcard(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_zset(keyspace, context, &arguments[1]) {
        Ok(Some(zset)) => Frame::Integer(zset.len() as i64),
        Ok(None) => Frame::Integer(0),
        Err(error) => error,
    }
}

fn zscore(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    match read_zset(keyspace, context, &arguments[1]) {
        Ok(Some(zset)) => zset.score(&arguments[2]).map_or(Frame::Null, score_frame),
        Ok(None) => Frame::Null,
        Err(error) => error,
    }
}

fn zmscore(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let zset = match read_zset(keyspace, context, &arguments[1]) {
        Ok(zset) => zset,
        Err(error) => return error,
    };
    Frame::Array(
        arguments[2..]
            .iter()
            .map(|member| {
                zset.as_ref()
                    .and_then(|zset| zset.score(member))
                    .map_or(Frame::Null, score_frame)
            })
            .collect(),
    )
}

fn rank_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    reverse: bool,
) -> Frame {
    if arguments.len() > 4 {
        return Frame::error_owned(errors::wrong_arity(if reverse {
            "zrevrank"
        } else {
            "zrank"
        }));
    }
    let with_score = match arguments.get(3) {
        Some(option) if args::is_keyword(option, "WITHSCORE") => true,
        Some(_) => return Frame::error(errors::SYNTAX),
        None => false,
    };
    let missing = if with_score {
        Frame::NullArray
    } else {
        Frame::Null
    };
    let zset = match read_zset(keyspace, context, &arguments[1]) {
        Ok(Some(zset)) => zset,
        Ok(None) => return missing,
        Err(error) => return error,
    };
    let Some((rank, score)) = zset.rank(&arguments[2]) else {
        return missing;
    };
    let rank = if reverse { zset.len() - 1 - rank } else { rank };
    if with_score {
        Frame::Array(vec![Frame::Integer(rank as i64), score_frame(score)])
    } else {
        Frame::Integer(rank as i64)
    }
}

fn zrank(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    rank_generic(keyspace, context, arguments, false)
}

fn zrevrank(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    rank_generic(keyspace, context, arguments, true)
}

// ---- ZRANGE and friends ---------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RangeKind {
    Auto,
    Rank,
    Score,
    Lex,
}

/// ZRANGE, ZRANGESTORE and the older Z[REV]RANGE[BYSCORE|BYLEX] forms. The
/// source key is at `source_index`; `destination` is set for ZRANGESTORE.
/// `kind` and `reverse` are fixed by the older forms (`Auto`/`None` let the
/// options choose).
fn range_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    source_index: usize,
    destination: Option<&Bytes>,
    mut kind: RangeKind,
    mut reverse: Option<bool>,
) -> Frame {
    let store = destination.is_some();
    let mut with_scores = false;
    let (mut offset, mut limit) = (0i64, -1i64);
    let mut index = source_index + 3;
    while index < arguments.len() {
        let option = &arguments[index];
        let left = arguments.len() - index - 1;
        if !store && args::is_keyword(option, "WITHSCORES") {
            with_scores = true;
        } else if args::is_keyword(option, "LIMIT") && left >= 2 {
            match (
                args::parse_i64(&arguments[index + 1]),
                args::parse_i64(&arguments[index + 2]),
            ) {
                (Ok(first), Ok(second)) => (offset, limit) = (first, second),
                (Err(error), _) | (_, Err(error)) => return error,
            }
            index += 2;
        } else if reverse.is_none() && args::is_keyword(option, "REV") {
            reverse = Some(true);
        } else if kind == RangeKind::Auto && args::is_keyword(option, "BYLEX") {
            kind = RangeKind::Lex;
        } else if kind == RangeKind::Auto && args::is_keyword(option, "BYSCORE") {
            kind = RangeKind::Score;
        } else {
            return Frame::error(errors::SYNTAX);
        }
        index += 1;
    }
    let reverse = reverse.unwrap_or(false);
    if kind == RangeKind::Auto {
        kind = RangeKind::Rank;
    }
    // As Redis: only a count other than -1 counts as a LIMIT here.
    if limit != -1 && kind == RangeKind::Rank {
        return Frame::error(LIMIT_NEEDS_BY);
    }
    if with_scores && kind == RangeKind::Lex {
        return Frame::error(WITHSCORES_AND_BYLEX);
    }
    let (mut min_index, mut max_index) = (source_index + 1, source_index + 2);
    if reverse && kind != RangeKind::Rank {
        // The reverse forms take the range as max, min.
        std::mem::swap(&mut min_index, &mut max_index);
    }
    let selector = match kind {
        RangeKind::Score => match ScoreRange::parse(&arguments[min_index], &arguments[max_index]) {
            Ok(range) => Selector::Score(range),
            Err(error) => return error,
        },
        RangeKind::Lex => match LexRange::parse(&arguments[min_index], &arguments[max_index]) {
            Ok(range) => Selector::Lex(range),
            Err(error) => return error,
        },
        _ => match (
            args::parse_i64(&arguments[min_index]),
            args::parse_i64(&arguments[max_index]),
        ) {
            (Ok(start), Ok(stop)) => Selector::Rank(start, stop),
            (Err(error), _) | (_, Err(error)) => return error,
        },
    };
    let protocol = context.protocol;
    let zset = match read_zset(keyspace, context, &arguments[source_index]) {
        Err(error) => return error,
        Ok(zset) => zset,
    };
    let selected = zset
        .as_deref()
        .map(|zset| select(zset, &selector, reverse, offset, limit))
        .unwrap_or_default();
    match destination {
        Some(destination) => {
            let entries: Vec<Entry> = selected
                .into_iter()
                .map(|entry| Entry::new(entry.score, entry.member()))
                .collect();
            store_result(keyspace, context, destination, entries)
        }
        None => entries_reply(
            selected
                .into_iter()
                .map(|entry| (entry.member(), entry.score)),
            with_scores,
            protocol,
        ),
    }
}

fn zrange(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    range_generic(keyspace, context, arguments, 1, None, RangeKind::Auto, None)
}

fn zrangestore(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let destination = arguments[1].clone();
    range_generic(
        keyspace,
        context,
        arguments,
        2,
        Some(&destination),
        RangeKind::Auto,
        None,
    )
}

fn zrevrange(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    range_generic(
        keyspace,
        context,
        arguments,
        1,
        None,
        RangeKind::Rank,
        Some(true),
    )
}

fn zrangebyscore(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    range_generic(
        keyspace,
        context,
        arguments,
        1,
        None,
        RangeKind::Score,
        Some(false),
    )
}

fn zrevrangebyscore(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    range_generic(
        keyspace,
        context,
        arguments,
        1,
        None,
        RangeKind::Score,
        Some(true),
    )
}

fn zrangebylex(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    range_generic(
        keyspace,
        context,
        arguments,
        1,
        None,
        RangeKind::Lex,
        Some(false),
    )
}

fn zrevrangebylex(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    range_generic(
        keyspace,
        context,
        arguments,
        1,
        None,
        RangeKind::Lex,
        Some(true),
    )
}

fn count_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    selector: Result<Selector, Frame>,
) -> Frame {
    let selector = match selector {
        Ok(selector) => selector,
        Err(error) => return error,
    };
    match read_zset(keyspace, context, &arguments[1]) {
        Ok(Some(zset)) => {
            let (first, end) = covered_ranks(zset, &selector);
            Frame::Integer((end - first) as i64)
        }
        Ok(None) => Frame::Integer(0),
        Err(error) => error,
    }
}

fn zcount(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let selector = ScoreRange::parse(&arguments[2], &arguments[3]).map(Selector::Score);
    count_generic(keyspace, context, arguments, selector)
}

fn zlexcount(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let selector = LexRange::parse(&arguments[2], &arguments[3]).map(Selector::Lex);
    count_generic(keyspace, context, arguments, selector)
}

// ---- ZREMRANGEBY* -----------------------------------------------------------------------

fn remove_range_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    selector: Result<Selector, Frame>,
) -> Frame {
    let selector = match selector {
        Ok(selector) => selector,
        Err(error) => return error,
    };
    let key = &arguments[1];
    let (removed, emptied) = match write_zset(keyspace, context, key) {
        Err(error) => return error,
        Ok(None) => return Frame::Integer(0),
        Ok(Some(zset)) => {
            let (first, end) = match selector {
                Selector::Rank(start, stop) => match resolve_ranks(start, stop, zset.len()) {
                    Some((first, last)) => (first, last + 1),
                    None => return Frame::Integer(0),
                },
                _ => covered_ranks(zset, &selector),
            };
            let removed = zset.remove_ranks(first, end);
            (removed, zset.is_empty())
        }
    };
    finish_removal(keyspace, context, key, removed, emptied);
    Frame::Integer(removed as i64)
}

fn zremrangebyrank(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let selector = match (
        args::parse_i64(&arguments[2]),
        args::parse_i64(&arguments[3]),
    ) {
        (Ok(start), Ok(stop)) => Ok(Selector::Rank(start, stop)),
        (Err(error), _) | (_, Err(error)) => Err(error),
    };
    remove_range_generic(keyspace, context, arguments, selector)
}

fn zremrangebyscore(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let selector = ScoreRange::parse(&arguments[2], &arguments[3]).map(Selector::Score);
    remove_range_generic(keyspace, context, arguments, selector)
}

fn zremrangebylex(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let selector = LexRange::parse(&arguments[2], &arguments[3]).map(Selector::Lex);
    remove_range_generic(keyspace, context, arguments, selector)
}

// ---- Pops ----------------------------------------------------------------------------------

/// Pops up to `count` entries from the first existing sorted set among `keys`
/// (WRONGTYPE when that key holds another type): the key and the entries, or
/// None when every key is absent.
#[allow(clippy::type_complexity)]
fn pop_first_of(
    keyspace: &mut Keyspace,
    context: &mut Context,
    keys: &[Bytes],
    highest: bool,
    count: usize,
) -> Result<Option<(Bytes, Vec<(Bytes, f64)>)>, Frame> {
    for key in keys {
        let (popped, emptied) = match write_zset(keyspace, context, key)? {
            None => continue,
            Some(zset) => {
                let mut popped = Vec::new();
                while popped.len() < count {
                    let Some(entry) = zset.pop(highest) else {
                        break;
                    };
                    let score = entry.score;
                    popped.push((entry.into_member(), score));
                }
                (popped, zset.is_empty())
            }
        };
        finish_removal(keyspace, context, key, popped.len(), emptied);
        return Ok(Some((key.clone(), popped)));
    }
    Ok(None)
}

/// ZPOPMIN / ZPOPMAX: without a count, a flat `[member, score]`; with one, up
/// to count pairs, nested in RESP3. An absent key gives an empty array.
fn pop_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    highest: bool,
) -> Frame {
    if arguments.len() > 3 {
        return Frame::error(errors::SYNTAX);
    }
    let count = match arguments.get(2) {
        Some(argument) => match parse_non_negative(argument, NOT_POSITIVE) {
            Ok(count) => Some(count),
            Err(error) => return error,
        },
        None => None,
    };
    let nested = count.is_some() && context.protocol != Protocol::Resp2;
    if count == Some(0) {
        // Still checks the type, as Redis does before looking at the count.
        return match write_zset(keyspace, context, &arguments[1]) {
            Err(error) => error,
            Ok(_) => Frame::Array(Vec::new()),
        };
    }
    match pop_first_of(
        keyspace,
        context,
        &arguments[1..2],
        highest,
        count.unwrap_or(1),
    ) {
        Err(error) => error,
        Ok(None) => Frame::Array(Vec::new()),
        Ok(Some((_, popped))) => Frame::Array(popped_reply(&popped, nested)),
    }
}

fn zpopmin(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    pop_generic(keyspace, context, arguments, false)
}

fn zpopmax(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    pop_generic(keyspace, context, arguments, true)
}

/// BZPOPMIN / BZPOPMAX: `[key, member, score]` from the first non-empty set,
/// else the timeout reply and a recorded block.
fn blocking_pop(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    highest: bool,
) -> Frame {
    let (keys, timeout) = arguments[1..].split_at(arguments.len() - 2);
    let timeout_ms = match parse_timeout(&timeout[0], context.now_ms) {
        Ok(timeout_ms) => timeout_ms,
        Err(error) => return error,
    };
    match pop_first_of(keyspace, context, keys, highest, 1) {
        Err(error) => error,
        Ok(Some((key, popped))) => {
            let mut items = vec![Frame::Bulk(key)];
            items.extend(popped_reply(&popped, false));
            Frame::Array(items)
        }
        Ok(None) => {
            block_on(context, keys, timeout_ms);
            Frame::NullArray
        }
    }
}

fn bzpopmin(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    blocking_pop(keyspace, context, arguments, false)
}

fn bzpopmax(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    blocking_pop(keyspace, context, arguments, true)
}

/// ZMPOP / BZMPOP arguments after the numkeys position.
struct MultiPop<'a> {
    keys: &'a [Bytes],
    highest: bool,
    count: usize,
}

fn parse_multi_pop(arguments: &[Bytes], numkeys_index: usize) -> Result<MultiPop<'_>, Frame> {
    let numkeys = parse_positive(&arguments[numkeys_index], NUMKEYS_NOT_POSITIVE)?;
    let where_index = numkeys
        .checked_add(numkeys_index + 1)
        .filter(|&index| index < arguments.len())
        .ok_or_else(|| Frame::error(errors::SYNTAX))?;
    let highest = if args::is_keyword(&arguments[where_index], "MIN") {
        false
    } else if args::is_keyword(&arguments[where_index], "MAX") {
        true
    } else {
        return Err(Frame::error(errors::SYNTAX));
    };
    let mut count = None;
    let mut index = where_index + 1;
    while let Some(option) = arguments.get(index) {
        match arguments.get(index + 1) {
            Some(value) if count.is_none() && args::is_keyword(option, "COUNT") => {
                count = Some(parse_positive(value, COUNT_NOT_POSITIVE)?);
                index += 2;
            }
            _ => return Err(Frame::error(errors::SYNTAX)),
        }
    }
    Ok(MultiPop {
        keys: &arguments[numkeys_index + 1..where_index],
        highest,
        count: count.unwrap_or(1),
    })
}

fn multi_pop_reply(key: Bytes, popped: &[(Bytes, f64)]) -> Frame {
    Frame::Array(vec![
        Frame::Bulk(key),
        Frame::Array(popped_reply(popped, true)),
    ])
}

fn zmpop(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let request = match parse_multi_pop(arguments, 1) {
        Ok(request) => request,
        Err(error) => return error,
    };
    match pop_first_of(
        keyspace,
        context,
        request.keys,
        request.highest,
        request.count,
    ) {
        Err(error) => error,
        Ok(Some((key, popped))) => multi_pop_reply(key, &popped),
        Ok(None) => Frame::NullArray,
    }
}

fn bzmpop(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    // As Redis: numkeys, direction and count are checked before the timeout.
    let request = match parse_multi_pop(arguments, 2) {
        Ok(request) => request,
        Err(error) => return error,
    };
    let timeout_ms = match parse_timeout(&arguments[1], context.now_ms) {
        Ok(timeout_ms) => timeout_ms,
        Err(error) => return error,
    };
    match pop_first_of(
        keyspace,
        context,
        request.keys,
        request.highest,
        request.count,
    ) {
        Err(error) => error,
        Ok(Some((key, popped))) => multi_pop_reply(key, &popped),
        Ok(None) => {
            block_on(context, request.keys, timeout_ms);
            Frame::NullArray
        }
    }
}

// ---- ZUNION, ZINTER, ZDIFF and their STORE forms, ZINTERCARD ---------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SetOperation {
    Union,
    Inter,
    Diff,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Aggregate {
    Sum,
    Min,
    Max,
}

impl Aggregate {
    fn apply(self, target: &mut f64, value: f64) {
        match self {
            Aggregate::Sum => {
                *target += value;
                // inf + -inf is taken as 0, as Redis does.
                if target.is_nan() {
                    *target = 0.0;
                }
            }
            Aggregate::Min => {
                if value < *target {
                    *target = value;
                }
            }
            Aggregate::Max => {
                if value > *target {
                    *target = value;
                }
            }
        }
    }
}

/// An input of a set operation: a sorted set, or nothing for an absent key.
/// (A plain set will join here, each member with score 1, once that type
/// exists.)
struct Source<'a> {
    zset: Option<&'a ZSetValue>,
    weight: f64,
}

impl Source<'_> {
    fn len(&self) -> usize {
        self.zset.map_or(0, ZSetValue::len)
    }

    fn score(&self, member: &[u8]) -> Option<f64> {
        self.zset.and_then(|zset| zset.score(member))
    }

    fn entries(&self) -> impl Iterator<Item = &Entry> + '_ {
        self.zset.into_iter().flat_map(|zset| zset.iter())
    }
}

/// The options after the keys.
struct SetOptions {
    weights: Vec<f64>,
    aggregate: Aggregate,
    with_scores: bool,
    limit: usize,
}

fn parse_set_options(
    options: &[Bytes],
    key_count: usize,
    operation: SetOperation,
    store: bool,
    cardinality_only: bool,
) -> Result<SetOptions, Frame> {
    let mut parsed = SetOptions {
        weights: vec![1.0; key_count],
        aggregate: Aggregate::Sum,
        with_scores: false,
        limit: 0,
    };
    let weighted = operation != SetOperation::Diff && !cardinality_only;
    let mut index = 0;
    while let Some(option) = options.get(index) {
        let remaining = options.len() - index;
        if weighted && remaining > key_count && args::is_keyword(option, "WEIGHTS") {
            for (slot, weight) in parsed
                .weights
                .iter_mut()
                .zip(&options[index + 1..=index + key_count])
            {
                *slot = parse_strict_float(weight).ok_or_else(|| Frame::error(WEIGHT_NOT_FLOAT))?;
            }
            index += key_count + 1;
        } else if weighted && remaining >= 2 && args::is_keyword(option, "AGGREGATE") {
            let value = &options[index + 1];
            parsed.aggregate = if args::is_keyword(value, "SUM") {
                Aggregate::Sum
            } else if args::is_keyword(value, "MIN") {
                Aggregate::Min
            } else if args::is_keyword(value, "MAX") {
                Aggregate::Max
            } else {
                return Err(Frame::error(errors::SYNTAX));
            };
            index += 2;
        } else if !store && !cardinality_only && args::is_keyword(option, "WITHSCORES") {
            parsed.with_scores = true;
            index += 1;
        } else if cardinality_only && remaining >= 2 && args::is_keyword(option, "LIMIT") {
            parsed.limit = crate::value::canonical_i64(&options[index + 1])
                .and_then(|limit| usize::try_from(limit).ok())
                .ok_or_else(|| Frame::error(LIMIT_NEGATIVE))?;
            index += 2;
        } else {
            return Err(Frame::error(errors::SYNTAX));
        }
    }
    Ok(parsed)
}

/// Weighted score, with NaN (0 * inf) taken as 0 as Redis does.
fn weighted(score: f64, weight: f64) -> f64 {
    let value = score * weight;
    if value.is_nan() {
        0.0
    } else {
        value
    }
}

/// The members of the intersection with their aggregated scores (or just how
/// many, up to `limit` when non-zero, when `count_only`).
fn intersect(
    sources: &[Source<'_>],
    aggregate: Aggregate,
    count_only: bool,
    limit: usize,
) -> (Vec<Entry>, usize) {
    let mut result = Vec::new();
    let mut count = 0;
    let Some((smallest, others)) = sources.split_first() else {
        return (result, 0);
    };
    'members: for entry in smallest.entries() {
        let mut score = weighted(entry.score, smallest.weight);
        for other in others {
            let Some(found) = other.score(entry.member()) else {
                continue 'members;
            };
            aggregate.apply(&mut score, weighted(found, other.weight));
        }
        count += 1;
        if count_only {
            if limit != 0 && count >= limit {
                break;
            }
        } else {
            result.push(Entry::new(score, entry.member()));
        }
    }
    (result, count)
}

fn unite(sources: &[Source<'_>], aggregate: Aggregate) -> Vec<Entry> {
    let mut accumulated: BTreeMap<&[u8], f64> = BTreeMap::new();
    for source in sources {
        for entry in source.entries() {
            let score = weighted(entry.score, source.weight);
            accumulated
                .entry(entry.member())
                .and_modify(|total| aggregate.apply(total, score))
                .or_insert(score);
        }
    }
    accumulated
        .into_iter()
        .map(|(member, score)| Entry::new(score, member))
        .collect()
}

fn subtract(sources: &[Source<'_>]) -> Vec<Entry> {
    let Some((first, others)) = sources.split_first() else {
        return Vec::new();
    };
    first
        .entries()
        .filter(|entry| {
            others
                .iter()
                .all(|other| other.score(entry.member()).is_none())
        })
        .map(|entry| Entry::new(entry.score, entry.member()))
        .collect()
}

/// The whole family: `numkeys` at `numkeys_index`, the keys after it, then the
/// options; `destination` for the STORE forms.
fn set_operation_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    numkeys_index: usize,
    destination: Option<&Bytes>,
    operation: SetOperation,
    cardinality_only: bool,
) -> Frame {
    let key_count = match args::parse_i64(&arguments[numkeys_index]) {
        Ok(count) => count,
        Err(error) => return error,
    };
    if key_count < 1 {
        let name = String::from_utf8_lossy(&arguments[0]).to_ascii_lowercase();
        return Frame::error_owned(format!(
            "ERR at least 1 input key is needed for '{name}' command"
        ));
    }
    let first_key = numkeys_index + 1;
    let key_count = match usize::try_from(key_count) {
        Ok(count) if count <= arguments.len() - first_key => count,
        _ => return Frame::error(errors::SYNTAX),
    };
    let keys = &arguments[first_key..first_key + key_count];
    // As Redis: every key is looked up (and its type checked) before the options.
    for key in keys {
        match keyspace.read(context, key) {
            Some(entry) if !entry.value.is_zset() => return Frame::error(errors::WRONGTYPE),
            _ => {}
        }
    }
    let options = match parse_set_options(
        &arguments[first_key + key_count..],
        key_count,
        operation,
        destination.is_some(),
        cardinality_only,
    ) {
        Ok(options) => options,
        Err(error) => return error,
    };
    let db = keyspace.db_ref(context.db);
    let mut sources: Vec<Source<'_>> = keys
        .iter()
        .zip(&options.weights)
        .map(|(key, &weight)| Source {
            zset: match db.peek(key, context.now_ms).map(|entry| &entry.value) {
                Some(Value::ZSet(zset)) => Some(zset),
                _ => None,
            },
            weight,
        })
        .collect();
    if operation != SetOperation::Diff {
        // Smallest first, as Redis orders them (a stable sort keeps ties in
        // argument order).
        sources.sort_by_key(Source::len);
    }
    let (entries, count) = match operation {
        SetOperation::Inter => {
            intersect(&sources, options.aggregate, cardinality_only, options.limit)
        }
        SetOperation::Union => (unite(&sources, options.aggregate), 0),
        SetOperation::Diff => (subtract(&sources), 0),
    };
    drop(sources);
    if cardinality_only {
        return Frame::Integer(count as i64);
    }
    if let Some(destination) = destination {
        return store_result(keyspace, context, destination, entries);
    }
    let mut entries = entries;
    entries.sort_by(|first, second| first.cmp_to(second.score, second.member()));
    entries_reply(
        entries.iter().map(|entry| (entry.member(), entry.score)),
        options.with_scores,
        context.protocol,
    )
}

fn zunion(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    set_operation_generic(
        keyspace,
        context,
        arguments,
        1,
        None,
        SetOperation::Union,
        false,
    )
}

fn zinter(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    set_operation_generic(
        keyspace,
        context,
        arguments,
        1,
        None,
        SetOperation::Inter,
        false,
    )
}

fn zdiff(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    set_operation_generic(
        keyspace,
        context,
        arguments,
        1,
        None,
        SetOperation::Diff,
        false,
    )
}

fn zintercard(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    set_operation_generic(
        keyspace,
        context,
        arguments,
        1,
        None,
        SetOperation::Inter,
        true,
    )
}

fn store_generic(
    keyspace: &mut Keyspace,
    context: &mut Context,
    arguments: &[Bytes],
    operation: SetOperation,
) -> Frame {
    let destination = arguments[1].clone();
    set_operation_generic(
        keyspace,
        context,
        arguments,
        2,
        Some(&destination),
        operation,
        false,
    )
}

fn zunionstore(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    store_generic(keyspace, context, arguments, SetOperation::Union)
}

fn zinterstore(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    store_generic(keyspace, context, arguments, SetOperation::Inter)
}

fn zdiffstore(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    store_generic(keyspace, context, arguments, SetOperation::Diff)
}

// ---- ZRANDMEMBER ---------------------------------------------------------------------------

fn zrandmember(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let Some(count_argument) = arguments.get(2) else {
        return match read_zset(keyspace, context, &arguments[1]) {
            Ok(Some(zset)) => zset
                .random(&mut context.rng)
                .map_or(Frame::Null, |entry| Frame::bulk_from_slice(entry.member())),
            Ok(None) => Frame::Null,
            Err(error) => error,
        };
    };
    let count = match args::parse_i64(count_argument) {
        Ok(i64::MIN) => return Frame::error(COUNT_RANGE),
        Ok(count) => count,
        Err(error) => return error,
    };
    let with_scores = match arguments.get(3) {
        _ if arguments.len() > 4 => return Frame::error(errors::SYNTAX),
        Some(option) if args::is_keyword(option, "WITHSCORES") => true,
        Some(_) => return Frame::error(errors::SYNTAX),
        None => false,
    };
    if with_scores && !(-i64::MAX / 2..=i64::MAX / 2).contains(&count) {
        return Frame::error(OUT_OF_RANGE);
    }
    if count < 0 && count.unsigned_abs() > MAX_RANDOM_MEMBERS {
        return Frame::error(OUT_OF_RANGE);
    }
    let zset = match read_zset(keyspace, context, &arguments[1]) {
        Ok(Some(zset)) => zset,
        Ok(None) => return Frame::Array(Vec::new()),
        Err(error) => return error,
    };
    let picked = random_members(zset, count, &mut context.rng);
    entries_reply(
        picked
            .into_iter()
            .map(|entry| (entry.member(), entry.score)),
        with_scores,
        context.protocol,
    )
}

/// ZRANDMEMBER's picks for a count: a negative count picks that many with
/// repetition; a count of at least the size answers the whole set (in
/// descending order, as Redis walks it); a smaller one picks distinct members,
/// in ascending order for a listpack and in the order drawn otherwise.
fn random_members<'a>(zset: &'a ZSetValue, count: i64, rng: &mut crate::Rng) -> Vec<&'a Entry> {
    let length = zset.len();
    if count == 0 || length == 0 {
        return Vec::new();
    }
    if count < 0 || count == 1 {
        let draws = count.unsigned_abs();
        return (0..draws).filter_map(|_| zset.random(rng)).collect();
    }
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    if count >= length {
        return zset.iter_from(length - 1, true).collect();
    }
    // Floyd's sampling: `count` distinct ranks in `count` draws.
    let mut chosen = BTreeSet::new();
    let mut order = Vec::with_capacity(count);
    for upper in length - count..length {
        let pick = rng.below(upper as u64 + 1) as usize;
        let rank = if chosen.insert(pick) {
            pick
        } else {
            chosen.insert(upper);
            upper
        };
        order.push(rank);
    }
    if !zset.is_skiplist() {
        order.sort_unstable();
    }
    order
        .into_iter()
        .filter_map(|rank| zset.get(rank))
        .collect()
}

// ---- ZSCAN ---------------------------------------------------------------------------------

fn zscan(keyspace: &mut Keyspace, context: &mut Context, arguments: &[Bytes]) -> Frame {
    let Some(cursor) = parse_cursor(&arguments[2]) else {
        return Frame::error(errors::CURSOR_INVALID);
    };
    let empty = || {
        Frame::Array(vec![
            Frame::Bulk(Bytes::from_static(b"0")),
            Frame::Array(Vec::new()),
        ])
    };
    let zset = match read_zset(keyspace, context, &arguments[1]) {
        Ok(Some(zset)) => zset,
        Ok(None) => return empty(),
        Err(error) => return error,
    };
    let mut count: i64 = 10;
    let mut pattern: Option<&[u8]> = None;
    let mut index = 3;
    while index < arguments.len() {
        let option = &arguments[index];
        let has_value = arguments.len() - index >= 2;
        if args::is_keyword(option, "COUNT") && has_value {
            count = match args::parse_i64(&arguments[index + 1]) {
                Ok(count) => count,
                Err(error) => return error,
            };
            if count < 1 {
                return Frame::error(errors::SYNTAX);
            }
        } else if args::is_keyword(option, "MATCH") && has_value {
            let text = arguments[index + 1].as_ref();
            pattern = (text != b"*").then_some(text);
        } else {
            return Frame::error(errors::SYNTAX);
        }
        index += 2;
    }
    let mut items = Vec::new();
    let next = zset.scan(
        cursor,
        usize::try_from(count).unwrap_or(usize::MAX),
        |member, score| {
            if pattern.is_none_or(|pattern| glob_match(pattern, member, false)) {
                items.push(Frame::bulk_from_slice(member));
                items.push(Frame::Bulk(Bytes::from(resp::format_double(score))));
            }
        },
    );
    Frame::Array(vec![
        Frame::Bulk(Bytes::from(next.to_string())),
        Frame::Array(items),
    ])
}
